//! The index's schema and version stamp: two SQLite files, so that two
//! threads can write them at once (`super::engine`).
//!
//! `index.sqlite` ([`CREATE`]): `meta` (the stamp, the batch counter, the
//! catch-up checkpoint: `super::catchup`, and the first-fill mark:
//! `super::engine`), `sessions` (one row per indexed session, with its
//! listing fields, document and term counts, and
//! [`super::cursor::Cursor`]), `docs` (one row per indexed message:
//! session, `seq`, role, time, tools, content hash, and either where its
//! record lies in the session's log, `span_at`/`span_len`, or, when the
//! store keeps no spans or the message came from a `rewrite`, the text
//! itself; see `super::doc_text`), `calls` (tool call id → name, so a
//! result can be found by its tool), `vectors` (embeddings by model and
//! content hash).
//!
//! `terms.sqlite` ([`CREATE_TERMS`]): its own `meta` (the same stamp and
//! the batch counter), `terms` (a contentless FTS5 table whose `body` is
//! the tokenizer's terms, `rowid` = `docs.rowid`) and `terms_vocab` (its
//! document frequencies). The table's tokenizer (`super::fts5_tokenizer`)
//! only splits the body at its spaces, so the vocabulary is memoir's terms
//! exactly, in any script (`unicode61`, schema 4, split some at combining
//! marks, and frequencies are looked up by memoir's terms). Searches read both, the terms file attached as
//! `t` ([`TERMS_SCHEMA`]).
//!
//! Two FTS5 settings are stored with `terms` (in its config table): a 64 MiB
//! pending-terms buffer (`hashsize`; the default 1 MiB flushes a small
//! segment many times per committed batch) and `automerge` 8 (merge eight
//! segments of a level at a time instead of four). Together they index a
//! million messages about 1.18× as fast, with the same query latency
//! (docs/BENCHMARKS.md).
//!
//! The stamp is [`SCHEMA_VERSION`] plus [`TOKENIZER`], in both files, with
//! the generation id ([`GENERATION_KEY`], `super::generation`); any other
//! stamp (an older or newer memoir, a different tokenizer), another
//! generation's id, a file missing, or batch counters that differ mean the
//! index is replaced and rebuilt. Schema 6: the files live in a generation
//! directory named by the pointer `search/current`. Schema 7: code-aware
//! terms ([`TOKENIZER`] `memoir-code-stem-stop-v2`: an identifier gives
//! its parts, camelCase split too, then the whole identifier as one term).

/// Version of the index layout written by this build.
pub const SCHEMA_VERSION: &str = "7";

/// The schema name the terms file is attached under for searches.
pub const TERMS_SCHEMA: &str = "t";

/// `meta` key of the batch counter: both files carry the number of
/// batches committed; the terms file commits first, so a crash between
/// the two commits leaves it one ahead (the index is then rebuilt).
pub const BATCH_KEY: &str = "batch";

/// `meta` key of the generation id, in both files: it must be the id of
/// the generation directory they are in (`super::generation`), so a file
/// moved in from another index or generation is never trusted.
pub const GENERATION_KEY: &str = "generation";

/// Key of the catch-up checkpoint in the index file's `meta` table
/// (`super::catchup`).
pub const CHECKPOINT_KEY: &str = "catchup";

/// Name of the term pipeline the `terms` table was filled with.
pub const TOKENIZER: &str = "memoir-code-stem-stop-v2";

/// Statements that create an empty index file (`index.sqlite`).
pub const CREATE: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions(
    sid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    title TEXT,
    agent TEXT NOT NULL,
    project TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    last_hash BLOB NOT NULL,
    fp_len INTEGER,
    fp_mtime INTEGER,
    docs INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE docs(
    rowid INTEGER PRIMARY KEY,
    sid INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    tools TEXT NOT NULL,
    chash BLOB NOT NULL,
    text TEXT,
    span_at INTEGER,
    span_len INTEGER
);
CREATE INDEX docs_by_session ON docs(sid, chash);
CREATE TABLE calls(
    sid INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY(sid, call_id)
) WITHOUT ROWID;
CREATE TABLE vectors(
    model TEXT NOT NULL,
    chash BLOB NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY(model, chash)
) WITHOUT ROWID;
";

/// Statements that create an empty terms file (`terms.sqlite`): its own
/// `meta` (the same stamp, and the batch counter), the FTS5 table and its
/// vocabulary.
pub const CREATE_TERMS: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE VIRTUAL TABLE terms USING fts5(
    body, content='', contentless_delete=1, tokenize='memoir_terms'
);
INSERT INTO terms(terms, rank) VALUES('hashsize', 67108864);
INSERT INTO terms(terms, rank) VALUES('automerge', 8);
CREATE VIRTUAL TABLE terms_vocab USING fts5vocab(terms, 'row');
";

#[cfg(test)]
mod tests {
    #[test]
    fn the_terms_table_uses_memoirs_tokenizer() {
        let clause = format!("tokenize='{}'", super::super::fts5_tokenizer::NAME);
        assert!(super::CREATE_TERMS.contains(&clause));
    }
}
