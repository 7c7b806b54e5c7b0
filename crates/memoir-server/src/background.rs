//! A server on its own Tokio runtime in a background thread, for programs
//! that are not async but need a live `memoir serve` (tests, benchmarks,
//! language bindings, an MCP front that also serves HTTP). It binds before
//! [`BackgroundServer::start`] returns, so the address is ready to use, and
//! shuts down gracefully (in-flight requests finish) on
//! [`BackgroundServer::shutdown`] or drop.

use std::net::SocketAddr;
use std::thread::JoinHandle;

use crate::{serve, ServeError, ServerConfig};

/// A running server; stops when shut down or dropped.
#[derive(Debug)]
pub struct BackgroundServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

impl BackgroundServer {
    /// Serve `config` on a free port of 127.0.0.1.
    pub fn start(config: ServerConfig) -> Result<BackgroundServer, ServeError> {
        Self::start_on("127.0.0.1:0", config)
    }

    /// Serve `config` on `listen` (`host:port`; port 0 picks a free one),
    /// on a runtime of two worker threads.
    pub fn start_on(listen: &str, config: ServerConfig) -> Result<BackgroundServer, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(listen))?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("memoir-serve-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(serve(listener, config, async {
                    let _ = stop_rx.await;
                }))
            })?;
        Ok(BackgroundServer {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL, `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop accepting, wait for the requests in flight and for the server
    /// thread; returns how serving ended. Idempotent.
    pub fn shutdown(&mut self) -> Result<(), ServeError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServeError::Io(std::io::Error::other(
                "the server thread panicked",
            ))),
        }
    }
}

impl Drop for BackgroundServer {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
