//! The `promotion` record: the lineage of a durable fact promoted from a
//! session (see [`crate::promote`]). It is written to the session the fact
//! came from and names every source record (`(session, seq)` and the
//! content hashes of the chunks that were nominated, with the reasons) and
//! the note that now holds the fact, so a later session that recalls the
//! note can open where it came from, and the session can list what it
//! promoted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Version of the `promotion` payload written by this build.
pub const PROMOTION_FORMAT: u32 = 1;

fn promotion_format() -> u32 {
    PROMOTION_FORMAT
}

/// One record a fact was promoted from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotionSource {
    /// The session whose log holds the record (a fork's inherited turns name
    /// the ancestor).
    pub session: String,
    /// The record's `seq` in that log.
    pub seq: u64,
    /// BLAKE3 of the text of each of the record's chunks, by part.
    #[serde(default)]
    pub content_hashes: Vec<String>,
    /// Why it was nominated: `important`, `references:<n>`, `task_score:<s>`.
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// Where the promoted fact now lives: a note of the project's notes session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotedNote {
    /// The notes session.
    pub session: String,
    /// The note's id.
    pub id: String,
    /// The `seq` of the note's record in the notes session.
    pub seq: u64,
}

/// The payload of a `promotion` record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Promotion {
    /// Version of this payload ([`PROMOTION_FORMAT`]).
    #[serde(default = "promotion_format")]
    pub v: u32,
    /// The durable fact, as written to the note.
    pub fact: String,
    /// The records it was promoted from, in chain order.
    pub sources: Vec<PromotionSource>,
    /// The note holding it.
    pub note: PromotedNote,
    /// Fields this build does not know, kept verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
