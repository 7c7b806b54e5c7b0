//! The listing snapshot, `<dir>/index/listing`: every session's index entry
//! in one file, with what it was computed against (the change journal's
//! position, the store directory's modification time, the boot), so that a
//! listing reads this file and the journal's tail instead of stat'ing every
//! transcript (see [`super::Index::list`] and `docs/FORMAT.md`).
//!
//! Layout: a header line (JSON [`Header`]), one line per [`IndexEntry`]
//! (compact JSON, newest activity first), and a last line
//! `blake3 <64 hex>` over every byte before it. Written to a temp file and
//! renamed into place, never synced: a snapshot that is missing, torn,
//! corrupt, of another version or written before the last boot is ignored
//! and rebuilt.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::IndexEntry;
use crate::error::{IoContext, Result};
use crate::store::file::checkpoint::Checkpoint;

/// File name of the snapshot inside the index directory.
pub const SNAPSHOT_FILE: &str = "listing";

/// Version of the snapshot format written by this build.
pub const SNAPSHOT_VERSION: u32 = 1;

/// Entries parsed per thread at least (smaller snapshots parse on one).
const PARSE_SHARE: usize = 2000;

/// What a snapshot was computed against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`SNAPSHOT_VERSION`].
    pub v: u32,
    /// The boot, change journal position and store directory time it was
    /// computed against, its unreadable sessions and bad names (flattened:
    /// the header's JSON keys are the checkpoint's own).
    #[serde(flatten)]
    pub at: Checkpoint,
    /// How many entry lines follow.
    pub entries: usize,
}

/// A loaded snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// What it was computed against.
    pub header: Header,
    /// Every readable session's entry.
    pub entries: Vec<IndexEntry>,
}

/// The id of the running boot (one implementation, shared with the search index).
pub use crate::store::file::checkpoint::boot_id;

/// The snapshot at `path`, when it is complete, verifies and is of this version.
pub fn load(path: &Path) -> Option<Snapshot> {
    let bytes = fs::read(path).ok()?;
    let body_end = memchr::memrchr(b'\n', bytes.strip_suffix(b"\n")?).map_or(0, |p| p + 1);
    let (body, footer) = bytes.split_at(body_end);
    let want = std::str::from_utf8(footer)
        .ok()?
        .strip_prefix("blake3 ")?
        .strip_suffix('\n')?;
    if blake3::hash(body).to_hex().as_str() != want {
        return None;
    }
    let mut lines = body.split(|&b| b == b'\n');
    let header: Header = serde_json::from_slice(lines.next()?).ok()?;
    if header.v != SNAPSHOT_VERSION {
        return None;
    }
    let lines: Vec<&[u8]> = lines.filter(|l| !l.is_empty()).collect();
    if lines.len() != header.entries {
        return None;
    }
    let entries = parse_entries(&lines)?;
    Some(Snapshot { header, entries })
}

/// Parse entry lines, on several threads for a large snapshot.
fn parse_entries(lines: &[&[u8]]) -> Option<Vec<IndexEntry>> {
    crate::fan_out::map(lines, PARSE_SHARE, |l| {
        serde_json::from_slice::<IndexEntry>(l)
            .ok()
            .filter(IndexEntry::is_current)
    })
    .into_iter()
    .collect()
}

/// Write `snapshot` to `path` (temp file and rename; no sync).
pub fn write(path: &Path, header: &Header, entries: &[IndexEntry]) -> Result<()> {
    let mut out = Vec::with_capacity(entries.len() * 512 + 256);
    let mut header = header.clone();
    header.entries = entries.len();
    serde_json::to_writer(&mut out, &header)?;
    out.push(b'\n');
    for e in entries {
        serde_json::to_writer(&mut out, e)?;
        out.push(b'\n');
    }
    let sum = blake3::hash(&out);
    out.extend_from_slice(b"blake3 ");
    out.extend_from_slice(sum.to_hex().as_bytes());
    out.push(b'\n');
    crate::paths::create_private_dir(path.parent().unwrap_or_else(|| Path::new(".")))?;
    crate::paths::replace_file(path, &out)
}

/// Remove the snapshot (a missing one is fine).
pub fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).ctx("remove", path),
        _ => Ok(()),
    }
}
