//! Import throughput: a generated Claude Code tree and a generated
//! Codex tree (`memoir-testkit`'s corpus: realistic shapes and a long tail of
//! session sizes; see `crates/memoir-testkit/README.md`), imported first,
//! re-run unchanged, then re-run after 1% growth (appended to the newest
//! sessions, as live agents do). Prints MB/s, seconds and peak RSS, and,
//! when `CCUSAGE` names a `ccusage` binary, its `daily --json --offline`
//! time over the same trees.
//!
//! Then the usage per day three ways: the generator's manifest (the ground
//! truth), `memoir usage --by day` (the library's report) and, with
//! `CCUSAGE`, `ccusage daily --json --offline --timezone UTC`.
//! ccusage is pinned at 20.0.24 (20.0.26 has no linux-x64 native package on
//! the registry, so its launcher exits with "native binary is not
//! available": that, not the trees, is why it failed before):
//!
//! `npm install --prefix target/ccusage ccusage@20.0.24 && IMPORT_BENCH_MB=1024 \
//!  CCUSAGE=target/ccusage/node_modules/.bin/ccusage cargo bench -p memoir --features import,usage --bench import`
//!
//! `IMPORT_BENCH_SEED` picks another corpus (default 1).

use std::fs;
use std::path::Path;
use std::time::Instant;

use memoir::import::{self, Agent};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::store::Durability;
use memoir_testkit::corpus::{generate, home_dir, AgentKind, CorpusSpec, Manifest};

fn peak_rss_mb() -> f64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The corpus of one agent: about `mb` MB, sessions of a few KB to tens of
/// MB (about two per MB), optionally grown by `grow` of its size.
fn spec(agent: AgentKind, seed: u64, mb: usize, grow: f64) -> CorpusSpec {
    CorpusSpec {
        seed,
        sessions: 0,
        target_mb: mb as f64,
        agents: vec![agent],
        grow,
        ..CorpusSpec::default()
    }
}

/// CPU seconds (user + system) this process has used.
fn cpu_s() -> f64 {
    fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(0.0)
}

/// Per-day totals: day → (input, output, cache read, cache write, cost).
type Daily = std::collections::BTreeMap<String, (u64, u64, u64, u64, f64)>;

fn memoir_daily(m: &SessionManager) -> (Daily, f64) {
    use memoir::usage::{self, GroupKey, PriceTable, UsageQuery};
    let t = Instant::now();
    let prices = PriceTable::shipped().unwrap();
    let query = UsageQuery {
        group_by: vec![GroupKey::Day],
        ..UsageQuery::default()
    };
    let r = usage::report(m.store().as_ref(), &query, &prices).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let mut out = Daily::new();
    for row in r.rows {
        let t = &row.totals;
        out.insert(
            row.key()[0].to_string(),
            (
                t.input_tokens,
                t.output_tokens,
                t.cache_read_tokens,
                t.cache_write_tokens,
                t.cost_usd,
            ),
        );
    }
    (out, secs)
}

/// `ccusage daily --json --offline` over `src` (the agent's home), timed.
fn ccusage_daily(bin: &str, agent: Agent, src: &Path, home: &Path) -> Result<(Daily, f64), String> {
    let t = Instant::now();
    let mut cmd = std::process::Command::new(bin);
    cmd.args(["daily", "--json", "--offline", "--timezone", "UTC"])
        .env("HOME", home);
    // ccusage refuses a CLAUDE_CONFIG_DIR without `projects/`: give it an empty one.
    let empty = home.join("none");
    let _ = fs::create_dir_all(empty.join("projects"));
    match agent {
        Agent::Codex => cmd.env("CODEX_HOME", src).env("CLAUDE_CONFIG_DIR", &empty),
        _ => cmd.env("CLAUDE_CONFIG_DIR", src).env("CODEX_HOME", &empty),
    };
    let out = cmd.output().map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let n = |d: &serde_json::Value, k: &str| d.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    let mut daily = Daily::new();
    for d in v["daily"].as_array().cloned().unwrap_or_default() {
        let day = d
            .get("period")
            .or_else(|| d.get("date"))
            .and_then(|x| x.as_str())
            .unwrap_or("")
            .to_string();
        // ccusage's inputTokens exclude cache reads for Codex too, as memoir's.
        daily.insert(
            day,
            (
                n(&d, "inputTokens"),
                n(&d, "outputTokens"),
                n(&d, "cacheReadTokens"),
                n(&d, "cacheCreationTokens"),
                d.get("totalCost")
                    .or_else(|| d.get("costUSD"))
                    .and_then(|x| x.as_f64())
                    .unwrap_or(0.0),
            ),
        );
    }
    Ok((daily, secs))
}

/// Per-day totals of the manifest's counted requests (UTC days).
fn manifest_daily(m: &Manifest) -> Daily {
    let mut out = Daily::new();
    for s in &m.sessions {
        for r in s.requests.iter().filter(|r| r.counted) {
            let day = r.timestamp.get(..10).unwrap_or("").to_string();
            let e = out.entry(day).or_insert((0, 0, 0, 0, 0.0));
            e.0 += r.usage.input;
            e.1 += r.usage.output;
            e.2 += r.usage.cache_read;
            e.3 += r.usage.cache_creation;
        }
    }
    out
}

fn main() {
    let mb: usize = std::env::var("IMPORT_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("IMPORT_BENCH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let ccusage = std::env::var("CCUSAGE").ok();
    let mut comparisons = Vec::new();
    println!("| tree | MB | sessions (files) | generated in | first import (wall / CPU) | MB/s wall / CPU | unchanged re-run | +1% re-run (wall / CPU) | read / appended | peak RSS | memoir usage --by day | ccusage daily --json --offline |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (agent, kind) in [
        (Agent::ClaudeCode, AgentKind::ClaudeCode),
        (Agent::Codex, AgentKind::Codex),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("src");
        let t = Instant::now();
        let manifest = generate(&spec(kind, seed, mb, 0.0), &root).unwrap();
        let generated = t.elapsed().as_secs_f64();
        let src = root.join(home_dir(kind));
        let store = tmp.path().join("store");
        let m = SessionManager::open(
            &store,
            ManagerOptions {
                durability: Durability::Flush,
                ..ManagerOptions::default()
            },
        )
        .unwrap();
        let sources = import::sources_of(agent, Some(&src)).unwrap();
        let (t0, c0) = (Instant::now(), cpu_s());
        let r = import::import(&m, &sources, &mut |_| {}).unwrap();
        let (first, first_cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
        assert!(
            r.errors.is_empty() && r.skipped.is_empty(),
            "{:?}",
            r.errors
        );
        let t1 = Instant::now();
        let again = import::import(&m, &sources, &mut |_| {}).unwrap();
        let unchanged = t1.elapsed().as_secs_f64();
        assert_eq!(again.records, 0);
        let grown = generate(&spec(kind, seed, mb, 0.01), &root).unwrap();
        let added = grown.bytes_written;
        let sources = import::sources_of(agent, Some(&src)).unwrap();
        let (t2, c2) = (Instant::now(), cpu_s());
        let inc = import::import(&m, &sources, &mut |_| {}).unwrap();
        let (incremental, inc_cpu) = (t2.elapsed().as_secs_f64(), cpu_s() - c2);
        assert_eq!(inc.sessions.forked, 0);
        let rss = peak_rss_mb();
        let (ours, usage_s) = memoir_daily(&m);
        let peer = ccusage
            .as_ref()
            .map(|bin| ccusage_daily(bin, agent, &src, tmp.path()));
        let peer_cell = match &peer {
            None => "not run".to_string(),
            Some(Ok((_, s))) => format!("{s:.2} s"),
            Some(Err(e)) => format!("failed: {}", e.lines().next().unwrap_or("")),
        };
        let total_mb = manifest.bytes as f64 / 1048576.0;
        println!(
            "| {} | {:.0} | {} ({}) | {:.1} s | {:.2} s / {:.2} s | {:.0} / {:.0} | {:.3} s | {:.3} s / {:.3} s (+{:.1} MB) | {:.1} / {:.1} MB | {:.0} MB | {:.2} s | {} |",
            agent.as_str(),
            total_mb,
            manifest.sessions.iter().filter(|s| s.parent_session.is_none()).count(),
            sources.len(),
            generated,
            first,
            first_cpu,
            total_mb / first,
            total_mb / first_cpu.max(0.01),
            unchanged,
            incremental,
            inc_cpu,
            added as f64 / 1048576.0,
            inc.bytes_read as f64 / 1048576.0,
            added as f64 / 1048576.0,
            rss,
            usage_s,
            peer_cell
        );
        let theirs = match peer {
            Some(Ok((theirs, _))) => Some(theirs),
            _ => None,
        };
        comparisons.push((agent, manifest_daily(&grown), ours, theirs));
    }
    for (agent, truth, ours, theirs) in comparisons {
        println!();
        println!(
            "{} per day (input / output / cache read / cache write tokens, USD): the generator's manifest, memoir, ccusage",
            agent.as_str()
        );
        println!();
        println!("| day | manifest | memoir | ccusage | memoir = manifest | ccusage = manifest |");
        println!("|---|---|---|---|---|---|");
        let days: std::collections::BTreeSet<&String> = truth
            .keys()
            .chain(ours.keys())
            .chain(theirs.iter().flat_map(|t| t.keys()))
            .collect();
        let cell = |d: Option<&(u64, u64, u64, u64, f64)>| match d {
            Some((i, o, r, w, c)) => format!("{i} / {o} / {r} / {w}, ${c:.2}"),
            None => "-".into(),
        };
        let same = |a: Option<&(u64, u64, u64, u64, f64)>,
                    b: Option<&(u64, u64, u64, u64, f64)>| {
            matches!((a, b), (Some(x), Some(y)) if (x.0, x.1, x.2, x.3) == (y.0, y.1, y.2, y.3))
        };
        for day in days {
            let (t, a, b) = (
                truth.get(day),
                ours.get(day),
                theirs.as_ref().and_then(|x| x.get(day)),
            );
            println!(
                "| {day} | {} | {} | {} | {} | {} |",
                cell(t).replace(", $0.00", ""),
                cell(a),
                cell(b),
                if same(t, a) { "yes" } else { "no" },
                if theirs.is_none() {
                    "not run"
                } else if same(t, b) {
                    "yes"
                } else {
                    "no"
                },
            );
        }
    }
}
