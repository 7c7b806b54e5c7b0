//! `memoir import` end to end: a Claude Code home given by
//! `CLAUDE_CONFIG_DIR`, the JSON summary, a no-op re-run, and the source
//! shown by `sessions list --json` / `sessions show --json`.

use std::path::Path;
use std::process::Command;

fn memoir(home: &Path, args: &[&str]) -> (bool, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
        .args(args)
        .env("HOME", home)
        .env("MEMOIR_HOME", home.join("memoir"))
        .env("CLAUDE_CONFIG_DIR", home.join("claude"))
        .env_remove("MEMOIR_SESSION_DIR")
        .current_dir(home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    (out.status.success(), json)
}

#[test]
fn import_claude_home_then_list_shows_the_source() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("claude/projects/-tmp");
    std::fs::create_dir_all(&project).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/transcripts/claude-code/dag_compact_after_rewind.jsonl");
    std::fs::copy(&fixture, project.join("dag_compact_after_rewind.jsonl")).unwrap();
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();

    let (ok, report) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{report}");
    assert_eq!(report["sessions"]["new"], 2, "{report}");
    assert_eq!(report["messages"], 11);
    let (ok, again) = memoir(tmp.path(), &["import", "--all", "--json", "--dir", dir]);
    assert!(ok);
    assert_eq!(again["records"], 0, "{again}");

    let (ok, list) = memoir(tmp.path(), &["sessions", "list", "--json", "--dir", dir]);
    assert!(ok);
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    for s in sessions {
        assert_eq!(s["source"]["agent"], "claude-code", "{s}");
        assert_eq!(s["source"]["session"], "s1");
        assert!(s["source"]["path"]
            .as_str()
            .unwrap()
            .ends_with("dag_compact_after_rewind.jsonl"));
    }
    let (ok, show) = memoir(
        tmp.path(),
        &[
            "sessions",
            "show",
            "cc-dag_compact_after_rewind",
            "--json",
            "--dir",
            dir,
        ],
    );
    assert!(ok);
    assert_eq!(show["meta"]["source"]["agent"], "claude-code");
    assert_eq!(show["messages"].as_array().unwrap().len(), 9);
}

/// A Claude Code home of `n` copies of a fixture session (each its own
/// session id), every fifth one with a 100 KB tool result (stored as a blob).
fn claude_home(home: &Path, n: usize) {
    let project = home.join("claude/projects/-work");
    std::fs::create_dir_all(&project).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/transcripts/claude-code/55550000-0000-4000-8000-000000000001.jsonl");
    let text = std::fs::read_to_string(fixture).unwrap();
    for i in 0..n {
        let sid = format!("{i:08}-0000-4000-8000-000000000001");
        let mut t = text.replace("55550000-0000-4000-8000-000000000001", &sid);
        if i % 5 == 0 {
            let big = serde_json::json!({
                "type": "user", "uuid": "big-1", "parentUuid": "sc-a5", "sessionId": sid,
                "timestamp": "2026-06-15T10:09:00.000Z", "cwd": "/work",
                "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_big", "content": "x".repeat(100_000)}
                ]}
            });
            t.push_str(&format!("{big}\n"));
        }
        std::fs::write(project.join(format!("{sid}.jsonl")), t).unwrap();
    }
}

/// Session id → its messages, as stored in `dir`.
fn stored(dir: &Path) -> Vec<(String, Vec<memoir::Message>)> {
    let m = memoir::manager::SessionManager::open(dir, Default::default()).unwrap();
    let mut ids: Vec<String> = m
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let t = m.read_stored(&id).unwrap();
            (id, t.messages)
        })
        .collect()
}

#[test]
fn an_import_killed_midway_resumes_without_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    claude_home(tmp.path(), 120);
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();
    // SIGKILL it at a few points (some may come after it finished).
    for delay_ms in [40u64, 150, 400] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memoir"))
            .args(["import", "claude", "--json", "--dir", dir])
            .env("HOME", tmp.path())
            .env("MEMOIR_HOME", tmp.path().join("memoir"))
            .env("CLAUDE_CONFIG_DIR", tmp.path().join("claude"))
            .env_remove("MEMOIR_SESSION_DIR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
    }
    let (ok, last) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok, "{last}");
    assert_eq!(last["sessions"]["forked"], 0, "{last}");
    let clean = tmp.path().join("clean");
    let (ok, _) = memoir(
        tmp.path(),
        &[
            "import",
            "claude",
            "--json",
            "--dir",
            clean.to_str().unwrap(),
        ],
    );
    assert!(ok);
    let (resumed, fresh) = (stored(&store), stored(&clean));
    assert_eq!(resumed.len(), 120);
    assert_eq!(
        resumed, fresh,
        "the killed-and-resumed store differs from a clean import"
    );
    let (ok, again) = memoir(tmp.path(), &["import", "claude", "--json", "--dir", dir]);
    assert!(ok);
    assert_eq!(again["records"], 0, "{again}");
}

/// What the caller named is not importable: a usage error (exit 2,
/// `bad_request` under `--json`), not an internal failure (exit 1).
#[test]
fn a_source_that_is_not_a_session_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let text = tmp.path().join("notes.txt");
    std::fs::write(&text, "just some notes\n").unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let dir = tmp.path().join("store");
    for target in [text.to_str().unwrap(), empty.to_str().unwrap()] {
        let out = Command::new(env!("CARGO_BIN_EXE_memoir"))
            .args(["import", target, "--json", "--dir", dir.to_str().unwrap()])
            .env("HOME", tmp.path())
            .env("MEMOIR_HOME", tmp.path().join("memoir"))
            .env_remove("MEMOIR_SESSION_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        let v: serde_json::Value = serde_json::from_str(stderr.trim()).unwrap();
        assert_eq!(v["error"], "bad_request", "{stderr}");
    }
}

/// How a bounded run of the CLI ended.
struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Peak resident memory of the process, in bytes.
    max_rss: u64,
}

/// Run `cmd` to its end, killing it (and failing the test) if it takes
/// longer than `limit`. Its peak memory is the last `VmHWM` (the kernel's
/// high-water mark of its resident set, which only grows) read from
/// `/proc/<pid>/status` while it runs.
fn run_bounded(cmd: &mut Command, limit: std::time::Duration) -> Finished {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status_file = format!("/proc/{}/status", child.id());
    let start = std::time::Instant::now();
    let mut max_rss = 0u64;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file) {
            let hwm = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(kb) = hwm {
                max_rss = max_rss.max(kb * 1024);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    let Some(status) = status else {
        panic!(
            "{cmd:?} still running after {limit:?} (killed)\nstdout: {stdout}\nstderr: {stderr}"
        );
    };
    Finished {
        code: status.code(),
        stdout,
        stderr,
        max_rss,
    }
}

fn memoir_cmd(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    c.env("HOME", home)
        .env("MEMOIR_HOME", home.join("memoir"))
        .env("CLAUDE_CONFIG_DIR", home.join("claude"))
        .env("CODEX_HOME", home.join("codex"))
        .env_remove("MEMOIR_SESSION_DIR")
        .current_dir(home);
    c
}

#[test]
fn special_files_are_skipped_with_a_note_never_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("rollout-2026-01-01T00-00-00-f.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let socket = tmp.path().join("session-s.jsonl");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let store = tmp.path().join("store");
    let dir = store.to_str().unwrap();
    for (path, kind) in [(&fifo, "fifo"), (&socket, "socket")] {
        let p = path.to_str().unwrap();
        for args in [
            vec!["import", p, "--dir", dir],
            vec!["import", "claude", p, "--dir", dir],
            vec!["import", "codex", p, "--json", "--dir", dir],
            vec!["import", "gemini", p, "--dir", dir],
        ] {
            let done = run_bounded(
                memoir_cmd(tmp.path()).args(&args),
                std::time::Duration::from_secs(60),
            );
            let said = format!("{}{}", done.stdout, done.stderr);
            assert!(
                said.contains(&format!("a {kind}, not a regular file")),
                "{args:?}: {said}"
            );
            assert!(done.code.is_some(), "{args:?}: {said}");
        }
    }
}

/// A zstd frame (128 KiB window) made of raw blocks (`Raw`) and runs of one
/// byte (`Run`, as RLE blocks of at most 128 KiB): a few bytes per 128 KiB
/// of output, so a file of some KiB expands to many GiB.
enum Part<'a> {
    Raw(&'a [u8]),
    Run(u8, u64),
}

fn zstd_frame(parts: &[Part]) -> Vec<u8> {
    const MAX_BLOCK: u64 = 128 << 10;
    let mut blocks: Vec<(u32, Vec<u8>, u32)> = Vec::new(); // (type, content, size)
    for part in parts {
        match part {
            Part::Raw(bytes) => {
                for chunk in bytes.chunks(MAX_BLOCK as usize) {
                    blocks.push((0, chunk.to_vec(), chunk.len() as u32));
                }
            }
            Part::Run(byte, mut n) => {
                while n > 0 {
                    let size = n.min(MAX_BLOCK);
                    blocks.push((1, vec![*byte], size as u32));
                    n -= size;
                }
            }
        }
    }
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38];
    let count = blocks.len();
    for (i, (kind, content, size)) in blocks.into_iter().enumerate() {
        let last = u32::from(i + 1 == count);
        let header = last | (kind << 1) | (size << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(&content);
    }
    out
}

#[cfg(target_os = "linux")]
#[test]
fn a_compressed_bomb_imports_in_bounded_memory_and_reports_long_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = br#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"00000000-0000-4000-8000-00000000b0b0","cwd":"/w"}}
"#;
    let gib = 1u64 << 30;
    // One line of 4 GiB, then one that reads.
    let one_line = zstd_frame(&[
        Part::Raw(meta),
        Part::Raw(br#"{"type":"event_msg","payload":{"type":"agent_message","message":""#),
        Part::Run(b'x', 4 * gib),
        Part::Raw(b"\"}}\n"),
        Part::Raw(br#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"after the long line"}}"#),
        Part::Raw(b"\n"),
    ]);
    // 3 GiB of lines of 1 MiB (each not JSON), then one that reads.
    let mut many: Vec<Part> = vec![Part::Raw(meta)];
    for _ in 0..3 * 1024 {
        many.push(Part::Run(b'y', 1 << 20));
        many.push(Part::Raw(b"\n"));
    }
    many.push(Part::Raw(br#"{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"after many lines"}}"#));
    many.push(Part::Raw(b"\n"));
    let many_lines = zstd_frame(&many);
    // The peak is read from /proc while the import runs.
    assert!(Path::new("/proc/self/status").exists(), "needs Linux /proc");
    for (name, bytes, expect) in [
        ("one-line", one_line, "after the long line"),
        ("many-lines", many_lines, "after many lines"),
    ] {
        assert!(bytes.len() < 256 << 10, "{name}: {} bytes", bytes.len());
        let file = tmp
            .path()
            .join(format!("rollout-2026-01-01T00-00-00-{name}.jsonl.zst"));
        std::fs::write(&file, &bytes).unwrap();
        let store = tmp.path().join(format!("store-{name}"));
        let done = run_bounded(
            memoir_cmd(tmp.path()).args([
                "import",
                file.to_str().unwrap(),
                "--json",
                "--dir",
                store.to_str().unwrap(),
            ]),
            std::time::Duration::from_secs(600),
        );
        assert_eq!(done.code, Some(0), "{name}: {}{}", done.stdout, done.stderr);
        assert!(
            done.max_rss < 300 << 20,
            "{name}: peak memory {} MB",
            done.max_rss >> 20
        );
        let report: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
        assert_eq!(report["messages"], 1, "{name}: {report}");
        let skipped = report["skipped"].as_array().unwrap();
        if name == "one-line" {
            assert_eq!(skipped.len(), 1, "{report}");
            assert_eq!(skipped[0]["line"], 2);
            assert!(skipped[0]["reason"]
                .as_str()
                .unwrap()
                .contains("line longer than"));
        } else {
            // Reported one by one up to a bound, then counted.
            let last = skipped.last().unwrap()["reason"].as_str().unwrap();
            assert!(last.contains("more bad lines skipped"), "{last}");
        }
        let show = memoir_cmd(tmp.path())
            .args([
                "sessions",
                "show",
                "cx-00000000-0000-4000-8000-00000000b0b0",
                "--json",
                "--dir",
                store.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&show.stdout);
        assert!(text.contains(expect), "{name}: {text}");
    }
}

/// Sources that grow while imports are killed: Claude Code files (some
/// responses split over two lines) and Codex rollouts, each line one text.
struct Growing {
    claude: Vec<(std::path::PathBuf, Vec<String>)>,
    codex: Vec<(std::path::PathBuf, String, Vec<String>)>,
}

impl Growing {
    fn new(home: &Path, files: usize) -> Growing {
        let project = home.join("claude/projects/-w");
        let rollouts = home.join("codex/sessions/2026/01/01");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&rollouts).unwrap();
        let claude = (0..files)
            .map(|k| (project.join(format!("s{k}.jsonl")), Vec::new()))
            .collect();
        let codex = (0..files)
            .map(|k| {
                let tid = format!("{k:08}-0000-4000-8000-00000000c0de");
                let path = rollouts.join(format!("rollout-2026-01-01T00-00-00-{tid}.jsonl"));
                let meta = serde_json::json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
                    "payload": {"id": tid, "cwd": "/w"}});
                std::fs::write(&path, format!("{meta}\n")).unwrap();
                (path, tid, Vec::new())
            })
            .collect();
        Growing { claude, codex }
    }

    /// Append about `n` lines to every source.
    fn grow(&mut self, n: usize) {
        use std::io::Write;
        for (k, (path, texts)) in self.claude.iter_mut().enumerate() {
            let mut out = String::new();
            for _ in 0..n {
                let i = texts.len();
                let uuid = format!("u{i}");
                let parent = (i > 0).then(|| format!("u{}", i - 1));
                let text = format!("claude {k} line {i}");
                // Lines 3 and 4 of every six are one response split in
                // two (the same message id): an import may end between them.
                let line = if matches!(i % 6, 0 | 2 | 5) {
                    serde_json::json!({"type": "user", "uuid": uuid, "parentUuid": parent,
                        "sessionId": format!("s{k}"), "timestamp": "2026-01-01T00:00:00Z",
                        "message": {"role": "user", "content": text}})
                } else {
                    let id = format!("msg{}", if i % 6 == 4 { i - 1 } else { i });
                    serde_json::json!({"type": "assistant", "uuid": uuid, "parentUuid": parent,
                        "sessionId": format!("s{k}"), "timestamp": "2026-01-01T00:00:00Z",
                        "message": {"id": id, "role": "assistant", "model": "m",
                            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}})
                };
                out.push_str(&format!("{line}\n"));
                texts.push(text);
            }
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .unwrap();
            f.write_all(out.as_bytes()).unwrap();
        }
        for (k, (path, _, texts)) in self.codex.iter_mut().enumerate() {
            let mut out = String::new();
            for _ in 0..n {
                let i = texts.len();
                let text = format!("codex {k} line {i}");
                let (role, kind) = if i % 2 == 0 {
                    ("user", "input_text")
                } else {
                    ("assistant", "output_text")
                };
                let line = serde_json::json!({"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
                    "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}});
                out.push_str(&format!("{line}\n"));
                texts.push(text);
            }
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
            f.write_all(out.as_bytes()).unwrap();
        }
    }
}

/// The texts of a session's messages, in order.
fn texts_of(store: &Path, id: &str) -> Vec<String> {
    let m = memoir::manager::SessionManager::open(store, Default::default()).unwrap();
    let raw = m.read_raw(id).unwrap();
    assert!(raw.report.is_clean(), "{id}: {:?}", raw.report);
    m.read_stored(id)
        .unwrap()
        .messages
        .iter()
        .flat_map(|msg| msg.content.iter())
        .filter_map(|b| match b {
            memoir::message::Block::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Every source text exactly once, in order (a short message when not).
fn assert_same_texts(got: &[String], want: &[String], what: &str) {
    let first_diff = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        got == want,
        "{what}: {} texts imported for {} in the source; first difference at {first_diff:?}: {:?}",
        got.len(),
        want.len(),
        first_diff.map(|i| (&got[i], &want[i]))
    );
}

#[test]
fn an_import_killed_at_any_moment_never_duplicates_on_the_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let store = home.join("store");
    let dir = store.to_str().unwrap();
    let mut sources = Growing::new(home, 4);
    let import = || {
        let mut c = memoir_cmd(home);
        c.args(["import", "--all", "--json", "--dir", dir])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    // Kills spread over an import's whole run: every fourth import runs to
    // its end and times the next ones, killed at 5%, 10%, ... 120% of it.
    let mut span = std::time::Duration::from_millis(300);
    let mut kills = 0;
    for round in 0..48u32 {
        sources.grow(40 + (round as usize * 17) % 50);
        let started = std::time::Instant::now();
        let mut child = import().spawn().unwrap();
        if round % 4 == 0 {
            assert!(child.wait().unwrap().success());
            span = started.elapsed();
            continue;
        }
        let fraction = f64::from((round * 7) % 24 + 1) / 20.0;
        std::thread::sleep(span.mul_f64(fraction));
        if child.try_wait().unwrap().is_none() {
            kills += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        kills >= 16,
        "only {kills} imports were killed while running"
    );
    let done = run_bounded(
        memoir_cmd(home).args(["import", "--all", "--json", "--dir", dir]),
        std::time::Duration::from_secs(300),
    );
    assert_eq!(done.code, Some(0), "{}{}", done.stdout, done.stderr);
    let report: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    assert_eq!(report["sessions"]["forked"], 0, "{report}");
    for (k, (_, texts)) in sources.claude.iter().enumerate() {
        assert_same_texts(&texts_of(&store, &format!("cc-s{k}")), texts, "claude");
    }
    for (_, tid, texts) in &sources.codex {
        assert_same_texts(&texts_of(&store, &format!("cx-{tid}")), texts, "codex");
    }
    let (listed, _) = memoir::manager::SessionManager::open(&store, Default::default())
        .unwrap()
        .store()
        .list()
        .unwrap();
    assert_eq!(
        listed.len(),
        8,
        "one session per source, no re-import forks"
    );
}
