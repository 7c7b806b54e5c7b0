//! The PostgreSQL store's connection pool: checkout, checkin, retry of a
//! dead pooled connection, and the mapping of driver errors to
//! [`crate::error::StoreError::Unavailable`] (by SQLSTATE class and the
//! error's source types, never by message text).

use super::*;

/// Does this driver error mean the connection or the server is gone?
pub(super) fn pg_unavailable(e: &postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        // 08: connection exception; 57: operator intervention (shutdown,
        // crash recovery, cannot connect now); 53: insufficient resources.
        return code.starts_with("08") || code.starts_with("57") || code.starts_with("53");
    }
    if e.is_closed() {
        return true;
    }
    // Not a server error: a client-side failure is either I/O on the
    // socket (the connection is gone) or a protocol/conversion error (not
    // retryable). The driver's error kinds are private, so tell them apart
    // by the source chain's types, never by message text.
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

pub(super) fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// A pooled connection and its prepared statements.
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) stmts: HashMap<&'static str, Statement>,
}

impl Conn {
    pub(super) fn stmt(
        &mut self,
        sql: &'static str,
    ) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.stmts.insert(sql, s.clone());
        Ok(s)
    }
}

pub(super) struct PoolState {
    pub(super) idle: Vec<Conn>,
    pub(super) open: usize,
}

/// A checked-out connection; `fresh` when it was opened for this checkout.
pub(super) struct Lease {
    pub(super) conn: Conn,
    pub(super) fresh: bool,
}

/// Close connections. The driver's `Drop` blocks on its own runtime, which
/// panics inside an async context (e.g. a server's runtime shutting down), so
/// there the connections are closed on a helper thread.
pub(super) fn drop_conns(conns: Vec<Conn>) {
    if conns.is_empty() {
        return;
    }
    if tokio::runtime::Handle::try_current().is_ok() {
        let _ = std::thread::spawn(move || drop(conns)).join();
    } else {
        drop(conns);
    }
}

impl PgStore {
    pub(super) fn pg_error(&self, op: &'static str, e: &postgres::Error) -> Error {
        let detail = match e.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        if pg_unavailable(e) {
            return StoreError::Unavailable {
                backend: self.locator.clone(),
                op,
                detail,
            }
            .into();
        }
        Error::Io {
            op,
            path: PathBuf::from(&self.locator),
            source: std::io::Error::other(detail),
        }
    }

    pub(super) fn connect_one(&self) -> Result<Conn> {
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| self.pg_error("postgres connect", &e))?;
        let sync = match self.options.durability {
            Durability::Fsync => "on",
            Durability::Flush | Durability::None => "off",
        };
        client
            .batch_execute(&format!(
                "SET search_path TO \"{}\", public; SET synchronous_commit TO {sync};",
                self.options.schema
            ))
            .map_err(|e| self.pg_error("postgres connect", &e))?;
        Ok(Conn {
            client,
            stmts: HashMap::new(),
        })
    }

    pub(super) fn checkout(&self) -> Result<Lease> {
        let deadline = std::time::Instant::now() + self.options.checkout_timeout;
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Lease { conn, fresh: false });
            }
            if state.open < self.options.pool_size.max(1) {
                state.open += 1;
                drop(state);
                return match self.connect_one() {
                    Ok(conn) => Ok(Lease { conn, fresh: true }),
                    Err(e) => {
                        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
                        state.open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(StoreError::Unavailable {
                    backend: self.locator.clone(),
                    op: "postgres pool checkout",
                    detail: "every pooled connection stayed busy".into(),
                }
                .into());
            }
            state = match self.freed.wait_timeout(state, deadline - now) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
    }

    pub(super) fn checkin(&self, lease: Lease, healthy: bool) {
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if healthy && !lease.conn.client.is_closed() {
            state.idle.push(lease.conn);
        } else {
            state.open -= 1;
        }
        self.freed.notify_one();
    }

    /// Run `f` on a pooled connection. A broken connection is dropped; when
    /// it was a reused one and `retry` is set, `f` runs once more on a fresh one.
    pub(super) fn run<T>(
        &self,
        op: &'static str,
        retry: bool,
        mut f: impl FnMut(&mut Conn) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut lease = self.checkout()?;
            match f(&mut lease.conn) {
                Ok(v) => {
                    self.checkin(lease, true);
                    return Ok(v);
                }
                Err(e) => {
                    let broken = pg_unavailable(&e);
                    let fresh = lease.fresh;
                    // A failed statement inside an implicit transaction leaves
                    // the connection usable; a broken one is dropped.
                    self.checkin(lease, !broken);
                    if broken && retry && !fresh && attempt < 2 {
                        self.drain_idle();
                        continue;
                    }
                    return Err(self.pg_error(op, &e));
                }
            }
        }
    }

    /// Drop every idle connection (after one was found dead, the others
    /// probably are too: the server restarted).
    pub(super) fn drain_idle(&self) {
        let mut state = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let idle = std::mem::take(&mut state.idle);
        state.open -= idle.len();
        self.freed.notify_all();
        drop(state);
        drop_conns(idle);
    }
}
