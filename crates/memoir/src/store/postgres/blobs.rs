//! Content-addressed blobs in PostgreSQL (`memoir_blobs`: hash, size,
//! media type, bytes, stored time): the payload store of the transcripts
//! ([`PgBlobs`], handed out by [`LogStore::blobs`] with the file store's
//! policy) and direct access ([`PgStore::put_blob`] and friends). Collection
//! is by reachability, as on the file store: a purge drops the blobs only
//! the purged sessions referenced, and
//! [`crate::transcript::blobs::collect_garbage`] drops unreferenced blobs
//! older than a grace period (the stored time is refreshed by every store
//! of the same bytes).

use std::time::SystemTime;

use super::*;
use crate::blob::{BlobBackend, BlobError};

/// The [`BlobBackend`] of a [`PgStore`]: the same database and schema, on
/// its own small pool (connected on first use).
#[derive(Debug)]
pub(super) struct PgBlobs {
    config: postgres::Config,
    options: PgOptions,
    store: std::sync::OnceLock<PgStore>,
}

impl PgBlobs {
    pub(super) fn new(main: &PgStore) -> PgBlobs {
        PgBlobs {
            config: main.config.clone(),
            options: PgOptions {
                pool_size: 4,
                ..main.options.clone()
            },
            store: std::sync::OnceLock::new(),
        }
    }

    fn store(&self) -> &PgStore {
        self.store
            .get_or_init(|| PgStore::unmigrated(self.config.clone(), self.options.clone()))
    }
}

impl BlobBackend for PgBlobs {
    fn put(&self, hash: &str, bytes: &[u8], media_type: Option<&str>) -> Result<(), BlobError> {
        let size = bytes.len() as i64;
        self.store().run("postgres blob put", true, |c| {
            let s = c.stmt(
                "INSERT INTO memoir_blobs (hash, size, bytes, media_type) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (hash) DO UPDATE SET created_at = now(),
                     media_type = coalesce(memoir_blobs.media_type, EXCLUDED.media_type)",
            )?;
            c.client.execute(&s, &[&hash, &size, &bytes, &media_type])
        })?;
        Ok(())
    }

    fn get(&self, hash: &str) -> Result<Option<Vec<u8>>, BlobError> {
        Ok(self.store().run("postgres blob get", true, |c| {
            let s = c.stmt("SELECT bytes FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client
                .query_opt(&s, &[&hash])?
                .map(|r| r.get::<_, Vec<u8>>(0)))
        })?)
    }

    fn contains(&self, hash: &str) -> Result<bool, BlobError> {
        Ok(self.store().has_blob(hash)?)
    }

    fn remove(&self, hash: &str) -> Result<bool, BlobError> {
        Ok(self.store().delete_blob(hash)?)
    }

    fn list(&self) -> Result<Vec<(String, u64, SystemTime)>, BlobError> {
        let rows = self.store().run("postgres blob list", true, |c| {
            let s = c.stmt(
                "SELECT hash, size, extract(epoch FROM created_at)::float8 FROM memoir_blobs ORDER BY hash",
            )?;
            c.client.query(&s, &[])
        })?;
        Ok(rows
            .iter()
            .map(|r| {
                let secs: f64 = r.get(2);
                let stored =
                    SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs.max(0.0));
                (r.get::<_, String>(0), r.get::<_, i64>(1) as u64, stored)
            })
            .collect())
    }

    fn locate(&self, hash: &str) -> PathBuf {
        PathBuf::from(format!("{}/blobs/{hash}", self.store().locator))
    }
}

impl PgStore {
    /// The payload store [`LogStore::blobs`] hands out (file-store policy).
    pub(super) fn payload_store(&self) -> Option<crate::blob::PayloadStore> {
        let backend = self.payloads.clone()?;
        Some(crate::blob::PayloadStore {
            store: std::sync::Arc::new(crate::blob::ArtifactStore::custom(backend)),
            policy: crate::blob::ExternalizePolicy::TRANSCRIPT,
        })
    }
}

impl PgStore {
    /// Store `bytes` once, keyed by their BLAKE3 hash (64 lowercase hex
    /// digits, as [`crate::blob::hash_bytes`]); returns the hash. Storing the
    /// same bytes again is a no-op.
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String> {
        let hash = crate::blob::hash_bytes(bytes);
        let size = bytes.len() as i64;
        self.run("postgres blob put", true, |c| {
            let s = c.stmt(
                "INSERT INTO memoir_blobs (hash, size, bytes) VALUES ($1, $2, $3)
                 ON CONFLICT (hash) DO NOTHING",
            )?;
            c.client.execute(&s, &[&hash, &size, &bytes])
        })?;
        Ok(hash)
    }

    /// The bytes stored under `hash`, verified (`None` when absent).
    /// [`Error::Corrupt`] when the stored bytes no longer hash to their name.
    pub fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        if !crate::blob::is_valid_hash(hash) {
            return Err(Error::Invalid(format!(
                "invalid blob hash {hash:?}: expected 64 lowercase hex digits"
            )));
        }
        let bytes = self.run("postgres blob get", true, |c| {
            let s = c.stmt("SELECT bytes FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client
                .query_opt(&s, &[&hash])?
                .map(|r| r.get::<_, Vec<u8>>(0)))
        })?;
        match bytes {
            Some(b) if crate::blob::hash_bytes(&b) != hash => Err(Error::Corrupt {
                path: PathBuf::from(format!("{}/blobs/{hash}", self.locator)),
                detail: "blob content does not match its hash".into(),
            }),
            other => Ok(other),
        }
    }

    /// Whether a blob with `hash` is stored.
    pub fn has_blob(&self, hash: &str) -> Result<bool> {
        self.run("postgres blob get", true, |c| {
            let s = c.stmt("SELECT 1 FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client.query_opt(&s, &[&hash])?.is_some())
        })
    }

    /// Remove a blob; true when it existed.
    pub fn delete_blob(&self, hash: &str) -> Result<bool> {
        self.run("postgres blob delete", true, |c| {
            let s = c.stmt("DELETE FROM memoir_blobs WHERE hash = $1")?;
            Ok(c.client.execute(&s, &[&hash])? > 0)
        })
    }

    /// Number of blobs and their total size in bytes.
    pub fn blob_stats(&self) -> Result<(u64, u64)> {
        self.run("postgres blob stats", true, |c| {
            let s = c.stmt("SELECT count(*), coalesce(sum(size), 0)::bigint FROM memoir_blobs")?;
            let row = c.client.query_one(&s, &[])?;
            Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
        })
    }
}
