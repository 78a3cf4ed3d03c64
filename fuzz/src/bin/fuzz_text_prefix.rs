//! AFL++ entry point of the `text_prefix` target ([`switchyard_fuzz::targets::text_prefix`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::text_prefix::run(data);
    });
}
