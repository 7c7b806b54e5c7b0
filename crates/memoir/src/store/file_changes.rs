//! The file store's change journal, `<dir>/index/changes`: one line per
//! change to a transcript, so a listing cache ([`crate::manager::index`]) can
//! tell which sessions moved on by reading one file, without a `stat` per
//! transcript.
//!
//! Format (see `docs/FORMAT.md`, "Change journal"): a first line
//! `memoir-changes 1 <epoch>` (32 hex digits, new each time the journal is
//! started or compacted), then one line per change: the session id.
//!
//! Protocol:
//! - The journal exists once a listing has started it ([`Journal::position`]);
//!   a store nobody lists through a snapshot keeps none, and writers do not
//!   create it.
//! - Every append, tail repair and touch writes its line **before** changing
//!   the transcript and **while holding the transcript's append lock**: a
//!   reader that sees the line and then takes that lock (shared) sees the
//!   change complete, and a writer killed between the line and the change
//!   leaves only a harmless extra refresh. A writer that found no journal
//!   looks again after its change (a listing may have started one
//!   meanwhile) and notes it then.
//! - Writers hold a shared `flock` on the journal while writing their line;
//!   [`Journal::compact`] (truncate and start a new epoch) holds it
//!   exclusively, so no line is lost to a compaction.
//! - Creates, deletes and restores are not journalled: they change the store
//!   directory's modification time, which a listing compares instead.
//! - No fsync: the journal is a hint for caches. After a reboot a cache does
//!   not trust it (its snapshot names the boot it was written in).

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Name of the journal inside a store's index directory.
pub const JOURNAL_FILE: &str = "changes";

/// What the journal's first line starts with.
const MAGIC: &str = "memoir-changes 1 ";

/// Length of the first line: magic, 32 hex digits, newline.
const HEADER_LEN: u64 = MAGIC.len() as u64 + 32 + 1;

/// A place in the journal: its epoch and a byte offset in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The epoch named by the journal's first line.
    pub epoch: String,
    /// Byte offset (at least the header's length).
    pub offset: u64,
}

impl Position {
    /// The start of this position's epoch (before its first noted id).
    pub fn epoch_start(&self) -> Position {
        Position {
            epoch: self.epoch.clone(),
            offset: HEADER_LEN,
        }
    }
}

/// What changed since a [`Position`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// The ids noted since (in order, possibly repeated), and the new end.
    Changes {
        /// Session ids, as noted.
        ids: Vec<String>,
        /// The position after the last complete line read.
        end: Position,
    },
    /// The journal was restarted, compacted or lost since: what changed is
    /// unknown.
    Unknown,
}

/// The change journal of one store directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    path: PathBuf,
}

impl Journal {
    /// The journal of the store in `store_dir`.
    pub fn new(store_dir: &Path) -> Journal {
        let dir = store_dir.join(super::INDEX_DIR);
        Journal {
            path: dir.join(JOURNAL_FILE),
            dir,
        }
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Open the journal; `create`: also when it does not exist yet.
    fn open(&self, create: bool) -> io::Result<File> {
        let open = || {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(create)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&self.path)
        };
        match open() {
            Err(e) if create && e.kind() == ErrorKind::NotFound => {
                crate::paths::create_private_dir(&self.dir).map_err(io::Error::other)?;
                open()
            }
            other => other,
        }
    }

    /// Open the journal, starting it (writing its first line) when it is new
    /// or empty; returned locked shared. `None` when it does not exist and
    /// `create` is false.
    fn open_started(&self, create: bool) -> io::Result<Option<File>> {
        let mut file = match self.open(create) {
            Ok(f) => f,
            Err(e) if !create && e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        file.lock_shared()?;
        if file.metadata()?.len() >= HEADER_LEN {
            return Ok(Some(file));
        }
        file.unlock()?;
        file.lock()?;
        let len = file.metadata()?.len();
        if len < HEADER_LEN {
            // Empty, or a start that was cut short: begin a new epoch.
            file.set_len(0)?;
            file.write_all(header(&new_epoch()).as_bytes())?;
        }
        // flock converts the exclusive lock to a shared one.
        file.lock_shared()?;
        Ok(Some(file))
    }

    /// Note that session `id` is about to change (or just changed). Call
    /// with the transcript's append lock held. Returns false, noting
    /// nothing, when the journal does not exist: a store nobody lists
    /// through a snapshot keeps no journal (the first listing starts it).
    pub fn note(&self, id: &str) -> io::Result<bool> {
        let Some(mut file) = self.open_started(false)? else {
            return Ok(false);
        };
        let mut line = Vec::with_capacity(id.len() + 1);
        line.extend_from_slice(id.as_bytes());
        line.push(b'\n');
        let written = file.write_all(&line);
        let _ = file.unlock();
        written.map(|()| true)
    }

    /// The journal's current end (starting it when it does not exist).
    pub fn position(&self) -> io::Result<Position> {
        let file = self
            .open_started(true)?
            .ok_or_else(|| io::Error::from(ErrorKind::NotFound))?;
        let out = read_header(&file).and_then(|epoch| {
            let offset = file.metadata()?.len();
            Ok(Position { epoch, offset })
        });
        let _ = file.unlock();
        out
    }

    /// The ids noted since `from`. A journal that is missing, of another
    /// epoch or shorter than `from` answers [`Since::Unknown`].
    pub fn since(&self, from: &Position) -> io::Result<Since> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Since::Unknown),
            Err(e) => return Err(e),
        };
        match read_header(&file) {
            Ok(epoch) if epoch == from.epoch => {}
            Ok(_) => return Ok(Since::Unknown),
            Err(e) if e.kind() == ErrorKind::InvalidData => return Ok(Since::Unknown),
            Err(e) => return Err(e),
        }
        let len = file.metadata()?.len();
        if len < from.offset || from.offset < HEADER_LEN {
            return Ok(Since::Unknown);
        }
        let mut tail = Vec::with_capacity((len - from.offset) as usize);
        std::io::Seek::seek(&mut file, io::SeekFrom::Start(from.offset))?;
        file.read_to_end(&mut tail)?;
        // Only complete lines count: a line being written is read next time.
        let complete = memchr::memrchr(b'\n', &tail).map_or(0, |p| p + 1);
        let ids = tail[..complete]
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        Ok(Since::Changes {
            ids,
            end: Position {
                epoch: from.epoch.clone(),
                offset: from.offset + complete as u64,
            },
        })
    }

    /// Empty the journal and start a new epoch, if nothing was noted after
    /// `at` (the caller has consumed everything up to it). Returns the new
    /// position, or `None` when the journal moved on (compact later).
    pub fn compact(&self, at: &Position) -> io::Result<Option<Position>> {
        let mut file = self.open(false)?;
        file.lock()?;
        let out = (|| {
            let epoch = read_header(&file)?;
            if epoch != at.epoch || file.metadata()?.len() != at.offset {
                return Ok(None);
            }
            let epoch = new_epoch();
            file.set_len(0)?;
            file.write_all(header(&epoch).as_bytes())?;
            Ok(Some(Position {
                epoch,
                offset: HEADER_LEN,
            }))
        })();
        let _ = file.unlock();
        out
    }
}

fn header(epoch: &str) -> String {
    format!("{MAGIC}{epoch}\n")
}

fn new_epoch() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The epoch named by the journal's first line.
fn read_header(file: &File) -> io::Result<String> {
    let mut buf = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut buf, 0)
        .map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => io::Error::new(ErrorKind::InvalidData, "short journal"),
            _ => e,
        })?;
    let text = std::str::from_utf8(&buf)
        .ok()
        .and_then(|t| t.strip_prefix(MAGIC))
        .and_then(|t| t.strip_suffix('\n'))
        .filter(|e| e.len() == 32 && e.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "not a change journal"))?;
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_read_since_a_position_and_compaction_starts_a_new_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new(dir.path());
        assert_eq!(
            j.since(&Position {
                epoch: "x".into(),
                offset: 0
            })
            .unwrap(),
            Since::Unknown
        );
        assert!(
            !j.note("unseen").unwrap(),
            "no journal until a listing starts it"
        );
        assert!(!j.path().exists());
        let start = j.position().unwrap();
        assert!(j.note("a").unwrap());
        j.note("b").unwrap();
        let Since::Changes { ids, end } = j.since(&start).unwrap() else {
            panic!("journal lost")
        };
        assert_eq!(ids, ["a", "b"]);
        // A line being written (no newline yet) is not read.
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        f.write_all(b"par").unwrap();
        assert_eq!(
            j.since(&end).unwrap(),
            Since::Changes {
                ids: vec![],
                end: end.clone()
            }
        );
        f.write_all(b"tial\n").unwrap();
        let Since::Changes { ids, end } = j.since(&end).unwrap() else {
            panic!("journal lost")
        };
        assert_eq!(ids, ["partial"]);
        // Compaction only when nothing came after the consumed position.
        j.note("c").unwrap();
        assert_eq!(j.compact(&end).unwrap(), None);
        let Since::Changes { end, .. } = j.since(&end).unwrap() else {
            panic!("journal lost")
        };
        let fresh = j.compact(&end).unwrap().expect("compacted");
        assert_ne!(fresh.epoch, end.epoch);
        assert_eq!(
            j.since(&end).unwrap(),
            Since::Unknown,
            "old positions are refused"
        );
        j.note("d").unwrap();
        assert!(matches!(j.since(&fresh).unwrap(), Since::Changes { ids, .. } if ids == ["d"]));
    }
}
