//! Usage summaries (`memoir::usage`'s per-session summaries of a file
//! store): every report read from them equals the same report computed by
//! reading every session log, on a realistic generated store imported with
//! the importer; a changed log invalidates exactly its session's summary; a
//! damaged summary file is rebuilt with a notice; appends keep them current;
//! a response two sessions hold is still counted once.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use memoir::import::{self, Agent};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::{Message, Usage, SOURCE_KEY};
use memoir::record::{Record, SessionMeta, SourceRef};
use memoir::store::file::FileStore;
use memoir::store::{Appended, Durability, Listed, LogStore, RawLog};
use memoir::usage::{self, GroupKey, PriceTable, UsageQuery, UsageReport, Zone};
use memoir_testkit::corpus::{generate, home_dir, AgentKind, CorpusSpec, Shapes};
use serde_json::json;

/// The file store seen without its summaries: every report reads every log.
#[derive(Debug)]
struct Scan(Arc<FileStore>);

impl LogStore for Scan {
    fn create(&self, meta: &SessionMeta) -> memoir::Result<Appended> {
        self.0.create(meta)
    }
    fn append(
        &self,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
    ) -> memoir::Result<Appended> {
        self.0.append(id, records, expected_next)
    }
    fn read(&self, id: &str) -> memoir::Result<RawLog> {
        self.0.read(id)
    }
    fn read_header(&self, id: &str) -> memoir::Result<Option<SessionMeta>> {
        self.0.read_header(id)
    }
    fn list(&self) -> memoir::Result<(Vec<Listed>, usize)> {
        self.0.list()
    }
    fn location(&self, id: &str) -> PathBuf {
        self.0.location(id)
    }
    fn durability(&self) -> Durability {
        self.0.durability()
    }
    fn read_deleted(&self, id: &str) -> memoir::Result<RawLog> {
        self.0.read_deleted(id)
    }
}

fn prices() -> PriceTable {
    PriceTable::shipped().unwrap()
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Every grouping, in zones with whole, half- and quarter-hour offsets, with
/// and without a time range and a model filter.
fn queries() -> Vec<UsageQuery> {
    let mut out = Vec::new();
    let zones: [Zone; 3] = [
        Zone::Utc,
        "Asia/Kolkata".parse().unwrap(),
        "Australia/Eucla".parse().unwrap(),
    ];
    let groupings: [&[GroupKey]; 8] = [
        &[],
        &[GroupKey::Session],
        &[GroupKey::Day],
        &[GroupKey::Week],
        &[GroupKey::Month],
        &[GroupKey::Model],
        &[GroupKey::Project],
        &[GroupKey::Day, GroupKey::Model, GroupKey::Agent],
    ];
    for zone in zones {
        for g in groupings {
            out.push(UsageQuery {
                group_by: g.to_vec(),
                timezone: zone,
                ..UsageQuery::default()
            });
        }
    }
    out.push(UsageQuery {
        group_by: vec![GroupKey::Day],
        since: Some(at("2026-01-01T00:00:00Z")),
        until: Some(at("2027-01-01T00:00:00Z")),
        model: Some("sonnet".into()),
        ..UsageQuery::default()
    });
    out
}

/// Every report (and the billing blocks) from the summaries equals the scan's.
fn assert_same_as_scan(store: &Arc<FileStore>) -> Vec<UsageReport> {
    let scan = Scan(store.clone());
    let prices = prices();
    let now = at("2030-01-01T00:00:00Z");
    let mut reports = Vec::new();
    for q in queries() {
        let summed = usage::report(store.as_ref(), &q, &prices).unwrap();
        let scanned = usage::report(&scan, &q, &prices).unwrap();
        assert_eq!(summed, scanned, "{:?} in {}", q.group_by, q.timezone);
        let blocks = usage::blocks_report(store.as_ref(), &q, &prices, now).unwrap();
        let scanned = usage::blocks_report(&scan, &q, &prices, now).unwrap();
        assert_eq!(blocks, scanned, "blocks in {}", q.timezone);
        reports.push(summed);
    }
    reports
}

/// A generated Claude Code + Codex history imported into a fresh store.
fn imported(seed: u64) -> (tempfile::TempDir, Arc<FileStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    generate(
        &CorpusSpec {
            seed,
            sessions: 6,
            target_mb: 0.3,
            shapes: Shapes {
                result_median: 200.0,
                tool_rounds: 1.2,
                ..Shapes::dense()
            },
            max_session_mb: 0.1,
            ..CorpusSpec::default()
        },
        &root,
    )
    .unwrap();
    let dir = tmp.path().join("store");
    let m = SessionManager::open(
        &dir,
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    let mut sources = Vec::new();
    for (agent, kind) in [
        (Agent::ClaudeCode, AgentKind::ClaudeCode),
        (Agent::Codex, AgentKind::Codex),
    ] {
        let home = root.join(home_dir(kind));
        if home.exists() {
            sources.extend(import::sources_of(agent, Some(&home)).unwrap());
        }
    }
    import::import(&m, &sources, &mut |_| {}).unwrap();
    drop(m);
    let store = Arc::new(FileStore::new(&dir, Durability::None));
    (tmp, store)
}

fn summary_file(store_dir: &Path) -> PathBuf {
    store_dir.join("index").join(usage::SUMMARY_FILE)
}

fn session_file(store_dir: &Path, id: &str) -> PathBuf {
    store_dir
        .join("index")
        .join(usage::SESSION_DIR)
        .join(format!("{id}.usage"))
}

fn log(store_dir: &Path, id: &str) -> PathBuf {
    store_dir.join(format!("{id}.jsonl"))
}

/// Sessions with at least `n` usage-bearing records, by id.
fn sessions_with_usage(store: &FileStore, n: usize) -> Vec<String> {
    let (listed, _) = store.list().unwrap();
    let mut ids: Vec<String> = listed
        .into_iter()
        .filter(|l| {
            let raw = store.read(&l.meta.id).unwrap();
            raw.records
                .iter()
                .filter(|r| matches!(&r.record, Record::Message(m) if m.usage.is_some()))
                .count()
                >= n
        })
        .map(|l| l.meta.id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn summaries_written_by_import_give_every_report_of_a_full_scan() {
    for seed in [4, 13] {
        let (tmp, store) = imported(seed);
        let dir = tmp.path().join("store");
        let (listed, _) = store.list().unwrap();
        assert!(listed.len() >= 6, "seed {seed}: {} sessions", listed.len());
        // The import wrote each session's summary as it appended, and the
        // store-wide file at its end; without the latter, a report reads
        // the sessions' files instead of the logs.
        assert!(summary_file(&dir).exists());
        fs::remove_file(summary_file(&dir)).unwrap();
        let first = usage::refresh(store.as_ref()).unwrap();
        assert_eq!(first.sessions, listed.len(), "seed {seed}");
        assert_eq!(first.recomputed, 0, "seed {seed}: {first:?}");
        assert_eq!(first.from_appends, listed.len(), "seed {seed}");
        assert!(summary_file(&dir).exists());
        let reports = assert_same_as_scan(&store);
        assert!(
            reports[0].total.requests > 0,
            "seed {seed}: no usage at all"
        );
        // Nothing changed since: the store-wide file is current.
        let again = usage::refresh(store.as_ref()).unwrap();
        assert_eq!((again.recomputed, again.from_appends), (0, 0), "{again:?}");
    }
}

#[test]
fn a_truncated_or_edited_log_invalidates_exactly_its_sessions_summary() {
    let (tmp, store) = imported(4);
    let dir = tmp.path().join("store");
    usage::refresh(store.as_ref()).unwrap();
    let ids = sessions_with_usage(&store, 2);
    assert!(ids.len() >= 2, "{ids:?}");
    let before = usage::report(store.as_ref(), &UsageQuery::default(), &prices()).unwrap();
    // Cut the last line of one log (a usage-bearing response or not).
    let path = log(&dir, &ids[0]);
    let bytes = fs::read(&path).unwrap();
    let body = &bytes[..bytes.len() - 1];
    let cut = body.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    fs::write(&path, &bytes[..cut]).unwrap();
    let r = usage::refresh(store.as_ref()).unwrap();
    assert_eq!(r.recomputed, 1, "{r:?}");
    assert_eq!(r.from_appends, 0, "{r:?}");
    // Edit another log in place, same length (a token count's digit).
    let path = log(&dir, &ids[1]);
    let mut text = fs::read_to_string(&path).unwrap();
    let pos = text.find("\"output_tokens\":").unwrap() + "\"output_tokens\":".len();
    let digit = text.as_bytes()[pos];
    assert!(digit.is_ascii_digit(), "{}", &text[pos..pos + 10]);
    let other = if digit == b'9' { "8" } else { "9" };
    text.replace_range(pos..pos + 1, other);
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&path, text).unwrap();
    let r = usage::refresh(store.as_ref()).unwrap();
    assert_eq!(r.recomputed, 1, "{r:?}");
    let reports = assert_same_as_scan(&store);
    assert_ne!(
        reports[0].total, before.total,
        "the cut and the edit show in the totals"
    );
}

#[test]
fn a_damaged_summary_file_is_rebuilt_with_a_notice_not_an_error() {
    let (tmp, store) = imported(13);
    let dir = tmp.path().join("store");
    let ids = sessions_with_usage(&store, 1);
    // A damaged per-session file, read because the store-wide one (written
    // at the end of the import) is gone.
    fs::remove_file(summary_file(&dir)).unwrap();
    let one = session_file(&dir, &ids[0]);
    let mut bytes = fs::read(&one).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    fs::write(&one, &bytes).unwrap();
    let q = UsageQuery {
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let report = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!(report.notices.len(), 1, "{:?}", report.notices);
    assert!(
        report.notices[0].contains("damaged") && report.notices[0].contains(&ids[0]),
        "{:?}",
        report.notices
    );
    let scanned = usage::report(&Scan(store.clone()), &q, &prices()).unwrap();
    assert_eq!(report.rows, scanned.rows);
    assert_eq!(report.total, scanned.total);
    // The store-wide file, cut short, then garbage: rebuilt each time.
    let all = summary_file(&dir);
    let bytes = fs::read(&all).unwrap();
    for damaged in [bytes[..bytes.len() / 3].to_vec(), b"not a summary".to_vec()] {
        fs::write(&all, &damaged).unwrap();
        let report = usage::report(store.as_ref(), &q, &prices()).unwrap();
        assert_eq!(report.notices.len(), 1, "{:?}", report.notices);
        assert!(report.notices[0].contains("usage.summary"));
        assert_eq!(report.rows, scanned.rows);
        // Rebuilt: the next report has nothing to say.
        let next = usage::report(store.as_ref(), &q, &prices()).unwrap();
        assert!(next.notices.is_empty(), "{:?}", next.notices);
    }
    // A summary file removed outright is rebuilt silently.
    fs::remove_file(&all).unwrap();
    let report = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert!(report.notices.is_empty());
    assert_eq!(report.rows, scanned.rows);
    assert!(all.exists());
}

/// Summaries an older build wrote (another format version) are rebuilt
/// without a notice per file: an upgrade is not damage.
#[test]
fn summaries_of_another_version_are_rebuilt_without_notices() {
    let (tmp, store) = imported(17);
    let dir = tmp.path().join("store");
    let ids = sessions_with_usage(&store, 1);
    assert!(!ids.is_empty());
    let as_version_1 = |path: &Path| {
        let mut bytes = fs::read(path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        fs::write(path, &bytes).unwrap();
    };
    as_version_1(&summary_file(&dir));
    for id in &ids {
        as_version_1(&session_file(&dir, id));
    }
    let q = UsageQuery {
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let report = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert!(report.notices.is_empty(), "{:?}", report.notices);
    let scanned = usage::report(&Scan(store.clone()), &q, &prices()).unwrap();
    assert_eq!(report.rows, scanned.rows);
    assert_eq!(report.total, scanned.total);
    // Rewritten in this build's version.
    let bytes = fs::read(summary_file(&dir)).unwrap();
    assert_eq!(bytes[8..12], usage::SUMMARY_VERSION.to_le_bytes());
}

fn response(id: &str, request: &str, when: &str, output: u64) -> Message {
    let mut m = Message::assistant("ok").with_usage(Usage {
        input_tokens: 10,
        output_tokens: output,
        cache_read_input_tokens: 100,
        ..Usage::default()
    });
    m.provider_id = Some(id.to_string());
    m.model = Some("claude-sonnet-4-20250514".into());
    m.timestamp = Some(at(when));
    m.extra.insert(
        SOURCE_KEY.to_string(),
        json!({"request_id": request, "uuid": format!("u-{id}-{request}-{output}")}),
    );
    m
}

#[test]
fn appends_keep_a_sessions_summary_current_native_and_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let options = || ManagerOptions {
        durability: Durability::None,
        ..ManagerOptions::default()
    };
    let mut m = SessionManager::open(&dir, options()).unwrap();
    m.append_session_messages(
        "native",
        vec![
            Message::user("hi"),
            response("msg_1", "req_1", "2026-05-12T08:00:00Z", 5),
        ],
    )
    .unwrap();
    let store = Arc::new(FileStore::new(&dir, Durability::None));
    let q = UsageQuery::default();
    let r = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!((r.total.output_tokens, r.total.requests), (5, 1));
    // A native append: the session's summary is folded forward, not recomputed.
    m.append_session_messages(
        "native",
        vec![response("msg_2", "req_2", "2026-05-12T08:05:00Z", 7)],
    )
    .unwrap();
    let kept = usage::refresh(store.as_ref()).unwrap();
    assert_eq!((kept.from_appends, kept.recomputed), (1, 0), "{kept:?}");
    // A split line of the same response (same ids): the last copy wins.
    m.append_session_messages(
        "native",
        vec![response("msg_2", "req_2", "2026-05-12T08:05:01Z", 9)],
    )
    .unwrap();
    // An import-style append with a header of its own.
    let mut meta = SessionMeta::new("cc-imported");
    meta.created_at = at("2026-05-12T09:00:00Z");
    meta.source = Some(SourceRef {
        agent: "claude-code".into(),
        agent_version: None,
        session: Some("imported".into()),
        path: None,
        extra: serde_json::Map::new(),
    });
    m.create_with_header(meta).unwrap();
    m.append_records_to(
        "cc-imported",
        &[Record::Message(response(
            "msg_3",
            "req_3",
            "2026-05-12T09:01:00Z",
            11,
        ))],
    )
    .unwrap();
    let kept = usage::refresh(store.as_ref()).unwrap();
    assert_eq!((kept.from_appends, kept.recomputed), (2, 0), "{kept:?}");
    let r = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!((r.total.output_tokens, r.total.requests), (5 + 9 + 11, 3));
    assert_eq!(r.duplicate_responses, 1);
    let scanned = usage::report(&Scan(store.clone()), &q, &prices()).unwrap();
    assert_eq!(r, scanned);
    // A summary file left behind by a writer that lost a race (stamped with
    // an older state of the log) is not trusted.
    let stale = fs::read(session_file(&dir, "native")).unwrap();
    m.append_session_messages(
        "native",
        vec![response("msg_4", "req_4", "2026-05-12T10:00:00Z", 13)],
    )
    .unwrap();
    fs::write(session_file(&dir, "native"), stale).unwrap();
    fs::remove_file(summary_file(&dir)).unwrap();
    let healed = usage::refresh(store.as_ref()).unwrap();
    assert_eq!(healed.recomputed, 1, "{healed:?}");
    let r = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!(r.total.output_tokens, 5 + 9 + 11 + 13);
}

#[test]
fn a_response_two_sessions_hold_is_counted_once_from_the_summaries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let m = SessionManager::open(
        &dir,
        ManagerOptions {
            durability: Durability::None,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    for (id, created) in [("a", "2026-05-12T08:00:00Z"), ("b", "2026-05-12T08:30:00Z")] {
        let mut meta = SessionMeta::new(id);
        meta.created_at = at(created);
        m.create_with_header(meta).unwrap();
    }
    // Both hold msg_1/req_1 (a resumed copy); b also has its own response.
    m.append_records_to(
        "a",
        &[Record::Message(response(
            "msg_1",
            "req_1",
            "2026-05-12T08:01:00Z",
            5,
        ))],
    )
    .unwrap();
    m.append_records_to(
        "b",
        &[
            Record::Message(response("msg_1", "req_1", "2026-05-12T08:01:00Z", 5)),
            Record::Message(response("msg_9", "req_9", "2026-05-12T08:31:00Z", 7)),
        ],
    )
    .unwrap();
    let store = Arc::new(FileStore::new(&dir, Durability::None));
    let kept = usage::refresh(store.as_ref()).unwrap();
    assert_eq!((kept.from_appends, kept.recomputed), (2, 0), "{kept:?}");
    let q = UsageQuery {
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let r = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!((r.total.requests, r.total.output_tokens), (2, 12));
    assert_eq!(r.duplicate_responses, 1);
    let keys: Vec<(String, u64)> = r
        .rows
        .iter()
        .map(|row| (row.key()[0].to_string(), row.totals.output_tokens))
        .collect();
    assert_eq!(keys, [("a".to_string(), 5), ("b".to_string(), 7)]);
    assert_eq!(
        r,
        usage::report(&Scan(store.clone()), &q, &prices()).unwrap()
    );
    // A later append to the older session does not change who owns it.
    m.append_records_to(
        "a",
        &[Record::Message(response(
            "msg_9",
            "req_9",
            "2026-05-12T08:31:00Z",
            7,
        ))],
    )
    .unwrap();
    let r = usage::report(store.as_ref(), &q, &prices()).unwrap();
    assert_eq!((r.total.requests, r.total.output_tokens), (2, 12));
    assert_eq!(r.duplicate_responses, 2);
    assert_eq!(
        r,
        usage::report(&Scan(store.clone()), &q, &prices()).unwrap()
    );
}

/// A long session appended one response at a time: its summary file grows
/// by a delta per append and is rewritten whole only when the deltas
/// outweigh its base (not on every append), and it still reads back as
/// the summary a recompute gives, with split lines and sidechain replays
/// de-duplicated across deltas.
#[test]
fn a_long_sessions_appends_add_deltas_instead_of_rewriting_its_summary() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let m = SessionManager::open(
        &dir,
        ManagerOptions {
            durability: Durability::None,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    m.create_with_header(SessionMeta::new("long")).unwrap();
    let appends = 3000;
    let mut rewrites = 0;
    let mut inode = None;
    for i in 0..appends {
        let when = format!(
            "2026-05-12T{:02}:{:02}:{:02}Z",
            8 + i / 3600,
            i / 60 % 60,
            i % 60
        );
        let mut batch = vec![Record::Message(response(
            &format!("msg_{i}"),
            &format!("req_{i}"),
            &when,
            10 + i as u64 % 50,
        ))];
        if i % 7 == 3 {
            // A later line of an earlier response (same ids): it replaces it.
            batch.push(Record::Message(response(
                &format!("msg_{}", i - 2),
                &format!("req_{}", i - 2),
                &when,
                99,
            )));
        }
        if i % 11 == 5 {
            // A sidechain replay of an earlier message under a new request.
            let mut replay = response(&format!("msg_{}", i - 4), "req_replay", &when, 1);
            if let Some(source) = replay.extra.get_mut(SOURCE_KEY) {
                source["is_sidechain"] = json!(true);
            }
            batch.push(Record::Message(replay));
        }
        if i % 13 == 0 {
            batch.push(Record::Message(Message::user(format!("prompt {i}"))));
        }
        m.append_records_to("long", &batch).unwrap();
        let now = fs::metadata(session_file(&dir, "long")).unwrap().ino();
        if inode.is_some_and(|was| was != now) {
            rewrites += 1;
        }
        inode = Some(now);
    }
    assert!(
        rewrites < 40,
        "the summary file was rewritten {rewrites} times in {appends} appends"
    );
    let store = Arc::new(FileStore::new(&dir, Durability::None));
    let kept = usage::refresh(store.as_ref()).unwrap();
    assert_eq!((kept.from_appends, kept.recomputed), (1, 0), "{kept:?}");
    assert!(kept.notices.is_empty(), "{kept:?}");
    let q = UsageQuery::default();
    let from_deltas = usage::report(store.as_ref(), &q, &prices()).unwrap();
    let scanned = usage::report(&Scan(store.clone()), &q, &prices()).unwrap();
    assert_eq!(from_deltas, scanned);
    assert!(from_deltas.duplicate_responses > 0);
    // The same summary recomputed from the log, written whole.
    fs::remove_file(session_file(&dir, "long")).unwrap();
    fs::remove_file(summary_file(&dir)).unwrap();
    let rebuilt = usage::refresh(store.as_ref()).unwrap();
    assert_eq!(rebuilt.recomputed, 1, "{rebuilt:?}");
    assert_eq!(
        usage::report(store.as_ref(), &q, &prices()).unwrap(),
        scanned
    );
}

/// The file store with its summaries, counting which session logs a
/// report reads.
#[derive(Debug)]
struct Counting {
    store: Arc<FileStore>,
    reads: std::sync::Mutex<Vec<String>>,
}

impl LogStore for Counting {
    fn create(&self, meta: &SessionMeta) -> memoir::Result<Appended> {
        self.store.create(meta)
    }
    fn append(
        &self,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
    ) -> memoir::Result<Appended> {
        self.store.append(id, records, expected_next)
    }
    fn read(&self, id: &str) -> memoir::Result<RawLog> {
        self.reads.lock().unwrap().push(id.to_string());
        self.store.read(id)
    }
    fn read_header(&self, id: &str) -> memoir::Result<Option<SessionMeta>> {
        self.store.read_header(id)
    }
    fn list(&self) -> memoir::Result<(Vec<Listed>, usize)> {
        self.store.list()
    }
    fn location(&self, id: &str) -> PathBuf {
        self.store.location(id)
    }
    fn durability(&self) -> Durability {
        self.store.durability()
    }
    fn read_deleted(&self, id: &str) -> memoir::Result<RawLog> {
        self.store.read_deleted(id)
    }
    fn index_dir(&self) -> Option<&Path> {
        self.store.index_dir()
    }
}

/// `seq`s of a session's usage-bearing message records.
fn usage_seqs(store: &FileStore, id: &str) -> Vec<u64> {
    store
        .read(id)
        .unwrap()
        .records
        .iter()
        .filter(|r| matches!(&r.record, Record::Message(m) if m.usage.is_some()))
        .map(|r| r.seq)
        .collect()
}

/// Forks' inherited usage comes from their parents' summaries, exactly as
/// a scan of the logs gives it: a fork of a fork, a side session replaying
/// its parent's message, a fork cut between two lines of one response and a
/// parent rewritten after the fork point (those two read the parent's log).
#[test]
fn forks_inherit_from_their_parents_summaries_as_a_scan_does() {
    let (tmp, store) = imported(4);
    let dir = tmp.path().join("store");
    let mut m = SessionManager::open(
        &dir,
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap();
    // The main imported session with the most responses.
    let (listed, _) = store.list().unwrap();
    let parent = listed
        .iter()
        .filter(|l| l.meta.parent.is_none() && !usage::is_side_session(&l.meta))
        .max_by_key(|l| usage_seqs(&store, &l.meta.id).len())
        .map(|l| l.meta.id.clone())
        .unwrap();
    let seqs = usage_seqs(&store, &parent);
    assert!(seqs.len() >= 4, "{parent}: {seqs:?}");
    let target = |id: &str, source: Option<SourceRef>| memoir::manager::ForkTarget {
        id: Some(id.to_string()),
        title: None,
        source,
    };
    let fork_at = |m: &mut SessionManager, from: &str, seq: u64, t| {
        m.fork_session_at_seq(from, Some(seq), t).unwrap().id
    };
    // A fork after one more response, with responses of its own; a fork
    // of that fork.
    let half = m
        .append_records_to(
            &parent,
            &[Record::Message(response(
                "msg_p0",
                "req_p0",
                "2026-05-12T07:00:00Z",
                30,
            ))],
        )
        .unwrap()
        .unwrap()
        .last_seq;
    let a = fork_at(&mut m, &parent, half, target("fork-a", None));
    m.append_records_to(
        &a,
        &[
            Record::Message(Message::user("and then?")),
            Record::Message(response("msg_a1", "req_a1", "2026-05-12T08:00:00Z", 40)),
        ],
    )
    .unwrap();
    let b = fork_at(
        &mut m,
        &a,
        usage_seqs(&store, &a)[0],
        target("fork-b", None),
    );
    m.append_records_to(
        &b,
        &[Record::Message(response(
            "msg_b1",
            "req_b1",
            "2026-05-12T08:10:00Z",
            50,
        ))],
    )
    .unwrap();
    // A side session: replays the fork's response under a new request
    // id (not counted again), adds one of its own.
    let mut extra = serde_json::Map::new();
    extra.insert("kind".into(), json!("subagent"));
    let side_source = SourceRef {
        agent: "claude-code".into(),
        agent_version: None,
        session: Some("side".into()),
        path: None,
        extra,
    };
    let side = fork_at(
        &mut m,
        &a,
        usage_seqs(&store, &a)[0],
        target("side-1", Some(side_source)),
    );
    let mut replay = response("msg_a1", "req_side", "2026-05-12T08:20:00Z", 40);
    replay.extra.get_mut(SOURCE_KEY).unwrap()["is_sidechain"] = json!(true);
    m.append_records_to(
        &side,
        &[
            Record::Message(replay),
            Record::Message(response("msg_s1", "req_s1", "2026-05-12T08:21:00Z", 60)),
        ],
    )
    .unwrap();
    // So far every parent's summary tells what it held at each fork point.
    let report_of = |s: &dyn LogStore| {
        let q = UsageQuery {
            group_by: vec![GroupKey::Session],
            ..UsageQuery::default()
        };
        usage::report(s, &q, &prices()).unwrap()
    };
    usage::refresh(store.as_ref()).unwrap();
    let counting = Counting {
        store: store.clone(),
        reads: Default::default(),
    };
    let summed = report_of(&counting);
    assert_eq!(summed, report_of(&Scan(store.clone())));
    assert!(
        counting.reads.lock().unwrap().is_empty(),
        "logs read: {:?}",
        counting.reads.lock().unwrap()
    );
    let row = |r: &UsageReport, id: &str| {
        r.rows
            .iter()
            .find(|row| row.group.get("session") == Some(&json!(id)))
            .cloned()
            .unwrap_or_else(|| panic!("no row for {id}"))
    };
    let inherited = |r: &UsageReport, id: &str| row(r, id).inherited.unwrap().output_tokens;
    let (ia, ib, is) = (
        inherited(&summed, &a),
        inherited(&summed, &b),
        inherited(&summed, &side),
    );
    assert!(ia > 0, "{:?}", row(&summed, &a));
    assert_eq!(ib, ia + 40, "fork-b inherits fork-a's response too");
    assert_eq!(is, ia + 40);
    assert_eq!(
        row(&summed, &side).totals.output_tokens,
        60,
        "the replay is not counted again"
    );

    // A fork cut between two lines of one response (the later line carries
    // the final count), then the parent rewritten after the fork points:
    // the response fork-a was cut after replaced by a changed copy, the
    // rest carried.
    let line1 = response("msg_p9", "req_p9", "2026-05-12T09:00:00Z", 5);
    let line2 = response("msg_p9", "req_p9", "2026-05-12T09:00:01Z", 70);
    let split = m
        .append_records_to(&parent, &[Record::Message(line1)])
        .unwrap()
        .unwrap()
        .last_seq;
    let c = fork_at(&mut m, &parent, split, target("fork-c", None));
    m.append_records_to(&parent, &[Record::Message(line2)])
        .unwrap();
    let raw = store.read(&parent).unwrap();
    let mut messages: Vec<Message> = memoir::transcript::read_at(
        store.as_ref(),
        &memoir::record::ForkPoint::new(&parent, raw.last_seq, 0),
    )
    .unwrap()
    .messages;
    let changed = messages
        .iter_mut()
        .find(|m| m.provider_id.as_deref() == Some("msg_p0"))
        .unwrap();
    if let Some(u) = changed.usage.as_mut() {
        u.output_tokens += 1000;
    }
    m.append_records_to(&parent, &[Record::Rewrite { messages }])
        .unwrap();
    // A fork before any of that.
    let d = fork_at(&mut m, &parent, seqs[0], target("fork-d", None));
    drop(m);
    assert_same_as_scan(&store);
    counting.reads.lock().unwrap().clear();
    let summed = report_of(&counting);
    assert_eq!(summed, report_of(&Scan(store.clone())));
    assert_eq!(inherited(&summed, &a), ia, "what fork-a started with");
    assert!(inherited(&summed, &c) >= ia + 5);
    assert!(inherited(&summed, &d) > 0);
    let reads = counting.reads.lock().unwrap().clone();
    assert!(reads.iter().all(|r| *r == parent), "{reads:?}");
    assert!(
        !reads.is_empty(),
        "the rewritten parent is read from its log"
    );
}
