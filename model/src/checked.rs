//! What one exhaustive check of a model found, in the form the model tests assert on: the properties violated (with
//! the first counterexample as the model's own timeline), the examples seen, and the state count.
//!
//! Owns running a stateright model to the end (or to its first violation) on two threads. Must not know any model's
//! properties: the caller names them.

use stateright::{Checker, Expectation, HasDiscoveries, Model};

/// What a check found.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The `always` and `eventually` properties with a counterexample.
    pub violated: Vec<&'static str>,
    /// The `sometimes` properties with an example.
    pub seen: Vec<&'static str>,
    /// The first counterexample, as `timeline` tells it (empty when none).
    pub timeline: String,
    pub states: usize,
}

/// Checks `model` (stopping at the first violation when `to_first`), telling a counterexample with `timeline`.
pub fn check<M>(model: &M, to_first: bool, timeline: impl Fn(&[(M::State, Option<M::Action>)]) -> String) -> Checked
where
    M: Model + Clone + Send + Sync + 'static,
    M::State: std::fmt::Debug + Clone + std::hash::Hash + Eq + Send + Sync,
    M::Action: std::fmt::Debug + Clone + PartialEq + Send + Sync,
{
    let mut checker = model.clone().checker().threads(2);
    if to_first {
        checker = checker.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = checker.spawn_bfs().join();
    let mut checked = Checked {
        violated: Vec::new(),
        seen: Vec::new(),
        timeline: String::new(),
        states: checker.unique_state_count(),
    };
    for p in model.properties() {
        match (p.expectation, checker.discovery(p.name)) {
            (Expectation::Sometimes, Some(_)) => checked.seen.push(p.name),
            (Expectation::Sometimes, None) | (_, None) => {}
            (_, Some(path)) => {
                checked.violated.push(p.name);
                if checked.timeline.is_empty() {
                    checked.timeline = timeline(&path.into_vec());
                }
            }
        }
    }
    checked
}
