//! The min time between zone downscales and the group downscale record's format.

use jiff::Timestamp;
use rollout_core::downscale::{DownscaleRecord, MinTimeVerdict, check_min_time, format_timestamp};
use rollout_core::fixture::{annotate, label, statefulset};
use rollout_core::keys::{LAST_DOWNSCALE, MIN_TIME_BETWEEN_ZONES_DOWNSCALE};
use rollout_core::{GroupSnapshot, StatefulSetView};
use std::collections::BTreeMap;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn group(members: Vec<StatefulSetView>) -> GroupSnapshot {
    GroupSnapshot::assemble("g", members, std::iter::empty())
}

fn zone(name: &str) -> StatefulSetView {
    statefulset("g", name, 3, "r1")
}

const T0: &str = "2026-01-01T12:00:00Z";

#[test]
fn no_downscale_history_means_elapsed() {
    let g = group(vec![annotate(zone("a"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h"), zone("b")]);
    assert_eq!(check_min_time(&g, None, "b", ts(T0)), MinTimeVerdict::Elapsed);
}

#[test]
fn min_time_must_be_strictly_exceeded() {
    let a = annotate(zone("a"), LAST_DOWNSCALE, T0);
    let b = label(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    let g = group(vec![a, b]);
    let at_exactly = ts("2026-01-01T13:00:00Z");
    match check_min_time(&g, None, "b", at_exactly) {
        MinTimeVerdict::Wait { other, until, .. } => {
            assert_eq!(other, "a");
            assert_eq!(until, at_exactly);
        }
        v => panic!("expected a wait at exactly the min time, got {v:?}"),
    }
    assert_eq!(check_min_time(&g, None, "b", ts("2026-01-01T13:00:01Z")), MinTimeVerdict::Elapsed);
}

#[test]
fn own_last_downscale_does_not_block_repeated_downscales_of_the_same_zone() {
    let b = annotate(annotate(zone("b"), LAST_DOWNSCALE, T0), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    let g = group(vec![zone("a"), b]);
    assert_eq!(check_min_time(&g, None, "b", ts(T0)), MinTimeVerdict::Elapsed);
}

#[test]
fn the_other_zones_min_time_applies_too_and_the_larger_wins() {
    let a = annotate(annotate(zone("a"), LAST_DOWNSCALE, T0), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "2h");
    let b = annotate(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    let g = group(vec![a, b]);
    assert!(matches!(check_min_time(&g, None, "b", ts("2026-01-01T13:30:00Z")), MinTimeVerdict::Wait { .. }));
    // Only the other zone carries it: still enforced.
    let a = annotate(annotate(zone("a"), LAST_DOWNSCALE, T0), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "2h");
    let g = group(vec![a, zone("b")]);
    assert!(matches!(check_min_time(&g, None, "b", ts("2026-01-01T13:30:00Z")), MinTimeVerdict::Wait { .. }));
    assert_eq!(check_min_time(&g, None, "b", ts("2026-01-01T14:00:01Z")), MinTimeVerdict::Elapsed);
}

#[test]
fn annotation_wins_over_label() {
    let b = label(annotate(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "10m"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "5h");
    let g = group(vec![annotate(zone("a"), LAST_DOWNSCALE, T0), b]);
    assert_eq!(check_min_time(&g, None, "b", ts("2026-01-01T12:10:01Z")), MinTimeVerdict::Elapsed);
}

#[test]
fn record_and_annotation_combine_and_the_later_counts() {
    let a = annotate(zone("a"), LAST_DOWNSCALE, T0);
    let b = annotate(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    let g = group(vec![a, b]);
    let mut record = DownscaleRecord::default();
    record.record_downscale("a", ts("2026-01-01T12:30:00Z"));
    let now = ts("2026-01-01T13:10:00Z");
    assert_eq!(check_min_time(&g, None, "b", now), MinTimeVerdict::Elapsed);
    assert!(matches!(check_min_time(&g, Some(&record), "b", now), MinTimeVerdict::Wait { .. }));
}

#[test]
fn unusable_values_refuse_with_the_object_and_value() {
    let a = annotate(zone("a"), LAST_DOWNSCALE, "yesterday");
    let b = annotate(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    match check_min_time(&group(vec![a, b]), None, "b", ts(T0)) {
        MinTimeVerdict::Invalid(reason) => assert!(reason.contains("yesterday") && reason.contains("StatefulSet a")),
        v => panic!("expected invalid, got {v:?}"),
    }
    let b = annotate(zone("b"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1d");
    match check_min_time(&group(vec![zone("a"), b]), None, "b", ts(T0)) {
        MinTimeVerdict::Invalid(reason) => assert!(reason.contains("\"1d\""), "{reason}"),
        v => panic!("expected invalid, got {v:?}"),
    }
}

#[test]
fn record_round_trips_in_the_reference_format_and_reads_any_field_case() {
    let data = BTreeMap::from([
        ("a".to_string(), r#"{"lastDownscaled":"2026-01-01T12:00:00Z"}"#.to_string()),
        ("b".to_string(), r#"{"LastDownscaled":"2026-01-01T13:00:00Z"}"#.to_string()),
    ]);
    let record = DownscaleRecord::from_config_map_data(&data).unwrap();
    assert_eq!(record.last_downscaled["b"], ts("2026-01-01T13:00:00Z"));
    let written = record.to_config_map_data();
    assert_eq!(written["a"], r#"{"lastDownscaled":"2026-01-01T12:00:00Z"}"#);
    assert_eq!(DownscaleRecord::from_config_map_data(&written).unwrap(), record);
}

#[test]
fn unreadable_record_entries_are_errors_naming_the_entry() {
    for bad in ["not json", "[]", "{}", r#"{"lastDownscaled":5}"#, r#"{"lastDownscaled":"noon"}"#] {
        let data = BTreeMap::from([("zone-a".to_string(), bad.to_string())]);
        let err = DownscaleRecord::from_config_map_data(&data).unwrap_err();
        assert_eq!(err.key, "zone-a", "{bad}");
    }
}

#[test]
fn bootstrap_takes_only_zones_that_were_downscaled() {
    let g = group(vec![annotate(zone("a"), LAST_DOWNSCALE, T0), zone("b"), annotate(zone("c"), LAST_DOWNSCALE, "x")]);
    let record = DownscaleRecord::bootstrap(&g);
    assert_eq!(record.last_downscaled.keys().collect::<Vec<_>>(), vec!["a"]);
}

#[test]
fn timestamps_are_stored_at_second_precision() {
    let mut record = DownscaleRecord::default();
    record.record_downscale("a", ts("2026-01-01T12:00:00.987Z"));
    // Rounded up: the stored time is never earlier than the downscale.
    assert_eq!(format_timestamp(record.last_downscaled["a"]), "2026-01-01T12:00:01Z");
    record.record_downscale("b", ts("2026-01-01T12:00:00Z"));
    assert_eq!(format_timestamp(record.last_downscaled["b"]), "2026-01-01T12:00:00Z");
}
