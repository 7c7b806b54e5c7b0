//! Which payload blobs a writer may reference and read: the rule every
//! front applies to the records a client writes (`memoir serve`'s appends,
//! `memoir mcp`'s notes, the Python bindings' appends).
//!
//! Blobs are content-addressed and may be shared by every project of a
//! store, so knowing a hash must never be enough to read the bytes. A
//! principal (a project, a bearer token's tenant) may reference, and read,
//! a blob when
//!
//! - it uploaded the bytes itself ([`BlobGrants::grant`], e.g. `PUT
//!   /v1/blobs/{hash}`), or
//! - a session of its own scope (live or trashed) already references it
//!   (a fork or a rewrite carrying a payload the project holds).
//!
//! A record naming any other blob (as a reference object or as a legacy
//! `memoir-blob:blake3:<hash>` string, in a message or a rewrite) is refused
//! with [`Error::UnownedBlob`] before anything is written, with the same
//! message whether or not the blob exists. Payloads a front moves to the
//! blob store itself ([`super::blobs::externalize_records`]) are the
//! writer's own bytes: check the records it received, before that step.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::record::Record;
use crate::store::LogStore;

use super::blobs::{raw_refs, records_refs};

/// The blobs each principal uploaded or was found to reference, remembered
/// for the life of a front (a server process).
#[derive(Debug, Default)]
pub struct BlobGrants {
    by_principal: Mutex<HashMap<String, HashSet<String>>>,
}

impl BlobGrants {
    /// No grants yet.
    pub fn new() -> BlobGrants {
        BlobGrants::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, HashSet<String>>> {
        // Only sets of hashes are guarded: a panic cannot leave one half updated.
        self.by_principal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record that `principal` holds `hashes` (it uploaded their bytes).
    pub fn grant(&self, principal: &str, hashes: impl IntoIterator<Item = String>) {
        self.lock()
            .entry(principal.to_string())
            .or_default()
            .extend(hashes);
    }

    /// Whether `principal` was granted `hash` (without looking at sessions).
    pub fn granted(&self, principal: &str, hash: &str) -> bool {
        self.lock().get(principal).is_some_and(|s| s.contains(hash))
    }

    /// The hashes of `wanted` not granted to `principal` after a scan of
    /// `scope`'s sessions (done only when some are missing; what it finds
    /// is remembered).
    fn missing(
        &self,
        principal: &str,
        scope: &dyn LogStore,
        wanted: HashSet<String>,
    ) -> Result<Vec<String>> {
        let pending: Vec<String> = wanted
            .into_iter()
            .filter(|h| !self.granted(principal, h))
            .collect();
        if pending.is_empty() {
            return Ok(pending);
        }
        let found = scope_refs(scope)?;
        let missing = pending.into_iter().filter(|h| !found.contains(h)).collect();
        self.grant(principal, found);
        Ok(missing)
    }

    /// Whether `principal`, whose sessions are `scope`, may read blob
    /// `hash`: it uploaded it, or one of its sessions references it.
    pub fn may_read(&self, principal: &str, scope: &dyn LogStore, hash: &str) -> Result<bool> {
        let wanted = HashSet::from([hash.to_string()]);
        Ok(self.missing(principal, scope, wanted)?.is_empty())
    }

    /// Refuse `records` ([`Error::UnownedBlob`]) when one references a blob
    /// `principal` may not read (see the module docs); call it on the
    /// records a client sent, before the append.
    pub fn check_written(
        &self,
        principal: &str,
        scope: &dyn LogStore,
        records: &[Record],
    ) -> Result<()> {
        let mut wanted = HashSet::new();
        records_refs(records, &mut wanted);
        if wanted.is_empty() {
            return Ok(());
        }
        let mut missing = self.missing(principal, scope, wanted)?;
        missing.sort();
        match missing.into_iter().next() {
            Some(hash) => Err(Error::UnownedBlob { hash }),
            None => Ok(()),
        }
    }
}

/// [`BlobGrants::check_written`] for a front that takes no blob uploads
/// (`memoir mcp`, the Python bindings): every blob `records` reference must
/// already be referenced by a session of `scope`.
pub fn check_written(scope: &dyn LogStore, records: &[Record]) -> Result<()> {
    BlobGrants::new().check_written("", scope, records)
}

/// Every blob a session of `scope` references, live or trashed. A session
/// that cannot be read is skipped: a partial view can only refuse more.
fn scope_refs(scope: &dyn LogStore) -> Result<HashSet<String>> {
    let mut out = HashSet::new();
    let (listed, _) = scope.list()?;
    for l in listed {
        if let Ok(raw) = scope.read(&l.meta.id) {
            raw_refs(&raw, &mut out);
        }
    }
    match scope.list_deleted() {
        Ok(deleted) => {
            for d in deleted {
                if let Ok(raw) = scope.read_deleted(&d.meta.id) {
                    raw_refs(&raw, &mut out);
                }
            }
        }
        Err(e) if e.kind() == crate::error::ErrorKind::Unsupported => {}
        Err(e) => return Err(e),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::blob::{blob_ref, BlobRef};
    use crate::message::{Block, Message};
    use crate::record::SessionMeta;
    use crate::store::memory::MemStore;

    /// One record per place a reference can hide: a reference object in
    /// each payload field, a legacy reference string in each payload block,
    /// in a message and in a rewrite.
    fn referencing(hash: &str) -> Vec<Record> {
        let obj = BlobRef::new(hash.to_string(), "x", "text/plain").to_value();
        let unknown = |v: serde_json::Value| {
            Message::new(crate::message::Role::User, vec![Block::Unknown(v)])
        };
        let legacy = blob_ref(hash);
        let messages = vec![
            unknown(serde_json::json!({"type": "text", "text": obj})),
            unknown(serde_json::json!({"type": "thinking", "text": obj})),
            unknown(serde_json::json!({"type": "tool_result", "tool_use_id": "c", "content": obj})),
            unknown(serde_json::json!({"type": "image", "media_type": "image/png", "data": obj})),
            unknown(serde_json::json!({"type": "document", "source": {"data": obj}})),
            Message::user(legacy.as_str()),
            Message::tool_result("c", legacy.as_str(), false),
            Message::new(
                crate::message::Role::User,
                vec![Block::Image {
                    media_type: "image/png".into(),
                    data: legacy.clone(),
                }],
            ),
        ];
        let mut out: Vec<Record> = messages.iter().cloned().map(Record::Message).collect();
        for m in messages {
            out.push(Record::Rewrite { messages: vec![m] });
        }
        out
    }

    #[test]
    fn a_reference_must_be_uploaded_or_already_held() {
        let store = Arc::new(MemStore::new());
        store.create(&SessionMeta::new("s")).unwrap();
        let hash = crate::blob::hash_bytes(b"someone else's payload");
        let grants = BlobGrants::new();
        for r in referencing(&hash) {
            let err = grants
                .check_written("p", store.as_ref(), std::slice::from_ref(&r))
                .expect_err(&format!("{r:?} must be refused"));
            assert!(matches!(err, Error::UnownedBlob { .. }), "{err}");
            assert!(!grants.may_read("p", store.as_ref(), &hash).unwrap());
        }
        // Uploaded by this principal: accepted, and readable by it only.
        grants.grant("p", [hash.clone()]);
        grants
            .check_written("p", store.as_ref(), &referencing(&hash))
            .unwrap();
        assert!(grants.may_read("p", store.as_ref(), &hash).unwrap());
        assert!(grants
            .check_written("q", store.as_ref(), &referencing(&hash))
            .is_err());
        // Held by a session of the scope: another front may copy it.
        store.append("s", &referencing(&hash)[..1], None).unwrap();
        check_written(store.as_ref(), &referencing(&hash)).unwrap();
        assert!(BlobGrants::new()
            .may_read("q", store.as_ref(), &hash)
            .unwrap());
    }
}
