//! The manager keeps the cross-session search index current: what is appended, renamed, forked or deleted through a
//! `SessionManager` with an attached `SearchIndex` is searchable (or gone)
//! without `memoir index`, and an index failure never fails the write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use memoir::manager::{ManagerOptions, SessionManager};
use memoir::message::Message;
use memoir::search::{SearchIndex, SearchMode, SearchQuery};

fn options() -> ManagerOptions {
    ManagerOptions {
        durability: memoir::store::Durability::None,
        flush_interval: Duration::from_secs(3600),
        ..ManagerOptions::default()
    }
}

fn lexical(text: &str) -> SearchQuery {
    SearchQuery {
        mode: SearchMode::Lexical,
        ..SearchQuery::new(text)
    }
}

fn sessions_found(index: &Mutex<SearchIndex>, text: &str) -> Vec<String> {
    let index = index.lock().unwrap();
    let mut ids: Vec<String> = index
        .search(&lexical(text))
        .unwrap()
        .into_iter()
        .map(|h| h.session)
        .collect();
    ids.dedup();
    ids
}

#[test]
fn appends_through_the_manager_are_searchable_without_an_index_run() {
    let dir = tempfile::tempdir().unwrap();
    let index = Arc::new(Mutex::new(SearchIndex::open(dir.path()).unwrap()));
    let mut m = SessionManager::open(dir.path(), options())
        .unwrap()
        .with_search_index(index.clone());
    let id = m.create_session("plan the zebra migration", None).unwrap();
    m.add_message(Message::assistant("the walrus schema needs a backfill"))
        .unwrap();
    m.flush().unwrap();
    assert_eq!(sessions_found(&index, "walrus"), std::slice::from_ref(&id));
    assert_eq!(sessions_found(&index, "zebra"), std::slice::from_ref(&id));
    assert!(!m.search_index_stale());
    // Other sessions written through the manager, and a fork's own turns.
    m.append_session_messages("side", vec![Message::user("a narwhal appears")])
        .unwrap();
    assert_eq!(sessions_found(&index, "narwhal"), ["side"]);
    // Deleting drops the session from the index; restoring brings it back.
    assert!(m.delete_session("side").unwrap());
    assert!(sessions_found(&index, "narwhal").is_empty());
    m.restore_session("side").unwrap();
    assert_eq!(sessions_found(&index, "narwhal"), ["side"]);
}

/// The control: the same writes without the hook are not in the index until
/// an update (so the test above can fail).
#[test]
fn without_the_hook_the_index_lags_until_updated() {
    let dir = tempfile::tempdir().unwrap();
    let index = Arc::new(Mutex::new(SearchIndex::open(dir.path()).unwrap()));
    let mut m = SessionManager::open(dir.path(), options()).unwrap();
    let id = m.create_session("plan the zebra migration", None).unwrap();
    m.flush().unwrap();
    assert!(sessions_found(&index, "zebra").is_empty());
    index.lock().unwrap().update().unwrap();
    assert_eq!(sessions_found(&index, "zebra"), [id]);
}
