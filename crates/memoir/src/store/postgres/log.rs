//! The PostgreSQL session log: [`LogStore`] for [`PgStore`] (create,
//! append with its compare-and-set fast path and locked slow path, read,
//! listing, trash, lease) and the framing of batches.

use super::*;

/// Framed lines for `records` after the tail `(seq, hash)`.
pub(super) struct Batch {
    seqs: Vec<i64>,
    lines: Vec<String>,
    last_seq: u64,
    last_hash: Hash,
}

pub(super) fn encode_batch(mut seq: u64, mut hash: Hash, records: &[Record]) -> Result<Batch> {
    if records.iter().any(|r| matches!(r, Record::Meta(_))) {
        return Err(Error::Invalid(
            "a header record can only be written by create".into(),
        ));
    }
    let mut seqs = Vec::with_capacity(records.len());
    let mut lines = Vec::with_capacity(records.len());
    let mut buf = Vec::new();
    // The same framing as the file store: a multi-record batch names its last seq.
    let batch = (records.len() > 1).then_some(seq + records.len() as u64);
    for record in records {
        seq += 1;
        buf.clear();
        hash = crate::store::line::encode_in_batch(&mut buf, seq, &hash, batch, record)?;
        buf.pop(); // the newline: rows hold the line without it
        seqs.push(seq_i64(seq)?);
        lines.push(
            String::from_utf8(std::mem::take(&mut buf))
                .map_err(|_| Error::Invalid("a record encoded to invalid UTF-8".into()))?,
        );
    }
    Ok(Batch {
        seqs,
        lines,
        last_seq: seq,
        last_hash: hash,
    })
}

/// Decode a stored header line; `None` unless it verifies as a `seq` 0 header.
/// A `timestamptz::text` value (`2026-12-01 07:41:35.123+00`).
pub(super) fn parse_pg_time(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f%#z")
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

pub(super) fn header_from_line(line: &str) -> Option<SessionMeta> {
    let mut bytes = line.as_bytes().to_vec();
    match codec::decode(&mut bytes).ok()? {
        codec::Decoded {
            seq: 0,
            record: Record::Meta(meta),
            ..
        } => Some(meta),
        _ => None,
    }
}

/// The refusal of an append to a session whose rows do not end at its
/// recorded last `seq`.
pub(super) fn tail_mismatch(id: &str, last_seq: u64, max: i64) -> Error {
    StoreError::BrokenTail {
        id: id.to_string(),
        detail: format!(
            "the session's last seq is {last_seq} but its records end at seq {max} \
             (run `memoir doctor`)"
        ),
    }
    .into()
}

impl PgStore {
    /// Settle a write whose connection broke after it was sent: is the exact
    /// `line` stored at `(id, seq)`? `None` when the database cannot be reached.
    pub(super) fn stored_line_is(&self, id: &str, seq: u64, line: &str) -> Option<bool> {
        let seq = seq_i64(seq).ok()?;
        self.run("postgres query", true, |c| {
            let s = c.stmt("SELECT line FROM memoir_records WHERE session_id = $1 AND seq = $2")?;
            let row = c.client.query_opt(&s, &[&id, &seq])?;
            Ok(row.is_some_and(|r| r.get::<_, &str>(0) == line))
        })
        .ok()
    }

    /// One append attempt: the compare-and-set fast path when the tail is
    /// cached, else a transaction holding the session row's lock.
    pub(super) fn append_once(
        &self,
        conn: &mut Conn,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
        written: &mut Option<(u64, String)>,
    ) -> std::result::Result<Result<Appended>, postgres::Error> {
        *written = None;
        if let (false, Some((seq, hash))) = (records.is_empty(), self.cached_tail(id)) {
            if expected_next.is_none_or(|e| e == seq + 1) {
                let batch = match encode_batch(seq, hash, records) {
                    Ok(b) => b,
                    Err(e) => return Ok(Err(e)),
                };
                let s = conn.stmt(
                    "WITH upd AS (
                        UPDATE memoir_sessions SET last_seq = $4, last_hash = $5
                        WHERE id = $1 AND last_seq = $2 AND last_hash = $3 AND deleted_at IS NULL
                        RETURNING id)
                     INSERT INTO memoir_records (session_id, seq, line)
                     SELECT upd.id, r.seq, r.line FROM upd, unnest($6::bigint[], $7::text[]) AS r (seq, line)",
                )?;
                *written = Some((seq + 1, batch.lines[0].clone()));
                let n = conn.client.execute(
                    &s,
                    &[
                        &id,
                        &(seq as i64),
                        &&hash[..],
                        &(batch.last_seq as i64),
                        &&batch.last_hash[..],
                        &batch.seqs,
                        &batch.lines,
                    ],
                )?;
                if n as usize == records.len() {
                    self.remember_tail(id, Some((batch.last_seq, batch.last_hash)));
                    return Ok(Ok(Appended {
                        first_seq: seq + 1,
                        last_seq: batch.last_seq,
                        repaired: None,
                    }));
                }
                // Stale cache (another process appended): take the slow path.
                *written = None;
                self.remember_tail(id, None);
            }
        }
        let lock = conn.stmt(
            "SELECT last_seq, last_hash FROM memoir_sessions
             WHERE id = $1 AND deleted_at IS NULL FOR UPDATE",
        )?;
        let insert = conn.stmt(
            "INSERT INTO memoir_records (session_id, seq, line)
             SELECT $1, r.seq, r.line FROM unnest($2::bigint[], $3::text[]) AS r (seq, line)",
        )?;
        let update =
            conn.stmt("UPDATE memoir_sessions SET last_seq = $2, last_hash = $3 WHERE id = $1")?;
        let max_seq = conn.stmt("SELECT max(seq) FROM memoir_records WHERE session_id = $1")?;
        let mut tx = conn.client.transaction()?;
        let Some(row) = tx.query_opt(&lock, &[&id])? else {
            return Ok(Err(Error::NotFound(id.to_string())));
        };
        let last_seq = row.get::<_, i64>(0) as u64;
        let Some(last_hash) = hash_from(row.get::<_, &[u8]>(1)) else {
            return Ok(Err(Error::Corrupt {
                path: self.location(id),
                detail: "last_hash is not a 16-byte hash".into(),
            }));
        };
        // The rows must end exactly at the session's last_seq: a record
        // written after a gap or under an existing row would be one the
        // reader skips or reports, never an acknowledged append.
        let max = tx
            .query_one(&max_seq, &[&id])?
            .get::<_, Option<i64>>(0)
            .unwrap_or(-1);
        if max != last_seq as i64 {
            drop(tx);
            self.remember_tail(id, None);
            return Ok(Err(tail_mismatch(id, last_seq, max)));
        }
        let first_seq = last_seq + 1;
        if let Some(expected) = expected_next {
            if expected != first_seq {
                drop(tx);
                self.remember_tail(id, Some((last_seq, last_hash)));
                return Ok(Err(Error::Conflict {
                    id: id.to_string(),
                    expected,
                    actual: first_seq,
                }));
            }
        }
        if records.is_empty() {
            drop(tx);
            self.remember_tail(id, Some((last_seq, last_hash)));
            return Ok(Ok(Appended {
                first_seq,
                last_seq,
                repaired: None,
            }));
        }
        let batch = match encode_batch(last_seq, last_hash, records) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        tx.execute(&insert, &[&id, &batch.seqs, &batch.lines])?;
        tx.execute(
            &update,
            &[&id, &(batch.last_seq as i64), &&batch.last_hash[..]],
        )?;
        *written = Some((first_seq, batch.lines[0].clone()));
        tx.commit()?;
        self.remember_tail(id, Some((batch.last_seq, batch.last_hash)));
        Ok(Ok(Appended {
            first_seq,
            last_seq: batch.last_seq,
            repaired: None,
        }))
    }

    pub(super) fn create_once(
        &self,
        conn: &mut Conn,
        meta: &SessionMeta,
        line: &str,
        hash: &Hash,
    ) -> std::result::Result<Result<()>, postgres::Error> {
        let project = meta
            .extra
            .get("project")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let created = meta.created_at.to_rfc3339();
        let ins_session = conn.stmt(
            "INSERT INTO memoir_sessions (id, created_at, project, last_seq, last_hash)
             VALUES ($1, $2::text::timestamptz, $3, 0, $4) ON CONFLICT (id) DO NOTHING",
        )?;
        let ins_header =
            conn.stmt("INSERT INTO memoir_records (session_id, seq, line) VALUES ($1, 0, $2)")?;
        let mut tx = conn.client.transaction()?;
        let n = tx.execute(&ins_session, &[&meta.id, &created, &project, &&hash[..]])?;
        if n == 0 {
            return Ok(Err(Error::SessionExists(meta.id.clone())));
        }
        tx.execute(&ins_header, &[&meta.id, &line])?;
        tx.commit()?;
        Ok(Ok(()))
    }
}

impl LogStore for PgStore {
    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        self.payload_store()
    }

    fn postgres(&self) -> Option<&PgStore> {
        Some(self)
    }

    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        crate::id::validate(&meta.id)?;
        let mut buf = Vec::new();
        let hash = codec::encode_into(&mut buf, 0, &ZERO_HASH, &Record::Meta(meta.clone()))?;
        buf.pop();
        let line = String::from_utf8(buf)
            .map_err(|_| Error::Invalid("the header encoded to invalid UTF-8".into()))?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            match self.create_once(&mut lease.conn, meta, &line, &hash) {
                Ok(result) => {
                    self.checkin(lease, true);
                    if result.is_ok() {
                        self.remember_tail(&meta.id, Some((0, hash)));
                    }
                    return result.map(|()| Appended {
                        first_seq: 0,
                        last_seq: 0,
                        repaired: None,
                    });
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    self.checkin(lease, !broken);
                    if !broken {
                        return Err(self.pg_error("postgres create", &e));
                    }
                    self.drain_idle();
                    match self.stored_line_is(&meta.id, 0, &line) {
                        Some(true) => {
                            self.remember_tail(&meta.id, Some((0, hash)));
                            return Ok(Appended {
                                first_seq: 0,
                                last_seq: 0,
                                repaired: None,
                            });
                        }
                        Some(false) if attempt < 2 => continue,
                        _ => return Err(self.pg_error("postgres create", &e)),
                    }
                }
            }
        }
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        crate::id::validate(id)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            let mut written = None;
            match self.append_once(&mut lease.conn, id, records, expected_next, &mut written) {
                Ok(result) => {
                    self.checkin(lease, true);
                    return result;
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    let fresh = lease.fresh;
                    self.checkin(lease, !broken);
                    self.remember_tail(id, None);
                    if is_unique_violation(&e) {
                        // Rows beyond the session's last_seq: the tail is
                        // inconsistent, and no retry can fix it.
                        if let Some(broken) = self.broken_tail(id) {
                            return Err(broken);
                        }
                        // Another writer took the seq between our read and write.
                        let actual = self
                            .read_header_and_tail(id)
                            .map(|t| t + 1)
                            .unwrap_or_default();
                        return Err(Error::Conflict {
                            id: id.to_string(),
                            expected: expected_next.unwrap_or(actual),
                            actual,
                        });
                    }
                    if !broken {
                        return Err(self.pg_error("postgres append", &e));
                    }
                    self.drain_idle();
                    let settled = match &written {
                        // Nothing was sent that could have committed.
                        None => Some(false),
                        Some((seq, line)) => self.stored_line_is(id, *seq, line),
                    };
                    match (settled, &written) {
                        (Some(true), Some((first_seq, _))) => {
                            let first_seq = *first_seq;
                            return Ok(Appended {
                                first_seq,
                                last_seq: first_seq + records.len() as u64 - 1,
                                repaired: None,
                            });
                        }
                        (Some(false), _) if attempt < 2 && (!fresh || written.is_some()) => {
                            continue
                        }
                        _ => return Err(self.pg_error("postgres append", &e)),
                    }
                }
            }
        }
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        self.read_rows(id, false)
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        crate::id::validate(id)?;
        let line = self.run("postgres read", true, |c| {
            let s = c.stmt(
                "SELECT r.line FROM memoir_sessions s
                 LEFT JOIN memoir_records r ON r.session_id = s.id AND r.seq = 0
                 WHERE s.id = $1 AND s.deleted_at IS NULL",
            )?;
            Ok(c.client
                .query_opt(&s, &[&id])?
                .map(|r| r.get::<_, Option<String>>(0)))
        })?;
        match line {
            None => Err(Error::NotFound(id.to_string())),
            Some(None) => Ok(None),
            Some(Some(line)) => Ok(header_from_line(&line)),
        }
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        self.listing(None, false)
            .map(|(l, n)| (l.into_iter().map(|(l, _)| l).collect(), n))
    }

    fn location(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("{}/{id}", self.locator))
    }

    fn durability(&self) -> Durability {
        self.options.durability
    }

    fn delete(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres delete", true, |c| {
            let s = c.stmt(
                "UPDATE memoir_sessions SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL",
            )?;
            c.client.execute(&s, &[&id])
        })?;
        self.remember_tail(id, None);
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }

    fn list_project(&self, project: &str) -> Result<(Vec<Listed>, usize)> {
        self.listing(Some(project), false)
            .map(|(l, n)| (l.into_iter().map(|(l, _)| l).collect(), n))
    }

    fn list_deleted(&self) -> Result<Vec<DeletedListed>> {
        let (rows, _) = self.listing(None, true)?;
        let mut out: Vec<DeletedListed> = rows
            .into_iter()
            .map(|(l, deleted_at)| DeletedListed {
                meta: l.meta,
                location: l.location,
                deleted_at,
            })
            .collect();
        out.sort_by(|a, b| {
            b.deleted_at
                .cmp(&a.deleted_at)
                .then_with(|| a.meta.id.cmp(&b.meta.id))
        });
        Ok(out)
    }

    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        self.read_rows(id, true)
    }

    fn purge(&self, id: &str) -> Result<()> {
        self.purge_deleted(id)
    }

    fn acquire_lease(&self, id: &str) -> Result<OwnerLease> {
        crate::id::validate(id)?;
        self.read_header(id)?;
        lease::acquire(self, id)
    }

    fn restore(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres restore", true, |c| {
            let s = c.stmt(
                "UPDATE memoir_sessions SET deleted_at = NULL WHERE id = $1 AND deleted_at IS NOT NULL",
            )?;
            c.client.execute(&s, &[&id])
        })?;
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }
}

impl PgStore {
    /// `Some(refusal)` when the session's rows do not end at its last `seq`.
    fn broken_tail(&self, id: &str) -> Option<Error> {
        let (last, max) = self
            .run("postgres query", true, |c| {
                let s = c.stmt(
                    "SELECT s.last_seq, (SELECT max(seq) FROM memoir_records r WHERE r.session_id = s.id)
                     FROM memoir_sessions s WHERE s.id = $1",
                )?;
                Ok(c.client
                    .query_opt(&s, &[&id])?
                    .map(|r| (r.get::<_, i64>(0), r.get::<_, Option<i64>>(1).unwrap_or(-1))))
            })
            .ok()
            .flatten()?;
        (last != max).then(|| tail_mismatch(id, last as u64, max))
    }

    /// Read and verify a live (`deleted` false) or trashed session's rows.
    fn read_rows(&self, id: &str, deleted: bool) -> Result<RawLog> {
        crate::id::validate(id)?;
        let scanner = self.run("postgres read", true, |c| {
            let s = c.stmt(
                "SELECT r.line FROM memoir_records r JOIN memoir_sessions s ON s.id = r.session_id
                 WHERE s.id = $1 AND (s.deleted_at IS NOT NULL) = $2 ORDER BY r.seq",
            )?;
            let mut rows = c
                .client
                .query_raw(&s, [&id as &(dyn ToSql + Sync), &deleted])?;
            let mut scanner = Scanner::new();
            let mut offset = 0u64;
            let mut any = false;
            while let Some(row) = rows.next()? {
                any = true;
                let line: &str = row.get(0);
                scanner.push(line.as_bytes(), offset, true);
                offset += line.len() as u64 + 1;
            }
            Ok(any.then_some(scanner))
        })?;
        match scanner {
            Some(s) => Ok(s.finish()),
            None => Err(Error::NotFound(id.to_string())),
        }
    }

    /// Headers of the live (or trashed) sessions, optionally of one project
    /// only (the indexed `project` column), with their deletion times; plus
    /// how many headers were unreadable.
    #[allow(clippy::type_complexity)]
    fn listing(
        &self,
        project: Option<&str>,
        deleted: bool,
    ) -> Result<(Vec<(Listed, Option<chrono::DateTime<chrono::Utc>>)>, usize)> {
        let rows = self.run("postgres list", true, |c| {
            let s = c.stmt(
                "SELECT s.id, r.line, s.deleted_at::text FROM memoir_sessions s
                 LEFT JOIN memoir_records r ON r.session_id = s.id AND r.seq = 0
                 WHERE (s.deleted_at IS NOT NULL) = $1
                   AND ($2::text IS NULL OR s.project = $2)",
            )?;
            let rows = c.client.query(&s, &[&deleted, &project])?;
            Ok(rows
                .iter()
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        r.get::<_, Option<String>>(1),
                        r.get::<_, Option<String>>(2),
                    )
                })
                .collect::<Vec<_>>())
        })?;
        let mut out = Vec::with_capacity(rows.len());
        let mut unreadable = 0;
        for (id, line, deleted_at) in rows {
            match line.as_deref().and_then(header_from_line) {
                Some(meta) if meta.id == id => out.push((
                    Listed {
                        location: self.location(&id),
                        meta,
                    },
                    deleted_at.as_deref().and_then(parse_pg_time),
                )),
                _ => unreadable += 1,
            }
        }
        out.sort_by(|a, b| {
            b.0.meta
                .created_at
                .cmp(&a.0.meta.created_at)
                .then_with(|| b.0.meta.id.cmp(&a.0.meta.id))
        });
        Ok((out, unreadable))
    }

    /// The session's current last `seq` (for conflict reports).
    fn read_header_and_tail(&self, id: &str) -> Option<u64> {
        self.run("postgres query", true, |c| {
            let s = c.stmt("SELECT last_seq FROM memoir_sessions WHERE id = $1")?;
            Ok(c.client
                .query_opt(&s, &[&id])?
                .map(|r| r.get::<_, i64>(0) as u64))
        })
        .ok()
        .flatten()
    }

    /// Permanently remove a deleted session, its records and its vectors.
    /// [`Error::NotFound`] unless `id` was deleted first.
    fn purge_deleted(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        let n = self.run("postgres purge", true, |c| {
            let mut tx = c.client.transaction()?;
            let n = tx.execute(
                "DELETE FROM memoir_sessions WHERE id = $1 AND deleted_at IS NOT NULL",
                &[&id],
            )?;
            if n > 0 {
                tx.execute(
                    "DELETE FROM memoir_chunk_vectors WHERE session_id = $1",
                    &[&id],
                )?;
            }
            tx.commit()?;
            Ok(n)
        })?;
        if n == 0 {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(())
    }
}
