//! The owner lease on PostgreSQL: a session-level advisory lock held on a
//! dedicated connection (not a pooled one) for as long as the [`Lease`]
//! lives. The server drops the lock when that connection ends, so a holder
//! that dies (process killed, network gone) releases it by itself. The
//! holder is named through the connection's `application_name`
//! (`memoir-lease <pid> <host> <since>`), which a refused taker reads from
//! `pg_stat_activity` joined with `pg_locks`.

use std::sync::Mutex;

use super::{drop_conns, Conn, PgStore};
use crate::error::Result;
use crate::store::lease::{busy, current_holder, Holder, Lease};

/// Prefix of the `application_name` of a lease connection.
const APP_PREFIX: &str = "memoir-lease";

/// Keeps the lease connection open; closing it releases the lock.
struct Guard(Mutex<Option<Conn>>);

impl Drop for Guard {
    fn drop(&mut self) {
        let conn = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        drop_conns(conn.into_iter().collect());
    }
}

/// The advisory lock key of session `id` in `schema` (64 bits of BLAKE3).
fn key(schema: &str, id: &str) -> i64 {
    let hash = blake3::hash(format!("memoir-lease:{schema}:{id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    i64::from_le_bytes(bytes)
}

fn parse_holder(app: &str) -> Option<Holder> {
    let mut parts = app.strip_prefix(APP_PREFIX)?.split_whitespace();
    Some(Holder {
        pid: parts.next()?.parse().ok()?,
        host: parts.next()?.to_string(),
        since: parts.next().unwrap_or("unknown").to_string(),
    })
}

/// Take the lease of `id` on `store`, or [`crate::Error::Busy`] naming the holder.
pub(super) fn acquire(store: &PgStore, id: &str) -> Result<Lease> {
    let mut conn = store.connect_one()?;
    let holder = current_holder();
    // application_name keeps 63 bytes; pid, host and time fit in practice.
    let app: String = format!(
        "{APP_PREFIX} {} {} {}",
        holder.pid, holder.host, holder.since
    )
    .chars()
    .filter(|c| !c.is_control() && *c != '\'')
    .take(63)
    .collect();
    let key = key(store.schema(), id);
    let got = (|| {
        conn.client
            .batch_execute(&format!("SET application_name TO '{app}'"))?;
        let row = conn
            .client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])?;
        Ok::<bool, postgres::Error>(row.get(0))
    })()
    .map_err(|e| store.pg_error("postgres lease", &e))?;
    if got {
        return Ok(Lease::new(
            id,
            holder,
            None,
            Box::new(Guard(Mutex::new(Some(conn)))),
        ));
    }
    let app: Option<String> = conn
        .client
        .query_opt(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
               AND l.classid::bigint = (($1::bigint >> 32) & 4294967295)
               AND l.objid::bigint = ($1::bigint & 4294967295)
             LIMIT 1",
            &[&key],
        )
        .ok()
        .flatten()
        .map(|r| r.get(0));
    drop_conns(vec![conn]);
    let holder = app.as_deref().and_then(parse_holder).unwrap_or(Holder {
        pid: 0,
        host: "unknown".into(),
        since: "unknown".into(),
    });
    Err(busy(id, holder))
}
