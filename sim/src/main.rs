//! `rollout-sim demo | batch --seeds A..B | replay --seed N`: runs the deterministic simulation (see the crate docs).

#[cfg(not(madsim))]
fn main() {
    eprintln!("{}", rollout_sim::NEEDS_MADSIM);
    std::process::exit(2);
}

#[cfg(madsim)]
mod cli;

#[cfg(madsim)]
fn main() {
    std::process::exit(cli::main());
}
