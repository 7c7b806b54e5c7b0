//! Writing sessions that come from elsewhere (importers): a header chosen by
//! the caller (id, `created_at`, `source`, fork point), then records appended
//! as they are, without the interactive manager's batching or title
//! inference. Built only on the manager's public surface (its store and the
//! fork planner), so it works on whatever store the manager writes to.

use super::{fork, Result, SessionManager};
use crate::record::{ForkPoint, Record, SessionMeta};
use crate::store::Appended;
use crate::transcript::{read_in, Session, Transcript};

impl SessionManager {
    /// Create a session with exactly `meta` as its header (its id, creation
    /// time, `source` and `parent` fork point are kept as given). Fails with
    /// [`crate::Error::SessionExists`] when the id is taken.
    pub fn create_with_header(&self, meta: SessionMeta) -> Result<()> {
        crate::id::validate(&meta.id)?;
        let session = Session::create_in(self.store(), meta)?;
        // Its listing entry is written now and kept current by each append
        // (below), so the first listing after an import reads entries
        // instead of re-reading every transcript. A fork's entry counts the
        // messages it inherits, so it is computed from the stitched
        // transcript.
        match (&self.index, session.meta.parent.is_some()) {
            (Some(index), true) => {
                let _ = index.rebuild(self.reader.as_ref(), &session.meta.id);
            }
            _ => {
                self.new_entry(&session);
            }
        }
        Ok(())
    }

    /// Append `records` to session `id` as one atomic batch (nothing else is
    /// added: no title is derived). A no-op for an empty batch.
    pub fn append_records_to(&self, id: &str, records: &[Record]) -> Result<Option<Appended>> {
        self.append_records_expecting(id, records, None)
    }

    /// Like [`SessionManager::append_records_to`], with optimistic
    /// concurrency: given `expected_next`, the batch is written only if its
    /// first record gets exactly that seq, else [`crate::Error::Conflict`]
    /// (another writer won; re-read and retry). Records of kinds this build
    /// does not know ([`Record::Unknown`], e.g. an adapter's own kinds) are
    /// stored verbatim and come back from [`SessionManager::read_raw`].
    /// Every record is first checked with the reader's own rules: a batch
    /// holding one the reader would refuse (a content block that is not a
    /// JSON object, say) is refused whole with [`crate::Error::Invalid`],
    /// before anything is written.
    pub fn append_records_expecting(
        &self,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
    ) -> Result<Option<Appended>> {
        crate::id::validate(id)?;
        if records.is_empty() {
            return Ok(None);
        }
        for (i, record) in records.iter().enumerate() {
            crate::store::line::check_readable(record).map_err(|why| {
                crate::Error::Invalid(format!(
                    "record {} of the batch for {id} would not read back: {why}",
                    i + 1
                ))
            })?;
        }
        let session = Session::open_in(self.store(), id)?;
        // The entry as it stood before the append, when it matched the
        // transcript; folded forward below (one small read and write).
        let before = self.index.as_ref().and_then(|i| i.load_fresh(id));
        let appended = match expected_next {
            Some(next) => session.append_expecting(records, next)?,
            None => session.append_records(records)?,
        };
        self.note_appended(id, records, &appended);
        // Index failures never fail the append: an entry that cannot be
        // folded (another writer came in between, a rewrite) or written is
        // left for the next listing to rebuild from the transcript.
        if let (Some(index), Some(mut entry)) = (&self.index, before) {
            if entry.apply(records, &appended) {
                let _ = index.commit(entry);
            }
        }
        Ok(Some(appended))
    }

    /// Read session `id` (forks stitched) from the manager's store.
    pub fn read_stored(&self, id: &str) -> Result<Transcript> {
        crate::id::validate(id)?;
        Ok(read_in(self.store().as_ref(), id)?)
    }

    /// The reference a fork of `id` keeping its first `messages` messages
    /// (inherited ones included) would carry, or `None` when the cut cannot
    /// be a pure reference (it is 0, past the end, or the source rewrote its
    /// history before the cut).
    pub fn fork_reference(&self, id: &str, messages: usize) -> Result<Option<ForkPoint>> {
        let t = self.read_stored(id)?;
        if messages == 0 || messages > t.messages.len() {
            return Ok(None);
        }
        let plan = fork::fork_point(self.store().as_ref(), id, &t, messages)?;
        Ok(plan.rewrite.is_none().then_some(plan.point))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Map};

    use super::*;
    use crate::manager::ManagerOptions;
    use crate::store::memory::MemStore;

    #[test]
    fn records_the_reader_would_refuse_are_never_appended() {
        let m = SessionManager::with_store(Arc::new(MemStore::new()), ManagerOptions::default());
        m.create_with_header(SessionMeta::new("s")).unwrap();
        let good = Record::Message(crate::Message::user("kept"));
        for item in [json!(null), json!(1), json!("x"), json!([{"type": "text"}])] {
            let bad = Record::Message(crate::Message::new(
                crate::message::Role::User,
                vec![crate::message::Block::Unknown(item.clone())],
            ));
            let refused = m.append_records_to("s", &[good.clone(), bad]);
            assert!(
                matches!(
                    refused,
                    Err(crate::manager::ManagerError::Store(crate::Error::Invalid(
                        _
                    )))
                ),
                "{item}: {refused:?}"
            );
        }
        assert!(m.read_raw("s").unwrap().records.is_empty());
    }

    #[test]
    fn expecting_appends_refuse_a_lost_race_and_keep_application_kinds() {
        let m = SessionManager::with_store(Arc::new(MemStore::new()), ManagerOptions::default());
        m.create_with_header(SessionMeta::new("s")).unwrap();
        let mut raw = Map::new();
        raw.insert("entry".into(), json!({"seq": 9, "uuid": "u1"}));
        let rec = Record::Unknown {
            kind: "sdk_entry".into(),
            raw,
        };
        let a = m
            .append_records_expecting("s", std::slice::from_ref(&rec), Some(1))
            .unwrap()
            .unwrap();
        assert_eq!((a.first_seq, a.last_seq), (1, 1));
        let lost = m.append_records_expecting("s", std::slice::from_ref(&rec), Some(1));
        assert!(
            matches!(
                lost,
                Err(crate::manager::ManagerError::Store(
                    crate::Error::Conflict { .. }
                ))
            ),
            "{lost:?}"
        );
        assert!(m
            .append_records_expecting("s", &[], Some(7))
            .unwrap()
            .is_none());
        let log = m.read_raw("s").unwrap();
        assert_eq!(log.records.len(), 1);
        assert_eq!(log.records[0].record, rec);
    }
}
