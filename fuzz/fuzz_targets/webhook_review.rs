//! Structure-aware admission: a world (zones, pods, record, budget, parents) and an AdmissionReview built from
//! fuzzer-chosen fields, through the real router, with pods answering the prepare calls as scripted. Beyond "no
//! crash": every answer is a well-formed review of the request's version and uid, and a dry run or a request for
//! another namespace writes nothing and calls no pod.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rollout_fuzz::review::ReviewSpec;
use rollout_fuzz::webhook::{Harness, PodAnswer, ScriptedPods, check_answer};
use rollout_fuzz::world::{NAMESPACE, WorldSpec};

#[derive(Arbitrary, Debug)]
struct Input {
    world: WorldSpec,
    review: ReviewSpec,
    zone_tracker: bool,
    pods: Vec<PodAnswer>,
}

fuzz_target!(|input: Input| {
    let objects = input.world.objects();
    let harness = Harness::new(&objects, input.zone_tracker, ScriptedPods::new(input.pods.clone()));
    let body = input.review.body(&input.world);
    let before = harness.state();
    let (status, answer) =
        harness.post(input.review.path(), Some("application/json"), serde_json::to_vec(&body).expect("JSON"));
    assert_eq!(status, http::StatusCode::OK, "{}", String::from_utf8_lossy(&answer));
    let review = check_answer(status, &answer).expect("a review");
    assert_eq!(review["response"]["uid"], body["request"]["uid"]);
    assert_eq!(review["apiVersion"], body["apiVersion"]);
    if input.review.is_dry_run() || input.review.namespace() != NAMESPACE {
        assert_eq!(harness.state(), before, "a dry run or a foreign request wrote: {review}");
        assert_eq!(harness.pods.call_count(), 0, "a dry run or a foreign request called pods: {review}");
    }
});
