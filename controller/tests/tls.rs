//! The webhook certificate: the Secret lifecycle over the fake API server, and real HTTPS on 127.0.0.1 with a
//! client that trusts only the CA from the Secret, through a forced renewal that never closes the listener.
#![cfg(not(madsim))]

mod support;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use rollout_core::certificate::service_dns_names;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router, system_clock};
use rollout_operator::ops::feature_gate::{FeatureGates, Gate};
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use rollout_operator::tls::certificate::{CertBundle, SelfSignedSettings, TlsError};
use rollout_operator::tls::listener::{SwappableCert, serve, server_config};
use rollout_operator::tls::secret::ensure_self_signed;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::{Call, FakeCluster};
use tokio::net::TcpStream;

const SECRET: &str = "rollout-operator-self-signed-certificate";

fn settings() -> SelfSignedSettings {
    SelfSignedSettings {
        organization: "Grafana Labs".into(),
        dns_names: service_dns_names("rollout-operator", "ns", "cluster.local.", ""),
        required_dns_names: vec!["rollout-operator.ns.svc".into()],
        validity: Duration::from_secs(365 * 24 * 3600),
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[tokio::test]
async fn the_secret_is_created_then_reused_then_renewed_after_two_thirds_of_the_lifetime() {
    install_provider();
    let cluster = FakeCluster::default();
    let t0 = ts("2026-01-01T00:00:00Z");
    let first = ensure_self_signed(&cluster, SECRET, "ns", &settings(), t0).await.expect("created");
    let secret = cluster.secret(SECRET).expect("stored");
    let data = secret.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["ca", "cert", "key"]);
    assert_eq!(String::from_utf8_lossy(&data["ca"].0), first.ca_pem);
    assert!(first.facts[0].dns_names.contains(&"rollout-operator.ns.svc".to_string()));
    assert!(first.facts[0].dns_names.contains(&"rollout-operator.ns.svc.cluster.local".to_string()));

    // Reused while valid: no write.
    cluster.take_calls();
    let again = ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-08-01T00:00:00Z")).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(cluster.calls(), []);

    // Past two thirds of 365 days (243.3 days, 2026-09-01T08:00:00Z): replaced, conditionally.
    let due = ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-09-01T07:59:59Z")).await.unwrap();
    assert_eq!(due, first);
    let renewed = ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-09-01T08:00:00Z")).await.unwrap();
    assert_ne!(renewed.ca_pem, first.ca_pem);
    assert_eq!(cluster.calls(), [Call::ReplaceSecret { name: SECRET.into() }]);
    assert_eq!(String::from_utf8_lossy(&cluster.secret(SECRET).unwrap().data.unwrap()["cert"].0), renewed.cert_pem);

    // A changed Service name (DNS names) replaces it too.
    let mut other = settings();
    other.dns_names = service_dns_names("webhooks", "ns", "cluster.local.", "");
    other.required_dns_names = vec!["webhooks.ns.svc".into()];
    let moved = ensure_self_signed(&cluster, SECRET, "ns", &other, ts("2026-09-01T08:00:01Z")).await.unwrap();
    assert!(moved.facts[0].dns_names.contains(&"webhooks.ns.svc".to_string()));
}

#[tokio::test]
async fn a_secret_missing_a_key_is_an_error_naming_it() {
    install_provider();
    let cluster = FakeCluster::default();
    ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-01-01T00:00:00Z")).await.unwrap();
    let mut secret = cluster.secret(SECRET).unwrap();
    secret.data.as_mut().unwrap().remove("key");
    use rollout_operator::cluster::CertificateStore;
    cluster.replace_secret(&secret).await.unwrap();
    let err = ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-01-02T00:00:00Z")).await.unwrap_err();
    assert!(matches!(err, TlsError::MissingKey { key: "key", .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("secret \"{SECRET}\" in namespace \"ns\" does not contain a key key, delete the secret and try again")
    );
    // An empty secret is filled.
    secret.data = Some(Default::default());
    secret.metadata.resource_version = None;
    cluster.replace_secret(&secret).await.unwrap();
    let filled = ensure_self_signed(&cluster, SECRET, "ns", &settings(), ts("2026-01-02T00:00:00Z")).await.unwrap();
    let stored = cluster.secret(SECRET).unwrap().data.unwrap();
    assert_eq!(stored["cert"], ByteString(filled.cert_pem.into_bytes()));
}

#[derive(Clone)]
struct NoPods;

impl PodHttpClient for NoPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        Err(PodCallError::Connect { method: request.method.as_str(), url: request.url, message: "no pods here".into() })
    }
}

fn client_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Opens a keep-alive HTTPS connection to `addr`, checking the server's certificate for `name` against `ca_pem`.
async fn connect(addr: std::net::SocketAddr, ca_pem: &str, name: &str) -> Result<Sender, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let connector = tokio_rustls::TlsConnector::from(client_config(ca_pem));
    let tls = connector
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn no_downscale(sender: &mut Sender, uid: &str) -> Value {
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": uid,
        "resource": {"resource": "statefulsets"}, "name": "a", "namespace": "ns", "object": null, "oldObject": null}});
    let request = http::Request::post("/admission/no-downscale")
        .header("content-type", "application/json")
        .header("host", "rollout-operator.ns.svc")
        .body(Full::new(Bytes::from(serde_json::to_vec(&review).unwrap())))
        .unwrap();
    let response = sender.send_request(request).await.expect("a response");
    assert_eq!(response.status(), 200);
    serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

#[tokio::test]
async fn https_with_the_secrets_ca_and_a_hot_swapped_renewal() {
    install_provider();
    let cluster = FakeCluster::default();
    // Issued 250 days ago: still valid, but two thirds of its lifetime have passed.
    let issued = Timestamp::now().checked_sub(jiff::SignedDuration::from_hours(24 * 250)).unwrap();
    let first: CertBundle = ensure_self_signed(&cluster, SECRET, "ns", &settings(), issued).await.unwrap();
    let ca_from_secret = String::from_utf8(cluster.secret(SECRET).unwrap().data.unwrap()["ca"].0.clone()).unwrap();
    let cert = SwappableCert::new(&first).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: NoPods,
        settings: WebhookSettings::new("ns", "cluster.local.", Some("zone-tracker"), Duration::from_secs(10)),
        clock: system_clock(),
    });
    let server = tokio::spawn(serve(listener, server_config(cert.clone()).unwrap(), app, Duration::from_secs(10)));

    // A client trusting only the Secret's CA, checking the Service name.
    let mut kept = connect(addr, &ca_from_secret, "rollout-operator.ns.svc").await.expect("trusted");
    assert_eq!(no_downscale(&mut kept, "u1").await["response"]["uid"], "u1");
    // A wrong name is refused.
    let Err(err) = connect(addr, &ca_from_secret, "other.ns.svc").await else { panic!("a wrong name must be refused") };
    assert!(err.contains("TLS"), "{err}");

    // Renewal now, swapped into the running listener.
    let renewed = ensure_self_signed(&cluster, SECRET, "ns", &settings(), Timestamp::now()).await.unwrap();
    assert_ne!(renewed.ca_pem, first.ca_pem);
    cert.swap(&renewed).unwrap();

    // The next connection sees the new certificate: only the new CA verifies it.
    let new_ca = String::from_utf8(cluster.secret(SECRET).unwrap().data.unwrap()["ca"].0.clone()).unwrap();
    assert_eq!(new_ca, renewed.ca_pem);
    let mut fresh = connect(addr, &new_ca, "rollout-operator.ns.svc").await.expect("the renewed certificate");
    assert_eq!(no_downscale(&mut fresh, "u2").await["response"]["uid"], "u2");
    assert!(connect(addr, &ca_from_secret, "rollout-operator.ns.svc").await.is_err(), "the old CA no longer verifies");
    // The listener never closed: the connection opened before the renewal still serves.
    assert_eq!(no_downscale(&mut kept, "u3").await["response"]["uid"], "u3");
    assert!(!server.is_finished());
    server.abort();
}

// ---- CA bundle injection ----------------------------------------------------------------------------------------

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_operator::cluster::{ApiError, WebhookConfiguration, WebhookKind};
use rollout_operator::tls::injector::run_ca_injector;
use std::collections::BTreeMap;

fn labels(namespace: &str) -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::from([
        ("grafana.com/inject-rollout-operator-ca".to_string(), "true".to_string()),
        ("grafana.com/namespace".to_string(), namespace.to_string()),
    ]))
}

fn validating(name: &str, labels: Option<BTreeMap<String, String>>, entries: &[&str]) -> WebhookConfiguration {
    WebhookConfiguration::Validating(ValidatingWebhookConfiguration {
        metadata: ObjectMeta { name: Some(name.into()), labels, ..Default::default() },
        webhooks: Some(
            entries
                .iter()
                .map(|e| ValidatingWebhook {
                    name: e.to_string(),
                    admission_review_versions: vec!["v1".into()],
                    side_effects: "None".into(),
                    client_config: WebhookClientConfig { ca_bundle: None, ..Default::default() },
                    ..Default::default()
                })
                .collect(),
        ),
    })
}

fn mutating(name: &str) -> WebhookConfiguration {
    WebhookConfiguration::Mutating(MutatingWebhookConfiguration {
        metadata: ObjectMeta { name: Some(name.into()), labels: labels("ns"), ..Default::default() },
        webhooks: Some(vec![MutatingWebhook {
            name: "prepare-downscale.grafana.com".into(),
            admission_review_versions: vec!["v1".into()],
            side_effects: "NoneOnDryRun".into(),
            client_config: WebhookClientConfig { ca_bundle: Some(ByteString(b"stale".to_vec())), ..Default::default() },
            ..Default::default()
        }]),
    })
}

fn bundles(cluster: &FakeCluster, kind: WebhookKind, name: &str) -> Vec<Option<Vec<u8>>> {
    cluster.webhook_configuration(kind, name).unwrap().ca_bundles().into_iter().map(|(_, b)| b).collect()
}

/// Polls `condition` until it holds (the injector runs on its own task); fails after a generous bound.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// A generated CA (PEM) as the injector writes it into a bundle, valid from `now`.
fn generated_ca(now: Timestamp) -> String {
    let ca = rollout_operator::tls::certificate::generate(&settings(), now).unwrap().ca_pem;
    rollout_operator::tls::certificate::bundled_cas(&ca).remove(0).pem
}

#[tokio::test]
async fn the_ca_is_injected_into_labelled_configurations_late_ones_and_again_on_rotation_with_retries() {
    let cluster = FakeCluster::default();
    cluster.put_webhook_configuration(validating("no-downscale-ns", labels("ns"), &["a.grafana.com", "b.grafana.com"]));
    cluster.put_webhook_configuration(validating("other-namespace", labels("other"), &["c.grafana.com"]));
    cluster.put_webhook_configuration(validating("unlabelled", None, &["d.grafana.com"]));
    let (ca1, ca2) = (generated_ca(Timestamp::now()), generated_ca(Timestamp::now() + Duration::from_secs(60)));
    let (ca_tx, ca_rx) = tokio::sync::watch::channel(ca1.clone());
    let (trusted_tx, trusted) = tokio::sync::watch::channel(String::new());
    let injector = tokio::spawn(run_ca_injector(
        cluster.clone(),
        "ns".into(),
        ca_rx,
        Duration::from_millis(20),
        trusted_tx,
        FeatureGates::default(),
    ));

    eventually("both entries of the labelled configuration carry the CA", || {
        bundles(&cluster, WebhookKind::Validating, "no-downscale-ns")
            == [Some(ca1.as_bytes().to_vec()), Some(ca1.as_bytes().to_vec())]
    })
    .await;
    eventually("every configuration is confirmed to trust the CA", || *trusted.borrow() == ca1).await;
    assert_eq!(bundles(&cluster, WebhookKind::Validating, "other-namespace"), [None]);
    assert_eq!(bundles(&cluster, WebhookKind::Validating, "unlabelled"), [None]);
    let patches = cluster.calls().into_iter().filter(|c| matches!(c, Call::PatchWebhook { .. })).count();
    assert_eq!(patches, 1, "one patch per configuration, not per entry");
    let Call::PatchWebhook { patch, .. } =
        cluster.calls().into_iter().find(|c| matches!(c, Call::PatchWebhook { .. })).unwrap()
    else {
        unreachable!()
    };
    assert!(patch.pointer("/metadata/resourceVersion").is_some_and(|v| v.is_string()), "conditional: {patch}");

    // A configuration created later (its stale bundle, no certificate, dropped), whose first patch fails: retried;
    // the CA is not confirmed until it is in.
    cluster.fail_next(ApiError::Unavailable("connection reset".into()));
    cluster.put_webhook_configuration(mutating("prepare-downscale-ns"));
    eventually("the late configuration is patched after a retry", || {
        bundles(&cluster, WebhookKind::Mutating, "prepare-downscale-ns") == [Some(ca1.as_bytes().to_vec())]
    })
    .await;

    // CA rotation: everything is patched again, the earlier CA kept after the new one (a replica may still serve a
    // certificate it signed), and the new one confirmed once everywhere.
    ca_tx.send(ca2.clone()).unwrap();
    let both = format!("{ca2}{ca1}").into_bytes();
    eventually("the rotated CA reaches every configuration beside the earlier one", || {
        bundles(&cluster, WebhookKind::Mutating, "prepare-downscale-ns") == [Some(both.clone())]
            && bundles(&cluster, WebhookKind::Validating, "no-downscale-ns") == [Some(both.clone()), Some(both.clone())]
    })
    .await;
    eventually("the rotated CA is confirmed", || *trusted.borrow() == ca2).await;

    // Someone removes the bundle: the update event puts the current CA back.
    cluster.put_webhook_configuration(validating("no-downscale-ns", labels("ns"), &["a.grafana.com"]));
    eventually("a removed bundle is restored", || {
        bundles(&cluster, WebhookKind::Validating, "no-downscale-ns") == [Some(ca2.as_bytes().to_vec())]
    })
    .await;
    injector.abort();
}

/// A port whose webhook configuration watches are refused (403): a Role without the ClusterRole's grant.
#[derive(Clone)]
struct RefusedWebhookWatches(FakeCluster);

impl rollout_operator::cluster::CertificateStore for RefusedWebhookWatches {
    async fn get_secret(&self, name: &str) -> Result<Option<k8s_openapi::api::core::v1::Secret>, ApiError> {
        self.0.get_secret(name).await
    }

    async fn create_secret(
        &self,
        secret: &k8s_openapi::api::core::v1::Secret,
    ) -> Result<k8s_openapi::api::core::v1::Secret, ApiError> {
        self.0.create_secret(secret).await
    }

    async fn replace_secret(
        &self,
        secret: &k8s_openapi::api::core::v1::Secret,
    ) -> Result<k8s_openapi::api::core::v1::Secret, ApiError> {
        self.0.replace_secret(secret).await
    }

    fn watch_webhook_configurations(
        &self,
        _kind: WebhookKind,
        _label_selector: &str,
    ) -> futures::stream::BoxStream<
        'static,
        Result<rollout_operator::cluster::WatchEvent<WebhookConfiguration>, ApiError>,
    > {
        use futures::StreamExt;
        let refused = ApiError::Forbidden("cannot list mutatingwebhookconfigurations".into());
        futures::stream::iter([Err(refused)]).chain(futures::stream::pending()).boxed()
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        patch: &Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        self.0.patch_webhook_configuration(kind, name, patch).await
    }
}

/// Without the grant to watch the webhook configurations nothing can be injected, so nothing waits for it: the CA
/// is confirmed at once (a renewed or starting certificate is served without delay).
#[tokio::test]
async fn refused_watches_confirm_the_ca_at_once_since_nothing_can_be_injected() {
    let ca = generated_ca(Timestamp::now());
    let (_ca_tx, ca_rx) = tokio::sync::watch::channel(ca.clone());
    let (trusted_tx, mut trusted) = tokio::sync::watch::channel(String::new());
    let port = RefusedWebhookWatches(FakeCluster::default());
    let gates = FeatureGates::default();
    let injector =
        tokio::spawn(run_ca_injector(port, "ns".into(), ca_rx, Duration::from_millis(20), trusted_tx, gates.clone()));
    let confirmed = rollout_operator::tls::secret::trusted_within(&mut trusted, &ca, Duration::from_secs(5)).await;
    assert!(confirmed, "the CA was not confirmed: {:?}", *trusted.borrow());
    assert!(gates.is_refused(Gate::CaInjection), "the refusal goes through the feature gate");
    injector.abort();
}

/// `kube_validating_webhook_failure_policy` (the reference's collector, queried by its alert): every webhook of the
/// configurations labelled for the namespace, 1 for its policy and 0 for the other; unset counts as Fail; other
/// namespaces' configurations are not reported; a change of policy is followed.
#[tokio::test]
async fn webhook_failure_policies_of_the_namespace_are_exported_and_followed() {
    use rollout_operator::ops::metrics::Metrics;
    let cluster = FakeCluster::default();
    let metrics = Arc::new(Metrics::new());
    let observer =
        tokio::spawn(rollout_operator::ops::failure_policy::run(cluster.clone(), "ns".into(), metrics.clone()));
    let mut eviction = validating("pod-eviction-ns", labels("ns"), &["pod-eviction.grafana.com"]);
    if let WebhookConfiguration::Validating(c) = &mut eviction {
        c.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
    }
    cluster.put_webhook_configuration(eviction.clone());
    cluster.put_webhook_configuration(mutating("prepare-downscale-ns"));
    cluster.put_webhook_configuration(validating("other", labels("other"), &["x.grafana.com"]));
    let line = |t: &str, w: &str, p: &str, v: u8| {
        format!("kube_validating_webhook_failure_policy{{type=\"{t}\",webhook=\"{w}\",policy=\"{p}\"}} {v}")
    };
    eventually("policies exported", || {
        let text = metrics.encode_prometheus_text();
        text.contains(&line("ValidatingWebhook", "pod-eviction.grafana.com", "Ignore", 1))
            && text.contains(&line("ValidatingWebhook", "pod-eviction.grafana.com", "Fail", 0))
            && text.contains(&line("MutatingWebhook", "prepare-downscale.grafana.com", "Fail", 1))
    })
    .await;
    assert!(!metrics.encode_prometheus_text().contains("x.grafana.com"));
    if let WebhookConfiguration::Validating(c) = &mut eviction {
        c.webhooks.as_mut().unwrap()[0].failure_policy = Some("Fail".into());
    }
    cluster.put_webhook_configuration(eviction);
    eventually("policy change followed", || {
        metrics.encode_prometheus_text().contains(&line("ValidatingWebhook", "pod-eviction.grafana.com", "Fail", 1))
    })
    .await;
    observer.abort();
}

/// A certificate Secret the reference operator stored (RSA keys, PKCS#1 `RSA PRIVATE KEY`, one SAN: the Service
/// name the API server calls, as the Helm chart's `-server-tls.self-signed-cert.dns-name` sets it) is reused while it
/// is valid and covers that name, instead of being replaced on the first start; one that does not cover it is
/// replaced. The fixtures are a throwaway CA and leaf made with openssl for this test.
#[tokio::test]
async fn a_certificate_stored_by_the_reference_is_reused_while_it_covers_the_name_the_api_server_calls() {
    use rollout_operator::cluster::CertificateStore;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fixture = |name: &str| std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta { name: Some("certificate".into()), ..Default::default() },
        data: Some(BTreeMap::from([
            ("ca".to_string(), ByteString(fixture("reference-ca.pem"))),
            ("cert".to_string(), ByteString(fixture("reference-cert.pem"))),
            ("key".to_string(), ByteString(fixture("reference-key.pem"))),
        ])),
        ..Default::default()
    };
    let cluster = FakeCluster::default();
    cluster.create_secret(&secret).await.unwrap();
    cluster.take_calls();
    let helm = SelfSignedSettings {
        organization: "Grafana Labs".into(),
        dns_names: service_dns_names("rollout-operator", "mimir", "cluster.local.", "mimir-rollout-operator.mimir.svc"),
        required_dns_names: vec!["mimir-rollout-operator.mimir.svc".into()],
        validity: Duration::from_secs(365 * 24 * 3600),
    };
    let now = ts("2027-06-01T00:00:00Z");
    let bundle = ensure_self_signed(&cluster, "certificate", "mimir", &helm, now).await.expect("reused");
    assert_eq!(bundle.cert_pem.as_bytes(), fixture("reference-cert.pem").as_slice());
    assert!(cluster.calls().is_empty(), "nothing written: {:?}", cluster.calls());
    // It serves TLS (an RSA key through rustls' ring provider).
    server_config(SwappableCert::new(&bundle).expect("an RSA pair")).expect("a server config");

    let elsewhere = SelfSignedSettings { required_dns_names: vec!["rollout-operator.mimir.svc".into()], ..helm };
    let replaced = ensure_self_signed(&cluster, "certificate", "mimir", &elsewhere, now).await.expect("replaced");
    assert_ne!(replaced.cert_pem.as_bytes(), fixture("reference-cert.pem").as_slice());
    assert!(cluster.calls().iter().any(|c| matches!(c, Call::ReplaceSecret { .. })), "{:?}", cluster.calls());
}
