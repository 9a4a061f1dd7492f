//! The command line: `demo` (one readable run with faults), `batch --seeds A..B` (many seeds, failures with their
//! seed, throughput), `replay --seed N` (one seed with its full trace).

pub mod args;

use crate::cli::args::{ScenarioArgs, parse_range, scenario};
use clap::{Parser, Subcommand};
use rollout_sim::harness::outcome::Outcome;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "rollout-sim", about = "Deterministic simulation of the rollout controller under faults")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One run as a readable timeline: the world and its faults in words, what the user, the faults and the controller
    /// did (with the controller's own reason whenever it waits), violations when they happen, and a summary per zone
    /// and per guarantee.
    Demo {
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long, default_value = "real")]
        planner: String,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Many seeds; prints each failing seed and the throughput.
    Batch {
        /// A range `A..B` (B exclusive).
        #[arg(long, default_value = "0..200")]
        seeds: String,
        #[arg(long, default_value = "real")]
        planner: String,
        /// Stop at the first failing seed.
        #[arg(long)]
        fail_fast: bool,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// Runs each seed twice and compares the whole traces (madsim's own determinism check is weak).
    Determinism {
        #[arg(long, default_value = "0..20")]
        seeds: String,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
    /// One seed with its full trace.
    Replay {
        #[arg(long)]
        seed: u64,
        #[arg(long, default_value = "real")]
        planner: String,
        /// Also print the controller's own logs (timestamps are simulated time).
        #[arg(long)]
        logs: bool,
        #[command(flatten)]
        scenario: ScenarioArgs,
    },
}

fn summary(o: &Outcome) {
    println!(
        "seed {}: {} ({} controller writes judged, converged at {}, {:.0}s simulated, trace hash {:016x})",
        o.seed,
        if o.passed() { "PASS" } else { "FAIL" },
        o.writes_judged,
        o.converged_at.map_or("never".to_string(), |d| format!("{:.1}s", d.as_secs_f64())),
        o.sim_time.as_secs_f64(),
        o.trace.hash()
    );
}

fn replay(seed: u64, planner: &str, args: &ScenarioArgs, logs: bool) -> Result<i32, String> {
    let sc = scenario(planner, args)?;
    println!(
        "legend: per zone cur=currentRevision upd=updateRevision [pods by ordinal: revision, R ready / r not ready, * terminating, - missing]"
    );
    // With `logs`, the controller's own logs too; their timestamps are simulated time (madsim answers the clock).
    let o = rollout_sim::harness::run_logged(seed, &sc, true, logs);
    summary(&o);
    Ok(if o.passed() { 0 } else { 1 })
}

/// The demo: the run told as a timeline with the world in words, the controller's waits, and a closing summary.
fn demo(seed: u64, planner: &str, args: &ScenarioArgs) -> Result<i32, String> {
    let sc = scenario(planner, args)?;
    let o = rollout_sim::harness::run(seed, &sc, false);
    println!("{}", rollout_sim::demo::render(&sc, &o));
    summary(&o);
    Ok(if o.passed() { 0 } else { 1 })
}

fn run() -> Result<i32, String> {
    match Cli::parse().command {
        Command::Demo { seed, planner, scenario: args } => demo(seed, &planner, &args),
        Command::Replay { seed, planner, logs, scenario: args } => replay(seed, &planner, &args, logs),
        Command::Determinism { seeds, scenario: args } => {
            let sc = scenario("real", &args)?;
            let (a, b) = parse_range(&seeds)?;
            let mut differing = 0;
            for seed in a..b {
                let x = rollout_sim::harness::run(seed, &sc, false);
                let y = rollout_sim::harness::run(seed, &sc, false);
                if let Some(i) = (0..x.trace.lines.len().max(y.trace.lines.len()))
                    .find(|&i| x.trace.lines.get(i) != y.trace.lines.get(i))
                {
                    differing += 1;
                    println!("seed {seed}: traces differ at line {i}:");
                    println!("  first:  {}", x.trace.lines.get(i).map_or("<end>", String::as_str));
                    println!("  second: {}", y.trace.lines.get(i).map_or("<end>", String::as_str));
                }
            }
            println!("{} seeds run twice, {differing} differed", b - a);
            Ok(if differing == 0 { 0 } else { 1 })
        }
        Command::Batch { seeds, planner, fail_fast, scenario: args } => {
            let sc = scenario(&planner, &args)?;
            let (a, b) = parse_range(&seeds)?;
            let started = Instant::now();
            let mut failures = 0u64;
            let mut sim = Duration::ZERO;
            let mut ran = 0u64;
            let (mut downscales, mut closest) = (0u64, None::<(Duration, u64)>);
            let (mut near, mut interleaved, mut slow) = ((0u64, 0u64), (0u64, 0u64), 0u64);
            let mut reactions = rollout_sim::oracle::reaction::Summary::default();
            let mut large = Vec::new();
            let mut events = rollout_sim::oracle::events::EventStats::default();
            let mut max_writes_per_step = (0.0f64, 0u64);
            let mut drains = rollout_sim::oracle::checker::budgets::DrainStats::default();
            let mut ha = rollout_sim::oracle::election::HaStats::default();
            let mut scale_requests = rollout_sim::environment::guaranteed_update::ScaleRequestStats::default();
            let mut failed_needs = rollout_sim::harness::pass_log::FailedNeeds::new();
            let mut certificates = rollout_sim::oracle::certificates::CertificateLedger::default();
            for seed in a..b {
                let o = rollout_sim::harness::run(seed, &sc, false);
                ran += 1;
                reactions.add(&o.reactions);
                if args.large {
                    large.push((seed, o.reactions.clone()));
                }
                sim += o.sim_time;
                downscales += o.downscales;
                near = (near.0 + o.near_min_time.0, near.1 + o.near_min_time.1);
                interleaved = (interleaved.0 + o.rolled_while_scaling, interleaved.1 + o.scaled_while_rolling);
                slow += o.slow_observations;
                events.add(&o.events);
                drains.add(&o.drains);
                ha.add(&o.ha);
                scale_requests.add(&o.scale_requests);
                certificates.add(&o.certificates);
                for (need, n) in &o.failed_needs {
                    *failed_needs.entry(need.clone()).or_default() += n;
                }
                if o.events.writes_per_step() > max_writes_per_step.0 {
                    max_writes_per_step = (o.events.writes_per_step(), seed);
                }
                if let Some(gap) = o.min_downscale_gap
                    && closest.is_none_or(|(g, _)| gap < g)
                {
                    closest = Some((gap, seed));
                }
                if !o.passed() {
                    failures += 1;
                    println!(
                        "FAIL seed {seed} (replay: rollout-sim replay --seed {seed} --scenario '{}')",
                        sc.to_line()
                    );
                    for v in &o.violations {
                        println!("  {} at {:.3}s: {}", v.invariant, v.at.as_secs_f64(), v.detail);
                    }
                    if fail_fast {
                        break;
                    }
                }
            }
            if args.scaling || args.webhook {
                let gap = closest.map_or("none".to_string(), |(g, s)| format!("{:.3}s (seed {s})", g.as_secs_f64()));
                println!("{downscales} downscales committed; closest commits of two zones' downscales: {gap}");
                println!(
                    "pairs committed less than min time + 1 s apart: {} with the later by the controller, {} by the webhook or user",
                    near.0, near.1
                );
                println!(
                    "controller deletions in a StatefulSet being scaled: {}; controller replica changes of one being rolled: {}",
                    interleaved.0, interleaved.1
                );
            }
            if args.webhook {
                println!("{}", scale_requests.describe());
            }
            if args.observe_lag {
                println!("generations observed only after 5-60 s: {slow}");
            }
            println!("{}", reactions.describe());
            println!("{}", rollout_sim::oracle::needs::describe(&failed_needs));
            if args.large {
                for (seed, r) in &large {
                    if let Some((span, own, share)) = rollout_sim::oracle::reaction::Summary::rollout_share(r) {
                        println!(
                            "seed {seed}: rollout {:.0} s, pods' own replacement times {:.0} s ({} pods), controller share {:.2} %",
                            span.as_secs_f64(),
                            own.as_secs_f64(),
                            r.restarts.len(),
                            share * 100.0
                        );
                    }
                }
            }
            if args.events {
                println!("Events: {}", events.describe());
                println!(
                    "Event writes per rollout step: {:.2} over the batch, at most {:.2} in one run (seed {})",
                    events.writes_per_step(),
                    max_writes_per_step.0,
                    max_writes_per_step.1
                );
            }
            if args.drains.is_some() {
                println!(
                    "evictions: {} asked, {} denied, {} webhook failures, {} dry runs allowed, {} committed; {} \
                     evictions and controller deletions of available pods judged against the budget ({} evictions \
                     let through as their zone's or partition's second unavailable pod); {} runs held by a \
                     partition's last pod; {} denials after an intent, {} answered with it still there",
                    drains.asked,
                    drains.denied,
                    drains.failed,
                    drains.dry_runs_allowed,
                    drains.committed,
                    drains.judged,
                    drains.second_in_scope,
                    drains.held_by_last_pod,
                    drains.denied_after_intent,
                    drains.denied_intent_left
                );
                if drains.chased > 0 {
                    println!(
                        "evictions chasing the controller (within 20 ms of a pod first Ready or a controller \
                         deletion): {} sent, {} allowed",
                        drains.chased, drains.chased_allowed
                    );
                }
            }
            if sc.certificates.is_some() {
                println!("{}", certificates.describe());
            }
            if args.ha.is_some() {
                println!("{}", ha.describe());
                println!("{}", ha.describe_losses());
            }
            let wall = started.elapsed().as_secs_f64();
            println!(
                "{ran} seeds, {failures} failed, {:.1} s wall, {:.1} seeds/s, {:.0} simulated s per wall s ({:.1} ms per seed)",
                wall,
                ran as f64 / wall,
                sim.as_secs_f64() / wall,
                wall * 1e3 / ran as f64
            );
            Ok(if failures == 0 { 0 } else { 1 })
        }
    }
}

pub fn main() -> i32 {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
