//! `status` as a command: one view of a live cluster or of dumps, rendered as text or JSON, once or with `--watch`;
//! its errors and exit statuses.

use super::render::{render_text, watch_header};
use super::*;

use crate::cluster::{DisruptionBudgets, LiveReads, ZoneTrackerStore};
use crate::commands::plan::{input_notes, load_objects, parse_now};
use crate::commands::review::DumpCluster;
use crate::health_check::offline::{HealthChecks, OfflineGates, health_checks};
use jiff::Timestamp;
use rollout_core::downscale::format_timestamp;
use rollout_core::zpdb::KnownBudgets;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use thiserror::Error;

/// One view of `api` as of `now`, rendered into `out`; `watcher` adds progress (for --watch).
pub async fn show<C: LiveReads + ZoneTrackerStore + DisruptionBudgets>(
    api: &C,
    args: &StatusOptions,
    namespace: &str,
    now: Timestamp,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
) -> Result<(), ShowError> {
    show_with_gates(api, args, namespace, now, watcher, out, None).await
}

/// [`show`], with the groups' health gates as [`read_with_gates`] takes them.
pub async fn show_with_gates<C: LiveReads + ZoneTrackerStore + DisruptionBudgets>(
    api: &C,
    args: &StatusOptions,
    namespace: &str,
    now: Timestamp,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
    gates: Option<(&OfflineGates, &HealthChecks)>,
) -> Result<(), ShowError> {
    let json = check_args(args).map_err(ShowError::Args)?;
    let budgets = read_budgets(api).await;
    // Budgets that could not be listed here are shown as unknown, and judge nothing.
    let known = budgets.as_ref().ok().map(|b| KnownBudgets::Known(b.clone()));
    let scope = known.as_ref().map(|known| (known, namespace));
    let gates = gates.map(|(gates, checks)| (gates, checks, namespace));
    let planned = read_with_gates(api, args.zone_tracker_config_map.as_deref(), scope, gates, now)
        .await
        .map_err(ShowError::Read)?;
    let deadline = args.progress_deadline;
    let mut groups = Vec::new();
    let mut watcher = watcher;
    for planned in &planned {
        let mut status = summarize(planned, now);
        status.budgets = budgets_over(planned, budgets.as_deref().unwrap_or_default());
        if let Some(w) = watcher.as_deref_mut() {
            w.observe(&planned.group, &planned.plan, &mut status, now, deadline);
        }
        groups.push(status);
    }
    let view = NamespaceStatus {
        namespace: namespace.to_string(),
        at: format_timestamp(now),
        groups,
        budgets_unknown: budgets.err().map(|e| e.to_string()),
    };
    let written = if json {
        let text = if args.watch { serde_json::to_string(&view) } else { serde_json::to_string_pretty(&view) };
        text.map_err(std::io::Error::other).and_then(|t| writeln!(out, "{t}"))
    } else {
        render_text(&view, deadline, out)
    };
    written.and_then(|()| out.flush()).map_err(ShowError::Write)
}

/// Why one view failed.
#[derive(Debug, Error)]
pub enum ShowError {
    #[error(transparent)]
    Args(StatusArgError),
    #[error(transparent)]
    Read(StatusError),
    #[error("cannot write the view: {0}")]
    Write(std::io::Error),
}

impl ShowError {
    fn exit_code(&self) -> u8 {
        match self {
            ShowError::Args(_) => EXIT_BAD_INPUT,
            ShowError::Read(_) | ShowError::Write(_) => EXIT_FAILED,
        }
    }
}

/// The whole subcommand over dumps (`-f`): no cluster, no runtime beyond this call.
pub fn execute_on_dumps(
    args: &StatusOptions,
    stdin: &mut dyn std::io::Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
    now: Timestamp,
) -> u8 {
    let report = |err: &mut dyn Write, message: &dyn std::fmt::Display, code: u8| {
        let _ = writeln!(err, "error: {message}");
        code
    };
    if let Err(e) = check_args(args) {
        return report(err, &e, EXIT_BAD_INPUT);
    }
    let now = match args.now.as_deref().map(parse_now).transpose() {
        Ok(at) => at.unwrap_or(now),
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    let objects = match load_objects(&args.files, stdin) {
        Ok(objects) => objects,
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    // The namespace asked for, or the dump's (its first StatefulSet's), or kubectl's default.
    let namespace = Some(args.namespace.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| objects.statefulsets.iter().find_map(|s| s.metadata.namespace.clone()))
        .unwrap_or_else(|| "default".to_string());
    for note in input_notes(&objects, Some(&namespace)) {
        let _ = writeln!(err, "note: {note}");
    }
    let api = DumpCluster::from_objects(&objects, &namespace);
    let gates = match OfflineGates::new(args.prometheus_url.as_deref()) {
        Ok(gates) => gates,
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    let in_namespace = |o: &&serde_json::Value| {
        o.pointer("/metadata/namespace").and_then(serde_json::Value::as_str).is_none_or(|ns| ns == namespace)
    };
    let checks = health_checks(objects.others.iter().filter(in_namespace));
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return report(err, &format_args!("cannot start the async runtime: {e}"), EXIT_FAILED),
    };
    match runtime.block_on(show_with_gates(&api, args, &namespace, now, None, out, Some((&gates, &checks)))) {
        Ok(()) => 0,
        Err(e) => report(err, &e, e.exit_code()),
    }
}

/// Entry point of `rollout-operator status`.
pub fn run(args: StatusOptions) -> ExitCode {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    // Screen control codes only for a person watching: a file or a pipe gets the frames one after the other.
    let terminal = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = std::io::stderr().lock();
    if !args.files.is_empty() {
        let code = execute_on_dumps(&args, &mut std::io::stdin().lock(), &mut out, &mut err, Timestamp::now());
        return ExitCode::from(code);
    }
    if let Err(e) = check_args(&args) {
        let _ = writeln!(err, "error: {e}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(err, "error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    ExitCode::from(runtime.block_on(live(&args, terminal, &mut out, &mut err)))
}

/// The exit status of a client that could not be built: the user's kubeconfig, context or URL is wrong (2), or no
/// configuration could be found or used (1).
fn client_error_code(e: &crate::kube::adapter::AdapterError) -> u8 {
    use crate::kube::adapter::AdapterError;
    match e {
        AdapterError::Kubeconfig { .. } | AdapterError::Context { .. } | AdapterError::ApiUrl { .. } => EXIT_BAD_INPUT,
        _ => EXIT_FAILED,
    }
}

/// The namespace to show: the one given (`-n`, `-kubernetes.namespace`), else the kubeconfig context's (`default`
/// when the context names none), as kubectl picks it.
pub fn namespace_to_show(given: &str, context_namespace: &str) -> String {
    if given.is_empty() { context_namespace.to_string() } else { given.to_string() }
}

/// One live view as of now; with `gates` (`--prometheus-url`), the namespace's RolloutHealthChecks are listed and the
/// groups' gates evaluated against that Prometheus.
async fn show_live(
    api: &crate::kube::adapter::KubeCluster,
    args: &StatusOptions,
    namespace: &str,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
    gates: Option<&OfflineGates>,
) -> Result<(), ShowError> {
    let Some(gates) = gates else { return show(api, args, namespace, Timestamp::now(), watcher, out).await };
    let checks =
        crate::health_check::feed::list_once(api).await.map_err(|e| ShowError::Read(StatusError::HealthChecks(e)))?;
    show_with_gates(api, args, namespace, Timestamp::now(), watcher, out, Some((gates, &checks))).await
}

async fn live(args: &StatusOptions, terminal: bool, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let limits = crate::kube::layers::RateLimits {
        qps: args.client_qps,
        burst: args.client_burst,
        max_wait: if args.client_timeout.is_zero() { Duration::from_secs(60) } else { args.client_timeout },
    };
    let config = match crate::kube::adapter::cli_config(
        args.config_file.as_deref(),
        args.api_url.as_deref(),
        args.client_timeout,
        args.context.as_deref(),
    )
    .await
    {
        Ok(config) => config,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return client_error_code(&e);
        }
    };
    let namespace = namespace_to_show(&args.namespace, &config.default_namespace);
    let client = match crate::kube::adapter::cli_client(
        config,
        &namespace,
        limits,
        crate::ops::metrics::KubeClientMetrics::default(),
    ) {
        Ok(client) => client,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return client_error_code(&e);
        }
    };
    let api = crate::kube::adapter::KubeCluster::new(client, &namespace);
    let gates = match args.prometheus_url.as_deref().map(|url| OfflineGates::new(Some(url))).transpose() {
        Ok(gates) => gates,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    if !args.watch {
        return match show_live(&api, args, &namespace, None, out, gates.as_ref()).await {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                e.exit_code()
            }
        };
    }
    let mut watcher = Watcher::default();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut first = true;
    loop {
        let mut frame = watch_header(args.output == "text", terminal, first, args.interval, &namespace).into_bytes();
        first = false;
        match show_live(&api, args, &namespace, Some(&mut watcher), &mut frame, gates.as_ref()).await {
            Ok(()) => {}
            // A failed read is shown and the next one tried: the view keeps watching. JSON lines stay JSON.
            Err(ShowError::Read(e)) if args.output == "text" => {
                let _ = writeln!(frame, "error: {e}");
            }
            Err(ShowError::Read(e)) => {
                let _ = writeln!(err, "error: {e}");
            }
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                return e.exit_code();
            }
        }
        if out.write_all(&frame).and_then(|()| out.flush()).is_err() {
            // Nobody is reading any more (a closed pipe): stop quietly.
            return 0;
        }
        tokio::select! {
            biased;
            _ = tokio::time::sleep(args.interval) => {}
            _ = &mut interrupted => return 0,
        }
    }
}
