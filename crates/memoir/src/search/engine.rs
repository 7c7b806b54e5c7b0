//! The index database: opening (checking the version stamp, rebuilding what
//! cannot be trusted), clearing, statistics, and stored vectors.
//!
//! Journal modes: an index lives in WAL mode, but a new one is filled first
//! with a rollback journal (`journal_mode=DELETE`, `synchronous=FULL`,
//! marked by `meta` key `journal` = `building`). Pages a transaction adds
//! to the end of the file need no journal there, so the first full pass
//! writes each page once instead of to the WAL and again at the checkpoint
//! (1.20–1.25× at a million messages: docs/BENCHMARKS.md, "the first fill
//! with a rollback journal"). After a successful
//! update [`Db::finish_build`] switches the file to WAL and drops the mark;
//! a connection that finds the mark leaves the journal mode alone, and a
//! build killed midway is rolled back to its last commit by SQLite and
//! resumed from the cursors.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use super::doc_text;
use super::schema::{CREATE, SCHEMA_VERSION, TOKENIZER};
use super::{IndexStats, Result, SearchError};
use crate::embed::EmbeddingProvider;
use crate::store::LogStore;

/// An open index database.
pub(super) struct Db {
    pub(super) conn: Connection,
    path: PathBuf,
    /// The file carried the `building` mark when opened (see the module doc).
    building: bool,
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

/// The file at `path`, with the busy timeout every index connection uses.
fn open_file(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// Open `path`: in WAL mode, unless its first fill is under way (then its
/// journal mode is left as it is, with `synchronous=FULL`).
fn connect(path: &Path) -> rusqlite::Result<(Connection, bool)> {
    let conn = open_file(path)?;
    let building = is_building(&conn);
    if building {
        conn.pragma_update(None, "synchronous", "FULL")?;
    } else {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
    }
    Ok((conn, building))
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

/// A new, empty index with the `building` mark, in rollback-journal mode.
fn create(path: &Path) -> Result<Connection> {
    let conn = open_file(path).at(path)?;
    conn.pragma_update(None, "journal_mode", "DELETE")
        .at(path)?;
    conn.pragma_update(None, "synchronous", "FULL").at(path)?;
    conn.execute_batch(&format!(
        "BEGIN; {CREATE} INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}'), \
         ('tokenizer', '{TOKENIZER}'), ('{JOURNAL_KEY}', '{BUILDING}'); COMMIT;"
    ))
    .at(path)?;
    Ok(conn)
}

impl Db {
    /// Open the index at `path`; a missing, stale or unreadable one is
    /// replaced by an empty index (the flag says so).
    pub(super) fn open(path: &Path) -> Result<(Db, bool)> {
        if path.exists() {
            if let Ok((conn, building)) = connect(path) {
                let expected = (SCHEMA_VERSION.to_string(), TOKENIZER.to_string());
                if stamp(&conn).as_ref() == Some(&expected) {
                    return Ok((
                        Db {
                            conn,
                            path: path.to_path_buf(),
                            building,
                        },
                        false,
                    ));
                }
            }
            remove_files(path);
        }
        let conn = create(path)?;
        Ok((
            Db {
                conn,
                path: path.to_path_buf(),
                building: true,
            },
            true,
        ))
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Replace the database with an empty one.
    pub(super) fn clear(&mut self) -> Result<()> {
        let placeholder = Connection::open_in_memory().at(&self.path)?;
        drop(std::mem::replace(&mut self.conn, placeholder));
        remove_files(&self.path);
        self.conn = create(&self.path)?;
        self.building = true;
        Ok(())
    }

    /// After an update: when this index was still being filled, switch it
    /// to WAL and drop the `building` mark (in that order: a crash between
    /// the two leaves a WAL file with the mark, which the next call
    /// clears). Readers of another process that hold the file keep the
    /// switch waiting up to the busy timeout; if it cannot happen now it is
    /// tried after the next update.
    pub(super) fn finish_build(&mut self) -> Result<()> {
        if !self.building {
            return Ok(());
        }
        let mode: rusqlite::Result<String> =
            self.conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0));
        match mode {
            Ok(m) if m.eq_ignore_ascii_case("wal") => {}
            // Busy, or a mode SQLite would not leave: try again next time.
            _ => return Ok(()),
        }
        self.conn
            .execute("DELETE FROM meta WHERE key = ?1", [JOURNAL_KEY])
            .at(&self.path)?;
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .at(&self.path)?;
        self.building = false;
        Ok(())
    }

    /// The file's journal mode (`wal`, `delete`, ...).
    #[cfg(test)]
    pub(super) fn journal_mode(&self) -> String {
        self.conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap_or_default()
    }

    pub(super) fn stats(&self) -> Result<IndexStats> {
        let count = |sql: &str| -> Result<u64> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .at(&self.path)
                .map(|n| n.max(0) as u64)
        };
        let mut bytes = 0;
        for suffix in ["", "-wal"] {
            let mut p = self.path.as_os_str().to_owned();
            p.push(suffix);
            bytes += std::fs::metadata(PathBuf::from(p)).map_or(0, |m| m.len());
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

    #[test]
    fn a_new_index_carries_the_fts5_write_settings() {
        let dir = tempfile::tempdir().unwrap();
        let (db, created) = Db::open(&dir.path().join("index.sqlite")).unwrap();
        assert!(created);
        let setting = |key: &str| -> i64 {
            db.conn
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
        assert_eq!(db.journal_mode(), "delete");
        let (other, created) = Db::open(&path).unwrap();
        assert!(!created && other.building, "the mark is seen");
        assert_eq!(other.journal_mode(), "delete", "not switched by a reader");
        // Another connection that is open (idle) does not keep the switch
        // from happening, and reads in WAL mode afterwards.
        db.finish_build().unwrap();
        assert!(!db.building);
        assert_eq!(db.journal_mode(), "wal");
        assert!(!is_building(&other.conn), "reads the new state");
        assert_eq!(other.journal_mode(), "wal");
        drop(other);
        assert!(!is_building(&db.conn));
        drop(db);
        let (db, created) = Db::open(&path).unwrap();
        assert!(!created && !db.building);
        assert_eq!(db.journal_mode(), "wal");
    }

    /// A crash between the switch and dropping the mark: the next opener
    /// keeps WAL, and finishing clears the mark.
    #[test]
    fn a_mark_left_on_a_wal_index_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let (db, _) = Db::open(&path).unwrap();
        db.conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        drop(db);
        let (mut db, created) = Db::open(&path).unwrap();
        assert!(!created && db.building);
        assert_eq!(db.journal_mode(), "wal");
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
        assert_eq!(db.journal_mode(), "delete");
    }
}
