//! Where a registered model is in its life cycle ([`ModelState`]): kept
//! by the model, reported in its statistics. A leaf: it names no other
//! module.

use std::fmt;

/// Where a model is in its life cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelState {
    /// Registered, no sessions; the next request loads it.
    Unloaded,
    /// Sessions are being built.
    Loading,
    /// Serving.
    Ready,
    /// The file is corrupt or no pool could start; requests fail with the
    /// stored error until an explicit `load` succeeds.
    Failed(String),
}

impl fmt::Display for ModelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelState::Unloaded => f.write_str("unloaded"),
            ModelState::Loading => f.write_str("loading"),
            ModelState::Ready => f.write_str("ready"),
            ModelState::Failed(reason) => write!(f, "failed: {reason}"),
        }
    }
}
