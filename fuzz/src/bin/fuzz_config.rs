//! AFL++ entry point of the `config` target ([`switchyard_fuzz::targets::config`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::config::run(data);
    });
}
