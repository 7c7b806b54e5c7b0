//! The time zone usage reports are dated in: calendar days, ISO weeks and
//! months, day bounds of `--since`/`--until`, and the hour a 5-hour billing
//! block starts on. `UTC`, the machine's `local` zone, or an IANA name
//! (`Europe/Paris`, through `chrono-tz`'s compiled-in database), as
//! ccusage's `--timezone` takes them.

use chrono::{DateTime, FixedOffset, Local, NaiveDate, Offset, TimeZone, Utc};

use crate::error::{Error, Result};

/// A time zone to date usage in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Zone {
    /// Coordinated Universal Time (the library's default).
    #[default]
    Utc,
    /// The machine's zone (`TZ`, else `/etc/localtime`).
    Local,
    /// A zone of the IANA database.
    Named(chrono_tz::Tz),
}

impl std::str::FromStr for Zone {
    type Err = Error;
    fn from_str(s: &str) -> Result<Zone> {
        match s {
            "local" | "Local" => Ok(Zone::Local),
            "UTC" | "utc" | "Etc/UTC" | "Z" => Ok(Zone::Utc),
            name => name.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
                Error::Invalid(format!(
                    "unknown time zone {name:?} (expected an IANA name such as Europe/Paris, UTC or local)"
                ))
            }),
        }
    }
}

impl std::fmt::Display for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Zone::Utc => f.write_str("UTC"),
            Zone::Local => f.write_str("local"),
            Zone::Named(tz) => f.write_str(tz.name()),
        }
    }
}

impl Zone {
    /// `at` as a wall-clock time in this zone.
    pub fn at(self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = match self {
            Zone::Utc => Utc.fix(),
            Zone::Local => Local.offset_from_utc_datetime(&at.naive_utc()).fix(),
            Zone::Named(tz) => tz.offset_from_utc_datetime(&at.naive_utc()).fix(),
        };
        at.with_timezone(&offset)
    }

    /// The instant day `day` starts in this zone (its first existing
    /// instant when a DST change skips midnight).
    pub fn start_of(self, day: NaiveDate) -> DateTime<Utc> {
        let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default();
        let local = |r: chrono::LocalResult<DateTime<FixedOffset>>| r.earliest();
        let found = (0..=3).find_map(|h| {
            let t = midnight + chrono::Duration::hours(h);
            match self {
                Zone::Utc => Some(Utc.from_utc_datetime(&t).fixed_offset()),
                Zone::Local => local(Local.from_local_datetime(&t).map(|d| d.fixed_offset())),
                Zone::Named(tz) => local(tz.from_local_datetime(&t).map(|d| d.fixed_offset())),
            }
        });
        found.map_or_else(
            || Utc.from_utc_datetime(&midnight),
            |d| d.with_timezone(&Utc),
        )
    }

    /// The start of the wall-clock hour holding `at` in this zone (zones
    /// with a half-hour offset start billing blocks on their own hours).
    pub fn hour_start(self, at: DateTime<Utc>) -> DateTime<Utc> {
        let local = self.at(at);
        let into_hour =
            chrono::Duration::seconds(
                i64::from(chrono::Timelike::minute(&local)) * 60
                    + i64::from(chrono::Timelike::second(&local)),
            ) + chrono::Duration::nanoseconds(i64::from(chrono::Timelike::nanosecond(&local)));
        at - into_hour
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn names_parse_and_days_start_at_local_midnight() {
        let paris: Zone = "Europe/Paris".parse().unwrap();
        assert_eq!(paris.to_string(), "Europe/Paris");
        assert!("Mars/Olympus".parse::<Zone>().is_err());
        assert_eq!("utc".parse::<Zone>().unwrap(), Zone::Utc);
        // 23:30 UTC on 14 June is already 15 June in Paris (UTC+2 in summer).
        let t = utc("2026-06-14T23:30:00Z");
        assert_eq!(paris.at(t).format("%Y-%m-%d").to_string(), "2026-06-15");
        assert_eq!(Zone::Utc.at(t).format("%Y-%m-%d").to_string(), "2026-06-14");
        let day = NaiveDate::from_ymd_opt(2026, 6, 15).unwrap();
        assert_eq!(paris.start_of(day), utc("2026-06-14T22:00:00Z"));
        // Half-hour zones start their hours at :30 UTC.
        let kolkata: Zone = "Asia/Kolkata".parse().unwrap();
        assert_eq!(
            kolkata.hour_start(utc("2026-06-14T10:10:00Z")),
            utc("2026-06-14T09:30:00Z")
        );
        assert_eq!(
            Zone::Utc.hour_start(utc("2026-06-14T10:10:05Z")),
            utc("2026-06-14T10:00:00Z")
        );
    }
}
