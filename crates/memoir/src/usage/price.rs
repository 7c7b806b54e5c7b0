//! Offline model pricing: the pinned table shipped in the repository, its
//! overrides, and what one response costs.
//!
//! The shipped table (`crates/memoir/data/prices.json`, format
//! [`PRICE_FORMAT`]) is derived by [`PriceTable::from_litellm`] (the function
//! `memoir prices update FILE` runs on a newer LiteLLM file) from the LiteLLM
//! price table ccusage bundles for `--offline` (`data/litellm-ccusage.json`,
//! MIT, see `data/NOTICE`), so both tools price alike; models it lacks come
//! from an older LiteLLM derivation (`data/prices-litellm-1.110.2.json`). Prices are USD per token. A model with no
//! price is *unpriced*: its responses cost nothing in the sum, which is then a
//! lower bound, never a silent `$0` (see [`Cost`]).
//!
//! Which table is used ([`PriceTable::configured`]), first match wins for the
//! base table: an explicit file (`--prices FILE`), the `file` key of the
//! `[prices]` table of `$MEMOIR_HOME/config.toml`, `$MEMOIR_HOME/prices.json`
//! (written by `memoir prices update`), the shipped table. Then the entries of
//! `[prices.models."<name>"]` (USD per million tokens) are laid over it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, IoContext, Result};
use crate::message::Usage;

/// Version of the price-table format this build reads and writes.
pub const PRICE_FORMAT: u32 = 1;

/// The price table shipped with this build (from ccusage's LiteLLM snapshot).
const SHIPPED: &str = include_str!("../../data/prices.json");

/// Prices for the models [`SHIPPED`] lacks (an older, wider LiteLLM derivation).
const SHIPPED_FALLBACK: &str = include_str!("../../data/prices-litellm-1.110.2.json");

/// LiteLLM providers whose models the derived table keeps (first-party APIs).
const KEPT_PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "text-completion-openai",
    "gemini",
    "vertex_ai-language-models",
];

/// The per-token prices of one model, with its long-context tiers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// The provider LiteLLM files it under (informational).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// USD per input token (cache reads and writes excluded).
    pub input: f64,
    /// USD per output token (reasoning tokens included).
    pub output: f64,
    /// USD per token read from the prompt cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// USD per token written to the prompt cache with the default 5-minute
    /// lifetime (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// USD per token written to the prompt cache with a 1-hour lifetime
    /// (default: twice the input price, Anthropic's rate for 1-hour writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    /// Long-context tiers, ascending by threshold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<PriceTier>,
}

/// Prices for the tokens of one class (input, output, cache read, 5-minute
/// or 1-hour cache write) beyond the first `above_tokens` of that class in
/// one response, as ccusage applies LiteLLM's `_above_<N>k_tokens` rates.
/// A missing rate keeps the rate below the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceTier {
    /// The prompt size above which this tier applies.
    pub above_tokens: u64,
    /// USD per input token in this tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<f64>,
    /// USD per output token in this tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<f64>,
    /// USD per cache-read token in this tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// USD per 5-minute cache-write token in this tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// USD per 1-hour cache-write token in this tier (default: twice this
    /// tier's input rate, else the rate below the threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
}

/// Where a price table came from and how old it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceOrigin {
    /// What the table was derived from (file and version).
    pub source: String,
    /// When it was derived (or the source's date), `YYYY-MM-DD`.
    pub date: String,
    /// The file it was loaded from; `None` for the shipped table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// How many models were laid over it from `config.toml`.
    #[serde(default, skip_serializing_if = "crate::is_default")]
    pub overrides: usize,
}

/// A model → price table (the `prices.json` format, see `docs/USAGE.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    /// Always [`PRICE_FORMAT`].
    pub format: u32,
    /// Provenance.
    #[serde(flatten)]
    pub origin: PriceOrigin,
    /// Prices by model name.
    pub models: BTreeMap<String, ModelPrice>,
}

/// What a set of responses cost: the priced part and what could not be priced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Cost {
    /// USD for the responses whose model has a price.
    pub usd: f64,
    /// Responses whose model has no price (their cost is unknown, not zero).
    pub unpriced_requests: u64,
}

impl Cost {
    /// Add another cost.
    pub fn add(&mut self, other: &Cost) {
        self.usd += other.usd;
        self.unpriced_requests = self
            .unpriced_requests
            .saturating_add(other.unpriced_requests);
    }

    /// True when some responses are unpriced, so `usd` is only a lower bound.
    pub fn is_lower_bound(&self) -> bool {
        self.unpriced_requests > 0
    }
}

impl ModelPrice {
    /// What one response with `usage` costs. Each token class is priced on
    /// its own: its first `above_tokens` at the rate below a tier, the rest
    /// at the tier's rate (ccusage's reading of LiteLLM's long-context
    /// rates). Cache writes are split into 5-minute and 1-hour writes.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let one_hour = usage
            .cache_creation_1h_input_tokens
            .min(usage.cache_creation_input_tokens);
        let five_minutes = usage.cache_creation_input_tokens - one_hour;
        let read = self.cache_read.unwrap_or(self.input);
        let write = self.cache_write.unwrap_or(self.input);
        let write_1h = self.cache_write_1h_rate();
        self.tiered(usage.input_tokens, self.input, |t| t.input)
            + self.tiered(usage.output_tokens, self.output, |t| t.output)
            + self.tiered(usage.cache_read_input_tokens, read, |t| t.cache_read)
            + self.tiered(five_minutes, write, |t| t.cache_write)
            + self.tiered(one_hour, write_1h, |t| {
                t.cache_write_1h.or(t.input.map(|input| 2.0 * input))
            })
    }

    /// USD per 1-hour cache-write token: the table's rate, else twice the
    /// input rate (Anthropic's price for 1-hour writes).
    pub fn cache_write_1h_rate(&self) -> f64 {
        self.cache_write_1h.unwrap_or(2.0 * self.input)
    }

    /// `tokens` of one class: up to the first tier's threshold at `base`,
    /// then each tier's rate (`rate_of`, else the rate below it) up to the next.
    fn tiered(&self, tokens: u64, base: f64, rate_of: impl Fn(&PriceTier) -> Option<f64>) -> f64 {
        let mut cost = 0.0;
        let mut rate = base;
        let mut from = 0u64;
        for tier in &self.tiers {
            if tokens <= tier.above_tokens {
                break;
            }
            cost += (tier.above_tokens.saturating_sub(from)) as f64 * rate;
            from = tier.above_tokens.max(from);
            rate = rate_of(tier).unwrap_or(rate);
        }
        cost + tokens.saturating_sub(from) as f64 * rate
    }
}

impl PriceTable {
    /// The table shipped with this build: ccusage's LiteLLM snapshot, and
    /// for the models it lacks, the older LiteLLM derivation.
    pub fn shipped() -> Result<PriceTable> {
        let mut table = PriceTable::parse(SHIPPED, None)?;
        let fallback = PriceTable::parse(SHIPPED_FALLBACK, None)?;
        for (name, price) in fallback.models {
            table.models.entry(name).or_insert(price);
        }
        table.origin.source = format!(
            "{}; models it lacks: {}",
            table.origin.source, fallback.origin.source
        );
        Ok(table)
    }

    /// A table from JSON text: either this format or a LiteLLM
    /// `model_prices_and_context_window.json` (derived on the fly).
    pub fn parse(text: &str, path: Option<&Path>) -> Result<PriceTable> {
        let value: Value = serde_json::from_str(text)?;
        let mut table = if value.get("format").is_some() && value.get("models").is_some() {
            let table: PriceTable = serde_json::from_value(value)?;
            if table.format != PRICE_FORMAT {
                return Err(Error::Invalid(format!(
                    "price table format {} is not supported (this build reads {PRICE_FORMAT})",
                    table.format
                )));
            }
            table
        } else {
            let name = path.map_or_else(|| "LiteLLM JSON".to_string(), |p| p.display().to_string());
            PriceTable::from_litellm(
                &value,
                &name,
                &chrono::Utc::now().format("%Y-%m-%d").to_string(),
            )?
        };
        table.origin.path = path.map(Path::to_path_buf);
        Ok(table)
    }

    /// Read a table from a file (this format or LiteLLM's).
    pub fn load(path: &Path) -> Result<PriceTable> {
        let text = std::fs::read_to_string(path).ctx("read price table", path)?;
        PriceTable::parse(&text, Some(path))
    }

    /// Derive a table from LiteLLM's `model_prices_and_context_window.json`:
    /// the chat/responses models of the first-party Anthropic, OpenAI and
    /// Google APIs (names without a provider prefix; `gemini/` is stripped),
    /// plus Claude models only listed under Bedrock ids
    /// (`anthropic.<name>-v1:0`) when the bare name is missing. Keeps the
    /// standard rates, cache read/write rates and `_above_<N>k_tokens` tiers;
    /// batch, flex and priority rates are left out.
    pub fn from_litellm(value: &Value, source: &str, date: &str) -> Result<PriceTable> {
        let entries = value
            .as_object()
            .ok_or_else(|| Error::Invalid("a LiteLLM price file is a JSON object".into()))?;
        let mut models = BTreeMap::new();
        let mut bedrock = BTreeMap::new();
        for (key, entry) in entries {
            let Some(obj) = entry.as_object() else {
                continue;
            };
            let provider = obj
                .get("litellm_provider")
                .and_then(Value::as_str)
                .unwrap_or("");
            let mode = obj.get("mode").and_then(Value::as_str).unwrap_or("chat");
            if !matches!(mode, "chat" | "responses" | "completion") {
                continue;
            }
            let Some(price) = litellm_price(obj, provider) else {
                continue;
            };
            if KEPT_PROVIDERS.contains(&provider) {
                let name = key.strip_prefix("gemini/").unwrap_or(key);
                if name.contains('/') {
                    continue;
                }
                // A bare name wins over its `gemini/` twin.
                if key.starts_with("gemini/") && models.contains_key(name) {
                    continue;
                }
                models.insert(name.to_string(), price);
            } else if provider.starts_with("bedrock") {
                if let Some(name) = bedrock_claude_name(key) {
                    bedrock.entry(name).or_insert(ModelPrice {
                        provider: "anthropic".into(),
                        ..price
                    });
                }
            }
        }
        for (name, price) in bedrock {
            models.entry(name).or_insert(price);
        }
        if models.is_empty() {
            return Err(Error::Invalid(
                "no Anthropic, OpenAI or Google chat model with token prices in that file".into(),
            ));
        }
        Ok(PriceTable {
            format: PRICE_FORMAT,
            origin: PriceOrigin {
                source: source.to_string(),
                date: date.to_string(),
                path: None,
                overrides: 0,
            },
            models,
        })
    }

    /// The table in force: see the module docs for the order. `home` is
    /// `$MEMOIR_HOME`; `explicit` is `--prices FILE`.
    pub fn configured(home: Option<&Path>, explicit: Option<&Path>) -> Result<PriceTable> {
        let config = match home.map(|h| h.join("config.toml")) {
            Some(path) if path.is_file() => {
                let text = std::fs::read_to_string(&path).ctx("read", &path)?;
                PricesConfig::parse(&text)?
            }
            _ => PricesConfig::default(),
        };
        let mut table = if let Some(file) = explicit {
            PriceTable::load(file)?
        } else if let Some(file) = &config.file {
            PriceTable::load(file)?
        } else if let Some(updated) = home.map(|h| h.join(UPDATED_FILE)).filter(|p| p.is_file()) {
            PriceTable::load(&updated)?
        } else {
            PriceTable::shipped()?
        };
        table.origin.overrides = config.models.len();
        for (name, p) in config.models {
            table.models.insert(name, p.into_price()?);
        }
        Ok(table)
    }

    /// The price of `model`: the exact name, else the name lowercased without
    /// a provider prefix (`anthropic/`, `openai/`, `google/`, `gemini/`,
    /// `models/`), a `[1m]`-style suffix, or a date suffix (`-20250929`,
    /// `@20250929`, `-2025-09-29`), else an undated name's latest dated
    /// release (`claude-sonnet-4` → `claude-sonnet-4-20250514`). No fuzzier
    /// matching: anything else is unpriced.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        let mut name = model.trim().to_ascii_lowercase();
        for prefix in ["anthropic/", "openai/", "google/", "gemini/", "models/"] {
            if let Some(rest) = name.strip_prefix(prefix) {
                name = rest.to_string();
            }
        }
        if let Some(i) = name.find('[') {
            name.truncate(i);
        }
        if let Some(p) = self.models.get(&name) {
            return Some(p);
        }
        let undated = strip_date(&name);
        if let Some(p) = self.models.get(undated) {
            return Some(p);
        }
        let dated = format!("{undated}-");
        self.models
            .range(dated.clone()..)
            .take_while(|(k, _)| k.starts_with(&dated))
            .filter(|(k, _)| strip_date(k) == undated)
            .last()
            .map(|(_, p)| p)
    }

    /// What one response of `model` with `usage` costs. A response without
    /// tokens (Claude Code's `<synthetic>` error lines) costs nothing, priced
    /// or not: it never makes a cost a lower bound.
    pub fn cost(&self, model: &str, usage: &Usage) -> Cost {
        if usage.total() == 0 {
            return Cost::default();
        }
        match self.lookup(model) {
            Some(p) => Cost {
                usd: p.cost(usage),
                unpriced_requests: 0,
            },
            None => Cost {
                usd: 0.0,
                unpriced_requests: 1,
            },
        }
    }

    /// The table as pretty JSON (the `prices.json` format).
    pub fn to_json(&self) -> Result<String> {
        let mut copy = self.clone();
        copy.origin.path = None;
        copy.origin.overrides = 0;
        Ok(serde_json::to_string_pretty(&copy)? + "\n")
    }
}

/// The file `memoir prices update` writes under `$MEMOIR_HOME`.
pub const UPDATED_FILE: &str = "prices.json";

/// The `[prices]` table of `config.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PricesConfig {
    /// A price file (this format or LiteLLM's) replacing the shipped table.
    #[serde(default)]
    file: Option<PathBuf>,
    /// Per-model prices in USD per million tokens.
    #[serde(default)]
    models: BTreeMap<String, ConfiguredPrice>,
}

/// One model's price in `config.toml`, USD per million tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfiguredPrice {
    input: f64,
    output: f64,
    #[serde(default)]
    cache_read: Option<f64>,
    #[serde(default)]
    cache_write: Option<f64>,
    #[serde(default)]
    cache_write_1h: Option<f64>,
}

impl ConfiguredPrice {
    fn into_price(self) -> Result<ModelPrice> {
        let per_token = |usd_per_mtok: f64| usd_per_mtok / 1_000_000.0;
        for v in [
            Some(self.input),
            Some(self.output),
            self.cache_read,
            self.cache_write,
            self.cache_write_1h,
        ]
        .into_iter()
        .flatten()
        {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::Config(format!(
                    "config.toml [prices.models]: price {v} is not a non-negative number"
                )));
            }
        }
        Ok(ModelPrice {
            provider: String::new(),
            input: per_token(self.input),
            output: per_token(self.output),
            cache_read: self.cache_read.map(per_token),
            cache_write: self.cache_write.map(per_token),
            cache_write_1h: self.cache_write_1h.map(per_token),
            tiers: Vec::new(),
        })
    }
}

impl PricesConfig {
    fn parse(text: &str) -> Result<PricesConfig> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            prices: Option<toml::Value>,
        }
        let file: File =
            toml::from_str(text).map_err(|e| Error::Config(format!("config.toml: {e}")))?;
        match file.prices {
            None => Ok(PricesConfig::default()),
            Some(v) => v
                .try_into()
                .map_err(|e| Error::Config(format!("config.toml [prices]: {e}"))),
        }
    }
}

/// The LiteLLM rates of one entry, when it has token prices.
fn litellm_price(obj: &serde_json::Map<String, Value>, provider: &str) -> Option<ModelPrice> {
    let rate = |k: &str| {
        obj.get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let input = rate("input_cost_per_token")?;
    let output = rate("output_cost_per_token")?;
    let mut tiers: BTreeMap<u64, PriceTier> = BTreeMap::new();
    for (key, value) in obj {
        let Some(v) = value.as_f64() else { continue };
        let Some((field, above)) = tier_key(key) else {
            continue;
        };
        let tier = tiers.entry(above).or_insert(PriceTier {
            above_tokens: above,
            input: None,
            output: None,
            cache_read: None,
            cache_write: None,
            cache_write_1h: None,
        });
        match field {
            "input_cost_per_token" => tier.input = Some(v),
            "output_cost_per_token" => tier.output = Some(v),
            "cache_read_input_token_cost" => tier.cache_read = Some(v),
            ONE_HOUR_WRITE => tier.cache_write_1h = Some(v),
            _ => tier.cache_write = Some(v),
        }
    }
    Some(ModelPrice {
        provider: provider.to_string(),
        input,
        output,
        cache_read: rate("cache_read_input_token_cost"),
        cache_write: rate("cache_creation_input_token_cost"),
        cache_write_1h: rate(ONE_HOUR_WRITE),
        tiers: tiers.into_values().collect(),
    })
}

/// LiteLLM's name for the 1-hour cache-write rate.
const ONE_HOUR_WRITE: &str = "cache_creation_input_token_cost_above_1hr";

/// `input_cost_per_token_above_200k_tokens` → `("input_cost_per_token", 200_000)`.
fn tier_key(key: &str) -> Option<(&'static str, u64)> {
    for field in [
        ONE_HOUR_WRITE,
        "input_cost_per_token",
        "output_cost_per_token",
        "cache_read_input_token_cost",
        "cache_creation_input_token_cost",
    ] {
        let Some(rest) = key
            .strip_prefix(field)
            .and_then(|r| r.strip_prefix("_above_"))
        else {
            continue;
        };
        let digits = rest.strip_suffix("k_tokens")?;
        let thousands: u64 = digits.parse().ok()?;
        return Some((field, thousands.checked_mul(1000)?));
    }
    None
}

/// `anthropic.claude-sonnet-4-20250514-v1:0` → `claude-sonnet-4-20250514`.
fn bedrock_claude_name(key: &str) -> Option<String> {
    let rest = key.strip_prefix("anthropic.")?;
    if !rest.starts_with("claude-") {
        return None;
    }
    let (name, version) = rest.rsplit_once("-v")?;
    version
        .split(':')
        .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.to_string())
}

/// The name without a trailing `-YYYYMMDD`, `@YYYYMMDD` or `-YYYY-MM-DD`.
fn strip_date(name: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = name.rsplit_once(['-', '@']) {
        if tail.len() == 8 && digits(tail) {
            return head;
        }
    }
    if name.len() > 11 {
        let (head, tail) = name.split_at(name.len() - 11);
        let b = tail.as_bytes();
        if b[0] == b'-'
            && b[5] == b'-'
            && b[8] == b'-'
            && digits(&tail[1..5])
            && digits(&tail[6..8])
            && digits(&tail[9..])
        {
            return head;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
            ..Usage::default()
        }
    }

    #[test]
    fn the_shipped_table_prices_known_models_with_cache_rates() {
        let t = PriceTable::shipped().unwrap();
        assert!(!t.origin.date.is_empty() && t.origin.source.contains("LiteLLM"));
        // claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per Mtok
        // (100k of each: below the 200k long-context threshold).
        let c = t.cost(
            "claude-sonnet-4-5-20250929",
            &usage(100_000, 100_000, 100_000, 100_000),
        );
        assert!(
            (c.usd - (3.0 + 15.0 + 0.3 + 3.75) / 10.0).abs() < 1e-9,
            "{c:?}"
        );
        // Dated and prefixed names resolve; Claude 4 comes from its Bedrock id.
        assert!(t.lookup("anthropic/claude-sonnet-4-5").is_some());
        assert!(t.lookup("claude-sonnet-4-20250514").is_some());
        // Undated names resolve to their dated release, with its tiers:
        // 1M input tokens of claude-sonnet-4 = 200k at $3 + 800k at $6 per Mtok.
        let c = t.cost("claude-sonnet-4", &usage(1_000_000, 0, 0, 0));
        assert!(
            (c.usd - (0.6 + 4.8)).abs() < 1e-9 && c.unpriced_requests == 0,
            "{c:?}"
        );
        for (model, usd) in [
            ("claude-opus-4", 1.5),
            ("claude-3-5-sonnet", 0.3),
            ("claude-3-5-haiku", 0.08),
            ("claude-3-7-sonnet", 0.3),
        ] {
            let c = t.cost(model, &usage(100_000, 0, 0, 0));
            assert!(
                (c.usd - usd).abs() < 1e-9 && c.unpriced_requests == 0,
                "{model}: {c:?}"
            );
        }
        assert!(t.lookup("gpt-5.2").is_some());
        assert!(t.lookup("gemini-2.5-pro").is_some());
        // Unknown models are unpriced, never $0-priced.
        let unknown = t.cost("totally-new-model-9", &usage(10, 10, 0, 0));
        assert_eq!(unknown.unpriced_requests, 1);
        assert!(unknown.is_lower_bound());
        // A response without tokens (a `<synthetic>` API-error line) costs nothing.
        assert_eq!(t.cost("<synthetic>", &Usage::default()), Cost::default());
    }

    fn with_1h(mut u: Usage, one_hour: u64) -> Usage {
        u.cache_creation_1h_input_tokens = one_hour;
        u
    }

    #[test]
    fn each_token_class_pays_the_tier_rate_only_beyond_the_threshold() {
        let p = ModelPrice {
            provider: String::new(),
            input: 1e-6,
            output: 2e-6,
            cache_read: Some(1e-7),
            cache_write: None,
            cache_write_1h: None,
            tiers: vec![PriceTier {
                above_tokens: 200_000,
                input: Some(2e-6),
                output: Some(4e-6),
                cache_read: None,
                cache_write: None,
                cache_write_1h: None,
            }],
        };
        // 150k input + 100k cache read: neither class is above 200k.
        let below = p.cost(&usage(150_000, 1000, 100_000, 0));
        assert!((below - (0.15 + 0.002 + 0.01)).abs() < 1e-12, "{below}");
        // 250k input: the first 200k at the base rate, 50k at the tier rate.
        let above = p.cost(&usage(250_000, 0, 0, 0));
        assert!((above - (0.2 + 0.1)).abs() < 1e-12, "{above}");
        // A class without a tier rate keeps its base rate above the threshold.
        let read = p.cost(&usage(0, 0, 300_000, 0));
        assert!((read - 0.03).abs() < 1e-12, "{read}");
        // A missing cache-write rate falls back to the input rate.
        assert!((p.cost(&usage(0, 0, 0, 10)) - 1e-5).abs() < 1e-15);
    }

    #[test]
    fn one_hour_cache_writes_cost_more_than_five_minute_writes() {
        let t = PriceTable::shipped().unwrap();
        // claude-sonnet-4-5: 5-minute writes $3.75, 1-hour writes $6 per Mtok.
        let five = t.cost("claude-sonnet-4-5", &usage(0, 0, 0, 100_000)).usd;
        let mixed = t
            .cost(
                "claude-sonnet-4-5",
                &with_1h(usage(0, 0, 0, 100_000), 40_000),
            )
            .usd;
        let hour = t
            .cost(
                "claude-sonnet-4-5",
                &with_1h(usage(0, 0, 0, 100_000), 100_000),
            )
            .usd;
        assert!((five - 0.375).abs() < 1e-12, "{five}");
        assert!(
            (mixed - (0.06 * 3.75 + 0.04 * 6.0)).abs() < 1e-12,
            "{mixed}"
        );
        assert!((hour - 0.6).abs() < 1e-12, "{hour}");
        // Each TTL has its own 200k threshold: 150k + 150k stays below it,
        // 1M of 1-hour writes pays 200k at $6 and 800k at $12 per Mtok.
        let split = t
            .cost(
                "claude-sonnet-4-5",
                &with_1h(usage(0, 0, 0, 300_000), 150_000),
            )
            .usd;
        assert!(
            (split - (0.15 * 3.75 + 0.15 * 6.0)).abs() < 1e-12,
            "{split}"
        );
        let long = t
            .cost(
                "claude-sonnet-4-5",
                &with_1h(usage(0, 0, 0, 1_000_000), 1_000_000),
            )
            .usd;
        assert!((long - (0.2 * 6.0 + 0.8 * 12.0)).abs() < 1e-9, "{long}");
        // An explicit 1-hour rate (LiteLLM `cache_creation_input_token_cost_above_1hr`) wins.
        let litellm = serde_json::json!({"claude-z": {"litellm_provider": "anthropic",
            "mode": "chat", "input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6,
            "cache_creation_input_token_cost_above_1hr": 5e-6}});
        let z = PriceTable::parse(&litellm.to_string(), None).unwrap();
        let c = z.cost("claude-z", &with_1h(usage(0, 0, 0, 10), 10)).usd;
        assert!((c - 5e-5).abs() < 1e-15, "{c}");
    }

    #[test]
    fn litellm_files_are_derived_and_config_overrides_apply() {
        let litellm = serde_json::json!({
            "sample_spec": {"input_cost_per_token": 0, "output_cost_per_token": 0},
            "claude-x-1": {"litellm_provider": "anthropic", "mode": "chat",
                "input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
                "cache_read_input_token_cost": 3e-7, "cache_creation_input_token_cost": 3.75e-6,
                "input_cost_per_token_above_200k_tokens": 6e-6,
                "input_cost_per_token_above_200k_tokens_priority": 9e-6,
                "input_cost_per_token_batches": 1.5e-6},
            "anthropic.claude-old-20240101-v1:0": {"litellm_provider": "bedrock", "mode": "chat",
                "input_cost_per_token": 1e-6, "output_cost_per_token": 5e-6},
            "gemini/gemini-y": {"litellm_provider": "gemini", "mode": "chat",
                "input_cost_per_token": 1e-7, "output_cost_per_token": 4e-7},
            "azure/gpt-z": {"litellm_provider": "azure", "mode": "chat",
                "input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6},
            "dall-e": {"litellm_provider": "openai", "mode": "image_generation",
                "input_cost_per_token": 1e-6, "output_cost_per_token": 1e-6}
        });
        let t = PriceTable::parse(&litellm.to_string(), None).unwrap();
        assert_eq!(
            t.models.keys().collect::<Vec<_>>(),
            ["claude-old-20240101", "claude-x-1", "gemini-y"]
        );
        let x = &t.models["claude-x-1"];
        assert_eq!(x.tiers.len(), 1);
        assert_eq!(
            (x.tiers[0].above_tokens, x.tiers[0].input),
            (200_000, Some(6e-6))
        );

        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("litellm.json");
        std::fs::write(&file, litellm.to_string()).unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            format!(
                "[embed]\nprovider = \"hash\"\n[prices]\nfile = {:?}\n[prices.models.\"my-model\"]\ninput = 2.0\noutput = 8.0\n",
                file
            ),
        )
        .unwrap();
        let c = PriceTable::configured(Some(home.path()), None).unwrap();
        assert_eq!(c.origin.overrides, 1);
        assert!(c.lookup("claude-x-1").is_some() && c.lookup("gpt-5.2").is_none());
        let mine = c.cost("my-model", &usage(1_000_000, 500_000, 0, 0));
        assert!((mine.usd - 6.0).abs() < 1e-9, "{mine:?}");

        std::fs::write(home.path().join("config.toml"), "[prices]\nfiel = 1\n").unwrap();
        assert!(matches!(
            PriceTable::configured(Some(home.path()), None),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn dates_strip_only_when_they_are_dates() {
        assert_eq!(
            strip_date("claude-sonnet-4-5-20250929"),
            "claude-sonnet-4-5"
        );
        assert_eq!(
            strip_date("claude-sonnet-4-5@20250929"),
            "claude-sonnet-4-5"
        );
        assert_eq!(strip_date("gpt-4o-2024-08-06"), "gpt-4o");
        assert_eq!(strip_date("gpt-5.2"), "gpt-5.2");
        assert_eq!(strip_date("o1-12345"), "o1-12345");
        assert_eq!(
            bedrock_claude_name("anthropic.claude-3-haiku-20240307-v1:0").as_deref(),
            Some("claude-3-haiku-20240307")
        );
        assert_eq!(bedrock_claude_name("anthropic.titan-v1"), None);
    }
}
