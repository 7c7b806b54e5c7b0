//! The tokens of a file store: `.tokens.json` in the store directory, a
//! versioned JSON document (`{"format":"memoir.tokens","version":1,
//! "tokens":[...]}`, `docs/FORMAT.md`). Changes are read-modify-write under
//! an exclusive `flock` of `.tokens.lock` and replaced atomically (fsync),
//! so concurrent `memoir serve tokens` commands and servers never lose one.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{TokenBook, TokenEntry};
use crate::error::{Error, IoContext, Result};

/// The tokens file's name in the store directory.
pub const TOKENS_FILE: &str = ".tokens.json";

/// The lock file serializing changes to [`TOKENS_FILE`].
const LOCK_FILE: &str = ".tokens.lock";

/// The `format` field of the tokens file.
pub const TOKENS_FORMAT: &str = "memoir.tokens";

/// The newest tokens file version this build reads and writes.
pub const TOKENS_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    format: String,
    version: u32,
    tokens: Vec<TokenEntry>,
}

/// The tokens file of a store directory.
#[derive(Debug, Clone)]
pub struct FileBook {
    dir: PathBuf,
}

impl FileBook {
    /// The book of store directory `dir`.
    pub fn new(dir: &Path) -> FileBook {
        FileBook {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(TOKENS_FILE)
    }

    fn read(&self) -> Result<Vec<TokenEntry>> {
        let path = self.path();
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).ctx("read", path),
        };
        let doc: Document = serde_json::from_str(&text).map_err(|e| Error::Corrupt {
            path: path.clone(),
            detail: format!("tokens file: {e}"),
        })?;
        if doc.format != TOKENS_FORMAT || doc.version != TOKENS_VERSION {
            return Err(Error::Corrupt {
                path,
                detail: format!(
                    "tokens file is {} version {}; this build reads {TOKENS_FORMAT} version {TOKENS_VERSION}",
                    doc.format, doc.version
                ),
            });
        }
        Ok(doc.tokens)
    }

    /// Change the tokens under the lock and write them back.
    fn change<T>(&self, f: impl FnOnce(&mut Vec<TokenEntry>) -> Result<T>) -> Result<T> {
        fs::create_dir_all(&self.dir).ctx("create", &self.dir)?;
        let lock_path = self.dir.join(LOCK_FILE);
        let lock: File = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .ctx("open", &lock_path)?;
        lock.lock().ctx("lock", &lock_path)?;
        let mut tokens = self.read()?;
        let out = f(&mut tokens)?;
        let doc = Document {
            format: TOKENS_FORMAT.into(),
            version: TOKENS_VERSION,
            tokens,
        };
        let mut bytes = serde_json::to_vec_pretty(&doc)?;
        bytes.push(b'\n');
        crate::paths::atomic_write(&self.path(), &bytes)?;
        Ok(out)
    }
}

impl TokenBook for FileBook {
    fn list(&self) -> Result<Vec<TokenEntry>> {
        self.read()
    }

    fn get(&self, id: &str) -> Result<Option<TokenEntry>> {
        Ok(self.read()?.into_iter().find(|t| t.id == id))
    }

    fn insert(&self, entry: &TokenEntry) -> Result<()> {
        self.change(|tokens| {
            if tokens.iter().any(|t| t.id == entry.id) {
                return Err(Error::Invalid(format!("token id {} is taken", entry.id)));
            }
            tokens.push(entry.clone());
            Ok(())
        })
    }

    fn revoke(&self, id: &str) -> Result<bool> {
        self.change(|tokens| {
            match tokens
                .iter_mut()
                .find(|t| t.id == id && t.revoked_at.is_none())
            {
                Some(t) => {
                    t.revoked_at = Some(chrono::Utc::now());
                    Ok(true)
                }
                None => Ok(false),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{mint, AuthError, Grant};
    use super::*;

    #[test]
    fn tokens_file_round_trips_and_revocation_is_seen_by_another_handle() {
        let dir = tempfile::tempdir().unwrap();
        let a = FileBook::new(dir.path());
        let b = FileBook::new(dir.path());
        let t = mint("ana", vec![Grant::parse("web=read").unwrap()], None).unwrap();
        a.insert(&t.entry).unwrap();
        let text = fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap();
        assert!(text.contains("\"format\": \"memoir.tokens\""));
        assert!(!text.contains(&t.secret), "the secret is never stored");
        let caller = b.authenticate(&t.secret).unwrap().unwrap().unwrap();
        assert_eq!(caller.member, "ana");
        assert!(a.revoke(&t.entry.id).unwrap());
        assert!(!a.revoke(&t.entry.id).unwrap());
        assert_eq!(
            b.authenticate(&t.secret).unwrap().unwrap(),
            Err(AuthError::Revoked)
        );
        assert!(b.authenticate("not-minted-0123456789").unwrap().is_none());
        fs::write(
            dir.path().join(TOKENS_FILE),
            r#"{"format":"memoir.tokens","version":2,"tokens":[]}"#,
        )
        .unwrap();
        assert!(matches!(b.list(), Err(Error::Corrupt { .. })));
    }
}
