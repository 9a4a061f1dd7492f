//! Every parser of a value from a manifest nobody here wrote: max-unavailable, Go and Prometheus durations, RFC 3339
//! times, mirror API versions, delayed-downscale URLs, partition regexes (with the pod names they split), budgets,
//! the zone tracker's record and markers, eviction intents, pods' delayed-downscale answers and pod names. Beyond
//! "no crash": what is formatted parses back to the same value, and the natural order of names is a total order
//! (a sort by an inconsistent comparator may panic).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rollout_core::downscale::{
    DownscaleRecord, format_timestamp, parse_in_progress, parse_rollout_steps, render_in_progress,
};
use rollout_core::duration::{format_go_duration, parse_go_duration};
use rollout_core::keys::{eviction_intent_key, is_eviction_intent};
use rollout_core::natural::{natural_cmp, pod_ordinal};
use rollout_core::prom_duration::parse_prom_duration;
use rollout_core::scaling::{PodUrl, api_group_of, prepare_response_timestamp};
use rollout_core::settings::{parse_max_unavailable, parse_timestamp};
use rollout_core::zpdb::config::{PartitionRule, ZpdbConfig};
use rollout_core::zpdb::pods::StatefulSetIntent;
use std::collections::BTreeMap;

#[derive(Arbitrary, Debug)]
enum Input {
    MaxUnavailable(String, u32),
    GoDuration(String),
    PromDuration(String),
    Timestamp(String),
    PodUrl(String, String),
    ApiVersion(String),
    Partition { pattern: String, group: Option<i64>, names: Vec<String> },
    Budget(String),
    Record(Vec<(String, String)>),
    InProgress(String),
    RolloutSteps(String),
    StatefulSetIntent(String),
    IntentKey(String),
    PrepareResponse(u16, Vec<u8>),
    Names(String, String, String),
}

fuzz_target!(|input: Input| match input {
    Input::MaxUnavailable(raw, replicas) => {
        if let Ok(max) = parse_max_unavailable(&raw) {
            max.resolve(replicas);
        }
    }
    Input::GoDuration(raw) => match parse_go_duration(&raw) {
        Ok(d) => {
            let text = format_go_duration(d);
            assert_eq!(parse_go_duration(&text), Ok(d), "{raw:?} formatted as {text:?}");
        }
        Err(e) => {
            e.go_message();
        }
    },
    Input::PromDuration(raw) => {
        let _ = parse_prom_duration(&raw).map_err(|e| e.to_string());
    }
    Input::Timestamp(raw) => {
        if let Ok(t) = parse_timestamp(&raw) {
            let text = format_timestamp(t);
            assert_eq!(parse_timestamp(&text).map(|p| p.as_second()), Ok(t.as_second()), "{raw:?} as {text:?}");
        }
    }
    Input::PodUrl(raw, host) => {
        if let Ok(url) = PodUrl::parse(&raw) {
            let host = if host.is_empty() || host.contains(['/', '?', '#', '@', ':', '[', ']']) {
                "pod-0.svc".to_string()
            } else {
                host
            };
            let rebuilt = url.with_host(&host);
            if !host.bytes().any(|c| c.is_ascii_whitespace()) {
                assert_eq!(PodUrl::parse(&rebuilt), Ok(url), "{raw:?} with host {host:?}: {rebuilt:?}");
            }
        }
    }
    Input::ApiVersion(raw) => {
        let _ = api_group_of(&raw);
    }
    Input::Partition { pattern, group, names } => {
        if let Ok(rule) = PartitionRule::new(&pattern, group) {
            for name in names.iter().take(8) {
                rule.partition_of(name);
            }
        }
    }
    Input::Budget(raw) => {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&raw) {
            let _ = ZpdbConfig::parse(&value).map_err(|e| e.to_string());
        }
    }
    Input::Record(entries) => {
        let data: BTreeMap<String, String> = entries.into_iter().take(16).collect();
        if let Ok(record) = DownscaleRecord::from_config_map_data(&data) {
            let again = DownscaleRecord::from_config_map_data(&record.to_config_map_data());
            assert_eq!(again.as_ref().map(|r| r.last_downscaled.len()), Ok(record.last_downscaled.len()));
        }
    }
    Input::InProgress(raw) => {
        if let Ok(markers) = parse_in_progress(Some(&raw)) {
            let rendered = render_in_progress(&markers);
            assert_eq!(parse_in_progress(rendered.as_deref()).map(|m| m.len()), Ok(markers.len()));
        }
    }
    Input::RolloutSteps(raw) => {
        let _ = parse_rollout_steps(Some(&raw));
    }
    Input::StatefulSetIntent(raw) => {
        if let Some(intent) = StatefulSetIntent::parse(&raw) {
            let again = StatefulSetIntent::parse(&intent.value()).expect("a rendered intent parses");
            assert_eq!((again.pod, again.uid), (intent.pod, intent.uid));
        }
    }
    Input::IntentKey(decider) => {
        let key = eviction_intent_key(&decider);
        assert!(is_eviction_intent(&key), "{decider:?} gave {key:?}");
        let name = key.split_once('/').map_or(key.as_str(), |(_, name)| name);
        assert!(name.len() <= 63, "{decider:?} gave {key:?}");
    }
    Input::PrepareResponse(status, body) => {
        let _ = prepare_response_timestamp(status, &body);
    }
    Input::Names(a, b, c) => {
        let (ab, ba) = (natural_cmp(&a, &b), natural_cmp(&b, &a));
        assert_eq!(ab, ba.reverse(), "{a:?} {b:?}");
        let (bc, ac) = (natural_cmp(&b, &c), natural_cmp(&a, &c));
        if ab.is_le() && bc.is_le() {
            assert!(ac.is_le(), "{a:?} <= {b:?} <= {c:?} but not {a:?} <= {c:?}");
        }
        pod_ordinal(&a, &b);
    }
});
