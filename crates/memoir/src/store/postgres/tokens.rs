//! The access-token table (`memoir_tokens`): one row per token, its entry
//! as JSON text ([`crate::access`] owns the shape; this file only moves
//! rows), so every server over one database sees a revocation at once.

use super::*;

impl PgStore {
    /// Every stored token entry (JSON text), oldest id first.
    pub fn token_rows(&self) -> Result<Vec<String>> {
        self.run("postgres token list", true, |c| {
            let s = c.stmt("SELECT entry FROM memoir_tokens ORDER BY id")?;
            Ok(c.client.query(&s, &[])?.iter().map(|r| r.get(0)).collect())
        })
    }

    /// The entry of token `id`, if stored.
    pub fn token_row(&self, id: &str) -> Result<Option<String>> {
        self.run("postgres token read", true, |c| {
            let s = c.stmt("SELECT entry FROM memoir_tokens WHERE id = $1")?;
            Ok(c.client.query_opt(&s, &[&id])?.map(|r| r.get(0)))
        })
    }

    /// Store a new token entry; [`Error::Invalid`] when `id` is taken.
    pub fn insert_token_row(&self, id: &str, entry: &str) -> Result<()> {
        let mut taken = false;
        self.run("postgres token insert", false, |c| {
            let s = c.stmt("INSERT INTO memoir_tokens (id, entry) VALUES ($1, $2)")?;
            match c.client.execute(&s, &[&id, &entry]) {
                Ok(_) => Ok(()),
                Err(e) if is_unique_violation(&e) => {
                    taken = true;
                    Ok(())
                }
                Err(e) => Err(e),
            }
        })?;
        if taken {
            return Err(Error::Invalid(format!("token id {id} is taken")));
        }
        Ok(())
    }

    /// Replace the entry of a token that is not yet revoked with `entry`
    /// (its revoked form) and stamp `revoked_at` (the database's clock); false when there is no
    /// such live token.
    pub fn revoke_token_row(&self, id: &str, entry: &str) -> Result<bool> {
        self.run("postgres token revoke", true, |c| {
            let s = c.stmt(
                "UPDATE memoir_tokens SET entry = $2, revoked_at = now() \
                 WHERE id = $1 AND revoked_at IS NULL",
            )?;
            Ok(c.client.execute(&s, &[&id, &entry])? == 1)
        })
    }
}
