//! AFL++ entry point of the `v2_json` target ([`switchyard_fuzz::targets::v2_json`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::v2_json::run(data);
    });
}
