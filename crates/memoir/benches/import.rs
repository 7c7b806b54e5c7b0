//! Import throughput: a generated Claude Code tree and a generated
//! Codex tree (shapes taken from `testdata/transcripts/`: split assistant
//! lines, tool calls with large results, duplicated Codex streams, cumulative
//! token counts), imported first, re-run unchanged, then re-run after 1%
//! growth (appended to the newest sessions, as live agents do). Prints MB/s,
//! seconds and peak RSS, and, when `CCUSAGE` names a `ccusage` binary, its
//! `daily --json --offline` time over the same trees.
//!
//! Then `memoir usage --by day` (the library's report) and `ccusage daily
//! --json --offline --timezone UTC` over the same tree, side by side.
//! ccusage is pinned at 20.0.24 (20.0.26 has no linux-x64 native package on
//! the registry, so its launcher exits with "native binary is not
//! available": that, not the trees, is why it failed before):
//!
//! `npm install --prefix target/ccusage ccusage@20.0.24 && IMPORT_BENCH_MB=1024 \
//!  CCUSAGE=target/ccusage/node_modules/.bin/ccusage cargo bench -p memoir --features import,usage --bench import`

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use memoir::import::{self, Agent};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::store::Durability;

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

/// A tool result of `n` bytes of plausible text.
fn payload(n: usize, seed: usize) -> String {
    let words = [
        "fn", "let", "match", "impl", "struct", "pub", "use", "return", "Ok", "Err",
    ];
    let mut s = String::with_capacity(n + 16);
    let mut i = seed;
    while s.len() < n {
        s.push_str(words[i % words.len()]);
        s.push(if i.is_multiple_of(13) { '\n' } else { ' ' });
        i = i.wrapping_mul(31).wrapping_add(7);
    }
    s
}

/// A turn's time: session `s` runs on day `1 + s % 28` of its month, from
/// hour `s / 28 % 24`, one turn a second (distinct sessions never share
/// timestamps, as real ones do not; ccusage treats identical events in two
/// files as copies).
fn turn_time(month: &str, s: usize, t: usize) -> String {
    format!(
        "{month}-{:02}T{:02}:{:02}:{:02}.000Z",
        1 + s % 28,
        (s / 28 + t / 3600) % 24,
        (t / 60) % 60,
        t % 60
    )
}

fn claude_turn(
    w: &mut impl Write,
    sid: &str,
    s: usize,
    t: usize,
    parent: &mut String,
    big: usize,
) -> usize {
    let ts = turn_time("2026-06", s, t);
    let u = format!("u{t}-{sid}");
    let a1 = format!("a{t}-{sid}");
    let a2 = format!("b{t}-{sid}");
    let r = format!("r{t}-{sid}");
    let parent_json = if parent.is_empty() {
        "null".to_string()
    } else {
        format!("\"{parent}\"")
    };
    let env = |uuid: &str, p: &str| {
        format!(
            r#""uuid":"{uuid}","parentUuid":{p},"isSidechain":false,"userType":"external","cwd":"/workspace/app","sessionId":"{sid}","version":"2.1.173","timestamp":"{ts}""#
        )
    };
    let result = serde_json::to_string(&payload(big, t)).unwrap_or_default();
    let lines = [
        format!(
            r#"{{"type":"user",{},"message":{{"role":"user","content":"Please look at module {t} and fix the failing test"}}}}"#,
            env(&u, &parent_json)
        ),
        format!(
            r#"{{"type":"assistant",{},"requestId":"req_{t}","message":{{"id":"msg_{t}_{sid}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"Let me read the file first."}}],"stop_reason":"tool_use","usage":{{"input_tokens":3,"output_tokens":120,"cache_read_input_tokens":40000,"cache_creation_input_tokens":900}}}}}}"#,
            env(&a1, &format!("\"{u}\""))
        ),
        format!(
            r#"{{"type":"assistant",{},"requestId":"req_{t}","message":{{"id":"msg_{t}_{sid}","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_{t}_{sid}","name":"Read","input":{{"file_path":"/workspace/app/src/m{t}.rs"}}}}],"stop_reason":"tool_use","usage":{{"input_tokens":3,"output_tokens":120,"cache_read_input_tokens":40000,"cache_creation_input_tokens":900}}}}}}"#,
            env(&a2, &format!("\"{a1}\""))
        ),
        format!(
            r#"{{"type":"user",{},"message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{t}_{sid}","content":{result}}}]}},"toolUseResult":{{"type":"text"}}}}"#,
            env(&r, &format!("\"{a2}\""))
        ),
    ];
    let mut n = 0;
    for l in lines {
        n += l.len() + 1;
        let _ = writeln!(w, "{l}");
    }
    *parent = r;
    n
}

fn codex_turn(w: &mut impl Write, s: usize, t: usize, total: &mut u64, big: usize) -> usize {
    let ts = turn_time("2026-01", s, t);
    let out = serde_json::to_string(&payload(big, t)).unwrap_or_default();
    *total += 50_000;
    let lines = [
        format!(
            r#"{{"timestamp":"{ts}","type":"turn_context","payload":{{"cwd":"/workspace/app","model":"gpt-5.2","approval_policy":"never","sandbox_policy":{{"type":"workspace-write"}}}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"user_message","message":"Run the tests for module {t}"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"Run the tests for module {t}"}}]}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"reasoning","summary":[{{"type":"summary_text","text":"Run cargo test."}}],"encrypted_content":"gAAAAB{t}"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call","name":"exec_command","arguments":"{{\"cmd\":\"cargo test m{t}\"}}","call_id":"call_{t}"}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{},"cached_input_tokens":{},"output_tokens":{},"reasoning_output_tokens":{},"total_tokens":{}}}}}}}}}"#,
            *total,
            *total / 2,
            *total / 10,
            *total / 50,
            *total + *total / 10
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call_output","call_id":"call_{t}","output":{out}}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"agent_message","message":"Module {t} passes."}}}}"#
        ),
        format!(
            r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"Module {t} passes."}}]}}}}"#
        ),
    ];
    let mut n = 0;
    for l in lines {
        n += l.len() + 1;
        let _ = writeln!(w, "{l}");
    }
    n
}

struct Tree {
    files: Vec<PathBuf>,
    bytes: u64,
    /// Per file: turns written and the last cumulative Codex token total.
    ends: Vec<(usize, u64)>,
}

/// Sessions of ~`session_mb` MB until `total_mb` MB.
fn generate(agent: Agent, root: &Path, total_mb: usize) -> Tree {
    let session_bytes = 4 << 20;
    let mut files = Vec::new();
    let mut ends = Vec::new();
    let mut bytes = 0u64;
    let mut s = 0usize;
    while bytes < (total_mb as u64) << 20 {
        let sid = format!("{:08x}-0000-4000-8000-{:012x}", s, s);
        let path = match agent {
            Agent::Codex => root.join(format!(
                "sessions/2026/01/{:02}/rollout-2026-01-02T03-04-05-{sid}.jsonl",
                1 + s % 28
            )),
            _ => root.join(format!("projects/-workspace-app-{}/{sid}.jsonl", s % 8)),
        };
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut w = BufWriter::new(fs::File::create(&path).unwrap());
        let mut n = 0usize;
        if agent == Agent::Codex {
            let meta = format!(
                r#"{{"timestamp":"2026-01-02T03:04:05.000Z","type":"session_meta","payload":{{"id":"{sid}","cwd":"/workspace/app","originator":"codex_cli_rs","cli_version":"0.150.0","source":"cli","model_provider":"openai"}}}}"#
            );
            n += meta.len() + 1;
            writeln!(w, "{meta}").unwrap();
        }
        let mut parent = String::new();
        let mut total = 0u64;
        let mut t = 0;
        while n < session_bytes {
            // Large tool results: mostly 8 KB, every 10th turn 200 KB.
            let big = if t % 10 == 9 { 200_000 } else { 8_000 };
            n += match agent {
                Agent::Codex => codex_turn(&mut w, s, t, &mut total, big),
                _ => claude_turn(&mut w, &sid, s, t, &mut parent, big),
            };
            t += 1;
        }
        w.flush().unwrap();
        bytes += n as u64;
        files.push(path);
        ends.push((t, total));
        s += 1;
    }
    Tree { files, bytes, ends }
}

/// Append ~1% of the tree's bytes to its newest sessions.
fn grow(agent: Agent, tree: &Tree) -> u64 {
    let target = tree.bytes / 100;
    let mut added = 0u64;
    for (s, path) in tree.files.iter().enumerate().rev() {
        if added >= target {
            break;
        }
        let mut w = fs::OpenOptions::new().append(true).open(path).unwrap();
        let sid = path.file_stem().unwrap().to_string_lossy().to_string();
        let (turns, mut total) = tree.ends[s];
        // The conversation goes on from its last entry.
        let mut parent = format!("r{}-{sid}", turns.saturating_sub(1));
        for t in turns..turns + 20 {
            added += match agent {
                Agent::Codex => codex_turn(&mut w, s, t, &mut total, 8_000),
                _ => claude_turn(&mut w, &sid, s, t, &mut parent, 8_000),
            } as u64;
        }
    }
    added
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

fn main() {
    let mb: usize = std::env::var("IMPORT_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let ccusage = std::env::var("CCUSAGE").ok();
    let mut comparisons = Vec::new();
    println!("| tree | MB | sessions | first import (wall / CPU) | MB/s wall / CPU | unchanged re-run | +1% re-run (wall / CPU) | peak RSS | memoir usage --by day | ccusage daily --json --offline |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for agent in [Agent::ClaudeCode, Agent::Codex] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let tree = generate(agent, &src, mb);
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
        let added = grow(agent, &tree);
        let (t2, c2) = (Instant::now(), cpu_s());
        let inc = import::import(&m, &sources, &mut |_| {}).unwrap();
        let (incremental, inc_cpu) = (t2.elapsed().as_secs_f64(), cpu_s() - c2);
        assert_eq!(inc.sessions.forked, 0);
        assert!(
            inc.bytes_read <= added,
            "the re-run read {} bytes for {added} appended",
            inc.bytes_read
        );
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
        let total_mb = tree.bytes as f64 / 1048576.0;
        println!(
            "| {} | {:.0} | {} | {:.2} s / {:.2} s | {:.0} / {:.0} | {:.3} s | {:.3} s / {:.3} s (+{:.1} MB) | {:.0} MB | {:.2} s | {} |",
            agent.as_str(),
            total_mb,
            tree.files.len(),
            first,
            first_cpu,
            total_mb / first,
            total_mb / first_cpu.max(0.01),
            unchanged,
            incremental,
            inc_cpu,
            added as f64 / 1048576.0,
            rss,
            usage_s,
            peer_cell
        );
        if let Some(Ok((theirs, _))) = peer {
            comparisons.push((agent, ours, theirs));
        }
    }
    for (agent, ours, theirs) in comparisons {
        println!();
        println!(
            "{} per day (input / output / cache read / cache write tokens, USD): memoir vs ccusage",
            agent.as_str()
        );
        println!();
        println!("| day | memoir | ccusage | same tokens |");
        println!("|---|---|---|---|");
        let days: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
        let cell = |d: Option<&(u64, u64, u64, u64, f64)>| match d {
            Some((i, o, r, w, c)) => format!("{i} / {o} / {r} / {w}, ${c:.2}"),
            None => "-".into(),
        };
        for day in days {
            let (a, b) = (ours.get(day), theirs.get(day));
            let same = matches!((a, b), (Some(x), Some(y)) if (x.0, x.1, x.2, x.3) == (y.0, y.1, y.2, y.3));
            println!(
                "| {day} | {} | {} | {} |",
                cell(a),
                cell(b),
                if same { "yes" } else { "no" }
            );
        }
    }
}
