//! Session manager benchmark (issue 3).
//!
//! 1. 10,000 messages added one by one through `SessionManager::add_message`
//!    with the default batching (every 10 messages or 0.5 s), against the
//!    seed's design at the same batching: one JSON document per session,
//!    rewritten whole (temp file + rename) on every flush, plus its
//!    read-merge-write of a shared index. Wall time and bytes written (the
//!    process's `wchar` from `/proc/self/io`), without and with fsync.
//! 2. `list_sessions` over 10,000 sessions: from a fresh index, after the
//!    index directory was deleted (full rebuild), and fresh again.
//!
//! Run: `cargo run --release -p memoir-bench -- manager` (release profile). Sizes can
//! be changed with `MEMOIR_BENCH_MESSAGES` and `MEMOIR_BENCH_SESSIONS`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::store::Durability;
use serde_json::{json, Value};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bytes this process has passed to `write`-like calls so far.
fn wchar() -> u64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("wchar: ").map(|v| v.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// The i-th message of the synthetic conversation (~200 characters of text).
fn text(i: usize) -> String {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    format!(
        "{role} turn {i}: {}",
        "the quick brown fox jumps over the lazy dog; ".repeat(4)
    )
}

fn message(i: usize) -> Message {
    if i.is_multiple_of(2) {
        Message::user(text(i))
    } else {
        Message::assistant(text(i))
    }
}

// ----- the seed's design (seeds.md C.2-C.5), reimplemented for comparison --

/// One JSON document per session, rewritten whole on each flush, with a
/// shared `sessions_index.json` read, merged and rewritten each time.
struct SeedDesign {
    dir: PathBuf,
    id: String,
    messages: Vec<Value>,
    dirty: usize,
    last_flush: Option<Instant>,
    fsync: bool,
}

impl SeedDesign {
    const BATCH: usize = 10;
    const INTERVAL: Duration = Duration::from_millis(500);

    fn new(dir: &Path, fsync: bool) -> SeedDesign {
        fs::create_dir_all(dir).unwrap();
        let mut s = SeedDesign {
            dir: dir.to_path_buf(),
            id: "session_1700000000_abc12345".into(),
            messages: Vec::new(),
            dirty: 0,
            last_flush: None,
            fsync,
        };
        s.messages.push(
            json!({"role": "user", "content": "task", "timestamp": "1700000000", "tokens": 1}),
        );
        s.dirty = 1;
        s.flush();
        s
    }

    fn add_message(&mut self, i: usize) {
        let content = text(i);
        let tokens = content.chars().count() / 4;
        self.messages.push(json!({
            "role": if i.is_multiple_of(2) { "user" } else { "assistant" },
            "content": content,
            "timestamp": "1700000001",
            "tokens": tokens,
        }));
        self.dirty += 1;
        let due = self
            .last_flush
            .is_none_or(|t| t.elapsed() >= Self::INTERVAL);
        if self.dirty >= Self::BATCH || due {
            self.flush();
        }
    }

    fn atomic_write(&self, path: &Path, bytes: &[u8]) {
        let tmp = self
            .dir
            .join(format!(".tmp_{}", uuid::Uuid::new_v4().simple()));
        let mut f = fs::File::create(&tmp).unwrap();
        f.write_all(bytes).unwrap();
        if self.fsync {
            f.sync_all().unwrap();
        }
        fs::rename(&tmp, path).unwrap();
        if self.fsync {
            fs::File::open(&self.dir).unwrap().sync_all().unwrap();
        }
    }

    fn flush(&mut self) {
        if self.dirty == 0 {
            return;
        }
        let doc = json!({
            "schema_version": 1,
            "session_id": self.id,
            "created_at": "1700000000",
            "messages": self.messages,
        });
        let path = self.dir.join(format!("{}.json", self.id));
        self.atomic_write(&path, &serde_json::to_vec(&doc).unwrap());
        // touch_index: load, merge this entry, save.
        let index_path = self.dir.join("sessions_index.json");
        let mut index: BTreeMap<String, Value> = fs::read(&index_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let tokens: u64 = self
            .messages
            .iter()
            .map(|m| m["tokens"].as_u64().unwrap_or(0))
            .sum();
        index.insert(
            self.id.clone(),
            json!({"session_id": self.id, "created_at": "1700000000", "last_activity": "1700000002",
                   "total_messages": self.messages.len(), "total_tokens": tokens,
                   "title": "task", "status": "active"}),
        );
        self.atomic_write(&index_path, &serde_json::to_vec(&index).unwrap());
        self.dirty = 0;
        self.last_flush = Some(Instant::now());
    }
}

struct Run {
    wall: Duration,
    bytes: u64,
}

fn run_seed(n: usize, fsync: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let w0 = wchar();
    let t0 = Instant::now();
    let mut s = SeedDesign::new(dir.path(), fsync);
    for i in 0..n {
        s.add_message(i);
    }
    s.flush();
    Run {
        wall: t0.elapsed(),
        bytes: wchar() - w0,
    }
}

fn run_manager(n: usize, durability: Durability) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let w0 = wchar();
    let t0 = Instant::now();
    let mut m = SessionManager::for_project(
        dir.path(),
        ManagerOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap();
    let id = m.create_session("task", None).unwrap();
    for i in 0..n {
        m.add_message(message(i)).unwrap();
    }
    m.flush().unwrap();
    let run = Run {
        wall: t0.elapsed(),
        bytes: wchar() - w0,
    };
    assert_eq!(m.read_session_messages(&id).unwrap().len(), n + 1);
    run
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Run this benchmark (`memoir-bench manager ...`).
pub fn main() {
    let n = env_usize("MEMOIR_BENCH_MESSAGES", 10_000);
    let sessions = env_usize("MEMOIR_BENCH_SESSIONS", 10_000);

    println!("## add_message x {n}, default batching (10 messages / 0.5 s)\n");
    println!("| durability | design | wall | bytes written | seed / manager (time) | seed / manager (bytes) |");
    println!("|---|---|---|---|---|---|");
    for (label, durability, fsync) in [
        ("no fsync", Durability::Flush, false),
        ("fsync", Durability::Fsync, true),
    ] {
        let seed = run_seed(n, fsync);
        let mgr = run_manager(n, durability);
        println!(
            "| {label} | seed: whole-file rewrite | {} | {} | | |",
            ms(seed.wall),
            mib(seed.bytes)
        );
        println!(
            "| {label} | manager: append records | {} | {} | {:.1}x | {:.1}x |",
            ms(mgr.wall),
            mib(mgr.bytes),
            seed.wall.as_secs_f64() / mgr.wall.as_secs_f64(),
            seed.bytes as f64 / mgr.bytes.max(1) as f64
        );
    }

    println!("\n## list_sessions over {sessions} sessions\n");
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    {
        let mut m = SessionManager::for_project(
            dir.path(),
            ManagerOptions {
                durability: Durability::None,
                ..Default::default()
            },
        )
        .unwrap();
        for i in 0..sessions {
            m.create_session(&text(i), None).unwrap();
            m.add_messages([message(i + 1), message(i + 2)]).unwrap();
        }
        m.flush().unwrap();
    }
    eprintln!("setup: {sessions} sessions in {}", ms(t0.elapsed()));
    let m = SessionManager::for_project(dir.path(), ManagerOptions::default()).unwrap();
    let time_list = |expect_rebuilt: bool| {
        let t = Instant::now();
        let r = m.list_sessions_report().unwrap();
        let wall = t.elapsed();
        assert_eq!(r.entries.len(), sessions);
        assert_eq!(r.rebuilt > 0, expect_rebuilt, "rebuilt {}", r.rebuilt);
        wall
    };
    time_list(false); // warm the page cache
    let fresh = median((0..5).map(|_| time_list(false)).collect());
    let index_dir = dir.path().join(".memoir/sessions/index");
    let mut rebuilds = Vec::new();
    for _ in 0..3 {
        fs::remove_dir_all(&index_dir).unwrap();
        rebuilds.push(time_list(true));
    }
    let rebuild = median(rebuilds);
    let fresh_again = median((0..5).map(|_| time_list(false)).collect());
    println!("| index state | wall (median) | per session |");
    println!("|---|---|---|");
    for (label, d) in [
        ("fresh", fresh),
        ("deleted, rebuilt from transcripts", rebuild),
        ("fresh again after the rebuild", fresh_again),
    ] {
        println!(
            "| {label} | {} | {:.1} µs |",
            ms(d),
            d.as_secs_f64() * 1e6 / sessions as f64
        );
    }
    println!(
        "\nrebuild / fresh: {:.1}x",
        rebuild.as_secs_f64() / fresh.as_secs_f64()
    );
}
