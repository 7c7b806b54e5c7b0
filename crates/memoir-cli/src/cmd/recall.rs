//! `memoir recall SESSION QUERY`: rebuild the semantic view of a stored
//! session (through the embedding cache) and print the chunks most relevant
//! to the query, or, with `--budget`, the graft block an agent would put in
//! its prompt. The session is found like every other command's
//! (`--dir`/`--project`, see [`StoreArgs`]); exit 1 when nothing matched.

use std::process::ExitCode;

use memoir::blob::ArtifactStore;
use memoir::embed::{EmbedderKind, EmbeddingProvider, HashEmbedder};
use memoir::view::{GraftContent, RebuildOptions, RetrievalMode, SessionView, ViewConfig};

use super::eval::embedder;
use super::store::{resolve_id, StoreArgs};
use crate::outln;
use crate::progress::Progress;

/// Arguments of `memoir recall`.
#[derive(clap::Args)]
pub struct Args {
    /// Session id or unique prefix.
    pub session: String,
    /// What to look for.
    pub query: String,
    /// How many chunks.
    #[arg(short = 'k', long = "top", default_value_t = 5)]
    pub k: usize,
    /// Retrieval mode.
    #[arg(long, default_value = "hybrid", value_parser = super::choices::mode())]
    pub mode: RetrievalMode,
    /// Embedding provider (default: the configured one).
    #[arg(long)]
    pub embedder: Option<EmbedderKind>,
    /// Print a graft block of at most this many tokens instead of a list.
    #[arg(long)]
    pub budget: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Run `memoir recall`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let m = args.store.reader()?;
    let id = resolve_id(&m, &args.session)?;
    // Every turn the log ever held, compacted-away ones included, and the
    // facts promoted from the project's other sessions.
    let project = m
        .store()
        .read_header(&id)?
        .map(|meta| meta.workspace.display().to_string())
        .unwrap_or_default();
    let history = memoir::promote::history_with_facts(&m, &id, &project)?;
    // Lexical recall needs no embedding: skip loading a model.
    let embedder: std::sync::Arc<dyn EmbeddingProvider> = if args.mode.needs_vector() {
        embedder(args.embedder)?
    } else {
        std::sync::Arc::new(HashEmbedder::new(8))
    };
    let home = memoir::paths::memoir_home()?;
    let store = if home.join("blobs").is_dir() {
        Some(ArtifactStore::open(&home)?)
    } else {
        None
    };
    let options = RebuildOptions {
        view: ViewConfig {
            mode: args.mode,
            ..ViewConfig::default()
        },
        ..RebuildOptions::default()
    };
    let progress = Progress::spinner(&format!("indexing {} message(s)", history.turns.len()));
    let rebuilt =
        SessionView::rebuild_history(&history, embedder.as_ref(), store.as_ref(), &options);
    progress.finish();
    let (view, report) = rebuilt?;
    if let Some(budget) = args.budget {
        let block = view.graft_budget(embedder.as_ref(), &args.query, budget, store.as_ref())?;
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&block)?);
        } else if block.text.is_empty() {
            outln!("(nothing relevant fits in {budget} tokens)");
        } else {
            outln!("{}", block.text);
        }
        return Ok(found(!block.text.is_empty()));
    }
    let hits = view.query_text_mode(embedder.as_ref(), &args.query, args.k, args.mode)?;
    let text_of = |c: &GraftContent| -> String {
        match c {
            GraftContent::Inline(t) => t.clone(),
            GraftContent::Blob(h) => match store.as_ref().map(|s| s.load_string(h)) {
                Some(Ok(t)) => t,
                Some(Err(e)) => format!("<blob {h}: {e}>"),
                None => format!("<blob {h}: no blob store>"),
            },
            GraftContent::Reference => "<not held by the view>".into(),
        }
    };
    if args.json {
        let rows: Vec<serde_json::Value> = hits
            .iter()
            .map(|h| {
                serde_json::json!({
                    "session": h.session,
                    "chain_seq": h.chain_seq,
                    "part": h.meta.part,
                    "kind": h.meta.kind,
                    "state": h.meta.state,
                    "score": h.score,
                    "content_hash": h.meta.content_hash,
                    "text": text_of(&h.meta.content()),
                })
            })
            .collect();
        let out = serde_json::json!({
            "session": id,
            "query": args.query,
            "mode": args.mode,
            "embedder": embedder.model_id(),
            "chunks": report.chunks,
            "hits": rows,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(found(!hits.is_empty()));
    }
    outln!(
        "session {} ({} messages, {} chunks), mode {}, embedder {}",
        id,
        report.messages,
        report.chunks,
        args.mode,
        embedder.model_id()
    );
    if hits.is_empty() {
        outln!("no match");
    }
    for h in &hits {
        let text = text_of(&h.meta.content());
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let preview: String = one_line.chars().take(200).collect();
        let more = if one_line.chars().count() > 200 {
            "…"
        } else {
            ""
        };
        outln!(
            "[chain_seq {}{}{}] {:.3} {}: {preview}{more}",
            h.chain_seq,
            if h.meta.part > 0 {
                format!(".{}", h.meta.part)
            } else {
                String::new()
            },
            if h.session != id {
                format!(" of {}", h.session)
            } else {
                String::new()
            },
            h.score,
            h.meta.kind
        );
    }
    Ok(found(!hits.is_empty()))
}

/// Exit 0 when something matched, 1 ("nothing matched") otherwise.
fn found(any: bool) -> ExitCode {
    if any {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::PROBLEMS)
    }
}
