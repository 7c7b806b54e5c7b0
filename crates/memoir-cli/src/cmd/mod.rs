//! One module per subcommand.

pub mod debug;
pub mod demo;
pub mod doctor;
pub mod embed;
pub mod eval;
pub mod recall;
pub mod serve;
pub mod sessions;
