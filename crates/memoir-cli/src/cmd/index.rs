//! `memoir index [--rebuild] [--embed]`: bring the search index of a store up
//! to date (or rebuild it), and optionally compute the configured embedder's
//! vectors for every message (with progress on stderr).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use memoir::search::SearchMode;

use super::search::open_store_index;

/// Arguments of `memoir index`.
#[derive(clap::Args)]
pub struct Args {
    /// Forget the index and build it again from the transcripts.
    #[arg(long)]
    pub rebuild: bool,
    /// Also compute and store embeddings (the configured embedder) for every
    /// message that has none, so semantic and hybrid search need not.
    #[arg(long)]
    pub embed: bool,
    /// Session directory (default: the current project's, else the global store).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Store: a session directory, or `postgres://user@host:port/db[#schema=NAME]`
    /// (wins over --dir; PostgreSQL keeps the index in its own database).
    #[cfg(feature = "server")]
    #[arg(long, value_name = "STORE", conflicts_with = "dir")]
    pub store: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run `memoir index`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mode = if args.embed {
        SearchMode::Hybrid
    } else {
        SearchMode::Lexical
    };
    #[cfg(feature = "server")]
    let store = args.store.as_deref();
    #[cfg(not(feature = "server"))]
    let store = None;
    let mut ix = open_store_index(store, &args.dir, mode)?;
    let started = std::time::Instant::now();
    // A first index of a large store takes seconds: a spinner on a terminal.
    let spinner = (!args.json).then(|| {
        crate::progress::Progress::spinner(if args.rebuild {
            "rebuilding the search index"
        } else {
            "updating the search index"
        })
    });
    let report = if args.rebuild {
        ix.rebuild()
    } else {
        ix.update()
    };
    if let Some(s) = spinner {
        s.finish();
    }
    let report = report.context("indexing")?;
    let mut embedded = 0;
    if args.embed {
        let show = !args.json;
        embedded = ix.embed_missing(64, &mut |done, total| {
            if show {
                eprint!("\rembedding {done}/{total}");
                let _ = std::io::stderr().flush();
            }
        })?;
        if show && embedded > 0 {
            eprintln!();
        }
    }
    let stats = ix.stats()?;
    if args.json {
        let out = serde_json::json!({
            "index": ix.path(),
            "update": report,
            "embedded": embedded,
            "embedder": args.embed.then(|| ix.embedder().model_id()),
            "stats": stats,
            "seconds": started.elapsed().as_secs_f64(),
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    crate::outln!(
        "{}: {} sessions ({} unchanged, {} extended, {} indexed, {} removed, {} unreadable), {} messages added{} in {:.2}s",
        ix.path().display(),
        report.sessions,
        report.unchanged,
        report.extended,
        report.reindexed,
        report.removed,
        report.unreadable,
        report.messages,
        if report.rebuilt { " (rebuilt)" } else { "" },
        started.elapsed().as_secs_f64()
    );
    if args.embed {
        crate::outln!("{embedded} vectors stored for {}", ix.embedder().model_id());
    }
    crate::outln!(
        "index: {} sessions, {} messages, {} vectors, {:.1} MB",
        stats.sessions,
        stats.messages,
        stats.vectors,
        stats.bytes as f64 / 1e6
    );
    Ok(ExitCode::SUCCESS)
}
