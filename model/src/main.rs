//! `rollout-model check`: exhaustively checks one configuration of the rollout-group model and reports.

use clap::{Parser, Subcommand};
use rollout_core::RolloutPlanner;
use rollout_model::election::{ElectionModel, ElectionModelConfig};
use rollout_model::mirror::{MirrorModel, MirrorModelConfig};
use rollout_model::zpdb::{BudgetMode, ZpdbModel, ZpdbModelConfig, production_evictor};
use rollout_model::{Health, ModelConfig, RolloutModel};
use stateright::{Checker, Model};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "rollout-model", about = "Model-check the rollout planner over every interleaving")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explore every state of one configuration and check the invariants.
    Check(CheckArgs),
    /// Explore every state of one configuration of the mirror-scaling model (delayed downscale) and check it.
    Mirror(MirrorArgs),
    /// Explore every state of one configuration of the ZoneAwarePodDisruptionBudget model (drain evictions on
    /// webhook replicas, concurrent with the controller's rollout deletions) and check it.
    Zpdb(ZpdbArgs),
    /// Explore every state of one configuration of the leader-election model (two replicas driving the real
    /// election step machine against the API server's Lease) and check it.
    Election(ElectionArgs),
}

#[derive(clap::Args)]
struct ElectionArgs {
    /// A larger configuration: 3.5 s of true time, a loss, a pause and a release (the default: 3 s, a loss and a
    /// pause).
    #[arg(long)]
    large: bool,
    /// Ticks of 500 ms of true time explored (default: 6, 7 with --large).
    #[arg(long)]
    horizon: Option<u8>,
    /// Lease requests or answers that may be lost.
    #[arg(long)]
    losses: Option<u8>,
    /// Replica pauses.
    #[arg(long)]
    pauses: Option<u8>,
    /// Graceful shutdowns (0 or 1).
    #[arg(long)]
    releases: Option<u8>,
    /// Per mille the replicas' clocks run off true time (one slow, one fast).
    #[arg(long)]
    drift: Option<u16>,
    /// Ticks a Lease request or answer may stay in flight.
    #[arg(long)]
    message_delay: Option<u8>,
    /// No controller writes (only the election; a smaller state space).
    #[arg(long)]
    no_writes: bool,
    /// The network becomes stable by this tick, and a leader must follow within the liveness bound (the horizon
    /// is stretched to leave the bound after it).
    #[arg(long)]
    settle_by: Option<u8>,
    /// Stop after this many states (0 = explore everything).
    #[arg(long, default_value_t = 0)]
    max_states: usize,
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn check_election(args: ElectionArgs) -> ExitCode {
    let base = if args.large {
        ElectionModelConfig { horizon: 7, releases: 1, ..ElectionModelConfig::default() }
    } else {
        ElectionModelConfig::default()
    };
    let config = ElectionModelConfig {
        horizon: args.horizon.unwrap_or(base.horizon),
        losses: args.losses.unwrap_or(base.losses),
        pauses: args.pauses.unwrap_or(base.pauses),
        releases: args.releases.unwrap_or(base.releases),
        drift_permille: args.drift.unwrap_or(base.drift_permille),
        message_delay: args.message_delay.unwrap_or(base.message_delay),
        writes: !args.no_writes,
        settle_by: args.settle_by,
        ..base
    };
    // Leave the liveness bound after the last moment the network may settle.
    let config = match config.settle_by {
        Some(by) => {
            ElectionModelConfig { horizon: config.horizon.max(by.saturating_add(config.lead_within())), ..config }
        }
        None => config,
    };
    println!("configuration: {config:?}");
    let model = match ElectionModel::new(config) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.settle_by.is_some() {
        println!("liveness bound:   {} ticks after the network settles", model.lead_within());
    }
    let started = Instant::now();
    let mut checker = model.clone().checker().threads(args.threads);
    if args.max_states > 0 {
        checker = checker.target_state_count(args.max_states);
    }
    let checker = checker.spawn_bfs().join();
    println!("unique states:    {}", checker.unique_state_count());
    println!("max depth:        {}", checker.max_depth());
    println!("wall time:        {:.2?}", started.elapsed());
    report(&model, &checker, |_| None, |steps| model.timeline(&steps))
}

#[derive(clap::Args)]
struct ZpdbArgs {
    /// StatefulSets (zones) under the budget (2-3).
    #[arg(long, default_value_t = 2)]
    zones: u8,
    /// Pods per StatefulSet (1-3).
    #[arg(long, default_value_t = 2)]
    pods: u8,
    /// Partition mode (`podNamePartitionRegex`: a pod's ordinal is its partition) instead of zone mode.
    #[arg(long)]
    partitions: bool,
    /// The budget's maxUnavailable (0: voluntary evictions disabled; the controller's override still applies).
    #[arg(long, default_value_t = 1)]
    max_unavailable: u8,
    /// Webhook replicas deciding the drain's evictions at once.
    #[arg(long, default_value_t = 2)]
    replicas: u8,
    /// Eviction requests the drain sends (retries included).
    #[arg(long, default_value_t = 2)]
    evictions: u8,
    /// No rollout for the controller to carry out (only the drain acts).
    #[arg(long)]
    no_rollout: bool,
    /// Writes the controller's cache may lag behind the truth.
    #[arg(long, default_value_t = 0)]
    stale: u8,
    /// Pod crashes (involuntary unavailability).
    #[arg(long, default_value_t = 0)]
    crashes: u8,
    /// Controller crashes.
    #[arg(long, default_value_t = 0)]
    restarts: u8,
    /// Webhook replica crashes mid-decision.
    #[arg(long, default_value_t = 0)]
    webhook_crashes: u8,
    /// Never two decisions about the same pod at once (a smaller state space).
    #[arg(long)]
    no_same_pod_races: bool,
    /// Pods may not be patched (the Helm charts that grant no `patch` on pods): intents go on the StatefulSets.
    #[arg(long)]
    no_pod_patch: bool,
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn check_zpdb(args: ZpdbArgs) -> ExitCode {
    let config = ZpdbModelConfig {
        zones: args.zones,
        pods: args.pods,
        mode: if args.partitions { BudgetMode::Partitions } else { BudgetMode::Zones },
        max_unavailable: args.max_unavailable,
        replicas: args.replicas,
        evictions: args.evictions,
        rollout: !args.no_rollout,
        stale: args.stale,
        crashes: args.crashes,
        restarts: args.restarts,
        webhook_crashes: args.webhook_crashes,
        same_pod_races: !args.no_same_pod_races,
        pod_patch: !args.no_pod_patch,
        controller_pod_patch: true,
    };
    println!("configuration: {config:?}");
    let model = match ZpdbModel::new(config, production_evictor) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let checker = model.clone().checker().threads(args.threads).spawn_bfs().join();
    let took = started.elapsed();
    println!("unique states:    {}", checker.unique_state_count());
    println!("max depth:        {}", checker.max_depth());
    println!("wall time:        {took:.2?}");
    // Without a rollout, or with voluntary evictions disabled, these examples cannot exist.
    let expected_absent = |name: &str| {
        ((name == "a rollout completes" && args.no_rollout)
            || (name == "an eviction is allowed" && args.max_unavailable == 0))
            .then_some("not seen (expected in this configuration)")
    };
    report(&model, &checker, expected_absent, |steps| model.timeline(&steps))
}

#[derive(clap::Args)]
struct MirrorArgs {
    /// `grafana.com/rollout-delayed-downscale` in minutes (0 = no delay).
    #[arg(long, default_value_t = 2)]
    delay: u8,
    /// Changes of the reference's spec.replicas.
    #[arg(long, default_value_t = 2)]
    reference_changes: u8,
    /// The reference may lose its spec.replicas.
    #[arg(long)]
    reference_may_vanish: bool,
    /// Rollouts of the group's other StatefulSet.
    #[arg(long, default_value_t = 0)]
    pushes: u8,
    /// Prepare calls that may fail.
    #[arg(long, default_value_t = 0)]
    prepare_failures: u8,
    /// Controller crashes mid-step.
    #[arg(long, default_value_t = 0)]
    restarts: u8,
    /// The controller's cache may lag one write behind.
    #[arg(long)]
    stale: bool,
    /// Minutes the clock runs.
    #[arg(long, default_value_t = 5)]
    max_time: u8,
    #[arg(long, default_value_t = 2)]
    threads: usize,
}

fn check_mirror(args: MirrorArgs) -> ExitCode {
    let config = MirrorModelConfig {
        delay: (args.delay > 0).then_some(args.delay),
        reference_changes: args.reference_changes,
        reference_may_vanish: args.reference_may_vanish,
        pushes: args.pushes,
        prepare_failures: args.prepare_failures,
        restarts: args.restarts,
        stale: args.stale,
        max_time: args.max_time,
        bug: None,
    };
    println!("configuration: {config:?}");
    let model = MirrorModel::new(config);
    let started = Instant::now();
    let checker = model.clone().checker().threads(args.threads).spawn_bfs().join();
    println!("unique states:    {}", checker.unique_state_count());
    println!("wall time:        {:.2?}", started.elapsed());
    report(
        &model,
        &checker,
        |_| None,
        |steps| steps.iter().map(|(state, action)| format!("  {action:?} -> {state:?}\n")).collect(),
    )
}

#[derive(clap::Args)]
struct CheckArgs {
    /// StatefulSets (zones) in the rollout group (1-4).
    #[arg(long, default_value_t = 3)]
    zones: u8,
    /// Pods per StatefulSet.
    #[arg(long, default_value_t = 3)]
    pods: u8,
    #[arg(long, default_value_t = 1)]
    max_unavailable: u8,
    /// Writes the controller's cache may lag behind the truth.
    #[arg(long, default_value_t = 0)]
    stale: u8,
    /// Pod crashes (a ready pod becomes unready).
    #[arg(long, default_value_t = 0)]
    crashes: u8,
    /// Pods deleted by someone else (evictions).
    #[arg(long, default_value_t = 0)]
    evictions: u8,
    /// Revisions rolled out (2 = a second revision can be pushed mid-rollout).
    #[arg(long, default_value_t = 1)]
    revisions: u8,
    /// StatefulSets the user may pause (and later unpause).
    #[arg(long, default_value_t = 0)]
    pauses: u8,
    /// Controller crashes and restarts.
    #[arg(long, default_value_t = 0)]
    restarts: u8,
    /// Model StatefulSet status counts lagging behind the pods.
    #[arg(long)]
    status_lag: bool,
    /// Downscales the prepare-downscale webhook prepares (its in-progress markers in the group downscale record);
    /// non-zero serves the group by the webhook with the zone tracker on.
    #[arg(long, default_value_t = 0)]
    downscales: u8,
    /// Times the group downscale record becomes unreadable for a while.
    #[arg(long, default_value_t = 0)]
    record_outages: u8,
    /// Deletions whose answer is lost (the request stays in flight and commits later).
    #[arg(long, default_value_t = 0)]
    lost_answers: u8,
    /// Test-only: the defences in depth in force, `all` or `-` and the layers to switch off, comma-separated, of
    /// uid-preconditions, expectations, record-fails-closed, rollout-step-claims (shows what each layer holds off).
    #[arg(long, default_value = "all")]
    defences: String,
    /// A health gate before each zone after the first (RolloutHealthCheck), the revision rolled out being good or
    /// bad; needs --revisions 1.
    #[arg(long, value_enum)]
    health_check: Option<Health>,
    /// Gate evaluations whose answers are faulty (no data for the updated pods, or Prometheus unreachable).
    #[arg(long, default_value_t = 0)]
    query_faults: u8,
    /// Stop after this many states (0 = explore everything).
    #[arg(long, default_value_t = 0)]
    max_states: usize,
    /// Checker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Serve the stateright Explorer on 127.0.0.1:<port> instead of checking.
    #[arg(long)]
    explore: Option<Option<u16>>,
}

fn main() -> ExitCode {
    let args = match Cli::parse().command {
        Command::Check(args) => args,
        Command::Mirror(args) => return check_mirror(args),
        Command::Zpdb(args) => return check_zpdb(args),
        Command::Election(args) => return check_election(args),
    };
    if args.zones == 0 || args.zones > 4 || args.revisions == 0 || args.revisions > 3 || args.pods == 0 {
        eprintln!("error: --zones must be 1-4, --pods at least 1, --revisions 1-3");
        return ExitCode::from(2);
    }
    if args.health_check.is_some() && args.revisions != 1 {
        eprintln!("error: --health-check needs --revisions 1");
        return ExitCode::from(2);
    }
    let defences = match rollout_core::Defences::parse(&args.defences) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --defences {e}");
            return ExitCode::from(2);
        }
    };
    let config = ModelConfig {
        zones: args.zones,
        pods: args.pods,
        max_unavailable: args.max_unavailable,
        stale: args.stale,
        crashes: args.crashes,
        evictions: args.evictions,
        revisions: args.revisions,
        pauses: args.pauses,
        restarts: args.restarts,
        status_lag: args.status_lag,
        downscales: args.downscales,
        record_outages: args.record_outages,
        lost_answers: args.lost_answers,
        defences,
        health_check: args.health_check,
        query_faults: args.query_faults,
    };
    println!("configuration: {config:?}");
    let model = RolloutModel::new(config, Arc::new(RolloutPlanner));
    if let Some(port) = args.explore {
        let addr = format!("127.0.0.1:{}", port.unwrap_or(3000));
        println!("serving the stateright Explorer on http://{addr} (Ctrl-C to stop)");
        model.checker().threads(args.threads).serve(addr);
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let mut checker = model.clone().checker().threads(args.threads);
    if args.max_states > 0 {
        checker = checker.target_state_count(args.max_states);
    }
    let checker = checker.spawn_bfs().join();
    let took = started.elapsed();
    let unique = checker.unique_state_count();
    println!("states generated: {}", checker.state_count());
    println!("unique states:    {unique}");
    println!("max depth:        {}", checker.max_depth());
    println!("wall time:        {:.2?}", took);
    println!("states/s:         {:.0}", unique as f64 / took.as_secs_f64().max(1e-9));
    // With max-unavailable 1 only replacing crashed pods can happen in parallel, and a bad revision is held after
    // its first zone: not signs of vacuity.
    let expected_absent = |name: &str| {
        if name == "pods are replaced in parallel" && args.max_unavailable < 2 {
            Some("not seen (expected with --max-unavailable 1)")
        } else if name == "a rollout completes" && args.health_check == Some(Health::Bad) {
            Some("not seen (expected with --health-check bad)")
        } else {
            None
        }
    };
    report(&model, &checker, expected_absent, |steps| model.timeline(&steps))
}

/// Prints each property's verdict, and the counterexample (told by `tell`) of each that failed: an `always` or
/// `eventually` property violated, or a `sometimes` example not seen unless `expected_absent` names why it cannot
/// exist in this configuration. Fails when one did.
fn report<M, C>(
    model: &M,
    checker: &C,
    expected_absent: impl Fn(&str) -> Option<&'static str>,
    tell: impl Fn(Vec<(M::State, Option<M::Action>)>) -> String,
) -> ExitCode
where
    M: Model,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
    C: Checker<M>,
{
    let properties = model.properties();
    let width = properties.iter().map(|p| p.name.len() + 3).max().unwrap_or(0);
    let mut failed = false;
    for property in properties {
        let discovery = checker.discovery(property.name);
        let (verdict, bad) = match (property.expectation, &discovery) {
            (stateright::Expectation::Sometimes, Some(_)) => ("holds (example found)", false),
            (stateright::Expectation::Sometimes, None) => match expected_absent(property.name) {
                Some(why) => (why, false),
                None => ("NOT SEEN (the model may be vacuous)", true),
            },
            (_, None) => ("holds", false),
            (_, Some(_)) => ("VIOLATED", true),
        };
        println!("property {:<width$} {verdict}", format!("{:?}:", property.name));
        failed |= bad;
        if bad && let Some(path) = discovery {
            let steps = path.into_vec();
            println!("counterexample ({} steps):\n{}", steps.len().saturating_sub(1), tell(steps));
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
