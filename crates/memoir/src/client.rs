//! The blocking HTTP client of `memoir serve`, and the JSON shapes both sides use.
//!
//! This module owns:
//! - [`wire`]: the request and response bodies of the HTTP API (the server
//!   crate `memoir-server` serialises the same types), and the conversions
//!   between a verified [`RawLog`] and its JSON form;
//! - [`Client`] (feature `client`): one method per endpoint (create, append, load, list, fork,
//!   export, delete, restore, search), with typed [`Error`]s: 404 is
//!   [`Error::NotFound`], 409 is [`Error::Conflict`] or
//!   [`Error::SessionExists`], 423 is [`Error::Busy`], 501 is
//!   [`crate::error::StoreError::Unsupported`], 503 and refused connections
//!   are [`crate::error::StoreError::Unavailable`] (retry later);
//! - [`RemoteStore`] (feature `client`): a [`LogStore`] over a server, so every
//!   [`crate::transcript::Session`] API works against a remote store.
//!
//! The API is documented in `docs/SERVER.md`.

#[cfg(feature = "client")]
use std::path::PathBuf;
#[cfg(feature = "client")]
use std::time::Duration;

#[cfg(feature = "client")]
use crate::error::{Error, Result};
#[cfg(feature = "client")]
use crate::record::{Record, SessionMeta};
#[cfg(feature = "client")]
use crate::store::{Appended, Durability, Listed, LogStore, RawLog};

pub mod wire {
    //! Request and response bodies of the HTTP API (JSON).

    use serde::{Deserialize, Serialize};
    use serde_json::{Map, Value};

    use crate::record::{ForkPoint, Record, SessionMeta};
    use crate::store::{Issue, IssueKind, LoadReport, RawLog, SeqRecord};

    /// `POST /v1/sessions`: a full header, or just some fields of one.
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CreateSession {
        /// A complete header (id, created_at, ...). Wins over the fields below.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub meta: Option<SessionMeta>,
        /// Session id (default: a new one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub id: Option<String>,
        /// Title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
        /// Model provider.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub provider: Option<String>,
        /// Model name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model: Option<String>,
        /// Free-form kind.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub kind: Option<String>,
    }

    /// A created session.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Created {
        /// Its id.
        pub id: String,
        /// Its header as stored (with the project the token named).
        pub meta: SessionMeta,
    }

    /// `POST /v1/sessions/{id}/records`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct AppendRequest {
        /// Record objects, each with its `"record"` tag (e.g.
        /// `{"record":"message","role":"user","content":[...]}`).
        #[serde(default)]
        pub records: Vec<Map<String, Value>>,
        /// Messages, as a shorthand for `message` records (after `records`).
        #[serde(default)]
        pub messages: Vec<crate::message::Message>,
        /// Fail with 409 unless the first record gets this `seq`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub expected_seq: Option<u64>,
    }

    /// What an append wrote.
    #[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
    pub struct AppendResponse {
        /// `seq` of the first record written.
        pub first_seq: u64,
        /// `seq` of the last record written.
        pub last_seq: u64,
    }

    /// One record with its `seq`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct WireRecord {
        /// Its sequence number.
        pub seq: u64,
        /// The record object (with its `"record"` tag).
        pub record: Map<String, Value>,
    }

    /// One problem found while verifying a stored log.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
    pub struct WireIssue {
        /// Line number or row ordinal (1-based).
        pub line: u64,
        /// Byte offset of the line.
        pub offset: u64,
        /// The `seq` at which the chain breaks.
        pub seq: u64,
        /// `blank`, `corrupt`, `out_of_order`, `torn_tail`, `gap`,
        /// `chain_break`, `extra_header` or `partial_batch`.
        pub kind: String,
        /// The human-readable description.
        pub message: String,
        /// Kind-specific number: `expected` seq, torn `bytes`, `missing_from`,
        /// or a partial batch's `last_seq` (its held count is in `reason`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub value: Option<u64>,
        /// Why a corrupt line was skipped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
    }

    impl From<&Issue> for WireIssue {
        fn from(i: &Issue) -> Self {
            let (kind, value, reason) = match &i.kind {
                IssueKind::SkippedBlank => ("blank", None, None),
                IssueKind::SkippedCorrupt(why) => ("corrupt", None, Some(why.clone())),
                IssueKind::SkippedOutOfOrder { expected } => {
                    ("out_of_order", Some(*expected), None)
                }
                IssueKind::TornTail { bytes } => ("torn_tail", Some(*bytes), None),
                IssueKind::Gap { missing_from } => ("gap", Some(*missing_from), None),
                IssueKind::ChainBreak => ("chain_break", None, None),
                IssueKind::ExtraHeader => ("extra_header", None, None),
                IssueKind::PartialBatch { last_seq, held } => {
                    ("partial_batch", Some(*last_seq), Some(held.to_string()))
                }
            };
            WireIssue {
                line: i.line,
                offset: i.offset,
                seq: i.seq,
                kind: kind.into(),
                message: i.kind.to_string(),
                value,
                reason,
            }
        }
    }

    impl WireIssue {
        /// Every `kind` a [`WireIssue`] can carry (what an API description
        /// must list).
        pub const KINDS: &'static [&'static str] = &[
            "blank",
            "corrupt",
            "out_of_order",
            "torn_tail",
            "gap",
            "chain_break",
            "extra_header",
            "partial_batch",
        ];

        /// Back to an [`Issue`] (an unknown kind becomes a corrupt-line report).
        pub fn to_issue(&self) -> Issue {
            let v = self.value.unwrap_or_default();
            let kind = match self.kind.as_str() {
                "blank" => IssueKind::SkippedBlank,
                "out_of_order" => IssueKind::SkippedOutOfOrder { expected: v },
                "torn_tail" => IssueKind::TornTail { bytes: v },
                "gap" => IssueKind::Gap { missing_from: v },
                "chain_break" => IssueKind::ChainBreak,
                "extra_header" => IssueKind::ExtraHeader,
                "partial_batch" => IssueKind::PartialBatch {
                    last_seq: v,
                    held: self
                        .reason
                        .as_deref()
                        .and_then(|r| r.parse().ok())
                        .unwrap_or_default(),
                },
                _ => IssueKind::SkippedCorrupt(
                    self.reason.clone().unwrap_or_else(|| self.message.clone()),
                ),
            };
            Issue {
                line: self.line,
                offset: self.offset,
                seq: self.seq,
                kind,
            }
        }
    }

    /// `GET /v1/sessions/{id}/log`: the verified log, as the store read it.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct LogResponse {
        /// The header, when `seq` 0 verified.
        pub header: Option<SessionMeta>,
        /// Every applied record after the header.
        pub records: Vec<WireRecord>,
        /// `seq` of the last applied record.
        pub last_seq: u64,
        /// Problems found (empty when the whole chain verified).
        pub issues: Vec<WireIssue>,
    }

    impl LogResponse {
        /// The JSON form of a verified log.
        pub fn from_raw(raw: &RawLog) -> Result<Self, serde_json::Error> {
            let mut records = Vec::with_capacity(raw.records.len());
            for r in &raw.records {
                records.push(WireRecord {
                    seq: r.seq,
                    record: r.record.to_object()?,
                });
            }
            Ok(LogResponse {
                header: raw.header.clone(),
                records,
                last_seq: raw.last_seq,
                issues: raw.report.issues.iter().map(WireIssue::from).collect(),
            })
        }

        /// Back to a [`RawLog`].
        pub fn into_raw(self) -> Result<RawLog, serde_json::Error> {
            let mut records = Vec::with_capacity(self.records.len());
            for r in self.records {
                records.push(SeqRecord {
                    seq: r.seq,
                    record: Record::from_object(r.record)?,
                });
            }
            Ok(RawLog {
                header: self.header,
                records,
                spans: Vec::new(),
                report: LoadReport {
                    issues: self.issues.iter().map(WireIssue::to_issue).collect(),
                    ..LoadReport::default()
                },
                last_seq: self.last_seq,
            })
        }
    }

    /// One session in a listing.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct ListedSession {
        /// Its header.
        pub meta: SessionMeta,
    }

    /// `GET /v1/sessions`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct ListResponse {
        /// The project's sessions, newest first.
        pub sessions: Vec<ListedSession>,
        /// Entries whose header did not verify.
        pub unreadable: usize,
    }

    /// `POST /v1/sessions/{id}/fork`.
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ForkRequest {
        /// The new session's id (default: a new one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub id: Option<String>,
        /// The last parent `seq` the fork includes (default: the parent's last).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub at_seq: Option<u64>,
        /// Title of the fork.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
    }

    /// A created fork.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Forked {
        /// The new session's id.
        pub id: String,
        /// Where it forked from (`seq`: the last parent record included).
        pub parent: ForkPoint,
        /// Messages the request asked to keep (through `at_seq`).
        #[serde(default)]
        pub requested: usize,
        /// Messages kept: `requested`, moved back so no tool call is
        /// separated from its results.
        #[serde(default)]
        pub effective: usize,
    }

    /// `GET /v1/sessions/{id}`: the session replayed (a fork's parent prefix stitched in).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Loaded {
        /// The header.
        pub meta: SessionMeta,
        /// The current title (omitted when the session has none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub title: Option<String>,
        /// The conversation.
        pub messages: Vec<crate::message::Message>,
        /// `seq` of each message's record (inherited ones: the parent's).
        pub message_seqs: Vec<u64>,
        /// How many leading messages came from a fork's parent.
        pub inherited: usize,
        /// Accumulated taint.
        pub taint: crate::record::Taint,
        /// Summed usage of the runs.
        pub usage: crate::message::Usage,
        /// Summed turns of the runs.
        pub turns: u32,
        /// `seq` of the last record.
        pub last_seq: u64,
        /// Problems found while verifying.
        pub issues: Vec<WireIssue>,
    }

    /// `POST /v1/sessions/{id}/search`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SearchRequest {
        /// The query text.
        pub query: String,
        /// How many results (default 5, at most 100).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub top_k: Option<usize>,
        /// `hybrid` (default), `vector` or `lexical`, as `memoir recall --mode`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<String>,
    }

    /// One search result.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct SearchHit {
        /// The `seq` of the record the chunk came from.
        pub chain_seq: u64,
        /// Relevance (higher is better).
        pub score: f32,
        /// Chunk kind.
        pub kind: String,
        /// The chunk's text (omitted when the view holds only a reference).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub text: Option<String>,
    }

    /// `POST /v1/sessions/{id}/purge`: what was erased.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Purged {
        /// The ids erased for good.
        pub purged: Vec<String>,
    }

    /// Search results, best first.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct SearchResponse {
        /// The hits.
        pub hits: Vec<SearchHit>,
    }

    /// `GET /v1/trash`: the token's project's deleted sessions.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TrashResponse {
        /// Most recently deleted first.
        pub sessions: Vec<TrashedSession>,
    }

    /// One session in the trash.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct TrashedSession {
        /// Its header.
        pub meta: SessionMeta,
        /// When it was deleted, when the store knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub deleted_at: Option<chrono::DateTime<chrono::Utc>>,
    }

    /// `POST /v1/sessions/{id}/lease`: take the owner lease for `holder`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct LeaseRequest {
        /// Who drives the session (the client's process).
        pub holder: crate::store::lease::Holder,
        /// Seconds the lease lives without a renewal (default 60, 5 to 3600).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ttl_secs: Option<u64>,
    }

    /// A granted lease: renew it (`POST .../lease/{lease}`) before `ttl_secs`
    /// pass, release it with `DELETE .../lease/{lease}`.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct LeaseGranted {
        /// The lease's secret handle.
        pub lease: String,
        /// Its holder.
        pub holder: crate::store::lease::Holder,
        /// A previous holder whose lease expired without release, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub recovered_from: Option<crate::store::lease::Holder>,
        /// Seconds it lives without a renewal.
        pub ttl_secs: u64,
    }

    /// `PUT /v1/blobs/{hash}`: what was stored.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct BlobStored {
        /// The BLAKE3 hash (the path's, verified against the body).
        pub hash: String,
        /// Its size in bytes.
        pub size: u64,
    }

    /// `POST /v1/heads`: which of these sessions the project holds, and
    /// where each ends (what `memoir sync` asks before sending).
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct HeadsRequest {
        /// Session ids (at most 10,000).
        pub ids: Vec<String>,
    }

    /// Where one stored session ends.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Head {
        /// The session id.
        pub id: String,
        /// The `seq` of its last applied record (0: only the header).
        pub last_seq: u64,
        /// [`record_digest`] of that record, with payloads resolved (the
        /// header's for `last_seq` 0).
        pub last_digest: String,
    }

    /// The sessions of a [`HeadsRequest`] that exist; the others are absent.
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    pub struct HeadsResponse {
        /// One entry per existing session, in request order.
        pub heads: Vec<Head>,
    }

    /// The content digest of a record: the first 16 bytes of BLAKE3, in
    /// lowercase hex, of its JSON object (the `"record"` tag and payload,
    /// no framing), keys sorted at every level, no whitespace. Unlike a line's `h`, it does not depend on the `seq`,
    /// the batch or the chain, so a client and a server holding the same
    /// record under different headers agree on it.
    pub fn record_digest(record: &Record) -> Result<String, serde_json::Error> {
        let v = Value::Object(record.to_object()?);
        Ok(digest_bytes(&serde_json::to_vec(&canonical(v))?))
    }

    /// `v` with every object's keys in sorted order (so the digest does not
    /// depend on the order a writer or a redaction pass left them in).
    fn canonical(v: Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(String, Value)> = m.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k, canonical(v)))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
            other => other,
        }
    }

    /// [`record_digest`] of a header (`last_seq` 0): its JSON without the
    /// `project` field a server adds.
    pub fn header_digest(meta: &SessionMeta) -> Result<String, serde_json::Error> {
        let mut m = meta.clone();
        m.extra.remove("project");
        Ok(digest_bytes(&serde_json::to_vec(&canonical(
            serde_json::to_value(&m)?,
        ))?))
    }

    fn digest_bytes(bytes: &[u8]) -> String {
        let h = blake3::hash(bytes);
        h.as_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Every error response: a stable code and a sentence.
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    pub struct ErrorBody {
        /// `bad_request`, `invalid_id`, `unauthorized`, `token_expired`,
        /// `not_found`, `exists`, `conflict`, `busy`, `too_large`,
        /// `unsupported_media_type`, `unsupported`, `unavailable`,
        /// `corrupt` or `internal`.
        pub error: String,
        /// What went wrong, for people.
        pub message: String,
        /// For `conflict`: the seq the request expected.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub expected: Option<u64>,
        /// For `conflict`: the seq the log is at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub actual: Option<u64>,
        /// For `busy`: who holds the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub holder: Option<crate::store::lease::Holder>,
    }

    /// Parse record objects into records.
    pub fn records_from(
        objects: Vec<Map<String, Value>>,
        messages: Vec<crate::message::Message>,
    ) -> Result<Vec<Record>, serde_json::Error> {
        let mut out = Vec::with_capacity(objects.len() + messages.len());
        for o in objects {
            out.push(Record::from_object(o)?);
        }
        out.extend(messages.into_iter().map(Record::Message));
        Ok(out)
    }
}

#[cfg(feature = "client")]
/// A blocking client of one `memoir serve` endpoint, with one bearer token.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

#[cfg(feature = "client")]
fn unavailable(op: &'static str, url: &str, detail: String) -> Error {
    crate::error::StoreError::Unavailable {
        backend: url.to_string(),
        op,
        detail,
    }
    .into()
}

#[cfg(feature = "client")]
/// Percent-encode one path segment (ids are validated server-side too).
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(feature = "client")]
impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Result<Client> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Config(format!(
                "remote URL {base:?} must start with http:// or https://"
            )));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .proxy(None)
            .user_agent(concat!("memoir/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Client { base, token, agent })
    }

    /// The bearer token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Send a request; returns the status and the body text.
    fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Result<(u16, String)> {
        let body = body.map(|b| (b, "application/json"));
        let (status, bytes) = self.call_raw(method, path, body)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            unavailable(
                "http response",
                &self.url(path),
                "the body is not UTF-8".into(),
            )
        })?;
        Ok((status, text))
    }

    /// Send a request with a body of any type; returns the status and the body bytes.
    fn call_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<(Vec<u8>, &str)>,
    ) -> Result<(u16, Vec<u8>)> {
        let url = self.url(path);
        let builder = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Accept", "application/json");
        let builder = match &self.token {
            Some(t) => builder.header("Authorization", format!("Bearer {t}")),
            None => builder,
        };
        let result = match body {
            Some((b, content_type)) => {
                let req = builder
                    .header("Content-Type", content_type)
                    .body(b)
                    .map_err(|e| Error::Invalid(format!("bad request for {url}: {e}")))?;
                self.agent.run(req)
            }
            None => {
                let req = builder
                    .body(())
                    .map_err(|e| Error::Invalid(format!("bad request for {url}: {e}")))?;
                self.agent.run(req)
            }
        };
        let mut resp = result.map_err(|e| unavailable("http request", &url, e.to_string()))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .map_err(|e| unavailable("http response", &url, e.to_string()))?;
        Ok((status, bytes))
    }

    /// Send, and turn an error status into a typed [`Error`].
    fn ok(&self, method: &str, path: &str, body: Option<Vec<u8>>, id: &str) -> Result<String> {
        let (status, text) = self.call(method, path, body)?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        Err(self.error_of(status, &text, path, id))
    }

    /// The typed [`Error`] of an error response.
    fn error_of(&self, status: u16, text: &str, path: &str, id: &str) -> Error {
        let err: wire::ErrorBody = serde_json::from_str(text).unwrap_or_else(|_| wire::ErrorBody {
            error: String::new(),
            message: text.to_string(),
            ..Default::default()
        });
        match (status, err.error.as_str()) {
            (404, _) => Error::NotFound(id.to_string()),
            (409, "conflict") => Error::Conflict {
                id: id.to_string(),
                expected: err.expected.unwrap_or_default(),
                actual: err.actual.unwrap_or_default(),
            },
            (409, "busy") | (423, _) => match err.holder {
                Some(h) => crate::store::lease::busy(id, h),
                None => Error::Busy {
                    id: id.to_string(),
                    pid: 0,
                    host: "remote".into(),
                    since: err.message.clone(),
                },
            },
            (409, _) => Error::SessionExists(id.to_string()),
            (501, _) => crate::error::StoreError::Unsupported {
                operation: "this operation on the remote server",
            }
            .into(),
            (401 | 403, _) => Error::Config(format!("server refused the token: {}", err.message)),
            (502..=504, _) => unavailable("http request", &self.url(path), err.message),
            _ => Error::Invalid(format!("server said {status}: {}", err.message)),
        }
    }

    fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T> {
        Ok(serde_json::from_str(text)?)
    }

    /// Create a session.
    pub fn create(&self, req: &wire::CreateSession) -> Result<wire::Created> {
        let id = req
            .meta
            .as_ref()
            .map(|m| m.id.clone())
            .or_else(|| req.id.clone())
            .unwrap_or_default();
        let text = self.ok("POST", "/v1/sessions", Some(serde_json::to_vec(req)?), &id)?;
        Self::json(&text)
    }

    /// Append records (optimistically at `expected_seq`).
    pub fn append(
        &self,
        id: &str,
        records: &[Record],
        expected_seq: Option<u64>,
    ) -> Result<wire::AppendResponse> {
        let mut objects = Vec::with_capacity(records.len());
        for r in records {
            objects.push(r.to_object()?);
        }
        let body = wire::AppendRequest {
            records: objects,
            messages: Vec::new(),
            expected_seq,
        };
        let path = format!("/v1/sessions/{}/records", seg(id));
        let text = self.ok("POST", &path, Some(serde_json::to_vec(&body)?), id)?;
        Self::json(&text)
    }

    /// Append a request body already encoded (a [`wire::AppendRequest`]).
    pub fn append_raw(&self, id: &str, body: Vec<u8>) -> Result<wire::AppendResponse> {
        let path = format!("/v1/sessions/{}/records", seg(id));
        let text = self.ok("POST", &path, Some(body), id)?;
        Self::json(&text)
    }

    /// The session replayed (messages, taint, usage).
    pub fn load(&self, id: &str) -> Result<wire::Loaded> {
        let text = self.ok("GET", &format!("/v1/sessions/{}", seg(id)), None, id)?;
        Self::json(&text)
    }

    /// The verified log as the server's store read it (payloads inline).
    pub fn log(&self, id: &str) -> Result<RawLog> {
        let text = self.ok("GET", &format!("/v1/sessions/{}/log", seg(id)), None, id)?;
        Ok(Self::json::<wire::LogResponse>(&text)?.into_raw()?)
    }

    /// The verified log with payload references kept (resolve them with
    /// [`Client::get_blob`]).
    pub fn log_refs(&self, id: &str) -> Result<RawLog> {
        let path = format!("/v1/sessions/{}/log?blobs=refs", seg(id));
        let text = self.ok("GET", &path, None, id)?;
        Ok(Self::json::<wire::LogResponse>(&text)?.into_raw()?)
    }

    /// The token's project's trash, most recently deleted first.
    pub fn trash(&self) -> Result<wire::TrashResponse> {
        let text = self.ok("GET", "/v1/trash", None, "")?;
        Self::json(&text)
    }

    /// A trashed session's verified log, payload references kept.
    pub fn trashed_log(&self, id: &str) -> Result<RawLog> {
        let path = format!("/v1/trash/{}/log?blobs=refs", seg(id));
        let text = self.ok("GET", &path, None, id)?;
        Ok(Self::json::<wire::LogResponse>(&text)?.into_raw()?)
    }

    /// Take the owner lease of `id` for `holder` (renew within `ttl_secs`).
    pub fn acquire_lease(
        &self,
        id: &str,
        holder: crate::store::lease::Holder,
        ttl_secs: Option<u64>,
    ) -> Result<wire::LeaseGranted> {
        let body = wire::LeaseRequest { holder, ttl_secs };
        let path = format!("/v1/sessions/{}/lease", seg(id));
        let text = self.ok("POST", &path, Some(serde_json::to_vec(&body)?), id)?;
        Self::json(&text)
    }

    /// Renew a lease for another TTL ([`Error::NotFound`] once it is lost).
    pub fn renew_lease(&self, id: &str, lease: &str) -> Result<()> {
        let path = format!("/v1/sessions/{}/lease/{}", seg(id), seg(lease));
        self.ok("POST", &path, Some(b"{}".to_vec()), id).map(|_| ())
    }

    /// Release a lease.
    pub fn release_lease(&self, id: &str, lease: &str) -> Result<()> {
        let path = format!("/v1/sessions/{}/lease/{}", seg(id), seg(lease));
        self.ok("DELETE", &path, None, id).map(|_| ())
    }

    /// Upload a payload blob (its hash is checked by the server).
    pub fn put_blob(&self, hash: &str, bytes: &[u8], media_type: &str) -> Result<()> {
        let path = format!("/v1/blobs/{}", seg(hash));
        let (status, body) = self.call_raw("PUT", &path, Some((bytes.to_vec(), media_type)))?;
        if (200..300).contains(&status) {
            return Ok(());
        }
        Err(self.error_of(status, &String::from_utf8_lossy(&body), &path, hash))
    }

    /// Download a payload blob as stored (`None` when the project has no
    /// such blob); the caller verifies it.
    pub fn get_blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let path = format!("/v1/blobs/{}", seg(hash));
        let (status, body) = self.call_raw("GET", &path, None)?;
        match status {
            200..=299 => Ok(Some(body)),
            404 => Ok(None),
            _ => Err(self.error_of(status, &String::from_utf8_lossy(&body), &path, hash)),
        }
    }

    /// The header only.
    pub fn header(&self, id: &str) -> Result<SessionMeta> {
        let text = self.ok("GET", &format!("/v1/sessions/{}/meta", seg(id)), None, id)?;
        Self::json(&text)
    }

    /// The token's project's sessions, newest first.
    pub fn list(&self) -> Result<wire::ListResponse> {
        let text = self.ok("GET", "/v1/sessions", None, "")?;
        Self::json(&text)
    }

    /// Which of `ids` the project holds, and where each ends
    /// (`POST /v1/heads`); absent ids are not in the answer.
    pub fn heads(&self, ids: &[String]) -> Result<Vec<wire::Head>> {
        let body = wire::HeadsRequest { ids: ids.to_vec() };
        let text = self.ok("POST", "/v1/heads", Some(serde_json::to_vec(&body)?), "")?;
        Ok(Self::json::<wire::HeadsResponse>(&text)?.heads)
    }

    /// Fork a session by reference.
    pub fn fork(&self, id: &str, req: &wire::ForkRequest) -> Result<wire::Forked> {
        let path = format!("/v1/sessions/{}/fork", seg(id));
        let text = self.ok("POST", &path, Some(serde_json::to_vec(req)?), id)?;
        Self::json(&text)
    }

    /// The session as a `memoir.session-export` JSONL document (the
    /// library's export; see [`Client::export_as`] for the other formats).
    pub fn export(&self, id: &str) -> Result<String> {
        self.ok("GET", &format!("/v1/sessions/{}/export", seg(id)), None, id)
    }

    /// Export a session in any of the library's formats (the bytes
    /// `memoir sessions export --format ...` writes), optionally redacted.
    pub fn export_as(
        &self,
        id: &str,
        format: crate::manager::ExportFormat,
        redact: bool,
    ) -> Result<String> {
        let path = format!(
            "/v1/sessions/{}/export?format={}&redact={redact}",
            seg(id),
            format.as_str()
        );
        self.ok("GET", &path, None, id)
    }

    /// Delete a session (recoverably).
    pub fn delete(&self, id: &str) -> Result<()> {
        self.ok("DELETE", &format!("/v1/sessions/{}", seg(id)), None, id)
            .map(|_| ())
    }

    /// Restore a deleted session.
    pub fn restore(&self, id: &str) -> Result<()> {
        let path = format!("/v1/sessions/{}/restore", seg(id));
        self.ok("POST", &path, Some(b"{}".to_vec()), id).map(|_| ())
    }

    /// Erase a deleted session for good (409 while forks need its prefix).
    pub fn purge(&self, id: &str) -> Result<wire::Purged> {
        let path = format!("/v1/sessions/{}/purge", seg(id));
        let text = self.ok("POST", &path, Some(b"{}".to_vec()), id)?;
        Self::json(&text)
    }

    /// Search a session's chunks.
    pub fn search(&self, id: &str, query: &str, top_k: usize) -> Result<wire::SearchResponse> {
        self.search_mode(id, query, top_k, None)
    }

    /// Search a session's chunks in a retrieval mode (`hybrid`, `vector`,
    /// `lexical`; `None`: hybrid).
    pub fn search_mode(
        &self,
        id: &str,
        query: &str,
        top_k: usize,
        mode: Option<&str>,
    ) -> Result<wire::SearchResponse> {
        let body = wire::SearchRequest {
            query: query.into(),
            top_k: Some(top_k),
            mode: mode.map(str::to_string),
        };
        let path = format!("/v1/sessions/{}/search", seg(id));
        let text = self.ok("POST", &path, Some(serde_json::to_vec(&body)?), id)?;
        Self::json(&text)
    }
}

#[cfg(feature = "client")]
/// A [`LogStore`] whose sessions live on a `memoir serve` server (in the
/// token's project). Appends are acknowledged at the server store's durability.
#[derive(Debug, Clone)]
pub struct RemoteStore {
    client: Client,
}

#[cfg(feature = "client")]
impl RemoteStore {
    /// A store over `client`.
    pub fn new(client: Client) -> Self {
        RemoteStore { client }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

#[cfg(feature = "client")]
impl LogStore for RemoteStore {
    fn create(&self, meta: &SessionMeta) -> Result<Appended> {
        self.client.create(&wire::CreateSession {
            meta: Some(meta.clone()),
            ..Default::default()
        })?;
        Ok(Appended {
            first_seq: 0,
            last_seq: 0,
            repaired: None,
        })
    }

    fn append(&self, id: &str, records: &[Record], expected_next: Option<u64>) -> Result<Appended> {
        crate::id::validate(id)?;
        let a = self.client.append(id, records, expected_next)?;
        Ok(Appended {
            first_seq: a.first_seq,
            last_seq: a.last_seq,
            repaired: None,
        })
    }

    fn read(&self, id: &str) -> Result<RawLog> {
        crate::id::validate(id)?;
        // Payloads stay references; the readers resolve them through
        // `blobs()` (one download per blob, verified).
        self.client.log_refs(id)
    }

    fn read_header(&self, id: &str) -> Result<Option<SessionMeta>> {
        crate::id::validate(id)?;
        self.client.header(id).map(Some)
    }

    fn list(&self) -> Result<(Vec<Listed>, usize)> {
        let l = self.client.list()?;
        let listed = l
            .sessions
            .into_iter()
            .map(|s| Listed {
                location: self.location(&s.meta.id),
                meta: s.meta,
            })
            .collect();
        Ok((listed, l.unreadable))
    }

    fn location(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("{}/v1/sessions/{}", self.client.base, seg(id)))
    }

    fn durability(&self) -> Durability {
        Durability::Fsync
    }

    fn delete(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        self.client.delete(id)
    }

    fn restore(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        self.client.restore(id)
    }

    fn blobs(&self) -> Option<crate::blob::PayloadStore> {
        Some(crate::blob::PayloadStore {
            store: std::sync::Arc::new(crate::blob::ArtifactStore::custom(std::sync::Arc::new(
                RemoteBlobs {
                    client: self.client.clone(),
                },
            ))),
            policy: crate::blob::ExternalizePolicy::TRANSCRIPT,
        })
    }

    fn list_deleted(&self) -> Result<Vec<crate::store::DeletedListed>> {
        Ok(self
            .client
            .trash()?
            .sessions
            .into_iter()
            .map(|t| crate::store::DeletedListed {
                location: self.location(&t.meta.id),
                meta: t.meta,
                deleted_at: t.deleted_at,
            })
            .collect())
    }

    fn read_deleted(&self, id: &str) -> Result<RawLog> {
        crate::id::validate(id)?;
        self.client.trashed_log(id)
    }

    fn purge(&self, id: &str) -> Result<()> {
        crate::id::validate(id)?;
        // The server's purge runs its manager (which keeps what forks still
        // need, and drops blobs no session of the whole store references).
        let purged = self.client.purge(id)?;
        if purged.purged.iter().any(|p| p == id) {
            Ok(())
        } else {
            Err(Error::NotFound(id.to_string()))
        }
    }

    fn acquire_lease(&self, id: &str) -> Result<crate::store::Lease> {
        crate::id::validate(id)?;
        let holder = crate::store::lease::current_holder();
        let granted = self
            .client
            .acquire_lease(id, holder, Some(REMOTE_LEASE_TTL.as_secs()))?;
        let guard = RemoteLeaseGuard::start(self.client.clone(), id, granted.lease.clone());
        Ok(crate::store::Lease::new(
            id,
            granted.holder,
            granted.recovered_from,
            Box::new(guard),
        ))
    }
}

#[cfg(feature = "client")]
/// How long a remote lease lives without a renewal (the guard renews it
/// every third of that): a client that dies without releasing its lease
/// loses it after this long.
pub const REMOTE_LEASE_TTL: Duration = Duration::from_secs(30);

#[cfg(feature = "client")]
/// Keeps a remote lease alive (a thread renewing it) and releases it on drop.
struct RemoteLeaseGuard {
    stop: Option<std::sync::mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
    client: Client,
    id: String,
    lease: String,
}

#[cfg(feature = "client")]
impl RemoteLeaseGuard {
    fn start(client: Client, id: &str, lease: String) -> RemoteLeaseGuard {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (c, i, l) = (client.clone(), id.to_string(), lease.clone());
        let renewer = std::thread::Builder::new()
            .name("memoir-lease".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(REMOTE_LEASE_TTL / 3)
                {
                    // A lost lease (NotFound) or an outage: keep trying
                    // until dropped; the server is the judge of ownership.
                    let _ = c.renew_lease(&i, &l);
                }
            })
            .ok();
        RemoteLeaseGuard {
            stop: Some(stop),
            renewer,
            client,
            id: id.to_string(),
            lease,
        }
    }
}

#[cfg(feature = "client")]
impl Drop for RemoteLeaseGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
        // Best effort: an unreachable server lets the lease expire.
        let _ = self.client.release_lease(&self.id, &self.lease);
    }
}

#[cfg(feature = "client")]
/// The blob store of a [`RemoteStore`]: the server's, through
/// `PUT`/`GET /v1/blobs/{hash}`. Listing and deleting are the server's
/// business (its purge and collection), never a client's.
#[derive(Debug)]
struct RemoteBlobs {
    client: Client,
}

#[cfg(feature = "client")]
impl crate::blob::BlobBackend for RemoteBlobs {
    fn put(
        &self,
        hash: &str,
        bytes: &[u8],
        media_type: Option<&str>,
    ) -> std::result::Result<(), crate::blob::BlobError> {
        let media_type = media_type.unwrap_or("application/octet-stream");
        Ok(self.client.put_blob(hash, bytes, media_type)?)
    }

    fn get(&self, hash: &str) -> std::result::Result<Option<Vec<u8>>, crate::blob::BlobError> {
        Ok(self.client.get_blob(hash)?)
    }

    fn contains(&self, hash: &str) -> std::result::Result<bool, crate::blob::BlobError> {
        Ok(self.client.get_blob(hash)?.is_some())
    }

    fn remove(&self, _hash: &str) -> std::result::Result<bool, crate::blob::BlobError> {
        Err(crate::blob::BlobError::Storage(crate::store::unsupported(
            "delete blobs on a remote server (its purge does)",
        )))
    }

    fn list(
        &self,
    ) -> std::result::Result<Vec<(String, u64, std::time::SystemTime)>, crate::blob::BlobError>
    {
        Err(crate::blob::BlobError::Storage(crate::store::unsupported(
            "list blobs on a remote server",
        )))
    }

    fn locate(&self, hash: &str) -> PathBuf {
        PathBuf::from(format!("{}/v1/blobs/{hash}", self.client.base))
    }

    fn collected_elsewhere(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::wire::WireIssue;
    use crate::store::{Issue, IssueKind};

    /// One issue of every kind; the match makes a new kind a compile error
    /// here until it is listed.
    fn every_kind() -> Vec<IssueKind> {
        let all = vec![
            IssueKind::SkippedBlank,
            IssueKind::SkippedCorrupt("bad line".into()),
            IssueKind::SkippedOutOfOrder { expected: 3 },
            IssueKind::TornTail { bytes: 7 },
            IssueKind::Gap { missing_from: 4 },
            IssueKind::ChainBreak,
            IssueKind::ExtraHeader,
            IssueKind::PartialBatch {
                last_seq: 9,
                held: 2,
            },
        ];
        for kind in &all {
            match kind {
                IssueKind::SkippedBlank
                | IssueKind::SkippedCorrupt(_)
                | IssueKind::SkippedOutOfOrder { .. }
                | IssueKind::TornTail { .. }
                | IssueKind::Gap { .. }
                | IssueKind::ChainBreak
                | IssueKind::ExtraHeader
                | IssueKind::PartialBatch { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_issue_kind_has_a_listed_wire_name_and_round_trips() {
        let mut named = Vec::new();
        for kind in every_kind() {
            let issue = Issue {
                line: 2,
                offset: 40,
                seq: 2,
                kind,
            };
            let wire = WireIssue::from(&issue);
            assert!(
                WireIssue::KINDS.contains(&wire.kind.as_str()),
                "{} is not in WireIssue::KINDS",
                wire.kind
            );
            assert_eq!(wire.to_issue(), issue);
            named.push(wire.kind);
        }
        named.sort();
        let mut listed = WireIssue::KINDS.to_vec();
        listed.sort();
        assert_eq!(named, listed, "KINDS lists exactly the kinds sent");
    }
}
