//! memoir: durable, forkable, searchable session memory for LLM agents.
//!
//! - [`transcript`]: the append-only, checksummed JSONL log of one session.
//! - [`message`] and [`record`]: what the log holds.
//! - [`store`]: the narrow storage interface the log is written through.
//! - [`embed`]: embedding providers for the semantic view.
//! - [`frame`]: the line framing (seq, batch marker, hash chain) on bytes,
//!   below both [`store`] and [`transcript`].
//! - [`doctor`]: the whole-store health check behind `memoir doctor`.
//!
//! See `docs/FORMAT.md` for the on-disk format.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod blob;
pub mod client;
pub mod doctor;
pub mod embed;
pub mod error;
pub mod frame;
pub mod error_class;
pub mod id;
pub mod manager;
pub mod message;
pub mod paths;
pub mod record;
pub mod store;
pub mod transcript;
pub mod usage;
pub mod view;

pub use error::{Error, Result};
pub use message::{Block, Message, Role, Usage};
pub use record::{Record, RunConfig, SessionMeta, Summary, Taint};
