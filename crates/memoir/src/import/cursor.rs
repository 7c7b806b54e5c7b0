//! Durable per-source cursors: what each source file looked like when it was
//! last imported, and which memoir session each of its planned sessions went
//! to (and how far). Stored as one JSON file, `<sessions dir>/import/cursors.json`,
//! replaced atomically (temp file, fsync, rename) after the sessions it
//! describes are durable, so a crash can only make a cursor lag behind the
//! store, never run ahead of it (a lagging cursor is caught up by comparing
//! records: re-import stays a no-op).
//!
//! A grown source is checked without reading it again: its inode, the length
//! and a hash of the first and last [`CHECK_WINDOW`] bytes of the imported
//! prefix ([`FileCursor::verify`]); the parser then resumes at `offset` from
//! the state it left in [`TailState`] (see `docs/FORMAT.md`, "Import cursors").

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Agent, ImportError};

/// The cursor file's format version.
pub const CURSORS_VERSION: u32 = 2;

/// Bytes hashed at each end of the imported prefix to recognise a rewrite.
pub const CHECK_WINDOW: usize = 64 * 1024;

/// Where one planned session of a source went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCursor {
    /// The memoir session currently receiving it.
    pub id: String,
    /// How many of the planned session's records are imported.
    pub records: usize,
    /// Hash of those records' JSON lines: `c:<hex>`, a BLAKE3 chain over
    /// the records one by one ([`Digest`]), so appending extends it without
    /// the earlier records; plain hex (format 1) is one BLAKE3 over them all.
    pub digest: String,
    /// How many leading planned records live in the ancestors of `id`
    /// (non-zero after a rewrite was re-imported as a fork).
    #[serde(default)]
    pub base: usize,
}

/// What a source file looked like when last imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCursor {
    /// Its format.
    pub agent: String,
    /// Inode (0 where the platform has none).
    pub inode: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Bytes consumed: the end of the last complete line.
    pub offset: u64,
    /// Complete lines consumed.
    pub lines: u64,
    /// BLAKE3 of the first [`CHECK_WINDOW`] bytes of the consumed prefix and
    /// of the last [`CHECK_WINDOW`] bytes before `offset` (hex, `head:tail`).
    pub prefix_hash: String,
    /// Lines that start a new message although they continue the previous
    /// one (an assistant response split across two imports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cuts: Vec<u64>,
    /// Its planned sessions, by key.
    pub sessions: BTreeMap<String, SessionCursor>,
    /// Codex: BLAKE3 (hex) of the first line, to recognise forks that replay
    /// another rollout without reading every unchanged rollout again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_line: Option<String>,
    /// What the parser needs to resume at `offset` without the prefix
    /// (absent: a grown source is parsed again in full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<TailState>,
    /// Claude Code: subagent id → the `Task`/`Agent` call that spawned it,
    /// as found in this file (for subagent files read in a later run).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spawns: BTreeMap<String, String>,
    /// Claude Code: the uuid of the file's first entry that has one (to
    /// recognise a resumed session that repeats another file's history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_uuid: Option<String>,
    /// Claude Code: the file's first lines that repeat another session's,
    /// decided when it was first imported (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeated_lines: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A parser's state at the end of the imported prefix, to parse only what
/// was appended after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "kebab-case")]
pub enum TailState {
    /// Claude Code: where new entries may attach to the main line.
    ClaudeCode {
        /// The uuids of the main line's last message and of the entries
        /// (no messages) below it: an appended entry hanging from one of
        /// them continues the main line.
        leaf: Vec<String>,
        /// The uuid of the last main-line entry in file order (where an
        /// entry without a parent attaches).
        last_main: Option<String>,
        /// A `custom-title` was seen (AI titles no longer rename).
        custom_title: bool,
    },
    /// Codex: the record builder's carried state.
    Codex {
        /// Texts of one stream not yet seen in the other: `(role, text, from_events)`.
        unmatched: Vec<(crate::message::Role, String, bool)>,
        /// The last cumulative `total_token_usage`.
        last_total: Option<crate::message::Usage>,
        /// Usage comes from `token_usage_record`s.
        usage_records: bool,
        /// The `session_meta` was seen.
        seen_meta: bool,
        /// The highest `ordinal` seen and the hash of its line, to report
        /// duplicated ordinals and drop identical copies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ordinal: Option<(u64, String)>,
        /// Lines of the predecessor segments read before the rollout's own
        /// (its own lines are numbered after them).
        #[serde(default, skip_serializing_if = "crate::is_default")]
        segment_lines: u64,
    },
}

/// Every cursor of a store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursors {
    /// Format version ([`CURSORS_VERSION`]).
    pub version: u32,
    /// By source path.
    pub files: BTreeMap<PathBuf, FileCursor>,
    /// Planned (deterministic) session id → the session now receiving it,
    /// for sources re-imported as forks.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
}

/// The cursor file of the store in `sessions_dir`.
pub fn cursors_path(sessions_dir: &Path) -> PathBuf {
    sessions_dir.join("import").join("cursors.json")
}

impl Cursors {
    /// Load the cursors (none yet is an empty set). A cursor file that does
    /// not parse is set aside as `cursors.json.bad` and the import starts
    /// afresh: records are compared, so nothing is imported twice.
    pub fn load(sessions_dir: &Path) -> Result<Cursors, ImportError> {
        let path = cursors_path(sessions_dir);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Ok(Cursors {
                    version: CURSORS_VERSION,
                    ..Cursors::default()
                })
            }
            Err(e) => return Err(ImportError::io("read", &path, e)),
        };
        match serde_json::from_slice::<Cursors>(&text) {
            Ok(c) if c.version <= CURSORS_VERSION => Ok(c),
            _ => {
                let bad = path.with_extension("json.bad");
                fs::rename(&path, &bad).map_err(|e| ImportError::io("set aside", &path, e))?;
                Ok(Cursors {
                    version: CURSORS_VERSION,
                    ..Cursors::default()
                })
            }
        }
    }

    /// Write the cursors atomically.
    pub fn save(&self, sessions_dir: &Path) -> Result<(), ImportError> {
        let path = cursors_path(sessions_dir);
        if let Some(dir) = path.parent() {
            crate::paths::create_private_dir(dir)?;
        }
        let bytes = serde_json::to_vec(self).map_err(crate::Error::from)?;
        crate::paths::atomic_write(&path, &bytes)?;
        Ok(())
    }
}

/// A source file's identity and size, from its metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Inode (0 where unknown).
    pub inode: u64,
    /// Size.
    pub size: u64,
    /// Modification time in ns.
    pub mtime_ns: i128,
}

impl FileStat {
    /// Stat `path` (following symlinks).
    pub fn of(path: &Path) -> Result<FileStat, ImportError> {
        let meta = fs::metadata(path).map_err(|e| ImportError::io("stat", path, e))?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        Ok(FileStat {
            inode,
            size: meta.len(),
            mtime_ns,
        })
    }
}

impl FileStat {
    /// Stat a source; a database counts its write-ahead log too (new rows
    /// land there first).
    pub fn of_source(source: &super::Source) -> Result<FileStat, ImportError> {
        let mut stat = FileStat::of(&source.path)?;
        if source.agent == Agent::OpenCode {
            let mut wal = source.path.as_os_str().to_os_string();
            wal.push("-wal");
            if let Ok(w) = FileStat::of(Path::new(&wal)) {
                stat.size += w.size;
                stat.mtime_ns = stat.mtime_ns.max(w.mtime_ns);
            }
        }
        Ok(stat)
    }
}

/// How a source changed since its cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Never imported.
    New,
    /// Same file, same size and time, nothing left over: not read.
    Unchanged,
    /// The imported prefix is intact and more was written (or a torn tail is retried).
    Grown,
    /// Shorter than what was imported.
    Truncated,
    /// The imported prefix changed (or the file was replaced).
    Rewritten,
}

impl FileCursor {
    /// Whether `stat` says the file is exactly as imported (no need to read it).
    pub fn unchanged(&self, stat: &FileStat) -> bool {
        self.inode == stat.inode
            && self.size == stat.size
            && self.mtime_ns == stat.mtime_ns
            && self.offset == stat.size
    }

    /// How the file at `path` (now `stat`) relates to what was imported,
    /// reading only the two check windows of the imported prefix.
    pub fn verify(&self, path: &Path, stat: &FileStat) -> Result<Change, ImportError> {
        if self.unchanged(stat) {
            return Ok(Change::Unchanged);
        }
        if stat.size < self.offset {
            return Ok(Change::Truncated);
        }
        if stat.inode != self.inode && self.inode != 0 {
            return Ok(Change::Rewritten);
        }
        let file = fs::File::open(path).map_err(|e| ImportError::io("open", path, e))?;
        let window = |at: u64, len: usize| -> Result<Vec<u8>, ImportError> {
            let mut buf = vec![0u8; len];
            read_exact_at(&file, &mut buf, at).map_err(|e| ImportError::io("read", path, e))?;
            Ok(buf)
        };
        let head_len = (self.offset as usize).min(CHECK_WINDOW);
        let tail_len = head_len;
        let head = window(0, head_len)?;
        let tail = window(self.offset - tail_len as u64, tail_len)?;
        if window_hash(self.offset, &head, &tail) != self.prefix_hash {
            return Ok(Change::Rewritten);
        }
        Ok(Change::Grown)
    }

    /// How `bytes` (the file now) relate to what was imported.
    pub fn change(&self, stat: &FileStat, bytes: &[u8]) -> Change {
        if self.unchanged(stat) {
            return Change::Unchanged;
        }
        let offset = self.offset as usize;
        if bytes.len() < offset {
            return Change::Truncated;
        }
        if prefix_hash(&bytes[..offset]) != self.prefix_hash {
            return Change::Rewritten;
        }
        Change::Grown
    }

    /// A fresh cursor for `agent`'s file.
    pub fn new(agent: Agent, stat: &FileStat) -> FileCursor {
        FileCursor {
            agent: agent.as_str().into(),
            inode: stat.inode,
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            offset: 0,
            lines: 0,
            prefix_hash: prefix_hash(&[]),
            cuts: Vec::new(),
            sessions: BTreeMap::new(),
            first_line: None,
            tail: None,
            spawns: BTreeMap::new(),
            first_uuid: None,
            repeated_lines: 0,
        }
    }
}

/// The check hash of an imported prefix: its head and tail windows.
pub fn prefix_hash(prefix: &[u8]) -> String {
    let head = &prefix[..prefix.len().min(CHECK_WINDOW)];
    let tail = &prefix[prefix.len().saturating_sub(CHECK_WINDOW)..];
    window_hash(prefix.len() as u64, head, tail)
}

/// The check hash of the first `offset` bytes of the file at `path`,
/// reading only its two windows.
pub fn prefix_hash_of_file(path: &Path, offset: u64) -> Result<String, ImportError> {
    let file = fs::File::open(path).map_err(|e| ImportError::io("open", path, e))?;
    let len = (offset as usize).min(CHECK_WINDOW);
    let mut head = vec![0u8; len];
    let mut tail = vec![0u8; len];
    read_exact_at(&file, &mut head, 0).map_err(|e| ImportError::io("read", path, e))?;
    read_exact_at(&file, &mut tail, offset - len as u64)
        .map_err(|e| ImportError::io("read", path, e))?;
    Ok(window_hash(offset, &head, &tail))
}

pub(crate) fn window_hash(len: u64, head: &[u8], tail: &[u8]) -> String {
    format!(
        "{}:{}:{}",
        len,
        &blake3::hash(head).to_hex()[..32],
        &blake3::hash(tail).to_hex()[..32]
    )
}

#[cfg(unix)]
fn read_exact_at(file: &fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(not(unix))]
fn read_exact_at(file: &fs::File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(buf)
}

/// The chained digest of a planned session's records: `d₀ = BLAKE3("")`,
/// `dₖ₊₁ = BLAKE3(dₖ ‖ json(recordₖ) ‖ "\n")`, written `c:<hex of dₙ>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(blake3::Hash);

impl Default for Digest {
    fn default() -> Self {
        Digest(blake3::hash(b""))
    }
}

impl Digest {
    /// A stored chained digest (`None` for a format-1 digest or garbage).
    pub fn parse(s: &str) -> Option<Digest> {
        blake3::Hash::from_hex(s.strip_prefix("c:")?)
            .ok()
            .map(Digest)
    }

    /// Extend the chain with `records`.
    pub fn extend(mut self, records: &[crate::record::Record]) -> Result<Digest, ImportError> {
        for r in records {
            let line = r.to_json_string().map_err(crate::Error::from)?;
            let mut h = blake3::Hasher::new();
            h.update(self.0.as_bytes());
            h.update(line.as_bytes());
            h.update(b"\n");
            self.0 = h.finalize();
        }
        Ok(self)
    }

    /// As stored in a cursor.
    pub fn to_stored(self) -> String {
        format!("c:{}", self.0.to_hex())
    }
}

/// The digest a [`SessionCursor`] keeps of `records`.
pub fn digest(records: &[crate::record::Record]) -> Result<String, ImportError> {
    Ok(Digest::default().extend(records)?.to_stored())
}

/// Whether `stored` (either format) is the digest of `records`.
pub fn digest_matches(
    stored: &str,
    records: &[crate::record::Record],
) -> Result<bool, ImportError> {
    Ok(matching_digest(stored, records)?.is_some())
}

/// The chained digest of `records` when `stored` (either format) is their
/// digest, so a caller that goes on to append more records extends it
/// instead of serialising the prefix again; `None` when it is not.
pub fn matching_digest(
    stored: &str,
    records: &[crate::record::Record],
) -> Result<Option<Digest>, ImportError> {
    if stored.starts_with("c:") {
        let chained = Digest::default().extend(records)?;
        return Ok((chained.to_stored() == stored).then_some(chained));
    }
    // Format 1 (one hash over every line): checked, then chained afresh.
    let mut h = blake3::Hasher::new();
    for r in records {
        let line = r.to_json_string().map_err(crate::Error::from)?;
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    if h.finalize().to_hex().as_str() != stored {
        return Ok(None);
    }
    Digest::default().extend(records).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_prefix_is_a_rewrite_and_a_longer_file_growth() {
        let old = b"line one\nline two\n";
        let stat = FileStat {
            inode: 1,
            size: old.len() as u64,
            mtime_ns: 5,
        };
        let mut c = FileCursor::new(Agent::Codex, &stat);
        c.offset = old.len() as u64;
        c.prefix_hash = prefix_hash(old);
        assert_eq!(c.change(&stat, old), Change::Unchanged);
        let grown = b"line one\nline two\nline three\n";
        let s2 = FileStat {
            size: grown.len() as u64,
            mtime_ns: 6,
            ..stat
        };
        assert_eq!(c.change(&s2, grown), Change::Grown);
        assert_eq!(
            c.change(&s2, b"line ONE\nline two\nline three\n"),
            Change::Rewritten
        );
        assert_eq!(c.change(&s2, b"line one\n"), Change::Truncated);
    }
}
