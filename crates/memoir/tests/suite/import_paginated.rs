//! Codex paginated history followed by reference: a thread split
//! into segments by `rollout_reference` is one session, `history_base` of
//! another thread is a fork by reference at the ordinal cut, duplicated
//! ordinals are tolerated and reported. Fixtures: the hand-written Codex
//! home in `tests/data/import/codex-home/` (see the README beside it); the
//! counts below were written down from those files.

use std::fs;
use std::path::{Path, PathBuf};

use memoir::import::{self, Agent, ImportReport, Source};
use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Role;
use memoir::record::Record;
use memoir::store::Durability;
use memoir::transcript::Transcript;
use memoir::Message;

const A: &str = "0199aaaa-0000-7000-8000-00000000000a";
const B: &str = "0199bbbb-0000-7000-8000-00000000000b";
const C: &str = "0199cccc-0000-7000-8000-00000000000c";
const E: &str = "0199eeee-0000-7000-8000-00000000000e";

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(rel)
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn manager(dir: &Path) -> SessionManager {
    SessionManager::open(
        dir,
        ManagerOptions {
            durability: Durability::None,
            repair_on_switch: false,
            ..ManagerOptions::default()
        },
    )
    .unwrap()
}

fn run_dir(m: &SessionManager, dir: &Path) -> ImportReport {
    let sources = import::sources_of(Agent::Codex, Some(dir)).unwrap();
    import::import(m, &sources, &mut |_| {}).unwrap()
}

fn run_files(m: &SessionManager, paths: &[PathBuf]) -> ImportReport {
    let sources: Vec<Source> = paths
        .iter()
        .map(|p| Source {
            agent: Agent::Codex,
            path: p.clone(),
        })
        .collect();
    import::import(m, &sources, &mut |_| {}).unwrap()
}

fn read(m: &SessionManager, thread: &str) -> Transcript {
    m.read_stored(&format!("cx-{thread}")).unwrap()
}

fn texts(ms: &[Message]) -> Vec<(Role, String)> {
    ms.iter().map(|m| (m.role, m.text_content())).collect()
}

/// `payload.type` of the kept source records of `t` (`event_msg` lines).
fn event_kinds(t: &Transcript) -> Vec<String> {
    t.unknown
        .iter()
        .filter_map(|r| match &r.record {
            Record::Unknown { raw, .. } => raw
                .get("entry")
                .and_then(|e| e.get("payload"))
                .and_then(|p| p.get("type"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            _ => None,
        })
        .collect()
}

fn segmented_thread_messages() -> Vec<(Role, String)> {
    vec![
        (Role::User, "Explain segment rotation.".into()),
        (Role::Assistant, "Rotation moves the old file aside.".into()),
        (Role::User, "And what stays in the live file?".into()),
        (Role::Assistant, "The reference stays at its head.".into()),
    ]
}

#[test]
fn a_segmented_thread_is_one_session_and_a_history_base_is_a_fork_at_the_cut() {
    for from_sessions_dir in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("codex");
        copy_tree(&data("codex-home"), &home);
        let m = manager(&tmp.path().join("store"));
        let dir = if from_sessions_dir {
            home.join("sessions")
        } else {
            home.clone()
        };
        // The stored segment is not a rollout of its own.
        assert_eq!(
            import::sources_of(Agent::Codex, Some(&dir)).unwrap().len(),
            4
        );
        let report = run_dir(&m, &dir);
        assert_eq!(report.sessions.new, 4, "{report:?}");
        assert_eq!(report.sessions.forked, 0, "{report:?}");

        // A: the initial segment (2 messages) then the live segment (2).
        let a = read(&m, A);
        assert!(a.meta.parent.is_none());
        assert_eq!(texts(&a.messages), segmented_thread_messages());
        let usage: Vec<(u64, u64, u64)> = a
            .messages
            .iter()
            .filter_map(|m| m.usage)
            .map(|u| (u.input_tokens, u.cache_read_input_tokens, u.output_tokens))
            .collect();
        // 100 in (40 cached) / 20 out, then the cumulative 250/90/50's delta.
        assert_eq!(usage, vec![(60, 40, 20), (100, 50, 30)]);
        // The token_count written twice under ordinal 10 is kept once; the
        // thread_settings_applied sharing ordinal 5 is kept.
        let kinds = event_kinds(&a);
        assert_eq!(kinds.iter().filter(|k| *k == "token_count").count(), 2);
        assert_eq!(
            kinds
                .iter()
                .filter(|k| *k == "thread_settings_applied")
                .count(),
            1
        );
        let notes: Vec<&str> = report.notes.iter().map(|n| n.reason.as_str()).collect();
        // Reported at its own file and line: line 7 of the stored segment.
        let repeat = report
            .notes
            .iter()
            .find(|n| n.reason.contains("ordinal 5 repeats"))
            .expect("the repeated ordinal is reported");
        assert_eq!(repeat.line, 7);
        assert!(repeat.file.ends_with(format!(
            "rollout_segments/{A}/initial/rollout-2026-07-13T10-00-00-{A}.jsonl"
        )));
        assert!(
            notes.iter().any(|n| n.contains("ordinal 5 repeats")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.contains("ordinal 10 written twice")),
            "{notes:?}"
        );

        // B: history_base{A, end_ordinal_exclusive 6}: A's first two messages.
        let b = read(&m, B);
        let parent = b.meta.parent.as_ref().expect("B is a fork by reference");
        assert_eq!(
            (parent.session.as_str(), parent.messages),
            (format!("cx-{A}").as_str(), 2)
        );
        assert_eq!(b.inherited, 2);
        assert_eq!(
            texts(&b.messages[2..]),
            vec![
                (Role::User, "Try another explanation.".into()),
                (
                    Role::Assistant,
                    "Think of it as a log with chapters.".into()
                ),
            ]
        );

        // C: its base is not in the tree: imported whole, and reported.
        let c = read(&m, C);
        assert!(c.meta.parent.is_none());
        assert_eq!(c.messages.len(), 2);
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&format!("fork parent of cx-{C} is not imported"))),
            "{notes:?}"
        );

        // E: a spawned thread names its parent.
        let e = read(&m, E);
        let src = e.meta.source.as_ref().unwrap();
        assert_eq!(src.extra["kind"], "subagent");
        assert_eq!(src.extra["parent_session"], format!("cx-{A}").as_str());
        assert_eq!(e.messages.len(), 2);

        let again = run_dir(&m, &dir);
        assert_eq!((again.records, again.files_read), (0, 0), "{again:?}");
    }
}

#[test]
fn a_rotation_between_imports_continues_the_session_with_nothing_duplicated() {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = data("codex-home");
    let name = format!("rollout-2026-07-13T10-00-00-{A}.jsonl");
    let initial = fixture.join(format!("rollout_segments/{A}/initial/{name}"));
    let successor = fixture.join(format!("sessions/2026/07/13/{name}"));

    // Before the rotation: the live file is the initial segment.
    let home = tmp.path().join("codex");
    let live = home.join(format!("sessions/2026/07/13/{name}"));
    fs::create_dir_all(live.parent().unwrap()).unwrap();
    fs::copy(&initial, &live).unwrap();
    let m = manager(&tmp.path().join("store"));
    let first = run_files(&m, std::slice::from_ref(&live));
    assert_eq!((first.sessions.new, first.messages), (1, 2), "{first:?}");

    // Rotation as Codex does it: the live file is published at its
    // immutable path and replaced (rename) by the successor.
    let stored = home.join(format!("rollout_segments/{A}/initial/{name}"));
    fs::create_dir_all(stored.parent().unwrap()).unwrap();
    fs::copy(&live, &stored).unwrap();
    let staged = live.with_extension("tmp");
    fs::copy(&successor, &staged).unwrap();
    fs::rename(&staged, &live).unwrap();
    let second = run_files(&m, std::slice::from_ref(&live));
    assert_eq!(
        (
            second.sessions.new,
            second.sessions.forked,
            second.sessions.updated
        ),
        (0, 0, 1),
        "{second:?}"
    );
    assert_eq!(second.messages, 2, "{second:?}");
    assert_eq!(texts(&read(&m, A).messages), segmented_thread_messages());

    // The live segment grows: only its tail is read and appended.
    let tail = concat!(
        r#"{"timestamp":"2026-07-13T10:40:00.000Z","ordinal":11,"type":"event_msg","payload":{"type":"user_message","message":"One more?","images":[]}}"#,
        "\n",
        r#"{"timestamp":"2026-07-13T10:40:03.000Z","ordinal":12,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sure."}]}}"#,
        "\n"
    );
    let before = fs::metadata(&live).unwrap().len();
    let mut grown = fs::read(&live).unwrap();
    // Its last line written a third time first: a copy, skipped on the
    // resumed path too (by the hash the cursor keeps).
    let last = String::from_utf8(grown.clone())
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    grown.extend_from_slice(format!("{last}\n").as_bytes());
    grown.extend_from_slice(tail.as_bytes());
    fs::write(&live, &grown).unwrap();
    let third = run_files(&m, std::slice::from_ref(&live));
    assert_eq!(
        (third.messages, third.sessions.forked, third.bytes_read),
        (2, 0, grown.len() as u64 - before),
        "{third:?}"
    );
    assert!(
        third
            .notes
            .iter()
            .any(|n| n.reason.contains("ordinal 10 written twice") && n.line == 7),
        "{third:?}"
    );
    let fourth = run_files(&m, std::slice::from_ref(&live));
    assert_eq!(fourth.records, 0, "{fourth:?}");

    // A second rotation: the grown successor (segment S1) is published
    // under its segment id and a third segment references it; the chain is
    // followed two levels down and still appends only the new turn.
    let s1 = "0199aaaa-5e90-7000-8000-000000000001";
    let stored_s1 = home.join(format!("rollout_segments/{A}/{s1}/{name}"));
    fs::create_dir_all(stored_s1.parent().unwrap()).unwrap();
    fs::copy(&live, &stored_s1).unwrap();
    let third_segment = format!(
        "{}\n{}\n{}\n{}\n",
        r#"{"timestamp":"2026-07-13T10:00:00.000Z","ordinal":13,"type":"session_meta","payload":{"id":"0199aaaa-0000-7000-8000-00000000000a","segment_id":"0199aaaa-5e90-7000-8000-000000000002","timestamp":"2026-07-13T10:00:00.000Z","cwd":"/work/demo","originator":"codex_cli_rs","cli_version":"0.160.0","source":"cli","model_provider":"openai","history_mode":"paginated"}}"#,
        r#"{"timestamp":"2026-07-13T11:00:00.000Z","ordinal":14,"type":"rollout_reference","payload":{"rollout_path":"/elsewhere/stale.jsonl","thread_id":"0199aaaa-0000-7000-8000-00000000000a","segment_id":"0199aaaa-5e90-7000-8000-000000000001","max_depth":8}}"#,
        r#"{"timestamp":"2026-07-13T11:01:00.000Z","ordinal":15,"type":"event_msg","payload":{"type":"user_message","message":"Last one.","images":[]}}"#,
        r#"{"timestamp":"2026-07-13T11:01:02.000Z","ordinal":16,"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}}"#,
    );
    let staged = live.with_extension("tmp");
    fs::write(&staged, third_segment).unwrap();
    fs::rename(&staged, &live).unwrap();
    let fifth = run_files(&m, std::slice::from_ref(&live));
    assert_eq!(
        (fifth.messages, fifth.sessions.new, fifth.sessions.forked),
        (2, 0, 0),
        "{fifth:?}"
    );
    let all = read(&m, A);
    assert_eq!(all.messages.len(), 8);
    let kinds = event_kinds(&all);
    assert_eq!(kinds.iter().filter(|k| *k == "token_count").count(), 2);
    assert_eq!(all.messages[7].text_content(), "Done.");

    // The same as importing the final tree afresh.
    let fresh = manager(&tmp.path().join("fresh"));
    run_files(&fresh, &[live]);
    let json = |t: Transcript| serde_json::to_string(&t.messages).unwrap();
    assert_eq!(json(read(&m, A)), json(read(&fresh, A)));
    assert_eq!(read(&fresh, A).messages.len(), 8);
}

/// Items the rollout lost (here: the live segment's turn, ordinals 8 and 9)
/// are filled from `thread_history_1.sqlite`, in their place; items the
/// rollout has are not repeated; the database is not written.
#[cfg(feature = "import-opencode")]
#[test]
fn items_a_rollout_lacks_are_filled_from_the_thread_history_database() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("codex");
    copy_tree(&data("codex-home"), &home);
    let live = home.join(format!(
        "sessions/2026/07/13/rollout-2026-07-13T10-00-00-{A}.jsonl"
    ));
    let kept: Vec<String> = fs::read_to_string(&live)
        .unwrap()
        .lines()
        .filter(|l| !l.contains("\"ordinal\":8,") && !l.contains("\"ordinal\":9,"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(kept.len(), 4);
    fs::write(&live, kept.concat()).unwrap();

    let db = home.join("thread_history_1.sqlite");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE TABLE thread_turns (thread_id TEXT, turn_id TEXT, rollout_ordinal INTEGER,
                 status TEXT, PRIMARY KEY (thread_id, turn_id));
             CREATE TABLE thread_items (thread_id TEXT, turn_id TEXT, item_id TEXT,
                 rollout_ordinal INTEGER, created_at_ms INTEGER, item_type TEXT, item_json TEXT,
                 PRIMARY KEY (thread_id, turn_id, item_id));",
        )
        .unwrap();
        let rows = [
            (
                "t1",
                "u1",
                2,
                r#"{"type":"userMessage","id":"u1","content":[{"type":"text","text":"Explain segment rotation."}]}"#,
            ),
            (
                "t1",
                "a1",
                4,
                r#"{"type":"agentMessage","id":"a1","text":"Rotation moves the old file aside.","phase":"final_answer"}"#,
            ),
            (
                "t2",
                "u2",
                8,
                r#"{"type":"userMessage","id":"u2","content":[{"type":"text","text":"And what stays in the live file?"}]}"#,
            ),
            (
                "t2",
                "a2",
                9,
                r#"{"type":"agentMessage","id":"a2","text":"The reference stays at its head.","phase":"final_answer"}"#,
            ),
        ];
        for (turn, item, ordinal, json) in rows {
            c.execute(
                "INSERT INTO thread_items VALUES (?1, ?2, ?3, ?4, 1784016000000, json_extract(?5, '$.type'), ?5)",
                rusqlite::params![A, turn, item, ordinal, json],
            )
            .unwrap();
        }
    }
    let before = fs::read(&db).unwrap();

    let m = manager(&tmp.path().join("store"));
    let report = run_files(&m, std::slice::from_ref(&live));
    assert_eq!(texts(&read(&m, A).messages), segmented_thread_messages());
    let filled: Vec<&str> = report
        .notes
        .iter()
        .map(|n| n.reason.as_str())
        .filter(|n| n.contains("filled from the thread history"))
        .collect();
    assert_eq!(filled.len(), 2, "{:?}", report.notes);
    assert!(filled[0].contains("item u2 (ordinal 8)"), "{filled:?}");
    // Never written: same bytes, no journal left beside it.
    assert_eq!(fs::read(&db).unwrap(), before);
    assert!(!home.join("thread_history_1.sqlite-wal").exists());
    // Re-import: nothing new.
    let again = run_files(&m, &[live]);
    assert_eq!(again.records, 0, "{again:?}");
}

/// A fork read before its base (its file sorts first) waits for the base
/// of the same run, then references it at the cut.
#[test]
fn a_history_base_fork_read_before_its_base_still_references_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("codex");
    copy_tree(&data("codex-home"), &home);
    let day = home.join("sessions/2026/07/13");
    let early = home.join("sessions/2026/07/01");
    fs::create_dir_all(&early).unwrap();
    let fork = format!("rollout-2026-07-13T11-00-00-{B}.jsonl");
    fs::rename(day.join(&fork), early.join(&fork)).unwrap();
    let m = manager(&tmp.path().join("store"));
    let sources = import::sources_of(Agent::Codex, Some(&home)).unwrap();
    assert!(sources[0].path.ends_with(&fork), "{sources:?}");
    let report = import::import(&m, &sources, &mut |_| {}).unwrap();
    assert_eq!(report.sessions.new, 4, "{report:?}");
    let b = read(&m, B);
    let parent = b.meta.parent.as_ref().expect("B references A");
    assert_eq!(
        (parent.session.as_str(), parent.messages),
        (format!("cx-{A}").as_str(), 2)
    );
    assert_eq!(b.messages.len(), 4);
}
