//! `memoir serve` (the shared HTTP store) and `memoir remote` (its client).
//!
//! `serve` opens a store (a directory, or `postgres://...`), loads bearer
//! tokens, and runs `memoir_server` until Ctrl-C or SIGTERM, finishing the
//! requests in flight. `remote` talks to such a server through
//! `memoir::client` (`--remote URL`, `--token`).

//!
//! Each half is behind its cargo feature: `server` (axum, tokio) and
//! `client` (the HTTP client).

#[cfg(feature = "server")]
use std::net::SocketAddr;
#[cfg(feature = "server")]
use std::path::PathBuf;
#[cfg(any(feature = "server", feature = "client"))]
use std::process::ExitCode;
#[cfg(feature = "client")]
use std::sync::Arc;

use anyhow::Context;
use memoir::client::{wire, Client, RemoteStore};
#[cfg(feature = "client")]
use memoir::message::Message;
use memoir::paths::{resolve_store, StoreRequest};
use memoir::record::Record;
use memoir::store::{scan, Durability};
use memoir::transcript::find_in;
use memoir_server::{check_listen, open_store, parse_tokens, TokenGrant};
use serde_json::json;

use super::choices;
use crate::exit::{name_store, CliError};
use crate::output::print_json;
use crate::{out, outln};

/// Arguments of `memoir serve`.
#[cfg(feature = "server")]
#[derive(clap::Args)]
pub struct Args {
    /// Store: a session directory, or `postgres://user@host:port/db[#schema=NAME]`
    /// (default: $MEMOIR_STORE, else the store every command uses:
    /// $MEMOIR_SESSION_DIR, the current directory's project, $MEMOIR_HOME/sessions).
    #[arg(long)]
    store: Option<String>,
    /// Address to listen on (loopback unless --allow-public).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Tokens file: {"tokens":[{"token":"...","project":"...","expires_at":"..."}]}
    /// (default: $MEMOIR_SERVER_TOKENS).
    #[arg(long)]
    tokens: Option<PathBuf>,
    /// A token as PROJECT=TOKEN (repeatable; tokens are at least 16 characters).
    #[arg(long = "token", value_name = "PROJECT=TOKEN")]
    token: Vec<String>,
    /// Append durability.
    #[arg(long, default_value = "fsync", value_parser = choices::durability())]
    durability: Durability,
    /// Largest request body in MiB.
    #[arg(long, default_value_t = 8)]
    max_body_mib: usize,
    /// Allow a non-loopback --listen address.
    #[arg(long)]
    allow_public: bool,
    /// Do not serve the team view (the web view at `/`, per token's project).
    #[arg(long)]
    no_ui: bool,
    /// A host name the team view answers to besides the listen address
    /// (`name` or `name:port`, as a proxy in front forwards it; repeatable).
    #[arg(long = "ui-host", value_name = "HOST")]
    ui_host: Vec<String>,
}

#[cfg(any(feature = "server", feature = "client"))]
fn env_nonempty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Run `memoir serve`.
#[cfg(feature = "server")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_listen(&args.listen, args.allow_public)?;
    let durability = args.durability;
    let spec = match args.store.or_else(|| env_nonempty("MEMOIR_STORE")) {
        Some(s) => s,
        None => {
            let cwd = std::env::current_dir().context("current directory")?;
            let resolved = resolve_store(&StoreRequest::default(), &cwd)?;
            resolved.dir.display().to_string()
        }
    };
    let tokens = load_tokens(args.tokens, &args.token)?;
    let mut config = open_store(&spec, durability).with_context(|| format!("opening {spec}"))?;
    config.tokens = tokens;
    config.max_body = args.max_body_mib.max(1) << 20;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let listen = args.listen;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let addr = listener.local_addr()?;
        outln!("memoir serve: listening on http://{addr}");
        if cfg!(feature = "ui") && !args.no_ui {
            config.ui = Some(memoir_server::TeamUi::for_listen(addr, &args.ui_host));
            eprintln!("memoir serve: team view at http://{addr}/?token=YOUR_TOKEN");
        }
        eprintln!(
            "memoir serve: store {}; Ctrl-C or SIGTERM stops after the requests in flight",
            config
                .store
                .location("x")
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
        memoir_server::serve(listener, config, memoir_server::shutdown_signal()).await?;
        eprintln!("memoir serve: stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The bearer tokens of `--tokens FILE` (else `$MEMOIR_SERVER_TOKENS`) and
/// every `--token PROJECT=TOKEN`, checked; none at all is a usage error.
/// Shared by `memoir serve` and `memoir mcp --http`.
#[cfg(feature = "server")]
pub fn load_tokens(file: Option<PathBuf>, token: &[String]) -> anyhow::Result<Vec<TokenGrant>> {
    let mut tokens: Vec<TokenGrant> = Vec::new();
    if let Some(path) = file.or_else(|| env_nonempty("MEMOIR_SERVER_TOKENS").map(PathBuf::from)) {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading tokens file {}", path.display()))?;
        tokens.extend(parse_tokens(&text)?);
    }
    for t in token {
        let Some((project, token)) = t.split_once('=') else {
            return Err(CliError::usage(format!(
                "--token wants PROJECT=TOKEN, got {t:?}"
            )));
        };
        let grant = TokenGrant {
            token: token.to_string(),
            project: project.to_string(),
            expires_at: None,
        };
        tokens.extend(parse_tokens(&serde_json::to_string(
            &serde_json::json!({ "tokens": [grant] }),
        )?)?);
    }
    if tokens.is_empty() {
        return Err(CliError::usage(
            "no tokens: give --token PROJECT=TOKEN or --tokens FILE (or $MEMOIR_SERVER_TOKENS)",
        ));
    }
    Ok(tokens)
}

/// Arguments of `memoir remote`.
#[cfg(feature = "client")]
#[derive(clap::Args)]
pub struct RemoteArgs {
    /// Server URL, e.g. http://127.0.0.1:8080 (default: $MEMOIR_REMOTE).
    #[arg(long = "remote", value_name = "URL", global = true)]
    url: Option<String>,
    /// Bearer token (default: $MEMOIR_TOKEN).
    #[arg(long, global = true)]
    token: Option<String>,
    /// Print JSON (errors too, on stderr).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: RemoteCommand,
}

/// Subcommands of `memoir remote`.
#[cfg(feature = "client")]
#[derive(clap::Subcommand)]
pub enum RemoteCommand {
    /// List the project's sessions, newest first.
    List,
    /// Show a session's conversation (messages labelled with their seq).
    Show {
        /// Full id or unique prefix.
        id: String,
    },
    /// Create a session; prints its id.
    Create {
        /// Session id (default: a new one).
        #[arg(long)]
        id: Option<String>,
        /// Title.
        #[arg(long)]
        title: Option<String>,
    },
    /// Append one message; prints its seq.
    Append {
        /// Full id or unique prefix.
        id: String,
        /// The message text.
        text: String,
        /// Who says it.
        #[arg(long, default_value = "user", value_parser = ["user", "assistant"])]
        role: String,
        /// Fail (exit 3) unless the message gets this seq.
        #[arg(long)]
        expected_seq: Option<u64>,
    },
    /// Fork a session by reference; prints the new id.
    Fork {
        /// Full id or unique prefix.
        id: String,
        /// The last record seq to keep (default: all). Moved back so no tool
        /// call is separated from its results.
        #[arg(long, visible_alias = "at", value_name = "SEQ")]
        at_seq: Option<u64>,
        /// The new session's id.
        #[arg(long)]
        new_id: Option<String>,
    },
    /// Print a session's export (the `memoir.session-export` JSONL).
    Export {
        /// Full id or unique prefix.
        id: String,
    },
    /// Delete a session.
    Delete {
        /// Full id (no prefixes for deletion).
        id: String,
    },
    /// Bring a deleted session back.
    Restore {
        /// Full id.
        id: String,
    },
    /// Erase a deleted session for good (kept while forks need it: exit 3).
    Purge {
        /// Full id.
        id: String,
    },
    /// Search a session's earlier context (exit 1 when nothing matched).
    Search {
        /// Full id or unique prefix.
        id: String,
        /// The query.
        query: String,
        /// How many results.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// Retrieval mode.
        #[arg(long, default_value = "hybrid", value_parser = choices::MODES)]
        mode: String,
    },
    /// Verify a session's integrity chain as the server's store reads it.
    Verify {
        /// Full id or unique prefix.
        id: String,
    },
}

/// Run `memoir remote`.
#[cfg(feature = "client")]
pub fn run_remote(args: RemoteArgs) -> anyhow::Result<ExitCode> {
    let Some(url) = args.url.or_else(|| env_nonempty("MEMOIR_REMOTE")) else {
        return Err(CliError::usage(
            "no server: give --remote URL or set $MEMOIR_REMOTE",
        ));
    };
    let token = args.token.or_else(|| env_nonempty("MEMOIR_TOKEN"));
    let client = Client::new(&url, token)?;
    let store = Arc::new(RemoteStore::new(client.clone()));
    let json = args.json;
    let on_server = |e: memoir::Error| name_store(e, url.as_str());
    let resolve = |prefix: &str| find_in(store.as_ref(), prefix).map_err(on_server);
    match args.command {
        RemoteCommand::List => {
            let l = client.list()?;
            if json {
                return print_json(&l);
            }
            for s in &l.sessions {
                outln!(
                    "{}  {}  {}",
                    s.meta.id,
                    s.meta.created_at.format("%Y-%m-%d %H:%M"),
                    s.meta.title.as_deref().unwrap_or("(untitled)")
                );
            }
        }
        RemoteCommand::Show { id } => {
            let loaded = client.load(&resolve(&id)?).map_err(on_server)?;
            if json {
                return print_json(&loaded);
            }
            for (i, (m, seq)) in loaded.messages.iter().zip(&loaded.message_seqs).enumerate() {
                let from = match &loaded.meta.parent {
                    Some(p) if i < loaded.inherited => Some(p.session.as_str()),
                    _ => None,
                };
                super::sessions::print_message(*seq, from, m)?;
            }
            if !loaded.issues.is_empty() {
                eprintln!("{} integrity issue(s)", loaded.issues.len());
            }
        }
        RemoteCommand::Create { id, title } => {
            let created = client.create(&wire::CreateSession {
                id,
                title,
                ..Default::default()
            })?;
            if json {
                return print_json(&created);
            }
            outln!("{}", created.id);
        }
        RemoteCommand::Append {
            id,
            text,
            role,
            expected_seq,
        } => {
            let message = match role.as_str() {
                "assistant" => Message::assistant(text),
                _ => Message::user(text),
            };
            let id = resolve(&id)?;
            let a = client
                .append(&id, &[Record::Message(message)], expected_seq)
                .map_err(on_server)?;
            if json {
                return print_json(
                    &json!({"id": id, "first_seq": a.first_seq, "last_seq": a.last_seq}),
                );
            }
            outln!("{}", a.first_seq);
        }
        RemoteCommand::Fork { id, at_seq, new_id } => {
            let forked = client
                .fork(
                    &resolve(&id)?,
                    &wire::ForkRequest {
                        id: new_id,
                        at_seq,
                        title: None,
                    },
                )
                .map_err(on_server)?;
            if json {
                return print_json(&forked);
            }
            outln!("{}", forked.id);
        }
        RemoteCommand::Export { id } => {
            let id = resolve(&id)?;
            let text = client.export(&id).map_err(on_server)?;
            if json {
                return print_json(&json!({"id": id, "format": "jsonl", "content": text}));
            }
            out!("{text}");
        }
        RemoteCommand::Delete { id } => {
            memoir::id::validate(&id)?;
            client.delete(&id).map_err(on_server)?;
            if json {
                return print_json(&json!({"id": id, "deleted": true}));
            }
            outln!("deleted {id}");
        }
        RemoteCommand::Restore { id } => {
            memoir::id::validate(&id)?;
            client.restore(&id).map_err(on_server)?;
            if json {
                return print_json(&json!({"id": id, "restored": true}));
            }
            outln!("restored {id}");
        }
        RemoteCommand::Purge { id } => {
            memoir::id::validate(&id)?;
            let purged = client.purge(&id).map_err(on_server)?;
            if json {
                return print_json(&purged);
            }
            outln!("purged {id}");
        }
        RemoteCommand::Search {
            id,
            query,
            top_k,
            mode,
        } => {
            let id = resolve(&id)?;
            let r = client
                .search_mode(&id, &query, top_k, Some(&mode))
                .map_err(on_server)?;
            let any = !r.hits.is_empty();
            if json {
                print_json(&r)?;
            } else {
                for h in r.hits {
                    outln!(
                        "[{}] {:.3} {}: {}",
                        h.chain_seq,
                        h.score,
                        h.kind,
                        h.text.unwrap_or_default()
                    );
                }
            }
            if !any {
                return Ok(ExitCode::from(crate::exit::PROBLEMS));
            }
        }
        RemoteCommand::Verify { id } => {
            let id = resolve(&id)?;
            let raw = client.log(&id).map_err(on_server)?;
            let clean = raw.report.is_clean();
            if json {
                print_json(&json!({
                    "id": id,
                    "clean": clean,
                    "summary": scan::describe(&raw.report),
                    "issues": raw.report.issues.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                    "first_bad_seq": raw.report.first_bad_seq(),
                }))?;
            } else {
                outln!("{}", scan::describe(&raw.report));
            }
            if !clean {
                return Ok(ExitCode::from(crate::exit::PROBLEMS));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
