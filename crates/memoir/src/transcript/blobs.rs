//! Large payloads in the blob store, on the transcript's write and read
//! paths, and the collection of blobs no session references any more.
//!
//! - Write ([`externalize_records`], called by [`super::Session`]'s appends):
//!   every payload string of a `message` or `rewrite` record above the
//!   store's threshold ([`crate::blob::ExternalizePolicy::TRANSCRIPT`]:
//!   64 KiB) is stored once in the store's [`crate::blob::PayloadStore`] and
//!   the record holds a [`BlobRef`] object in its place (`docs/FORMAT.md`,
//!   "Large payloads"). Content addressing makes a rewrite, a fork or a
//!   second session carrying the same payload reference the same blob.
//! - Read ([`Resolver`], called by the readers): each reference is loaded
//!   and verified, at most once per read; a missing, corrupt or unreadable
//!   blob leaves the legacy reference string `memoir-blob:blake3:<hash>` in
//!   the block (so the message keeps its shape and a rewrite keeps the
//!   reference) and is reported in [`LoadReport::blobs`], never an error.
//! - Collection ([`collect_garbage`]): a blob is kept while any session of
//!   the given stores (live ones and the trash) references it, or while it
//!   is younger than a grace period; transcripts hold no reference counts.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use crate::blob::{
    blob_ref, parse_blob_ref, ArtifactStore, BlobError, BlobIssue, BlobProblem, BlobRef,
    ExternalizePolicy, GcReport, PayloadStore,
};
use crate::error::{Error, Result};
use crate::message::{Block, Message};
use crate::record::Record;
use crate::store::{LoadReport, LogStore, RawLog, SeqRecord};

/// The block types whose payload string can be a reference, and its field.
const PAYLOAD_FIELDS: [(&str, &str); 4] = [
    ("tool_result", "content"),
    ("text", "text"),
    ("thinking", "text"),
    ("image", "data"),
];

fn payload_field(block_type: &str) -> Option<&'static str> {
    PAYLOAD_FIELDS
        .iter()
        .find(|(t, _)| *t == block_type)
        .map(|(_, f)| *f)
}

/// Where a block kept verbatim ([`Block::Unknown`]) holds a payload that
/// can be a reference: the field of a payload block type, or `source.data`
/// of a `document` block (a PDF or text document, stored as a blob by the
/// importers).
pub(crate) fn unknown_payload_path(v: &Value) -> Option<&'static [&'static str]> {
    const DOCUMENT: &[&str] = &["source", "data"];
    match v.get("type").and_then(Value::as_str)? {
        "document" => Some(DOCUMENT),
        t => PAYLOAD_FIELDS
            .iter()
            .find(|(k, _)| *k == t)
            .map(|(_, f)| std::slice::from_ref(f)),
    }
}

/// The value at `path` inside `v`.
pub(crate) fn value_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// The value at `path` inside `v`, mutably.
pub(crate) fn value_at_mut<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, k| v.get_mut(k))
}

pub(crate) fn blob_error(e: BlobError) -> Error {
    match e {
        BlobError::Storage(e) => e,
        other => Error::Invalid(format!("blob store: {other}")),
    }
}

/// Externalize the large payloads of one message into `blobs`, in place.
/// Returns how many were moved.
pub fn externalize_message(m: &mut Message, blobs: &PayloadStore) -> Result<usize> {
    let mut moved = 0;
    for block in &mut m.content {
        let Some((payload, media_type)) = blobs.policy.payload_mut(block) else {
            continue;
        };
        if payload.len() <= blobs.policy.min_bytes || parse_blob_ref(payload).is_some() {
            continue;
        }
        let media_type = media_type.to_string();
        let hash = blobs
            .store
            .put_payload(payload.as_bytes(), &media_type)
            .map_err(blob_error)?;
        let reference = BlobRef::new(hash, payload, &media_type);
        // The block as it would serialise, with the payload replaced by the
        // reference object: kept verbatim by `Block::Unknown`.
        let mut v = serde_json::to_value(&*block)
            .map_err(|e| Error::Invalid(format!("serialising a block: {e}")))?;
        let field = v
            .get("type")
            .and_then(Value::as_str)
            .and_then(payload_field)
            .ok_or_else(|| Error::Invalid("a payload block without a known type".into()))?;
        v[field] = reference.to_value();
        *block = Block::Unknown(v);
        moved += 1;
    }
    Ok(moved)
}

/// The records to write for `records`: the same, with every payload above
/// the threshold of `store`'s blob store moved there. Borrowed (no copy)
/// when there is nothing to move or the store has no blob store.
pub fn externalize_records<'a>(
    store: &dyn LogStore,
    records: &'a [Record],
) -> Result<Cow<'a, [Record]>> {
    let Some(blobs) = store.blobs() else {
        return Ok(Cow::Borrowed(records));
    };
    let large = |m: &Message| {
        m.content.iter().any(|b| match b {
            Block::ToolResult { content: p, .. } if blobs.policy.tool_results => {
                p.len() > blobs.policy.min_bytes
            }
            Block::Image { data: p, .. } if blobs.policy.images => p.len() > blobs.policy.min_bytes,
            Block::Text { text: p } | Block::Thinking { text: p, .. } if blobs.policy.text => {
                p.len() > blobs.policy.min_bytes
            }
            _ => false,
        })
    };
    let any = records.iter().any(|r| match r {
        Record::Message(m) => large(m),
        Record::Rewrite { messages } => messages.iter().any(large),
        _ => false,
    });
    if !any {
        return Ok(Cow::Borrowed(records));
    }
    let mut out = records.to_vec();
    for r in &mut out {
        match r {
            Record::Message(m) => {
                externalize_message(m, &blobs)?;
            }
            Record::Rewrite { messages } => {
                for m in messages {
                    externalize_message(m, &blobs)?;
                }
            }
            _ => {}
        }
    }
    Ok(Cow::Owned(out))
}

/// Resolves the payload references of the records of one read, loading
/// (and verifying) each blob at most once.
#[derive(Debug)]
pub struct Resolver {
    blobs: Option<std::sync::Arc<ArtifactStore>>,
    loaded: HashMap<String, std::result::Result<String, BlobProblem>>,
}

impl Resolver {
    /// A resolver over `store`'s blob store (none: every reference is
    /// reported as [`BlobProblem::NoBlobStore`]).
    pub fn new(store: &dyn LogStore) -> Resolver {
        Resolver {
            blobs: store.blobs().map(|b| b.store),
            loaded: HashMap::new(),
        }
    }

    fn load(&mut self, hash: &str) -> std::result::Result<String, BlobProblem> {
        if let Some(r) = self.loaded.get(hash) {
            return r.clone();
        }
        let r = match &self.blobs {
            None => Err(BlobProblem::NoBlobStore),
            Some(s) => s.load_string(hash).map_err(|e| match e {
                BlobError::NotFound(_) => BlobProblem::Missing,
                BlobError::Corrupt { .. } => BlobProblem::Corrupt,
                BlobError::NotText(_) => BlobProblem::NotText,
                other => BlobProblem::Unreadable(other.to_string()),
            }),
        };
        self.loaded.insert(hash.to_string(), r.clone());
        r
    }

    /// Resolve every reference in `m` (record `seq`), reporting the ones that
    /// do not resolve in `report`.
    pub fn resolve_message(&mut self, m: &mut Message, seq: u64, report: &mut LoadReport) {
        for block in &mut m.content {
            let (hash, value) = match block {
                Block::Unknown(v) => {
                    let Some(path) = unknown_payload_path(v) else {
                        continue;
                    };
                    let Some(r) = value_at(v, path).and_then(BlobRef::from_value) else {
                        continue;
                    };
                    let mut v = v.clone();
                    let hash = r.blob;
                    let resolved = match self.load(&hash) {
                        Ok(text) => Value::String(text),
                        Err(problem) => {
                            report.blobs.push(BlobIssue {
                                seq,
                                hash: hash.clone(),
                                problem,
                            });
                            Value::String(blob_ref(&hash))
                        }
                    };
                    if let Some(slot) = value_at_mut(&mut v, path) {
                        *slot = resolved;
                    }
                    (hash, v)
                }
                other => {
                    let all = ExternalizePolicy::TRANSCRIPT.min_bytes(0);
                    let Some((payload, _)) = all.payload_mut(other) else {
                        continue;
                    };
                    let Some(hash) = parse_blob_ref(payload).map(str::to_string) else {
                        continue;
                    };
                    match self.load(&hash) {
                        Ok(text) => *payload = text,
                        Err(problem) => report.blobs.push(BlobIssue { seq, hash, problem }),
                    }
                    continue;
                }
            };
            match serde_json::from_value::<Block>(value) {
                Ok(b) => *block = b,
                Err(e) => report.blobs.push(BlobIssue {
                    seq,
                    hash,
                    problem: BlobProblem::Unreadable(format!("block does not parse: {e}")),
                }),
            }
        }
    }

    /// [`Resolver::resolve_message`] over the messages of one record.
    pub fn resolve_record(&mut self, mut rec: SeqRecord, report: &mut LoadReport) -> SeqRecord {
        let seq = rec.seq;
        match &mut rec.record {
            Record::Message(m) => self.resolve_message(m, seq, report),
            Record::Rewrite { messages } => {
                for m in messages {
                    self.resolve_message(m, seq, report);
                }
            }
            _ => {}
        }
        rec
    }
}

/// A raw log with every payload reference resolved (for fronts that hand
/// records to a client without a blob store, e.g. `memoir serve`); the
/// references that do not resolve are added to `raw.report.blobs`.
pub fn resolve_raw(store: &dyn LogStore, mut raw: RawLog) -> RawLog {
    let mut resolver = Resolver::new(store);
    let records = std::mem::take(&mut raw.records);
    raw.records = records
        .into_iter()
        .map(|r| resolver.resolve_record(r, &mut raw.report))
        .collect();
    raw
}

/// The blob hashes a message references (on-disk objects and legacy
/// reference strings alike), without loading anything.
fn message_refs(m: &Message, out: &mut HashSet<String>) {
    for block in &m.content {
        match block {
            Block::Unknown(v) => {
                if let Some(r) = unknown_payload_path(v)
                    .and_then(|path| value_at(v, path))
                    .and_then(BlobRef::from_value)
                {
                    out.insert(r.blob);
                }
            }
            Block::ToolResult { content: p, .. }
            | Block::Image { data: p, .. }
            | Block::Text { text: p }
            | Block::Thinking { text: p, .. } => {
                if let Some(h) = parse_blob_ref(p) {
                    out.insert(h.to_string());
                }
            }
            Block::ToolUse { .. } => {}
        }
    }
}

/// The blob hashes the records of one raw log reference (loads no blob).
pub fn raw_refs(raw: &RawLog, out: &mut HashSet<String>) {
    for rec in &raw.records {
        record_refs(&rec.record, out);
    }
}

/// The blob hashes `records` reference (loads no blob).
pub fn records_refs(records: &[Record], out: &mut HashSet<String>) {
    for r in records {
        record_refs(r, out);
    }
}

fn record_refs(record: &Record, out: &mut HashSet<String>) {
    match record {
        Record::Message(m) => message_refs(m, out),
        Record::Rewrite { messages } => messages.iter().for_each(|m| message_refs(m, out)),
        _ => {}
    }
}

/// After a purge: delete the blobs of `candidates` (the payloads of the
/// purged sessions) that no session of `stores` references any more, live
/// or trashed, and that hold no reference count. Unlike
/// [`collect_garbage`], a blob of a purged session goes at once, whatever
/// its age; blobs that are not candidates are not touched.
pub fn drop_unreferenced(
    stores: &[&dyn LogStore],
    blobs: &ArtifactStore,
    candidates: &HashSet<String>,
) -> Result<GcReport> {
    let mut report = GcReport::default();
    if candidates.is_empty() {
        return Ok(report);
    }
    let keep = referenced_blobs(stores)?;
    for hash in candidates {
        let counted = match blobs.ref_count(hash) {
            Ok(n) => n > 0,
            Err(BlobError::NotFound(_)) => continue,
            Err(e) => return Err(blob_error(e)),
        };
        if keep.contains(hash) || counted {
            report.kept_blobs += 1;
            continue;
        }
        let size = blobs.load(hash).map_or(0, |b| b.len() as u64);
        if blobs.remove(hash).map_err(blob_error)? {
            report.removed_blobs += 1;
            report.removed_bytes += size;
        }
    }
    Ok(report)
}

/// Every blob hash referenced by any session of `stores`, live or in their
/// trash ([`LogStore::list_deleted`], where a store has one: a trashed
/// session can still be restored). Reads each log once; loads no blob. A
/// session that cannot be read fails the whole computation (collecting on a
/// partial view could delete a blob it still needs).
pub fn referenced_blobs(stores: &[&dyn LogStore]) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    let mut scan = |raw: RawLog| raw_refs(&raw, &mut out);
    for store in stores {
        let (listed, unreadable) = store.list()?;
        if unreadable > 0 {
            return Err(Error::Invalid(format!(
                "{unreadable} session(s) of {} are unreadable: not collecting blobs they may reference",
                store.location("").display()
            )));
        }
        for l in listed {
            scan(store.read(&l.meta.id)?);
        }
        match store.list_deleted() {
            Ok(deleted) => {
                for d in deleted {
                    scan(store.read_deleted(&d.meta.id)?);
                }
            }
            Err(e) if e.kind() == crate::error::ErrorKind::Unsupported => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Delete the blobs of `blobs` that no session of `stores` (live or
/// trashed) references (see [`referenced_blobs`]), that hold no reference
/// count (the view's chunk texts) and that were stored more than `grace` ago
/// (a writer between storing a payload and appending its record keeps it).
/// Call it after a purge.
pub fn collect_garbage(
    stores: &[&dyn LogStore],
    blobs: &ArtifactStore,
    grace: Duration,
) -> Result<GcReport> {
    let keep = referenced_blobs(stores)?;
    blobs.gc_keeping(&keep, grace).map_err(blob_error)
}
