//! A traffic record as one JSON line: what it holds, and the size bounds
//! the writer relies on.

use super::*;
use bytes::Bytes;
use switchyard_runtime::tensor::DataType;

fn answer() -> Answer {
    Answer {
        model: "digits-cheap".into(),
        version: 1,
        device: Device::Cpu,
        pool: "cpu".into(),
        reason: Reason::CascadeConfident,
        batch_size: 3,
        outputs: Vec::new(),
        budget_ms: 50,
        degraded: false,
        confidence: Some(0.875),
    }
}

fn decision() -> Decision {
    Decision::from(&answer())
}

fn record(ending: Ending) -> TrafficRecord {
    let x = Tensor::new(
        DataType::F32,
        vec![1, 2],
        TensorData::Fixed(Bytes::from_static(&[0, 0, 128, 63, 0, 0, 0, 64])),
    )
    .unwrap();
    let words =
        Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"hi")])).unwrap();
    TrafficRecord {
        route: "digits".into(),
        arrived_ms: 1_764_000_000_000,
        protocol: "rest",
        id: Some("r-1".into()),
        tenant: Some(hash_tenant("team-a")),
        inputs: vec![("X".into(), x), ("text".into(), words)],
        outputs: vec!["label".into()],
        parameters: serde_json::Map::new(),
        budget_ms: 50,
        latency_us: 812,
        ending,
    }
}

#[test]
fn an_answered_line_holds_the_inputs_and_the_decision() {
    let line = record(Ending::Answered { answer: decision(), cache: "miss" }).to_line();
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
    let v: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(v["v"], 1);
    assert_eq!(v["inputs"][0]["shape"], json!([1, 2]));
    let engine = base64::engine::general_purpose::STANDARD;
    let raw = engine.decode(v["inputs"][0]["data_b64"].as_str().unwrap()).unwrap();
    assert_eq!(raw, [0, 0, 128, 63, 0, 0, 0, 64]);
    let text = engine.decode(v["inputs"][1]["data_b64"].as_str().unwrap()).unwrap();
    assert_eq!(text, [2, 0, 0, 0, b'h', b'i']);
    assert_eq!(v["answer"]["model"], "digits-cheap");
    assert_eq!(v["answer"]["confidence"], 0.875);
    assert_eq!(v["answer"]["cache"], "miss");
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["tenant"].as_str().unwrap().len(), 16);
    assert_ne!(v["tenant"], "team-a");
}

#[test]
fn a_failed_line_holds_the_status() {
    let v: Value =
        serde_json::from_slice(&record(Ending::Failed { status: 429, label: "shed" }).to_line()).unwrap();
    assert_eq!(v["answer"], Value::Null);
    assert_eq!(v["error"], json!({ "status": 429, "error": "shed" }));
}

fn with_inputs(inputs: Vec<(String, Tensor)>, parameters: serde_json::Map<String, Value>) -> TrafficRecord {
    TrafficRecord {
        route: "r".into(),
        arrived_ms: 1,
        protocol: "rest",
        id: Some("an-id".into()),
        tenant: None,
        inputs,
        outputs: Vec::new(),
        parameters,
        budget_ms: 1,
        latency_us: 1,
        ending: Ending::Failed { status: 400, label: "bad_request" },
    }
}

#[test]
fn the_line_floor_never_passes_the_line() {
    let fixed =
        Tensor::new(DataType::U8, vec![1000], TensorData::Fixed(Bytes::from(vec![7u8; 1000]))).unwrap();
    let strings = Tensor::new(
        DataType::Bytes,
        vec![3],
        TensorData::Strings(vec![Bytes::from_static(b"\"\n"), Bytes::new(), Bytes::from(vec![b'x'; 500])]),
    )
    .unwrap();
    let mut parameters = serde_json::Map::new();
    parameters.insert("k\u{1}".into(), json!({"nested": ["\u{0}\u{0}", 1, 2.5, null]}));
    for inputs in
        [vec![], vec![("a".to_string(), fixed.clone())], vec![("a".into(), fixed), ("s".into(), strings)]]
    {
        let record = with_inputs(inputs, parameters.clone());
        let line = record.to_line().len();
        let floor = record.line_floor();
        assert!(floor <= line, "{floor} > {line}");
        assert!(floor * 2 > line || line < 1024, "a useful bound: {floor} for {line}");
    }
}

#[test]
fn a_detached_record_holds_its_own_copy_and_weighs_it() {
    let body = Bytes::from(vec![1u8; 1 << 20]);
    let slice = body.slice(100..164);
    let x = Tensor::new(DataType::F32, vec![1, 16], TensorData::Fixed(slice)).unwrap();
    let record = with_inputs(vec![("X".into(), x.clone())], serde_json::Map::new()).detach();
    let TensorData::Fixed(copy) = record.inputs[0].1.data() else { panic!("fixed") };
    assert_ne!(copy.as_ptr(), body.as_ptr().wrapping_add(100), "a copy, not a slice of the body");
    assert_eq!(record.inputs[0].1, x);
    let held = record.held_bytes();
    assert!((64..1024).contains(&held), "{held}");
}
