//! Provider selection from `$MEMOIR_HOME/config.toml`, environment variables
//! and a command-line layer, in that order of precedence. One test function:
//! it changes process-wide environment variables.

use memoir::embed::select::{CacheMode, HashSection};
use memoir::embed::{select, EmbedConfig, EmbedderKind, EmbeddingError};

const VARS: &[&str] = &[
    "MEMOIR_EMBEDDER",
    "MEMOIR_EMBED_CACHE",
    "MEMOIR_EMBED_CACHE_DIR",
    "MEMOIR_EMBED_CACHE_MAX_MB",
    "MEMOIR_HASH_DIMS",
    "MEMOIR_MODEL_DIR",
    "MEMOIR_MINILM_THREADS",
    "MEMOIR_OPENAI_PRESET",
    "MEMOIR_OPENAI_BASE_URL",
    "MEMOIR_OPENAI_MODEL",
    "MEMOIR_OPENAI_API_KEY_ENV",
    "MEMOIR_OPENAI_NATIVE_DIMS",
    "MEMOIR_OPENAI_DIMENSIONS",
    "MEMOIR_OPENAI_TRUNCATE_TO",
];

#[test]
fn file_then_env_then_cli() {
    for v in VARS {
        std::env::remove_var(v);
    }
    let home = tempfile::tempdir().expect("tmp");
    std::env::set_var("MEMOIR_HOME", home.path());
    let none = EmbedConfig::default();

    // Nothing configured: uncached hash, 384 wide.
    let p = select(&none).expect("default");
    assert_eq!(p.model_id(), "hash-v1@384");
    assert!(!home.path().join("cache").exists());

    // The config file (other tables are someone else's business).
    std::fs::write(
        home.path().join("config.toml"),
        "[server]\nport = 1\n\n[embed]\nprovider = \"hash\"\ncache = \"on\"\n[embed.hash]\ndims = 128\n",
    )
    .expect("write config");
    let p = select(&none).expect("from file");
    assert_eq!(p.model_id(), "hash-v1@128");
    assert!(
        home.path().join("cache/embeddings/v1").is_dir(),
        "cached under $MEMOIR_HOME"
    );

    // Environment beats the file.
    std::env::set_var("MEMOIR_HASH_DIMS", "96");
    std::env::set_var("MEMOIR_EMBED_CACHE", "off");
    assert_eq!(select(&none).expect("env").model_id(), "hash-v1@96");

    std::env::set_var("MEMOIR_EMBEDDER", "openai");
    std::env::set_var("MEMOIR_OPENAI_BASE_URL", "http://127.0.0.1:9/v1");
    std::env::set_var("MEMOIR_OPENAI_MODEL", "local-e5");
    std::env::set_var("MEMOIR_OPENAI_PRESET", "e5");
    std::env::set_var("MEMOIR_OPENAI_API_KEY_ENV", "");
    let p = select(&none).expect("openai from env");
    assert!(
        p.model_id().starts_with("openai:local-e5:"),
        "{}",
        p.model_id()
    );
    assert_eq!(p.dimensions(), 384);
    let c = EmbedConfig::resolve(&none).expect("resolve");
    assert_eq!(c.kind(), EmbedderKind::Openai);
    assert_eq!(c.openai_config().expect("cfg").query_prefix, "query: ");

    // The command line beats both.
    let cli = EmbedConfig {
        provider: Some(EmbedderKind::Hash),
        cache: Some(CacheMode::Off),
        hash: HashSection { dims: Some(32) },
        ..Default::default()
    };
    assert_eq!(select(&cli).expect("cli").model_id(), "hash-v1@32");

    // A bad model folder is named.
    std::env::set_var("MEMOIR_EMBEDDER", "minilm");
    std::env::set_var("MEMOIR_MODEL_DIR", home.path().join("no-such-model"));
    let err = select(&none).unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::ModelNotLoaded(m) if m.contains("no-such-model")),
        "{err:?}"
    );

    // Bad values are configuration errors naming the culprit.
    std::env::set_var("MEMOIR_EMBEDDER", "word2vec");
    let err = select(&none).unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::Config(m) if m.contains("word2vec")),
        "{err:?}"
    );
    std::env::remove_var("MEMOIR_EMBEDDER");
    std::fs::write(home.path().join("config.toml"), "[embed]\ndimz = 3\n").expect("write");
    let err = select(&none).unwrap_err();
    assert!(
        matches!(&err, EmbeddingError::Config(m) if m.contains("config.toml") && m.contains("dimz")),
        "{err:?}"
    );

    for v in VARS {
        std::env::remove_var(v);
    }
}
