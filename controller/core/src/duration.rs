//! Duration syntaxes users write in flags and annotations, parsed exactly as the reference does.

use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

impl DurationError {
    /// The error as Go's `time.ParseDuration` words it, for messages that quote the reference's
    /// (`time: unknown unit "d" in duration "1d"`).
    pub fn go_message(&self) -> String {
        let input = format!("{:?}", self.input);
        if self.reason.starts_with("missing unit") {
            return format!("time: missing unit in duration {input}");
        }
        if self.reason.starts_with("unknown unit")
            && let Some(unit) = first_unknown_unit(&self.input)
        {
            return format!("time: unknown unit {unit:?} in duration {input}");
        }
        format!("time: invalid duration {input}")
    }
}

/// The first unit of a Go duration string that Go does not know, as the parser below reads units.
fn first_unknown_unit(input: &str) -> Option<&str> {
    let mut s = input.trim_start_matches(['+', '-']);
    while !s.is_empty() {
        let number = s.bytes().take_while(|c| c.is_ascii_digit() || *c == b'.').count();
        let rest = &s[number..];
        let unit_len = rest.bytes().take_while(|c| !c.is_ascii_digit() && *c != b'.').count();
        let unit = &rest[..unit_len];
        if !matches!(unit, "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h" | "") {
            return Some(unit);
        }
        if number == 0 && unit_len == 0 {
            return None;
        }
        s = &rest[unit_len..];
    }
    None
}

/// Parses a Go `time.ParseDuration` string (`"5s"`, `"1h30m"`, `"1.5h"`, `"300ms"`, `"0"`). Negative durations are
/// rejected: nothing we configure can be negative.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError { input: input.to_string(), reason };
    let mut s = input;
    if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    } else if s.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty duration"));
    }
    let mut total_nanos: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                r.split_at(n)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len = rest.bytes().take_while(|c| !c.is_ascii_digit() && *c != b'.').count();
        let (unit, rest) = rest.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            "" => return Err(err("missing unit (one of ns, us, ms, s, m, h)")),
            _ => return Err(err("unknown unit (expected one of ns, us, ms, s, m, h)")),
        };
        let int: u128 = if int_part.is_empty() { 0 } else { int_part.parse().map_err(|_| err("number too large"))? };
        let mut nanos = int.checked_mul(unit_nanos).ok_or_else(|| err("duration too large"))?;
        if !frac_part.is_empty() {
            // Keep at most 18 fractional digits; Go truncates the same way (beyond nanosecond precision).
            let digits = &frac_part[..frac_part.len().min(18)];
            let frac: u128 = digits.parse().map_err(|_| err("invalid fraction"))?;
            // Less than one unit, but on top of the largest whole amount it can still pass u128.
            nanos = nanos
                .checked_add(frac * unit_nanos / 10u128.pow(digits.len() as u32))
                .ok_or_else(|| err("duration too large"))?;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(|| err("duration too large"))?;
        s = rest;
    }
    if total_nanos > i64::MAX as u128 {
        return Err(err("duration too large"));
    }
    Ok(Duration::from_nanos(total_nanos as u64))
}

/// Formats a duration the way Go's `time.Duration.String` does, for messages (`1h30m0s`, `5s`, `250ms`).
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        return if nanos.is_multiple_of(1_000_000) {
            format!("{}ms", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1_000) {
            format!("{}µs", nanos / 1_000)
        } else {
            format!("{nanos}ns")
        };
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let sub = d.subsec_nanos();
    let s_str = if sub == 0 {
        format!("{s}s")
    } else {
        let frac = format!("{sub:09}");
        format!("{s}.{}s", frac.trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{s_str}")
    } else if m > 0 {
        format!("{m}m{s_str}")
    } else {
        s_str
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_syntax() {
        assert_eq!(parse_go_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_go_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_go_duration("300ms").unwrap(), Duration::from_millis(300));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_go_duration("1h0m0s").unwrap(), Duration::from_secs(3600));
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in ["", "5", "1d", "h", "-5s", "5s3", "1.2.3s", "s5", " 5s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn errors_are_worded_as_go_words_them() {
        let go = |input: &str| parse_go_duration(input).unwrap_err().go_message();
        assert_eq!(go("1d"), r#"time: unknown unit "d" in duration "1d""#);
        assert_eq!(go("1h2x"), r#"time: unknown unit "x" in duration "1h2x""#);
        assert_eq!(go("5"), r#"time: missing unit in duration "5""#);
        assert_eq!(go("abc"), r#"time: invalid duration "abc""#);
        assert_eq!(go(""), r#"time: invalid duration """#);
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::from_secs(5)), "5s");
        assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
    }
}
