//! One module per fuzz target; see the crate docs.

pub mod config;
pub mod grpc_infer;
pub mod sse;
pub mod text_prefix;
pub mod v2_binary;
pub mod v2_json;

/// Target names, as the corpus folders and `make fuzz` name them.
pub const ALL: [&str; 6] = ["v2_json", "v2_binary", "grpc_infer", "config", "sse", "text_prefix"];

/// Runs target `name` on `data`; false when there is no such target.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "v2_json" => v2_json::run(data),
        "v2_binary" => v2_binary::run(data),
        "grpc_infer" => grpc_infer::run(data),
        "config" => config::run(data),
        "sse" => sse::run(data),
        "text_prefix" => text_prefix::run(data),
        _ => return false,
    }
    true
}
