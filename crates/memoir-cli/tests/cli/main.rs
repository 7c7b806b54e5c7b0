//! The CLI's integration tests, one binary (one link instead of one per file):
//! each module is a former `tests/<name>.rs`. Run one module with
//! `cargo test -p memoir-cli --test cli <module>::`.

#[allow(dead_code)]
mod common;
#[path = "../../../memoir/tests/suite/postgres_common/mod.rs"]
mod postgres_common;

mod conventions;
mod demo_cli;
mod import_cli;
mod import_shapes_cli;
mod integrity;
mod mcp_stdio;
#[cfg(feature = "minilm")]
mod models_cli;
mod no_colour;
mod outcomes_cli;
mod parity;
mod processes;
mod search_cli;
mod sessions_cli;
mod store_paths;
mod sync_cli;
mod tokens_cli;
mod usage_cli;
