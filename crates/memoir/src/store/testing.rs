//! Conformance suites, exported so every [`super::LogStore`] (memoir's and
//! yours) runs the same checks: [`store`] for the storage contract and
//! [`manager`] for the session manager over that store.
//!
//! Each check is a plain function that panics on failure (they are test
//! code: `assert!`, `unwrap`). Call [`store::run_all`] / [`manager::run_all`]
//! with a factory of fresh, empty stores, or one check at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

pub mod manager;
pub mod store;

/// A shared store under test.
pub type Store = std::sync::Arc<dyn super::LogStore>;

/// One check: panics when `store` breaks the contract.
pub type Check = fn(&Store);
