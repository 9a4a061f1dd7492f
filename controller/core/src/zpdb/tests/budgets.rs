//! Budget validation (reference 5.2: every check and its order), the validating webhook, and the known budgets
//! (reference 5.3).

use super::*;

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
