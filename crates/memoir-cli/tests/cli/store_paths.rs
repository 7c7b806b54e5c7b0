//! A store path that exists and is not a directory (a regular file, a FIFO,
//! a symbolic link to a file, a dangling symbolic link) is a usage error
//! (exit 2) naming it, on every command that takes a store, and nothing is
//! created or changed there.

use std::path::Path;
use std::process::Command;

fn memoir(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    c.env("MEMOIR_HOME", home)
        .env_remove("MEMOIR_SESSION_DIR")
        .env("NO_COLOR", "1")
        .current_dir(home);
    c
}

/// The commands that take a store, each with the arguments it needs.
const COMMANDS: &[&[&str]] = &[
    &["sessions", "list"],
    &["sessions", "show", "abc"],
    &["sessions", "new", "--title", "t"],
    &["doctor"],
    &["usage"],
    &["search", "flamingo"],
    &["index"],
    &["recall", "abc", "flamingo"],
    &["resume", "flamingo"],
    &["demo"],
];

/// The kinds of non-directory paths, made under `root`.
fn not_directories(root: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let file = root.join("a-file");
    std::fs::write(&file, b"not a store\n").unwrap();
    let fifo = root.join("a-fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let link = root.join("a-link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let dangling = root.join("a-dangling-link");
    std::os::unix::fs::symlink(root.join("nowhere"), &dangling).unwrap();
    vec![
        ("regular file", file),
        ("FIFO", fifo),
        ("symbolic link to a file", link),
        ("dangling symbolic link", dangling),
    ]
}

#[test]
fn a_store_path_that_is_not_a_directory_is_a_usage_error_on_every_command() {
    let home = tempfile::tempdir().unwrap();
    for (kind, path) in not_directories(home.path()) {
        let before = std::fs::symlink_metadata(&path).unwrap();
        for args in COMMANDS {
            let out = memoir(home.path())
                .args(*args)
                .arg("--dir")
                .arg(&path)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?} --dir <{kind}>: {text}"
            );
            assert!(
                text.contains("not a session store directory"),
                "{args:?} --dir <{kind}> says why: {text}"
            );
            let after = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                (after.len(), after.file_type()),
                (before.len(), before.file_type()),
                "{args:?} left the {kind} alone"
            );
        }
        assert!(!home.path().join("nowhere").exists(), "nothing created");
    }
}

/// The same through `$MEMOIR_SESSION_DIR` and `--project` (whose
/// `.memoir/sessions` is a regular file).
#[test]
fn a_store_chosen_by_environment_or_project_that_is_not_a_directory_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = memoir(home.path())
        .args(["sessions", "list"])
        .env("MEMOIR_SESSION_DIR", &file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let project = home.path().join("proj");
    std::fs::create_dir_all(project.join(".memoir")).unwrap();
    std::fs::write(project.join(".memoir/sessions"), b"x").unwrap();
    let out = memoir(home.path())
        .args(["sessions", "list", "--project"])
        .arg(&project)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
