//! memoir prints no colour: `memoir search` writes the same plain text
//! (matches between `[[`/`]]`) to a real terminal, with or without
//! `NO_COLOR`, as to a pipe; escape codes stored in a session's own text
//! are printed inert (`\u{1b}`), never sent to the terminal.

use std::path::Path;

use crate::common::memoir_in;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/transcripts");

/// Run `memoir search files` on a real terminal (a pseudo-terminal made by
/// util-linux `script`), returning what the terminal received.
#[cfg(target_os = "linux")]
fn search_on_terminal(home: &Path, no_color: bool) -> String {
    let store = home.join("store");
    let (code, text) = on_terminal(
        home,
        &["search", "files", "--dir", &store.display().to_string()],
        no_color,
    );
    assert_eq!(code, Some(0), "{text}");
    text
}

/// Run `memoir ARGS` on a pseudo-terminal (util-linux `script`, which exits
/// with the command's code): its exit code and what the terminal received.
#[cfg(target_os = "linux")]
fn on_terminal(home: &Path, args: &[&str], no_color: bool) -> (Option<i32>, String) {
    let mut command = format!("'{}'", env!("CARGO_BIN_EXE_memoir"));
    for a in args {
        command.push_str(&format!(" '{a}'"));
    }
    let mut c = memoir_in(home);
    c.env_remove("NO_COLOR");
    if no_color {
        c.env("NO_COLOR", "1");
    }
    c.env("TERM", "xterm-256color");
    let mut script = std::process::Command::new("script");
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    let out = script
        .current_dir(home)
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .output()
        .expect("util-linux `script` runs memoir on a pseudo-terminal");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Help, a usage error and `--version` on a real terminal: plain text (the
/// argument parser styles neither headings nor "error:").
#[cfg(target_os = "linux")]
#[test]
fn help_and_usage_errors_print_no_colour_on_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    for (args, code, want) in [
        (vec!["--help"], 0, "Usage:"),
        (vec!["search", "--help"], 0, "Usage:"),
        (vec!["sessions", "show", "--no-such-flag"], 2, "error:"),
        (vec!["no-such-command"], 2, "error:"),
        (vec!["--version"], 0, "memoir"),
    ] {
        let (got, text) = on_terminal(home.path(), &args, false);
        assert_eq!(got, Some(code), "{args:?}: {text}");
        assert!(text.contains(want), "{args:?}: {text}");
        assert!(
            !text.contains('\u{1b}'),
            "{args:?}: escape codes in {text:?}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn search_prints_no_colour_on_a_terminal_or_a_pipe() {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("store");
    let import = memoir_in(home.path())
        .args(["import", EXAMPLES, "--dir"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(import.status.success(), "{import:?}");

    let piped = memoir_in(home.path())
        .args(["search", "files", "--dir"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(piped.status.success(), "{piped:?}");
    let piped = String::from_utf8_lossy(&piped.stdout).into_owned();
    for (what, text) in [
        ("pipe", piped.clone()),
        ("terminal", search_on_terminal(home.path(), false)),
        ("terminal, NO_COLOR", search_on_terminal(home.path(), true)),
    ] {
        assert!(!text.contains('\u{1b}'), "{what}: escape codes in {text:?}");
        assert!(text.contains("[[") && text.contains("]]"), "{what}: {text}");
        // The terminal ends lines with CR LF; otherwise the same text.
        assert_eq!(text.replace("\r\n", "\n"), piped, "{what}");
    }
}

/// A session whose title and text hold colour codes, a bell and a
/// screen-clearing sequence: `memoir search` prints them as visible escapes
/// (U+FFFD in snippets), so its output holds no control character (the
/// JSON keeps the title as stored, escaped by JSON itself).
#[test]
fn search_output_holds_no_escape_codes_from_session_text() {
    use memoir::message::Message;
    use memoir::record::{Record, SessionMeta};
    use memoir::store::{file::FileStore, Durability, LogStore};

    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("store");
    let files = FileStore::new(&store, Durability::None);
    let mut meta = SessionMeta::new("hostile");
    meta.title = Some("\u{1b}[31mred title\u{1b}[0m".into());
    files.create(&meta).unwrap();
    files
        .append(
            "hostile",
            &[Record::Message(Message::user(
                "the \u{1b}[1;31m flamingo \u{1b}[0m deploy \u{7}\u{1b}[2J \u{9b}0m broke\r",
            ))],
            None,
        )
        .unwrap();
    let out = memoir_in(home.path())
        .args(["search", "flamingo", "--dir"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[[flamingo]]"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "control characters in {text:?}"
    );
    // The title prints its escapes visibly; the snippet shows a control
    // character as U+FFFD, as every snippet does (docs/SEARCH.md).
    assert!(text.contains("\\u{1b}[31mred title"), "{text}");
    assert!(text.contains("\u{FFFD}\\[1;31m"), "{text}");

    let json = memoir_in(home.path())
        .args(["search", "flamingo", "--json", "--dir"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(json.status.success(), "{json:?}");
    let json = String::from_utf8(json.stdout).unwrap();
    assert!(!json.contains('\u{1b}'), "raw escape in JSON: {json:?}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    // The title is kept as stored (JSON escapes it); the snippet holds
    // U+FFFD where the text had control characters.
    assert!(v["hits"][0]["title"].as_str().unwrap().contains('\u{1b}'));
    let snippet = v["hits"][0]["snippet"]["text"].as_str().unwrap();
    assert!(snippet.contains('\u{FFFD}'), "{snippet:?}");
    assert!(!snippet.chars().any(char::is_control), "{snippet:?}");
}
