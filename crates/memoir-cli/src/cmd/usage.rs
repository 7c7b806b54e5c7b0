//! `memoir usage` (token usage and cost over a store, grouped, as a table,
//! JSON or CSV, or as 5-hour billing blocks) and `memoir prices update FILE`
//! (import a LiteLLM price file). Glue only: counting and pricing live in
//! [`memoir::usage`].

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, NaiveDate, Utc};
use memoir::manager::PROJECT_SESSIONS_DIR;
use memoir::store::file::FileStore;
use memoir::store::Durability;
use memoir::usage::{
    self, BillingBlock, GroupKey, PriceTable, ProjectFilter, Totals, UsageQuery, UsageReport, Zone,
};

use super::store::StoreArgs;

/// Arguments of `memoir usage`.
#[derive(clap::Args)]
pub struct Args {
    /// Session directory (default: the project's store, else $MEMOIR_SESSION_DIR
    /// or $MEMOIR_HOME/sessions).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Only this project: its store (<PATH>/.memoir/sessions) when it has one,
    /// else the sessions of the default store whose workspace is inside PATH.
    #[arg(long, value_name = "PATH")]
    project: Option<PathBuf>,
    /// Only sessions written by this agent (claude-code, codex, gemini-cli, opencode, memoir).
    #[arg(long)]
    agent: Option<String>,
    /// Only this session (full id or unique prefix); a fork's inherited usage is shown apart.
    #[arg(long)]
    session: Option<String>,
    /// Only responses whose model contains this text (case-insensitive).
    #[arg(long)]
    model: Option<String>,
    /// From this day (YYYY-MM-DD or YYYYMMDD, in --timezone) or instant (RFC 3339), inclusive.
    #[arg(long)]
    since: Option<String>,
    /// Up to this day (inclusive) or before this instant (RFC 3339).
    #[arg(long)]
    until: Option<String>,
    /// Group by day, week, month, session, project, model, agent (several: --by day,model).
    #[arg(long, value_delimiter = ',', default_value = "day")]
    by: Vec<String>,
    /// Show 5-hour billing blocks instead of groups.
    #[arg(long)]
    blocks: bool,
    /// Time zone of days, weeks, months, --since/--until days and block
    /// hours: an IANA name (Europe/Paris), UTC, or local (the default: TZ,
    /// else /etc/localtime), as ccusage's --timezone.
    #[arg(long, short = 'z', default_value = "local")]
    timezone: String,
    /// Price table (memoir's prices.json or a LiteLLM JSON) instead of the configured one.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV.
    #[arg(long)]
    csv: bool,
    /// Terminal width for the table (default: $COLUMNS, else 120 on a terminal).
    #[arg(long)]
    width: Option<usize>,
}

/// Subcommands of `memoir prices`.
#[derive(clap::Subcommand)]
pub enum PricesCommand {
    /// Import a LiteLLM model_prices_and_context_window.json you downloaded:
    /// writes $MEMOIR_HOME/prices.json, used instead of the shipped table.
    Update {
        /// The LiteLLM JSON file.
        file: PathBuf,
        /// Write here instead of $MEMOIR_HOME/prices.json.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Describe the source (recorded in the table).
        #[arg(long)]
        source: Option<String>,
        /// The source's date, YYYY-MM-DD (default: today).
        #[arg(long)]
        date: Option<String>,
    },
    /// Show the price table in force and where it comes from.
    Show {
        /// Price table file instead of the configured one.
        #[arg(long, value_name = "FILE")]
        prices: Option<PathBuf>,
        /// Only models whose name contains this text.
        #[arg(long)]
        model: Option<String>,
    },
}

/// The configured price table (`--prices`, config.toml, `prices update`, shipped).
pub fn price_table(explicit: Option<&Path>) -> anyhow::Result<PriceTable> {
    let home = memoir::paths::memoir_home().ok();
    PriceTable::configured(home.as_deref(), explicit).context("loading the price table")
}

/// Run `memoir usage`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let prices = price_table(args.prices.as_deref())?;
    let zone: Zone = args.timezone.parse()?;
    let (dir, project) = store_and_project(&args)?;
    let store = FileStore::new(&dir, Durability::Fsync);
    let group_by = args
        .by
        .iter()
        .map(|s| s.trim().parse::<GroupKey>())
        .collect::<Result<Vec<_>, _>>()?;
    let query = UsageQuery {
        project,
        agent: args.agent.clone(),
        session: args.session.clone(),
        model: args.model.clone(),
        since: args
            .since
            .as_deref()
            .map(|s| parse_bound(s, false, zone))
            .transpose()?,
        until: args
            .until
            .as_deref()
            .map(|s| parse_bound(s, true, zone))
            .transpose()?,
        group_by,
        timezone: zone,
    };
    // Without --width or $COLUMNS: 120 on a terminal, no limit in a pipe.
    let width = args
        .width
        .or_else(|| std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()))
        .unwrap_or(if std::io::stdout().is_terminal() {
            120
        } else {
            usize::MAX
        });
    if args.blocks {
        let usage::BlocksReport { blocks, notices } =
            usage::blocks_report(&store, &query, &prices, Utc::now())?;
        for notice in notices {
            eprintln!("memoir: {notice}");
        }
        if args.json {
            let v = serde_json::json!({"format": usage::USAGE_FORMAT, "blocks": blocks, "prices": prices.origin});
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else if args.csv {
            print!("{}", blocks_csv(&blocks));
        } else {
            print!("{}", blocks_table(&blocks, width, zone));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = usage::report(&store, &query, &prices)?;
    for notice in &report.notices {
        eprintln!("memoir: {notice}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if args.csv {
        print!("{}", report_csv(&report));
    } else {
        print!("{}", report_table(&report, width));
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `memoir prices`.
pub fn run_prices(command: PricesCommand) -> anyhow::Result<ExitCode> {
    match command {
        PricesCommand::Update {
            file,
            output,
            source,
            date,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", file.display()))?;
            let source = source.unwrap_or_else(|| {
                format!(
                    "LiteLLM model_prices_and_context_window.json ({})",
                    file.file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
                )
            });
            let date = date.unwrap_or_else(|| Utc::now().format("%Y-%m-%d").to_string());
            let table = PriceTable::from_litellm(&value, &source, &date)?;
            let output = match output {
                Some(o) => o,
                None => {
                    let home = memoir::paths::memoir_home()?;
                    memoir::paths::create_private_dir(&home)?;
                    home.join(usage::price::UPDATED_FILE)
                }
            };
            let tmp = output.with_extension("json.tmp");
            std::fs::write(&tmp, table.to_json()?)
                .with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &output)
                .with_context(|| format!("replacing {}", output.display()))?;
            println!(
                "{} models priced from {} ({}) -> {}",
                table.models.len(),
                file.display(),
                date,
                output.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PricesCommand::Show { prices, model } => {
            let table = price_table(prices.as_deref())?;
            println!(
                "source: {}\ndate: {}{}{}",
                table.origin.source,
                table.origin.date,
                table
                    .origin
                    .path
                    .as_ref()
                    .map_or_else(String::new, |p| format!("\nfile: {}", p.display())),
                if table.origin.overrides > 0 {
                    format!("\nconfig.toml overrides: {}", table.origin.overrides)
                } else {
                    String::new()
                }
            );
            println!(
                "{:<44} {:>9} {:>9} {:>9} {:>9} {:>9}  tiers (USD per Mtok)",
                "model", "input", "output", "c-read", "c-write", "c-write1h"
            );
            let mtok = |v: f64| format!("{:.3}", v * 1e6);
            for (name, p) in &table.models {
                if model.as_ref().is_some_and(|m| !name.contains(m.as_str())) {
                    continue;
                }
                let tiers: Vec<String> = p
                    .tiers
                    .iter()
                    .map(|t| {
                        format!(
                            ">{}k in {}",
                            t.above_tokens / 1000,
                            t.input.map_or("-".into(), mtok)
                        )
                    })
                    .collect();
                println!(
                    "{:<44} {:>9} {:>9} {:>9} {:>9} {:>9}  {}",
                    name,
                    mtok(p.input),
                    mtok(p.output),
                    p.cache_read.map_or("-".into(), mtok),
                    p.cache_write.map_or("-".into(), mtok),
                    mtok(p.cache_write_1h_rate()),
                    tiers.join(", ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The store to read and the project filter, from `--dir` and `--project`.
fn store_and_project(args: &Args) -> anyhow::Result<(PathBuf, Option<ProjectFilter>)> {
    if let Some(dir) = &args.dir {
        memoir::paths::check_store_dir(dir)?;
        let filter = args.project.as_ref().map(|p| workspace_filter(p));
        return Ok((dir.clone(), filter));
    }
    if let Some(p) = &args.project {
        let own = p.join(PROJECT_SESSIONS_DIR);
        if own.is_dir() {
            return Ok((own, None));
        }
        let dir = memoir::transcript::Session::default_dir()?;
        return Ok((dir, Some(workspace_filter(p))));
    }
    Ok((StoreArgs::default().resolve()?.dir, None))
}

fn workspace_filter(p: &Path) -> ProjectFilter {
    ProjectFilter::Workspace(std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// `YYYY-MM-DD`, `YYYYMMDD` (a day in `zone`; as an upper bound, the end of it) or RFC 3339.
fn parse_bound(s: &str, upper: bool, zone: Zone) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let day = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .or_else(|_| NaiveDate::parse_from_str(s, "%Y%m%d"))
        .map_err(|e| {
            crate::exit::CliError::usage(format!(
                "{s:?} is not a date (YYYY-MM-DD, YYYYMMDD) or an RFC 3339 time: {e}"
            ))
        })?;
    let day = if upper {
        day.succ_opt().unwrap_or(day)
    } else {
        day
    };
    Ok(zone.start_of(day))
}

/// A cost cell: `$1.23`, `≥$1.23` when part is unpriced, `unpriced` when all is.
fn cost_cell(t: &Totals) -> String {
    if t.requests > 0 && t.unpriced_requests == t.requests {
        "unpriced".to_string()
    } else if t.cost_is_lower_bound {
        format!(">={}", dollars(t.cost_usd))
    } else {
        dollars(t.cost_usd)
    }
}

/// `$12.34`; amounts under a cent keep four decimals (`$0.0044`), so small
/// costs do not read as `$0.00`.
fn dollars(usd: f64) -> String {
    if usd > 0.0 && usd < 0.01 {
        format!("${usd:.4}")
    } else {
        format!("${usd:.2}")
    }
}

/// `12,345,678`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn flag(t: &Totals) -> &'static str {
    if t.partial_requests > 0 {
        "*"
    } else {
        ""
    }
}

const COLUMNS: [&str; 8] = [
    "input",
    "output",
    "cache-read",
    "cache-write",
    "reasoning",
    "requests",
    "cost",
    "",
];

fn cells(t: &Totals) -> Vec<String> {
    vec![
        thousands(t.input_tokens),
        thousands(t.output_tokens),
        thousands(t.cache_read_tokens),
        thousands(t.cache_write_tokens),
        thousands(t.reasoning_tokens),
        thousands(t.requests),
        cost_cell(t),
        flag(t).to_string(),
    ]
}

/// Render rows as an aligned table; narrow terminals get key, total, requests, cost.
fn render(header: Vec<String>, rows: Vec<Vec<String>>, keys: usize, width: usize) -> String {
    let full_width = |cols: &[usize]| {
        cols.iter()
            .map(|&c| {
                std::iter::once(&header)
                    .chain(&rows)
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .sum::<usize>()
            + 2 * cols.len()
    };
    let all: Vec<usize> = (0..header.len()).collect();
    let chosen: Vec<usize> = if full_width(&all) <= width {
        all
    } else {
        // key columns, then total, requests, cost and the flag
        let mut narrow: Vec<usize> = (0..keys).collect();
        narrow.extend([
            header.len() - 4,
            header.len() - 3,
            header.len() - 2,
            header.len() - 1,
        ]);
        narrow
    };
    let widths: Vec<usize> = chosen
        .iter()
        .map(|&c| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (n, row) in std::iter::once(&header).chain(&rows).enumerate() {
        let mut line = String::new();
        for (i, &c) in chosen.iter().enumerate() {
            let cell = &row[c];
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            if c < keys {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        let last_body = n == rows.len() - 1;
        if n == 0 || (last_body && rows.len() > 1) {
            let rule: usize = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
            out.push_str(&"-".repeat(rule));
            out.push('\n');
        }
    }
    out
}

fn with_total_column(mut cells: Vec<String>, t: &Totals) -> Vec<String> {
    // cells: input, output, read, write, reasoning, requests, cost, flag:
    // insert the total before requests so the narrow layout can show it.
    cells.insert(5, thousands(t.total_tokens));
    cells
}

fn report_table(report: &UsageReport, width: usize) -> String {
    let keys: Vec<String> = if report.group_by.is_empty() {
        vec!["".into()]
    } else {
        report
            .group_by
            .iter()
            .map(|k| k.as_str().to_string())
            .collect()
    };
    let by_session = report.group_by == [GroupKey::Session];
    let mut header = keys.clone();
    let mut cols: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
    cols.insert(5, "total".into());
    header.extend(cols);
    let mut rows = Vec::new();
    for row in &report.rows {
        let mut r: Vec<String> = row.key().into_iter().map(str::to_string).collect();
        r.extend(with_total_column(cells(&row.totals), &row.totals));
        rows.push(r);
        if by_session {
            if let Some(inh) = &row.inherited {
                let mut r = vec![format!(
                    "  inherited from {}",
                    row.parent.as_deref().unwrap_or("?")
                )];
                r.extend(std::iter::repeat_n(String::new(), keys.len() - 1));
                r.extend(with_total_column(cells(inh), inh));
                rows.push(r);
            }
        }
    }
    let mut total = vec!["Total".to_string()];
    total.extend(std::iter::repeat_n(String::new(), keys.len() - 1));
    total.extend(with_total_column(cells(&report.total), &report.total));
    rows.push(total);
    let mut out = render(header, rows, keys.len(), width);
    out.push_str(&notes(report));
    out
}

fn notes(report: &UsageReport) -> String {
    let t = &report.total;
    let mut out = String::new();
    out.push_str(&format!(
        "{} sessions, {} responses (each counted once; {} duplicate copies skipped). Provenance: {}.\n",
        report.sessions,
        thousands(t.requests),
        report.duplicate_responses,
        match t.provenance {
            memoir::message::UsageSource::Provider => "provider",
            memoir::message::UsageSource::Transcript => "transcript",
            memoir::message::UsageSource::Estimate => "estimate",
        }
    ));
    if t.partial_requests > 0 {
        out.push_str(&format!(
            "* {} responses carry transcript or estimated counts (known to be partial): totals are lower bounds.\n",
            thousands(t.partial_requests)
        ));
    }
    if t.cost_is_lower_bound {
        out.push_str(&format!(
            ">= {} responses are unpriced ({}): the cost is a lower bound.\n",
            thousands(t.unpriced_requests),
            t.unpriced_models
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if report.unreadable_sessions > 0 {
        out.push_str(&format!(
            "{} sessions could not be read: totals are lower bounds.\n",
            report.unreadable_sessions
        ));
    }
    if t.undated_requests > 0 {
        out.push_str(&format!(
            "{} responses have no timestamp and are dated by their session's start.\n",
            thousands(t.undated_requests)
        ));
    }
    out.push_str(&format!(
        "Prices: {} ({}).\n",
        report.prices.source, report.prices.date
    ));
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const CSV_TOTALS: &str = "input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,reasoning_tokens,total_tokens,requests,cost_usd,cost_is_lower_bound,unpriced_requests,provenance,partial_requests";

fn csv_totals(t: &Totals) -> String {
    format!(
        "{},{},{},{},{},{},{},{:.6},{},{},{},{}",
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        t.cache_write_tokens,
        t.reasoning_tokens,
        t.total_tokens,
        t.requests,
        t.cost_usd,
        t.cost_is_lower_bound,
        t.unpriced_requests,
        serde_json::to_value(t.provenance)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        t.partial_requests
    )
}

fn report_csv(report: &UsageReport) -> String {
    let keys: Vec<&str> = report.group_by.iter().map(|k| k.as_str()).collect();
    let mut out = String::new();
    let mut head: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    head.push("kind".into());
    out.push_str(&format!("{},{CSV_TOTALS}\n", head.join(",")));
    for row in &report.rows {
        let key: Vec<String> = row.key().into_iter().map(csv_field).collect();
        out.push_str(&format!(
            "{},own,{}\n",
            key.join(","),
            csv_totals(&row.totals)
        ));
        if let Some(inh) = &row.inherited {
            out.push_str(&format!(
                "{},inherited,{}\n",
                key.join(","),
                csv_totals(inh)
            ));
        }
    }
    let blanks = vec![String::new(); keys.len()];
    out.push_str(&format!(
        "{},total,{}\n",
        blanks.join(","),
        csv_totals(&report.total)
    ));
    out
}

fn blocks_table(blocks: &[BillingBlock], width: usize, zone: Zone) -> String {
    let mut header = vec![format!("block ({zone})"), "models".to_string()];
    let mut cols: Vec<String> = COLUMNS.iter().map(|s| s.to_string()).collect();
    cols.insert(5, "total".into());
    header.extend(cols);
    let mut total = Totals::default();
    let mut rows = Vec::new();
    for b in blocks {
        total.merge(&b.totals);
        let mut r = vec![
            format!(
                "{} - {}{}",
                zone.at(b.start).format("%Y-%m-%d %H:%M"),
                zone.at(b.end).format("%H:%M"),
                if b.active { " (active)" } else { "" }
            ),
            b.models.iter().cloned().collect::<Vec<_>>().join(" "),
        ];
        r.extend(with_total_column(cells(&b.totals), &b.totals));
        rows.push(r);
    }
    let mut r = vec!["Total".to_string(), String::new()];
    r.extend(with_total_column(cells(&total), &total));
    rows.push(r);
    render(header, rows, 2, width)
}

fn blocks_csv(blocks: &[BillingBlock]) -> String {
    let mut out = format!("start,end,active,models,{CSV_TOTALS}\n");
    for b in blocks {
        out.push_str(&format!(
            "{},{},{},{},{}\n",
            b.start.to_rfc3339(),
            b.end.to_rfc3339(),
            b.active,
            csv_field(&b.models.iter().cloned().collect::<Vec<_>>().join(" ")),
            csv_totals(&b.totals)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_cells() {
        assert_eq!(
            parse_bound("2026-05-12", true, Zone::Utc)
                .unwrap()
                .to_rfc3339(),
            "2026-05-13T00:00:00+00:00"
        );
        assert_eq!(
            parse_bound("20260512", false, Zone::Utc)
                .unwrap()
                .to_rfc3339(),
            "2026-05-12T00:00:00+00:00"
        );
        // A day in Tokyo (UTC+9) starts at 15:00 UTC the day before.
        let tokyo: Zone = "Asia/Tokyo".parse().unwrap();
        assert_eq!(
            parse_bound("2026-05-12", false, tokyo)
                .unwrap()
                .to_rfc3339(),
            "2026-05-11T15:00:00+00:00"
        );
        assert!(parse_bound("yesterday", false, Zone::Utc).is_err());
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
        let mut t = Totals {
            requests: 2,
            cost_usd: 1.5,
            ..Totals::default()
        };
        assert_eq!(cost_cell(&t), "$1.50");
        t.unpriced_requests = 1;
        t.cost_is_lower_bound = true;
        assert_eq!(cost_cell(&t), ">=$1.50");
        t.unpriced_requests = 2;
        assert_eq!(cost_cell(&t), "unpriced");
        assert_eq!(dollars(0.0043925), "$0.0044");
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }
}
