//! The text stage on a tiny BERT-style tokenizer (tests/fixtures,
//! vocabulary: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 the=5 cat=6 sat=7
//! on=8 mat=9 a=10 dog=11 ##s=12 .=13 run=14 ##ning=15 cafe=16).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use bytes::Bytes;

use super::*;
use crate::error::ErrorClass;
use crate::signature::{ModelSignature, TensorSpec};
use crate::tensor::{DataType, Tensor, TensorData};
use crate::text_spec::TextSpec;

fn tokenizer_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-tokenizer.json")
}

fn spec(max_length: usize, buckets: Vec<usize>) -> TextSpec {
    TextSpec { tokenizer: tokenizer_path(), max_length, buckets, input: "text".into() }
}

fn token(name: &str) -> TensorSpec {
    TensorSpec { name: name.into(), dtype: DataType::I64, shape: vec![-1, -1] }
}

fn graph(inputs: &[&str]) -> ModelSignature {
    ModelSignature {
        inputs: inputs.iter().map(|n| token(n)).collect(),
        outputs: vec![TensorSpec { name: "embedding".into(), dtype: DataType::F32, shape: vec![-1, 384] }],
    }
}

fn encoder(max_length: usize, buckets: Vec<usize>) -> TextEncoder {
    TextEncoder::new(&spec(max_length, buckets), &graph(&["input_ids", "attention_mask", "token_type_ids"]))
        .unwrap()
}

fn strings(shape: Vec<usize>, items: &[&[u8]]) -> InferenceRequest {
    let items = items.iter().map(|s| Bytes::copy_from_slice(s)).collect();
    let tensor = Tensor::new(DataType::Bytes, shape, TensorData::Strings(items)).unwrap();
    InferenceRequest::new(vec![("text".into(), tensor)])
}

fn texts(items: &[&str]) -> InferenceRequest {
    let bytes: Vec<&[u8]> = items.iter().map(|s| s.as_bytes()).collect();
    strings(vec![items.len()], &bytes)
}

/// The named token tensor as rows of i64.
fn rows(req: &InferenceRequest, name: &str) -> Vec<Vec<i64>> {
    let (_, t) = req.inputs.iter().find(|(n, _)| n == name).unwrap();
    assert_eq!(t.dtype(), DataType::I64);
    let width = t.shape()[1];
    t.to_i64_vec().unwrap().chunks(width).map(<[i64]>::to_vec).collect()
}

#[test]
fn default_buckets_are_powers_of_two_up_to_max_length() {
    assert_eq!(TextSpec::default_buckets(128), vec![16, 32, 64, 128]);
    assert_eq!(TextSpec::default_buckets(100), vec![16, 32, 64, 100]);
    assert_eq!(TextSpec::default_buckets(16), vec![16]);
    assert_eq!(TextSpec::default_buckets(10), vec![10]);
}

#[test]
fn validate_rejects_bad_buckets_and_lengths() {
    assert!(spec(12, vec![4, 8, 12]).validate().is_ok());
    assert!(spec(12, vec![8, 4, 12]).validate().is_err());
    assert!(spec(12, vec![4, 8]).validate().is_err());
    assert!(spec(12, vec![0, 12]).validate().is_err());
    assert!(spec(1, vec![1]).validate().is_err());
    let mut no_name = spec(12, vec![12]);
    no_name.input.clear();
    assert!(no_name.validate().is_err());
}

#[test]
fn a_request_is_padded_to_its_own_longest_text_only() {
    let enc = encoder(12, vec![4, 8, 12]);
    let out = enc.encode("m", texts(&["The cat sat on the mat."])).unwrap();
    assert_eq!(
        out.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["input_ids", "attention_mask", "token_type_ids"]
    );
    assert_eq!(rows(&out, "input_ids"), vec![vec![2, 5, 6, 7, 8, 5, 9, 13, 3]]);
    assert_eq!(rows(&out, "attention_mask"), vec![vec![1; 9]]);
    assert_eq!(rows(&out, "token_type_ids"), vec![vec![0; 9]]);
    // The file's own padding (Fixed 8) is replaced.
    let short = enc.encode("m", texts(&["a"])).unwrap();
    assert_eq!(rows(&short, "input_ids"), vec![vec![2, 10, 3]]);
    assert_eq!(enc.pad_values(), vec![0, 0, 0]);
}

#[test]
fn buckets_group_lengths() {
    let enc = encoder(12, vec![4, 8, 12]);
    assert_eq!([1, 4, 5, 8, 9, 12].map(|n| enc.bucket(n)), [4, 4, 8, 8, 12, 12]);
}

#[test]
fn truncates_long_text_to_max_length_keeping_special_tokens() {
    // The file's own truncation (6) is replaced by max_length.
    let enc = encoder(5, vec![5]);
    let out = enc.encode("m", texts(&["The cat sat on the mat."])).unwrap();
    assert_eq!(rows(&out, "input_ids"), vec![vec![2, 5, 6, 7, 3]]);
    assert_eq!(rows(&out, "attention_mask"), vec![vec![1; 5]]);
    let long = "the cat ".repeat(10_000);
    let out = enc.encode("m", texts(&[&long])).unwrap();
    assert_eq!(rows(&out, "input_ids"), vec![vec![2, 5, 6, 5, 3]]);
}

#[test]
fn count_tokens_counts_what_encode_feeds() {
    let enc = encoder(5, vec![5]);
    for text in ["The cat sat on the mat.", "the cat", ""] {
        let out = enc.encode("m", texts(&[text])).unwrap();
        assert_eq!(enc.count_tokens("m", text).unwrap(), rows(&out, "input_ids")[0].len(), "{text:?}");
    }
    assert_eq!(enc.count_tokens("m", &"the cat ".repeat(10_000)).unwrap(), 5, "truncated to max_length");
}

#[test]
fn empty_string_is_cls_sep() {
    let out = encoder(12, vec![4, 12]).encode("m", texts(&[""])).unwrap();
    assert_eq!(rows(&out, "input_ids"), vec![vec![2, 3]]);
    assert_eq!(rows(&out, "attention_mask"), vec![vec![1, 1]]);
}

#[test]
fn batch_of_mixed_lengths_pads_every_row_to_the_longest() {
    let enc = encoder(12, vec![4, 8, 12]);
    let out = enc.encode("m", texts(&["a", "dogs running", "", "Café zebra"])).unwrap();
    assert_eq!(
        rows(&out, "input_ids"),
        vec![
            vec![2, 10, 3, 0, 0, 0],
            vec![2, 11, 12, 14, 15, 3],
            vec![2, 3, 0, 0, 0, 0],
            vec![2, 16, 1, 3, 0, 0],
        ]
    );
    let mask = rows(&out, "attention_mask");
    assert_eq!(mask.iter().map(|r| r.iter().sum::<i64>()).collect::<Vec<_>>(), vec![3, 6, 2, 4]);
    assert_eq!(out.inputs[0].1.shape(), &[4, 6]);
}

#[test]
fn accepts_n_by_one_and_keeps_requested_outputs() {
    let enc = encoder(12, vec![12]);
    let mut req = strings(vec![2, 1], &[b"a", b"the cat"]);
    req.outputs = Some(vec!["embedding".into()]);
    let out = enc.encode("m", req).unwrap();
    assert_eq!(out.inputs[0].1.shape(), &[2, 4]);
    assert_eq!(out.outputs, Some(vec!["embedding".to_string()]));
}

#[test]
fn invalid_utf8_is_a_client_error_naming_the_element() {
    let err = encoder(12, vec![12]).encode("m", strings(vec![2], &[b"fine", b"ab\xff\xfe"])).unwrap_err();
    assert_eq!(err.class(), ErrorClass::InvalidInput);
    let text = err.to_string();
    assert!(text.contains("element 1") && text.contains("UTF-8") && text.contains("offset 2"), "{text}");
}

#[test]
fn wrong_inputs_are_client_errors() {
    let enc = encoder(12, vec![12]);
    let wrong_shape = enc.encode("m", strings(vec![1, 2], &[b"a", b"b"])).unwrap_err();
    assert!(matches!(wrong_shape, RuntimeError::WrongShape { .. }), "{wrong_shape}");
    let empty = enc.encode("m", strings(vec![0], &[])).unwrap_err();
    assert!(matches!(empty, RuntimeError::WrongShape { .. }), "{empty}");
    let numbers = InferenceRequest::new(vec![("text".into(), Tensor::from_f32(vec![1], &[1.0]).unwrap())]);
    assert!(matches!(enc.encode("m", numbers).unwrap_err(), RuntimeError::WrongDtype { .. }));
    let mut other = texts(&["a"]);
    other.inputs[0].0 = "input_ids".into();
    assert!(matches!(enc.encode("m", other).unwrap_err(), RuntimeError::UnknownInput { .. }));
    assert!(matches!(
        enc.encode("m", InferenceRequest::default()).unwrap_err(),
        RuntimeError::MissingInput { .. }
    ));
    let mut twice = texts(&["a"]);
    twice.inputs.push(twice.inputs[0].clone());
    assert!(matches!(enc.encode("m", twice).unwrap_err(), RuntimeError::DuplicateInput { .. }));
    for e in [wrong_shape, empty] {
        assert_eq!(e.class(), ErrorClass::InvalidInput);
    }
}

#[test]
fn feeds_only_the_token_tensors_the_graph_takes() {
    let enc = TextEncoder::new(&spec(12, vec![12]), &graph(&["attention_mask", "input_ids"])).unwrap();
    let out = enc.encode("m", texts(&["a"])).unwrap();
    assert_eq!(
        out.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["attention_mask", "input_ids"]
    );
}

#[test]
fn graphs_that_are_not_text_models_are_refused() {
    let s = spec(12, vec![12]);
    assert!(TextEncoder::new(&s, &graph(&["input_ids"])).unwrap_err().contains("attention_mask"));
    assert!(TextEncoder::new(&s, &graph(&["input_ids", "attention_mask", "pixels"]))
        .unwrap_err()
        .contains("pixels"));
    let mut floats = graph(&["input_ids", "attention_mask"]);
    floats.inputs[0].dtype = DataType::F32;
    assert!(TextEncoder::new(&s, &floats).unwrap_err().contains("INT64"));
    let mut missing = s.clone();
    missing.tokenizer = PathBuf::from("/nonexistent/tokenizer.json");
    assert!(TextEncoder::new(&missing, &graph(&["input_ids", "attention_mask"]))
        .unwrap_err()
        .contains("/nonexistent"));
}

#[test]
fn public_signature_is_one_bytes_input_and_the_graph_outputs() {
    let g = graph(&["input_ids", "attention_mask"]);
    let public = TextEncoder::new(&spec(12, vec![12]), &g).unwrap().public_signature(&g);
    assert_eq!(
        public.inputs,
        vec![TensorSpec { name: "text".into(), dtype: DataType::Bytes, shape: vec![-1, 1] }]
    );
    assert_eq!(public.outputs, g.outputs);
}

#[test]
fn tokens_past_the_limit_are_too_large_before_the_rest_is_tokenised() {
    let enc = encoder(12, vec![12]);
    // "the cat sat" = [CLS] the cat sat [SEP]: 5 tokens per text.
    let ok = enc.encode_within("m", texts(&["the cat sat", "the cat sat"]), 10).unwrap();
    assert_eq!(rows(&ok, "input_ids").len(), 2);
    let e = enc.encode_within("m", texts(&["the cat sat", "the cat sat", "the"]), 10).unwrap_err();
    assert_eq!((e.class(), e.label()), (ErrorClass::TooLarge, "too_large"));
    assert!(e.to_string().contains("13 tokens") && e.to_string().contains("limits.max_tokens"), "{e}");
    // Truncated tokens do not count: 200 words are 12 tokens.
    let long = "the ".repeat(200);
    assert!(enc.encode_within("m", texts(&[&long]), 12).is_ok());
}

#[test]
fn only_a_prefix_of_a_long_text_is_tokenised_cut_at_whitespace() {
    assert_eq!(prefix("short", 10), "short");
    assert_eq!(prefix("the cat sat on", 10), "the cat");
    assert_eq!(prefix("unbreakable words", 5), "unbre");
    assert_eq!(prefix("café", 4), "caf", "never inside a character");
    let enc = encoder(12, vec![12]);
    let huge = "the cat ".repeat(100_000);
    let out = enc.encode("m", texts(&[&huge, &"the cat ".repeat(20)])).unwrap();
    let ids = rows(&out, "input_ids");
    assert_eq!(ids[0], ids[1], "a cut text encodes like any text past max_length");
}

#[test]
fn token_ids_become_the_text_they_spell_with_or_without_special_tokens() {
    let enc = encoder(128, vec![16, 128]);
    let plain = texts(&["The cat sat on the mat. A dog sat"]);
    let ids: Vec<u32> =
        rows(&enc.encode("m", plain).unwrap(), "input_ids")[0].iter().map(|&v| v as u32).collect();
    let text = enc.text_of_ids(&ids).unwrap();
    let again = rows(&enc.encode("m", texts(&[&text])).unwrap(), "input_ids")[0].clone();
    assert_eq!(again.iter().map(|&v| v as u32).collect::<Vec<_>>(), ids);
    // Without [CLS] and [SEP] the same text comes back.
    assert_eq!(enc.text_of_ids(&ids[1..ids.len() - 1]).unwrap(), text);
}

#[test]
fn token_ids_of_another_tokenizer_are_refused() {
    let enc = encoder(128, vec![16, 128]);
    let outside = enc.text_of_ids(&[100_257, 9906]).unwrap_err();
    assert!(outside.contains("outside the model's vocabulary"), "{outside}");
    assert!(enc.text_of_ids(&[]).unwrap_err().contains("no token ids"));
    assert!(enc.text_of_ids(&[2, 3]).unwrap_err().contains("no token ids"));
    // "##s" alone is a word-piece no text tokenises to at its start.
    let piece = tokenizers::Tokenizer::from_file(tokenizer_path()).unwrap().token_to_id("##s").unwrap();
    let odd = enc.text_of_ids(&[piece]).unwrap_err();
    assert!(odd.contains("do not tokenise back"), "{odd}");
}

#[test]
fn token_ids_past_max_length_are_truncated_like_text() {
    let long = texts(&["the cat sat on the mat . the dog sat on a mat ."]);
    let full: Vec<u32> = rows(&encoder(128, vec![128]).encode("m", long).unwrap(), "input_ids")[0]
        .iter()
        .map(|&v| v as u32)
        .collect();
    assert!(full.len() > 8);
    assert!(encoder(8, vec![8]).text_of_ids(&full).is_ok());
    assert!(encoder(128, vec![128]).text_of_ids(&full[..full.len() - 1]).is_ok());
}
