//! `memoir eval`: retrieval benchmarks. `memoir eval locomo FILE` indexes
//! each conversation of a LoCoMo-format file into its own session view, asks
//! every question of categories 1–4 that has evidence, and prints
//! recall@1/5/10/20 and query latency. The protocol lives in
//! `memoir::view::eval`; this file parses flags and prints.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
pub use memoir::embed::block_on;
use memoir::embed::{select, EmbedConfig, EmbedderKind};
use memoir::view::eval::{evaluate, load_locomo, ChunkStyle, EvalOptions};
use memoir::view::{RetrievalMode, ViewConfig};

/// Subcommands of `memoir eval`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Retrieval recall on a LoCoMo-format file (one view per conversation).
    Locomo(LocomoArgs),
}

/// Arguments of `memoir eval locomo`.
#[derive(clap::Args)]
pub struct LocomoArgs {
    /// The LoCoMo JSON file (an array of conversations).
    pub file: PathBuf,
    /// Embedding provider: hash (offline default) or minilm (local model);
    /// also openai when configured. Defaults to the configured provider.
    #[arg(long)]
    pub embedder: Option<EmbedderKind>,
    /// Retrieval mode.
    #[arg(long, default_value = "hybrid", value_parser = super::choices::mode())]
    pub mode: RetrievalMode,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Turns of same-session context added to each turn's lexical input
    /// (the stored text is unchanged).
    #[arg(long, default_value_t = 1)]
    pub neighbors: usize,
    /// Do not prefix each turn's lexical input with its session date.
    #[arg(long)]
    pub no_date: bool,
    /// Turns of same-session context added to each turn's embedding input.
    #[arg(long, default_value_t = 0)]
    pub vector_neighbors: usize,
    /// Disable stemming in the lexical index.
    #[arg(long)]
    pub no_stem: bool,
    /// Keep stop words in the lexical index.
    #[arg(long)]
    pub keep_stopwords: bool,
    /// Index adjacent term pairs too.
    #[arg(long)]
    pub bigrams: bool,
    /// Keep speaker names in the lexical input.
    #[arg(long)]
    pub with_speaker: bool,
    /// BM25 k1.
    #[arg(long)]
    pub k1: Option<f32>,
    /// BM25 b.
    #[arg(long)]
    pub b: Option<f32>,
    /// Hybrid: RRF rank offset.
    #[arg(long)]
    pub rrf_k: Option<f32>,
    /// Hybrid: weight of the vector list.
    #[arg(long)]
    pub vector_weight: Option<f32>,
    /// Hybrid: weight of the lexical list.
    #[arg(long)]
    pub lexical_weight: Option<f32>,
    /// Hybrid: depth of each list before fusion.
    #[arg(long)]
    pub depth: Option<usize>,
    /// Lexical list: share of the neighbouring chunks' scores added to each
    /// chunk's score.
    #[arg(long)]
    pub neighbor_weight: Option<f32>,
    /// Vector list: the same.
    #[arg(long)]
    pub vector_neighbor_weight: Option<f32>,
    /// Hybrid fusion: rrf or linear.
    #[arg(long)]
    pub fusion: Option<memoir::view::Fusion>,
    /// Pseudo-relevance feedback: feedback documents (0 = off).
    #[arg(long)]
    pub prf_docs: Option<usize>,
    /// Pseudo-relevance feedback: expansion terms.
    #[arg(long)]
    pub prf_terms: Option<usize>,
    /// Pseudo-relevance feedback: weight of the strongest expansion term.
    #[arg(long)]
    pub prf_weight: Option<f32>,
}

/// Build the embedder: the configured one, with `kind` overriding the provider.
pub fn embedder(
    kind: Option<EmbedderKind>,
) -> anyhow::Result<Arc<dyn memoir::embed::EmbeddingProvider>> {
    let cli = EmbedConfig {
        provider: kind,
        ..EmbedConfig::default()
    };
    select(&cli).context("cannot build the embedder")
}

/// Run `memoir eval`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Locomo(args) => locomo(args),
    }
}

fn locomo(args: LocomoArgs) -> anyhow::Result<ExitCode> {
    let conversations =
        load_locomo(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let embedder = embedder(args.embedder)?;
    let mut view = ViewConfig {
        mode: args.mode,
        ..ViewConfig::default()
    };
    view.tokenizer.stem = !args.no_stem;
    view.tokenizer.stopwords = !args.keep_stopwords;
    view.tokenizer.bigrams = args.bigrams;
    if let Some(k1) = args.k1 {
        view.bm25.k1 = k1;
    }
    if let Some(b) = args.b {
        view.bm25.b = b;
    }
    if let Some(k) = args.rrf_k {
        view.hybrid.rrf_k = k;
    }
    if let Some(w) = args.vector_weight {
        view.hybrid.vector_weight = w;
    }
    if let Some(w) = args.lexical_weight {
        view.hybrid.lexical_weight = w;
    }
    if let Some(d) = args.depth {
        view.hybrid.depth = d;
    }
    if let Some(w) = args.neighbor_weight {
        view.neighbor_weight = w;
    }
    if let Some(w) = args.vector_neighbor_weight {
        view.vector_neighbor_weight = w;
    }
    if let Some(f) = args.fusion {
        view.hybrid.fusion = f;
    }
    if let Some(n) = args.prf_docs {
        view.prf.docs = n;
    }
    if let Some(n) = args.prf_terms {
        view.prf.terms = n;
    }
    if let Some(w) = args.prf_weight {
        view.prf.weight = w;
    }
    let opts = EvalOptions {
        mode: args.mode,
        view,
        style: ChunkStyle {
            date: !args.no_date,
            neighbors: args.neighbors,
            vector_neighbors: args.vector_neighbors,
            speaker: args.with_speaker,
        },
        ..EvalOptions::default()
    };
    let progress = crate::progress::Progress::spinner(&format!(
        "evaluating {} conversation(s)",
        conversations.len()
    ));
    let report = block_on(evaluate(&conversations, embedder.as_ref(), &opts));
    progress.finish();
    let report = report?;
    if args.json {
        let out = serde_json::json!({
            "file": args.file,
            "embedder": embedder.model_id(),
            "mode": args.mode,
            "neighbors": args.neighbors,
            "date": !args.no_date,
            "report": report,
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    crate::outln!(
        "LoCoMo {}: {} conversations, {} turns, {} questions",
        args.file.display(),
        report.conversations,
        report.turns,
        report.questions
    );
    crate::outln!(
        "embedder {}  mode {}  neighbors {}  date {}  neighbor_weight {}",
        embedder.model_id(),
        args.mode,
        args.neighbors,
        !args.no_date,
        opts.view.neighbor_weight
    );
    let recall: Vec<String> = report
        .recall
        .iter()
        .map(|(k, r)| format!("@{k} {r:.3}"))
        .collect();
    crate::outln!("recall {}", recall.join("  "));
    let cats: Vec<String> = report
        .recall10_by_category
        .iter()
        .map(|(c, n, r)| format!("cat{c} {r:.3} (n={n})"))
        .collect();
    crate::outln!("recall@10 by category: {}", cats.join("  "));
    crate::outln!(
        "query latency (embed + search) p50 {:.3} ms  p99 {:.3} ms;  search only p50 {:.3} ms  p99 {:.3} ms",
        report.query_p50_ms, report.query_p99_ms, report.search_p50_ms, report.search_p99_ms
    );
    crate::outln!("indexing {:.2} s", report.index_secs);
    Ok(ExitCode::SUCCESS)
}
