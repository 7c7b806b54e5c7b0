//! Real OS processes against one transcript: concurrent writers, writers
//! killed with SIGKILL at random points, a dead owner's lock, and the CLI's
//! exit codes. Spawns the real `memoir` binary.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use memoir::message::Message;
use memoir::record::SessionMeta;
use memoir::transcript::Session;
use memoir::Error;

use crate::common;

use common::memoir;

fn create(dir: &Path, id: &str) -> Session {
    Session::create(dir, SessionMeta::new(id)).unwrap()
}

/// Tiny deterministic generator (xorshift), seeded per run and printed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn eight_processes_append_2000_records_each() {
    let dir = tempfile::tempdir().unwrap();
    let s = create(dir.path(), "shared");
    let children: Vec<_> = (0..8)
        .map(|w| {
            memoir()
                .args(["debug", "append-loop"])
                .arg(&s.path)
                .args([
                    "--count",
                    "2000",
                    "--durability",
                    "flush",
                    "--size",
                    "64",
                    "--tag",
                ])
                .arg(format!("w{w}"))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let t = Session::read(&s.path).unwrap();
    assert!(t.report.is_clean(), "{:?}", t.report.issues.first());
    assert_eq!(t.messages.len(), 16_000);
    assert_eq!(t.last_seq, 16_000);
    assert_eq!(
        t.message_seqs,
        (1..=16_000).collect::<Vec<u64>>(),
        "seq gap-free"
    );
    // Each writer's records are all there, in its own order.
    let mut next = [0usize; 8];
    for m in &t.messages {
        let text = m.text_content();
        let mut parts = text.splitn(3, ':');
        let w: usize = parts.next().unwrap()[1..].parse().unwrap();
        let i: usize = parts.next().unwrap().parse().unwrap();
        assert_eq!(i, next[w], "writer {w} out of order");
        next[w] += 1;
    }
    assert_eq!(next, [2000; 8]);
}

#[test]
fn sigkill_never_loses_an_acknowledged_record() {
    let seed = std::env::var("MEMOIR_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64 ^ std::process::id() as u64
        });
    println!("seed {seed} (set MEMOIR_TEST_SEED to reproduce)");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let s = create(dir.path(), "victim");
    let mut acked: Vec<(u64, u64)> = Vec::new();
    let mut torn_repairs = 0;
    let mut killed_writer_acks = 0;
    for round in 0..60 {
        // Large records make it likely that some kills land mid-write.
        let size = 1 + rng.below(2 * 1024 * 1024);
        let batch = 1 + rng.below(4);
        let mut child = memoir()
            .args(["debug", "append-loop"])
            .arg(&s.path)
            .args(["--count", "100000", "--durability", "fsync"])
            .args(["--size", &size.to_string(), "--batch", &batch.to_string()])
            .args(["--tag", &format!("r{round}")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_ack, first_ack_seen) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut it = l
                    .split_whitespace()
                    .skip(1)
                    .map(|x| x.parse::<u64>().unwrap());
                if let (Some(first), Some(last)) = (it.next(), it.next()) {
                    acks.push((first, last));
                    let _ = first_ack.send(());
                }
            }
            acks
        });
        // Kill while the writer is busy: after its first acknowledgement
        // (however slow a loaded machine is to start it), at a random point.
        first_ack_seen
            .recv_timeout(Duration::from_secs(120))
            .expect("the writer acknowledged nothing in 120 s");
        std::thread::sleep(Duration::from_micros(rng.below(50_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acks = reader.join().unwrap();
        assert!(!acks.is_empty());
        killed_writer_acks += acks.len();
        acked.extend(acks);
        // Every acknowledged record must load back, whatever the kill left.
        let t = Session::read(&s.path).unwrap();
        for &(first, last) in &acked {
            for seq in first..=last {
                assert!(
                    t.message_seqs.binary_search(&seq).is_ok(),
                    "round {round}: acknowledged seq {seq} lost (seed {seed})"
                );
            }
        }
        // The next writer repairs any torn tail; afterwards the file verifies.
        let a = s
            .append_messages(&[Message::user(format!("after round {round}"))])
            .unwrap();
        if let Some(torn) = &a.repaired {
            torn_repairs += 1;
            assert!(torn.saved_to.exists());
        }
        let t = Session::read(&s.path).unwrap();
        assert!(
            t.report.is_clean(),
            "round {round}: {:?} (seed {seed})",
            t.report.issues
        );
        acked.push((a.first_seq, a.last_seq));
    }
    println!(
        "{} acknowledged appends survived 60 kills ({killed_writer_acks} by the killed writers); \
         {torn_repairs} torn tails repaired",
        acked.len()
    );
    assert!(killed_writer_acks >= 60);
}

#[test]
fn a_dead_owners_lock_is_recovered_and_a_live_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = create(dir.path(), "owned");
    let mut child = memoir()
        .args(["debug", "hold"])
        .arg(&s.path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("held "), "{line}");
    match s.acquire() {
        Err(Error::Busy { pid, .. }) => assert_eq!(pid, child.id()),
        other => panic!("expected Busy, got {other:?}"),
    }
    let err = s.acquire().unwrap_err().to_string();
    assert!(
        err.contains(&child.id().to_string()) && err.contains("host"),
        "{err}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let lock = s
        .acquire()
        .expect("stale lock of a dead process is recovered");
    assert_eq!(
        lock.recovered_from.as_ref().map(|h| h.pid),
        Some(child.id())
    );
}

#[test]
fn cli_verify_show_and_errors() {
    let home = tempfile::tempdir().unwrap();
    // The README's first command: a demo session, then (no agent homes here)
    // the shipped example sessions imported, then a search across all of it.
    let out = memoir()
        .arg("demo")
        .env("MEMOIR_HOME", home.path())
        .env("HOME", home.path())
        .env_remove("MEMOIR_SESSION_DIR")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("GEMINI_CLI_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("toolu_01") && stdout.contains("chain verifies"),
        "{stdout}"
    );
    assert!(
        stdout.contains("importing the example sessions") && stdout.contains("7 new"),
        "{stdout}"
    );
    // The default query finds imported Codex and Claude Code messages.
    assert!(
        stdout.contains("cx-11111111-1111-4111-8111-111111111111 seq"),
        "{stdout}"
    );
    let dir = home.path().join("sessions");
    let listed = Session::list(&dir).unwrap();
    assert_eq!(listed.len(), 8, "the demo session and 7 imported ones");
    let demo: Vec<_> = listed
        .iter()
        .filter(|(m, _)| m.kind.as_deref() == Some("demo"))
        .collect();
    assert_eq!(demo.len(), 1);
    let (meta, path) = demo[0];

    let run = |args: &[&str]| {
        memoir()
            .args(args)
            .env("MEMOIR_HOME", home.path())
            .env_remove("MEMOIR_SESSION_DIR")
            .output()
            .unwrap()
    };
    let list = run(&["sessions", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let ids: Vec<&str> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 8);
    assert!(ids.contains(&meta.id.as_str()), "{ids:?}");
    let show = run(&["sessions", "show", &meta.id[..20], "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 10);
    let usage = run(&["sessions", "usage", &meta.id]);
    assert!(String::from_utf8_lossy(&usage.stdout).contains("input 2260"));
    assert_eq!(
        run(&["sessions", "verify", &meta.id]).status.code(),
        Some(0)
    );

    // Edit one record: verify fails with exit 1 and names the first bad seq.
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(
        path,
        text.replacen("Run the test first", "Run the test later", 1),
    )
    .unwrap();
    let bad = run(&["sessions", "verify", &meta.id]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stdout).contains("first bad seq: 3"),
        "{}",
        String::from_utf8_lossy(&bad.stdout)
    );

    // Errors: stderr, non-zero, never a panic.
    // Exit codes (README): 4 not found, 2 invalid input.
    for (args, code) in [
        (vec!["sessions", "show", "nope"], 4),
        (vec!["sessions", "show", "../../etc/passwd"], 2),
        (vec!["sessions", "verify", "a/b"], 2),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.starts_with("memoir: ") && !err.contains("panicked"),
            "{err}"
        );
    }
    let empty = memoir()
        .args(["sessions", "list"])
        .env("MEMOIR_SESSION_DIR", "")
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("MEMOIR_SESSION_DIR"));
}

#[test]
fn a_full_disk_fails_the_append_cleanly_and_loses_nothing() {
    // RLIMIT_FSIZE makes writes past 256 KiB fail (EFBIG) part-way, as a full
    // disk does; SIGXFSZ is ignored so the writer sees the error.
    let dir = tempfile::tempdir().unwrap();
    let s = create(dir.path(), "full");
    let script = format!(
        "ulimit -f 256; trap '' XFSZ; exec '{}' debug append-loop '{}' --count 1000 --size 3000 --durability fsync",
        env!("CARGO_BIN_EXE_memoir"),
        s.path.display()
    );
    let out = Command::new("bash").arg("-c").arg(script).output().unwrap();
    assert!(!out.status.success(), "the writer must hit the limit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("memoir: write") && !stderr.contains("panicked"),
        "{stderr}"
    );
    let acked = String::from_utf8_lossy(&out.stdout).lines().count() as u64;
    assert!(acked > 10, "some appends fit before the limit: {acked}");
    let t = Session::read(&s.path).unwrap();
    assert!(
        t.report.is_clean(),
        "the failed append left no partial record: {:?}",
        t.report.issues
    );
    assert_eq!(
        t.last_seq, acked,
        "every acknowledged record, and nothing else"
    );
    // With space again, appending continues the chain.
    s.append_messages(&[Message::user("after")]).unwrap();
    assert!(Session::read(&s.path).unwrap().report.is_clean());
}
