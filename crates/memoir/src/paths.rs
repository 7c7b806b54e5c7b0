//! Where memoir keeps its files, and how directories and files are created.
//!
//! `$MEMOIR_HOME` (default `~/.memoir`) is the root of the embedded store.
//! Directories are created owner-only (0700) and transcripts 0600; a
//! `.memoir` directory memoir creates gets a `.gitignore` so a project's
//! sessions are never committed by accident.
//!
//! [`resolve_store`] is the one store-resolution order every command uses
//! (first match wins):
//! 1. an explicit directory (`--dir`);
//! 2. an explicit project (`--project P`): `P/.memoir/sessions`;
//! 3. `$MEMOIR_SESSION_DIR` when set;
//! 4. the current directory's project: the nearest ancestor holding a
//!    `.memoir/sessions` directory (the home directory's `~/.memoir` is the
//!    global store, not a project);
//! 5. the global store, `$MEMOIR_HOME/sessions` (`~/.memoir/sessions`).

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

/// Where a project keeps its sessions, relative to its root.
pub const PROJECT_SESSIONS_DIR: &str = ".memoir/sessions";

/// The name of memoir's per-project (and home) directory.
pub const MEMOIR_DIR: &str = ".memoir";

/// What memoir writes to `.memoir/.gitignore` when it creates `.memoir/`.
pub const GITIGNORE: &str =
    "# Created by memoir: session transcripts are private; never commit them.\n*\n";

/// The global session directory: `$MEMOIR_SESSION_DIR`, else
/// `$MEMOIR_HOME/sessions` (`~/.memoir/sessions`). A set-but-empty variable
/// is an error.
pub fn global_sessions_dir() -> Result<PathBuf> {
    if let Some(dir) = env_path("MEMOIR_SESSION_DIR")? {
        return Ok(dir);
    }
    Ok(memoir_home()?.join("sessions"))
}

/// What the caller asked for explicitly (the CLI's `--dir` / `--project`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreRequest {
    /// A session directory; wins over everything.
    pub dir: Option<PathBuf>,
    /// A project root whose `.memoir/sessions` is the store.
    pub project: Option<PathBuf>,
}

/// Which rule of [`resolve_store`] chose the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreSource {
    /// An explicit directory.
    Dir,
    /// An explicit project.
    Project,
    /// `$MEMOIR_SESSION_DIR`.
    SessionDirEnv,
    /// The current directory's project (an ancestor with `.memoir/sessions`).
    CurrentProject,
    /// `$MEMOIR_HOME/sessions`.
    Global,
}

/// A resolved session store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedStore {
    /// The session directory.
    pub dir: PathBuf,
    /// The project the store belongs to, when one chose it.
    pub project: Option<PathBuf>,
    /// The rule that chose it.
    pub source: StoreSource,
}

/// Resolve the session store for `request` from the current directory
/// `cwd` (see the module docs for the order). Never creates anything.
///
/// A store that does not exist yet is fine (a command that writes creates
/// it); a path that exists and is not a directory (a regular file, a FIFO,
/// a device, a symbolic link to one of those, a dangling symbolic link) is
/// [`Error::Invalid`], whichever rule chose it: no command reads or writes
/// "a store" there.
pub fn resolve_store(request: &StoreRequest, cwd: &Path) -> Result<ResolvedStore> {
    let resolved = resolve_store_path(request, cwd)?;
    check_store_dir(&resolved.dir)?;
    Ok(resolved)
}

/// `Ok` when `dir` is a directory (through symbolic links) or does not
/// exist at all; [`Error::Invalid`] naming what it is otherwise.
pub fn check_store_dir(dir: &Path) -> Result<()> {
    let link = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).ctx("inspect session store", dir),
    };
    let what = match fs::metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(m) => file_kind(&m.file_type()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && link.file_type().is_symlink() => {
            "a dangling symbolic link"
        }
        Err(e) => return Err(e).ctx("inspect session store", dir),
    };
    let via = if link.file_type().is_symlink() && what != "a dangling symbolic link" {
        " (through a symbolic link)"
    } else {
        ""
    };
    Err(Error::Invalid(format!(
        "{} is {what}{via}, not a session store directory",
        dir.display()
    )))
}

/// A few words for a file that is not a directory.
fn file_kind(t: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_file() {
        "a regular file"
    } else {
        "not a directory"
    }
}

fn resolve_store_path(request: &StoreRequest, cwd: &Path) -> Result<ResolvedStore> {
    if let Some(dir) = &request.dir {
        return Ok(ResolvedStore {
            dir: dir.clone(),
            project: None,
            source: StoreSource::Dir,
        });
    }
    if let Some(project) = &request.project {
        return Ok(ResolvedStore {
            dir: project.join(PROJECT_SESSIONS_DIR),
            project: Some(project.clone()),
            source: StoreSource::Project,
        });
    }
    if let Some(dir) = env_path("MEMOIR_SESSION_DIR")? {
        return Ok(ResolvedStore {
            dir,
            project: None,
            source: StoreSource::SessionDirEnv,
        });
    }
    let home_store = env_path("HOME")?.map(|h| h.join(MEMOIR_DIR));
    let project = cwd.ancestors().find(|dir| {
        Some(dir.join(MEMOIR_DIR)) != home_store && dir.join(PROJECT_SESSIONS_DIR).is_dir()
    });
    if let Some(project) = project {
        return Ok(ResolvedStore {
            dir: project.join(PROJECT_SESSIONS_DIR),
            project: Some(project.to_path_buf()),
            source: StoreSource::CurrentProject,
        });
    }
    Ok(ResolvedStore {
        dir: global_sessions_dir()?,
        project: None,
        source: StoreSource::Global,
    })
}

/// Create `dir` (and parents) if missing; a directory this call creates gets
/// mode 0700. An existing directory's mode is left alone. A `.memoir`
/// directory this call creates gets a [`GITIGNORE`].
pub fn create_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let created_memoir_dir = dir
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == MEMOIR_DIR))
        .filter(|a| !a.exists())
        .map(Path::to_path_buf);
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).ctx("create directory", dir)?;
    if let Some(memoir_dir) = created_memoir_dir {
        let ignore = memoir_dir.join(".gitignore");
        match private_new_file().open(&ignore) {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(GITIGNORE.as_bytes()).ctx("write", &ignore)?;
            }
            // Another process created `.memoir` at the same time.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).ctx("create", &ignore),
        }
    }
    Ok(())
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
    write_and_rename(path, bytes, true)
}

/// Write `bytes` to `path` through a temp file in the same directory renamed
/// over it, without fsync: for derived data, which a crash may leave old or
/// missing but never torn.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_and_rename(path, bytes, false)
}

fn write_and_rename(path: &Path, bytes: &[u8], durable: bool) -> Result<()> {
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
        if durable {
            f.sync_all().ctx("fsync", &tmp)?;
        }
        fs::rename(&tmp, path).ctx("rename", path)?;
        if durable {
            sync_dir(dir)?;
        }
        Ok(())
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
