//! One module per subcommand.

pub mod blame;
pub mod changes;
pub mod choices;
pub mod completions;
pub mod debug;
pub mod demo;
pub mod doctor;
pub mod embed;
pub mod eval;
pub mod import;
pub mod index;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "minilm")]
pub mod models;
pub mod recall;
pub mod resume;
pub mod search;
#[cfg(any(feature = "server", feature = "client"))]
pub mod serve;
pub mod sessions;
pub mod stats;
pub mod store;
#[cfg(feature = "client")]
pub mod sync;
#[cfg(feature = "ui")]
pub mod ui;
pub mod usage;
