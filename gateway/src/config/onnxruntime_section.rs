//! `[onnxruntime]`: where the ONNX Runtime shared library is. Absent,
//! the library comes from `ORT_DYLIB_PATH` or the set-up's cache folder.

use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `[onnxruntime]`
#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RawOnnxRuntime {
    /// Path to `libonnxruntime.so`; default from `ORT_DYLIB_PATH` or the
    /// set-up's cache folder.
    pub library: Option<String>,
}

/// The configured library path, relative paths starting at `base_dir`
/// (the config file's folder); `None` = not configured.
pub fn check(raw: &RawOnnxRuntime, base_dir: &Path) -> Option<PathBuf> {
    raw.library.as_deref().map(|p| base_dir.join(p))
}
