//! The demo's header: the world that ran, in words (sizes, pushes, scaling, the deployment's RBAC, the operator
//! processes) and its fault mix.

use crate::scenario::Scenario;
use crate::scenario::faults::FaultMix;
use crate::scenario::scaling::Admission;
use crate::scenario::{GROUP, SECOND_GROUP, zone_name};

/// The world in a few lines.
pub fn world(sc: &Scenario) -> Vec<String> {
    let zones: Vec<String> = (0..sc.zones).map(zone_name).collect();
    let unavailable = match &sc.max_unavailable_annotation {
        Some(text) => format!("rollout-max-unavailable {text:?} on zone-a (the other zones spelt by seed)"),
        None => format!("max unavailable {}", sc.max_unavailable),
    };
    let mut lines = vec![format!(
        "World: rollout group {GROUP:?}, {} zone{} x {} pods ({}), {unavailable}{}.",
        sc.zones,
        if sc.zones == 1 { "" } else { "s" },
        sc.replicas,
        zones.join(", "),
        if sc.min_ready_seconds > 0 { format!(", minReadySeconds {}", sc.min_ready_seconds) } else { String::new() },
    )];
    let pushes = match sc.revisions {
        0 => "no template push".to_string(),
        1 => "1 template revision pushed".to_string(),
        n => format!("{n} template revisions pushed"),
    };
    let mut what = vec![format!(
        "{pushes}{}{} during a {} s fault phase",
        if sc.one_zone_pushes { " (each to one zone)" } else { "" },
        if sc.reverts { ", half of them reverted" } else { "" },
        sc.fault_phase.as_secs()
    )];
    if let Some(s) = &sc.scaling {
        let how = match s.admission {
            Admission::Webhook => "changes admitted by the prepare-downscale webhook",
            Admission::Direct => "changes applied unclaimed",
        };
        what.push(match s.followers {
            true => format!(
                "a user scales zone-a, which the other zones follow ({how}, {} s min time)",
                s.min_time.as_secs()
            ),
            false => format!("an HPA per zone changes its replicas ({how}, {} s min time)", s.min_time.as_secs()),
        });
    }
    for (on, modifier) in [
        (sc.second_group, format!("a second group {SECOND_GROUP:?} pushed alike")),
        (sc.mirror, "every zone mirrors a ReplicaTemplate's replicas".to_string()),
        (sc.delayed_downscale, "delayed downscales".to_string()),
        (sc.no_downscale, "objects scaled through the no-downscale webhook".to_string()),
        (sc.evictions, "someone else deleting pods".to_string()),
        (sc.relabels, "pods relabelled out of their StatefulSet".to_string()),
        (sc.sidecars, "sidecars crashing in Ready pods".to_string()),
        (sc.observe_lag, "generations observed late".to_string()),
        (sc.events, "Events recorded".to_string()),
    ] {
        if on {
            what.push(modifier);
        }
    }
    lines.push(format!("Actors: {}.", what.join("; ")));
    let rbac = match sc.deployment {
        Some(d) => format!("the RBAC of the {} deployment (403 for anything else)", d.name()),
        None => "every permission".to_string(),
    };
    let tracker = if sc.zone_tracker_config_map().is_some() { "on" } else { "off" };
    let processes = match (&sc.ha, &sc.drains) {
        (Some(ha), _) => {
            format!("{} operator replicas electing a leader ({} election)", ha.replicas, ha.election.name())
        }
        (None, Some(d)) => format!(
            "one controller process, {} operator replica(s) serving the pod-eviction webhook under a zone-aware budget, \
             node drains",
            d.replicas
        ),
        (None, None) => "one controller process".to_string(),
    };
    lines.push(format!("Operator: {processes}, planner {}, {rbac}, zone tracker {tracker}.", sc.planner.name()));
    lines.push(faults(sc));
    lines.push(format!(
        "Then every fault heals and the group must converge within {} s, the controller then quiet and ready.",
        sc.settle_deadline.as_secs()
    ));
    lines
}

/// The fault mix in words.
pub fn faults(sc: &Scenario) -> String {
    let m: &FaultMix = &sc.faults;
    let drawn: Vec<&str> = [
        (m.partitions, "partitions cutting the operator off the API server"),
        (m.message_loss, "message loss"),
        (m.latency_spikes, "API latency spikes"),
        (m.watch_delay_spikes, "watch events delayed"),
        (m.apiserver_restarts, "API server crashes"),
        (m.controller_crashes, "controller crashes"),
        (m.watch_expiry, "watches expiring"),
        (m.pod_crashes, "pods crash-looping"),
        (m.quota, "pod creation refused (quota)"),
        (m.pauses, "zones paused"),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    let chances: Vec<&str> = [
        (m.crash_after_delete, "the controller crashing right after 5 % of its deletions"),
        (m.never_ready, "10 % of new pods unready for minutes"),
        (sc.lost_answers, "the answers to 10 % of the controller's committed writes lost"),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    let ha = if sc.ha.is_some() {
        "; the HA world's own: replicas frozen past their lease (also mid-pass and to the edge of the lease), the \
         leader killed while its group has work"
    } else {
        ""
    };
    let mut parts = Vec::new();
    if !drawn.is_empty() {
        let (low, high) = sc.fault_count;
        parts.push(format!("{low}-{high} faults of 2-60 s drawn from {}", drawn.join(", ")));
    }
    if !chances.is_empty() {
        parts.push(chances.join(", "));
    }
    if parts.is_empty() {
        parts.push("none".to_string());
    }
    format!("Faults: {}{ha}.", parts.join("; "))
}
