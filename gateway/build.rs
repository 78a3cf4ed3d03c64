//! Compiles the gRPC service (`proto/grpc_service.proto`, which imports
//! the Triton model configuration from `runtime/store/proto`) with `protox`
//! (pure Rust: no `protoc` needed) and generates its Rust types and server
//! trait with `tonic-prost-build`; `src/grpc/proto.rs` includes them. The
//! descriptor set is written beside them for `prost-reflect`.
//!
//! It also places the console's charting library (uPlot, from npm: see
//! `console/package.json`, installed by `scripts/setup.sh`) in `OUT_DIR`
//! for `src/admin/console.rs` to embed; without it the console still
//! serves, with tables and no charts, and the build says so.

fn main() {
    let protos = ["proto/grpc_service.proto", "../runtime/store/proto/triton_model_config.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = match protox::compile(["grpc_service.proto"], ["proto", "../runtime/store/proto"]) {
        Ok(set) => set,
        Err(e) => fail(&format!("compiling the gRPC protocol: {e}")),
    };
    // The descriptors also go into the binary: the gRPC `ModelConfig` is read
    // from the same JSON the REST `/config` endpoint sends (src/grpc/metadata.rs).
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into()));
    if let Err(e) = std::fs::write(out.join("grpc_service.bin"), prost::Message::encode_to_vec(&descriptors))
    {
        fail(&format!("writing the descriptor set: {e}"));
    }
    embed_chart_library(&out);
    let generated = tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        // Every message is counted on the wire before prost decodes it.
        .codec_path("crate::grpc::codec::BoundedCodec")
        .bytes(".inference.ModelInferRequest.raw_input_contents")
        .bytes(".inference.ModelInferResponse.raw_output_contents")
        .bytes(".inference.InferTensorContents.bytes_contents")
        .compile_fds(descriptors);
    if let Err(e) = generated {
        fail(&format!("generating the gRPC code: {e}"));
    }
}

/// Copies uPlot's script, style sheet and licence into `out` (empty files
/// when `npm ci` has not run in `console/`).
fn embed_chart_library(out: &std::path::Path) {
    // The folder, not the files: a file that does not exist would rerun
    // this script on every build.
    println!("cargo:rerun-if-changed=console");
    let dist = std::path::Path::new("console/node_modules/uplot");
    let files = [
        ("dist/uPlot.iife.min.js", "uplot.js"),
        ("dist/uPlot.min.css", "uplot.css"),
        ("LICENSE", "uplot-license.txt"),
    ];
    let mut found = true;
    for (from, to) in files {
        let bytes = std::fs::read(dist.join(from)).unwrap_or_else(|_| {
            found = false;
            Vec::new()
        });
        if let Err(e) = std::fs::write(out.join(to), bytes) {
            fail(&format!("writing {to}: {e}"));
        }
    }
    if !found {
        println!("cargo:warning=the console is built without charts: run `scripts/setup.sh` (npm ci in gateway/console) and rebuild");
    }
}

/// Stops the build with a message (build scripts report errors by exit code).
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
