//! `memoir ui` against agentsview on the same generated history: what a
//! user waits for in a browser, and what the server costs while it waits.
//!
//! ```text
//! memoir-bench ui --sessions N [--seed S] [--mb M] [--long-mb L] [--runs R]
//!                 [--memoir PATH] [--agentsview PATH|none] [--python PATH]
//!                 [--work DIR] [--keep]
//! ```
//!
//! 1. Writes a seeded Claude Code + Codex tree of N sessions
//!    (`memoir_testkit::corpus`, `--mb` in total, default N/50 MB) and plants
//!    one long Claude Code session (`--long-mb`, default 24 MB: about 10,000
//!    messages) in it.
//! 2. `memoir import claude …` and `memoir import codex …` into a fresh store
//!    (timed), then `memoir ui --dir store`.
//! 3. `agentsview serve` with `HOME` pointing at a home whose `.claude` and
//!    `.codex` are the same trees (its own sync, timed until its session
//!    count stops growing).
//! 4. `peers/ui_browser.py` (Playwright for Python driving Debian's
//!    `chromium`, the browser tests' pins) measures, for each: the first
//!    contentful paint and navigation → first visible session row (medians
//!    of R), the API requests made before
//!    it, the session-list request re-sent warm, and navigation → first
//!    visible message of the long session.
//! 5. Each server's resident memory after that (its process tree's VmRSS)
//!    and its CPU over 10 idle seconds (no page open).
//!
//! Python: `--python`, else `$MEMOIR_UI_PYTHON`, else a venv made once under
//! `~/.cache/memoir-ui-bench/` from `crates/memoir-server/tests/ui/requirements.txt`
//! (Playwright's own browsers are never downloaded). agentsview: `--agentsview`,
//! else `$MEMOIR_BENCH_AGENTSVIEW`, else `agentsview` on `PATH` (PyPI package
//! `agentsview`, a packaged binary); `--agentsview none` measures memoir alone.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{arg, args, num};
use memoir_testkit::corpus::{generate, AgentKind, CorpusSpec, Shapes};
use serde_json::{json, Value};

struct Opts {
    sessions: usize,
    seed: u64,
    mb: f64,
    long_mb: f64,
    runs: usize,
    memoir: PathBuf,
    agentsview: Option<PathBuf>,
    python: Option<PathBuf>,
    work: PathBuf,
    keep: bool,
}

fn opts() -> Opts {
    let sessions = num("--sessions", 1000);
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let agentsview =
        match arg("--agentsview").or_else(|| std::env::var("MEMOIR_BENCH_AGENTSVIEW").ok()) {
            Some(s) if s == "none" => None,
            Some(s) => Some(PathBuf::from(s)),
            None => which("agentsview"),
        };
    Opts {
        sessions,
        seed: num("--seed", 7) as u64,
        mb: arg("--mb")
            .and_then(|v| v.parse().ok())
            .unwrap_or((sessions as f64 / 50.0).max(10.0)),
        long_mb: arg("--long-mb")
            .and_then(|v| v.parse().ok())
            .unwrap_or(24.0),
        runs: num("--runs", 5),
        memoir: arg("--memoir")
            .map(PathBuf::from)
            .unwrap_or_else(|| exe_dir.join("memoir")),
        agentsview,
        python: arg("--python")
            .or_else(|| std::env::var("MEMOIR_UI_PYTHON").ok())
            .map(PathBuf::from),
        work: arg("--work")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join(format!("memoir-bench-ui-{sessions}"))),
        keep: args().any(|a| a == "--keep"),
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python with Playwright: given, or a venv made once from the browser
/// tests' pinned requirements.
fn python(opts: &Opts) -> PathBuf {
    if let Some(p) = &opts.python {
        return p.clone();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("memoir-ui-bench");
    let reqs = repo_root().join("crates/memoir-server/tests/ui/requirements.txt");
    let stamp = fnv_hex(&std::fs::read(&reqs).expect("requirements.txt"));
    let venv = cache.join(format!("venv-{}", &stamp[..16]));
    let py = venv.join("bin/python");
    if !py.is_file() {
        eprintln!("== installing playwright (pip) into {}", venv.display());
        std::fs::create_dir_all(&cache).expect("cache dir");
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&reqs)
                .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "could not install playwright into {}", venv.display());
    }
    py
}

fn fnv_hex(bytes: &[u8]) -> String {
    // A cache key for the venv (FNV-1a), not a security use.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The corpus and the long session planted in it: (claude home, codex home,
/// the long session's Claude Code id).
fn corpus(opts: &Opts) -> (PathBuf, PathBuf, String) {
    let root = opts.work.join("corpus");
    let spec = CorpusSpec {
        seed: opts.seed,
        sessions: opts.sessions,
        target_mb: opts.mb,
        ..CorpusSpec::default()
    };
    let t = Instant::now();
    generate(&spec, &root).expect("generate the corpus");
    // The long session: one plain Claude Code session of `long_mb` with
    // small tool results (many turns, many messages), moved into the tree.
    let long_root = opts.work.join("long");
    let shapes = Shapes {
        result_median: 300.0,
        ..Shapes::plain()
    };
    let long = CorpusSpec {
        seed: opts.seed.wrapping_add(1),
        sessions: 1,
        target_mb: opts.long_mb,
        max_session_mb: opts.long_mb * 2.0,
        agents: vec![AgentKind::ClaudeCode],
        shapes,
        ..CorpusSpec::default()
    };
    let manifest = generate(&long, &long_root).expect("generate the long session");
    let truth = manifest
        .sessions
        .iter()
        .find(|s| s.parent_session.is_none())
        .expect("a main session");
    let src = long_root.join(&truth.path);
    let projects = root.join("claude/projects/-bench-long-session");
    std::fs::create_dir_all(&projects).expect("mkdir");
    let name = src.file_name().expect("file name");
    std::fs::rename(&src, projects.join(name)).expect("plant the long session");
    let _ = std::fs::remove_dir_all(&long_root);
    println!(
        "corpus: {} sessions, {:.0} MB + one {:.0} MB session ({}), written in {:.1} s",
        opts.sessions,
        opts.mb,
        opts.long_mb,
        truth.session_id,
        t.elapsed().as_secs_f64()
    );
    (
        root.join("claude"),
        root.join("codex"),
        truth.session_id.clone(),
    )
}

/// The environment every child runs in: its own `HOME`, no store variables.
fn env_of(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home)
        .env("MEMOIR_HOME", home.join(".memoir"))
        .env_remove("MEMOIR_SESSION_DIR")
        .env_remove("MEMOIR_STORE")
        .env_remove("MEMOIR_REMOTE")
        .env_remove("MEMOIR_TOKEN")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME");
}

/// `memoir import` of both trees into `store`; seconds.
fn import(opts: &Opts, claude: &Path, codex: &Path, store: &Path, home: &Path) -> f64 {
    let t = Instant::now();
    for (agent, dir) in [("claude", claude), ("codex", codex)] {
        let mut cmd = Command::new(&opts.memoir);
        cmd.args(["import", agent])
            .arg(dir)
            .arg("--dir")
            .arg(store)
            .stdout(Stdio::null());
        env_of(&mut cmd, home);
        let ok = cmd.status().is_ok_and(|s| s.success());
        assert!(ok, "memoir import {agent} {} failed", dir.display());
    }
    t.elapsed().as_secs_f64()
}

/// A server under measurement; killed when dropped.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `memoir ui --dir store`: the server and the URL it printed.
fn start_memoir(opts: &Opts, store: &Path, home: &Path) -> (Server, String) {
    let mut cmd = Command::new(&opts.memoir);
    cmd.args(["ui", "--dir"])
        .arg(store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    env_of(&mut cmd, home);
    let mut child = cmd.spawn().expect("start memoir ui");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the URL");
    (Server { child }, line.trim().to_string())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// GET `url` from 127.0.0.1 (plain HTTP/1.1, no keep-alive): the body.
fn http_get(url: &str) -> Option<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // Join the chunks.
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 || tail.len() < n {
                break;
            }
            out.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
        return Some(out);
    }
    Some(body.to_string())
}

/// agentsview's session count (its API's `total`), when it answers.
fn agentsview_count(base: &str) -> Option<u64> {
    let body = http_get(&format!("{base}/api/v1/sessions?limit=1"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    v["total"].as_u64()
}

/// `agentsview serve` over the same trees (through `HOME`), once its sync
/// has settled: the server, its base URL, and the seconds until then.
fn start_agentsview(
    bin: &Path,
    claude: &Path,
    codex: &Path,
    work: &Path,
) -> Option<(Server, String, f64, u64)> {
    let home = work.join("agentsview-home");
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).ok()?;
    std::os::unix::fs::symlink(claude, home.join(".claude")).ok()?;
    std::os::unix::fs::symlink(codex, home.join(".codex")).ok()?;
    let port = free_port();
    let log = std::fs::File::create(work.join("agentsview.log")).ok()?;
    let t = Instant::now();
    let child = Command::new(bin)
        .args(["serve", "--no-browser", "--no-update-check", "--port"])
        .arg(port.to_string())
        .env("HOME", &home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .stdout(log.try_clone().ok()?)
        .stderr(log)
        .spawn()
        .ok()?;
    let server = Server { child };
    let base = format!("http://127.0.0.1:{port}");
    // Settled: the count answered and did not move for 5 s.
    let mut last = None;
    let mut still = Instant::now();
    loop {
        if t.elapsed() > Duration::from_secs(3600) {
            eprintln!("agentsview: no settled session count within an hour");
            return None;
        }
        std::thread::sleep(Duration::from_millis(500));
        let n = agentsview_count(&base);
        if n.is_some() && n != last {
            last = n;
            still = Instant::now();
        } else if n.is_some_and(|n| n > 0) && still.elapsed() > Duration::from_secs(5) {
            let ready = t.elapsed().as_secs_f64() - still.elapsed().as_secs_f64();
            return Some((server, base, ready, n.unwrap_or(0)));
        }
    }
}

/// The pids of `pid` and every descendant.
fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        let kids =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        out.extend(
            kids.split_whitespace()
                .filter_map(|k| k.parse::<u32>().ok()),
        );
        i += 1;
    }
    out
}

/// Resident memory of a process tree, MB.
fn rss_mb(pid: u32) -> f64 {
    tree(pid)
        .iter()
        .filter_map(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .ok()?
                .lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .sum::<f64>()
        / 1024.0
}

/// CPU seconds (user + system) of a process tree so far.
fn cpu_s(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    tree(pid)
        .iter()
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            // Fields after the command name (which may hold spaces).
            let rest = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let u: f64 = f.get(11)?.parse().ok()?;
            let s: f64 = f.get(12)?.parse().ok()?;
            Some((u + s) / tick)
        })
        .sum()
}

/// CPU share of one core over `secs` idle seconds, percent.
fn idle_cpu(pid: u32, secs: u64) -> f64 {
    let a = cpu_s(pid);
    std::thread::sleep(Duration::from_secs(secs));
    (cpu_s(pid) - a) / secs as f64 * 100.0
}

struct Measured {
    browser: Value,
    rss_mb: f64,
    idle_cpu_pct: f64,
}

fn browse(py: &Path, work: &Path, runs: usize, target: Value) -> Value {
    let cfg = json!({"chromium": "/usr/bin/chromium", "runs": runs, "targets": [target]});
    let path = work.join("browser.json");
    std::fs::write(&path, cfg.to_string()).expect("write the browser config");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/ui_browser.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(&path)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the browser");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        json!([{"error": format!("browser script failed: {}", String::from_utf8_lossy(&out.stdout))}])
    });
    v[0].clone()
}

fn measure(py: &Path, work: &Path, runs: usize, pid: u32, target: Value) -> Measured {
    let browser = browse(py, work, runs, target);
    if let Some(e) = browser.get("error") {
        println!("browser error: {e}");
    }
    let rss_mb = rss_mb(pid);
    let idle_cpu_pct = idle_cpu(pid, 10);
    Measured {
        browser,
        rss_mb,
        idle_cpu_pct,
    }
}

/// memoir's id of the session imported from Claude Code session `source`.
fn memoir_id_of(opts: &Opts, store: &Path, home: &Path, source: &str) -> Option<(String, u64)> {
    let mut cmd = Command::new(&opts.memoir);
    cmd.args(["sessions", "list", "--json", "--dir"]).arg(store);
    env_of(&mut cmd, home);
    let out = cmd.output().ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let list = v.as_array().or_else(|| v["sessions"].as_array())?;
    list.iter()
        .filter(|e| {
            e["source"]["session"].as_str() == Some(source)
                && e["source"]["extra"]["parent_session"].is_null()
        })
        .max_by_key(|e| e["messages"].as_u64().unwrap_or(0))
        .map(|e| {
            (
                e["id"].as_str().unwrap_or_default().to_string(),
                e["messages"].as_u64().unwrap_or(0),
            )
        })
}

fn ms(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn cell(x: Option<f64>, unit: &str) -> String {
    x.map_or("–".into(), |x| format!("{x:.0} {unit}"))
}

fn ratio(peer: Option<f64>, ours: Option<f64>) -> String {
    match (peer, ours) {
        (Some(p), Some(o)) if o > 0.0 => format!("{:.1}×", p / o),
        _ => "–".into(),
    }
}

pub fn main() {
    let opts = opts();
    let _ = std::fs::remove_dir_all(&opts.work);
    std::fs::create_dir_all(&opts.work).expect("work dir");
    let home = opts.work.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let py = python(&opts);
    println!(
        "# memoir-bench ui --sessions {} (seed {}, {} runs)\n",
        opts.sessions, opts.seed, opts.runs
    );
    let (claude, codex, long) = corpus(&opts);
    let store = opts.work.join("store");
    let import_s = import(&opts, &claude, &codex, &store, &home);
    println!("memoir import: {import_s:.1} s");
    let (long_id, long_messages) = memoir_id_of(&opts, &store, &home, &long).unwrap_or_default();
    println!("long session: memoir {long_id} ({long_messages} messages)");

    let mut ours = {
        let (server, url) = start_memoir(&opts, &store, &home);
        let base = url.split("/?").next().unwrap_or_default().to_string();
        let target = json!({
            "name": "memoir ui", "base": base, "login": url, "list_path": "/",
            "row": "table.sessions tbody tr", "list_api": r"/api/sessions\?",
            "session_path": format!("/s/{long_id}"), "message": "article.msg",
        });
        let m = measure(&py, &opts.work, opts.runs, server.child.id(), target);
        drop(server);
        m
    };
    ours.browser["ready_s"] = json!(0.0);
    let peer = opts.agentsview.as_ref().and_then(|bin| {
        let Some((server, base, ready, count)) = start_agentsview(bin, &claude, &codex, &opts.work)
        else {
            println!(
                "agentsview did not start (see {})",
                opts.work.join("agentsview.log").display()
            );
            return None;
        };
        println!("agentsview: {count} sessions synced in {ready:.1} s");
        // agentsview names a Claude Code session by its own id.
        let av_long = long.clone();
        let target = json!({
            "name": "agentsview", "base": base, "login": null, "list_path": "/",
            "row": ".session-item", "list_api": r"/api/v1/sessions/sidebar-index",
            "session_path": format!("/sessions/{av_long}"), "message": ".message",
        });
        let mut m = measure(&py, &opts.work, opts.runs, server.child.id(), target);
        m.browser["ready_s"] = json!(ready);
        Some(m)
    });

    println!(
        "\n| {} sessions | memoir ui | agentsview | agentsview / memoir |",
        opts.sessions
    );
    println!("|---|---:|---:|---:|");
    let p = |k: &str| peer.as_ref().and_then(|m| ms(&m.browser, k));
    let o = |k: &str| ms(&ours.browser, k);
    for (label, key, unit) in [
        ("first contentful paint (median)", "first_paint_ms", "ms"),
        (
            "navigation → first visible session row (median)",
            "first_row_ms",
            "ms",
        ),
        ("API requests before it", "api_calls_before_row", ""),
        ("session list request, warm (median)", "list_warm_ms", "ms"),
        (
            "open the long session → first message (median)",
            "session_first_message_ms",
            "ms",
        ),
    ] {
        println!(
            "| {label} | {} | {} | {} |",
            cell(o(key), unit),
            cell(p(key), unit),
            ratio(p(key), o(key))
        );
    }
    let (pr, pc) = (
        peer.as_ref().map(|m| m.rss_mb),
        peer.as_ref().map(|m| m.idle_cpu_pct),
    );
    println!(
        "| server RSS after load | {} | {} | {} |",
        cell(Some(ours.rss_mb), "MB"),
        cell(pr, "MB"),
        ratio(pr, Some(ours.rss_mb))
    );
    println!(
        "| idle CPU over 10 s | {:.2} % | {} | |",
        ours.idle_cpu_pct,
        pc.map_or("–".into(), |c| format!("{c:.2} %"))
    );
    println!(
        "| ready to serve after the history is written | import {import_s:.1} s | sync {} | |",
        p("ready_s").map_or("–".into(), |s| format!("{s:.1} s"))
    );
    println!("\nraw: memoir {}", ours.browser);
    if let Some(m) = &peer {
        println!("raw: agentsview {}", m.browser);
    }
    if !opts.keep {
        let _ = std::fs::remove_dir_all(&opts.work);
    }
}
