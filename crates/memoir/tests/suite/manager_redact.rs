//! Secret redaction for exports: every shipped rule replaces its secret with
//! its typed placeholder and leaves a near miss alone, and an export redacts
//! every text it can contain (title, messages, tool inputs and results,
//! thinking, system prompt, checkpoint).

use memoir::manager::redact::{
    parse_rules, placeholder, redact_messages, redact_text, redact_transcript, redact_value, rules,
    Redactions,
};
use memoir::manager::{ExportFormat, ExportOptions, ManagerOptions, SessionManager};
use memoir::message::{Block, Message, Role};
use memoir::record::{RunConfig, SessionMeta};
use memoir::transcript::Transcript;
use serde_json::json;

fn redact(text: &str) -> (String, Redactions) {
    let mut r = Redactions::default();
    let out = redact_text(text, &mut r).expect("shipped rules");
    (out, r)
}

fn assert_redacted(text: &str, secret: &str, rule: &str) {
    let (out, r) = redact(text);
    assert!(!out.contains(secret), "{rule}: secret kept in {out:?}");
    assert!(out.contains(&placeholder(rule)), "{rule}: {out:?}");
    assert_eq!(r.counts.get(rule), Some(&1), "{rule}: {r:?}");
    assert_eq!(r.total(), 1, "{rule}: one secret, one replacement: {r:?}");
}

fn assert_kept(text: &str) {
    let (out, r) = redact(text);
    assert_eq!(out, text, "near miss redacted");
    assert_eq!(r.total(), 0, "{r:?}");
}

/// Built at run time so that no complete secret-shaped literal sits in the
/// repository (secret scanners would flag this file).
fn cat(parts: &[&str]) -> String {
    parts.concat()
}

/// (rule id, text holding a secret, the secret, a near miss).
fn cases() -> Vec<(&'static str, String, String, String)> {
    let a36 = "abcdefghijklmnopqrstuvwxyz0123456789";
    let hex32 = "0123456789abcdef0123456789abcdef";
    let jwt = cat(&[
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        ".eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ]);
    let pem = cat(&[
        "-----BEGIN RSA ",
        "PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq\nabc+/=\n-----END RSA PRIVATE KEY-----",
    ]);
    let mut v: Vec<(&str, String, String, String)> = Vec::new();
    let mut add = |rule: &'static str, text: String, secret: String, miss: String| {
        v.push((rule, text, secret, miss));
    };
    add(
        "private-key",
        format!("id_rsa:\n{pem}\nbye"),
        "MIIEpAIBAAKCAQEA7bq".into(),
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----".into(),
    );
    add(
        "aws-access-token",
        "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE".into(),
        "AKIAIOSFODNN7EXAMPLE".into(),
        "id XAKIAIOSFODNN7EXAMPLE1 and akiaiosfodnn7example".into(),
    );
    add(
        "aws-secret-access-key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        "aws_secret_access_key = ${AWS_SECRET}".into(),
    );
    let anthropic = cat(&[
        "sk-ant-",
        "api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEf",
    ]);
    add(
        "anthropic-api-key",
        format!("x-api-key: {anthropic}"),
        anthropic,
        "sk-ant-api03-short".into(),
    );
    let openai = cat(&["sk-", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL"]);
    add(
        "openai-api-key",
        format!("OPENAI_API_KEY={openai}"),
        openai,
        "use sk-learn, risk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEF and --sk-this-is-not-a-key"
            .into(),
    );
    add(
        "github-pat",
        format!("token ghp_{a36}"),
        format!("ghp_{a36}"),
        "ghp_short is a prefix".into(),
    );
    add(
        "github-oauth",
        format!("gho_{a36}"),
        format!("gho_{a36}"),
        "gho_abc".into(),
    );
    add(
        "github-app-token",
        format!("GH_TOKEN=ghs_{a36}"),
        format!("ghs_{a36}"),
        "ghs_123".into(),
    );
    add(
        "github-refresh-token",
        format!("ghr_{a36}"),
        format!("ghr_{a36}"),
        "ghr_".into(),
    );
    let fine = cat(&[
        "github_pat_",
        "11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJ",
    ]);
    add(
        "github-fine-grained-pat",
        format!("GH={fine}"),
        fine,
        "github_pat_ is a prefix".into(),
    );
    add(
        "gitlab-pat",
        "GITLAB_TOKEN=glpat-Ab3dEf6hIj9kLm2nOp5q".into(),
        "glpat-Ab3dEf6hIj9kLm2nOp5q".into(),
        "glpat-short".into(),
    );
    add(
        "gitlab-ptt",
        format!("glptt-{hex32}01234567"),
        format!("glptt-{hex32}01234567"),
        "glptt-0123".into(),
    );
    add(
        "gitlab-rrt",
        "GR1348941Ab3dEf6hIj9kLm2nOp5q".into(),
        "GR1348941Ab3dEf6hIj9kLm2nOp5q".into(),
        "GR1348941short".into(),
    );
    let bot = cat(&[
        "xoxb-",
        "1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ]);
    add(
        "slack-bot-token",
        format!("SLACK_BOT_TOKEN={bot}"),
        bot,
        "xoxb-12-34 is too short".into(),
    );
    let user = cat(&[
        "xoxp-",
        "1234567890-1234567890-1234567890-abcdefabcdefabcdefabcdefabcdef12",
    ]);
    add(
        "slack-user-token",
        format!("token: {user}"),
        user,
        "xoxp-1234567890".into(),
    );
    add(
        "slack-legacy-token",
        "xoxs-12345-67890-12345-abcdef0123".into(),
        "xoxs-12345-67890-12345-abcdef0123".into(),
        "xoxs-12345".into(),
    );
    let legacy_bot = cat(&["xoxb-", "12345678-AbCdEfGhIjKlMnOpQrSt"]);
    add(
        "slack-legacy-bot-token",
        format!("bot {legacy_bot}"),
        legacy_bot,
        "xoxb-1234-abc".into(),
    );
    add(
        "slack-legacy-workspace-token",
        "xoxa-2-AbCdEfGhIjKl".into(),
        "xoxa-2-AbCdEfGhIjKl".into(),
        "xoxa-2-abc".into(),
    );
    add(
        "slack-app-token",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789".into(),
        "xapp-1-A0123456789-1234567890123-abcdef0123456789".into(),
        "xapp-one".into(),
    );
    let hook = cat(&[
        "https://hooks.slack.com/services/",
        "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXXabcdefgh",
    ]);
    add(
        "slack-webhook-url",
        format!("webhook {hook}"),
        "XXXXXXXXXXXXXXXXXXXXXXXXabcdefgh".into(),
        "see https://hooks.slack.com/services/ for setup".into(),
    );
    let google = cat(&["AIza", "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"]);
    add(
        "gcp-api-key",
        format!("key={google}&q=maps"),
        google,
        "AIzaSy-too-short and XAIza".into(),
    );
    let stripe = cat(&["sk_", "live_51H8abcdEFGHijklMNOPqrst"]);
    add(
        "stripe-access-token",
        format!("STRIPE_KEY={stripe}"),
        stripe,
        "sk_live_ is the prefix; pk_live_51H8abcdEFGHijklMNOPqrst is public".into(),
    );
    add(
        "npm-access-token",
        format!("//registry.npmjs.org/:_authToken=npm_{a36}"),
        format!("npm_{a36}"),
        "npm_config_cache".into(),
    );
    let pypi = cat(&[
        "pypi-AgEIcHlwaS5vcmc",
        "CJDU5ZWE0ZTBlLWYyMzctNDNkNy1iNDExLWFiY2RlZjAxMjM0NQACKlsz",
    ]);
    add(
        "pypi-upload-token",
        format!("password = {pypi}"),
        pypi,
        "pypi-AgEIcHlwaS5vcmc".into(),
    );
    add(
        "huggingface-access-token",
        "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzabcdefgh".into(),
        "hf_abcdefghijklmnopqrstuvwxyzabcdefgh".into(),
        "hf_hub_download".into(),
    );
    let sendgrid = cat(&[
        "SG.",
        "ngeVfQFYQlKU0ufo8x5d1A.TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    ]);
    add(
        "sendgrid-api-token",
        format!("SENDGRID={sendgrid} "),
        sendgrid,
        "SG.short".into(),
    );
    add(
        "digitalocean-pat",
        format!("dop_v1_{hex32}{hex32}"),
        format!("dop_v1_{hex32}{hex32}"),
        "dop_v1_abc".into(),
    );
    add(
        "shopify-access-token",
        format!("shpat_{hex32}"),
        format!("shpat_{hex32}"),
        "shpat_xyz".into(),
    );
    add(
        "databricks-api-token",
        format!("DATABRICKS_TOKEN=dapi{hex32}"),
        format!("dapi{hex32}"),
        "dapi123".into(),
    );
    let age = cat(&[
        "AGE-SECRET-KEY-1",
        "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE",
    ]);
    add(
        "age-secret-key",
        format!("# created\n{age}"),
        age,
        "AGE-SECRET-KEY-1 is the prefix".into(),
    );
    add(
        "linear-api-key",
        "lin_api_abcdefghijklmnopqrstuvwxyz0123456789ABCD".into(),
        "lin_api_abcdefghijklmnopqrstuvwxyz0123456789ABCD".into(),
        "lin_api_docs".into(),
    );
    add(
        "jwt",
        format!("Authorization: Bearer {jwt}"),
        jwt,
        "eyJhbGciOiJIUzI1NiJ9 is only a header".into(),
    );
    add(
        "url-password",
        "DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/prod".into(),
        "s3cr3t-Pa55".into(),
        "see https://example.com/a:b@c and mailto:bob@example.com, ssh git@github.com:org/x".into(),
    );
    add(
        "password-assignment",
        "password=hunter22".into(),
        "hunter22".into(),
        "the password field is required; passwordless: true; password = <your password>; password: ${DB_PASSWORD}".into(),
    );
    v
}

#[test]
fn shipped_rules_compile() {
    let r = rules().expect("the shipped rule file must parse and compile");
    assert!(r.len() >= 30, "{} rules", r.len());
    let sources: std::collections::BTreeSet<&str> = r.iter().map(|x| x.source.as_str()).collect();
    assert!(
        sources.contains("gitleaks") && sources.contains("memoir"),
        "{sources:?}"
    );
}

#[test]
fn every_rule_has_a_positive_and_a_near_miss_case() {
    let covered: std::collections::BTreeSet<&str> = cases().iter().map(|c| c.0).collect();
    for rule in rules().expect("rules") {
        assert!(
            covered.contains(rule.id.as_str()),
            "no test case for rule {}",
            rule.id
        );
        assert!(!rule.description.is_empty(), "{}", rule.id);
    }
}

#[test]
fn each_rule_redacts_its_secret() {
    for (rule, text, secret, _) in cases() {
        assert_redacted(&text, &secret, rule);
    }
}

#[test]
fn each_near_miss_is_kept() {
    for (_, _, _, miss) in cases() {
        assert_kept(&miss);
    }
}

#[test]
fn the_exact_replacements() {
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq\n-----END RSA PRIVATE KEY-----";
    let (out, _) = redact(&format!("id_rsa:\n{pem}\nbye"));
    assert_eq!(out, "id_rsa:\n[REDACTED:private-key]\nbye");
    // Cut off mid-block (truncated tool output): redacted to the end.
    let (out, _) = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA");
    assert_eq!(out, "[REDACTED:private-key]");
    let (out, _) = redact("DB_PASSWORD: 'c0rrect-horse'");
    assert_eq!(out, "DB_PASSWORD: '[REDACTED:password-assignment]'");
    let (out, _) = redact(r#"{"password": "s3cr3t!"}"#);
    assert_eq!(out, r#"{"password": "[REDACTED:password-assignment]"}"#);
    let (out, _) = redact("git clone https://bob:tok3n@git.example.com/x.git");
    assert_eq!(
        out,
        "git clone https://bob:[REDACTED:url-password]@git.example.com/x.git"
    );
    let (out, r) = redact(
        "two: xoxb-1234567890123-1234567890123-aaaa and xoxb-1234567890123-1234567890123-bbbb",
    );
    assert_eq!(r.total(), 2, "{out}");
}

#[test]
fn a_broken_rule_file_is_a_typed_error() {
    assert!(parse_rules("{}").is_err());
    let bad = r#"{"format":"memoir.redact-rules","version":1,"note":"","rules":[
        {"id":"x","source":"memoir","description":"d","regex":"(unclosed","group":0,"keywords":[]}]}"#;
    let e = parse_rules(bad).unwrap_err();
    assert!(e.to_string().contains("\"x\""), "{e}");
    let group = r#"{"format":"memoir.redact-rules","version":1,"note":"","rules":[
        {"id":"y","source":"memoir","description":"d","regex":"a","group":1,"keywords":[]}]}"#;
    assert!(parse_rules(group).is_err());
    let v2 = r#"{"format":"memoir.redact-rules","version":2,"note":"","rules":[]}"#;
    assert!(parse_rules(v2).is_err());
}

#[test]
fn messages_and_tool_inputs_are_scanned_everywhere() {
    let m = Message::new(
        Role::Assistant,
        vec![
            Block::Thinking {
                text: "use AKIAIOSFODNN7EXAMPLE".into(),
                signature: Some("sig".into()),
            },
            Block::ToolUse {
                id: "t1".into(),
                name: "login".into(),
                input: json!({"user": "bob", "password": "hunter2", "env": ["GH=ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}),
            },
        ],
    );
    let tool = Message::tool_result("t1", "password=hunter2 ok", false);
    let (out, r) = redact_messages(&[m, tool]).unwrap();
    assert_eq!(r.total(), 4, "{r:?}");
    let text = serde_json::to_string(&out).unwrap();
    for secret in ["AKIAIOSFODNN7EXAMPLE", "hunter2", "ghp_abc"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains(r#""user":"bob""#));
    assert!(text.contains(r#""signature":"sig""#));
    let mut r = Redactions::default();
    assert_eq!(
        redact_value(&json!({"password": "${X}"}), &mut r).unwrap(),
        json!({"password": "${X}"})
    );
}

const AWS: &str = "AKIAIOSFODNN7EXAMPLE";

#[test]
fn a_transcript_is_redacted_in_every_text_field() {
    let mut meta = SessionMeta::new("s1");
    meta.title = Some(format!("deploy with {AWS}"));
    let mut t = Transcript::new(meta);
    t.title = Some(format!("renamed: key {AWS}"));
    t.messages = vec![Message::user(format!("here: {AWS}"))];
    t.configs = vec![RunConfig {
        system_prompt: Some(format!("You may use {AWS}.")),
        ..RunConfig::default()
    }];
    t.checkpoint = Some(json!({"note": format!("k={AWS}")}));
    let (r, counts) = redact_transcript(&t).unwrap();
    assert_eq!(
        counts.counts.get("aws-access-token"),
        Some(&5),
        "{counts:?}"
    );
    let dump = format!(
        "{:?} {:?} {:?} {:?} {:?}",
        r.title, r.meta.title, r.messages, r.configs, r.checkpoint
    );
    assert!(!dump.contains(AWS), "{dump}");
    assert_eq!(
        r.title.as_deref(),
        Some("renamed: key [REDACTED:aws-access-token]")
    );
}

#[test]
fn an_export_redacts_the_title_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = SessionManager::for_project(dir.path(), ManagerOptions::default()).unwrap();
    let id = m
        .create_session("task", Some(&format!("rotate {AWS} today")))
        .unwrap();
    m.add_message(Message::user("hello")).unwrap();
    m.flush().unwrap();
    for format in [
        ExportFormat::Markdown,
        ExportFormat::Jsonl,
        ExportFormat::OpenAi,
    ] {
        let e = m
            .export(
                &id,
                ExportOptions {
                    format,
                    redact: true,
                },
            )
            .unwrap();
        assert!(!e.text.contains(AWS), "{format:?}: {}", e.text);
    }
    let md = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: true,
            },
        )
        .unwrap();
    assert!(
        md.text
            .starts_with("# rotate [REDACTED:aws-access-token] today\n"),
        "{}",
        md.text
    );
    // Replacements are counted per field: the current title and the header's.
    assert_eq!(md.redactions.counts.get("aws-access-token"), Some(&2));
    let plain = m
        .export(
            &id,
            ExportOptions {
                format: ExportFormat::Markdown,
                redact: false,
            },
        )
        .unwrap();
    assert!(
        plain.text.contains(AWS),
        "without --redact the export is verbatim"
    );
}
