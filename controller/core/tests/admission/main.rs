//! Admission decisions, by topic: review parsing and rendering and arbitrary input ([`reviews`]), no-downscale
//! ([`no_downscale_rules`]), prepare-downscale's rules with the reference's messages ([`prepare_rules`]) and its
//! step machine ([`prepare_flow`]), and the controller side of "no rollout step while a downscale is being
//! prepared" ([`in_progress`]).
//!
//! Owns the objects and reviews they share, and a live group with prepare-downscale settings ([`Case`]).

mod in_progress;
mod no_downscale_rules;
mod prepare_flow;
mod prepare_rules;
mod reviews;

use jiff::Timestamp;
use proptest::prelude::*;
use rollout_core::admission::no_downscale::{self, ParentResource, Step};
use rollout_core::admission::prepare::{self, PlanInput, Precheck, Target};
use rollout_core::admission::{
    AdmissionRequest, ReviewVersion, Verdict, check_content_type, go_time, parse_review, render_response,
};
use rollout_core::downscale::{DownscaleInProgress, DownscaleRecord, parse_in_progress, render_in_progress};
use rollout_core::fixture::{annotate, label, not_ready, pod, statefulset};
use rollout_core::keys;
use rollout_core::{GroupSnapshot, GroupState, MemberSnapshot, PlanContext, StatefulSetView, plan_group};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const NOW: &str = "2026-01-01T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn sts_object(name: &str, replicas: Option<i32>, labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": replicas, "serviceName": "svc",
            "selector": {"matchLabels": {"name": name}},
            "template": {"metadata": {"labels": {"name": name}}},
        },
    })
}

fn scale_object(name: &str, replicas: i32) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": replicas}})
}

fn review(version: &str, resource: &str, name: &str, old: Value, new: Value, dry_run: Option<bool>) -> Value {
    let mut request = json!({
        "uid": "uid-1", "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "alice"},
        "object": new, "oldObject": old,
    });
    if let Some(d) = dry_run {
        request["dryRun"] = json!(d);
    }
    json!({"apiVersion": version, "kind": "AdmissionReview", "request": request})
}

fn request(old: Value, new: Value) -> AdmissionRequest {
    parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, new, None))
}

fn parse(v: Value) -> AdmissionRequest {
    parse_review(&serde_json::to_vec(&v).unwrap()).expect("valid review")
}

fn decided(step: Step) -> Verdict {
    match step {
        Step::Decided(v) => v,
        other => panic!("expected a verdict, got {other:?}"),
    }
}

fn prepare_annotations() -> Value {
    json!({keys::PREPARE_DOWNSCALE_HTTP_PORT: "8080", keys::PREPARE_DOWNSCALE_HTTP_PATH: "/ingester/prepare-shutdown"})
}

fn prepare_labels() -> Value {
    json!({"rollout-group": "ingester", keys::PREPARE_DOWNSCALE: "true"})
}

/// A live group of three zones, 3 pods each, all updated and ready, with prepare-downscale settings on zone a.
fn zone(name: &str) -> StatefulSetView {
    let s = statefulset("ingester", name, 3, "r1");
    let s = label(s, keys::PREPARE_DOWNSCALE, "true");
    let s = annotate(s, keys::PREPARE_DOWNSCALE_HTTP_PORT, "8080");
    let s = annotate(s, keys::PREPARE_DOWNSCALE_HTTP_PATH, "/ingester/prepare-shutdown");
    let mut s = annotate(s, keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "12h");
    s.service_name = "svc".into();
    s
}

fn live_group(members: Vec<(StatefulSetView, Vec<rollout_core::PodView>)>) -> GroupSnapshot {
    GroupSnapshot {
        name: "ingester".into(),
        members: members.into_iter().map(|(sts, pods)| MemberSnapshot { sts, pods }).collect(),
        warnings: Vec::new(),
    }
}

fn healthy(s: StatefulSetView) -> (StatefulSetView, Vec<rollout_core::PodView>) {
    let pods = (0..3).map(|i| pod(&s, i, "r1")).collect();
    (s, pods)
}

struct Case {
    group: GroupSnapshot,
    record: Option<DownscaleRecord>,
    in_progress: Vec<DownscaleInProgress>,
    dry_run: bool,
}

impl Case {
    fn new() -> Self {
        Case {
            group: live_group(vec![
                healthy(zone("ingester-zone-a")),
                healthy(zone("ingester-zone-b")),
                healthy(zone("ingester-zone-c")),
            ]),
            record: None,
            in_progress: Vec::new(),
            dry_run: false,
        }
    }

    fn run(&self) -> Result<prepare::PreparePlan, Verdict> {
        let mut req = request(
            sts_object("ingester-zone-a", Some(3), prepare_labels(), prepare_annotations()),
            sts_object("ingester-zone-a", Some(1), prepare_labels(), prepare_annotations()),
        );
        req.dry_run = self.dry_run;
        let target = self.group.member("ingester-zone-a").unwrap();
        prepare::plan(&PlanInput {
            request: &req,
            old: 3,
            new: 1,
            sts: &target.sts,
            target,
            group: Some(&self.group),
            record: self.record.as_ref(),
            in_progress: &self.in_progress,
            cluster_domain: "cluster.local.",
            now: ts(NOW),
        })
    }

    fn denial(&self) -> String {
        match self.run() {
            Err(v) => {
                assert!(!v.allowed);
                v.message.unwrap()
            }
            Ok(plan) => panic!("expected a denial, got {plan:?}"),
        }
    }
}
