//! Text models through the repository: the tokenizer stage in front of a
//! real ONNX Runtime session. `token-stats.onnx` reports, per row, the sum
//! of the token ids, the number of real tokens, the padded length and the
//! sum of the type ids, so the tensors the stage built are visible in the
//! output. The real MiniLM models (fetched by models/text_models.py) are
//! checked at the end, skipped with a note when they are not there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use bytes::Bytes;
use common::*;
use switchyard_runtime::{DataType, InferenceRequest, ModelSpec, RuntimeError, Tensor, TensorData, TextSpec};

fn text_spec(name: &str, model: PathBuf, tokenizer: PathBuf, max_length: usize) -> ModelSpec {
    let mut s = spec(name, "unused", 16, 50, 64);
    s.path = model;
    s.text = Some(TextSpec {
        tokenizer,
        max_length,
        buckets: TextSpec::default_buckets(max_length),
        input: "text".into(),
    });
    s
}

fn stats_model(max_length: usize) -> ModelSpec {
    text_spec("stats", fixture("token-stats.onnx"), fixture("tiny-tokenizer.json"), max_length)
}

fn texts(items: &[&str]) -> InferenceRequest {
    let strings: Vec<Bytes> = items.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect();
    let tensor = Tensor::new(DataType::Bytes, vec![strings.len()], TensorData::Strings(strings)).unwrap();
    InferenceRequest::new(vec![("text".into(), tensor)])
}

/// Rows of `[sum of ids, real tokens, padded length, sum of type ids]`.
fn stats(resp: &switchyard_runtime::InferenceResponse) -> Vec<[f32; 4]> {
    let v = resp.output("stats").unwrap().to_f32_vec().unwrap();
    v.chunks(4).map(|c| [c[0], c[1], c[2], c[3]]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_is_the_public_bytes_contract() {
    let repo = repo(vec![stats_model(32)]);
    assert!(repo.failures().is_empty(), "{:?}", repo.failures());
    let sig = repo.signature("stats").unwrap();
    assert_eq!(sig.inputs.len(), 1);
    assert_eq!((sig.inputs[0].name.as_str(), sig.inputs[0].dtype), ("text", DataType::Bytes));
    assert_eq!(sig.inputs[0].shape, vec![-1, 1]);
    assert_eq!(sig.outputs[0].name, "stats");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenises_pads_and_runs() {
    let repo = repo(vec![stats_model(32)]);
    let resp = within(repo.infer("stats", None, texts(&["The cat sat on the mat.", "a", ""]))).await.unwrap();
    // the cat sat on the mat . = 5+6+7+8+5+9+13, plus [CLS]=2 and [SEP]=3.
    // Every row is padded to the request's longest text (9 tokens).
    assert_eq!(stats(&resp), vec![[58.0, 9.0, 9.0, 0.0], [15.0, 3.0, 9.0, 0.0], [5.0, 2.0, 9.0, 0.0]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_text_is_truncated_off_the_async_thread() {
    let repo = repo(vec![stats_model(32)]);
    // 40 KB of text: over the inline limit, so tokenised on the blocking pool.
    let long = "dogs running ".repeat(3_000);
    let resp = within(repo.infer("stats", None, texts(&[&long]))).await.unwrap();
    let [ids, tokens, length, _] = stats(&resp)[0];
    assert_eq!((tokens, length), (32.0, 32.0));
    // [CLS] + 30 word pieces of "dog ##s run ##ning ..." + [SEP]
    assert_eq!(ids, 2.0 + (11.0 + 12.0 + 14.0 + 15.0) * 7.0 + 11.0 + 12.0 + 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_batch_within_their_length_bucket() {
    let repo = repo(vec![stats_model(64)]);
    let short = |s: &str| texts(&[s]);
    let long = "the cat sat on the mat ".repeat(4); // 24 words + 2 = 26 tokens: bucket 32
    let results = run_paused_results(
        &repo,
        "stats",
        vec![short("a"), texts(&[&long]), short("the cat"), short("dogs")],
    )
    .await;
    let batch_sizes: Vec<usize> = results.iter().map(|r| r.as_ref().unwrap().batch_size).collect();
    assert_eq!(batch_sizes, vec![3, 1, 3, 3], "the three short texts share a batch, the long one runs alone");
    // The short ones (3, 4 and 4 tokens: bucket 16) are padded to their
    // batch's longest, 4; the long one (26: bucket 32) runs unpadded.
    let lengths: Vec<f32> = results.iter().map(|r| stats(r.as_ref().unwrap())[0][2]).collect();
    assert_eq!(lengths, vec![4.0, 26.0, 4.0, 4.0]);
    let tokens: Vec<f32> = results.iter().map(|r| stats(r.as_ref().unwrap())[0][1]).collect();
    assert_eq!(tokens, vec![3.0, 26.0, 4.0, 4.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_budget_narrows_each_buckets_batches_by_its_length() {
    let mut spec = stats_model(64);
    spec.batching.max_batch_tokens = Some(32); // bucket 16: 2 texts per batch; bucket 32: 1
    let repo = repo(vec![spec]);
    let long = "the cat sat on the mat ".repeat(4); // 26 tokens: bucket 32
    let mut reqs: Vec<InferenceRequest> =
        ["a", "b", "the cat", "dogs", "c"].iter().map(|s| texts(&[s])).collect();
    reqs.push(texts(&[&long]));
    reqs.push(texts(&[&long]));
    let results = run_paused_results(&repo, "stats", reqs).await;
    let batch_sizes: Vec<usize> = results.iter().map(|r| r.as_ref().unwrap().batch_size).collect();
    let (short, long) = batch_sizes.split_at(5);
    assert!(short.iter().all(|&n| n <= 2), "32 tokens / bucket 16 = 2 texts per batch: {batch_sizes:?}");
    assert!(short.iter().filter(|&&n| n == 2).count() >= 3, "and they do share: {batch_sizes:?}");
    assert_eq!(long, [1, 1], "32 tokens / bucket 32 = 1 text per batch");
    // Each answer is still its own row's.
    let tokens: Vec<f32> = results.iter().map(|r| stats(r.as_ref().unwrap())[0][1]).collect();
    assert_eq!(tokens, vec![3.0, 3.0, 4.0, 4.0, 3.0, 26.0, 26.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_mixing_lengths_runs_one_group_per_bucket_in_its_row_order() {
    let repo = repo(vec![stats_model(64)]);
    let long = "the cat sat on the mat ".repeat(4); // 26 tokens: bucket 32; the others bucket 16
    let resp = within(repo.infer("stats", None, texts(&["a", &long, "the cat", "dogs"]))).await.unwrap();
    let rows = stats(&resp);
    // Each row padded to its own group's longest (4 and 26), not all to 26,
    // and the answer in the request's row order.
    assert_eq!(rows.iter().map(|r| r[2]).collect::<Vec<_>>(), vec![4.0, 26.0, 4.0, 4.0]);
    assert_eq!(rows.iter().map(|r| r[1]).collect::<Vec<_>>(), vec![3.0, 26.0, 4.0, 4.0]);
    assert_eq!(rows[0], [15.0, 3.0, 4.0, 0.0], "the row of \"a\" is its own");
    let alone = within(repo.infer("stats", None, texts(&[&long]))).await.unwrap();
    assert_eq!(rows[1], stats(&alone)[0], "the long row as if sent alone");
    let pool = &repo.stats().models.into_iter().find(|m| &*m.name == "stats").unwrap().pools[0];
    assert_eq!(pool.requests, 3, "two groups for the mixed request, one for the long text alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_text_is_a_client_error() {
    let repo = repo(vec![stats_model(32)]);
    let bad =
        Tensor::new(DataType::Bytes, vec![1], TensorData::Strings(vec![Bytes::from_static(b"\xc3\x28")]))
            .unwrap();
    let err = repo.infer("stats", None, InferenceRequest::new(vec![("text".into(), bad)])).await.unwrap_err();
    assert!(matches!(err, RuntimeError::InvalidData { .. }), "{err}");
    let ids = Tensor::new(DataType::I64, vec![1, 1], TensorData::Fixed(Bytes::from(vec![0u8; 8]))).unwrap();
    let err =
        repo.infer("stats", None, InferenceRequest::new(vec![("input_ids".into(), ids)])).await.unwrap_err();
    assert!(matches!(err, RuntimeError::UnknownInput { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_tokenizer_fails_the_model_with_its_path() {
    let mut s = stats_model(32);
    if let Some(t) = s.text.as_mut() {
        t.tokenizer = PathBuf::from("/nonexistent/tokenizer.json");
    }
    let repo = repo(vec![s]);
    let failures = repo.failures();
    assert_eq!(failures.len(), 1);
    assert!(failures[0].1.to_string().contains("/nonexistent/tokenizer.json"), "{}", failures[0].1);
    assert!(repo.infer("stats", None, texts(&["a"])).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_minilm_models_embed_text() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models");
    let tokenizer = dir.join("minilm-tokenizer.json");
    let names = ["minilm-l3", "minilm-l6"];
    let present = tokenizer.is_file() && names.iter().all(|n| dir.join(format!("{n}.onnx")).is_file());
    if !present {
        eprintln!("skipping: the MiniLM models are not fetched (run models/text_models.py)");
        return;
    }
    let specs =
        names.iter().map(|n| text_spec(n, dir.join(format!("{n}.onnx")), tokenizer.clone(), 128)).collect();
    let repo = repo(specs);
    assert!(repo.failures().is_empty(), "{:?}", repo.failures());
    let sentences = [
        "A man is playing a guitar.",
        "Someone plays an instrument.",
        "The stock market fell sharply today.",
    ];
    for name in names {
        let resp = within(repo.infer(name, None, texts(&sentences))).await.unwrap();
        let emb = resp.output("embedding").unwrap();
        assert_eq!(emb.shape(), &[3, 384]);
        let v = emb.to_f32_vec().unwrap();
        let rows: Vec<&[f32]> = v.chunks(384).collect();
        for r in &rows {
            let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "{name}: norm {norm}");
        }
        let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let (paraphrase, unrelated) = (cos(rows[0], rows[1]), cos(rows[0], rows[2]));
        assert!(paraphrase > unrelated + 0.2, "{name}: paraphrase {paraphrase} vs unrelated {unrelated}");
    }
}
