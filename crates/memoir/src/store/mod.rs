//! The narrow storage interface transcripts are written through.
//!
//! A [`LogStore`] holds, per session id, an append-only sequence of framed
//! records (`seq` 0 is the header). It knows nothing of messages, taint or
//! rewrites: [`crate::transcript`] replays records into a conversation. The
//! embedded default is [`file::FileStore`] (one JSONL file per session); a
//! shared backend (PostgreSQL) implements the same trait.

pub mod fault;
pub mod file;
pub mod lease;
pub mod line;
pub mod lock;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod scan;
#[cfg(feature = "testing")]
pub mod testing;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::error::{Result, StoreError};
use crate::record::{Record, SessionMeta};
pub use lease::Lease;

/// How far an append goes before it is acknowledged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `fdatasync` after every append call: survives power loss (default).
    #[default]
    Fsync,
    /// Handed to the OS (one `write`), no sync: survives a process crash, not a power loss.
    Flush,
    /// Like `Flush`, and skips every other sync too (directory syncs on create,
    /// syncs of repair side files). For tests and throwaway sessions.
    None,
}

impl std::str::FromStr for Durability {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "flush" => Ok(Durability::Flush),
            "none" => Ok(Durability::None),
            other => Err(crate::Error::Config(format!(
                "unknown durability {other:?} (expected fsync, flush or none)"
            ))),
        }
    }
}

/// What an append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// `seq` of the first record written.
    pub first_seq: u64,
    /// `seq` of the last record written.
    pub last_seq: u64,
    /// A torn tail that had to be cut before this append, if any.
    pub repaired: Option<TornTail>,
}

/// A partial last line (left by a crash) cut off before appending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the partial line started.
    pub offset: u64,
    /// How many bytes were cut.
    pub bytes: u64,
    /// Where the cut bytes were saved.
    pub saved_to: PathBuf,
}

/// Where one record's line lies in its session's log file: what a derived
/// index keeps instead of a copy of the record ([`LogStore::read_span`]
/// reads it back, verified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// The line's length in bytes, without its newline.
    pub len: u64,
}

/// One verified record with its `seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqRecord {
    /// The record's sequence number.
    pub seq: u64,
    /// The record.
    pub record: Record,
}

/// Receives the records of a log in order as a reader verifies them
/// ([`LogStore::read_each`]), so that a caller folding them (a transcript
/// replay) never holds the whole record list.
pub trait RecordSink {
    /// The verified header (`seq` 0), given once, before the records after it.
    fn header(&mut self, meta: &SessionMeta);
    /// One applied record (the records of a batch only once its last record
    /// verified), in `seq` order.
    fn record(&mut self, record: SeqRecord);
    /// A hint: about `records` more records are coming (to reserve memory).
    fn expect(&mut self, records: usize) {
        let _ = records;
    }
}

/// Hand the header and records of a log already read to `sink`, as
/// [`LogStore::read_each`] would have; returns the log without its records.
pub fn hand_over(mut raw: RawLog, sink: &mut dyn RecordSink) -> RawLog {
    if let Some(meta) = &raw.header {
        sink.header(meta);
    }
    let records = std::mem::take(&mut raw.records);
    raw.spans.clear();
    sink.expect(records.len());
    for record in records {
        sink.record(record);
    }
    raw
}

/// Everything wrong with a stored log, found while reading it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Each problem, in file order.
    pub issues: Vec<Issue>,
    /// Payload references that did not resolve (missing or corrupt blobs);
    /// the chain itself is not affected by them.
    pub blobs: Vec<crate::blob::BlobIssue>,
}

impl LoadReport {
    /// True when the whole chain verified and every payload resolved.
    pub fn is_clean(&self) -> bool {
        self.issues.is_empty() && self.blobs.is_empty()
    }

    /// The lowest `seq` at which the chain stops verifying, when known.
    pub fn first_bad_seq(&self) -> Option<u64> {
        self.issues.iter().map(|i| i.seq).next()
    }
}

/// One problem in a stored log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// 1-based line number (files) or row ordinal (databases).
    pub line: u64,
    /// Byte offset of the line, for files.
    pub offset: u64,
    /// The `seq` at which the chain breaks: the line's own `seq` when it was
    /// readable, else the `seq` the next good record should have had.
    pub seq: u64,
    /// What is wrong.
    pub kind: IssueKind,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} (byte {}), seq {}: {}",
            self.line, self.offset, self.seq, self.kind
        )
    }
}

/// The kinds of problems a reader reports. Lines with a `Skipped*` kind were
/// not applied; the others were applied but break the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueKind {
    /// An empty or whitespace-only line (skipped).
    SkippedBlank,
    /// A line that failed verification (skipped); the reason.
    SkippedCorrupt(String),
    /// A verified line whose `seq` was already seen or is behind (skipped).
    SkippedOutOfOrder {
        /// The `seq` the reader expected next.
        expected: u64,
    },
    /// A partial last line with no newline (a crash mid-write; skipped).
    TornTail {
        /// Its length in bytes.
        bytes: u64,
    },
    /// Records are missing: the line has a later `seq` than expected (applied).
    Gap {
        /// The first missing `seq`.
        missing_from: u64,
    },
    /// The line's `prev` does not name the previous record (applied).
    ChainBreak,
    /// A header record after `seq` 0 (skipped).
    ExtraHeader,
    /// The first records of a multi-record batch whose last record is
    /// missing (a crash mid-append): none of the batch is applied.
    PartialBatch {
        /// The `seq` the batch's last record would have had.
        last_seq: u64,
        /// How many of its records were present (and skipped).
        held: u64,
    },
}

impl std::fmt::Display for IssueKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IssueKind::SkippedBlank => write!(f, "blank line skipped"),
            IssueKind::SkippedCorrupt(why) => write!(f, "skipped: {why}"),
            IssueKind::SkippedOutOfOrder { expected } => {
                write!(f, "skipped: out of order (expected seq {expected})")
            }
            IssueKind::TornTail { bytes } => write!(f, "torn tail of {bytes} bytes skipped"),
            IssueKind::Gap { missing_from } => {
                write!(f, "records missing from seq {missing_from}")
            }
            IssueKind::ChainBreak => write!(f, "prev hash does not match the previous record"),
            IssueKind::ExtraHeader => write!(f, "skipped: header record after seq 0"),
            IssueKind::PartialBatch { last_seq, held } => write!(
                f,
                "skipped: {held} record(s) of a batch ending at seq {last_seq} whose last record is missing"
            ),
        }
    }
}

/// A verified log: the records that passed, and what did not.
#[derive(Debug, Clone, Default)]
pub struct RawLog {
    /// The header, when `seq` 0 verified as a `meta` record.
    pub header: Option<SessionMeta>,
    /// Every applied record after the header, in order.
    pub records: Vec<SeqRecord>,
    /// Where each of `records` lies in the session's log file, in the same
    /// order, for a store that can read a record back by it
    /// ([`LogStore::read_span`]: the file store's [`LogStore::read`]);
    /// empty otherwise.
    pub spans: Vec<Span>,
    /// The problems found.
    pub report: LoadReport,
    /// The `seq` of the last applied record (0 for a header-only log).
    pub last_seq: u64,
}

/// One session's header as a listing sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The header.
    pub meta: SessionMeta,
    /// Where the session lives (a file path, or a backend-specific locator).
    pub location: PathBuf,
}

/// One session in a store's trash, as [`LogStore::list_deleted`] sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedListed {
    /// The header.
    pub meta: SessionMeta,
    /// Where the trashed session lives.
    pub location: PathBuf,
    /// When it was deleted, when the store knows.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The error a default trait body returns for an operation a store lacks.
pub fn unsupported(operation: &'static str) -> crate::Error {
    StoreError::Unsupported { operation }.into()
}

/// The listing order every [`LogStore::list`] returns: newest `created_at`
/// first, ties broken by id (descending), so backends list identically.
pub fn sort_newest_first(listed: &mut [Listed]) {
    listed.sort_by(|a, b| {
        b.meta
            .created_at
            .cmp(&a.meta.created_at)
            .then_with(|| b.meta.id.cmp(&a.meta.id))
    });
}

/// Storage for session logs. Implementations must make `append` atomic per
/// call (all records or none become visible), keep `seq` gap-free across
/// concurrent writers, and never return before the configured durability.
pub trait LogStore: Send + Sync + std::fmt::Debug {
    /// Create a session with `meta` as its header (`seq` 0).
    /// Fails with [`crate::Error::SessionExists`] when the id is taken.
    fn create(&self, meta: &SessionMeta) -> Result<Appended>;

    /// Append `records` after the current last record, in one atomic step.
    /// With `expected_next`, fail with [`crate::Error::Conflict`] unless the
    /// first record would get exactly that `seq`.
    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended>;

    /// Read and verify the whole log.
    fn read(&self, id: &str) -> Result<RawLog>;

    /// [`LogStore::read`], handing each applied record to `sink` as soon as
    /// it is final instead of collecting it: the log returned has no
    /// `records`, and the same header, report and `last_seq` as `read`'s.
    /// The default body reads the whole log, then hands its records over;
    /// stores that read incrementally (files) override it.
    fn read_each(&self, id: &str, sink: &mut dyn RecordSink) -> Result<RawLog> {
        Ok(hand_over(self.read(id)?, sink))
    }

    /// The record whose line lies at `span` of session `id`'s log, verified
    /// on its own (framing and hash), for spans taken from
    /// [`RawLog::spans`]. `Ok(None)` when no verified record is there (the
    /// log was rewritten, repaired or cut since the span was taken) and,
    /// by default, for stores that keep no spans. The caller checks the
    /// `seq` and content it expects.
    fn read_span(&self, id: &str, span: Span) -> Result<Option<SeqRecord>> {
        let _ = (id, span);
        Ok(None)
    }

    /// Read only the header (cheap; for listings).
    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>>;

    /// Every session's header, newest first, plus how many entries were
    /// unreadable. Costs O(number of sessions), never O(bytes).
    fn list(&self) -> Result<(Vec<Listed>, usize)>;

    /// Where the session with `id` lives (file path or locator).
    fn location(&self, id: &str) -> PathBuf;

    /// The durability this store acknowledges appends at.
    fn durability(&self) -> Durability;

    /// The blob store large payloads of this store's records go to, and the
    /// policy that picks them (see [`crate::transcript::blobs`]). `None` (the
    /// default): payloads stay inline.
    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        None
    }

    /// Delete session `id`, recoverably: afterwards it no longer reads, lists
    /// or appends ([`crate::Error::NotFound`]) until [`LogStore::restore`].
    /// Forks that reference it keep their own records. Stores that cannot
    /// delete refuse with [`StoreError::Unsupported`] (the default).
    /// A store that has a trash refuses with [`crate::Error::SessionExists`]
    /// when its trash already holds a different session with this id.
    fn delete(&self, id: &str) -> Result<()> {
        let _ = id;
        Err(unsupported("delete sessions"))
    }

    /// Bring back a session removed by [`LogStore::delete`], records intact.
    /// [`crate::Error::NotFound`] when there is no deleted session `id`;
    /// [`crate::Error::SessionExists`] when a live session took the id since.
    fn restore(&self, id: &str) -> Result<()> {
        let _ = id;
        Err(unsupported("restore sessions"))
    }

    // ---- capabilities with default bodies (a backend overrides what it does natively)

    /// Sessions whose header names `project` (the header field `project`,
    /// as `memoir serve` stamps it), newest first, plus how many entries
    /// were unreadable. The default filters [`LogStore::list`].
    fn list_project(&self, project: &str) -> Result<(Vec<Listed>, usize)> {
        let (mut listed, unreadable) = self.list()?;
        listed.retain(|l| header_project(&l.meta) == Some(project));
        Ok((listed, unreadable))
    }

    /// Every session in the trash (deleted, not purged), most recently
    /// deleted first. Stores without a trash: [`StoreError::Unsupported`].
    fn list_deleted(&self) -> Result<Vec<DeletedListed>> {
        Err(unsupported("list deleted sessions"))
    }

    /// Read and verify a session in the trash (so a fork of a deleted parent
    /// still stitches its prefix). [`crate::Error::NotFound`] when `id` is not
    /// in the trash.
    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        let _ = id;
        Err(unsupported("read deleted sessions"))
    }

    /// Erase a deleted session for good (what keeps it needed, such as
    /// surviving forks, is the caller's business: see
    /// [`crate::manager::trash`]). [`crate::Error::NotFound`] unless `id` is
    /// in the trash.
    fn purge(&self, id: &str) -> Result<()> {
        let _ = id;
        Err(unsupported("purge sessions"))
    }

    /// Take the per-session owner lease (one driving process or manager at a
    /// time). A live holder: [`crate::Error::Busy`] naming it; a holder that
    /// died: taken over and reported in [`Lease::recovered_from`].
    fn acquire_lease(&self, id: &str) -> Result<Lease> {
        let _ = id;
        Err(unsupported("lease sessions"))
    }

    /// Bump a session's last activity without writing a record (the file
    /// store sets the modification time). The default only checks that the
    /// session exists: the activity of such a store moves with its records.
    fn touch(&self, id: &str) -> Result<()> {
        self.read_header(id).map(|_| ())
    }

    /// When the session was last written or touched, if the store knows
    /// (listings fall back to the creation time).
    fn last_activity(&self, id: &str) -> Result<Option<DateTime<Utc>>> {
        let _ = id;
        Ok(None)
    }

    /// The whole store this one is a view of, when it shows only part of
    /// a store whose blobs are shared (`memoir serve`'s per-project view):
    /// blob collection after a purge must count the references of every
    /// session of the whole store. `None` (the default): this store is whole.
    fn blob_scope(&self) -> Option<std::sync::Arc<dyn LogStore>> {
        None
    }

    /// The directory of a self-healing listing cache
    /// ([`crate::manager::index`]), for stores whose listing would otherwise
    /// read every transcript. `None` (the default): listings are computed
    /// from the store itself.
    fn index_dir(&self) -> Option<&Path> {
        None
    }

    /// The PostgreSQL store this is, for features that keep their own tables
    /// next to its sessions (the cross-session search index,
    /// `memoir::search`). `None` (the default) for every other store.
    #[cfg(feature = "postgres")]
    fn postgres(&self) -> Option<&postgres::PgStore> {
        None
    }
}

/// The `project` header field (the tenant `memoir serve` stamps), if any.
pub fn header_project(meta: &SessionMeta) -> Option<&str> {
    meta.extra.get(PROJECT_KEY).and_then(|v| v.as_str())
}

/// Header field naming the project (tenant) a session belongs to on a shared store.
pub const PROJECT_KEY: &str = "project";
