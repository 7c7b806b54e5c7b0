//! Redaction of high-confidence secrets in exported sessions (feature
//! `redact`).
//!
//! The rules are data: `rules.json` next to this file (format
//! `memoir.redact-rules` v1), embedded at build time. Most are ported from
//! gitleaks' default rule set (MIT; its notice is in `LICENSE-gitleaks` next
//! to the data), plus memoir's own rules for passwords in URLs and
//! `password = ...` assignments and a wider OpenAI key shape. Each match is
//! replaced by a typed placeholder, `[REDACTED:<rule id>]`; values that name
//! a secret rather than hold one (`${DB_PASSWORD}`, `<password>`, `%PASS%`)
//! are left alone.
//!
//! [`redact_transcript`] covers every text an export can contain: the title,
//! every message (text, thinking, tool inputs as JSON string values, tool
//! results, vendor data), every run configuration's system prompt and the
//! checkpoint value.

use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

pub use super::redactions::Redactions;
use crate::message::{Block, Message};
use crate::transcript::Transcript;

/// The rule file, as shipped.
pub const RULES_JSON: &str = include_str!("rules.json");

/// The `format` named by [`RULES_JSON`].
pub const RULES_FORMAT: &str = "memoir.redact-rules";

/// One rule as written in the data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    id: String,
    source: String,
    description: String,
    regex: String,
    group: usize,
    keywords: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    format: String,
    version: u32,
    #[allow(dead_code)]
    note: String,
    rules: Vec<RuleSpec>,
}

/// A compiled rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable name, used in the placeholder (`aws-access-token`).
    pub id: String,
    /// Where the rule comes from: `gitleaks` or `memoir`.
    pub source: String,
    /// What it finds.
    pub description: String,
    regex: Regex,
    group: usize,
    keywords: Vec<String>,
}

impl Rule {
    /// The placeholder that replaces a secret found by this rule.
    pub fn placeholder(&self) -> String {
        placeholder(&self.id)
    }
}

/// The placeholder for a secret found by the rule named `id`.
pub fn placeholder(id: &str) -> String {
    format!("[REDACTED:{id}]")
}

/// Why the rule data could not be used (a build defect: the shipped data is
/// checked by the tests).
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The file is not the expected JSON.
    #[error("redaction rules: {0}")]
    Json(#[from] serde_json::Error),
    /// Wrong format name or version.
    #[error("redaction rules: format {format:?} v{version} (expected {RULES_FORMAT:?} v1)")]
    Format {
        /// The format named.
        format: String,
        /// The version named.
        version: u32,
    },
    /// A rule's regex does not compile, or names a missing group.
    #[error("redaction rule {id:?}: {detail}")]
    Rule {
        /// The rule.
        id: String,
        /// What is wrong.
        detail: String,
    },
}

/// Parse and compile a rule file in the `memoir.redact-rules` v1 format.
pub fn parse_rules(json: &str) -> Result<Vec<Rule>, RuleError> {
    let file: RuleFile = serde_json::from_str(json)?;
    if file.format != RULES_FORMAT || file.version != 1 {
        return Err(RuleError::Format {
            format: file.format,
            version: file.version,
        });
    }
    file.rules
        .into_iter()
        .map(|spec| {
            let regex = Regex::new(&spec.regex).map_err(|e| RuleError::Rule {
                id: spec.id.clone(),
                detail: e.to_string(),
            })?;
            if spec.group >= regex.captures_len() {
                return Err(RuleError::Rule {
                    id: spec.id,
                    detail: format!("no capture group {}", spec.group),
                });
            }
            Ok(Rule {
                id: spec.id,
                source: spec.source,
                description: spec.description,
                regex,
                group: spec.group,
                keywords: spec.keywords.iter().map(|k| k.to_lowercase()).collect(),
            })
        })
        .collect()
}

/// The shipped rules, compiled once, or why the shipped data is unusable
/// (a build defect, caught by `tests/suite/manager_redact.rs`).
pub fn rules() -> Result<&'static [Rule], &'static RuleError> {
    static RULES: LazyLock<Result<Vec<Rule>, RuleError>> =
        LazyLock::new(|| parse_rules(RULES_JSON));
    RULES.as_ref().map(Vec::as_slice)
}

fn shipped_rules() -> crate::Result<&'static [Rule]> {
    rules().map_err(|e| crate::Error::Invalid(e.to_string()))
}

/// Values that name a secret rather than hold one.
fn is_placeholder(value: &str) -> bool {
    value.starts_with(['$', '<', '{', '%', '*', '['])
}

/// Redact one string with `rules`; counts go to `out`.
pub fn redact_text_with(rules: &[Rule], text: &str, out: &mut Redactions) -> String {
    let mut text = text.to_string();
    let mut lower = text.to_lowercase();
    for rule in rules {
        if !rule.keywords.is_empty() && !rule.keywords.iter().any(|k| lower.contains(k.as_str())) {
            continue;
        }
        let mut replaced = String::with_capacity(text.len());
        let mut last = 0;
        let mut n = 0;
        for caps in rule.regex.captures_iter(&text) {
            let Some(secret) = caps.get(rule.group) else {
                continue;
            };
            if secret.as_str().is_empty() || is_placeholder(secret.as_str()) {
                continue;
            }
            replaced.push_str(&text[last..secret.start()]);
            replaced.push_str(&rule.placeholder());
            last = secret.end();
            n += 1;
        }
        if n > 0 {
            replaced.push_str(&text[last..]);
            text = replaced;
            lower = text.to_lowercase();
            out.add(&rule.id, n);
        }
    }
    text
}

/// Redact one string with the shipped rules; counts go to `out`.
pub fn redact_text(text: &str, out: &mut Redactions) -> crate::Result<String> {
    Ok(redact_text_with(shipped_rules()?, text, out))
}

/// The rule id used for a string value under a `password`-like JSON key.
pub const PASSWORD_KEY_RULE: &str = "password-assignment";

fn is_password_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with("password") || key.ends_with("passwd")
}

/// Redact every string inside a JSON value (keys are kept; a
/// `password`-like key's string value is replaced whole).
pub fn redact_value(value: &Value, out: &mut Redactions) -> crate::Result<Value> {
    Ok(Walker::new(out)?.value(value))
}

/// A copy of `m` with every secret replaced.
pub fn redact_message(m: &Message, out: &mut Redactions) -> crate::Result<Message> {
    Ok(Walker::new(out)?.message(m))
}

/// Copies of `messages` with every secret replaced, and the counts.
pub fn redact_messages(messages: &[Message]) -> crate::Result<(Vec<Message>, Redactions)> {
    let mut out = Redactions::default();
    let mut w = Walker::new(&mut out)?;
    let redacted = messages.iter().map(|m| w.message(m)).collect();
    Ok((redacted, out))
}

/// A copy of `t` with every secret replaced in every text an export can
/// show: the title (current and the header's), the messages, the system
/// prompt of every run configuration and the checkpoint value.
pub fn redact_transcript(t: &Transcript) -> crate::Result<(Transcript, Redactions)> {
    let mut out = Redactions::default();
    let mut w = Walker::new(&mut out)?;
    let mut r = t.clone();
    r.title = t.title.as_deref().map(|s| w.text(s));
    r.meta.title = t.meta.title.as_deref().map(|s| w.text(s));
    r.messages = t.messages.iter().map(|m| w.message(m)).collect();
    for c in &mut r.configs {
        if let Some(p) = &c.system_prompt {
            c.system_prompt = Some(w.text(p));
        }
    }
    r.checkpoint = t.checkpoint.as_ref().map(|v| w.value(v));
    Ok((r, out))
}

/// Walks a structure with the shipped rules, counting into one report.
struct Walker<'a> {
    rules: &'static [Rule],
    out: &'a mut Redactions,
}

impl<'a> Walker<'a> {
    fn new(out: &'a mut Redactions) -> crate::Result<Self> {
        Ok(Walker {
            rules: shipped_rules()?,
            out,
        })
    }

    fn text(&mut self, s: &str) -> String {
        redact_text_with(self.rules, s, self.out)
    }

    fn value(&mut self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(obj) => Value::Object(self.object(obj)),
            other => other.clone(),
        }
    }

    fn object(&mut self, obj: &Map<String, Value>) -> Map<String, Value> {
        obj.iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s)
                        if is_password_key(k) && !s.is_empty() && !is_placeholder(s) =>
                    {
                        self.out.add(PASSWORD_KEY_RULE, 1);
                        Value::String(placeholder(PASSWORD_KEY_RULE))
                    }
                    other => self.value(other),
                };
                (k.clone(), v)
            })
            .collect()
    }

    fn message(&mut self, m: &Message) -> Message {
        let content = m
            .content
            .iter()
            .map(|b| match b {
                Block::Text { text } => Block::Text {
                    text: self.text(text),
                },
                Block::Thinking { text, signature } => Block::Thinking {
                    text: self.text(text),
                    signature: signature.clone(),
                },
                Block::ToolUse { id, name, input } => Block::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: self.value(input),
                },
                Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => Block::ToolResult {
                    tool_use_id: tool_use_id.clone(),
                    content: self.text(content),
                    is_error: *is_error,
                },
                Block::Image { .. } => b.clone(),
                Block::Unknown(v) => Block::Unknown(self.value(v)),
            })
            .collect();
        Message {
            content,
            extra: self.object(&m.extra),
            ..m.clone()
        }
    }
}
