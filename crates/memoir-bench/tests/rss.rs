//! The peak RSS the history benchmark reports is the child's own: a child
//! forked by a process with a large resident set inherits that process's
//! high-water mark (Linux copies it at fork and folds it in at exec), so
//! children are spawned through the `memoir-bench __measure` trampoline.

use std::path::Path;
use std::process::Command;

use memoir_bench::history::measure_via;

const BIG_MB: usize = 500;

#[test]
fn a_child_reports_its_own_peak_rss_not_the_benchs() {
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("err");
    let trampoline = Path::new(env!("CARGO_BIN_EXE_memoir-bench"));
    // The bench after generating a corpus: hundreds of MB resident.
    let big = vec![1u8; BIG_MB << 20];
    std::hint::black_box(&big);

    // Forked from here, `true` reports this process's high-water mark.
    let direct = measure_via(None, &mut Command::new("true"), None, &err).unwrap();
    assert_eq!(direct.code, 0);
    assert!(
        direct.rss_mb >= BIG_MB as f64,
        "the kernel no longer passes the high-water mark on: {direct:?}"
    );
    // Through the trampoline, its own few MB.
    let own = measure_via(Some(trampoline), &mut Command::new("true"), None, &err).unwrap();
    assert_eq!(own.code, 0);
    assert!(own.rss_mb < 16.0, "{own:?}");

    // A child that uses memory still reports it, with its exit code, CPU,
    // arguments, environment and directory passed through.
    let out = dir.path().join("out");
    let mut c = Command::new("python3");
    c.args([
        "-c",
        "import os, sys; b = b'x' * (64 << 20); print(os.environ['PROBE'], os.getcwd()); sys.exit(3)",
    ])
    .env("PROBE", "probe-value")
    .current_dir(dir.path());
    let used = measure_via(Some(trampoline), &mut c, Some(&out), &err).unwrap();
    drop(big);
    assert_eq!(used.code, 3);
    assert!((64.0..200.0).contains(&used.rss_mb), "{used:?}");
    assert!(used.cpu > 0.0 && used.wall > 0.0, "{used:?}");
    let printed = std::fs::read_to_string(&out).unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(printed.trim(), format!("probe-value {}", cwd.display()));

    // A program that cannot be run is an error, not a measure.
    assert!(measure_via(
        Some(trampoline),
        &mut Command::new("/nonexistent/program"),
        None,
        &err
    )
    .is_err());
}
