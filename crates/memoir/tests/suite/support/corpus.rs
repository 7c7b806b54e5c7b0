//! A generated, coding-agent-shaped store for the search tests and benchmark:
//! sessions of user prompts, assistant replies, `Bash`/`Read`/`Edit` tool
//! calls and their results, across projects and agents, with planted
//! known-answer messages. Deterministic for a seed.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use memoir::message::{Block, Message, Role};
use memoir::record::{Record, SessionMeta, SourceRef};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

/// Words the generated text is made of (common coding-session vocabulary).
const WORDS: &[&str] = &[
    "build",
    "test",
    "error",
    "fix",
    "function",
    "module",
    "crate",
    "file",
    "type",
    "trait",
    "struct",
    "enum",
    "match",
    "borrow",
    "lifetime",
    "compile",
    "warning",
    "clippy",
    "format",
    "refactor",
    "rename",
    "import",
    "export",
    "config",
    "parse",
    "serialize",
    "json",
    "yaml",
    "server",
    "client",
    "request",
    "response",
    "header",
    "token",
    "cache",
    "index",
    "query",
    "database",
    "table",
    "column",
    "migration",
    "schema",
    "commit",
    "branch",
    "merge",
    "rebase",
    "review",
    "deploy",
    "docker",
    "container",
    "network",
    "socket",
    "thread",
    "async",
    "await",
    "future",
    "runtime",
    "panic",
    "unwrap",
    "result",
    "option",
    "vector",
    "string",
    "slice",
    "buffer",
    "stream",
    "reader",
    "writer",
    "path",
    "directory",
    "permission",
    "user",
    "session",
    "memory",
    "leak",
    "profile",
    "benchmark",
    "latency",
    "throughput",
    "retry",
    "timeout",
    "lock",
    "mutex",
    "channel",
    "queue",
    "worker",
    "pool",
    "log",
    "trace",
    "metric",
    "alert",
    "dashboard",
    "frontend",
    "backend",
    "component",
    "render",
    "style",
    "layout",
    "button",
    "form",
    "input",
    "validation",
    "handler",
    "route",
    "endpoint",
    "middleware",
    "auth",
    "login",
    "password",
    "hash",
    "encrypt",
    "certificate",
    "upload",
    "download",
    "image",
    "resize",
    "thumbnail",
    "script",
    "shell",
    "command",
    "argument",
    "flag",
    "option",
    "version",
    "release",
    "changelog",
];

/// Tools the assistant calls.
pub const TOOLS: &[&str] = &["Bash", "Read", "Edit", "Grep"];

/// Agents sessions come from (`None`: native).
const AGENTS: &[Option<&str>] = &[None, Some("claude-code"), Some("codex")];

/// Projects the sessions belong to.
pub const PROJECTS: usize = 20;

/// A planted message and the query that should find it.
#[derive(Debug, Clone)]
pub struct KnownAnswer {
    /// The query.
    pub query: String,
    /// The session holding the answer.
    pub session: String,
    /// The answer's record seq.
    pub seq: u64,
    /// The session's project.
    pub project: String,
    /// The session's agent (`memoir` for native).
    pub agent: String,
    /// The answer's role.
    pub role: Role,
    /// The answer's time.
    pub time: DateTime<Utc>,
    /// The tool the answer calls or answers, if any.
    pub tool: Option<String>,
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// A Zipf-ish word: low indices far more often.
    pub fn word(&mut self) -> &'static str {
        let a = self.below(WORDS.len());
        let b = self.below(WORDS.len());
        WORDS[a.min(b)]
    }
    pub fn sentence(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

/// A unique made-up identifier (never produced by [`Rng::word`]).
pub fn rare(n: usize) -> String {
    const SYL: &[&str] = &[
        "zor", "vek", "qui", "mab", "tel", "rux", "pim", "dov", "kas", "yel",
    ];
    let mut s = String::new();
    let mut x = n + 1;
    while x > 0 {
        s.push_str(SYL[x % 10]);
        x /= 10;
    }
    s
}

/// A planted answer: its message index, the query, its role and tool.
pub type Planted = (usize, String, Role, Option<String>);

/// Spec of a generated store.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub sessions: usize,
    pub messages_per_session: usize,
    /// Plant a known answer in every `answer_every`-th session.
    pub answer_every: usize,
    pub seed: u64,
    /// Lines of each tool result beyond the first three (command output,
    /// file contents: what makes real agent logs large).
    pub extra_result_lines: usize,
}

pub fn base_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single().unwrap()
}

/// The header of session `i`.
pub fn meta_of(i: usize) -> SessionMeta {
    let mut meta = SessionMeta::new(format!("s{i:06}"));
    meta.created_at = base_time() + Duration::minutes(i as i64 * 7);
    meta.workspace = format!("/home/dev/proj-{:02}", i % PROJECTS).into();
    meta.title = Some(format!("session {i}"));
    if let Some(agent) = AGENTS[i % AGENTS.len()] {
        meta.source = Some(SourceRef {
            agent: agent.to_string(),
            agent_version: None,
            session: Some(format!("uuid-{i}")),
            path: None,
            extra: Default::default(),
        });
    }
    meta
}

/// The messages of session `i` (the `j`-th message gets `seq` `j + 1` when
/// appended in one batch after the header), and its planted answer.
pub fn messages_of(spec: &Spec, i: usize) -> (Vec<Message>, Option<Planted>) {
    let mut rng = Rng::new(spec.seed ^ (i as u64).wrapping_mul(0x1000_0001));
    let meta = meta_of(i);
    let n = spec.messages_per_session;
    let plant = (i.is_multiple_of(spec.answer_every) && n >= 4).then(|| 1 + rng.below(n - 2));
    let mut out = Vec::with_capacity(n);
    let mut answer = None;
    let mut call = 0usize;
    for j in 0..n {
        let ts = meta.created_at + Duration::seconds(j as i64 * 20);
        let mut m = match j % 4 {
            0 => Message::user(format!(
                "please {} the {}",
                rng.sentence(6),
                rng.sentence(8)
            )),
            1 => {
                let tool = TOOLS[rng.below(TOOLS.len())];
                call += 1;
                Message::new(
                    Role::Assistant,
                    vec![
                        Block::Text {
                            text: format!("I will {} first.", rng.sentence(7)),
                        },
                        Block::ToolUse {
                            id: format!("call-{i}-{call}"),
                            name: tool.to_string(),
                            input: serde_json::json!({"command": format!("cargo {} --{}", rng.word(), rng.word())}),
                        },
                    ],
                )
            }
            2 => {
                let mut output = format!(
                    "{}\n{}\n{}",
                    rng.sentence(12),
                    rng.sentence(12),
                    rng.sentence(10)
                );
                for line in 0..spec.extra_result_lines {
                    output.push_str(&format!("\n{:4}  {}", line + 4, rng.sentence(11)));
                }
                Message::tool_result(format!("call-{i}-{call}"), output, rng.below(5) == 0)
            }
            _ => Message::assistant(format!(
                "Done: {}. Next we {}.",
                rng.sentence(14),
                rng.sentence(6)
            )),
        };
        if Some(j) == plant {
            let k = i / spec.answer_every;
            let (a, b, c) = (rare(3 * k), rare(3 * k + 1), rare(3 * k + 2));
            let tool = if m.role == Role::Tool || m.has_tool_uses() {
                Some(match &m.content.last() {
                    Some(Block::ToolUse { name, .. }) => name.clone(),
                    _ => {
                        // A result answers the previous call.
                        let prev: &Message = &out[j - 1];
                        match prev.content.last() {
                            Some(Block::ToolUse { name, .. }) => name.clone(),
                            _ => String::new(),
                        }
                    }
                })
            } else {
                None
            };
            let planted =
                format!("the {a} {b} handler fails because the {c} migration was never applied");
            match m.content.first_mut() {
                Some(Block::Text { text }) => *text = format!("{text} {planted}"),
                Some(Block::ToolResult { content, .. }) => {
                    *content = format!("{content} {planted}")
                }
                _ => {}
            }
            answer = Some((j, format!("{a} handler {c} migration"), m.role, tool));
        }
        m.timestamp = Some(ts);
        out.push(m);
    }
    (out, answer)
}

/// Write the store into `dir`; returns the known answers.
pub fn generate(dir: &Path, spec: &Spec) -> Vec<KnownAnswer> {
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir, Durability::None));
    generate_into(store.as_ref(), spec)
}

/// Write the sessions into any store; returns the known answers.
pub fn generate_into(store: &dyn LogStore, spec: &Spec) -> Vec<KnownAnswer> {
    let mut answers = Vec::new();
    for i in 0..spec.sessions {
        let meta = meta_of(i);
        store.create(&meta).unwrap();
        let (msgs, answer) = messages_of(spec, i);
        let records: Vec<Record> = msgs.iter().cloned().map(Record::Message).collect();
        for chunk in records.chunks(500) {
            store.append(&meta.id, chunk, None).unwrap();
        }
        if let Some((j, query, role, tool)) = answer {
            answers.push(KnownAnswer {
                query,
                session: meta.id.clone(),
                seq: j as u64 + 1,
                project: meta.workspace.to_string_lossy().into_owned(),
                agent: meta
                    .source
                    .as_ref()
                    .map_or("memoir".to_string(), |s| s.agent.clone()),
                role,
                time: msgs[j].timestamp.unwrap(),
                tool,
            });
        }
    }
    answers
}
