//! Eviction load benchmark: a burst of concurrent evictions over one ZoneAwarePodDisruptionBudget,
//! decided by the real `/admission/pod-eviction` handler (the real router, driven in process) against an in-memory
//! API server that takes a fixed time to answer each request. A bench binary printing figures, and a checker: every
//! answer is judged against the committed outcome, and the binary exits non-zero when one is wrong.
//!
//! The world: 3 zones x 100 pods (one StatefulSet per zone, all pods running and ready), one budget with
//! `maxUnavailable: 1`, first in zone mode, then in partition mode (partition = the pod's ordinal). A burst of 500
//! evictions, all started at once, each of a pod drawn at random from the group's (so some pods are evicted twice
//! or more, as by overlapping drains). The API server commits an allowed eviction at once (the pod becomes
//! terminating, so unavailable), as a real one does right after admission; nothing becomes ready again during the
//! burst, so the unavailable pods only grow and the final state is the worst one.
//!
//! Printed per run: p50/p90/p99/max webhook latency, API requests per eviction (mean, max, by kind), the answers by
//! outcome (the `rollout_operator_zpdb_eviction_requests_total` pairs) and by code. Then requests per eviction for
//! bursts of 50, 500 and 2000 in both modes, to show they do not grow with the burst.
//!
//! Checked (exit status 1 with the reasons when any fails): no budget exceeded (zone mode: the evicted pods all in
//! one zone and at most `maxUnavailable`; partition mode: at most `maxUnavailable` per partition); as many allowed
//! as the budget permits (zone mode: exactly `maxUnavailable`; partition mode: exactly one in every partition that
//! was asked for); every denial a 429; no eviction intent left on a pod that was not evicted.
//!
//! Settings (environment): `ZPDB_BENCH_LATENCY_MS` (5, per API request), `ZPDB_BENCH_BURST` (500),
//! `ZPDB_BENCH_BURSTS` (`50,500,2000`, the scaling runs), `ZPDB_BENCH_PODS_PER_ZONE` (100), `ZPDB_BENCH_SEED` (1),
//! `ZPDB_BENCH_COMMIT_DELAY_MS` (0: how long after an allowed answer the API server commits the eviction),
//! `ZPDB_BENCH_DISTINCT` (0; 1: each pod evicted once before any twice, instead of drawn with repeats),
//! `ZPDB_BENCH_MODES` (both; `zone` or `partition`: that mode only, to profile it).
//! Goal: p99 under 50 ms at 5 ms per request, and requests per eviction bounded whatever the burst size.
//! Run with `cargo bench -p rollout-operator --bench zpdb_evictions`.

#[cfg(not(madsim))]
mod bench {
    use axum::body::Body;
    use http_body_util::BodyExt;
    use jiff::Timestamp;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy};
    use k8s_openapi::api::core::v1::{
        ConfigMap, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodCondition, PodStatus,
        PodTemplateSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
    use rollout_core::keys;
    use rollout_core::zpdb::{Budgets, Outcome};
    use rollout_operator::admission::router::{WebhookSettings, Webhooks, router_with_zpdb, system_clock};
    use rollout_operator::cluster::{
        ApiError, LiveReads, PodAnnotations, StatefulSetAnnotations, ZoneTrackerStore, memory,
    };
    use rollout_operator::commands::review::RecordingPods;
    use rollout_operator::zpdb::Zpdb;
    use serde_json::{Value, json};
    use std::cell::Cell;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::time::{Duration, Instant};
    use tower::ServiceExt;

    const ZONES: [&str; 3] = ["a", "b", "c"];
    const GROUP: &str = "ingester";
    const MAX_UNAVAILABLE: usize = 1;

    fn env_or(name: &str, default: u64) -> u64 {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    fn zone_of(pod: &str) -> &str {
        pod.split("-zone-").nth(1).and_then(|rest| rest.split('-').next()).unwrap_or_default()
    }

    fn partition_of(pod: &str) -> &str {
        pod.rsplit('-').next().unwrap_or_default()
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Mode {
        Zone,
        Partition,
    }

    impl Mode {
        fn name(self) -> &'static str {
            match self {
                Mode::Zone => "zone mode",
                Mode::Partition => "partition mode",
            }
        }

        fn budget(self) -> Value {
            let mut spec =
                json!({"maxUnavailable": MAX_UNAVAILABLE, "selector": {"matchLabels": {"rollout-group": GROUP}}});
            if self == Mode::Partition {
                spec["podNamePartitionRegex"] = json!("[a-z\\-]+-zone-[a-z]-([0-9]+)");
                spec["podNameRegexGroup"] = json!(1);
            }
            json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
                   "metadata": {"name": "ingester-rollout", "namespace": "ns", "uid": "uid-budget", "generation": 1},
                   "spec": spec})
        }
    }

    fn statefulset(zone: &str, replicas: i32) -> StatefulSet {
        let name = format!("{GROUP}-zone-{zone}");
        StatefulSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                generation: Some(1),
                labels: Some(BTreeMap::from([(keys::ROLLOUT_GROUP.into(), GROUP.into())])),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some(name.clone()),
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("name".into(), name.clone())])),
                    ..Default::default()
                },
                update_strategy: Some(StatefulSetUpdateStrategy {
                    type_: Some("OnDelete".into()),
                    ..Default::default()
                }),
                template: PodTemplateSpec::default(),
                ..Default::default()
            }),
            status: Some(StatefulSetStatus {
                replicas,
                ready_replicas: Some(replicas),
                current_revision: Some("r1".into()),
                update_revision: Some("r1".into()),
                observed_generation: Some(1),
                ..Default::default()
            }),
        }
    }

    fn pod(zone: &str, ordinal: usize) -> Pod {
        let sts = format!("{GROUP}-zone-{zone}");
        let name = format!("{sts}-{ordinal}");
        let since = Time("2026-01-01T00:00:00Z".parse().unwrap_or_default());
        Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(BTreeMap::from([
                    ("name".into(), sts.clone()),
                    (keys::ROLLOUT_GROUP.into(), GROUP.into()),
                    ("controller-revision-hash".into(), "r1".into()),
                ])),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: sts.clone(),
                    uid: format!("uid-{sts}"),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(since.clone()),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "main".into(),
                    ready: true,
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning { started_at: Some(since) }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[derive(Default)]
    struct Store {
        rv: u64,
        statefulsets: memory::Objects<StatefulSet>,
        pods: memory::Objects<Pod>,
    }

    /// API requests by kind, over a whole run.
    #[derive(Default)]
    struct RequestKinds {
        get_pod: AtomicU64,
        get_statefulset: AtomicU64,
        list_statefulsets: AtomicU64,
        list_pods: AtomicU64,
        patch_pod: AtomicU64,
        other: AtomicU64,
    }

    tokio::task_local! {
        /// API requests made by the eviction decided in this task.
        static REQUESTS: Cell<u32>;
    }

    /// The in-memory API server: the shared store's semantics (`cluster::memory`), with every request taking
    /// `latency` (half on the way in, half on the way out, so concurrent requests interleave at the server as over
    /// a network).
    #[derive(Clone)]
    struct SlowApi {
        store: Arc<Mutex<Store>>,
        latency: Duration,
        kinds: Arc<RequestKinds>,
    }

    impl SlowApi {
        fn new(pods_per_zone: usize, latency: Duration) -> Self {
            let mut store = Store::default();
            for zone in ZONES {
                memory::put(&mut store.statefulsets, &mut store.rv, &statefulset(zone, pods_per_zone as i32));
                for ordinal in 0..pods_per_zone {
                    memory::put(&mut store.pods, &mut store.rv, &pod(zone, ordinal));
                }
            }
            SlowApi { store: Arc::new(Mutex::new(store)), latency, kinds: Arc::default() }
        }

        fn store(&self) -> MutexGuard<'_, Store> {
            self.store.lock().unwrap_or_else(|e| e.into_inner())
        }

        async fn request<T>(&self, kind: &AtomicU64, served: impl FnOnce(&mut Store) -> T) -> T {
            kind.fetch_add(1, Ordering::Relaxed);
            let _ = REQUESTS.try_with(|n| n.set(n.get() + 1));
            let answered = tokio::time::Instant::now() + self.latency;
            tokio::time::sleep(self.latency / 2).await;
            let out = served(&mut self.store());
            tokio::time::sleep_until(answered).await;
            out
        }

        /// What the API server does once every admission webhook allowed an eviction: the pod starts terminating
        /// (not counted as a request of the handler). False when it was already terminating or gone.
        fn commit_eviction(&self, name: &str) -> bool {
            let mut store = self.store();
            let Store { rv, pods, .. } = &mut *store;
            let Some(current) = pods.get(name) else { return false };
            if current.metadata.deletion_timestamp.is_some() {
                return false;
            }
            let mut evicted = current.clone();
            evicted.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
            memory::put(pods, rv, &evicted);
            true
        }
    }

    impl LiveReads for SlowApi {
        async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
            Ok(self.request(&self.kinds.get_statefulset, |s| s.statefulsets.get(name).cloned()).await)
        }

        async fn get_deployment(&self, _: &str) -> Result<Option<Deployment>, ApiError> {
            Ok(self.request(&self.kinds.other, |_| None).await)
        }

        async fn get_replicaset(&self, _: &str) -> Result<Option<ReplicaSet>, ApiError> {
            Ok(self.request(&self.kinds.other, |_| None).await)
        }

        async fn list_statefulsets(&self, selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
            Ok(self.request(&self.kinds.list_statefulsets, |s| memory::list(&s.statefulsets, selector)).await)
        }

        async fn list_pods(&self, selector: &str) -> Result<Vec<Pod>, ApiError> {
            Ok(self.request(&self.kinds.list_pods, |s| memory::list(&s.pods, selector)).await)
        }

        async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
            Ok(self.request(&self.kinds.get_pod, |s| s.pods.get(name).cloned()).await)
        }
    }

    impl PodAnnotations for SlowApi {
        async fn patch_pod_annotations(
            &self,
            name: &str,
            uid: &str,
            changes: &BTreeMap<String, Option<String>>,
        ) -> Result<Pod, ApiError> {
            self.request(&self.kinds.patch_pod, |s| {
                let Store { rv, pods, .. } = s;
                memory::patch_annotations_of_uid(pods, rv, "pods", name, uid, changes)
            })
            .await
        }
    }

    /// Not used here (pods can be patched): answered, counted.
    impl StatefulSetAnnotations for SlowApi {
        async fn merge_statefulset_annotations(
            &self,
            name: &str,
            changes: &BTreeMap<String, Option<String>>,
        ) -> Result<StatefulSet, ApiError> {
            self.request(&self.kinds.other, |s| {
                let Store { rv, statefulsets, .. } = s;
                memory::patch_annotations_of_uid(statefulsets, rv, "statefulsets.apps", name, "", changes)
            })
            .await
        }
    }

    /// Not used by the eviction webhook: answered, counted, never written.
    impl ZoneTrackerStore for SlowApi {
        async fn get_config_map(&self, _: &str) -> Result<Option<ConfigMap>, ApiError> {
            Ok(self.request(&self.kinds.other, |_| None).await)
        }

        async fn create_config_map(&self, _: &ConfigMap) -> Result<ConfigMap, ApiError> {
            Err(self.request(&self.kinds.other, |_| forbidden()).await)
        }

        async fn replace_config_map(&self, _: &ConfigMap) -> Result<ConfigMap, ApiError> {
            Err(self.request(&self.kinds.other, |_| forbidden()).await)
        }

        async fn patch_statefulset_annotations(
            &self,
            _: &str,
            _: &str,
            _: &BTreeMap<String, String>,
        ) -> Result<StatefulSet, ApiError> {
            Err(self.request(&self.kinds.other, |_| forbidden()).await)
        }
    }

    fn forbidden() -> ApiError {
        ApiError::Forbidden("not granted in this benchmark".into())
    }

    /// A small deterministic generator (xorshift64*), so a seed names a burst.
    struct Draw(u64);

    impl Draw {
        fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % below.max(1)
        }
    }

    fn eviction_review(n: usize, pod: &str) -> Vec<u8> {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": format!("eviction-{n}"), "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
            "name": pod, "namespace": "ns", "operation": "CREATE", "userInfo": {"username": "kubectl-drain"},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "ns"}}}});
        serde_json::to_vec(&review).unwrap_or_default()
    }

    /// One eviction as the evicting client saw it.
    struct Answer {
        pod: String,
        latency: Duration,
        requests: u32,
        allowed: bool,
        /// `status.code` of a denial; 200 when allowed.
        code: u64,
        message: String,
        /// The API server's commit made the pod terminating (it was running before).
        disrupted: bool,
        /// The handler's answer could not be read (not an AdmissionReview, HTTP error).
        broken: Option<String>,
    }

    struct Run {
        mode: Mode,
        burst: usize,
        answers: Vec<Answer>,
        wall: Duration,
        kinds: Vec<(&'static str, u64)>,
        outcomes: Vec<(Outcome, u64)>,
        problems: Vec<String>,
    }

    impl Run {
        fn latencies(&self) -> Vec<Duration> {
            let mut l: Vec<Duration> = self.answers.iter().map(|a| a.latency).collect();
            l.sort();
            l
        }

        fn percentile(&self, p: f64) -> Duration {
            let l = self.latencies();
            l.get(((l.len() as f64 * p).ceil() as usize).saturating_sub(1).min(l.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        }

        fn requests_mean(&self) -> f64 {
            let total: u64 = self.answers.iter().map(|a| u64::from(a.requests)).sum();
            total as f64 / self.answers.len().max(1) as f64
        }

        fn requests_max(&self) -> u32 {
            self.answers.iter().map(|a| a.requests).max().unwrap_or_default()
        }

        fn evicted(&self) -> usize {
            self.answers.iter().filter(|a| a.disrupted).count()
        }
    }

    async fn evict(app: axum::Router, api: SlowApi, n: usize, pod: String, commit_delay: Duration) -> Answer {
        let body = eviction_review(n, &pod);
        let started = Instant::now();
        let request = http::Request::post("/admission/pod-eviction")
            .header("content-type", "application/json")
            .body(Body::from(body));
        let answered = REQUESTS
            .scope(Cell::new(0), async move {
                let response = match request {
                    Ok(request) => app.oneshot(request).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                let read = match response {
                    Ok(response) if response.status() == 200 => {
                        response.into_body().collect().await.map(|b| b.to_bytes()).map_err(|e| e.to_string())
                    }
                    Ok(response) => Err(format!("HTTP {}", response.status())),
                    Err(e) => Err(e),
                };
                (read, REQUESTS.with(Cell::get))
            })
            .await;
        let latency = started.elapsed();
        let (read, requests) = answered;
        let review: Result<Value, String> =
            read.and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()));
        let mut answer = Answer {
            pod,
            latency,
            requests,
            allowed: false,
            code: 0,
            message: String::new(),
            disrupted: false,
            broken: None,
        };
        match review {
            Err(e) => answer.broken = Some(e),
            Ok(review) => {
                let response = &review["response"];
                answer.allowed = response["allowed"] == true;
                answer.code = if answer.allowed { 200 } else { response["status"]["code"].as_u64().unwrap_or(0) };
                answer.message = response["status"]["message"].as_str().unwrap_or_default().to_string();
                if answer.allowed {
                    tokio::time::sleep(commit_delay).await;
                    answer.disrupted = api.commit_eviction(&answer.pod);
                }
            }
        }
        answer
    }

    /// The world's settings for one run.
    #[derive(Clone, Copy)]
    struct World {
        pods_per_zone: usize,
        latency: Duration,
        commit_delay: Duration,
        seed: u64,
        /// Each pod evicted once before any is evicted twice (else drawn at random, with repeats).
        distinct: bool,
    }

    async fn run(mode: Mode, burst: usize, world: World) -> Run {
        let World { pods_per_zone, latency, commit_delay, seed, .. } = world;
        let api = SlowApi::new(pods_per_zone, latency);
        let (budgets, invalid) = Budgets::from_objects([&mode.budget()]);
        let mut problems: Vec<String> = invalid.iter().map(|i| format!("the budget is not valid: {i:?}")).collect();
        let zpdb = Zpdb::with_budgets(budgets);
        let app = router_with_zpdb(
            Webhooks {
                api: api.clone(),
                pods: RecordingPods::default(),
                settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)),
                clock: system_clock(),
            },
            zpdb.clone(),
        );
        let names: Vec<String> =
            ZONES.iter().flat_map(|z| (0..pods_per_zone).map(move |i| format!("{GROUP}-zone-{z}-{i}"))).collect();
        let mut draw = Draw(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let chosen: Vec<String> = if world.distinct {
            // Each pod once before any twice (a shuffled cycle): no two evictions of one pod at the same time
            // while the burst is no larger than the group.
            let mut shuffled = names.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, draw.next(i + 1));
            }
            shuffled.iter().cycle().take(burst).cloned().collect()
        } else {
            (0..burst).map(|_| names[draw.next(names.len())].clone()).collect()
        };
        let started = Instant::now();
        let tasks: Vec<_> = chosen
            .iter()
            .enumerate()
            .map(|(n, pod)| tokio::spawn(evict(app.clone(), api.clone(), n, pod.clone(), commit_delay)))
            .collect();
        let mut answers = Vec::with_capacity(burst);
        for task in tasks {
            match task.await {
                Ok(answer) => answers.push(answer),
                Err(e) => problems.push(format!("an eviction task failed: {e}")),
            }
        }
        let wall = started.elapsed();
        let k = &api.kinds;
        let kinds = vec![
            ("get pod", k.get_pod.load(Ordering::Relaxed)),
            ("get statefulset", k.get_statefulset.load(Ordering::Relaxed)),
            ("list statefulsets", k.list_statefulsets.load(Ordering::Relaxed)),
            ("list pods", k.list_pods.load(Ordering::Relaxed)),
            ("patch pod", k.patch_pod.load(Ordering::Relaxed)),
            ("other", k.other.load(Ordering::Relaxed)),
        ];
        let outcomes: Vec<(Outcome, u64)> = Outcome::ALL
            .iter()
            .map(|o| (*o, zpdb.metrics.evictions(o.reason, o.status)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let mut run = Run { mode, burst, answers, wall, kinds, outcomes, problems };
        check(&mut run, &api, &chosen);
        run
    }

    /// Judges every answer against the committed outcome.
    fn check(run: &mut Run, api: &SlowApi, chosen: &[String]) {
        let mut problems = Vec::new();
        for a in &run.answers {
            if let Some(why) = &a.broken {
                problems.push(format!("{}: no answer could be read: {why}", a.pod));
            } else if !a.allowed && a.code != 429 {
                problems.push(format!(
                    "{}: denied with {} ({}), expected 429 in a fault-free burst",
                    a.pod, a.code, a.message
                ));
            }
        }
        // The committed state: terminating pods only ever grow during the burst, so the final state is the worst.
        let store = api.store();
        let now = Timestamp::now();
        let evicted: BTreeSet<String> = store
            .pods
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let committed: BTreeSet<String> = run.answers.iter().filter(|a| a.disrupted).map(|a| a.pod.clone()).collect();
        if evicted != committed {
            problems.push(format!("terminating pods {evicted:?} differ from the evictions committed {committed:?}"));
        }
        let intents_left: Vec<&str> = store
            .pods
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let intent = p.metadata.annotations.as_ref().and_then(|a| a.get(keys::EVICTION_INTENT));
                intent.and_then(|v| v.parse::<Timestamp>().ok()).is_some_and(|until| until > now)
            })
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        if !intents_left.is_empty() {
            problems.push(format!("live eviction intents left on pods not evicted: {intents_left:?}"));
        }
        drop(store);
        match run.mode {
            Mode::Zone => {
                let zones: BTreeSet<&str> = evicted.iter().map(|p| zone_of(p)).collect();
                if zones.len() > 1 {
                    problems.push(format!("budget exceeded: pods evicted in zones {zones:?}: {evicted:?}"));
                }
                if evicted.len() > MAX_UNAVAILABLE {
                    problems.push(format!("budget exceeded: {} pods evicted: {evicted:?}", evicted.len()));
                }
                // Every zone was asked for more pods than the budget allows (in bursts of any useful size).
                if evicted.len() < MAX_UNAVAILABLE.min(chosen.iter().collect::<BTreeSet<_>>().len()) {
                    problems.push(format!(
                        "too few allowed: {} pods evicted where the budget permits {MAX_UNAVAILABLE}",
                        evicted.len()
                    ));
                }
            }
            Mode::Partition => {
                let mut per_partition: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                for p in &evicted {
                    per_partition.entry(partition_of(p)).or_default().push(p);
                }
                for (partition, pods) in &per_partition {
                    if pods.len() > MAX_UNAVAILABLE {
                        let asked: Vec<String> = run
                            .answers
                            .iter()
                            .filter(|a| partition_of(&a.pod) == *partition)
                            .map(|a| format!("{} {} {:?}", a.pod, a.code, a.message))
                            .collect();
                        problems
                            .push(format!("budget exceeded in partition {partition}: {pods:?}; answers: {asked:?}"));
                    }
                }
                let asked: BTreeSet<&str> = chosen.iter().map(|p| partition_of(p)).collect();
                let starved: Vec<&&str> = asked.iter().filter(|p| !per_partition.contains_key(**p)).collect();
                if !starved.is_empty() {
                    problems.push(format!(
                        "too few allowed: no eviction went through in partitions {starved:?}, though each was asked \
                         for and the budget permits one"
                    ));
                }
            }
        }
        run.problems.extend(problems);
    }

    fn ms(d: Duration) -> String {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }

    fn report(run: &Run, latency: Duration) {
        println!(
            "{}: burst of {} evictions, {} API latency per request, wall {}",
            run.mode.name(),
            run.burst,
            ms(latency),
            ms(run.wall)
        );
        println!(
            "  webhook latency: p50 {}, p90 {}, p99 {}, max {}",
            ms(run.percentile(0.50)),
            ms(run.percentile(0.90)),
            ms(run.percentile(0.99)),
            ms(run.percentile(1.0))
        );
        let by_kind: Vec<String> = run.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "  API requests per eviction: mean {:.2}, max {} (in all: {})",
            run.requests_mean(),
            run.requests_max(),
            by_kind.join(", ")
        );
        let outcomes: Vec<String> =
            run.outcomes.iter().map(|(o, n)| format!("{}/{} {n}", o.reason, o.status)).collect();
        println!("  outcomes: {}", outcomes.join(", "));
        let mut codes: BTreeMap<(bool, u64), usize> = BTreeMap::new();
        for a in &run.answers {
            *codes.entry((a.allowed, a.code)).or_default() += 1;
        }
        let codes: Vec<String> = codes
            .iter()
            .map(|((allowed, code), n)| format!("{} {code}: {n}", if *allowed { "allowed" } else { "denied" }))
            .collect();
        println!("  answers: {}; pods evicted (committed): {}", codes.join(", "), run.evicted());
        println!(
            "  check: {}",
            if run.problems.is_empty() {
                "every answer correct".to_string()
            } else {
                format!("{} WRONG", run.problems.len())
            }
        );
    }

    pub fn main() -> i32 {
        let latency = Duration::from_millis(env_or("ZPDB_BENCH_LATENCY_MS", 5));
        let burst = env_or("ZPDB_BENCH_BURST", 500) as usize;
        let pods_per_zone = env_or("ZPDB_BENCH_PODS_PER_ZONE", 100) as usize;
        let seed = env_or("ZPDB_BENCH_SEED", 1);
        let commit_delay = Duration::from_millis(env_or("ZPDB_BENCH_COMMIT_DELAY_MS", 0));
        let distinct = env_or("ZPDB_BENCH_DISTINCT", 0) == 1;
        let world = World { pods_per_zone, latency, commit_delay, seed, distinct };
        let bursts: Vec<usize> = std::env::var("ZPDB_BENCH_BURSTS")
            .unwrap_or_else(|_| "50,500,2000".into())
            .split(',')
            .filter_map(|b| b.trim().parse().ok())
            .collect();
        let modes: Vec<Mode> = match std::env::var("ZPDB_BENCH_MODES").as_deref() {
            Ok("zone") => vec![Mode::Zone],
            Ok("partition") => vec![Mode::Partition],
            _ => vec![Mode::Zone, Mode::Partition],
        };
        let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("cannot start a runtime: {e}");
                return 2;
            }
        };
        println!(
            "zpdb_evictions: /admission/pod-eviction (real router) over 3 zones x {pods_per_zone} pods, maxUnavailable \
             {MAX_UNAVAILABLE}, in-memory API at {} per request, evictions committed {} after their answer, seed {seed}",
            ms(latency),
            ms(commit_delay)
        );
        let mut wrong = Vec::new();
        runtime.block_on(async {
            for &mode in &modes {
                let run = run(mode, burst, world).await;
                report(&run, latency);
                wrong.extend(run.problems.iter().map(|p| format!("{} burst {}: {p}", mode.name(), burst)));
            }
            println!("API requests per eviction by burst size:");
            println!(
                "  {:<15} {:>6} {:>6} {:>5} {:>10} {:>8} {:>7}",
                "mode", "burst", "mean", "max", "p99", "evicted", "check"
            );
            for &mode in &modes {
                for &size in &bursts {
                    let run = run(mode, size, world).await;
                    println!(
                        "  {:<15} {:>6} {:>6.2} {:>5} {:>10} {:>8} {:>7}",
                        mode.name(),
                        size,
                        run.requests_mean(),
                        run.requests_max(),
                        ms(run.percentile(0.99)),
                        run.evicted(),
                        if run.problems.is_empty() { "ok" } else { "WRONG" }
                    );
                    wrong.extend(run.problems.iter().map(|p| format!("{} burst {size}: {p}", mode.name())));
                }
            }
        });
        if wrong.is_empty() {
            println!("every answer correct");
            0
        } else {
            for w in &wrong {
                eprintln!("WRONG: {w}");
            }
            1
        }
    }
}

#[cfg(not(madsim))]
fn main() {
    std::process::exit(bench::main());
}

/// The benchmark runs on real time and a real runtime; a `--cfg madsim` build has neither.
#[cfg(madsim)]
fn main() {}
