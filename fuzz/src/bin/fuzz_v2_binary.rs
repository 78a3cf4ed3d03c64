//! AFL++ entry point of the `v2_binary` target ([`switchyard_fuzz::targets::v2_binary`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::v2_binary::run(data);
    });
}
