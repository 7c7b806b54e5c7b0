//! Resolving a session id or unique prefix among the trashed sessions (the
//! live ones resolve through [`crate::transcript::find_in`]), so no front
//! writes its own prefix matcher.

use super::{ManagerError, Result, SessionManager};

impl SessionManager {
    /// Resolve a full id or unique prefix among the sessions in the trash.
    /// An empty or whitespace prefix is invalid; an exact id wins over
    /// longer ids it prefixes.
    pub fn resolve_trashed(&self, id_prefix: &str) -> Result<String> {
        crate::id::validate(id_prefix)?;
        let trash = self.list_trash()?;
        let mut matches: Vec<String> = trash
            .iter()
            .map(|t| t.entry.id.clone())
            .filter(|id| id.starts_with(id_prefix))
            .collect();
        if matches.iter().any(|id| id == id_prefix) {
            return Ok(id_prefix.to_string());
        }
        match matches.len() {
            0 => Err(ManagerError::NotInTrash(id_prefix.to_string())),
            1 => Ok(matches.remove(0)),
            _ => {
                matches.sort();
                Err(crate::Error::Ambiguous {
                    prefix: id_prefix.to_string(),
                    candidates: matches,
                }
                .into())
            }
        }
    }
}
