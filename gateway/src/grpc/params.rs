//! `InferParameter` maps to and from the JSON `parameters` the rest of the
//! gateway reads, so a parameter means the same over gRPC as over REST
//! (`timeout` in microseconds, `classification`, ...).
//!
//! gRPC to JSON: bool, int64, uint64 and string as themselves, a double as
//! a number (NaN and infinities, which JSON cannot hold, as null); an
//! entry without a value is left out. JSON to gRPC: booleans, integers
//! (int64, or uint64 above `i64::MAX`), other numbers as doubles, strings;
//! null, arrays and objects as their JSON text in a string.

use super::proto::infer_parameter::ParameterChoice;
use super::proto::InferParameter;
use serde_json::Value;
use std::collections::HashMap;
use switchyard_protocol::v2::Parameters;

/// A gRPC parameter map as JSON parameters.
pub fn to_json(parameters: HashMap<String, InferParameter>) -> Parameters {
    parameters
        .into_iter()
        .filter_map(|(key, p)| {
            let value = match p.parameter_choice? {
                ParameterChoice::BoolParam(b) => Value::Bool(b),
                ParameterChoice::Int64Param(i) => Value::from(i),
                ParameterChoice::Uint64Param(u) => Value::from(u),
                ParameterChoice::DoubleParam(d) => {
                    serde_json::Number::from_f64(d).map_or(Value::Null, Value::Number)
                }
                ParameterChoice::StringParam(s) => Value::String(s),
            };
            Some((key, value))
        })
        .collect()
}

/// JSON parameters as a gRPC parameter map.
pub fn from_json(parameters: &Parameters) -> HashMap<String, InferParameter> {
    parameters.iter().map(|(key, value)| (key.clone(), parameter(value))).collect()
}

/// One JSON value as a gRPC parameter.
pub fn parameter(value: &Value) -> InferParameter {
    let choice = match value {
        Value::Bool(b) => ParameterChoice::BoolParam(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => ParameterChoice::Int64Param(i),
            (None, Some(u), _) => ParameterChoice::Uint64Param(u),
            (None, None, f) => ParameterChoice::DoubleParam(f.unwrap_or(f64::NAN)),
        },
        Value::String(s) => ParameterChoice::StringParam(s.clone()),
        other => ParameterChoice::StringParam(other.to_string()),
    };
    InferParameter { parameter_choice: Some(choice) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(choice: ParameterChoice) -> InferParameter {
        InferParameter { parameter_choice: Some(choice) }
    }

    #[test]
    fn values_keep_their_type_both_ways() {
        let grpc = HashMap::from([
            ("timeout".to_string(), p(ParameterChoice::Int64Param(5000))),
            ("big".to_string(), p(ParameterChoice::Uint64Param(u64::MAX))),
            ("flag".to_string(), p(ParameterChoice::BoolParam(true))),
            ("ratio".to_string(), p(ParameterChoice::DoubleParam(0.5))),
            ("name".to_string(), p(ParameterChoice::StringParam("x".into()))),
            ("nan".to_string(), p(ParameterChoice::DoubleParam(f64::NAN))),
            ("empty".to_string(), InferParameter { parameter_choice: None }),
        ]);
        let json = to_json(grpc.clone());
        assert_eq!(json["timeout"], Value::from(5000));
        assert_eq!(json["big"], Value::from(u64::MAX));
        assert_eq!(json["flag"], Value::Bool(true));
        assert_eq!(json["ratio"], Value::from(0.5));
        assert_eq!(json["name"], Value::from("x"));
        assert_eq!(json["nan"], Value::Null);
        assert!(!json.contains_key("empty"));
        let back = from_json(&json);
        for key in ["timeout", "big", "flag", "ratio", "name"] {
            assert_eq!(back[key], grpc[key], "{key}");
        }
        assert_eq!(back["nan"], p(ParameterChoice::StringParam("null".into())));
    }
}
