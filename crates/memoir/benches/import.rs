//! Import throughput (issue 12): a generated Claude Code tree and a generated
//! Codex tree (shapes taken from `testdata/transcripts/`: split assistant
//! lines, tool calls with large results, duplicated Codex streams, cumulative
//! token counts), imported first, re-run unchanged, then re-run after 1%
//! growth (appended to the newest sessions, as live agents do). Prints MB/s,
//! seconds and peak RSS, and, when `CCUSAGE` names a `ccusage` binary, its
//! `daily --json --offline` time over the same trees.
//!
//! `IMPORT_BENCH_MB=200 CCUSAGE=/tmp/ccusage/node_modules/.bin/ccusage \
//!  cargo bench -p memoir --bench import`

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

fn claude_turn(w: &mut impl Write, sid: &str, t: usize, parent: &mut String, big: usize) -> usize {
    let ts = format!("2026-06-15T10:{:02}:{:02}.000Z", (t / 60) % 60, t % 60);
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

fn codex_turn(w: &mut impl Write, t: usize, total: &mut u64, big: usize) -> usize {
    let ts = format!("2026-01-02T03:{:02}:{:02}.000Z", (t / 60) % 60, t % 60);
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
}

/// Sessions of ~`session_mb` MB until `total_mb` MB.
fn generate(agent: Agent, root: &Path, total_mb: usize) -> Tree {
    let session_bytes = 4 << 20;
    let mut files = Vec::new();
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
                Agent::Codex => codex_turn(&mut w, t, &mut total, big),
                _ => claude_turn(&mut w, &sid, t, &mut parent, big),
            };
            t += 1;
        }
        w.flush().unwrap();
        bytes += n as u64;
        files.push(path);
        s += 1;
    }
    Tree { files, bytes }
}

/// Append ~1% of the tree's bytes to its newest sessions.
fn grow(agent: Agent, tree: &Tree) -> u64 {
    let target = tree.bytes / 100;
    let mut added = 0u64;
    for (k, path) in tree.files.iter().rev().enumerate() {
        if added >= target {
            break;
        }
        let mut w = fs::OpenOptions::new().append(true).open(path).unwrap();
        let sid = path.file_stem().unwrap().to_string_lossy().to_string();
        let mut parent = String::new();
        let mut total = 10_000_000u64;
        for t in 0..20 {
            added += match agent {
                Agent::Codex => codex_turn(&mut w, 100_000 + t + k, &mut total, 8_000),
                _ => claude_turn(&mut w, &sid, 100_000 + t, &mut parent, 8_000),
            } as u64;
        }
    }
    added
}

fn main() {
    let mb: usize = std::env::var("IMPORT_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let ccusage = std::env::var("CCUSAGE").ok();
    println!("| tree | MB | sessions | first import | MB/s | unchanged re-run | +1% re-run | peak RSS | ccusage daily --json --offline |");
    println!("|---|---|---|---|---|---|---|---|---|");
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
        let t0 = Instant::now();
        let r = import::import(&m, &sources, &mut |_| {}).unwrap();
        let first = t0.elapsed().as_secs_f64();
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
        let t2 = Instant::now();
        let inc = import::import(&m, &sources, &mut |_| {}).unwrap();
        let incremental = t2.elapsed().as_secs_f64();
        assert_eq!(inc.sessions.forked, 0);
        let peer = ccusage.as_ref().map(|bin| {
            let t = Instant::now();
            let mut cmd = std::process::Command::new(bin);
            cmd.args(["daily", "--json", "--offline"])
                .env("HOME", tmp.path());
            match agent {
                Agent::Codex => cmd
                    .env("CODEX_HOME", &src)
                    .env("CLAUDE_CONFIG_DIR", tmp.path().join("none")),
                _ => cmd
                    .env("CLAUDE_CONFIG_DIR", &src)
                    .env("CODEX_HOME", tmp.path().join("none")),
            };
            let ok = cmd.output().map(|o| o.status.success()).unwrap_or(false);
            format!(
                "{:.2} s{}",
                t.elapsed().as_secs_f64(),
                if ok { "" } else { " (failed)" }
            )
        });
        println!(
            "| {} | {:.0} | {} | {:.2} s | {:.0} | {:.3} s | {:.2} s (+{:.1} MB) | {:.0} MB | {} |",
            agent.as_str(),
            tree.bytes as f64 / 1048576.0,
            tree.files.len(),
            first,
            tree.bytes as f64 / 1048576.0 / first,
            unchanged,
            incremental,
            added as f64 / 1048576.0,
            peak_rss_mb(),
            peer.unwrap_or_else(|| "not run".into())
        );
    }
}
