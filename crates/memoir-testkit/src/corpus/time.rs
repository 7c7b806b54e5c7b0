//! Milliseconds since the epoch to and from calendar dates, and the
//! ISO-8601 forms the agents write.

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Milliseconds since the epoch at midnight UTC of a date.
pub fn ms_of(y: i64, m: i64, d: i64) -> i64 {
    days_from_civil(y, m, d) * 86_400_000
}

/// The date and time parts of `ms`: (y, m, d, hh, mm, ss, millis).
pub fn parts(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    (
        y,
        m,
        d,
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    )
}

/// `2026-03-02T10:04:05.123Z`, as both agents write timestamps.
pub fn iso(ms: i64) -> String {
    let (y, mo, d, h, mi, s, milli) = parts(ms);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// Milliseconds of a timestamp [`iso`] wrote (`YYYY-MM-DDThh:mm:ss.mmmZ`).
pub fn parse_ms(s: &str) -> Option<i64> {
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let days = days_from_civil(n(0..4)?, n(5..7)?, n(8..10)?);
    Some(
        days * 86_400_000
            + n(11..13)? * 3_600_000
            + n(14..16)? * 60_000
            + n(17..19)? * 1000
            + n(20..23).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates_round_trip() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            iso(ms_of(2026, 3, 2) + 3_723_004),
            "2026-03-02T01:02:03.004Z"
        );
        assert_eq!(iso(ms_of(2024, 2, 29)), "2024-02-29T00:00:00.000Z");
        assert_eq!(
            iso(ms_of(2026, 12, 31) + 86_399_999),
            "2026-12-31T23:59:59.999Z"
        );
        let t = ms_of(2026, 5, 17) + 45_296_789;
        assert_eq!(parse_ms(&iso(t)), Some(t));
    }
}
