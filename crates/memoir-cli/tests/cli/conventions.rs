//! The CLI's conventions, run as real processes: the exit-code table of
//! docs/CLI.md, JSON errors under `--json`, a closed stdout, allowed values in
//! `--help`, completions and the man page, one numbering (record seq) in
//! `show`/`fork --at`/exports, one store-resolution order (`recall` too),
//! reads that do not create a store, the `.gitignore` of a new `.memoir/`,
//! errors printed once, the empty id, and a copied transcript whose header
//! names another session.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

fn memoir(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    c.env("MEMOIR_HOME", home)
        .env_remove("MEMOIR_SESSION_DIR")
        .env_remove("MEMOIR_STORE")
        .env_remove("MEMOIR_REMOTE")
        .env_remove("MEMOIR_TOKEN")
        .current_dir(home);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn run(home: &Path, args: &[&str]) -> Output {
    memoir(home).args(args).output().unwrap()
}

/// A store in `<tmp>/s` with one session holding a tool round trip; returns its id.
fn store_with_session(home: &Path) -> String {
    let dir = home.join("s");
    let mut m = memoir::manager::SessionManager::open(&dir, Default::default()).unwrap();
    let id = m.create_session("find the parser bug", None).unwrap();
    m.add_messages([
        memoir::Message::new(
            memoir::Role::Assistant,
            vec![memoir::Block::ToolUse {
                id: "c1".into(),
                name: "shell".into(),
                input: serde_json::json!({"command": "cargo test"}),
            }],
        ),
        memoir::Message::tool_result("c1", "1 failed: parses_empty_input", false),
        memoir::Message::assistant("the empty input case is fixed"),
    ])
    .unwrap();
    m.flush().unwrap();
    id
}

fn dir_arg(home: &Path) -> String {
    home.join("s").display().to_string()
}

#[test]
fn exit_codes_and_json_errors_follow_the_table() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let id = store_with_session(h);
    let d = dir_arg(h);
    // 0, 2 (invalid / empty / whitespace id), 4 (not found), 1 (nothing matched).
    for (args, code) in [
        (vec!["sessions", "show", &id, "--dir", &d], 0),
        (vec!["sessions", "show", "--dir", &d, "--", ""], 2),
        (vec!["sessions", "delete", "--dir", &d, "--", " "], 2),
        (vec!["sessions", "export", "--dir", &d, "--", ""], 2),
        (vec!["sessions", "show", "nope", "--dir", &d], 4),
        (vec!["sessions", "bogus-subcommand"], 2),
        // No texts (stdin is empty): the caller's input, not a failure.
        (vec!["embed", "--json"], 2),
        (vec!["usage", "--since", "notadate", "--dir", &d], 2),
        (
            vec![
                "recall",
                &id,
                "zebra quantum",
                "--mode",
                "lexical",
                "--dir",
                &d,
            ],
            1,
        ),
    ] {
        let out = run(h, &args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // The empty id acted on nothing: the session is still there.
    let listed: Value =
        serde_json::from_str(&ok(run(h, &["sessions", "list", "--json", "--dir", &d]))).unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);

    // Not found names the store searched; under --json the error is JSON.
    let out = run(h, &["sessions", "show", "nope", "--json", "--dir", &d]);
    assert_eq!(out.status.code(), Some(4));
    let err: Value = serde_json::from_str(text(&out.stderr).trim()).unwrap();
    assert_eq!(err["error"], "not_found");
    assert_eq!(err["exit"], 4);
    assert!(
        err["message"].as_str().unwrap().contains(&d),
        "names the store: {err}"
    );
    assert!(out.stdout.is_empty());
    // A parse error is JSON too under --json.
    let out = run(h, &["sessions", "export", &id, "--format", "pdf", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err: Value = serde_json::from_str(text(&out.stderr).trim()).unwrap();
    assert_eq!(err["error"], "bad_request");
    // 5: a server that is not there.
    let out = run(
        h,
        &["remote", "list", "--remote", "http://127.0.0.1:9", "--json"],
    );
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));
    let err: Value = serde_json::from_str(text(&out.stderr).trim()).unwrap();
    assert_eq!(err["error"], "unavailable");
}

/// `memoir serve` on an ephemeral port; returns the child and its URL.
fn serve(home: &Path, store: &Path) -> (Child, String) {
    let mut child = memoir(home)
        .args(["serve", "--listen", "127.0.0.1:0", "--durability", "none"])
        .arg("--store")
        .arg(store)
        .args(["--token", "alpha=alpha-token-0123456789"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    assert!(url.starts_with("http://"), "{line}");
    (child, url)
}

#[test]
fn remote_commands_take_json_and_map_conflicts_and_not_found() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (mut server, url) = serve(h, &h.join("server-store"));
    let remote = |args: &[&str]| {
        memoir(h)
            .arg("remote")
            .args(args)
            .args(["--remote", &url, "--token", "alpha-token-0123456789"])
            .output()
            .unwrap()
    };
    let created: Value =
        serde_json::from_str(&ok(remote(&["create", "--title", "t", "--json"]))).unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let appended: Value =
        serde_json::from_str(&ok(remote(&["append", &id, "hello", "--json"]))).unwrap();
    assert_eq!(appended["first_seq"], 1);
    // 3: a lost expected_seq race.
    let out = remote(&["append", &id, "again", "--expected-seq", "7", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err: Value = serde_json::from_str(text(&out.stderr).trim()).unwrap();
    assert_eq!(err["error"], "conflict");
    // 4 naming the server.
    let out = remote(&["show", "nope"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(text(&out.stderr).contains(&url), "{}", text(&out.stderr));
    // --json on every remote subcommand.
    for args in [
        vec!["list", "--json"],
        vec!["show", id.as_str(), "--json"],
        vec!["export", id.as_str(), "--json"],
        vec!["verify", id.as_str(), "--json"],
        vec!["search", id.as_str(), "hello", "--json"],
    ] {
        let out = ok(remote(&args));
        serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
    }
    // Delete, restore and purge through the server.
    ok(remote(&["delete", &id]));
    let restored: Value = serde_json::from_str(&ok(remote(&["restore", &id, "--json"]))).unwrap();
    assert_eq!(restored["restored"], true);
    ok(remote(&["delete", &id]));
    let purged: Value = serde_json::from_str(&ok(remote(&["purge", &id, "--json"]))).unwrap();
    assert_eq!(purged["purged"][0], id.as_str());
    assert_eq!(remote(&["restore", &id]).status.code(), Some(4));
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn a_closed_stdout_exits_quietly() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let dir = h.join("s");
    let mut m = memoir::manager::SessionManager::open(&dir, Default::default()).unwrap();
    for i in 0..400 {
        m.create_session(&format!("session number {i} with a longer title"), None)
            .unwrap();
    }
    drop(m);
    // Well over a pipe buffer of output; read one line, then close the pipe.
    let mut child = memoir(h)
        .args(["sessions", "list", "--json", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "{");
    drop(stdout);
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.is_empty(), "quiet: {err}");
}

/// Every command that reads and prints, run with its stdout's reader
/// already gone (`memoir ... | head` once `head` has exited): each exits
/// as it does on an open pipe, with the same stderr (no panic, no "broken
/// pipe" message), in text, `--json` and `--csv` form.
#[test]
fn every_read_command_exits_quietly_on_a_closed_stdout() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let id = store_with_session(h);
    let d = dir_arg(h);
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/transcripts");
    ok(run(h, &["import", examples, "--dir", &d]));
    ok(run(h, &["index", "--dir", &d]));
    let edited = {
        let mut m =
            memoir::manager::SessionManager::open(&h.join("s"), Default::default()).unwrap();
        let id = m.create_session("fix the parser", None).unwrap();
        m.add_messages([
            memoir::Message::new(
                memoir::Role::Assistant,
                vec![memoir::Block::ToolUse {
                    id: "e1".into(),
                    name: "Edit".into(),
                    input: serde_json::json!({
                        "file_path": "/p/src/parser.rs",
                        "old_string": "let first = input.chars().next().unwrap();",
                        "new_string": "let Some(first) = input.chars().next() else { return Ast::empty() };"
                    }),
                }],
            ),
            memoir::Message::tool_result("e1", "edited", false),
        ])
        .unwrap();
        m.flush().unwrap();
        id
    };
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions", "list", "--dir", &d],
        vec!["sessions", "list", "--json", "--dir", &d],
        vec!["sessions", "show", &id, "--dir", &d],
        vec!["sessions", "show", &id, "--json", "--dir", &d],
        vec!["sessions", "show", &id, "--around", "2", "--dir", &d],
        vec!["sessions", "usage", &id, "--dir", &d],
        vec!["sessions", "usage", &id, "--json", "--dir", &d],
        vec!["sessions", "verify", &id, "--dir", &d],
        vec!["sessions", "verify", &id, "--json", "--dir", &d],
        vec!["sessions", "export", &id, "--dir", &d],
        vec![
            "sessions", "export", &id, "--format", "markdown", "--dir", &d,
        ],
        vec!["sessions", "export", &id, "--json", "--dir", &d],
        vec!["search", "parser", "--mode", "lexical", "--dir", &d],
        vec![
            "search", "parser", "--mode", "lexical", "--json", "--dir", &d,
        ],
        vec!["recall", &id, "parser bug", "--dir", &d],
        vec!["recall", &id, "parser bug", "--json", "--dir", &d],
        vec!["resume", &id, "--dir", &d],
        vec!["resume", &id, "--json", "--dir", &d],
        vec!["changes", &edited, "--dir", &d],
        vec!["changes", &edited, "--json", "--dir", &d],
        vec!["usage", "--dir", &d],
        vec!["usage", "--json", "--dir", &d],
        vec!["usage", "--csv", "--dir", &d],
        vec!["usage", "--blocks", "--dir", &d],
        vec!["usage", "--blocks", "--json", "--dir", &d],
        vec!["usage", "--blocks", "--csv", "--dir", &d],
        vec!["stats", "--dir", &d],
        vec!["stats", "--json", "--dir", &d],
        vec!["doctor", "--dir", &d],
        vec!["doctor", "--json", "--dir", &d],
        vec!["index", "--dir", &d],
        vec!["index", "--json", "--dir", &d],
        vec!["prices", "show"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["--help"],
        vec!["--version"],
    ];
    for args in &commands {
        let open = run(h, args);
        let mut child = memoir(h)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let closed = child.wait_with_output().unwrap();
        let (open_err, closed_err) = (text(&open.stderr), text(&closed.stderr));
        assert!(
            !closed_err.contains("panicked") && !closed_err.to_lowercase().contains("broken pipe"),
            "{args:?}: {closed_err}"
        );
        assert_eq!(
            closed.status.code(),
            open.status.code(),
            "{args:?}: exit on a closed stdout\n{closed_err}"
        );
        assert_eq!(closed_err, open_err, "{args:?}: stderr");
        assert!(!text(&open.stdout).is_empty(), "{args:?} printed nothing");
    }
}

#[test]
fn help_lists_allowed_values_and_completions_and_man_page_are_generated() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    for (args, values) in [
        (
            vec!["sessions", "export", "--help"],
            "jsonl, openai, markdown",
        ),
        (vec!["serve", "--help"], "fsync, flush, none"),
        (vec!["recall", "--help"], "hybrid, vector, lexical"),
    ] {
        let help = ok(run(h, &args));
        assert!(help.contains(values), "{args:?}: {help}");
    }
    let top = ok(run(h, &["--help"]));
    assert!(top.contains("4 not found"), "{top}");
    let bash = ok(run(h, &["completions", "bash"]));
    assert!(
        bash.contains("_memoir()") && bash.contains("sessions"),
        "{bash}"
    );
    let man = ok(run(h, &["man"]));
    assert!(man.contains(".TH memoir"), "{man}");
    assert_eq!(run(h, &["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn one_numbering_record_seq_in_show_fork_and_exports() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let id = store_with_session(h);
    let d = dir_arg(h);
    let shown = ok(run(h, &["sessions", "show", &id, "--dir", &d]));
    // seq 1 is the task, 2 the tool call, 3 its result, 4 the answer.
    assert!(shown.contains("[   2] assistant -> shell"), "{shown}");
    assert!(shown.contains("[   3] tool <- result [c1]"), "{shown}");
    // fork --at 3 keeps the tool call with its result: records 1..=3.
    let forked: Value = serde_json::from_str(&ok(run(
        h,
        &["sessions", "fork", &id, "--at", "3", "--json", "--dir", &d],
    )))
    .unwrap();
    assert_eq!(forked["parent"]["seq"], 3);
    assert_eq!(forked["effective"], 3);
    let child = forked["id"].as_str().unwrap();
    let md = ok(run(
        h,
        &[
            "sessions", "export", child, "--format", "markdown", "--dir", &d,
        ],
    ));
    assert!(md.contains("## seq 3 (from `"), "{md}");
    assert!(!md.contains("## 0 "), "{md}");
    let jsonl = ok(run(h, &["sessions", "export", &id, "--dir", &d]));
    let line: Value = serde_json::from_str(jsonl.lines().nth(2).unwrap()).unwrap();
    assert_eq!(line["index"], 1);
    assert_eq!(line["seq"], 2);
}

#[test]
fn recall_and_every_command_resolve_the_store_the_same_way() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let project = h.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    // Creating the project's store writes .memoir/.gitignore.
    let out = ok(run(
        h,
        &[
            "sessions",
            "new",
            "the parser bug",
            "--json",
            "--project",
            project.to_str().unwrap(),
        ],
    ));
    let id = serde_json::from_str::<Value>(&out).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ignore = std::fs::read_to_string(project.join(".memoir/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    // From inside the project, recall finds it without flags, like `show`.
    let sub = project.join("src");
    std::fs::create_dir_all(&sub).unwrap();
    for args in [
        vec!["sessions", "show", id.as_str()],
        vec!["recall", id.as_str(), "parser", "--mode", "lexical"],
    ] {
        let out = memoir(h).args(&args).current_dir(&sub).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    // And with --project from elsewhere.
    let out = run(
        h,
        &[
            "recall",
            &id,
            "parser",
            "--mode",
            "lexical",
            "--project",
            project.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Reads never create a store.
    let missing = h.join("missing");
    let m = missing.to_str().unwrap();
    assert_eq!(
        run(h, &["sessions", "list", "--dir", m]).status.code(),
        Some(0)
    );
    assert_eq!(
        run(h, &["sessions", "show", "x", "--dir", m]).status.code(),
        Some(4)
    );
    assert!(!missing.exists(), "a read created the store");
}

#[test]
fn an_os_error_is_printed_once() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let id = store_with_session(h);
    let d = dir_arg(h);
    let out = run(
        h,
        &[
            "sessions",
            "export",
            &id,
            "--dir",
            &d,
            "-o",
            "/nonexistent-memoir-dir/x.jsonl",
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn a_copy_whose_header_names_another_session_is_never_acted_on() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let id = store_with_session(h);
    let d = dir_arg(h);
    let original = h.join("s").join(format!("{id}.jsonl"));
    let copy = h.join("s").join("backup-copy.jsonl");
    std::fs::copy(&original, &copy).unwrap();
    for args in [
        vec!["sessions", "delete", "backup-copy", "--dir", &d],
        vec![
            "sessions",
            "rename",
            "backup-copy",
            "new title",
            "--dir",
            &d,
        ],
        vec!["sessions", "show", "backup-copy", "--dir", &d],
    ] {
        let out = run(h, &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("header names session"), "{err}");
    }
    assert!(original.exists() && copy.exists());
    let shown: Value = serde_json::from_str(&ok(run(
        h,
        &["sessions", "show", &id, "--json", "--dir", &d],
    )))
    .unwrap();
    assert_eq!(shown["title"], "find the parser bug");
}
