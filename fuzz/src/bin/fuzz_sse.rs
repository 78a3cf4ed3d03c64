//! AFL++ entry point of the `sse` target ([`switchyard_fuzz::targets::sse`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::sse::run(data);
    });
}
