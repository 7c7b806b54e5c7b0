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

/// A Claude Code home of `n` copies of a fixture session (each its own
/// session id), every fifth one with a 100 KB tool result (stored as a blob).
fn claude_home(home: &Path, n: usize) {
    let project = home.join("claude/projects/-work");
    std::fs::create_dir_all(&project).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/transcripts/claude-code/55550000-0000-4000-8000-000000000001.jsonl");
    let text = std::fs::read_to_string(fixture).unwrap();
    for i in 0..n {
        let sid = format!("{i:08}-0000-4000-8000-000000000001");
        let mut t = text.replace("55550000-0000-4000-8000-000000000001", &sid);
        if i % 5 == 0 {
            let big = serde_json::json!({
                "type": "user", "uuid": "big-1", "parentUuid": "sc-a5", "sessionId": sid,
                "timestamp": "2026-06-15T10:09:00.000Z", "cwd": "/work",
                "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_big", "content": "x".repeat(100_000)}
                ]}
            });
            t.push_str(&format!("{big}\n"));
        }
        std::fs::write(project.join(format!("{sid}.jsonl")), t).unwrap();
    }
}

/// Session id → its messages, as stored in `dir`.
fn stored(dir: &Path) -> Vec<(String, Vec<memoir::Message>)> {
    let m = memoir::manager::SessionManager::open(dir, Default::default()).unwrap();
    let mut ids: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let t = m.read_stored(&id).unwrap();
            (id, t.messages)
        })
        .collect()
}

#[test]
fn an_import_killed_midway_resumes_without_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    claude_home(tmp.path(), 120);
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();
    // SIGKILL it at a few points (some may come after it finished).
    for delay_ms in [40u64, 150, 400] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memoir"))
            .args(["import", "claude", "--json", "--dir", dir])
            .env("HOME", tmp.path())
            .env("MEMOIR_HOME", tmp.path().join("memoir"))
            .env("CLAUDE_CONFIG_DIR", tmp.path().join("claude"))
            .env_remove("MEMOIR_SESSION_DIR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
    }
    let (ok, last) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{last}");
    assert_eq!(last["sessions"]["forked"], 0, "{last}");
    let clean = tmp.path().join("clean");
    let (ok, _) = memoir(
        tmp.path(),
        &[
            "import",
            "claude",
            "--json",
            "--dir",
            clean.to_str().unwrap(),
        ],
    );
    assert!(ok);
    let (resumed, fresh) = (stored(&store), stored(&clean));
    assert_eq!(resumed.len(), 120);
    assert_eq!(
        resumed, fresh,
        "the killed-and-resumed store differs from a clean import"
    );
    let (ok, again) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok);
    assert_eq!(again["records"], 0, "{again}");
}

/// What the caller named is not importable: a usage error (exit 2,
/// `bad_request` under `--json`), not an internal failure (exit 1).
#[test]
fn a_source_that_is_not_a_session_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.txt");
    std::fs::write(&text, "just some notes\n").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let dir = tmp.path().join("store");
    for target in [text.to_str().unwrap(), empty.to_str().unwrap()] {
        let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
            .args(["import", target, "--json", "--dir", dir.to_str().unwrap()])
            .env("HOME", tmp.path())
            .env("MEMOIR_HOME", tmp.path().join("memoir"))
            .env_remove("MEMOIR_SESSION_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(stderr.trim()).unwrap();
        assert_eq!(v["error"], "bad_request", "{stderr}");
    }
}
