//! The time bounds a search (or any front's `--since`/`--until`) accepts,
//! parsed once for the CLI, the MCP tools and the server: an RFC 3339
//! instant, a `YYYY-MM-DD` day (its start, UTC), or an age before now
//! (`7d`, `12h`, `30m`).

use chrono::{DateTime, NaiveDate, Utc};

use super::SearchError;

/// Parse `s` as an instant, a day or an age (see the module docs).
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, SearchError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Some(t) = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
    {
        return Ok(t.and_utc());
    }
    let (num, unit) = s.split_at(s.len().saturating_sub(1));
    let ago = num.parse::<i64>().ok().and_then(|n| match unit {
        "d" => chrono::Duration::try_days(n),
        "h" => chrono::Duration::try_hours(n),
        "m" => chrono::Duration::try_minutes(n),
        _ => None,
    });
    ago.and_then(|a| Utc::now().checked_sub_signed(a))
        .ok_or_else(|| {
            SearchError::Invalid(format!(
                "{s:?} is not a time (use 2026-05-01, 2026-05-01T10:00:00Z, or 7d / 12h / 30m)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::parse_time;
    use chrono::{TimeZone, Utc};

    #[test]
    fn instants_days_and_ages_parse_and_the_rest_is_refused() {
        assert_eq!(
            parse_time("2026-05-01T10:00:00+02:00").unwrap(),
            Utc.with_ymd_and_hms(2026, 5, 1, 8, 0, 0).unwrap()
        );
        assert_eq!(
            parse_time("2026-05-01").unwrap(),
            Utc.with_ymd_and_hms(2026, 5, 1, 0, 0, 0).unwrap()
        );
        let age = Utc::now() - parse_time("2h").unwrap();
        assert!((age.num_seconds() - 7200).abs() < 60, "{age}");
        for bad in ["", "yesterday", "7w", "2026-13-01", "99999999999999d"] {
            assert!(parse_time(bad).is_err(), "{bad:?} parsed");
        }
    }
}
