//! `pingora-floor`: what Pingora itself allows on this machine, for the
//! HTTP-floor benchmark (issue 42, `benchmarks/floor_bench.sh`). It reads a
//! request's body, discards it and answers a fixed 100-byte JSON body, like
//! nginx's `return 200` anchor, in one of two ways:
//!
//! - `proxy`: a `ProxyHttp` app answering in `request_filter`, as the
//!   gateway's own app does (no downstream modules, header then body);
//! - `app`: a bare `HttpServerApp` on pingora-core's HTTP session, the
//!   head and body written in one `response_duplex_vec`.
//!
//! The gap between nginx and `proxy` is Pingora's share of a request; the
//! gap between `proxy` and Switchyard is Switchyard's own work.
//!
//! `pingora-floor --listen 127.0.0.1:PORT --mode proxy|app [--threads N] [--no-steal]`

use async_trait::async_trait;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use pingora::apps::{HttpServerApp, ReusedHttpStream};
use pingora::http::ResponseHeader;
use pingora::prelude::{HttpPeer, ProxyHttp, Session};
use pingora::protocols::http::{HttpTask, ServerSession};
use pingora::server::configuration::ServerConf;
use pingora::server::{RunArgs, Server, ShutdownWatch};
use pingora::services::listening::Service;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The answer every request gets: the size of a digits-cheap V2 answer.
const ANSWER: &[u8] =
    br#"{"model_name":"digits-cheap","outputs":[{"name":"label","datatype":"INT64","shape":[1],"data":[7]}]}"#;

/// How the answer is produced.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    /// A `ProxyHttp` app answering in `request_filter`.
    Proxy,
    /// A bare `HttpServerApp`.
    App,
}

#[derive(Parser, Debug)]
#[command(about = "Pingora's own floor: a fixed answer after reading the body")]
struct Args {
    /// Address to listen on (loopback).
    #[arg(long)]
    listen: String,
    /// Which Pingora layer answers.
    #[arg(long, value_enum, default_value = "proxy")]
    mode: Mode,
    /// Worker threads of the service.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// One current-thread runtime per thread instead of a work-stealing one.
    #[arg(long)]
    no_steal: bool,
}

/// The answer's response head.
fn answer_header() -> pingora::Result<ResponseHeader> {
    let mut header = ResponseHeader::build(200, Some(2))?;
    header.insert_header("content-type", "application/json")?;
    header.insert_header("content-length", ANSWER.len())?;
    Ok(header)
}

/// The `ProxyHttp` variant.
struct FloorProxy;

#[async_trait]
impl ProxyHttp for FloorProxy {
    type CTX = ();

    fn new_ctx(&self) {}

    fn init_downstream_modules(&self, _modules: &mut pingora::modules::http::HttpModules) {}

    async fn request_filter(&self, session: &mut Session, _ctx: &mut ()) -> pingora::Result<bool> {
        while session.read_request_body().await?.is_some() {}
        session.write_response_header(Box::new(answer_header()?), false).await?;
        session.write_response_body(Some(Bytes::from_static(ANSWER)), true).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> pingora::Result<Box<HttpPeer>> {
        Err(pingora::Error::explain(pingora::ErrorType::InternalError, "no upstream"))
    }
}

/// The bare `HttpServerApp` variant.
struct FloorApp;

#[async_trait]
impl HttpServerApp for FloorApp {
    async fn process_new_http(
        self: &Arc<Self>,
        mut http: ServerSession,
        _shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        if !http.read_request().await.ok()? {
            return None;
        }
        while http.read_request_body().await.ok()?.is_some() {}
        let tasks = vec![
            HttpTask::Header(Box::new(answer_header().ok()?), false),
            HttpTask::Body(Some(Bytes::from_static(ANSWER)), true),
        ];
        http.response_duplex_vec(tasks).await.ok()?;
        let settings = pingora::apps::HttpPersistentSettings::for_session(&http);
        let stream = http.finish().await.ok()??;
        Some(ReusedHttpStream::from_reusable_stream(stream, settings))
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // No grace on SIGTERM: the suite stops the probe as soon as its row is measured.
    let conf = ServerConf {
        threads: args.threads,
        work_stealing: !args.no_steal,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let conf = server.configuration.clone();
    match args.mode {
        Mode::Proxy => {
            let mut service = pingora::proxy::http_proxy_service(&conf, FloorProxy);
            service.add_tcp(&args.listen);
            server.add_service(service);
        }
        Mode::App => {
            let mut service = Service::new("floor".to_string(), FloorApp);
            service.add_tcp(&args.listen);
            server.add_service(service);
        }
    }
    server.run(RunArgs::default());
    Ok(())
}
