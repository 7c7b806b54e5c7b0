//! A file store whose whole-log reads fail with an I/O error (`EMFILE`,
//! "too many open files": it says nothing about the log) while `failing`
//! is set: what a listing or a search catch-up must not take for an
//! unreadable session, nor consume a change over. It forwards `read` but
//! not `read_span` (the trait's default reads no span back), like a
//! wrapper written before spans: the search index must then keep its texts
//! inline (`search::a_store_that_cannot_read_its_spans_back_gets_inline_texts`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memoir::record::{Record, SessionMeta};
use memoir::store::file::FileStore;
use memoir::store::{Appended, Durability, Listed, LogStore, RawLog};

/// See the module docs.
#[derive(Debug)]
pub struct FlakyStore {
    /// The store every call goes to.
    pub store: FileStore,
    failing: AtomicBool,
}

impl FlakyStore {
    /// A file store in `dir`, failing its reads from the start when `failing`.
    pub fn new(dir: &Path, failing: bool) -> Self {
        FlakyStore {
            store: FileStore::new(dir, Durability::None),
            failing: failing.into(),
        }
    }

    /// Make whole-log reads fail (`true`) or succeed again.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }
}

impl LogStore for FlakyStore {
    fn create(&self, meta: &SessionMeta) -> memoir::Result<Appended> {
        self.store.create(meta)
    }
    fn append(
        &self,
        id: &str,
        records: &[Record],
        expected_next: Option<u64>,
    ) -> memoir::Result<Appended> {
        self.store.append(id, records, expected_next)
    }
    fn read(&self, id: &str) -> memoir::Result<RawLog> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(memoir::Error::Io {
                op: "read",
                path: self.store.location(id),
                source: std::io::Error::from_raw_os_error(24),
            });
        }
        self.store.read(id)
    }
    fn read_header(&self, id: &str) -> memoir::Result<Option<SessionMeta>> {
        self.store.read_header(id)
    }
    fn list(&self) -> memoir::Result<(Vec<Listed>, usize)> {
        self.store.list()
    }
    fn location(&self, id: &str) -> PathBuf {
        self.store.location(id)
    }
    fn durability(&self) -> Durability {
        self.store.durability()
    }
    fn index_dir(&self) -> Option<&Path> {
        self.store.index_dir()
    }
}
