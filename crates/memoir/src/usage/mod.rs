//! Usage and cost reports over a store: one implementation behind
//! `memoir usage`, `memoir sessions usage` and `GET /v1/usage`.
//!
//! - [`count`]: which stored responses count (each provider response once,
//!   forks by reference, own vs inherited).
//! - [`price`]: the offline price table and what a response costs.
//! - [`blocks`]: 5-hour billing blocks.
//! - `summary`: per-session usage summaries kept next to a file store
//!   (derived, checked, rebuilt when stale), which reports read instead of
//!   every session log ([`note_append`] keeps them current on append).
//!
//! A [`UsageQuery`] selects sessions (project, agent, session) and responses
//! (model, time range) and groups them by any of [`GroupKey`]; [`report`]
//! streams the store one session at a time and returns a [`UsageReport`]
//! (wire format [`USAGE_FORMAT`], `docs/USAGE.md`). Every total says how far
//! it can be trusted: its provenance (the weakest [`UsageSource`] in it),
//! how many responses are unpriced (then the cost is a lower bound) and how
//! many sessions could not be read.

pub mod blocks;
pub mod count;
pub mod price;
mod summary;
pub mod zone;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use blocks::{billing_blocks, BillingBlock, BLOCK_HOURS};
pub use count::{is_side_session, Counted};
pub use price::{Cost, PriceOrigin, PriceTable};
pub use summary::{note_append, refresh, Refresh, SESSION_DIR, SUMMARY_FILE, SUMMARY_VERSION};
pub use zone::Zone;

use crate::error::{Error, Result};
use crate::message::{Usage, UsageSource};
use crate::record::SessionMeta;
use crate::store::LogStore;

/// Version of the JSON report format ([`UsageReport`], [`SessionUsage`], blocks).
pub const USAGE_FORMAT: u32 = 1;

/// The agent name reported for sessions memoir wrote itself (no `source`).
pub const NATIVE_AGENT: &str = "memoir";

/// The header field naming a session's project on a shared server.
pub const PROJECT_FIELD: &str = "project";

pub use crate::access::MEMBER_FIELD;

/// The member a session's header names ([`MEMBER_FIELD`]).
pub fn member_of(meta: &SessionMeta) -> Option<&str> {
    meta.extra.get(MEMBER_FIELD).and_then(Value::as_str)
}

/// A dimension to group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupKey {
    /// Calendar day in the query's [`Zone`], `YYYY-MM-DD`.
    Day,
    /// ISO week in the query's zone, `YYYY-Www`.
    Week,
    /// Month in the query's zone, `YYYY-MM`.
    Month,
    /// Session id.
    Session,
    /// The header's `project` field, else its workspace.
    Project,
    /// Model name.
    Model,
    /// The agent that wrote the session (`source.agent`, else `memoir`).
    Agent,
    /// The member whose token created the session on a shared server (the
    /// header's [`MEMBER_FIELD`]), else `(none)`.
    Member,
}

impl GroupKey {
    /// Every key, in the order `--by` documents them.
    pub const ALL: [GroupKey; 8] = [
        GroupKey::Day,
        GroupKey::Week,
        GroupKey::Month,
        GroupKey::Session,
        GroupKey::Project,
        GroupKey::Model,
        GroupKey::Agent,
        GroupKey::Member,
    ];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupKey::Day => "day",
            GroupKey::Week => "week",
            GroupKey::Month => "month",
            GroupKey::Session => "session",
            GroupKey::Project => "project",
            GroupKey::Model => "model",
            GroupKey::Agent => "agent",
            GroupKey::Member => "member",
        }
    }

    fn value(self, c: &Counted<'_>, zone: Zone) -> String {
        match self {
            GroupKey::Day => zone.at(c.at).format("%Y-%m-%d").to_string(),
            GroupKey::Week => {
                let w = zone.at(c.at).iso_week();
                format!("{}-W{:02}", w.year(), w.week())
            }
            GroupKey::Month => zone.at(c.at).format("%Y-%m").to_string(),
            GroupKey::Session => c.meta.id.clone(),
            GroupKey::Project => project_of(c.meta),
            GroupKey::Model => c.model.to_string(),
            GroupKey::Agent => agent_of(c.meta).to_string(),
            GroupKey::Member => member_of(c.meta).unwrap_or("(none)").to_string(),
        }
    }
}

impl std::str::FromStr for GroupKey {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        GroupKey::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown grouping {s:?} (expected day, week, month, session, project, model, agent or member)"
                ))
            })
    }
}

/// Which project a query covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectFilter {
    /// Sessions whose workspace is this directory or inside it.
    Workspace(PathBuf),
    /// Sessions whose header names this project ([`PROJECT_FIELD`], as `memoir serve` writes).
    Named(String),
    /// Sessions whose header names any of these projects.
    AnyOf(Vec<String>),
}

impl ProjectFilter {
    fn matches(&self, meta: &SessionMeta) -> bool {
        match self {
            ProjectFilter::Workspace(dir) => meta.workspace.starts_with(dir),
            ProjectFilter::Named(name) => {
                meta.extra.get(PROJECT_FIELD).and_then(Value::as_str) == Some(name.as_str())
            }
            ProjectFilter::AnyOf(names) => meta
                .extra
                .get(PROJECT_FIELD)
                .and_then(Value::as_str)
                .is_some_and(|p| names.iter().any(|n| n == p)),
        }
    }
}

/// What to count and how to group it. Empty filters select everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// Only this project's sessions.
    pub project: Option<ProjectFilter>,
    /// Only sessions written by this agent (`claude-code`, `codex`, ..., `memoir`).
    pub agent: Option<String>,
    /// Only this session (full id or unique prefix).
    pub session: Option<String>,
    /// Only responses whose model contains this text (case-insensitive).
    pub model: Option<String>,
    /// Only responses written at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only responses written before this instant.
    pub until: Option<DateTime<Utc>>,
    /// Group rows by these keys, in order (empty: totals only).
    pub group_by: Vec<GroupKey>,
    /// The zone days, weeks, months and billing blocks are dated in.
    pub timezone: Zone,
}

/// Summed usage and cost of a set of responses, with its provenance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Input tokens (cache reads and writes excluded).
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those written with a 1-hour lifetime (priced
    /// higher than the 5-minute writes that make up the rest).
    pub cache_write_1h_tokens: u64,
    /// Reasoning tokens (a subset of `output_tokens`).
    pub reasoning_tokens: u64,
    /// Input + output + cache read + cache write.
    pub total_tokens: u64,
    /// Provider requests (responses).
    pub requests: u64,
    /// USD for the priced responses (JSON: rounded to 1e-10 USD).
    #[serde(serialize_with = "round_usd")]
    pub cost_usd: f64,
    /// True when some responses are unpriced: `cost_usd` is a lower bound.
    pub cost_is_lower_bound: bool,
    /// Responses whose model has no price.
    pub unpriced_requests: u64,
    /// The models with no price.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub unpriced_models: BTreeSet<String>,
    /// The weakest provenance in the sum: `provider`, `transcript` (as the
    /// agent wrote it, possibly partial) or `estimate`.
    pub provenance: UsageSource,
    /// Responses whose counts are `transcript` or `estimate` (partial).
    pub partial_requests: u64,
    /// Responses without a timestamp, dated by their session's start.
    pub undated_requests: u64,
}

/// Serialise a sum of float products without its last-bit noise.
fn round_usd<S: serde::Serializer>(usd: &f64, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64((usd * 1e10).round() / 1e10)
}

impl Totals {
    /// Add one counted response.
    pub fn add(&mut self, c: &Counted<'_>) {
        let u = &c.usage;
        self.input_tokens = self.input_tokens.saturating_add(u.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(u.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(u.cache_read_input_tokens);
        self.cache_write_1h_tokens = self
            .cache_write_1h_tokens
            .saturating_add(u.cache_creation_1h_input_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(u.cache_creation_input_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(u.reasoning_tokens);
        self.total_tokens = self.total_tokens.saturating_add(u.total());
        self.requests = self.requests.saturating_add(c.requests);
        self.cost_usd += c.cost.usd;
        if c.cost.is_lower_bound() {
            self.unpriced_requests = self.unpriced_requests.saturating_add(c.requests);
            self.unpriced_models.insert(c.model.to_string());
            self.cost_is_lower_bound = true;
        }
        if u.source != UsageSource::Provider {
            self.partial_requests = self.partial_requests.saturating_add(c.requests);
        }
        self.provenance = self.provenance.max(u.source);
        if !c.dated {
            self.undated_requests = self.undated_requests.saturating_add(c.requests);
        }
    }

    /// Add another total.
    pub fn merge(&mut self, o: &Totals) {
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(o.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(o.cache_write_tokens);
        self.cache_write_1h_tokens = self
            .cache_write_1h_tokens
            .saturating_add(o.cache_write_1h_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(o.reasoning_tokens);
        self.total_tokens = self.total_tokens.saturating_add(o.total_tokens);
        self.requests = self.requests.saturating_add(o.requests);
        self.cost_usd += o.cost_usd;
        self.cost_is_lower_bound |= o.cost_is_lower_bound;
        self.unpriced_requests = self.unpriced_requests.saturating_add(o.unpriced_requests);
        self.unpriced_models
            .extend(o.unpriced_models.iter().cloned());
        self.provenance = self.provenance.max(o.provenance);
        self.partial_requests = self.partial_requests.saturating_add(o.partial_requests);
        self.undated_requests = self.undated_requests.saturating_add(o.undated_requests);
    }

    /// The token counts as a [`Usage`] (provenance included).
    pub fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_input_tokens: self.cache_read_tokens,
            cache_creation_input_tokens: self.cache_write_tokens,
            cache_creation_1h_input_tokens: self.cache_write_1h_tokens,
            reasoning_tokens: self.reasoning_tokens,
            source: self.provenance,
        }
    }
}

/// One row of a grouped report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The row's key: grouping name → value, in `group_by` order.
    pub group: serde_json::Map<String, Value>,
    /// What the row's own responses add up to.
    #[serde(flatten)]
    pub totals: Totals,
    /// For rows grouped by session alone: what a fork starts with, by
    /// reference to its parent (never part of any total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited: Option<Totals>,
    /// For rows grouped by session alone: the fork's parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// For rows grouped by session alone: the imported session's own id
    /// (`source.session`), to match it with the agent's own reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_session: Option<String>,
    /// For rows grouped by session alone: the agent that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Why a fork's inherited usage could not be read (e.g. its parent was
    /// deleted); its own counts are unaffected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited_error: Option<String>,
}

impl UsageRow {
    /// The row's key values, in `group_by` order.
    pub fn key(&self) -> Vec<&str> {
        self.group
            .values()
            .map(|v| v.as_str().unwrap_or(""))
            .collect()
    }
}

/// A usage report (`--json` prints it as is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// [`USAGE_FORMAT`].
    pub format: u32,
    /// The grouping keys, in order.
    pub group_by: Vec<GroupKey>,
    /// One row per distinct key, sorted by key.
    pub rows: Vec<UsageRow>,
    /// Everything selected, each response once.
    pub total: Totals,
    /// Sessions selected and read.
    pub sessions: usize,
    /// Sessions that could not be read: every total is a lower bound.
    pub unreadable_sessions: usize,
    /// Copies of responses not counted again: split lines within a session,
    /// and copies another session already counts (sidechain replays,
    /// subagent copies, re-imports).
    pub duplicate_responses: u64,
    /// The price table used.
    pub prices: PriceOrigin,
    /// Damaged usage summaries met (each was rebuilt from the session
    /// logs; the figures are unaffected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
}

/// One session's usage, own and inherited (`memoir sessions usage`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionUsage {
    /// [`USAGE_FORMAT`].
    pub format: u32,
    /// The session id.
    pub id: String,
    /// The fork's parent, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The responses this session owns.
    pub own: Totals,
    /// What it starts with by reference to its parent (not part of `own`).
    pub inherited: Totals,
    /// Why `inherited` could not be read (then it is empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited_error: Option<String>,
    /// The price table used.
    pub prices: PriceOrigin,
}

/// The agent that wrote a session: `source.agent`, else [`NATIVE_AGENT`].
pub fn agent_of(meta: &SessionMeta) -> &str {
    meta.source
        .as_ref()
        .map(|s| s.agent.as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or(NATIVE_AGENT)
}

/// A session's project: the header's `project` field, else its workspace,
/// else `(none)`.
pub fn project_of(meta: &SessionMeta) -> String {
    if let Some(p) = meta.extra.get(PROJECT_FIELD).and_then(Value::as_str) {
        return p.to_string();
    }
    if meta.workspace.as_os_str().is_empty() {
        "(none)".to_string()
    } else {
        meta.workspace.display().to_string()
    }
}

/// A query's filters, resolved (the session prefix to an id).
struct Filters<'q> {
    query: &'q UsageQuery,
    session: Option<String>,
    model: Option<String>,
}

impl<'q> Filters<'q> {
    fn new(store: &dyn LogStore, query: &'q UsageQuery) -> Result<Self> {
        let session = match &query.session {
            Some(prefix) => Some(crate::transcript::find_in(store, prefix)?),
            None => None,
        };
        Ok(Filters {
            query,
            session,
            model: query.model.as_ref().map(|m| m.to_lowercase()),
        })
    }

    fn session(&self, meta: &SessionMeta) -> bool {
        self.session.as_ref().is_none_or(|s| *s == meta.id)
            && self.query.project.as_ref().is_none_or(|p| p.matches(meta))
            && self
                .query
                .agent
                .as_ref()
                .is_none_or(|a| a == agent_of(meta))
    }

    fn response(&self, model: &str, at: DateTime<Utc>) -> bool {
        self.model
            .as_ref()
            .is_none_or(|want| model.to_lowercase().contains(want))
            && self.query.since.is_none_or(|s| at >= s)
            && self.query.until.is_none_or(|u| at < u)
    }

    /// Walk the store: from its usage summaries when it keeps them (a file
    /// store), else reading every session log. Returns the notices on
    /// damaged summaries too.
    /// The summaries read are returned too (none for other stores), to
    /// answer forks' inherited usage.
    fn walk(
        &self,
        store: &dyn LogStore,
        prices: &PriceTable,
        visit: &mut dyn FnMut(count::Event<'_>),
    ) -> Result<(count::WalkStats, Vec<String>, Option<summary::Summaries>)> {
        let selection = count::Selection {
            session: &|meta| self.session(meta),
            response: &|model, at| self.response(model, at),
            stop_after: self.session.as_deref(),
        };
        match store.index_dir() {
            Some(dir) => {
                let mut summaries = summary::load(store, dir)?;
                let notices = std::mem::take(&mut summaries.refresh.notices);
                let stats = count::walk_source(&mut summaries, &selection, prices, visit)?;
                Ok((stats, notices, Some(summaries)))
            }
            None => Ok((
                count::walk(store, &selection, prices, visit)?,
                Vec::new(),
                None,
            )),
        }
    }
}

/// Run `query` over `store`, pricing with `prices`.
pub fn report(
    store: &dyn LogStore,
    query: &UsageQuery,
    prices: &PriceTable,
) -> Result<UsageReport> {
    let filters = Filters::new(store, query)?;
    let by_session = query.group_by == [GroupKey::Session];
    let mut rows: BTreeMap<Vec<String>, Totals> = BTreeMap::new();
    let mut forks: BTreeMap<String, SessionMeta> = BTreeMap::new();
    let mut sources: BTreeMap<String, (Option<String>, String)> = BTreeMap::new();
    let mut total = Totals::default();
    let (stats, notices, summaries) = filters.walk(store, prices, &mut |event| match event {
        count::Event::Session(meta) => {
            if by_session {
                rows.entry(vec![meta.id.clone()]).or_default();
                let src = meta.source.as_ref().and_then(|s| s.session.clone());
                sources.insert(meta.id.clone(), (src, agent_of(meta).to_string()));
                if meta.parent.is_some() {
                    forks.insert(meta.id.clone(), meta.clone());
                }
            }
        }
        count::Event::Response(c) => {
            total.add(c);
            if !query.group_by.is_empty() {
                let key = query
                    .group_by
                    .iter()
                    .map(|k| k.value(c, query.timezone))
                    .collect();
                rows.entry(key).or_default().add(c);
            }
        }
    })?;
    let mut out = Vec::with_capacity(rows.len());
    for (key, totals) in rows {
        let mut row = UsageRow {
            group: query
                .group_by
                .iter()
                .zip(&key)
                .map(|(k, v)| (k.as_str().to_string(), Value::String(v.clone())))
                .collect(),
            totals,
            inherited: None,
            parent: None,
            source_session: None,
            agent: None,
            inherited_error: None,
        };
        if by_session {
            if let Some((src, agent)) = sources.remove(&key[0]) {
                row.source_session = src;
                row.agent = Some(agent);
            }
            if let Some(meta) = forks.get(&key[0]) {
                let ancestors: &dyn count::Ancestors = match &summaries {
                    Some(s) => s,
                    None => &count::NoAncestors,
                };
                match inherited_totals(store, ancestors, meta, prices, &filters) {
                    Ok(t) => row.inherited = Some(t),
                    Err(e) => row.inherited_error = Some(e.to_string()),
                }
                row.parent = meta.parent.as_ref().map(|p| p.session.clone());
            }
        }
        if by_session
            && row.totals.requests == 0
            && row.inherited.is_none()
            && row.inherited_error.is_none()
        {
            continue; // a selected session with no usage at all
        }
        out.push(row);
    }
    Ok(UsageReport {
        format: USAGE_FORMAT,
        group_by: query.group_by.clone(),
        rows: out,
        total,
        sessions: stats.sessions,
        unreadable_sessions: stats.unreadable,
        duplicate_responses: stats.duplicates,
        prices: prices.origin.clone(),
        notices,
    })
}

/// One session's own and inherited usage (`id`: full id or unique prefix).
pub fn session_usage(store: &dyn LogStore, id: &str, prices: &PriceTable) -> Result<SessionUsage> {
    let query = UsageQuery {
        session: Some(id.to_string()),
        group_by: vec![GroupKey::Session],
        ..UsageQuery::default()
    };
    let id = crate::transcript::find_in(store, id)?;
    let report = report(store, &query, prices)?;
    let row = report.rows.into_iter().next();
    let parent = row.as_ref().and_then(|r| r.parent.clone());
    let inherited_error = row.as_ref().and_then(|r| r.inherited_error.clone());
    let (own, inherited) = match row {
        Some(r) => (r.totals, r.inherited.unwrap_or_default()),
        None => (Totals::default(), Totals::default()),
    };
    Ok(SessionUsage {
        format: USAGE_FORMAT,
        id,
        parent,
        own,
        inherited,
        inherited_error,
        prices: report.prices,
    })
}

/// 5-hour billing blocks (`memoir usage --blocks`).
#[derive(Debug, Clone, PartialEq)]
pub struct BlocksReport {
    /// The blocks, oldest first.
    pub blocks: Vec<BillingBlock>,
    /// Damaged usage summaries met (each was rebuilt from the session
    /// logs; the figures are unaffected).
    pub notices: Vec<String>,
}

/// 5-hour billing blocks of the responses `query` selects (its grouping is ignored).
pub fn blocks_report(
    store: &dyn LogStore,
    query: &UsageQuery,
    prices: &PriceTable,
    now: DateTime<Utc>,
) -> Result<BlocksReport> {
    let filters = Filters::new(store, query)?;
    let mut entries = Vec::new();
    let (_, notices, _) = filters.walk(store, prices, &mut |event| {
        if let count::Event::Response(c) = event {
            let mut t = Totals::default();
            t.add(c);
            entries.push((c.at, c.model.to_string(), t));
        }
    })?;
    Ok(BlocksReport {
        blocks: billing_blocks(entries, now, query.timezone),
        notices,
    })
}

/// A fork's inherited usage: its ancestors taken from `ancestors` (the
/// summaries a report read) where they tell it exactly, else from the logs.
fn inherited_totals(
    store: &dyn LogStore,
    ancestors: &dyn count::Ancestors,
    meta: &SessionMeta,
    prices: &PriceTable,
    filters: &Filters<'_>,
) -> Result<Totals> {
    let mut t = Totals::default();
    count::inherited_from(store, ancestors, meta, prices, &mut |c| {
        if filters.response(c.model, c.at) {
            t.add(c);
        }
    })?;
    Ok(t)
}
