//! Where the SQLite index's files live: generations under the index
//! directory, the pointer that names the live one, and their swap.
//!
//! ```text
//! search/
//!   current            the live generation's name ("gen-<32 hex>"), replaced atomically
//!   lock               flock: held while the pointer is replaced
//!   gen-<id>/          a generation: index.sqlite, terms.sqlite (+ -wal, -shm, -journal)
//!   build-<id>/        a rebuild under way (its `lock` held by the builder)
//! ```
//!
//! A reader opens the generation the pointer names, and checks per
//! operation ([`Live::moved`]) whether the pointer or the files' inodes
//! changed since; a rebuild fills `build-<id>/` beside the live one,
//! renames it to `gen-<id>/`, and replaces the pointer in one `rename`, so
//! every reader sees the old index or the new one, never a mix. Generations
//! the pointer no longer names are deleted after a swap (an open reader
//! keeps reading its files until it notices the swap); a build directory is
//! deleted only once its builder's lock is free (the builder died).
//!
//! Every file is created owner-only (0600): SQLite gives a database's
//! `-wal`, `-shm` and `-journal` files the database file's mode, so the
//! database files are created 0600 before SQLite opens them.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{Result, SearchError, INDEX_FILE, TERMS_FILE};
use crate::error::IoContext;

/// The pointer file, in the index directory.
pub const CURRENT_FILE: &str = "current";
/// The lock file held while the pointer is replaced.
const LOCK_FILE: &str = "lock";
/// Prefix of a generation directory.
pub const GEN_PREFIX: &str = "gen-";
/// Prefix of a build directory.
const BUILD_PREFIX: &str = "build-";

/// A new generation id (32 lowercase hex digits).
pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether `id` is a generation id as [`new_id`] makes them.
fn valid_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The id the pointer of `root` names (`None`: no pointer, or not one this
/// layout writes).
pub(super) fn live_id(root: &Path) -> Option<String> {
    let mut text = String::new();
    fs::File::open(root.join(CURRENT_FILE))
        .ok()?
        .take(128)
        .read_to_string(&mut text)
        .ok()?;
    let id = text.trim().strip_prefix(GEN_PREFIX)?;
    valid_id(id).then(|| id.to_string())
}

/// The directory of generation `id`.
pub(super) fn gen_dir(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{GEN_PREFIX}{id}"))
}

/// The index file of the live generation of `root`, when there is one.
pub(super) fn live_index_file(root: &Path) -> Option<PathBuf> {
    let file = gen_dir(root, &live_id(root)?).join(INDEX_FILE);
    file.is_file().then_some(file)
}

/// An exclusive `flock` on a file (released when dropped).
pub(super) struct Lock(#[allow(dead_code)] fs::File);

/// Lock `path` exclusively (waiting), creating it owner-only.
fn lock(path: &Path) -> Result<Lock> {
    let file = open_lock_file(path)?;
    file.lock().ctx("lock", path)?;
    Ok(Lock(file))
}

fn open_lock_file(path: &Path) -> Result<fs::File> {
    let mut opts = fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    Ok(opts.open(path).ctx("open", path)?)
}

/// The lock of the index directory (held while the pointer changes).
pub(super) fn lock_root(root: &Path) -> Result<Lock> {
    lock(&root.join(LOCK_FILE))
}

/// A new, empty database file, owner-only.
pub(super) fn create_private_file(path: &Path) -> Result<()> {
    crate::paths::private_new_file()
        .open(path)
        .ctx("create", path)?;
    Ok(())
}

/// A directory being filled for generation `id`, locked by its builder.
pub(super) struct Build {
    pub(super) id: String,
    pub(super) dir: PathBuf,
    pub(super) lock: Lock,
}

/// A new build directory under `root`, locked.
pub(super) fn begin_build(root: &Path) -> Result<Build> {
    let id = new_id();
    let dir = root.join(format!("{BUILD_PREFIX}{id}"));
    crate::paths::create_private_dir(&dir)?;
    let lock = lock(&dir.join(LOCK_FILE))?;
    Ok(Build { id, dir, lock })
}

/// Make a filled build the live generation: rename its directory to
/// `gen-<id>`, replace the pointer (under the index directory's lock), and
/// delete what is no longer live. Its databases must be closed.
pub(super) fn publish_build(root: &Path, build: Build) -> Result<()> {
    let target = gen_dir(root, &build.id);
    let _ = fs::remove_file(build.dir.join(LOCK_FILE));
    fs::rename(&build.dir, &target).ctx("rename", &build.dir)?;
    drop(build.lock);
    let _root = lock_root(root)?;
    publish(root, &build.id)
}

/// Point `root` at generation `id` (the caller holds the root lock), then
/// delete the generations it no longer needs.
pub(super) fn publish(root: &Path, id: &str) -> Result<()> {
    crate::paths::sync_dir(root)?;
    crate::paths::atomic_write(
        &root.join(CURRENT_FILE),
        format!("{GEN_PREFIX}{id}\n").as_bytes(),
    )?;
    sweep(root, id);
    Ok(())
}

/// Delete, under `root`, every generation but `keep`, every build whose
/// builder is gone, and the files of the layout before generations.
fn sweep(root: &Path, keep: &str) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if let Some(id) = name.strip_prefix(GEN_PREFIX) {
            if id != keep {
                let _ = fs::remove_dir_all(&path);
            }
        } else if name.starts_with(BUILD_PREFIX) {
            let free = open_lock_file(&path.join(LOCK_FILE))
                .ok()
                .is_some_and(|f| f.try_lock().is_ok());
            if free {
                let _ = fs::remove_dir_all(&path);
            }
        } else if name.starts_with(INDEX_FILE) || name.starts_with(TERMS_FILE) {
            // The layout of schema 5 and before: both files in `root`.
            let _ = fs::remove_file(&path);
        }
    }
}

/// `(device, inode)` of a file, when it can be `stat`ed.
pub(super) fn identity(path: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        fs::metadata(path).ok().map(|m| (m.len(), 0))
    }
}

/// Why a database file's header says it is damaged, `None` when it looks
/// whole: not an SQLite file, or shorter than the pages its header counts
/// (a truncated file). An empty file is whole (SQLite's empty database).
pub(super) fn header_damage(path: &Path) -> Option<String> {
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    if len == 0 {
        return None;
    }
    let mut h = [0u8; 100];
    if f.read_exact(&mut h).is_err() {
        return Some(format!("{len} bytes, shorter than a database header"));
    }
    if &h[..16] != b"SQLite format 3\0" {
        return Some("not an SQLite database".into());
    }
    let be = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let page = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536u64,
        p => p as u64,
    };
    let (changes, pages, valid_for) = (be(24), be(28) as u64, be(92));
    if valid_for == changes && pages > 0 && len < pages * page {
        return Some(format!(
            "{len} bytes, but its header counts {pages} pages of {page} bytes (truncated)"
        ));
    }
    None
}

/// The error of a damaged file.
pub(super) fn damaged(path: &Path, detail: impl Into<String>) -> SearchError {
    SearchError::Damaged {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}
