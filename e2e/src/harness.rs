//! Cluster helpers for the e2e scenarios: connect through `KUBECONFIG`, create mock zones (StatefulSets of mock
//! pods with their headless Services), flip pod readiness through the API server's pod proxy, observe pods and
//! check the one-zone-at-a-time invariant on every observation, restart the operator, wait with deadlines.
//!
//! Owns only test plumbing; it must not re-implement operator decisions. Every wait has a deadline and names what it
//! waited for when it gives up; deadlines are generous (minutes) because they bound a real cluster, not speed.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Error as KubeError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// Namespace the operator under test manages (`E2E_NAMESPACE`, default `rollout-operator`, the overlays').
pub fn namespace() -> String {
    std::env::var("E2E_NAMESPACE").unwrap_or_else(|_| "rollout-operator".to_string())
}

/// Image of the mock pods (`E2E_MOCK_IMAGE`, default what `e2e/run.sh` builds and loads).
pub fn mock_image() -> String {
    std::env::var("E2E_MOCK_IMAGE").unwrap_or_else(|_| "rollout-e2e-mock-pod:e2e".to_string())
}

/// Name of the operator's Deployment, pods labelled `name=<it>`, and of its Service.
pub const OPERATOR: &str = "rollout-operator";
/// Secret holding the self-signed certificate (the webhooks overlay's `-server-tls.self-signed-cert.secret-name`).
pub const CERT_SECRET: &str = "rollout-operator-self-signed-certificate";
/// The zone tracker's ConfigMap (`-zone-tracker.config-map-name`).
pub const ZONE_TRACKER: &str = "rollout-operator-zone-tracker";
/// Port the mock pods listen on.
pub const MOCK_PORT: u16 = 8080;

/// Default deadline of a wait: what the reference's integration tests allow (5 minutes).
pub const WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);

/// A connection to the cluster under test.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    pub ns: String,
}

impl Cluster {
    /// Connects through `KUBECONFIG` (or `~/.kube/config`). Panics with how to get a cluster when none answers:
    /// these tests must fail, not pass, without one.
    pub async fn connect() -> Cluster {
        let client = match Client::try_default().await {
            Ok(c) => c,
            Err(e) => panic!("no Kubernetes cluster configured ({e}); run e2e/run.sh, or set KUBECONFIG"),
        };
        if let Err(e) = client.apiserver_version().await {
            panic!("the cluster KUBECONFIG points at does not answer ({e}); run e2e/run.sh");
        }
        Cluster { client, ns: namespace() }
    }

    pub fn statefulsets(&self) -> Api<StatefulSet> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    pub fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.ns)
    }
    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Sends a request to a pod through the API server's proxy (`pods/<name>:<port>/proxy/<path>`).
    pub async fn pod_http(&self, pod: &str, port: u16, method: http::Method, path: &str) -> Result<String, KubeError> {
        let uri = format!("/api/v1/namespaces/{}/pods/{pod}:{port}/proxy/{}", self.ns, path.trim_start_matches('/'));
        let request =
            http::Request::builder().method(method).uri(uri).body(Vec::new()).map_err(KubeError::HttpError)?;
        self.client.request_text(request).await
    }

    /// Marks a mock pod ready (its readiness probe starts passing).
    pub async fn make_ready(&self, pod: &str) {
        retry(&format!("POST /ready to pod {pod}"), WAIT, || async {
            self.pod_http(pod, MOCK_PORT, http::Method::POST, "/ready").await.map(|_| Some(())).or_else(transient)
        })
        .await;
    }

    /// Node selector pinning a zone's pods to the node labelled with that zone, when the cluster has such nodes
    /// (kind-configs/multi-node.yaml); `None` on a single-node cluster.
    pub async fn zone_node_selector(&self, zone: &str) -> Option<BTreeMap<String, String>> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let key = "topology.kubernetes.io/zone";
        let list = nodes.list(&ListParams::default().labels(&format!("{key}={zone}"))).await.ok()?;
        (!list.items.is_empty()).then(|| BTreeMap::from([(key.to_string(), zone.to_string())]))
    }

    /// Waits until the operator's Deployment has one Ready pod, and returns that pod.
    pub async fn operator_pod(&self) -> Pod {
        wait_for("the operator pod to be Running and Ready", WAIT, || async {
            let pods = self.pods().list(&ListParams::default().labels(&format!("name={OPERATOR}"))).await?;
            let ready: Vec<Pod> = pods.items.into_iter().filter(|p| is_ready(p) && !is_terminating(p)).collect();
            Ok(if ready.len() == 1 { ready.into_iter().next() } else { None })
        })
        .await
    }

    /// Deletes the operator pod and waits for its replacement to be Ready; returns the new pod.
    pub async fn restart_operator(&self) -> Pod {
        let old = self.operator_pod().await;
        let old_uid = old.metadata.uid.clone();
        let name = old.metadata.name.clone().unwrap_or_default();
        self.pods().delete(&name, &DeleteParams::default()).await.expect("delete the operator pod");
        wait_for("a new operator pod to be Running and Ready", WAIT, || async {
            let pods = self.pods().list(&ListParams::default().labels(&format!("name={OPERATOR}"))).await?;
            Ok(pods.items.into_iter().find(|p| p.metadata.uid != old_uid && is_ready(p) && !is_terminating(p)))
        })
        .await
    }

    /// Scales the operator's Deployment and waits until that many pods are Ready (0: until none is left).
    pub async fn scale_operator(&self, replicas: i32) {
        self.deployments()
            .patch_scale(OPERATOR, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": replicas}})))
            .await
            .expect("scale the operator Deployment");
        wait_for(&format!("{replicas} operator pod(s)"), WAIT, || async {
            let pods = self.pods().list(&ListParams::default().labels(&format!("name={OPERATOR}"))).await?;
            let n = pods.items.iter().filter(|p| replicas == 0 || (is_ready(p) && !is_terminating(p))).count();
            Ok((n == replicas as usize).then_some(()))
        })
        .await;
    }

    /// Creates (or re-creates, deleting leftovers of an earlier run) a mock zone.
    pub async fn create_zone(&self, zone: &MockZone) {
        self.delete_zone(&zone.name).await;
        let selector = match zone.name.rsplit_once("-zone-") {
            Some((_, z)) => self.zone_node_selector(z).await,
            None => None,
        };
        let service: Service = serde_json::from_value(zone.service()).expect("valid Service");
        self.services().create(&PostParams::default(), &service).await.expect("create the headless Service");
        let sts: StatefulSet = serde_json::from_value(zone.statefulset(selector)).expect("valid StatefulSet");
        retry_write(&format!("create StatefulSet {}", zone.name), || {
            let (api, sts) = (self.statefulsets(), sts.clone());
            async move { api.create(&PostParams::default(), &sts).await }
        })
        .await;
    }

    /// Deletes a mock zone's StatefulSet (with its pods) and Service, and waits until they are gone.
    pub async fn delete_zone(&self, name: &str) {
        let dp = DeleteParams::foreground();
        let _ = self.statefulsets().delete(name, &dp).await;
        let _ = self.services().delete(name, &DeleteParams::default()).await;
        wait_for(&format!("StatefulSet {name} and its pods to be deleted"), WAIT, || async {
            let sts = self.statefulsets().get_opt(name).await?;
            let pods = self.pods().list(&ListParams::default().labels(&format!("name={name}"))).await?;
            Ok((sts.is_none() && pods.items.is_empty()).then_some(()))
        })
        .await;
    }

    /// Changes a zone's pod template (what a user's `kubectl apply` of a new version does).
    pub async fn set_template(&self, name: &str, pod: &MockPod) {
        let patch = json!({"spec": {"template": {"spec": {"containers": [pod.container()]}}}});
        retry_write(&format!("update the template of {name}"), || {
            let (api, patch) = (self.statefulsets(), patch.clone());
            async move { api.patch(name, &PatchParams::default(), &Patch::Strategic(patch)).await }
        })
        .await;
    }

    /// The zone's pods, as the test sees them.
    pub async fn pod_states(&self, name: &str) -> Result<Vec<PodState>, KubeError> {
        let pods = self.pods().list(&ListParams::default().labels(&format!("name={name}"))).await?;
        let mut out: Vec<PodState> = pods.items.iter().map(PodState::of).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One observation of a group's zones; checks that at most one zone is disrupted (see [`GroupView`]).
    pub async fn observe(&self, zones: &[&str]) -> Result<GroupView, KubeError> {
        // One list of all pods: a consistent snapshot at one resourceVersion, so the check cannot see two zones
        // disrupted at two different moments.
        let all = self.pods().list(&ListParams::default().labels("e2e-mock")).await?;
        let mut view = GroupView { zones: Vec::new() };
        for zone in zones {
            let sts = self.statefulsets().get(zone).await?;
            let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let mut pods: Vec<PodState> = all
                .items
                .iter()
                .filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get("name")).map(String::as_str) == Some(zone))
                .map(PodState::of)
                .collect();
            pods.sort_by(|a, b| a.name.cmp(&b.name));
            view.zones.push(ZoneView { name: zone.to_string(), replicas, pods });
        }
        Ok(view)
    }

    /// Sets a StatefulSet's replicas through its scale subresource (what HPA and `kubectl scale` do).
    pub async fn scale(&self, name: &str, replicas: i32, params: &PatchParams) -> Result<(), KubeError> {
        let patch = json!({"spec": {"replicas": replicas}});
        self.statefulsets().patch_scale(name, params, &Patch::Merge(&patch)).await.map(|_| ())
    }

    /// [`Cluster::scale`], retried while the API server or the webhooks are briefly unavailable.
    pub async fn scale_retrying(&self, name: &str, replicas: i32) {
        retry_write(&format!("scale {name} to {replicas}"), || {
            let c = self.clone();
            let name = name.to_string();
            async move { c.scale(&name, replicas, &PatchParams::default()).await }
        })
        .await
    }

    /// Reads `spec.replicas` of a StatefulSet.
    pub async fn replicas(&self, name: &str) -> i32 {
        let sts = self.statefulsets().get(name).await.expect("get StatefulSet");
        sts.spec.and_then(|s| s.replicas).unwrap_or(1)
    }

    /// The group downscale record, `{StatefulSet name: lastDownscaled}` (the zone-tracker ConfigMap's format).
    pub async fn downscale_record(&self) -> BTreeMap<String, jiff::Timestamp> {
        let Ok(Some(cm)) = self.config_maps().get_opt(ZONE_TRACKER).await else { return BTreeMap::new() };
        let mut out = BTreeMap::new();
        for (k, v) in cm.data.unwrap_or_default() {
            let parsed: Value = serde_json::from_str(&v).unwrap_or(Value::Null);
            let ts = parsed
                .as_object()
                .and_then(|o| o.iter().find(|(f, _)| f.eq_ignore_ascii_case("lastDownscaled")))
                .and_then(|(_, t)| t.as_str())
                .and_then(|t| t.parse::<jiff::Timestamp>().ok());
            if let Some(ts) = ts {
                out.insert(k, ts);
            }
        }
        out
    }

    /// The CA (PEM) the operator persisted in its certificate Secret, once it exists.
    pub async fn operator_ca(&self) -> String {
        wait_for("the operator's certificate Secret", WAIT, || async {
            let secret = self.secrets().get_opt(CERT_SECRET).await?;
            Ok(secret
                .and_then(|s| s.data)
                .and_then(|d| d.get("ca").map(|b| String::from_utf8_lossy(&b.0).into_owned())))
        })
        .await
    }
}

/// How a mock zone's pods run.
#[derive(Debug, Clone)]
pub struct MockPod {
    pub version: String,
    pub ready_on_start: bool,
    pub crash: bool,
    pub prepare_status: u16,
}

impl MockPod {
    pub fn version(v: &str) -> MockPod {
        MockPod { version: v.to_string(), ready_on_start: true, crash: false, prepare_status: 200 }
    }
    pub fn not_ready(mut self) -> MockPod {
        self.ready_on_start = false;
        self
    }
    pub fn crashing(mut self) -> MockPod {
        self.crash = true;
        self
    }
    pub fn prepare_fails_with(mut self, status: u16) -> MockPod {
        self.prepare_status = status;
        self
    }

    fn container(&self) -> Value {
        json!({
            "name": "mock",
            "image": mock_image(),
            "imagePullPolicy": "Never",
            "ports": [{"name": "http", "containerPort": MOCK_PORT}],
            "env": [
                {"name": "VERSION", "value": self.version},
                {"name": "READY", "value": self.ready_on_start.to_string()},
                {"name": "CRASH", "value": self.crash.to_string()},
                {"name": "PREPARE_STATUS", "value": self.prepare_status.to_string()},
            ],
            "livenessProbe": {"httpGet": {"path": "/alive", "port": MOCK_PORT}, "initialDelaySeconds": 1, "periodSeconds": 1},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": MOCK_PORT}, "initialDelaySeconds": 1, "periodSeconds": 1},
            "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true},
        })
    }
}

/// A test StatefulSet of mock pods, `OnDelete`, with a headless Service of the same name.
#[derive(Debug, Clone)]
pub struct MockZone {
    pub name: String,
    pub group: Option<String>,
    pub replicas: i32,
    pub pod: MockPod,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl MockZone {
    pub fn new(name: &str, replicas: i32, pod: MockPod) -> MockZone {
        MockZone {
            name: name.to_string(),
            group: None,
            replicas,
            pod,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        }
    }
    pub fn group(mut self, group: &str) -> MockZone {
        self.group = Some(group.to_string());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> MockZone {
        self.labels.insert(k.to_string(), v.to_string());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> MockZone {
        self.annotations.insert(k.to_string(), v.to_string());
        self
    }
    /// Labels and annotations that make the prepare-downscale webhook call the mock pods' prepare endpoint.
    pub fn prepare_downscale(self) -> MockZone {
        self.label("grafana.com/prepare-downscale", "true")
            .annotation("grafana.com/prepare-downscale-http-path", "prepare-downscale")
            .annotation("grafana.com/prepare-downscale-http-port", &MOCK_PORT.to_string())
    }

    fn statefulset(&self, node_selector: Option<BTreeMap<String, String>>) -> Value {
        let mut labels = self.labels.clone();
        if let Some(g) = &self.group {
            labels.insert("rollout-group".to_string(), g.clone());
        }
        let mut pod_labels =
            BTreeMap::from([("name".to_string(), self.name.clone()), ("e2e-mock".to_string(), "true".to_string())]);
        if let Some(g) = &self.group {
            pod_labels.insert("rollout-group".to_string(), g.clone());
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": self.name, "labels": labels, "annotations": self.annotations},
            "spec": {
                "replicas": self.replicas,
                "serviceName": self.name,
                "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "OnDelete"},
                "selector": {"matchLabels": {"name": self.name}},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "nodeSelector": node_selector,
                        "securityContext": {"runAsUser": 65532, "runAsGroup": 65532},
                        "containers": [self.pod.container()],
                    },
                },
            },
        })
    }

    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.name},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": true,
                "selector": {"name": self.name},
                "ports": [{"name": "http", "port": MOCK_PORT, "targetPort": MOCK_PORT}],
            },
        })
    }
}

/// One pod as the tests judge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub name: String,
    pub uid: String,
    /// The `VERSION` env of its container: which template it was created from.
    pub version: String,
    pub ready: bool,
    pub terminating: bool,
    /// The container is crash-looping or has restarted.
    pub restarts: i32,
}

impl PodState {
    pub fn of(pod: &Pod) -> PodState {
        let version = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == "VERSION"))
            .and_then(|e| e.value.clone())
            .unwrap_or_default();
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.restart_count)
            .unwrap_or(0);
        PodState {
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            version,
            ready: is_ready(pod),
            terminating: is_terminating(pod),
            restarts,
        }
    }
}

/// One consistent observation of a rollout group.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub zones: Vec<ZoneView>,
}

#[derive(Debug, Clone)]
pub struct ZoneView {
    pub name: String,
    pub replicas: i32,
    pub pods: Vec<PodState>,
}

impl ZoneView {
    /// A zone is disrupted when one of its desired pods is missing, not ready, or terminating.
    pub fn disrupted(&self) -> bool {
        let live = self.pods.iter().filter(|p| p.ready && !p.terminating).count();
        (live as i32) < self.replicas || self.pods.iter().any(|p| p.terminating || !p.ready)
    }
    /// Every desired pod exists, is ready, not terminating, and runs `version`.
    pub fn all_ready_at(&self, version: &str) -> bool {
        self.pods.len() as i32 == self.replicas
            && self.pods.iter().all(|p| p.ready && !p.terminating && p.version == version)
    }
    pub fn pod(&self, ordinal: usize) -> Option<&PodState> {
        let name = format!("{}-{ordinal}", self.name);
        self.pods.iter().find(|p| p.name == name)
    }
}

impl GroupView {
    pub fn zone(&self, name: &str) -> &ZoneView {
        self.zones.iter().find(|z| z.name == name).unwrap_or_else(|| panic!("zone {name} not observed"))
    }
    /// One zone at a time (guarantee 1 of docs/contributing/design.md) as seen from outside: at most one zone of the
    /// group is disrupted.
    pub fn assert_one_zone_at_a_time(&self) {
        let disrupted: Vec<&str> = self.zones.iter().filter(|z| z.disrupted()).map(|z| z.name.as_str()).collect();
        assert!(disrupted.len() <= 1, "two zones of the group are disrupted at once: {disrupted:?}\n{self:#?}");
    }
    pub fn all_ready_at(&self, version: &str) -> bool {
        self.zones.iter().all(|z| z.all_ready_at(version))
    }
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Errors worth retrying in a poll: the API server or a webhook briefly unavailable, a conflict.
pub fn transient<T>(e: KubeError) -> Result<Option<T>, KubeError> {
    match &e {
        KubeError::Api(s) if s.code == 409 || s.code == 429 || s.code >= 500 => Ok(None),
        KubeError::Api(_) => Err(e),
        _ => Ok(None),
    }
}

/// Polls `f` until it yields `Some`, failing the test after `deadline` (or at once on a non-transient error).
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, KubeError>>,
{
    let start = Instant::now();
    let mut last_error = None;
    loop {
        match f().await {
            Ok(Some(v)) => return v,
            Ok(None) => {}
            Err(e) => match transient::<T>(e) {
                Ok(_) => {}
                Err(e) => last_error = Some(e.to_string()),
            },
        }
        if start.elapsed() > deadline {
            panic!("gave up after {deadline:?} waiting for {what} (last error: {last_error:?})");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Like [`wait_for`], where `f` already maps transient errors to `Ok(None)`.
pub async fn retry<T, F, Fut>(what: &str, deadline: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, KubeError>>,
{
    wait_for(what, deadline, f).await
}

/// Repeats a write while the API server or a webhook is briefly unavailable (e.g. while the operator restarts,
/// the webhooks with failurePolicy Fail reject every StatefulSet update); other errors fail the test.
pub async fn retry_write<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, KubeError>>,
{
    let start = Instant::now();
    loop {
        match f().await {
            Ok(v) => return v,
            Err(KubeError::Api(s)) if (s.code >= 500 || s.code == 409 || s.code == 429) && start.elapsed() < WAIT => {
                eprintln!("retrying {what}: {} ({})", s.message, s.code);
            }
            Err(e) => panic!("{what} failed: {e}"),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The message of an API error (an admission denial's reason), or the test fails because the call succeeded.
pub fn denial<T: std::fmt::Debug>(what: &str, result: Result<T, KubeError>) -> String {
    match result {
        Ok(v) => panic!("{what} was allowed, expected a denial: {v:?}"),
        Err(KubeError::Api(s)) => s.message.clone(),
        Err(e) => panic!("{what} failed, but not with an API denial: {e}"),
    }
}

/// Dry-run patch parameters (`?dryRun=All`).
pub fn dry_run() -> PatchParams {
    PatchParams { dry_run: true, ..PatchParams::default() }
}

/// Runs one scenario on a fresh runtime, one scenario at a time in this process: the scenarios share one operator
/// and some restart or reconfigure it.
pub fn scenario<F: Future<Output = ()>>(f: F) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    runtime.block_on(f);
}
