//! Request decoding reads an input's `data` in the same pass as the rest
//! of the request when `name`, `datatype` and `shape` come first
//! ([`crate::v2::raw_request`]), and later otherwise: both must give the same
//! tensor, or the same error, for every input.

use super::decode_json as decode;
use crate::v2::error::V2Error;

/// `(datatype, shape, data, parameters)` of one input.
type Case = (&'static str, &'static str, &'static str, &'static str);

/// Valid and invalid inputs: every datatype family, nested and flat
/// layouts, element errors, null data, conflicting binary data.
fn cases() -> Vec<Case> {
    vec![
        ("FP32", "[1,4]", "[0.5,1,2.25,-3]", "{}"),
        ("FP32", "[2,2]", "[[1,2],[3,4]]", "{}"),
        ("FP16", "[2]", "[0.5,65504]", "{}"),
        ("INT64", "[3]", "[1,-2,3.0]", "{}"),
        ("UINT8", "[2]", "[1,300]", "{}"),
        ("BOOL", "[2]", "[true,1]", "{}"),
        ("BYTES", "[2]", r#"["a","\u00e9"]"#, "{}"),
        ("FP32", "[3]", "[1,2]", "{}"),
        ("FP32", "[2]", "[1,2,3,4,5]", "{}"),
        ("FP32", "[2,2]", "[[1,2,3],[4]]", "{}"),
        ("FP32", "[2,2]", "[[1,2],3,4]", "{}"),
        ("FP32", "[2]", "[[1],[2]]", "{}"),
        ("FP32", "[2]", "[1,null]", "{}"),
        ("FP32", "[2]", r#"[1,{"a":[1,2]}]"#, "{}"),
        ("FP32", "[1]", "3", "{}"),
        ("FP32", "[]", "3", "{}"),
        ("FP32", "[1]", "null", "{}"),
        ("FP32", "[1]", "[1e39]", "{}"),
        ("FP32", "[2]", "[1,2]", r#"{"binary_data_size":8}"#),
        ("FP32", "[2]", "[1,2]", r#"{"custom":"x"}"#),
        ("FP32", "[2]", "[1,2]", "null"),
        ("FLOAT", "[2]", "[1,2]", "{}"),
        ("FP32", "[-1]", "[1]", "{}"),
        ("FP32", "[4000000000,4000000000,4000000000]", "[1]", "{}"),
    ]
}

#[test]
fn data_first_and_data_last_decode_alike() {
    for (datatype, shape, data, parameters) in cases() {
        let last = format!(
            r#"{{"id":"r","inputs":[{{"name":"x","datatype":"{datatype}","shape":{shape},"parameters":{parameters},"data":{data}}}]}}"#
        );
        let first = format!(
            r#"{{"id":"r","inputs":[{{"data":{data},"parameters":{parameters},"shape":{shape},"datatype":"{datatype}","name":"x"}}]}}"#
        );
        let (eager, deferred) = (decode(&last), decode(&first));
        assert_eq!(format!("{eager:?}"), format!("{deferred:?}"), "{datatype} {shape} {data} {parameters}");
    }
}

#[test]
fn an_error_in_data_is_reported_after_the_request_fields_before_it() {
    // The request's own `id` is checked before any input: a bad tensor in
    // the first input does not hide it, although the reader decoded the
    // tensor first.
    let err = decode(r#"{"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[300]}],"id":7}"#)
        .unwrap_err();
    assert!(matches!(err, V2Error::InvalidField { field: "id", .. }), "{err}");
    // And a malformed second input is reported after the first input's
    // tensor error only if the first one is fine.
    let err = decode(
        r#"{"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[300]},{"name":"y","datatype":"NOPE","shape":[1],"data":[1]}]}"#,
    )
    .unwrap_err();
    assert!(matches!(err, V2Error::InvalidElement { index: 0, .. }), "{err}");
}

#[test]
fn a_field_given_twice_in_an_input_names_the_input_and_the_field() {
    let err = decode(r#"{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"shape":[1]}]}"#)
        .unwrap_err();
    let V2Error::InvalidField { field: "inputs", context, reason } = &err else { panic!("{err:?}") };
    assert_eq!(context, "inputs[0]");
    assert!(reason.contains("duplicate field `shape`"), "{reason}");
    let err = decode(r#"{"inputs":[],"inputs":[]}"#).unwrap_err();
    assert!(matches!(&err, V2Error::InvalidJson(m) if m.contains("duplicate field `inputs`")), "{err:?}");
}

#[test]
fn a_syntax_error_after_a_decoded_tensor_is_a_json_error() {
    let err =
        decode(r#"{"inputs":[{"name":"x","datatype":"UINT8","shape":[1],"data":[300]}],"id":}"#).unwrap_err();
    assert!(matches!(err, V2Error::InvalidJson(_)), "{err:?}");
}
