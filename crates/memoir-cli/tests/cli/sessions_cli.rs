//! `memoir sessions` management commands, run as real processes: new, fork,
//! list (fork tree), export, rename, delete, restore, purge, store
//! resolution, errors, and two processes creating and appending sessions in
//! one project concurrently without losing index entries.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use serde_json::Value;

use crate::common;

fn memoir(home: &Path) -> Command {
    common::memoir_in(home)
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(out: Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

struct Project {
    home: tempfile::TempDir,
    root: tempfile::TempDir,
}

impl Project {
    fn new() -> Project {
        Project {
            home: tempfile::tempdir().unwrap(),
            root: tempfile::tempdir().unwrap(),
        }
    }

    /// `memoir sessions <args> --project <root>`.
    fn run(&self, args: &[&str]) -> Output {
        memoir(self.home.path())
            .arg("sessions")
            .args(args)
            .arg("--project")
            .arg(self.root.path())
            .output()
            .unwrap()
    }

    fn manager(&self) -> SessionManager {
        SessionManager::for_project(self.root.path(), ManagerOptions::default()).unwrap()
    }
}

#[test]
fn new_fork_list_rename_export_delete_restore_purge() {
    let p = Project::new();
    let created = json(p.run(&["new", "Fix the failing parser test", "--json"]));
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["messages"], 1);
    assert!(p
        .root
        .path()
        .join(".memoir/sessions")
        .join(format!("{id}.jsonl"))
        .exists());
    // Add a tool round trip through the library, then fork in the middle of it.
    let mut m = p.manager();
    m.append_session_messages(
        &id,
        vec![
            Message::new(
                memoir::Role::Assistant,
                vec![memoir::Block::ToolUse {
                    id: "c1".into(),
                    name: "shell".into(),
                    input: serde_json::json!({"command": "cargo test"}),
                }],
            ),
            Message::tool_result("c1", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", false),
            Message::assistant("fixed"),
        ],
    )
    .unwrap();
    drop(m);
    // `--at` is the record seq `show` prints: seq 2 is the tool call.
    let shown = json(p.run(&["show", &id, "--json"]));
    assert_eq!(shown["message_seqs"][1], 2);
    let forked = json(p.run(&["fork", &id[..20], "--at", "2", "--json"]));
    assert_eq!(forked["requested_seq"], 2);
    assert_eq!(forked["requested"], 2);
    assert_eq!(forked["effective"], 1, "moved back before the tool call");
    assert_eq!(forked["parent"]["seq"], 1);
    let child = forked["id"].as_str().unwrap().to_string();
    let out = p.run(&["fork", &id, "--at", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut moved back to seq 1"), "{err}");
    let past = p.run(&["fork", &id, "--at", "99"]);
    assert_eq!(
        past.status.code(),
        Some(2),
        "a seq past the end is invalid input"
    );
    let grandchild = ok(p.run(&["fork", &child])).trim().to_string();

    // The list shows the fork tree.
    let text = ok(p.run(&["list"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with(&id), "{text}");
    assert!(
        text.contains(&format!("└─ {child}")) && text.contains(&format!("   └─ {grandchild}")),
        "{text}"
    );
    let listed = json(p.run(&["list", "--json"]));
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 4);
    assert_eq!(listed["rebuilt"], 0);

    // Rename.
    json(p.run(&["rename", &child, "a better title", "--json"]));
    let show = json(p.run(&["show", &child, "--json"]));
    assert_eq!(show["title"], "a better title");
    assert_eq!(show["inherited"], 1);

    // Export: JSONL to stdout, redacted Markdown and OpenAI to files.
    let jsonl = ok(p.run(&["export", &id]));
    let first: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(first["format"], "memoir.session-export");
    assert!(jsonl.contains("AKIAIOSFODNN7EXAMPLE"));
    let md_path = p.root.path().join("out.md");
    let report = json(p.run(&[
        "export",
        &id,
        "--format",
        "markdown",
        "--redact",
        "--json",
        "-o",
        md_path.to_str().unwrap(),
    ]));
    assert_eq!(report["redactions"]["aws-access-token"], 1);
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.contains("[REDACTED:aws-access-token]") && !md.contains("AKIAIOSFODNN7EXAMPLE"));
    let oa = json(p.run(&["export", &id, "--format", "openai", "--json"]));
    let chat: Value = serde_json::from_str(oa["content"].as_str().unwrap()).unwrap();
    assert_eq!(chat[1]["tool_calls"][0]["id"], "c1");

    // Delete the root: its forks stay readable; purge keeps what they need.
    ok(p.run(&["delete", &id]));
    let listed = json(p.run(&["list", "--json"]));
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 3);
    assert!(ok(p.run(&["list"])).contains("[parent deleted]"));
    let show = json(p.run(&["show", &grandchild, "--json"]));
    assert_eq!(show["messages"].as_array().unwrap().len(), 1);
    assert!(show["issues"].as_array().unwrap().is_empty());
    let trash = json(p.run(&["list", "--deleted", "--json"]));
    assert_eq!(trash["deleted"][0]["entry"]["id"], id.as_str());
    let purged = json(p.run(&["purge", "--json"]));
    assert_eq!(purged["purged"].as_array().unwrap().len(), 0);
    assert_eq!(purged["kept"][0]["id"], id.as_str());
    // Restore by prefix.
    let restored = json(p.run(&["restore", &id[..20], "--json"]));
    assert_eq!(restored["entry"]["messages"], 4);
    assert_eq!(
        json(p.run(&["list", "--json"]))["sessions"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Delete a leaf and purge it for good.
    ok(p.run(&["delete", &grandchild]));
    let purged = json(p.run(&["purge", &grandchild, "--json"]));
    assert_eq!(purged["purged"][0], grandchild.as_str());
    assert_eq!(p.run(&["restore", &grandchild]).status.code(), Some(4));
}

#[test]
fn store_resolution_project_detection_dir_and_global() {
    let p = Project::new();
    // Outside any project: the global store ($MEMOIR_HOME/sessions).
    let out = memoir(p.home.path())
        .args(["sessions", "new", "global one", "--json"])
        .current_dir(p.root.path())
        .output()
        .unwrap();
    let id = json(out)["id"].as_str().unwrap().to_string();
    assert!(p
        .home
        .path()
        .join("sessions")
        .join(format!("{id}.jsonl"))
        .exists());
    // --project creates the project's store; from then on, a command run
    // anywhere inside the project uses it.
    let pid = json(p.run(&["new", "project one", "--json"]))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let sub = p.root.path().join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let listed = json(
        memoir(p.home.path())
            .args(["sessions", "list", "--json"])
            .current_dir(&sub)
            .output()
            .unwrap(),
    );
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![pid.as_str()]);
    // --dir names any directory.
    let listed = json(
        memoir(p.home.path())
            .args(["sessions", "list", "--json", "--dir"])
            .arg(p.home.path().join("sessions"))
            .current_dir(&sub)
            .output()
            .unwrap(),
    );
    assert_eq!(listed["sessions"][0]["id"], id.as_str());
}

#[test]
fn errors_exit_with_the_documented_code_and_a_message() {
    let p = Project::new();
    json(p.run(&["new", "x", "--json"]));
    for (args, code) in [
        (vec!["show", "../../etc/passwd"], 2),
        (vec!["fork", "a/b"], 2),
        (vec!["fork", "nope"], 4),
        (vec!["export", "nope"], 4),
        (vec!["rename", "a\\b", "t"], 2),
        (vec!["delete", ".."], 2),
        (vec!["restore", "nope"], 4),
        (vec!["purge", "../x"], 2),
    ] {
        let out = p.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.starts_with("memoir: ") && !err.contains("panicked"),
            "{err}"
        );
    }
    // A value outside the listed ones is a usage error from the parser.
    let out = p.run(&["export", "x", "--format", "pdf"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("jsonl, openai, markdown"), "{err}");
}

#[test]
fn two_processes_create_and_append_concurrently_without_losing_index_entries() {
    const PER_PROCESS: usize = 25;
    const MESSAGES: usize = 12;
    let p = Project::new();
    let shared = json(p.run(&["new", "shared log", "--json"]))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let children: Vec<_> = ["p1", "p2"]
        .iter()
        .map(|tag| {
            memoir(p.home.path())
                .args(["sessions", "stress", "--sessions"])
                .arg(PER_PROCESS.to_string())
                .arg("--messages")
                .arg(MESSAGES.to_string())
                .args(["--shared", &shared, "--tag", tag, "--project"])
                .arg(p.root.path())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut created = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        created.extend(ok(out).lines().map(str::to_string).collect::<Vec<String>>());
    }
    assert_eq!(created.len(), 2 * PER_PROCESS);
    // Every created session's index entry is on disk and complete, before
    // any listing had a chance to heal anything.
    let index = p.root.path().join(".memoir/sessions/index");
    for id in &created {
        let entry: Value =
            serde_json::from_slice(&std::fs::read(index.join(format!("{id}.json"))).unwrap())
                .unwrap();
        assert_eq!(entry["messages"], 1 + MESSAGES, "{id}");
    }
    let m = p.manager();
    let report = m.list_sessions_report().unwrap();
    assert_eq!(report.entries.len(), 1 + 2 * PER_PROCESS);
    assert!(
        report.rebuilt <= 1,
        "only the shared session may need a rebuild, got {}",
        report.rebuilt
    );
    let shared_entry = report.entries.iter().find(|e| e.id == shared).unwrap();
    assert_eq!(shared_entry.messages, 1 + 2 * PER_PROCESS);
    let shared_messages = m.read_session_messages(&shared).unwrap();
    for tag in ["p1", "p2"] {
        let mine: Vec<String> = shared_messages
            .iter()
            .map(|m| m.text_content())
            .filter(|t| t.starts_with(&format!("{tag}:")))
            .collect();
        let want: Vec<String> = (0..PER_PROCESS).map(|i| format!("{tag}:{i}")).collect();
        assert_eq!(mine, want, "{tag}'s appends, in order");
    }
    assert_eq!(m.list_sessions_report().unwrap().rebuilt, 0, "healed");
}
