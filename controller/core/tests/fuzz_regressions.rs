//! Inputs that once crashed, hung or misread a parser of `rollout-core`, found by the fuzz targets in `fuzz/` (or
//! while writing their properties), kept here minimised so that they stay fixed without a fuzzer.

use rollout_core::duration::parse_go_duration;

/// A fraction on top of the largest whole amount of a unit overflowed the nanosecond sum: a panic where overflow is
/// checked (tests, debug builds), and in a release build a wrapped, tiny duration accepted instead of "too large"
/// (`…211.999us` read as 543 ns). Flags, min times and budgets' `crossZoneEvictionDelay` are read with it.
#[test]
fn a_go_duration_whose_fraction_overflows_is_too_large() {
    for input in [
        "340282366920938463463374607431768211.999us",
        "340282366920938463463374607431768.999999ms",
        "94522879700260684295381835.999999999999h",
        "1h94522879700260684295381835.9h",
    ] {
        let err = parse_go_duration(input).expect_err(input);
        assert_eq!(err.reason, "duration too large", "{input}");
    }
}
