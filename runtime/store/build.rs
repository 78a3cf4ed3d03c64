//! Compiles the Triton model-configuration schema
//! (`proto/triton_model_config.proto`) into a binary descriptor set with
//! `protox` (pure Rust: no `protoc` needed), which
//! `src/triton/schema.rs` embeds and reads with `prost-reflect`.

use std::path::PathBuf;

fn main() {
    let proto = "proto/triton_model_config.proto";
    println!("cargo:rerun-if-changed={proto}");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    let bytes = match protox::Compiler::new(["proto"]) {
        Ok(mut compiler) => match compiler.include_imports(true).open_file("triton_model_config.proto") {
            Ok(compiler) => compiler.encode_file_descriptor_set(),
            Err(e) => fail(&format!("{proto}: {e}")),
        },
        Err(e) => fail(&format!("protox: {e}")),
    };
    if let Err(e) = std::fs::write(out.join("triton_model_config.bin"), bytes) {
        fail(&format!("writing the descriptor set: {e}"));
    }
}

/// Stops the build with a message (build scripts report errors by exit code).
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
