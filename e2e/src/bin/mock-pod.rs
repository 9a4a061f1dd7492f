//! `mock-pod`: the HTTP service the e2e suite's test StatefulSets run (see `rollout_e2e::mock_pod`).
//! Configured by environment variables; listens on 0.0.0.0:`PORT` (it runs inside a pod); stops on SIGTERM/SIGINT.

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    use rollout_e2e::mock_pod::{MockPodConfig, router, system_clock};
    use std::process::ExitCode;

    let config = match MockPodConfig::from_env(|name| std::env::var(name).ok()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mock-pod: {e}");
            return ExitCode::from(2);
        }
    };
    if config.crash {
        // A crash loop on purpose: the kubelet restarts the container and the pod never becomes ready.
        eprintln!("mock-pod: CRASH=true, exiting with status 1 (version {:?})", config.version);
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mock-pod: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        let addr = std::net::SocketAddr::from(([0, 0, 0, 0], config.port));
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("mock-pod: cannot listen on {addr}: {e}");
                return ExitCode::from(1);
            }
        };
        eprintln!("mock-pod: version {:?} listening on {addr} (ready={})", config.version, config.ready);
        let app = router(&config, system_clock());
        let served = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await;
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mock-pod: server failed: {e}");
                ExitCode::from(1)
            }
        }
    })
}

#[cfg(not(madsim))]
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        // Without a SIGTERM handler, Ctrl-C still works; the kubelet's SIGKILL ends the rest.
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The mock pod serves real sockets; it has no meaning inside the simulator.
#[cfg(madsim)]
fn main() {
    eprintln!("mock-pod is not built for the simulator (--cfg madsim)");
    std::process::exit(2);
}
