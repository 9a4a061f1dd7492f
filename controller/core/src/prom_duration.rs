//! Prometheus duration syntax (`1y`, `52w`, `365d`, `8760h`, `1h30m`, `500ms`, `0`), as the reference's
//! `-server-tls.self-signed-cert.expiration` flag and the `grafana.com/rollout-delayed-downscale` annotation accept it.
//!
//! Rules of Prometheus' `model.ParseDuration`: integer amounts only, each unit at most once and in descending order
//! (`y` > `w` > `d` > `h` > `m` > `s` > `ms`), a year is 365 days, and `"0"` is the only unit-less value.

use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PromDurationError {
    #[error("empty duration string")]
    Empty,
    #[error("not a valid duration string: {0:?}")]
    Invalid(String),
    #[error("duration out of range: {0:?}")]
    OutOfRange(String),
}

/// Units in the only order Prometheus accepts them, with their length in milliseconds.
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 24 * 3_600_000),
    ("w", 7 * 24 * 3_600_000),
    ("d", 24 * 3_600_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

pub fn parse_prom_duration(input: &str) -> Result<Duration, PromDurationError> {
    if input.is_empty() {
        return Err(PromDurationError::Empty);
    }
    if input == "0" {
        return Ok(Duration::ZERO);
    }
    let invalid = || PromDurationError::Invalid(input.to_string());
    let mut rest = input;
    // Index into UNITS of the next unit still allowed: enforces "each once, descending".
    let mut next_unit = 0;
    let mut total_ms: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit_len);
        let offset = UNITS[next_unit..].iter().position(|(name, _)| *name == unit).ok_or_else(invalid)?;
        let unit_ms = UNITS[next_unit + offset].1;
        next_unit += offset + 1;
        let amount: u64 = number.parse().map_err(|_| PromDurationError::OutOfRange(input.to_string()))?;
        total_ms = amount
            .checked_mul(unit_ms)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| PromDurationError::OutOfRange(input.to_string()))?;
        rest = after;
    }
    // Prometheus keeps durations in an int64 of nanoseconds; anything larger is out of range there too.
    if u128::from(total_ms) * 1_000_000 > i64::MAX as u128 {
        return Err(PromDurationError::OutOfRange(input.to_string()));
    }
    Ok(Duration::from_millis(total_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 3600;

    #[test]
    fn accepts_prometheus_forms() {
        let year = Duration::from_secs(365 * DAY);
        for s in ["1y", "52w1d", "365d", "8760h"] {
            assert_eq!(parse_prom_duration(s), Ok(year), "{s}");
        }
        assert_eq!(parse_prom_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_prom_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_prom_duration("1h0m0s"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_prom_duration("1m500ms"), Ok(Duration::from_millis(60_500)));
        assert_eq!(parse_prom_duration("2w"), Ok(Duration::from_secs(14 * DAY)));
    }

    #[test]
    fn rejects_what_prometheus_rejects() {
        assert_eq!(parse_prom_duration(""), Err(PromDurationError::Empty));
        for bad in ["1", "1.5h", "1h1d", "1h1h", "h", "-1d", "1x", " 1d", "1d ", "1ms1s", "1H", "1d2", "1µs"] {
            assert_eq!(parse_prom_duration(bad), Err(PromDurationError::Invalid(bad.to_string())), "{bad:?}");
        }
    }

    #[test]
    fn rejects_durations_beyond_int64_nanoseconds() {
        assert!(parse_prom_duration("292y").is_ok());
        assert!(matches!(parse_prom_duration("293y"), Err(PromDurationError::OutOfRange(_))));
        assert!(matches!(parse_prom_duration("99999999999999999999y"), Err(PromDurationError::OutOfRange(_))));
    }
}
