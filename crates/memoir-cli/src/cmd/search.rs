//! `memoir search "<query>"`: search every session of the store through the
//! persistent index ([`memoir::search`]), catching it up first (cheap when
//! nothing changed). `--store postgres://...` searches a PostgreSQL store
//! (the index lives in its database); otherwise the file store of `--dir`
//! or the defaults. Hits print as `session seq role time title` plus a
//! snippet with the matches between `[[`/`]]`, the same on a terminal or
//! not (memoir prints no colour); `--json` prints the library's `SearchHit`s.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use memoir::message::Role;
use memoir::search::{parse_time, SearchFilter, SearchHit, SearchIndex, SearchMode, SearchQuery};

use super::store::StoreArgs;

/// Arguments of `memoir search`.
#[derive(clap::Args)]
#[command(
    after_help = "Hits are ranked on the whole query: messages holding every query term first, \
then coverage, proximity, BM25 and (hybrid) similarity; recency breaks ties (docs/SEARCH.md).\n\n\
Snippets: matches between [[ and ]]; the text's own \\, [ and ] are printed as \\\\, \\[ and \\], \
so a marker never collides with the message. --json gives the unescaped text and the matches' byte \
ranges in it (snippet.highlights)."
)]
pub struct Args {
    /// Words to look for (`"quoted parts"` must match as phrases). Empty with
    /// filters: the newest matching messages.
    #[arg(default_value = "")]
    pub query: String,
    /// How many hits.
    #[arg(short = 'k', long = "top", default_value_t = 10)]
    pub k: usize,
    /// Only sessions of this project (its directory, or one under it).
    #[arg(long, value_name = "PATH")]
    pub project: Option<String>,
    /// Only sessions written by this agent (claude-code, codex, gemini-cli, opencode, memoir).
    #[arg(long)]
    pub agent: Option<String>,
    /// Only this session (id or id prefix).
    #[arg(long)]
    pub session: Option<String>,
    /// Only messages written at or after this time (RFC 3339, YYYY-MM-DD, or 7d / 12h ago).
    #[arg(long, value_parser = parse_time)]
    pub since: Option<DateTime<Utc>>,
    /// Only messages written before this time (same forms as --since).
    #[arg(long, value_parser = parse_time)]
    pub until: Option<DateTime<Utc>>,
    /// Only messages of this role (user, assistant, tool, system).
    #[arg(long, value_parser = parse_role)]
    pub role: Option<Role>,
    /// Only tool calls of this tool and their results (e.g. Bash).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// lexical, semantic or hybrid.
    #[arg(long, default_value = "hybrid")]
    pub mode: SearchMode,
    /// Session directory (default: the current project's, else the global store).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Store: a session directory, or `postgres://user@host:port/db[#schema=NAME]`
    /// (wins over --dir).
    #[cfg(feature = "server")]
    #[arg(long, value_name = "STORE", conflicts_with = "dir")]
    pub store: Option<String>,
    /// Search the index as it is, without catching up first.
    #[arg(long)]
    pub no_update: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_role(s: &str) -> Result<Role, String> {
    match s {
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        "system" => Ok(Role::System),
        other => Err(format!(
            "unknown role {other:?} (user, assistant, tool or system)"
        )),
    }
}

/// The sessions directory `--dir` or the defaults name.
pub fn sessions_dir(dir: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    Ok(StoreArgs {
        dir: dir.clone(),
        project: None,
    }
    .resolve()?
    .dir)
}

/// Which store's index a command uses: `--store` (a directory or
/// `postgres://...`), else `--dir`, else the resolved store's directory.
pub fn open_store_index(
    store: Option<&str>,
    dir: &Option<PathBuf>,
    mode: SearchMode,
) -> anyhow::Result<SearchIndex> {
    let ix = match store {
        #[cfg(feature = "server")]
        Some(spec) => {
            let config = memoir_server::open_store(spec, memoir::store::Durability::Fsync)
                .with_context(|| format!("opening {spec}"))?;
            SearchIndex::for_store(config.store)
                .with_context(|| format!("opening the index of {spec}"))?
        }
        #[cfg(not(feature = "server"))]
        Some(spec) => {
            return Err(crate::exit::CliError::usage(format!(
                "this build cannot open the store {spec:?} (feature `server`)"
            )))
        }
        None => {
            let dir = sessions_dir(dir)?;
            SearchIndex::open(&dir)
                .with_context(|| format!("opening the index of {}", dir.display()))?
        }
    };
    with_mode_embedder(ix, mode)
}

/// Open the index of `dir` with the configured embedder when `mode` needs one.
pub fn open_index(dir: &std::path::Path, mode: SearchMode) -> anyhow::Result<SearchIndex> {
    let ix = SearchIndex::open(dir)
        .with_context(|| format!("opening the index of {}", dir.display()))?;
    with_mode_embedder(ix, mode)
}

fn with_mode_embedder(ix: SearchIndex, mode: SearchMode) -> anyhow::Result<SearchIndex> {
    Ok(if mode == SearchMode::Lexical {
        ix
    } else {
        ix.with_embedder(super::eval::embedder(None)?)
    })
}

/// Run `memoir search`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut ix = open_store_index(store_arg(&args), &args.dir, args.mode)?;
    if !args.no_update {
        ix.update().context("updating the search index")?;
    }
    let query = SearchQuery {
        text: args.query.clone(),
        k: args.k,
        mode: args.mode,
        filter: SearchFilter {
            project: args.project.clone(),
            agent: args.agent.clone(),
            session: args.session.clone(),
            since: args.since,
            until: args.until,
            role: args.role,
            tool: args.tool.clone(),
        },
    };
    let hits = ix.search(&query)?;
    if args.json {
        let out = serde_json::json!({
            "query": args.query,
            "mode": args.mode,
            "hits": hits,
        });
        return crate::output::print_json(&out);
    }
    if hits.is_empty() {
        eprintln!("no match");
        return Ok(ExitCode::from(1));
    }
    for h in &hits {
        crate::outln!("{}", crate::output::plain(&render_hit(h)));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "server")]
fn store_arg(args: &Args) -> Option<&str> {
    args.store.as_deref()
}

#[cfg(not(feature = "server"))]
fn store_arg(_: &Args) -> Option<&str> {
    None
}

/// One hit as printed: a header line and the snippet with its matches
/// between `[[`/`]]` (the text's own brackets escaped). Plain text only,
/// whatever stdout is (printed through [`crate::output::plain`], so escape
/// codes in session text stay inert).
fn render_hit(h: &SearchHit) -> String {
    let tools = if h.tools.is_empty() {
        String::new()
    } else {
        format!(" [{}]", h.tools.join(","))
    };
    format!(
        "{} seq {} {}{} {} {} {}{}  {:.3}\n    {}",
        h.session,
        h.seq,
        h.role.as_str(),
        tools,
        h.time.format("%Y-%m-%d %H:%M"),
        h.agent,
        h.title.as_deref().unwrap_or("(untitled)"),
        if h.project.is_empty() {
            String::new()
        } else {
            format!("  {}", h.project)
        },
        h.score,
        h.snippet.marked(
            memoir::search::snippet::MARK_OPEN,
            memoir::search::snippet::MARK_CLOSE
        ),
    )
}
