//! The election loop over the in-memory Lease store, in paused (virtual) time: terms begin and end as the core
//! decides, the gate closes by the clock while the API is unreachable, release hands over, and the supervisor runs
//! one controller per term.

use super::*;
use crate::cluster::memory::LeaseStore;
use k8s_openapi::api::coordination::v1::Lease;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

const LEASE: &str = "rollout-operator-leader";

fn holder(store: &LeaseStore) -> Option<String> {
    store.lease(LEASE).and_then(|l| l.spec).and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
}

/// Starts a replica's election; the sender releases (and ends) it.
fn replica(
    store: &LeaseStore,
    identity: &str,
) -> (LeaderGate, LeaderMetrics, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let metrics = LeaderMetrics::default();
    let clock = MonotonicClock::start("2026-03-01T12:00:00Z".parse().unwrap());
    let (election, gate) = Election::new(store.clone(), LEASE, ElectionConfig::new(identity), clock, metrics.clone());
    let (release, released) = oneshot::channel::<()>();
    let task = tokio::spawn(election.run(async move {
        let _ = released.await;
    }));
    (gate, metrics, release, task)
}

#[tokio::test(start_paused = true)]
async fn a_lone_replica_leads_and_its_gate_closes_by_the_clock_when_the_api_is_unreachable() {
    let store = LeaseStore::default();
    let (mut gate, metrics, _release, _task) = replica(&store, "pod-a");
    assert_eq!(gate.next_term().await, Some(1));
    assert!(gate.may_write());
    assert!(metrics.is_leader());
    assert_eq!(holder(&store), Some("pod-a".to_string()));

    // Cut off: renewals fail; the term ends by the clock, without any answer from the API.
    store.set_unreachable(true);
    gate.term_ended(1).await;
    assert!(!gate.may_write(), "no write once the renew deadline has passed");
    assert_eq!(gate.term(), None);
    // The Lease still names this replica (nothing could be written): others wait for it to expire.
    assert_eq!(holder(&store), Some("pod-a".to_string()));

    // Back in touch: the replica finds its own Lease and leads again, in a new term (a new controller).
    store.set_unreachable(false);
    assert_eq!(gate.next_term().await, Some(2));
    assert_eq!((metrics.transitions("acquired"), metrics.transitions("lost")), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn a_second_replica_follows_and_takes_over_at_once_when_the_leader_releases() {
    let store = LeaseStore::default();
    let (mut a, a_metrics, release_a, task_a) = replica(&store, "pod-a");
    assert_eq!(a.next_term().await, Some(1));
    let (mut b, b_metrics, _release_b, _task_b) = replica(&store, "pod-b");
    // B reads A's lease and follows for several retry periods.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(a.may_write());
    assert!(!b.may_write());
    assert!(!b_metrics.is_leader());

    // A shuts down: the window ends first, then the holder is cleared, and B acquires without waiting for expiry.
    release_a.send(()).expect("running");
    task_a.await.expect("no panic");
    assert!(!a.may_write());
    assert_eq!(a_metrics.transitions("released"), 1);
    assert!(!a_metrics.is_leader());
    assert_eq!(b.next_term().await, Some(1));
    assert_eq!(holder(&store), Some("pod-b".to_string()));
    let spec = store.lease(LEASE).and_then(|l| l.spec).expect("spec");
    assert_eq!(spec.lease_transitions, Some(1), "A's creation was none, B's takeover one");
    assert_eq!(spec.lease_duration_seconds, Some(15));
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_stops_at_once() {
    let store = LeaseStore::default();
    let (mut gate, metrics, _release, _task) = replica(&store, "pod-a");
    assert_eq!(gate.next_term().await, Some(1));
    // Someone else writes the Lease (an operator's kubectl, a replica with a broken clock): A's next renewal
    // conflicts, it reads the Lease, sees the other holder and steps down.
    let mut lease: Lease = store.lease(LEASE).expect("lease");
    lease.spec.as_mut().expect("spec").holder_identity = Some("pod-x".into());
    store.put(&lease);
    gate.term_ended(1).await;
    assert!(!gate.may_write());
    assert_eq!(metrics.transitions("lost"), 1);
    assert_eq!(holder(&store), Some("pod-x".to_string()), "a follower does not overwrite a valid holder");
}

#[tokio::test(start_paused = true)]
async fn the_supervisor_runs_a_fresh_controller_per_term_and_stops_it_when_the_term_ends() {
    let store = LeaseStore::default();
    let (gate, _metrics, _release, _task) = replica(&store, "pod-a");
    let (stop, stopped) = watch::channel(false);
    // What each term's controller saw: the gate when it started and when its stop signal came.
    let terms: Arc<Mutex<Vec<(bool, bool)>>> = Arc::default();
    let seen = terms.clone();
    let asked = gate.clone();
    let cut = store.clone();
    let supervisor = tokio::spawn(run_terms(gate.clone(), stopped, move |end: BoxFuture<'static, ()>| {
        let seen = seen.clone();
        let asked = asked.clone();
        let cut = cut.clone();
        async move {
            let at_start = asked.may_write();
            let first = seen.lock().unwrap().is_empty();
            if first {
                // The first term loses the API: the controller must be told to stop.
                cut.set_unreachable(true);
            }
            end.await;
            seen.lock().unwrap().push((at_start, asked.may_write()));
            if first {
                cut.set_unreachable(false);
            }
        }
    }));
    let mut watcher = gate.clone();
    // The second term begins once the API is back.
    while terms.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(watcher.next_term().await, Some(2));
    stop.send(true).expect("supervisor running");
    supervisor.await.expect("no panic");
    assert_eq!(*terms.lock().unwrap(), [(true, false), (true, true)], "stopped at the term's end, then at shutdown");
}

#[tokio::test(start_paused = true)]
async fn a_clock_with_a_rate_runs_that_much_fast_or_slow_and_maps_its_readings_back_to_instants() {
    let wall: Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
    let fast = MonotonicClock::start(wall).with_rate_ppm(20_000);
    let slow = MonotonicClock::start(wall).with_rate_ppm(-20_000);
    let true_clock = MonotonicClock::start(wall);
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(100)).await;
    let secs = |c: &MonotonicClock| c.now().duration_since(wall).as_secs_f64();
    assert_eq!((secs(&fast), secs(&slow), secs(&true_clock)), (102.0, 98.0, 100.0));
    // The instant a clock reads a time is when that clock gets there: 51 s by the fast clock is 50 s of true time.
    let at = wall + jiff::SignedDuration::from_secs(51);
    assert_eq!(fast.instant_of(at) - started, Duration::from_secs(50));
    assert_eq!(true_clock.instant_of(at) - started, Duration::from_secs(51));
}
