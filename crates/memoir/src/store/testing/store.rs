//! The [`LogStore`](crate::store::LogStore) contract as checks: every backend must pass each one on
//! a fresh, empty store. `crates/memoir/tests/suite/store_conformance.rs` runs them
//! on the file store, the in-memory store and PostgreSQL (with and without
//! pgvector); a new backend calls [`run_all`] (or [`CHECKS`] one by one).

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use crate::error::{ErrorKind, StoreError};
use crate::message::Message;
use crate::record::{ForkPoint, Record, SessionMeta};
use crate::store::{Span, PROJECT_KEY};
use crate::transcript::{find_in, read_in, Session};
use crate::Error;

pub use super::{Check, Store};

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("create_then_read_header", create_then_read_header),
    (
        "create_refuses_taken_and_bad_ids",
        create_refuses_taken_and_bad_ids,
    ),
    ("append_and_read_back", append_and_read_back),
    (
        "spans_read_back_their_records",
        spans_read_back_their_records,
    ),
    (
        "empty_append_reports_next_seq",
        empty_append_reports_next_seq,
    ),
    (
        "header_records_only_by_create",
        header_records_only_by_create,
    ),
    ("expected_seq_conflicts", expected_seq_conflicts),
    (
        "unknown_sessions_are_not_found",
        unknown_sessions_are_not_found,
    ),
    (
        "concurrent_appends_are_gap_free",
        concurrent_appends_are_gap_free,
    ),
    (
        "racing_expected_writers_one_wins",
        racing_expected_writers_one_wins,
    ),
    (
        "list_newest_first_and_find_by_prefix",
        list_newest_first_and_find_by_prefix,
    ),
    (
        "fork_by_reference_stitches_parent",
        fork_by_reference_stitches_parent,
    ),
    ("delete_and_restore", delete_and_restore),
    ("sessions_api_over_store", sessions_api_over_store),
    ("trash_lists_reads_and_purges", trash_lists_reads_and_purges),
    (
        "list_project_filters_by_header",
        list_project_filters_by_header,
    ),
    (
        "lease_excludes_a_second_taker",
        lease_excludes_a_second_taker,
    ),
    (
        "fork_refuses_a_cut_beyond_the_parent",
        fork_refuses_a_cut_beyond_the_parent,
    ),
    (
        "reused_parent_id_is_not_stitched",
        reused_parent_id_is_not_stitched,
    ),
    ("errors_have_kinds", errors_have_kinds),
];

/// Run every check, each on a fresh store from `fresh`.
pub fn run_all(fresh: &dyn Fn() -> Store) {
    for (name, check) in CHECKS {
        eprintln!("store conformance: {name}");
        check(&fresh());
    }
}

pub fn meta(id: &str, secs: i64) -> SessionMeta {
    let mut m = SessionMeta::new(id);
    m.provider = "anthropic".into();
    m.model = "claude-x".into();
    m.created_at = chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap();
    m
}

pub fn msg(text: &str) -> Record {
    Record::Message(Message::user(text))
}

pub fn texts(store: &Store, id: &str) -> Vec<String> {
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

pub fn create_then_read_header(store: &Store) {
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

pub fn create_refuses_taken_and_bad_ids(store: &Store) {
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

pub fn append_and_read_back(store: &Store) {
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

/// A backend that gives spans ([`crate::store::RawLog::spans`]) gives one
/// per record, and [`crate::store::LogStore::read_span`] reads each record
/// back; a span that is not a record's line (shifted, cut short, past the
/// end, of another session) reads nothing. A backend without spans reads
/// nothing back for any span.
pub fn spans_read_back_their_records(store: &Store) {
    store.create(&meta("spans", 1)).unwrap();
    store.create(&meta("other", 2)).unwrap();
    store.append("spans", &[msg("one")], None).unwrap();
    store
        .append("spans", &[msg("two"), msg("three \"quoted\"\n")], None)
        .unwrap();
    store.append("other", &[msg("elsewhere")], None).unwrap();
    let raw = store.read("spans").unwrap();
    let some = Span { offset: 0, len: 10 };
    if raw.spans.is_empty() {
        assert_eq!(store.read_span("spans", some).unwrap(), None);
        return;
    }
    assert_eq!(raw.spans.len(), raw.records.len());
    for (span, rec) in raw.spans.iter().zip(&raw.records) {
        assert_eq!(store.read_span("spans", *span).unwrap().as_ref(), Some(rec));
        for off in [
            Span {
                offset: span.offset + 1,
                ..*span
            },
            Span {
                len: span.len - 1,
                ..*span
            },
            Span {
                len: span.len + 1,
                ..*span
            },
            Span {
                offset: u64::MAX - 1,
                ..*span
            },
            Span { len: 0, ..*span },
        ] {
            assert_eq!(store.read_span("spans", off).unwrap(), None, "{off:?}");
        }
    }
    // The same place in another session's log is another record, or none.
    let other = store.read_span("other", raw.spans[0]).unwrap();
    assert_ne!(other.as_ref(), Some(&raw.records[0]));
    // Ids are checked as everywhere.
    assert!(store.read_span("../spans", raw.spans[0]).is_err());
    assert!(matches!(
        store.read_span("missing", raw.spans[0]),
        Err(Error::NotFound(_))
    ));
}

pub fn empty_append_reports_next_seq(store: &Store) {
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

pub fn header_records_only_by_create(store: &Store) {
    store.create(&meta("hdr", 1)).unwrap();
    assert!(matches!(
        store.append("hdr", &[msg("a"), Record::Meta(meta("hdr", 2))], None),
        Err(Error::Invalid(_))
    ));
    assert_eq!(store.read("hdr").unwrap().last_seq, 0, "nothing written");
}

pub fn expected_seq_conflicts(store: &Store) {
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

pub fn unknown_sessions_are_not_found(store: &Store) {
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

pub fn concurrent_appends_are_gap_free(store: &Store) {
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

pub fn racing_expected_writers_one_wins(store: &Store) {
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

pub fn list_newest_first_and_find_by_prefix(store: &Store) {
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

pub fn fork_by_reference_stitches_parent(store: &Store) {
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

pub fn delete_and_restore(store: &Store) {
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

pub fn sessions_api_over_store(store: &Store) {
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

pub fn trash_lists_reads_and_purges(store: &Store) {
    store.create(&meta("bin", 1)).unwrap();
    store.create(&meta("kept", 2)).unwrap();
    store.append("bin", &[msg("x")], None).unwrap();
    assert!(store.list_deleted().unwrap().is_empty());
    assert!(matches!(store.read_deleted("bin"), Err(Error::NotFound(_))));
    assert!(
        matches!(store.purge("bin"), Err(Error::NotFound(_))),
        "a live session is not purged"
    );
    store.delete("bin").unwrap();
    let deleted = store.list_deleted().unwrap();
    assert_eq!(
        deleted
            .iter()
            .map(|d| d.meta.id.as_str())
            .collect::<Vec<_>>(),
        ["bin"]
    );
    assert_eq!(store.read_deleted("bin").unwrap().last_seq, 1);
    assert_eq!(store.list().unwrap().0.len(), 1);
    store.purge("bin").unwrap();
    assert!(store.list_deleted().unwrap().is_empty());
    assert!(matches!(store.read_deleted("bin"), Err(Error::NotFound(_))));
    assert!(matches!(store.restore("bin"), Err(Error::NotFound(_))));
    assert!(matches!(store.purge("bin"), Err(Error::NotFound(_))));
    // The id is free again after a purge.
    store.create(&meta("bin", 3)).unwrap();
    assert_eq!(store.read("bin").unwrap().last_seq, 0);
}

pub fn list_project_filters_by_header(store: &Store) {
    for (id, project, secs) in [("pa-1", "a", 1), ("pb-1", "b", 2), ("pa-2", "a", 3)] {
        let mut m = meta(id, secs);
        m.extra.insert(PROJECT_KEY.into(), project.into());
        store.create(&m).unwrap();
    }
    store.create(&meta("none", 4)).unwrap();
    let (a, _) = store.list_project("a").unwrap();
    assert_eq!(
        a.iter().map(|l| l.meta.id.as_str()).collect::<Vec<_>>(),
        ["pa-2", "pa-1"]
    );
    let (c, _) = store.list_project("c").unwrap();
    assert!(c.is_empty());
}

pub fn lease_excludes_a_second_taker(store: &Store) {
    store.create(&meta("leased", 1)).unwrap();
    let lease = store.acquire_lease("leased").unwrap();
    assert_eq!(lease.id(), "leased");
    assert_eq!(lease.holder.pid, std::process::id());
    match store.acquire_lease("leased") {
        Err(Error::Busy { id, pid, .. }) => {
            assert_eq!(id, "leased");
            assert_eq!(pid, std::process::id(), "the holder is named");
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    drop(lease);
    let again = store.acquire_lease("leased").unwrap();
    drop(again);
    assert!(matches!(
        store.acquire_lease("no-such"),
        Err(Error::NotFound(_))
    ));
}

pub fn fork_refuses_a_cut_beyond_the_parent(store: &Store) {
    let parent = Session::create_in(store.clone(), meta("short", 1)).unwrap();
    parent.append_messages(&[Message::user("p1")]).unwrap();
    let mut child = meta("too-far", 2);
    child.parent = Some(ForkPoint::new("short", 1_000_000_000, 1));
    match Session::create_in(store.clone(), child) {
        Err(Error::Store(StoreError::ForeignParent { parent, .. })) => assert_eq!(parent, "short"),
        other => panic!("expected ForeignParent, got {other:?}"),
    }
    assert!(
        matches!(store.read("too-far"), Err(Error::NotFound(_))),
        "nothing created"
    );
    // Another project's session is not a parent.
    let mut other = meta("other-proj", 3);
    other.extra.insert(PROJECT_KEY.into(), "b".into());
    other.parent = Some(ForkPoint::new("short", 1, 1));
    let mut short_a = meta("short-a", 4);
    short_a.extra.insert(PROJECT_KEY.into(), "a".into());
    Session::create_in(store.clone(), short_a).unwrap();
    let mut cross = meta("cross", 5);
    cross.extra.insert(PROJECT_KEY.into(), "b".into());
    cross.parent = Some(ForkPoint::new("short-a", 0, 0));
    assert!(matches!(
        Session::create_in(store.clone(), cross),
        Err(Error::Store(StoreError::ForeignParent { .. }))
    ));
    // A valid cut is stamped with the parent's creation time.
    let mut ok = meta("fine", 6);
    ok.parent = Some(ForkPoint::new("short", 1, 1));
    let s = Session::create_in(store.clone(), ok).unwrap();
    assert_eq!(
        s.meta.parent.unwrap().parent_created_at,
        Some(meta("short", 1).created_at)
    );
}

pub fn reused_parent_id_is_not_stitched(store: &Store) {
    let parent = Session::create_in(store.clone(), meta("reused", 1)).unwrap();
    parent
        .append_messages(&[Message::user("secret of the first")])
        .unwrap();
    let mut child = meta("orphan", 2);
    child.parent = Some(ForkPoint::new("reused", 1, 1));
    Session::create_in(store.clone(), child).unwrap();
    assert_eq!(read_in(store.as_ref(), "orphan").unwrap().messages.len(), 1);
    // The parent goes away for good and a different session takes its id.
    store.delete("reused").unwrap();
    store.purge("reused").unwrap();
    let impostor = Session::create_in(store.clone(), meta("reused", 50)).unwrap();
    impostor
        .append_messages(&[Message::user("someone else's")])
        .unwrap();
    let t = read_in(store.as_ref(), "orphan").unwrap();
    assert!(
        t.messages.is_empty(),
        "stitched the impostor: {:?}",
        t.messages
    );
    assert!(
        t.report
            .issues
            .iter()
            .any(|i| i.to_string().contains("different session")),
        "{:?}",
        t.report
    );
}

pub fn errors_have_kinds(store: &Store) {
    assert_eq!(store.read("nope").unwrap_err().kind(), ErrorKind::NotFound);
    store.create(&meta("k", 1)).unwrap();
    assert_eq!(
        store.create(&meta("k", 1)).unwrap_err().kind(),
        ErrorKind::Exists
    );
    assert_eq!(
        store.append("k", &[msg("a")], Some(9)).unwrap_err().kind(),
        ErrorKind::Conflict
    );
    assert_eq!(store.read("../x").unwrap_err().kind(), ErrorKind::Invalid);
}

/// Two independent handles on one store (two processes, or two servers on
/// one database) racing on one session: gap-free, each record once, and the
/// loser of an expected-seq race gets a conflict.
pub fn two_handles_race(a: Store, b: Store) {
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
