//! The database restarting under load: appends fail cleanly (an
//! "unavailable" error, never a wrong answer) while it is down, succeed again
//! once it is back, and nothing that was acknowledged is lost or duplicated.
//!
//! Uses the dedicated `pgfault` cluster of `.ci/postgres.sh`
//! (`MEMOIR_TEST_FAULT_POSTGRES_URL`) and restarts it with the script named by
//! `MEMOIR_TEST_FAULT_POSTGRES_RESTART` (`pg_ctl restart -m fast`).

use crate::postgres_common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::store::postgres::{is_unavailable, PgStore, VectorMode};
use memoir::store::LogStore;

use postgres_common::{pg_url, TempSchema};

const URL: &str = "MEMOIR_TEST_FAULT_POSTGRES_URL";
const RESTART: &str = "MEMOIR_TEST_FAULT_POSTGRES_RESTART";

fn restart(script: &str) {
    let status = std::process::Command::new(script)
        .status()
        .expect("run the restart script");
    assert!(status.success(), "{script} failed: {status}");
}

#[test]
fn appends_survive_a_database_restart() {
    let (Some(url), Some(script)) = (pg_url(URL), pg_url(RESTART)) else {
        return;
    };
    let _serial = postgres_common::fault_lock();
    const WRITERS: usize = 6;
    const SESSIONS: usize = 3;
    let schema = TempSchema::new(&url);
    let mut opts = schema.options(VectorMode::Auto);
    opts.connect_timeout = Duration::from_secs(2);
    let store = Arc::new(PgStore::connect(&url, opts).unwrap());
    for s in 0..SESSIONS {
        store.create(&SessionMeta::new(format!("f{s}"))).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let acked_after_restart = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let stop = stop.clone();
            let restarted = restarted.clone();
            let after = acked_after_restart.clone();
            std::thread::spawn(move || {
                let mut acked: Vec<(String, u64, String)> = Vec::new();
                let mut failures = 0usize;
                let mut i = 0usize;
                let deadline = Instant::now() + Duration::from_secs(40);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let id = format!("f{}", (w + i) % SESSIONS);
                    let text = format!("w{w}-{i}");
                    i += 1;
                    match store.append(&id, &[Record::Message(Message::user(&text))], None) {
                        Ok(a) => {
                            assert_eq!(a.first_seq, a.last_seq);
                            acked.push((id, a.first_seq, text));
                            if restarted.load(Ordering::Relaxed) {
                                after.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            assert!(
                                is_unavailable(&e),
                                "a failure that is not 'unavailable': {e}"
                            );
                            failures += 1;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                (acked, failures)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    restart(&script);
    restarted.store(true, Ordering::Relaxed);
    // Load continues until enough appends succeeded after the restart.
    let wait_until = Instant::now() + Duration::from_secs(30);
    while acked_after_restart.load(Ordering::Relaxed) < 200 && Instant::now() < wait_until {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    let mut failures = 0;
    for h in handles {
        let (a, f) = h.join().unwrap();
        acked.extend(a);
        failures += f;
    }
    let after = acked_after_restart.load(Ordering::Relaxed);
    eprintln!(
        "acknowledged {} appends ({after} after the restart); {failures} failed cleanly",
        acked.len()
    );
    assert!(
        after >= 200,
        "appends did not recover after the restart ({after})"
    );
    // Every acknowledged record is stored exactly once, at its seq; seqs are gap-free.
    for s in 0..SESSIONS {
        let id = format!("f{s}");
        let raw = store.read(&id).unwrap();
        assert!(raw.report.is_clean(), "{id}: {:?}", raw.report);
        let seqs: Vec<u64> = raw.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=raw.last_seq).collect::<Vec<_>>(), "{id}: gap");
        let mut by_text: HashMap<String, Vec<u64>> = HashMap::new();
        for r in &raw.records {
            if let Record::Message(m) = &r.record {
                by_text.entry(m.text_content()).or_default().push(r.seq);
            }
        }
        for (sid, seq, text) in acked.iter().filter(|a| a.0 == id) {
            assert_eq!(
                by_text.get(text),
                Some(&vec![*seq]),
                "{sid}: acknowledged {text} at seq {seq} is missing or duplicated"
            );
        }
        assert!(
            by_text.values().all(|v| v.len() == 1),
            "{id}: duplicate record"
        );
    }
}

#[test]
fn reads_fail_cleanly_while_down_and_recover() {
    let (Some(url), Some(script)) = (pg_url(URL), pg_url(RESTART)) else {
        return;
    };
    let _serial = postgres_common::fault_lock();
    let schema = TempSchema::new(&url);
    let store = PgStore::connect(&url, schema.options(VectorMode::Auto)).unwrap();
    store.create(&SessionMeta::new("r")).unwrap();
    store
        .append("r", &[Record::Message(Message::user("kept"))], None)
        .unwrap();
    restart(&script);
    // The pooled connection is dead; the store notices and reconnects.
    let raw = store.read("r").unwrap();
    assert_eq!(raw.last_seq, 1);
    store
        .append("r", &[Record::Message(Message::user("after"))], Some(2))
        .unwrap();
    assert_eq!(store.read("r").unwrap().last_seq, 2);
}
