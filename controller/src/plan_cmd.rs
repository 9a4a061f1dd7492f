//! `rollout-operator plan`: one offline reconcile pass of every rollout group in a dump of a cluster.
//! (Being built: see issue 2, item 5.)

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of the `plan` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// YAML or JSON file to read (`-` for stdin); repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Only plan objects of this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Plan as of this time (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", default_value = "text")]
    pub output: String,
}

pub fn run(_args: PlanArgs) -> ExitCode {
    ExitCode::from(2)
}
