//! Secret redaction for exports: each kind is replaced by its typed
//! placeholder, and a near miss of each kind is left alone.

use memoir::manager::redact::{redact_messages, redact_text, redact_value, Redactions, SecretKind};
use memoir::message::{Block, Message, Role};
use serde_json::json;

fn redact(text: &str) -> (String, Redactions) {
    let mut r = Redactions::default();
    let out = redact_text(text, &mut r);
    (out, r)
}

fn assert_redacted(text: &str, secret: &str, kind: SecretKind) {
    let (out, r) = redact(text);
    assert!(!out.contains(secret), "{kind:?} kept in {out:?}");
    assert!(out.contains(&kind.placeholder()), "{kind:?}: {out:?}");
    assert_eq!(r.counts.get(&kind), Some(&1), "{kind:?}: {r:?}");
}

fn assert_kept(text: &str) {
    let (out, r) = redact(text);
    assert_eq!(out, text, "near miss redacted");
    assert_eq!(r.total(), 0);
}

#[test]
fn aws_keys() {
    assert_redacted(
        "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
        SecretKind::AwsAccessKey,
    );
    assert_redacted(
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        SecretKind::AwsSecretKey,
    );
    // Too short, lowercase, embedded in a longer word.
    assert_kept("id AKIAIOSFODNN7EXAMP is truncated");
    assert_kept("akiaiosfodnn7example");
    assert_kept("XAKIAIOSFODNN7EXAMPLE1");
    assert_kept("aws_secret_access_key = ${AWS_SECRET}");
}

#[test]
fn provider_api_keys() {
    let openai = "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL";
    assert_redacted(
        &format!("OPENAI_API_KEY={openai}"),
        openai,
        SecretKind::OpenAiApiKey,
    );
    let project = "sk-proj-Ab3_dE4-fG5hI6jK7lM8nO9pQ0rS1tU2vW3xY4zA5bC6dE7fG8hI9";
    assert_redacted(
        &format!("key: {project}"),
        project,
        SecretKind::OpenAiApiKey,
    );
    let anthropic = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEf";
    assert_redacted(
        &format!("x-api-key: {anthropic}"),
        anthropic,
        SecretKind::AnthropicApiKey,
    );
    assert_kept("use sk-learn and sk-1234 for the demo");
    assert_kept("the flag is --sk-this-is-not-a-key-at-all-really-not");
    assert_kept("risk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEF");
}

#[test]
fn github_tokens() {
    let classic = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    assert_redacted(
        &format!("token {classic}"),
        classic,
        SecretKind::GithubToken,
    );
    let fine =
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123";
    assert_redacted(&format!("GH={fine}"), fine, SecretKind::GithubToken);
    assert_kept("ghp_short and github_pat_ are prefixes");
}

#[test]
fn private_key_blocks() {
    let block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq\nabc+/=\n-----END RSA PRIVATE KEY-----";
    let (out, r) = redact(&format!("id_rsa:\n{block}\nbye"));
    assert_eq!(out, "id_rsa:\n[REDACTED:private_key]\nbye");
    assert_eq!(r.total(), 1);
    // Cut off mid-block (truncated tool output): redacted to the end.
    let (out, _) = redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA");
    assert_eq!(out, "[REDACTED:private_key]");
    assert_kept("-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqh\n-----END PUBLIC KEY-----");
}

#[test]
fn jwts() {
    let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert_redacted(
        &format!("Authorization: Bearer {jwt}"),
        jwt,
        SecretKind::Jwt,
    );
    assert_kept("eyJhbGciOiJIUzI1NiJ9 is only a header");
}

#[test]
fn password_assignments() {
    assert_redacted("password=hunter22", "hunter22", SecretKind::Password);
    assert_redacted(
        "DB_PASSWORD: 'c0rrect-horse'",
        "c0rrect",
        SecretKind::Password,
    );
    let (out, _) = redact("DB_PASSWORD: 'c0rrect-horse'");
    assert_eq!(out, "DB_PASSWORD: '[REDACTED:password]'");
    let (out, _) = redact(r#"{"password": "s3cr3t!"}"#);
    assert_eq!(out, r#"{"password": "[REDACTED:password]"}"#);
    assert_kept("password: ${DB_PASSWORD}");
    assert_kept("the password field is required");
    assert_kept("passwordless: true");
    assert_kept("password = <your password>");
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
    let (out, r) = redact_messages(&[m, tool]);
    assert_eq!(r.total(), 4, "{r:?}");
    let text = serde_json::to_string(&out).unwrap();
    for secret in ["AKIAIOSFODNN7EXAMPLE", "hunter2", "ghp_abc"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains(r#""user":"bob""#));
    assert!(text.contains(r#""signature":"sig""#));
    let mut r = Redactions::default();
    assert_eq!(
        redact_value(&json!({"password": "${X}"}), &mut r),
        json!({"password": "${X}"})
    );
}
