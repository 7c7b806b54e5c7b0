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

use rusqlite::{params, Connection, OptionalExtension};

use super::doc_freq::DocFreqs;
use super::doc_text;
use super::fts5_tokenizer;
use super::schema::{BATCH_KEY, CREATE, CREATE_TERMS, SCHEMA_VERSION, TERMS_SCHEMA, TOKENIZER};
use super::{IndexStats, Result, SearchError, TERMS_FILE};
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
    path: PathBuf,
    terms_path: PathBuf,
    /// The index carried the `building` mark when opened (see the module doc).
    building: bool,
    /// Documents per committed batch (`super::indexer::Batch`).
    pub(super) batch_docs: usize,
    /// Document frequencies walked for, while the terms file is unchanged
    /// (a new `search` connection starts with none: `data_version` is per
    /// connection).
    pub(super) doc_freqs: DocFreqs,
}

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
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .ok()
        .flatten()
}

/// Whether the file carries the `building` mark.
fn is_building(conn: &Connection) -> bool {
    meta_value(conn, JOURNAL_KEY).as_deref() == Some(BUILDING)
}

/// The batch counter of a file (`None`: none, or unreadable).
pub(super) fn batch_counter(conn: &Connection) -> Option<u64> {
    meta_value(conn, BATCH_KEY)?.parse().ok()
}

/// The file at `path`, with the busy timeout every index connection uses
/// and the terms table's tokenizer registered.
fn open_file(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
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

/// The index file for searches: the terms file attached as [`TERMS_SCHEMA`].
fn connect_search(path: &Path, terms_path: &Path) -> rusqlite::Result<Connection> {
    let conn = open_file(path)?;
    conn.execute(
        &format!("ATTACH DATABASE ?1 AS {TERMS_SCHEMA}"),
        [terms_path.to_string_lossy()],
    )?;
    Ok(conn)
}

/// The stamp of an existing database, `None` when it has none or is unreadable.
fn stamp(conn: &Connection) -> Option<(String, String)> {
    Some((meta_value(conn, "schema")?, meta_value(conn, "tokenizer")?))
}

fn remove_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// A new, empty file at `path` made by `create` (plus the stamp, batch
/// counter 0 and `extra` `meta` rows), in rollback-journal mode.
fn create_file(path: &Path, create: &str, extra: &str) -> Result<Connection> {
    let conn = open_file(path).at(path)?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .at(path)?;
    conn.pragma_update(None, "synchronous", "FULL").at(path)?;
    conn.execute_batch(&format!(
        "BEGIN; {create} INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}'), \
         ('tokenizer', '{TOKENIZER}'), ('{BATCH_KEY}', '0'){extra}; COMMIT;"
    ))
    .at(path)?;
    Ok(conn)
}

/// The open connections of an existing index whose stamps match and
/// whose batch counters agree (`None`: anything else).
fn open_existing(path: &Path, terms_path: &Path) -> Option<(Connection, Connection, bool)> {
    if !path.exists() || !terms_path.exists() {
        return None;
    }
    // The index file's mark governs both files' modes.
    let conn = open_file(path).ok()?;
    let building = is_building(&conn);
    let terms = open_file(terms_path).ok()?;
    set_modes(&conn, building).ok()?;
    set_modes(&terms, building).ok()?;
    let expected = (SCHEMA_VERSION.to_string(), TOKENIZER.to_string());
    let stamped =
        stamp(&conn).as_ref() == Some(&expected) && stamp(&terms).as_ref() == Some(&expected);
    let agree = batch_counter(&conn).is_some() && batch_counter(&conn) == batch_counter(&terms);
    (stamped && agree).then_some((conn, terms, building))
}

impl Db {
    /// Open the index whose index file is `path` (the terms file beside
    /// it); a missing, stale, unreadable or half-written one is replaced
    /// by an empty index (the flag says so).
    pub(super) fn open(path: &Path) -> Result<(Db, bool)> {
        let terms_path = path.with_file_name(TERMS_FILE);
        let (conn, terms, building, created) = match open_existing(path, &terms_path) {
            Some((conn, terms, building)) => (conn, terms, building, false),
            None => {
                remove_files(path);
                remove_files(&terms_path);
                let (conn, terms) = create(path, &terms_path)?;
                (conn, terms, true, true)
            }
        };
        let search = connect_search(path, &terms_path).at(path)?;
        Ok((
            Db {
                conn,
                terms: Mutex::new(terms),
                search,
                path: path.to_path_buf(),
                terms_path,
                building,
                batch_docs: super::indexer::BATCH_DOCS,
                doc_freqs: DocFreqs::default(),
            },
            created,
        ))
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

    /// Replace the index with an empty one.
    pub(super) fn clear(&mut self) -> Result<()> {
        let placeholder = || Connection::open_in_memory().at(&self.path);
        drop(std::mem::replace(&mut self.search, placeholder()?));
        drop(std::mem::replace(&mut self.conn, placeholder()?));
        drop(std::mem::replace(
            self.terms.get_mut().unwrap_or_else(|e| e.into_inner()),
            placeholder()?,
        ));
        remove_files(&self.path);
        remove_files(&self.terms_path);
        let (conn, terms) = create(&self.path, &self.terms_path)?;
        self.conn = conn;
        *self.terms.get_mut().unwrap_or_else(|e| e.into_inner()) = terms;
        self.search = connect_search(&self.path, &self.terms_path).at(&self.path)?;
        self.doc_freqs = DocFreqs::default();
        self.building = true;
        Ok(())
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

/// A new, empty index (both files), with the `building` mark.
fn create(path: &Path, terms_path: &Path) -> Result<(Connection, Connection)> {
    let terms = create_file(terms_path, CREATE_TERMS, "")?;
    let conn = create_file(path, CREATE, &format!(", ('{JOURNAL_KEY}', '{BUILDING}')"))?;
    Ok((conn, terms))
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

    fn both(mode: &str) -> (String, String) {
        (mode.to_string(), mode.to_string())
    }

    #[test]
    fn a_new_index_carries_the_fts5_write_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (db, created) = Db::open(&dir.path().join("index.sqlite")).unwrap();
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
        let path = dir.path().join("index.sqlite");
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
        let path = dir.path().join("index.sqlite");
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

    /// `clear` (a rebuild) fills the new file with a rollback journal again.
    #[test]
    fn a_cleared_index_is_filled_with_a_rollback_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (mut db, _) = Db::open(&dir.path().join("index.sqlite")).unwrap();
        db.finish_build().unwrap();
        db.clear().unwrap();
        assert!(db.building && is_building(&db.conn));
        assert_eq!(db.journal_modes(), both("delete"));
    }
}
