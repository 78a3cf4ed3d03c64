//! Building ONNX Runtime sessions: the short-lived probe that reads a
//! model's signature at registration, and the per-worker sessions of a pool
//! with its execution provider.

use std::path::Path;

use ort::session::Session;
use ort::value::{Outlet, ValueType};

use crate::convert::from_ort_type;
use crate::device::DeviceKind;
use crate::error::RuntimeError;
use crate::ort_env::environment;
use crate::signature::{ModelSignature, TensorSpec};
use crate::spec::{ModelSpec, PoolSpec};

/// Opens the model with a plain CPU session, reads its inputs and outputs,
/// and drops the session. `CorruptModel` when the file is missing, does not
/// parse, or has non-tensor inputs/outputs.
pub fn probe_signature(spec: &ModelSpec) -> Result<ModelSignature, RuntimeError> {
    let env = environment()?;
    let corrupt = |reason: String| RuntimeError::CorruptModel {
        model: spec.name.clone(),
        path: spec.path.clone(),
        reason,
    };
    if !spec.path.is_file() {
        return Err(corrupt("file not found".into()));
    }
    let session = Session::builder(&env)
        .map_err(|e| corrupt(e.to_string()))?
        .with_intra_threads(1)
        .map_err(|e| corrupt(e.to_string()))?
        .commit_from_file(&spec.path)
        .map_err(|e| corrupt(e.to_string()))?;
    let inputs = session.inputs().iter().map(tensor_spec).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
    let outputs =
        session.outputs().iter().map(tensor_spec).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
    Ok(ModelSignature { inputs, outputs })
}

fn tensor_spec(outlet: &Outlet) -> Result<TensorSpec, String> {
    match outlet.dtype() {
        ValueType::Tensor { ty, shape, .. } => {
            let dtype = from_ort_type(*ty).ok_or_else(|| {
                format!("'{}' has element type {ty}, which is not supported", outlet.name())
            })?;
            Ok(TensorSpec { name: outlet.name().to_string(), dtype, shape: shape.to_vec() })
        }
        other => Err(format!(
            "'{}' is a {other}, not a tensor (export classifiers with zipmap disabled)",
            outlet.name()
        )),
    }
}

/// Builds one worker's session for `pool`. For CUDA the execution provider
/// is registered with `error_on_failure`, so a missing provider is an error
/// rather than a silent CPU fallback; without the `cuda` feature a CUDA pool
/// always fails here.
pub fn build_session(path: &Path, pool: &PoolSpec) -> Result<Session, String> {
    let env = environment().map_err(|e| e.to_string())?;
    let mut builder = Session::builder(&env)
        .map_err(|e| e.to_string())?
        .with_intra_threads(pool.intra_op_threads)
        .map_err(|e| e.to_string())?
        .with_inter_threads(1)
        .map_err(|e| e.to_string())?
        .with_intra_op_spinning(false)
        .map_err(|e| e.to_string())?;
    if pool.device == DeviceKind::Cuda {
        builder = with_cuda(builder)?;
    }
    builder.commit_from_file(path).map_err(|e| e.to_string())
}

#[cfg(feature = "cuda")]
fn with_cuda(
    builder: ort::session::builder::SessionBuilder,
) -> Result<ort::session::builder::SessionBuilder, String> {
    // TF32 off: ONNX Runtime's CUDA provider turns it on by default, which
    // rounds float32 matrix products to a 10-bit mantissa on Ampere and
    // later; a float32 model then answers differently on the GPU than on
    // the CPU (1e-3 relative, seen on an H200). Pools of one model must
    // agree, so float32 stays float32.
    let cuda = ort::ep::CUDA::default().with_tf32(false).build().error_on_failure();
    builder.with_execution_providers([cuda]).map_err(|e| format!("CUDA execution provider: {e}"))
}

#[cfg(not(feature = "cuda"))]
fn with_cuda(
    _builder: ort::session::builder::SessionBuilder,
) -> Result<ort::session::builder::SessionBuilder, String> {
    Err("switchyard-runtime was built without the `cuda` feature".into())
}
