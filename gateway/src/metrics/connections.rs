//! Families of the client listeners' connections
//! ([`crate::connections`]; label `listener`: `api` for the V2 listener,
//! `grpc` for the gRPC one when it is on) and of requests cut off at
//! shutdown, read at scrape time from the connection tables and the life
//! cycle.

use super::family::Family;
use crate::connections::ConnSnapshot;
use prometheus::proto::MetricFamily;

/// The connection gauges and counters of each `(listener, table)`, and
/// requests cut off.
pub fn connection_families(listeners: &[(&str, ConnSnapshot)], cut_off: usize) -> Vec<MetricFamily> {
    let mut open = Family::gauge("switchyard_connections_open", "Client connections open.", &["listener"]);
    let mut max = Family::gauge(
        "switchyard_connections_limit",
        "server.max_connections in force (lowered to fit the open-file limit when needed).",
        &["listener"],
    );
    let mut admitted = Family::counter(
        "switchyard_connections_total",
        "Connections by admission outcome: accepted, or refused at the limit (HTTP: with a 503).",
        &["listener", "outcome"],
    );
    let mut closed = Family::counter(
        "switchyard_connections_closed_total",
        "Connections the server closed: idle past keepalive_timeout_s, head (gRPC: handshake; TLS: \
         its handshake) past header_timeout_ms, to make room at max_connections, or a failed TLS \
         handshake.",
        &["listener", "reason"],
    );
    for (listener, conns) in listeners {
        open.sample(&[listener], conns.open as f64);
        max.sample(&[listener], conns.max as f64);
        admitted.sample(&[listener, "accepted"], conns.accepted as f64);
        admitted.sample(&[listener, "refused"], conns.refused as f64);
        closed.sample(&[listener, "idle_timeout"], conns.idle_closed as f64);
        closed.sample(&[listener, "header_timeout"], conns.header_timeouts as f64);
        closed.sample(&[listener, "evicted"], conns.evicted as f64);
        closed.sample(&[listener, "tls_handshake"], conns.tls_failed as f64);
    }
    let mut cut = Family::counter(
        "switchyard_requests_cut_off_total",
        "Requests dropped before their response was complete (the server stopped under them).",
        &[],
    );
    cut.sample(&[], cut_off as f64);
    [open, max, admitted, closed, cut].into_iter().filter_map(Family::finish).collect()
}
