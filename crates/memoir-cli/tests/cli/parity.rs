//! Front parity: one scenario run through the library (`SessionManager`),
//! the CLI (the real `memoir` binary) and the HTTP client against an
//! in-process `memoir serve`, on the file store (and on PostgreSQL behind
//! the server when the CI's `MEMOIR_TEST_POSTGRES_URL` is set), asserting
//! the same results: the same effective fork cut (inside a tool-call group),
//! the same export bytes in every format (modulo ids and timestamps), the
//! same recall hits, and the same state after rename, rewrite (compaction),
//! checkpoint, delete and restore.
//!
//! The CLI has no command to append messages, rewrite or checkpoint (agents
//! do that through the library); for those steps its front writes through
//! the library into the same store, and every other step runs the binary.

use crate::postgres_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use memoir::client::{wire, Client};
use memoir::manager::{ExportFormat, ExportOptions, ManagerOptions, SessionManager};
use memoir::message::{Block, Message, Role};
use memoir::record::Record;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use memoir_server::{BackgroundServer, ServerConfig, TokenGrant};
use serde_json::{json, Value};

const TOKEN: &str = "parity-token-0123456789";
const TASK: &str = "Where is the deploy key kept? Check the vault config.";
const FORMATS: [ExportFormat; 3] = [
    ExportFormat::Jsonl,
    ExportFormat::OpenAi,
    ExportFormat::Markdown,
];

/// What one front does; every method is one user-visible operation.
trait Front {
    fn name(&self) -> &'static str;
    /// A session whose first message is `task`; returns its id.
    fn create(&mut self, task: &str) -> String;
    fn append(&mut self, id: &str, messages: Vec<Message>);
    /// Replace the conversation (compaction) and set a checkpoint.
    fn compact(&mut self, id: &str, messages: Vec<Message>, checkpoint: Value);
    /// Fork through record `at_seq`: (child id, parent seq, effective messages).
    fn fork(&mut self, id: &str, at_seq: u64) -> (String, u64, usize);
    fn rename(&mut self, id: &str, title: &str);
    fn delete(&mut self, id: &str);
    fn restore(&mut self, id: &str);
    fn export(&mut self, id: &str, format: ExportFormat) -> String;
    /// The record seqs of the top lexical recall hits.
    fn recall(&mut self, id: &str, query: &str) -> Vec<u64>;
    /// (title, message count, checkpoint) as the front shows the session.
    fn show(&mut self, id: &str) -> (Option<String>, usize, Value);
}

// ---- library ----------------------------------------------------------------

struct Library {
    m: SessionManager,
}

impl Library {
    fn new(dir: &Path) -> Library {
        let options = ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..Default::default()
        };
        Library {
            m: SessionManager::open(dir, options).unwrap(),
        }
    }
}

/// Append, rewrite and checkpoint through the library (shared by the
/// library and CLI fronts).
fn library_append(m: &mut SessionManager, id: &str, messages: Vec<Message>) {
    m.append_session_messages(id, messages).unwrap();
}

fn library_compact(store: Arc<dyn LogStore>, id: &str, messages: Vec<Message>, cp: Value) {
    let s = Session::open_in(store, id).unwrap();
    s.append_records(&[
        Record::Rewrite { messages },
        Record::Checkpoint { value: cp },
    ])
    .unwrap();
}

fn library_recall(t: &memoir::transcript::Transcript, query: &str) -> Vec<u64> {
    use memoir::embed::HashEmbedder;
    use memoir::view::{RebuildOptions, RetrievalMode, SessionView, ViewConfig};
    let embedder = HashEmbedder::new(8);
    let options = RebuildOptions {
        view: ViewConfig {
            mode: RetrievalMode::Lexical,
            ..ViewConfig::default()
        },
        ..RebuildOptions::default()
    };
    let (view, _) = SessionView::rebuild_with(t, &embedder, None, &options).unwrap();
    view.query_text_mode(&embedder, query, 3, RetrievalMode::Lexical)
        .unwrap()
        .into_iter()
        .map(|h| h.chain_seq)
        .collect()
}

impl Front for Library {
    fn name(&self) -> &'static str {
        "library"
    }
    fn create(&mut self, task: &str) -> String {
        let id = self.m.create_session(task, None).unwrap();
        self.m.flush().unwrap();
        id
    }
    fn append(&mut self, id: &str, messages: Vec<Message>) {
        library_append(&mut self.m, id, messages);
    }
    fn compact(&mut self, id: &str, messages: Vec<Message>, checkpoint: Value) {
        library_compact(self.m.store(), id, messages, checkpoint);
    }
    fn fork(&mut self, id: &str, at_seq: u64) -> (String, u64, usize) {
        let t = self.m.read_session(id).unwrap();
        let upto = memoir::manager::fork::messages_through_seq(&t, at_seq).unwrap();
        let f = self.m.fork_session(id, Some(upto)).unwrap();
        (f.id, f.parent.seq, f.effective)
    }
    fn rename(&mut self, id: &str, title: &str) {
        self.m.rename_session(id, title).unwrap();
    }
    fn delete(&mut self, id: &str) {
        assert!(self.m.delete_session(id).unwrap());
    }
    fn restore(&mut self, id: &str) {
        self.m.restore_session(id).unwrap();
    }
    fn export(&mut self, id: &str, format: ExportFormat) -> String {
        self.m
            .export(
                id,
                ExportOptions {
                    format,
                    redact: false,
                },
            )
            .unwrap()
            .text
    }
    fn recall(&mut self, id: &str, query: &str) -> Vec<u64> {
        library_recall(&self.m.read_session(id).unwrap(), query)
    }
    fn show(&mut self, id: &str) -> (Option<String>, usize, Value) {
        let t = self.m.read_session(id).unwrap();
        (
            t.title,
            t.messages.len(),
            t.checkpoint.unwrap_or(Value::Null),
        )
    }
}

// ---- CLI --------------------------------------------------------------------

struct Cli {
    dir: PathBuf,
    home: PathBuf,
    writer: SessionManager,
}

impl Cli {
    fn new(dir: &Path, home: &Path) -> Cli {
        Cli {
            dir: dir.to_path_buf(),
            home: home.to_path_buf(),
            writer: Library::new(dir).m,
        }
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .env("MEMOIR_HOME", &self.home)
            .env_remove("MEMOIR_SESSION_DIR")
            .current_dir(&self.home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "memoir {args:?}: exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.run(args)).unwrap()
    }
}

impl Front for Cli {
    fn name(&self) -> &'static str {
        "cli"
    }
    fn create(&mut self, task: &str) -> String {
        self.json(&["sessions", "new", task, "--json"])["id"]
            .as_str()
            .unwrap()
            .to_string()
    }
    fn append(&mut self, id: &str, messages: Vec<Message>) {
        library_append(&mut self.writer, id, messages);
    }
    fn compact(&mut self, id: &str, messages: Vec<Message>, checkpoint: Value) {
        library_compact(self.writer.store(), id, messages, checkpoint);
    }
    fn fork(&mut self, id: &str, at_seq: u64) -> (String, u64, usize) {
        let f = self.json(&[
            "sessions",
            "fork",
            id,
            "--at",
            &at_seq.to_string(),
            "--json",
        ]);
        (
            f["id"].as_str().unwrap().to_string(),
            f["parent"]["seq"].as_u64().unwrap(),
            f["effective"].as_u64().unwrap() as usize,
        )
    }
    fn rename(&mut self, id: &str, title: &str) {
        self.run(&["sessions", "rename", id, title]);
    }
    fn delete(&mut self, id: &str) {
        self.run(&["sessions", "delete", id]);
    }
    fn restore(&mut self, id: &str) {
        self.run(&["sessions", "restore", id]);
    }
    fn export(&mut self, id: &str, format: ExportFormat) -> String {
        self.run(&["sessions", "export", id, "--format", format.as_str()])
    }
    fn recall(&mut self, id: &str, query: &str) -> Vec<u64> {
        let r = self.json(&[
            "recall", id, query, "--mode", "lexical", "-k", "3", "--json",
        ]);
        r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["chain_seq"].as_u64().unwrap())
            .collect()
    }
    fn show(&mut self, id: &str) -> (Option<String>, usize, Value) {
        let s = self.json(&["sessions", "show", id, "--json"]);
        (
            s["title"].as_str().map(str::to_string),
            s["messages"].as_array().unwrap().len(),
            s["checkpoint"].clone(),
        )
    }
}

// ---- HTTP -------------------------------------------------------------------

struct Http {
    client: Client,
    _server: BackgroundServer,
}

impl Http {
    fn start(store: Arc<dyn LogStore>) -> Http {
        let grants = vec![TokenGrant {
            token: TOKEN.into(),
            project: "parity".into(),
            expires_at: None,
            ..TokenGrant::default()
        }];
        let server = BackgroundServer::start(ServerConfig::new(store, grants)).unwrap();
        Http {
            client: Client::new(&server.url(), Some(TOKEN.into())).unwrap(),
            _server: server,
        }
    }
}

impl Front for Http {
    fn name(&self) -> &'static str {
        "http"
    }
    fn create(&mut self, task: &str) -> String {
        let created = self
            .client
            .create(&wire::CreateSession {
                title: Some(memoir::manager::short_title(task)),
                ..Default::default()
            })
            .unwrap();
        self.append(&created.id, vec![Message::user(task)]);
        created.id
    }
    fn append(&mut self, id: &str, messages: Vec<Message>) {
        let records: Vec<Record> = messages.into_iter().map(Record::Message).collect();
        self.client.append(id, &records, None).unwrap();
    }
    fn compact(&mut self, id: &str, messages: Vec<Message>, checkpoint: Value) {
        self.client
            .append(
                id,
                &[
                    Record::Rewrite { messages },
                    Record::Checkpoint { value: checkpoint },
                ],
                None,
            )
            .unwrap();
    }
    fn fork(&mut self, id: &str, at_seq: u64) -> (String, u64, usize) {
        let f = self
            .client
            .fork(
                id,
                &wire::ForkRequest {
                    at_seq: Some(at_seq),
                    ..Default::default()
                },
            )
            .unwrap();
        (f.id, f.parent.seq, f.effective)
    }
    fn rename(&mut self, id: &str, title: &str) {
        self.client
            .append(
                id,
                &[Record::Title {
                    title: title.into(),
                }],
                None,
            )
            .unwrap();
    }
    fn delete(&mut self, id: &str) {
        self.client.delete(id).unwrap();
    }
    fn restore(&mut self, id: &str) {
        self.client.restore(id).unwrap();
    }
    fn export(&mut self, id: &str, format: ExportFormat) -> String {
        self.client.export_as(id, format, false).unwrap()
    }
    fn recall(&mut self, id: &str, query: &str) -> Vec<u64> {
        self.client
            .search_mode(id, query, 3, Some("lexical"))
            .unwrap()
            .hits
            .into_iter()
            .map(|h| h.chain_seq)
            .collect()
    }
    fn show(&mut self, id: &str) -> (Option<String>, usize, Value) {
        let loaded = self.client.load(id).unwrap();
        let log = self.client.log(id).unwrap();
        let checkpoint = log
            .records
            .iter()
            .rev()
            .find_map(|r| match &r.record {
                Record::Checkpoint { value } => Some(value.clone()),
                _ => None,
            })
            .unwrap_or(Value::Null);
        (loaded.title, loaded.messages.len(), checkpoint)
    }
}

// ---- the scenario -------------------------------------------------------------

fn tool_call(id: &str, command: &str) -> Message {
    Message::new(
        Role::Assistant,
        vec![Block::ToolUse {
            id: id.into(),
            name: "shell".into(),
            input: json!({ "command": command }),
        }],
    )
}

/// Everything a front's run produced, with ids and timestamps replaced.
#[derive(Debug, PartialEq)]
struct Outcome {
    fork_cut: (u64, usize),
    exports: Vec<String>,
    fork_exports: Vec<String>,
    recall: Vec<u64>,
    after_rename: (Option<String>, usize, Value),
    after_compaction: (Option<String>, usize, Value),
    compacted_export: String,
    restored: (Option<String>, usize, Value),
}

/// Replace what legitimately differs between fronts: session ids and
/// creation times (each front creates its own sessions).
fn normalize(text: &str, ids: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut line = line.to_string();
        if let Ok(Value::Object(mut v)) = serde_json::from_str::<Value>(line.trim_end()) {
            if v.contains_key("created_at") {
                v.insert("created_at".into(), json!("<ts>"));
            }
            line = serde_json::to_string(&Value::Object(v)).unwrap() + "\n";
        } else if line.starts_with("- created: ") {
            line = "- created: <ts>\n".into();
        }
        out.push_str(&line);
    }
    for (id, name) in ids {
        out = out.replace(id, name);
    }
    out
}

fn scenario(front: &mut dyn Front) -> Outcome {
    let id = front.create(TASK);
    front.append(
        &id,
        vec![
            Message::assistant("I will look at the config."),
            tool_call("c1", "cat vault.toml"),
            Message::tool_result("c1", "deploy_key = \"vault:secret/deploy\"", false),
            tool_call("c2", "ls keys/"),
        ],
    );
    front.append(
        &id,
        vec![
            Message::tool_result("c2", "deploy.pub", false),
            Message::assistant("The deploy key is kept in the vault at secret/deploy."),
        ],
    );
    // seq 1 task, 2 text, 3 call c1, 4 result c1, 5 call c2, 6 result c2, 7 answer.
    // A cut through seq 5 separates call c2 from its result: moved back to 4.
    let (fork, parent_seq, effective) = front.fork(&id, 5);
    let ids = [(id.as_str(), "<source>"), (fork.as_str(), "<fork>")];
    let exports = FORMATS
        .iter()
        .map(|&f| normalize(&front.export(&id, f), &ids))
        .collect();
    let fork_exports = FORMATS
        .iter()
        .map(|&f| normalize(&front.export(&fork, f), &ids))
        .collect();
    let recall = front.recall(&id, "where is the deploy key kept");
    front.rename(&id, "deploy key hunt");
    let after_rename = front.show(&id);
    front.compact(
        &id,
        vec![
            Message::user(TASK),
            Message::assistant("Summary: the deploy key is in the vault (secret/deploy)."),
        ],
        json!({"upto": 7}),
    );
    let after_compaction = front.show(&id);
    let compacted_export = normalize(&front.export(&id, ExportFormat::Jsonl), &ids);
    front.delete(&id);
    front.restore(&id);
    let restored = front.show(&id);
    Outcome {
        fork_cut: (parent_seq, effective),
        exports,
        fork_exports,
        recall,
        after_rename,
        after_compaction,
        compacted_export,
        restored,
    }
}

fn assert_same(outcomes: &[(&str, Outcome)]) {
    let (first_name, first) = &outcomes[0];
    // The reference itself is what the scenario promises.
    assert_eq!(
        first.fork_cut,
        (4, 4),
        "{first_name}: the cut keeps c2 with its result"
    );
    // The task (seq 1) and the answer (seq 7) both mention the deploy key.
    assert!(
        first.recall.len() == 3 && first.recall.contains(&1) && first.recall.contains(&7),
        "{first_name}: {:?}",
        first.recall
    );
    assert_eq!(first.after_compaction.1, 2);
    assert_eq!(first.restored.0.as_deref(), Some("deploy key hunt"));
    for (name, o) in &outcomes[1..] {
        assert_eq!(
            o.fork_cut, first.fork_cut,
            "{name} vs {first_name}: fork cut"
        );
        for (i, f) in FORMATS.iter().enumerate() {
            assert_eq!(
                o.exports[i],
                first.exports[i],
                "{name} vs {first_name}: {} export",
                f.as_str()
            );
            assert_eq!(
                o.fork_exports[i],
                first.fork_exports[i],
                "{name} vs {first_name}: fork {} export",
                f.as_str()
            );
        }
        assert_eq!(o.recall, first.recall, "{name} vs {first_name}: recall");
        assert_eq!(o.after_rename, first.after_rename, "{name}: rename");
        assert_eq!(
            o.after_compaction, first.after_compaction,
            "{name}: compaction"
        );
        assert_eq!(
            o.compacted_export, first.compacted_export,
            "{name}: compacted export"
        );
        assert_eq!(o.restored, first.restored, "{name}: restore");
    }
}

#[test]
fn library_cli_and_http_agree_on_the_file_store() {
    let tmp = tempfile::tempdir().unwrap();
    let mut library = Library::new(&tmp.path().join("lib"));
    let mut cli = Cli::new(&tmp.path().join("cli"), tmp.path());
    let server_dir = tmp.path().join("http");
    let mut http = Http::start(Arc::new(FileStore::new(&server_dir, Durability::None)));
    let outcomes = vec![
        (library.name(), scenario(&mut library)),
        (cli.name(), scenario(&mut cli)),
        (http.name(), scenario(&mut http)),
    ];
    assert_same(&outcomes);
}

#[test]
fn library_and_http_on_postgres_agree_with_the_file_store() {
    let Some((pg, _schema)) = postgres_common::pg_store(
        postgres_common::POSTGRES_URL,
        memoir::store::postgres::VectorMode::Auto,
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut library = Library::new(&tmp.path().join("lib"));
    let mut pg_library = Library {
        m: SessionManager::with_store(
            pg.clone(),
            ManagerOptions {
                repair_on_switch: false,
                ..Default::default()
            },
        ),
    };
    let mut http = Http::start(pg);
    let outcomes = vec![
        ("library (file)", scenario(&mut library)),
        ("library (postgres)", scenario(&mut pg_library)),
        ("http (postgres)", scenario(&mut http)),
    ];
    assert_same(&outcomes);
}
