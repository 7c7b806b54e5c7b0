//! Load test of the shared store, bounded and loopback-only.
//!
//! `server` mode: an in-process `memoir serve` on 127.0.0.1:0 over the file
//! store or PostgreSQL; `--clients` threads (one blocking HTTP client each)
//! append one record per request round-robin over `--sessions` sessions for
//! `--seconds`; then every session is read back from the store and checked:
//! `seq` gap-free, and every acknowledged record present exactly once at the
//! `seq` it was acknowledged with.
//!
//! `direct` mode: the same appends straight through `LogStore::append` (no
//! HTTP), to compare the PostgreSQL backend with the file store at the same
//! durability.
//!
//! ```text
//! source .ci/postgres.sh
//! cargo run --release -p memoir-bench -- load --mode server --backend all --seconds 60
//! cargo run --release -p memoir-bench -- load --mode direct --backend all --seconds 20
//! ```
//!
//! Backends: `file`, `postgres` (`$MEMOIR_TEST_POSTGRES_URL`), `pgvector`
//! (`$MEMOIR_TEST_PGVECTOR_URL`), or `all` (those whose variable is set).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::client::{wire, Client};
use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::postgres::{PgOptions, PgStore};
use memoir::store::{Durability, LogStore};
use memoir_server::{ServerConfig, TokenGrant};

const TOKEN: &str = "load-test-token-0123456789abcdef";

struct Opts {
    mode: String,
    backend: String,
    seconds: u64,
    clients: usize,
    sessions: usize,
    durability: Durability,
}

fn parse_args() -> Opts {
    let mut o = Opts {
        mode: "server".into(),
        backend: "all".into(),
        seconds: 60,
        clients: 64,
        sessions: 256,
        durability: Durability::Fsync,
    };
    let args: Vec<String> = crate::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--mode" => o.mode = val,
            "--backend" => o.backend = val,
            "--seconds" => o.seconds = val.parse().unwrap_or(60).clamp(1, 600),
            "--clients" => o.clients = val.parse().unwrap_or(64).clamp(1, 256),
            "--sessions" => o.sessions = val.parse().unwrap_or(256).clamp(1, 100_000),
            "--durability" => o.durability = val.parse().unwrap_or(Durability::Fsync),
            "--bench" => {
                i += 1;
                continue;
            }
            "--help" | "-h" => {
                println!(
                    "load [--mode server|direct] [--backend file|postgres|pgvector|all] \
                     [--seconds 60] [--clients 64] [--sessions 256] [--durability fsync|flush|none]"
                );
                std::process::exit(0);
            }
            _ => {}
        }
        i += 2;
    }
    o
}

/// A backend under test, and what to clean up after.
struct Backend {
    name: String,
    store: Arc<dyn LogStore>,
    pg: Option<(Arc<PgStore>, String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some((_, url, schema)) = &self.pg {
            if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

fn backends(o: &Opts) -> Vec<Backend> {
    let mut out = Vec::new();
    let want = |n: &str| o.backend == "all" || o.backend == n;
    if want("file") {
        let dir = tempfile::tempdir().expect("temp dir");
        out.push(Backend {
            name: "file".into(),
            store: Arc::new(FileStore::new(dir.path(), o.durability)),
            pg: None,
            _dir: Some(dir),
        });
    }
    for (name, var) in [
        ("postgres", "MEMOIR_TEST_POSTGRES_URL"),
        ("pgvector", "MEMOIR_TEST_PGVECTOR_URL"),
    ] {
        if !want(name) {
            continue;
        }
        let Some(url) = std::env::var(var).ok().filter(|u| !u.is_empty()) else {
            eprintln!("skipping {name}: ${var} is not set (source .ci/postgres.sh)");
            continue;
        };
        let schema = format!("memoir_bench_{}", uuid::Uuid::new_v4().simple());
        let pg = Arc::new(
            PgStore::connect(
                &url,
                PgOptions {
                    schema: schema.clone(),
                    durability: o.durability,
                    pool_size: 32,
                    ..Default::default()
                },
            )
            .expect("connect"),
        );
        out.push(Backend {
            name: name.into(),
            store: pg.clone(),
            pg: Some((pg, url, schema)),
            _dir: None,
        });
    }
    out
}

fn pct(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i] as f64 / 1000.0
}

type Acked = Vec<(usize, u64, String)>;

/// One append: session index and text → the acknowledged seq.
type AppendFn = Arc<dyn Fn(usize, &str) -> Result<u64, String> + Send + Sync>;

/// What a run produced.
struct Run {
    acked: Acked,
    latencies_us: Vec<u32>,
    errors: usize,
    took: Duration,
}

/// Run `clients` threads calling `append(session, text)` until the deadline.
fn drive(o: &Opts, append: AppendFn) -> Run {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..o.clients)
        .map(|c| {
            let append = append.clone();
            let stop = stop.clone();
            let (clients, sessions) = (o.clients, o.sessions);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut lat = Vec::new();
                let mut errors = 0;
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let s = (c + n * clients) % sessions;
                    let text = format!("c{c}-{n}");
                    n += 1;
                    let t0 = Instant::now();
                    match append(s, &text) {
                        Ok(seq) => {
                            lat.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                            acked.push((s, seq, text));
                        }
                        Err(e) => {
                            errors += 1;
                            if errors < 3 {
                                eprintln!("append failed: {e}");
                            }
                        }
                    }
                }
                (acked, lat, errors)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(o.seconds));
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut lat = Vec::new();
    let mut errors = 0;
    for h in handles {
        let (a, l, e) = h.join().expect("client thread");
        acked.extend(a);
        lat.extend(l);
        errors += e;
    }
    Run {
        acked,
        latencies_us: lat,
        errors,
        took: started.elapsed(),
    }
}

/// Every acknowledged record present once at its seq; seqs gap-free.
fn verify(store: &dyn LogStore, sessions: usize, acked: &Acked) -> Result<usize, String> {
    let mut by_session: HashMap<usize, Vec<(u64, &str)>> = HashMap::new();
    for (s, seq, text) in acked {
        by_session.entry(*s).or_default().push((*seq, text));
    }
    let mut records = 0;
    for s in 0..sessions {
        let id = format!("load-{s:04}");
        let raw = store.read(&id).map_err(|e| format!("{id}: {e}"))?;
        if !raw.report.is_clean() {
            return Err(format!("{id}: {:?}", raw.report.issues.first()));
        }
        let mut seen: HashMap<String, u64> = HashMap::new();
        for (i, r) in raw.records.iter().enumerate() {
            if r.seq != i as u64 + 1 {
                return Err(format!("{id}: gap or reorder at seq {}", r.seq));
            }
            if let Record::Message(m) = &r.record {
                if seen.insert(m.text_content(), r.seq).is_some() {
                    return Err(format!("{id}: duplicate {}", m.text_content()));
                }
            }
        }
        records += raw.records.len();
        for (seq, text) in by_session.get(&s).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.get(*text) != Some(seq) {
                return Err(format!("{id}: acknowledged {text} at {seq} is not there"));
            }
        }
    }
    Ok(records)
}

fn report(name: &str, mode: &str, o: &Opts, run: Run, verified: Result<usize, String>) {
    let Run {
        acked,
        latencies_us: mut lat,
        errors,
        took,
    } = run;
    lat.sort_unstable();
    let rate = acked.len() as f64 / took.as_secs_f64();
    let check = match &verified {
        Ok(n) if *n == acked.len() => {
            format!("ok: {n} records, all acknowledged, gap-free, no duplicates")
        }
        Ok(n) => format!(
            "ok: {n} records ({} acknowledged; the rest were in flight at stop or failed)",
            acked.len()
        ),
        Err(e) => format!("FAILED: {e}"),
    };
    println!(
        "| {mode} | {name} | {:?} | {} | {} | {:.0} | {:.2} | {:.2} | {errors} | {check} |",
        o.durability,
        o.clients,
        o.sessions,
        rate,
        pct(&lat, 0.50),
        pct(&lat, 0.99),
    );
    if verified.is_err() {
        std::process::exit(1);
    }
}

/// Run this benchmark (`memoir-bench load ...`).
pub fn main() {
    let o = parse_args();
    println!(
        "| mode | backend | durability | clients | sessions | appends/s | p50 ms | p99 ms | errors | verification |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for b in backends(&o) {
        // Through the server, project bench's sessions live in its id
        // namespace (`bench~load-0000`): create and verify them through the
        // same view the server uses.
        let view: Arc<dyn LogStore> = if o.mode == "direct" {
            b.store.clone()
        } else {
            Arc::new(memoir_server::namespace::ProjectStore::new(
                b.store.clone(),
                "bench",
            ))
        };
        for s in 0..o.sessions {
            let mut meta = SessionMeta::new(format!("load-{s:04}"));
            meta.extra.insert("project".into(), "bench".into());
            view.create(&meta).expect("create");
        }
        match o.mode.as_str() {
            "direct" => {
                let store = b.store.clone();
                let append = Arc::new(move |s: usize, text: &str| {
                    store
                        .append(
                            &format!("load-{s:04}"),
                            &[Record::Message(Message::user(text))],
                            None,
                        )
                        .map(|a| a.first_seq)
                        .map_err(|e| e.to_string())
                });
                let run = drive(&o, append);
                let v = verify(b.store.as_ref(), o.sessions, &run.acked);
                report(&b.name, "direct", &o, run, v);
            }
            _ => {
                let cfg = ServerConfig::new(
                    b.store.clone(),
                    vec![TokenGrant {
                        token: TOKEN.into(),
                        project: "bench".into(),
                        expires_at: None,
                        ..TokenGrant::default()
                    }],
                );
                let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
                let (addr_tx, addr_rx) = std::sync::mpsc::channel();
                let server = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_multi_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    rt.block_on(async move {
                        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                            .await
                            .expect("bind");
                        addr_tx.send(l.local_addr().expect("addr")).expect("send");
                        memoir_server::serve(l, cfg, async {
                            let _ = stop_rx.await;
                        })
                        .await
                        .expect("serve");
                    });
                });
                let base = format!("http://{}", addr_rx.recv().expect("address"));
                let clients: Vec<Client> = (0..o.clients)
                    .map(|_| Client::new(&base, Some(TOKEN.into())).expect("client"))
                    .collect();
                let clients = Arc::new(clients);
                let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
                thread_local! {
                    static SLOT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
                }
                let append = Arc::new(move |s: usize, text: &str| {
                    let slot = SLOT.with(|c| {
                        c.get().unwrap_or_else(|| {
                            let v = next.fetch_add(1, Ordering::Relaxed) % clients.len();
                            c.set(Some(v));
                            v
                        })
                    });
                    clients[slot]
                        .append(
                            &format!("load-{s:04}"),
                            &[Record::Message(Message::user(text))],
                            None,
                        )
                        .map(|a: wire::AppendResponse| a.first_seq)
                        .map_err(|e| e.to_string())
                });
                let run = drive(&o, append);
                let _ = stop_tx.send(());
                let _ = server.join();
                let v = verify(view.as_ref(), o.sessions, &run.acked);
                report(&b.name, "server", &o, run, v);
            }
        }
    }
}
