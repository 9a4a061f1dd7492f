//! The cluster at the start: the group's StatefulSets annotated as the scenario says (each annotation spelled one of
//! the ways users write it, the meaning kept apart for the oracle), their pods Ready at the first revision, the
//! budget and the no-downscale world's objects.

use crate::actors::mirror::set_reference;
use crate::environment::objects::revision_name;
use crate::environment::store::{SharedStore, Store};
use crate::scenario::deployment::ReferenceDeployment;
use crate::scenario::scaling::Admission;
use crate::scenario::{GROUP, SECOND_GROUP, Scenario, group_zone_name};
use jiff::Timestamp;
use std::time::Duration;

/// The API group of the mirror worlds' reference resource (the ReplicaTemplate CRD of `deploy/base`).
pub(crate) const MIRROR_GROUP: &str = "rollout-operator.grafana.com";

/// A zone's `grafana.com/rollout-delayed-downscale` and prepare URL as the delay-annotations world writes them, and
/// what the world means by them (the checker judges by that, never by what the operator's parsers make of the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DelayText {
    /// 20 s, in two units.
    Valid,
    /// A zero delay: no delayed downscale (no prepare or cancel call; the mirror follows its reference at once).
    Off(&'static str),
    /// Malformed (Prometheus' durations take each unit once, in descending order; a URL's host has no space, which
    /// Go's `url.Parse` refuses as the reference reads it): the
    /// reference refuses to scale the StatefulSet until a user corrects it to [`DelayText::Valid`].
    Malformed { delay: &'static str, url: &'static str },
    /// A delay of `days` days, longer than any run.
    Long { delay: &'static str, days: u64 },
}

pub(crate) const VALID_DELAY: &str = "15s5000ms";

pub(crate) const VALID_DELAY_URL: &str = "http://pod:8080/ingester/prepare-delayed-downscale";

/// The same endpoint with an IPv6 literal as host (the operator keeps the port and path and replaces the host with
/// the pod's DNS name), as the long-delays world's user writes it when correcting a zone.
pub(crate) const IPV6_DELAY_URL: &str = "http://[fd00::1]:8080/ingester/prepare-delayed-downscale";

/// Where the simulated pods answer the delayed-downscale calls (port and path of [`VALID_DELAY_URL`]).
pub(crate) const DELAY_ENDPOINT: &str = ":8080/ingester/prepare-delayed-downscale";

/// The ways a zone's delayed-downscale annotations are written in the delay-annotations world (zone `z` of seed `s`
/// gets `(s + z) % 6`).
pub(crate) const DELAY_TEXTS: [DelayText; 6] = [
    DelayText::Valid,
    DelayText::Off("0s"),
    DelayText::Off("0"),
    DelayText::Malformed { delay: "10s10s", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: "5s1m", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: VALID_DELAY, url: "http://pod :8080/ingester/prepare-delayed-downscale" },
];

/// The long-delays world's texts (zone `z` of seed `s` gets `(s + z) % 5`): a week, a year, four days, 300 years
/// (beyond Prometheus' int64 of nanoseconds, about 292 years, hence malformed), and a URL whose scheme Go's
/// `url.Parse` refuses (an underscore in it).
pub(crate) const LONG_DELAY_TEXTS: [DelayText; 5] = [
    DelayText::Long { delay: "1w", days: 7 },
    DelayText::Long { delay: "1y", days: 365 },
    DelayText::Long { delay: "4d", days: 4 },
    DelayText::Malformed { delay: "300y", url: VALID_DELAY_URL },
    DelayText::Malformed { delay: "1w", url: "h_ttp://pod:8080/ingester/prepare-delayed-downscale" },
];

/// How long the long-delays world's pods above the reference have been preparing when the run starts.
pub(crate) const PREPARING_BEFORE_THE_RUN: Duration = Duration::from_secs(3 * 24 * 3600);

/// How zone `z` of `seed` writes its delayed-downscale annotations.
/// `rollout-max-unavailable` as users write it, valid or not, each meaning what the reference's `strconv.Atoi`
/// reading makes of it (the checker's own reading of the documented rule, `StsSum::of`, judges by that): with five
/// pods a zone, two (a sign, spaces), every pod (a count beyond 32 bits), or the default of one (out of range,
/// zero, negative, not an integer).
pub(crate) const MAX_UNAVAILABLE_TEXTS: [&str; 9] =
    ["+40%", "+2", " 2 ", "99999999999", "140%", "0", "-2", "2.0", "40.5%"];

/// Zone-a keeps the scenario's value as written; the other zones take a spelling by seed when it is a percentage.
pub(crate) fn max_unavailable_text(value: &str, seed: u64, z: u32) -> &str {
    if z == 0 || !value.ends_with('%') {
        return value;
    }
    MAX_UNAVAILABLE_TEXTS[((seed * 2 + u64::from(z)) % MAX_UNAVAILABLE_TEXTS.len() as u64) as usize]
}

pub(crate) fn delay_text(sc: &Scenario, seed: u64, z: u32) -> DelayText {
    if sc.long_delays {
        LONG_DELAY_TEXTS[((seed + u64::from(z)) % LONG_DELAY_TEXTS.len() as u64) as usize]
    } else if sc.delay_annotations {
        DELAY_TEXTS[((seed + u64::from(z)) % 6) as usize]
    } else {
        DelayText::Valid
    }
}

/// The cluster at the start: the group's StatefulSets, annotated as the scenario says, each with its pods at the
/// first revision, all Ready.
pub(crate) fn populate(store: &SharedStore, sc: &Scenario, seed: u64) {
    let mut st = store.lock().unwrap();
    st.oracle.checker.concurrent_downscales_excused = sc.zone_tracker_config_map().is_none();
    // Where the webhook serves the group and the tracker's ConfigMap may be used, every rollout step is claimed.
    st.oracle.step_claims_required = sc.scaling.as_ref().is_some_and(|s| s.admission == Admission::Webhook)
        && sc.zone_tracker_config_map().is_some()
        && sc.deployment.is_none_or(|d| d == ReferenceDeployment::Jsonnet)
        && sc.defences.has(rollout_core::defences::Layer::RolloutStepClaims);
    st.oracle.replica_changes_refused = sc.deployment == Some(ReferenceDeployment::NoPatch);
    // Only where the leader goes down unclaimed: elsewhere its downscales are denied with the followers' (the same
    // claim is refused), so the followers must still match it.
    st.oracle.follower_downscales_refused = sc.scaling.as_ref().is_some_and(|s| s.admission == Admission::Direct)
        && sc.zone_tracker_config_map().is_some()
        && sc.deployment.is_some_and(|d| d != ReferenceDeployment::Jsonnet);
    if sc.no_downscale {
        populate_no_downscale(&mut st);
    }
    if let Some(health) = &sc.health {
        st.health_checks.push(crate::environment::prometheus::health_check());
        st.world.bad_release = health.bad_release;
    }
    if sc.mirror {
        st.api_resources.push(rollout_operator::cluster::ApiResourceRef {
            group: MIRROR_GROUP.into(),
            version: "v1".into(),
            kind: "ReplicaTemplate".into(),
            plural: "replicatemplates".into(),
        });
        // In the long-delays world the user asked for one replica fewer three days ago (pods prepare below).
        let reference = if sc.long_delays { sc.replicas - 1 } else { sc.replicas };
        set_reference(&mut st, reference);
    }
    if let Some(d) = sc.deployment {
        let tracker = if d.zone_tracker() { "with" } else { "without" };
        st.trace("sim", format!("RBAC of the {} deployment, {tracker} the zone tracker", d.name()));
    }
    st.trace(
        "sim",
        format!(
            "seed {seed}: {} zones x {} pods, max unavailable {}, planner {}",
            sc.zones,
            sc.replicas,
            sc.max_unavailable,
            sc.planner.name()
        ),
    );
    let groups: &[&str] = if sc.second_group { &[GROUP, SECOND_GROUP] } else { &[GROUP] };
    for (group, z) in groups.iter().flat_map(|g| (0..sc.zones).map(move |z| (*g, z))) {
        let name = group_zone_name(group, z);
        let mut sts = crate::environment::objects::statefulset(group, &name, sc.replicas, sc.max_unavailable);
        if sc.min_ready_seconds > 0
            && let Some(spec) = sts.spec.as_mut()
        {
            spec.min_ready_seconds = Some(sc.min_ready_seconds as i32);
        }
        if sc.mirror && group == GROUP {
            st.world.mirrors.insert(name.clone());
            crate::environment::objects::annotate(
                &mut sts,
                rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME,
                GROUP,
            );
            crate::environment::objects::annotate(
                &mut sts,
                rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND,
                "ReplicaTemplate",
            );
            // Zone-b writes the group without a version, which Go's `schema.ParseGroupVersion` accepts (only the
            // group is used to find the resource).
            let api_version = if z == 1 { format!("{MIRROR_GROUP}/") } else { format!("{MIRROR_GROUP}/v1") };
            crate::environment::objects::annotate(
                &mut sts,
                rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION,
                &api_version,
            );
            if let Some(value) = &sc.mirror_write_back {
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK,
                    value,
                );
            }
            if sc.delayed_downscale {
                // 20 s, in two units (Prometheus' duration format): the checker judges by the 20 s it meant.
                let (delay, url) = match delay_text(sc, seed, z) {
                    DelayText::Valid => {
                        st.world.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(20));
                        (VALID_DELAY, VALID_DELAY_URL)
                    }
                    DelayText::Off(delay) => (delay, VALID_DELAY_URL),
                    DelayText::Malformed { delay, url } => {
                        st.world.delayed_downscale_malformed.insert(name.clone());
                        (delay, url)
                    }
                    DelayText::Long { delay, days } => {
                        st.world.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(days * 24 * 3600));
                        // The pod above the reference has been preparing since the user's downscale (whole seconds,
                        // as a pod answers).
                        let pod = format!("{name}-{}", sc.replicas - 1);
                        let now =
                            Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
                        let since = now - jiff::SignedDuration::try_from(PREPARING_BEFORE_THE_RUN).unwrap_or_default();
                        st.world.prepared.insert(pod.clone(), since);
                        st.trace(
                            "sim",
                            format!("{pod} has been preparing for a delayed downscale ({delay}) for 3 days"),
                        );
                        let before = crate::oracle::activity::WorldEvent::PreparingBeforeTheRun {
                            pod: pod.clone(),
                            delay: delay.to_string(),
                        };
                        st.oracle.activity.happened(before);
                        (delay, VALID_DELAY_URL)
                    }
                };
                crate::environment::objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_DELAYED_DOWNSCALE, delay);
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL,
                    url,
                );
            }
        }
        // The world's RolloutHealthCheck selects the first group: the second rolls ungated.
        if sc.health.is_some() && group == GROUP {
            crate::environment::objects::annotate(
                &mut sts,
                rollout_core::keys::ROLLOUT_HEALTH_CHECK,
                crate::environment::prometheus::HEALTH_CHECK,
            );
        }
        if let Some(value) = &sc.max_unavailable_annotation {
            let spelled = max_unavailable_text(value, seed, z);
            crate::environment::objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_MAX_UNAVAILABLE, spelled);
        }
        if let Some(scaling) = &sc.scaling {
            let forgotten = sc.follower_without_min_time && scaling.followers && z + 1 == sc.zones && z > 0;
            if !forgotten {
                let min_time = go_duration_text(scaling.min_time);
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
                    &min_time,
                );
                st.world.min_times.insert(sts.metadata.name.clone().unwrap_or_default(), scaling.min_time);
            }
            if scaling.admission == Admission::Webhook {
                sts.metadata
                    .labels
                    .get_or_insert_default()
                    .insert(rollout_core::keys::PREPARE_DOWNSCALE.into(), "true".into());
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PORT,
                    "8080",
                );
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PATH,
                    "prepare-shutdown",
                );
            }
            if z > 0 && scaling.followers {
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER,
                    &group_zone_name(group, 0),
                );
                if sc.leader_ready_upscales {
                    crate::environment::objects::annotate(
                        &mut sts,
                        rollout_core::keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY,
                        "true",
                    );
                }
            }
            if sc.recent_downscale && z == 1 {
                let at = rollout_core::downscale::round_up_to_second(Timestamp::now());
                crate::environment::objects::annotate(
                    &mut sts,
                    rollout_core::keys::LAST_DOWNSCALE,
                    &rollout_core::downscale::format_timestamp(at),
                );
                let min_time = Some(scaling.min_time);
                st.oracle.checker.record_downscale(crate::oracle::checker::scaling::Downscale {
                    commit_rv: 0,
                    basis_rv: None,
                    at: Duration::ZERO,
                    sts: name.clone(),
                    group: group.to_string(),
                    from: sc.replicas + 1,
                    to: sc.replicas,
                    by: "someone before the operator started".to_string(),
                    min_time,
                    recorded_at: Some(Duration::ZERO),
                    exempt: false,
                    follower: false,
                });
            }
        }
        // The budget selects the group's pods by the group's label, which their template then carries.
        let budget_labels = (sc.drains.is_some() && group == GROUP).then(|| {
            std::collections::BTreeMap::from([(rollout_core::keys::ROLLOUT_GROUP.to_string(), GROUP.to_string())])
        });
        if let (Some(labels), Some(spec)) = (&budget_labels, sts.spec.as_mut()) {
            spec.template.metadata.get_or_insert_default().labels = Some(labels.clone());
        }
        st.put_statefulset(sts);
        for i in 0..sc.replicas {
            let pod_name = format!("{name}-{i}");
            let uid = st.new_uid(&pod_name);
            let mut pod =
                crate::environment::objects::pod(&name, i, &revision_name(&name, 0), uid, true, Timestamp::now());
            if sc.sidecars {
                crate::environment::objects::add_sidecar(&mut pod);
            }
            if let Some(labels) = &budget_labels {
                pod.metadata.labels.get_or_insert_default().extend(labels.clone());
            }
            st.put_pod(pod);
        }
    }
    if let Some(drains) = &sc.drains {
        let budget = crate::scenario::drains::budget_object(GROUP, drains);
        // The checker reads the world's budget as it reads every later version (in force from the start).
        let rule = crate::oracle::checker::budgets::BudgetRule::read(&budget)
            .expect("the drains world's budget is one the checker reads");
        st.budgets.push(budget);
        st.oracle.checker.budgets.push(rule);
        let mode = match drains.mode {
            crate::scenario::drains::BudgetMode::Zones => "zone mode",
            crate::scenario::drains::BudgetMode::Partitions => "partition mode",
        };
        st.trace(
            "sim",
            format!(
                "ZoneAwarePodDisruptionBudget {} ({mode}, max unavailable {}), {} operator replicas serving the {} \
                 eviction webhook",
                crate::scenario::drains::BUDGET,
                drains.max_unavailable,
                drains.replicas,
                drains.evictor.name()
            ),
        );
    }
    let snapshot = st.describe();
    st.trace("cluster", snapshot);
}

/// `d` as a user may write it in a Go duration annotation, in a different form for each of the worlds' min times
/// (a fraction of a minute, milliseconds, a fraction of an hour and seconds together), so the parser's every path is
/// read; the checker judges against `d` itself (the world hands it over: [`Store::min_times`]), never against what
/// the operator's parser makes of the text.
pub(crate) fn go_duration_text(d: Duration) -> String {
    match d.as_secs() {
        30 => "0.5m".to_string(),
        15 => "0.25m".to_string(),
        // Every sub-second unit, in no particular order (Go takes any): 4 s + 5 s + 1 s.
        10 => "4000ms5000000000ns1000000us".to_string(),
        // Hours too: 0.01 h is exactly 36 s.
        60 => "0.01h24s".to_string(),
        n => format!("{n}s"),
    }
}

/// Another team's namespace, which the operator does not manage.
pub(crate) const FOREIGN_NAMESPACE: &str = "team-b";

/// The no-downscale world's objects: (kind, name, labelled `grafana.com/no-downscale: "true"`).
pub(crate) const NO_DOWNSCALE_OBJECTS: [(&str, &str, bool); 3] = [
    ("Deployment", "distributor", true),
    ("ReplicaSet", "query-frontend-7c9d", false),
    ("StatefulSet", "compactor", true),
];

pub(crate) fn no_downscale_labels(labelled: bool) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::from([("name".to_string(), "other".to_string())]);
    if labelled {
        labels.insert(rollout_core::keys::NO_DOWNSCALE.to_string(), "true".to_string());
    }
    labels
}

/// The no-downscale world's Deployment, ReplicaSet and StatefulSet (in no rollout group; its pods Ready).
pub(crate) fn populate_no_downscale(st: &mut Store) {
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    for (kind, name, labelled) in NO_DOWNSCALE_OBJECTS {
        let metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some(crate::environment::objects::NAMESPACE.into()),
            labels: Some(no_downscale_labels(labelled)),
            resource_version: Some("1".into()),
            ..Default::default()
        };
        match kind {
            "Deployment" => {
                let spec = DeploymentSpec { replicas: Some(3), ..Default::default() };
                st.deployments.insert(name.into(), Deployment { metadata, spec: Some(spec), status: None });
            }
            "ReplicaSet" => {
                let spec = ReplicaSetSpec { replicas: Some(3), ..Default::default() };
                st.replicasets.insert(name.into(), ReplicaSet { metadata, spec: Some(spec), status: None });
            }
            _ => {
                let mut sts = crate::environment::objects::statefulset(GROUP, name, 2, 1);
                sts.metadata.labels = Some(no_downscale_labels(labelled));
                st.put_statefulset(sts);
                for i in 0..2 {
                    let uid = st.new_uid(&format!("{name}-{i}"));
                    st.put_pod(crate::environment::objects::pod(
                        name,
                        i,
                        &revision_name(name, 0),
                        uid,
                        true,
                        Timestamp::now(),
                    ));
                }
            }
        }
    }
}
