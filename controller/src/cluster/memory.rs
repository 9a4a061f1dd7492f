//! The API server's write semantics over in-memory objects, for every in-memory implementation of the port (the
//! test fake, `review`'s dump, the simulator's API server), so that compare-and-swap, "already exists", label
//! selectors and merge patches mean one thing everywhere.
//!
//! Owns only object-level semantics: each table is one kind in one namespace, keyed by name, and every write
//! stamps the next resourceVersion of the caller's counter. Must not know about watches, faults, RBAC or history:
//! the callers add those.

use super::ApiError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// A table of one kind's objects by name.
pub type Objects<K> = BTreeMap<String, K>;

fn name_of<K: k8s_openapi::Metadata<Ty = ObjectMeta>>(obj: &K) -> String {
    obj.metadata().name.clone().unwrap_or_default()
}

/// Stores `obj` under `name` with the next resourceVersion, whatever was there (another client's write).
pub fn put<K>(objects: &mut Objects<K>, rv: &mut u64, obj: &K) -> K
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    *rv += 1;
    let mut obj = obj.clone();
    obj.metadata_mut().resource_version = Some(rv.to_string());
    objects.insert(name_of(&obj), obj.clone());
    obj
}

/// `POST <plural>`: a name already taken is a conflict ("already exists").
pub fn create<K>(objects: &mut Objects<K>, rv: &mut u64, plural: &str, obj: &K) -> Result<K, ApiError>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    let name = name_of(obj);
    if objects.contains_key(&name) {
        return Err(ApiError::Conflict(format!("{plural} \"{name}\" already exists")));
    }
    Ok(put(objects, rv, obj))
}

/// Checks a write's resourceVersion precondition (none or empty: unconditional) against the stored object: not
/// found, or a conflict when it has moved on.
pub fn check_version<K>(objects: &Objects<K>, plural: &str, name: &str, wanted: Option<&str>) -> Result<(), ApiError>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    let Some(current) = objects.get(name) else {
        return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
    };
    match wanted.filter(|w| !w.is_empty()) {
        Some(wanted) if Some(wanted) != current.metadata().resource_version.as_deref() => Err(ApiError::Conflict(
            format!("Operation cannot be fulfilled on {plural} \"{name}\": the object has been modified"),
        )),
        _ => Ok(()),
    }
}

/// `PUT <plural>/{name}`: a `metadata.resourceVersion`, when given, is a precondition (compare-and-swap).
pub fn replace<K>(objects: &mut Objects<K>, rv: &mut u64, plural: &str, obj: &K) -> Result<K, ApiError>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    let name = name_of(obj);
    check_version(objects, plural, &name, obj.metadata().resource_version.as_deref())?;
    Ok(put(objects, rv, obj))
}

/// A patch of `metadata.annotations` (other annotations kept), conditional on `resource_version` when it is not
/// empty.
pub fn patch_annotations<K>(
    objects: &mut Objects<K>,
    rv: &mut u64,
    plural: &str,
    name: &str,
    resource_version: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<K, ApiError>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    check_version(objects, plural, name, Some(resource_version))?;
    let mut obj = objects[name].clone();
    obj.metadata_mut().annotations.get_or_insert_with(Default::default).extend(annotations.clone());
    Ok(put(objects, rv, &obj))
}

/// A merge patch of `metadata.annotations` (`Some` sets, `None` removes, others kept), conditional on the object's
/// uid, as a patch carrying `metadata.uid` is: another object of the same name is a conflict.
pub fn patch_annotations_of_uid<K>(
    objects: &mut Objects<K>,
    rv: &mut u64,
    plural: &str,
    name: &str,
    uid: &str,
    changes: &BTreeMap<String, Option<String>>,
) -> Result<K, ApiError>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    let Some(current) = objects.get(name) else {
        return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
    };
    let stored_uid = current.metadata().uid.clone().unwrap_or_default();
    if !uid.is_empty() && stored_uid != uid {
        return Err(ApiError::Conflict(format!(
            "Operation cannot be fulfilled on {plural} \"{name}\": Precondition failed: UID in precondition: {uid}, \
             UID in object meta: {stored_uid}"
        )));
    }
    let mut obj = current.clone();
    apply_annotation_changes(obj.metadata_mut(), changes);
    Ok(put(objects, rv, &obj))
}

/// A merge patch's effect on `metadata.annotations`: `Some` sets, `None` removes, the others are kept.
pub fn apply_annotation_changes(meta: &mut ObjectMeta, changes: &BTreeMap<String, Option<String>>) {
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    for (key, value) in changes {
        match value {
            Some(value) => annotations.insert(key.clone(), value.clone()),
            None => annotations.remove(key),
        };
    }
}

/// The objects whose labels match `selector`, by name.
pub fn list<K>(objects: &Objects<K>, selector: &str) -> Vec<K>
where
    K: k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
{
    objects.values().filter(|o| selector_matches(selector, o.metadata().labels.as_ref())).cloned().collect()
}

/// Equality-based label selectors (`a=b,c`, `key` for "has the label"), the only kind the operator sends, evaluated
/// as the API does.
pub fn selector_matches(selector: &str, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    let empty = std::collections::BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    selector.split(',').filter(|r| !r.is_empty()).all(|requirement| match requirement.split_once('=') {
        Some((k, v)) => labels.get(k).map(String::as_str) == Some(v),
        None => labels.contains_key(requirement),
    })
}

/// RFC 7386 JSON merge patch, as the API server applies one.
pub fn json_merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        json_merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// `current` with a JSON merge patch applied, as the API server patches a webhook configuration: a
/// `metadata.resourceVersion` in the patch is a precondition ([`ApiError::Conflict`] when it moved), and a result
/// that is no configuration of its kind is refused (422). The caller stores it with a new resourceVersion.
pub fn patch_webhook_configuration(
    current: &super::WebhookConfiguration,
    patch: &serde_json::Value,
) -> Result<super::WebhookConfiguration, ApiError> {
    use super::WebhookConfiguration;
    let name = current.metadata().name.clone().unwrap_or_default();
    if let Some(wanted) = patch.pointer("/metadata/resourceVersion").and_then(serde_json::Value::as_str)
        && Some(wanted) != current.metadata().resource_version.as_deref()
    {
        return Err(ApiError::Conflict(format!(
            "Operation cannot be fulfilled on {} {name:?}: the object has been modified",
            current.kind().as_str()
        )));
    }
    let invalid = |e: serde_json::Error| ApiError::Rejected { code: 422, message: e.to_string() };
    let mut value = match current {
        WebhookConfiguration::Validating(c) => serde_json::to_value(c),
        WebhookConfiguration::Mutating(c) => serde_json::to_value(c),
    }
    .map_err(invalid)?;
    json_merge_patch(&mut value, patch);
    Ok(match current {
        WebhookConfiguration::Validating(_) => {
            WebhookConfiguration::Validating(serde_json::from_value(value).map_err(invalid)?)
        }
        WebhookConfiguration::Mutating(_) => {
            WebhookConfiguration::Mutating(serde_json::from_value(value).map_err(invalid)?)
        }
    })
}

/// The [`super::Leases`] role over one in-memory table: the test fakes' and the election tests' Lease store, with
/// the API server's compare-and-swap. While unreachable, every request fails with [`ApiError::Unavailable`] and
/// changes nothing (a partition between a replica and the API server).
#[derive(Clone, Default)]
pub struct LeaseStore {
    inner: std::sync::Arc<std::sync::Mutex<LeaseTable>>,
}

#[derive(Default)]
struct LeaseTable {
    leases: Objects<k8s_openapi::api::coordination::v1::Lease>,
    rv: u64,
    unreachable: bool,
    writes: u64,
}

type Lease = k8s_openapi::api::coordination::v1::Lease;

impl LeaseStore {
    /// Cuts this store off from its callers (`true`) or reconnects it.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.table().unreachable = unreachable;
    }

    /// The stored Lease, as a reader with access would see it.
    pub fn lease(&self, name: &str) -> Option<Lease> {
        self.table().leases.get(name).cloned()
    }

    /// Successful writes so far.
    pub fn writes(&self) -> u64 {
        self.table().writes
    }

    /// Stores `lease` as another client would (a rival replica), whatever is there.
    pub fn put(&self, lease: &Lease) -> Lease {
        let table = &mut *self.table();
        put(&mut table.leases, &mut table.rv, lease)
    }

    fn table(&self) -> std::sync::MutexGuard<'_, LeaseTable> {
        // A test that panicked while holding the lock has failed already; its data is still usable.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn reachable(&self, what: &str) -> Result<std::sync::MutexGuard<'_, LeaseTable>, ApiError> {
        let table = self.table();
        if table.unreachable {
            return Err(ApiError::Unavailable(format!("{what}: connection refused")));
        }
        Ok(table)
    }
}

impl super::Leases for LeaseStore {
    async fn get_lease(&self, name: &str) -> Result<Option<Lease>, ApiError> {
        Ok(self.reachable("get lease")?.leases.get(name).cloned())
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        let mut guard = self.reachable("create lease")?;
        let table = &mut *guard;
        let created = create(&mut table.leases, &mut table.rv, "leases.coordination.k8s.io", lease)?;
        table.writes += 1;
        Ok(created)
    }

    async fn replace_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        let mut guard = self.reachable("replace lease")?;
        let table = &mut *guard;
        let replaced = replace(&mut table.leases, &mut table.rv, "leases.coordination.k8s.io", lease)?;
        table.writes += 1;
        Ok(replaced)
    }
}
