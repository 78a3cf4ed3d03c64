//! The kind of device a pool runs on: a leaf type that specs, responses
//! and statistics all name.

use std::fmt;

use serde::Deserialize;

/// The kind of device a pool runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// ONNX Runtime's CPU execution provider.
    Cpu,
    /// ONNX Runtime's CUDA execution provider (needs the crate's `cuda`
    /// feature and a CUDA-enabled ONNX Runtime library; otherwise the pool is
    /// reported unavailable, never silently run on CPU).
    Cuda,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_display() {
        assert_eq!(DeviceKind::Cpu.to_string(), "cpu");
        assert_eq!(DeviceKind::Cuda.to_string(), "cuda");
    }
}
