//! Values crossing the boundary: Python objects (dicts, lists, str, int,
//! float, bool, None) to and from the library's serde types, through
//! `pythonize` (no JSON text in between).

use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::errors::invalid;

/// A Python object read as `T` (a malformed value is `InvalidInputError`
/// naming `what`).
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    pythonize::depythonize(obj).map_err(|e| invalid(format!("{what}: {e}")))
}

/// A library value as Python objects.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value)
        .map_err(|e| crate::errors::MemoirError::new_err(format!("cannot convert to Python: {e}")))
}
