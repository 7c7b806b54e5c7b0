//! `select`: one configuration picks the embedding provider.
//!
//! Three layers, in increasing precedence:
//!
//! 1. the `[embed]` table of `$MEMOIR_HOME/config.toml` (other tables of that
//!    file belong to other parts of memoir and are ignored here);
//! 2. environment variables;
//! 3. command-line flags (the caller fills an [`EmbedConfig`] layer).
//!
//! Nothing configured means the offline `hash` embedder (384 wide).
//!
//! ```toml
//! [embed]
//! provider = "minilm"        # hash | minilm | openai       (MEMOIR_EMBEDDER)
//! cache = "auto"             # auto | on | off              (MEMOIR_EMBED_CACHE)
//! cache_dir = "/var/memoir"  # default $MEMOIR_HOME/cache/embeddings (MEMOIR_EMBED_CACHE_DIR)
//! cache_max_mb = 512         #                              (MEMOIR_EMBED_CACHE_MAX_MB)
//!
//! [embed.hash]
//! dims = 384                 #                              (MEMOIR_HASH_DIMS)
//!
//! [embed.minilm]
//! model = "all-mpnet-base-v2" # a name of `memoir models` (MEMOIR_MINILM_MODEL)
//! model_dir = "/models/all-MiniLM-L6-v2"  # wins over model; else the search (MEMOIR_MODEL_DIR)
//! threads = 2                #                              (MEMOIR_MINILM_THREADS)
//! max_batch = 32             #                              (MEMOIR_MINILM_MAX_BATCH)
//! data_parallel = true       # whole batches per thread     (MEMOIR_MINILM_DATA_PARALLEL)
//!
//! [embed.openai]
//! preset = "qwen3"           # openai | qwen3 | e5          (MEMOIR_OPENAI_PRESET)
//! base_url = "http://127.0.0.1:8000/v1"   #                 (MEMOIR_OPENAI_BASE_URL)
//! model = "Qwen/Qwen3-Embedding-0.6B"     #                 (MEMOIR_OPENAI_MODEL)
//! api_key_env = "OPENAI_API_KEY"          # "" = no key     (MEMOIR_OPENAI_API_KEY_ENV)
//! dimensions = 512           # request parameter            (MEMOIR_OPENAI_DIMENSIONS)
//! truncate_to = 512          # client-side Matryoshka       (MEMOIR_OPENAI_TRUNCATE_TO)
//! native_dims = 1024         # width before truncation      (MEMOIR_OPENAI_NATIVE_DIMS)
//! query_prefix = "query: "   #                              (MEMOIR_OPENAI_QUERY_PREFIX)
//! document_prefix = "passage: "  #                          (MEMOIR_OPENAI_DOCUMENT_PREFIX)
//! batch_size = 64            #                              (MEMOIR_OPENAI_BATCH_SIZE)
//! max_retries = 4            #                              (MEMOIR_OPENAI_MAX_RETRIES)
//! timeout_secs = 60          #                              (MEMOIR_OPENAI_TIMEOUT_SECS)
//! ```
//!
//! `cache = "auto"` caches `minilm` and `openai` but not `hash`, whose
//! recomputation is cheaper than a cache hit (see `docs/BENCHMARKS.md`).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
#[cfg(feature = "openai")]
use std::time::Duration;

use serde::Deserialize;

use super::cache::{CacheConfig, CachedEmbedder};
use super::hash::{HashEmbedder, DEFAULT_DIMS};
#[cfg(feature = "minilm")]
use super::minilm::{MiniLm, MiniLmOptions};
#[cfg(feature = "openai")]
use super::openai::{OpenAiConfig, OpenAiEmbedder};
use super::{EmbeddingError, EmbeddingProvider};

/// Which provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// [`HashEmbedder`]: offline feature hashing (the default).
    Hash,
    /// `embed::minilm::MiniLm`: the local transformer (feature `minilm`).
    Minilm,
    /// `embed::openai::OpenAiEmbedder`: an OpenAI-compatible server (feature
    /// `openai`).
    Openai,
}

impl FromStr for EmbedderKind {
    type Err = EmbeddingError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hash" => Ok(Self::Hash),
            "minilm" => Ok(Self::Minilm),
            "openai" => Ok(Self::Openai),
            other => Err(EmbeddingError::Config(format!(
                "unknown embedder {other:?} (expected hash, minilm or openai)"
            ))),
        }
    }
}

impl std::fmt::Display for EmbedderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Hash => "hash",
            Self::Minilm => "minilm",
            Self::Openai => "openai",
        })
    }
}

/// Whether to wrap the provider in the persistent [`CachedEmbedder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Cache `minilm` and `openai`, not `hash` (the default).
    Auto,
    /// Always cache.
    On,
    /// Never cache.
    Off,
}

impl FromStr for CacheMode {
    type Err = EmbeddingError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "on" | "true" | "1" | "yes" => Ok(Self::On),
            "off" | "false" | "0" | "no" => Ok(Self::Off),
            other => Err(EmbeddingError::Config(format!(
                "unknown cache mode {other:?} (expected auto, on or off)"
            ))),
        }
    }
}

/// `[embed.hash]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HashSection {
    /// Vector width (default 384).
    pub dims: Option<usize>,
}

/// `[embed.minilm]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MiniLmSection {
    /// A supported model by name (`all-MiniLM-L6-v2`, `all-mpnet-base-v2`),
    /// loaded from where `memoir models install` put it.
    pub model: Option<String>,
    /// The model folder (wins over `model`); both unset means the search of
    /// [`super::minilm::discover_model_dir`].
    pub model_dir: Option<PathBuf>,
    /// Threads for inference.
    pub threads: Option<usize>,
    /// Most texts per forward pass.
    pub max_batch: Option<usize>,
    /// Run whole batches side by side on 2+ threads (default true).
    pub data_parallel: Option<bool>,
}

/// `[embed.openai]`; unset fields come from the preset.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiSection {
    /// `openai` (default), `qwen3` or `e5`: the base settings.
    pub preset: Option<String>,
    /// API base URL.
    pub base_url: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// Environment variable with the API key; empty for none.
    pub api_key_env: Option<String>,
    /// `dimensions` request parameter.
    pub dimensions: Option<usize>,
    /// Client-side truncation width.
    pub truncate_to: Option<usize>,
    /// Native width of an unknown model.
    pub native_dims: Option<usize>,
    /// Query prefix.
    pub query_prefix: Option<String>,
    /// Document prefix.
    pub document_prefix: Option<String>,
    /// Inputs per request.
    pub batch_size: Option<usize>,
    /// Retries on 429/5xx/transport errors.
    pub max_retries: Option<u32>,
    /// Request timeout in seconds.
    pub timeout_secs: Option<f64>,
}

/// One layer of embedding configuration (file, environment or command line);
/// [`EmbedConfig::merge`] stacks layers. Every field is optional: unset means
/// "the layer below decides".
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedConfig {
    /// The provider.
    pub provider: Option<EmbedderKind>,
    /// Cache mode.
    pub cache: Option<CacheMode>,
    /// Cache directory.
    pub cache_dir: Option<PathBuf>,
    /// Cache size bound per model, MiB.
    pub cache_max_mb: Option<u64>,
    /// Hash settings.
    pub hash: HashSection,
    /// MiniLM settings.
    pub minilm: MiniLmSection,
    /// OpenAI-compatible settings.
    pub openai: OpenAiSection,
}

fn over<T: Clone>(dst: &mut Option<T>, src: &Option<T>) {
    if src.is_some() {
        dst.clone_from(src);
    }
}

fn parse_env<T: FromStr>(var: &str, v: &str) -> Result<T, EmbeddingError> {
    v.trim()
        .parse()
        .map_err(|_| EmbeddingError::Config(format!("${var}={v:?} is not a valid value")))
}

impl EmbedConfig {
    /// Parse the `[embed]` table of a config file's text (other tables are
    /// ignored; no `[embed]` table is an empty layer).
    pub fn from_toml_str(text: &str) -> Result<Self, EmbeddingError> {
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| EmbeddingError::Config(format!("config.toml: {e}")))?;
        match table.get("embed") {
            None => Ok(Self::default()),
            Some(v) => v
                .clone()
                .try_into()
                .map_err(|e| EmbeddingError::Config(format!("config.toml [embed]: {e}"))),
        }
    }

    /// Read a config file; a missing file is an empty layer.
    pub fn from_file(path: &Path) -> Result<Self, EmbeddingError> {
        match std::fs::read_to_string(path) {
            Ok(t) => Self::from_toml_str(&t).map_err(|e| match e {
                EmbeddingError::Config(m) => {
                    EmbeddingError::Config(format!("{}: {m}", path.display()))
                }
                e => e,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(EmbeddingError::Config(format!(
                "cannot read {}: {e}",
                path.display()
            ))),
        }
    }

    /// The layer given by environment variables (see the module docs),
    /// looked up through `get` (tests pass a map; [`EmbedConfig::from_env`]
    /// passes the process environment). Empty values count as unset.
    pub fn from_env_with(get: impl Fn(&str) -> Option<String>) -> Result<Self, EmbeddingError> {
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let mut c = Self::default();
        macro_rules! env {
            ($var:literal, $field:expr) => {
                if let Some(v) = nonempty($var) {
                    $field = Some(parse_env($var, &v)?);
                }
            };
        }
        env!("MEMOIR_EMBEDDER", c.provider);
        env!("MEMOIR_EMBED_CACHE", c.cache);
        env!("MEMOIR_EMBED_CACHE_DIR", c.cache_dir);
        env!("MEMOIR_EMBED_CACHE_MAX_MB", c.cache_max_mb);
        env!("MEMOIR_HASH_DIMS", c.hash.dims);
        env!("MEMOIR_MODEL_DIR", c.minilm.model_dir);
        env!("MEMOIR_MINILM_MODEL", c.minilm.model);
        env!("MEMOIR_MINILM_THREADS", c.minilm.threads);
        env!("MEMOIR_MINILM_MAX_BATCH", c.minilm.max_batch);
        env!("MEMOIR_MINILM_DATA_PARALLEL", c.minilm.data_parallel);
        env!("MEMOIR_OPENAI_PRESET", c.openai.preset);
        env!("MEMOIR_OPENAI_BASE_URL", c.openai.base_url);
        env!("MEMOIR_OPENAI_MODEL", c.openai.model);
        env!("MEMOIR_OPENAI_DIMENSIONS", c.openai.dimensions);
        env!("MEMOIR_OPENAI_TRUNCATE_TO", c.openai.truncate_to);
        env!("MEMOIR_OPENAI_NATIVE_DIMS", c.openai.native_dims);
        env!("MEMOIR_OPENAI_QUERY_PREFIX", c.openai.query_prefix);
        env!("MEMOIR_OPENAI_DOCUMENT_PREFIX", c.openai.document_prefix);
        env!("MEMOIR_OPENAI_BATCH_SIZE", c.openai.batch_size);
        env!("MEMOIR_OPENAI_MAX_RETRIES", c.openai.max_retries);
        env!("MEMOIR_OPENAI_TIMEOUT_SECS", c.openai.timeout_secs);
        // "" is meaningful for the key variable (no key), so it is read raw.
        if let Some(v) = get("MEMOIR_OPENAI_API_KEY_ENV") {
            c.openai.api_key_env = Some(v.trim().to_string());
        }
        Ok(c)
    }

    /// The layer given by the process environment.
    pub fn from_env() -> Result<Self, EmbeddingError> {
        Self::from_env_with(|k| std::env::var(k).ok())
    }

    /// Overlay `other` on `self`: every field `other` sets wins.
    pub fn merge(&mut self, other: &EmbedConfig) {
        over(&mut self.provider, &other.provider);
        over(&mut self.cache, &other.cache);
        over(&mut self.cache_dir, &other.cache_dir);
        over(&mut self.cache_max_mb, &other.cache_max_mb);
        over(&mut self.hash.dims, &other.hash.dims);
        over(&mut self.minilm.model_dir, &other.minilm.model_dir);
        over(&mut self.minilm.model, &other.minilm.model);
        over(&mut self.minilm.threads, &other.minilm.threads);
        over(&mut self.minilm.max_batch, &other.minilm.max_batch);
        over(&mut self.minilm.data_parallel, &other.minilm.data_parallel);
        let (o, s) = (&other.openai, &mut self.openai);
        over(&mut s.preset, &o.preset);
        over(&mut s.base_url, &o.base_url);
        over(&mut s.model, &o.model);
        over(&mut s.api_key_env, &o.api_key_env);
        over(&mut s.dimensions, &o.dimensions);
        over(&mut s.truncate_to, &o.truncate_to);
        over(&mut s.native_dims, &o.native_dims);
        over(&mut s.query_prefix, &o.query_prefix);
        over(&mut s.document_prefix, &o.document_prefix);
        over(&mut s.batch_size, &o.batch_size);
        over(&mut s.max_retries, &o.max_retries);
        over(&mut s.timeout_secs, &o.timeout_secs);
    }

    /// `$MEMOIR_HOME/config.toml`, then the environment, then `cli`.
    pub fn resolve(cli: &EmbedConfig) -> Result<Self, EmbeddingError> {
        let home =
            crate::paths::memoir_home().map_err(|e| EmbeddingError::Config(e.to_string()))?;
        let mut c = Self::from_file(&home.join("config.toml"))?;
        c.merge(&Self::from_env()?);
        c.merge(cli);
        Ok(c)
    }

    /// The provider this configuration names (default `hash`).
    pub fn kind(&self) -> EmbedderKind {
        self.provider.unwrap_or(EmbedderKind::Hash)
    }

    /// The OpenAI client settings: the preset, then the fields set.
    #[cfg(feature = "openai")]
    pub fn openai_config(&self) -> Result<OpenAiConfig, EmbeddingError> {
        let s = &self.openai;
        let base_url = s
            .base_url
            .clone()
            .unwrap_or_else(|| OpenAiConfig::default().base_url);
        let mut c = match s.preset.as_deref().unwrap_or("openai") {
            "openai" => OpenAiConfig::new(base_url, OpenAiConfig::default().model),
            "qwen3" => OpenAiConfig::qwen3(base_url),
            "e5" => OpenAiConfig::e5(base_url, "intfloat/e5-small-v2"),
            other => {
                return Err(EmbeddingError::Config(format!(
                    "unknown OpenAI preset {other:?} (expected openai, qwen3 or e5)"
                )))
            }
        };
        if let Some(m) = &s.model {
            c.model.clone_from(m);
        }
        if let Some(k) = &s.api_key_env {
            c.api_key_env = if k.is_empty() { None } else { Some(k.clone()) };
        }
        over(&mut c.dimensions, &s.dimensions);
        over(&mut c.truncate_to, &s.truncate_to);
        over(&mut c.native_dims, &s.native_dims);
        if let Some(p) = &s.query_prefix {
            c.query_prefix.clone_from(p);
        }
        if let Some(p) = &s.document_prefix {
            c.document_prefix.clone_from(p);
        }
        if let Some(b) = s.batch_size {
            c.batch_size = b;
        }
        if let Some(r) = s.max_retries {
            c.max_retries = r;
        }
        if let Some(t) = s.timeout_secs {
            if !(t.is_finite() && t > 0.0) {
                return Err(EmbeddingError::Config(format!(
                    "timeout_secs {t} must be positive"
                )));
            }
            c.timeout = Duration::from_secs_f64(t);
        }
        Ok(c)
    }

    /// Whether the provider gets the persistent cache.
    pub fn cache_enabled(&self) -> bool {
        match self.cache.unwrap_or(CacheMode::Auto) {
            CacheMode::On => true,
            CacheMode::Off => false,
            CacheMode::Auto => self.kind() != EmbedderKind::Hash,
        }
    }

    /// Build the bare provider (no cache).
    pub fn build_uncached(&self) -> Result<Arc<dyn EmbeddingProvider>, EmbeddingError> {
        Ok(match self.kind() {
            EmbedderKind::Hash => {
                Arc::new(HashEmbedder::new(self.hash.dims.unwrap_or(DEFAULT_DIMS)))
            }
            #[cfg(not(feature = "minilm"))]
            EmbedderKind::Minilm => return Err(not_built("minilm")),
            #[cfg(feature = "minilm")]
            EmbedderKind::Minilm => {
                let d = MiniLmOptions::default();
                let opts = MiniLmOptions {
                    threads: self.minilm.threads,
                    max_batch: self.minilm.max_batch.unwrap_or(d.max_batch),
                    data_parallel: self.minilm.data_parallel.unwrap_or(d.data_parallel),
                    ..d
                };
                Arc::new(match (&self.minilm.model_dir, &self.minilm.model) {
                    (Some(dir), _) => MiniLm::load_with(dir, &opts)?,
                    (None, Some(name)) => MiniLm::load_with(named_model_dir(name)?, &opts)?,
                    (None, None) => MiniLm::discover(&opts)?,
                })
            }
            #[cfg(not(feature = "openai"))]
            EmbedderKind::Openai => return Err(not_built("openai")),
            #[cfg(feature = "openai")]
            EmbedderKind::Openai => Arc::new(OpenAiEmbedder::new(self.openai_config()?)?),
        })
    }

    /// The supported model this configuration names (`[embed.minilm] model`),
    /// if any.
    #[cfg(feature = "minilm")]
    pub fn named_model(&self) -> Result<Option<&'static super::models::ModelSpec>, EmbeddingError> {
        self.minilm
            .model
            .as_deref()
            .map(|n| super::models::spec(n).map_err(|e| EmbeddingError::Config(e.to_string())))
            .transpose()
    }

    /// Build the provider, wrapped in the cache when [`Self::cache_enabled`].
    pub fn build(&self) -> Result<Arc<dyn EmbeddingProvider>, EmbeddingError> {
        let p = self.build_uncached()?;
        if !self.cache_enabled() {
            return Ok(p);
        }
        let dir = match &self.cache_dir {
            Some(d) => d.clone(),
            None => CacheConfig::default_dir()?,
        };
        let mut cc = CacheConfig::new(dir);
        if let Some(mb) = self.cache_max_mb {
            cc = cc.with_max_bytes(mb.saturating_mul(1 << 20));
        }
        Ok(Arc::new(CachedEmbedder::open(p, cc)?))
    }
}

/// Resolve the configuration (file, environment, then `cli`) and build the
/// provider, cached as configured.
pub fn select(cli: &EmbedConfig) -> Result<Arc<dyn EmbeddingProvider>, EmbeddingError> {
    EmbedConfig::resolve(cli)?.build()
}

/// The installed folder of a supported model named in the configuration.
#[cfg(feature = "minilm")]
fn named_model_dir(name: &str) -> Result<PathBuf, EmbeddingError> {
    let spec = super::models::spec(name).map_err(|e| EmbeddingError::Config(e.to_string()))?;
    super::models::installed_dir(spec).ok_or_else(|| {
        let tried: Vec<String> = super::models::locations(spec, true)
            .into_iter()
            .map(|l| l.dir.display().to_string())
            .collect();
        EmbeddingError::ModelNotLoaded(format!(
            "model {} is not installed (looked in {}); install it with `memoir models install {}`",
            spec.name,
            tried.join(", "),
            spec.name
        ))
    })
}

/// The error for a provider this build of the library left out.
#[cfg(not(all(feature = "minilm", feature = "openai")))]
fn not_built(feature: &str) -> EmbeddingError {
    EmbeddingError::Config(format!(
        "the {feature:?} embedder is not in this build (cargo feature `{feature}`)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> EmbedConfig {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        EmbedConfig::from_env_with(|k| m.get(k).cloned()).unwrap()
    }

    #[test]
    fn default_is_uncached_hash_384() {
        let c = EmbedConfig::default();
        assert_eq!(c.kind(), EmbedderKind::Hash);
        assert!(!c.cache_enabled());
        let p = c.build().unwrap();
        assert_eq!(p.model_id(), "hash-v1@384");
    }

    #[cfg(feature = "openai")]
    #[test]
    fn toml_layer_reads_only_embed_table() {
        let c = EmbedConfig::from_toml_str(
            r#"
            [store]
            whatever = 1
            [embed]
            provider = "openai"
            cache = "off"
            [embed.openai]
            preset = "qwen3"
            base_url = "http://127.0.0.1:9/v1"
            "#,
        )
        .unwrap();
        assert_eq!(c.kind(), EmbedderKind::Openai);
        let oc = c.openai_config().unwrap();
        assert_eq!(oc.truncate_to, Some(512));
        assert_eq!(oc.api_key_env, None);
        assert!(oc.query_prefix.starts_with("Instruct:"));
        assert_eq!(
            EmbedConfig::from_toml_str("").unwrap(),
            EmbedConfig::default()
        );
    }

    #[test]
    fn typos_and_bad_values_are_config_errors() {
        let e = EmbedConfig::from_toml_str("[embed]\nprovidr = \"hash\"").unwrap_err();
        assert!(e.to_string().contains("providr"), "{e}");
        let e = EmbedConfig::from_toml_str("[embed]\nprovider = \"bert\"").unwrap_err();
        assert!(matches!(e, EmbeddingError::Config(_)));
        let m: HashMap<&str, &str> = [("MEMOIR_EMBEDDER", "gpt")].into();
        let e = EmbedConfig::from_env_with(|k| m.get(k).map(|s| s.to_string())).unwrap_err();
        assert!(e.to_string().contains("gpt"), "{e}");
        let m: HashMap<&str, &str> = [("MEMOIR_HASH_DIMS", "wide")].into();
        assert!(EmbedConfig::from_env_with(|k| m.get(k).map(|s| s.to_string())).is_err());
    }

    #[test]
    fn precedence_file_then_env_then_cli() {
        let mut c = EmbedConfig::from_toml_str(
            "[embed]\nprovider = \"minilm\"\n[embed.hash]\ndims = 128\n",
        )
        .unwrap();
        c.merge(&env(&[
            ("MEMOIR_EMBEDDER", "hash"),
            ("MEMOIR_HASH_DIMS", "256"),
        ]));
        assert_eq!(c.kind(), EmbedderKind::Hash);
        assert_eq!(c.hash.dims, Some(256));
        let cli = EmbedConfig {
            hash: HashSection { dims: Some(64) },
            ..Default::default()
        };
        c.merge(&cli);
        assert_eq!(c.hash.dims, Some(64));
        assert_eq!(c.build().unwrap().model_id(), "hash-v1@64");
    }

    #[test]
    fn cache_modes() {
        let mut c = EmbedConfig {
            provider: Some(EmbedderKind::Minilm),
            ..Default::default()
        };
        assert!(c.cache_enabled());
        c.cache = Some(CacheMode::Off);
        assert!(!c.cache_enabled());
        c.provider = Some(EmbedderKind::Hash);
        c.cache = Some(CacheMode::On);
        assert!(c.cache_enabled());
        let tmp = tempfile::tempdir().unwrap();
        c.cache_dir = Some(tmp.path().to_path_buf());
        let p = c.build().unwrap();
        assert_eq!(p.model_id(), "hash-v1@384");
        assert!(tmp.path().join("v1").is_dir());
    }

    #[cfg(feature = "openai")]
    #[test]
    fn unknown_preset_is_an_error() {
        let c = EmbedConfig {
            openai: OpenAiSection {
                preset: Some("cohere".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(c.openai_config().is_err());
    }

    #[cfg(not(feature = "minilm"))]
    #[test]
    fn a_provider_left_out_of_the_build_is_a_config_error() {
        let c = EmbedConfig {
            provider: Some(EmbedderKind::Minilm),
            ..Default::default()
        };
        let e = c.build_uncached().unwrap_err();
        assert!(
            matches!(&e, EmbeddingError::Config(m) if m.contains("minilm")),
            "{e}"
        );
    }
}
