//! Embedding throughput benchmark.
//!
//! `cargo run --release -p memoir-bench -- embed [--quick]` prints:
//!
//! - the hash embedder's texts/s on one core;
//! - the embedding cache's hit cost, against the hash embedder and MiniLM;
//! - MiniLM (all-MiniLM-L6-v2) and, when installed, MPNet
//!   (all-mpnet-base-v2: `$MEMOIR_MPNET_MODEL_DIR`, else
//!   `$MEMOIR_HOME/models/all-mpnet-base-v2`) texts/s on 1 and 2 threads for
//!   32- and 128-token inputs, next to the bound set by a plain f32 matmul of
//!   the model's own shapes measured with the same library and thread count
//!   (achieved % of that bound and of the FMA peak), and the 2-thread
//!   speed-up.
//!
//! MiniLM runs in a child process per thread count (rayon's global pool,
//! which the model and the bound's candle products use, reads
//! `RAYON_NUM_THREADS` once per process).
//! Without the model the MiniLM part prints SKIPPED and the run fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::embed::minilm::{discover_model_dir, MiniLm, MiniLmOptions};
use memoir::embed::{CacheConfig, CachedEmbedder, EmbeddingProvider, HashEmbedder};

/// Words that are one WordPiece token each in all-MiniLM-L6-v2's vocabulary
/// (checked at run time).
const WORDS: &[&str] = &[
    "the",
    "session",
    "agent",
    "memory",
    "file",
    "test",
    "user",
    "asked",
    "about",
    "weather",
    "yesterday",
    "we",
    "fixed",
    "a",
    "bug",
    "in",
    "and",
    "then",
    "ran",
    "build",
    "again",
    "she",
    "painted",
    "over",
    "lake",
    "last",
    "summer",
    "with",
    "her",
    "kids",
    "support",
    "group",
    "meeting",
    "on",
    "friday",
    "error",
    "value",
    "moved",
    "index",
    "search",
    "query",
    "result",
    "list",
    "directory",
    "tool",
    "call",
    "output",
    "python",
    "script",
    "server",
    "port",
    "hit",
    "miss",
    "model",
    "score",
    "rank",
    "top",
    "document",
    "turn",
    "message",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

/// `n` distinct texts of exactly `tokens` tokens each ([CLS] and [SEP]
/// included).
fn texts_of_tokens(m: &MiniLm, n: usize, tokens: usize, seed: u64) -> Vec<String> {
    let single: Vec<&str> = WORDS
        .iter()
        .copied()
        .filter(|w| m.token_count(w).ok() == Some(3))
        .collect();
    assert!(single.len() > 20, "too few single-token words");
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let words: Vec<&str> = (0..tokens - 2)
                .map(|_| single[rng.next() % single.len()])
                .collect();
            let t = words.join(" ");
            assert_eq!(m.token_count(&t).ok(), Some(tokens));
            t
        })
        .collect()
}

/// Short texts (6–13 words, ~55 bytes) like chat turns.
fn short_texts(n: usize) -> Vec<String> {
    let mut rng = Rng(7);
    (0..n)
        .map(|i| {
            let len = 6 + rng.next() % 8;
            let mut s = (0..len)
                .map(|_| WORDS[rng.next() % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ");
            s.push_str(&format!(" {i}"));
            s
        })
        .collect()
}

/// Plain f32 matmul throughput with candle (GFLOP/s), shaped like the
/// model's largest products: (rows × 384)·(384 × 1536) and (rows ×
/// 1536)·(1536 × 384). The best of 1,024 rows (the model's batch size) and
/// 4,096 rows. With `workers` > 1, that many threads each run their own
/// products on a single-thread pool (the data-parallel bound); otherwise one
/// caller splits each product over candle's threads.
fn matmul_gflops(budget: Duration, workers: usize, (h, inner): (usize, usize)) -> f64 {
    use candle_core::{Device, Tensor};
    let one = |rows: usize| -> f64 {
        let dev = Device::Cpu;
        let a = Tensor::randn(0f32, 1.0, (rows, h), &dev).expect("randn");
        let w1 = Tensor::randn(0f32, 1.0, (h, inner), &dev).expect("randn");
        let b = Tensor::randn(0f32, 1.0, (rows, inner), &dev).expect("randn");
        let w2 = Tensor::randn(0f32, 1.0, (inner, h), &dev).expect("randn");
        let flops_per_iter = 2.0 * 2.0 * rows as f64 * h as f64 * inner as f64;
        std::hint::black_box(a.matmul(&w1).expect("matmul"));
        let start = Instant::now();
        let mut iters = 0u32;
        while start.elapsed() < budget / 2 {
            std::hint::black_box(a.matmul(&w1).expect("matmul"));
            std::hint::black_box(b.matmul(&w2).expect("matmul"));
            iters += 1;
        }
        flops_per_iter * iters as f64 / 1e9
    };
    let mut best = 0f64;
    for rows in [1024usize, 4096] {
        let start = Instant::now();
        let gflop = if workers > 1 {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..workers)
                    .map(|_| {
                        s.spawn(move || {
                            rayon::ThreadPoolBuilder::new()
                                .num_threads(1)
                                .build()
                                .expect("pool")
                                .install(|| one(rows))
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().expect("worker"))
                    .sum::<f64>()
            })
        } else {
            one(rows)
        };
        best = best.max(gflop / start.elapsed().as_secs_f64());
    }
    best
}

/// The CPU's measured FMA peak (GFLOP/s) with each vector instruction set
/// it has, `threads` threads running the register-only loop at once
/// (`memoir::simd::fma_peak_gflops`).
fn fma_peaks(threads: usize) -> Vec<(&'static str, f64)> {
    use memoir::simd::{fma_peak_gflops, KernelLevel};
    let mut out = Vec::new();
    for (name, level) in [
        ("AVX-512", KernelLevel::Avx512),
        ("AVX2", KernelLevel::Avx2),
    ] {
        let total: Option<f64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads.max(1))
                .map(|_| s.spawn(move || fma_peak_gflops(level, 1_000_000)))
                .collect();
            hs.into_iter().map(|h| h.join().ok().flatten()).sum()
        });
        if let Some(g) = total {
            out.push((name, g));
        }
    }
    out
}

fn bench_minilm_child(quick: bool) {
    let n_threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    let data_parallel = std::env::var("MEMOIR_BENCH_DATA_PARALLEL").as_deref() == Ok("1");
    let threads = if n_threads == "1" {
        n_threads.clone()
    } else if data_parallel {
        format!("{n_threads}(batches)")
    } else {
        format!("{n_threads}(products)")
    };
    let dir = match discover_model_dir() {
        Ok(d) => d,
        Err(e) => {
            println!("minilm: SKIPPED: {e}");
            std::process::exit(3);
        }
    };
    let opts = MiniLmOptions {
        data_parallel,
        ..MiniLmOptions::default()
    };
    let m = MiniLm::load_with(&dir, &opts).expect("load model");
    let ms_per_text_32 = throughput(&m, "minilm", &threads, &n_threads, quick, 64);
    let mpnet = std::env::var_os("MEMOIR_MPNET_MODEL_DIR")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| memoir::embed::models::installed_dir(&memoir::embed::models::MPNET_BASE_V2));
    match mpnet {
        Some(d) => {
            let mp = MiniLm::load_with(&d, &opts).expect("load MPNet");
            throughput(&mp, "mpnet", &threads, &n_threads, quick, 16);
        }
        None => println!(
            "mpnet: SKIPPED: set $MEMOIR_MPNET_MODEL_DIR or run `memoir models install all-mpnet-base-v2`"
        ),
    }
    cache_part(&m, &threads, ms_per_text_32);
}

/// Texts/s of `m` at 32 and 128 tokens against the matmul bound of its
/// shapes and the FMA peaks; returns ms per 32-token text.
fn throughput(
    m: &MiniLm,
    label: &str,
    threads: &str,
    n_threads: &str,
    quick: bool,
    batch: usize,
) -> f64 {
    let data_parallel = threads.contains("batches");
    let budget = if quick {
        Duration::from_millis(1500)
    } else {
        Duration::from_secs(8)
    };
    let workers = if data_parallel {
        n_threads.parse().unwrap_or(1)
    } else {
        1
    };
    let shape = (m.dimensions(), m.intermediate_size());
    let gflops = matmul_gflops(budget, workers, shape);
    println!(
        "{label} threads={threads}: candle f32 matmul bound ({}x{}) {gflops:.1} GFLOP/s",
        shape.0, shape.1
    );
    let cores: usize = n_threads.parse().unwrap_or(1);
    let peaks = fma_peaks(cores);
    for (name, g) in &peaks {
        println!(
            "{label} threads={threads}: {name} FMA peak, {cores} thread(s) at once: {g:.1} GFLOP/s \
             (candle matmul reaches {:.0}% of it)",
            100.0 * gflops / g
        );
    }
    let mut ms_per_text_32 = 0.0;
    for tokens in [32usize, 128] {
        let texts = texts_of_tokens(m, batch * 4, tokens, tokens as u64);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        m.embed_batch(&refs[..batch]).expect("embed"); // warm-up
        let start = Instant::now();
        let mut done = 0usize;
        let mut k = 0;
        while start.elapsed() < budget || done < 2 * batch {
            let chunk = &refs[(k % 4) * batch..(k % 4 + 1) * batch];
            m.embed_batch(chunk).expect("embed");
            done += batch;
            k += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        let tps = done as f64 / secs;
        if tokens == 32 {
            ms_per_text_32 = 1000.0 / tps;
        }
        let flops = m.flops_per_text(tokens);
        let bound = gflops * 1e9 / flops;
        println!(
            "{label} threads={threads} tokens={tokens}: {tps:.1} texts/s ({:.2} ms/text, {done} texts \
             in calls of {batch}); {:.3} GFLOP/text -> {:.1} GFLOP/s; matmul bound {bound:.1} \
             texts/s; {:.0}% of bound",
            1000.0 / tps,
            flops / 1e9,
            tps * flops / 1e9,
            100.0 * tps / bound
        );
        for (name, g) in &peaks {
            println!(
                "{label} threads={threads} tokens={tokens}: {:.0}% of the {name} FMA peak ({g:.1} GFLOP/s)",
                100.0 * tps * flops / 1e9 / g
            );
        }
        println!("@result {label} {threads} {tokens} {tps:.3}");
    }
    ms_per_text_32
}

/// The cache in front of MiniLM: a hit against an embedding.
fn cache_part(m: &MiniLm, threads: &str, ms_per_text_32: f64) {
    let tmp = std::env::temp_dir().join(format!("memoir-bench-mcache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let texts = texts_of_tokens(m, 64, 32, 99);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let cached = CachedEmbedder::open(Arc::new(m.clone()), CacheConfig::new(&tmp)).expect("cache");
    let start = Instant::now();
    cached.embed_batch(&refs).expect("fill");
    let miss_ms = start.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
    let rounds = 50;
    let start = Instant::now();
    for _ in 0..rounds {
        cached.embed_batch(&refs).expect("hit");
    }
    let hit_us = start.elapsed().as_secs_f64() * 1e6 / (rounds * refs.len()) as f64;
    println!(
        "minilm threads={threads} cache: miss (embed + store) {miss_ms:.2} ms/text, hit {hit_us:.2} \
         µs/text: a hit costs 1/{:.0} of an embedding (32-token texts, {:.2} ms/text in bulk)",
        ms_per_text_32 * 1e3 / hit_us,
        ms_per_text_32
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Returns µs per text.
fn bench_hash(quick: bool) -> f64 {
    let texts = short_texts(100_000);
    let avg_len = texts.iter().map(String::len).sum::<usize>() as f64 / texts.len() as f64;
    let e = HashEmbedder::new(384);
    let mut out = vec![0f32; 384];
    for t in texts.iter().take(1000) {
        e.embed_into(t, &mut out);
    }
    let rounds = if quick { 1 } else { 5 };
    let start = Instant::now();
    for _ in 0..rounds {
        for t in &texts {
            e.embed_into(t, &mut out);
            std::hint::black_box(&out);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let n = (texts.len() * rounds) as f64;
    println!(
        "hash-v1@384, one core: {:.0} texts/s ({:.2} µs/text, {avg_len:.0} bytes/text on average)",
        n / secs,
        secs * 1e6 / n
    );
    secs * 1e6 / n
}

fn bench_cache(quick: bool, hash_us: f64) {
    let tmp = std::env::temp_dir().join(format!("memoir-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let n = if quick { 5_000 } else { 50_000 };
    let texts = short_texts(n);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let open = || {
        CachedEmbedder::open(Arc::new(HashEmbedder::new(384)), CacheConfig::new(&tmp))
            .expect("open cache")
    };
    let cached = open();
    let start = Instant::now();
    for c in refs.chunks(64) {
        cached.embed_batch(c).expect("fill");
    }
    let fill_us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    let start = Instant::now();
    for c in refs.chunks(64) {
        cached.embed_batch(c).expect("hit");
    }
    let hit_us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    let file_mb = cached.stats().file_bytes as f64 / (1 << 20) as f64;
    drop(cached);
    let start = Instant::now();
    let reopened = open();
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    for c in refs.chunks(64) {
        reopened.embed_batch(c).expect("hit");
    }
    let hit2_us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    let s = reopened.stats();
    assert_eq!((s.hits, s.misses), (n as u64, 0));
    println!(
        "cache, 384-d, {n} entries ({file_mb:.1} MiB): store {fill_us:.2} µs/text, hit {hit_us:.2} \
         µs/text; reopen (verify every record) {open_ms:.1} ms = {:.2} µs/entry, then hit \
         {hit2_us:.2} µs/text; a hit costs {:.1}x a hash embedding (so `cache = auto` skips hash)",
        open_ms * 1e3 / n as f64,
        hit_us / hash_us
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Run this benchmark (`memoir-bench embed ...`).
pub fn main() {
    let args: Vec<String> = crate::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    if args.iter().any(|a| a == "--minilm-child") {
        bench_minilm_child(quick);
        return;
    }
    println!(
        "memoir embedding benchmark ({}, {} logical CPUs{})",
        if cfg!(debug_assertions) {
            "DEBUG build: numbers are not representative"
        } else {
            "release build"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick { ", --quick" } else { "" }
    );
    let hash_us = bench_hash(quick);
    bench_cache(quick, hash_us);
    let exe = std::env::current_exe().expect("current exe");
    let mut results: Vec<(String, String, String, f64)> = Vec::new();
    let mut failed = false;
    for (threads, dp) in [("1", "0"), ("2", "0"), ("2", "1")] {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("embed")
            .arg("--minilm-child")
            .env("RAYON_NUM_THREADS", threads)
            .env("MEMOIR_BENCH_DATA_PARALLEL", dp);
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd.output().expect("run child");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(r) = line.strip_prefix("@result ") {
                let f: Vec<&str> = r.split_whitespace().collect();
                if let [label, t, k, v] = f[..] {
                    results.push((label.into(), t.into(), k.into(), v.parse().unwrap_or(0.0)));
                }
            } else {
                println!("{line}");
            }
        }
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        failed |= !out.status.success();
    }
    for label in ["minilm", "mpnet"] {
        for tokens in ["32", "128"] {
            let get = |l: &str, t: &str| {
                results
                    .iter()
                    .find(|r| r.0 == l && r.1 == t && r.2 == tokens)
                    .map(|r| r.3)
            };
            if let Some(one) = get(label, "1") {
                for two in ["2(products)", "2(batches)"] {
                    if let Some(v) = get(label, two) {
                        println!(
                            "{label} tokens={tokens}: {two} / 1 thread = {:.2}x ({one:.1} -> {v:.1} texts/s)",
                            v / one
                        );
                    }
                }
            }
        }
    }
    for t in ["1", "2(products)", "2(batches)"] {
        for tokens in ["32", "128"] {
            let get = |l: &str| {
                results
                    .iter()
                    .find(|r| r.0 == l && r.1 == t && r.2 == tokens)
                    .map(|r| r.3)
            };
            if let (Some(a), Some(b)) = (get("minilm"), get("mpnet")) {
                println!(
                    "threads={t} tokens={tokens}: mpnet / minilm texts/s = {:.3} ({b:.1} vs {a:.1}), 1/{:.1}",
                    b / a,
                    a / b
                );
            }
        }
    }
    if failed {
        eprintln!("the MiniLM part failed (see above)");
        std::process::exit(1);
    }
}
