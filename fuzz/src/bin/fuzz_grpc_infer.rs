//! AFL++ entry point of the `grpc_infer` target ([`switchyard_fuzz::targets::grpc_infer`]).
//! Built by `make fuzz` / `make fuzz-quick` with `cargo afl build --features afl`.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        switchyard_fuzz::targets::grpc_infer::run(data);
    });
}
