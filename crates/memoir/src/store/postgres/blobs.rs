//! Content-addressed blobs in PostgreSQL (`memoir_blobs`).

use super::*;

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
