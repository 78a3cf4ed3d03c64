//! The metadata calls (`ServerMetadata`, `ModelMetadata`, `ModelConfig`,
//! `ModelStatistics`)
//! answer with the very documents the REST endpoints send
//! ([`crate::inference::views`], [`switchyard_protocol::v2::metadata`]), read into the
//! protobuf messages through their descriptors (the protobuf JSON mapping
//! accepts Triton's field names and enum names, e.g. `TYPE_FP32`), so the
//! two protocols cannot drift apart.

use crate::error::GatewayError;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::Value;
use std::sync::OnceLock;

/// The descriptors of `gateway/proto/grpc_service.proto` and its imports.
const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/grpc_service.bin"));

fn pool() -> Result<&'static DescriptorPool, GatewayError> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(DESCRIPTOR_SET).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| internal(format!("the embedded gRPC schema is unreadable: {e}")))
}

fn internal(message: String) -> GatewayError {
    GatewayError::Internal(message)
}

/// `document` (a REST JSON document) as the protobuf message `T`, whose
/// full name is `message` (`inference.ModelConfig`). Fields the message
/// does not have are ignored; a value of the wrong type is an internal
/// error (the two schemas disagree: a defect, reported, not a panic).
pub fn from_document<T: prost::Message + Default>(
    message: &str,
    document: &Value,
) -> Result<T, GatewayError> {
    let descriptor = pool()?
        .get_message_by_name(message)
        .ok_or_else(|| internal(format!("the embedded gRPC schema lacks {message}")))?;
    let options = prost_reflect::DeserializeOptions::new().deny_unknown_fields(false);
    let dynamic = DynamicMessage::deserialize_with_options(descriptor, document, &options)
        .map_err(|e| internal(format!("{message} from its JSON document: {e}")))?;
    dynamic.transcode_to::<T>().map_err(|e| internal(format!("{message}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::proto::{ModelConfig, ModelMetadataResponse, ServerMetadataResponse};
    use super::*;
    use switchyard_protocol::v2::{self, DynamicBatchingView, ServingView};
    use switchyard_runtime::signature::{ModelSignature, TensorSpec};
    use switchyard_runtime::tensor::DataType;

    fn signature() -> ModelSignature {
        ModelSignature {
            inputs: vec![TensorSpec { name: "X".into(), dtype: DataType::F32, shape: vec![-1, 64] }],
            outputs: vec![TensorSpec { name: "label".into(), dtype: DataType::I64, shape: vec![-1] }],
        }
    }

    #[test]
    fn rest_documents_read_as_the_protocol_messages() {
        let server: ServerMetadataResponse =
            from_document("inference.ServerMetadataResponse", &v2::server_metadata()).unwrap();
        assert_eq!(server.name, v2::metadata::SERVER_NAME);
        assert!(server.extensions.contains(&"binary_tensor_data".to_string()));

        let doc = v2::model_metadata("digits", &["1".into()], v2::metadata::ONNX_PLATFORM, &signature());
        let meta: ModelMetadataResponse = from_document("inference.ModelMetadataResponse", &doc).unwrap();
        assert_eq!(meta.versions, ["1"]);
        assert_eq!(meta.inputs[0].shape, [-1, 64]);
        assert_eq!(meta.outputs[0].datatype, "INT64");

        let serving = ServingView {
            max_batch_size: 32,
            dynamic: Some(DynamicBatchingView {
                max_queue_delay_us: 500,
                preferred_batch_size: 32,
                max_queue_size: 64,
            }),
            instance_groups: vec![("KIND_CPU", 2)],
        };
        let config: ModelConfig =
            from_document("inference.ModelConfig", &v2::model_config("digits", &signature(), &serving))
                .unwrap();
        assert_eq!(config.max_batch_size, 32);
        assert_eq!(config.input[0].dims, [64]);
        assert_eq!(config.input[0].data_type, 11, "TYPE_FP32");
        assert_eq!(config.instance_group[0].count, 2);
        assert_eq!(config.instance_group[0].kind, 2, "KIND_CPU");
        let Some(super::super::proto::model_config::SchedulingChoice::DynamicBatching(dynamic)) =
            config.scheduling_choice
        else {
            panic!("no dynamic_batching: {:?}", config.scheduling_choice)
        };
        assert_eq!(dynamic.max_queue_delay_microseconds, 500);
        assert_eq!(dynamic.preferred_batch_size, [32]);
    }

    #[test]
    fn the_statistics_document_reads_as_the_protocol_message() {
        use super::super::proto::ModelStatisticsResponse;
        let doc = serde_json::json!({"model_stats": [{
            "name": "m", "version": "1", "last_inference": 0, "inference_count": 7, "execution_count": 2,
            "inference_stats": {"success": {"count": 3, "ns": 0}, "compute_infer": {"count": 2, "ns": 5000}},
            "batch_stats": [],
        }]});
        let stats: ModelStatisticsResponse =
            from_document("inference.ModelStatisticsResponse", &doc).unwrap();
        let m = &stats.model_stats[0];
        assert_eq!(
            (m.name.as_str(), m.version.as_str(), m.inference_count, m.execution_count),
            ("m", "1", 7, 2)
        );
        let infer = m.inference_stats.as_ref().unwrap();
        assert_eq!(infer.compute_infer.as_ref().map(|d| (d.count, d.ns)), Some((2, 5000)));
        assert_eq!(infer.success.as_ref().map(|d| d.count), Some(3));
    }
}
