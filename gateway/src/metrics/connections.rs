//! Families of the V2 listener's client connections
//! ([`crate::connections`]) and of requests cut off at shutdown, read at
//! scrape time from the connection table and the life cycle.

use super::family::Family;
use crate::connections::ConnSnapshot;
use prometheus::proto::MetricFamily;

/// The connection gauges and counters, and requests cut off.
pub fn connection_families(conns: &ConnSnapshot, cut_off: usize) -> Vec<MetricFamily> {
    let mut open =
        Family::gauge("switchyard_connections_open", "Client connections open on the API listener.", &[]);
    open.sample(&[], conns.open as f64);
    let mut max = Family::gauge(
        "switchyard_connections_limit",
        "server.max_connections in force (lowered to fit the open-file limit when needed).",
        &[],
    );
    max.sample(&[], conns.max as f64);
    let mut admitted = Family::counter(
        "switchyard_connections_total",
        "Connections by admission outcome: accepted, or refused with a 503 at the limit.",
        &["outcome"],
    );
    admitted.sample(&["accepted"], conns.accepted as f64);
    admitted.sample(&["refused"], conns.refused as f64);
    let mut closed = Family::counter(
        "switchyard_connections_closed_total",
        "Connections the server closed: idle past keepalive_timeout_s, head past header_timeout_ms, \
         or to make room at max_connections.",
        &["reason"],
    );
    closed.sample(&["idle_timeout"], conns.idle_closed as f64);
    closed.sample(&["header_timeout"], conns.header_timeouts as f64);
    closed.sample(&["evicted"], conns.evicted as f64);
    let mut cut = Family::counter(
        "switchyard_requests_cut_off_total",
        "Requests dropped before their response was complete (the server stopped under them).",
        &[],
    );
    cut.sample(&[], cut_off as f64);
    [open, max, admitted, closed, cut].into_iter().filter_map(Family::finish).collect()
}
