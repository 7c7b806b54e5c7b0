//! `memoir-corpus`: write a realistic Claude Code + Codex history tree and
//! its manifest.
//!
//! ```text
//! memoir-corpus --seed S --sessions N --mb M --out DIR [--agents claude,codex]
//!               [--grow FRACTION] [--plain|--dense] [--resume P] [--tool-rounds MEAN] [--result-median BYTES] [--max-session-mb MB] [--manifest FILE]
//! ```
//!
//! Claude Code's home is `DIR/claude`, Codex's `DIR/codex`; the manifest
//! (JSON) goes to `--manifest`, else `DIR/manifest.json`.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;
use std::process::ExitCode;

use memoir_testkit::corpus::{generate, AgentKind, CorpusSpec, Shapes};

const USAGE: &str = "usage: memoir-corpus --seed S --sessions N --mb M --out DIR [--agents claude,codex] [--grow FRACTION] [--plain|--dense] [--resume P] [--tool-rounds MEAN] [--result-median BYTES] [--max-session-mb MB] [--manifest FILE]";

fn parse(args: &[String]) -> Result<(CorpusSpec, PathBuf, Option<PathBuf>), String> {
    let mut spec = CorpusSpec::default();
    let mut out = None;
    let mut manifest = None;
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        if flag == "--plain" || flag == "--dense" {
            spec.shapes = if flag == "--plain" {
                Shapes::plain()
            } else {
                Shapes::dense()
            };
            i += 1;
            continue;
        }
        let value = args
            .get(i + 1)
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag {
            "--seed" => spec.seed = value.parse().map_err(|e| bad(&e))?,
            "--sessions" => spec.sessions = value.parse().map_err(|e| bad(&e))?,
            "--mb" => spec.target_mb = value.parse().map_err(|e| bad(&e))?,
            "--grow" => spec.grow = value.parse().map_err(|e| bad(&e))?,
            "--max-session-mb" => spec.max_session_mb = value.parse().map_err(|e| bad(&e))?,
            "--tool-rounds" => spec.shapes.tool_rounds = value.parse().map_err(|e| bad(&e))?,
            "--resume" => spec.shapes.resume = value.parse().map_err(|e| bad(&e))?,
            "--result-median" => spec.shapes.result_median = value.parse().map_err(|e| bad(&e))?,
            "--out" => out = Some(PathBuf::from(value)),
            "--manifest" => manifest = Some(PathBuf::from(value)),
            "--agents" => {
                spec.agents = value
                    .split(',')
                    .map(|a| match a.trim() {
                        "claude" | "claude-code" => Ok(AgentKind::ClaudeCode),
                        "codex" => Ok(AgentKind::Codex),
                        other => Err(format!("unknown agent {other:?} (claude, codex)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            _ => return Err(format!("unknown option {flag}")),
        }
        i += 2;
    }
    let out = out.ok_or("--out is required")?;
    Ok((spec, out, manifest))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let (spec, out, manifest_path) = match parse(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("memoir-corpus: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let manifest = match generate(&spec, &out) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("memoir-corpus: {e}");
            return ExitCode::FAILURE;
        }
    };
    let path = manifest_path.unwrap_or_else(|| out.join("manifest.json"));
    if let Err(e) = std::fs::write(&path, manifest.to_json()) {
        eprintln!("memoir-corpus: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!(
        "{} sessions, {:.1} MB ({:.1} MB written) under {}; manifest {}",
        manifest.sessions.len(),
        manifest.bytes as f64 / 1_048_576.0,
        manifest.bytes_written as f64 / 1_048_576.0,
        out.display(),
        path.display()
    );
    ExitCode::SUCCESS
}
