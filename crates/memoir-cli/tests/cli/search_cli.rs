//! `memoir index`, `memoir search`, `memoir resume` and `sessions show
//! --around` as processes over a real store.

use std::path::Path;
use std::process::Command;

use memoir::message::Message;
use memoir::record::{Record, SessionMeta, SourceRef};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

fn memoir(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    c.env("MEMOIR_HOME", home)
        .env_remove("MEMOIR_SESSION_DIR")
        .env("NO_COLOR", "1");
    c
}

fn run(c: &mut Command) -> (i32, String) {
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn index_search_resume_and_show_around_work_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("store");
    let store = FileStore::new(&dir, Durability::None);
    let mut meta = SessionMeta::new("imported1");
    meta.workspace = "/work/proj".into();
    meta.source = Some(SourceRef {
        agent: "claude-code".into(),
        agent_version: None,
        session: Some("abcd-1234".into()),
        path: None,
        extra: Default::default(),
    });
    store.create(&meta).unwrap();
    let records: Vec<Record> = (0..6)
        .map(|i| {
            Record::Message(Message::user(if i == 3 {
                "the flamingo deploy broke".to_string()
            } else {
                format!("ordinary line {i}")
            }))
        })
        .collect();
    store.append("imported1", &records, None).unwrap();
    let d = dir.to_str().unwrap();

    let (code, out) = run(memoir(home.path()).args(["index", "--dir", d, "--json"]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stats"]["messages"], 6, "{out}");

    let (code, out) = run(memoir(home.path()).args([
        "search",
        "flamingo",
        "--dir",
        d,
        "--json",
        "--agent",
        "claude-code",
        "--role",
        "user",
    ]));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hit = &v["hits"][0];
    assert_eq!(hit["session"], "imported1");
    assert_eq!(hit["seq"], 4);
    assert_eq!(hit["project"], "/work/proj");
    assert_eq!(hit["snippet"]["marked"], "the [[flamingo]] deploy broke");

    // Plain output without a terminal: markers, not colour; no match exits 1.
    let (code, out) = run(memoir(home.path()).args(["search", "flamingo", "--dir", d]));
    assert_eq!(code, 0);
    assert!(
        out.contains("[[flamingo]]") && !out.contains('\x1b'),
        "{out}"
    );
    let (code, _) = run(memoir(home.path()).args(["search", "zebra", "--dir", d]));
    assert_eq!(code, 1);

    // Resume by words or by id prefix.
    for target in ["flamingo deploy", "imported"] {
        let (code, out) = run(memoir(home.path()).args(["resume", target, "--dir", d]));
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.trim(), "cd /work/proj && claude --resume abcd-1234");
    }

    let (code, out) = run(memoir(home.path()).args([
        "sessions",
        "show",
        "imported1",
        "--dir",
        d,
        "--around",
        "4",
        "-C",
        "1",
    ]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("flamingo")
            && out.contains("ordinary line 2")
            && out.contains("ordinary line 4")
    );
    assert!(
        !out.contains("ordinary line 1") && !out.contains("ordinary line 5"),
        "{out}"
    );
}
