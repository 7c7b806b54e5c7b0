//! What every CLI test binary shares: a `memoir` command that cannot touch a
//! store outside the test's own directories, whatever the caller's cwd or
//! environment.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Variables a test may inherit: where the test infrastructure (the model,
/// PostgreSQL) lives. Every other `MEMOIR_*` variable is removed.
const INHERITED: &[&str] = &["MEMOIR_MODEL_DIR", "MEMOIR_PYTHON"];

/// A directory that lives as long as the test binary: the default `HOME`,
/// `MEMOIR_HOME` and cwd of every command.
pub fn sandbox() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("memoir-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The `memoir` binary, isolated: no inherited `MEMOIR_*` variable (but
/// [`INHERITED`]), `HOME` and `MEMOIR_HOME` set to `home`, and `home` as the
/// working directory, so neither `~/.memoir` nor an enclosing project's
/// `.memoir/` is ever found. Tests that need another cwd or variable set it
/// on the returned command.
pub fn memoir_in(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str() {
            if k.starts_with("MEMOIR_") && !INHERITED.contains(&k) {
                c.env_remove(k);
            }
        }
    }
    c.env("HOME", home)
        .env("MEMOIR_HOME", home)
        .current_dir(home);
    c
}

/// [`memoir_in`] the binary-wide [`sandbox`].
#[allow(dead_code)]
pub fn memoir() -> Command {
    memoir_in(sandbox())
}
