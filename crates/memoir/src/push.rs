//! Pushing a local store to a `memoir serve` server (`memoir sync`): every
//! session (native and imported, forks and subagents included) is copied
//! record for record, incrementally, idempotently and resumably.
//!
//! How it works:
//! - A server copy keeps the local `seq`s: the header is created with the
//!   local header (so a fork names the same parent, `seq` and message
//!   count), then records are appended in order with `expected_seq`, so a
//!   record is never written twice and a fork's parent `seq` means the same
//!   record on both sides.
//! - Secrets are redacted before anything leaves the machine (the export's
//!   rules, `manager::redact`) unless [`PushOptions::redact`] is off.
//!   Redaction changes content, so the server's hash chain is that of the
//!   redacted records (and of its own header, which names the project):
//!   the two chains never share a line hash. Cursors are therefore `seq`s
//!   plus content digests ([`crate::client::wire::record_digest`]), which
//!   both sides compute on the same (redacted) record.
//! - The cursor file (`<state dir>/<remote key>.json`) maps each pushed
//!   session to the `seq` the server acknowledged and the local file's
//!   length then: a session whose file has not changed is skipped with one
//!   `stat`. A session that grew is read and only the records after the
//!   cursor are sent. A session without a cursor (a first sync, or a
//!   cursor lost to a kill) is asked about in one batched `POST /v1/heads`,
//!   and sending resumes after the server's last record once its digest
//!   matches the local record at that `seq` (else the session is reported
//!   as diverged and left alone). A 409 on an append (another sync got
//!   there first) does the same.
//! - Local sessions are append-only: a rewritten source is re-imported as
//!   a new session that forks the old one, so it is pushed as that fork.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::wire::{self, Head};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::record::{Record, SessionMeta};
use crate::store::LogStore;

/// The cursor file's format name.
pub const STATE_FORMAT: &str = "memoir.sync-state";
/// The cursor file's version.
pub const STATE_VERSION: u32 = 1;

/// What to push and how.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Replace secrets before sending (default on).
    pub redact: bool,
    /// Count what would be sent; send nothing and keep no cursor.
    pub dry_run: bool,
    /// Only sessions imported from this agent (`claude-code`, `codex`...;
    /// `memoir` for sessions written by memoir itself); forks keep their
    /// parents.
    pub agent: Option<String>,
    /// Largest request body of one append (bytes, approximate).
    pub batch_bytes: usize,
    /// Most records in one append.
    pub batch_records: usize,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            redact: true,
            dry_run: false,
            agent: None,
            batch_bytes: 4 << 20,
            batch_records: 2000,
        }
    }
}

/// Progress of a push, after each session.
#[derive(Debug, Clone, Default)]
pub struct PushProgress {
    /// Sessions considered so far.
    pub sessions_done: usize,
    /// Sessions to consider.
    pub sessions_total: usize,
    /// Records sent so far.
    pub records: u64,
    /// Request bytes sent so far.
    pub bytes: u64,
}

/// One session that could not be pushed.
#[derive(Debug, Clone, Serialize)]
pub struct PushFailure {
    /// Its id.
    pub session: String,
    /// Why.
    pub reason: String,
}

/// What a push did (or, dry, would do).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushReport {
    /// Sessions of the local store that the filter kept.
    pub sessions: usize,
    /// Skipped without reading: unchanged since the last push.
    pub unchanged: usize,
    /// Read, and already complete on the server.
    pub up_to_date: usize,
    /// Created on the server.
    pub created: usize,
    /// Grown on the server (records appended to an existing copy).
    pub grown: usize,
    /// Records sent.
    pub records: u64,
    /// Request bytes sent (JSON bodies of creates and appends).
    pub bytes: u64,
    /// Append requests sent.
    pub requests: u64,
    /// Secrets replaced, over the records sent.
    pub redacted: u64,
    /// True when nothing was sent.
    pub dry_run: bool,
    /// Sessions left out, with the reason.
    pub failed: Vec<PushFailure>,
}

/// One session's cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    /// The last `seq` the server acknowledged.
    seq: u64,
    /// The local log's length in bytes when it was read.
    len: u64,
}

/// The cursor file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    format: String,
    version: u32,
    remote: String,
    redact: bool,
    sessions: BTreeMap<String, Cursor>,
}

/// The cursor file of `client`'s server and token under `state_dir`
/// (`<sessions dir>/sync/`): one per server URL and token, so two projects
/// on one server keep separate cursors.
pub fn state_path(state_dir: &Path, client: &Client) -> PathBuf {
    let mut h = blake3::Hasher::new();
    h.update(client.base().as_bytes());
    h.update(b"\n");
    h.update(client.token().unwrap_or("").as_bytes());
    let hex = h.finalize().to_hex();
    state_dir.join(format!("{}.json", &hex[..16]))
}

fn load_state(path: &Path, client: &Client, redact: bool) -> State {
    let fresh = State {
        format: STATE_FORMAT.into(),
        version: STATE_VERSION,
        remote: client.base().to_string(),
        redact,
        sessions: BTreeMap::new(),
    };
    // A missing, unreadable or foreign cursor file only costs a heads query:
    // the server is the truth, the file is a shortcut.
    match std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<State>(&b).ok())
    {
        Some(s) if s.format == STATE_FORMAT && s.version == STATE_VERSION && s.redact == redact => {
            s
        }
        _ => fresh,
    }
}

fn save_state(path: &Path, state: &State) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            op: "create directory",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let bytes = serde_json::to_vec(state)?;
    crate::paths::atomic_write(path, &bytes)
}

/// The agent a session came from (`memoir` for a native one).
fn agent_of(meta: &SessionMeta) -> &str {
    meta.source.as_ref().map_or("memoir", |s| s.agent.as_str())
}

/// Push `store`'s sessions to `client`'s server; cursors live under
/// `state_dir`. A session that fails is reported and the others go on;
/// an unreachable server or a refused token is an error.
pub fn push(
    store: &dyn LogStore,
    state_dir: &Path,
    client: &Client,
    options: &PushOptions,
    progress: &mut dyn FnMut(&PushProgress),
) -> Result<PushReport> {
    let path = state_path(state_dir, client);
    let mut state = load_state(&path, client, options.redact);
    let (listed, _unreadable) = store.list()?;
    let metas: HashMap<String, SessionMeta> = listed
        .iter()
        .map(|l| (l.meta.id.clone(), l.meta.clone()))
        .collect();
    // The filter, closed over fork parents (a fork needs its parent there).
    let mut chosen: HashSet<String> = listed
        .iter()
        .filter(|l| {
            options
                .agent
                .as_deref()
                .is_none_or(|a| agent_of(&l.meta) == a)
        })
        .map(|l| l.meta.id.clone())
        .collect();
    let mut stack: Vec<String> = chosen.iter().cloned().collect();
    while let Some(id) = stack.pop() {
        if let Some(p) = metas.get(&id).and_then(|m| m.parent.as_ref()) {
            if metas.contains_key(&p.session) && chosen.insert(p.session.clone()) {
                stack.push(p.session.clone());
            }
        }
    }
    let mut report = PushReport {
        sessions: chosen.len(),
        dry_run: options.dry_run,
        ..Default::default()
    };
    // Unchanged sessions cost a stat.
    let mut todo: Vec<(String, Option<u64>)> = Vec::new();
    for l in &listed {
        if !chosen.contains(&l.meta.id) {
            continue;
        }
        let len = std::fs::metadata(&l.location).ok().map(|m| m.len());
        match (state.sessions.get(&l.meta.id), len) {
            (Some(c), Some(len)) if c.len == len => report.unchanged += 1,
            _ => todo.push((l.meta.id.clone(), len)),
        }
    }
    // Parents before their forks.
    let order = parents_first(&todo, &metas);
    // One heads query for every session without a cursor.
    let unknown: Vec<String> = order
        .iter()
        .filter(|(id, _)| !state.sessions.contains_key(id))
        .map(|(id, _)| id.clone())
        .collect();
    let mut heads: HashMap<String, Head> = HashMap::new();
    for chunk in unknown.chunks(5000) {
        for h in retry(|| client.heads(chunk))? {
            heads.insert(h.id.clone(), h);
        }
    }
    let total = order.len();
    let mut p = PushProgress {
        sessions_done: 0,
        sessions_total: total,
        ..Default::default()
    };
    progress(&p);
    let mut last_save = Instant::now();
    let mut failed_parents: HashSet<String> = HashSet::new();
    for (id, len) in order {
        let parent_failed = metas
            .get(&id)
            .and_then(|m| m.parent.as_ref())
            .is_some_and(|pp| failed_parents.contains(&pp.session));
        let outcome = if parent_failed {
            Err(Error::Invalid("its fork parent could not be pushed".into()))
        } else {
            let known = match state.sessions.get(&id) {
                Some(c) => Known::Cursor(c.seq),
                None => match heads.get(&id) {
                    Some(h) => Known::Head(h.clone()),
                    None => Known::Absent,
                },
            };
            push_one(store, client, options, &id, known, &mut report)
        };
        match outcome {
            Ok(seq) => {
                if !options.dry_run {
                    if let Some(len) = len {
                        state.sessions.insert(id.clone(), Cursor { seq, len });
                    }
                }
            }
            Err(e) => {
                if e.kind() == crate::error::ErrorKind::Unavailable
                    || matches!(&e, Error::Config(_))
                {
                    // The server went away or refused us: keep what was
                    // acknowledged and stop.
                    if !options.dry_run {
                        save_state(&path, &state)?;
                    }
                    return Err(e);
                }
                state.sessions.remove(&id);
                failed_parents.insert(id.clone());
                report.failed.push(PushFailure {
                    session: id.clone(),
                    reason: e.to_string(),
                });
            }
        }
        p.sessions_done += 1;
        p.records = report.records;
        p.bytes = report.bytes;
        progress(&p);
        if !options.dry_run && last_save.elapsed() > Duration::from_secs(2) {
            save_state(&path, &state)?;
            last_save = Instant::now();
        }
    }
    if !options.dry_run {
        // Drop cursors of sessions that are gone locally.
        state.sessions.retain(|id, _| metas.contains_key(id));
        save_state(&path, &state)?;
    }
    Ok(report)
}

/// `todo` reordered so that a fork comes after its parent.
fn parents_first(
    todo: &[(String, Option<u64>)],
    metas: &HashMap<String, SessionMeta>,
) -> Vec<(String, Option<u64>)> {
    let pending: HashMap<&str, Option<u64>> =
        todo.iter().map(|(id, len)| (id.as_str(), *len)).collect();
    let mut done: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(todo.len());
    for (id, _) in todo {
        // Walk up to the oldest pending ancestor, then emit downwards.
        let mut chain = vec![id.clone()];
        let mut cur = id.clone();
        while let Some(p) = metas.get(&cur).and_then(|m| m.parent.as_ref()) {
            if !pending.contains_key(p.session.as_str())
                || done.contains(&p.session)
                || chain.contains(&p.session)
            {
                break;
            }
            chain.push(p.session.clone());
            cur = p.session.clone();
        }
        for s in chain.into_iter().rev() {
            if done.insert(s.clone()) {
                let len = pending.get(s.as_str()).copied().flatten();
                out.push((s, len));
            }
        }
    }
    out
}

/// What is known of a session's server copy before reading it.
enum Known {
    /// The cursor: the server acknowledged records through this `seq`.
    Cursor(u64),
    /// The server's head, from `POST /v1/heads`.
    Head(Head),
    /// The server does not have it.
    Absent,
}

/// Retry a call that failed because the server was unavailable (a 503, a
/// refused connection): safe for every call a push makes, since appends
/// carry `expected_seq`.
fn retry<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let mut wait = Duration::from_millis(200);
    for _ in 0..5 {
        match f() {
            Err(e) if e.kind() == crate::error::ErrorKind::Unavailable => {
                std::thread::sleep(wait);
                wait *= 2;
            }
            other => return other,
        }
    }
    f()
}

/// What a push sends of session `id`: its header (without a project) and
/// its records, payloads inline and secrets replaced when `redact` is set;
/// a server copy holds exactly these (`GET /log` returns them).
pub fn prepare(store: &dyn LogStore, id: &str, redact: bool) -> Result<(SessionMeta, Vec<Record>)> {
    outgoing(store, id, redact, &mut 0)
}

/// [`prepare`], counting the secrets replaced into `redactions`.
fn outgoing(
    store: &dyn LogStore,
    id: &str,
    redact: bool,
    redactions: &mut u64,
) -> Result<(SessionMeta, Vec<Record>)> {
    let raw = store.read(id)?;
    let raw = crate::transcript::blobs::resolve_raw(store, raw);
    let Some(mut meta) = raw.header.clone() else {
        return Err(Error::Invalid(format!("session {id} has no header")));
    };
    meta.extra.remove(crate::store::PROJECT_KEY);
    for (i, r) in raw.records.iter().enumerate() {
        if r.seq != i as u64 + 1 {
            return Err(Error::Invalid(format!(
                "session {id} has a gap or damage before seq {} (run `memoir doctor`)",
                r.seq
            )));
        }
    }
    if !raw.report.blobs.is_empty() {
        return Err(Error::Invalid(format!(
            "session {id} references payloads that do not resolve (run `memoir doctor`)"
        )));
    }
    let records: Vec<Record> = raw.records.into_iter().map(|r| r.record).collect();
    if !redact {
        return Ok((meta, records));
    }
    redacted(meta, records, redactions)
}

#[cfg(feature = "redact")]
fn redacted(
    mut meta: SessionMeta,
    records: Vec<Record>,
    count: &mut u64,
) -> Result<(SessionMeta, Vec<Record>)> {
    use crate::manager::redact::{redact_message, redact_text, redact_value, Redactions};
    let mut out = Redactions::default();
    if let Some(t) = &meta.title {
        meta.title = Some(redact_text(t, &mut out)?);
    }
    let mut sent = Vec::with_capacity(records.len());
    for r in records {
        let r = match r {
            Record::Message(m) => Record::Message(redact_message(&m, &mut out)?),
            other => {
                // The whole object, tag included (a kind is never a secret),
                // so its keys keep their order.
                let v = redact_value(&serde_json::Value::Object(other.to_object()?), &mut out)?;
                let serde_json::Value::Object(obj) = v else {
                    return Err(Error::Invalid("a redacted record is not an object".into()));
                };
                Record::from_object(obj)?
            }
        };
        sent.push(r);
    }
    *count += out.total() as u64;
    Ok((meta, sent))
}

#[cfg(not(feature = "redact"))]
fn redacted(
    _meta: SessionMeta,
    _records: Vec<Record>,
    _count: &mut u64,
) -> Result<(SessionMeta, Vec<Record>)> {
    Err(Error::Config(
        "this build of memoir cannot redact (cargo feature `redact`); push with redaction off"
            .into(),
    ))
}

/// The server copy agrees with `records` through `head.last_seq`?
fn check_head(id: &str, meta: &SessionMeta, records: &[Record], head: &Head) -> Result<u64> {
    let s = head.last_seq;
    if s as usize > records.len() {
        return Err(Error::Invalid(format!(
            "session {id} diverged: the server has {s} records, this store {}",
            records.len()
        )));
    }
    let local = match s {
        0 => wire::header_digest(meta)?,
        _ => wire::record_digest(&records[s as usize - 1])?,
    };
    if local != head.last_digest {
        return Err(Error::Invalid(format!(
            "session {id} diverged: the server's record {s} differs from this store's \
             (pushed with another redaction setting, or another session of that id)"
        )));
    }
    Ok(s)
}

/// Push one session; returns the `seq` the server now holds.
fn push_one(
    store: &dyn LogStore,
    client: &Client,
    options: &PushOptions,
    id: &str,
    known: Known,
    report: &mut PushReport,
) -> Result<u64> {
    let mut redactions = 0u64;
    let (meta, records) = outgoing(store, id, options.redact, &mut redactions)?;
    let last = records.len() as u64;
    let mut created = false;
    let have = match known {
        Known::Cursor(seq) if seq <= last => seq,
        Known::Cursor(_) => refresh(client, id, &meta, &records)?,
        Known::Head(h) => check_head(id, &meta, &records, &h)?,
        Known::Absent => {
            let body = wire::CreateSession {
                meta: Some(meta.clone()),
                ..Default::default()
            };
            let n = serde_json::to_vec(&body)?.len() as u64;
            if options.dry_run {
                created = true;
                report.bytes += n;
                0
            } else {
                match retry(|| client.create(&body)) {
                    Ok(_) => {
                        created = true;
                        report.bytes += n;
                        0
                    }
                    // Created by an earlier, interrupted push: ask where it ends.
                    Err(Error::SessionExists(_)) => refresh(client, id, &meta, &records)?,
                    Err(e) => return Err(e),
                }
            }
        }
    };
    if created {
        report.created += 1;
    }
    if have == last {
        if !created {
            report.up_to_date += 1;
        }
        return Ok(have);
    }
    let mut start = have as usize;
    let mut conflicts = 0;
    while start < records.len() {
        // One batch: bounded by records and by bytes. The body is the
        // `AppendRequest` JSON, written from each record's own JSON.
        let mut end = start;
        let mut body = Vec::with_capacity(64 << 10);
        body.extend_from_slice(b"{\"records\":[");
        while end < records.len() && end - start < options.batch_records {
            let line = records[end].to_json_string()?;
            if end > start && body.len() + line.len() + 1 > options.batch_bytes {
                break;
            }
            if end > start {
                body.push(b',');
            }
            body.extend_from_slice(line.as_bytes());
            end += 1;
        }
        body.extend_from_slice(format!("],\"expected_seq\":{}}}", start + 1).as_bytes());
        let bytes = body;
        if options.dry_run {
            report.records += (end - start) as u64;
            report.bytes += bytes.len() as u64;
            report.requests += 1;
            start = end;
            continue;
        }
        match retry(|| client.append_raw(id, bytes.clone())) {
            Ok(a) => {
                report.records += (end - start) as u64;
                report.bytes += bytes.len() as u64;
                report.requests += 1;
                start = a.last_seq as usize;
            }
            Err(Error::Conflict { .. }) if conflicts < 3 => {
                // Someone (an earlier push that was killed, a second one
                // running now) wrote there: resume after the server's last.
                conflicts += 1;
                start = refresh(client, id, &meta, &records)? as usize;
            }
            Err(e) => return Err(e),
        }
    }
    if !created {
        report.grown += 1;
    }
    report.redacted += redactions;
    Ok(start as u64)
}

/// Ask the server where `id` ends and check it against the local records.
fn refresh(client: &Client, id: &str, meta: &SessionMeta, records: &[Record]) -> Result<u64> {
    let heads = retry(|| client.heads(&[id.to_string()]))?;
    match heads.into_iter().next() {
        Some(h) => check_head(id, meta, records, &h),
        None => Err(Error::Invalid(format!(
            "session {id} is no longer on the server (deleted there?)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ForkPoint;

    #[test]
    fn forks_come_after_their_parents_whatever_the_listing_order() {
        let mut metas = HashMap::new();
        for (id, parent) in [("c", Some("b")), ("b", Some("a")), ("a", None), ("x", None)] {
            let mut m = SessionMeta::new(id.to_string());
            m.parent = parent.map(|p| ForkPoint::new(p, 1, 1));
            metas.insert(id.to_string(), m);
        }
        let todo: Vec<(String, Option<u64>)> = ["c", "x", "b", "a"]
            .iter()
            .map(|s| (s.to_string(), Some(1)))
            .collect();
        let order: Vec<String> = parents_first(&todo, &metas)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let pos = |id: &str| order.iter().position(|s| s == id).unwrap();
        assert_eq!(order.len(), 4);
        assert!(pos("a") < pos("b") && pos("b") < pos("c"), "{order:?}");
    }

    #[test]
    fn record_digest_ignores_key_order_but_not_content() {
        let a = Record::from_object(
            serde_json::from_str(r#"{"record":"x-app","a":1,"b":{"c":2,"d":3}}"#).unwrap(),
        )
        .unwrap();
        let b = Record::from_object(
            serde_json::from_str(r#"{"b":{"d":3,"c":2},"record":"x-app","a":1}"#).unwrap(),
        )
        .unwrap();
        let c = Record::from_object(
            serde_json::from_str(r#"{"record":"x-app","a":1,"b":{"c":2,"d":4}}"#).unwrap(),
        )
        .unwrap();
        let d = |r: &Record| wire::record_digest(r).unwrap();
        assert_eq!(d(&a), d(&b));
        assert_ne!(d(&a), d(&c));
        assert_eq!(d(&a).len(), 32);
    }
}
