//! Benchmarks of the semantic session view; results are recorded in
//! `docs/BENCHMARKS.md`, section "Semantic view".
//!
//! ```text
//! cargo run --release -p memoir-bench -- view [--section ann,graft,rebuild]
//!     [--sizes 1000,10000,100000] [--queries 1000] [--efc 128] [--peers]
//!     [--messages 10000] [--minilm] [--out DIR]
//! ```
//!
//! - `ann`: exact scan vs HNSW on the same 384-d unit vectors at each size:
//!   build time, recall@10 against the exact answer, per-query p50/p99 and
//!   single-thread QPS for a sweep of `ef`, the graph walked on int8 codes
//!   (the default) and on the f32 rows. The vectors, queries and exact
//!   answers are written to `DIR` (default `target/bench-view`); `--peers`
//!   then runs `peers/ann.py` (hnswlib, faiss) on the same files right after
//!   memoir's sweep at each size, every engine with one call per query, and
//!   prints a summary: the smallest `ef` reaching recall 0.95 and 0.99 for
//!   memoir and hnswlib and their QPS ratio, plus build time and memory.
//! - `graft`: graft latency (embedding excluded) on a 5,000-chunk session:
//!   vector, hybrid, and a 1,000-token budgeted block.
//! - `rebuild`: rebuild of a synthetic agent session of `--messages`
//!   messages through the embedding cache, cold (empty cache) then warm; the
//!   hash embedder always, MiniLM too with `--minilm`.
//!
//! Data: a deterministic mixture of 1,000 random unit centres plus Gaussian
//! noise (norm ≈ 0.75), normalised: same-cluster cosines ≈ 0.6, others ≈ 0,
//! roughly the similarity profile of sentence embeddings.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::embed::{CacheConfig, CachedEmbedder, EmbeddingProvider, HashEmbedder};
use memoir::message::{Block, Message, Role};
use memoir::view::index::{IndexConfig, VectorIndex};
use memoir::view::{
    ChunkMeta, RebuildOptions, RetrievalMode, SearchRequest, SessionView, StateSet, ViewConfig,
};

const DIMS: usize = 384;
const K: usize = 10;

struct Args {
    sections: Vec<String>,
    sizes: Vec<usize>,
    queries: usize,
    efc: usize,
    peers: bool,
    messages: usize,
    minilm: bool,
    out: PathBuf,
}

fn parse_args() -> Args {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut a = Args {
        sections: vec!["ann".into(), "graft".into(), "rebuild".into()],
        sizes: vec![1_000, 10_000, 100_000],
        queries: 1_000,
        efc: 128,
        peers: false,
        messages: 10_000,
        minilm: false,
        out: root.join("target/bench-view"),
    };
    let mut it = crate::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_default();
        match arg.as_str() {
            "--section" => a.sections = val().split(',').map(str::to_string).collect(),
            "--sizes" => a.sizes = val().split(',').filter_map(|s| s.parse().ok()).collect(),
            "--queries" => a.queries = val().parse().unwrap_or(a.queries),
            "--efc" => a.efc = val().parse().unwrap_or(a.efc),
            "--messages" => a.messages = val().parse().unwrap_or(a.messages),
            "--out" => a.out = PathBuf::from(val()),
            "--peers" => a.peers = true,
            "--minilm" => a.minilm = true,
            _ => {} // cargo passes --bench
        }
    }
    a
}

// ---- deterministic data -------------------------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

struct Mixture {
    centres: Vec<Vec<f32>>,
    rng: Rng,
}

impl Mixture {
    fn new(seed: u64) -> Self {
        let mut rng = Rng(seed);
        let centres = (0..1000)
            .map(|_| {
                let mut c: Vec<f32> = (0..DIMS).map(|_| rng.normal()).collect();
                normalize(&mut c);
                c
            })
            .collect();
        Mixture { centres, rng }
    }
    fn sample(&mut self) -> Vec<f32> {
        let c = (self.rng.next() % self.centres.len() as u64) as usize;
        let sigma = 0.75 / (DIMS as f32).sqrt();
        let mut v: Vec<f32> = self.centres[c]
            .iter()
            .map(|x| x + sigma * self.rng.normal())
            .collect();
        normalize(&mut v);
        v
    }
}

fn write_f32(path: &Path, rows: &[Vec<f32>]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create bench file"));
    for r in rows {
        for x in r {
            f.write_all(&x.to_le_bytes()).expect("write bench file");
        }
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).ceil() as usize]
}

struct Timing {
    p50_ms: f64,
    p99_ms: f64,
    qps: f64,
}

fn time_queries<T>(queries: &[Vec<f32>], mut f: impl FnMut(&[f32]) -> T) -> (Vec<T>, Timing) {
    let mut lat = Vec::with_capacity(queries.len());
    let mut out = Vec::with_capacity(queries.len());
    let start = Instant::now();
    for q in queries {
        let t = Instant::now();
        out.push(f(q));
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let total = start.elapsed().as_secs_f64();
    let timing = Timing {
        p50_ms: quantile(&mut lat, 0.5),
        p99_ms: quantile(&mut lat, 0.99),
        qps: queries.len() as f64 / total,
    };
    (out, timing)
}

// ---- ann ------------------------------------------------------------------

fn ann(args: &Args) {
    std::fs::create_dir_all(&args.out).expect("create output dir");
    let max = args.sizes.iter().copied().max().unwrap_or(0);
    let mut mix = Mixture::new(42);
    let base: Vec<Vec<f32>> = (0..max).map(|_| mix.sample()).collect();
    let queries: Vec<Vec<f32>> = (0..args.queries).map(|_| mix.sample()).collect();
    let kernel = memoir::simd::Kernel::detect();
    println!(
        "## ann: {DIMS}-d mixture data, {} queries, k={K}, one thread, kernel: {}",
        queries.len(),
        kernel.name()
    );
    println!("engine | n | ef | build s | recall@10 | p50 ms | p99 ms | QPS");
    let meta = serde_json::json!({"dims": DIMS, "k": K, "sizes": args.sizes});
    std::fs::write(args.out.join("meta.json"), meta.to_string()).expect("write meta");
    let mut summaries = Vec::new();
    for &n in &args.sizes {
        let rows = &base[..n];
        // Exact.
        let exact_cfg = IndexConfig {
            hnsw_threshold: usize::MAX,
            ..IndexConfig::default()
        };
        let mut exact = VectorIndex::new(DIMS, exact_cfg);
        for r in rows {
            exact.insert(r);
        }
        let (gt, t) = time_queries(&queries, |q| exact.search(q, K, &|_| true));
        println!(
            "memoir exact | {n} | - | - | 1.000 | {:.4} | {:.4} | {:.0}",
            t.p50_ms, t.p99_ms, t.qps
        );
        let gt_ids: Vec<Vec<u32>> = gt.iter().map(|h| h.iter().map(|x| x.0).collect()).collect();
        write_f32(&args.out.join(format!("base_{n}.f32")), rows);
        write_f32(&args.out.join(format!("queries_{n}.f32")), &queries);
        let mut f = std::fs::File::create(args.out.join(format!("gt_{n}.i32"))).expect("gt file");
        for ids in &gt_ids {
            for i in ids {
                f.write_all(&(*i as i32).to_le_bytes()).expect("write gt");
            }
        }
        // HNSW.
        let mut cfg = IndexConfig {
            hnsw_threshold: 0,
            ..IndexConfig::default()
        };
        cfg.hnsw.ef_construction = args.efc;
        let mut graph = VectorIndex::new(DIMS, cfg);
        let rss_before = rss_mb();
        let t0 = Instant::now();
        for r in rows {
            graph.insert(r);
        }
        let build = t0.elapsed().as_secs_f64();
        let index_mb = rss_mb() - rss_before;
        // The same graph walked on the int8 codes (the default) and on the
        // f32 rows; both answer exact scores.
        let mut sweeps: Vec<(&str, Vec<Point>)> = Vec::new();
        for (walk, quantized) in [("int8", true), ("f32", false)] {
            graph.set_quantized(quantized);
            let mut points = Vec::new();
            for ef in EFS {
                graph.set_ef_search(ef);
                let (found, t) = time_queries(&queries, |q| graph.search(q, K, &|_| true));
                let mut hits = 0;
                for (f, g) in found.iter().zip(&gt_ids) {
                    hits += f.iter().filter(|h| g.contains(&h.0)).count();
                }
                let recall = hits as f64 / (K * queries.len()) as f64;
                println!(
                    "memoir hnsw {walk} M=16 efc={} | {n} | {ef} | {build:.2} | {recall:.4} | {:.4} | {:.4} | {:.0}",
                    args.efc, t.p50_ms, t.p99_ms, t.qps
                );
                points.push(Point {
                    ef,
                    recall,
                    qps: t.qps,
                });
            }
            sweeps.push((walk, points));
        }
        println!(
            "memoir build {n}: {build:.2} s, index memory (RSS growth, f32 rows + graph + int8 codes) {index_mb:.0} MB"
        );
        drop(graph);
        // The peers right after, on the same files (back to back: the
        // machine's load changes less between the two).
        let peer = if args.peers {
            run_peers(args, n)
        } else {
            Vec::new()
        };
        summaries.push((n, sweeps, peer));
    }
    if !summaries.is_empty() && args.peers {
        println!("\n## ann summary: smallest ef reaching the recall, QPS from one single-query loop each\n");
        println!("| n | target recall@10 | memoir walk | memoir ef | memoir recall | memoir QPS | hnswlib ef | hnswlib recall | hnswlib QPS | memoir / hnswlib |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for (n, sweeps, theirs) in &summaries {
            for target in [0.95, 0.99] {
                let pick = |v: &[Point]| v.iter().find(|p| p.recall >= target).copied();
                for (walk, ours) in sweeps {
                    match (pick(ours), pick(theirs)) {
                        (Some(a), Some(b)) => println!(
                            "| {n} | {target} | {walk} | {} | {:.4} | {:.0} | {} | {:.4} | {:.0} | **{:.2}x** |",
                            a.ef, a.recall, a.qps, b.ef, b.recall, b.qps, a.qps / b.qps
                        ),
                        _ => println!("| {n} | {target} | {walk} | not reached by both | | | | | | |"),
                    }
                }
            }
        }
    }
}

const EFS: [usize; 10] = [10, 16, 24, 32, 48, 64, 96, 128, 192, 256];

/// One point of an `ef` sweep.
#[derive(Clone, Copy)]
struct Point {
    ef: usize,
    recall: f64,
    qps: f64,
}

/// Resident memory of this process (VmRSS), MB.
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Run `peers/ann.py` on size `n` (hnswlib; faiss when installed): prints
/// its rows and returns hnswlib's sweep.
fn run_peers(args: &Args, n: usize) -> Vec<Point> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/ann.py");
    let efc = args.efc.to_string();
    let size = n.to_string();
    println!(
        "## peers: python3 {} --dir {} --m 16 --efc {efc} --sizes {n}",
        script.display(),
        args.out.display(),
    );
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg("--dir")
        .arg(&args.out)
        .args(["--m", "16", "--efc", &efc, "--sizes", &size])
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            println!("peers not run: {e}");
            return Vec::new();
        }
    };
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let mut points = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            println!("{line}");
            continue;
        };
        let engine = v["engine"].as_str().unwrap_or("?");
        if engine == "versions" {
            println!("peer versions: {v}");
            continue;
        }
        let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{engine} | {n} | {} | {:.2} | {:.4} | {:.4} | {:.4} | {:.0} (batched {:.0}; per-call overhead {:.1} µs; index {:.0} MB)",
            v["ef"].as_u64().map_or("-".into(), |e| e.to_string()),
            f("build_s"),
            f("recall"),
            f("p50_ms"),
            f("p99_ms"),
            f("qps"),
            f("qps_batch"),
            f("call_overhead_us"),
            f("index_mb"),
        );
        if engine == "hnswlib" {
            if let Some(ef) = v["ef"].as_u64() {
                points.push(Point {
                    ef: ef as usize,
                    recall: f("recall"),
                    qps: f("qps"),
                });
            }
        }
    }
    if !out.status.success() {
        println!("peers failed: {}", out.status);
    }
    points
}

// ---- graft ----------------------------------------------------------------

const WORDS: &[&str] = &[
    "deploy",
    "key",
    "vault",
    "build",
    "cache",
    "error",
    "panic",
    "thread",
    "index",
    "query",
    "session",
    "fork",
    "token",
    "budget",
    "graph",
    "vector",
    "lexical",
    "merge",
    "commit",
    "branch",
    "review",
    "latency",
    "disk",
    "memory",
    "socket",
    "retry",
    "timeout",
    "config",
    "schema",
    "migration",
    "user",
    "password",
    "report",
    "invoice",
    "customer",
    "ticket",
    "release",
    "rollback",
    "feature",
    "flag",
    "metric",
    "alert",
    "dashboard",
    "cluster",
    "node",
    "shard",
    "replica",
    "backup",
    "restore",
    "audit",
];

fn sentence(rng: &mut Rng, words: usize) -> String {
    (0..words)
        .map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

fn graft(_args: &Args) {
    let n = 5_000;
    let mut mix = Mixture::new(7);
    let mut rng = Rng(9);
    let view = SessionView::new("bench", DIMS);
    for seq in 0..n as u64 {
        let text = sentence(&mut rng, 20);
        view.insert_chunk(
            &mix.sample(),
            ChunkMeta::inline(seq, "user.text", text.clone()),
            &text,
        );
    }
    let queries: Vec<(Vec<f32>, String)> = (0..1000)
        .map(|_| (mix.sample(), sentence(&mut rng, 6)))
        .collect();
    println!("## graft: {n}-chunk session, {DIMS}-d, 1000 queries, embedding excluded");
    println!("operation | p50 ms | p99 ms | per second");
    let vecs: Vec<Vec<f32>> = queries.iter().map(|q| q.0.clone()).collect();
    let (_, t) = time_queries(&vecs, |q| view.graft(q, 10));
    println!(
        "graft (vector, top 10) | {:.4} | {:.4} | {:.0}",
        t.p50_ms, t.p99_ms, t.qps
    );
    let mut i = 0;
    let (_, t) = time_queries(&vecs, |q| {
        let text = &queries[i].1;
        i += 1;
        view.graft_with(&SearchRequest {
            vector: Some(q),
            text: Some(text),
            top_k: 10,
            mode: RetrievalMode::Hybrid,
            states: StateSet::NOT_PRUNED,
        })
    });
    println!(
        "graft (hybrid, top 10) | {:.4} | {:.4} | {:.0}",
        t.p50_ms, t.p99_ms, t.qps
    );
    let mut i = 0;
    let (_, t) = time_queries(&vecs, |q| {
        let text = &queries[i].1;
        i += 1;
        let req = SearchRequest {
            vector: Some(q),
            text: Some(text),
            top_k: 64,
            mode: RetrievalMode::Hybrid,
            states: StateSet::NOT_PRUNED,
        };
        view.graft_budget_with(&req, 1000, None)
    });
    println!(
        "graft_budget (hybrid, 64 candidates, 1000 tokens) | {:.4} | {:.4} | {:.0}",
        t.p50_ms, t.p99_ms, t.qps
    );
}

// ---- rebuild --------------------------------------------------------------

fn session(n: usize) -> (Vec<Message>, Vec<u64>) {
    let mut rng = Rng(11);
    let mut msgs = Vec::with_capacity(n);
    let mut call = 0u64;
    while msgs.len() < n {
        msgs.push(Message::user(sentence(&mut rng, 15)));
        call += 1;
        let id = format!("call_{call}");
        msgs.push(Message::new(
            Role::Assistant,
            vec![
                Block::Text {
                    text: sentence(&mut rng, 25),
                },
                Block::ToolUse {
                    id: id.clone(),
                    name: "grep".into(),
                    input: serde_json::json!({"pattern": sentence(&mut rng, 2)}),
                },
            ],
        ));
        // Every tenth tool output is long enough to be split.
        let words = if call.is_multiple_of(10) { 600 } else { 40 };
        msgs.push(Message::tool_result(id, sentence(&mut rng, words), false));
    }
    msgs.truncate(n);
    let seqs = (1..=n as u64).collect();
    (msgs, seqs)
}

fn rebuild_with(name: &str, inner: Arc<dyn EmbeddingProvider>, msgs: &[Message], seqs: &[u64]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut manifests = Vec::new();
    for pass in ["cold", "warm"] {
        // A fresh handle each pass: the warm pass reads the cache file back.
        let cached =
            CachedEmbedder::open(inner.clone(), CacheConfig::new(dir.path())).expect("open cache");
        let t = Instant::now();
        let (view, report) = SessionView::rebuild_from_messages(
            "bench",
            msgs,
            seqs,
            &cached,
            None,
            &RebuildOptions {
                view: ViewConfig::default(),
                ..RebuildOptions::default()
            },
        )
        .expect("rebuild");
        let total = t.elapsed();
        let s = cached.stats();
        println!(
            "{name} | {pass} | {} | {} | {:.2} | {:.2} | {} hits / {} misses",
            report.messages,
            report.chunks,
            total.as_secs_f64(),
            report.embed_time.as_secs_f64(),
            s.hits,
            s.misses
        );
        manifests.push(view.manifest());
    }
    assert_eq!(manifests[0], manifests[1], "cold and warm rebuilds differ");
}

fn rebuild(args: &Args) {
    let (msgs, seqs) = session(args.messages);
    println!(
        "## rebuild: synthetic agent session, {} messages",
        msgs.len()
    );
    println!("embedder | pass | messages | chunks | total s | embedding s | cache");
    rebuild_with(
        "hash-v1@384",
        Arc::new(HashEmbedder::new(DIMS)),
        &msgs,
        &seqs,
    );
    if args.minilm {
        match memoir::embed::MiniLm::discover(&memoir::embed::MiniLmOptions::default()) {
            Ok(m) => rebuild_with("minilm", Arc::new(m), &msgs, &seqs),
            Err(e) => println!("minilm skipped: {e}"),
        }
    }
}

/// Run this benchmark (`memoir-bench view ...`).
pub fn main() {
    let args = parse_args();
    let started = Instant::now();
    for s in &args.sections {
        match s.as_str() {
            "ann" => ann(&args),
            "graft" => graft(&args),
            "rebuild" => rebuild(&args),
            other => println!("unknown section {other}"),
        }
    }
    let _ = Duration::ZERO;
    println!("(total {:.1} s)", started.elapsed().as_secs_f64());
}
