//! One module per subcommand.

pub mod choices;
pub mod completions;
pub mod debug;
pub mod demo;
pub mod doctor;
pub mod embed;
pub mod eval;
pub mod recall;
pub mod serve;
pub mod sessions;
pub mod usage;
pub mod store;
