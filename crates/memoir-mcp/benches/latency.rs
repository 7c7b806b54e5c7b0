//! MCP tool-call latency: `search_sessions` and `recall` through a
//! real `memoir mcp` process over stdio, on the search benchmark's generated
//! store (`crates/memoir/tests/suite/support/corpus.rs`, same seed), against
//! the same library calls made in process (the floor: what the MCP layer, the
//! process boundary and JSON cost on top). Also the size of a `recall` result
//! at the default budget, in estimated tokens.
//!
//! `cargo bench -p memoir-mcp --bench latency -- [--sessions N] [--messages M]
//! [--calls C] [--dir DIR] [--bin PATH]` (defaults: 10,000 sessions x 100
//! messages, 200 calls per tool; the binary is `$MEMOIR_BIN`, else
//! `target/release/memoir`, else `target/debug/memoir`).

#[path = "../../memoir/tests/suite/support/corpus.rs"]
mod corpus;

#[path = "support/args.rs"]
mod args;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use args::{arg, num, percentile};
use memoir::embed::{EmbeddingProvider, HashEmbedder};
use memoir::search::{SearchFilter, SearchIndex, SearchQuery};
use memoir::view::{RebuildOptions, SessionView};
use serde_json::{json, Value};

fn binary() -> PathBuf {
    if let Some(b) = arg("--bin").or_else(|| std::env::var("MEMOIR_BIN").ok()) {
        return PathBuf::from(b);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let release = target.join("release/memoir");
    if release.is_file() {
        release
    } else {
        target.join("debug/memoir")
    }
}

struct Stdio_ {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Stdio_ {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{msg}").expect("write");
        stdin.flush().expect("flush");
        let mut line = String::new();
        loop {
            line.clear();
            self.out.read_line(&mut line).expect("read");
            let v: Value = serde_json::from_str(&line).expect("json");
            if v["id"] == json!(self.next) {
                return v;
            }
        }
    }
}

fn main() {
    let spec = corpus::Spec {
        sessions: num("--sessions", 10_000),
        messages_per_session: num("--messages", 100),
        answer_every: (num("--sessions", 10_000) / 250).max(1),
        seed: 42,
        extra_result_lines: 0,
    };
    let calls = num("--calls", 200);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = arg("--dir")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("store"));
    let have = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .count()
        })
        .unwrap_or(0);
    if have != spec.sessions {
        let t = Instant::now();
        corpus::generate(&dir, &spec);
        eprintln!(
            "generated {} sessions in {:.1}s",
            spec.sessions,
            t.elapsed().as_secs_f64()
        );
    }
    let answers: Vec<(String, String)> = (0..spec.sessions)
        .filter_map(|i| {
            corpus::messages_of(&spec, i)
                .1
                .map(|a| (a.1, corpus::meta_of(i).id))
        })
        .collect();
    let project = corpus::meta_of(0).workspace;
    let recall_session = corpus::meta_of(0).id;

    // The in-process floor: the library calls the tools make.
    let embedder: Arc<dyn EmbeddingProvider> =
        Arc::new(HashEmbedder::new(memoir::embed::hash::DEFAULT_DIMS));
    let mut ix = SearchIndex::open(&dir)
        .expect("index")
        .with_embedder(embedder.clone());
    let t = Instant::now();
    ix.update().expect("update");
    eprintln!("index caught up in {:.1}s", t.elapsed().as_secs_f64());
    let mut lib_search = Vec::new();
    for i in 0..calls {
        let (q, _) = &answers[i % answers.len()];
        let t = Instant::now();
        ix.update().expect("update");
        let query = SearchQuery {
            text: q.clone(),
            k: 11,
            filter: SearchFilter {
                project: Some(project.display().to_string()),
                ..SearchFilter::default()
            },
            ..SearchQuery::new("")
        };
        ix.search(&query).expect("search");
        lib_search.push(t.elapsed().as_secs_f64() * 1e3);
    }
    drop(ix);
    let store = memoir::store::file::FileStore::new(&dir, memoir::store::Durability::Fsync);
    let mut lib_recall = Vec::new();
    for i in 0..calls.min(50) {
        let (q, _) = &answers[i % answers.len()];
        let t = Instant::now();
        let history =
            memoir::view::history::History::read(&store, &recall_session).expect("history");
        let (view, _) = SessionView::rebuild_history(
            &history,
            embedder.as_ref(),
            None,
            &RebuildOptions::default(),
        )
        .expect("view");
        view.graft_budget_top(embedder.as_ref(), q, 16, 1500, None)
            .expect("graft");
        lib_recall.push(t.elapsed().as_secs_f64() * 1e3);
    }

    // The same through `memoir mcp` over stdio.
    let bin = binary();
    let home = tmp.path().join("home");
    let mut child = Command::new(&bin)
        .args(["mcp", "--dir"])
        .arg(&dir)
        .arg("--project")
        .arg(&project)
        .env("MEMOIR_HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (build it: cargo build --release -p memoir-cli)",
                bin.display()
            )
        });
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut c = Stdio_ {
        child,
        out,
        next: 0,
    };
    let init = c.request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let stdin = c.child.stdin.as_mut().expect("stdin");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    // First call opens the index and catches up (not timed).
    c.request(
        "tools/call",
        json!({"name": "search_sessions", "arguments": {"query": "warm up"}}),
    );
    let mut mcp_search = Vec::new();
    for i in 0..calls {
        let (q, _) = &answers[i % answers.len()];
        let t = Instant::now();
        let r = c.request(
            "tools/call",
            json!({"name": "search_sessions", "arguments": {"query": q}}),
        );
        mcp_search.push(t.elapsed().as_secs_f64() * 1e3);
        assert_ne!(r["result"]["isError"], json!(true), "{r}");
    }
    let mut mcp_recall = Vec::new();
    let mut recall_tokens = 0;
    let mut recall_bytes = 0;
    for i in 0..calls.min(50) {
        let (q, _) = &answers[i % answers.len()];
        let t = Instant::now();
        let r = c.request(
            "tools/call",
            json!({"name": "recall", "arguments": {"query": q, "session": recall_session}}),
        );
        mcp_recall.push(t.elapsed().as_secs_f64() * 1e3);
        let s = &r["result"]["structuredContent"];
        assert!(s["text"].is_string(), "{r}");
        recall_tokens = s["tokens"].as_u64().unwrap_or(0);
        recall_bytes = r["result"]["content"][0]["text"]
            .as_str()
            .map_or(0, str::len);
    }
    drop(c.child.stdin.take());
    let _ = c.child.wait();

    println!(
        "store: {} sessions x {} messages; project {} ; {} calls per tool ({} for recall); {} cores; binary {}",
        spec.sessions,
        spec.messages_per_session,
        project.display(),
        calls,
        calls.min(50),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        bin.display()
    );
    println!();
    println!("| call | p50 ms | p99 ms |");
    println!("|---|---|---|");
    for (name, v) in [
        ("search_sessions via memoir mcp (stdio)", &mut mcp_search),
        (
            "library: index update + search (in process)",
            &mut lib_search,
        ),
        ("recall via memoir mcp (stdio)", &mut mcp_recall),
        (
            "library: rebuild view + graft (in process)",
            &mut lib_recall,
        ),
    ] {
        println!(
            "| {name} | {:.2} | {:.2} |",
            percentile(v, 0.5),
            percentile(v, 0.99)
        );
    }
    println!();
    println!(
        "recall at the default budget (1500): {recall_tokens} estimated tokens in the block, {recall_bytes} bytes of JSON result ({} estimated tokens)",
        memoir::view::graft::estimate_tokens(&"x".repeat(recall_bytes))
    );
}
