//! Helpers shared by integration tests.
pub mod corpus;
pub mod env_child;
pub mod flaky_store;
