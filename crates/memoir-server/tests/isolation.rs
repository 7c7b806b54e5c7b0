//! What `memoir serve` accepts from one project can neither reach another
//! project's data nor leave a log its own reader rejects: a record naming a
//! blob the project does not hold is refused (whatever form the reference
//! takes), and a batch holding a record the reader could not read back is
//! refused whole. On the file store and, when one is configured, on
//! PostgreSQL.

#[path = "../../memoir/tests/suite/postgres_common/mod.rs"]
mod postgres_common;

use std::sync::Arc;

use memoir::blob::{blob_ref, hash_bytes, BlobRef};
use memoir::client::{wire, Client};
use memoir::error::ErrorKind;
use memoir::message::{Block, Message, Role};
use memoir::record::Record;
use memoir::store::file::FileStore;
use memoir::store::postgres::VectorMode;
use memoir::store::Durability;
use memoir_server::{BackgroundServer, ServerConfig, TokenGrant};
use serde_json::json;

const TOKEN_A: &str = "isolation-token-project-a-0123";
const TOKEN_B: &str = "isolation-token-project-b-0123";

fn grants() -> Vec<TokenGrant> {
    [(TOKEN_A, "alpha"), (TOKEN_B, "beta")]
        .into_iter()
        .map(|(token, project)| TokenGrant {
            token: token.into(),
            project: project.into(),
            expires_at: None,
            ..TokenGrant::default()
        })
        .collect()
}

fn on_file(check: fn(ServerConfig)) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    check(ServerConfig::new(store, grants()));
}

fn on_postgres(check: fn(ServerConfig)) {
    if let Some((pg, _schema)) =
        postgres_common::pg_store(postgres_common::POSTGRES_URL, VectorMode::Auto)
    {
        check(ServerConfig::new(pg, grants()));
    }
}

fn client(server: &BackgroundServer, token: &str) -> Client {
    Client::new(&server.url(), Some(token.into())).unwrap()
}

fn create(c: &Client, id: &str) {
    c.create(&wire::CreateSession {
        id: Some(id.into()),
        ..Default::default()
    })
    .unwrap();
}

/// One record per place a reference to `hash` can hide: a reference object
/// in each payload field a reader resolves, a legacy reference string in
/// each payload block; each as a message and inside a rewrite.
fn referencing(hash: &str) -> Vec<Record> {
    let obj = BlobRef::new(hash.to_string(), "x", "text/plain").to_value();
    let raw = |v: serde_json::Value| Message::new(Role::User, vec![Block::Unknown(v)]);
    let legacy = blob_ref(hash);
    let messages = vec![
        raw(json!({"type": "text", "text": obj})),
        raw(json!({"type": "thinking", "text": obj, "signature": "s"})),
        raw(json!({"type": "tool_result", "tool_use_id": "c1", "content": obj})),
        raw(json!({"type": "image", "media_type": "image/png", "data": obj})),
        raw(json!({"type": "document", "source": {"type": "base64", "data": obj}})),
        Message::user(legacy.as_str()),
        Message::assistant(legacy.as_str()),
        Message::tool_result("c1", legacy.as_str(), false),
        Message::new(
            Role::User,
            vec![Block::Image {
                media_type: "image/png".into(),
                data: legacy.clone(),
            }],
        ),
    ];
    let mut out: Vec<Record> = messages.iter().cloned().map(Record::Message).collect();
    out.extend(
        messages
            .into_iter()
            .map(|m| Record::Rewrite { messages: vec![m] }),
    );
    out
}

fn blob_references_stay_in_their_project(config: ServerConfig) {
    let server = BackgroundServer::start(config).unwrap();
    let (a, b) = (client(&server, TOKEN_A), client(&server, TOKEN_B));
    let secret = b"alpha's private payload: the launch codes".to_vec();
    let hash = hash_bytes(&secret);
    create(&a, "a1");
    a.put_blob(&hash, &secret, "text/plain").unwrap();
    // The uploader may reference what it uploaded, and read it.
    a.append("a1", &referencing(&hash)[..1], None).unwrap();
    assert_eq!(a.get_blob(&hash).unwrap(), Some(secret.clone()));

    create(&b, "b1");
    for record in referencing(&hash) {
        let err = b
            .append("b1", std::slice::from_ref(&record), None)
            .expect_err(&format!("beta may not reference alpha's blob: {record:?}"));
        assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
        assert!(!err.to_string().contains("launch codes"), "{err}");
        assert_eq!(b.get_blob(&hash).unwrap(), None, "after {record:?}");
    }
    // Nothing of the refused appends was written, and nothing resolves.
    let log = b.log("b1").unwrap();
    assert!(log.records.is_empty(), "{:?}", log.records);
    // A blob nobody holds is refused the same way.
    let unknown = hash_bytes(b"nobody uploaded this");
    let err = b
        .append("b1", &referencing(&unknown)[..1], None)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");

    // Beta's own upload, even of the same bytes, is beta's to reference.
    let own = b"beta's own payload".to_vec();
    let own_hash = hash_bytes(&own);
    b.put_blob(&own_hash, &own, "text/plain").unwrap();
    b.append("b1", &referencing(&own_hash), None).unwrap();
    assert_eq!(b.get_blob(&own_hash).unwrap(), Some(own));
    b.put_blob(&hash, &secret, "text/plain").unwrap();
    b.append("b1", &referencing(&hash)[..1], None).unwrap();
    let log = b.log("b1").unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
}

#[test]
fn blob_references_stay_in_their_project_on_file() {
    on_file(blob_references_stay_in_their_project);
}

#[test]
fn blob_references_stay_in_their_project_on_postgres() {
    on_postgres(blob_references_stay_in_their_project);
}

/// Kinds the reader refuses: empty, or holding a character it cannot read
/// in place (every control character, a quote, a backslash).
fn unreadable_kinds() -> Vec<String> {
    let mut kinds = vec![String::new()];
    let specials = (0u32..0x20)
        .chain(0x7f..0xa0)
        .filter_map(char::from_u32)
        .chain(['"', '\\']);
    for c in specials {
        kinds.push(c.to_string());
        kinds.push(format!("goal{c}"));
    }
    kinds
}

fn acknowledged_batches_stay_readable(config: ServerConfig) {
    let server = BackgroundServer::start(config).unwrap();
    let a = client(&server, TOKEN_A);
    create(&a, "k");
    a.append("k", &[Record::Message(Message::user("kept"))], None)
        .unwrap();
    let bad: Vec<(String, Record)> = unreadable_kinds()
        .into_iter()
        .map(|kind| {
            let mut raw = serde_json::Map::new();
            raw.insert("x".into(), json!(1));
            (kind.clone(), Record::Unknown { kind, raw })
        })
        .collect();
    for (kind, record) in bad {
        let batch = [
            Record::Message(Message::user("same batch")),
            record,
            Record::Message(Message::assistant("after it")),
        ];
        match a.append("k", &batch, None) {
            Ok(r) => panic!("kind {kind:?} was acknowledged ({r:?})"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Invalid, "kind {kind:?}: {e}"),
        }
    }
    // A well-formed unknown kind in a batch is acknowledged and read back.
    let mut raw = serde_json::Map::new();
    raw.insert("x".into(), json!(1));
    a.append(
        "k",
        &[
            Record::Message(Message::user("next")),
            Record::Unknown {
                kind: "goal anchor/ü".into(),
                raw,
            },
        ],
        None,
    )
    .unwrap();
    let log = a.log("k").unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let texts: Vec<String> = log
        .records
        .iter()
        .filter_map(|r| match &r.record {
            Record::Message(m) => Some(m.text_content()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["kept", "next"]);
    assert_eq!(log.records.len(), 3);
}

#[test]
fn acknowledged_batches_stay_readable_on_file() {
    on_file(acknowledged_batches_stay_readable);
}

#[test]
fn acknowledged_batches_stay_readable_on_postgres() {
    on_postgres(acknowledged_batches_stay_readable);
}
