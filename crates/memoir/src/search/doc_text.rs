//! Where a document's text comes from. The index (since schema 4) keeps, for a
//! message that one `message` record of a file store's log holds, only
//! where that record lies ([`Span`]); the text, three quarters of what an
//! index used to hold, stays in the transcript it came from. Snippets, the
//! hybrid side's BM25 re-scoring and embeddings read it back
//! ([`resolve`]): the record at the span is verified on its own (framing
//! and hash, [`LogStore::read_span`]), its `seq` must be the document's,
//! and the text made from it must hash to the `chash` indexed with it. A
//! document that fails any of these (its log was rewritten, repaired or
//! cut since the last update) is left out of the results until the next
//! update re-indexes its session; nothing stale is ever shown.
//!
//! The other documents keep their text inline: a `rewrite`'s messages (one
//! record holds many, and can be large) and every document of a store that
//! keeps no spans (memory, remote).

use super::query::Candidate;
use super::text;
use crate::record::Record;
use crate::store::{LogStore, Span};

/// The span of a document kept by location, from its `span_at` and
/// `span_len` columns (`None` when either is missing or negative: the text
/// is inline).
pub(super) fn span_of(at: Option<i64>, len: Option<i64>) -> Option<Span> {
    Some(Span {
        offset: u64::try_from(at?).ok()?,
        len: u64::try_from(len?).ok()?,
    })
}

/// The text of the message whose record lies at `span` of `session`'s log,
/// when that record is still message `seq` and its text still hashes to
/// `chash`.
pub(super) fn read_back(
    store: &dyn LogStore,
    session: &str,
    seq: u64,
    span: Span,
    chash: &[u8],
) -> Option<String> {
    let found = store.read_span(session, span).ok()??;
    let Record::Message(m) = &found.record else {
        return None;
    };
    if found.seq != seq {
        return None;
    }
    let text = text::of_message(m).text;
    (text::content_hash(&text)[..] == *chash).then_some(text)
}

/// Fill in `c.text` when it lives in the log; false when it cannot be read
/// back as it was indexed (the candidate must then be left out).
pub(super) fn load(store: &dyn LogStore, c: &mut Candidate) -> bool {
    let Some(span) = c.span else {
        return true;
    };
    match read_back(store, &c.session, c.seq, span, &c.chash) {
        Some(text) => {
            c.text = text;
            c.span = None;
            true
        }
        None => false,
    }
}

/// Fill in the texts of `cands` that live in their logs, leaving out the
/// candidates whose text cannot be read back as it was indexed.
pub(super) fn resolve(store: &dyn LogStore, cands: &mut Vec<Candidate>) {
    cands.retain_mut(|c| load(store, c));
}
