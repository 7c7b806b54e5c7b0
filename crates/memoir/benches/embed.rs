//! Embedding throughput benchmark (issue 4).
//!
//! `cargo bench -p memoir --bench embed [-- --quick]` prints:
//!
//! - the hash embedder's texts/s on one core;
//! - MiniLM texts/s on 1 and 2 threads for 32- and 128-token inputs, next to
//!   the bound set by a plain f32 matmul measured with the same library and
//!   thread count (achieved % of that bound);
//! - the embedding cache's hit cost against the embedding cost.
//!
//! MiniLM runs in a child process per thread count (candle reads its thread
//! settings from `RAYON_NUM_THREADS` / `CANDLE_NUM_THREADS` once per process).

use std::time::{Duration, Instant};

use memoir::embed::minilm::{discover_model_dir, MiniLm, MiniLmOptions};
use memoir::embed::{CacheConfig, CachedEmbedder, EmbeddingProvider, HashEmbedder};

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
    "parser",
    "and",
    "then",
    "ran",
    "build",
    "again",
    "she",
    "painted",
    "sunrise",
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
    "cargo",
    "crate",
    "error",
    "value",
    "moved",
    "borrow",
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
    "deploy",
    "server",
    "port",
    "timeout",
    "retry",
    "cache",
    "hit",
    "miss",
    "model",
    "vector",
    "cosine",
    "score",
    "rank",
    "top",
    "document",
    "chunk",
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

/// `n` distinct texts of exactly `tokens` tokens each (with [CLS]/[SEP]).
fn texts_of_tokens(m: &MiniLm, n: usize, tokens: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut words: Vec<&str> = Vec::new();
        loop {
            let w = WORDS[rng.next() % WORDS.len()];
            words.push(w);
            let c = m.token_count(&words.join(" ")).unwrap_or(usize::MAX);
            if c == tokens {
                break;
            }
            if c > tokens {
                words.pop();
            }
        }
        out.push(words.join(" "));
    }
    out
}

fn short_texts(n: usize) -> Vec<String> {
    let mut rng = Rng(7);
    (0..n)
        .map(|_| {
            let len = 6 + rng.next() % 8;
            (0..len)
                .map(|_| WORDS[rng.next() % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Plain f32 matmul throughput with candle (GFLOP/s), shaped like the
/// model's largest products: (rows × 384) · (384 × 1536) and back.
fn matmul_gflops(rows: usize, budget: Duration) -> f64 {
    use candle_core::{Device, Tensor};
    let dev = Device::Cpu;
    let a = Tensor::randn(0f32, 1.0, (rows, 384), &dev).expect("randn");
    let w1 = Tensor::randn(0f32, 1.0, (384, 1536), &dev).expect("randn");
    let b = Tensor::randn(0f32, 1.0, (rows, 1536), &dev).expect("randn");
    let w2 = Tensor::randn(0f32, 1.0, (1536, 384), &dev).expect("randn");
    let flops_per_iter = 2.0 * 2.0 * rows as f64 * 384.0 * 1536.0;
    // Warm up.
    let _ = a.matmul(&w1).expect("matmul");
    let start = Instant::now();
    let mut iters = 0u32;
    while start.elapsed() < budget {
        let x = a.matmul(&w1).expect("matmul");
        let y = b.matmul(&w2).expect("matmul");
        std::hint::black_box((x, y));
        iters += 1;
    }
    flops_per_iter * iters as f64 / start.elapsed().as_secs_f64() / 1e9
}

fn bench_minilm_child(quick: bool) {
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    let dir = match discover_model_dir() {
        Ok(d) => d,
        Err(e) => {
            println!("minilm: SKIPPED: {e}");
            return;
        }
    };
    let mut opts = MiniLmOptions::default();
    if let Some(n) = std::env::var("MEMOIR_BENCH_BATCH_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        opts.max_batch_tokens = n;
    }
    let m = MiniLm::load_with(&dir, &opts).expect("load model");
    let budget = if quick {
        Duration::from_millis(1500)
    } else {
        Duration::from_secs(6)
    };
    let gflops = matmul_gflops(4096, budget);
    println!("minilm threads={threads}: candle f32 matmul (4096x384x1536) {gflops:.1} GFLOP/s");
    for tokens in [32usize, 128] {
        let batch = 64;
        let texts = texts_of_tokens(&m, batch * 4, tokens, tokens as u64);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        // Warm up (allocator, thread pools).
        m.embed_batch_sync(&refs[..batch]).expect("embed");
        let start = Instant::now();
        let mut done = 0usize;
        let mut k = 0;
        while start.elapsed() < budget || done < batch {
            let chunk = &refs[(k % 4) * batch..(k % 4 + 1) * batch];
            m.embed_batch_sync(chunk).expect("embed");
            done += batch;
            k += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        let tps = done as f64 / secs;
        let flops = m.flops_per_text(tokens);
        let bound = gflops * 1e9 / flops;
        println!(
            "minilm threads={threads} tokens={tokens}: {tps:.1} texts/s ({:.2} ms/text, batch {batch}); \
             model {:.3} GFLOP/text -> {:.1} GFLOP/s achieved; matmul bound {bound:.1} texts/s; \
             {:.0}% of bound",
            1000.0 / tps,
            flops / 1e9,
            tps * flops / 1e9,
            100.0 * tps / bound
        );
    }
}

fn bench_hash(quick: bool) {
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
        "hash-v1@384 one core: {:.0} texts/s ({:.2} µs/text, avg {avg_len:.0} bytes/text)",
        n / secs,
        secs * 1e6 / n
    );
}

fn bench_cache(quick: bool) {
    let tmp = std::env::temp_dir().join(format!("memoir-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let n = if quick { 2_000 } else { 20_000 };
    let texts = short_texts(n);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    // Hit cost: independent of the provider; measured over the hash embedder
    // so the fill is fast.
    let cached = CachedEmbedder::open(
        std::sync::Arc::new(HashEmbedder::new(384)),
        CacheConfig::new(&tmp),
    )
    .expect("open cache");
    let start = Instant::now();
    for c in refs.chunks(64) {
        block_on(cached.embed_batch(c)).expect("fill");
    }
    let fill = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for c in refs.chunks(64) {
        block_on(cached.embed_batch(c)).expect("hit");
    }
    let hit = start.elapsed().as_secs_f64();
    let stats = cached.stats();
    drop(cached);
    // Reopen: a new process's first pass (index load + hits).
    let start = Instant::now();
    let reopened = CachedEmbedder::open(
        std::sync::Arc::new(HashEmbedder::new(384)),
        CacheConfig::new(&tmp),
    )
    .expect("reopen cache");
    let open_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for c in refs.chunks(64) {
        block_on(reopened.embed_batch(c)).expect("hit");
    }
    let hit2 = start.elapsed().as_secs_f64();
    let hit_us = hit * 1e6 / n as f64;
    println!(
        "cache (384-d, {n} entries): miss+store {:.1} µs/text, hit {hit_us:.2} µs/text, \
         reopen {:.1} ms, hit after reopen {:.2} µs/text (hits {}, misses {})",
        fill * 1e6 / n as f64,
        open_secs * 1e3,
        hit2 * 1e6 / n as f64,
        stats.hits,
        stats.misses
    );
    println!("cache hit µs/text: {hit_us:.3}");
    let _ = std::fs::remove_dir_all(&tmp);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    if args.iter().any(|a| a == "--minilm-child") {
        bench_minilm_child(quick);
        return;
    }
    println!(
        "memoir embedding benchmark ({}; {} logical CPUs)",
        if cfg!(debug_assertions) {
            "DEBUG build: numbers are not representative"
        } else {
            "release build"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    bench_hash(quick);
    bench_cache(quick);
    let exe = std::env::current_exe().expect("current exe");
    for threads in ["1", "2"] {
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("--minilm-child")
            .env("RAYON_NUM_THREADS", threads)
            .env("CANDLE_NUM_THREADS", threads);
        if quick {
            cmd.arg("--quick");
        }
        let status = cmd.status().expect("run child");
        assert!(status.success(), "minilm child failed");
    }
}
