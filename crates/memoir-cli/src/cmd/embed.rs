//! `memoir embed`: embed text with the configured provider, or measure its
//! throughput.
//!
//! The provider comes from `$MEMOIR_HOME/config.toml`, then `MEMOIR_*`
//! environment variables, then these flags (see `memoir::embed::select`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use memoir::embed::select::{CacheMode, EmbedConfig, EmbedderKind};
use memoir::embed::{CachedEmbedder, EmbeddingProvider};

/// Arguments of `memoir embed`.
#[derive(clap::Args)]
pub struct Args {
    /// Texts to embed; none reads one text per line from standard input.
    pub texts: Vec<String>,
    /// Print JSON: `{"model_id", "dimensions", "items": [{"text", "embedding"}]}`.
    #[arg(long)]
    pub json: bool,
    /// Embed as queries (the query lane of asymmetric models).
    #[arg(long)]
    pub query: bool,
    /// Provider: hash, minilm or openai (default: config, then hash).
    #[arg(long, value_parser = parse_kind)]
    pub embedder: Option<EmbedderKind>,
    /// MiniLM model folder (sentence-transformers layout).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// A model installed by `memoir models install` (all-MiniLM-L6-v2,
    /// all-mpnet-base-v2); --model-dir wins.
    #[arg(long)]
    pub model: Option<String>,
    /// Width of the hash embedder.
    #[arg(long)]
    pub dims: Option<usize>,
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.
    #[arg(long)]
    pub openai_base_url: Option<String>,
    /// Model name for the OpenAI-compatible server.
    #[arg(long)]
    pub openai_model: Option<String>,
    /// Embedding cache: auto, on or off.
    #[arg(long, value_parser = parse_cache)]
    pub cache: Option<CacheMode>,
    /// Cache directory (default $MEMOIR_HOME/cache/embeddings).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Inference threads for MiniLM.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Measure throughput (texts/s) instead of printing vectors.
    #[arg(long)]
    pub bench: bool,
    /// Texts embedded by --bench (default 20000 for hash, 256 otherwise).
    #[arg(long)]
    pub bench_count: Option<usize>,
}

fn parse_kind(s: &str) -> Result<EmbedderKind, String> {
    s.parse()
        .map_err(|e: memoir::embed::EmbeddingError| e.to_string())
}

fn parse_cache(s: &str) -> Result<CacheMode, String> {
    s.parse()
        .map_err(|e: memoir::embed::EmbeddingError| e.to_string())
}

impl Args {
    /// The command-line layer of the embedding configuration.
    fn layer(&self) -> EmbedConfig {
        let mut c = EmbedConfig {
            provider: self.embedder,
            cache: self.cache,
            cache_dir: self.cache_dir.clone(),
            ..Default::default()
        };
        c.hash.dims = self.dims;
        c.minilm.model_dir.clone_from(&self.model_dir);
        c.minilm.model.clone_from(&self.model);
        c.minilm.threads = self.threads;
        c.openai.base_url.clone_from(&self.openai_base_url);
        c.openai.model.clone_from(&self.openai_model);
        c
    }
}

/// Run `memoir embed`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = EmbedConfig::resolve(&args.layer())?;
    if args.bench {
        return bench(&cfg, &args);
    }
    let provider = cfg.build()?;
    let texts: Vec<String> = if args.texts.is_empty() {
        std::io::stdin()
            .lock()
            .lines()
            .collect::<Result<_, _>>()
            .context("reading texts from standard input")?
    } else {
        args.texts.clone()
    };
    if texts.is_empty() {
        return Err(crate::exit::CliError::usage(
            "nothing to embed: give texts as arguments or on standard input",
        ));
    }
    let vectors = if args.query {
        texts
            .iter()
            .map(|t| provider.embed_query(t))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        provider.embed_batch(&refs)?
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let items: Vec<serde_json::Value> = texts
            .iter()
            .zip(&vectors)
            .map(|(t, v)| serde_json::json!({"text": t, "embedding": v}))
            .collect();
        let doc = serde_json::json!({
            "model_id": provider.model_id(),
            "dimensions": provider.dimensions(),
            "items": items,
        });
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "model: {} ({} dimensions)",
            provider.model_id(),
            provider.dimensions()
        )?;
        for (t, v) in texts.iter().zip(&vectors) {
            let shown: Vec<String> = v.iter().map(|x| format!("{x:.6}")).collect();
            writeln!(out, "{t}\n[{}]", shown.join(", "))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Synthetic, distinct texts of 8–20 words.
fn bench_texts(n: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "session",
        "agent",
        "memory",
        "file",
        "test",
        "user",
        "asked",
        "about",
        "weather",
        "fixed",
        "bug",
        "parser",
        "build",
        "painted",
        "sunrise",
        "lake",
        "summer",
        "group",
        "cargo",
        "crate",
        "error",
        "moved",
        "borrow",
        "index",
        "search",
        "query",
        "result",
        "tool",
        "output",
        "server",
        "timeout",
        "retry",
        "cache",
        "vector",
        "score",
        "document",
        "message",
        "the",
        "a",
        "we",
        "then",
        "and",
        "in",
        "on",
        "with",
        "yesterday",
    ];
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s as usize
    };
    (0..n)
        .map(|i| {
            let len = 8 + next() % 13;
            let mut words: Vec<&str> = (0..len).map(|_| WORDS[next() % WORDS.len()]).collect();
            words.push(if i % 2 == 0 { "done" } else { "pending" });
            format!("{} #{i}", words.join(" "))
        })
        .collect()
}

fn bench(cfg: &EmbedConfig, args: &Args) -> anyhow::Result<ExitCode> {
    let provider: Arc<dyn EmbeddingProvider> = cfg.build_uncached()?;
    let n = args
        .bench_count
        .unwrap_or(if cfg.kind() == EmbedderKind::Hash {
            20_000
        } else {
            256
        })
        .max(1);
    let texts = bench_texts(n);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    provider.warm()?;
    let start = Instant::now();
    for chunk in refs.chunks(64) {
        provider.embed_batch(chunk)?;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    crate::outln!(
        "{}: {n} texts in {:.3} s = {:.1} texts/s ({:.3} ms/text, batches of 64)",
        provider.model_id(),
        secs,
        n as f64 / secs,
        secs * 1e3 / n as f64
    );
    if cfg.cache_enabled() {
        // Cache hit cost on the same texts, in a throwaway directory.
        let dir = std::env::temp_dir().join(format!("memoir-embed-bench-{}", std::process::id()));
        let cached =
            CachedEmbedder::open(Arc::clone(&provider), memoir::embed::CacheConfig::new(&dir))?;
        for chunk in refs.chunks(64) {
            cached.embed_batch(chunk)?;
        }
        let start = Instant::now();
        for chunk in refs.chunks(64) {
            cached.embed_batch(chunk)?;
        }
        let hit = start.elapsed().max(Duration::from_nanos(1)).as_secs_f64();
        crate::outln!(
            "cache hits: {:.1} texts/s ({:.2} µs/text), {:.0}x the provider",
            n as f64 / hit,
            hit * 1e6 / n as f64,
            secs / hit
        );
        drop(cached);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::SUCCESS)
}
