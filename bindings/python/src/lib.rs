//! `memoir._memoir`: the native core of the `memoir` Python package (PyO3,
//! abi3 for CPython >= 3.10). It exposes the Rust library itself, no server
//! needed: [`store::Store`] (sessions: create, append, load with its report,
//! fork, rewrite, checkpoint, list, find, delete/restore/purge, recall) and
//! the exception hierarchy of [`errors`]. Values cross as plain Python
//! objects ([`convert`]). The pure-Python package (`memoir/`) re-exports
//! these and adds the SDK adapters.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(missing_docs)]

pub mod convert;
pub mod errors;
pub mod store;

use pyo3::prelude::*;

/// The module `memoir._memoir`.
#[pymodule]
fn _memoir(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::Store>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
