//! memoir's benchmarks and the peers they are compared with, in one crate so
//! the library's own build and tests never pull the peers (SQLite, the
//! seed's index design, hnswlib/faiss through `peers/ann.py`).
//!
//! Each module is one comparison, run by the `memoir-bench` binary as a
//! subcommand of the same name; it prints Markdown tables with the peers
//! measured in the same run (see `docs/BENCHMARKS.md`):
//! - [`transcript`]: append/load/list against SQLite and a whole-file rewrite;
//! - [`manager`]: the session manager against the seed's index design;
//! - [`embed`]: embedder throughput and the embedding cache;
//! - [`view`]: the vector index against exact search and the ANN peers,
//!   grafting and rebuilds;
//! - [`load`]: `memoir serve` under concurrent clients, file and PostgreSQL;
//! - [`locomo`]: LoCoMo retrieval recall, with a held-out part;
//! - [`search`]: cross-session search against SQLite FTS5 and the view BM25;
//! - [`catchup`]: the search index's per-request catch-up from the change
//!   journal against the full pass;
//! - [`history`]: agent history at scale (import, listing, usage, index,
//!   search) on generated trees, against ccusage and `grep`;
//! - [`ui`]: `memoir ui` against agentsview in headless chromium.
//!
//! [`quick`] lists the small-size arguments of each, for
//! `memoir-bench all --quick`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod catchup; // search catch-up from the change journal
pub mod embed;
pub mod history; // agent history at scale, against ccusage
pub mod load;
pub mod locomo;
pub mod manager;
pub mod search; // cross-session search
pub mod transcript;
pub mod ui; // memoir ui against agentsview in a browser
pub mod view;

use std::sync::OnceLock;

static ARGS: OnceLock<Vec<String>> = OnceLock::new();

/// Set the arguments a benchmark sees (the program name, then its own
/// arguments, without the subcommand). Done once by the binary.
pub fn set_args(args: Vec<String>) {
    let _ = ARGS.set(args);
}

/// The arguments of the running benchmark, program name first (as
/// `std::env::args()` would give a stand-alone bench binary).
pub fn args() -> impl Iterator<Item = String> {
    ARGS.get().cloned().unwrap_or_default().into_iter()
}

/// The value after `--name` among the benchmark's arguments.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The number after `--name`, `default` when it is absent or no number.
pub fn num(name: &str, default: usize) -> usize {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `p` quantile (0..=1, nearest rank) of `v`, sorting it; 0 when empty.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The machine's 1-, 5- and 15-minute load averages, as `/proc/loadavg`
/// gives them (empty where there is none), printed beside every run.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One benchmark: its subcommand name and entry point.
pub type Bench = (&'static str, fn());

/// Every benchmark, in the order `all` runs them.
pub const BENCHES: &[Bench] = &[
    ("transcript", transcript::main),
    ("manager", manager::main),
    ("embed", embed::main),
    ("view", view::main),
    ("load", load::main),
    ("locomo", locomo::main),
    ("search", search::main),
    ("catchup", catchup::main),
    ("history", history::main),
    ("ui", ui::main),
];

/// The small-size arguments and environment of each benchmark for
/// `all --quick`: seconds rather than minutes, numbers not for publication.
pub fn quick(name: &str) -> (Vec<&'static str>, Vec<(&'static str, &'static str)>) {
    match name {
        "transcript" => (
            vec![],
            vec![
                ("BENCH_APPENDS", "2000"),
                ("BENCH_ONLY", "append,threads,rewrite,list"),
            ],
        ),
        "manager" => (
            vec![],
            vec![
                ("MEMOIR_BENCH_MESSAGES", "500"),
                ("MEMOIR_BENCH_SESSIONS", "200"),
            ],
        ),
        "embed" => (vec!["--quick"], vec![]),
        "view" => (
            vec![
                "--sizes",
                "1000,10000",
                "--queries",
                "200",
                "--messages",
                "300",
                "--peers",
            ],
            vec![],
        ),
        // Hash and lexical only (MiniLM indexing of the dev split takes
        // minutes); the file comes from `$MEMOIR_LOCOMO`.
        "locomo" => (vec!["--embedders", "hash"], vec![]),
        "load" => (
            vec![
                "--mode",
                "server",
                "--backend",
                "file",
                "--seconds",
                "2",
                "--clients",
                "4",
                "--sessions",
                "8",
            ],
            vec![],
        ),
        "search" => (
            vec!["--sessions", "200", "--messages", "50", "--queries", "50"],
            vec![],
        ),
        "catchup" => (vec!["--sessions", "1000", "--runs", "10"], vec![]),
        "history" => (
            vec!["--sessions", "1000", "--runs", "1", "--queries", "20"],
            vec![],
        ),
        "ui" => (
            vec!["--sessions", "200", "--runs", "3", "--long-mb", "2"],
            vec![],
        ),
        _ => (vec![], vec![]),
    }
}
