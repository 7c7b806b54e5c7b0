//! Golden files: `tests/golden/v1/` holds byte-exact files of
//! format 1 (transcripts with real hashes, a fork and its parent, a torn tail,
//! a partial batch, an index entry and an export in each format). Each test
//! reads the stored bytes with today's code, checks the decoded values, and
//! re-writes the same bytes from the same fixed inputs.
//!
//! Regenerate after a deliberate format change with
//! `MEMOIR_REGEN_GOLDEN=1 cargo test -p memoir --test suite golden::`, but only into a
//! new `v2/`: files in `v1/` are a promise that today's readers keep reading.

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use memoir::manager::export::{self, ExportFormat, ExportOptions};
use memoir::manager::IndexEntry;
use memoir::message::{Block, Message, Role, Usage};
use memoir::record::{ForkPoint, Record, RunConfig, SessionMeta, Taint};
use memoir::store::file::FileStore;
use memoir::store::{Durability, IssueKind, LogStore};
use memoir::transcript::read_in;

pub(crate) const PARENT: &str = "20260101T000000-0123456789ab";
const FORK: &str = "20260101T000500-ba9876543210";

pub(crate) fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1")
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, minute, 0)
        .single()
        .unwrap()
}

pub(crate) fn header(id: &str, minute: u32, parent: Option<ForkPoint>) -> SessionMeta {
    let mut meta = SessionMeta::new(id);
    meta.created_at = at(minute);
    meta.provider = "anthropic".into();
    meta.model = "claude-sonnet-4-5".into();
    meta.workspace = "/work/project".into();
    meta.title = Some("Golden session".into());
    meta.parent = parent;
    meta
}

/// The records of the parent session, as appended (each inner Vec is one call).
pub(crate) fn parent_appends() -> Vec<Vec<Record>> {
    let mut assistant = Message::new(
        Role::Assistant,
        vec![
            Block::Thinking {
                text: "List the files first.".into(),
                signature: Some("sig-1".into()),
            },
            Block::ToolUse {
                id: "toolu_01".into(),
                name: "bash".into(),
                input: serde_json::json!({"command": "ls"}),
            },
        ],
    )
    .with_usage(Usage {
        input_tokens: 120,
        output_tokens: 30,
        cache_read_input_tokens: 1000,
        ..Usage::default()
    });
    assistant.timestamp = Some(at(1));
    vec![
        vec![Record::Config(Box::new(RunConfig {
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
            workspace: "/work/project".into(),
            system_prompt: Some("You are terse.".into()),
            tools: vec!["bash".into()],
            ..RunConfig::default()
        }))],
        vec![Record::Message(Message::user("What is in this directory?"))],
        // One batch of three records.
        vec![
            Record::Message(assistant),
            Record::Message(Message::tool_result("toolu_01", "README.md\nsrc", false)),
            Record::Message(Message::assistant("A README and a src directory.")),
        ],
        vec![Record::Taint(Taint {
            private: true,
            untrusted: false,
        })],
        vec![Record::Title {
            title: "Directory listing".into(),
        }],
        vec![Record::Summary(memoir::record::Summary {
            usage: Usage {
                input_tokens: 120,
                output_tokens: 30,
                ..Usage::default()
            },
            turns: 1,
        })],
        vec![Record::Checkpoint {
            value: serde_json::json!({"view_cutoff": 4}),
        }],
    ]
}

fn fork_appends() -> Vec<Vec<Record>> {
    vec![
        vec![Record::Message(Message::user("Now show the README."))],
        vec![Record::Rewrite {
            messages: vec![
                Message::user("What is in this directory?"),
                Message::user("Now show the README."),
            ],
        }],
    ]
}

/// Write both sessions through the real file store into `dir`.
fn write_sessions(dir: &Path) {
    let store = FileStore::new(dir, Durability::None);
    store.create(&header(PARENT, 0, None)).unwrap();
    for call in parent_appends() {
        store.append(PARENT, &call, None).unwrap();
    }
    let cut = ForkPoint {
        session: PARENT.into(),
        seq: 5,
        messages: 4,
        parent_created_at: Some(at(0)),
    };
    store.create(&header(FORK, 5, Some(cut))).unwrap();
    for call in fork_appends() {
        store.append(FORK, &call, None).unwrap();
    }
}

/// The file's bytes cut after `keep` whole lines, plus `extra` bytes.
fn cut_lines(bytes: &[u8], keep: usize, extra: usize) -> Vec<u8> {
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let mut out = lines[..keep].concat();
    out.extend_from_slice(&lines[keep][..extra]);
    out
}

/// Every golden file, generated from the fixed inputs: (name, bytes).
fn generate() -> Vec<(String, Vec<u8>)> {
    let tmp = tempfile::tempdir().unwrap();
    write_sessions(tmp.path());
    let parent = std::fs::read(tmp.path().join(format!("{PARENT}.jsonl"))).unwrap();
    let fork = std::fs::read(tmp.path().join(format!("{FORK}.jsonl"))).unwrap();
    // Lines: 0 header, 1 config, 2 user, 3..=5 the batch, 6 taint, ...
    let torn = cut_lines(&parent, 6, 40);
    let partial = cut_lines(&parent, 5, 0);
    let store = FileStore::new(tmp.path(), Durability::None);
    let t = read_in(&store, PARENT).unwrap();
    let mut entry = IndexEntry::from_transcript(&t);
    entry.last_activity = at(2);
    let mut files = vec![
        (format!("{PARENT}.jsonl"), parent),
        (format!("{FORK}.jsonl"), fork),
        ("torn-tail.jsonl".to_string(), torn),
        ("partial-batch.jsonl".to_string(), partial),
        (
            format!("index/{PARENT}.json"),
            serde_json::to_vec(&entry).unwrap(),
        ),
    ];
    for (format, name) in [
        (ExportFormat::Jsonl, "export.jsonl"),
        (ExportFormat::OpenAi, "export.openai.json"),
        (ExportFormat::Markdown, "export.md"),
    ] {
        let e = export::render(
            &t,
            ExportOptions {
                format,
                redact: false,
            },
        )
        .unwrap();
        files.push((name.to_string(), e.text.into_bytes()));
    }
    files
}

#[test]
fn golden_files_are_rewritten_byte_for_byte() {
    let regen = std::env::var("MEMOIR_REGEN_GOLDEN").is_ok_and(|v| v == "1");
    for (name, bytes) in generate() {
        let path = golden_dir().join(&name);
        if regen {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
            eprintln!("wrote {}", path.display());
            continue;
        }
        let stored = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (MEMOIR_REGEN_GOLDEN=1 writes it)", path.display())
        });
        assert!(
            stored == bytes,
            "{name}: today's writer no longer produces the v1 bytes\n--- stored\n{}\n--- now\n{}",
            String::from_utf8_lossy(&stored),
            String::from_utf8_lossy(&bytes)
        );
    }
}

/// A store over a copy of the golden transcripts (reads never write, but a
/// test must not touch files in the repository).
fn golden_store() -> (tempfile::TempDir, FileStore) {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            std::fs::copy(&path, tmp.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let store = FileStore::new(tmp.path(), Durability::None);
    (tmp, store)
}

#[test]
fn golden_transcripts_decode_to_the_expected_values() {
    let (_tmp, store) = golden_store();
    let t = read_in(&store, PARENT).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report);
    assert_eq!(t.last_seq, 9);
    assert_eq!(t.meta.created_at, at(0));
    assert_eq!(t.title.as_deref(), Some("Directory listing"));
    assert_eq!(t.messages.len(), 4);
    assert_eq!(t.messages[0].text_content(), "What is in this directory?");
    assert_eq!(
        t.messages[1].tool_use_ids().collect::<Vec<_>>(),
        ["toolu_01"]
    );
    assert_eq!(t.messages[1].usage.unwrap().cache_read_input_tokens, 1000);
    assert_eq!(t.messages[1].timestamp, Some(at(1)));
    assert_eq!(
        t.messages[2].tool_result_ids().collect::<Vec<_>>(),
        ["toolu_01"]
    );
    assert!(t.taint.private && !t.taint.untrusted);
    assert_eq!((t.usage.input_tokens, t.turns), (120, 1));
    assert_eq!(
        t.configs[0].system_prompt.as_deref(),
        Some("You are terse.")
    );

    let f = read_in(&store, FORK).unwrap();
    assert!(f.report.is_clean(), "{:?}", f.report);
    assert_eq!(f.meta.parent.as_ref().unwrap().session, PARENT);
    assert_eq!(
        f.inherited, 1,
        "the rewrite keeps one inherited message unchanged"
    );
    assert_eq!(f.turns, 0, "a fork never counts its parent's run summaries");
    let texts: Vec<String> = f.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(
        texts,
        ["What is in this directory?", "Now show the README."]
    );
}

#[test]
fn golden_damaged_files_read_as_documented() {
    let (_tmp, store) = golden_store();
    let torn = store.read("torn-tail").unwrap();
    assert_eq!(
        torn.last_seq, 5,
        "everything up to the batch's end survives"
    );
    assert!(matches!(
        torn.report.issues.as_slice(),
        [i] if matches!(i.kind, IssueKind::TornTail { bytes: 40 })
    ));
    let partial = store.read("partial-batch").unwrap();
    assert_eq!(partial.last_seq, 2, "none of the cut batch is visible");
    assert_eq!(partial.records.len(), 2);
    assert!(matches!(
        partial.report.issues.as_slice(),
        [i] if matches!(i.kind, IssueKind::PartialBatch { last_seq: 5, held: 2 }) && i.seq == 3
    ));
}
