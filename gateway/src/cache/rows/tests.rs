use super::*;
use crate::cache::key::ModelGeneration;
use bytes::Bytes;
use router_policies::{Device, Reason};
use std::path::Path;
use switchyard_protocol::v2::{decode_infer_request, DecodeLimits};

fn scope() -> KeyScope<'static> {
    KeyScope {
        name: "text",
        is_route: true,
        models: vec![ModelGeneration { name: "minilm", version: 1, path: Path::new("/m/minilm.onnx") }],
        policy: "Fixed",
        tenant: None,
    }
}

fn texts(items: &[&str]) -> DecodedRequest {
    let data: Vec<String> = items.iter().map(|t| format!("{t:?}")).collect();
    let body = format!(
        r#"{{"inputs":[{{"name":"text","shape":[{},1],"datatype":"BYTES","data":[{}]}}]}}"#,
        items.len(),
        data.join(",")
    );
    decode_infer_request(Bytes::from(body), None, &DecodeLimits::default()).unwrap()
}

/// An answer whose row `i` is `[values[i], values[i] * 10]`.
fn answer(values: &[f32]) -> Answer {
    let flat: Vec<f32> = values.iter().flat_map(|v| [*v, v * 10.0]).collect();
    Answer {
        model: "minilm".into(),
        version: 1,
        device: Device::Cpu,
        pool: "cpu".into(),
        reason: Reason::CascadeNoBudget,
        batch_size: values.len(),
        outputs: vec![("embedding".into(), Tensor::from_f32(vec![values.len(), 2], &flat).unwrap())],
        budget_ms: 10,
        degraded: false,
        confidence: None,
    }
}

#[test]
fn a_row_key_is_the_key_of_the_one_row_request() {
    let batch = texts(&["a", "b", "a"]);
    let keys = row_keys(&scope(), &batch, 3).unwrap();
    assert_eq!(keys[0], keys[2], "equal texts, equal keys");
    assert_ne!(keys[0], keys[1]);
    assert_eq!(keys[1], key::request_key(&scope(), &texts(&["b"])));
    let mut tenant = scope();
    tenant.tenant = Some("t1");
    assert_ne!(row_keys(&tenant, &batch, 3).unwrap()[1], keys[1], "the tenant stays in a row's key");
}

#[test]
fn only_batches_of_two_rows_or_more_with_one_leading_dimension_are_split() {
    assert_eq!(batch_rows(&texts(&["a", "b"])), Some(2));
    assert_eq!(batch_rows(&texts(&["a"])), None);
    let mut mixed = texts(&["a", "b"]);
    let other = Tensor::from_f32(vec![3, 1], &[1.0, 2.0, 3.0]).unwrap();
    mixed.inputs.push(("other".into(), other));
    assert_eq!(batch_rows(&mixed), None, "inputs disagree on the rows");
}

#[test]
fn selected_rows_form_a_smaller_batch_in_the_order_asked() {
    let batch = texts(&["a", "b", "c", "d"]);
    let picked = select_rows(&batch.inputs, 4, &[3, 1]).unwrap();
    assert_eq!(picked[0].1, texts(&["d", "b"]).inputs[0].1);
    let all = select_rows(&batch.inputs, 4, &[0, 1, 2, 3]).unwrap();
    assert_eq!(all, batch.inputs, "a full miss runs the request as sent");
}

#[test]
fn an_answer_split_into_rows_and_assembled_again_is_unchanged() {
    let whole = answer(&[1.0, 2.0, 3.0]);
    let rows: Vec<Arc<Answer>> = split_answer(&whole, 3).unwrap().into_iter().map(Arc::new).collect();
    assert_eq!(rows[1].outputs[0].1, Tensor::from_f32(vec![1, 2], &[2.0, 20.0]).unwrap());
    assert_eq!(assemble(&rows, &whole).unwrap(), whole);
}

#[test]
fn cached_rows_interleaved_with_computed_ones_keep_the_request_order() {
    // Rows 0 and 2 were cached, rows 1 and 3 computed as a batch of two.
    let computed = split_answer(&answer(&[2.0, 4.0]), 2).unwrap();
    let cached = split_answer(&answer(&[1.0, 3.0]), 2).unwrap();
    let [c0, c1] = <[Answer; 2]>::try_from(cached).unwrap();
    let [m0, m1] = <[Answer; 2]>::try_from(computed).unwrap();
    let rows = [c0, m0, c1, m1].map(Arc::new);
    let meta = answer(&[2.0, 4.0]);
    let whole = assemble(&rows, &meta).unwrap();
    assert_eq!(whole.outputs, answer(&[1.0, 2.0, 3.0, 4.0]).outputs);
    assert_eq!(whole.batch_size, 2, "the explain fields are the computed batch's");
}

#[test]
fn an_output_without_rows_cannot_be_split() {
    let mut scalar = answer(&[1.0]);
    scalar.outputs = vec![("score".into(), Tensor::from_f32(vec![], &[0.5]).unwrap())];
    let err = split_answer(&scalar, 2).unwrap_err();
    assert!(err.contains("score"), "{err}");
}

#[test]
fn the_count_header_reads_cached_over_total() {
    assert_eq!(RowsServed { cached: 4, total: 8 }.header_value(), "4/8");
}
