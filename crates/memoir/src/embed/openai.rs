//! `openai`: any OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM,
//! text-embeddings-inference, llama.cpp, Ollama, LM Studio, ...).
//!
//! - `POST {base_url}/embeddings` with `{"model", "input": [...],
//!   "encoding_format": "float"}` plus `"dimensions"` when
//!   [`OpenAiConfig::dimensions`] is set; the API key is read from the
//!   environment variable named by [`OpenAiConfig::api_key_env`] and sent as
//!   `Authorization: Bearer ...`.
//! - Inputs are sent in batches of [`OpenAiConfig::batch_size`]; the answers
//!   are put back in input order by their `index`.
//! - 429 and 5xx answers and transport failures (refused connection,
//!   timeout) are retried up to [`OpenAiConfig::max_retries`] times with
//!   exponential backoff (jittered), waiting what `Retry-After` /
//!   `retry-after-ms` asks for when it is given. A `Retry-After` longer than
//!   [`OpenAiConfig::max_retry_after`], or a 429 that outlasts the retries,
//!   becomes [`EmbeddingError::RateLimited`]. Other 4xx answers are not
//!   retried (400/413/422 are [`EmbeddingError::BadInput`]).
//! - Matryoshka models (Qwen3-Embedding, text-embedding-3-*, nomic):
//!   [`OpenAiConfig::truncate_to`] keeps the first `n` components client-side
//!   and renormalises; every vector is L2-normalised anyway, and its width is
//!   checked ([`EmbeddingError::DimensionMismatch`]).
//! - Asymmetric models: [`OpenAiConfig::query_prefix`] and
//!   [`OpenAiConfig::document_prefix`] are prepended to queries and documents
//!   (Qwen3's instruction, e5's `query: ` / `passage: `).
//!
//! Requests use `ureq` (blocking, rustls) on the calling thread.

use std::time::Duration;

use super::{l2_normalize, EmbeddingError, EmbeddingProvider};

/// The Qwen3-Embedding query instruction used by [`OpenAiConfig::qwen3`].
pub const QWEN3_QUERY_PREFIX: &str =
    "Instruct: Given a question about an earlier conversation, retrieve the passages that answer it\nQuery: ";

/// Settings of an [`OpenAiEmbedder`].
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// API base, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`;
    /// `/embeddings` is appended unless it already ends with it.
    pub base_url: String,
    /// Model name sent in each request.
    pub model: String,
    /// Name of the environment variable holding the API key; `None` sends no
    /// `Authorization` header (local servers).
    pub api_key_env: Option<String>,
    /// The `dimensions` request parameter (server-side Matryoshka truncation).
    pub dimensions: Option<usize>,
    /// Keep only the first `n` components client-side, then renormalise.
    pub truncate_to: Option<usize>,
    /// The model's native output width, when neither `dimensions` nor
    /// `truncate_to` says it and the model is not a known OpenAI model.
    pub native_dims: Option<usize>,
    /// Prepended to queries ([`EmbeddingProvider::embed_query`]).
    pub query_prefix: String,
    /// Prepended to documents ([`EmbeddingProvider::embed`] and `embed_batch`).
    pub document_prefix: String,
    /// Most inputs per request.
    pub batch_size: usize,
    /// Retries after the first attempt (429, 5xx, transport errors).
    pub max_retries: u32,
    /// First backoff; doubled after each retry, jittered.
    pub initial_backoff: Duration,
    /// Longest backoff between retries.
    pub max_backoff: Duration,
    /// Longest `Retry-After` we are willing to sleep through; longer asks
    /// return [`EmbeddingError::RateLimited`] at once.
    pub max_retry_after: Duration,
    /// Whole-request timeout (connect, send, receive).
    pub timeout: Duration,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            model: "text-embedding-3-small".into(),
            api_key_env: Some("OPENAI_API_KEY".into()),
            dimensions: None,
            truncate_to: None,
            native_dims: None,
            query_prefix: String::new(),
            document_prefix: String::new(),
            batch_size: 64,
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            timeout: Duration::from_secs(60),
        }
    }
}

impl OpenAiConfig {
    /// A server at `base_url` serving `model`, other settings default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            ..Self::default()
        }
    }

    /// Qwen3-Embedding-0.6B served locally (vLLM, TEI, llama.cpp): no API key,
    /// the retrieval instruction on queries, Matryoshka-truncated to 512.
    pub fn qwen3(base_url: impl Into<String>) -> Self {
        Self {
            api_key_env: None,
            truncate_to: Some(512),
            native_dims: Some(1024),
            query_prefix: QWEN3_QUERY_PREFIX.into(),
            ..Self::new(base_url, "Qwen/Qwen3-Embedding-0.6B")
        }
    }

    /// An e5 model (`query: ` / `passage: ` prefixes), 384 wide unless told.
    pub fn e5(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api_key_env: None,
            native_dims: Some(384),
            query_prefix: "query: ".into(),
            document_prefix: "passage: ".into(),
            ..Self::new(base_url, model)
        }
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/embeddings") {
            base.to_string()
        } else {
            format!("{base}/embeddings")
        }
    }

    /// The width the server returns before client-side truncation.
    fn server_dims(&self) -> Option<usize> {
        self.dimensions
            .or(self.native_dims)
            .or(match self.model.as_str() {
                "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
                "text-embedding-3-large" => Some(3072),
                _ => None,
            })
    }

    /// The output width, if it can be known without asking the server.
    pub fn output_dims(&self) -> Option<usize> {
        match (self.truncate_to, self.server_dims()) {
            (Some(t), Some(s)) => Some(t.min(s)),
            (Some(t), None) => Some(t),
            (None, s) => s,
        }
    }
}

/// An OpenAI-compatible embeddings client; see the [module docs](self).
#[derive(Clone)]
pub struct OpenAiEmbedder {
    cfg: std::sync::Arc<OpenAiConfig>,
    agent: ureq::Agent,
    api_key: Option<String>,
    dims: usize,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("endpoint", &self.cfg.endpoint())
            .field("model", &self.cfg.model)
            .field("dims", &self.dims)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
}

impl OpenAiEmbedder {
    /// Check the configuration, read the API key and build the client.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, EmbeddingError> {
        if !(cfg.base_url.starts_with("http://") || cfg.base_url.starts_with("https://")) {
            return Err(EmbeddingError::Config(format!(
                "OpenAI base URL {:?} must start with http:// or https://",
                cfg.base_url
            )));
        }
        if cfg.model.trim().is_empty() {
            return Err(EmbeddingError::Config("OpenAI model name is empty".into()));
        }
        let dims = cfg.output_dims().ok_or_else(|| {
            EmbeddingError::Config(format!(
                "the width of model {:?} is unknown: set `dimensions`, `truncate_to` or `native_dims`",
                cfg.model
            ))
        })?;
        if dims == 0 || cfg.truncate_to == Some(0) || cfg.dimensions == Some(0) {
            return Err(EmbeddingError::Config(
                "embedding width must be positive".into(),
            ));
        }
        let api_key = match &cfg.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_string()),
                _ => {
                    return Err(EmbeddingError::Config(format!(
                        "the API key variable ${var} is not set (set it, or configure no key for a local server)"
                    )))
                }
            },
        };
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(cfg.timeout))
            .user_agent(concat!("memoir/", env!("CARGO_PKG_VERSION")));
        if is_loopback_url(&cfg.base_url) {
            builder = builder.proxy(None);
        }
        let agent: ureq::Agent = builder.build().into();
        Ok(Self {
            cfg: std::sync::Arc::new(OpenAiConfig {
                batch_size: cfg.batch_size.max(1),
                ..cfg
            }),
            agent,
            api_key,
            dims,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.cfg
    }

    /// Embed `texts` in the query lane (`query`) or the document lane, with
    /// that lane's prefix.
    fn embed_lane(&self, texts: &[&str], query: bool) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let prefix = if query {
            &self.cfg.query_prefix
        } else {
            &self.cfg.document_prefix
        };
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(self.cfg.batch_size) {
            let inputs: Vec<String> = chunk.iter().map(|t| format!("{prefix}{t}")).collect();
            out.extend(self.request_with_retries(&inputs)?);
        }
        Ok(out)
    }

    fn request_with_retries(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let mut body = serde_json::json!({
            "model": self.cfg.model,
            "input": inputs,
            "encoding_format": "float",
        });
        if let Some(d) = self.cfg.dimensions {
            body["dimensions"] = serde_json::json!(d);
        }
        let body = serde_json::to_vec(&body)
            .map_err(|e| EmbeddingError::BadInput(format!("cannot encode request: {e}")))?;
        let mut backoff = self.cfg.initial_backoff;
        let mut attempt = 0u32;
        loop {
            let failure = match self.request_once(&body, inputs.len()) {
                Ok(v) => return Ok(v),
                Err(f) => f,
            };
            let (retry_after, err) = match failure {
                Failure::Fatal(e) => return Err(e),
                Failure::Retry { retry_after, err } => (retry_after, err),
            };
            if let Some(ra) = retry_after {
                if ra > self.cfg.max_retry_after {
                    return Err(EmbeddingError::RateLimited {
                        retry_after_ms: ra.as_millis() as u64,
                    });
                }
            }
            if attempt >= self.cfg.max_retries {
                return Err(err);
            }
            attempt += 1;
            let wait = match retry_after {
                Some(ra) => ra,
                None => jitter(backoff),
            };
            std::thread::sleep(wait);
            backoff = (backoff * 2).min(self.cfg.max_backoff);
        }
    }

    fn request_once(&self, body: &[u8], n: usize) -> Result<Vec<Vec<f32>>, Failure> {
        let mut req = self
            .agent
            .post(self.cfg.endpoint())
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(key) = &self.api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                return Err(Failure::Retry {
                    retry_after: None,
                    err: EmbeddingError::BackendError(format!(
                        "request to {} failed: {e}",
                        self.cfg.endpoint()
                    )),
                })
            }
        };
        let status = resp.status().as_u16();
        let retry_after = parse_retry_after(resp.headers());
        let text = resp
            .body_mut()
            .with_config()
            .limit(512 << 20)
            .read_to_string();
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                return Err(Failure::Retry {
                    retry_after: None,
                    err: EmbeddingError::BackendError(format!(
                        "reading the response from {} failed: {e}",
                        self.cfg.endpoint()
                    )),
                })
            }
        };
        match status {
            200..=299 => self.parse(&text, n).map_err(Failure::Fatal),
            429 => Err(Failure::Retry {
                retry_after: Some(retry_after.unwrap_or(self.cfg.initial_backoff)),
                err: EmbeddingError::RateLimited {
                    retry_after_ms: retry_after.unwrap_or(self.cfg.initial_backoff).as_millis()
                        as u64,
                },
            }),
            500..=599 => Err(Failure::Retry {
                retry_after,
                err: EmbeddingError::BackendError(format!(
                    "server error {status}: {}",
                    snippet(&text)
                )),
            }),
            400 | 413 | 422 => Err(Failure::Fatal(EmbeddingError::BadInput(format!(
                "server rejected the request ({status}): {}",
                snippet(&text)
            )))),
            _ => Err(Failure::Fatal(EmbeddingError::BackendError(format!(
                "HTTP {status} from {}: {}",
                self.cfg.endpoint(),
                snippet(&text)
            )))),
        }
    }

    fn parse(&self, text: &str, n: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        #[derive(serde::Deserialize)]
        struct Resp {
            data: Vec<Item>,
        }
        #[derive(serde::Deserialize)]
        struct Item {
            index: Option<usize>,
            embedding: Vec<f32>,
        }
        let resp: Resp = serde_json::from_str(text).map_err(|e| {
            EmbeddingError::BackendError(format!(
                "malformed embeddings response ({e}): {}",
                snippet(text)
            ))
        })?;
        if resp.data.len() != n {
            return Err(EmbeddingError::BackendError(format!(
                "server returned {} embeddings for {n} inputs",
                resp.data.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        for (pos, item) in resp.data.into_iter().enumerate() {
            let i = item.index.unwrap_or(pos);
            if i >= n || out[i].is_some() {
                return Err(EmbeddingError::BackendError(format!(
                    "server returned a bad or repeated index {i}"
                )));
            }
            let mut v = item.embedding;
            if let Some(expected) = self.cfg.server_dims() {
                if v.len() != expected {
                    return Err(EmbeddingError::DimensionMismatch {
                        expected,
                        got: v.len(),
                    });
                }
            }
            if let Some(t) = self.cfg.truncate_to {
                v.truncate(t);
            }
            if v.len() != self.dims {
                return Err(EmbeddingError::DimensionMismatch {
                    expected: self.dims,
                    got: v.len(),
                });
            }
            if v.iter().any(|x| !x.is_finite()) || !l2_normalize(&mut v) {
                return Err(EmbeddingError::BackendError(
                    "server returned a zero or non-finite vector".into(),
                ));
            }
            out[i] = Some(v);
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| EmbeddingError::BackendError("missing embedding".into())))
            .collect()
    }
}

enum Failure {
    Fatal(EmbeddingError),
    Retry {
        retry_after: Option<Duration>,
        err: EmbeddingError,
    },
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// `retry-after-ms` (milliseconds) or `Retry-After` (seconds, possibly
/// fractional). HTTP dates are not parsed (the backoff applies instead).
fn parse_retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|x| x.is_finite() && *x >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|x| x.is_finite() && *x >= 0.0 && *x < 1e9)
        .map(Duration::from_secs_f64)
}

/// Full jitter between 50% and 100% of `d`.
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    let frac = 0.5 + (nanos % 1000) as f64 / 2000.0;
    d.mul_f64(frac)
}

impl EmbeddingProvider for OpenAiEmbedder {
    fn embed(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_batch(&[text])?;
        v.pop()
            .ok_or_else(|| EmbeddingError::BackendError("no embedding returned".into()))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed_lane(texts, false)
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbeddingError> {
        let mut v = self.embed_lane(&[text], true)?;
        v.pop()
            .ok_or_else(|| EmbeddingError::BackendError("no embedding returned".into()))
    }

    fn dimensions(&self) -> usize {
        self.dims
    }

    fn model_id(&self) -> String {
        let c = &self.cfg;
        let mut h = blake3::Hasher::new();
        h.update(c.query_prefix.as_bytes());
        h.update(&[0]);
        h.update(c.document_prefix.as_bytes());
        let tag = h.finalize().to_hex();
        let d = c.dimensions.map_or("native".to_string(), |d| d.to_string());
        format!(
            "openai:{}:d{d}:p{}@{}",
            c.model,
            &tag.as_str()[..8],
            self.dims
        )
    }

    fn warm(&self) -> Result<(), EmbeddingError> {
        self.embed("warm").map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_and_widths() {
        let c = OpenAiConfig::new("http://127.0.0.1:1/v1/", "m");
        assert_eq!(c.endpoint(), "http://127.0.0.1:1/v1/embeddings");
        assert_eq!(c.output_dims(), None);
        let c = OpenAiConfig::new("http://x/v1/embeddings", "text-embedding-3-large");
        assert_eq!(c.endpoint(), "http://x/v1/embeddings");
        assert_eq!(c.output_dims(), Some(3072));
        assert_eq!(OpenAiConfig::qwen3("http://x/v1").output_dims(), Some(512));
        let c = OpenAiConfig {
            dimensions: Some(256),
            ..OpenAiConfig::new("http://x", "m")
        };
        assert_eq!(c.output_dims(), Some(256));
    }

    #[test]
    fn config_errors() {
        let e = OpenAiEmbedder::new(OpenAiConfig::new("ftp://x", "m")).unwrap_err();
        assert!(matches!(e, EmbeddingError::Config(_)));
        let e = OpenAiEmbedder::new(OpenAiConfig::new("http://x", "unknown-model")).unwrap_err();
        assert!(e.to_string().contains("unknown"), "{e}");
        let e = OpenAiEmbedder::new(OpenAiConfig {
            api_key_env: Some("MEMOIR_TEST_SURELY_UNSET_KEY_VAR".into()),
            native_dims: Some(4),
            ..OpenAiConfig::new("http://x", "m")
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("MEMOIR_TEST_SURELY_UNSET_KEY_VAR"),
            "{e}"
        );
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback_url("http://127.0.0.1:8080/v1"));
        assert!(is_loopback_url("http://localhost/v1"));
        assert!(is_loopback_url("http://[::1]:9/v1"));
        assert!(!is_loopback_url("https://api.openai.com/v1"));
    }

    #[test]
    fn model_id_reflects_prefixes_and_width() {
        let a = OpenAiEmbedder::new(OpenAiConfig::e5("http://127.0.0.1:1", "e5-small")).unwrap();
        let b = OpenAiEmbedder::new(OpenAiConfig {
            query_prefix: String::new(),
            ..OpenAiConfig::e5("http://127.0.0.1:1", "e5-small")
        })
        .unwrap();
        assert_ne!(a.model_id(), b.model_id());
        assert!(a.model_id().starts_with("openai:e5-small:dnative:p"));
        assert!(a.model_id().ends_with("@384"));
    }

    #[test]
    fn retry_after_parsing() {
        let mut h = ureq::http::HeaderMap::new();
        assert_eq!(parse_retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = ureq::http::HeaderMap::new();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(parse_retry_after(&h), None);
    }
}
