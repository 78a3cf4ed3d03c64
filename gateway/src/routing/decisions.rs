//! Decision counters: how many requests each route answered with which
//! model, on which device, for which reason. Read by the admin stats
//! (`"decisions"`) and, later, exported as a Prometheus counter with the
//! same four labels. Every label is low-cardinality: routes and models come
//! from config, devices and reasons from closed sets.

use crate::error::GatewayError;
use parking_lot::Mutex;
use router_policies::{Device, Reason};
use serde_json::{json, Value};
use std::collections::HashMap;
use switchyard_protocol::answer::Answer;

/// Label used for `model`/`device` when no model ran (shed requests).
pub const NONE: &str = "none";

/// The labels of one counter.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DecisionKey {
    /// The route (or model) the client addressed.
    pub route: String,
    /// The model that answered, or [`NONE`].
    pub model: String,
    /// Its device; `None` when no model ran (labelled [`NONE`]).
    pub device: Option<Device>,
    /// Why ([`Reason::as_str`] is its label).
    pub reason: Reason,
}

impl DecisionKey {
    /// The four labels, in the order of the metric's label names.
    pub fn labels(&self) -> [&str; 4] {
        [
            self.route.as_str(),
            self.model.as_str(),
            self.device.map_or(NONE, Device::as_str),
            self.reason.as_str(),
        ]
    }
}

/// Counts of routing decisions, shared by all requests.
///
/// Kept per route, then as a short list of (model, device, reason)
/// counters: a route has a handful of them, so recording a decision is a
/// map lookup by the borrowed route name and a scan, with no label copied
/// except when a combination is seen for the first time.
#[derive(Debug, Default)]
pub struct DecisionCounters {
    counts: Mutex<HashMap<String, Vec<RouteCounter>>>,
}

/// One (model, device, reason) counter of a route.
#[derive(Debug)]
struct RouteCounter {
    model: String,
    device: Option<Device>,
    reason: Reason,
    count: u64,
}

impl DecisionCounters {
    /// Counts how a request to `route` ended: an answer by its model,
    /// device and reason, a shed by its reason; other errors are not
    /// decisions and are not counted. Called once per request.
    pub fn record_outcome(&self, route: &str, outcome: Result<&Answer, &GatewayError>) {
        match outcome {
            Ok(a) => self.record(route, &a.model, Some(a.device), a.reason),
            Err(GatewayError::Shed { reason, .. }) => self.record(route, NONE, None, *reason),
            Err(_) => {}
        }
    }

    /// Adds one decision.
    pub fn record(&self, route: &str, model: &str, device: Option<Device>, reason: Reason) {
        let mut counts = self.counts.lock();
        let counters = match counts.get_mut(route) {
            Some(counters) => counters,
            None => counts.entry(route.to_string()).or_default(),
        };
        match counters.iter_mut().find(|c| c.model == model && c.device == device && c.reason == reason) {
            Some(counter) => counter.count += 1,
            None => counters.push(RouteCounter { model: model.to_string(), device, reason, count: 1 }),
        }
    }

    /// Every counter, sorted by labels (a copy; the lock is held briefly).
    pub fn snapshot(&self) -> Vec<(DecisionKey, u64)> {
        let mut all: Vec<(DecisionKey, u64)> = self
            .counts
            .lock()
            .iter()
            .flat_map(|(route, counters)| {
                counters.iter().map(move |c| {
                    let key = DecisionKey {
                        route: route.clone(),
                        model: c.model.clone(),
                        device: c.device,
                        reason: c.reason,
                    };
                    (key, c.count)
                })
            })
            .collect();
        all.sort_by(|(a, _), (b, _)| a.labels().cmp(&b.labels()));
        all
    }

    /// The counters as a JSON array of `{route, model, device, reason, count}`.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.snapshot()
                .into_iter()
                .map(|(k, count)| {
                    let [route, model, device, reason] = k.labels();
                    json!({ "route": route, "model": model, "device": device, "reason": reason, "count": count })
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_label_set() {
        let c = DecisionCounters::default();
        c.record("digits", "digits-cheap", Some(Device::Cpu), Reason::CascadeConfident);
        c.record("digits", "digits-cheap", Some(Device::Cpu), Reason::CascadeConfident);
        c.record("digits", NONE, None, Reason::Shed);
        let snap = c.snapshot();
        assert_eq!(snap.len(), 2);
        assert_eq!(snap[0].0.model, "digits-cheap");
        assert_eq!(snap[0].1, 2);
        assert_eq!(c.to_json()[1]["reason"], "shed");
        assert_eq!(c.to_json()[1]["device"], NONE);
        assert_eq!(c.to_json()[0]["device"], "cpu");
        c.record("other", "digits-cheap", Some(Device::Cpu), Reason::CascadeConfident);
        let snap = c.snapshot();
        assert_eq!(snap.len(), 3);
        assert_eq!((snap[2].0.route.as_str(), snap[2].1), ("other", 1));
    }
}
