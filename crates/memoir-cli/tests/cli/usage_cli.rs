//! `memoir usage`, `memoir prices` and `memoir sessions usage` as real
//! processes over a store written in the importers' shape: the table (wide
//! and narrow), JSON, CSV, blocks, unpriced models, price overrides.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use memoir::message::{Message, Usage, SOURCE_KEY};
use memoir::record::{ForkPoint, SessionMeta, SourceRef};
use memoir::store::file::FileStore;
use memoir::store::Durability;
use memoir::transcript::Session;
use serde_json::{json, Value};

fn memoir(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memoir"));
    // Days are dated in the local zone by default: pin it.
    c.env("MEMOIR_HOME", home)
        .env("TZ", "UTC")
        .env_remove("MEMOIR_SESSION_DIR")
        .env_remove("COLUMNS");
    c
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn response(id: &str, model: &str, when: &str, input: u64, output: u64, read: u64) -> Message {
    let mut m = Message::assistant("ok").with_usage(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_input_tokens: read,
        ..Usage::default()
    });
    m.provider_id = Some(id.into());
    m.model = Some(model.into());
    m.timestamp = Some(when.parse().unwrap());
    m.extra.insert(
        SOURCE_KEY.into(),
        json!({"request_id": format!("req_{id}")}),
    );
    m
}

fn meta(id: &str, agent: &str, created: &str) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.created_at = created.parse().unwrap();
    m.source = Some(SourceRef {
        agent: agent.into(),
        agent_version: None,
        session: None,
        path: None,
        extra: Default::default(),
    });
    m
}

/// A Claude Code session (one response repeated on a split line), a fork of
/// it, and a Codex session on an unpriced model.
fn fill(dir: &Path) {
    let store = Arc::new(FileStore::new(dir, Durability::None));
    let main = Session::create_in(
        store.clone(),
        meta("cc-main", "claude-code", "2026-05-12T09:00:00Z"),
    )
    .unwrap();
    main.append_messages(&[
        Message::user("hi"),
        response(
            "msg_1",
            "claude-sonnet-4-5",
            "2026-05-12T09:00:05Z",
            1000,
            100,
            0,
        ),
        response(
            "msg_1",
            "claude-sonnet-4-5",
            "2026-05-12T09:00:06Z",
            1000,
            100,
            0,
        ),
        response(
            "msg_2",
            "claude-sonnet-4-5",
            "2026-05-12T09:10:00Z",
            10,
            200,
            1000,
        ),
    ])
    .unwrap();
    let mut fork = meta("cc-fork", "claude-code", "2026-05-13T09:00:00Z");
    fork.parent = Some(ForkPoint {
        session: "cc-main".into(),
        seq: 4,
        messages: 4,
        parent_created_at: None,
    });
    let fork = Session::create_in(store.clone(), fork).unwrap();
    fork.append_messages(&[response(
        "msg_3",
        "claude-sonnet-4-5",
        "2026-05-13T09:00:10Z",
        20,
        20,
        0,
    )])
    .unwrap();
    let codex =
        Session::create_in(store, meta("codex-1", "codex", "2026-05-13T10:00:00Z")).unwrap();
    codex
        .append_messages(&[response(
            "resp_9",
            "brand-new-model",
            "2026-05-13T10:00:01Z",
            5,
            5,
            0,
        )])
        .unwrap();
}

#[test]
fn usage_table_json_csv_and_blocks() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let d = dir.path().to_str().unwrap();

    let json: Value = serde_json::from_str(&ok(memoir(home.path())
        .args(["usage", "--dir", d, "--by", "session", "--json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["total"]["requests"], 4);
    assert_eq!(json["total"]["input_tokens"], 1035);
    assert_eq!(json["total"]["cost_is_lower_bound"], true);
    let fork = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"]["session"] == "cc-fork")
        .unwrap();
    assert_eq!(fork["input_tokens"], 20);
    assert_eq!(fork["inherited"]["input_tokens"], 1010);

    // Wide table: every column, a totals row, unpriced shown as such.
    let table = ok(memoir(home.path())
        .args(["usage", "--dir", d, "--by", "day,agent", "--width", "200"])
        .output()
        .unwrap());
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("cache-read") && lines[0].contains("reasoning"),
        "{table}"
    );
    assert!(table.contains("2026-05-12  claude-code"), "{table}");
    assert!(table.contains("unpriced"), "{table}");
    let total = lines.iter().find(|l| l.starts_with("Total")).unwrap();
    assert!(total.contains("1,035") && total.contains(">=$"), "{table}");
    assert!(table.contains("cost is a lower bound"), "{table}");
    // Columns are aligned: every body line is as long as the header line or shorter
    // only by trailing flags.
    let header_len = lines[0].len();
    assert!(lines[2].len() >= header_len - 2, "{table}");

    // Narrow terminal: key, total, requests and cost only.
    let narrow = ok(memoir(home.path())
        .args(["usage", "--dir", d, "--by", "day"])
        .env("COLUMNS", "50")
        .output()
        .unwrap());
    let head = narrow.lines().next().unwrap();
    assert!(head.contains("total") && head.contains("cost"), "{narrow}");
    assert!(!head.contains("cache-read"), "{narrow}");
    let table_lines = narrow.lines().take_while(|l| !l.starts_with("Total"));
    assert!(
        table_lines.into_iter().all(|l| l.chars().count() <= 50),
        "{narrow}"
    );

    let csv = ok(memoir(home.path())
        .args(["usage", "--dir", d, "--by", "model", "--csv"])
        .output()
        .unwrap());
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("model,kind,input_tokens"), "{csv}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("brand-new-model,own,5,5,")),
        "{csv}"
    );
    assert!(rows.last().unwrap().starts_with(",total,1035,"), "{csv}");

    let blocks: Value = serde_json::from_str(&ok(memoir(home.path())
        .args(["usage", "--dir", d, "--blocks", "--json"])
        .output()
        .unwrap()))
    .unwrap();
    let blocks = blocks["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert_eq!(blocks[0]["start"], "2026-05-12T09:00:00Z");
    assert_eq!(blocks[0]["requests"], 2);

    // Filters.
    let since: Value = serde_json::from_str(&ok(memoir(home.path())
        .args([
            "usage",
            "--dir",
            d,
            "--since",
            "2026-05-13",
            "--agent",
            "claude-code",
            "--json",
        ])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(since["total"]["input_tokens"], 20);

    // sessions usage reads the same implementation: own and inherited apart.
    let one: Value = serde_json::from_str(&ok(memoir(home.path())
        .args(["sessions", "usage", "cc-fork", "--dir", d, "--json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(one["own"]["input_tokens"], fork["input_tokens"]);
    assert_eq!(one["inherited"]["input_tokens"], 1010);

    // Bad input: a clear error and exit 2.
    let bad = memoir(home.path())
        .args(["usage", "--dir", d, "--by", "fortnight"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown grouping"));
}

#[test]
fn usage_days_follow_the_time_zone() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let d = dir.path().to_str().unwrap();
    let days = |extra: &[&str], tz: &str| -> Vec<String> {
        let out = ok(memoir(home.path())
            .env("TZ", tz)
            .args(["usage", "--dir", d, "--by", "day", "--json"])
            .args(extra)
            .output()
            .unwrap());
        let v: Value = serde_json::from_str(&out).unwrap();
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["group"]["day"].as_str().unwrap().to_string())
            .collect()
    };
    // The last response (2026-05-13T10:00:01Z) is already 14 May at UTC+14.
    assert_eq!(
        days(&["--timezone", "UTC"], "Pacific/Kiritimati"),
        ["2026-05-12", "2026-05-13"]
    );
    assert_eq!(
        days(&["--timezone", "Pacific/Kiritimati"], "UTC"),
        ["2026-05-12", "2026-05-13", "2026-05-14"]
    );
    // The default is the local zone (TZ).
    assert_eq!(
        days(&[], "Pacific/Kiritimati"),
        ["2026-05-12", "2026-05-13", "2026-05-14"]
    );
    // --since is a day of that zone too: 14 May there holds one response.
    assert_eq!(
        days(
            &["--timezone", "Pacific/Kiritimati", "--since", "2026-05-14"],
            "UTC"
        ),
        ["2026-05-14"]
    );
    let bad = memoir(home.path())
        .args(["usage", "--dir", d, "--timezone", "Mars/Olympus"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("unknown time zone"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn prices_update_and_overrides() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let d = dir.path().to_str().unwrap();
    // A newer LiteLLM file the user downloaded, pricing the new model.
    let litellm = home.path().join("model_prices_and_context_window.json");
    std::fs::write(
        &litellm,
        json!({
            "brand-new-model": {"litellm_provider": "openai", "mode": "chat",
                "input_cost_per_token": 1e-3, "output_cost_per_token": 2e-3},
            "claude-sonnet-4-5": {"litellm_provider": "anthropic", "mode": "chat",
                "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
                "cache_read_input_token_cost": 3e-7}
        })
        .to_string(),
    )
    .unwrap();
    let out = ok(memoir(home.path())
        .args([
            "prices",
            "update",
            litellm.to_str().unwrap(),
            "--date",
            "2026-11-30",
        ])
        .output()
        .unwrap());
    assert!(out.contains("2 models"), "{out}");
    assert!(home.path().join("prices.json").is_file());
    let json: Value = serde_json::from_str(&ok(memoir(home.path())
        .args(["usage", "--dir", d, "--json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["total"]["cost_is_lower_bound"], false);
    assert_eq!(json["prices"]["date"], "2026-11-30");
    // 1035 in * 3e-6 (sonnet 1030) ... computed by hand:
    // sonnet: in 1030 * 3 + out 320 * 15 + read 1000 * 0.3 = 3090 + 4800 + 300 = 8190 µ$
    // new model: 5 * 1000 + 5 * 2000 = 15000 µ$
    let cost = json["total"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.02319).abs() < 1e-9, "{cost}");

    // config.toml [prices.models] lays a price over the table (USD per Mtok).
    std::fs::write(
        home.path().join("config.toml"),
        "[prices.models.\"brand-new-model\"]\ninput = 1.0\noutput = 1.0\n",
    )
    .unwrap();
    let json: Value = serde_json::from_str(&ok(memoir(home.path())
        .args(["usage", "--dir", d, "--json", "--model", "brand"])
        .output()
        .unwrap()))
    .unwrap();
    assert!((json["total"]["cost_usd"].as_f64().unwrap() - 10e-6).abs() < 1e-12);

    // --prices FILE wins over both; a broken file is an error, not $0.
    let broken = home.path().join("broken.json");
    std::fs::write(&broken, "{not json").unwrap();
    let bad = memoir(home.path())
        .args(["usage", "--dir", d, "--prices", broken.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("price table"));
}

/// The differential test against ccusage (`.ci/ccusage.sh`: generated Claude
/// Code trees, `memoir import` + `memoir usage` against `ccusage claude
/// session|daily --offline`, per session and per day), run on this build's
/// binary when `CCUSAGE_BIN` names a ccusage binary; skipped otherwise (CI
/// runs the script itself, which installs the pinned ccusage with npm).
#[test]
fn usage_matches_ccusage_on_generated_claude_code_trees() {
    let Some(ccusage) = std::env::var_os("CCUSAGE_BIN") else {
        eprintln!("skipped: set CCUSAGE_BIN to a ccusage binary to compare with it");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join(".ci/ccusage.sh"))
        .arg(env!("CARGO_BIN_EXE_memoir"))
        .env("CCUSAGE_BIN", ccusage)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "memoir and ccusage differ:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("agree on every session and day"),
        "{stdout}"
    );
}

/// A damaged usage summary is named once on stderr, by a report and by
/// `--blocks`, and the figures are those of the session logs.
#[test]
fn a_damaged_usage_summary_is_named_once_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let d = dir.path().to_str().unwrap();
    let run = |extra: &[&str]| {
        let out = memoir(home.path())
            .args(["usage", "--dir", d, "--json"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let json: Value = serde_json::from_str(&ok(out)).unwrap();
        (json, stderr)
    };
    let (clean, stderr) = run(&[]);
    assert_eq!(stderr, "", "a first report rebuilds silently");
    let (clean_blocks, _) = run(&["--blocks"]);
    let summary = dir.path().join("index").join(memoir::usage::SUMMARY_FILE);
    let damage = || {
        let mut bytes = std::fs::read(&summary).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x55;
        std::fs::write(&summary, bytes).unwrap();
    };
    for extra in [&[][..], &["--blocks"][..]] {
        damage();
        let (json, stderr) = run(extra);
        let named: Vec<&str> = stderr.lines().filter(|l| l.contains("damaged")).collect();
        assert_eq!(named.len(), 1, "{extra:?}: {stderr}");
        assert!(named[0].starts_with("memoir: ") && named[0].contains("usage.summary"));
        if extra.is_empty() {
            assert_eq!(json["total"], clean["total"]);
            assert_eq!(json["notices"].as_array().map(Vec::len), Some(1));
        } else {
            assert_eq!(json["blocks"], clean_blocks["blocks"]);
        }
        let (_, again) = run(extra);
        assert_eq!(again, "", "{extra:?}: rebuilt, nothing more to say");
    }
}
