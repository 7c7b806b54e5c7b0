//! Agent history at scale: what a user with thousands of Claude Code and
//! Codex sessions waits for, memoir beside the peers, in one run.
//!
//! ```text
//! memoir-bench history [--sessions N[,N...]] [--mb-per-session MB] [--seed S]
//!                      [--queries Q] [--runs R] [--memoir PATH] [--ccusage PATH]
//!                      [--dir DIR] [--machine NAME] [--keep]
//! memoir-bench history --appends N
//! ```
//!
//! The tree comes from `memoir-testkit`'s realistic generator (a lognormal
//! long tail of session sizes, subagents, parallel tool calls, resumed
//! files, compaction, `/btw` replays), `N` top-level sessions and
//! `N × MB` megabytes (default 0.25 MB a session). Every command runs as a
//! child process, as a user runs it: wall time on a monotonic clock, CPU
//! (user + system) and peak RSS from `wait4` of that child alone. Rows:
//!
//! - `memoir import --all`: first import, unchanged re-run, and a re-run
//!   after the generator appended 1% more bytes to the newest sessions;
//! - `memoir sessions list`, first after the import and warm;
//! - `memoir usage --json --by session|day|model` and `--blocks --agent
//!   claude-code`, against ccusage `session|daily|monthly|blocks --offline
//!   --json` (the version pinned in `.ci/ccusage.sh`; its blocks report
//!   reads Claude Code only), both over the same tree in UTC;
//! - `memoir index` (full), and `memoir search` over a fixed query set:
//!   each query names one prompt's unique reference tag (planted by the
//!   generator) and its first word, recall@10 = the tag is in the hits;
//!   beside it the baseline `grep -rlF TAG` over the raw tree.
//!
//! `--appends N` measures instead the cost of one append to a session of
//! up to N responses (its usage summary and listing entry kept current)
//! beside the bare log append.
//!
//! cass (`coding-agent-search`) is not measured: see [`CASS`]. The end of
//! the output repeats the headline figures as rows of the summary table
//! in `docs/BENCHMARKS.md` ("History at scale").

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use memoir_testkit::corpus::{generate, CorpusSpec, Manifest, SessionKind};
use memoir_testkit::Rng;

use crate::{arg, load_average, num, percentile};

/// The ccusage version CI pins (`.ci/ccusage.sh`), read from that script so
/// there is one pin.
fn ccusage_version() -> String {
    include_str!("../../../.ci/ccusage.sh")
        .lines()
        .find_map(|l| l.strip_prefix("CCUSAGE_VERSION="))
        .unwrap_or("20.0.24")
        .trim()
        .to_string()
}

/// Why cass is not in the table.
pub const CASS: &str = "cass (coding-agent-search 0.7.0, crates.io): not measured. Its packaged \
Cargo.lock holds 754 packages and pins vergen 10.0.3, which needs rustc 1.96 (this machine has \
1.95); upstream builds on nightly. A build was judged too long for this 2-core machine";

/// One child process, measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measure {
    /// Wall seconds (monotonic clock, spawn to reap).
    pub wall: f64,
    /// User + system CPU seconds of the child.
    pub cpu: f64,
    /// Peak resident set of the child, MB.
    pub rss_mb: f64,
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
}

/// Wait for `child` with `wait4`, returning its exit code and resource use.
/// The child must not have been waited for through `std`.
#[allow(unsafe_code)]
fn wait4(child: &std::process::Child) -> io::Result<(i32, libc::rusage)> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    loop {
        // SAFETY: `pid` is a child this process spawned and has not reaped
        // (`std` only reaps in `wait`/`try_wait`, which are never called on
        // it); `status` and `ru` are valid, exclusive pointers for the call,
        // and `ru` is plain integers, valid when zeroed.
        let r = unsafe { libc::wait4(pid, &mut status, 0, ru.as_mut_ptr()) };
        if r == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: zero-initialised above and filled by a successful wait4.
    let ru = unsafe { ru.assume_init() };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ok((code, ru))
}

/// The hidden subcommand of `memoir-bench` that spawns one measured child
/// (see [`trampoline`]).
pub const TRAMPOLINE: &str = "__measure";

/// The program [`measure`] spawns children through (set once by the
/// `memoir-bench` binary to itself).
static TRAMPOLINE_EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Spawn every measured child through `exe`'s [`TRAMPOLINE`] subcommand.
pub fn set_trampoline(exe: PathBuf) {
    let _ = TRAMPOLINE_EXE.set(exe);
}

/// Run `cmd` with stdout to `out` (when given) and stderr to `err`,
/// measured: through the trampoline set by [`set_trampoline`] when there
/// is one (see [`measure_via`]).
pub fn measure(cmd: &mut Command, out: Option<&Path>, err: &Path) -> io::Result<Measure> {
    measure_via(TRAMPOLINE_EXE.get().map(PathBuf::as_path), cmd, out, err)
}

/// Run `cmd` with stdout to `out` (when given) and stderr to `err`,
/// measured by `wait4`.
///
/// Linux copies a process's RSS high-water mark into a child it forks and
/// folds it into the child's peak at `exec`: a child forked by this
/// process (hundreds of MB after generating a corpus) reports at least
/// that much. With `trampoline` (the `memoir-bench` binary) the child is
/// forked by a fresh, small process instead, `memoir-bench __measure`,
/// which measures it and writes the figures to a file for this one; its
/// peak is then the child's own (plus the trampoline's few MB at fork).
/// Without, the child is forked and measured here.
pub fn measure_via(
    trampoline: Option<&Path>,
    cmd: &mut Command,
    out: Option<&Path>,
    err: &Path,
) -> io::Result<Measure> {
    let stdout = match out {
        Some(p) => Stdio::from(fs::File::create(p)?),
        None => Stdio::null(),
    };
    let stderr = Stdio::from(fs::File::create(err)?);
    let Some(trampoline) = trampoline else {
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
        return spawn_measured(cmd);
    };
    let result = tempfile::NamedTempFile::new()?;
    let mut t = Command::new(trampoline);
    t.arg(TRAMPOLINE)
        .arg(result.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        t.current_dir(d);
    }
    let status = t
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .status()?;
    let text = fs::read_to_string(result.path())?;
    let f: Vec<f64> = text
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    match f[..] {
        [code, wall, cpu, rss_mb] if status.success() => Ok(Measure {
            wall,
            cpu,
            rss_mb,
            code: code as i32,
        }),
        _ => Err(io::Error::other(format!(
            "{TRAMPOLINE} {}: {status}, result {text:?}",
            cmd.get_program().to_string_lossy()
        ))),
    }
}

/// Spawn `cmd` (its stdio set) and measure it with [`wait4`].
fn spawn_measured(cmd: &mut Command) -> io::Result<Measure> {
    let t = Instant::now();
    let child = cmd.spawn()?;
    let (code, ru) = wait4(&child)?;
    let wall = t.elapsed().as_secs_f64();
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Ok(Measure {
        wall,
        cpu: secs(ru.ru_utime) + secs(ru.ru_stime),
        rss_mb: ru.ru_maxrss as f64 / 1024.0,
        code,
    })
}

/// `memoir-bench __measure RESULT PROGRAM [ARGS...]`: run PROGRAM with this
/// process's stdio, environment and directory, and write `code wall cpu
/// peak-RSS-MB` to RESULT. Exits 0 when the figures were written (whatever
/// the child's exit code), 127 when PROGRAM could not be run.
pub fn trampoline(args: &[String]) -> std::process::ExitCode {
    let [result, program, rest @ ..] = args else {
        eprintln!("usage: memoir-bench {TRAMPOLINE} RESULT PROGRAM [ARGS...]");
        return std::process::ExitCode::from(2);
    };
    let measured = spawn_measured(Command::new(program).args(rest)).and_then(|m| {
        fs::write(
            result,
            format!("{} {} {} {}\n", m.code, m.wall, m.cpu, m.rss_mb),
        )
    });
    match measured {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memoir-bench {TRAMPOLINE}: {program}: {e}");
            std::process::ExitCode::from(127)
        }
    }
}

/// The median of several runs' measures (each field on its own).
fn median(ms: &[Measure]) -> Measure {
    let pick = |f: fn(&Measure) -> f64| {
        let mut v: Vec<f64> = ms.iter().map(f).collect();
        percentile(&mut v, 0.5)
    };
    Measure {
        wall: pick(|m| m.wall),
        cpu: pick(|m| m.cpu),
        rss_mb: pick(|m| m.rss_mb),
        code: ms.iter().map(|m| m.code).max().unwrap_or(0),
    }
}

/// Each file's size under `dir` (every file, at any depth).
fn sizes(dir: &Path) -> std::collections::BTreeMap<PathBuf, u64> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => {
                    out.insert(e.path(), m.len());
                }
                Err(_) => {}
            }
        }
    }
    out
}

/// Files and bytes under `dir`.
fn tree_stats(dir: &Path) -> (u64, u64) {
    let sizes = sizes(dir);
    (sizes.len() as u64, sizes.values().sum())
}

/// The ccusage binary: `--ccusage`, `$CCUSAGE`, else the pinned version
/// installed with npm under `work`. `Err` says why there is none.
fn ccusage(work: &Path) -> Result<PathBuf, String> {
    if let Some(p) = arg("--ccusage").or_else(|| std::env::var("CCUSAGE").ok()) {
        return Ok(PathBuf::from(p));
    }
    let version = ccusage_version();
    let prefix = work.join("npm");
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(format!("ccusage@{version}"))
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("npm: {e}"))?;
    if !status.success() {
        return Err(format!("npm install ccusage@{version}: {status}"));
    }
    // The launcher is a script; its native binary is what runs.
    let native = prefix.join("node_modules/@ccusage/ccusage-linux-x64/bin/ccusage");
    let bin = if native.exists() {
        native
    } else {
        prefix.join("node_modules/.bin/ccusage")
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = fs::set_permissions(&bin, fs::Permissions::from_mode(0o755));
    }
    Ok(bin)
}

/// The `memoir` binary: `--memoir`, else the one beside this executable.
fn memoir_bin() -> PathBuf {
    if let Some(p) = arg("--memoir") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    exe.with_file_name("memoir")
}

fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// A known-answer query: a prompt's reference tag and its first word.
struct Query {
    text: String,
    tag: String,
}

/// `q` queries over prompts of main and resumed sessions, seeded.
fn queries(m: &Manifest, q: usize, seed: u64) -> Vec<Query> {
    let pool: Vec<&String> = m
        .sessions
        .iter()
        .filter(|s| matches!(s.kind, SessionKind::Main | SessionKind::Resumed))
        .flat_map(|s| s.prompts.iter())
        .filter(|p| p.ends_with(')') && p.contains("(ref "))
        .collect();
    let mut rng = Rng::derive(seed, 0x5ea4c4);
    (0..q.min(pool.len()))
        .map(|_| {
            let p = pool[rng.below(pool.len())];
            let tag = p
                .rsplit_once("(ref ")
                .map(|(_, t)| t.trim_end_matches(')').to_string())
                .unwrap_or_default();
            let first = p.split_whitespace().next().unwrap_or("");
            Query {
                text: format!("{first} {tag}"),
                tag,
            }
        })
        .collect()
}

/// One printed row.
struct Row {
    name: String,
    memoir: Measure,
    memoir_note: String,
    peer: Option<(String, Measure)>,
}

fn fmt_s(s: f64) -> String {
    if s < 0.01 {
        format!("{:.1} ms", s * 1e3)
    } else if s < 10.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.1} s")
    }
}

fn print_table(rows: &[Row]) {
    println!("| step | memoir wall | CPU | peak RSS | | peer | wall | CPU | peak RSS | memoir ÷ peer, wall | memoir ÷ peer, CPU |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let m = &r.memoir;
        let (peer, pw, pc, pr, ratio, cpu_ratio) = match &r.peer {
            Some((name, p)) => (
                name.clone(),
                fmt_s(p.wall),
                fmt_s(p.cpu),
                format!("{:.0} MB", p.rss_mb),
                format!("**{:.2}×**", m.wall / p.wall.max(1e-9)),
                format!("{:.2}×", m.cpu / p.cpu.max(1e-9)),
            ),
            None => (
                "—".into(),
                String::new(),
                String::new(),
                String::new(),
                "—".into(),
                "—".into(),
            ),
        };
        println!(
            "| {} | {} | {} | {:.0} MB | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            fmt_s(m.wall),
            fmt_s(m.cpu),
            m.rss_mb,
            r.memoir_note,
            peer,
            pw,
            pc,
            pr,
            ratio,
            cpu_ratio
        );
    }
}

/// Run one size; returns its summary rows for `docs/BENCHMARKS.md`.
fn run_size(
    n: usize,
    root: &Path,
    memoir: &Path,
    cc: &Result<PathBuf, String>,
    opts: &Opts,
) -> Vec<String> {
    let _ = fs::remove_dir_all(root);
    let src = root.join("src");
    let store = root.join("store");
    let out = root.join("out");
    for d in [&src, &root.join("home"), &root.join("memoir-home"), &out] {
        fs::create_dir_all(d).expect("mkdir");
    }
    let spec = CorpusSpec {
        seed: opts.seed,
        sessions: n,
        target_mb: n as f64 * opts.mb_per_session,
        ..CorpusSpec::default()
    };
    let t = Instant::now();
    let manifest = generate(&spec, &src).expect("generate");
    let gen_s = t.elapsed().as_secs_f64();
    let (files, bytes) = tree_stats(&src);
    let mb = bytes as f64 / 1_048_576.0;
    let subagents = manifest
        .sessions
        .iter()
        .filter(|s| matches!(s.kind, SessionKind::Subagent | SessionKind::InlineSidechain))
        .count();
    let resumed = manifest
        .sessions
        .iter()
        .filter(|s| s.kind == SessionKind::Resumed)
        .count();
    let mut sorted: Vec<u64> = manifest.sessions.iter().map(|s| s.bytes).collect();
    sorted.sort_unstable();
    let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1024.0;
    println!(
        "\n## {n} sessions: {files} files, {mb:.0} MB (seed {}, generated in {gen_s:.1} s; \
         {subagents} subagents, {resumed} resumed files; source session sizes p50 {:.0} KB, \
         p90 {:.0} KB, p99 {:.0} KB, max {:.0} KB)\n",
        opts.seed,
        q(0.5),
        q(0.9),
        q(0.99),
        q(1.0)
    );

    let env = |c: &mut Command| {
        c.env("HOME", root.join("home"))
            .env("CLAUDE_CONFIG_DIR", src.join("claude"))
            .env("CODEX_HOME", src.join("codex"))
            .env("MEMOIR_HOME", root.join("memoir-home"))
            .env_remove("MEMOIR_SESSION_DIR")
            .env("TZ", "UTC")
            .current_dir(root.join("home"));
    };
    let err = out.join("stderr");
    let mem = |args: &[&str], stdout: Option<&Path>| -> Measure {
        let mut c = Command::new(memoir);
        c.args(args).arg("--dir").arg(&store);
        env(&mut c);
        let m = measure(&mut c, stdout, &err).expect("spawn memoir");
        if m.code != 0 {
            eprintln!(
                "memoir {}: exit {}\n{}",
                args.join(" "),
                m.code,
                fs::read_to_string(&err).unwrap_or_default()
            );
        }
        m
    };
    let peer = |args: &[&str], stdout: Option<&Path>| -> Option<Measure> {
        let bin = cc.as_ref().ok()?;
        let mut c = Command::new(bin);
        c.args(args);
        env(&mut c);
        let m = measure(&mut c, stdout, &err).ok()?;
        if m.code != 0 {
            eprintln!(
                "ccusage {}: exit {}\n{}",
                args.join(" "),
                m.code,
                fs::read_to_string(&err).unwrap_or_default()
            );
        }
        Some(m)
    };
    let runs = opts.runs;
    let repeat = |f: &dyn Fn() -> Measure| -> Measure {
        let v: Vec<Measure> = (0..runs).map(|_| f()).collect();
        median(&v)
    };

    let mut rows = Vec::new();
    let _ = Command::new("sync").status();
    let first = mem(
        &["import", "--all", "--json"],
        Some(&out.join("import.json")),
    );
    rows.push(Row {
        name: "first import (`import --all`)".into(),
        memoir: first,
        memoir_note: format!(
            "{:.0} MB/s wall, {:.0} MB/s CPU",
            mb / first.wall,
            mb / first.cpu.max(1e-9)
        ),
        peer: None,
    });
    let noop = repeat(&|| mem(&["import", "--all", "--json"], None));
    rows.push(Row {
        name: "re-import, nothing changed".into(),
        memoir: noop,
        memoir_note: String::new(),
        peer: None,
    });
    let before = sizes(&src);
    let grown = generate(
        &CorpusSpec {
            grow: 0.01,
            ..spec.clone()
        },
        &src,
    )
    .expect("grow");
    let after = sizes(&src);
    let touched = after
        .iter()
        .filter(|(p, len)| before.get(*p) != Some(*len))
        .count();
    let grow = mem(&["import", "--all", "--json"], None);
    rows.push(Row {
        name: "re-import after +1% (growth)".into(),
        memoir: grow,
        memoir_note: format!(
            "{:.1} MB appended to {touched} files",
            grown.bytes_written as f64 / 1_048_576.0
        ),
        peer: None,
    });
    let list_first = mem(
        &["sessions", "list", "--json"],
        Some(&out.join("list.json")),
    );
    let listed = fs::read_to_string(out.join("list.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .map(|v| match v {
            serde_json::Value::Array(a) => a.len(),
            v => v
                .get("sessions")
                .and_then(|s| s.as_array())
                .map_or(0, |a| a.len()),
        })
        .unwrap_or(0);
    rows.push(Row {
        name: "`sessions list`, first".into(),
        memoir: list_first,
        memoir_note: format!("{listed} sessions"),
        peer: None,
    });
    let list_warm = repeat(&|| mem(&["sessions", "list", "--json"], None));
    rows.push(Row {
        name: "`sessions list`, warm".into(),
        memoir: list_warm,
        memoir_note: String::new(),
        peer: None,
    });

    let cc_flags = ["--offline", "--json", "--timezone", "UTC"];
    let usage_rows: [(&str, &[&str], &str); 4] = [
        ("session", &["--by", "session"], "session"),
        ("day", &["--by", "day"], "daily"),
        ("model", &["--by", "model"], "monthly"),
        // ccusage's blocks report reads Claude Code only.
        ("blocks", &["--blocks", "--agent", "claude-code"], "blocks"),
    ];
    for (what, margs, cc_cmd) in usage_rows {
        let mut a = vec!["usage", "--json", "--timezone", "UTC"];
        a.extend_from_slice(margs);
        let m = repeat(&|| mem(&a, Some(&out.join(format!("usage-{what}.json")))));
        let mut pa = vec![cc_cmd];
        pa.extend_from_slice(&cc_flags);
        let p: Vec<Measure> = (0..runs)
            .filter_map(|_| peer(&pa, Some(&out.join(format!("ccusage-{cc_cmd}.json")))))
            .collect();
        rows.push(Row {
            name: format!("`usage {}`", margs.join(" ")),
            memoir: m,
            memoir_note: String::new(),
            peer: (!p.is_empty()).then(|| (format!("ccusage {cc_cmd}"), median(&p))),
        });
    }

    let index = mem(&["index", "--json"], Some(&out.join("index.json")));
    let index_mb = tree_stats(&store.join("search")).1 as f64 / 1_048_576.0;
    rows.push(Row {
        name: "`index` (full)".into(),
        memoir: index,
        memoir_note: format!("index {index_mb:.0} MB"),
        peer: None,
    });
    let qs = queries(&manifest, opts.queries, opts.seed);
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut rss: f64 = 0.0;
    let mut found = 0;
    let hits = out.join("search.json");
    for q in &qs {
        let m = mem(&["search", "--json", "-k", "10", &q.text], Some(&hits));
        walls.push(m.wall);
        cpus.push(m.cpu);
        rss = rss.max(m.rss_mb);
        // The hits (not the echoed query) hold the planted tag.
        let in_hits = fs::read_to_string(&hits)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .is_some_and(|v| v["hits"].to_string().contains(&q.tag));
        if in_hits {
            found += 1;
        }
    }
    let mut gwalls = Vec::new();
    let mut gcpus = Vec::new();
    let mut grss: f64 = 0.0;
    for q in &qs {
        let mut c = Command::new("grep");
        c.args(["-rlF", &q.tag]).arg(&src);
        if let Ok(m) = measure(&mut c, None, &err) {
            gwalls.push(m.wall);
            gcpus.push(m.cpu);
            grss = grss.max(m.rss_mb);
        }
    }
    let nq = qs.len().max(1);
    let recall = found as f64 / nq as f64;
    for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
        rows.push(Row {
            name: format!("`search` {label} ({} queries)", qs.len()),
            memoir: Measure {
                wall: percentile(&mut walls.clone(), p),
                cpu: percentile(&mut cpus.clone(), p),
                rss_mb: rss,
                code: 0,
            },
            memoir_note: format!("recall@10 {recall:.3}"),
            peer: (!gwalls.is_empty()).then(|| {
                (
                    "baseline `grep -rlF TAG` (raw tree)".to_string(),
                    Measure {
                        wall: percentile(&mut gwalls.clone(), p),
                        cpu: percentile(&mut gcpus.clone(), p),
                        rss_mb: grss,
                        code: 0,
                    },
                )
            }),
        });
    }
    print_table(&rows);
    println!(
        "\nPeak RSS of `search` rows is the largest of the queries'. Every child is forked by a \
         small trampoline (`memoir-bench {TRAMPOLINE}`), not by this bench, so its peak RSS is its \
         own. Usage and list rows are medians of {runs} runs. Load average after this size: {}.",
        load_average()
    );

    // Summary rows (docs/BENCHMARKS.md, "History at scale").
    let cmd = format!(
        "`memoir-bench history --sessions {n}{}`",
        if opts.mb_per_session == 0.25 {
            String::new()
        } else {
            format!(" --mb-per-session {}", opts.mb_per_session)
        }
    );
    let by = |name: &str| rows.iter().find(|r| r.name.starts_with(name));
    let mut out_rows = Vec::new();
    let mut push = |what: String, memoir: String, peer: String, ratio: String| {
        out_rows.push(format!(
            "| {what} | {memoir} | {peer} | {ratio} | {cmd} | `{}` | {} |",
            opts.commit, opts.machine
        ));
    };
    let label = format!("{n} sessions, {mb:.0} MB");
    push(
        format!("first import, {label}"),
        format!(
            "{} wall, {} CPU, {:.0} MB/s, {:.0} MB RSS",
            fmt_s(first.wall),
            fmt_s(first.cpu),
            mb / first.wall,
            first.rss_mb
        ),
        "— (ccusage keeps no store; cass not built)".into(),
        "—".into(),
    );
    push(
        format!("re-import unchanged / +1%, {label}"),
        format!("{} / {}", fmt_s(noop.wall), fmt_s(grow.wall)),
        "—".into(),
        "—".into(),
    );
    push(
        format!("`sessions list` first / warm, {label}"),
        format!("{} / {}", fmt_s(list_first.wall), fmt_s(list_warm.wall)),
        "—".into(),
        "—".into(),
    );
    for r in rows.iter().filter(|r| r.name.starts_with("`usage")) {
        if let Some((pn, p)) = &r.peer {
            push(
                format!("{}, {label}", r.name),
                format!(
                    "{} wall, {} CPU, {:.0} MB RSS",
                    fmt_s(r.memoir.wall),
                    fmt_s(r.memoir.cpu),
                    r.memoir.rss_mb
                ),
                format!(
                    "{pn}: {} wall, {} CPU, {:.0} MB RSS",
                    fmt_s(p.wall),
                    fmt_s(p.cpu),
                    p.rss_mb
                ),
                format!(
                    "{:.2}× wall, {:.2}× CPU",
                    r.memoir.wall / p.wall.max(1e-9),
                    r.memoir.cpu / p.cpu.max(1e-9)
                ),
            );
        }
    }
    if let Some(r) = by("`index`") {
        push(
            format!("`index` (full), {label}"),
            format!(
                "{}, {:.0} MB RSS, {}",
                fmt_s(r.memoir.wall),
                r.memoir.rss_mb,
                r.memoir_note
            ),
            "— (cass not built)".into(),
            "—".into(),
        );
    }
    if let (Some(p50), Some(p99)) = (by("`search` p50"), by("`search` p99")) {
        let peer = match (&p50.peer, &p99.peer) {
            (Some((_, a)), Some((_, b))) => {
                format!("`grep -rlF`: {} / {}", fmt_s(a.wall), fmt_s(b.wall))
            }
            _ => "—".into(),
        };
        let ratio = match &p50.peer {
            Some((_, a)) => format!("{:.2}× (p50)", p50.memoir.wall / a.wall.max(1e-9)),
            None => "—".into(),
        };
        push(
            format!("`search` p50 / p99, {label}"),
            format!(
                "{} / {}, {}",
                fmt_s(p50.memoir.wall),
                fmt_s(p99.memoir.wall),
                p50.memoir_note
            ),
            peer,
            ratio,
        );
    }
    if !opts.keep {
        let _ = fs::remove_dir_all(root);
    }
    out_rows
}

struct Opts {
    seed: u64,
    mb_per_session: f64,
    queries: usize,
    runs: usize,
    keep: bool,
    commit: String,
    machine: String,
}

/// The cost of one append to a long session, as the session grows: the
/// manager's append (`append_records_to`: the log, then the session's usage
/// summary and listing entry kept current) beside the bare log append
/// (`Session::append_records`, nothing derived) in the same store, one
/// assistant response with usage per append, no fsync. Rows are the
/// medians of the `window` appends before each size.
fn appends(n: usize) {
    use memoir::manager::{ManagerOptions, SessionManager};
    use memoir::message::{Message, Usage};
    use memoir::record::{Record, SessionMeta};
    use memoir::store::Durability;
    use memoir::transcript::Session;

    let tmp = tempfile::tempdir().expect("tempdir");
    let store_dir = tmp.path().join("store");
    let m = SessionManager::open(
        &store_dir,
        ManagerOptions {
            durability: Durability::None,
            ..ManagerOptions::default()
        },
    )
    .expect("open store");
    for id in ["summarised", "bare"] {
        m.create_with_header(SessionMeta::new(id)).expect("create");
    }
    let bare = Session::open_in(m.store(), "bare").expect("open");
    let response = |i: usize| {
        let mut msg = Message::assistant(format!("response {i}: done, tests pass"));
        msg.model = Some("claude-sonnet-4-5".into());
        msg.provider_id = Some(format!("msg_{i:08}"));
        msg.usage = Some(Usage {
            input_tokens: 3 + i as u64 % 7,
            output_tokens: 120 + i as u64 % 300,
            cache_read_input_tokens: 20_000 + i as u64,
            cache_creation_input_tokens: 400,
            ..Usage::default()
        });
        [Record::Message(msg)]
    };
    let window = 200;
    let mut marks: Vec<usize> = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000]
        .into_iter()
        .filter(|&k| k <= n)
        .collect();
    if marks.last() != Some(&n) {
        marks.push(n);
    }
    println!("\n## One append to a long session (usage summary kept current)\n");
    println!("| responses in the session | `append_records_to` p50 | summary file | bare log append p50 | ratio |");
    println!("|---|---|---|---|---|");
    let (mut managed, mut raw) = (Vec::new(), Vec::new());
    for i in 0..n {
        let records = response(i);
        let t = Instant::now();
        m.append_records_to("summarised", &records).expect("append");
        managed.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        bare.append_records(&records).expect("append");
        raw.push(t.elapsed().as_secs_f64());
        if marks.contains(&(i + 1)) {
            let from = (i + 1).saturating_sub(window);
            let a = percentile(&mut managed[from..].to_vec(), 0.5);
            let b = percentile(&mut raw[from..].to_vec(), 0.5);
            let summary = fs::metadata(
                store_dir
                    .join("index")
                    .join(memoir::usage::SESSION_DIR)
                    .join("summarised.usage"),
            )
            .map_or(0, |m| m.len());
            println!(
                "| {} | {:.0} µs | {:.0} KB | {:.0} µs | {:.1}× |",
                i + 1,
                a * 1e6,
                summary as f64 / 1024.0,
                b * 1e6,
                a / b.max(1e-12)
            );
        }
    }
    println!("\nLoad average: {}.", load_average());
}

/// Run the benchmark.
pub fn main() {
    if let Some(n) = arg("--appends").and_then(|v| v.parse().ok()) {
        appends(n);
        return;
    }
    let sizes: Vec<usize> = arg("--sessions")
        .unwrap_or_else(|| "1000".into())
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .collect();
    let opts = Opts {
        seed: num("--seed", 7) as u64,
        mb_per_session: arg("--mb-per-session")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.25),
        queries: num("--queries", 50).max(1),
        runs: num("--runs", 3).max(1),
        keep: crate::args().any(|a| a == "--keep"),
        commit: commit(),
        machine: arg("--machine").unwrap_or_else(|| "xeon2".into()),
    };
    let memoir = memoir_bin();
    if !memoir.exists() {
        eprintln!(
            "memoir-bench history: no memoir binary at {} (build it: cargo build --release -p memoir-cli, or pass --memoir PATH)",
            memoir.display()
        );
        std::process::exit(2);
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = arg("--dir").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from);
    fs::create_dir_all(&base).expect("mkdir --dir");
    let cc = ccusage(&base);
    let cc_version = cc
        .as_ref()
        .ok()
        .and_then(|b| Command::new(b).arg("--version").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!(
        "# History at scale\n\nmemoir {} (commit `{}`), ccusage {}, machine {}, {} CPUs, load average {} at the start.\n\
         Sessions of {} MB on average (lognormal long tail), seed {}; every figure is one child process \
         (wall: monotonic clock; CPU and peak RSS: `wait4`).\n",
        memoir.display(),
        opts.commit,
        match &cc {
            Ok(_) => cc_version,
            Err(e) => format!("not measured ({e})"),
        },
        opts.machine,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        opts.mb_per_session,
        opts.seed
    );
    println!("{CASS}.");
    let mut summary = Vec::new();
    for &n in &sizes {
        summary.extend(run_size(
            n,
            &base.join(format!("hist-{n}")),
            &memoir,
            &cc,
            &opts,
        ));
    }
    println!("\n## Rows for docs/BENCHMARKS.md (History at scale)\n");
    println!(
        "| measurement | memoir | peer | ratio (memoir ÷ peer) | command | commit | machine |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in summary {
        println!("{r}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Measure {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        measure(&mut c, None, &dir.path().join("err")).unwrap()
    }

    #[test]
    fn wait4_reports_the_exit_code_and_each_childs_own_peak() {
        assert_eq!(sh("exit 3").code, 3);
        assert_eq!(sh("kill -9 $$").code, -1);
        // 64 MB written by the child: its peak RSS holds them.
        let big = sh("python3 -c 'b = b\"x\" * (64 << 20); print(len(b))'");
        assert_eq!(big.code, 0);
        assert!(big.rss_mb >= 64.0, "{big:?}");
        assert!(big.cpu > 0.0, "{big:?}");
        // A small child after it reports its own peak, not the largest
        // child's so far (which getrusage(RUSAGE_CHILDREN) would).
        let small = sh("exit 0");
        assert!(small.rss_mb < 32.0, "{small:?}");
    }

    #[test]
    fn queries_name_planted_tags_of_the_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let spec = CorpusSpec {
            seed: 3,
            sessions: 12,
            target_mb: 1.0,
            ..CorpusSpec::default()
        };
        let m = generate(&spec, dir.path()).unwrap();
        let qs = queries(&m, 5, 3);
        assert_eq!(qs.len(), 5);
        for q in &qs {
            assert!(!q.tag.is_empty() && q.text.ends_with(&q.tag), "{}", q.text);
            let (files, _) = tree_stats(dir.path());
            assert!(files > 0);
            // The tag is written in the tree.
            let out = Command::new("grep")
                .args(["-rlF", &q.tag])
                .arg(dir.path())
                .output()
                .unwrap();
            assert!(!out.stdout.is_empty(), "{} not in the tree", q.tag);
        }
    }
}
