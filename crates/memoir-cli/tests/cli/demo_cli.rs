//! `memoir demo` on machines without agent history: the bundled example
//! sessions are imported and searched, whether the agent folders are absent,
//! present but empty, or hold only empty session files.

use std::path::Path;
use std::process::Output;

use crate::common::memoir_in;

/// Run `memoir demo` with `home` as `HOME` and `MEMOIR_HOME`, from `cwd`,
/// with the agent homes given in `agents` (`CLAUDE_CONFIG_DIR`, ...).
fn demo(home: &Path, cwd: &Path, agents: &[(&str, &Path)]) -> Output {
    let mut c = memoir_in(home);
    c.arg("demo").current_dir(cwd);
    for var in [
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_CLI_HOME",
        "XDG_DATA_HOME",
    ] {
        c.env_remove(var);
    }
    for (var, dir) in agents {
        c.env(var, dir);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn assert_examples_imported_and_found(stdout: &str) {
    assert!(
        stdout.contains("importing the example sessions") && stdout.contains("7 new"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cx-11111111-1111-4111-8111-111111111111 seq"),
        "the search finds an imported example: {stdout}"
    );
}

#[test]
fn demo_with_empty_agent_folders_imports_the_bundled_sessions() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // Every agent folder exists, with the layout each agent creates, but
    // holds no session: both through HOME and through the agents' variables.
    for sub in [
        ".claude/projects",
        ".codex/sessions",
        ".gemini/tmp",
        "claude-config/projects",
        "codex-home/sessions",
        "gemini-home/.gemini/tmp",
        "data",
    ] {
        std::fs::create_dir_all(home.path().join(sub)).unwrap();
    }
    let out = demo(home.path(), elsewhere.path(), &[]);
    assert_examples_imported_and_found(&String::from_utf8_lossy(&out.stdout));

    let home2 = tempfile::tempdir().unwrap();
    for sub in [
        "claude-config/projects",
        "codex-home/sessions",
        "gemini-home/.gemini/tmp",
        "data",
    ] {
        std::fs::create_dir_all(home2.path().join(sub)).unwrap();
    }
    let h = home2.path();
    let out = demo(
        h,
        elsewhere.path(),
        &[
            ("CLAUDE_CONFIG_DIR", &h.join("claude-config")),
            ("CODEX_HOME", &h.join("codex-home")),
            ("GEMINI_CLI_HOME", &h.join("gemini-home")),
            ("XDG_DATA_HOME", &h.join("data")),
        ],
    );
    assert_examples_imported_and_found(&String::from_utf8_lossy(&out.stdout));
    // Run again: the examples are already there, nothing is duplicated.
    let again = demo(
        h,
        elsewhere.path(),
        &[
            ("CLAUDE_CONFIG_DIR", &h.join("claude-config")),
            ("CODEX_HOME", &h.join("codex-home")),
            ("GEMINI_CLI_HOME", &h.join("gemini-home")),
            ("XDG_DATA_HOME", &h.join("data")),
        ],
    );
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("0 new"), "{stdout}");
}

/// Agent folders holding only empty session files (as an agent leaves them
/// when it is started and closed before the first message): no history, so
/// the demo imports the bundled sessions instead of showing nothing.
#[test]
fn demo_with_empty_session_files_imports_the_bundled_sessions() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let h = home.path();
    for file in [
        ".claude/projects/-work-app/0b1c2d3e-0000-4000-8000-000000000001.jsonl",
        ".codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-22222222-2222-4222-8222-222222222222.jsonl",
    ] {
        let path = h.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"").unwrap();
    }
    let out = demo(h, elsewhere.path(), &[]);
    assert_examples_imported_and_found(&String::from_utf8_lossy(&out.stdout));
}
