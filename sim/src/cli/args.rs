//! The scenario's command-line arguments, their mapping to a [`Scenario`](crate::scenario::Scenario) and the replay
//! line that reproduces a run.

use rollout_core::Defences;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::drains::{BudgetMode, Drains, Evictor};
use rollout_sim::scenario::faults::FaultMix;
use rollout_sim::scenario::ha::{ElectionVariant, Ha};
use rollout_sim::scenario::health::HealthGated;
use rollout_sim::scenario::planner::PlannerKind;
use rollout_sim::scenario::scaling::{Admission, ScalingScenario};
use std::time::Duration;

/// What world to simulate (shared by every subcommand).
#[derive(clap::Args)]
pub(crate) struct ScenarioArgs {
    /// A whole scenario as one line of `key=value` settings, as a failing seed's replay line prints it; it
    /// replaces `--planner` and every other scenario flag.
    #[arg(long)]
    pub(crate) scenario: Option<String>,
    /// Fault kinds, comma-separated: all, none, or any of partitions, loss, latency, watch-delay,
    /// apiserver-restarts, controller-crashes, crash-after-delete, watch-expiry, pod-crashes, never-ready, quota,
    /// pauses.
    #[arg(long, default_value = "all")]
    pub(crate) faults: String,
    /// The large rollout: 3 zones x 100 pods, max-unavailable 1, one push, no faults unless --faults
    /// names some; the report compares the rollout's duration with the pods' own replacement times.
    #[arg(long)]
    pub(crate) large: bool,
    /// Leader/follower scaling in play: zone-a leads zone-b and zone-c, a 30s min time between zone
    /// downscales, and a user scaling the leader up and down through the real prepare-downscale webhook (two
    /// simulated operator replicas, simulated pods).
    #[arg(long)]
    pub(crate) scaling: bool,
    /// Without --scaling: an HPA per zone changes its replicas through the real prepare-downscale webhook during
    /// one-zone rollouts (invariants 3 and 5). With --scaling it changes nothing: the leader's changes go through the
    /// webhook already.
    #[arg(long)]
    pub(crate) webhook: bool,
    /// Template revisions the user pushes during the fault phase (default: 2, 0 with --scaling, 4 one-zone pushes
    /// with --webhook alone).
    #[arg(long)]
    pub(crate) revisions: Option<u32>,
    /// Run under a real deployment's RBAC (403 for anything else) and zone-tracker setting: `helm` (Grafana's chart
    /// 0.50.1: no configmaps, no zone tracker), `helm-old` (the chart mimir-distributed pins: also no pod `patch`)
    /// or `jsonnet` (the reference's jsonnet: zone tracker on); or `no-patch`: `helm-old` without `patch` on
    /// StatefulSets either, as Loki's chart 0.24.0 grants pods and StatefulSets (eviction decisions serialised in each replica; with --drains, one
    /// replica serves the eviction webhook, in the controller's process); or
    /// `tracker-read-only`: `jsonnet` with the zone tracker's ConfigMaps granted `get` only (every write of the
    /// record refused).
    #[arg(long)]
    pub(crate) deployment: Option<String>,
    /// `on` or `off`: overrides the deployment's `-use-zone-tracker` (on where its RBAC grants no configmaps is the
    /// misconfiguration whose 403s the operator must survive: coordinated downscales stop, everything else goes on).
    #[arg(long = "zone-tracker")]
    pub(crate) zone_tracker: Option<String>,
    /// `rollout-max-unavailable` as written on the StatefulSets, a count or a percentage (`40%`); with a
    /// percentage the zones have five pods, and zone-a has it as written while the other zones are spelt by seed,
    /// valid or not (`+2`, `140%`, ...).
    #[arg(long = "max-unavailable")]
    pub(crate) max_unavailable: Option<String>,
    /// `spec.minReadySeconds` of the StatefulSets.
    #[arg(long = "min-ready-seconds", default_value_t = 0)]
    pub(crate) min_ready_seconds: u32,
    /// With --scaling or --webhook: half the changes are `/scale` updates, half of those a `kubectl scale` PATCH, half an HPA's PUT
    /// carrying the resourceVersion it read (sent again 15 s after a 409).
    #[arg(long = "scale-requests")]
    pub(crate) scale_requests: bool,
    /// The StatefulSet controller acts on a new generation only once observed, half the observations taking 5-60 s
    /// during the fault phase (`status.observedGeneration` lagging behind the spec).
    #[arg(long = "observe-lag")]
    pub(crate) observe_lag: bool,
    /// With --scaling: each template push comes at one of the leader's replica changes (-5 s to +40 s), so
    /// followers are rolled while they are scaled.
    #[arg(long = "pushes-at-scaling")]
    pub(crate) pushes_at_scaling: bool,
    /// Half the template pushes are reverted 2-20 s later (every zone back to the revision before): unfinished
    /// rollouts then have currentRevision = updateRevision with pods on the reverted revision.
    #[arg(long)]
    pub(crate) reverts: bool,
    /// Two or three times a user relabels a running pod out of its StatefulSet's selector for 10-40 s and back.
    #[arg(long)]
    pub(crate) relabels: bool,
    /// With --scaling and the zone tracker: twice during a rollout a user edits the zone tracker's record badly (a
    /// lastDownscaled that is no time) and repairs it 30-60 s later.
    #[arg(long = "corrupt-record")]
    pub(crate) corrupt_record: bool,
    /// With --scaling: the last zone carries no min-time-between-zones-downscale (it must not go down once another
    /// zone's downscale is recorded; it still follows the leader up).
    #[arg(long = "follower-without-min-time")]
    pub(crate) follower_without_min_time: bool,
    /// With --scaling or --webhook: `grafana.com/min-time-between-zones-downscale` in seconds (default 30 with
    /// --scaling, 10 with --webhook alone).
    #[arg(long = "min-time")]
    pub(crate) min_time: Option<u64>,
    /// The rollout group's StatefulSets, one per zone: 1 to 5 (default 3). With 1 the group is a single
    /// StatefulSet (a single-zone deployment that still carries `rollout-group`).
    #[arg(long = "zones")]
    pub(crate) zones: Option<u32>,
    /// With --scaling: after each follower downscale the user also asks for leader downscales from that commit plus
    /// the min time less 1.5 s, every 250 ms until one is admitted or 1.5 s past it (the min time's boundary in
    /// reach); the min time defaults to 15 s then.
    #[arg(long = "boundary-probes")]
    pub(crate) boundary_probes: bool,
    /// With --scaling: the user's changes of the leader are applied as asked, with no claim (the leader not served
    /// by the prepare-downscale webhook); its followers' downscales are still the controller's to claim (which
    /// `--deployment tracker-read-only` refuses). Nothing records the leader's own downscales, so no min time between
    /// them and the followers' is promised or judged. The default of --pushes-at-scaling.
    #[arg(long = "direct-leader")]
    pub(crate) direct_leader: bool,
    /// The controller records Kubernetes Events (-events.enabled), and batch reports them per rollout step. Off by
    /// default, so seeds found without it replay the same world.
    #[arg(long)]
    pub(crate) events: bool,
    /// The defences in depth in force: `all`, or `-` and the layers to switch off, comma-separated, of
    /// uid-preconditions, expectations, reread-after-claim, claim-dated-at-deadline, redated-at-commit,
    /// record-fails-closed, rollout-step-claims (test-only: shows what each layer holds off).
    #[arg(long, default_value = "all")]
    pub(crate) defences: String,
    /// Someone else deletes a pod every 5-30 s of the fault phase (evictions); the StatefulSet controller recreates
    /// it under the same name.
    #[arg(long)]
    pub(crate) evictions: bool,
    /// With --scaling or --webhook: every API request of an admission first waits 0.2-0.8 s (an operator replica on a busy node).
    #[arg(long = "slow-admissions")]
    pub(crate) slow_admissions: bool,
    /// With --scaling or --webhook: the webhook's replicas keep a self-signed certificate valid SECONDS (default 300)
    /// in the Secret, renew it at two thirds and inject its CA; they restart now and then, and the API server calls
    /// them only through TLS that verifies against the configuration's CA bundle.
    #[arg(long = "certificates", value_name = "SECONDS", num_args = 0..=1, default_missing_value = "300")]
    pub(crate) certificates: Option<u64>,
    /// During API latency spikes a request may wait up to 20 s before it is carried out (past the client's timeout):
    /// writes whose answers never came commit later.
    #[arg(long = "slow-commits")]
    pub(crate) slow_commits: bool,
    /// During the fault phase the API server drops its answer to one in ten of the controller's committed writes:
    /// the write stays, the controller times out not knowing.
    #[arg(long = "lost-answers")]
    pub(crate) lost_answers: bool,
    /// A second rollout group in the namespace (store-gateway), pushed along with the first.
    #[arg(long = "second-group")]
    pub(crate) second_group: bool,
    /// Pods have a sidecar that crashes now and then while the pod still reports Ready.
    #[arg(long)]
    pub(crate) sidecars: bool,
    /// With --scaling: followers scale up only once every leader replica is ready
    /// (grafana.com/rollout-upscale-only-when-leader-ready).
    #[arg(long = "leader-ready-upscales")]
    pub(crate) leader_ready_upscales: bool,
    /// With --scaling: the user sets grafana.com/rollout-force-replicas on zone-b (a follower) during the fault
    /// phase; zone-b must be held at it.
    #[arg(long = "force-follower")]
    pub(crate) force_follower: bool,
    /// Without --scaling or --mirror: the user sets grafana.com/rollout-force-replicas on the last zone (neither
    /// follower nor mirror) during the fault phase; as in the reference it is ignored there: the zone keeps its
    /// replicas.
    #[arg(long = "force-plain")]
    pub(crate) force_plain: bool,
    /// With --scaling or --webhook: zone-b starts with grafana.com/last-downscale dated at the start, and zone-a is
    /// asked to scale down within the min time of it (the record bootstrapped from the annotation).
    #[arg(long = "recent-downscale")]
    pub(crate) recent_downscale: bool,
    /// A Deployment, a ReplicaSet and a StatefulSet, some labelled grafana.com/no-downscale, scaled by a user through
    /// the no-downscale webhook (object UPDATEs and /scale updates).
    #[arg(long = "no-downscale")]
    pub(crate) no_downscale: bool,
    /// Every zone mirrors its replicas from a ReplicaTemplate whose spec.replicas a user changes
    /// (grafana.com/rollout-mirror-replicas-from-resource-*).
    #[arg(long)]
    pub(crate) mirror: bool,
    /// With --mirror: delayed downscale (20 s), the simulated pods answering the prepare and cancel calls.
    #[arg(long = "delayed-downscale")]
    pub(crate) delayed_downscale: bool,
    /// With --delayed-downscale: each zone's delay and prepare URL written one of six ways: valid, a zero delay (`0s`,
    /// `0`: off), or malformed (`10s10s`, `5s1m`, a URL with a space in its host) until a user corrects them 20-120 s in.
    #[arg(long = "delay-annotations")]
    pub(crate) delay_annotations: bool,
    /// With --delayed-downscale: delays longer than the run (`1w`, `1y`, pods preparing for 3 days when it starts) or
    /// beyond what Prometheus holds (`300y`: malformed until a user corrects it).
    #[arg(long = "long-delays")]
    pub(crate) long_delays: bool,
    /// A ZoneAwarePodDisruptionBudget over the group (`zone` mode, the default, or `partition` mode), two operator
    /// replicas serving the real pod-eviction webhook (restarted now and then), and node drains evicting pods
    /// through the API server during the fault phase (retrying 429 with backoff, some dry runs).
    #[arg(long, num_args = 0..=1, default_missing_value = "zone")]
    pub(crate) drains: Option<String>,
    /// With --drains: the eviction webhook the replicas serve: real, or (test-only) no-second-read (the re-read
    /// after the intent answered from the first read) or ignores-budget (no budget known).
    #[arg(long, default_value = "real")]
    pub(crate) evictor: String,
    /// With --drains: the budget's maxUnavailable.
    #[arg(long = "budget-max-unavailable", default_value_t = 1)]
    pub(crate) budget_max_unavailable: u32,
    /// With --drains: the budget's maxUnavailablePercentage (1-100) instead of maxUnavailable, over five pods a zone
    /// (40 is two pods, one while a pod is missing from the StatefulSet's status).
    #[arg(long = "budget-percentage")]
    pub(crate) budget_percentage: Option<u32>,
    /// With --drains: the user edits the budget during the fault phase (maxUnavailable changed, relabelled,
    /// deleted and created again, invalid updates the validation webhook must refuse), and the operator watches it.
    #[arg(long = "budget-edits")]
    pub(crate) budget_edits: bool,
    /// With --drains: a user re-applies the StatefulSets from their manifests every 2-10 s (kubectl replace),
    /// dropping the eviction intents kept on them (where pods cannot be patched).
    #[arg(long = "intent-wipes")]
    pub(crate) intent_wipes: bool,
    /// With --drains: evictions chase the controller, leaving within 20 ms of a pod first showing Ready and of each
    /// controller deletion, for that zone's other pods and a neighbouring zone's.
    #[arg(long = "chase")]
    pub(crate) chase: bool,
    /// High availability: this many operator replicas (2 or 3) on nodes of their own, each running the real leader
    /// election and one controller per term against the simulated Lease; the faults hit the replicas, which are
    /// also frozen longer than the lease, killed while leading, and run clocks with offsets and rates of their own.
    #[arg(long)]
    pub(crate) ha: Option<u32>,
    /// With --ha: the election the replicas run: real, or (test-only) no-gate (the controller never asks the gate
    /// before a write), no-margin (renew deadline equal to the lease duration, no skew margin), late-stop (each
    /// term's controller stops 20 s after its term ends, as a pass held up by slow requests; the gate alone keeps it
    /// from writing) or late-stop-no-gate (the same without the gate).
    #[arg(long, default_value = "real")]
    pub(crate) election: String,
    /// Health-gated zones: every StatefulSet names a RolloutHealthCheck of the pods' error ratio, a simulated
    /// Prometheus scrapes the pods, and the user pushes one release, good or bad (its pods fail 30% of their
    /// requests where good ones fail 1%, all of them Ready): a bad release must stop after its first zone, a good one
    /// converge.
    #[arg(long = "health-check", value_name = "good|bad")]
    pub(crate) health_check: Option<String>,
    /// With --health-check: Prometheus' answers are now and then slow (past the check's 2 s timeout), refused at
    /// the connection or empty, until the faults stop.
    #[arg(long = "query-faults")]
    pub(crate) query_faults: bool,
}

pub(crate) fn scenario(planner: &str, args: &ScenarioArgs) -> Result<Scenario, String> {
    if let Some(line) = &args.scenario {
        return Scenario::from_line(line).map_err(|e| format!("--scenario: {e}"));
    }
    let planner = PlannerKind::parse(planner).ok_or_else(|| {
        let names: Vec<&str> = PlannerKind::ALL.iter().map(|p| p.name()).collect();
        format!("unknown planner {planner:?}; one of: {}", names.join(", "))
    })?;
    let faults = FaultMix::parse(&args.faults)?;
    let base = match (args.scaling, args.webhook) {
        // Fault-free unless faults are named.
        (false, false) if args.large && args.faults == "all" => Scenario::large(),
        (false, false) if args.large => Scenario { fault_count: Scenario::default().fault_count, ..Scenario::large() },
        (false, false) => Scenario::default(),
        (true, _) if args.boundary_probes => Scenario::min_time_boundary(),
        (true, _) if args.pushes_at_scaling => Scenario::follower_rollouts_while_scaling(),
        (true, _) => Scenario::scaling(),
        (false, true) => Scenario::rollout_with_admitted_downscales(),
    };
    let deployment = match &args.deployment {
        None => None,
        Some(d) => Some(ReferenceDeployment::parse(d).ok_or_else(|| {
            format!("unknown deployment {d:?}; one of: helm, helm-old, jsonnet, no-patch, tracker-read-only")
        })?),
    };
    let base = match &args.max_unavailable {
        Some(value) if value.ends_with('%') => {
            Scenario { max_unavailable_annotation: Some(value.clone()), ..Scenario { replicas: 5, ..base } }
        }
        Some(value) => Scenario {
            max_unavailable: value.parse().map_err(|_| format!("--max-unavailable {value:?}: a count or N%"))?,
            ..base
        },
        None => base,
    };
    let scaling = match (base.scaling.clone(), args.min_time) {
        (Some(s), Some(secs)) => Some(ScalingScenario { min_time: Duration::from_secs(secs), ..s }),
        (None, Some(_)) => return Err("--min-time needs --scaling or --webhook".to_string()),
        (s, None) => s,
    };
    if args.direct_leader && (!args.scaling || args.webhook || args.boundary_probes) {
        return Err("--direct-leader needs --scaling (without --webhook or --boundary-probes)".to_string());
    }
    let scaling = match scaling {
        Some(s) if args.direct_leader => Some(ScalingScenario { admission: Admission::Direct, ..s }),
        s => s,
    };
    if args.boundary_probes && !args.scaling {
        return Err("--boundary-probes needs --scaling".to_string());
    }
    if args.pushes_at_scaling && !args.scaling {
        return Err("--pushes-at-scaling needs --scaling".to_string());
    }
    let defences = Defences::parse(&args.defences).map_err(|e| format!("--defences {e}"))?;
    if args.slow_admissions && !args.webhook && !args.scaling {
        return Err("--slow-admissions needs --scaling or --webhook".to_string());
    }
    if args.certificates.is_some() && !args.webhook && !args.scaling && args.drains.is_none() {
        return Err("--certificates needs --scaling, --webhook or --drains".to_string());
    }
    if args.certificates == Some(0) {
        return Err("--certificates 0: a certificate is valid for at least a second".to_string());
    }
    if args.delayed_downscale && !args.mirror {
        return Err("--delayed-downscale needs --mirror".to_string());
    }
    if args.delay_annotations && !args.delayed_downscale {
        return Err("--delay-annotations needs --delayed-downscale".to_string());
    }
    if args.corrupt_record && !args.scaling {
        return Err("--corrupt-record needs --scaling (and the zone tracker, on by default)".to_string());
    }
    if args.long_delays && !args.delayed_downscale {
        return Err("--long-delays needs --delayed-downscale".to_string());
    }
    if args.long_delays && args.delay_annotations {
        return Err("--long-delays writes the zones' delays its own way: use it or --delay-annotations".to_string());
    }
    if args.mirror && args.scaling {
        return Err("--mirror replaces --scaling's leader and followers: use one of them".to_string());
    }
    if args.force_follower && args.leader_ready_upscales {
        // Force replicas applies before the leader-ready gate, which the checker's upscale property does not know.
        return Err("--force-follower and --leader-ready-upscales cannot be combined".to_string());
    }
    if args.force_follower && !args.scaling {
        return Err("--force-follower needs --scaling".to_string());
    }
    if args.force_plain && (args.scaling || args.webhook || args.mirror) {
        return Err(
            "--force-plain is for StatefulSets without scaling annotations: not with --scaling, --webhook or --mirror"
                .to_string(),
        );
    }
    if args.leader_ready_upscales && !args.scaling {
        return Err("--leader-ready-upscales needs --scaling".to_string());
    }
    if args.recent_downscale && !(args.scaling || args.webhook) {
        return Err("--recent-downscale needs --scaling or --webhook".to_string());
    }
    let drains = match args.drains.as_deref() {
        None => None,
        Some(mode) => {
            let mode = match mode {
                "zone" => BudgetMode::Zones,
                "partition" => BudgetMode::Partitions,
                other => return Err(format!("--drains {other:?}: zone or partition")),
            };
            let evictor = Evictor::parse(&args.evictor).ok_or_else(|| {
                let names: Vec<&str> = Evictor::ALL.iter().map(|e| e.name()).collect();
                format!("unknown evictor {:?}; one of: {}", args.evictor, names.join(", "))
            })?;
            if args.budget_max_unavailable == 0 {
                return Err("--budget-max-unavailable 0 denies every eviction: use 1 or more".to_string());
            }
            match args.budget_percentage {
                Some(p) if !(1..=100).contains(&p) => {
                    return Err(format!("--budget-percentage {p}: a percentage from 1 to 100"));
                }
                Some(_) if mode == BudgetMode::Partitions => {
                    return Err("--budget-percentage: a percentage can not be used with partition awareness (the \
                                validation webhook refuses it): use it with --drains zone"
                        .to_string());
                }
                Some(_) if args.budget_max_unavailable != 1 || args.budget_edits => {
                    return Err(
                        "--budget-percentage replaces --budget-max-unavailable, and the edits world writes counts: \
                         use it without --budget-max-unavailable and --budget-edits"
                            .to_string(),
                    );
                }
                _ => {}
            }
            Some(Drains {
                mode,
                evictor,
                max_unavailable: args.budget_max_unavailable,
                percentage: args.budget_percentage,
                budget_edits: args.budget_edits,
                intent_wipes: args.intent_wipes,
                chase: args.chase,
                ..Drains::default()
            })
        }
    };
    if drains.is_none()
        && (args.evictor != "real"
            || args.budget_max_unavailable != 1
            || args.budget_edits
            || args.intent_wipes
            || args.chase
            || args.budget_percentage.is_some())
    {
        return Err(
            "--evictor, --budget-max-unavailable, --budget-percentage, --budget-edits, --intent-wipes and --chase need \
             --drains"
                .to_string(),
        );
    }
    // A percentage of five pods a zone: 40 % is two, or one while a pod is missing from the status.
    let base = if args.budget_percentage.is_some() { Scenario { replicas: 5, ..base } } else { base };
    // Without `patch` on pods or StatefulSets no process can see another's decisions: one replica serves the
    // eviction webhook, as the degraded mode requires, and it is the controller's process (as `main` runs them).
    let no_patch_drains = drains.is_some() && deployment == Some(ReferenceDeployment::NoPatch);
    let drains = drains.map(|d| if no_patch_drains { Drains { replicas: 1, ..d } } else { d });
    let ha = match args.ha {
        None if args.election != "real" => return Err("--election needs --ha".to_string()),
        None => None,
        Some(n) if !(2..=3).contains(&n) => return Err(format!("--ha {n}: 2 or 3 replicas")),
        Some(_) if drains.is_some() => {
            return Err("--ha and --drains each run operator replicas of their own: use one of them".to_string());
        }
        Some(replicas) => {
            let election = ElectionVariant::parse(&args.election).ok_or_else(|| {
                let names: Vec<&str> = ElectionVariant::ALL.iter().map(|e| e.name()).collect();
                format!("unknown election {:?}; one of: {}", args.election, names.join(", "))
            })?;
            Some(Ha { replicas, election, ..Ha::default() })
        }
    };
    let health = match args.health_check.as_deref() {
        None if args.query_faults => return Err("--query-faults needs --health-check".to_string()),
        None => None,
        Some(release @ ("good" | "bad")) => {
            Some(HealthGated { bad_release: release == "bad", query_faults: args.query_faults, ..Default::default() })
        }
        Some(other) => return Err(format!("--health-check {other:?}: good or bad")),
    };
    // One release, and the time each later zone waits for its gate's soak (the check's one-minute window).
    let base = match &health {
        Some(_) => {
            let gated = Scenario::health_gated(false);
            let settle_deadline = base.settle_deadline + (gated.settle_deadline - Scenario::default().settle_deadline);
            Scenario { revisions: gated.revisions, settle_deadline, ..base }
        }
        None => base,
    };
    let zones = args.zones.unwrap_or(base.zones);
    let sc = Scenario {
        health,
        ha,
        drains,
        second_group: args.second_group,
        sidecars: args.sidecars,
        leader_ready_upscales: args.leader_ready_upscales,
        force_follower: args.force_follower,
        force_plain: args.force_plain,
        recent_downscale: args.recent_downscale,
        no_downscale: args.no_downscale,
        mirror: args.mirror,
        delayed_downscale: args.delayed_downscale,
        delay_annotations: args.delay_annotations,
        long_delays: args.long_delays,
        evictions: args.evictions,
        slow_admissions: args.slow_admissions,
        certificates: args.certificates.map(|seconds| rollout_sim::scenario::certificates::Certificates {
            validity: std::time::Duration::from_secs(seconds),
            ..Default::default()
        }),
        slow_commits: args.slow_commits,
        lost_answers: args.lost_answers,
        defences,
        scaling,
        observe_lag: args.observe_lag,
        pushes_at_scaling: args.pushes_at_scaling,
        reverts: args.reverts,
        relabels: args.relabels,
        corrupt_record: args.corrupt_record,
        follower_without_min_time: args.follower_without_min_time,
        planner,
        faults: if args.large && args.faults == "all" { FaultMix::NONE } else { faults },
        revisions: args.revisions.unwrap_or(base.revisions),
        deployment,
        zone_tracker: match args.zone_tracker.as_deref() {
            None => None,
            Some("on") => Some(true),
            Some("off") => Some(false),
            Some(other) => return Err(format!("--zone-tracker {other:?}: on or off")),
        },
        min_ready_seconds: args.min_ready_seconds,
        scale_requests: args.scale_requests,
        events: args.events,
        // Zones roll one at a time, so more zones than the default three take longer to converge (seed 7 of
        // `--mirror --delayed-downscale --zones 5`, 25 pods replaced one by one, was still rolling at 900 s).
        settle_deadline: (base.settle_deadline + min_ready_settle_time(args.min_ready_seconds)) * zones.max(base.zones)
            / base.zones.max(1),
        zones,
        ..base
    };
    if !(1..=5).contains(&sc.zones) {
        return Err(format!("--zones {}: from 1 to 5", sc.zones));
    }
    if sc.zones < 2 && sc.drains.is_some() {
        // The reference's rule, which we keep: a budget over fewer than two StatefulSets holds every eviction and
        // rollout deletion of them ("minimum number of StatefulSets not found"), so such a run never converges.
        return Err(
            "--drains puts the group under a zone-aware budget, which needs two StatefulSets or more (over one, \
                    every eviction and rollout deletion is denied: minimum number of StatefulSets not found): use \
                    --zones 2 or more"
                .to_string(),
        );
    }
    if sc.zones < 2 && sc.scaling.as_ref().is_some_and(|s| s.followers) {
        return Err("--scaling scales followers after a leader: it needs --zones 2 or more".to_string());
    }
    if sc.corrupt_record && sc.zone_tracker_config_map().is_none() {
        return Err("--corrupt-record edits the zone tracker's record: not with the zone tracker off".to_string());
    }
    Ok(sc)
}

/// Every pod replacement waits out minReadySeconds once more: the liveness deadline grows with it.
pub(crate) fn min_ready_settle_time(min_ready_seconds: u32) -> Duration {
    Duration::from_secs(60 * u64::from(min_ready_seconds))
}

pub(crate) fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once("..").ok_or("expected A..B")?;
    let a = a.trim().parse().map_err(|_| "bad start of range")?;
    let b = b.trim().parse().map_err(|_| "bad end of range")?;
    if b <= a {
        return Err("empty range".into());
    }
    Ok((a, b))
}
