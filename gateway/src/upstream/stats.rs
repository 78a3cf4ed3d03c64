//! The `"upstreams"` block of `GET /admin/stats`: per upstream, its
//! models' signature state and, per address, health, breaker, latency
//! estimate, load and counters.

use super::registry::{SignatureState, Upstreams};
use serde_json::{json, Value};
use std::time::Instant;

/// The upstreams as JSON.
pub fn to_json(upstreams: &Upstreams) -> Value {
    let now = Instant::now();
    let list = upstreams
        .iter()
        .map(|u| {
            let addresses: Vec<Value> = u
                .addresses
                .iter()
                .map(|a| {
                    let s = a.snapshot();
                    json!({
                        "addr": s.addr.to_string(),
                        "healthy": s.healthy,
                        "usable": a.is_usable(now),
                        "breaker": s.breaker,
                        "latency_ms": s.latency.map(|l| l.estimate.as_secs_f64() * 1e3),
                        "latency_samples": s.latency.map_or(0, |l| l.samples),
                        "in_flight": s.in_flight,
                        "requests": s.requests,
                        "failures": s.failures,
                    })
                })
                .collect();
            let models: Vec<Value> = u
                .models
                .iter()
                .map(|m| {
                    let (state, reason) = match m.state() {
                        SignatureState::Known(_) => ("known", None),
                        SignatureState::Unknown(why) => ("unknown", Some(why)),
                        SignatureState::Incompatible(why) => ("incompatible", Some(why)),
                    };
                    json!({ "name": m.config.name, "remote": m.config.remote, "signature": state, "reason": reason })
                })
                .collect();
            json!({
                "name": u.config.name,
                "kind": u.config.kind.as_str(),
                "addresses": addresses,
                "models": models,
            })
        })
        .collect();
    Value::Array(list)
}
