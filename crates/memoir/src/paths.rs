//! Where memoir keeps its files, and how directories and files are created.
//!
//! `$MEMOIR_HOME` (default `~/.memoir`) is the root of the embedded store.
//! Directories are created owner-only (0700) and transcripts 0600.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};

/// Read an environment variable that, when set, must not be empty.
pub fn env_path(var: &str) -> Result<Option<PathBuf>> {
    match std::env::var_os(var) {
        None => Ok(None),
        Some(v) if v.is_empty() => Err(Error::Config(format!(
            "${var} is set but empty; unset it or give a directory"
        ))),
        Some(v) => Ok(Some(PathBuf::from(v))),
    }
}

/// The root of the embedded store: `$MEMOIR_HOME`, else `~/.memoir`.
pub fn memoir_home() -> Result<PathBuf> {
    if let Some(p) = env_path("MEMOIR_HOME")? {
        return Ok(p);
    }
    match env_path("HOME")? {
        Some(home) => Ok(home.join(".memoir")),
        None => Err(Error::Config(
            "neither $MEMOIR_HOME nor $HOME is set".into(),
        )),
    }
}

/// Create `dir` (and parents) if missing; a directory this call creates gets
/// mode 0700. An existing directory's mode is left alone.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).ctx("create directory", dir)
}

/// Open options for a new private file (0600, must not exist).
pub fn private_new_file() -> fs::OpenOptions {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts
}

/// fsync a directory so that a create or rename inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let d = fs::File::open(dir).ctx("open directory", dir)?;
    d.sync_all().ctx("fsync directory", dir)
}

/// Write `bytes` to `path` atomically: a temp file in the same directory,
/// fsync, rename over `path`, fsync the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let result = (|| {
        let mut f = private_new_file().open(&tmp).ctx("create", &tmp)?;
        f.write_all(bytes).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
        fs::rename(&tmp, path).ctx("rename", path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// This machine's host name, for lock ownership messages.
pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into())
}
