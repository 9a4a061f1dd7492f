//! Tests of the budgets: validation (every check and its order), the known budgets, both eviction modes with the
//! reference's examples, and the step machine, including two decisions racing for one budget.

use super::config::{PartitionRule, RegexProblem};
use super::decision::{AbsentPeer, Judged, describe, judge, max_unavailable};
use super::*;
use crate::admission::{AdmissionRequest, ReviewVersion};
use crate::downscale::format_timestamp;
use crate::fixture;
use crate::keys;
use crate::view::{OwnerRef, StatefulSetView};
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const GROUP: &str = "ingester";

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-rollout", "uid": "uid-zpdb", "generation": 1},
        "spec": spec,
    })
}

fn with_selector(mut spec: Value) -> Value {
    spec["selector"] = json!({"matchLabels": {"rollout-group": GROUP}});
    spec
}

fn parse(spec: Value) -> Result<ZpdbConfig, ConfigError> {
    ZpdbConfig::parse(&object(spec))
}

fn error(spec: Value) -> String {
    parse(spec).expect_err("invalid").to_string()
}

// ---- validation (reference 5.2) ----------------------------------------------------------------------------

#[test]
fn defaults_to_one_unavailable_pod_in_zone_mode() {
    let config = parse(with_selector(json!({}))).unwrap();
    assert_eq!((config.max_unavailable, config.max_unavailable_percentage), (1, 0));
    assert_eq!((config.name.as_str(), config.generation), ("ingester-rollout", 1));
    assert!(config.partition.is_none());
    assert_eq!(config.cross_zone_eviction_delay, Duration::ZERO);
    assert_eq!(config.label_selector(), "rollout-group=ingester");
}

#[test]
fn the_reference_example_parses_into_partition_mode() {
    let config = parse(with_selector(json!({
        "maxUnavailable": 1, "podNamePartitionRegex": "[a-z\\-]+-zone-[a-z]-([0-9]+)", "podNameRegexGroup": 1,
        "crossZoneEvictionDelay": "20m",
    })))
    .unwrap();
    let rule = config.partition.as_ref().unwrap();
    assert_eq!(rule.partition_of("ingester-zone-a-12").as_deref(), Some("12"));
    assert_eq!(rule.partition_of("ingester-zone-a-12x"), None, "anchored at the end");
    assert_eq!(rule.partition_of("xingester-zone-a-12").as_deref(), Some("12"), "the class matches any prefix");
    assert_eq!(rule.partition_of("Ingester-zone-a-1"), None, "anchored at the start");
    assert_eq!(config.cross_zone_eviction_delay, Duration::from_secs(1200));
}

#[test]
fn alternations_stay_inside_the_anchors() {
    let rule = PartitionRule::new("a-([0-9]+)|b-([0-9]+)", Some(2)).unwrap();
    assert_eq!(rule.partition_of("b-7").as_deref(), Some("7"));
    assert_eq!(rule.partition_of("a-7"), None, "group 2 did not take part");
    assert_eq!(rule.partition_of("xb-7"), None);
    assert_eq!(rule.partition_of("a-7x"), None);
}

#[test]
fn every_check_has_the_reference_message() {
    let sel = |spec: Value| with_selector(spec);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"maxUnavailable": 1, "maxUnavailablePercentage": 10}),
            "invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set",
        ),
        (sel(json!({"maxUnavailable": 1.5})), "failed to extract value from config field maxUnavailable"),
        (sel(json!({"maxUnavailable": "1"})), "failed to extract value from config field maxUnavailable"),
        (sel(json!({"maxUnavailable": -1})), "invalid value: max unavailable must be 0 <= val, got -1"),
        (
            sel(json!({"maxUnavailablePercentage": true})),
            "failed to extract value from config field maxUnavailablePercentage",
        ),
        (
            sel(json!({"maxUnavailablePercentage": 101})),
            "invalid value: max unavailable percentage must be 0 <= val <= 100, got 101",
        ),
        (
            sel(json!({"maxUnavailablePercentage": -5})),
            "invalid value: max unavailable percentage must be 0 <= val <= 100, got -5",
        ),
        (
            sel(json!({"podNamePartitionRegex": 5})),
            "failed to extract regex value from config field podNamePartitionRegex",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "podNameRegexGroup": "1"})),
            "failed to extract group value from config field podNameRegexGroup",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-[0-9]+"})),
            "invalid value: regex is not valid, got regular expression requires at least one subexpression",
        ),
        (
            sel(json!({"podNamePartitionRegex": "(x)-([0-9]+)"})),
            "invalid value: regex is not valid, got regular expression has multiple subexpressions and requires \
             podNameRegexGroup to be set",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "podNameRegexGroup": 2})),
            "invalid value: regex is not valid, got regular expression subexpression index out of range",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "podNameRegexGroup": 0})),
            "invalid value: podNameRegexGroup must be >= 1, got 0",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "podNameRegexGroup": -1})),
            "invalid value: podNameRegexGroup must be >= 1, got -1",
        ),
        (json!({}), "invalid value: selector is not found"),
        (json!({"selector": {}}), "invalid value: selector is not found"),
        (json!({"selector": null}), "invalid value: selector is not found"),
        (sel(json!({"crossZoneEvictionDelay": 5})), "failed to extract value from config field crossZoneEvictionDelay"),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "crossZoneEvictionDelay": "1d"})),
            "invalid value: crossZoneEvictionDelay is not a valid duration, got time: unknown unit \"d\" in \
             duration \"1d\"",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "crossZoneEvictionDelay": "-5m"})),
            "invalid value: crossZoneEvictionDelay must be >= 0, got -5m",
        ),
        (
            sel(json!({"podNamePartitionRegex": "x-([0-9]+)", "crossZoneEvictionDelay": "-x"})),
            "invalid value: crossZoneEvictionDelay is not a valid duration, got time: invalid duration \"-x\"",
        ),
        (
            sel(json!({"crossZoneEvictionDelay": "5m"})),
            "invalid value: crossZoneEvictionDelay requires podNamePartitionRegex to be set",
        ),
        (
            sel(json!({"maxUnavailablePercentage": 10, "podNamePartitionRegex": "x-([0-9]+)"})),
            "invalid value: max unavailable percentage can not be used with partition awareness",
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(error(spec.clone()), expected, "{spec}");
    }
}

#[test]
fn selector_and_spec_type_errors_name_the_path() {
    let err = error(json!({"selector": {"matchLabels": {"a": 1}}}));
    let expected = "invalid value: selector is not valid, got .spec.selector.matchLabels accessor error: contains \
                    non-string value in the map under key \"a\"";
    assert!(err.starts_with(expected), "{err}");
    let err = error(json!({"selector": {"matchLabels": "a=b"}}));
    assert_eq!(
        err,
        "invalid value: selector is not valid, got .spec.selector.matchLabels accessor error: a=b is of the type \
         string, expected map[string]interface{}"
    );
    let err = ZpdbConfig::parse(&json!({"kind": "ZoneAwarePodDisruptionBudget", "spec": "x"})).unwrap_err();
    assert_eq!(err.to_string(), ".spec accessor error: x is of the type string, expected map[string]interface{}");
    let err = ZpdbConfig::parse(&json!({"kind": "ZoneAwarePodDisruptionBudget"})).unwrap_err();
    assert_eq!(err.to_string(), "no spec found in unstructured object");
}

#[test]
fn a_regex_that_does_not_compile_says_why_in_one_line() {
    let err = error(with_selector(json!({"podNamePartitionRegex": "x-(["})));
    assert!(err.starts_with("invalid value: regex is not valid, got error parsing regexp: "), "{err}");
    assert!(err.ends_with("`x-([`"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn checks_run_in_the_reference_order() {
    // spec before kind; kind before everything in spec; max unavailable before the regex, the regex before the
    // selector, the selector before the delay, the delay's own check before the cross-field checks.
    let no_kind = json!({"spec": {"maxUnavailable": -1}});
    assert_eq!(ZpdbConfig::parse(&no_kind).unwrap_err(), ConfigError::WrongKind);
    assert_eq!(ZpdbConfig::parse(&json!({"kind": "Other"})).unwrap_err(), ConfigError::NoSpec);
    assert_eq!(
        parse(json!({"maxUnavailable": -1, "podNamePartitionRegex": 1})).unwrap_err(),
        ConfigError::NegativeMaxUnavailable(-1)
    );
    assert_eq!(parse(json!({"podNamePartitionRegex": 1})).unwrap_err(), ConfigError::RegexNotString);
    assert_eq!(parse(json!({"crossZoneEvictionDelay": 1})).unwrap_err(), ConfigError::NoSelector);
    assert_eq!(
        parse(with_selector(json!({"crossZoneEvictionDelay": "x", "maxUnavailablePercentage": 5}))).unwrap_err(),
        ConfigError::InvalidDelay("time: invalid duration \"x\"".into())
    );
    assert_eq!(
        parse(with_selector(json!({"podNamePartitionRegex": "", "podNameRegexGroup": "ignored"})))
            .map(|c| c.partition.is_none()),
        Ok(true),
        "an empty regex is no partition mode, and its group is not read"
    );
    assert_eq!(
        parse(with_selector(json!({"podNamePartitionRegex": "x", "crossZoneEvictionDelay": "5m"}))).unwrap_err(),
        ConfigError::InvalidRegex(RegexProblem::NoSubexpression)
    );
}

#[test]
fn zero_delays_and_zero_budgets_are_valid() {
    for delay in ["", "0", "0s", "-0s"] {
        let config = parse(with_selector(json!({"crossZoneEvictionDelay": delay}))).unwrap();
        assert_eq!(config.cross_zone_eviction_delay, Duration::ZERO, "{delay:?}");
    }
    let config = parse(with_selector(json!({"maxUnavailable": 0}))).unwrap();
    assert_eq!(config.max_unavailable, 0);
    let config = parse(with_selector(json!({"maxUnavailablePercentage": 25}))).unwrap();
    assert_eq!((config.max_unavailable, config.max_unavailable_percentage), (0, 25));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-200i64..200).prop_map(|n| json!(n)),
        (-2.0f64..2.0).prop_map(|f| json!(f)),
        "[a-z0-9()\\-\\[\\]|.*+]{0,12}".prop_map(Value::String),
        prop_oneof![Just("5m"), Just("1d"), Just("-3s"), Just("x-([0-9]+)"), Just("(a)(b)")].prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        proptest::collection::btree_map("[a-z]{1,3}", inner, 0..3).prop_map(|m| json!(m))
    })
}

fn arb_spec() -> impl Strategy<Value = Value> {
    let field = |name: &'static str| proptest::option::of(arb_json()).prop_map(move |v| (name, v));
    (
        field("maxUnavailable"),
        field("maxUnavailablePercentage"),
        field("podNamePartitionRegex"),
        field("podNameRegexGroup"),
        field("crossZoneEvictionDelay"),
        prop_oneof![
            Just(None),
            Just(Some(json!({"matchLabels": {"rollout-group": GROUP}}))),
            arb_json().prop_map(Some)
        ],
    )
        .prop_map(|(a, b, c, d, e, selector)| {
            let mut spec = serde_json::Map::new();
            for (name, value) in [a, b, c, d, e] {
                if let Some(value) = value {
                    spec.insert(name.to_string(), value);
                }
            }
            if let Some(selector) = selector {
                spec.insert("selector".to_string(), selector);
            }
            Value::Object(spec)
        })
}

proptest! {
    /// Whatever the object, parsing answers (never panics), and what it accepts keeps the documented invariants.
    #[test]
    fn parsing_any_spec_answers_and_accepted_configs_are_consistent(spec in arb_spec()) {
        if let Ok(config) = parse(spec.clone()) {
            prop_assert!(config.max_unavailable >= 0);
            prop_assert!((0..=100).contains(&config.max_unavailable_percentage));
            prop_assert!(config.max_unavailable == 0 || config.max_unavailable_percentage == 0);
            prop_assert!(config.cross_zone_eviction_delay.is_zero() || config.partition.is_some());
            prop_assert!(config.max_unavailable_percentage == 0 || config.partition.is_none());
            if let Some(rule) = &config.partition {
                prop_assert!(rule.group >= 1);
            }
            prop_assert!(spec.get("selector").and_then(|s| s.get("matchLabels")).is_some());
        }
    }

    /// A negative count or an out-of-range percentage is always refused, whatever else the spec says.
    #[test]
    fn out_of_range_budgets_are_always_refused(n in -1000i64..-1, pct in 101i64..1000, spec in arb_spec()) {
        let mut with_n = spec.clone();
        with_n["maxUnavailable"] = json!(n);
        with_n.as_object_mut().unwrap().remove("maxUnavailablePercentage");
        prop_assert_eq!(parse(with_n).unwrap_err(), ConfigError::NegativeMaxUnavailable(n));
        let mut with_pct = spec;
        with_pct["maxUnavailablePercentage"] = json!(pct);
        with_pct.as_object_mut().unwrap().remove("maxUnavailable");
        prop_assert_eq!(parse(with_pct).unwrap_err(), ConfigError::PercentageOutOfRange(pct));
    }
}

// ---- the validating webhook ----------------------------------------------------------------------------------

fn review_request(operation: &str, sub_resource: &str, name: &str, object: Value) -> AdmissionRequest {
    AdmissionRequest {
        version: ReviewVersion::V1,
        uid: "req-1".into(),
        kind: "Eviction".into(),
        resource: "pods".into(),
        sub_resource: sub_resource.into(),
        name: name.into(),
        namespace: "ns".into(),
        operation: operation.into(),
        username: "kubectl".into(),
        object,
        old_object: Value::Null,
        dry_run: false,
    }
}

#[test]
fn the_validating_webhook_denies_with_400_and_the_first_failure() {
    let request = |object: Value| review_request("CREATE", "", "ingester-rollout", object);
    let valid = validation::validate(&request(object(with_selector(json!({"maxUnavailable": 2})))));
    assert!(valid.allowed && valid.code.is_none(), "{valid:?}");
    let invalid = validation::validate(&request(object(with_selector(json!({"maxUnavailable": -2})))));
    assert_eq!((invalid.allowed, invalid.code), (false, Some(400)));
    assert_eq!(invalid.message.as_deref(), Some("invalid value: max unavailable must be 0 <= val, got -2"));
    let empty = validation::validate(&request(Value::Null));
    assert_eq!((empty.message.as_deref(), empty.code), (Some("unexpected end of JSON input"), Some(400)));
    let array = validation::validate(&request(json!([1])));
    assert_eq!(
        array.message.as_deref(),
        Some("json: cannot unmarshal array into Go value of type map[string]interface {}")
    );
}

// ---- the known budgets (reference 5.3) ----------------------------------------------------------------------

fn generation(mut object: Value, generation: i64, uid: &str) -> Value {
    object["metadata"]["generation"] = json!(generation);
    object["metadata"]["uid"] = json!(uid);
    object
}

#[test]
fn budgets_follow_generations_and_keep_the_last_valid_config() {
    let v1 = generation(object(with_selector(json!({"maxUnavailable": 1}))), 1, "u1");
    let v2 = generation(object(with_selector(json!({"maxUnavailable": 2}))), 2, "u1");
    let mut budgets = Budgets::default();
    assert_eq!(budgets.apply(&v1), Observation::Updated);
    assert_eq!(budgets.apply(&v1), Observation::Ignored, "a resync of the same generation");
    assert_eq!(budgets.apply(&v2), Observation::Updated);
    assert_eq!(budgets.apply(&v1), Observation::Ignored, "an older generation");
    assert_eq!(budgets.all()[0].max_unavailable, 2);
    let invalid = generation(object(with_selector(json!({"maxUnavailable": -1}))), 3, "u1");
    assert_eq!(budgets.apply(&invalid).result(), "invalid");
    assert_eq!(budgets.all()[0].max_unavailable, 2, "the last valid config stays in force");
    assert_eq!(budgets.delete(&v1), Observation::DeleteIgnored, "a delete of an older generation");
    assert_eq!(budgets.delete(&v2), Observation::Deleted);
    assert_eq!(budgets.delete(&v2), Observation::DeleteIgnored, "nothing known");
    assert!(budgets.is_empty());
}

#[test]
fn a_recreated_budget_replaces_the_old_one_whatever_its_generation() {
    let old = generation(object(with_selector(json!({"maxUnavailable": 1}))), 7, "u1");
    let new = generation(object(with_selector(json!({"maxUnavailable": 3}))), 1, "u2");
    let mut budgets = Budgets::default();
    budgets.apply(&old);
    assert_eq!(budgets.apply(&new), Observation::Updated);
    assert_eq!(budgets.all()[0].max_unavailable, 3);
    assert_eq!(budgets.delete(&old), Observation::DeleteIgnored, "the delete of the old object is late");
    assert_eq!(budgets.len(), 1);
    assert_eq!(budgets.retain_listed(&BTreeSet::new()), ["ingester-rollout"]);
    assert!(budgets.is_empty());
    let observed: Vec<&str> = [
        Observation::Updated,
        Observation::Invalid(ConfigError::NoSpec),
        Observation::Ignored,
        Observation::Deleted,
        Observation::DeleteIgnored,
    ]
    .iter()
    .map(Observation::result)
    .collect();
    assert_eq!(observed, ["updated", "invalid", "ignored", "deleted", "delete-ignored"]);
}

#[test]
fn a_pod_is_in_scope_of_at_most_one_budget() {
    let a = parse(with_selector(json!({}))).unwrap();
    let mut b = a.clone();
    b.name = "other".into();
    b.selector = BTreeMap::from([("name".into(), "x".into())]);
    let labels =
        |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
    let budgets = [a.clone(), b.clone()];
    assert_eq!(
        budget_for(&budgets, &labels(&[("rollout-group", GROUP)])).unwrap().map(|c| c.name.as_str()),
        Some("ingester-rollout")
    );
    assert_eq!(budget_for(&budgets, &labels(&[("name", "y")])).unwrap(), None);
    let err = budget_for(&budgets, &labels(&[("rollout-group", GROUP), ("name", "x")])).unwrap_err();
    assert_eq!(err.to_string(), "multiple zoned pod disruption budgets found for pod");
    // An empty selector selects everything (the reference's behaviour).
    let mut everything = a;
    everything.selector.clear();
    assert!(everything.selects(&labels(&[])));
    assert_eq!(everything.label_selector(), "");
}

// ---- the judgement (reference 5.4) ---------------------------------------------------------------------------

/// A zone-aware group: `zones` StatefulSets of `pods` pods each, all selected by the budget, every pod ready.
struct World {
    /// The StatefulSets the budget selects.
    statefulsets: Vec<StatefulSetView>,
    /// Every StatefulSet, selected or not.
    owners: Vec<StatefulSetView>,
    pods: Vec<BudgetPod>,
    /// How a zone without a pod of the partition counts (evictions: the reference's rule).
    absent_peer: AbsentPeer,
}

fn zone(z: char) -> String {
    format!("ingester-zone-{z}")
}

impl World {
    fn new(zones: usize, pods: u32) -> Self {
        let statefulsets: Vec<StatefulSetView> =
            (0..zones).map(|i| fixture::statefulset(GROUP, &zone((b'a' + i as u8) as char), pods, "r1")).collect();
        let pods = statefulsets
            .iter()
            .flat_map(|s| (0..pods).map(move |o| (s.clone(), o)))
            .map(|(s, o)| {
                let mut pod = fixture::pod(&s, o, "r1");
                pod.labels.insert(keys::ROLLOUT_GROUP.into(), GROUP.into());
                BudgetPod::plain(pod)
            })
            .collect();
        World { owners: statefulsets.clone(), statefulsets, pods, absent_peer: AbsentPeer::Unknown }
    }

    fn pod(&self, name: &str) -> &BudgetPod {
        self.pods.iter().find(|p| p.name() == name).unwrap_or_else(|| panic!("no pod {name}"))
    }

    fn change(&mut self, name: &str, f: impl FnOnce(&mut BudgetPod)) {
        f(self.pods.iter_mut().find(|p| p.name() == name).unwrap_or_else(|| panic!("no pod {name}")));
    }

    fn not_ready(&mut self, name: &str) {
        self.change(name, |p| p.pod = fixture::not_ready(p.pod.clone()));
    }

    fn remove(&mut self, name: &str) {
        self.pods.retain(|p| p.name() != name);
    }

    fn owner(&self, pod: &str) -> &StatefulSetView {
        let owner = self.pod(pod).pod.owner.as_ref().unwrap().name.clone();
        self.owners.iter().find(|s| s.name == owner).unwrap()
    }

    /// Judges the eviction of `pod` under `config`, with `pending` pods (by name) counted as being evicted.
    fn judge(&self, config: &ZpdbConfig, pod: &str, pending: &[&str]) -> Result<String, String> {
        let evicted = self.pod(pod);
        let owner = self.owner(pod);
        let partition = config.partition.as_ref().and_then(|r| r.partition_of(pod));
        let pending: BTreeSet<&str> = pending.iter().map(|n| self.pod(n).uid()).collect();
        let pending = |pod: &BudgetPod| pending.contains(pod.uid());
        let input = Judged {
            config,
            owner,
            statefulsets: &self.statefulsets,
            pods: &self.pods,
            evicted,
            partition: partition.as_deref(),
            max_unavailable: max_unavailable(config, owner, None),
            pending: &pending,
            absent_peer: self.absent_peer,
            now: now(),
        };
        judge(&input).map_err(|b| b.verdict().message().to_string())
    }
}

fn zone_mode(max: i64) -> ZpdbConfig {
    parse(with_selector(json!({"maxUnavailable": max}))).unwrap()
}

fn partition_mode(max: i64, delay: &str) -> ZpdbConfig {
    parse(with_selector(json!({
        "maxUnavailable": max,
        "podNamePartitionRegex": "[a-z\\-]+-zone-[a-z]-([0-9]+)",
        "crossZoneEvictionDelay": delay,
    })))
    .unwrap()
}

#[test]
fn messages_count_and_pluralise_as_the_reference() {
    assert_eq!(describe(1, 0, "ingester-zone-a"), "1 pod not ready in ingester-zone-a");
    assert_eq!(describe(0, 1, "ingester-zone-b"), "1 pod unknown in ingester-zone-b");
    assert_eq!(describe(2, 0, "partition 0"), "2 pods not ready in partition 0");
    assert_eq!(describe(1, 1, "partition 2"), "1 pod not ready, 1 pod unknown in partition 2");
    assert_eq!(describe(3, 2, "x"), "3 pods not ready, 2 pods unknown in x");
}

#[test]
fn zone_mode_allows_one_zone_at_a_time() {
    let mut world = World::new(3, 3);
    let config = zone_mode(1);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met across 3 zones".into()));
    // Any disruption in another zone blocks, whatever maxUnavailable says.
    world.not_ready("ingester-zone-b-1");
    assert_eq!(world.judge(&zone_mode(5), "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    // In the zone of the disruption, within maxUnavailable.
    assert_eq!(world.judge(&zone_mode(2), "ingester-zone-b-0", &[]), Ok("zpdb met across 3 zones".into()));
    assert_eq!(world.judge(&config, "ingester-zone-b-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    // Evicting the not-ready pod itself costs nothing more.
    assert_eq!(world.judge(&config, "ingester-zone-b-1", &[]), Ok("zpdb met across 3 zones".into()));
    // A missing pod is unknown.
    let mut world = World::new(3, 3);
    world.remove("ingester-zone-c-2");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-c".into()));
    assert_eq!(world.judge(&config, "ingester-zone-c-0", &[]), Err("1 pod unknown in ingester-zone-c".into()));
}

#[test]
fn zone_mode_counts_terminating_pods_pods_without_statuses_and_pending_evictions_as_not_ready() {
    let config = zone_mode(1);
    let mut world = World::new(2, 2);
    world.change("ingester-zone-b-0", |p| p.pod = fixture::terminating(p.pod.clone()));
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    let mut world = World::new(2, 2);
    world.change("ingester-zone-b-0", |p| p.pod.container_count = 0);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    let world = World::new(2, 2);
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-a-1"]),
        Err("1 pod not ready in ingester-zone-a".into())
    );
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-b-1"]),
        Err("1 pod not ready in ingester-zone-b".into())
    );
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-a-0"]),
        Ok("zpdb met across 2 zones".into()),
        "its own intent"
    );
}

#[test]
fn zone_mode_judges_pods_by_owner_and_ordinals() {
    let config = zone_mode(1);
    // A ready pod of another StatefulSet carrying zone-b's labels does not stand in for zone-b's missing pod.
    let mut world = World::new(2, 2);
    world.remove("ingester-zone-b-1");
    let mut stray = world.pod("ingester-zone-b-0").clone();
    stray.pod.name = "ingester-zone-b-1".into();
    stray.pod.uid = "stray".into();
    stray.pod.owner =
        Some(OwnerRef { kind: "StatefulSet".into(), name: "elsewhere".into(), uid: "uid-elsewhere".into() });
    world.pods.push(stray);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-b".into()));
    // A ready pod above the replicas does not stand in for a missing one below.
    let mut world = World::new(2, 2);
    world.remove("ingester-zone-b-1");
    let mut extra = world.pod("ingester-zone-b-0").clone();
    extra.pod.name = "ingester-zone-b-5".into();
    extra.pod.uid = "extra".into();
    world.pods.push(extra);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-b".into()));
}

#[test]
fn zone_mode_denies_clearly_when_the_budget_does_not_select_the_pods_statefulset() {
    let mut world = World::new(3, 2);
    let owner = world.owner("ingester-zone-a-0").clone();
    world.statefulsets.retain(|s| s.name != owner.name);
    let err = world.judge(&zone_mode(1), "ingester-zone-a-0", &[]).unwrap_err();
    assert!(
        err.starts_with(
            "the pod's StatefulSet ingester-zone-a is not selected by ZoneAwarePodDisruptionBudget ingester-rollout"
        ),
        "{err}"
    );
}

#[test]
fn percentages_take_the_smaller_of_spec_and_status_replicas_and_at_least_one() {
    let config = |pct: i64| parse(with_selector(json!({"maxUnavailablePercentage": pct}))).unwrap();
    let mut sts = fixture::statefulset(GROUP, "ingester-zone-a", 10, "r1");
    assert_eq!(max_unavailable(&config(25), &sts, None), 2);
    assert_eq!(max_unavailable(&config(1), &sts, None), 1, "at least one");
    sts.status.as_mut().unwrap().replicas = 4;
    assert_eq!(max_unavailable(&config(50), &sts, None), 2, "min(spec 10, status 4)");
    sts.status.as_mut().unwrap().replicas = 0;
    assert_eq!(max_unavailable(&config(50), &sts, None), 0, "no replicas: nothing may go");
    assert_eq!(max_unavailable(&config(50), &sts, Some(3)), 3, "the controller's override");
    assert_eq!(max_unavailable(&zone_mode(0), &sts, None), 0);
    assert_eq!(max_unavailable(&zone_mode(2), &sts, Some(7)), 2, "the override only replaces 0");
}

#[test]
fn partition_mode_counts_the_partition_across_the_other_zones() {
    let config = partition_mode(1, "");
    let mut world = World::new(3, 3);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    // Another partition's disruption does not matter.
    world.not_ready("ingester-zone-b-1");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    assert_eq!(world.judge(&config, "ingester-zone-a-1", &[]), Err("1 pod not ready in partition 1".into()));
    // Nor does one in the pod's own zone.
    world.not_ready("ingester-zone-a-2");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    // Two zones down in partition 0: both are counted.
    world.not_ready("ingester-zone-b-0");
    world.not_ready("ingester-zone-c-0");
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-a-0", &[]),
        Err("2 pods not ready in partition 0".into())
    );
}

#[test]
fn partition_mode_reference_examples() {
    // Zone a already downscaled to 2 pods: evicting zone-b-2 finds no peer in zone a (v0.35.0).
    let mut world = World::new(3, 3);
    world.statefulsets[0].replicas = 2;
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.remove("ingester-zone-a-2");
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    // The controller's deletions: zone a has no slot for partition 2 any more, so nothing of it is missing there
    // while zone c's peer stays available (a rollout holds the other zones' downscales, so waiting for them would
    // wait for good).
    world.absent_peer = AbsentPeer::UnknownForTheLastPod;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Ok("zpdb met for partition 2 across 3 zones".into())
    );
    // Still scaling down (status.replicas 3): the slot is expected, its pod missing.
    world.statefulsets[0].status.as_mut().unwrap().replicas = 3;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    // Zone a scaled below the partition, the peer in zone c not ready: the pod is the partition's last available
    // one, so zone a counts as the reference counts it.
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.not_ready("ingester-zone-c-2");
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-b-2", &[]),
        Err("1 pod not ready, 1 pod unknown in partition 2".into())
    );
    // Two zones, the other scaled below the partition: never the partition's last pod.
    let mut world = World::new(2, 3);
    world.statefulsets[0].replicas = 2;
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.remove("ingester-zone-a-2");
    world.absent_peer = AbsentPeer::UnknownForTheLastPod;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-1", &[]),
        Ok("zpdb met for partition 1 across 2 zones".into())
    );
    // A not-ready peer and a missing pod elsewhere in a zone: `1 pod not ready, 1 pod unknown in partition 2`.
    let mut world = World::new(3, 4);
    world.not_ready("ingester-zone-b-2");
    world.remove("ingester-zone-c-3");
    assert_eq!(
        world.judge(&partition_mode(3, ""), "ingester-zone-a-2", &[]),
        Ok("zpdb met for partition 2 across 3 zones".into())
    );
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-a-2", &[]),
        Err("1 pod not ready, 1 pod unknown in partition 2".into())
    );
}

#[test]
fn cross_zone_eviction_delay_needs_an_old_enough_ready_time() {
    let config = partition_mode(1, "20m");
    let stamp =
        |minutes_ago: i64| crate::downscale::format_timestamp(now() - jiff::SignedDuration::from_mins(minutes_ago));
    let mut world = World::new(2, 2);
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "no ready-time"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(5)));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "too recent"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(20)));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "not strictly after"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(21)));
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 2 zones".into()));
    world.change("ingester-zone-b-0", |p| p.ready_time = Some("yesterday".into()));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "unreadable"
    );
    // Without a delay the stamp is not needed.
    world.change("ingester-zone-b-0", |p| p.ready_time = None);
    assert!(world.judge(&partition_mode(1, ""), "ingester-zone-a-0", &[]).is_ok());
    // Without a stamp (one the tracker cannot write), the Ready condition's last transition dates the pod; a stamp,
    // when there is one, wins.
    let ready_since = |minutes_ago: i64| {
        Some(crate::view::ReadyCondition {
            ready: true,
            since: Some(now() - jiff::SignedDuration::from_mins(minutes_ago)),
        })
    };
    world.change("ingester-zone-b-0", |p| p.pod.ready_condition = ready_since(5));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_err(), "ready too recently");
    world.change("ingester-zone-b-0", |p| p.pod.ready_condition = ready_since(21));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_ok(), "ready long enough by its condition");
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(5)));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_err(), "the stamp wins");
}

proptest! {
    /// Zone mode keeps its promise on any state: an allowed eviction leaves every other zone fully available and
    /// at most maxUnavailable pods of its own zone (the evicted one included) unavailable.
    #[test]
    fn zone_mode_never_allows_more_than_the_budget(
        max in 1i64..4,
        broken in proptest::collection::vec((0usize..3, 0u32..4, any::<bool>()), 0..6),
        evicted in (0usize..3, 0u32..4),
    ) {
        let mut world = World::new(3, 4);
        for (z, o, remove) in broken {
            let name = format!("{}-{o}", zone((b'a' + z as u8) as char));
            if world.pods.iter().any(|p| p.name() == name) {
                if remove { world.remove(&name) } else { world.not_ready(&name) }
            }
        }
        let name = format!("{}-{}", zone((b'a' + evicted.0 as u8) as char), evicted.1);
        prop_assume!(world.pods.iter().any(|p| p.name() == name));
        if world.judge(&zone_mode(max), &name, &[]).is_ok() {
            for sts in &world.statefulsets {
                let available = world
                    .pods
                    .iter()
                    .filter(|p| sts.owns(&p.pod) && p.name() != name && p.pod.is_available(0, now()))
                    .count() as i64;
                let unavailable = i64::from(sts.replicas) - available;
                if sts.name == world.owner(&name).name {
                    prop_assert!(unavailable <= max, "{} would have {unavailable} unavailable", sts.name);
                } else {
                    prop_assert_eq!(unavailable, 0, "{} is disrupted", &sts.name);
                }
            }
        }
    }
}

#[test]
fn ready_time_is_stamped_once_and_removed_when_not_ready() {
    let world = World::new(1, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    assert_eq!(ready_time_change(&pod, now()), Some(ReadyTimeChange::Set("2026-03-01T12:00:00Z".into())));
    let stamped = BudgetPod { ready_time: Some("2026-01-01T00:00:00Z".into()), ..pod.clone() };
    assert_eq!(ready_time_change(&stamped, now()), None, "kept across restarts");
    let down = BudgetPod { pod: fixture::not_ready(pod.pod.clone()), ..stamped };
    assert_eq!(ready_time_change(&down, now()), Some(ReadyTimeChange::Remove));
    let down_unstamped = BudgetPod { pod: fixture::not_ready(pod.pod), ready_time: None, intent_until: None };
    assert_eq!(ready_time_change(&down_unstamped, now()), None);
}

// ---- the step machine ------------------------------------------------------------------------------------------

fn settings(serialisation: Serialisation) -> EvictionSettings {
    EvictionSettings { namespace: "ns".into(), serialisation, intent_lifetime: Duration::from_secs(30) }
}

fn eviction(name: &str) -> AdmissionRequest {
    review_request(
        "CREATE",
        "eviction",
        name,
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}),
    )
}

/// An in-memory cluster for the flow: answers each need from the world, linearizably, and applies the writes.
struct Cluster {
    world: World,
    budgets: KnownBudgets,
    remembered: BTreeMap<String, Timestamp>,
    writes: Vec<String>,
    /// Every intent annotation, by pod name and key; a pod's `intent_until` is the latest of its own.
    intents: BTreeMap<(String, String), Timestamp>,
    /// Refusals (403) of pod patches and of StatefulSet patches (an older chart's RBAC).
    refuse_pod_patches: bool,
    refuse_statefulset_patches: bool,
    /// The list of StatefulSets after an intent fails.
    fail_statefulsets_again: bool,
    /// The pods (by uid) of decisions under way in the same process, as a claim is answered.
    under_way: Vec<String>,
}

impl Cluster {
    fn new(world: World, config: ZpdbConfig) -> Self {
        Cluster {
            world,
            budgets: KnownBudgets::Known(vec![config]),
            remembered: BTreeMap::new(),
            writes: Vec::new(),
            intents: BTreeMap::new(),
            refuse_pod_patches: false,
            refuse_statefulset_patches: false,
            fail_statefulsets_again: false,
            under_way: Vec::new(),
        }
    }

    /// Sets (`Some`) or removes annotations of a StatefulSet, as the list and the owner reads show it.
    fn annotate_statefulset(&mut self, name: &str, changes: &[(String, Option<String>)]) {
        for sts in self.world.statefulsets.iter_mut().chain(self.world.owners.iter_mut()).filter(|s| s.name == name) {
            for (key, value) in changes {
                match value {
                    Some(value) => sts.annotations.insert(key.clone(), value.clone()),
                    None => sts.annotations.remove(key),
                };
            }
        }
    }

    fn observe(&mut self, need: &Need) -> Observed {
        match need {
            Need::Pod { name } => Observed::Pod(match self.world.pods.iter().find(|p| p.name() == name) {
                Some(p) => Lookup::Found(Box::new(p.clone())),
                None => Lookup::NotFound,
            }),
            Need::Budgets => Observed::Budgets(self.budgets.clone()),
            Need::StatefulSet { name } => {
                Observed::StatefulSet(match self.world.statefulsets.iter().find(|s| &s.name == name) {
                    Some(s) => Lookup::Found(Box::new(s.clone())),
                    None => Lookup::NotFound,
                })
            }
            Need::Lock { .. } => {
                Observed::Locked { remembered: self.remembered.iter().map(|(u, t)| (u.clone(), *t)).collect() }
            }
            Need::StatefulSets { .. } => Observed::StatefulSets(Ok(self.world.statefulsets.clone())),
            Need::Pods { .. } | Need::PodsAgain { .. } => Observed::Pods(Ok(self.world.pods.as_slice().into())),
            Need::StatefulSetsAgain { .. } if self.fail_statefulsets_again => {
                Observed::StatefulSets(Err("API unavailable".into()))
            }
            Need::StatefulSetsAgain { .. } => Observed::StatefulSets(Ok(self.world.statefulsets.clone())),
            Need::WriteStatefulSetIntent { statefulset, key, value, stale } => {
                self.writes.push(format!("intent on {statefulset}"));
                if self.refuse_statefulset_patches {
                    return Observed::IntentWritten(Err(IntentFailure::Forbidden("statefulsets is forbidden".into())));
                }
                let mut changes: Vec<(String, Option<String>)> = stale.iter().map(|k| (k.clone(), None)).collect();
                changes.push((key.clone(), Some(value.clone())));
                self.annotate_statefulset(statefulset, &changes);
                Observed::IntentWritten(Ok(()))
            }
            Need::RemoveStatefulSetIntent { statefulset, key } => {
                self.writes.push(format!("remove from {statefulset}"));
                self.annotate_statefulset(statefulset, &[(key.clone(), None)]);
                Observed::IntentRemoved
            }
            Need::WriteIntent { .. } if self.refuse_pod_patches => {
                self.writes.push("refused".into());
                Observed::IntentWritten(Err(IntentFailure::Forbidden("pods is forbidden".into())))
            }
            Need::WriteIntent { pod, uid, key, until } => {
                self.writes.push(format!("intent {pod}"));
                if !self.world.pods.iter().any(|p| p.name() == pod && p.uid() == uid) {
                    return Observed::IntentWritten(Err(IntentFailure::Changed(format!("pods \"{pod}\" changed"))));
                }
                self.intents.insert((pod.clone(), key.clone()), *until);
                self.show_intents(pod);
                Observed::IntentWritten(Ok(()))
            }
            Need::RemoveIntent { pod, uid, key } => {
                self.writes.push(format!("remove {pod}"));
                if self.world.pods.iter().any(|p| p.name() == pod && p.uid() == uid) {
                    self.intents.remove(&(pod.clone(), key.clone()));
                    self.show_intents(pod);
                }
                Observed::IntentRemoved
            }
            Need::Claim { .. } => Observed::Claimed { others: self.under_way.clone() },
            Need::Remember { uid, until } => {
                self.writes.push(format!("remember {uid}"));
                self.remembered.insert(uid.clone(), *until);
                Observed::Remembered
            }
            Need::Answer(_) => unreachable!("answers are not carried out"),
        }
    }

    /// What a read of `pod` shows of its intents: the latest.
    fn show_intents(&mut self, pod: &str) {
        let latest = self.intents.iter().filter(|((p, _), _)| p == pod).map(|(_, until)| *until).max();
        self.world.change(pod, |p| p.intent_until = latest);
    }

    /// Runs a flow to its answer; returns the answer and the needs it made.
    fn run(&mut self, flow: EvictPod) -> (EvictionVerdict, Vec<String>) {
        self.run_with(flow, |_, _| {})
    }

    /// [`Cluster::run`], letting `meanwhile` change the cluster before each need is carried out (another decider's
    /// writes landing between this one's steps).
    fn run_with(
        &mut self,
        mut flow: EvictPod,
        mut meanwhile: impl FnMut(&mut Cluster, &Need),
    ) -> (EvictionVerdict, Vec<String>) {
        let mut observed = Observed::Start;
        let mut needs = Vec::new();
        loop {
            match flow.step(observed, now()) {
                Need::Answer(verdict) => return (verdict, needs),
                need => {
                    needs.push(need_name(&need).to_string());
                    meanwhile(self, &need);
                    observed = self.observe(&need);
                }
            }
        }
    }
}

fn need_name(need: &Need) -> &'static str {
    match need {
        Need::Pod { .. } => "pod",
        Need::Budgets => "budgets",
        Need::StatefulSet { .. } => "statefulset",
        Need::Lock { .. } => "lock",
        Need::StatefulSets { .. } => "statefulsets",
        Need::Pods { .. } => "pods",
        Need::WriteIntent { .. } => "write-intent",
        Need::PodsAgain { .. } => "pods-again",
        Need::StatefulSetsAgain { .. } => "statefulsets-again",
        Need::WriteStatefulSetIntent { .. } => "write-statefulset-intent",
        Need::RemoveStatefulSetIntent { .. } => "remove-statefulset-intent",
        Need::RemoveIntent { .. } => "remove-intent",
        Need::Remember { .. } => "remember",
        Need::Claim { .. } => "claim",
        Need::Answer(_) => "answer",
    }
}

/// A decision's reads before its first judgement.
const FIRST_READS: [&str; 4] = ["pod", "budgets", "statefulsets", "pods"];

fn decide(
    cluster: &mut Cluster,
    request: &AdmissionRequest,
    serialisation: Serialisation,
) -> (EvictionVerdict, Vec<String>) {
    cluster.run(EvictPod::from_admission(request, settings(serialisation)))
}

#[test]
fn requests_that_are_not_evictions_are_denied_with_400() {
    let mut cluster = Cluster::new(World::new(3, 1), zone_mode(1));
    let cases = [
        (review_request("DELETE", "eviction", "p", Value::Null), "request operation is not create, got: DELETE"),
        (review_request("CREATE", "status", "p", Value::Null), "request SubResource is not eviction, got: status"),
        (review_request("CREATE", "eviction", "", Value::Null), "request did not include both a namespace and a name"),
    ];
    for (request, message) in cases {
        let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
        assert_eq!(
            (verdict.message(), verdict.verdict.code, verdict.outcome),
            (message, Some(400), Outcome::INVALID_REQUEST)
        );
        assert!(needs.is_empty(), "nothing read: {needs:?}");
    }
}

#[test]
fn an_allowed_eviction_writes_its_intent_and_judges_again() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.outcome, verdict.message()),
        (true, Outcome::ALLOWED, "zpdb met across 3 zones")
    );
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(needs[4..], ["claim", "write-intent", "statefulsets-again", "pods-again"]);
    let until = cluster.world.pod("ingester-zone-a-0").intent_until.expect("intent left on the pod");
    assert_eq!(until, "2026-03-01T12:00:30Z".parse::<Timestamp>().unwrap());
    // The next eviction in any zone sees it.
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.message(), verdict.verdict.code),
        (false, "1 pod not ready in ingester-zone-a", Some(429))
    );
    assert!(!needs.contains(&"write-intent".to_string()), "denied before writing: {needs:?}");
}

/// The intents on StatefulSets read back: live ones by the pod's uid (a pod recreated under the name is not held),
/// the latest per pod; expired and unreadable ones are stale.
#[test]
fn statefulset_intents_name_the_pod_by_uid_and_expire() {
    let intent = StatefulSetIntent { until: now(), pod: "ingester-zone-a-0".into(), uid: "u0".into() };
    assert_eq!(intent.value(), "2026-03-01T12:00:00Z ingester-zone-a-0 u0");
    assert_eq!(StatefulSetIntent::parse(&intent.value()), Some(intent));
    for garbled in ["", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z p", "soon p u", "2026-03-01T12:00:00Z p u x"] {
        assert_eq!(StatefulSetIntent::parse(garbled), None, "{garbled:?}");
    }
    let mut world = World::new(2, 1);
    let later = now() + jiff::SignedDuration::from_secs(30);
    let annotations = &mut world.statefulsets[0].annotations;
    annotations.insert(keys::eviction_intent_key("one"), format!("{} p u0", format_timestamp(now())));
    annotations.insert(keys::eviction_intent_key("two"), format!("{} p u0", format_timestamp(later)));
    annotations.insert(keys::eviction_intent_key("bad"), "garbled".into());
    annotations.insert("other".into(), format!("{} p u1", format_timestamp(later)));
    world.statefulsets[1].annotations.insert(keys::EVICTION_INTENT.into(), format!("{} q u1", format_timestamp(now())));
    let kept = pods::statefulset_intents(&world.statefulsets);
    assert_eq!(kept, BTreeMap::from([("u0".to_string(), later), ("u1".to_string(), now())]));
    let stale = pods::stale_statefulset_intents(&world.statefulsets[0], now());
    assert_eq!(stale, [keys::eviction_intent_key("bad"), keys::eviction_intent_key("one")]);
}

/// Without `patch` on pods (older Helm charts) the intent goes on the pod's StatefulSet, and the StatefulSets are
/// read again before the pods; a later decision (any replica) counts it, while the pod it names is the same pod.
#[test]
fn without_pod_patches_the_intent_goes_on_the_statefulset_and_holds_the_budget() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.refuse_pod_patches = true;
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(needs[4..], ["claim", "write-intent", "write-statefulset-intent", "statefulsets-again", "pods-again"]);
    let uid = cluster.world.pod("ingester-zone-a-0").uid().to_string();
    let kept = pods::statefulset_intents(&cluster.world.statefulsets);
    assert_eq!(kept, BTreeMap::from([(uid, "2026-03-01T12:00:30Z".parse::<Timestamp>().unwrap())]));
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::StatefulSetIntents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
    assert!(!needs.iter().any(|n| n.starts_with("write")), "denied before writing: {needs:?}");
    // The pod recreated under its name (another uid) is not held by the intent about the old one.
    cluster.world.change("ingester-zone-a-0", |p| p.pod.uid = "recreated".into());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::StatefulSetIntents);
    assert!(verdict.allowed(), "{verdict:?}");
}

/// Refused on StatefulSets too, the flow falls back to the lock and this process's memory.
#[test]
fn without_pod_and_statefulset_patches_the_flow_serialises_in_process() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.refuse_pod_patches = true;
    cluster.refuse_statefulset_patches = true;
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(
        needs[4..],
        ["claim", "write-intent", "write-statefulset-intent", "lock", "statefulsets-again", "pods-again", "remember"]
    );
}

/// A rival's intent on another StatefulSet that shows only in the read after ours: denied, ours taken back; and a
/// read after ours that fails is a denial too (other intents cannot be seen), ours taken back.
#[test]
fn a_statefulset_intent_that_loses_or_cannot_tell_is_taken_back() {
    let flow = || EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::StatefulSetIntents));
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, _) = cluster.run_with(flow(), |cluster, need| {
        if matches!(need, Need::StatefulSetsAgain { .. }) {
            let uid = cluster.world.pod("ingester-zone-b-1").uid().to_string();
            let earlier = now() + jiff::SignedDuration::from_secs(10);
            let intent = StatefulSetIntent { until: earlier, pod: "ingester-zone-b-1".into(), uid };
            cluster
                .annotate_statefulset("ingester-zone-b", &[(keys::eviction_intent_key("rival"), Some(intent.value()))]);
        }
    });
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(cluster.writes, ["intent on ingester-zone-a", "remove from ingester-zone-a"]);
    assert!(cluster.world.statefulsets[0].annotations.keys().all(|k| !keys::is_eviction_intent(k)));
    // Our intent gone from where we wrote it (the StatefulSet replaced, or someone removed it): nothing holds the
    // budget for this eviction, so it is denied (429) and retried.
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, _) = cluster.run_with(flow(), |cluster, need| {
        if matches!(need, Need::StatefulSetsAgain { .. }) {
            let keys = cluster.world.statefulsets[0].annotations.keys();
            let removals: Vec<(String, Option<String>)> = keys.map(|k| (k.clone(), None)).collect();
            cluster.annotate_statefulset("ingester-zone-a", &removals);
        }
    });
    assert_eq!((verdict.allowed(), verdict.verdict.code), (false, Some(429)), "{verdict:?}");
    assert_eq!(verdict.message(), "the eviction intent of pod ingester-zone-a-0 was lost; retry");
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.fail_statefulsets_again = true;
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::StatefulSetIntents);
    assert_eq!((verdict.allowed(), verdict.verdict.code), (false, Some(500)), "{verdict:?}");
    assert_eq!(cluster.writes, ["intent on ingester-zone-a", "remove from ingester-zone-a"]);
}

/// Another decision under way in this process (its claim came first) counts in the first judgement: a burst in one
/// process does not write intents that would only deny each other after their second reads.
#[test]
fn a_decision_under_way_in_the_process_denies_at_the_first_judgement() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.under_way = vec![cluster.world.pod("ingester-zone-b-0").uid().to_string()];
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "pods", "claim"]);
    assert!(cluster.writes.is_empty(), "{:?}", cluster.writes);
    // Twins: another decision about the same pod under way decides; this one is denied for a retry.
    cluster.under_way = vec![cluster.world.pod("ingester-zone-a-0").uid().to_string()];
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.outcome, verdict.message()),
        (false, Outcome::DENIED, "another eviction of pod ingester-zone-a-0 is being decided; retry")
    );
    assert_eq!(needs.last().map(String::as_str), Some("claim"));
    cluster.under_way.clear();
    // Partition mode: one under way in another partition does not matter, one in the same does.
    let mut cluster = Cluster::new(World::new(3, 2), partition_mode(1, "0s"));
    cluster.under_way = vec![cluster.world.pod("ingester-zone-b-1").uid().to_string()];
    assert!(decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents).0.allowed());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-c-1"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in partition 1"));
}

/// Found by review: the first list of the StatefulSets may be shared with decisions that issued it before this
/// request arrived. A zone scaled up since has a missing pod the second judgement must count, so that judgement
/// uses the StatefulSets listed after the intent.
#[test]
fn a_statefulset_scaled_up_before_the_second_read_counts_its_missing_pod() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, needs) = cluster.run_with(
        EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents)),
        |cluster, need| {
            if matches!(need, Need::StatefulSetsAgain { .. }) {
                let zone_b = &mut cluster.world.statefulsets[1];
                zone_b.replicas = 3;
                zone_b.status.as_mut().unwrap().replicas = 3;
            }
        },
    );
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod unknown in ingester-zone-b"));
    assert_eq!(needs.last().map(String::as_str), Some("remove-intent"), "{needs:?}");
    assert!(cluster.world.pod("ingester-zone-a-0").intent_until.is_none(), "the intent was taken back");
}

#[test]
fn a_dry_run_writes_nothing() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut request = eviction("ingester-zone-a-0");
    request.dry_run = true;
    let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
    assert!(verdict.allowed());
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "pods"]);
    let mut request = eviction("ingester-zone-a-0");
    request.object["deleteOptions"] = json!({"dryRun": ["All"]});
    let (verdict, _) = decide(&mut cluster, &request, Serialisation::InProcess);
    assert!(verdict.allowed());
    assert!(cluster.writes.is_empty(), "{:?}", cluster.writes);
    assert!(cluster.world.pods.iter().all(|p| p.intent_until.is_none()));
    // An empty dryRun list is not a dry run.
    request.object["deleteOptions"] = json!({"dryRun": []});
    decide(&mut cluster, &request, Serialisation::Intents);
    assert_eq!(cluster.writes, ["intent ingester-zone-a-0"]);
}

#[test]
fn a_denial_after_the_intent_removes_it() {
    // Another decider's intent lands between this one's first read and its second.
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if matches!(need, Need::PodsAgain { .. }) && cluster.writes.len() == 1 {
                    cluster.world.change("ingester-zone-b-1", |p| {
                        p.intent_until = Some(now() + jiff::SignedDuration::from_secs(10))
                    });
                }
                observed = cluster.observe(&need);
            }
        }
    };
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(cluster.writes, ["intent ingester-zone-a-0", "remove ingester-zone-a-0"]);
    assert_eq!(cluster.world.pod("ingester-zone-a-0").intent_until, None);
    // An expired intent does not count.
    cluster.world.change("ingester-zone-b-1", |p| p.intent_until = Some(now()));
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
}

/// Runs a flow whose pods, at its second read, carry `rival`'s intent expiring at `rival_until`; `rival_gives_way`
/// removes that intent after the first wait. Returns the answer and the writes.
fn race_with(
    evicted: &str,
    rival: &str,
    rival_until: Timestamp,
    rival_gives_way: bool,
) -> (EvictionVerdict, Vec<String>, u32) {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction(evicted), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let mut waits = 0;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if let Need::StatefulSetsAgain { after, .. } = &need {
                    if after.is_zero() {
                        cluster.world.change(rival, |p| p.intent_until = Some(rival_until));
                    } else {
                        assert_eq!(*after, flow::rival_wait(waits), "waits double from the first");
                        waits += 1;
                        if rival_gives_way {
                            cluster.world.change(rival, |p| p.intent_until = None);
                        }
                    }
                }
                observed = cluster.observe(&need);
            }
        }
    };
    (verdict, cluster.writes, waits)
}

#[test]
fn of_two_racing_decisions_the_earlier_intent_goes_first() {
    let ours = now() + jiff::SignedDuration::from_secs(30);
    // A later intent (written after ours) gives way: we wait for it to go, then allow.
    let later = ours + jiff::SignedDuration::from_secs(1);
    let a0 = "ingester-zone-a-0";
    let (verdict, writes, waits) = race_with(a0, "ingester-zone-b-1", later, true);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!((writes.len(), waits), (1, 1), "{writes:?}");
    // Same expiry: the pod name decides (ingester-zone-a-0 before ingester-zone-b-1).
    let (verdict, _, waits) = race_with(a0, "ingester-zone-b-1", ours, true);
    assert!(verdict.allowed() && waits == 1, "{verdict:?}");
    let (verdict, writes, waits) = race_with("ingester-zone-b-1", a0, ours, true);
    assert_eq!((verdict.allowed(), waits), (false, 0), "{verdict:?}");
    assert_eq!(writes, ["intent ingester-zone-b-1", "remove ingester-zone-b-1"]);
    // An earlier intent: we give way at once.
    let (verdict, _, waits) = race_with(a0, "ingester-zone-b-1", now() + jiff::SignedDuration::from_secs(29), true);
    assert_eq!((verdict.allowed(), waits), (false, 0), "{verdict:?}");
    // A later rival that never goes: we give up after the last wait and take our intent back.
    let (verdict, writes, waits) = race_with(a0, "ingester-zone-b-1", later, false);
    assert_eq!((verdict.allowed(), waits), (false, flow::RIVAL_WAITS));
    assert_eq!((verdict.outcome, verdict.message()), (Outcome::DENIED, "1 pod not ready in ingester-zone-b"));
    assert_eq!(writes, ["intent ingester-zone-a-0", "remove ingester-zone-a-0"]);
}

#[test]
fn without_permission_to_patch_pods_or_statefulsets_it_falls_back_to_the_lock_and_memory() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let mut needs = Vec::new();
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need @ (Need::WriteIntent { .. } | Need::WriteStatefulSetIntent { .. }) => {
                needs.push(need_name(&need));
                observed = Observed::IntentWritten(Err(IntentFailure::Forbidden("forbidden".into())));
            }
            need => {
                needs.push(need_name(&need));
                observed = cluster.observe(&need);
            }
        }
    };
    assert!(verdict.allowed() && flow.locked(), "{verdict:?}");
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(
        needs[4..],
        ["claim", "write-intent", "write-statefulset-intent", "lock", "statefulsets-again", "pods-again", "remember"]
    );
    // The memory now counts the pod for this process's next decisions.
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::InProcess);
    assert_eq!(verdict.message(), "1 pod not ready in ingester-zone-a");
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "lock", "pods"]);
    // Once expired, it does not.
    let uid = cluster.world.pod("ingester-zone-a-0").uid().to_string();
    cluster.remembered.insert(uid, now());
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::InProcess);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(needs.last().map(String::as_str), Some("remember"));
}

#[test]
fn each_early_answer_has_the_reference_message_code_and_outcome() {
    let config = zone_mode(1);
    let run = |cluster: &mut Cluster, pod: &str| decide(cluster, &eviction(pod), Serialisation::Intents).0;
    let check = |v: EvictionVerdict, outcome: Outcome, message: &str| {
        assert_eq!((v.outcome, v.message()), (outcome, message), "{v:?}");
        assert_eq!(v.verdict.code, (!outcome.allowed()).then_some(outcome.status));
        assert_eq!(v.allowed(), outcome.allowed());
    };
    let mut cluster = Cluster::new(World::new(3, 1), config.clone());
    check(run(&mut cluster, "nope"), Outcome::POD_NOT_FOUND, "pods \"nope\" not found");

    cluster.world.change("ingester-zone-a-0", |p| p.pod.phase = "Pending".into());
    let v = run(&mut cluster, "ingester-zone-a-0");
    assert_eq!((v.outcome, v.verdict.warnings.clone()), (Outcome::POD_NOT_READY, vec!["pod is not ready".to_string()]));
    cluster.world.change("ingester-zone-a-0", |p| p.pod.phase = "Running".into());

    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod.labels.remove(keys::ROLLOUT_GROUP);
    });
    check(run(&mut cluster, "ingester-zone-b-0"), Outcome::POD_NOT_IN_SCOPE, "");

    let mut twice = config.clone();
    twice.name = "second".into();
    cluster.budgets = KnownBudgets::Known(vec![config.clone(), twice]);
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::CFG_NOT_FOUND,
        "multiple zoned pod disruption budgets found for pod",
    );
    cluster.budgets = KnownBudgets::NotLoaded("starting".into());
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::CFG_NOT_LOADED,
        "ZoneAwarePodDisruptionBudgets are not loaded yet (starting); retry",
    );
    cluster.budgets = KnownBudgets::Known(vec![config.clone()]);

    cluster.world.change("ingester-zone-c-0", |p| p.pod.owner = None);
    check(run(&mut cluster, "ingester-zone-c-0"), Outcome::STS_NOT_FOUND, "unable to find a StatefulSet pod owner");
    cluster.world.change("ingester-zone-c-0", |p| {
        p.pod.owner = Some(OwnerRef { kind: "ReplicaSet".into(), name: "rs".into(), uid: "u".into() })
    });
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::STS_NOT_FOUND,
        "pod owner is not a StatefulSet - ingester-zone-c-0 has owner rs (ReplicaSet)",
    );
    cluster.world.change("ingester-zone-c-0", |p| {
        p.pod.owner = Some(OwnerRef { kind: "StatefulSet".into(), name: "gone".into(), uid: "u".into() })
    });
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::STS_NOT_FOUND,
        "unable to find StatefulSet gone by name: statefulsets.apps \"gone\" not found",
    );

    cluster.budgets = KnownBudgets::Known(vec![zone_mode(0)]);
    check(run(&mut cluster, "ingester-zone-a-0"), Outcome::MAX_UNAVAILABLE_0, "max unavailable = 0");

    cluster.budgets = KnownBudgets::Known(vec![config.clone()]);
    let single = World::new(1, 2);
    let mut alone = Cluster::new(single, config);
    check(run(&mut alone, "ingester-zone-a-0"), Outcome::MIN_STS_NOT_FOUND, "minimum number of StatefulSets not found");

    let mut named = Cluster::new(
        World::new(2, 1),
        parse(with_selector(json!({"podNamePartitionRegex": "ingester-zone-[a-z]-(x)"}))).unwrap(),
    );
    check(
        run(&mut named, "ingester-zone-a-0"),
        Outcome::PARTITION_NOT_IDENTIFIED,
        "failed to extract partition from pod Name regular expression",
    );
}

#[test]
fn the_owner_is_taken_from_the_budgets_list_and_read_by_name_only_when_it_is_not_in_it() {
    let world = World::new(3, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    let config = zone_mode(1);
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    flow.step(Observed::Start, now());
    flow.step(Observed::Pod(Lookup::Found(Box::new(pod))), now());
    assert!(matches!(
        flow.step(Observed::Budgets(KnownBudgets::Known(vec![config])), now()),
        Need::StatefulSets { .. }
    ));
    // The budget does not select the pod's own StatefulSet: read by name, then judged (and denied, zone mode).
    let others: Vec<StatefulSetView> =
        world.statefulsets.iter().filter(|s| s.name != "ingester-zone-a").cloned().collect();
    assert_eq!(
        flow.step(Observed::StatefulSets(Ok(others)), now()),
        Need::StatefulSet { name: "ingester-zone-a".into() }
    );
    let owner = world.statefulsets.iter().find(|s| s.name == "ingester-zone-a").cloned().unwrap();
    assert!(matches!(flow.step(Observed::StatefulSet(Lookup::Found(Box::new(owner))), now()), Need::Pods { .. }));
    assert!(matches!(flow.step(Observed::Pods(Ok(world.pods.as_slice().into())), now()), Need::Claim { .. }));
    let Need::Answer(v) = flow.step(Observed::Claimed { others: Vec::new() }, now()) else { panic!("no answer") };
    assert_eq!((v.outcome, v.allowed()), (Outcome::STS_NOT_FOUND, false));
    assert!(v.message().starts_with("the pod's StatefulSet ingester-zone-a is not selected"), "{}", v.message());
}

#[test]
fn failed_reads_are_answered_by_policy() {
    let world = World::new(3, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    let sts = world.statefulsets.clone();
    let config = zone_mode(1);
    let start = |observations: Vec<Observed>| {
        let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
        let mut need = flow.step(Observed::Start, now());
        for o in observations {
            need = flow.step(o, now());
        }
        match need {
            Need::Answer(v) => v,
            other => panic!("expected an answer, got {other:?}"),
        }
    };
    let found = || Observed::Pod(Lookup::Found(Box::new(pod.clone())));
    let budgets = || Observed::Budgets(KnownBudgets::Known(vec![config.clone()]));
    let owner = || Observed::StatefulSet(Lookup::Found(Box::new(sts[0].clone())));
    let v = start(vec![Observed::Pod(Lookup::Failed("API unavailable: deadline".into()))]);
    assert_eq!((v.outcome, v.message()), (Outcome::POD_NOT_FOUND, "API unavailable: deadline"));
    // The owner is not in a failed list: read by name, and that read's failure comes first (as the reference).
    let v = start(vec![
        found(),
        budgets(),
        Observed::StatefulSets(Err("boom".into())),
        Observed::StatefulSet(Lookup::Failed("boom".into())),
    ]);
    assert_eq!(
        (v.outcome, v.message()),
        (Outcome::STS_NOT_FOUND, "unable to find StatefulSet ingester-zone-a by name: boom")
    );
    let v = start(vec![found(), budgets(), Observed::StatefulSets(Err("boom".into())), owner()]);
    assert_eq!((v.outcome, v.message()), (Outcome::MIN_STS_NOT_FOUND, "minimum number of StatefulSets not found"));
    let v =
        start(vec![found(), budgets(), Observed::StatefulSets(Ok(sts.clone())), Observed::Pods(Err("boom".into()))]);
    assert_eq!(
        (v.outcome, v.message(), v.verdict.code),
        (Outcome::POD_STATUS_NOT_DETERMINED, "unable to determine pod status in related StatefulSet", Some(500))
    );
    let pods = || Observed::Pods(Ok(world.pods.as_slice().into()));
    let sts_listed = || Observed::StatefulSets(Ok(sts.clone()));
    let claimed = || Observed::Claimed { others: Vec::new() };
    let v = start(vec![
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Err(IntentFailure::Failed("timeout".into()))),
    ]);
    assert_eq!((v.outcome, v.verdict.code), (Outcome::INTENT_NOT_RECORDED, Some(500)));
    let v = start(vec![
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Err(IntentFailure::Changed("conflict".into()))),
    ]);
    assert_eq!((v.outcome, v.verdict.code), (Outcome::DENIED, Some(429)));
    // A failed second read takes the intent back and denies.
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    for o in [
        Observed::Start,
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Ok(())),
        sts_listed(),
    ] {
        flow.step(o, now());
    }
    assert!(matches!(flow.step(Observed::Pods(Err("boom".into())), now()), Need::RemoveIntent { .. }));
    let Need::Answer(v) = flow.step(Observed::IntentRemoved, now()) else { panic!("no answer") };
    assert_eq!(v.outcome, Outcome::POD_STATUS_NOT_DETERMINED);
    // The lock not taken in time: 429.
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::InProcess));
    for o in [Observed::Start, found(), budgets()] {
        flow.step(o, now());
    }
    assert!(matches!(flow.step(sts_listed(), now()), Need::Lock { .. }));
    let Need::Answer(v) = flow.step(Observed::NotLocked, now()) else { panic!("no answer") };
    assert_eq!((v.outcome, v.verdict.code), (Outcome::DENIED, Some(429)));
    assert_eq!(
        v.message(),
        "another eviction under ZoneAwarePodDisruptionBudget ingester-rollout is being decided; retry"
    );
    // An observation out of order is a denial, and the flow keeps giving the same answer.
    let v = start(vec![budgets()]);
    assert!(!v.allowed() && v.message().starts_with("internal error: the eviction flow expected the pod"), "{v:?}");
}

#[test]
fn a_foreign_namespace_is_allowed_with_a_warning_and_nothing_read() {
    let mut cluster = Cluster::new(World::new(3, 1), zone_mode(1));
    let mut request = eviction("ingester-zone-a-0");
    request.namespace = "elsewhere".into();
    let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
    assert!(verdict.allowed() && needs.is_empty());
    assert_eq!(verdict.outcome, Outcome::POD_NOT_IN_SCOPE);
    assert_eq!(verdict.verdict.warnings.len(), 1);
}

/// One of two deciders in a race, stepped one need at a time.
struct Racer {
    flow: EvictPod,
    next: Need,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Two evictions over one budget (maxUnavailable 1, both in one zone or in two zones), their needs interleaved
    /// in any order against a linearizable store: never both allowed; and run one after the other, the first is.
    #[test]
    fn two_racing_evictions_never_spend_one_budget_twice(
        schedule in proptest::collection::vec(any::<bool>(), 0..40),
        same_zone in any::<bool>(),
        in_process in any::<bool>(),
    ) {
        let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
        let names = ["ingester-zone-a-0", if same_zone { "ingester-zone-a-1" } else { "ingester-zone-b-0" }];
        let serialisation = if in_process { Serialisation::InProcess } else { Serialisation::Intents };
        let mut racers: Vec<Racer> = names
            .iter()
            .map(|n| {
                let mut flow = EvictPod::from_admission(&eviction(n), settings(serialisation));
                let next = flow.step(Observed::Start, now());
                Racer { flow, next }
            })
            .collect();
        // The in-process lock: held by at most one racer until it answers.
        let mut holder: Option<usize> = None;
        let mut answers: [Option<bool>; 2] = [None, None];
        let mut turn = schedule.into_iter().chain(std::iter::repeat(false));
        while answers.iter().any(Option::is_none) {
            let mut i = usize::from(turn.next().unwrap_or(false));
            if answers[i].is_some() { i = 1 - i; }
            // Blocked on the lock the other holds: the other goes on.
            if matches!(racers[i].next, Need::Lock { .. }) && holder == Some(1 - i) { i = 1 - i; }
            let racer = &mut racers[i];
            if let Need::Answer(v) = &racer.next {
                answers[i] = Some(v.allowed());
                if holder == Some(i) { holder = None; }
                continue;
            }
            if matches!(racer.next, Need::Lock { .. }) {
                holder = Some(i);
            }
            let observed = cluster.observe(&racer.next);
            racer.next = racer.flow.step(observed, now());
        }
        prop_assert!(!(answers[0] == Some(true) && answers[1] == Some(true)), "both allowed: {:?}", cluster.writes);
    }
}

/// Two racers stepped strictly in turn, from either side first and for every offset: exactly one is allowed.
#[test]
fn two_evictions_taking_turns_allow_exactly_one() {
    for same_zone in [true, false] {
        for offset in 0..12 {
            for first in [0usize, 1] {
                let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
                let names = ["ingester-zone-a-0", if same_zone { "ingester-zone-a-1" } else { "ingester-zone-b-0" }];
                let mut racers: Vec<Racer> = names
                    .iter()
                    .map(|n| {
                        let mut flow = EvictPod::from_admission(&eviction(n), settings(Serialisation::Intents));
                        let next = flow.step(Observed::Start, now());
                        Racer { flow, next }
                    })
                    .collect();
                let mut answers: [Option<bool>; 2] = [None, None];
                let mut turn = first;
                let mut steps = 0;
                while answers.iter().any(Option::is_none) {
                    // `first` alone for `offset` steps, then strictly in turn.
                    let i = if steps < offset { first } else { turn };
                    steps += 1;
                    turn = 1 - turn;
                    let i = if answers[i].is_some() { 1 - i } else { i };
                    let racer = &mut racers[i];
                    if let Need::Answer(v) = &racer.next {
                        answers[i] = Some(v.allowed());
                        continue;
                    }
                    let observed = cluster.observe(&racer.next);
                    racer.next = racer.flow.step(observed, now());
                }
                let allowed = answers.iter().filter(|a| **a == Some(true)).count();
                assert_eq!(allowed, 1, "same zone {same_zone}, offset {offset}, first {first}: {:?}", cluster.writes);
            }
        }
    }
}

/// Found by the model (`rollout-model zpdb`): the pod is deleted (another eviction commits), recreated and Ready
/// again between the intent write and the second read. The intent went with the old pod and the new one carries
/// none, so allowing would let the API server evict the new pod while a later decision sees nothing being evicted.
#[test]
fn a_pod_replaced_after_its_intent_was_written_is_not_evicted_on_that_intent() {
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-b-0"), settings(Serialisation::Intents));
    let mut need = flow.step(Observed::Start, now());
    while !matches!(need, Need::PodsAgain { .. }) {
        assert!(!matches!(need, Need::Answer(_)), "answered before its second read: {need:?}");
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod.uid.push_str("-recreated");
        p.intent_until = None;
    });
    let observed = cluster.observe(&need);
    let Need::Answer(v) = flow.step(observed, now()) else { panic!("no answer") };
    assert_eq!((v.allowed(), v.outcome), (false, Outcome::DENIED), "{v:?}");
    assert_eq!(v.message(), "pod ingester-zone-b-0 was replaced while its eviction was being decided; retry");
    // Not replaced, the same decision is allowed.
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    let (v, _) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::Intents);
    assert!(v.allowed(), "{v:?}");
}

#[test]
fn one_after_the_other_the_first_is_allowed_and_the_second_denied() {
    for serialisation in [Serialisation::Intents, Serialisation::InProcess] {
        let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
        let (first, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), serialisation);
        let (second, _) = decide(&mut cluster, &eviction("ingester-zone-a-1"), serialisation);
        assert!(first.allowed() && !second.allowed(), "{serialisation:?}: {first:?} {second:?}");
        assert_eq!(second.message(), "1 pod not ready in ingester-zone-a");
    }
}

// ---- the rollout controller's deletions (reference 5.5) ----------------------------------------------------------

fn rollout_deletion(cluster: &mut Cluster, pod: &str, rollout_max_unavailable: u32) -> (EvictionVerdict, Vec<String>) {
    let request = EvictionRequest::for_rollout(pod, "ns", rollout_max_unavailable);
    cluster.run(EvictPod::new(request, settings(Serialisation::Intents)))
}

#[test]
fn the_controller_deletes_under_a_zero_budget_with_its_own_max_unavailable() {
    // maxUnavailable 0 switches voluntary evictions off; the rollout goes on with rollout-max-unavailable 2.
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(0));
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.outcome), (false, Outcome::MAX_UNAVAILABLE_0));
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 2);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::ALLOWED), "{verdict:?}");
    assert!(needs.contains(&"write-intent".to_string()), "serialised like an eviction: {needs:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 2);
    assert!(verdict.allowed(), "a second pod of the zone within 2: {verdict:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-2", 2);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "2 pods not ready in ingester-zone-a"));
    // Zones are still kept: another zone waits while zone a has pods going.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 2);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "2 pods not ready in ingester-zone-a"));
}

#[test]
fn the_controller_stands_in_one_for_a_zero_partition_aware_budget() {
    let mut cluster = Cluster::new(World::new(3, 3), partition_mode(0, "0s"));
    // Its rollout-max-unavailable (3) is not used: under a partition-aware budget the stand-in is 1.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 3);
    assert!(verdict.allowed(), "{verdict:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 3);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in partition 0"));
    // Another partition is free.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-1", 3);
    assert!(verdict.allowed(), "{verdict:?}");
}

/// Sim seeds 39, 61 and 96 of `--drains partition --webhook`: zones scaled to different sizes by their HPAs, and a
/// rollout holding the downscales that would make them alike.
#[test]
fn the_controller_deletes_a_partition_a_smaller_zone_has_no_slot_for_and_evictions_wait() {
    let mut cluster = Cluster::new(World::new(3, 3), partition_mode(1, "0s"));
    cluster.world.statefulsets[0].replicas = 2;
    cluster.world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    cluster.world.remove("ingester-zone-a-2");
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-b-2"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod unknown in partition 2"), "the reference's rule");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-2", 1);
    assert!(verdict.allowed(), "{verdict:?}");
    // The partition's other peer is now going: the same deletion in zone c waits (it would be the last).
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-c-2", 1);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready, 1 pod unknown in partition 2"));
}

#[test]
fn a_budget_other_than_zero_binds_the_controller_too() {
    // maxUnavailable 1 wins over rollout-max-unavailable 3: the budget is the stricter.
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(1));
    assert!(rollout_deletion(&mut cluster, "ingester-zone-a-0", 3).0.allowed());
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 3);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
}

#[test]
fn the_controller_replaces_an_unavailable_pod_without_spending_the_budget() {
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(1));
    cluster.world.not_ready("ingester-zone-a-0");
    cluster.world.not_ready("ingester-zone-a-1");
    // A drain may not take the second unready pod's zone further, and the webhook judges it as the reference does.
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-1"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
    // The controller replacing a crash-looping pod takes nothing away that serves: allowed without spending the
    // budget (its intent written and the pods read again all the same:
    // `a_rollout_deletion_of_an_unavailable_pod_records_its_intent_first`).
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_READY), "{verdict:?}");
    assert!(needs.ends_with(&["write-intent", "statefulsets-again", "pods-again"].map(String::from)), "{needs:?}");
    // A Ready pod of that zone still waits.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-2", 1);
    assert!(!verdict.allowed(), "{verdict:?}");
}

#[test]
fn budgets_the_operator_may_not_read_do_not_stop_the_controller_but_do_stop_evictions() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.budgets = KnownBudgets::Unreadable("forbidden".into());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.outcome.status), (false, 500));
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_IN_SCOPE), "{verdict:?}");
    assert_eq!(needs, ["budgets"], "nothing read live: no permission beyond the rollout's is needed");
    // No budget at all in the namespace: the same, without a live read.
    cluster.budgets = KnownBudgets::Known(Vec::new());
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome, needs), (true, Outcome::POD_NOT_IN_SCOPE, vec!["budgets".into()]));
    // Not listed yet: the controller waits, as an eviction would.
    cluster.budgets = KnownBudgets::NotLoaded("starting".into());
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (false, Outcome::CFG_NOT_LOADED));
}

/// Found by the model (`rollout-model zpdb`, a crash during a rollout): the controller's deletion of a crashed pod
/// was allowed at once, without an intent; the pod turned Ready again before the deletion committed, and a drain
/// eviction in another zone, decided meanwhile, saw nothing going in that zone. The deletion now goes through the
/// flow: intent, then the pods read again (a pod Ready again by then is judged as any other).
#[test]
fn a_rollout_deletion_of_an_unavailable_pod_records_its_intent_first() {
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    cluster.world.not_ready("ingester-zone-b-0");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_READY), "{verdict:?}");
    // Ready again before the controller's deletion commits.
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod = fixture::pod(&fixture::statefulset(GROUP, &zone('b'), 2, "r1"), 0, "r1")
    });
    assert!(cluster.world.pod("ingester-zone-b-0").intent_until.is_some());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"), "{verdict:?}");
    // Ready again before the second read: judged as any other pod (zone a is going).
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    cluster.world.not_ready("ingester-zone-a-0");
    cluster.world.not_ready("ingester-zone-b-0");
    let mut flow =
        EvictPod::new(EvictionRequest::for_rollout("ingester-zone-b-0", "ns", 1), settings(Serialisation::Intents));
    let mut need = flow.step(Observed::Start, now());
    while !matches!(need, Need::PodsAgain { .. }) {
        assert!(!matches!(need, Need::Answer(_)), "answered before its second read: {need:?}");
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod = fixture::pod(&fixture::statefulset(GROUP, &zone('b'), 2, "r1"), 0, "r1")
    });
    let observed = cluster.observe(&need);
    let mut need = flow.step(observed, now());
    while let Need::PodsAgain { .. } | Need::RemoveIntent { .. } = need {
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    let Need::Answer(verdict) = need else { panic!("no answer: {need:?}") };
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"), "{verdict:?}");
}

/// Found by the ZPDB model: two decisions about the same pod wrote the same intent annotation, and the one denied
/// took back the intent the allowed one relied on until its eviction committed. Each decision now has its own key.
#[test]
fn a_denied_decision_leaves_the_intent_of_an_allowed_one_about_the_same_pod() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut first = eviction("ingester-zone-a-0");
    first.uid = "first".into();
    let (verdict, _) = decide(&mut cluster, &first, Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    // A second decision about the same pod (a retried drain on another replica) is denied after writing its intent:
    // an earlier intent of another zone shows at its second read.
    let mut second = eviction("ingester-zone-a-0");
    second.uid = "second".into();
    let mut flow = EvictPod::from_admission(&second, settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if let Need::WriteIntent { key, .. } = &need {
                    assert_eq!(key, "grafana.com/eviction-intent.second");
                    cluster.world.change("ingester-zone-b-0", |p| {
                        p.intent_until = Some(now() + jiff::SignedDuration::from_secs(1))
                    });
                }
                observed = cluster.observe(&need);
            }
        }
    };
    assert!(!verdict.allowed(), "{verdict:?}");
    assert_eq!(cluster.writes.iter().filter(|w| w.starts_with("remove")).count(), 1, "{:?}", cluster.writes);
    // The first decision's intent is still on the pod: a third decision about another zone counts it.
    let keys: Vec<&String> = cluster.intents.keys().map(|(_, key)| key).collect();
    assert_eq!(keys, ["grafana.com/eviction-intent.first"]);
    assert!(cluster.world.pod("ingester-zone-a-0").has_live_intent(now()));
}

#[test]
fn intent_keys_are_valid_annotation_names_and_all_of_them_are_read() {
    assert_eq!(keys::eviction_intent_key("7c2a-uid"), "grafana.com/eviction-intent.7c2a-uid");
    assert_eq!(keys::eviction_intent_key("a/b c"), "grafana.com/eviction-intent.a-b-c");
    assert_eq!(keys::eviction_intent_key(""), "grafana.com/eviction-intent");
    let long = keys::eviction_intent_key(&"x".repeat(100));
    assert_eq!(long.len() - "grafana.com/".len(), 63);
    assert!(keys::is_eviction_intent("grafana.com/eviction-intent") && keys::is_eviction_intent(&long));
    assert!(!keys::is_eviction_intent("grafana.com/eviction-intentional"));
    // A pod read from the API shows the latest of its intents.
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "ingester-zone-a-0", "uid": "u0", "annotations": {
            "grafana.com/eviction-intent.a": "2026-03-01T12:00:10Z",
            "grafana.com/eviction-intent.b": "2026-03-01T12:00:40Z",
            "grafana.com/eviction-intent.c": "not a time"}},
        "status": {"phase": "Running"}}))
    .unwrap();
    let read = BudgetPod::from_k8s(&pod).unwrap();
    assert_eq!(read.intent_until, Some("2026-03-01T12:00:40Z".parse().unwrap()));
}

/// Found by the `zpdb_evictions` bench (two evictions of one pod at once, as from overlapping drains or
/// a client retrying while its first request is still being decided): the decider of the same pod that loses a
/// race takes back the intent its twin, already allowed, relies on until the API server commits the eviction; a
/// decider in another zone then reads no intent and no terminating pod, and is allowed too. Scripted: twins `d1`,
/// `d2` evict `ingester-zone-b-0`, `q` evicts `ingester-zone-a-0` (ordered before it by name).
/// Fixed by keying each decision's intent on its AdmissionReview's uid.
#[test]
fn twin_decisions_of_one_pod_never_let_a_rival_spend_the_budget_again() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let start = |pod: &str, uid: &str| {
        let mut request = eviction(pod);
        request.uid = uid.into();
        let mut flow = EvictPod::from_admission(&request, settings(Serialisation::Intents));
        let next = flow.step(Observed::Start, now());
        Racer { flow, next }
    };
    let (mut d1, mut d2, mut q) =
        (start("ingester-zone-b-0", "d1"), start("ingester-zone-b-0", "d2"), start("ingester-zone-a-0", "q"));
    // Steps `racer` until it needs `until` (not carried out) or answers.
    let run_until = |cluster: &mut Cluster, racer: &mut Racer, until: &str| loop {
        if matches!(racer.next, Need::Answer(_)) || need_name(&racer.next) == until {
            return;
        }
        let observed = cluster.observe(&racer.next);
        racer.next = racer.flow.step(observed, now());
    };
    let step = |cluster: &mut Cluster, racer: &mut Racer| {
        let observed = cluster.observe(&racer.next);
        racer.next = racer.flow.step(observed, now());
    };
    run_until(&mut cluster, &mut q, "write-intent"); // q judged on a view without intents
    run_until(&mut cluster, &mut d1, "answer"); // d1 allowed; the eviction is not committed yet
    assert!(matches!(&d1.next, Need::Answer(v) if v.allowed()), "{:?}", d1.next);
    run_until(&mut cluster, &mut d2, "pods-again"); // d2 rewrote the same intent
    step(&mut cluster, &mut q); // q's intent
    step(&mut cluster, &mut q); // q reads again: only a later intent (b-0) stands in its way: it waits
    run_until(&mut cluster, &mut d2, "answer"); // d2 loses to q and takes the intent of b-0 back
    run_until(&mut cluster, &mut q, "answer");
    let q_allowed = matches!(&q.next, Need::Answer(v) if v.allowed());
    assert!(!q_allowed, "b-0 allowed and then a-0 allowed, in another zone: {:?}", cluster.writes);
}
