//! The mirror step of a pass as an explicit step machine: for each StatefulSet of a group whose replicas follow a
//! reference resource, every read, pod call and write-back it needs is a named [`MirrorNeed`], and every decision
//! between them (what to scale, to what, what to cancel or prepare, what to write back, when to stop) is taken here,
//! on what the shell observed.
//!
//! Owns the order of the mirror step and its failure policies (written next to each branch). Must not do I/O or read
//! a clock: the shell's driver loop carries out each need and feeds back what it saw; the model checker drives the
//! same machine against its own pods and reference resource.
//!
//! The step, over the group's StatefulSets in name order (reference section 3.3, with the differences listed in
//! [`crate::scaling`]):
//! 1. read the reference's `scale` subresource; unreadable: report it, go on with the next StatefulSet;
//! 2. [`plan_mirror`]: steady, scale, wait, or delayed downscale;
//! 3. with delayed downscale configured, cancel on the replicas that stay (DELETE), and for a downscale ask the ones
//!    to remove to prepare (POST); only the tail prepared for at least the delay goes ([`delayed_downscale_target`]);
//! 4. the first replica change due ends the step (one StatefulSet per pass); otherwise write the current replicas
//!    back into the reference's `status.replicas` when asked to, and go on.
//!
//! `R` is the shell's handle on a reference resource (the API resource it was found at); the machine only hands it
//! back.

use crate::failure::Failure;
use crate::group::GroupSnapshot;
use crate::pass::{MirrorFindings, MirrorScale};
use crate::scaling::{
    DelayedDownscaleError, DelayedDownscaleSettings, MirrorSettings, MirrorStep, ReferenceScale, ScalingError,
    delayed_downscale_target, downscale_held, plan_mirror, pod_endpoints, prepare_response_timestamp, write_back_value,
};
use jiff::Timestamp;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

/// Where pods live, for their delayed-downscale endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MirrorFlowSettings {
    pub namespace: String,
    pub cluster_domain: String,
}

/// Replica ordinals with the URL to call each at.
pub type Endpoints = Vec<(u32, String)>;

/// What the mirror step needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorNeed<R> {
    /// Read the `scale` subresource of `statefulset`'s reference resource (any version of its API group).
    Reference { statefulset: String, mirror: MirrorSettings },
    /// DELETE to each endpoint: cancel delayed downscale on replicas that stay. Failures only get logged (a 409 means
    /// the pod's state is locked, which is fine); `Err` says why the endpoints could not be built (log it).
    Cancel { statefulset: String, endpoints: Result<Endpoints, ScalingError> },
    /// POST to each endpoint: ask the replicas to be removed to prepare; answer with each one's answer.
    Prepare { statefulset: String, endpoints: Endpoints },
    /// Write `replicas` into the reference's `status.replicas`. Failures only get logged.
    WriteBack { statefulset: String, reference: R, name: String, replicas: u32 },
    /// The step is over.
    Done(MirrorResult<R>),
}

impl<R> MirrorNeed<R> {
    /// The need's name, as logs and the simulation's reports give it.
    pub fn kind(&self) -> &'static str {
        match self {
            MirrorNeed::Reference { .. } => "reference",
            MirrorNeed::Cancel { .. } => "cancel",
            MirrorNeed::Prepare { .. } => "prepare",
            MirrorNeed::WriteBack { .. } => "write-back",
            MirrorNeed::Done(_) => "done",
        }
    }

    /// The needs whose failure the machine observes.
    pub const FALLIBLE: &[&str] = &["reference", "prepare"];
}

/// What the mirror step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorResult<R> {
    /// Applied to the pass with [`crate::Pass::with_mirror`].
    pub findings: MirrorFindings,
    /// Once the replica change in `findings` has been applied, write its new replicas back into this reference
    /// (its handle and name).
    pub write_back: Option<(R, String)>,
}

/// A pod's answer to a prepare call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PodAnswer {
    /// An HTTP response.
    Response { status: u16, body: Vec<u8> },
    /// No response (connection, timeout), described.
    Failed(String),
    /// Not sent or abandoned because another call of the batch failed first.
    Abandoned,
}

/// What the shell saw when it carried out the last need.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MirrorObserved<R> {
    /// Nothing yet: the step starts.
    Start,
    /// The reference's handle and `scale`, or why it could not be read (in the reference's wording).
    Reference(Result<(R, ReferenceScale), Failure>),
    /// The cancel calls were made (their failures logged).
    Cancelled,
    /// Each prepared replica's answer.
    Prepared(Vec<(u32, PodAnswer)>),
    /// The write-back was attempted (a failure logged).
    WrittenBack,
}

impl<R> MirrorObserved<R> {
    /// What kind of failure it reports, if any (`pod-call` for a prepare call without a 2xx answer).
    pub fn failure_kind(&self) -> Option<&'static str> {
        match self {
            MirrorObserved::Reference(Err(f)) => Some(f.kind()),
            MirrorObserved::Prepared(answers)
                if answers.iter().any(|(_, a)| !matches!(a, PodAnswer::Response { status: 200..=299, .. })) =>
            {
                Some("pod-call")
            }
            _ => None,
        }
    }
}

/// What the machine waits to observe.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Awaiting<R> {
    Start,
    Reference {
        member: usize,
    },
    /// A cancel or write-back, whose outcome changes nothing.
    Ack,
    Prepared(DelayedDownscale<R>),
    Done,
}

/// A delayed downscale whose prepare calls are out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DelayedDownscale<R> {
    member: usize,
    reference: R,
    scale: ReferenceScale,
    from: u32,
    desired: u32,
    delay: std::time::Duration,
    /// Where each replica was called (for the error's wording).
    endpoints: Endpoints,
}

/// What comes once the queued acknowledgements are in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Then<R> {
    NextMember,
    Prepare(DelayedDownscale<R>),
    Finish,
}

/// One group's mirror step, from the first reference read to its findings.
#[derive(Debug, Clone)]
pub struct MirrorFlow<R> {
    group: GroupSnapshot,
    settings: MirrorFlowSettings,
    /// The next member to look at.
    next_member: usize,
    awaiting: Awaiting<R>,
    queued: VecDeque<MirrorNeed<R>>,
    then: Then<R>,
    result: MirrorResult<R>,
}

impl<R: Clone> MirrorFlow<R> {
    pub fn new(group: GroupSnapshot, settings: MirrorFlowSettings) -> Self {
        MirrorFlow {
            group,
            settings,
            next_member: 0,
            awaiting: Awaiting::Start,
            queued: VecDeque::new(),
            then: Then::NextMember,
            result: MirrorResult { findings: MirrorFindings::default(), write_back: None },
        }
    }

    /// Takes what the shell observed for the last need (at `now`) and says what is needed next. Once done, it keeps
    /// answering the same.
    pub fn step(&mut self, observed: MirrorObserved<R>, now: Timestamp) -> MirrorNeed<R> {
        let awaiting = std::mem::replace(&mut self.awaiting, Awaiting::Done);
        match (awaiting, observed) {
            (Awaiting::Start, MirrorObserved::Start)
            | (Awaiting::Ack, MirrorObserved::Cancelled)
            | (Awaiting::Ack, MirrorObserved::WrittenBack) => self.advance(),
            (Awaiting::Reference { member }, MirrorObserved::Reference(read)) => self.decide(member, read, now),
            (Awaiting::Prepared(downscale), MirrorObserved::Prepared(answers)) => {
                self.prepared(downscale, answers, now)
            }
            (Awaiting::Done, _) => MirrorNeed::Done(self.result.clone()),
            // A driver bug: stop here and change nothing (no replica change is decided on an observation the
            // machine did not ask for).
            (awaiting, observed) => {
                let statefulset = match &awaiting {
                    Awaiting::Reference { member } => self.name(*member),
                    Awaiting::Prepared(d) => self.name(d.member),
                    _ => String::new(),
                };
                self.result.findings.scale = None;
                self.result.write_back = None;
                self.result.findings.errors.push(ScalingError::new(
                    &statefulset,
                    format!("mirror step stopped: observed {} while waiting for {}", kind(&observed), what(&awaiting)),
                ));
                self.finish()
            }
        }
    }

    fn name(&self, member: usize) -> String {
        self.group.members[member].sts.name.clone()
    }

    fn finish(&mut self) -> MirrorNeed<R> {
        self.awaiting = Awaiting::Done;
        self.queued.clear();
        MirrorNeed::Done(self.result.clone())
    }

    /// The next queued acknowledgement, or what comes after them.
    fn advance(&mut self) -> MirrorNeed<R> {
        if let Some(need) = self.queued.pop_front() {
            self.awaiting = Awaiting::Ack;
            return need;
        }
        match std::mem::replace(&mut self.then, Then::NextMember) {
            Then::Finish => self.finish(),
            Then::Prepare(downscale) => {
                let need = MirrorNeed::Prepare {
                    statefulset: self.name(downscale.member),
                    endpoints: downscale.endpoints.clone(),
                };
                self.awaiting = Awaiting::Prepared(downscale);
                need
            }
            Then::NextMember => {
                let next = (self.next_member..self.group.members.len())
                    .find(|&i| matches!(self.group.members[i].sts.scaling.mirror, Some(Ok(_))));
                let Some(member) = next else { return self.finish() };
                self.next_member = member + 1;
                self.awaiting = Awaiting::Reference { member };
                let Some(Ok(mirror)) = self.group.members[member].sts.scaling.mirror.clone() else {
                    unreachable!("found above")
                };
                MirrorNeed::Reference { statefulset: self.name(member), mirror }
            }
        }
    }

    fn mirror(&self, member: usize) -> MirrorSettings {
        match &self.group.members[member].sts.scaling.mirror {
            Some(Ok(mirror)) => mirror.clone(),
            _ => unreachable!("only mirror members are visited"),
        }
    }

    fn delayed(&self, member: usize) -> Option<DelayedDownscaleSettings> {
        match &self.group.members[member].sts.scaling.delayed_downscale {
            Some(Ok(d)) => Some(d.clone()),
            _ => None,
        }
    }

    fn queue_write_back(&mut self, member: usize, reference: &R, value: Option<u32>) {
        if let Some(replicas) = value {
            let mirror = self.mirror(member);
            self.queued.push_back(MirrorNeed::WriteBack {
                statefulset: self.name(member),
                reference: reference.clone(),
                name: mirror.name,
                replicas,
            });
        }
    }

    fn queue_cancel(&mut self, member: usize, ordinals: Range<u32>) {
        let Some(delayed) = self.delayed(member) else { return };
        if ordinals.is_empty() {
            return;
        }
        let sts = &self.group.members[member].sts;
        let endpoints =
            pod_endpoints(sts, &delayed.url, ordinals, &self.settings.namespace, &self.settings.cluster_domain);
        self.queued.push_back(MirrorNeed::Cancel { statefulset: sts.name.clone(), endpoints });
    }

    fn scale(&mut self, member: usize, reference: R, from: u32, to: u32, reason: String) {
        let sts = &self.group.members[member].sts;
        let mirror = self.mirror(member);
        self.result.findings.scale = Some(MirrorScale {
            statefulset: sts.name.clone(),
            from,
            to,
            reason,
            resource_version: sts.resource_version.clone(),
        });
        self.result.write_back = mirror.write_back.then_some((reference, mirror.name));
        self.then = Then::Finish;
    }

    /// The reference was read (or not): the mirror decision for this StatefulSet.
    fn decide(&mut self, member: usize, read: Result<(R, ReferenceScale), Failure>, now: Timestamp) -> MirrorNeed<R> {
        let name = self.name(member);
        // Policy: an unreadable reference leaves this StatefulSet as it is (reported) and the others go on.
        let (reference, scale) = match read {
            Ok(found) => found,
            Err(error) => {
                self.result.findings.errors.push(ScalingError::new(&name, error.message()));
                return self.advance();
            }
        };
        let sts = self.group.members[member].sts.clone();
        let mirror = self.mirror(member);
        let held = downscale_held(&self.group, &name, now);
        let step = match plan_mirror(&sts, &sts.scaling, &scale, held.as_deref()) {
            Ok(step) => step,
            // Policy: an unusable setting or reference value keeps the current replicas (reported, written back).
            Err(error) => {
                self.result.findings.errors.push(error);
                self.queue_write_back(member, &reference, write_back_value(&mirror, &scale, sts.replicas));
                return self.advance();
            }
        };
        match step {
            MirrorStep::Steady { cancel, write_back, .. } => {
                self.queue_write_back(member, &reference, write_back);
                self.queue_cancel(member, cancel);
            }
            MirrorStep::Wait { reason, write_back } => {
                self.queue_write_back(member, &reference, write_back);
                self.result.findings.waits.push(format!("{name}: {reason}"));
            }
            MirrorStep::Scale { from, to, cancel, reason } => {
                self.queue_cancel(member, cancel);
                self.scale(member, reference, from, to, reason);
            }
            MirrorStep::DelayedDownscale { from, desired, cancel, prepare, delay } => {
                let Some(settings) = self.delayed(member) else { return self.advance() };
                self.queue_cancel(member, cancel);
                let built = pod_endpoints(
                    &sts,
                    &settings.url,
                    prepare,
                    &self.settings.namespace,
                    &self.settings.cluster_domain,
                );
                match built {
                    Ok(endpoints) => {
                        let downscale = DelayedDownscale { member, reference, scale, from, desired, delay, endpoints };
                        self.then = Then::Prepare(downscale);
                    }
                    // Policy: pods that cannot be called cannot be prepared: keep the current replicas.
                    Err(error) => {
                        let error = DelayedDownscaleError::Prepare(error.message);
                        self.result.findings.errors.push(ScalingError::new(&name, error.to_string()));
                        self.queue_write_back(member, &reference, write_back_value(&mirror, &scale, from));
                    }
                }
            }
        }
        self.advance()
    }

    /// The prepare calls answered: how far the downscale may go now.
    fn prepared(&mut self, d: DelayedDownscale<R>, answers: Vec<(u32, PodAnswer)>, now: Timestamp) -> MirrorNeed<R> {
        let name = self.name(d.member);
        let mirror = self.mirror(d.member);
        let mut prepared = BTreeMap::new();
        let mut first_error = None;
        let url = |ordinal: u32| d.endpoints.iter().find(|(o, _)| *o == ordinal).map_or("", |(_, url)| url.as_str());
        for (ordinal, answer) in answers {
            let outcome = match answer {
                PodAnswer::Response { status, body } => {
                    prepare_response_timestamp(status, &body).map_err(|e| e.to_string())
                }
                PodAnswer::Failed(error) => Err(error),
                // Abandoned because another call failed: that failure is the one to report.
                PodAnswer::Abandoned => continue,
            };
            match outcome {
                Ok(at) => {
                    prepared.insert(ordinal, at);
                }
                Err(error) => {
                    first_error.get_or_insert(format!("{}: {error}", url(ordinal)));
                }
            }
        }
        // Policy: any failed preparation keeps the current replicas (a pod that did not confirm is never removed).
        if let Some(error) = first_error {
            let error = DelayedDownscaleError::Prepare(error);
            self.result.findings.errors.push(ScalingError::new(&name, error.to_string()));
            self.queue_write_back(d.member, &d.reference, write_back_value(&mirror, &d.scale, d.from));
            return self.advance();
        }
        match delayed_downscale_target(d.from, d.desired, d.delay, &prepared, now) {
            Ok(allowed) => {
                let reason = format!(
                    "scaling down statefulset to computed desired replicas, based on replicas in the reference \
                     resource {}/{} ({}) and elapsed downscale delays",
                    mirror.kind, mirror.name, d.desired
                );
                self.scale(d.member, d.reference, d.from, allowed, reason);
            }
            Err(error) => {
                self.result
                    .findings
                    .waits
                    .push(format!("{name}: downscale from {} to {} waits: {error}", d.from, d.desired));
                self.queue_write_back(d.member, &d.reference, write_back_value(&mirror, &d.scale, d.from));
            }
        }
        self.advance()
    }
}

fn kind<R>(observed: &MirrorObserved<R>) -> &'static str {
    match observed {
        MirrorObserved::Start => "the start",
        MirrorObserved::Reference(_) => "a reference read",
        MirrorObserved::Cancelled => "cancel calls",
        MirrorObserved::Prepared(_) => "prepare calls",
        MirrorObserved::WrittenBack => "a write-back",
    }
}

fn what<R>(awaiting: &Awaiting<R>) -> &'static str {
    match awaiting {
        Awaiting::Start => "the start",
        Awaiting::Reference { .. } => "a reference read",
        Awaiting::Ack => "a cancel or write-back",
        Awaiting::Prepared(_) => "prepare calls",
        Awaiting::Done => "nothing",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::keys;
    use crate::view::StatefulSetView;

    const URL: &str = "http://pod/prepare-delayed-downscale";

    fn mirrored(name: &str, replicas: u32, delay: Option<&str>) -> StatefulSetView {
        let mut sts = fixture::statefulset("g", name, replicas, "r1");
        sts = fixture::annotate(sts, keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "rt");
        sts = fixture::annotate(sts, keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "ReplicaTemplate");
        sts = fixture::annotate(sts, keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "example.com/v1");
        sts = fixture::annotate(sts, keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK, "true");
        if let Some(delay) = delay {
            sts = fixture::annotate(sts, keys::ROLLOUT_DELAYED_DOWNSCALE, delay);
            sts = fixture::annotate(sts, keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, URL);
        }
        sts
    }

    fn flow(stss: Vec<StatefulSetView>) -> MirrorFlow<&'static str> {
        let pods: Vec<_> = stss.iter().flat_map(|s| (0..s.replicas).map(|i| fixture::pod(s, i, "r1"))).collect();
        let group = GroupSnapshot::assemble("g", stss, &pods);
        MirrorFlow::new(group, MirrorFlowSettings { namespace: "ns".into(), cluster_domain: "cluster.local".into() })
    }

    fn now() -> Timestamp {
        Timestamp::from_second(10_000).unwrap()
    }

    fn reference(spec: i64, status: i64) -> MirrorObserved<&'static str> {
        MirrorObserved::Reference(Ok((
            "rt-handle",
            ReferenceScale { spec_replicas: Some(spec), status_replicas: Some(status) },
        )))
    }

    fn ordinals(endpoints: &Endpoints) -> Vec<u32> {
        endpoints.iter().map(|(o, _)| *o).collect()
    }

    fn prepared_seconds_ago(ordinal: u32, seconds: i64) -> (u32, PodAnswer) {
        let body = format!("{{\"timestamp\": {}}}", now().as_second() - seconds).into_bytes();
        (ordinal, PodAnswer::Response { status: 200, body })
    }

    fn done(need: MirrorNeed<&'static str>) -> MirrorResult<&'static str> {
        match need {
            MirrorNeed::Done(result) => result,
            other => panic!("expected the end of the step, got {other:?}"),
        }
    }

    #[test]
    fn a_delayed_downscale_cancels_the_staying_replicas_prepares_the_rest_and_removes_only_the_ready_tail() {
        let mut flow = flow(vec![mirrored("zone-a", 5, Some("1h"))]);
        assert!(
            matches!(flow.step(MirrorObserved::Start, now()), MirrorNeed::Reference { statefulset, .. } if statefulset == "zone-a")
        );
        let MirrorNeed::Cancel { endpoints: Ok(cancel), .. } = flow.step(reference(2, 5), now()) else { panic!() };
        assert_eq!(ordinals(&cancel), vec![0, 1]);
        assert_eq!(cancel[0].1, "http://zone-a-0.zone-a.ns.svc.cluster.local/prepare-delayed-downscale");
        let MirrorNeed::Prepare { endpoints, .. } = flow.step(MirrorObserved::Cancelled, now()) else { panic!() };
        assert_eq!(ordinals(&endpoints), vec![2, 3, 4]);
        // Replica 3 has prepared for less than the delay: only 4 may go, although 2 is ready too.
        let answers = vec![prepared_seconds_ago(2, 7200), prepared_seconds_ago(3, 60), prepared_seconds_ago(4, 3600)];
        let result = done(flow.step(MirrorObserved::Prepared(answers), now()));
        let scale = result.findings.scale.expect("a partial downscale");
        assert_eq!((scale.from, scale.to), (5, 4));
        assert_eq!(result.write_back, Some(("rt-handle", "rt".to_string())));
        assert!(result.findings.errors.is_empty() && result.findings.waits.is_empty());
    }

    #[test]
    fn a_failed_preparation_keeps_the_replicas_names_the_pod_and_writes_the_current_count_back() {
        let mut flow = flow(vec![mirrored("zone-a", 3, Some("1h"))]);
        flow.step(MirrorObserved::Start, now());
        assert!(matches!(flow.step(reference(1, 1), now()), MirrorNeed::Cancel { .. }));
        assert!(matches!(flow.step(MirrorObserved::Cancelled, now()), MirrorNeed::Prepare { .. }));
        let answers = vec![(1, PodAnswer::Response { status: 500, body: b"boom".to_vec() }), (2, PodAnswer::Abandoned)];
        let need = flow.step(MirrorObserved::Prepared(answers), now());
        assert_eq!(
            need,
            MirrorNeed::WriteBack {
                statefulset: "zone-a".into(),
                reference: "rt-handle",
                name: "rt".into(),
                replicas: 3
            }
        );
        let result = done(flow.step(MirrorObserved::WrittenBack, now()));
        assert_eq!(result.findings.scale, None);
        let error = &result.findings.errors[0];
        assert!(
            error.message.contains("zone-a-1.zone-a.ns.svc") && error.message.contains("HTTP status 500"),
            "{error}"
        );
    }

    #[test]
    fn a_delay_not_reached_waits_and_writes_back() {
        let mut flow = flow(vec![mirrored("zone-a", 2, Some("1h"))]);
        flow.step(MirrorObserved::Start, now());
        flow.step(reference(1, 1), now());
        flow.step(MirrorObserved::Cancelled, now());
        let need = flow.step(MirrorObserved::Prepared(vec![prepared_seconds_ago(1, 10)]), now());
        assert!(matches!(need, MirrorNeed::WriteBack { replicas: 2, .. }), "{need:?}");
        let result = done(flow.step(MirrorObserved::WrittenBack, now()));
        assert_eq!(result.findings.scale, None);
        assert!(result.findings.waits[0].starts_with("zone-a: downscale from 2 to 1 waits"), "{:?}", result.findings);
    }

    #[test]
    fn the_first_replica_change_ends_the_step_and_an_unreadable_reference_lets_the_next_go_on() {
        let mut flow =
            flow(vec![mirrored("zone-a", 2, None), mirrored("zone-b", 2, None), mirrored("zone-c", 2, None)]);
        flow.step(MirrorObserved::Start, now());
        let need = flow.step(MirrorObserved::Reference(Err(Failure::NotFound("no such resource".into()))), now());
        assert!(matches!(need, MirrorNeed::Reference { ref statefulset, .. } if statefulset == "zone-b"), "{need:?}");
        let result = done(flow.step(reference(3, 2), now()));
        let scale = result.findings.scale.clone().expect("an upscale");
        assert_eq!((scale.statefulset.as_str(), scale.from, scale.to), ("zone-b", 2, 3));
        assert_eq!(result.findings.errors, vec![ScalingError::new("zone-a", "no such resource")]);
        // zone-c is left for the next pass, and the machine stays done.
        assert_eq!(done(flow.step(MirrorObserved::WrittenBack, now())), result);
    }

    #[test]
    fn a_steady_mirror_writes_back_then_cancels_on_every_replica() {
        let mut flow = flow(vec![mirrored("zone-a", 2, Some("1h"))]);
        flow.step(MirrorObserved::Start, now());
        assert!(matches!(flow.step(reference(2, 0), now()), MirrorNeed::WriteBack { replicas: 2, .. }));
        let MirrorNeed::Cancel { endpoints: Ok(endpoints), .. } = flow.step(MirrorObserved::WrittenBack, now()) else {
            panic!()
        };
        assert_eq!(ordinals(&endpoints), vec![0, 1]);
        assert_eq!(done(flow.step(MirrorObserved::Cancelled, now())).findings, MirrorFindings::default());
    }

    #[test]
    fn a_downscale_during_another_zones_rollout_waits() {
        let a = mirrored("zone-a", 3, None);
        let b = fixture::statefulset("g", "zone-b", 1, "r1");
        let pods = vec![
            fixture::pod(&a, 0, "r1"),
            fixture::pod(&a, 1, "r1"),
            fixture::pod(&a, 2, "r1"),
            fixture::not_ready(fixture::pod(&b, 0, "r1")),
        ];
        let group = GroupSnapshot::assemble("g", vec![a, b], &pods);
        let mut flow: MirrorFlow<&str> =
            MirrorFlow::new(group, MirrorFlowSettings { namespace: "ns".into(), cluster_domain: "c".into() });
        flow.step(MirrorObserved::Start, now());
        let result = done(flow.step(reference(1, 3), now()));
        assert_eq!(result.findings.scale, None);
        assert!(result.findings.waits[0].contains("downscale from 3 to 1 waits"), "{:?}", result.findings);
    }

    #[test]
    fn an_observation_the_machine_did_not_ask_for_stops_it_without_a_replica_change() {
        let mut flow = flow(vec![mirrored("zone-a", 3, None)]);
        flow.step(MirrorObserved::Start, now());
        let result = done(flow.step(MirrorObserved::Prepared(vec![prepared_seconds_ago(2, 7200)]), now()));
        assert_eq!(result.findings.scale, None);
        assert!(result.findings.errors[0].message.contains("while waiting for a reference read"), "{:?}", result);
    }
}
