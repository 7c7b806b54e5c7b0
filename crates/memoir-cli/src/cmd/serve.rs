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

#[cfg(any(feature = "server", feature = "client"))]
use anyhow::bail;
#[cfg(feature = "server")]
use anyhow::Context;
#[cfg(feature = "client")]
use memoir::client::{wire, Client, RemoteStore};
#[cfg(feature = "client")]
use memoir::message::Message;
#[cfg(feature = "client")]
use memoir::record::Record;
#[cfg(feature = "client")]
use memoir::store::scan;
#[cfg(feature = "server")]
use memoir::store::Durability;
#[cfg(feature = "client")]
use memoir::transcript::find_in;
#[cfg(feature = "server")]
use memoir::transcript::Session;
#[cfg(feature = "server")]
use memoir_server::{check_listen, open_store, parse_tokens, TokenGrant};

/// Arguments of `memoir serve`.
#[cfg(feature = "server")]
#[derive(clap::Args)]
pub struct Args {
    /// Store: a session directory, or `postgres://user@host:port/db[#schema=NAME]`
    /// (default: $MEMOIR_STORE, else $MEMOIR_SESSION_DIR / $MEMOIR_HOME/sessions).
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
    /// Append durability: fsync, flush or none.
    #[arg(long, default_value = "fsync")]
    durability: String,
    /// Largest request body in MiB.
    #[arg(long, default_value_t = 8)]
    max_body_mib: usize,
    /// Allow a non-loopback --listen address.
    #[arg(long)]
    allow_public: bool,
}

#[cfg(any(feature = "server", feature = "client"))]
fn env_nonempty(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Run `memoir serve`.
#[cfg(feature = "server")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_listen(&args.listen, args.allow_public)?;
    let durability: Durability = args.durability.parse()?;
    let spec = match args.store.or_else(|| env_nonempty("MEMOIR_STORE")) {
        Some(s) => s,
        None => Session::default_dir()?.display().to_string(),
    };
    let mut tokens: Vec<TokenGrant> = Vec::new();
    if let Some(path) = args
        .tokens
        .or_else(|| env_nonempty("MEMOIR_SERVER_TOKENS").map(PathBuf::from))
    {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading tokens file {}", path.display()))?;
        tokens.extend(parse_tokens(&text)?);
    }
    for t in &args.token {
        let Some((project, token)) = t.split_once('=') else {
            bail!("--token wants PROJECT=TOKEN, got {t:?}");
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
        bail!("no tokens: give --token PROJECT=TOKEN or --tokens FILE (or $MEMOIR_SERVER_TOKENS)");
    }
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
        println!("memoir serve: listening on http://{addr}");
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
    #[command(subcommand)]
    command: RemoteCommand,
}

/// Subcommands of `memoir remote`.
#[cfg(feature = "client")]
#[derive(clap::Subcommand)]
pub enum RemoteCommand {
    /// List the project's sessions, newest first.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a session's conversation.
    Show {
        /// Full id or unique prefix.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
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
    /// Append one message.
    Append {
        /// Full id or unique prefix.
        id: String,
        /// The message text.
        text: String,
        /// Role: user or assistant.
        #[arg(long, default_value = "user")]
        role: String,
        /// Fail (exit 3) unless the message gets this seq.
        #[arg(long)]
        expected_seq: Option<u64>,
    },
    /// Fork a session by reference; prints the new id.
    Fork {
        /// Full id or unique prefix.
        id: String,
        /// Last parent seq to include (default: all).
        #[arg(long)]
        at_seq: Option<u64>,
        /// The new session's id.
        #[arg(long)]
        new_id: Option<String>,
    },
    /// Print a session as a JSONL transcript.
    Export {
        /// Full id or unique prefix.
        id: String,
    },
    /// Delete a session.
    Delete {
        /// Full id (no prefixes for deletion).
        id: String,
    },
    /// Search a session's earlier context.
    Search {
        /// Full id or unique prefix.
        id: String,
        /// The query.
        query: String,
        /// How many results.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
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
        bail!("no server: give --remote URL or set $MEMOIR_REMOTE");
    };
    let token = args.token.or_else(|| env_nonempty("MEMOIR_TOKEN"));
    let client = Client::new(&url, token)?;
    let store = Arc::new(RemoteStore::new(client.clone()));
    let resolve = |prefix: &str| find_in(store.as_ref(), prefix);
    match args.command {
        RemoteCommand::List { json } => {
            let l = client.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&l)?);
            } else {
                for s in &l.sessions {
                    println!(
                        "{}  {}  {}",
                        s.meta.id,
                        s.meta.created_at.format("%Y-%m-%d %H:%M"),
                        s.meta.title.as_deref().unwrap_or("(untitled)")
                    );
                }
            }
        }
        RemoteCommand::Show { id, json } => {
            let loaded = client.load(&resolve(&id)?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&loaded)?);
            } else {
                for (m, seq) in loaded.messages.iter().zip(&loaded.message_seqs) {
                    println!("[{seq}] {:?}: {}", m.role, m.text_content());
                }
                if !loaded.issues.is_empty() {
                    eprintln!("{} integrity issue(s)", loaded.issues.len());
                }
            }
        }
        RemoteCommand::Create { id, title } => {
            let created = client.create(&wire::CreateSession {
                id,
                title,
                ..Default::default()
            })?;
            println!("{}", created.id);
        }
        RemoteCommand::Append {
            id,
            text,
            role,
            expected_seq,
        } => {
            let message = match role.as_str() {
                "user" => Message::user(text),
                "assistant" => Message::assistant(text),
                other => bail!("unknown role {other:?} (user or assistant)"),
            };
            let id = resolve(&id)?;
            match client.append(&id, &[Record::Message(message)], expected_seq) {
                Ok(a) => println!("{}", a.first_seq),
                Err(e @ memoir::Error::Conflict { .. }) => {
                    eprintln!("memoir: {e}");
                    return Ok(ExitCode::from(3));
                }
                Err(e) => return Err(e.into()),
            }
        }
        RemoteCommand::Fork { id, at_seq, new_id } => {
            let forked = client.fork(
                &resolve(&id)?,
                &wire::ForkRequest {
                    id: new_id,
                    at_seq,
                    title: None,
                },
            )?;
            println!("{}", forked.id);
        }
        RemoteCommand::Export { id } => print!("{}", client.export(&resolve(&id)?)?),
        RemoteCommand::Delete { id } => client.delete(&id)?,
        RemoteCommand::Search { id, query, top_k } => {
            let r = client.search(&resolve(&id)?, &query, top_k)?;
            for h in r.hits {
                println!(
                    "[{}] {:.3} {}: {}",
                    h.chain_seq,
                    h.score,
                    h.kind,
                    h.text.unwrap_or_default()
                );
            }
        }
        RemoteCommand::Verify { id } => {
            let raw = client.log(&resolve(&id)?)?;
            println!("{}", scan::describe(&raw.report));
            if !raw.report.is_clean() {
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
