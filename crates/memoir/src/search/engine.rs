//! The index's two database files: opening (checking the version stamps
//! and batch counters, rebuilding what cannot be trusted), clearing,
//! statistics, and stored vectors.
//!
//! Two files: `index.sqlite` (sessions, documents, tool calls, vectors)
//! and `terms.sqlite` (the FTS5 table), so that a full pass writes them on
//! two threads at once (`super::indexer`). Three connections: [`Db::conn`]
//! writes and reads the index file, [`Db::terms`] writes the terms file,
//! and [`Db::search`] reads both (the terms file attached as
//! [`TERMS_SCHEMA`]) for queries. A writer always locks the index file
//! first, then the terms file (so two writers never wait on each other in
//! a circle), and commits the terms file first, then the index file, each
//! with its batch counter ([`BATCH_KEY`]): a crash between the two commits
//! leaves the terms file one batch ahead, which the next writer sees
//! (counters that differ) and answers by emptying both and indexing
//! everything again. Nothing half-written is ever trusted.
//!
//! Journal modes: an index lives in WAL mode, but a new one is filled first
//! with a rollback journal (`journal_mode=DELETE`, `synchronous=FULL`,
//! marked by `meta` key `journal` = `building` in the index file). Pages a
//! transaction adds to the end of a file need no journal there, so the
//! first full pass writes each page once instead of to the WAL and again at
//! the checkpoint (1.20–1.25× at a million messages: docs/BENCHMARKS.md,
//! "the first fill with a rollback journal"). After a successful update
//! [`Db::finish_build`] switches both files to WAL and drops the mark; a
//! connection that finds the mark leaves the journal modes alone, and a
//! build killed midway is rolled back to its last commit by SQLite and
//! resumed from the cursors.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

use super::doc_freq::DocFreqs;
use super::doc_text;
use super::fts5_tokenizer;
use super::generation;
use super::schema::{
    BATCH_KEY, CREATE, CREATE_TERMS, GENERATION_KEY, SCHEMA_VERSION, TERMS_SCHEMA, TOKENIZER,
};
use super::{IndexStats, Result, SearchError, INDEX_FILE, TERMS_FILE};
use crate::embed::EmbeddingProvider;
use crate::store::LogStore;

/// An open index: its two files and three connections (see the module doc).
pub(super) struct Db {
    /// The index file: sessions, documents, calls, vectors (the writer's
    /// connection, and reads of those tables).
    pub(super) conn: Connection,
    /// The terms file, written only through `super::indexer::Batch` (in a
    /// mutex so that a full pass can hand it to its terms thread).
    terms: Mutex<Connection>,
    /// Both files, the terms file attached: what searches read.
    pub(super) search: Connection,
    /// The index directory (`search/`: the pointer and the generations).
    root: PathBuf,
    /// This generation's id.
    id: String,
    /// The index file and the terms file (in the generation's directory).
    path: PathBuf,
    terms_path: PathBuf,
    /// `(device, inode)` of the two files when opened ([`Db::moved`]).
    identity: (Option<FileId>, Option<FileId>),
    /// The index carried the `building` mark when opened (see the module doc).
    building: bool,
    /// Documents per committed batch (`super::indexer::Batch`).
    pub(super) batch_docs: usize,
    /// Document frequencies walked for, while the terms file is unchanged
    /// (a new `search` connection starts with none: `data_version` is per
    /// connection).
    pub(super) doc_freqs: DocFreqs,
}

/// `(device, inode)` of a file.
type FileId = (u64, u64);

/// `meta` key and value marking an index whose first fill is under way.
const JOURNAL_KEY: &str = "journal";
const BUILDING: &str = "building";

/// Attach the database path to SQLite errors.
pub(super) trait SqlContext<T> {
    fn at(self, path: &Path) -> Result<T>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|source| SearchError::Database {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The `meta` value under `key`, `None` when there is none or `meta` is
/// unreadable (e.g. a file still empty).
fn meta_value(conn: &Connection, key: &str) -> Option<String> {
    meta_row(conn, key).ok().flatten()
}

/// The `meta` value under `key`, `None` when there is none.
fn meta_row(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
}

/// The batch counter of a file (`None`: none, or unreadable).
pub(super) fn batch_counter(conn: &Connection) -> Option<u64> {
    meta_value(conn, BATCH_KEY)?.parse().ok()
}

/// The existing file at `path` (never created: a file that went missing is
/// an error, not a new empty database), with the busy timeout every index
/// connection uses and the terms table's tokenizer registered.
fn open_file(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    fts5_tokenizer::register(&conn)?;
    Ok(conn)
}

/// Set an open file's modes: WAL, unless the index's first fill is under
/// way (`building`: then its journal mode is left as it is, with
/// `synchronous=FULL`).
fn set_modes(conn: &Connection, building: bool) -> rusqlite::Result<()> {
    if building {
        conn.pragma_update(None, "synchronous", "FULL")
    } else {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")
    }
}

/// `path` as an SQLite URI that opens the existing file read-write only
/// (`mode=rw`: an `ATTACH` never creates a missing file).
fn existing_file_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?mode=rw");
    uri
}

/// The index file for searches: the terms file attached as [`TERMS_SCHEMA`].
fn connect_search(path: &Path, terms_path: &Path) -> rusqlite::Result<Connection> {
    let conn = open_file(path)?;
    conn.execute(
        &format!("ATTACH DATABASE ?1 AS {TERMS_SCHEMA}"),
        [existing_file_uri(terms_path)],
    )?;
    Ok(conn)
}

/// A new, empty file at `path` (owner-only) made by `create` (plus the
/// stamp, generation `id`, batch counter 0 and `extra` `meta` rows), in
/// rollback-journal mode.
fn create_file(path: &Path, id: &str, create: &str, extra: &str) -> Result<Connection> {
    generation::create_private_file(path)?;
    let conn = open_file(path).at(path)?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .at(path)?;
    conn.pragma_update(None, "synchronous", "FULL").at(path)?;
    conn.execute_batch(&format!(
        "BEGIN; {create} INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}'), \
         ('tokenizer', '{TOKENIZER}'), ('{GENERATION_KEY}', '{id}'), \
         ('{BATCH_KEY}', '0'){extra}; COMMIT;"
    ))
    .at(path)?;
    Ok(conn)
}

/// Whether an SQLite error says the database is busy or locked (try
/// later), not that the file is unusable.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// `Ok(None)` for an error that makes the file unusable, the error itself
/// when it is only busy.
fn usable<T>(r: rusqlite::Result<T>, path: &Path) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_busy(&e) => Err(e).at(path),
        Err(_) => Ok(None),
    }
}

/// The open generation `id` of the index directory `root`, when both its
/// files exist, look whole, carry this build's stamp and the generation's
/// id, and have the same batch counter (`None`: anything else, to be
/// replaced; an error only when a file is busy).
fn open_generation(root: &Path, id: &str) -> Result<Option<Db>> {
    let dir = generation::gen_dir(root, id);
    let path = dir.join(INDEX_FILE);
    let terms_path = dir.join(TERMS_FILE);
    if !path.is_file() || !terms_path.is_file() {
        return Ok(None);
    }
    if generation::header_damage(&path).is_some()
        || generation::header_damage(&terms_path).is_some()
    {
        return Ok(None);
    }
    let Some(conn) = usable(open_file(&path), &path)? else {
        return Ok(None);
    };
    // A `meta` row as the checks read it: a busy file is an error, never a
    // file without the row (that would replace a sound generation).
    let meta = |conn: &Connection, path: &Path, key: &str| -> Result<Option<String>> {
        Ok(usable(meta_row(conn, key), path)?.flatten())
    };
    // The index file's mark governs both files' modes.
    let building = meta(&conn, &path, JOURNAL_KEY)?.as_deref() == Some(BUILDING);
    let Some(terms) = usable(open_file(&terms_path), &terms_path)? else {
        return Ok(None);
    };
    if usable(set_modes(&conn, building), &path)?.is_none()
        || usable(set_modes(&terms, building), &terms_path)?.is_none()
    {
        return Ok(None);
    }
    let mut batches = Vec::with_capacity(2);
    for (c, p) in [(&conn, &path), (&terms, &terms_path)] {
        let sound = meta(c, p, "schema")?.as_deref() == Some(SCHEMA_VERSION)
            && meta(c, p, "tokenizer")?.as_deref() == Some(TOKENIZER)
            && meta(c, p, GENERATION_KEY)?.as_deref() == Some(id);
        let batch = meta(c, p, BATCH_KEY)?.and_then(|b| b.parse::<u64>().ok());
        if !sound || batch.is_none() {
            return Ok(None);
        }
        batches.push(batch);
    }
    if batches[0] != batches[1] {
        return Ok(None);
    }
    let Some(search) = usable(connect_search(&path, &terms_path), &path)? else {
        return Ok(None);
    };
    Ok(Some(Db::assemble(
        root, id, path, terms_path, conn, terms, search, building,
    )))
}

impl Db {
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        root: &Path,
        id: &str,
        path: PathBuf,
        terms_path: PathBuf,
        conn: Connection,
        terms: Connection,
        search: Connection,
        building: bool,
    ) -> Db {
        Db {
            identity: (
                generation::identity(&path),
                generation::identity(&terms_path),
            ),
            conn,
            terms: Mutex::new(terms),
            search,
            root: root.to_path_buf(),
            id: id.to_string(),
            path,
            terms_path,
            building,
            batch_docs: super::indexer::BATCH_DOCS,
            doc_freqs: DocFreqs::default(),
        }
    }

    /// A new, empty index (both files, with the `building` mark) of
    /// generation `id` in `dir` (a directory of the index directory `root`).
    fn create_in(root: &Path, dir: &Path, id: &str) -> Result<Db> {
        let path = dir.join(INDEX_FILE);
        let terms_path = dir.join(TERMS_FILE);
        let terms = create_file(&terms_path, id, CREATE_TERMS, "")?;
        let conn = create_file(
            &path,
            id,
            CREATE,
            &format!(", ('{JOURNAL_KEY}', '{BUILDING}')"),
        )?;
        let search = connect_search(&path, &terms_path).at(&path)?;
        Ok(Db::assemble(
            root, id, path, terms_path, conn, terms, search, true,
        ))
    }

    /// Open the live index of the index directory `root`; a missing,
    /// stale, damaged or half-written one is replaced by a new, empty
    /// generation (the flag says so).
    pub(super) fn open(root: &Path) -> Result<(Db, bool)> {
        crate::paths::create_private_dir(root)?;
        for _ in 0..8 {
            let live = generation::live_id(root);
            if let Some(id) = &live {
                if let Some(db) = open_generation(root, id)? {
                    return Ok((db, false));
                }
                if generation::live_id(root) != live {
                    continue; // swapped meanwhile: open the new one
                }
            }
            let _lock = generation::lock_root(root)?;
            if generation::live_id(root) != live {
                continue; // replaced by another process meanwhile
            }
            // Under the lock no one publishes or sweeps: the live generation
            // is checked once more before an empty one replaces it, so a
            // check that failed for a passing reason never costs the index.
            if let Some(id) = &live {
                if let Some(db) = open_generation(root, id)? {
                    return Ok((db, false));
                }
            }
            let id = generation::new_id();
            let dir = generation::gen_dir(root, &id);
            crate::paths::create_private_dir(&dir)?;
            let db = Db::create_in(root, &dir, &id)?;
            generation::publish(root, &id)?;
            return Ok((db, true));
        }
        Err(generation::damaged(
            &root.join(generation::CURRENT_FILE),
            "the live generation changed at every attempt to open it",
        ))
    }

    /// Whether another connection or process made another generation live
    /// (or replaced one of this one's files) since this one was opened.
    pub(super) fn moved(&self) -> bool {
        generation::live_id(&self.root).as_deref() != Some(self.id.as_str())
            || generation::identity(&self.path) != self.identity.0
            || generation::identity(&self.terms_path) != self.identity.1
    }

    /// Follow a swap ([`Db::moved`]): reopen the live generation. `Some`
    /// when it reopened, `Some(true)` when what it found had to be replaced
    /// by a new, empty one.
    pub(super) fn follow(&mut self) -> Result<Option<bool>> {
        if !self.moved() {
            return Ok(None);
        }
        let (db, created) = Db::open(&self.root)?;
        let batch_docs = self.batch_docs;
        *self = db;
        self.batch_docs = batch_docs;
        Ok(Some(created))
    }

    /// Build a new generation beside the live one with `fill`, then make it
    /// live in one step and reopen it: readers see the old index until the
    /// swap, the new one after it.
    pub(super) fn rebuild_beside<T>(
        &mut self,
        fill: impl FnOnce(&mut Db) -> Result<T>,
    ) -> Result<T> {
        let build = generation::begin_build(&self.root)?;
        let mut fresh = Db::create_in(&self.root, &build.dir, &build.id)?;
        fresh.batch_docs = self.batch_docs;
        let out = fill(&mut fresh)?;
        fresh.finish_build()?;
        drop(fresh);
        generation::publish_build(&self.root, build)?;
        let (db, _) = Db::open(&self.root)?;
        let batch_docs = self.batch_docs;
        *self = db;
        self.batch_docs = batch_docs;
        Ok(out)
    }

    /// The error for a damaged index: which of its files is damaged (its
    /// header, then SQLite's quick check of each), or `e` itself when
    /// neither says so.
    pub(super) fn diagnose(&self, e: SearchError) -> SearchError {
        for (path, conn) in [(&self.path, &self.conn), (&self.terms_path, &*self.terms())] {
            if let Some(detail) = generation::header_damage(path) {
                return generation::damaged(path, detail);
            }
            let check: rusqlite::Result<String> =
                conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0));
            match check {
                Ok(ok) if ok == "ok" => {}
                Ok(detail) => return generation::damaged(path, detail),
                Err(err) => return generation::damaged(path, err.to_string()),
            }
        }
        e
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Where the terms file is.
    pub(super) fn terms_path(&self) -> &Path {
        &self.terms_path
    }

    /// The terms file's connection (for `super::indexer::Batch` only).
    pub(super) fn terms(&self) -> MutexGuard<'_, Connection> {
        // A thread that panicked holding it left no transaction behind
        // that SQLite would not roll back: the connection is still usable.
        self.terms.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The mutex around the terms file's connection (for the full pass's
    /// terms thread).
    pub(super) fn terms_mutex(&self) -> &Mutex<Connection> {
        &self.terms
    }

    /// After an update: when this index was still being filled, switch
    /// both files to WAL and drop the `building` mark (in that order: a
    /// crash before the mark is gone leaves WAL files with the mark, which
    /// the next call clears). Readers of another process that hold a file
    /// keep the switch waiting up to the busy timeout; if it cannot happen
    /// now it is tried after the next update.
    pub(super) fn finish_build(&mut self) -> Result<()> {
        if !self.building {
            return Ok(());
        }
        let to_wal = |conn: &Connection| {
            let mode: rusqlite::Result<String> =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0));
            // Busy, or a mode SQLite would not leave: try again next time.
            matches!(mode, Ok(m) if m.eq_ignore_ascii_case("wal"))
        };
        if !to_wal(&self.terms()) || !to_wal(&self.conn) {
            return Ok(());
        }
        self.conn
            .execute("DELETE FROM meta WHERE key = ?1", [JOURNAL_KEY])
            .at(&self.path)?;
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .at(&self.path)?;
        self.terms()
            .pragma_update(None, "synchronous", "NORMAL")
            .at(&self.terms_path)?;
        self.building = false;
        Ok(())
    }

    /// The journal mode of the index file and of the terms file.
    #[cfg(test)]
    pub(super) fn journal_modes(&self) -> (String, String) {
        let mode = |conn: &Connection| {
            conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap_or_default()
        };
        (mode(&self.conn), mode(&self.terms()))
    }

    pub(super) fn stats(&self) -> Result<IndexStats> {
        let count = |sql: &str| -> Result<u64> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .at(&self.path)
                .map(|n| n.max(0) as u64)
        };
        let mut bytes = 0;
        for path in [&self.path, &self.terms_path] {
            for suffix in ["", "-wal"] {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                bytes += std::fs::metadata(PathBuf::from(p)).map_or(0, |m| m.len());
            }
        }
        Ok(IndexStats {
            sessions: count("SELECT count(*) FROM sessions")?,
            messages: count("SELECT count(*) FROM docs")?,
            vectors: count("SELECT count(*) FROM vectors")?,
            bytes,
        })
    }
}

/// At most this many bytes of a message are embedded (its start): the
/// semantic side's cost per candidate is bounded whatever a tool output's size.
pub const EMBED_BYTES: usize = 4096;

/// The part of `text` that is embedded (the first [`EMBED_BYTES`], cut at a
/// character boundary).
pub(super) fn embed_text(text: &str) -> &str {
    let mut cut = text.len().min(EMBED_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// A vector as stored: little-endian `f32`s.
pub(super) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector, `None` when its length is not `dims` floats.
pub(super) fn decode_vector(bytes: &[u8], dims: usize) -> Option<Vec<f32>> {
    if bytes.len() != dims * 4 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Store vectors for every distinct content hash that has none for this
/// model. Documents are read in rowid order, `batch` at a time (bounded
/// memory, one pass however many texts fail to read back: a document
/// whose text no longer reads back as indexed, `super::doc_text`, is
/// skipped; another document with the same text may still give it).
pub(super) fn embed_missing(
    db: &mut Db,
    store: &dyn LogStore,
    embedder: &dyn EmbeddingProvider,
    batch: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64> {
    let model = embedder.model_id();
    let batch = batch.max(1);
    let path = db.path.clone();
    let missing_sql = "SELECT count(DISTINCT d.chash) FROM docs d \
         WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ?1 AND v.chash = d.chash)";
    let total: i64 = db
        .conn
        .query_row(missing_sql, [&model], |r| r.get(0))
        .at(&path)?;
    let total = total.max(0) as u64;
    let mut done = 0u64;
    let mut after = 0i64;
    loop {
        // Read one batch of documents without a vector, make their texts
        // (one per content hash), embed them, store them; repeat.
        // `(rowid, chash, text)`: the text made here, `None` when it no
        // longer reads back from its log as indexed.
        type Row = (i64, Vec<u8>, Option<String>);
        let rows: Vec<Row> = {
            let mut st = db
                .conn
                .prepare_cached(
                    "SELECT d.rowid, d.chash, d.text, s.id, d.seq, d.span_at, d.span_len \
                     FROM docs d JOIN sessions s ON s.sid = d.sid WHERE d.rowid > ?2 AND \
                     NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ?1 AND v.chash = d.chash) \
                     ORDER BY d.rowid LIMIT ?3",
                )
                .at(&path)?;
            let mapped = st
                .query_map(params![model, after, batch as i64], |r| {
                    let chash: Vec<u8> = r.get(1)?;
                    let text = match doc_text::span_of(r.get(5)?, r.get(6)?) {
                        Some(span) => {
                            let (session, seq): (String, i64) = (r.get(3)?, r.get(4)?);
                            doc_text::read_back(store, &session, seq.max(0) as u64, span, &chash)
                        }
                        None => r.get(2)?,
                    };
                    Ok((r.get(0)?, chash, text))
                })
                .at(&path)?;
            mapped.collect::<rusqlite::Result<_>>().at(&path)?
        };
        let Some(last) = rows.last() else {
            break;
        };
        after = last.0;
        let mut seen = std::collections::HashSet::new();
        let texts: Vec<(Vec<u8>, String)> = rows
            .into_iter()
            .filter_map(|(_, chash, text)| Some((chash, text?)))
            .filter(|(chash, _)| seen.insert(chash.clone()))
            .collect();
        let cut: Vec<&str> = texts.iter().map(|(_, t)| embed_text(t)).collect();
        let vectors = embedder.embed_batch(&cut)?;
        let tx = db.conn.transaction().at(&path)?;
        {
            let mut ins = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO vectors(model, chash, vec) VALUES (?1, ?2, ?3)",
                )
                .at(&path)?;
            for ((hash, _), v) in texts.iter().zip(&vectors) {
                ins.execute(params![model, hash, encode_vector(v)])
                    .at(&path)?;
            }
        }
        tx.commit().at(&path)?;
        done += texts.len() as u64;
        progress(done, total.max(done));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the file carries the `building` mark.
    fn is_building(conn: &Connection) -> bool {
        meta_value(conn, JOURNAL_KEY).as_deref() == Some(BUILDING)
    }

    fn both(mode: &str) -> (String, String) {
        (mode.to_string(), mode.to_string())
    }

    #[test]
    fn a_new_index_carries_the_fts5_write_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (db, created) = Db::open(dir.path()).unwrap();
        assert!(created);
        let setting = |key: &str| -> i64 {
            db.terms()
                .query_row("SELECT v FROM terms_config WHERE k = ?1", [key], |r| {
                    r.get(0)
                })
                .unwrap()
        };
        assert_eq!(setting("hashsize"), 64 << 20);
        assert_eq!(setting("automerge"), 8);
    }

    /// A new index is filled with a rollback journal; a second connection
    /// leaves that alone; finishing switches to WAL and drops the mark, and
    /// a reopened index is in WAL mode with no mark.
    #[test]
    fn a_new_index_is_filled_with_a_rollback_journal_then_switched_to_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let (mut db, created) = Db::open(&path).unwrap();
        assert!(created && db.building);
        assert_eq!(db.journal_modes(), both("delete"));
        let (other, created) = Db::open(&path).unwrap();
        assert!(!created && other.building, "the mark is seen");
        assert_eq!(
            other.journal_modes(),
            both("delete"),
            "not switched by a reader"
        );
        // Another connection that is open (idle) does not keep the switch
        // from happening, and reads in WAL mode afterwards.
        db.finish_build().unwrap();
        assert!(!db.building);
        assert_eq!(db.journal_modes(), both("wal"));
        assert!(!is_building(&other.conn), "reads the new state");
        assert_eq!(
            batch_counter(&other.terms()),
            Some(0),
            "reads the new state"
        );
        assert_eq!(other.journal_modes(), both("wal"));
        drop(other);
        assert!(!is_building(&db.conn));
        drop(db);
        let (db, created) = Db::open(&path).unwrap();
        assert!(!created && !db.building);
        assert_eq!(db.journal_modes(), both("wal"));
    }

    /// A crash between the switch and dropping the mark: the next opener
    /// keeps both("wal"), and finishing clears the mark.
    #[test]
    fn a_mark_left_on_a_wal_index_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let (db, _) = Db::open(&path).unwrap();
        db.conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        db.terms()
            .pragma_update(None, "journal_mode", "WAL")
            .unwrap();
        drop(db);
        let (mut db, created) = Db::open(&path).unwrap();
        assert!(!created && db.building);
        assert_eq!(db.journal_modes(), both("wal"));
        db.finish_build().unwrap();
        assert!(!is_building(&db.conn));
    }

    /// A rebuild fills its new files with a rollback journal again, and
    /// the generation it makes live is in WAL mode.
    #[test]
    fn a_rebuild_is_filled_with_a_rollback_journal_then_published_in_wal() {
        let dir = tempfile::tempdir().unwrap();
        let (mut db, _) = Db::open(dir.path()).unwrap();
        db.finish_build().unwrap();
        let old = db.id.clone();
        db.rebuild_beside(|fresh| {
            assert!(fresh.building && is_building(&fresh.conn));
            assert_eq!(fresh.journal_modes(), both("delete"));
            Ok(())
        })
        .unwrap();
        assert_ne!(db.id, old);
        assert!(!db.building);
        assert_eq!(db.journal_modes(), both("wal"));
        assert!(
            !generation::gen_dir(dir.path(), &old).exists(),
            "old generation deleted"
        );
    }

    /// A file damaged past its stamp (its second half overwritten)
    /// opens, but the failure it causes is named after that file, the
    /// index file or the terms file, not always the index file.
    #[test]
    fn a_damaged_file_is_named_by_its_own_path() {
        for terms_damaged in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (mut db, _) = Db::open(dir.path()).unwrap();
            {
                let terms = db.terms();
                terms.execute_batch("BEGIN").unwrap();
                for rowid in 1..3000 {
                    terms
                        .execute(
                            "INSERT INTO terms(rowid, body) VALUES (?1, ?2)",
                            params![rowid, format!("gecko w{rowid} basking rock")],
                        )
                        .unwrap();
                }
                terms.execute_batch("COMMIT").unwrap();
            }
            db.conn.execute_batch("BEGIN").unwrap();
            for rowid in 1..3000 {
                db.conn
                    .execute(
                        "INSERT INTO docs(rowid, sid, seq, role, ts_ms, tools, chash, text) \
                         VALUES (?1, 1, ?1, 'user', 0, '', x'00', 'some text to fill pages')",
                        [rowid],
                    )
                    .unwrap();
            }
            db.conn.execute_batch("COMMIT").unwrap();
            db.finish_build().unwrap();
            let target = if terms_damaged {
                db.terms_path().to_path_buf()
            } else {
                db.path().to_path_buf()
            };
            drop(db);
            let mut bytes = std::fs::read(&target).unwrap();
            assert!(bytes.len() > 3 * 4096);
            let from = bytes.len() / 2 / 4096 * 4096;
            for (i, b) in bytes.iter_mut().enumerate().skip(from) {
                *b = (i * 31 + 7) as u8;
            }
            std::fs::write(&target, bytes).unwrap();
            let (db, created) = Db::open(dir.path()).unwrap();
            assert!(!created, "the stamps still read");
            let e = SearchError::Invalid("a query failed".into());
            match db.diagnose(e) {
                SearchError::Damaged { path, .. } => assert_eq!(path, target),
                other => panic!("{other}"),
            }
        }
    }
}
