//! Raw request bodies to each webhook path (`/admission/no-downscale`, `/admission/prepare-downscale`,
//! `/admission/pod-eviction`, `/admission/zpdb-validation`, `/admission/rollouthealthcheck-validation`) through the
//! real router, over a standard three-zone world. The first byte picks the path (bits 0, 1 and 5), the zone tracker
//! (bit 2) and the Content-Type (bits 3 and 4); the rest is the body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollout_fuzz::review::PATHS;
use rollout_fuzz::webhook::{Harness, ScriptedPods, check_answer};
use rollout_fuzz::world::standard_world;
use rollout_operator::commands::plan::Objects;
use std::sync::OnceLock;

fn objects() -> &'static Objects {
    static OBJECTS: OnceLock<Objects> = OnceLock::new();
    OBJECTS.get_or_init(|| standard_world().objects())
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else { return };
    // Bit 5 picks the health-check validation, so the seeds written before it keep their paths.
    let path = if selector & 0x20 != 0 { PATHS[4] } else { PATHS[usize::from(selector & 3)] };
    let zone_tracker = selector & 4 != 0;
    let content_type = match (selector >> 3) & 3 {
        0 | 1 => Some("application/json"),
        2 => None,
        _ => Some("application/json; charset=utf-8"),
    };
    let harness = Harness::new(objects(), zone_tracker, ScriptedPods::default());
    let (status, answer) = harness.post(path, content_type, body.to_vec());
    if content_type != Some("application/json") {
        assert_eq!(status, http::StatusCode::BAD_REQUEST);
    }
    if let Some(review) = check_answer(status, &answer) {
        let request: serde_json::Value = serde_json::from_slice(body).expect("an answered body is JSON");
        assert_eq!(review["response"]["uid"], request["request"]["uid"]);
        assert_eq!(review["apiVersion"], request["apiVersion"]);
    }
});
