//! What the CLI shows of imported Claude Code sessions: `sessions list`
//! ordered and timed by the sources' own times (not the import's), a
//! source session uuid accepted wherever an id is, titles that skip
//! synthetic prompts, and `resume` of a subagent run from its parent's
//! project directory.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn memoir(home: &Path, args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
        .args(args)
        .env("HOME", home)
        .env("MEMOIR_HOME", home.join("memoir"))
        .env("CLAUDE_CONFIG_DIR", home.join("claude"))
        .env_remove("MEMOIR_SESSION_DIR")
        .current_dir(home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    (out.status.success(), json, text)
}

fn line(
    sid: &str,
    kind: &str,
    uuid: &str,
    parent: Option<&str>,
    cwd: &str,
    at: &str,
    content: Value,
) -> String {
    let message = if kind == "assistant" {
        json!({"id": format!("msg_{uuid}"), "role": "assistant", "model": "claude-sonnet-4-5",
               "stop_reason": "end_turn", "content": content,
               "usage": {"input_tokens": 1, "output_tokens": 1}})
    } else {
        json!({"role": "user", "content": content})
    };
    json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": sid,
           "cwd": cwd, "version": "2.1.39", "timestamp": at, "message": message})
    .to_string()
        + "\n"
}

#[test]
fn imported_sessions_list_by_source_time_and_resolve_by_source_uuid() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("claude/projects/-work-app");
    let old = "0a000000-0000-4000-8000-000000000001";
    let new = "0b000000-0000-4000-8000-000000000002";
    std::fs::create_dir_all(project.join(new).join("subagents")).unwrap();
    let session = |sid: &str, day: &str| {
        line(
            sid,
            "user",
            "u0",
            None,
            "/work/app",
            &format!("2026-02-{day}T08:00:00Z"),
            json!("[Request interrupted by user]"),
        ) + &line(
            sid,
            "user",
            "u1",
            Some("u0"),
            "/work/app",
            &format!("2026-02-{day}T08:00:01Z"),
            json!("tidy the build"),
        ) + &line(
            sid,
            "assistant",
            "a1",
            Some("u1"),
            "/work/app",
            &format!("2026-02-{day}T08:30:00Z"),
            json!([{"type": "text", "text": "done"}]),
        )
    };
    std::fs::write(project.join(format!("{new}.jsonl")), session(new, "02")).unwrap();
    std::fs::write(project.join(format!("{old}.jsonl")), session(old, "01")).unwrap();
    std::fs::write(
        project.join(new).join("subagents/agent-w1.jsonl"),
        line(
            new,
            "user",
            "s1",
            None,
            "/work/app/sub",
            "2026-02-02T08:10:00Z",
            json!("look around"),
        ) + &line(
            new,
            "assistant",
            "s2",
            Some("s1"),
            "/work/app/sub",
            "2026-02-02T08:11:00Z",
            json!([{"type": "text", "text": "seen"}]),
        ),
    )
    .unwrap();
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();
    let (ok, report, _) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{report}");
    assert_eq!(report["sessions"]["new"], 3, "{report}");

    let (ok, list, _) = memoir(tmp.path(), &["sessions", "list", "--json", "--dir", dir]);
    assert!(ok);
    let sessions = list["sessions"].as_array().unwrap();
    let ids: Vec<&str> = sessions.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids[0], format!("cc-{new}"));
    assert_eq!(ids[2], format!("cc-{old}"));
    let oldest = &sessions[2];
    assert!(
        oldest["last_activity"]
            .as_str()
            .unwrap()
            .starts_with("2026-02-01T08:30:00"),
        "{oldest}"
    );
    assert!(
        oldest["created_at"]
            .as_str()
            .unwrap()
            .starts_with("2026-02-01T08:00:00"),
        "{oldest}"
    );
    assert_eq!(oldest["title"], "tidy the build");

    let (ok, show, _) = memoir(
        tmp.path(),
        &["sessions", "show", old, "--json", "--dir", dir],
    );
    assert!(ok, "show by source uuid failed");
    assert_eq!(show["meta"]["id"], format!("cc-{old}"));

    let (ok, resume, _) = memoir(
        tmp.path(),
        &[
            "resume",
            &format!("cc-{new}-agent-w1"),
            "--json",
            "--dir",
            dir,
        ],
    );
    assert!(ok, "{resume}");
    assert_eq!(resume["command"]["cwd"], "/work/app", "{resume}");
    assert_eq!(resume["command"]["args"], json!(["--resume", new]));
}

#[test]
fn an_openai_export_of_a_long_imported_session_warns_once_per_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("claude/projects/-work-app");
    std::fs::create_dir_all(&project).unwrap();
    let sid = "0c000000-0000-4000-8000-000000000003";
    let mut text = String::new();
    let mut prev: Option<String> = None;
    for turn in 0..60 {
        let (u, a) = (format!("u{turn}"), format!("a{turn}"));
        let at = format!("2026-02-03T08:{:02}:00Z", turn);
        text += &line(
            sid,
            "user",
            &u,
            prev.as_deref(),
            "/work/app",
            &at,
            json!("next step"),
        );
        text += &line(
            sid,
            "assistant",
            &a,
            Some(&u),
            "/work/app",
            &at,
            json!([{"type": "text", "text": "ok"}]),
        );
        prev = Some(a);
    }
    std::fs::write(project.join(format!("{sid}.jsonl")), text).unwrap();
    let dir = tmp.path().join("store");
    let dir = dir.to_str().unwrap();
    let (ok, report, _) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{report}");
    let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
        .args([
            "sessions", "export", sid, "--format", "openai", "--dir", dir,
        ])
        .env("HOME", tmp.path())
        .env("MEMOIR_HOME", tmp.path().join("memoir"))
        .env_remove("MEMOIR_SESSION_DIR")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = stderr.lines().count();
    assert!((2..=8).contains(&lines), "{lines} lines:\n{stderr}");
    assert!(stderr.contains("metadata in 60 message(s)"), "{stderr}");
}
