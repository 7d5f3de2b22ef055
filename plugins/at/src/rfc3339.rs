//! A small RFC 3339 parser (`date-time` of section 5.6), to keep the plugin small.

/// Parses an RFC 3339 date-time into seconds since the Unix epoch.
///
/// Accepts `YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)`, with `t`/`z` in any case and a space
/// for `T` (as RFC 3339 allows). A fraction of a second rounds *up*, so a step never starts
/// before its schedule. A leap second (`:60`) counts as the next second.
///
/// # Errors
///
/// A short description of what is wrong.
///
/// ```
/// use workflow_plugin_at::parse_rfc3339;
///
/// assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Ok(0));
/// assert_eq!(parse_rfc3339("2016-01-30T22:04:00+01:00"), Ok(1_454_187_840));
/// assert!(parse_rfc3339("2016-02-30T00:00:00Z").is_err());
/// ```
pub fn parse_rfc3339(s: &str) -> Result<i64, &'static str> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return Err("too short");
    }
    let year = digits(b, 0, 4)?;
    expect(b, 4, b'-')?;
    let month = digits(b, 5, 2)?;
    expect(b, 7, b'-')?;
    let day = digits(b, 8, 2)?;
    if !matches!(b[10], b'T' | b't' | b' ') {
        return Err("expected `T` between date and time");
    }
    let hour = digits(b, 11, 2)?;
    expect(b, 13, b':')?;
    let minute = digits(b, 14, 2)?;
    expect(b, 16, b':')?;
    let second = digits(b, 17, 2)?;

    let mut i = 19;
    let mut fraction = false;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            fraction |= b[i] != b'0';
            i += 1;
        }
        if i == start {
            return Err("expected digits after `.`");
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() => {
            let hours = digits(b, i + 1, 2)?;
            expect(b, i + 3, b':')?;
            let minutes = digits(b, i + 4, 2)?;
            if hours > 23 || minutes > 59 {
                return Err("offset out of range");
            }
            let offset = hours * 3600 + minutes * 60;
            if sign == b'-' { -offset } else { offset }
        }
        _ => return Err("expected `Z` or an offset such as `+01:00` at the end"),
    };

    if !(1..=12).contains(&month) {
        return Err("month out of range");
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err("day out of range");
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err("time out of range");
    }
    let days = days_from_civil(year, month, day);
    Ok(days * 86_400 + hour * 3600 + minute * 60 + second + i64::from(fraction) - offset)
}

fn digits(b: &[u8], at: usize, n: usize) -> Result<i64, &'static str> {
    let field = b.get(at..at + n).ok_or("too short")?;
    field.iter().try_fold(0, |acc, &c| {
        if c.is_ascii_digit() {
            Ok(acc * 10 + i64::from(c - b'0'))
        } else {
            Err("expected a digit")
        }
    })
}

fn expect(b: &[u8], at: usize, c: u8) -> Result<(), &'static str> {
    match b.get(at) {
        Some(&found) if found == c => Ok(()),
        _ => Err(match c {
            b'-' => "expected `-` in the date",
            _ => "expected `:` in the time",
        }),
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn parses_valid_times() {
        let cases = [
            ("1970-01-01T00:00:00Z", 0),
            ("2016-01-30T21:04:00Z", 1_454_187_840),
            ("2016-01-30t21:04:00z", 1_454_187_840),
            ("2016-01-30 21:04:00Z", 1_454_187_840),
            ("2016-01-30T16:04:00-05:00", 1_454_187_840),
            ("2016-01-30T21:04:00.000Z", 1_454_187_840),
            ("2016-01-30T21:03:59.25Z", 1_454_187_840),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("1969-12-31T23:59:59Z", -1),
            ("2038-01-19T03:14:08Z", 2_147_483_648),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
        ];
        for (text, epoch) in cases {
            assert_eq!(parse_rfc3339(text), Ok(epoch), "{text}");
        }
    }

    #[test]
    fn rejects_invalid_times() {
        for text in [
            "",
            "tomorrow",
            "2016-01-30",
            "2016-01-30T21:04:00",
            "2016-01-30T21:04Z",
            "2016-1-30T21:04:00Z",
            "2016-13-30T21:04:00Z",
            "2016-00-30T21:04:00Z",
            "2015-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2016-04-31T00:00:00Z",
            "2016-01-30T24:00:00Z",
            "2016-01-30T21:60:00Z",
            "2016-01-30T21:04:61Z",
            "2016-01-30T21:04:00.Z",
            "2016-01-30T21:04:00+0100",
            "2016-01-30T21:04:00+24:00",
            "2016-01-30T21:04:00Zjunk",
            "２016-01-30T21:04:00Z",
            "2016-01-30T21:04:00+01:0é",
        ] {
            assert!(parse_rfc3339(text).is_err(), "{text}");
        }
    }
}
