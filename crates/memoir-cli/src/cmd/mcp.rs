//! `memoir mcp`: serve the store's sessions and notes as MCP tools
//! ([`memoir_mcp`]) over stdio (default) or streamable HTTP (`--http ADDR`,
//! with `memoir serve`'s bearer tokens, tokens-file and minted alike, per-token
//! project scoping and each tool gated by its role).
//! `--print-config claude|codex` prints how to register it.
//!
//! Local (stdio) scoping: the project is `--project`, else the current
//! directory's project (nearest ancestor with `.memoir/sessions`), else the
//! current directory; the store is the one every command would use from
//! that directory. A project's own store holds only its sessions; a shared
//! one (`$MEMOIR_SESSION_DIR`, `$MEMOIR_HOME/sessions`, `--dir`) is filtered
//! on each session's workspace, and `all_projects` widens a search.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use memoir::blob::ArtifactStore;
use memoir::embed::{select, EmbedConfig};
use memoir::paths::{resolve_store, StoreRequest, StoreSource};
use memoir_mcp::register::{self, Agent};
use memoir_mcp::{Backend, McpConfig, MemoirMcp};

use super::serve::load_tokens;
use crate::exit::CliError;
use crate::outln;

/// Arguments of `memoir mcp`.
#[derive(clap::Args)]
pub struct Args {
    /// Serve streamable HTTP on this address (at /mcp; loopback unless
    /// --allow-public) instead of stdio; every request needs a bearer token.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// The project (a directory) the tools are scoped to (default: the
    /// current directory's project, else the current directory).
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
    /// Session directory (default: the store every command uses from the project).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Offer the destructive tools too (forget, fork_session).
    #[arg(long)]
    allow_writes: bool,
    /// Print how to register memoir with an agent (claude or codex) and exit.
    #[arg(long, value_name = "AGENT")]
    print_config: Option<Agent>,
    /// --http: the store (a directory or postgres://...; default: $MEMOIR_STORE, else the resolved store).
    #[arg(long)]
    store: Option<String>,
    /// --http: tokens file (default: $MEMOIR_SERVER_TOKENS), as for `memoir serve`;
    /// tokens minted with `memoir serve tokens create` in the store are accepted too.
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// --http: a token as PROJECT=TOKEN (repeatable).
    #[arg(long = "token", value_name = "PROJECT=TOKEN")]
    token: Vec<String>,
    /// --http: allow a non-loopback address.
    #[arg(long)]
    allow_public: bool,
    /// --http without tokens: serve the local project (as stdio does) to
    /// anyone who can reach the loopback address. Refused with --allow-public.
    #[arg(long, conflicts_with_all = ["tokens", "token", "allow_public", "store"])]
    no_auth: bool,
}

fn absolute(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The local backend: the project and its store (see the module docs).
fn local_backend(args: &Args) -> anyhow::Result<Backend> {
    let cwd = std::env::current_dir().context("current directory")?;
    // A project that does not exist here (a shared store's workspace key)
    // is still a project: its path is the key.
    let from = match &args.project {
        Some(p) => absolute(&cwd.join(p)),
        None => cwd,
    };
    let request = StoreRequest {
        dir: args.dir.clone(),
        project: None,
    };
    let resolved = resolve_store(&request, &from)?;
    let own = matches!(
        resolved.source,
        StoreSource::Project | StoreSource::CurrentProject
    );
    let project = match (&args.project, &resolved.project) {
        (Some(_), _) => from,
        (None, Some(p)) => absolute(p),
        (None, None) => absolute(&from),
    };
    memoir::paths::create_private_dir(&resolved.dir)?;
    Ok(Backend::Local {
        dir: absolute(&resolved.dir),
        project,
        shared: !own,
    })
}

/// The shared-store backend of `--http`.
fn tenant_backend(args: &Args) -> anyhow::Result<Backend> {
    let spec = match args
        .store
        .clone()
        .or_else(|| std::env::var("MEMOIR_STORE").ok().filter(|v| !v.is_empty()))
    {
        Some(s) => s,
        None => {
            let cwd = std::env::current_dir().context("current directory")?;
            let request = StoreRequest {
                dir: args.dir.clone(),
                project: None,
            };
            resolve_store(&request, &cwd)?.dir.display().to_string()
        }
    };
    let config = memoir_server::open_store(&spec, memoir::store::Durability::Fsync)
        .with_context(|| format!("opening {spec}"))?;
    let index_root = memoir_mcp::scope::tenant_index_root(&spec)?;
    Ok(Backend::Tenants {
        store: config.store,
        index_root,
    })
}

/// Run `memoir mcp`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(agent) = args.print_config {
        let mut extra = Vec::new();
        if args.allow_writes {
            extra.push("--allow-writes".to_string());
        }
        if let Some(p) = &args.project {
            extra.push("--project".to_string());
            extra.push(absolute(p).display().to_string());
        }
        outln!("{}", register::config(agent, &extra).trim_end());
        return Ok(ExitCode::SUCCESS);
    }
    let (backend, tokens) = match args.http {
        Some(addr) if args.no_auth => {
            memoir_server::check_listen(&addr, false)?;
            (local_backend(&args)?, None)
        }
        Some(addr) => {
            memoir_server::check_listen(&addr, args.allow_public)?;
            let backend = tenant_backend(&args)?;
            // Run-time tokens (`memoir serve tokens create`) live in the store.
            let (tokens, book) = match &backend {
                Backend::Tenants { store, .. } => (
                    load_tokens(args.tokens.clone(), &args.token, store)?,
                    memoir::access::book_of(store),
                ),
                Backend::Local { .. } => (Vec::new(), None),
            };
            (
                backend,
                Some(memoir_mcp::http::HttpTokens {
                    index: memoir_server::TokenIndex::new(tokens),
                    book,
                }),
            )
        }
        None if args.no_auth => return Err(CliError::usage("--no-auth needs --http ADDR")),
        None => (local_backend(&args)?, None),
    };
    let embedder = select(&EmbedConfig::default()).context("cannot build the embedder")?;
    let home = memoir::paths::memoir_home()?;
    let blobs = if home.join("blobs").is_dir() {
        Some(Arc::new(ArtifactStore::open(&home)?))
    } else {
        None
    };
    let server = MemoirMcp::new(McpConfig {
        backend,
        allow_writes: args.allow_writes,
        embedder,
        blobs,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    match args.http {
        None => rt.block_on(memoir_mcp::serve_stdio(server))?,
        Some(addr) => {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("listening on {addr}"))?;
                let local = listener.local_addr()?;
                outln!(
                    "memoir mcp: listening on http://{local}{}",
                    memoir_mcp::http::MCP_PATH
                );
                let router = memoir_mcp::http::router(server, tokens, local);
                memoir_mcp::http::serve(listener, router, memoir_server::shutdown_signal()).await?;
                eprintln!("memoir mcp: stopped");
                anyhow::Ok(())
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
