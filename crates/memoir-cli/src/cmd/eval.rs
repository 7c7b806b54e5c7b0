//! `memoir eval`: retrieval benchmarks. `memoir eval locomo FILE` indexes
//! each conversation of a LoCoMo-format file into its own session view, asks
//! every question of categories 1–4 that has evidence, and prints
//! recall@1/5/10/20 and query latency. The protocol lives in
//! `memoir::view::eval`; this file parses flags and prints.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use memoir::embed::{select, EmbedConfig, EmbedderKind};
use memoir::search::{SearchIndex, SearchMode};
use memoir::store::file::FileStore;
use memoir::store::Durability;
use memoir::view::eval::{evaluate, load_locomo, ChunkStyle, EvalOptions};
use memoir::view::{RetrievalMode, ViewConfig};

/// Subcommands of `memoir eval`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Retrieval recall on a LoCoMo-format file (one view per conversation).
    Locomo(LocomoArgs),
    /// Cross-session search on a development set (a directory with
    /// `sessions.txt` and `queries.txt`, e.g. `testdata/search-dev`): plants
    /// its sessions in a fresh store, indexes them and prints recall@1/5/10
    /// and MRR by category and mode, and query latency.
    Search(SearchArgs),
}

/// Arguments of `memoir eval search`.
#[derive(clap::Args)]
pub struct SearchArgs {
    /// The development set's directory.
    #[arg(default_value = "testdata/search-dev")]
    pub dir: PathBuf,
    /// Modes to measure (lexical, semantic, hybrid; repeat or comma-separate).
    #[arg(long, value_delimiter = ',', default_value = "hybrid,lexical,semantic")]
    pub mode: Vec<SearchMode>,
    /// Embedding provider of the semantic side (default: the configured one).
    #[arg(long)]
    pub embedder: Option<EmbedderKind>,
    /// Megabytes of realistic generated agent history (`memoir-testkit`,
    /// imported) the set is planted among; 0 for the set alone.
    #[arg(long, default_value_t = 4.0)]
    pub noise_mb: f64,
    /// Seed of the generated history.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Also list the queries not answered first.
    #[arg(long)]
    pub misses: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
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
        Command::Search(args) => search(args),
    }
}

fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    use memoir::search::eval::{evaluate, load_dev_set, plant};
    let set = load_dev_set(&args.dir)?;
    let embedder = embedder(args.embedder)?;
    // A fresh store under the temporary directory, removed afterwards.
    let tmp = std::env::temp_dir().join(format!("memoir-eval-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)
        .with_context(|| format!("creating the temporary store {}", tmp.display()))?;
    let measured = (|| -> anyhow::Result<_> {
        let dir = tmp.join("store");
        if args.noise_mb > 0.0 {
            noise(&tmp.join("home"), &dir, args.noise_mb, args.seed)?;
        }
        let store = std::sync::Arc::new(FileStore::new(&dir, Durability::None));
        let planted = plant(&set, store.as_ref())?;
        let mut ix = SearchIndex::open_store(store, &dir.join(memoir::search::INDEX_DIR))?
            .with_embedder(embedder.clone());
        ix.update().context("indexing the development set")?;
        Ok(evaluate(&ix, &set, &planted, &args.mode)?)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    let report = measured?;
    if args.json {
        let out = serde_json::json!({
            "dir": args.dir,
            "embedder": embedder.model_id(),
            "report": report,
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    crate::outln!(
        "search dev set {}: {} sessions, {} queries; embedder {}",
        args.dir.display(),
        set.sessions.len(),
        set.queries.len(),
        embedder.model_id()
    );
    crate::outln!(
        "{:<9} {:<9} {:>4} {:>6} {:>6} {:>6} {:>6}",
        "mode",
        "category",
        "n",
        "R@1",
        "R@5",
        "R@10",
        "MRR"
    );
    for r in &report.rows {
        crate::outln!(
            "{:<9} {:<9} {:>4} {:>6.3} {:>6.3} {:>6.3} {:>6.3}",
            mode_name(r.mode),
            r.category,
            r.queries,
            r.r1,
            r.r5,
            r.r10,
            r.mrr
        );
    }
    for (mode, p50, p99) in &report.latency {
        crate::outln!(
            "{} latency p50 {p50:.2} ms  p99 {p99:.2} ms",
            mode_name(*mode)
        );
    }
    if args.misses {
        for m in &report.misses {
            crate::outln!(
                "miss {} rank {} first {}  {:?}",
                mode_name(m.mode),
                m.rank.map_or("-".to_string(), |r| r.to_string()),
                m.first.as_deref().unwrap_or("-"),
                m.query
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Generate `mb` of realistic Claude Code and Codex history under `home`
/// and import it into the store in `dir`.
fn noise(home: &std::path::Path, dir: &std::path::Path, mb: f64, seed: u64) -> anyhow::Result<()> {
    use memoir::import::{self, Agent};
    use memoir_testkit::{generate, AgentKind, CorpusSpec};
    let spec = CorpusSpec {
        seed,
        target_mb: mb,
        sessions: 0,
        max_session_mb: (mb / 4.0).max(0.1),
        ..CorpusSpec::default()
    };
    generate(&spec, home).map_err(|e| anyhow::anyhow!("generating history: {e}"))?;
    let mut sources = Vec::new();
    for (agent, kind) in [
        (Agent::ClaudeCode, AgentKind::ClaudeCode),
        (Agent::Codex, AgentKind::Codex),
    ] {
        let at = home.join(memoir_testkit::corpus::home_dir(kind));
        if at.exists() {
            sources.extend(import::sources_of(agent, Some(&at))?);
        }
    }
    let m = memoir::manager::SessionManager::open(
        dir,
        memoir::manager::ManagerOptions {
            durability: Durability::None,
            ..memoir::manager::ManagerOptions::default()
        },
    )?;
    import::import(&m, &sources, &mut |_| {})?;
    Ok(())
}

fn mode_name(m: SearchMode) -> &'static str {
    match m {
        SearchMode::Lexical => "lexical",
        SearchMode::Semantic => "semantic",
        SearchMode::Hybrid => "hybrid",
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
    let report = evaluate(&conversations, embedder.as_ref(), &opts);
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
