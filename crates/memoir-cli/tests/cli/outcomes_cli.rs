//! Run outcomes through the binary: `memoir sessions show` (text and
//! `--json`) shows a session's episode, and `memoir stats` counts how runs
//! ended, by model.

use std::path::Path;
use std::process::Output;

use memoir::manager::{LeasePolicy, ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::record::{RunStats, StopCause};
use serde_json::Value;

use crate::common;

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

fn run(home: &Path, root: &Path, args: &[&str]) -> String {
    ok(common::memoir_in(home)
        .args(args)
        .arg("--project")
        .arg(root)
        .output()
        .unwrap())
}

fn ended(model: &str, cause: Option<StopCause>, failed_call: bool) -> RunStats {
    RunStats {
        turns: 2,
        tool_calls: 3,
        tool_errors: u32::from(failed_call),
        usage_complete: true,
        stop_cause: cause,
        ended_on_failed_call: failed_call,
        model: Some(model.into()),
        ..RunStats::default()
    }
}

#[test]
fn show_prints_the_episode_and_stats_counts_endings_by_model() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let options = ManagerOptions {
        lease: LeasePolicy::Off,
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::for_project(root.path(), options).unwrap();
    let a = m.create_session("fix the build", None).unwrap();
    m.add_message(Message::assistant("on it")).unwrap();
    m.record_outcome(ended("model-a", Some(StopCause::Interrupted), false))
        .unwrap();
    m.record_outcome(ended("model-a", Some(StopCause::Completed), true))
        .unwrap();
    let b = m.create_session("write docs", None).unwrap();
    m.record_outcome(ended("model-b", Some(StopCause::Completed), false))
        .unwrap();
    m.record_outcome(ended("model-b", None, false)).unwrap();
    m.flush().unwrap();
    drop(m);

    let shown: Value = serde_json::from_str(&run(
        home.path(),
        root.path(),
        &["sessions", "show", &a, "--json"],
    ))
    .unwrap();
    assert_eq!(shown["runs"], 2);
    assert_eq!(shown["episode"]["turns"], 4);
    assert_eq!(shown["episode"]["tool_calls"], 6);
    assert_eq!(
        shown["episode"]["stop_cause"], "completed",
        "the last run's"
    );
    assert_eq!(shown["episode"]["ended_on_failed_call"], true);
    let text = run(home.path(), root.path(), &["sessions", "show", &a]);
    assert!(
        text.contains("episode: 2 run(s), 4 turn(s), 6 tool call(s) (1 failed"),
        "{text}"
    );
    assert!(text.contains("ended on a failed call"), "{text}");
    let plain = run(home.path(), root.path(), &["sessions", "show", &b]);
    assert!(plain.contains("episode: 2 run(s)"), "{plain}");

    let stats: Value =
        serde_json::from_str(&run(home.path(), root.path(), &["stats", "--json"])).unwrap();
    let row = |model: &str| {
        stats["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == model)
            .unwrap_or_else(|| panic!("no row {model}: {stats}"))
            .clone()
    };
    let (ra, rb) = (row("model-a"), row("model-b"));
    assert_eq!(
        (
            ra["runs"].as_u64(),
            ra["interrupted"].as_u64(),
            ra["failed"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert_eq!(
        (rb["completed"].as_u64(), rb["unknown"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(stats["total"]["runs"], 4);
    assert_eq!(stats["sessions_with_runs"], 2);
    let table = run(home.path(), root.path(), &["stats"]);
    assert!(
        table.contains("model-a") && table.contains("interrupted"),
        "{table}"
    );
}
