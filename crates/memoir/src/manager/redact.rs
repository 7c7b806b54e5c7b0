//! Redaction of high-confidence secrets in exported sessions.
//!
//! Each match is replaced by a typed placeholder, `[REDACTED:<kind>]` (see
//! [`SecretKind`]). Only shapes that are very unlikely to be anything but a
//! secret are matched: provider key formats with their fixed prefixes and
//! lengths, PEM private key blocks, three-part JWTs starting `eyJ`, and
//! values assigned to a `password`-like name (placeholders such as
//! `${DB_PASSWORD}` or `<password>` are left alone). Every string of a
//! message is scanned: text, thinking, tool inputs (JSON values, with
//! `password`-like keys), tool results and vendor data.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value};

use crate::message::{Block, Message};

/// The kinds of secrets recognised, in the order they are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretKind {
    /// A PEM `-----BEGIN ... PRIVATE KEY-----` block (to its END line, or to
    /// the end of the text when cut off).
    PrivateKey,
    /// An AWS access key id (`AKIA...`, `ASIA...`, 20 characters).
    AwsAccessKey,
    /// The value of an `aws_secret_access_key` assignment (40 characters).
    AwsSecretKey,
    /// An Anthropic API key (`sk-ant-api03-...`).
    AnthropicApiKey,
    /// An OpenAI API key (`sk-` + 32 or more alphanumerics, or `sk-proj-...`).
    OpenAiApiKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A JSON Web Token (`eyJ...` `.` `eyJ...` `.` signature).
    Jwt,
    /// The value assigned to a name ending in `password` or `passwd`
    /// (`password=...`, `DB_PASSWORD: ...`, `"password": "..."`).
    Password,
}

impl SecretKind {
    /// The name used in the placeholder.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "private_key",
            SecretKind::AwsAccessKey => "aws_access_key",
            SecretKind::AwsSecretKey => "aws_secret_key",
            SecretKind::AnthropicApiKey => "anthropic_api_key",
            SecretKind::OpenAiApiKey => "openai_api_key",
            SecretKind::GithubToken => "github_token",
            SecretKind::Jwt => "jwt",
            SecretKind::Password => "password",
        }
    }

    /// The placeholder that replaces a secret of this kind.
    pub fn placeholder(self) -> String {
        format!("[REDACTED:{}]", self.as_str())
    }
}

/// How many secrets of each kind were replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactions {
    /// Count per kind.
    pub counts: BTreeMap<SecretKind, usize>,
}

impl Redactions {
    /// Total replacements.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }

    fn add(&mut self, kind: SecretKind, n: usize) {
        if n > 0 {
            *self.counts.entry(kind).or_default() += n;
        }
    }
}

/// Patterns whose whole match is the secret.
fn whole_match_rules() -> &'static [(SecretKind, Regex)] {
    static RULES: OnceLock<Vec<(SecretKind, Regex)>> = OnceLock::new();
    RULES.get_or_init(|| {
        [
            (
                SecretKind::PrivateKey,
                r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            ),
            (
                SecretKind::AwsAccessKey,
                r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
            ),
            (
                SecretKind::AnthropicApiKey,
                r"\bsk-ant-[a-z]+[0-9]{2}-[A-Za-z0-9_-]{20,}",
            ),
            (
                SecretKind::OpenAiApiKey,
                r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{32,})",
            ),
            (
                SecretKind::GithubToken,
                r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
            ),
            (
                SecretKind::Jwt,
                r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{8,}",
            ),
        ]
        .into_iter()
        .map(|(kind, pattern)| (kind, compile(pattern)))
        .collect()
    })
}

/// Patterns whose group 1 is the name and group 2 the (possibly quoted) secret.
fn assignment_rules() -> &'static [(SecretKind, Regex)] {
    static RULES: OnceLock<Vec<(SecretKind, Regex)>> = OnceLock::new();
    RULES.get_or_init(|| {
        [
            (
                SecretKind::AwsSecretKey,
                r#"(?i)(\baws_?secret_?access_?key["']?\s*[:=]\s*)("[A-Za-z0-9/+=]{40}"|'[A-Za-z0-9/+=]{40}'|[A-Za-z0-9/+=]{40})"#,
            ),
            (
                SecretKind::Password,
                r#"(?i)(\b[a-z0-9_]*(?:password|passwd)["']?\s*[:=]\s*)("[^"\s]{3,}"|'[^'\s]{3,}'|[^\s"',;]{3,})"#,
            ),
        ]
        .into_iter()
        .map(|(kind, pattern)| (kind, compile(pattern)))
        .collect()
    })
}

fn compile(pattern: &str) -> Regex {
    // The patterns are constants of this module; a failure is a bug caught by its tests.
    Regex::new(pattern).unwrap_or_else(|e| panic!("redaction pattern {pattern:?}: {e}"))
}

/// Values that name a secret rather than hold one.
fn is_placeholder(value: &str) -> bool {
    value.starts_with(['$', '<', '{', '%', '*', '['])
}

/// Redact one string; counts go to `out`.
pub fn redact_text(text: &str, out: &mut Redactions) -> String {
    let mut text = text.to_string();
    for (kind, re) in whole_match_rules() {
        let n = re.find_iter(&text).count();
        if n > 0 {
            text = re.replace_all(&text, kind.placeholder()).into_owned();
            out.add(*kind, n);
        }
    }
    for (kind, re) in assignment_rules() {
        let mut n = 0;
        let replaced = re.replace_all(&text, |c: &Captures| {
            let value = &c[2];
            let (quote, inner) = match value.chars().next() {
                Some(q @ ('"' | '\'')) => (q.to_string(), &value[1..value.len() - 1]),
                _ => (String::new(), value),
            };
            if is_placeholder(inner) {
                return c[0].to_string();
            }
            n += 1;
            format!("{}{quote}{}{quote}", &c[1], kind.placeholder())
        });
        let replaced = replaced.into_owned();
        out.add(*kind, n);
        text = replaced;
    }
    text
}

fn is_password_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with("password") || key.ends_with("passwd")
}

/// Redact every string inside a JSON value (a `password`-like key's string
/// value is replaced whole).
pub fn redact_value(value: &Value, out: &mut Redactions) -> Value {
    match value {
        Value::String(s) => Value::String(redact_text(s, out)),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_value(v, out)).collect()),
        Value::Object(obj) => Value::Object(redact_object(obj, out)),
        other => other.clone(),
    }
}

fn redact_object(obj: &Map<String, Value>, out: &mut Redactions) -> Map<String, Value> {
    obj.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) if is_password_key(k) && !s.is_empty() && !is_placeholder(s) => {
                    out.add(SecretKind::Password, 1);
                    Value::String(SecretKind::Password.placeholder())
                }
                other => redact_value(other, out),
            };
            (k.clone(), v)
        })
        .collect()
}

/// A copy of `m` with every secret replaced.
pub fn redact_message(m: &Message, out: &mut Redactions) -> Message {
    let content = m
        .content
        .iter()
        .map(|b| match b {
            Block::Text { text } => Block::Text {
                text: redact_text(text, out),
            },
            Block::Thinking { text, signature } => Block::Thinking {
                text: redact_text(text, out),
                signature: signature.clone(),
            },
            Block::ToolUse { id, name, input } => Block::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: redact_value(input, out),
            },
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Block::ToolResult {
                tool_use_id: tool_use_id.clone(),
                content: redact_text(content, out),
                is_error: *is_error,
            },
            Block::Image { .. } => b.clone(),
            Block::Unknown(v) => Block::Unknown(redact_value(v, out)),
        })
        .collect();
    Message {
        content,
        extra: redact_object(&m.extra, out),
        ..m.clone()
    }
}

/// Copies of `messages` with every secret replaced, and the counts.
pub fn redact_messages(messages: &[Message]) -> (Vec<Message>, Redactions) {
    let mut out = Redactions::default();
    let redacted = messages
        .iter()
        .map(|m| redact_message(m, &mut out))
        .collect();
    (redacted, out)
}
