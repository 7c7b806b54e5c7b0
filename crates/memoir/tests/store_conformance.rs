//! One conformance suite for every [`LogStore`] backend.
//!
//! Each check is a plain function over `&Arc<dyn LogStore>`; the
//! `conformance!` macro turns it into one test per backend: the file store in a
//! temp dir, PostgreSQL without pgvector (`MEMOIR_TEST_POSTGRES_URL`) and with
//! it (`MEMOIR_TEST_PGVECTOR_URL`), each PostgreSQL test in a fresh schema.
//! Without those variables the PostgreSQL tests fail under CI and are skipped
//! with a notice elsewhere (`source .ci/postgres.sh` starts both servers).

mod postgres_common;

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use memoir::message::Message;
use memoir::record::{ForkPoint, Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::{Durability, LogStore};
use memoir::transcript::{find_in, read_in, Session};
use memoir::Error;

use postgres_common::{pg_store, PGVECTOR_URL, POSTGRES_URL};

type Store = Arc<dyn LogStore>;

fn with_file(check: fn(&Store)) {
    let dir = tempfile::tempdir().unwrap();
    let store: Store = Arc::new(FileStore::new(dir.path().join("s"), Durability::Flush));
    check(&store);
}

fn with_pg(var: &str, check: fn(&Store)) {
    let Some((pg, _schema)) = pg_store(var, VectorMode::Auto) else {
        return;
    };
    let store: Store = pg;
    check(&store);
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod file {
            $(#[test] fn $name() { super::with_file(super::$name); })*
        }
        mod postgres {
            $(#[test] fn $name() { super::with_pg(super::POSTGRES_URL, super::$name); })*
        }
        mod pgvector {
            $(#[test] fn $name() { super::with_pg(super::PGVECTOR_URL, super::$name); })*
        }
    };
}

conformance!(
    create_then_read_header,
    create_refuses_taken_and_bad_ids,
    append_and_read_back,
    empty_append_reports_next_seq,
    header_records_only_by_create,
    expected_seq_conflicts,
    unknown_sessions_are_not_found,
    concurrent_appends_are_gap_free,
    racing_expected_writers_one_wins,
    list_newest_first_and_find_by_prefix,
    fork_by_reference_stitches_parent,
    delete_and_restore,
    sessions_api_over_store,
);

fn meta(id: &str, secs: i64) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.provider = "anthropic".into();
    m.model = "claude-x".into();
    m.created_at = chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap();
    m
}

fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

fn texts(store: &Store, id: &str) -> Vec<String> {
    store
        .read(id)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match &r.record {
            Record::Message(m) => Some(m.text_content()),
            _ => None,
        })
        .collect()
}

fn create_then_read_header(store: &Store) {
    let m = meta("s-header", 1);
    let a = store.create(&m).unwrap();
    assert_eq!((a.first_seq, a.last_seq), (0, 0));
    assert_eq!(store.read_header("s-header").unwrap(), Some(m.clone()));
    let raw = store.read("s-header").unwrap();
    assert_eq!(raw.header, Some(m));
    assert!(raw.records.is_empty());
    assert_eq!(raw.last_seq, 0);
    assert!(raw.report.is_clean(), "{:?}", raw.report);
}

fn create_refuses_taken_and_bad_ids(store: &Store) {
    store.create(&meta("taken", 1)).unwrap();
    assert!(matches!(
        store.create(&meta("taken", 2)),
        Err(Error::SessionExists(id)) if id == "taken"
    ));
    for bad in ["", "../x", "a/b", ".hidden", "a b", "x..y"] {
        assert!(
            matches!(store.create(&meta(bad, 1)), Err(Error::InvalidId { .. })),
            "{bad:?} accepted"
        );
        assert!(matches!(store.read(bad), Err(Error::InvalidId { .. })));
        assert!(matches!(
            store.append(bad, &[msg("x")], None),
            Err(Error::InvalidId { .. })
        ));
    }
    // The first header stays.
    assert_eq!(
        store.read_header("taken").unwrap().unwrap().created_at,
        meta("taken", 1).created_at
    );
}

fn append_and_read_back(store: &Store) {
    store.create(&meta("rw", 1)).unwrap();
    let a = store.append("rw", &[msg("one")], None).unwrap();
    assert_eq!((a.first_seq, a.last_seq), (1, 1));
    let b = store
        .append("rw", &[msg("two"), msg("three \"quoted\"\n")], None)
        .unwrap();
    assert_eq!((b.first_seq, b.last_seq), (2, 3));
    let raw = store.read("rw").unwrap();
    assert!(raw.report.is_clean(), "{:?}", raw.report);
    assert_eq!(raw.last_seq, 3);
    assert_eq!(
        raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(texts(store, "rw"), ["one", "two", "three \"quoted\"\n"]);
    // A new handle (another process) continues the same chain.
    let c = store
        .append("rw", &[Record::Title { title: "t".into() }], Some(4))
        .unwrap();
    assert_eq!(c.first_seq, 4);
    assert!(store.read("rw").unwrap().report.is_clean());
}

fn empty_append_reports_next_seq(store: &Store) {
    store.create(&meta("empty", 1)).unwrap();
    store.append("empty", &[msg("a")], None).unwrap();
    let a = store.append("empty", &[], None).unwrap();
    assert_eq!((a.first_seq, a.last_seq), (2, 1));
    let a = store.append("empty", &[], Some(2)).unwrap();
    assert_eq!(a.first_seq, 2);
    assert!(matches!(
        store.append("empty", &[], Some(5)),
        Err(Error::Conflict {
            expected: 5,
            actual: 2,
            ..
        })
    ));
}

fn header_records_only_by_create(store: &Store) {
    store.create(&meta("hdr", 1)).unwrap();
    assert!(matches!(
        store.append("hdr", &[msg("a"), Record::Meta(meta("hdr", 2))], None),
        Err(Error::Invalid(_))
    ));
    assert_eq!(store.read("hdr").unwrap().last_seq, 0, "nothing written");
}

fn expected_seq_conflicts(store: &Store) {
    store.create(&meta("occ", 1)).unwrap();
    store.append("occ", &[msg("a")], Some(1)).unwrap();
    store.append("occ", &[msg("b"), msg("c")], Some(2)).unwrap();
    for wrong in [0, 1, 2, 3, 5, 100] {
        match store.append("occ", &[msg("lost")], Some(wrong)) {
            Err(Error::Conflict {
                id,
                expected,
                actual,
            }) => {
                assert_eq!(id, "occ");
                assert_eq!(expected, wrong);
                assert_eq!(actual, 4);
            }
            other => panic!("expected a conflict for {wrong}, got {other:?}"),
        }
    }
    assert_eq!(texts(store, "occ"), ["a", "b", "c"]);
    store.append("occ", &[msg("d")], Some(4)).unwrap();
    assert_eq!(store.read("occ").unwrap().last_seq, 4);
}

fn unknown_sessions_are_not_found(store: &Store) {
    assert!(matches!(store.read("nope"), Err(Error::NotFound(_))));
    assert!(matches!(store.read_header("nope"), Err(Error::NotFound(_))));
    assert!(matches!(
        store.append("nope", &[msg("x")], None),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.append("nope", &[msg("x")], Some(1)),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(store.delete("nope"), Err(Error::NotFound(_))));
}

fn concurrent_appends_are_gap_free(store: &Store) {
    const THREADS: usize = 8;
    const BATCHES: usize = 25;
    store.create(&meta("conc", 1)).unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut acked = Vec::new();
                for b in 0..BATCHES {
                    let recs = [msg(&format!("t{t}-b{b}-0")), msg(&format!("t{t}-b{b}-1"))];
                    let a = store.append("conc", &recs, None).unwrap();
                    assert_eq!(a.last_seq, a.first_seq + 1);
                    acked.push((a.first_seq, format!("t{t}-b{b}-0")));
                    acked.push((a.last_seq, format!("t{t}-b{b}-1")));
                }
                acked
            })
        })
        .collect();
    let acked: Vec<(u64, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let raw = store.read("conc").unwrap();
    assert!(raw.report.is_clean(), "{:?}", raw.report);
    let n = (THREADS * BATCHES * 2) as u64;
    assert_eq!(
        raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>(),
        "seq must be gap-free"
    );
    // Every acknowledged record is at the seq it was acknowledged with, once.
    let texts = texts(store, "conc");
    assert_eq!(texts.iter().collect::<HashSet<_>>().len(), texts.len());
    for (seq, text) in acked {
        assert_eq!(texts[(seq - 1) as usize], text);
    }
}

fn racing_expected_writers_one_wins(store: &Store) {
    const THREADS: usize = 6;
    const EACH: usize = 10;
    store.create(&meta("race", 1)).unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let (mut done, mut conflicts) = (0, 0);
                while done < EACH {
                    let next = store.read("race").unwrap().last_seq + 1;
                    match store.append("race", &[msg(&format!("t{t}-{done}"))], Some(next)) {
                        Ok(a) => {
                            assert_eq!(a.first_seq, next);
                            done += 1;
                        }
                        Err(Error::Conflict {
                            expected, actual, ..
                        }) => {
                            assert_eq!(expected, next);
                            assert!(actual > next);
                            conflicts += 1;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                conflicts
            })
        })
        .collect();
    let _conflicts: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let raw = store.read("race").unwrap();
    assert!(raw.report.is_clean());
    assert_eq!(
        raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=(THREADS * EACH) as u64).collect::<Vec<_>>()
    );
    let texts = texts(store, "race");
    assert_eq!(texts.iter().collect::<HashSet<_>>().len(), THREADS * EACH);
}

fn list_newest_first_and_find_by_prefix(store: &Store) {
    assert_eq!(store.list().unwrap().0.len(), 0);
    store.create(&meta("abc-1", 10)).unwrap();
    store.create(&meta("abc-2", 30)).unwrap();
    store.create(&meta("xyz-1", 20)).unwrap();
    let (listed, unreadable) = store.list().unwrap();
    assert_eq!(unreadable, 0);
    assert_eq!(
        listed
            .iter()
            .map(|l| l.meta.id.as_str())
            .collect::<Vec<_>>(),
        ["abc-2", "xyz-1", "abc-1"]
    );
    for l in &listed {
        assert_eq!(l.location, store.location(&l.meta.id));
    }
    assert_eq!(find_in(store.as_ref(), "xyz").unwrap(), "xyz-1");
    assert_eq!(find_in(store.as_ref(), "abc-1").unwrap(), "abc-1");
    match find_in(store.as_ref(), "abc") {
        Err(Error::Ambiguous { candidates, .. }) => assert_eq!(candidates, ["abc-1", "abc-2"]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        find_in(store.as_ref(), "q"),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        find_in(store.as_ref(), "../"),
        Err(Error::InvalidId { .. })
    ));
}

fn fork_by_reference_stitches_parent(store: &Store) {
    let parent = Session::create_in(store.clone(), meta("parent", 1)).unwrap();
    parent
        .append_messages(&[Message::user("p1"), Message::assistant("p2")])
        .unwrap();
    let mut child_meta = meta("child", 2);
    child_meta.parent = Some(ForkPoint {
        session: "parent".into(),
        seq: 2,
        messages: 2,
        parent_created_at: None,
    });
    let child = Session::create_in(store.clone(), child_meta).unwrap();
    parent.append_messages(&[Message::user("p3")]).unwrap();
    child.append_messages(&[Message::user("c1")]).unwrap();
    let t = read_in(store.as_ref(), "child").unwrap();
    assert_eq!(
        t.messages
            .iter()
            .map(|m| m.text_content())
            .collect::<Vec<_>>(),
        ["p1", "p2", "c1"]
    );
    assert_eq!(t.inherited, 2);
    assert!(t.report.is_clean(), "{:?}", t.report);
    let p = read_in(store.as_ref(), "parent").unwrap();
    assert_eq!(p.messages.len(), 3);
}

fn delete_and_restore(store: &Store) {
    store.create(&meta("gone", 1)).unwrap();
    store.create(&meta("stays", 2)).unwrap();
    store.append("gone", &[msg("a"), msg("b")], None).unwrap();
    store.delete("gone").unwrap();
    assert!(matches!(store.read("gone"), Err(Error::NotFound(_))));
    assert!(matches!(store.read_header("gone"), Err(Error::NotFound(_))));
    assert!(matches!(
        store.append("gone", &[msg("c")], None),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(store.delete("gone"), Err(Error::NotFound(_))));
    let ids: Vec<String> = store
        .list()
        .unwrap()
        .0
        .into_iter()
        .map(|l| l.meta.id)
        .collect();
    assert_eq!(ids, ["stays"]);
    // A session handle reports the deletion in words.
    assert!(matches!(
        Session::open_in(store.clone(), "gone"),
        Err(Error::NotFound(_))
    ));
    store.restore("gone").unwrap();
    assert_eq!(texts(store, "gone"), ["a", "b"]);
    assert!(matches!(store.restore("gone"), Err(Error::NotFound(_))));
    assert!(matches!(store.restore("never"), Err(Error::NotFound(_))));
    let a = store.append("gone", &[msg("c")], Some(3)).unwrap();
    assert_eq!(a.first_seq, 3);
    assert!(store.read("gone").unwrap().report.is_clean());
}

fn sessions_api_over_store(store: &Store) {
    let s = Session::create_in(store.clone(), meta("api", 1)).unwrap();
    s.append_messages(&[Message::user("hi"), Message::assistant("hello")])
        .unwrap();
    let before = vec![Message::user("hi"), Message::assistant("hello")];
    let mut after = before.clone();
    after.push(Message::user("more"));
    s.record_run(&before, &after.clone().into()).unwrap();
    assert!(matches!(
        s.append_expecting(&[msg("x")], 1),
        Err(Error::Conflict { actual: 4, .. })
    ));
    let reopened = Session::open_in(store.clone(), "api").unwrap();
    let t = reopened.transcript().unwrap();
    assert_eq!(t.messages.len(), 3);
    assert_eq!(t.last_seq, 3);
}

/// The PostgreSQL backend stores exactly the bytes the file store writes.
#[test]
fn postgres_rows_are_the_file_lines() {
    let Some((pg, schema)) = pg_store(POSTGRES_URL, VectorMode::Auto) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::new(dir.path(), Durability::None);
    let m = meta("same", 5);
    let recs = [
        msg("one"),
        Record::Title {
            title: "ü ✓".into(),
        },
        msg("two"),
    ];
    for s in [&file as &dyn LogStore, pg.as_ref()] {
        s.create(&m).unwrap();
        s.append("same", &recs[..1], None).unwrap();
        s.append("same", &recs[1..], None).unwrap();
    }
    let on_disk = std::fs::read_to_string(file.path_of("same").unwrap()).unwrap();
    let mut client = schema.client();
    let rows = client
        .query(
            "SELECT line FROM memoir_records WHERE session_id = 'same' ORDER BY seq",
            &[],
        )
        .unwrap();
    let mut joined = String::new();
    for r in rows {
        joined.push_str(r.get::<_, &str>(0));
        joined.push('\n');
    }
    assert_eq!(joined, on_disk);
}

/// Two independent handles on one store (two processes, or two servers on
/// one database) racing on one session: gap-free, each record once, and the
/// loser of an expected-seq race gets a conflict.
fn two_handles_race(a: Store, b: Store) {
    a.create(&meta("shared", 1)).unwrap();
    let handles: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, store)| {
            std::thread::spawn(move || {
                for i in 0..60 {
                    let text = format!("h{w}-{i}");
                    if i % 2 == 0 {
                        store.append("shared", &[msg(&text)], None).unwrap();
                    } else {
                        loop {
                            let next = store.read("shared").unwrap().last_seq + 1;
                            match store.append("shared", &[msg(&text)], Some(next)) {
                                Ok(_) => break,
                                Err(Error::Conflict { .. }) => continue,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for s in [&a, &b] {
        let raw = s.read("shared").unwrap();
        assert!(raw.report.is_clean(), "{:?}", raw.report);
        assert_eq!(
            raw.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=120).collect::<Vec<_>>()
        );
    }
    let t = texts(&a, "shared");
    assert_eq!(t.iter().collect::<HashSet<_>>().len(), 120);
}

#[test]
fn two_handles_race_file() {
    let dir = tempfile::tempdir().unwrap();
    let a: Store = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let b: Store = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    two_handles_race(a, b);
}

fn two_pg_handles(var: &str) {
    let Some((a, schema)) = pg_store(var, VectorMode::Auto) else {
        return;
    };
    let b =
        memoir::store::postgres::PgStore::connect(&schema.url, schema.options(VectorMode::Auto))
            .unwrap();
    two_handles_race(a, Arc::new(b));
}

#[test]
fn two_handles_race_postgres() {
    two_pg_handles(POSTGRES_URL);
}

#[test]
fn two_handles_race_pgvector() {
    two_pg_handles(PGVECTOR_URL);
}
