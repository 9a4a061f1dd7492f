//! The cluster port served by the fake cluster: watches, writes with their preconditions, live reads, records,
//! leases, scale targets, budgets and certificates.

use super::*;

impl RolloutApi for FakeCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for s in st.statefulsets.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(s.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.sts_watchers.push(tx);
        rx.boxed()
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for p in st.pods.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(p.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.pod_watchers.push(tx);
        rx.boxed()
    }

    async fn delete_pod(&self, name: &str, preconditions: &Preconditions) -> Result<(), ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::DeletePod { name: name.into(), uid: preconditions.uid.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(p) = st.pods.get(name).cloned() else { return Err(ApiError::NotFound(format!("pods {name}"))) };
        if preconditions.uid.is_some() && preconditions.uid != p.metadata.uid {
            return Err(ApiError::Conflict(format!("pods {name}: precondition failed: uid")));
        }
        st.pods.remove(name);
        let owner = p.metadata.owner_references.as_ref().unwrap()[0].name.clone();
        let statefulsets: Vec<StatefulSet> = st.statefulsets.values().cloned().collect();
        for s in &statefulsets {
            let unavailable = st.unavailable(s);
            let sname = s.metadata.name.clone().unwrap();
            if sname == owner {
                let max = st.max_unavailable_after_delete.entry(sname).or_insert(0);
                *max = (*max).max(unavailable);
            } else if unavailable > 0 {
                st.cross_zone_violations.push(format!("deleted {name} while {sname} had {unavailable} unavailable"));
            }
        }
        st.emit_pod(WatchEvent::Delete(p));
        if std::mem::take(&mut st.lose_next_reply) {
            return Err(ApiError::Unavailable(format!("delete pod {name}: connection reset")));
        }
        Ok(())
    }

    async fn replace_statefulset_status(&self, statefulset: &StatefulSet) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = statefulset.metadata.name.clone().unwrap_or_default();
        let wanted = statefulset.metadata.resource_version.clone();
        st.calls.push(Call::UpdateStatus {
            name: name.clone(),
            resource_version: wanted.clone(),
            current_revision: statefulset.status.as_ref().and_then(|s| s.current_revision.clone()),
        });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(mut s) = st.statefulsets.get(&name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets {name}")));
        };
        if wanted.is_some() && wanted != s.metadata.resource_version {
            return Err(ApiError::Conflict(format!("statefulsets {name}: the object has been modified")));
        }
        // Only the status subresource changes.
        s.status = statefulset.status.clone();
        s.metadata.resource_version = Some(st.next_rv());
        st.statefulsets.insert(name, s.clone());
        st.emit_sts(WatchEvent::Apply(s.clone()));
        Ok(s)
    }
}

impl LiveReads for FakeCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.statefulsets.get(name).cloned())
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.deployments.get(name).cloned())
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.replicasets.get(name).cloned())
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(memory::list(&st.statefulsets, label_selector))
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        // Let concurrent callers interleave between reads and writes, as over a network.
        tokio::task::yield_now().await;
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(memory::list(&st.pods, label_selector))
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        // Let concurrent callers interleave between reads and writes, as over a network.
        tokio::task::yield_now().await;
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.pods.get(name).cloned())
    }
}

impl PodAnnotations for FakeCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchPodAnnotations { name: name.into(), uid: uid.into(), changes: changes.clone() });
        if let Some(err) = st.pod_patch_failure.clone().or_else(|| st.failures.pop_front()) {
            return Err(err);
        }
        let state = &mut *st;
        let pod = memory::patch_annotations_of_uid(&mut state.pods, &mut state.rv, "pods", name, uid, changes)?;
        st.emit_pod(WatchEvent::Apply(pod.clone()));
        Ok(pod)
    }
}

impl StatefulSetAnnotations for FakeCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::MergeStatefulSetAnnotations { name: name.into(), changes: changes.clone() });
        if let Some(err) = st.statefulset_patch_failure.clone().or_else(|| st.failures.pop_front()) {
            return Err(err);
        }
        let state = &mut *st;
        let sts = memory::patch_annotations_of_uid(
            &mut state.statefulsets,
            &mut state.rv,
            "statefulsets.apps",
            name,
            "",
            changes,
        )?;
        st.emit_sts(WatchEvent::Apply(sts.clone()));
        Ok(sts)
    }
}

impl DisruptionBudgets for FakeCluster {
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for b in st.budgets.values() {
            let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(b.clone())));
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.budget_watchers.push(tx);
        rx.boxed()
    }
}

impl Leases for FakeCluster {
    async fn get_lease(&self, name: &str) -> Result<Option<k8s_openapi::api::coordination::v1::Lease>, ApiError> {
        self.leases.get_lease(name).await
    }

    async fn create_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        self.leases.create_lease(lease).await
    }

    async fn replace_lease(
        &self,
        lease: &k8s_openapi::api::coordination::v1::Lease,
    ) -> Result<k8s_openapi::api::coordination::v1::Lease, ApiError> {
        self.leases.replace_lease(lease).await
    }
}

impl ZoneTrackerStore for FakeCluster {
    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let (read, hook) = {
            let mut st = self.state.lock().unwrap();
            st.read()?;
            if let Some(err) = &st.config_map_read_failure {
                return Err(err.clone());
            }
            (st.config_maps.get(name).cloned(), st.after_config_map_read.take())
        };
        if let Some(hook) = hook {
            hook(self);
        }
        Ok(read)
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        let name = config_map.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::CreateConfigMap { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let cm = memory::create(&mut state.config_maps, &mut state.rv, "configmaps", config_map)?;
        drop(st);
        self.run_config_map_hook();
        Ok(cm)
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        // Let concurrent callers interleave between a read and a write, as over a network.
        tokio::task::yield_now().await;
        let mut st = self.state.lock().unwrap();
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let resource_version = config_map.metadata.resource_version.clone();
        st.calls.push(Call::ReplaceConfigMap { name: name.clone(), resource_version: resource_version.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let cm = memory::replace(&mut state.config_maps, &mut state.rv, "configmaps", config_map)?;
        let lost = std::mem::take(&mut st.lose_next_reply);
        drop(st);
        self.run_config_map_hook();
        if lost {
            return Err(ApiError::Unavailable(format!("replace configmap {name}: connection reset")));
        }
        Ok(cm)
    }

    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchAnnotations {
            name: name.into(),
            resource_version: resource_version.into(),
            annotations: annotations.clone(),
        });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let state = &mut *st;
        let s = memory::patch_annotations(
            &mut state.statefulsets,
            &mut state.rv,
            "statefulsets.apps",
            name,
            resource_version,
            annotations,
        )?;
        st.emit_sts(WatchEvent::Apply(s.clone()));
        Ok(s)
    }
}

impl ScaleTargets for FakeCluster {
    async fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchReplicas { name: name.into(), replicas, resource_version: resource_version.into() });
        if !annotations.is_empty() {
            st.calls.push(Call::PatchAnnotations {
                name: name.into(),
                resource_version: resource_version.into(),
                annotations: annotations.clone(),
            });
        }
        if let Some(err) = st.failures.pop_front().or_else(|| st.replica_patch_failures.pop_front()) {
            return Err(err);
        }
        let Some(mut s) = st.statefulsets.get(name).cloned() else {
            return Err(ApiError::NotFound(format!("statefulsets {name}")));
        };
        if !resource_version.is_empty() && Some(resource_version) != s.metadata.resource_version.as_deref() {
            return Err(ApiError::Conflict(format!("statefulsets {name}: the object has been modified")));
        }
        s.spec.as_mut().unwrap().replicas = Some(replicas as i32);
        s.metadata.annotations.get_or_insert_default().extend(annotations.clone());
        s.metadata.generation = Some(s.metadata.generation.unwrap_or(1) + 1);
        s.metadata.resource_version = Some(st.next_rv());
        st.statefulsets.insert(name.into(), s.clone());
        st.emit_sts(WatchEvent::Apply(s.clone()));
        if std::mem::take(&mut st.lose_next_reply) {
            return Err(ApiError::Unavailable(format!("patch statefulset {name}: connection reset")));
        }
        Ok(s)
    }

    async fn discover_resources(&self, group: &str, kind: &str) -> Result<Vec<ApiResourceRef>, ApiError> {
        let st = self.state.lock().unwrap();
        Ok(st.discovery.iter().filter(|r| r.group == group && r.kind == kind).cloned().collect())
    }

    async fn get_scale(&self, resource: &ApiResourceRef, name: &str) -> Result<serde_json::Value, ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::GetScale { plural: resource.plural.clone(), name: name.into() });
        let Some((spec, status)) = st.scale_targets.get(&(resource.plural.clone(), name.to_string())).copied() else {
            return Err(ApiError::NotFound(format!("{} \"{name}\" not found", resource.plural)));
        };
        let mut scale = serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": name}, "spec": {}, "status": {"replicas": status},
        });
        if let Some(spec) = spec {
            scale["spec"]["replicas"] = spec.into();
        }
        Ok(scale)
    }

    async fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let mut st = self.state.lock().unwrap();
        st.calls.push(Call::PatchResourceStatus {
            plural: resource.plural.clone(),
            name: name.into(),
            patch: patch.clone(),
        });
        let key = (resource.plural.clone(), name.to_string());
        let Some(target) = st.scale_targets.get_mut(&key) else {
            return Err(ApiError::NotFound(format!("{} \"{name}\" not found", resource.plural)));
        };
        if let Some(replicas) = patch.pointer("/status/replicas").and_then(|v| v.as_i64()) {
            target.1 = replicas;
        }
        Ok(())
    }
}

impl CertificateStore for FakeCluster {
    async fn get_secret(&self, name: &str) -> Result<Option<Secret>, ApiError> {
        let st = self.state.lock().unwrap();
        st.read()?;
        Ok(st.secrets.get(name).cloned())
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = secret.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::CreateSecret { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        if st.secrets.contains_key(&name) {
            return Err(ApiError::Conflict(format!("secrets \"{name}\" already exists")));
        }
        let mut secret = secret.clone();
        secret.metadata.resource_version = Some(st.next_rv());
        st.secrets.insert(name, secret.clone());
        Ok(secret)
    }

    async fn replace_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        let mut st = self.state.lock().unwrap();
        let name = secret.metadata.name.clone().unwrap_or_default();
        st.calls.push(Call::ReplaceSecret { name: name.clone() });
        if let Some(err) = st.failures.pop_front() {
            return Err(err);
        }
        let Some(current) = st.secrets.get(&name) else {
            return Err(ApiError::NotFound(format!("secrets \"{name}\" not found")));
        };
        if secret.metadata.resource_version.is_some()
            && secret.metadata.resource_version != current.metadata.resource_version
        {
            return Err(ApiError::Conflict(format!("secrets \"{name}\": the object has been modified")));
        }
        let mut secret = secret.clone();
        secret.metadata.resource_version = Some(st.next_rv());
        st.secrets.insert(name, secret.clone());
        Ok(secret)
    }

    fn watch_webhook_configurations(
        &self,
        kind: WebhookKind,
        label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>> {
        let (tx, rx) = mpsc::unbounded();
        let mut st = self.state.lock().unwrap();
        let _ = tx.unbounded_send(Ok(WatchEvent::Init));
        for c in st.webhooks.values() {
            if c.kind() == kind && selector_matches(label_selector, c.metadata().labels.as_ref()) {
                let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(c.clone())));
            }
        }
        let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
        st.webhook_watchers.push((kind, label_selector.to_string(), tx));
        rx.boxed()
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        let current = {
            let mut st = self.state.lock().unwrap();
            st.calls.push(Call::PatchWebhook { kind, name: name.into(), patch: patch.clone() });
            if let Some(err) = st.failures.pop_front() {
                return Err(err);
            }
            let Some(current) = st.webhooks.get(&(kind.as_str().to_string(), name.to_string())).cloned() else {
                return Err(ApiError::NotFound(format!("{} {name}", kind.as_str())));
            };
            current
        };
        let updated = rollout_operator::cluster::memory::patch_webhook_configuration(&current, patch)?;
        self.put_webhook_configuration(updated);
        Ok(self.webhook_configuration(kind, name).expect("just stored"))
    }
}
