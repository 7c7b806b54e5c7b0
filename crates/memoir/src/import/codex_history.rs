//! Codex's paginated-history projection (`<CODEX_HOME>/thread_history_<N>.sqlite`,
//! table `thread_items(thread_id, turn_id, item_id, rollout_ordinal, item_json)`)
//! as a second source for a rollout: items whose `rollout_ordinal` the
//! rollout (with its predecessor segments) lacks — lost in a migration or a
//! rotation — are filled in at their ordinal's place, each reported.
//!
//! The database is opened read-only exactly as OpenCode's is (a private
//! copy when it has a write-ahead log, else `immutable=1`; never written),
//! once per process while its size and time (and its log's) do not change,
//! or for [`REOPEN_AFTER`] whatever Codex writes meanwhile (the items a
//! rollout lost are old; a copy of a busy database is not made per
//! rollout): a tree of rollouts costs one open, one indexed query per
//! rollout. It is
//! consulted only for rollouts that carry ordinals (paginated history), on
//! full parses (a resumed tail is not filled). Behind the `import-opencode`
//! feature, which brings SQLite.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::Connection;

use serde_json::{json, Map, Value};

use super::lines::{Line, HISTORY_ITEM};
use super::opencode::{columns, open, sql_err};
use super::{segments, ImportError, Skipped};

/// The newest `thread_history_<N>.sqlite` of the Codex home holding `rollout`.
pub fn database_for(rollout: &Path) -> Option<PathBuf> {
    let home = segments::codex_home(rollout)?;
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(&home)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name
                .strip_prefix("thread_history_")?
                .strip_suffix(".sqlite")?
                .parse::<u64>()
                .ok()?;
            e.file_type().ok()?.is_file().then(|| (n, e.path()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

/// Lines for the projection items of `thread` whose ordinals `lines` lack,
/// merged into `lines` at their ordinals' places; notes say what was filled
/// or why the database could not be read.
pub fn fill(rollout: &Path, thread: &str, lines: Vec<Line>) -> (Vec<Line>, Vec<Skipped>) {
    let present: BTreeSet<u64> = lines
        .iter()
        .filter_map(|l| l.value.get("ordinal").and_then(Value::as_u64))
        .collect();
    if present.is_empty() {
        return (lines, Vec::new());
    }
    let Some(db) = database_for(rollout) else {
        return (lines, Vec::new());
    };
    let mut notes = Vec::new();
    let items = match missing_items(&db, thread, &present) {
        Ok(items) => items,
        Err(e) => {
            notes.push(Skipped {
                file: db,
                line: 0,
                reason: format!("thread history not read: {e}"),
            });
            return (lines, notes);
        }
    };
    for (ordinal, item_id, _) in &items {
        notes.push(Skipped {
            file: db.clone(),
            line: 0,
            reason: format!(
                "item {item_id} (ordinal {ordinal}) is missing from the rollout: filled from the thread history"
            ),
        });
    }
    (merge(lines, items), notes)
}

/// How long an open database is reused although it changed.
pub const REOPEN_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The database last opened, while it is unchanged.
struct Opened {
    /// When it was opened.
    at: std::time::Instant,
    /// The database and the size and time of it and of its log.
    key: (PathBuf, u64, i128, u64, i128),
    conn: Connection,
    /// The private copy `conn` reads, when the database had a log.
    _copy: Option<tempfile::TempDir>,
}

static OPENED: Mutex<Option<Opened>> = Mutex::new(None);

/// Run `f` on `db`, opened read-only (reusing the last open while `db` and
/// its write-ahead log are unchanged).
fn with_db<T>(
    db: &Path,
    f: impl FnOnce(&Connection) -> Result<T, ImportError>,
) -> Result<T, ImportError> {
    let stat = |p: &Path| {
        super::cursor::FileStat::of(p)
            .map(|s| (s.size, s.mtime_ns))
            .unwrap_or((0, 0))
    };
    let (size, mtime) = stat(db);
    let (wal_size, wal_mtime) = stat(&super::opencode::wal_of(db));
    let key = (db.to_path_buf(), size, mtime, wal_size, wal_mtime);
    let mut opened = OPENED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let fresh = |o: &Opened| o.key == key || (o.key.0 == key.0 && o.at.elapsed() < REOPEN_AFTER);
    if !opened.as_ref().is_some_and(fresh) {
        *opened = None;
        let (conn, copy) = open(db)?;
        *opened = Some(Opened {
            at: std::time::Instant::now(),
            key,
            conn,
            _copy: copy,
        });
    }
    match opened.as_ref() {
        Some(o) => f(&o.conn),
        None => Err(ImportError::Unsupported {
            path: db.to_path_buf(),
            reason: "thread history database not open".into(),
        }),
    }
}

/// `(ordinal, item id, line)` of the items of `thread` not in `present`.
fn missing_items(
    db: &Path,
    thread: &str,
    present: &BTreeSet<u64>,
) -> Result<Vec<(u64, String, Line)>, ImportError> {
    with_db(db, |conn| query_missing(conn, db, thread, present))
}

fn query_missing(
    conn: &Connection,
    db: &Path,
    thread: &str,
    present: &BTreeSet<u64>,
) -> Result<Vec<(u64, String, Line)>, ImportError> {
    let has_created = columns(conn, "thread_items")
        .iter()
        .any(|c| c == "created_at_ms");
    let sql = format!(
        "SELECT turn_id, item_id, rollout_ordinal, item_json, {} FROM thread_items \
         WHERE thread_id = ?1 ORDER BY rollout_ordinal, item_id",
        if has_created { "created_at_ms" } else { "NULL" }
    );
    let mut stmt = conn.prepare(&sql).map_err(|e| sql_err(db, e))?;
    let rows = stmt
        .query_map([thread], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<i64>>(4)?,
            ))
        })
        .map_err(|e| sql_err(db, e))?;
    let mut out = Vec::new();
    for row in rows {
        let (turn, item_id, ordinal, item_json, created) = row.map_err(|e| sql_err(db, e))?;
        let Ok(ordinal) = u64::try_from(ordinal) else {
            continue;
        };
        if present.contains(&ordinal) {
            continue;
        }
        let Ok(Value::Object(mut payload)) = serde_json::from_str::<Value>(&item_json) else {
            continue;
        };
        if let Some(t) = turn {
            payload.insert("turn_id".into(), json!(t));
        }
        let mut value = Map::new();
        if let Some(t) = created.and_then(chrono::DateTime::from_timestamp_millis) {
            value.insert("timestamp".into(), json!(t.to_rfc3339()));
        }
        value.insert("ordinal".into(), json!(ordinal));
        value.insert("type".into(), json!(HISTORY_ITEM));
        value.insert("payload".into(), Value::Object(payload));
        // Number 0: not a line of any file.
        out.push((ordinal, item_id, Line { number: 0, value }));
    }
    Ok(out)
}

/// `lines` with `items` inserted before the first line of a higher ordinal.
fn merge(lines: Vec<Line>, items: Vec<(u64, String, Line)>) -> Vec<Line> {
    let mut items = items.into_iter().peekable();
    let mut out = Vec::with_capacity(lines.len() + items.len());
    for l in lines {
        if let Some(o) = l.value.get("ordinal").and_then(Value::as_u64) {
            while let Some((_, _, item)) = items.next_if(|(io, _, _)| *io < o) {
                out.push(item);
            }
        }
        out.push(l);
    }
    out.extend(items.map(|(_, _, l)| l));
    out
}
