//! The runtime's errors. Each knows its [`ErrorClass`] (which the gateway
//! maps to an HTTP status) and a low-cardinality metric label; messages are
//! written to be shown to the client that caused them.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::tensor::DataType;

/// Coarse error category; the gateway maps it to a status code
/// (400 / 413 / 404 / 429 / 503 / 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request itself is wrong (400); retrying it unchanged fails again.
    InvalidInput,
    /// The request asks for more work than a configured limit allows
    /// (413); a smaller request (or a raised limit) succeeds.
    TooLarge,
    /// A named model, pool or output does not exist (404).
    NotFound,
    /// A queue is full (429); retry after the hinted delay.
    Overloaded,
    /// The model or device cannot serve right now (503).
    Unavailable,
    /// A bug or an ONNX Runtime failure (500).
    Internal,
}

/// Everything that can go wrong in the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RuntimeError {
    /// The ONNX Runtime shared library is missing, unloadable or too old.
    #[error("ONNX Runtime library at {} is unavailable: {reason}", path.display())]
    LibraryUnavailable {
        /// The path that was tried.
        path: PathBuf,
        /// Why it could not be used.
        reason: String,
    },
    /// A [`crate::ModelSpec`] is inconsistent (duplicate name, no pool...).
    #[error("invalid model spec for '{model}': {reason}")]
    InvalidSpec {
        /// The model the spec describes.
        model: String,
        /// What is wrong.
        reason: String,
    },
    /// No model of that name is registered.
    #[error("unknown model '{model}'")]
    UnknownModel {
        /// The requested model.
        model: String,
    },
    /// The model has no pool of that name.
    #[error("model '{model}' has no pool '{pool}'")]
    UnknownPool {
        /// The model.
        model: String,
        /// The requested pool.
        pool: String,
    },
    /// The request names an input the model does not have.
    #[error("model '{model}' has no input '{input}' (inputs: {expected})")]
    UnknownInput {
        /// The model.
        model: String,
        /// The unexpected input name.
        input: String,
        /// The model's input names, comma-separated.
        expected: String,
    },
    /// The request gives the same input twice.
    #[error("input '{input}' of model '{model}' is given more than once")]
    DuplicateInput {
        /// The model.
        model: String,
        /// The repeated input name.
        input: String,
    },
    /// The request lacks one of the model's inputs.
    #[error("model '{model}' needs input '{input}', which the request lacks")]
    MissingInput {
        /// The model.
        model: String,
        /// The missing input name.
        input: String,
    },
    /// An input has the wrong datatype.
    #[error("input '{input}' of model '{model}' must be {expected}, got {actual}")]
    WrongDtype {
        /// The model.
        model: String,
        /// The input name.
        input: String,
        /// The model's datatype.
        expected: DataType,
        /// The request's datatype.
        actual: DataType,
    },
    /// An input has the wrong rank or a dimension that contradicts the model.
    #[error("input '{input}' of model '{model}' has shape {actual:?}, expected {expected}")]
    WrongShape {
        /// The model.
        model: String,
        /// The input name.
        input: String,
        /// What the model accepts, e.g. `[-1, 64]` (-1 = any size).
        expected: String,
        /// The request's shape.
        actual: Vec<usize>,
    },
    /// An input's elements cannot be handed to ONNX Runtime (e.g. a
    /// `BYTES` element that is not UTF-8).
    #[error("input '{input}' of model '{model}' is invalid: {reason}")]
    InvalidData {
        /// The model.
        model: String,
        /// The input name.
        input: String,
        /// What is wrong.
        reason: String,
    },
    /// The request is over one of the model's per-request limits
    /// ([`crate::RequestLimits`]): too many rows, or too many tokens for a
    /// text model (413).
    #[error("model '{model}': {reason} (limits.{setting})")]
    TooLarge {
        /// The model.
        model: String,
        /// What is over which limit, e.g. `the request has 4096 rows, more
        /// than the 128 rows one request may carry`.
        reason: String,
        /// The limit's name in [`crate::RequestLimits`] (`max_rows`,
        /// `max_tokens`).
        setting: &'static str,
    },
    /// The request asks for an output the model does not produce.
    #[error("model '{model}' has no output '{output}' (outputs: {expected})")]
    UnknownOutput {
        /// The model.
        model: String,
        /// The requested output.
        output: String,
        /// The model's output names, comma-separated.
        expected: String,
    },
    /// The model file cannot be read or parsed by ONNX Runtime, or uses
    /// inputs/outputs the runtime cannot carry (maps, sequences).
    #[error("model '{model}' cannot be loaded from {}: {reason}", path.display())]
    CorruptModel {
        /// The model.
        model: String,
        /// Its file.
        path: PathBuf,
        /// ONNX Runtime's explanation.
        reason: String,
    },
    /// The pool's queue is full; the caller should retry later (429).
    #[error("model '{model}' pool '{pool}' is overloaded; retry in {} ms", retry_after.as_millis())]
    Overloaded {
        /// The model.
        model: String,
        /// The full pool.
        pool: String,
        /// A hint: roughly how long the queue takes to drain.
        retry_after: Duration,
    },
    /// No pool of the model (or not the requested one) can run: e.g. CUDA
    /// configured but missing, or every session failed to build.
    #[error("model '{model}' has no available device: {reason}")]
    DeviceUnavailable {
        /// The model.
        model: String,
        /// Why each pool is unavailable.
        reason: String,
    },
    /// The request waited in the queue of a paused pool
    /// ([`crate::ModelRepository::set_paused`]) until its deadline; it was
    /// not executed (503, retry later).
    #[error("model '{model}' pool '{pool}' is paused; the request's deadline passed while it waited")]
    Paused {
        /// The model.
        model: String,
        /// The paused pool.
        pool: String,
    },
    /// ONNX Runtime failed on this request's data, run alone, while the
    /// model runs other requests (a batch-mate, or any earlier request of
    /// the loaded model): the data is what the model cannot take, e.g. a
    /// string a `Cast` cannot parse (400). See `crate::isolate`.
    #[error("model '{model}' cannot run this request's data (it runs other requests): {reason}")]
    InputRejected {
        /// The model.
        model: String,
        /// ONNX Runtime's explanation.
        reason: String,
    },
    /// ONNX Runtime failed while running a batch, or a worker stopped.
    #[error("model '{model}' failed to execute: {reason}")]
    Execution {
        /// The model.
        model: String,
        /// ONNX Runtime's explanation.
        reason: String,
    },
    /// The repository is shutting down and accepts no new work.
    #[error("the model runtime is shutting down")]
    ShuttingDown,
    /// A model of the model store (the `switchyard-store` crate) that
    /// could not be made local: not cached while the store is unreachable,
    /// an object that failed its integrity check, refused credentials.
    /// Built from the store's `StoreError`, whose class it keeps.
    #[error("model '{model}' is not available from the model store: {message}")]
    StoreUnavailable {
        /// The model (`<model>` or `<model>@<version>`).
        model: String,
        /// The store error's class (503 for an unreachable store).
        class: ErrorClass,
        /// The store error's label (`not_cached`...).
        label: &'static str,
        /// The store error, for the client.
        message: String,
    },
}

impl RuntimeError {
    /// The error's class, for mapping to an HTTP status.
    pub fn class(&self) -> ErrorClass {
        use RuntimeError as E;
        match self {
            E::UnknownInput { .. }
            | E::DuplicateInput { .. }
            | E::MissingInput { .. }
            | E::WrongDtype { .. }
            | E::WrongShape { .. }
            | E::InvalidData { .. }
            | E::InputRejected { .. } => ErrorClass::InvalidInput,
            E::TooLarge { .. } => ErrorClass::TooLarge,
            E::UnknownModel { .. } | E::UnknownPool { .. } | E::UnknownOutput { .. } => ErrorClass::NotFound,
            E::Overloaded { .. } => ErrorClass::Overloaded,
            E::LibraryUnavailable { .. }
            | E::CorruptModel { .. }
            | E::DeviceUnavailable { .. }
            | E::Paused { .. }
            | E::ShuttingDown => ErrorClass::Unavailable,
            E::InvalidSpec { .. } | E::Execution { .. } => ErrorClass::Internal,
            E::StoreUnavailable { class, .. } => *class,
        }
    }

    /// A short, fixed label for metrics (`wrong_dtype`, `overloaded`...).
    pub fn label(&self) -> &'static str {
        use RuntimeError as E;
        match self {
            E::LibraryUnavailable { .. } => "library_unavailable",
            E::InvalidSpec { .. } => "invalid_spec",
            E::UnknownModel { .. } => "unknown_model",
            E::UnknownPool { .. } => "unknown_pool",
            E::UnknownInput { .. } => "unknown_input",
            E::DuplicateInput { .. } => "duplicate_input",
            E::MissingInput { .. } => "missing_input",
            E::WrongDtype { .. } => "wrong_dtype",
            E::WrongShape { .. } => "wrong_shape",
            E::InvalidData { .. } => "invalid_data",
            E::TooLarge { .. } => "too_large",
            E::UnknownOutput { .. } => "unknown_output",
            E::CorruptModel { .. } => "corrupt_model",
            E::Overloaded { .. } => "overloaded",
            E::DeviceUnavailable { .. } => "device_unavailable",
            E::Paused { .. } => "paused",
            E::InputRejected { .. } => "input_rejected",
            E::Execution { .. } => "execution",
            E::ShuttingDown => "shutting_down",
            E::StoreUnavailable { label, .. } => label,
        }
    }

    /// True when the same request may succeed if retried later (overload,
    /// temporary unavailability), false when it will fail again.
    pub fn is_retryable(&self) -> bool {
        matches!(self.class(), ErrorClass::Overloaded)
            || matches!(self, RuntimeError::ShuttingDown | RuntimeError::Paused { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_labels() {
        let e = RuntimeError::WrongDtype {
            model: "m".into(),
            input: "X".into(),
            expected: DataType::F32,
            actual: DataType::I64,
        };
        assert_eq!(e.class(), ErrorClass::InvalidInput);
        assert_eq!(e.label(), "wrong_dtype");
        assert_eq!(e.to_string(), "input 'X' of model 'm' must be FP32, got INT64");
        let o = RuntimeError::Overloaded {
            model: "m".into(),
            pool: "cpu".into(),
            retry_after: Duration::from_millis(5),
        };
        assert_eq!(o.class(), ErrorClass::Overloaded);
        assert!(o.is_retryable());
        assert_eq!(RuntimeError::UnknownModel { model: "x".into() }.class(), ErrorClass::NotFound);
    }
}
