//! A user editing the zone tracker's record badly and repairing it later.

use crate::environment::store::Store;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::zone_name;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::time::Duration;
use tokio::time::Instant;

/// The corrupt-record world's edit, made only while a StatefulSet rolls: one zone's entry (or a new one, in a new
/// record where none exists yet) made unreadable. The record's name, the key and what it held before.
pub(crate) fn corrupt_record(st: &mut Store) -> Option<(String, String, Option<String>)> {
    let record = st.zone_tracker_config_map.clone();
    let rolling = st.statefulsets.values().any(|s| {
        let status = s.status.as_ref();
        status.and_then(|s| s.update_revision.as_ref()) != status.and_then(|s| s.current_revision.as_ref())
    });
    if !rolling {
        return None;
    }
    // Where nothing wrote the record yet (no webhook serves the group), the user applies a broken one.
    let existing = st.config_maps.get(&record).cloned();
    let mut cm = existing.clone().unwrap_or_else(|| ConfigMap {
        metadata: ObjectMeta {
            name: Some(record.clone()),
            namespace: Some(crate::environment::objects::NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    });
    let data = cm.data.get_or_insert_default();
    let key = data.keys().next().cloned().unwrap_or_else(|| zone_name(0));
    let original = data.insert(key.clone(), CORRUPT_RECORD_VALUE.to_string());
    match existing {
        Some(_) => st.api_replace_config_map(&cm).ok()?,
        None => st.api_create_config_map(&cm).ok()?,
    };
    st.trace("user", format!("corrupts the zone tracker's record {record}: {key} = {CORRUPT_RECORD_VALUE}"));
    st.oracle.activity.happened(crate::oracle::activity::WorldEvent::RecordCorrupted);
    Some((record, key, original))
}

/// Puts the corrupted entry back as it was (or removes it); whether that is done (or the record is gone).
pub(crate) fn repair_record(st: &mut Store, record: &str, key: &str, original: Option<&str>) -> bool {
    let Some(mut cm) = st.config_maps.get(record).cloned() else { return true };
    let data = cm.data.get_or_insert_default();
    match original {
        Some(value) => data.insert(key.to_string(), value.to_string()),
        None => data.remove(key),
    };
    let repaired = st.api_replace_config_map(&cm).is_ok();
    if repaired {
        st.trace("user", format!("repairs the zone tracker's record {record}"));
        st.oracle.activity.happened(crate::oracle::activity::WorldEvent::RecordRepaired);
    }
    repaired
}

/// Seeds the user who corrupts the zone tracker's record.
pub(crate) const CORRUPT_RECORD_STREAM: u64 = 0x636f_7272_7570_7421;

/// What the corrupt-record world's user writes for a zone in the record: JSON, but no time.
pub(crate) const CORRUPT_RECORD_VALUE: &str = r#"{"lastDownscaled":"yesterday"}"#;

/// Twice while a rollout is under way, a user edits the zone tracker's record badly and repairs it 30-60 s later.
pub fn start_corruptions(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.corrupt_record {
        return;
    }
    // The world's actors stop when the fault phase ends: a corruption starts no later than its longest hold (60 s)
    // before that, so its repair always runs.
    let (store, until) =
        (stage.store.clone(), stage.start + stage.sc.fault_phase.saturating_sub(Duration::from_secs(60)));
    let mut r = SimRng::new(stage.seed ^ CORRUPT_RECORD_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        let mut corruptions = 0;
        while corruptions < 2 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let Some((record, key, original)) = corrupt_record(&mut store.lock().unwrap()) else { continue };
            tokio::time::sleep(r.millis(30_000, 60_000)).await;
            // The operator cannot have written the record while it was unreadable; a conflict is retried.
            while !repair_record(&mut store.lock().unwrap(), &record, &key, original.as_deref()) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            corruptions += 1;
            tokio::time::sleep(r.millis(20_000, 60_000)).await;
        }
    }));
}

/// With a recent downscale: once the record exists, the StatefulSets are re-applied from manifests without the
/// annotation (`kubectl replace`): from then on only the record, bootstrapped from the annotation, remembers
/// zone-b's downscale.
pub fn start_reapplies(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.recent_downscale {
        return;
    }
    let store = stage.store.clone();
    actors.tasks.push(tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let mut st = store.lock().unwrap();
            let record = st.zone_tracker_config_map.clone();
            if !st.config_maps.contains_key(&record) {
                continue;
            }
            let annotated: Vec<String> = st
                .statefulsets
                .iter()
                .filter(|(_, s)| {
                    s.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(rollout_core::keys::LAST_DOWNSCALE))
                })
                .map(|(n, _)| n.clone())
                .collect();
            for name in annotated {
                let mut sts = st.statefulsets[&name].clone();
                if let Some(a) = sts.metadata.annotations.as_mut() {
                    a.remove(rollout_core::keys::LAST_DOWNSCALE);
                }
                st.put_statefulset(sts);
                st.trace(
                    "user",
                    format!("re-applied {name} from its manifest: {} dropped", rollout_core::keys::LAST_DOWNSCALE),
                );
                let dropped = crate::oracle::activity::WorldEvent::LastDownscaleDropped { statefulset: name };
                st.oracle.activity.happened(dropped);
            }
            break;
        }
    }));
}
