//! Helpers shared by integration tests.
pub mod corpus;
pub mod env_child;
pub mod flaky_store;

/// True when running under CI (`CI` set to anything but empty, `0` or
/// `false`): a test that cannot run for want of a fixture CI provides fails
/// there instead of passing silently.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}
