//! The SQLite search index under rebuilds and damage: a rebuild is built
//! beside the live index and swapped in, so searches meanwhile (on other
//! connections) always get every hit; an index kept open follows a swap
//! made elsewhere; a damaged or swapped-in file is never trusted, whichever
//! file and however it was damaged; every file the index writes is
//! owner-only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use memoir::message::Message;
use memoir::record::{Record, SessionMeta};
use memoir::search::{SearchFilter, SearchIndex, SearchMode, SearchQuery};
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};

/// `sessions` sessions of `per` messages each; message 3 of every session
/// says "flamingo". Returns the store.
fn store_with(dir: &Path, prefix: &str, sessions: usize, per: usize) -> Arc<dyn LogStore> {
    let st: Arc<dyn LogStore> = Arc::new(FileStore::new(dir, Durability::None));
    for s in 0..sessions {
        let id = format!("{prefix}{s}");
        st.create(&SessionMeta::new(&id)).unwrap();
        let records: Vec<Record> = (0..per)
            .map(|i| {
                Record::Message(Message::user(if i == 3 {
                    format!("the flamingo of {id} stands on one leg")
                } else {
                    format!("ordinary chatter {i} about pipelines and caches in {id}")
                }))
            })
            .collect();
        st.append(&id, &records, None).unwrap();
    }
    st
}

fn lexical(text: &str) -> SearchQuery {
    SearchQuery {
        text: text.into(),
        k: 1000,
        mode: SearchMode::Lexical,
        filter: SearchFilter::default(),
    }
}

/// The sessions holding a "flamingo" hit, sorted.
fn flamingo_sessions(ix: &SearchIndex) -> Result<Vec<String>, String> {
    let hits = ix.search(&lexical("flamingo")).map_err(|e| e.to_string())?;
    let mut s: Vec<String> = hits.into_iter().map(|h| h.session).collect();
    s.sort();
    Ok(s)
}

fn expected(prefix: &str, sessions: usize) -> Vec<String> {
    let mut e: Vec<String> = (0..sessions).map(|s| format!("{prefix}{s}")).collect();
    e.sort();
    e
}

/// Searches on their own connections, in threads, while another index of
/// the same store rebuilds again and again: every search returns every
/// hit, none fails.
#[test]
fn searches_during_rebuilds_get_every_hit_and_never_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = 40;
    store_with(tmp.path(), "s", sessions, 30);
    let mut writer = SearchIndex::open(tmp.path()).unwrap();
    writer.update().unwrap();
    let want = expected("s", sessions);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (dir, stop, want) = (tmp.path().to_path_buf(), stop.clone(), want.clone());
            std::thread::spawn(move || {
                let mut ix = SearchIndex::open(&dir).unwrap();
                let (mut searches, mut wrong) = (0, Vec::new());
                while !stop.load(Ordering::Relaxed) || searches == 0 {
                    // One reader also catches up first, as a server does.
                    if r == 0 {
                        if let Err(e) = ix.update() {
                            wrong.push(format!("update: {e}"));
                        }
                    }
                    match flamingo_sessions(&ix) {
                        Ok(got) if got == want => {}
                        Ok(got) => wrong.push(format!("{} hits", got.len())),
                        Err(e) => wrong.push(e),
                    }
                    searches += 1;
                }
                (searches, wrong)
            })
        })
        .collect();
    for _ in 0..4 {
        let report = writer.rebuild().unwrap();
        assert!(report.rebuilt);
        assert_eq!(report.messages, (sessions * 30) as u64);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let (searches, wrong) = r.join().unwrap();
        assert!(searches > 0);
        assert!(
            wrong.is_empty(),
            "{} of {searches} searches went wrong: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
    }
}

/// An index kept open (a server's, an MCP server's) answers after another
/// process rebuilt the index under it, and keeps catching up.
#[test]
fn an_index_kept_open_follows_a_rebuild_made_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store_with(tmp.path(), "s", 5, 10);
    let mut kept = SearchIndex::open(tmp.path()).unwrap();
    kept.update().unwrap();
    assert_eq!(flamingo_sessions(&kept).unwrap(), expected("s", 5));
    for round in 0..2 {
        let mut other = SearchIndex::open(tmp.path()).unwrap();
        other.rebuild().unwrap();
        drop(other);
        assert_eq!(
            flamingo_sessions(&kept).unwrap(),
            expected("s", 5),
            "round {round}"
        );
        kept.update().unwrap();
        assert_eq!(flamingo_sessions(&kept).unwrap(), expected("s", 5));
    }
    // New sessions are still caught up by the index kept open.
    st.create(&SessionMeta::new("late")).unwrap();
    st.append(
        "late",
        &[Record::Message(Message::user("a late flamingo"))],
        None,
    )
    .unwrap();
    kept.update().unwrap();
    let got = flamingo_sessions(&kept).unwrap();
    assert!(got.contains(&"late".to_string()), "{got:?}");
}

/// Every file named `name` under `dir`, recursively.
fn files_named(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_named(&p, name));
        } else if e.file_name() == name {
            out.push(p);
        }
    }
    out
}

/// The one file `name` of the index of sessions directory `dir`.
fn index_file(dir: &Path, name: &str) -> PathBuf {
    let found = files_named(&dir.join(memoir::search::INDEX_DIR), name);
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

/// Ways to damage a file of the index.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut to half its length.
    Truncate,
    /// Its bytes after the first page overwritten with garbage (the
    /// header, and so the stamp's page, left as it was).
    Garbage,
    /// Replaced by the same file of another store's index (valid stamp,
    /// same batch counter).
    Swap,
}

fn damage(file: &Path, how: Damage, other: &Path) {
    match how {
        Damage::Truncate => {
            let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
            let len = f.metadata().unwrap().len();
            f.set_len(len / 2).unwrap();
        }
        Damage::Garbage => {
            let mut bytes = std::fs::read(file).unwrap();
            for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
                *b = (i * 7 + 13) as u8;
            }
            std::fs::write(file, bytes).unwrap();
        }
        Damage::Swap => {
            let tmp = file.with_extension("swap");
            std::fs::copy(other, &tmp).unwrap();
            std::fs::rename(&tmp, file).unwrap();
        }
    }
}

/// Each of the two files, damaged each way, with the index closed and with
/// it kept open: the next search answers right (the index was rebuilt),
/// never an error and never another store's hits.
#[test]
fn a_damaged_or_swapped_index_file_is_rebuilt_never_trusted() {
    for name in [memoir::search::INDEX_FILE, memoir::search::TERMS_FILE] {
        for how in [Damage::Truncate, Damage::Garbage, Damage::Swap] {
            for kept_open in [false, true] {
                let case = format!("{name} {how:?} kept_open={kept_open}");
                let ours = tempfile::tempdir().unwrap();
                let theirs = tempfile::tempdir().unwrap();
                store_with(ours.path(), "ours", 6, 200);
                store_with(theirs.path(), "theirs", 6, 200);
                for dir in [ours.path(), theirs.path()] {
                    let mut ix = SearchIndex::open(dir).unwrap();
                    ix.update().unwrap();
                }
                let kept = kept_open.then(|| {
                    let mut ix = SearchIndex::open(ours.path()).unwrap();
                    ix.update().unwrap();
                    assert_eq!(flamingo_sessions(&ix).unwrap(), expected("ours", 6));
                    ix
                });
                damage(
                    &index_file(ours.path(), name),
                    how,
                    &index_file(theirs.path(), name),
                );
                let mut ix = match kept {
                    Some(ix) => ix,
                    None => SearchIndex::open(ours.path()).unwrap(),
                };
                let searched = ix
                    .update()
                    .map_err(|e| e.to_string())
                    .and_then(|_| flamingo_sessions(&ix));
                assert_eq!(searched, Ok(expected("ours", 6)), "{case}");
                // And the index is whole again for the next opener.
                let again = SearchIndex::open(ours.path()).unwrap();
                assert!(!again.rebuilt_on_open(), "{case}");
                assert_eq!(flamingo_sessions(&again).unwrap(), expected("ours", 6));
            }
        }
    }
}

/// Every file under `dir` that its group or others may read or write.
fn shared_files(dir: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            if m.mode() & 0o077 != 0 {
                out.push((p.clone(), m.mode() & 0o777));
            }
            out.extend(shared_files(&p));
        } else if m.mode() & 0o077 != 0 {
            out.push((p, m.mode() & 0o777));
        }
    }
    out
}

/// Sessions written through the manager (with its index, notes and a
/// payload large enough for the blob store), the search index built,
/// searched, rebuilt, kept open across a rebuild, its vectors stored: no
/// file or directory under the store is readable by anyone but its owner,
/// whatever the process's umask allows.
#[test]
fn every_file_the_store_and_its_index_write_is_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let mut m = memoir::manager::SessionManager::open(&dir, Default::default()).unwrap();
    m.create_session("modes", Some("modes")).unwrap();
    m.add_messages([
        Message::user("the flamingo question"),
        Message::assistant("x".repeat(300_000)),
    ])
    .unwrap();
    m.flush().unwrap();
    store_with(&dir, "s", 3, 10);
    let mut ix = SearchIndex::open(&dir).unwrap();
    ix.update().unwrap();
    ix.embed_missing(16, &mut |_, _| {}).unwrap();
    let mut other = SearchIndex::open(&dir).unwrap();
    other.rebuild().unwrap();
    ix.update().unwrap();
    assert!(!flamingo_sessions(&ix).unwrap().is_empty());
    // A database kept open in WAL mode has its -wal and -shm files now.
    let shared = shared_files(tmp.path());
    assert!(shared.is_empty(), "group/other may read: {shared:?}");
    drop((ix, other, m));
    let shared = shared_files(tmp.path());
    assert!(shared.is_empty(), "group/other may read: {shared:?}");
}
