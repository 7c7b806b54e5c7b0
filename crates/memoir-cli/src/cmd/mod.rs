//! One module per subcommand.

pub mod debug;
pub mod demo;
pub mod embed;
pub mod eval;
pub mod recall;
#[cfg(any(feature = "server", feature = "client"))]
pub mod serve;
pub mod sessions;
