//! A trivial HTTP/1.1 server answering every request with a small V2-style
//! JSON response: used by the tests and by `loadgen --serve` to measure how
//! fast the generator itself can go.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const RESPONSE: &[u8] =
    br#"{"model_name":"loadgen-test","outputs":[{"name":"label","shape":[1],"datatype":"INT64","data":[0]}]}"#;

/// Answers one request: drains its body, then 200, or 500 for every `fail_every`-th request.
async fn answer(
    req: Request<Incoming>,
    counter: Arc<AtomicU64>,
    fail_every: Option<u64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut body = req.into_body();
    while let Some(Ok(_)) = body.frame().await {}
    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
    let fail = fail_every.is_some_and(|k| k > 0 && n.is_multiple_of(k));
    let mut resp = Response::new(Full::new(Bytes::from_static(RESPONSE)));
    if fail {
        *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    }
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// Accepts connections on `listener` forever, one task per connection.
pub async fn serve(listener: TcpListener, fail_every: Option<u64>) -> std::io::Result<()> {
    let counter = Arc::new(AtomicU64::new(0));
    loop {
        let (stream, _) = listener.accept().await?;
        // Latency matters more than packet count for a benchmark target.
        let _ = stream.set_nodelay(true);
        let counter = Arc::clone(&counter);
        tokio::spawn(async move {
            let svc = service_fn(move |req| answer(req, Arc::clone(&counter), fail_every));
            // A client closing its connection is normal at the end of a run.
            let _ =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

/// Binds `addr` (use port 0 for any free port) and serves in a background task.
pub async fn spawn(
    addr: SocketAddr,
    fail_every: Option<u64>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let handle = tokio::spawn(async move {
        if let Err(e) = serve(listener, fail_every).await {
            eprintln!("test server stopped: {e}");
        }
    });
    Ok((local, handle))
}
