//! Loading the ONNX Runtime library. Its own test binary (= process), since
//! loading is process-global and happens once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::path::Path;

use switchyard_runtime::{init_onnxruntime, RuntimeError};

#[test]
fn bad_libraries_are_errors_then_the_first_good_one_sticks() {
    let e = init_onnxruntime(Some(Path::new("/nonexistent/libonnxruntime.so"))).unwrap_err();
    assert!(
        matches!(&e, RuntimeError::LibraryUnavailable { path, .. } if path == Path::new("/nonexistent/libonnxruntime.so"))
    );

    let mut fake = tempfile::Builder::new().suffix(".so").tempfile().unwrap();
    fake.write_all(b"not an ELF file").unwrap();
    let e = init_onnxruntime(Some(fake.path())).unwrap_err();
    assert!(matches!(e, RuntimeError::LibraryUnavailable { .. }), "{e}");
    assert_eq!(e.label(), "library_unavailable");

    common::init();
    let first = switchyard_runtime::ort_env::loaded_library().unwrap();
    // Later calls keep the loaded library, whatever they ask for.
    assert_eq!(init_onnxruntime(Some(Path::new("/nonexistent/other.so"))).unwrap(), first);
    assert_eq!(init_onnxruntime(None).unwrap(), first);
}
