//! The arguments of the subcommands that take the controller's flags (`rbac`, `status`), as clap parses them, and
//! the options each command is run with, built from them. The commands themselves are in `commands` (`status`, like
//! its command, not under `--cfg madsim`).

use super::OperatorFlags;
use crate::commands::rbac::{OutputFormat, RbacOptions};
#[cfg(not(madsim))]
use crate::commands::status::StatusOptions;
use clap::ArgAction;
#[cfg(not(madsim))]
use std::path::PathBuf;
#[cfg(not(madsim))]
use std::time::Duration;

/// Arguments of the `rbac` subcommand: its own options, then the controller's flags, parsed and validated as the
/// controller does, so a Deployment's args can be passed unchanged.
#[derive(Debug, Clone, clap::Args)]
pub struct RbacArgs {
    /// Print only the required rules: what the operator cannot do its job without, under these flags. The optional
    /// rules left out each disable one feature, which says so in the log and in rollout_operator_feature_disabled.
    #[arg(long = "required-only", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = super::parse_go_bool)]
    pub required_only: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Yaml)]
    pub output: OutputFormat,
    #[command(flatten, next_help_heading = super::CONTROLLER_FLAGS_HEADING)]
    pub flags: OperatorFlags,
}

impl RbacArgs {
    /// What the command is run with.
    pub fn options(&self) -> RbacOptions {
        RbacOptions {
            namespace: self.flags.kubernetes_namespace.clone(),
            settings: self.flags.rbac_settings(),
            required_only: self.required_only,
            output: self.output,
        }
    }
}

/// Arguments of `status`: the view's options, and the controller's own flags (namespace, kube config, zone tracker,
/// progress deadline), so a Deployment's args can be passed unchanged. `-n`/`--namespace` is
/// `-kubernetes.namespace`, `--cluster-domain` is `-kubernetes.cluster-domain`, as in `plan` and `review`.
#[cfg(not(madsim))]
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Use this context of the kubeconfig instead of its current one (as kubectl --context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Redraw the view until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Time between two redraws with --watch (Go duration).
    #[arg(long, default_value = "2s", value_parser = super::parse_flag_go_duration)]
    pub interval: Duration,
    /// Output format: `text`, or `json` (with --watch, one JSON document per line).
    #[arg(short = 'o', long = "output", default_value = "text")]
    pub output: String,
    /// Read these dumps (YAML or JSON, as for `plan`; `-` is stdin) instead of the cluster.
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<PathBuf>,
    /// With -f: as of this time (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    /// Evaluate the RolloutHealthChecks (the dump's with -f, else the namespace's) against this Prometheus (its HTTP
    /// API base URL).
    #[arg(long = "prometheus-url", value_name = "URL")]
    pub prometheus_url: Option<String>,
    #[command(flatten, next_help_heading = super::CONTROLLER_FLAGS_HEADING)]
    pub flags: OperatorFlags,
}

#[cfg(not(madsim))]
impl StatusArgs {
    /// What the command is run with.
    pub fn options(&self) -> StatusOptions {
        let flags = &self.flags;
        StatusOptions {
            context: self.context.clone(),
            watch: self.watch,
            interval: self.interval,
            output: self.output.clone(),
            files: self.files.clone(),
            now: self.now.clone(),
            prometheus_url: self.prometheus_url.clone(),
            namespace: flags.kubernetes_namespace.clone(),
            zone_tracker_config_map: flags.zone_tracker_config_map().map(str::to_string),
            progress_deadline: flags.rollout_progress_deadline,
            config_file: flags.config_file().map(PathBuf::from),
            api_url: flags.api_url().map(str::to_string),
            client_timeout: flags.kubernetes_client_timeout,
            client_qps: flags.kubernetes_client_qps,
            client_burst: flags.kubernetes_client_burst,
        }
    }
}
