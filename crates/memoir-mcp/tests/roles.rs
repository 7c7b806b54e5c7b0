//! Token roles on `memoir mcp --http`: every tool of the catalog against
//! every role (allowed, or refused with a JSON-RPC error naming the missing
//! role, and listed only when allowed), the ownership rule of a
//! `publish`-only member, and a run-time token (`memoir serve tokens
//! create`) accepted over a real loopback socket until it is revoked.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

use memoir::access::{self, Caller, Grant, Role};
use memoir::embed::HashEmbedder;
use memoir::message::Message;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir_mcp::{catalog, http, rules, Backend, McpConfig, MemoirMcp};
use serde_json::{json, Map, Value};

const PROJECT: &str = "web";

fn server(store: Arc<dyn LogStore>, index_root: &Path) -> MemoirMcp {
    MemoirMcp::new(McpConfig {
        backend: Backend::Tenants {
            store,
            index_root: index_root.to_path_buf(),
        },
        allow_writes: true,
        embedder: Arc::new(HashEmbedder::new(64)),
        blobs: None,
    })
}

fn caller(member: &str, project: &str, roles: &[Role]) -> Caller {
    Caller::new(
        None,
        member,
        &[Grant {
            project: project.to_string(),
            roles: roles.iter().copied().collect(),
        }],
    )
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Which roles allow each tool: the expectation, written independently of
/// [`rules::TOOL_RULES`].
fn expected(tool: &str) -> &'static [Role] {
    match tool {
        "search_sessions" | "recall" | "list_sessions" | "get_session" | "resume_command"
        | "list_notes" | "blame" => &[Role::Read],
        "remember" | "promote" | "forget" | "fork_session" => &[Role::Publish],
        "usage" => &[Role::Usage],
        other => panic!("tool {other:?} has no expected roles in this table: add it"),
    }
}

/// Every tool the server can offer (built from its own catalog, writes
/// included) × every role: the call is run or refused as the table says,
/// a refusal is JSON-RPC error -32003 naming the needed role, and the tool
/// list holds exactly the allowed tools.
#[test]
fn every_tool_is_allowed_or_refused_for_every_role() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let s = server(store, &dir.path().join("ix"));
    let tools: Vec<String> = catalog::tools(true)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(tools.len() >= 11, "{tools:?}");
    for tool in &tools {
        assert!(
            rules::rule_of(tool).is_some(),
            "tool {tool} has no access rule"
        );
    }
    for role in Role::ALL {
        let c = caller("ann", PROJECT, &[role]);
        let listed: BTreeSet<String> = s
            .tools_for(Some((&c, PROJECT)))
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        for tool in &tools {
            let allowed = expected(tool).contains(&role);
            assert_eq!(
                listed.contains(tool),
                allowed,
                "{tool} listed for role {role}"
            );
            match s.call_as(&c, PROJECT, tool, args(json!({}))) {
                Ok(_) if allowed => {}
                Ok(r) => panic!("{tool} ran for role {role}: {:?}", r.content),
                Err(e) if allowed => panic!("{tool} refused for role {role}: {e:?}"),
                Err(e) => {
                    assert_eq!(e.code, memoir_mcp::FORBIDDEN, "{tool}/{role}: {e:?}");
                    let need = expected(tool)[0].as_str();
                    assert!(
                        e.message.contains(&format!("needs the {need} role")),
                        "{tool}/{role}: {}",
                        e.message
                    );
                    let data = e.data.unwrap_or_default();
                    assert_eq!(data["needs"], json!([need]), "{tool}/{role}");
                }
            }
        }
    }
    // Every role, but on another project: nothing is listed or allowed.
    let other = caller("ann", "other", &Role::ALL);
    assert!(s.tools_for(Some((&other, PROJECT))).is_empty());
    for tool in &tools {
        let e = s
            .call_as(&other, PROJECT, tool, args(json!({})))
            .unwrap_err();
        assert_eq!(e.code, memoir_mcp::FORBIDDEN, "{tool}");
    }
}

/// A session of `project` created by `member`.
fn session_of(store: &Arc<dyn LogStore>, member: &str, text: &str) -> String {
    let mut m = memoir_server::namespace::project_manager_as(store.clone(), PROJECT, Some(member));
    let id = m.create_session(text, None).unwrap();
    m.add_message(Message::user(text)).unwrap();
    m.add_message(Message::assistant("noted")).unwrap();
    m.flush().unwrap();
    id
}

/// A `publish`-only member forks its own sessions, not another member's
/// (not found, as `memoir serve` answers); with `read` too it may, and the
/// fork names the member who made it.
#[test]
fn publish_without_read_acts_only_on_the_members_own_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    let anns = session_of(&store, "ann", "ann's design notes");
    let bobs = session_of(&store, "bob", "bob's design notes");
    let s = server(store.clone(), &dir.path().join("ix"));
    let bob = caller("bob", PROJECT, &[Role::Publish]);
    let fork =
        |c: &Caller, id: &str| s.call_as(c, PROJECT, "fork_session", args(json!({"id": id})));

    let own = fork(&bob, &bobs).unwrap();
    assert_ne!(own.is_error, Some(true), "{:?}", own.content);
    let others = fork(&bob, &anns).unwrap();
    assert_eq!(others.is_error, Some(true), "{:?}", others.content);
    assert_eq!(
        others.structured_content.unwrap()["error"],
        json!("not_found")
    );
    let promoted = s
        .call_as(
            &bob,
            PROJECT,
            "promote",
            args(json!({"fact": "ann's fact", "seqs": [1], "session": anns})),
        )
        .unwrap();
    assert_eq!(promoted.is_error, Some(true), "{:?}", promoted.content);

    let bob_reads = caller("bob", PROJECT, &[Role::Publish, Role::Read]);
    let r = fork(&bob_reads, &anns).unwrap();
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
    let forked = r.structured_content.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let ns = memoir_server::namespace::ProjectStore::new(store.clone(), PROJECT);
    let meta = ns.header(&forked).unwrap();
    assert_eq!(
        meta.extra.get(access::MEMBER_FIELD),
        Some(&json!("bob")),
        "{meta:?}"
    );
}

/// A server over `store` with its token book, on an ephemeral loopback port.
fn start(store: Arc<dyn LogStore>, dir: &Path) -> (tokio::runtime::Runtime, SocketAddr) {
    let book = access::book_of(&store);
    assert!(book.is_some(), "a file store keeps a token book");
    let s = server(store, &dir.join("ix"));
    let tokens = http::HttpTokens {
        index: memoir_server::TokenIndex::new(Vec::new()),
        book,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let router = http::router(s, Some(tokens), addr);
    rt.spawn(http::serve(listener, router, std::future::pending()));
    (rt, addr)
}

/// One POST to `/mcp`: the status, the response's headers and body.
fn post(addr: SocketAddr, token: &str, session: Option<&str>, body: &Value) -> (u16, String) {
    let body = body.to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\nAuthorization: Bearer {token}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\n",
        body.len()
    );
    if let Some(id) = session {
        req.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

fn session_id(response: &str) -> Option<String> {
    response.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_string())
    })
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// A token minted at run time in the store's book is accepted over HTTP,
/// its role checked per tool call, and refused (401 `token_revoked`) on
/// the request after its revocation, in a session it already opened too.
#[test]
fn a_run_time_token_works_until_it_is_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn LogStore> = Arc::new(FileStore::new(dir.path(), Durability::Flush));
    session_of(&store, "ann", "the wombat protocol");
    let book = access::book_of(&store).unwrap();
    let token = access::mint("ann", vec![Grant::parse("web=read").unwrap()], None).unwrap();
    book.insert(&token.entry).unwrap();
    let (_rt, addr) = start(store, dir.path());
    let secret = token.secret.as_str();

    let (status, response) = post(addr, secret, None, &initialize());
    assert_eq!(status, 200, "{response}");
    let session = session_id(&response);
    let notified = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, response) = post(addr, secret, session.as_deref(), &notified);
    assert!(status < 300, "{response}");

    let (status, response) = post(
        addr,
        secret,
        session.as_deref(),
        &call(2, "list_sessions", json!({})),
    );
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("wombat protocol"), "{response}");
    let (status, response) = post(
        addr,
        secret,
        session.as_deref(),
        &call(3, "remember", json!({"text": "a fact"})),
    );
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("-32003"), "{response}");
    assert!(response.contains("needs the publish role"), "{response}");

    assert!(book.revoke(&token.entry.id).unwrap());
    let (status, response) = post(
        addr,
        secret,
        session.as_deref(),
        &call(4, "list_sessions", json!({})),
    );
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("token_revoked"), "{response}");
    let (status, response) = post(addr, secret, None, &initialize());
    assert_eq!(status, 401, "{response}");

    // An unknown secret of the minted shape is refused as well.
    let (status, _) = post(addr, "memoir_0123456789abcdef_00", None, &initialize());
    assert_eq!(status, 401);
}
