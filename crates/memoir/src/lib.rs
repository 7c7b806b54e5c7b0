//! memoir: durable, forkable, searchable session memory for LLM agents.
//!
//! memoir **is** an append-only, checksummed JSONL log per agent session
//! (with forks by reference), a session manager over it, and an optional
//! semantic view for recall. It **is not** an agent, a model client or a
//! vector database: it stores and finds what an agent said and did.
//!
//! Modules, always built:
//! - [`message`] and [`record`]: what the log holds (provider-neutral
//!   messages, OpenAI/Anthropic conversion, session headers, run configs);
//! - [`transcript`]: the append-only, checksummed log of one session;
//! - [`store`]: the narrow storage interface the log is written through
//!   (the file store; `store::postgres` with the `postgres` feature);
//! - [`manager`]: sessions of a project: index, fork, export, trash
//!   (`manager::redact` with the `redact` feature);
//! - [`access`]: access tokens and their roles per project (`memoir serve`);
//! - [`blob`]: content-addressed storage for large payloads;
//! - [`changes`]: the file edits a session's tool calls made, as diffs;
//! - [`client`]: the HTTP API's wire types (`client::Client` and
//!   `client::RemoteStore` with the `client` feature);
//! - [`frame`]: the line framing (seq, batch marker, hash chain) on bytes,
//!   below both [`store`] and [`transcript`];
//! - [`doctor`]: the whole-store health check behind `memoir doctor`;
//! - `push` (with `client`): `memoir sync`, the incremental, resumable copy
//!   of a local store to a server;
//! - [`notes`]: explicit per-project notes (`remember`/`forget`) as records;
//! - [`id`], [`paths`], [`error`]: session ids, store locations, errors.
//!
//! With the `usage` feature, `usage`: exact token usage and offline cost
//! across the store; with `search`, `search`: the persistent cross-session index;
//! with `import`, `import`: the Claude Code, Codex, Gemini CLI and OpenCode
//! importers.
//!
//! With the `view` feature:
//! - `embed`: synchronous embedding providers (hash; `minilm` and `openai`
//!   features), the embedding cache and `config.toml` selection;
//! - `view`: the per-session semantic view (vector + BM25 retrieval,
//!   grafting); `view::eval` (feature `eval`) is the LoCoMo harness.
//!
//! Cargo features (default: `redact`): `redact`, `view`, `eval`, `minilm`,
//! `openai`, `client`, `postgres`, `usage`, `search`, `import` (`import-opencode`,
//! `import-watch`), and `full` for all of them. Without
//! default features the crate is the log, the manager and the file store.
//!
//! See `docs/FORMAT.md` for every on-disk format.
//!
//! ```no_run
//! use memoir::message::Message;
//! use memoir::record::SessionMeta;
//! use memoir::transcript::Session;
//!
//! # fn main() -> memoir::Result<()> {
//! let session = Session::create(&Session::default_dir()?, SessionMeta::new(Session::new_id()))?;
//! session.append_messages(&[Message::user("hello")])?;
//! assert_eq!(Session::load(&session.path)?.conversation.messages.len(), 1);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(missing_docs)]

pub mod access;
pub mod blame;
pub mod blob;
pub mod changes;
mod classify;
pub mod client;
pub mod doctor;
#[cfg(feature = "view")]
pub mod embed;
pub mod error;
mod fan_out;
pub mod frame;
pub mod id;
#[cfg(feature = "import")]
pub mod import;
pub mod manager;
pub mod message;
// Explicit per-project notes (`remember`/`forget`).
pub mod notes;
pub mod paths;
#[cfg(feature = "client")]
pub mod push;
// Promotion of nominated records to durable project facts (needs the view).
#[cfg(feature = "view")]
pub mod promote;
pub mod record;
pub mod runs;
#[cfg(feature = "search")]
pub mod search;
/// Dot-product kernels (portable, AVX2 + FMA, AVX-512) shared by the vector
/// index and the embedders.
#[cfg(feature = "view")]
#[allow(unsafe_code)] // the one module with `unsafe`: SIMD kernels, each call argued
pub mod simd;
pub mod store;
pub mod transcript;
#[cfg(feature = "usage")]
pub mod usage;
#[cfg(feature = "view")]
pub mod view;

pub use classify::kind_of;
pub use error::{Error, Result};

/// `skip_serializing_if` for a field written only when it differs from its
/// default (a zero count, say): one helper for every format.
pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
pub use message::{Block, Message, Role, Usage};
pub use record::{Record, RunConfig, SessionMeta, Summary, Taint};

/// The README's code blocks, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The library guide's code blocks, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/LIBRARY.md")]
pub struct LibraryGuideDoctests;
