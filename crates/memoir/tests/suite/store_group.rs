//! Group commit in the file store: appends to one session from
//! many threads share writes and syncs, every append keeps its own atomic
//! `seq` range, and what was acknowledged survives a SIGKILL of the process
//! in the middle of it.
//!
//! The killed process is this test binary itself, re-run with
//! `MEMOIR_GROUP_WRITER` set: 8 threads append to one session with fsync
//! durability and log each acknowledged `seq` (and its text) to a file.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::message::{Block, Message};
use memoir::record::{Record, SessionMeta};
use memoir::store::fault::FaultPlan;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

const WRITER_ENV: &str = "MEMOIR_GROUP_WRITER";

fn text_of(r: &Record) -> Option<&str> {
    match r {
        Record::Message(m) => match m.content.first() {
            Some(Block::Text { text }) => Some(text),
            _ => None,
        },
        _ => None,
    }
}

#[test]
fn concurrent_appends_to_one_session_share_syncs_and_stay_gap_free() {
    let dir = tempfile::tempdir().unwrap();
    let plan = FaultPlan::new();
    let store = Arc::new(FileStore::with_faults(
        dir.path(),
        Durability::Fsync,
        plan.clone(),
    ));
    store.create(&SessionMeta::new("shared")).unwrap();
    let before = plan.syncs();
    let (threads, per) = (8, 40);
    let acked: Vec<Vec<(u64, u64, String)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let store = store.clone();
                s.spawn(move || {
                    (0..per)
                        .map(|i| {
                            // Every other append is a batch of two.
                            let n = 1 + (i % 2);
                            let recs: Vec<Record> = (0..n)
                                .map(|k| Record::Message(Message::user(format!("t{t} i{i} k{k}"))))
                                .collect();
                            let a = store.append("shared", &recs, None).unwrap();
                            assert_eq!(a.last_seq - a.first_seq + 1, n as u64);
                            (a.first_seq, a.last_seq, format!("t{t} i{i}"))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let appends = threads * per;
    let syncs = plan.syncs() - before;
    assert!(
        syncs < appends as u64,
        "{syncs} syncs for {appends} concurrent appends: none were shared"
    );
    let log = store.read("shared").unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let by_seq: HashMap<u64, &Record> = log.records.iter().map(|r| (r.seq, &r.record)).collect();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for thread in &acked {
        for (first, last, prefix) in thread {
            for (k, seq) in (*first..=*last).enumerate() {
                assert_eq!(
                    text_of(by_seq[&seq]),
                    Some(format!("{prefix} k{k}").as_str()),
                    "seq {seq}"
                );
            }
            ranges.push((*first, *last));
        }
        // Each thread's appends land in its own order.
        assert!(thread.windows(2).all(|w| w[0].1 < w[1].0));
    }
    ranges.sort();
    assert_eq!(ranges[0].0, 1);
    assert!(
        ranges.windows(2).all(|w| w[0].1 + 1 == w[1].0),
        "gap-free, no overlap"
    );
    assert_eq!(ranges.last().unwrap().1, log.last_seq);
}

/// Run as the writer process when asked to (a no-op test otherwise).
#[test]
fn group_writer_process() {
    let Ok(dir) = std::env::var(WRITER_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let store = Arc::new(FileStore::new(dir, Durability::Fsync));
    std::thread::scope(|s| {
        for t in 0..8 {
            let store = store.clone();
            s.spawn(move || {
                let mut acks = fs::File::create(dir.join(format!("acks-{t}"))).unwrap();
                for i in 0.. {
                    let text = format!("t{t} i{i}");
                    let recs = vec![Record::Message(Message::user(text.clone()))];
                    let a = store.append("shared", &recs, None).unwrap();
                    // Logged only once acknowledged (the page cache survives SIGKILL).
                    writeln!(acks, "{} {text}", a.first_seq).unwrap();
                }
            });
        }
    });
}

#[test]
fn acknowledged_group_appends_survive_sigkill() {
    if std::env::var(WRITER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    FileStore::new(dir.path(), Durability::Fsync)
        .create(&SessionMeta::new("shared"))
        .unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store_group::group_writer_process",
            "--nocapture",
        ])
        .env(WRITER_ENV, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let acked = |dir: &Path| -> Vec<(u64, String)> {
        (0..8)
            .flat_map(|t| {
                fs::read_to_string(dir.join(format!("acks-{t}")))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| {
                        let (seq, text) = l.split_once(' ')?;
                        Some((seq.parse().ok()?, text.to_string()))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked(dir.path()).len() < 200 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        assert!(child.try_wait().unwrap().is_none(), "the writer exited");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let acks = acked(dir.path());
    let store = FileStore::new(dir.path(), Durability::Fsync);
    let log = store.read("shared").unwrap();
    let by_seq: HashMap<u64, &Record> = log.records.iter().map(|r| (r.seq, &r.record)).collect();
    for (seq, text) in &acks {
        assert_eq!(
            by_seq.get(seq).and_then(|r| text_of(r)),
            Some(text.as_str()),
            "acknowledged seq {seq} lost or changed"
        );
    }
    // The log verifies up to its end and the next append continues it.
    assert!(
        log.report
            .issues
            .iter()
            .all(|i| matches!(i.kind, memoir::store::IssueKind::TornTail { .. })),
        "{:?}",
        log.report
    );
    let next = store
        .append("shared", &[Record::Message(Message::user("after"))], None)
        .unwrap();
    assert_eq!(next.first_seq, log.last_seq + 1);
    assert!(store.read("shared").unwrap().report.is_clean());
}
