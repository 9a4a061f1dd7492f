//! The prepare-downscale webhook as an explicit step machine: every read, claim, pod call and write it needs is a
//! named [`Need`], and every decision between them is taken here, on what the shell observed and the `now` it
//! passes with each observation.
//!
//! Owns the order of the flow and its allow-or-deny policy at each step (written next to each branch). Must not do
//! I/O, read a clock or know about deadlines: the shell's one driver loop carries out each need (bounded by the
//! handler's deadline, a timeout being an observed failure) and feeds back what it saw. The webhook, `review` and
//! the simulation all run this machine through that loop.
//!
//! The flow (reference 4.3, with the differences in [`crate::admission::prepare`]):
//! 1. a `/scale` request reads its parent StatefulSet live;
//! 2. prechecks on the StatefulSet;
//! 3. live reads: the group's StatefulSets, the pods, and (zone tracker) the downscale record;
//! 4. the plan ([`prepare::plan`]): min time, markers, other zones' state, the pods to call; a dry run ends here;
//! 5. (zone tracker) the claim with its in-progress marker, then the group read again under the marker;
//! 6. the pod calls; any failure undoes everything and denies;
//! 7. the downscale recorded: dated in the record (tracker) with half the commit margin still left, or in the
//!    StatefulSet's `grafana.com/last-downscale` (JSONPatch for an UPDATE, a conditional patch of the parent for
//!    `/scale`, dated [`SCALE_RETRY_WINDOW`] ahead so that the request's next admission writes nothing).

use crate::admission::prepare::{self, PlanInput, Precheck, PreparePlan, Target};
use crate::admission::{AdmissionRequest, Verdict, foreign_namespace};
use crate::defences::{Defences, Layer};
use crate::downscale::{
    DownscaleInProgress, DownscaleRecord, MarkedClaim, downscale_committed_by, round_up_to_second, time_after as add,
};
use crate::failure::Failure;
use crate::group::{GroupSnapshot, MemberSnapshot};
use crate::keys;
use crate::view::{PodView, StatefulSetView};
use jiff::Timestamp;
use std::time::Duration;

/// How far ahead a `/scale` downscale is dated when recorded in its StatefulSet's `grafana.com/last-downscale`
/// annotation (without the zone tracker).
///
/// A `/scale` request cannot carry the annotation, so the webhook patches the parent, which moves the resourceVersion
/// the request is stored against. The API server then runs the request again: a PATCH (`kubectl scale`) is re-applied
/// to the object just written and admitted again; a PUT carrying the resourceVersion its client read (an HPA's) fails
/// with a conflict and the HPA sends it again at its next sync, 15 s later by default. Either admission finds this
/// date still at least half the commit margin ahead, writes nothing and is allowed, so the request commits: the PATCH
/// on its first try, the PUT on its retry. 30 s: the HPA's 15 s sync plus the 10 s commit margin, with 5 s to spare.
/// As the retry needs only half the margin left, the admissions in between (the refused PUT's, which the API server
/// runs a second time after the conflict, and the retry's own up to its record) may take 10 s together; slower ones
/// (pods taking seconds to prepare) make the retry write the date again and be refused once more, and the HPA's next
/// sync goes through.
///
/// The date is never earlier than the commit (the min time between zone downscales runs from the commit). The price:
/// the other zones wait from this date, up to this window longer than the reference makes them wait (it dates the
/// downscale at the attempt), as much for a downscale that commits at once as for one that never commits (refused
/// later in the admission chain, or an HPA that gave up).
pub const SCALE_RETRY_WINDOW: Duration = Duration::from_secs(30);

/// The webhook's settings the flow decides with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSettings {
    pub namespace: String,
    pub cluster_domain: String,
    /// Whether the zone tracker (the group downscale record) is in use.
    pub zone_tracker: bool,
    /// How long an in-progress marker must hold: everything the request may still do to the pods (the handler's
    /// deadline, then an undo with its own).
    pub marker_lifetime: Duration,
    /// How long after its answer an admitted downscale is taken to have committed.
    pub commit_margin: Duration,
    /// The defences in depth in force (all of them but in the harness's tests of each layer alone).
    pub defences: Defences,
}

/// What the flow needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Read this StatefulSet live (the parent of a `/scale` request).
    StatefulSet { name: String },
    /// List the group's StatefulSets live, by this label selector.
    GroupStatefulSets { selector: String },
    /// List the namespace's pods live.
    Pods,
    /// Read the group downscale record and its in-progress markers.
    Record,
    /// Claim the downscale of `statefulset` in the record at `now`, with an in-progress marker until `until`.
    Claim { group: Box<GroupSnapshot>, statefulset: String, now: Timestamp, until: Timestamp },
    /// Read the group again (its StatefulSets by `selector`, and the pods) now that the marker is in the record.
    GroupAgain { selector: String },
    /// POST to every endpoint of the plan.
    PreparePods { plan: PreparePlan },
    /// Date the claimed downscale `committed_by` in the record and remove its marker (the claim holds until
    /// `until`).
    DateInRecord { statefulset: String, until: Timestamp, committed_by: Timestamp },
    /// Patch the StatefulSet's `grafana.com/last-downscale` annotation to `at`, conditional on `resource_version`.
    PatchLastDownscale { statefulset: String, resource_version: String, at: Timestamp },
    /// Undo: DELETE to the plan's endpoints and, with a claim, give it back (the entry as the claim dated it, or as
    /// `dated_since` says). Then the flow answers.
    Undo(Undo),
    /// The answer to the API server.
    Answer(Verdict),
}

impl Need {
    /// The need's name, as logs and the simulation's reports give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Need::StatefulSet { .. } => "statefulset",
            Need::GroupStatefulSets { .. } => "group-statefulsets",
            Need::Pods => "pods",
            Need::Record => "record",
            Need::Claim { .. } => "claim",
            Need::GroupAgain { .. } => "group-again",
            Need::PreparePods { .. } => "prepare-pods",
            Need::DateInRecord { .. } => "date-in-record",
            Need::PatchLastDownscale { .. } => "patch-last-downscale",
            Need::Undo(_) => "undo",
            Need::Answer(_) => "answer",
        }
    }

    /// The needs whose failure the machine observes.
    pub const FALLIBLE: &[&str] = &[
        "statefulset",
        "group-statefulsets",
        "pods",
        "record",
        "claim",
        "group-again",
        "prepare-pods",
        "date-in-record",
        "patch-last-downscale",
    ];
}

/// What an undo must take back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    pub statefulset: String,
    pub plan: PreparePlan,
    /// The claim: the entry before it, and until when it holds.
    pub claim: Option<(Option<Timestamp>, Timestamp)>,
    /// Dates this request wrote into the entry since the claim.
    pub dated_since: Vec<Timestamp>,
}

/// A StatefulSet read live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatefulSetLookup {
    Found(Box<StatefulSetView>),
    /// It exists but cannot be read as a StatefulSet.
    Invalid(String),
    NotFound,
    /// The read failed (API error or deadline).
    Failed(Failure),
}

/// What the shell saw when it carried out the last need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Nothing yet: the flow starts.
    Start,
    StatefulSet(StatefulSetLookup),
    GroupStatefulSets(Result<Vec<StatefulSetView>, Failure>),
    Pods(Result<Vec<PodView>, Failure>),
    /// The record (`None`: none yet) with its markers, or why it could not be read.
    Record(Result<Option<(DownscaleRecord, Vec<DownscaleInProgress>)>, Failure>),
    Claim(Result<MarkedClaim, Failure>),
    GroupAgain(Result<(Vec<StatefulSetView>, Vec<PodView>), Failure>),
    /// The pod calls' failures, described (empty: every pod prepared).
    PodsPrepared(Vec<String>),
    DatedInRecord(Result<(), Failure>),
    LastDownscalePatched(Result<(), Failure>),
    Undone,
}

impl Observed {
    /// What kind of failure it reports, if any (`pod-call` for a prepare call that failed).
    pub fn failure_kind(&self) -> Option<&'static str> {
        match self {
            Observed::StatefulSet(StatefulSetLookup::Failed(f))
            | Observed::GroupStatefulSets(Err(f))
            | Observed::Pods(Err(f))
            | Observed::Record(Err(f))
            | Observed::Claim(Err(f))
            | Observed::GroupAgain(Err(f))
            | Observed::DatedInRecord(Err(f))
            | Observed::LastDownscalePatched(Err(f)) => Some(f.kind()),
            Observed::PodsPrepared(failed) if !failed.is_empty() => Some("pod-call"),
            _ => None,
        }
    }
}

/// Where the flow is: what it waits to observe.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Start,
    StatefulSet,
    GroupStatefulSets,
    Pods,
    Record,
    Claim,
    GroupAgain,
    PodsPrepared,
    DatedInRecord {
        committed_by: Timestamp,
    },
    LastDownscalePatched,
    Undone(Verdict),
    Answered(Verdict),
    /// Between two observations (never seen from outside a step).
    Stepping,
}

/// One prepare-downscale decision, from the request to its answer.
#[derive(Debug, Clone)]
pub struct PrepareDownscale {
    request: AdmissionRequest,
    settings: FlowSettings,
    phase: Phase,
    old: i32,
    new: i32,
    /// A `/scale` request: its parent was read live.
    via_scale: bool,
    sts: Option<StatefulSetView>,
    group_name: Option<String>,
    members: Vec<StatefulSetView>,
    group: Option<GroupSnapshot>,
    record: Option<DownscaleRecord>,
    markers: Vec<DownscaleInProgress>,
    plan: Option<PreparePlan>,
    /// The claim: the entry before it, and until when it holds.
    claim: Option<(Option<Timestamp>, Timestamp)>,
    /// Until when the claim asked for holds.
    claim_until: Option<Timestamp>,
}

impl PrepareDownscale {
    pub fn new(request: AdmissionRequest, settings: FlowSettings) -> Self {
        PrepareDownscale {
            request,
            settings,
            phase: Phase::Start,
            old: 0,
            new: 0,
            via_scale: false,
            sts: None,
            group_name: None,
            members: Vec::new(),
            group: None,
            record: None,
            markers: Vec::new(),
            plan: None,
            claim: None,
            claim_until: None,
        }
    }

    /// Takes what the shell observed for the last need (at `now`) and says what is needed next. Once it has
    /// answered, it keeps answering the same.
    pub fn step(&mut self, observed: Observed, now: Timestamp) -> Need {
        let phase = std::mem::replace(&mut self.phase, Phase::Stepping);
        match (phase, observed) {
            (Phase::Start, Observed::Start) => self.start(),
            (Phase::StatefulSet, Observed::StatefulSet(lookup)) => match lookup {
                StatefulSetLookup::Found(view) => {
                    self.sts = Some(*view);
                    self.precheck()
                }
                // Unreadable or gone: nothing to prepare (fail open, as the reference).
                StatefulSetLookup::Invalid(err) => self.answer(prepare::lookup_failed(&err)),
                StatefulSetLookup::NotFound => {
                    let name = self.request.name.clone();
                    self.answer(prepare::lookup_failed(&format!("statefulsets.apps \"{name}\" not found")))
                }
                // Unknown (API error or deadline): deny. Allowing would let a `/scale` downscale (HPA, kubectl
                // scale) through with no preparation and no min-time check; the client retries.
                StatefulSetLookup::Failed(err) => {
                    let name = self.request.name.clone();
                    self.deny(&format!("reading statefulset {name} failed: {err}"))
                }
            },
            (Phase::GroupStatefulSets, Observed::GroupStatefulSets(listed)) => match listed {
                Ok(members) => {
                    self.members = members;
                    self.phase = Phase::Pods;
                    Need::Pods
                }
                // Policy: deny (the other zones' state is unknown).
                Err(err) => {
                    self.answer(prepare::deny_list_statefulsets(&self.request, self.old, self.new, err.message()))
                }
            },
            (Phase::Pods, Observed::Pods(listed)) => match listed {
                Ok(pods) => self.assemble(pods, now),
                // Policy: deny (the pods to prepare and the other zones' pods are unknown).
                Err(err) => self.answer(prepare::deny_list_pods(&self.request, self.old, self.new, err.message())),
            },
            (Phase::Record, Observed::Record(read)) => match read {
                Ok(found) => {
                    if let Some((record, markers)) = found {
                        self.record = Some(record);
                        self.markers = markers;
                    }
                    self.plan(now)
                }
                // Policy: deny (the min time cannot be checked).
                Err(err) => self.answer(prepare::deny_load_record(&self.request, self.old, self.new, err.message())),
            },
            (Phase::Claim, Observed::Claim(claimed)) => match claimed {
                Ok(MarkedClaim::Claimed { previous }) => {
                    let until = self.claim_until.unwrap_or(now);
                    self.claim = Some((previous, until));
                    if !self.settings.defences.has(Layer::RereadAfterClaim) {
                        return self.prepare_pods();
                    }
                    self.phase = Phase::GroupAgain;
                    Need::GroupAgain { selector: self.selector() }
                }
                Ok(MarkedClaim::Refused(verdict)) => {
                    self.answer(prepare::deny_min_time(&self.request, self.old, self.new, &verdict))
                }
                Ok(MarkedClaim::Busy(holder)) => {
                    self.answer(prepare::deny_in_progress(&self.request, self.old, self.new, &holder))
                }
                Ok(MarkedClaim::Stepping(step)) => {
                    self.answer(prepare::deny_rollout_step(&self.request, self.old, self.new, &step))
                }
                // Policy: deny (whether another zone was downscaled within the min time is unknown).
                Err(err) => self.answer(prepare::deny_claim_failed(&self.request, self.old, self.new, err.message())),
            },
            // Read the group again now that the marker is in the record: from here on the controller replaces no
            // pod of the group, so if every other StatefulSet is still updated and available it stays so until the
            // marker goes. (Checking only before the claim would leave a window: a rollout step planned between
            // that read and the marker's write would go ahead together with this downscale.)
            (Phase::GroupAgain, Observed::GroupAgain(read)) => {
                let name = self.sts_name();
                let reason = match read {
                    Ok((members, pods)) => {
                        let group =
                            GroupSnapshot::assemble(self.group_name.clone().unwrap_or_default(), members, &pods);
                        group
                            .members
                            .iter()
                            .filter(|m| m.sts.name != name)
                            .find_map(|m| prepare::rollout_in_progress(m, now))
                    }
                    Err(err) => Some(format!("re-reading the group after claiming the downscale failed: {err}")),
                };
                match reason {
                    Some(reason) => {
                        let verdict = self.denial(&reason);
                        let nothing_prepared = PreparePlan { endpoints: Vec::new(), skipped: Vec::new() };
                        self.undo(nothing_prepared, Vec::new(), verdict)
                    }
                    None => self.prepare_pods(),
                }
            }
            (Phase::PodsPrepared, Observed::PodsPrepared(failures)) => {
                if !failures.is_empty() {
                    let verdict = prepare::deny_prepare_failed(&self.request, self.old, self.new, &failures);
                    return self.undo(self.plan.clone().unwrap_or_default(), Vec::new(), verdict);
                }
                self.record_downscale(now)
            }
            (Phase::DatedInRecord { committed_by }, Observed::DatedInRecord(_)) => {
                // Half the margin must be left for the answer, the admission chain after us and the API server's
                // commit. (A failed dating is only logged by the shell: the entry keeps the claim's later date and
                // the marker expires by itself.)
                if add(now, self.settings.commit_margin / 2) < committed_by {
                    return self.answer(self.allowed());
                }
                // Too late: the record may now date the downscale before it would commit. Deny it instead.
                let verdict = self.denial(&format!(
                    "recording the downscale in the zone ConfigMap took longer than {}s; retry",
                    self.settings.commit_margin.as_secs()
                ));
                self.undo(self.plan.clone().unwrap_or_default(), vec![committed_by], verdict)
            }
            (Phase::LastDownscalePatched, Observed::LastDownscalePatched(written)) => {
                let name = self.sts_name();
                let plan = self.plan.clone().unwrap_or_default();
                match written {
                    // Recorded: allow. The write moved the parent's resourceVersion, so the API server runs this
                    // request again (a PATCH re-admitted, a PUT refused and retried by its client); that admission
                    // finds the date ahead and writes nothing (see `SCALE_RETRY_WINDOW`).
                    Ok(()) => self.answer(self.allowed()),
                    // Policy: deny and cancel: a downscale the other zones cannot see must not happen.
                    Err(failure) => {
                        let hint = if failure.is_forbidden() {
                            " (grant the operator `patch` on apps statefulsets)"
                        } else {
                            ""
                        };
                        let verdict = self.denial(&format!(
                            "recording the downscale in statefulset {name}'s {} annotation failed{hint}: {}; retry",
                            keys::LAST_DOWNSCALE,
                            failure.message()
                        ));
                        self.undo(plan, Vec::new(), verdict)
                    }
                }
            }
            (Phase::Undone(verdict), Observed::Undone) => self.answer(verdict),
            (Phase::Answered(verdict), _) => self.answer(verdict),
            // Policy: deny. The shell fed an observation the flow did not ask for: a bug, and a downscale whose
            // checks did not run in order must not go through.
            (phase, observed) => self.deny(&format!(
                "internal error: the prepare-downscale flow expected {phase:?} but observed {}",
                observed_name(&observed)
            )),
        }
    }

    fn start(&mut self) -> Need {
        if let Some(verdict) = foreign_namespace(&self.request, &self.settings.namespace) {
            return self.answer(verdict);
        }
        match prepare::evaluate(&self.request) {
            Target::Decided(verdict) => self.answer(verdict),
            Target::StatefulSet { sts, old, new } => {
                (self.old, self.new, self.sts) = (old, new, Some(*sts));
                self.precheck()
            }
            Target::LookupStatefulSet { name, old, new } => {
                (self.old, self.new, self.via_scale) = (old, new, true);
                self.phase = Phase::StatefulSet;
                Need::StatefulSet { name }
            }
        }
    }

    fn precheck(&mut self) -> Need {
        let Some(sts) = self.sts.as_ref() else { return self.deny("internal error: no StatefulSet to precheck") };
        match prepare::precheck(&self.request, self.old, self.new, sts) {
            Precheck::Decided(verdict) => self.answer(verdict),
            Precheck::Continue { group } => {
                self.group_name = group;
                // Live reads: a decision about safety is never taken on a cache.
                if self.group_name.is_some() {
                    self.phase = Phase::GroupStatefulSets;
                    Need::GroupStatefulSets { selector: self.selector() }
                } else {
                    self.phase = Phase::Pods;
                    Need::Pods
                }
            }
        }
    }

    fn assemble(&mut self, pods: Vec<PodView>, now: Timestamp) -> Need {
        let Some(sts) = self.sts.clone() else { return self.deny("internal error: no StatefulSet") };
        let mut statefulsets = std::mem::take(&mut self.members);
        if !statefulsets.iter().any(|s| s.name == sts.name) {
            statefulsets.push(sts);
        }
        self.group = Some(GroupSnapshot::assemble(self.group_name.clone().unwrap_or_default(), statefulsets, &pods));
        if self.group_name.is_some() && self.settings.zone_tracker {
            self.phase = Phase::Record;
            return Need::Record;
        }
        // No record to read: planned once the pods are listed.
        self.plan(now)
    }

    fn plan(&mut self, now: Timestamp) -> Need {
        let (Some(sts), Some(group)) = (self.sts.as_ref(), self.group.as_ref()) else {
            return self.deny("internal error: no StatefulSet");
        };
        let target =
            group.member(&sts.name).cloned().unwrap_or_else(|| MemberSnapshot { sts: sts.clone(), pods: Vec::new() });
        let input = PlanInput {
            request: &self.request,
            old: self.old,
            new: self.new,
            sts,
            target: &target,
            group: self.group_name.as_ref().map(|_| group),
            record: self.record.as_ref(),
            in_progress: &self.markers,
            cluster_domain: &self.settings.cluster_domain,
            now,
        };
        let plan = match prepare::plan(&input) {
            Ok(plan) => plan,
            Err(verdict) => return self.answer(verdict),
        };
        self.plan = Some(plan);
        if self.request.dry_run {
            return self.answer(self.allowed());
        }
        // Claim the downscale in the record (serialises zone downscales of the group across actors and replicas).
        if self.group_name.is_some() && self.settings.zone_tracker {
            // The marker must outlive everything this request may still do to the pods.
            let until = add(now, self.settings.marker_lifetime);
            let need = Need::Claim { group: Box::new(group.clone()), statefulset: sts.name.clone(), now, until };
            self.claim_until = Some(until);
            self.phase = Phase::Claim;
            return need;
        }
        self.prepare_pods()
    }

    fn prepare_pods(&mut self) -> Need {
        self.phase = Phase::PodsPrepared;
        Need::PreparePods { plan: self.plan.clone().unwrap_or_default() }
    }

    /// Every pod prepared: the downscale is recorded where the other zones will see it.
    fn record_downscale(&mut self, now: Timestamp) -> Need {
        if let Some((_, until)) = self.claim {
            // The downscale stays recorded, dated when it will have committed (the API server commits right after
            // our answer; the min time between zone downscales runs from the commit), and the in-progress marker goes.
            let committed_by = downscale_committed_by(now, self.settings.commit_margin);
            self.phase = Phase::DatedInRecord { committed_by };
            return Need::DateInRecord { statefulset: self.sts_name(), until, committed_by };
        }
        if self.group_name.is_none() {
            return self.answer(self.allowed());
        }
        self.record_in_annotation(now)
    }

    /// Without the zone tracker: the admitted downscale is recorded in its StatefulSet's
    /// `grafana.com/last-downscale` annotation, dated when it will have committed. A StatefulSet UPDATE gets it
    /// through this mutating webhook's JSONPatch (no write of ours: nothing for the request to conflict with). A
    /// `/scale` request cannot carry it, so the parent is patched, conditional on the resourceVersion read, and dated
    /// [`SCALE_RETRY_WINDOW`] ahead; a date already at least half the commit margin ahead is left as is (the same
    /// downscale admitted again after the conflict its own write caused, or retried by its client, or any downscale of
    /// the StatefulSet recorded moments ago: this one commits before that date all the same).
    fn record_in_annotation(&mut self, now: Timestamp) -> Need {
        let margin = self.settings.commit_margin;
        if !self.via_scale {
            let at = round_up_to_second(add(now, margin));
            let patch = prepare::last_downscale_patch(&self.request.object, at);
            return self.answer(self.allowed().with_json_patch(patch));
        }
        let Some(sts) = self.sts.as_ref() else { return self.deny("internal error: no StatefulSet") };
        // Dated far enough ahead by an earlier attempt of this downscale: its commit falls before that date, with half
        // the margin left for the answer, the admission chain after us and the commit (the rule of `DatedInRecord`).
        if let Some(Ok(at)) = &sts.downscale.last_downscale
            && *at >= add(now, margin / 2)
        {
            return self.answer(self.allowed());
        }
        let need = Need::PatchLastDownscale {
            statefulset: sts.name.clone(),
            resource_version: sts.resource_version.clone(),
            at: round_up_to_second(add(now, SCALE_RETRY_WINDOW)),
        };
        self.phase = Phase::LastDownscalePatched;
        need
    }

    fn undo(&mut self, plan: PreparePlan, dated_since: Vec<Timestamp>, verdict: Verdict) -> Need {
        self.phase = Phase::Undone(verdict);
        Need::Undo(Undo { statefulset: self.sts_name(), plan, claim: self.claim, dated_since })
    }

    fn answer(&mut self, verdict: Verdict) -> Need {
        self.phase = Phase::Answered(verdict.clone());
        Need::Answer(verdict)
    }

    fn denial(&self, reason: &str) -> Verdict {
        prepare::deny(&self.request, self.old, self.new, reason)
    }

    fn deny(&mut self, reason: &str) -> Need {
        let verdict = self.denial(reason);
        self.answer(verdict)
    }

    fn allowed(&self) -> Verdict {
        prepare::allowed(&self.request, self.old, self.new, self.plan.as_ref().unwrap_or(&PreparePlan::default()))
    }

    fn selector(&self) -> String {
        format!("{}={}", keys::ROLLOUT_GROUP, self.group_name.as_deref().unwrap_or_default())
    }

    fn sts_name(&self) -> String {
        self.sts.as_ref().map(|s| s.name.clone()).unwrap_or_default()
    }
}

fn observed_name(observed: &Observed) -> &'static str {
    match observed {
        Observed::Start => "the start",
        Observed::StatefulSet(_) => "a StatefulSet read",
        Observed::GroupStatefulSets(_) => "the group's StatefulSets",
        Observed::Pods(_) => "the pods",
        Observed::Record(_) => "the downscale record",
        Observed::Claim(_) => "a claim",
        Observed::GroupAgain(_) => "the group read again",
        Observed::PodsPrepared(_) => "the pod calls",
        Observed::DatedInRecord(_) => "the downscale dated",
        Observed::LastDownscalePatched(_) => "the annotation written",
        Observed::Undone => "the undo",
    }
}
