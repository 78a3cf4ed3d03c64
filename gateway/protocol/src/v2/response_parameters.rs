//! The `parameters` object of an infer response: how the answer was
//! reached ([`Explanation`]: model, version, device, pool, reason, batch
//! size, budget), typed and written in place by the encoder, and whatever
//! else a front end adds (a stream's `stage`, gRPC's `cache`).
//!
//! Why typed: every answered request carries the explanation, and building
//! it as a JSON map cost about ten allocations per request (seven owned
//! keys, the values, the map's nodes) only for the encoder to walk the map
//! again. The typed form costs the two strings it owns.

use serde::Serialize;
use serde_json::Value;

use super::request::Parameters;

/// How an answer was reached, as the response's `switchyard_*` parameters.
/// Built by `Answer::explain`; the labels are the policies' own
/// (`Device::as_str`, `Reason::as_str`). The fields stand in the order of
/// their keys, so the object is written as a JSON map sorted by key would
/// be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `switchyard_batch_size`: rows in the batch that ran it.
    #[serde(rename = "switchyard_batch_size")]
    pub batch_size: usize,
    /// `switchyard_budget_ms`: the request's latency budget.
    #[serde(rename = "switchyard_budget_ms")]
    pub budget_ms: u64,
    /// `switchyard_device`: the pool's device label.
    #[serde(rename = "switchyard_device")]
    pub device: &'static str,
    /// `switchyard_model`: the model that produced the outputs.
    #[serde(rename = "switchyard_model")]
    pub model: String,
    /// `switchyard_model_version`.
    #[serde(rename = "switchyard_model_version")]
    pub version: u64,
    /// `switchyard_pool`: the pool's name from the config.
    #[serde(rename = "switchyard_pool")]
    pub pool: String,
    /// `switchyard_reason`: why this model and pool were chosen.
    #[serde(rename = "switchyard_reason")]
    pub reason: &'static str,
}

/// A response's `parameters`: the explanation, when the answer has one,
/// then the other entries. Written as one JSON object; an entry of
/// `extra` under an explanation key would be written twice, so front ends
/// add only their own keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseParameters {
    /// How the answer was reached; `None` for responses that are not a
    /// routed answer (an upstream's, a test's).
    #[serde(flatten)]
    pub explanation: Option<Explanation>,
    /// Everything else, in key order.
    #[serde(flatten)]
    pub extra: Parameters,
}

impl ResponseParameters {
    /// Parameters that explain an answer and say nothing else yet.
    pub fn explaining(explanation: Explanation) -> ResponseParameters {
        ResponseParameters { explanation: Some(explanation), extra: Parameters::new() }
    }

    /// Adds (or replaces) an entry beside the explanation.
    pub fn insert(&mut self, key: String, value: Value) {
        self.extra.insert(key, value);
    }

    /// True when there is nothing to write (the encoder then leaves
    /// `parameters` out).
    pub fn is_empty(&self) -> bool {
        self.explanation.is_none() && self.extra.is_empty()
    }

    /// Every entry as a JSON map: for front ends that convert them one by
    /// one (gRPC's `InferParameter`s).
    pub fn to_map(&self) -> Parameters {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // Unreachable: the fields are strings and integers, written
            // as one object.
            _ => self.extra.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explanation() -> Explanation {
        Explanation {
            model: "digits-cheap".into(),
            version: 3,
            device: "cpu",
            pool: "cpu-a".into(),
            reason: "budget",
            batch_size: 2,
            budget_ms: 50,
        }
    }

    #[test]
    fn written_as_the_map_of_the_same_entries() {
        let mut params = ResponseParameters::explaining(explanation());
        params.insert("stage".into(), "final".into());
        params.insert("confidence".into(), Value::Null);
        let typed: Value = serde_json::to_value(&params).unwrap();
        assert_eq!(typed, Value::Object(params.to_map()));
        assert_eq!(typed["switchyard_model"], "digits-cheap");
        assert_eq!(typed["switchyard_model_version"], 3);
        assert_eq!(typed["switchyard_device"], "cpu");
        assert_eq!(typed["switchyard_pool"], "cpu-a");
        assert_eq!(typed["switchyard_reason"], "budget");
        assert_eq!(typed["switchyard_batch_size"], 2);
        assert_eq!(typed["switchyard_budget_ms"], 50);
        assert_eq!(typed.as_object().unwrap().len(), 9);
    }

    #[test]
    fn the_explanation_alone_is_written_in_key_order() {
        let text = serde_json::to_string(&ResponseParameters::explaining(explanation())).unwrap();
        let sorted = serde_json::to_string(&ResponseParameters::explaining(explanation()).to_map()).unwrap();
        assert_eq!(text, sorted);
    }

    #[test]
    fn the_map_holds_both_parts_and_empty_means_nothing_at_all() {
        let mut params = ResponseParameters::default();
        assert!(params.is_empty());
        params.insert("cache".into(), "miss".into());
        assert!(!params.is_empty());
        assert_eq!(params.to_map().get("cache"), Some(&Value::from("miss")));
        assert_eq!(params.to_map().get("switchyard_pool"), None);
        params.explanation = Some(explanation());
        assert_eq!(params.to_map().get("switchyard_pool"), Some(&Value::from("cpu-a")));
        assert_eq!(params.to_map().get("nothing"), None);
    }
}
