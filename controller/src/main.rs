//! The `rollout-operator` binary: parses flags, sets up logging, then runs the controller (or `plan`).
//!
//! Startup follows the reference's order: flags, validation, logger, metrics registry, HTTP server (listen first,
//! so a port in use fails at once), Kubernetes client, controller. SIGTERM or SIGINT stops the controller and the
//! HTTP server and the process exits 0, as the reference does, so Kubernetes restarts it cleanly.

use std::process::ExitCode;

#[cfg(not(madsim))]
fn main() -> ExitCode {
    app::main()
}

/// A `--cfg madsim` build runs the controller inside the simulator (crate `rollout-sim`), never as a process.
#[cfg(madsim)]
fn main() -> ExitCode {
    eprintln!(
        "rollout-operator: this binary was built with --cfg madsim (for the simulator) and cannot run the controller"
    );
    ExitCode::FAILURE
}

#[cfg(not(madsim))]
mod app {
    use rollout_core::RolloutPlanner;
    use rollout_operator::admission::server as webhook_server;
    use rollout_operator::cli::{self, Command, RunConfig};
    use rollout_operator::commands::{plan as plan_cmd, rbac as rbac_cmd, review as review_cmd};
    use rollout_operator::election;
    use rollout_operator::health_check::http::HyperTransport;
    use rollout_operator::kube::{adapter as kube_adapter, layers as kube_layers};
    use rollout_operator::operator::{BudgetSource, ElectionSetup, Operator, OperatorConfig, until_stopped};
    use rollout_operator::ops::cluster_validation::ClusterValidation;
    use rollout_operator::ops::events::EventSettings;
    use rollout_operator::ops::health::ReadyFlag;
    use rollout_operator::ops::metrics::Metrics;
    use rollout_operator::ops::{http_server, logging};
    use rollout_operator::pods::client::DEFAULT_CONCURRENCY;
    use rollout_operator::pods::hyper_client::HyperPodClient;
    use rollout_operator::rollout::reconciler::ReconcilerConfig;
    use rollout_operator::rollout::scaling::ScalingConfig;
    use std::future::Future;
    use std::io;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::sync::watch;
    use tracing::{error, info, warn};

    /// How long in-flight HTTP requests may take to finish once shutdown starts.
    const HTTP_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

    pub fn main() -> ExitCode {
        // kube's client (and later the TLS server) need a process-wide rustls provider, chosen before any TLS
        // object exists. Only ring is compiled in; an error means one is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();

        let command = match cli::parse(std::env::args_os()) {
            Ok(command) => command,
            Err(e) => return e.report(),
        };
        match command {
            Command::Plan { args, log } => {
                if let Err(e) = logging::init(log) {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
                plan_cmd::run(args)
            }
            Command::Review { args, log } => {
                if let Err(e) = logging::init(log) {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
                review_cmd::run(args)
            }
            // Prints and exits; nothing to log.
            Command::Rbac(args) => rbac_cmd::run(&args.options()),
            Command::Version => cli::run_version(),
            Command::Status { args, log } => {
                if let Err(e) = logging::init(log) {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
                rollout_operator::commands::status::command::run(args.options())
            }
            Command::Run(config) => {
                if let Err(e) = logging::init(config.log) {
                    eprintln!("{e}");
                    return ExitCode::FAILURE;
                }
                let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        error!(err = %e, "failed to start the async runtime");
                        return ExitCode::FAILURE;
                    }
                };
                runtime.block_on(run_controller(*config))
            }
        }
    }

    async fn run_controller(config: RunConfig) -> ExitCode {
        let flags = config.flags;
        info!(
            version = env!("CARGO_PKG_VERSION"),
            namespace = %flags.kubernetes_namespace,
            "starting rollout-operator"
        );
        // Tracing is not implemented: say so once rather than ignore the deployment's settings silently.
        let tracing_env: Vec<String> =
            std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("OTEL_") || k.starts_with("JAEGER_")).collect();
        if !tracing_env.is_empty() {
            warn!(variables = %tracing_env.join(","),
                "tracing is not supported by this rollout-operator; these environment variables are ignored");
        }

        let listener = match listen(flags.server_port).await {
            Ok(listener) => listener,
            Err(e) => {
                error!(port = flags.server_port, err = %e, "failed to listen on the HTTP port");
                return ExitCode::FAILURE;
            }
        };
        let mut metrics = Metrics::new();
        // Leader election's series exist only when it is on: a single replica's metrics are unchanged.
        let leader_metrics = flags.leader_election_enabled.then(|| metrics.register_leader_election());
        let metrics = Arc::new(metrics);
        let ready = ReadyFlag::new();

        // One shutdown switch for everything; set by a signal or by a component that failed.
        let (stop, stopped) = watch::channel(false);
        let signal = match shutdown_signal() {
            Ok(signal) => signal,
            Err(e) => {
                error!(err = %e, "failed to install signal handlers");
                return ExitCode::FAILURE;
            }
        };
        let signal_stop = stop.clone();
        tokio::spawn(async move {
            let name = signal.await;
            info!(signal = name, "received signal, shutting down");
            let _ = signal_stop.send(true);
        });

        // -server.cluster-validation.http.*: one validation for both servers.
        let validation = if flags.cluster_validation_enabled {
            match ClusterValidation::new(
                &flags.kubernetes_namespace,
                flags.cluster_validation_soft,
                &flags.cluster_validation_excluded_paths.0,
                &flags.cluster_validation_excluded_user_agents.0,
                metrics.cluster_validation.clone(),
            ) {
                Ok(v) => Some(Arc::new(v)),
                Err(e) => {
                    error!(err = %e, "invalid cluster validation settings");
                    return ExitCode::FAILURE;
                }
            }
        } else {
            None
        };
        let router = http_server::router_with(metrics.clone(), ready.clone(), validation.clone());
        let mut server = tokio::spawn(http_server::serve(listener, router, until_stopped(stopped.clone())));

        let client = match kube_adapter::build_client(
            flags.config_file(),
            flags.api_url(),
            flags.kubernetes_client_timeout,
            &flags.kubernetes_namespace,
            kube_layers::RateLimits {
                qps: flags.kubernetes_client_qps,
                burst: flags.kubernetes_client_burst,
                // A request that waits longer than the client's own timeout would fail anyway.
                max_wait: if flags.kubernetes_client_timeout.is_zero() {
                    std::time::Duration::from_secs(60)
                } else {
                    flags.kubernetes_client_timeout
                },
            },
            metrics.kube_client.clone(),
        )
        .await
        {
            Ok(client) => client,
            Err(e) => {
                error!(err = %e, "failed to create the Kubernetes client");
                return ExitCode::FAILURE;
            }
        };
        let cluster = kube_adapter::KubeCluster::new(client, &flags.kubernetes_namespace);
        // Delayed downscale calls pods directly, with its own timeout and no Kubernetes rate limiting.
        let pod_client = match HyperPodClient::new(
            flags.pods_client_timeout,
            &flags.kubernetes_namespace,
            metrics.pod_http_client.clone(),
        ) {
            Ok(client) => client,
            Err(e) => {
                error!(err = %e, "failed to create the pod HTTP client");
                return ExitCode::FAILURE;
            }
        };
        // Events (-events.enabled) go to one sink task, fed without waiting by the controller and the webhooks.
        let events = flags.events_enabled.then(|| {
            // The pod's name (Kubernetes sets HOSTNAME to it) tells replicas apart in reportingInstance.
            let instance = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty());
            EventSettings::new(
                &flags.kubernetes_namespace,
                instance.as_deref().unwrap_or(rollout_operator::commands::rbac::NAME),
            )
        });
        let config = OperatorConfig {
            namespace: flags.kubernetes_namespace.clone(),
            reconciler: ReconcilerConfig { interval: flags.reconcile_interval, ..ReconcilerConfig::default() },
            scaling: ScalingConfig {
                namespace: flags.kubernetes_namespace.clone(),
                cluster_domain: flags.kubernetes_cluster_domain.clone(),
                // The same record as the webhooks'.
                zone_tracker_config_map: flags.zone_tracker_config_map().map(str::to_string),
                pod_concurrency: DEFAULT_CONCURRENCY,
            },
            progress_deadline: flags.rollout_progress_deadline,
            events,
            // ZoneAwarePodDisruptionBudgets, with or without the webhooks (as the reference): the known budgets,
            // fed by their watch, and the grafana.com/ready-time tracker. Neither blocks startup.
            budgets: BudgetSource::Watched,
            ready_time_patch_timeout: Some(flags.zpdb_pod_ready_annotation_patch_timeout),
        };
        let mut operator =
            Operator::build(config, cluster.clone(), pod_client, RolloutPlanner, metrics.clone(), stopped.clone());
        // RolloutHealthChecks: gates evaluated off the pass, fed by their watch. Neither blocks startup.
        match HyperTransport::new() {
            Ok(transport) => operator = operator.with_health_checks(cluster.clone(), transport, stopped.clone()),
            Err(error) => error!(%error, "cannot build the Prometheus client: health-gated zones are off"),
        }
        // The admission webhooks over HTTPS, when enabled; they run until the process ends.
        let _webhooks = if flags.server_tls_enabled {
            match webhook_server::start(
                &flags.webhook_server_config(),
                cluster.clone(),
                &metrics,
                validation.clone(),
                operator.zpdb(),
                operator.events(),
            )
            .await
            {
                Ok(tasks) => Some(tasks),
                Err(e) => {
                    error!(err = %e, "failed to start the webhook server");
                    return ExitCode::FAILURE;
                }
            }
        } else {
            None
        };
        let election = match leader_metrics {
            // A single replica, exactly as without election.
            None => None,
            Some(leader_metrics) => {
                let Some(identity) = replica_identity() else {
                    error!("-leader-election.enabled needs this replica's name in POD_NAME or HOSTNAME (its pod name)");
                    return ExitCode::FAILURE;
                };
                Some(ElectionSetup {
                    lease_name: flags.leader_election_lease_name.clone(),
                    config: flags.election_config(&identity),
                    clock: election::MonotonicClock::start(jiff::Timestamp::now()),
                    metrics: leader_metrics,
                })
            }
        };
        let controller = operator.run(ready, stopped.clone(), election);
        tokio::pin!(controller);

        let mut failed = false;
        tokio::select! {
            () = &mut controller => {
                if !*stopped.borrow() {
                    error!("the controller stopped unexpectedly");
                    failed = true;
                }
                let _ = stop.send(true);
                match tokio::time::timeout(HTTP_DRAIN_TIMEOUT, server).await {
                    Ok(result) => failed |= !server_ended_cleanly(result),
                    Err(_) => info!("HTTP server did not drain in time; exiting anyway"),
                }
            }
            result = &mut server => {
                // The server only ends by itself on an error; stop the controller too.
                let clean = server_ended_cleanly(result);
                failed = !clean || !*stopped.borrow();
                let _ = stop.send(true);
                controller.await;
            }
        }
        info!("rollout-operator stopped");
        if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
    }

    /// Logs how the HTTP server task ended; true if it ended without error.
    fn server_ended_cleanly(result: Result<io::Result<()>, tokio::task::JoinError>) -> bool {
        match result {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                error!(err = %e, "HTTP server failed");
                false
            }
            Err(e) => {
                error!(err = %e, "HTTP server task failed");
                false
            }
        }
    }

    /// Listens on every address like Go's `:port`: dual-stack `[::]`, or IPv4 only where IPv6 is unavailable.
    async fn listen(port: u16) -> io::Result<TcpListener> {
        match TcpListener::bind((Ipv6Addr::UNSPECIFIED, port)).await {
            Ok(listener) => Ok(listener),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(e),
            Err(_) => TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).await,
        }
    }

    /// This replica's name for leader election: the pod name (`POD_NAME` from the downward API, else `HOSTNAME`,
    /// which Kubernetes sets to it).
    fn replica_identity() -> Option<String> {
        ["POD_NAME", "HOSTNAME"].iter().find_map(|key| std::env::var(key).ok().filter(|v| !v.is_empty()))
    }

    /// Registers SIGTERM and SIGINT handlers now (so a failure is reported at startup) and returns a future that
    /// resolves with the name of the first signal received.
    #[cfg(unix)]
    fn shutdown_signal() -> io::Result<impl Future<Output = &'static str> + Send + 'static> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            }
        })
    }

    #[cfg(not(unix))]
    fn shutdown_signal() -> io::Result<impl Future<Output = &'static str> + Send + 'static> {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            "interrupt"
        })
    }
}
