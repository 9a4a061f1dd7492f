//! The store's side of the API server's writes: each request as the real API server carries it out (preconditions,
//! conflicts, subresources), judged by the oracle as it commits.

use crate::environment::store::Store;
use crate::oracle::checker::Knowledge;
use crate::oracle::commit_rules::Change;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rollout_operator::cluster::memory::{self, json_merge_patch as merge};
use rollout_operator::cluster::{ApiError, ApiResourceRef, Preconditions, WebhookConfiguration, WebhookKind};
use std::collections::BTreeMap;

impl Store {
    /// `DELETE pods/{name}` with preconditions: the pod becomes terminating (the kubelet removes it later).
    pub fn api_delete_pod(&mut self, name: &str, pre: &Preconditions, k: Knowledge) -> Result<(), ApiError> {
        let Some(pod) = self.pods.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("pods \"{name}\" not found")));
        };
        // An empty uid is taken as no uid precondition (the test-only NoExpectations planner clears uids to model
        // the reference, which sent none; a real API server would refuse "" as a mismatch).
        if pre.uid.as_ref().is_some_and(|u| !u.is_empty() && Some(u) != pod.metadata.uid.as_ref()) {
            return Err(ApiError::Conflict(format!("pods \"{name}\": precondition failed: UID")));
        }
        if pre.resource_version.as_ref().is_some_and(|v| Some(v) != pod.metadata.resource_version.as_ref()) {
            return Err(ApiError::Conflict(format!("pods \"{name}\": precondition failed: ResourceVersion")));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            // Deleting a terminating pod again changes nothing.
            return Ok(());
        }
        let mut pod = pod;
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        self.writing_as(|w| (w.controller, w.basis) = (Some(k), None), |st| st.put_pod(pod));
        Ok(())
    }

    /// `PUT statefulsets/{name}/status`: replaces the status; `metadata.resourceVersion`, when given, is a
    /// precondition. Only the status is changed (as the API server's status strategy does).
    pub fn api_update_status(&mut self, statefulset: &StatefulSet, k: Knowledge) -> Result<StatefulSet, ApiError> {
        let name = statefulset.metadata.name.clone().unwrap_or_default();
        let Some(sts) = self.statefulsets.get(&name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        if statefulset.metadata.resource_version.is_some()
            && statefulset.metadata.resource_version != sts.metadata.resource_version
        {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on statefulsets.apps \"{name}\": the object has been modified"
            )));
        }
        let mut new = sts.clone();
        new.status = statefulset.status.clone();
        Ok(self.writing_as(|w| (w.controller, w.basis) = (Some(k), None), |st| st.put_statefulset(new)))
    }

    /// `POST configmaps`: fails with a conflict when the name is taken.
    pub fn api_create_config_map(&mut self, cm: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let cm = memory::create(&mut self.config_maps, &mut self.rv, "configmaps", cm)?;
        self.judge(Change::ConfigMap(&cm));
        Ok(cm)
    }

    /// `PUT configmaps/{name}`: `metadata.resourceVersion`, when given, is a precondition.
    pub fn api_replace_config_map(&mut self, cm: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let cm = memory::replace(&mut self.config_maps, &mut self.rv, "configmaps", cm)?;
        self.judge(Change::ConfigMap(&cm));
        Ok(cm)
    }

    /// `PATCH statefulsets/{name}` with `{"spec":{"replicas":N}}`; a non-empty `resource_version` is a precondition.
    /// A spec change bumps `metadata.generation`, as the API server does. `controller`: the knowledge of the
    /// rollout controller making the change, whose downscales the checker judges (invariant 5).
    pub fn api_patch_replicas(
        &mut self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
        controller: Option<Knowledge>,
    ) -> Result<StatefulSet, ApiError> {
        let Some(sts) = self.statefulsets.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        if !resource_version.is_empty() && Some(resource_version) != sts.metadata.resource_version.as_deref() {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on statefulsets.apps \"{name}\": the object has been modified"
            )));
        }
        let replicas = i32::try_from(replicas)
            .map_err(|_| ApiError::Rejected { code: 422, message: format!("spec.replicas {replicas} out of range") })?;
        let mut new = sts.clone();
        let spec = new.spec.get_or_insert_with(Default::default);
        if spec.replicas == Some(replicas) {
            return Ok(sts);
        }
        spec.replicas = Some(replicas);
        new.metadata.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
        new.metadata.generation = Some(new.metadata.generation.unwrap_or(1) + 1);
        let basis = controller.map(|k| k.sts_rv);
        Ok(self.writing_as(|w| (w.controller, w.basis) = (controller, basis), |st| st.put_statefulset(new)))
    }

    /// `PATCH statefulsets/{name}` of `metadata.annotations`; a non-empty `resource_version` is a precondition.
    pub fn api_patch_annotations(
        &mut self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        memory::check_version(&self.statefulsets, "statefulsets.apps", name, Some(resource_version))?;
        let mut sts = self.statefulsets[name].clone();
        sts.metadata.annotations.get_or_insert_with(Default::default).extend(annotations.clone());
        Ok(self.put_statefulset(sts))
    }

    /// `PATCH statefulsets/{name}` of `metadata.annotations` (`None` removes), a merge patch without precondition.
    pub fn api_merge_statefulset_annotations(
        &mut self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        let Some(sts) = self.statefulsets.get(name) else {
            return Err(ApiError::NotFound(format!("statefulsets.apps \"{name}\" not found")));
        };
        let mut sts = sts.clone();
        memory::apply_annotation_changes(&mut sts.metadata, changes);
        Ok(self.put_statefulset(sts))
    }

    /// `PATCH pods/{name}` of `metadata.annotations` (`None` removes), conditional on the pod's uid.
    pub fn api_patch_pod_annotations(
        &mut self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        let Some(pod) = self.pods.get(name) else {
            return Err(ApiError::NotFound(format!("pods \"{name}\" not found")));
        };
        let stored = pod.metadata.uid.clone().unwrap_or_default();
        if !uid.is_empty() && stored != uid {
            return Err(ApiError::Conflict(format!(
                "Operation cannot be fulfilled on pods \"{name}\": Precondition failed: UID in precondition: {uid}, \
                 UID in object meta: {stored}"
            )));
        }
        let mut pod = pod.clone();
        memory::apply_annotation_changes(&mut pod.metadata, changes);
        Ok(self.put_pod(pod))
    }

    /// API discovery: resources of `group` with kind `kind`.
    pub fn api_discover(&self, group: &str, kind: &str) -> Vec<ApiResourceRef> {
        self.api_resources.iter().filter(|r| r.group == group && r.kind == kind).cloned().collect()
    }

    /// `GET <plural>/{name}/scale`: an autoscaling/v1 Scale built from the object.
    pub fn api_get_scale(&self, plural: &str, name: &str) -> Result<serde_json::Value, ApiError> {
        let Some(obj) = self.scale_targets.get(&(plural.to_string(), name.to_string())) else {
            return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
        };
        let mut scale = serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name},
            "spec": {}, "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(0.into())},
        });
        if let Some(r) = obj.pointer("/spec/replicas") {
            scale["spec"]["replicas"] = r.clone();
        }
        Ok(scale)
    }

    /// `PATCH <plural>/{name}/status` (JSON merge patch): only `status` changes.
    pub fn api_patch_resource_status(
        &mut self,
        plural: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let Some(obj) = self.scale_targets.get_mut(&(plural.to_string(), name.to_string())) else {
            return Err(ApiError::NotFound(format!("{plural} \"{name}\" not found")));
        };
        if let (Some(status), Some(obj)) = (patch.get("status"), obj.as_object_mut()) {
            merge(obj.entry("status").or_insert(serde_json::Value::Null), status);
        }
        Ok(())
    }

    /// `POST secrets`.
    pub fn api_create_secret(&mut self, secret: &Secret) -> Result<Secret, ApiError> {
        memory::create(&mut self.secrets, &mut self.rv, "secrets", secret)
    }

    /// `PUT secrets/{name}`: `metadata.resourceVersion`, when given, is a precondition.
    pub fn api_replace_secret(&mut self, secret: &Secret) -> Result<Secret, ApiError> {
        memory::replace(&mut self.secrets, &mut self.rv, "secrets", secret)
    }

    /// `PATCH {validating,mutating}webhookconfigurations/{name}` with a JSON merge patch; a
    /// `metadata.resourceVersion` in it is a precondition (409 when the configuration moved on).
    pub fn api_patch_webhook_configuration(
        &mut self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        let plural = match kind {
            WebhookKind::Validating => "validatingwebhookconfigurations",
            WebhookKind::Mutating => "mutatingwebhookconfigurations",
        };
        let Some(current) = self.webhook_configurations.get(&(kind, name.to_string())) else {
            return Err(ApiError::NotFound(format!("{plural}.admissionregistration.k8s.io \"{name}\" not found")));
        };
        let updated = memory::patch_webhook_configuration(current, patch)?;
        Ok(self.put_webhook_configuration(updated))
    }

    /// `POST leases`: a name already taken is a conflict (409 AlreadyExists).
    pub fn api_create_lease(
        &mut self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let lease = memory::create(&mut self.leases, &mut self.rv, "leases.coordination.k8s.io", lease)?;
        self.judge(Change::Lease(&lease));
        Ok(lease)
    }

    /// `PUT leases/{name}`: `metadata.resourceVersion` is a precondition (409 Conflict when the Lease moved on), so
    /// every renewal and takeover is a compare-and-swap.
    pub fn api_replace_lease(
        &mut self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        let lease = memory::replace(&mut self.leases, &mut self.rv, "leases.coordination.k8s.io", lease)?;
        self.judge(Change::Lease(&lease));
        Ok(lease)
    }
}
