//! Tests that need environment variables run in a child process that has
//! them from its start: this test binary re-run with `--exact <test>`.
//! Setting variables in the shared test process (`std::env::set_var`) would
//! race every other test thread that reads the environment (and every child
//! they spawn inherits the change).

use std::process::Command;

/// Set in the child, so a test knows it is the one that must do the work.
pub const CHILD_MARK: &str = "MEMOIR_TEST_ENV_CHILD";

/// Whether this process is the child started by [`run_in_child`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD_MARK).is_some()
}

/// Run the test `name` (its full path, e.g. `manager_env::global`) alone in
/// a child with `vars` set (an empty value removes the variable), and fail
/// with the child's output unless it passed.
pub fn run_in_child(name: &str, vars: &[(&str, &std::ffi::OsStr)]) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_MARK, "1");
    for (k, v) in vars {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let out = cmd.output().expect("run the test in a child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed in its child ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 passed"),
        "{name} did not run in its child:\n{stdout}"
    );
}
