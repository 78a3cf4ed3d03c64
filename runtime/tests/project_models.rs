//! The project's generated models (models/*.onnx, built by
//! models/generate.py) through the runtime, batched. Skipped, with a note,
//! when they have not been generated.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::*;
use switchyard_runtime::DataType;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_models_load_and_batch() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models");
    let names = ["digits-cheap", "digits-heavy", "synth-heavy", "synth-wide"];
    let mut specs = Vec::new();
    for name in names {
        let path = dir.join(format!("{name}.onnx"));
        if !path.is_file() {
            eprintln!("skipping {name}: {} not generated (run models/generate.py)", path.display());
            continue;
        }
        let mut s = spec(name, "unused", 8, 50, 64);
        s.path = path;
        specs.push(s);
    }
    if specs.is_empty() {
        return;
    }
    let models: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let repo = repo(specs);
    assert!(repo.failures().is_empty(), "{:?}", repo.failures());
    for model in &models {
        let sig = repo.signature(model).unwrap();
        assert_eq!((sig.inputs[0].name.as_str(), sig.inputs[0].dtype), ("X", DataType::F32));
        let out = run_paused_results(&repo, model, vec![classify(3, 1), classify(5, 2)]).await;
        for (resp, rows) in out.into_iter().zip([3, 5]) {
            let resp = resp.unwrap();
            assert_eq!(resp.batch_size, 8, "{model}");
            assert_eq!(resp.output("label").unwrap().shape(), &[rows]);
            let probs = resp.output("probabilities").unwrap().to_f32_vec().unwrap();
            assert_eq!(probs.len(), rows * 10);
            for row in probs.chunks(10) {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{model}: {row:?}");
            }
        }
    }
}
