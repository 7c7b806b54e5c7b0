//! Test support for memoir: realistic, seeded agent history.
//!
//! - [`rng`]: a small deterministic random number generator.
//! - [`corpus`]: writes Claude Code and Codex home trees with the shapes real
//!   agents write (split streamed responses, parallel tool calls, subagents,
//!   compaction, rewinds, resumes, `/btw` replays, images, interruptions,
//!   cumulative Codex token counts) and returns a [`corpus::Manifest`], the
//!   generator's own record of what it wrote (the ground truth importer
//!   tests and usage comparisons check against).
//!
//! The crate depends on serde only, never on `memoir`, so `memoir` can use it
//! as a dev-dependency. See `README.md` for the shapes and their frequencies.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod corpus;
pub mod rng;

pub use corpus::{generate, AgentKind, CorpusSpec, Manifest, Shapes};
pub use rng::Rng;
