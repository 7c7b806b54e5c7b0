//! `memoir import` end to end: a Claude Code home given by
//! `CLAUDE_CONFIG_DIR`, the JSON summary, a no-op re-run, and the source
//! shown by `sessions list --json` / `sessions show --json`.

use std::path::Path;
use std::process::Command;

fn memoir(home: &Path, args: &[&str]) -> (bool, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
        .args(args)
        .env("HOME", home)
        .env("MEMOIR_HOME", home.join("memoir"))
        .env("CLAUDE_CONFIG_DIR", home.join("claude"))
        .env_remove("MEMOIR_SESSION_DIR")
        .current_dir(home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    (out.status.success(), json)
}

#[test]
fn import_claude_home_then_list_shows_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("claude/projects/-tmp");
    std::fs::create_dir_all(&project).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/transcripts/claude-code/dag_compact_after_rewind.jsonl");
    std::fs::copy(&fixture, project.join("dag_compact_after_rewind.jsonl")).unwrap();
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();

    let (ok, report) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{report}");
    assert_eq!(report["sessions"]["new"], 2, "{report}");
    assert_eq!(report["messages"], 11);
    let (ok, again) = memoir(tmp.path(), &["import", "--all", "--json", "--dir", dir]);
    assert!(ok);
    assert_eq!(again["records"], 0, "{again}");

    let (ok, list) = memoir(tmp.path(), &["sessions", "list", "--json", "--dir", dir]);
    assert!(ok);
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    for s in sessions {
        assert_eq!(s["source"]["agent"], "claude-code", "{s}");
        assert_eq!(s["source"]["session"], "s1");
        assert!(s["source"]["path"]
            .as_str()
            .unwrap()
            .ends_with("dag_compact_after_rewind.jsonl"));
    }
    let (ok, show) = memoir(
        tmp.path(),
        &[
            "sessions",
            "show",
            "cc-dag_compact_after_rewind",
            "--json",
            "--dir",
            dir,
        ],
    );
    assert!(ok);
    assert_eq!(show["meta"]["source"]["agent"], "claude-code");
    assert_eq!(show["messages"].as_array().unwrap().len(), 9);
}
