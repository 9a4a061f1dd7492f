//! ZoneAwarePodDisruptionBudgets (reference section 5): budgets that let voluntary disruptions (evictions by
//! `kubectl drain`, cluster upgrades, and the rollout controller's own deletions) proceed zone by zone, or
//! partition by partition across zones, instead of pod by pod.
//!
//! Owns: a budget's configuration parsed and validated from the object as generic JSON ([`config`]), the
//! validating webhook's verdict ([`validation`]), the pod facts budgets read and the `grafana.com/ready-time` rule
//! ([`pods`]), whether an eviction keeps its budget ([`decision`]), and the whole eviction decision as a step
//! machine with its serialisation ([`flow`]), and that machine run as a dry run on a pass's snapshot, for the
//! controller's deletions ([`rollout`]). Must not: do I/O, read a clock, keep state between requests (the
//! shell keeps the known budgets, the in-process lock and memory, and feeds them in).
//!
//! Where we differ from the reference on purpose: pods belong to a StatefulSet by controller owner reference and
//! are ready by our rules (not terminating, container statuses present, `minReadySeconds` honoured); expected
//! ordinals without a pod are unknown (not "fewer pods than replicas"); a pod whose StatefulSet the budget does not
//! select is denied (500) where the reference crashes; a dry-run eviction leaves no trace; a recreated budget
//! (new uid) replaces the old one whatever its generation; `podNameRegexGroup` below 1 is rejected; a pod without a
//! `grafana.com/ready-time` stamp is dated by its Ready condition's last transition (the reference counts it unready
//! for good, which stalls a partition budget with a delay wherever the stamps cannot be written); the controller's
//! own deletions do not count a zone scaled below the partition as one unknown while another pod of the partition
//! stays available ([`decision::AbsentPeer`]: a rollout holds the other zones' downscales, so it would wait for
//! good);
//! and concurrent decisions are serialised through the API, as follows.
//!
//! # Serialisation that survives replicas and restarts
//!
//! The reference serialises with a mutex per budget and a two-minute in-memory cache of allowed evictions: two
//! operator replicas, or a restart between an answer and the eviction's commit, can each allow an eviction on the
//! same view and together break the budget. The Helm chart grants no ConfigMaps and only reads budgets, so there is
//! no shared object to compare-and-swap; but current charts grant `patch` on pods, and the pod being evicted is an
//! object every decider reads anyway. So ([`flow::Serialisation::Intents`]), a decider allowing the eviction of pod
//! `p`:
//!
//! 1. reads the budget's pods live and judges, counting every other pod that carries a live intent as unavailable;
//!    denied: answers (nothing written);
//! 2. writes an **intent** on `p`: an annotation of its own ([`crate::keys::eviction_intent_key`]) holding the
//!    intent's expiry (a patch with `p`'s uid as precondition); its own, so that a decision about the same pod that
//!    takes its intent back (step 4) never takes this one's;
//! 3. reads the budget's StatefulSets and pods live again and judges again, again counting every other live intent
//!    (the StatefulSets too, since another process may keep its intents there: below); this judgement rests only
//!    on these reads (the first ones may come from lists issued before the request arrived, shared with others);
//! 4. allowed: answers "allowed" and leaves the intent (it goes with the pod, or expires); denied: removes its
//!    intent and answers "denied" (or, racing a later decider, waits for it to give way: below).
//!
//! **Claim**: two deciders never both allow evictions that together exceed the budget. The API server's reads and
//! writes are linearizable (a list without a resourceVersion is a quorum read). Take two deciders `P` and `Q` that
//! both allow, with intent writes `w_P`, `w_Q` and second reads `r_P`, `r_Q`; each decider writes before it reads
//! again (`w_P < r_P`, `w_Q < r_Q`). Say `w_P < w_Q`. Then `w_P < w_Q < r_Q`: `Q`'s second read sees `P`'s intent
//! (`P` allowed, so it never removed it, and it has not expired: below), counts `P`'s pod as unavailable and
//! allowed only if the budget holds with both. Ordering all deciders that allowed by their intent writes, each one
//! judged with every earlier one counted, exactly as if they had been decided one after the other, which is the
//! reference's mutex, across any number of replicas and restarts. A decider that crashes after writing its intent
//! only blocks others until the intent expires: a crash can make the operator deny more, never allow more.
//!
//! Assumptions, which the simulation and the model check: an intent lives
//! ([`flow::EvictionSettings::intent_lifetime`]) longer than the rest of its request plus the time the API server
//! takes to commit the eviction after the answer (once committed, the pod is terminating and unavailable by
//! itself); the replicas' clocks, which judge expiry, agree to well within that lifetime. The judgement before the
//! intent (step 1) is not needed for safety: it keeps the evictions that would be denied anyway (most of a drain
//! burst) from writing intents that would deny others. For the same reason it also counts the pods of the other
//! decisions under way in the same process ([`flow::Need::Claim`]): of a burst one replica receives, only decisions
//! that can all be allowed together go on to write intents, instead of all of them writing and then denying each
//! other at their second reads (in the load bench, 855 intent writes and removals for 3 evictions allowed of 500).
//!
//! Liveness: two deciders that see each other's intents would both deny. So intents are ordered (by expiry, the
//! earlier written first, then by pod name: a total order every decider reads the same from the annotations), and
//! at step 4 a decider denied only by later intents, and allowed without them, keeps its intent and reads again
//! after [`flow::rival_wait`] (doubling, at most [`flow::RIVAL_WAITS`] times), while the later ones give way (deny
//! and take their intents back). The claim does not depend on this order: a decider still allows only on a read that shows
//! no conflicting intent after its own last write, and its intent stays from that write on. A denied client
//! retries (429).
//!
//! Where `patch` on pods is refused (the older Helm charts grant none, but they grant `patch` on StatefulSets), the
//! intent goes on the pod's StatefulSet instead ([`flow::Serialisation::StatefulSetIntents`]), naming the pod by
//! name and uid ([`pods::StatefulSetIntent`]). The claim carries over word for word: every decider's second reads
//! list the StatefulSets and the pods after its own intent write, whichever way its process keeps intents (a
//! process started before an RBAC change may keep them the other way: the ZPDB model's `controller_pod_patch`),
//! and every intent, wherever it is kept, counts its pod as unavailable while it lives. A decider whose intent on a
//! StatefulSet is no longer there at its second read denies (429). Intents on pods go with the pod; those on a
//! StatefulSet stay until they expire, so each write there also removes the expired ones; the controller's key
//! there names the pod and the expiry, so a key is never reused with another expiry and a decider that read it
//! expired cannot remove a live one. Where that is refused too, the flow
//! falls back to the reference's way ([`flow::Serialisation::InProcess`]): a lock per budget in the process, taken
//! before the budget's pods are read and held until the answer, and a memory of the evictions it allowed (by pod
//! uid, until the same expiry). That serialises one replica's decisions only. The shell says each step down once
//! in the log and in `rollout_operator_feature_disabled`.

pub mod config;
pub mod decision;
pub mod flow;
pub mod pods;
pub mod rollout;
pub mod validation;

pub use config::{Budgets, ConfigError, Observation, ZpdbConfig, budget_for};
pub use decision::{EvictionVerdict, Holder, Outcome};
pub use flow::{
    EvictPod, EvictionRequest, EvictionSettings, KnownBudgets, Lookup, Need, Observed, Requester, Serialisation,
};
pub use pods::{BudgetPod, BudgetPods, ReadyTimeChange, StatefulSetIntent, ready_time_change};
pub use rollout::{BudgetHold, BudgetScope, hold_of_deletion};

#[cfg(test)]
mod tests;
