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

#[cfg(feature = "server")]
use anyhow::Context;
#[cfg(feature = "client")]
use memoir::client::{wire, Client, RemoteStore};
#[cfg(feature = "client")]
use memoir::message::Message;
#[cfg(feature = "server")]
use memoir::paths::{resolve_store, StoreRequest};
#[cfg(feature = "client")]
use memoir::record::Record;
#[cfg(feature = "client")]
use memoir::store::scan;
#[cfg(feature = "server")]
use memoir::store::Durability;
#[cfg(feature = "client")]
use memoir::transcript::find_in;
#[cfg(feature = "server")]
use memoir_server::{check_listen, open_store, parse_tokens, TokenGrant};
#[cfg(any(feature = "server", feature = "client"))]
use serde_json::json;

use super::choices;
#[cfg(feature = "client")]
use crate::exit::name_store;
use crate::exit::CliError;
#[cfg(feature = "client")]
use crate::out;
use crate::outln;
#[cfg(any(feature = "server", feature = "client"))]
use crate::output::print_json;

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
    /// Tokens file: {"tokens":[{"token":"...","project":"...","expires_at":"...","roles":["read"],"name":"..."}]}
    /// (an entry without roles holds every role on its project)
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
    /// Manage the store's access tokens instead of serving.
    #[command(subcommand)]
    command: Option<ServeCommand>,
}

/// Subcommands of `memoir serve`.
#[cfg(feature = "server")]
#[derive(clap::Subcommand)]
pub enum ServeCommand {
    /// Access tokens kept in the store (its PostgreSQL database, or the
    /// file store's .tokens.json): every server over the store sees them.
    #[command(subcommand)]
    Tokens(TokensCommand),
}

/// `memoir serve tokens ...`.
#[cfg(feature = "server")]
#[derive(clap::Subcommand)]
pub enum TokensCommand {
    /// Mint a token; its secret is printed once, never stored.
    Create {
        /// The member it belongs to (usage reports group by it).
        #[arg(long)]
        name: String,
        /// PROJECT=ROLE[+ROLE...] (roles: read, publish, manage, usage); repeatable.
        #[arg(long = "grant", value_name = "PROJECT=ROLES", required = true)]
        grants: Vec<String>,
        /// Refuse it after this instant (RFC 3339).
        #[arg(long)]
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
        #[command(flatten)]
        on: TokenStore,
    },
    /// List the tokens (never their secrets).
    List {
        #[command(flatten)]
        on: TokenStore,
    },
    /// Revoke a token by its id (every server refuses it from the next request).
    Revoke {
        /// The token's id (`memoir serve tokens list`).
        id: String,
        #[command(flatten)]
        on: TokenStore,
    },
}

/// The store whose tokens a `memoir serve tokens` command works on.
#[cfg(feature = "server")]
#[derive(clap::Args)]
pub struct TokenStore {
    /// Store: a session directory or `postgres://...` (default as `memoir serve`).
    #[arg(long)]
    store: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[cfg(feature = "server")]
fn store_spec(store: Option<String>) -> anyhow::Result<String> {
    Ok(match store.or_else(|| env_nonempty("MEMOIR_STORE")) {
        Some(s) => s,
        None => {
            let cwd = std::env::current_dir().context("current directory")?;
            let resolved = resolve_store(&StoreRequest::default(), &cwd)?;
            resolved.dir.display().to_string()
        }
    })
}

/// Run `memoir serve tokens ...`.
#[cfg(feature = "server")]
fn run_tokens(command: TokensCommand) -> anyhow::Result<ExitCode> {
    use memoir::access::{book_of, mint, Grant, TokenBook};
    let on = match &command {
        TokensCommand::Create { on, .. }
        | TokensCommand::List { on }
        | TokensCommand::Revoke { on, .. } => on,
    };
    let spec = store_spec(on.store.clone())?;
    let json = on.json;
    let config = open_store(&spec, Durability::Fsync).with_context(|| format!("opening {spec}"))?;
    let Some(book) = book_of(&config.store) else {
        return Err(CliError::usage(format!("{spec} keeps no access tokens")));
    };
    let book: &dyn TokenBook = book.as_ref();
    match command {
        TokensCommand::Create {
            name,
            grants,
            expires_at,
            ..
        } => {
            let grants = grants
                .iter()
                .map(|g| Grant::parse(g))
                .collect::<Result<Vec<_>, _>>()?;
            let t = mint(&name, grants, expires_at)?;
            book.insert(&t.entry)?;
            if json {
                let mut entry = serde_json::to_value(&t.entry)?;
                if let Some(o) = entry.as_object_mut() {
                    o.remove("digest");
                }
                return print_json(&json!({"token": t.secret, "entry": entry}));
            }
            outln!("{}", t.secret);
            eprintln!(
                "memoir: token {} for {name} created; the secret above is shown once",
                t.entry.id
            );
        }
        TokensCommand::List { .. } => {
            let entries = book.list()?;
            if json {
                let list: Vec<serde_json::Value> = entries
                    .iter()
                    .map(|e| {
                        let mut v = serde_json::to_value(e).unwrap_or_default();
                        if let Some(o) = v.as_object_mut() {
                            o.remove("digest");
                        }
                        v
                    })
                    .collect();
                return print_json(&json!({ "tokens": list }));
            }
            for e in entries {
                let grants: Vec<String> = e
                    .grants
                    .iter()
                    .map(|g| {
                        let roles: Vec<&str> = g.roles.iter().map(|r| r.as_str()).collect();
                        format!("{}={}", g.project, roles.join("+"))
                    })
                    .collect();
                let state = match (e.revoked_at, e.expires_at) {
                    (Some(t), _) => format!("revoked {}", t.to_rfc3339()),
                    (None, Some(t)) => format!("expires {}", t.to_rfc3339()),
                    (None, None) => "live".to_string(),
                };
                outln!("{}  {}  {}  {}", e.id, e.name, grants.join(" "), state);
            }
        }
        TokensCommand::Revoke { id, .. } => {
            if !book.revoke(&id)? {
                return Err(memoir::Error::Invalid(format!(
                    "no live token {id} (see `memoir serve tokens list`)"
                ))
                .into());
            }
            if json {
                return print_json(&json!({"revoked": id}));
            }
            outln!("revoked {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(any(feature = "server", feature = "client"))]
fn env_nonempty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Run `memoir serve`.
#[cfg(feature = "server")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(ServeCommand::Tokens(command)) = args.command {
        return run_tokens(command);
    }
    check_listen(&args.listen, args.allow_public)?;
    let durability = args.durability;
    let spec = store_spec(args.store)?;
    let mut config = open_store(&spec, durability).with_context(|| format!("opening {spec}"))?;
    let tokens = load_tokens(args.tokens, &args.token, &config.store)?;
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
/// every `--token PROJECT=TOKEN`, checked; none at all is a usage error
/// unless `store`'s book holds a live run-time token. Shared by
/// `memoir serve` and `memoir mcp --http`.
#[cfg(feature = "server")]
pub fn load_tokens(
    file: Option<PathBuf>,
    token: &[String],
    store: &std::sync::Arc<dyn memoir::store::LogStore>,
) -> anyhow::Result<Vec<TokenGrant>> {
    let tokens = configured_tokens(file, token)?;
    if tokens.is_empty() {
        let minted = match memoir::access::book_of(store) {
            Some(book) => book.list()?.iter().any(|t| t.revoked_at.is_none()),
            None => false,
        };
        if !minted {
            return Err(CliError::usage(
                "no tokens: create one with `memoir serve tokens create`, or give --token \
                 PROJECT=TOKEN or --tokens FILE (or $MEMOIR_SERVER_TOKENS)",
            ));
        }
    }
    Ok(tokens)
}

/// The tokens of `--tokens FILE` and `--token`, checked (possibly none).
#[cfg(feature = "server")]
fn configured_tokens(file: Option<PathBuf>, token: &[String]) -> anyhow::Result<Vec<TokenGrant>> {
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
            ..TokenGrant::default()
        };
        tokens.extend(parse_tokens(&serde_json::to_string(
            &serde_json::json!({ "tokens": [grant] }),
        )?)?);
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
