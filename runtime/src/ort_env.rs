//! Loading the ONNX Runtime shared library and the process-global ONNX
//! Runtime environment.
//!
//! Call [`init_onnxruntime`] once at start-up, before building a
//! [`crate::ModelRepository`] (which calls it with `None` if nobody did).
//! Loading happens once per process: later calls return the first library's
//! path and ignore their argument.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ort::environment::Environment;
use parking_lot::Mutex;

use crate::error::RuntimeError;

/// Environment variable naming the library (also read by `ort` itself).
pub const ORT_DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// Where the project's set-up puts the library, relative to the current
/// directory (the workspace root when run from there).
pub const DEFAULT_LIBRARY_PATH: &str = ".cache/onnxruntime/libonnxruntime.so.1.31.1";

struct Loaded {
    path: PathBuf,
    env: Environment,
}

static LOADED: Mutex<Option<Arc<Loaded>>> = Mutex::new(None);

/// Picks the library path: `explicit` first, then the non-empty value of
/// `env_value` (the `ORT_DYLIB_PATH` variable), then [`DEFAULT_LIBRARY_PATH`].
/// Relative paths are resolved against `cwd`. Pure, so it can be tested.
pub fn resolve_library_path(explicit: Option<&Path>, env_value: Option<&str>, cwd: &Path) -> PathBuf {
    let chosen = match (explicit, env_value.filter(|v| !v.is_empty())) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(v)) => PathBuf::from(v),
        (None, None) => PathBuf::from(DEFAULT_LIBRARY_PATH),
    };
    if chosen.is_absolute() {
        chosen
    } else {
        cwd.join(chosen)
    }
}

/// Checks that `path` names a readable regular file, before handing it to
/// the dynamic loader; the error says which path and why.
pub fn check_library_file(path: &Path) -> Result<(), RuntimeError> {
    let unavailable = |reason: String| RuntimeError::LibraryUnavailable { path: path.to_path_buf(), reason };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(unavailable("not a regular file".into())),
        Err(e) => Err(unavailable(format!(
            "{e} (set [onnxruntime] library or {ORT_DYLIB_ENV}; the set-up copies it to {DEFAULT_LIBRARY_PATH})"
        ))),
    }
}

/// Loads ONNX Runtime and creates the global environment.
///
/// The library is `library`, else `$ORT_DYLIB_PATH`, else
/// [`DEFAULT_LIBRARY_PATH`] (relative paths against the current directory).
/// Idempotent: once a library is loaded, returns its path whatever the
/// argument. A missing file, a file that is not a loadable library, or an
/// ONNX Runtime older than 1.31 gives `LibraryUnavailable`, never a panic.
pub fn init_onnxruntime(library: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    let mut slot = LOADED.lock();
    if let Some(loaded) = slot.as_ref() {
        return Ok(loaded.path.clone());
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let env_value = std::env::var(ORT_DYLIB_ENV).ok();
    let path = resolve_library_path(library, env_value.as_deref(), &cwd);
    check_library_file(&path)?;
    let path = path.canonicalize().unwrap_or(path);
    let env = load(&path)?;
    tracing::info!(path = %path.display(), "ONNX Runtime loaded");
    *slot = Some(Arc::new(Loaded { path: path.clone(), env }));
    Ok(path)
}

fn load(path: &Path) -> Result<Environment, RuntimeError> {
    let unavailable = |reason: String| RuntimeError::LibraryUnavailable { path: path.to_path_buf(), reason };
    // `ort` asserts on a few impossible-looking conditions of a foreign
    // library; a panic there must still become an error, not a crash.
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<Environment, String> {
        let builder = ort::init_from(path).map_err(|e| e.to_string())?;
        builder.with_name("switchyard").with_telemetry(false).build().map_err(|e| e.to_string())
    }));
    match result {
        Ok(Ok(env)) => Ok(env),
        Ok(Err(reason)) => Err(unavailable(reason)),
        Err(_) => Err(unavailable("ONNX Runtime panicked while loading".into())),
    }
}

/// The global environment, loading the library with the default resolution
/// if [`init_onnxruntime`] was not called yet.
pub(crate) fn environment() -> Result<Environment, RuntimeError> {
    if let Some(loaded) = LOADED.lock().as_ref() {
        return Ok(loaded.env.clone());
    }
    init_onnxruntime(None)?;
    LOADED.lock().as_ref().map(|l| l.env.clone()).ok_or_else(|| RuntimeError::LibraryUnavailable {
        path: PathBuf::from(DEFAULT_LIBRARY_PATH),
        reason: "not initialised".into(),
    })
}

/// The loaded library's path, if ONNX Runtime is initialised.
pub fn loaded_library() -> Option<PathBuf> {
    LOADED.lock().as_ref().map(|l| l.path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        let cwd = Path::new("/work");
        let explicit = Path::new("/opt/lib.so");
        assert_eq!(resolve_library_path(Some(explicit), Some("/env.so"), cwd), explicit);
        assert_eq!(resolve_library_path(None, Some("/env.so"), cwd), Path::new("/env.so"));
        assert_eq!(resolve_library_path(None, Some(""), cwd), cwd.join(DEFAULT_LIBRARY_PATH));
        assert_eq!(resolve_library_path(None, None, cwd), cwd.join(DEFAULT_LIBRARY_PATH));
        assert_eq!(resolve_library_path(Some(Path::new("rel.so")), None, cwd), cwd.join("rel.so"));
    }

    #[test]
    fn missing_file_is_library_unavailable() {
        let err = check_library_file(Path::new("/nonexistent/libonnxruntime.so"));
        match err {
            Err(RuntimeError::LibraryUnavailable { path, reason }) => {
                assert_eq!(path, Path::new("/nonexistent/libonnxruntime.so"));
                assert!(reason.contains(ORT_DYLIB_ENV), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(check_library_file(Path::new("/")).is_err());
    }
}
