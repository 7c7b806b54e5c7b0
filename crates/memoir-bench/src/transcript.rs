//! Transcript benchmarks, peers measured in the same run:
//!
//! 1. append N realistic ~1 KB agent messages, durable per call and in batches
//!    of 100, against SQLite (WAL, `synchronous=FULL`) inserting the same rows;
//! 2. memoir against a whole-file-rewrite store (the seed SessionManager's and
//!    goose's old JSONL design) at 1k and 10k messages, flushing every 10;
//! 3. load a ~100 MB transcript: MB/s and peak memory, against SQLite reading
//!    the same rows back;
//! 4. list 10,000 sessions of 10 and of 1,000 messages;
//! 5. per-call durable appends from 4 threads to one session (group commit)
//!    against SQLite with 4 connections.
//!
//! Run: `cargo run --release -p memoir-bench -- transcript` (env: `BENCH_APPENDS`,
//! default 100000; `BENCH_ONLY=append,threads,rewrite,load,list`).

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::message::{Block, Message, Role, Usage};
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use serde_json::json;

/// A realistic agent message of about 1 KB, cycling through the shapes of a
/// coding-agent turn: user text, assistant tool call, tool result, answer.
fn message(i: usize) -> Message {
    let filler = |n: usize| -> String {
        let words = [
            "parser", "returns", "the", "empty", "AST", "when", "input", "is", "blank", "so",
            "tests", "pass", "and", "we", "check", "edge", "cases",
        ];
        let mut s = String::with_capacity(n + 16);
        let mut k = i;
        while s.len() < n {
            s.push_str(words[k % words.len()]);
            s.push(' ');
            k = k.wrapping_mul(31).wrapping_add(7);
        }
        s
    };
    match i % 4 {
        0 => Message::user(format!("Step {i}: {}", filler(900))),
        1 => Message::new(
            Role::Assistant,
            vec![
                Block::Thinking { text: filler(300), signature: Some("EqQBCgIYAhIM".into()) },
                Block::ToolUse { id: format!("toolu_{i:08}"), name: "shell".into(), input: json!({"command": format!("cargo test -p parser -- case_{i}"), "timeout": 120, "note": filler(400)}) },
            ],
        )
        .with_usage(Usage { input_tokens: 1800 + i as u64, output_tokens: 90, cache_read_input_tokens: 1500, cache_creation_input_tokens: 0, ..Default::default() }),
        2 => Message::tool_result(format!("toolu_{:08}", i - 1), format!("running 27 tests\n{}\ntest result: ok", filler(850)), false),
        _ => Message::assistant(filler(950)),
    }
}

fn meta(id: &str) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.provider = "anthropic".into();
    m.model = "claude-x".into();
    m
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn sqlite(path: &Path, full_sync: bool) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("open sqlite");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", if full_sync { "FULL" } else { "OFF" })
        .expect("sync");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS records(session TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY(session, seq))")
        .expect("schema");
    conn
}

/// memoir vs SQLite, per-call durable and in batches of 100.
fn bench_append(n: usize) {
    println!("\n## append {n} messages (~1 KB each), fsync durability");
    println!("| store | batch | seconds | messages/s | ratio memoir/sqlite (throughput) |");
    println!("|---|---|---|---|---|");
    let msgs: Vec<Message> = (0..n).map(message).collect();
    let bodies: Vec<String> = msgs
        .iter()
        .map(|m| serde_json::to_string(m).expect("json"))
        .collect();
    for batch in [1usize, 100] {
        let tmp = tempfile::tempdir().expect("tmp");
        let s = Session::create(tmp.path(), meta("bench")).expect("create");
        let t0 = Instant::now();
        for chunk in msgs.chunks(batch) {
            s.append_messages(chunk).expect("append");
        }
        let memoir_t = t0.elapsed();

        let db = sqlite(&tmp.path().join("peer.db"), true);
        let t0 = Instant::now();
        let mut seq = 0i64;
        for chunk in bodies.chunks(batch) {
            let tx = db.unchecked_transaction().expect("tx");
            {
                let mut stmt = tx.prepare_cached("INSERT INTO records(session, seq, kind, body) VALUES (?1, ?2, 'message', ?3)").expect("prep");
                for body in chunk {
                    seq += 1;
                    stmt.execute(rusqlite::params!["bench", seq, body])
                        .expect("insert");
                }
            }
            tx.commit().expect("commit");
        }
        let sqlite_t = t0.elapsed();
        let (m_rate, s_rate) = (n as f64 / secs(memoir_t), n as f64 / secs(sqlite_t));
        println!(
            "| memoir | {batch} | {:.2} | {:.0} | {:.2}x |",
            secs(memoir_t),
            m_rate,
            m_rate / s_rate
        );
        println!(
            "| sqlite (WAL, synchronous=FULL) | {batch} | {:.2} | {:.0} | |",
            secs(sqlite_t),
            s_rate
        );
    }
}

/// Per-call durable appends from `threads` threads to one session (memoir:
/// one store handle, group commit) against SQLite with one connection per
/// thread (WAL, `synchronous=FULL`, busy timeout) inserting the same rows.
fn bench_append_threads(n: usize, threads: usize) {
    println!("\n## append {n} messages from {threads} threads to one session, 1 per call, fsync durability");
    println!("| store | threads | seconds | messages/s | ratio memoir/sqlite (throughput) |");
    println!("|---|---|---|---|---|");
    let msgs: Vec<Message> = (0..n).map(message).collect();
    let bodies: Vec<String> = msgs
        .iter()
        .map(|m| serde_json::to_string(m).expect("json"))
        .collect();
    let tmp = tempfile::tempdir().expect("tmp");
    let store = Arc::new(FileStore::new(tmp.path(), Durability::Fsync));
    store.create(&meta("bench")).expect("create");
    let per = n / threads;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for part in msgs.chunks(per) {
            let store = store.clone();
            s.spawn(move || {
                for m in part {
                    store
                        .append("bench", &[memoir::Record::Message(m.clone())], None)
                        .expect("append");
                }
            });
        }
    });
    let memoir_t = t0.elapsed();
    let path = tmp.path().join("peer.db");
    drop(sqlite(&path, true));
    let seq = std::sync::atomic::AtomicI64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for part in bodies.chunks(per) {
            let (path, seq) = (&path, &seq);
            s.spawn(move || {
                let db = sqlite(path, true);
                db.busy_timeout(Duration::from_secs(60)).expect("busy");
                let mut stmt = db.prepare_cached("INSERT INTO records(session, seq, kind, body) VALUES (?1, ?2, 'message', ?3)").expect("prep");
                for body in part {
                    let k = seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    stmt.execute(rusqlite::params!["bench", k, body]).expect("insert");
                }
            });
        }
    });
    let sqlite_t = t0.elapsed();
    let (m_rate, s_rate) = (n as f64 / secs(memoir_t), n as f64 / secs(sqlite_t));
    println!(
        "| memoir (group commit) | {threads} | {:.2} | {m_rate:.0} | {:.2}x |",
        secs(memoir_t),
        m_rate / s_rate
    );
    println!(
        "| sqlite (WAL, synchronous=FULL) | {threads} | {:.2} | {s_rate:.0} | |",
        secs(sqlite_t)
    );
}

/// The seed SessionManager's design: one JSON document per session,
/// rewritten whole (temp file, fsync, rename) on every flush.
struct RewriteStore {
    path: std::path::PathBuf,
    messages: Vec<Message>,
    bytes_written: u64,
}

impl RewriteStore {
    fn flush(&mut self) {
        let doc = json!({"schema_version": 1, "session_id": "bench", "created_at": "2026-01-01T00:00:00Z", "messages": self.messages});
        let bytes = serde_json::to_vec(&doc).expect("json");
        let tmp = self.path.with_extension("tmp");
        let mut f = fs::File::create(&tmp).expect("create");
        f.write_all(&bytes).expect("write");
        f.sync_data().expect("fsync");
        fs::rename(&tmp, &self.path).expect("rename");
        self.bytes_written += bytes.len() as u64;
    }
}

fn bench_rewrite() {
    println!("\n## memoir vs whole-file-rewrite store, one message at a time, flush every 10 (fsync per flush)");
    println!("| messages | memoir s | rewrite s | time ratio rewrite/memoir | memoir bytes | rewrite bytes | bytes ratio |");
    println!("|---|---|---|---|---|---|---|");
    for n in [1_000usize, 10_000] {
        let msgs: Vec<Message> = (0..n).map(message).collect();
        let tmp = tempfile::tempdir().expect("tmp");
        let s = Session::create(tmp.path(), meta("bench")).expect("create");
        let mut pending = Vec::new();
        let t0 = Instant::now();
        for m in &msgs {
            pending.push(m.clone());
            if pending.len() == 10 {
                s.append_messages(&pending).expect("append");
                pending.clear();
            }
        }
        let memoir_t = t0.elapsed();
        let memoir_bytes = fs::metadata(&s.path).expect("stat").len();

        let tmp2 = tempfile::tempdir().expect("tmp");
        let mut rw = RewriteStore {
            path: tmp2.path().join("bench.json"),
            messages: Vec::new(),
            bytes_written: 0,
        };
        let t0 = Instant::now();
        for m in &msgs {
            rw.messages.push(m.clone());
            if rw.messages.len().is_multiple_of(10) {
                rw.flush();
            }
        }
        let rewrite_t = t0.elapsed();
        println!(
            "| {n} | {:.2} | {:.2} | {:.1}x | {} | {} | {:.0}x |",
            secs(memoir_t),
            secs(rewrite_t),
            secs(rewrite_t) / secs(memoir_t),
            memoir_bytes,
            rw.bytes_written,
            rw.bytes_written as f64 / memoir_bytes as f64
        );
    }
}

fn vm_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Child mode: load one transcript (memoir) or one SQLite table, print time and peak RSS growth.
fn child_load(kind: &str, path: &Path) {
    let base = vm_kib("VmRSS:");
    let t0 = Instant::now();
    let count = if kind == "memoir" {
        let t = Session::read(path).expect("read");
        assert!(t.report.is_clean());
        t.messages.len()
    } else {
        let db = sqlite(path, false);
        let mut stmt = db
            .prepare("SELECT body FROM records WHERE session = 'bench' ORDER BY seq")
            .expect("prep");
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .expect("query");
        let mut out: Vec<Message> = Vec::new();
        for body in rows {
            out.push(serde_json::from_str(&body.expect("row")).expect("parse"));
        }
        out.len()
    };
    let elapsed = t0.elapsed();
    let peak = vm_kib("VmHWM:");
    println!(
        "{count} {} {}",
        elapsed.as_secs_f64(),
        peak.saturating_sub(base)
    );
}

fn run_child(kind: &str, path: &Path) -> (usize, f64, u64) {
    let exe = std::env::current_exe().expect("exe");
    let out = std::process::Command::new(exe)
        .args(["transcript", "--child-load", kind])
        .arg(path)
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default().to_string();
    let mut it = line.split_whitespace();
    let count = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let t = it.next().and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
    let kib = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (count, t, kib)
}

fn bench_load() {
    // BENCH_KEEP_DIR keeps the generated files (e.g. to profile `--child-load`).
    let tmp = match std::env::var("BENCH_KEEP_DIR") {
        Ok(d) => tempfile::Builder::new()
            .prefix("load")
            .disable_cleanup(true)
            .tempdir_in(d)
            .expect("tmp"),
        Err(_) => tempfile::tempdir().expect("tmp"),
    };
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(tmp.path(), Durability::None));
    let s = Session::create_in(store, meta("bench")).expect("create");
    let db = sqlite(&tmp.path().join("peer.db"), false);
    let mut i = 0;
    while fs::metadata(&s.path).map(|m| m.len()).unwrap_or(0) < 100 * 1024 * 1024 {
        let msgs: Vec<Message> = (i..i + 1000).map(message).collect();
        s.append_messages(&msgs).expect("append");
        let tx = db.unchecked_transaction().expect("tx");
        for (k, m) in msgs.iter().enumerate() {
            tx.execute(
                "INSERT INTO records VALUES ('bench', ?1, 'message', ?2)",
                rusqlite::params![(i + k + 1) as i64, serde_json::to_string(m).expect("json")],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
        i += 1000;
    }
    drop(db);
    let size = fs::metadata(&s.path).expect("stat").len();
    let db_size = dir_bytes(tmp.path()) - size;
    let mb = size as f64 / 1e6;
    println!("\n## load a {:.0} MB transcript ({i} messages; SQLite file {:.0} MB), one thread, page cache warm", mb, db_size as f64 / 1e6);
    println!(
        "| reader | seconds | MB/s (of the JSONL size) | peak RSS growth | peak / file size |"
    );
    println!("|---|---|---|---|---|");
    let mut results = Vec::new();
    for kind in ["memoir", "sqlite"] {
        let path = if kind == "memoir" {
            s.path.clone()
        } else {
            tmp.path().join("peer.db")
        };
        let _warm = run_child(kind, &path);
        let (count, t, kib) = run_child(kind, &path);
        assert_eq!(count, i, "{kind} loaded {count} of {i}");
        println!(
            "| {kind} | {t:.3} | {:.0} | {:.0} MB | {:.2}x |",
            mb / t,
            kib as f64 / 1024.0,
            kib as f64 * 1024.0 / size as f64
        );
        results.push((t, kib));
    }
    if let [(memoir_t, memoir_kib), (sqlite_t, sqlite_kib)] = results[..] {
        println!(
            "| memoir ÷ SQLite | {:.2}x the time | {:.2}x the throughput | {:.2}x the peak | |",
            memoir_t / sqlite_t,
            sqlite_t / memoir_t,
            memoir_kib as f64 / sqlite_kib.max(1) as f64
        );
    }
}

fn bench_list() {
    println!("\n## list 10,000 sessions (page cache warm; median of 5)");
    println!("| messages per session | transcript bytes total | list ms | ratio to 10-message |");
    println!("|---|---|---|---|");
    let mut base = 0.0;
    for per in [10usize, 1000] {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = FileStore::new(tmp.path(), Durability::None);
        let small: Vec<Message> = (0..per)
            .map(|k| Message::user(format!("short message {k} with a few words of text")))
            .collect();
        for n in 0..10_000 {
            let id = format!("20260101T000000-{n:06}");
            store.create(&meta(&id)).expect("create");
            store
                .append(
                    &id,
                    &small
                        .iter()
                        .cloned()
                        .map(memoir::Record::Message)
                        .collect::<Vec<_>>(),
                    None,
                )
                .expect("append");
        }
        let mut times = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            let listed = Session::list(tmp.path()).expect("list");
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(listed.len(), 10_000);
        }
        times.sort_by(f64::total_cmp);
        let ms = times[2];
        if per == 10 {
            base = ms;
        }
        println!(
            "| {per} | {} | {ms:.1} | {:.2} |",
            dir_bytes(tmp.path()),
            ms / base
        );
    }
}

/// Run this benchmark (`memoir-bench transcript ...`).
pub fn main() {
    let args: Vec<String> = crate::args().collect();
    if args.len() == 4 && args[1] == "--child-load" {
        child_load(&args[2], Path::new(&args[3]));
        return;
    }
    let only =
        std::env::var("BENCH_ONLY").unwrap_or_else(|_| "append,threads,rewrite,load,list".into());
    let n: usize = std::env::var("BENCH_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!(
        "# memoir transcript benchmark ({} cores)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    for part in only.split(',') {
        match part {
            "append" => bench_append(n),
            "threads" => bench_append_threads(n, 4),
            "rewrite" => bench_rewrite(),
            "load" => bench_load(),
            "list" => bench_list(),
            _ => {}
        }
    }
}
