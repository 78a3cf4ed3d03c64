//! `GRPCInferenceService` over the gateway's state: each call turns its
//! metadata into headers ([`super::call`]), authorizes the name it
//! addresses exactly as REST does ([`crate::auth`]), and answers through
//! the same functions as the REST handlers: [`crate::inference`] for
//! inference, [`crate::inference::views`] for metadata,
//! [`crate::inference::statistics`] for statistics.

use super::call::{admit, call_headers, CallObs, Rpc};
use super::conn::ConnInfo;
use super::edge::mark_reached;
use super::encode::encode_model_infer;
use super::infer::{infer_call, version, CACHED_ROWS_PARAMETER, CACHE_PARAMETER};
use super::metadata::from_document;
use super::proto::grpc_inference_service_server::GrpcInferenceService;
use super::proto::*;
use crate::error::GatewayError;
use crate::inference::{self, statistics, views, Answered, Outcome};
use crate::snapshot::Snapshot;
use crate::state::AppState;
use http::HeaderMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status, Streaming};

/// The gRPC front end: the service `serve` mounts on `server.grpc_listen`.
#[derive(Clone)]
pub struct GrpcFront {
    pub(super) state: Arc<AppState>,
}

impl GrpcFront {
    /// A front end serving from `state`.
    pub fn new(state: Arc<AppState>) -> GrpcFront {
        GrpcFront { state }
    }

    /// Runs one unary call `rpc` on `name` (empty: none): observed,
    /// authorized when it names a model, admitted when `admits`
    /// (inference) on the connection in `extensions`.
    async fn unary<T, F, Fut>(
        &self,
        rpc: Rpc,
        (metadata, extensions): (tonic::metadata::MetadataMap, http::Extensions),
        name: &str,
        admits: bool,
        handle: F,
    ) -> Result<Response<T>, Status>
    where
        F: FnOnce(Arc<Snapshot>, HeaderMap, Option<Arc<str>>) -> Fut,
        Fut: Future<Output = Result<T, GatewayError>>,
    {
        mark_reached(&extensions);
        let headers = call_headers(metadata);
        let state = &*self.state;
        let snap = state.snapshot.load_full();
        let call = CallObs::start(state, rpc, &headers);
        let checked = (|| {
            let admission = match admits {
                true => Some(admit(state, extensions.get::<ConnInfo>())?),
                false => None,
            };
            if name.is_empty() {
                return Ok((admission, None));
            }
            let cert_cn = extensions.get::<ConnInfo>().and_then(ConnInfo::cert_cn);
            Ok((admission, snap.access.authorize_peer(&snap.config, name, &headers, cert_cn)?))
        })();
        let result = match checked {
            Ok((_admission, tenant)) => {
                // Pinned in place and wrapped by reference: the (large)
                // handling future is never copied into the wrapper.
                let handling = std::pin::pin!(handle(snap.clone(), headers, tenant));
                call.obs.scope().run(handling).await
            }
            Err(e) => Err(e),
        };
        call.finish(&snap, (!name.is_empty()).then_some(name), result.as_ref().map(|_| ()));
        result.map(Response::new).map_err(Status::from)
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for GrpcFront {
    async fn server_live(
        &self,
        request: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        self.unary(Rpc::ServerLive, parts(request).0, "", false, |_, _, _| async {
            Ok(ServerLiveResponse { live: true })
        })
        .await
    }

    async fn server_ready(
        &self,
        request: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        let draining = self.state.lifecycle.is_draining();
        self.unary(Rpc::ServerReady, parts(request).0, "", false, |_, _, _| async move {
            Ok(ServerReadyResponse { ready: !draining })
        })
        .await
    }

    async fn model_ready(
        &self,
        request: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        let (call, message) = parts(request);
        let (state, message) = (&*self.state, &message);
        self.unary(Rpc::ModelReady, call, &message.name, false, |snap, _, _| async move {
            let ready = views::model_ready(state, &snap, &message.name, version(&message.version))?;
            Ok(ModelReadyResponse { ready })
        })
        .await
    }

    async fn server_metadata(
        &self,
        request: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        self.unary(Rpc::ServerMetadata, parts(request).0, "", false, |_, _, _| async {
            from_document("inference.ServerMetadataResponse", &switchyard_protocol::v2::server_metadata())
        })
        .await
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        let (call, message) = parts(request);
        let (state, message) = (&*self.state, &message);
        self.unary(Rpc::ModelMetadata, call, &message.name, false, |snap, _, _| async move {
            let doc = views::model_metadata(state, &snap, &message.name, version(&message.version))?;
            from_document("inference.ModelMetadataResponse", &doc)
        })
        .await
    }

    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        let received = Instant::now();
        let (call, message) = parts(request);
        let name = message.model_name.clone();
        let state = &*self.state;
        self.unary(Rpc::ModelInfer, call, &name, true, |snap, headers, tenant| async move {
            let call = infer_call(state, &snap, &headers, tenant.as_deref(), message, received, false)?;
            match inference::run(state, &snap, call).await? {
                Outcome::Answered(answered) => Ok(respond(*answered)),
                Outcome::Events(_) => {
                    Err(GatewayError::Internal("a unary call was answered with a stream".into()))
                }
            }
        })
        .await
    }

    type ModelStreamInferStream = super::stream::ResponseStream;

    async fn model_stream_infer(
        &self,
        request: Request<Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        let (metadata, extensions, requests) = request.into_parts();
        mark_reached(&extensions);
        let conn = extensions.get::<ConnInfo>().cloned();
        Ok(Response::new(super::stream::start(self.state.clone(), call_headers(metadata), conn, requests)))
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        let (call, message) = parts(request);
        let (state, message) = (&*self.state, &message);
        self.unary(Rpc::ModelConfig, call, &message.name, false, |snap, _, _| async move {
            let doc = views::model_config(state, &snap, &message.name, version(&message.version))?;
            Ok(ModelConfigResponse { config: Some(from_document("inference.ModelConfig", &doc)?) })
        })
        .await
    }

    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        let (call, message) = parts(request);
        let (state, message) = (&*self.state, &message);
        self.unary(Rpc::ModelStatistics, call, &message.name, false, |snap, headers, _| async move {
            let name = (!message.name.is_empty()).then_some(message.name.as_str());
            let doc = statistics::model_statistics(state, &snap, name, version(&message.version), &headers)?;
            from_document("inference.ModelStatisticsResponse", &doc)
        })
        .await
    }
}

/// A call's metadata and extensions, and its message.
fn parts<T>(request: Request<T>) -> ((tonic::metadata::MetadataMap, http::Extensions), T) {
    let (metadata, extensions, message) = request.into_parts();
    ((metadata, extensions), message)
}

/// The response to a unary call: the answer, with `x-cache` (and, for a
/// batch cached row by row, `x-switchyard-cached-rows`) beside the
/// explain parameters (`switchyard_model`, ...).
fn respond(answered: Answered) -> ModelInferResponse {
    let Answered { mut parts, cache, rows, .. } = answered;
    parts.parameters.insert(CACHE_PARAMETER.into(), cache.as_str().into());
    if let Some(rows) = rows {
        parts.parameters.insert(CACHED_ROWS_PARAMETER.into(), rows.header_value().into());
    }
    encode_model_infer(parts)
}
