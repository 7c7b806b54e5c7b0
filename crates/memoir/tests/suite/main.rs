//! memoir's integration tests, one binary (ripgrep's `tests/tests.rs` pattern:
//! one link instead of one per file). Each module is a former `tests/<name>.rs`;
//! the ones that need an optional part of the crate are gated on its feature
//! (`cargo test --workspace` turns them on through the CLI's features; alone:
//! `cargo test -p memoir --features full --test suite`). Run one module with
//! `cargo test -p memoir --test suite <module>::`.
//! Tests that change the process environment (`default_dir`, `embed_select`)
//! stay separate binaries: a shared process would let them race the others.
//! A test that only needs a variable set runs itself again in a child that
//! has it (`support::env_child`); nothing here calls `std::env::set_var`.

// Shared helpers: not every feature combination uses all of them.
// The conformance harness names PostgreSQL backends (they skip themselves at
// run time when no server is configured), so it needs the feature to compile.
#[cfg(feature = "postgres")]
#[macro_use]
#[allow(dead_code, unused_macros)]
mod backends;
#[cfg(feature = "postgres")]
// (`postgres_common` allows its own dead code.)
mod postgres_common;
#[allow(dead_code)]
mod support;

#[cfg(feature = "view")]
mod blob_store;
mod blob_transcript;
#[cfg(feature = "search")]
mod catchup;
mod doctor;
#[cfg(feature = "view")]
mod embed_cache;
#[cfg(feature = "minilm")]
mod embed_minilm;
#[cfg(feature = "minilm")]
mod embed_mpnet;
#[cfg(feature = "openai")]
mod embed_openai;
mod full_disk;
mod golden;
#[cfg(feature = "view")]
mod golden_payloads;
#[cfg(feature = "postgres")]
mod golden_postgres;
#[cfg(all(feature = "import-opencode", feature = "import-watch"))]
mod import;
#[cfg(all(feature = "import", feature = "usage"))]
mod import_corpus;
#[cfg(feature = "import")]
mod import_documents;
#[cfg(feature = "import")]
mod import_outcomes;
#[cfg(feature = "import")]
mod import_paginated;
#[cfg(feature = "import")]
mod import_shapes;
mod listing;
mod manager;
#[cfg(feature = "postgres")]
mod manager_conformance;
mod manager_env;
mod manager_fork;
mod manager_lease;
#[cfg(feature = "redact")]
mod manager_redact;
mod manager_revisions;
#[cfg(feature = "search")]
mod manager_search;
mod outcomes;
#[cfg(feature = "postgres")]
mod postgres_faults;
#[cfg(feature = "postgres")]
mod postgres_store;
#[cfg(feature = "postgres")]
mod postgres_tail;
#[cfg(feature = "view")]
mod promotion;
#[cfg(feature = "search")]
mod search;
#[cfg(feature = "search")]
mod search_swap;
#[cfg(feature = "postgres")]
mod store_conformance;
mod store_group;
mod store_integrity;
mod store_trash;
mod transcript;
#[cfg(feature = "usage")]
mod usage;
#[cfg(all(feature = "import", feature = "usage"))]
mod usage_summary;
#[cfg(feature = "view")]
mod view_concurrency;
#[cfg(feature = "view")]
mod view_history;
#[cfg(feature = "view")]
mod view_index;
#[cfg(feature = "view")]
mod view_lifecycle;
#[cfg(feature = "view")]
mod view_rebuild;
