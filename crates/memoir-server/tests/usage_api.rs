//! `GET /v1/usage` over loopback: project-scoped, the same numbers as the
//! library's report, bad input answered 400/401/404. One test in this binary
//! because it sets `$MEMOIR_HOME` (the server's price configuration).

use std::sync::Arc;

use memoir::message::{Message, Usage};
use memoir::record::SessionMeta;
use memoir::store::file::FileStore;
use memoir::store::{Durability, LogStore};
use memoir::transcript::Session;
use memoir::usage::{self, PriceTable, UsageQuery};
use memoir_server::namespace::ProjectStore;
use memoir_server::{ServerConfig, TokenGrant};

const TOKEN_A: &str = "token-for-project-a-0123456789";
const TOKEN_B: &str = "token-for-project-b-0123456789";

fn get(url: &str, token: Option<&str>) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut req = agent.get(url);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let mut resp = req.call().unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// A session of `project`, written through the server's namespace adapter
/// (stored as `project~id`).
fn session(store: &Arc<FileStore>, id: &str, project: &str, responses: &[(&str, u64, u64)]) {
    let mut meta = SessionMeta::new(id);
    meta.extra.insert("project".into(), project.into());
    let ns = Arc::new(ProjectStore::new(
        store.clone() as Arc<dyn LogStore>,
        project,
    ));
    let s = Session::create_in(ns, meta).unwrap();
    let messages: Vec<Message> = responses
        .iter()
        .map(|(pid, input, output)| {
            let mut m = Message::assistant("ok").with_usage(Usage {
                input_tokens: *input,
                output_tokens: *output,
                ..Usage::default()
            });
            m.provider_id = Some(pid.to_string());
            m.model = Some("claude-sonnet-4-5".into());
            m.timestamp = Some("2026-05-12T10:00:00Z".parse().unwrap());
            m
        })
        .collect();
    s.append_messages(&messages).unwrap();
}

#[test]
fn usage_endpoint_is_project_scoped_and_matches_the_library() {
    let home = tempfile::tempdir().unwrap();
    std::env::set_var("MEMOIR_HOME", home.path());
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::new(dir.path(), Durability::None));
    session(
        &store,
        "alpha-1",
        "alpha",
        &[("msg_1", 1000, 100), ("msg_2", 2000, 200)],
    );
    // A copy of msg_2 in another alpha session is counted once.
    session(
        &store,
        "alpha-2",
        "alpha",
        &[("msg_2", 2000, 200), ("msg_3", 5, 5)],
    );
    session(&store, "beta-1", "beta", &[("msg_9", 777, 7)]);

    let tokens = vec![
        TokenGrant {
            token: TOKEN_A.into(),
            project: "alpha".into(),
            expires_at: None,
            ..TokenGrant::default()
        },
        TokenGrant {
            token: TOKEN_B.into(),
            project: "beta".into(),
            expires_at: None,
            ..TokenGrant::default()
        },
    ];
    let config = ServerConfig::new(store.clone() as Arc<dyn LogStore>, tokens);
    let server = memoir_server::BackgroundServer::start(config).unwrap();
    let base = server.url();

    let (status, body) = get(&format!("{base}/v1/usage?by=session"), Some(TOKEN_A));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"]["input_tokens"], 3005);
    assert_eq!(body["total"]["requests"], 3);
    assert_eq!(body["duplicate_responses"], 1);
    assert_eq!(body["rows"].as_array().unwrap().len(), 2);
    // The same numbers as the library's report for the same selection.
    let alpha = ProjectStore::new(store.clone() as Arc<dyn LogStore>, "alpha");
    let direct = usage::report(
        &alpha,
        &UsageQuery {
            group_by: vec![usage::GroupKey::Session],
            ..UsageQuery::default()
        },
        &PriceTable::shipped().unwrap(),
    )
    .unwrap();
    // (Both through JSON text, so floats parse the same way.)
    let direct: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&direct).unwrap()).unwrap();
    assert_eq!(body, direct);

    let (status, body) = get(&format!("{base}/v1/usage?by=day,model"), Some(TOKEN_B));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"]["input_tokens"], 777);
    assert_eq!(body["rows"][0]["group"]["day"], "2026-05-12");

    let (status, body) = get(&format!("{base}/v1/usage?session=beta-1"), Some(TOKEN_A));
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&format!("{base}/v1/usage?session=alpha-2"), Some(TOKEN_A));
    assert_eq!(
        (status, body["total"]["input_tokens"].clone()),
        (200, 5.into())
    );
    let (status, _) = get(&format!("{base}/v1/usage?by=fortnight"), Some(TOKEN_A));
    assert_eq!(status, 400);
    let (status, _) = get(&format!("{base}/v1/usage?since=yesterday"), Some(TOKEN_A));
    assert_eq!(status, 400);
    let (status, _) = get(&format!("{base}/v1/usage"), None);
    assert_eq!(status, 401);
    let (status, body) = get(&format!("{base}/v1/usage?blocks=true"), Some(TOKEN_A));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["blocks"].as_array().unwrap().len(), 1);

    let mut server = server;
    server.shutdown().unwrap();
}
