//! Building the client: kubeconfig, API URL override, client timeout, the `X-Cluster` header.

use super::*;

fn write_kubeconfig(test: &str, server: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("kube-adapter-{test}-{}.yaml", std::process::id()));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: {server}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: other-ns\n\
         users:\n- name: test\n  user:\n    token: test-token\n"
    );
    std::fs::write(&path, kubeconfig).expect("temp dir is writable");
    path
}

#[tokio::test]
async fn build_client_uses_kubeconfig_api_url_override_and_sends_cluster_header() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (tx, mut rx) = mpsc::unbounded_channel::<(Method, String, http::HeaderMap)>();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((request.method().clone(), request.uri().to_string(), request.headers().clone()));
            axum::Json(success_status())
        }
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    // The kubeconfig's own server is unreachable: only the override can make the request succeed.
    let kubeconfig = write_kubeconfig("override", "https://kubeconfig-server.invalid:6443");

    let client = build_client(
        Some(&kubeconfig),
        Some(&format!("http://{address}")),
        Duration::from_secs(5),
        NS,
        UNLIMITED,
        KubeClientMetrics::default(),
    )
    .await
    .expect("client");
    let result = KubeCluster::new(client, NS).delete_pod("a-0", &Preconditions::default()).await;
    let _ = std::fs::remove_file(&kubeconfig);
    server.abort();

    assert_eq!(result, Ok(()));
    let (method, uri, headers) = rx.try_recv().expect("the fake API server saw the request");
    assert_eq!((method, uri.as_str()), (Method::DELETE, "/api/v1/namespaces/default-ns/pods/a-0?"));
    let cluster: Vec<_> = headers.get_all(CLUSTER_HEADER).iter().collect();
    assert_eq!(cluster, [NS]);
    assert_eq!(headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer test-token"));
}

#[tokio::test]
async fn load_config_applies_api_url_and_client_timeout() {
    let kubeconfig = write_kubeconfig("timeout", "https://kubeconfig-server.example:6443");
    let with_override = load_config(Some(&kubeconfig), Some("https://10.0.0.1:6443"), Duration::from_secs(7)).await;
    let without_override = load_config(Some(&kubeconfig), None, Duration::from_secs(7)).await;
    let _ = std::fs::remove_file(&kubeconfig);

    let config = with_override.expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
    assert_eq!(config.read_timeout, Some(Duration::from_secs(7)));
    assert_eq!(config.write_timeout, Some(Duration::from_secs(7)));
    assert!(config.reset_reader_on_write);
    assert!(!config.default_retry, "writes are not retried behind the caller's back");
    let config = without_override.expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://kubeconfig-server.example:6443/");
}

#[test]
fn zero_client_timeout_means_no_timeout() {
    let mut config = Config::new("https://example.invalid".parse().unwrap());
    let before = (config.read_timeout, config.write_timeout);
    apply_client_timeout(&mut config, Duration::ZERO);
    assert_eq!((config.read_timeout, config.write_timeout), before);
}

#[test]
fn client_timeout_keeps_an_explicit_read_timeout() {
    let mut config = Config::new(http::Uri::from_static("https://10.0.0.1:6443"));
    config.read_timeout = Some(Duration::from_secs(1));
    apply_client_timeout(&mut config, Duration::from_secs(300));
    assert_eq!(config.read_timeout, Some(Duration::from_secs(1)));
    assert_eq!(config.write_timeout, Some(Duration::from_secs(300)));
}

fn expect_adapter_error(result: Result<Client, AdapterError>) -> AdapterError {
    match result {
        Ok(_) => panic!("expected an AdapterError, got a client"),
        Err(err) => err,
    }
}

#[tokio::test]
async fn unreadable_kubeconfig_names_the_file_and_the_flag() {
    let path = Path::new("/nonexistent/rollout-operator/kubeconfig");
    let err = expect_adapter_error(
        build_client(Some(path), None, Duration::from_secs(5), NS, UNLIMITED, KubeClientMetrics::default()).await,
    );
    let message = err.to_string();
    assert!(matches!(err, AdapterError::Kubeconfig { .. }), "{err:?}");
    assert!(message.contains("/nonexistent/rollout-operator/kubeconfig"), "{message}");
    assert!(message.contains("-kubernetes.config-file"), "{message}");
}

#[tokio::test]
async fn invalid_api_url_is_reported_with_the_flag() {
    let kubeconfig = write_kubeconfig("bad-url", "https://kubeconfig-server.example:6443");
    let result = build_client(
        Some(&kubeconfig),
        Some("http://bad host"),
        Duration::from_secs(5),
        NS,
        UNLIMITED,
        KubeClientMetrics::default(),
    )
    .await;
    let _ = std::fs::remove_file(&kubeconfig);
    let err = expect_adapter_error(result);
    assert!(matches!(err, AdapterError::ApiUrl { .. }), "{err:?}");
    assert!(err.to_string().contains("-kubernetes.api-url \"http://bad host\""), "{err}");
}

#[tokio::test]
async fn in_cluster_config_outside_a_cluster_says_what_to_do() {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        eprintln!("skipped: running inside a Kubernetes pod, in-cluster config may load");
        return;
    }
    let err = expect_adapter_error(
        build_client(None, None, Duration::from_secs(5), NS, UNLIMITED, KubeClientMetrics::default()).await,
    );
    assert!(matches!(err, AdapterError::InCluster { .. }), "{err:?}");
    assert!(err.to_string().contains("set -kubernetes.config-file"), "{err}");
}

#[tokio::test]
async fn cluster_header_layer_sends_exactly_one_value() {
    use tower::ServiceExt;
    let inner = tower::service_fn(|request: Request<()>| async move {
        let values: Vec<String> = request
            .headers()
            .get_all(CLUSTER_HEADER)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect();
        Ok::<_, std::convert::Infallible>(values)
    });
    let service = ClusterHeaderLayer::new(NS).expect("valid namespace").layer(inner);
    let request = Request::builder().header(CLUSTER_HEADER, "stale").body(()).expect("request");
    let values = service.oneshot(request).await.expect("infallible");
    assert_eq!(values, [NS]);
}

#[test]
fn namespace_that_cannot_be_a_header_value_is_rejected() {
    let err = ClusterHeaderLayer::new("bad\nnamespace").expect_err("newline is not allowed in a header");
    assert!(matches!(err, AdapterError::ClusterHeader { .. }), "{err:?}");
}
