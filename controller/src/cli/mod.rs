//! The command line: the reference's flags, with Go `flag` package syntax, and the `plan` subcommand.
//!
//! Users swap the image and keep their manifests, so every flag keeps the reference's name, default and meaning,
//! and validation fails with the reference's messages, in the reference's order. Go's `flag` package accepts
//! `-name=value`, `--name=value` and `-name value`, and a boolean given bare (`-server-tls.enabled`) or as
//! `-name=true|false` (a bare boolean never consumes the next argument). clap only understands `--long`, so argv is
//! first rewritten by [`normalise_args`]; clap then parses a strict, unambiguous form.

pub mod prom_duration;
pub mod rbac;

use crate::cli::prom_duration::parse_prom_duration;
use crate::cli::rbac::RbacArgs;
use crate::offline::plan::PlanArgs;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};
use rollout_core::duration::parse_go_duration;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use thiserror::Error;

/// `-server.cluster-validation.http.excluded-paths` when the flag is empty, as in the reference.
pub const DEFAULT_CLUSTER_VALIDATION_EXCLUDED_PATHS: [&str; 2] =
    ["admission/no-downscale", "admission/prepare-downscale"];

/// Every flag of the reference (section 7.1 of the reference description). Some are accepted and validated now and
/// used by later features (TLS, webhooks, zone tracker, rate limiting), so that existing manifests keep working.
#[derive(Debug, Clone, clap::Args)]
pub struct OperatorFlags {
    /// Log format: logfmt or json.
    #[arg(long = "log.format", value_name = "string", default_value = "logfmt")]
    pub log_format: String,
    /// Minimum log level: debug, info, warn or error [default: debug; `plan`: warn].
    #[arg(long = "log.level", value_name = "string")]
    pub log_level: Option<String>,
    /// Port of the plain HTTP server (/metrics, /ready).
    #[arg(long = "server.port", value_name = "int", default_value_t = 8001)]
    pub server_port: u16,

    /// Kubernetes API server URL; requires -kubernetes.config-file.
    #[arg(long = "kubernetes.api-url", value_name = "string", default_value = "")]
    pub kubernetes_api_url: String,
    /// Path of a kubeconfig file; empty means in-cluster configuration. Requires -kubernetes.api-url.
    #[arg(long = "kubernetes.config-file", value_name = "string", default_value = "")]
    pub kubernetes_config_file: String,
    /// Timeout of Kubernetes API requests, if the kubeconfig sets none (0 = no timeout, as in Go).
    #[arg(long = "kubernetes.client-timeout", value_name = "duration", default_value = "5m", value_parser = parse_flag_go_duration)]
    pub kubernetes_client_timeout: Duration,
    /// Kubernetes API requests per second, per API group; <= 0 disables client-side rate limiting.
    #[arg(long = "kubernetes.client-qps", value_name = "float", default_value_t = 5.0)]
    pub kubernetes_client_qps: f64,
    /// Burst of Kubernetes API requests, per API group; <= 0 disables client-side rate limiting.
    #[arg(long = "kubernetes.client-burst", value_name = "int", default_value_t = 10)]
    pub kubernetes_client_burst: i64,
    /// Timeout of HTTP calls to pods (0 = no timeout, as in Go).
    #[arg(long = "pods.client-timeout", value_name = "duration", default_value = "5s", value_parser = parse_flag_go_duration)]
    pub pods_client_timeout: Duration,
    /// Cluster domain, the suffix of pod FQDNs (a trailing dot makes them absolute).
    #[arg(long = "kubernetes.cluster-domain", value_name = "string", default_value = "cluster.local.")]
    pub kubernetes_cluster_domain: String,
    /// The namespace the operator manages (required).
    #[arg(long = "kubernetes.namespace", value_name = "string", default_value = "")]
    pub kubernetes_namespace: String,
    /// Minimum interval between two reconciles of one rollout group.
    #[arg(long = "reconcile.interval", value_name = "duration", default_value = "5s", value_parser = parse_flag_go_duration)]
    pub reconcile_interval: Duration,

    /// Validate the X-Cluster header of incoming HTTP requests.
    #[arg(long = "server.cluster-validation.http.enabled", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub cluster_validation_enabled: bool,
    /// Only log and count requests that fail cluster validation (requires the validation to be enabled).
    #[arg(long = "server.cluster-validation.http.soft-validation", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub cluster_validation_soft: bool,
    /// Comma-separated paths exempt from cluster validation [empty: admission/no-downscale,admission/prepare-downscale].
    #[arg(long = "server.cluster-validation.http.excluded-paths", value_name = "csv", default_value = "",
        value_parser = parse_csv)]
    pub cluster_validation_excluded_paths: CsvList,
    /// Comma-separated User-Agent regular expressions exempt from cluster validation.
    #[arg(long = "server.cluster-validation.http.excluded-user-agents", value_name = "csv", default_value = "",
        value_parser = parse_csv)]
    pub cluster_validation_excluded_user_agents: CsvList,

    /// Serve the admission webhooks over TLS.
    #[arg(long = "server-tls.enabled", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub server_tls_enabled: bool,
    /// Port of the TLS server.
    #[arg(long = "server-tls.port", value_name = "int", default_value_t = 8443)]
    pub server_tls_port: u16,
    /// PEM certificate file (when the self-signed certificate is disabled).
    #[arg(long = "server-tls.cert-file", value_name = "string", default_value = "")]
    pub server_tls_cert_file: String,
    /// PEM private key file (when the self-signed certificate is disabled).
    #[arg(long = "server-tls.key-file", value_name = "string", default_value = "")]
    pub server_tls_key_file: String,
    /// Read and write timeout of the TLS server.
    #[arg(long = "server-tls.request-timeout", value_name = "duration", default_value = "10s", value_parser = parse_flag_go_duration)]
    pub server_tls_request_timeout: Duration,
    /// Generate a self-signed certificate and persist it in a Secret.
    #[arg(long = "server-tls.self-signed-cert.enabled", value_name = "bool", default_value = "true",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub self_signed_cert_enabled: bool,
    /// Name of the Secret holding the self-signed certificate.
    #[arg(
        long = "server-tls.self-signed-cert.secret-name",
        value_name = "string",
        default_value = "rollout-operator-self-signed-certificate"
    )]
    pub self_signed_cert_secret_name: String,
    /// DNS name of the self-signed certificate [empty: rollout-operator.<namespace>.svc].
    #[arg(long = "server-tls.self-signed-cert.dns-name", value_name = "string", default_value = "")]
    pub self_signed_cert_dns_name: String,
    /// Organization of the self-signed certificate.
    #[arg(long = "server-tls.self-signed-cert.org", value_name = "string", default_value = "Grafana Labs")]
    pub self_signed_cert_org: String,
    /// Validity of the self-signed certificate (Prometheus duration: 1y, 52w, 365d, 8760h).
    #[arg(long = "server-tls.self-signed-cert.expiration", value_name = "duration", default_value = "1y",
        value_parser = parse_prom_duration)]
    pub self_signed_cert_expiration: Duration,
    /// Inject the self-signed CA into labelled webhook configurations.
    #[arg(long = "webhooks.update-ca-bundle", value_name = "bool", default_value = "true",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub webhooks_update_ca_bundle: bool,

    /// Track the last downscale of each zone in a ConfigMap (prepare-downscale webhook).
    #[arg(long = "use-zone-tracker", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub use_zone_tracker: bool,
    /// Name of the zone tracker ConfigMap.
    #[arg(
        long = "zone-tracker.config-map-name",
        value_name = "string",
        default_value = "rollout-operator-zone-tracker"
    )]
    pub zone_tracker_config_map_name: String,
    /// Timeout of the patches that maintain the grafana.com/ready-time pod annotation.
    #[arg(long = "zpdb.pod-ready-annotation-patch-timeout", value_name = "duration", default_value = "5s",
        value_parser = parse_flag_go_duration)]
    pub zpdb_pod_ready_annotation_patch_timeout: Duration,
    /// Name of the Service in front of the webhook server: the self-signed certificate covers <name>, <name>.<ns>,
    /// <name>.<ns>.svc and <name>.<ns>.svc.<cluster-domain>.
    #[arg(long = "server-tls.service-name", value_name = "string", default_value = "rollout-operator")]
    pub server_tls_service_name: String,

    /// Write Kubernetes Events (events.k8s.io/v1) about rollouts and admissions; needs create and patch on events.
    #[arg(long = "events.enabled", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub events_enabled: bool,
    /// A rollout group with work to do and no progress for this long is reported stuck (log, Event if enabled,
    /// rollout_operator_group_stuck); 0 turns detection off.
    #[arg(long = "rollout.progress-deadline", value_name = "duration", default_value = "30m",
        value_parser = parse_flag_go_duration)]
    pub rollout_progress_deadline: Duration,

    /// Run several replicas: only the holder of a coordination.k8s.io Lease runs the controller (every replica
    /// serves the webhooks); needs get, create and update on leases.
    #[arg(long = "leader-election.enabled", value_name = "bool", default_value = "false",
        action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
        value_parser = parse_go_bool)]
    pub leader_election_enabled: bool,
    /// Name of the Lease the replicas elect their leader with (in -kubernetes.namespace).
    #[arg(long = "leader-election.lease-name", value_name = "string", default_value = "rollout-operator-leader")]
    pub leader_election_lease_name: String,
    /// How long a leader's Lease lasts after its last renewal, as the other replicas count it (whole seconds).
    #[arg(long = "leader-election.lease-duration", value_name = "duration", default_value = "15s",
        value_parser = parse_flag_go_duration)]
    pub leader_election_lease_duration: Duration,
    /// How long a leader keeps acting without renewing its Lease; shorter than the lease duration.
    #[arg(long = "leader-election.renew-deadline", value_name = "duration", default_value = "10s",
        value_parser = parse_flag_go_duration)]
    pub leader_election_renew_deadline: Duration,
    /// How often a replica tries to acquire or renew the Lease; shorter than the renew deadline.
    #[arg(long = "leader-election.retry-period", value_name = "duration", default_value = "2s",
        value_parser = parse_flag_go_duration)]
    pub leader_election_retry_period: Duration,
}

/// Default of `-zone-tracker.config-map-name`.
pub const DEFAULT_DOWNSCALE_RECORD: &str = "rollout-operator-zone-tracker";

impl OperatorFlags {
    /// The ConfigMap holding the group downscale record, shared by the controller and the webhooks, when
    /// `-use-zone-tracker` is true; `None` otherwise (downscales are recorded in StatefulSet annotations).
    pub fn downscale_record(&self) -> Option<&str> {
        self.use_zone_tracker.then(|| self.downscale_record_name())
    }

    /// `-zone-tracker.config-map-name`, or its default when set empty (the reference accepts an empty name when
    /// `-use-zone-tracker` is false).
    pub fn downscale_record_name(&self) -> &str {
        if self.zone_tracker_config_map_name.is_empty() {
            DEFAULT_DOWNSCALE_RECORD
        } else {
            &self.zone_tracker_config_map_name
        }
    }

    /// The election's settings under `identity` (this replica's pod name), from the `-leader-election.*` flags.
    pub fn election_config(&self, identity: &str) -> rollout_core::election::ElectionConfig {
        rollout_core::election::ElectionConfig {
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
            ..rollout_core::election::ElectionConfig::new(identity)
        }
    }

    /// `-kubernetes.config-file`, or `None` for in-cluster configuration.
    pub fn config_file(&self) -> Option<&Path> {
        (!self.kubernetes_config_file.is_empty()).then(|| Path::new(&self.kubernetes_config_file))
    }

    /// `-kubernetes.api-url`, or `None` when not set.
    pub fn api_url(&self) -> Option<&str> {
        (!self.kubernetes_api_url.is_empty()).then_some(self.kubernetes_api_url.as_str())
    }

    /// Checks the flags of the controller, in the reference's order, stopping at the first problem.
    fn validate(&self) -> Result<(), ConfigError> {
        if self.kubernetes_cluster_domain.is_empty() {
            return Err(ConfigError::EmptyClusterDomain);
        }
        if self.kubernetes_namespace.is_empty() {
            return Err(ConfigError::MissingNamespace);
        }
        if self.kubernetes_api_url.is_empty() != self.kubernetes_config_file.is_empty() {
            return Err(ConfigError::ApiUrlAndConfigFile);
        }
        if self.use_zone_tracker && self.zone_tracker_config_map_name.is_empty() {
            return Err(ConfigError::MissingZoneTrackerConfigMap);
        }
        if self.kubernetes_client_qps > 0.0 && self.kubernetes_client_burst < 1 {
            return Err(ConfigError::BurstTooSmall);
        }
        if self.server_tls_request_timeout.is_zero() {
            return Err(ConfigError::NonPositiveRequestTimeout);
        }
        if self.zpdb_pod_ready_annotation_patch_timeout.is_zero() {
            return Err(ConfigError::NonPositivePatchTimeout);
        }
        if self.leader_election_enabled {
            if self.leader_election_lease_name.is_empty() {
                return Err(ConfigError::MissingLeaseName);
            }
            self.election_config("validation").validate().map_err(ConfigError::LeaderElection)?;
        }
        // The reference's cluster-validation label is the namespace, which is non-empty by now.
        if self.cluster_validation_soft && !self.cluster_validation_enabled {
            return Err(ConfigError::SoftValidationWithoutValidation);
        }
        Ok(())
    }
}

/// A comma-separated list flag (dskit's `StringSliceCSV`). An empty value is an empty list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvList(pub Vec<String>);

fn parse_csv(s: &str) -> Result<CsvList, std::convert::Infallible> {
    Ok(CsvList(if s.is_empty() { Vec::new() } else { s.split(',').map(str::to_string).collect() }))
}

/// Go's `strconv.ParseBool`, which the `flag` package uses for boolean flags.
fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err("parse error".to_string()),
    }
}

/// Go duration flags. Go accepts negative values; every consumer of these flags treats a negative value like zero
/// (no timeout, no wait), and the two that must be positive reject zero in validation with the reference's
/// message, so a negative value is read as zero.
pub(crate) fn parse_flag_go_duration(s: &str) -> Result<Duration, rollout_core::duration::DurationError> {
    match s.strip_prefix('-') {
        Some(magnitude) => parse_go_duration(magnitude).map(|_| Duration::ZERO),
        None => parse_go_duration(s),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Logfmt,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: LogLevel,
}

impl LogConfig {
    /// Checks format before level, as the reference builds its logger.
    fn from_flags(flags: &OperatorFlags, default_level: &str) -> Result<LogConfig, ConfigError> {
        let format = match flags.log_format.as_str() {
            "logfmt" => LogFormat::Logfmt,
            "json" => LogFormat::Json,
            other => return Err(ConfigError::UnknownLogFormat(other.to_string())),
        };
        let level = match flags.log_level.as_deref().unwrap_or(default_level) {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "warn" => LogLevel::Warn,
            "error" => LogLevel::Error,
            other => return Err(ConfigError::UnknownLogLevel(other.to_string())),
        };
        Ok(LogConfig { format, level })
    }
}

/// A configuration problem found after parsing. Messages are the reference's, verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("-kubernetes.cluster-domain cannot be an empty string")]
    EmptyClusterDomain,
    #[error("-kubernetes.namespace has not been specified")]
    MissingNamespace,
    #[error("either configure both -kubernetes.api-url and -kubernetes.config-file or neither")]
    ApiUrlAndConfigFile,
    #[error("-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified")]
    MissingZoneTrackerConfigMap,
    #[error(
        "-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is greater than 0, since each request consumes one token"
    )]
    BurstTooSmall,
    #[error("-server-tls.request-timeout must be positive")]
    NonPositiveRequestTimeout,
    #[error("-zpdb.pod-ready-annotation-patch-timeout must be positive")]
    NonPositivePatchTimeout,
    #[error("http: soft validation can be enabled only if cluster validation is enabled")]
    SoftValidationWithoutValidation,
    #[error("-leader-election.enabled is true, but -leader-election.lease-name has not been specified")]
    MissingLeaseName,
    #[error("{0}")]
    LeaderElection(rollout_core::election::ConfigError),
    #[error("unknown log format: {0}")]
    UnknownLogFormat(String),
    #[error("unknown log level: {0}")]
    UnknownLogLevel(String),
}

/// Why the command line was not accepted.
#[derive(Debug, Error)]
pub enum CliError {
    /// Syntax error, unknown flag, bad value; also `-help` (exit 0). Rendered by clap.
    #[error("{0}")]
    Parse(#[from] clap::Error),
    /// The flags parsed but do not make a valid configuration.
    #[error("{0}")]
    Invalid(#[from] ConfigError),
}

impl CliError {
    /// The reference's exit codes: 2 for parse errors (Go's `flag` package), 1 for invalid configuration.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Parse(e) => u8::try_from(e.exit_code()).unwrap_or(2),
            CliError::Invalid(_) => 1,
        }
    }

    /// Prints the error (or the help text) where the reference does, and returns the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            // clap prints help to stdout and errors to stderr; if stdout/stderr is gone there is nobody to tell.
            CliError::Parse(e) => {
                let _ = e.print();
            }
            CliError::Invalid(e) => eprintln!("{e}"),
        }
        ExitCode::from(self.exit_code())
    }
}

/// What the process was asked to do.
#[derive(Debug, Clone)]
pub enum Command {
    /// Run the controller.
    Run(Box<RunConfig>),
    /// `rollout-operator plan ...`: one offline planning pass over a cluster dump.
    Plan { args: PlanArgs, log: LogConfig },
    /// `rollout-operator review ...`: answer one AdmissionReview offline, against a cluster dump.
    #[cfg(not(madsim))]
    Review { args: crate::offline::review::ReviewArgs, log: LogConfig },
    /// `rollout-operator rbac [flags]`: print the Role and ClusterRole the controller's flags need.
    Rbac(Box<RbacArgs>),
    /// `rollout-operator status [flags]`: a read-only view of the namespace's rollout groups.
    #[cfg(not(madsim))]
    Status { args: Box<crate::offline::status::StatusArgs>, log: LogConfig },
}

/// A validated controller configuration.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub flags: OperatorFlags,
    pub log: LogConfig,
}

#[derive(Debug, Parser)]
#[command(
    name = "rollout-operator",
    about = "Coordinates rollouts of zone-aware StatefulSets, one zone at a time.",
    // Go's flag package lets a later occurrence of a flag override an earlier one.
    args_override_self = true
)]
struct Cli {
    #[command(flatten)]
    flags: OperatorFlags,
    #[command(subcommand)]
    command: Option<SubCommand>,
}

#[derive(Debug, Subcommand)]
enum SubCommand {
    /// Plan one reconcile pass of every rollout group in a dump of a cluster (no cluster access).
    Plan(PlanArgs),
    /// Answer one AdmissionReview as the webhook would, looking up objects in cluster dumps (no cluster access).
    #[cfg(not(madsim))]
    Review(crate::offline::review::ReviewArgs),
    /// Print the Role and ClusterRole the controller's flags (given after `rbac`) need, as a v1 List.
    #[command(args_override_self = true)]
    Rbac(Box<RbacArgs>),
    /// Show each rollout group of the namespace (its zones, what the controller would do next and why it waits,
    /// downscales), read live with the controller's kube config flags (given after `status`), or from dumps (-f).
    #[cfg(not(madsim))]
    #[command(args_override_self = true)]
    Status(Box<crate::offline::status::StatusArgs>),
}

/// Parses and validates a command line (`args` includes the program name).
pub fn parse<I, T>(args: I) -> Result<Command, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut cmd = Cli::command();
    cmd.build();
    let args = normalise_args(&cmd, args.into_iter().map(Into::into));
    let matches = cmd.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    match cli.command {
        // The plan subcommand reads files, not the cluster: only the log flags matter to it. Its default level is
        // warn so that its report on stdout is not buried in debug logs.
        Some(SubCommand::Plan(args)) => {
            let log = LogConfig::from_flags(&cli.flags, "warn")?;
            Ok(Command::Plan { args, log })
        }
        #[cfg(not(madsim))]
        Some(SubCommand::Review(args)) => {
            let log = LogConfig::from_flags(&cli.flags, "warn")?;
            Ok(Command::Review { args, log })
        }
        // The controller's flags go after `rbac` and are checked as the controller checks them, so that what it
        // accepts is exactly what the controller accepts. One given before `rbac` would be silently ignored, so it
        // is refused.
        Some(SubCommand::Rbac(args)) => {
            refuse_flags_before(&mut cmd, &matches, "rbac")?;
            args.flags.validate()?;
            LogConfig::from_flags(&args.flags, "debug")?;
            Ok(Command::Rbac(args))
        }
        // `status` takes the controller's flags after it too; it checks its own (a namespace, its view options),
        // not the controller's (it may infer the kube config as kubectl does).
        #[cfg(not(madsim))]
        Some(SubCommand::Status(args)) => {
            refuse_flags_before(&mut cmd, &matches, "status")?;
            let log = LogConfig::from_flags(&args.flags, "warn")?;
            Ok(Command::Status { args, log })
        }
        None => {
            let mut flags = cli.flags;
            if flags.cluster_validation_excluded_paths.0.is_empty() {
                flags.cluster_validation_excluded_paths =
                    CsvList(DEFAULT_CLUSTER_VALIDATION_EXCLUDED_PATHS.iter().map(|p| p.to_string()).collect());
            }
            // Validation before the log flags, as in the reference (it builds the logger after validating).
            flags.validate()?;
            let log = LogConfig::from_flags(&flags, "debug")?;
            Ok(Command::Run(Box::new(RunConfig { flags, log })))
        }
    }
}

/// Refuses a controller flag given before `subcommand`: it would be silently ignored (the subcommand reads its own).
fn refuse_flags_before(cmd: &mut clap::Command, matches: &clap::ArgMatches, subcommand: &str) -> Result<(), CliError> {
    let before = cmd
        .get_arguments()
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .find_map(|arg| arg.get_long().map(str::to_string));
    match before {
        Some(flag) => {
            let message = format!("-{flag} must come after `{subcommand}`, with the controller's other flags");
            Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, message).into())
        }
        None => Ok(()),
    }
}

/// How an argument of a (sub)command uses the next command-line argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlagKind {
    /// Needs a value: `-name value` takes the next argument, whatever it looks like.
    Value,
    /// Boolean or built-in (help): never takes the next argument.
    NoValue,
    Unknown,
}

fn long_flag_kind(cmd: &clap::Command, name: &str) -> FlagKind {
    let arg = cmd.get_arguments().find(|a| a.get_long_and_visible_aliases().is_some_and(|l| l.contains(&name)));
    arg.map_or(FlagKind::Unknown, arg_kind)
}

fn short_flag_kind(cmd: &clap::Command, short: char) -> FlagKind {
    cmd.get_arguments().find(|a| a.get_short() == Some(short)).map_or(FlagKind::Unknown, arg_kind)
}

fn arg_kind(arg: &clap::Arg) -> FlagKind {
    let needs_value = arg.get_action().takes_values() && arg.get_num_args().is_none_or(|n| n.min_values() > 0);
    if needs_value { FlagKind::Value } else { FlagKind::NoValue }
}

/// Rewrites Go-style arguments into the one form clap parses unambiguously:
///
/// * a single-dash flag whose name is longer than one character (`-log.level`) becomes `--log.level`; one-letter
///   flags (`-f`, `-o`, `-h`), a lone `-` (stdin) and `--` are left alone;
/// * a flag that needs a value and has no `=` is joined with the next argument (`--log.level info` becomes
///   `--log.level=info`), so that, as in Go, the next argument is the value even if it starts with `-`
///   (`-kubernetes.client-burst -1`) and is never itself rewritten;
/// * after `--` nothing is rewritten; after the name of a subcommand, that subcommand's flags apply.
///
/// Booleans are left as they are: clap requires `=` for their optional value, so a bare boolean never consumes
/// the next argument. Unknown flags are left for clap to reject (exit 2).
pub fn normalise_args(cmd: &clap::Command, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    let mut current = cmd;
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            out.push(arg);
            out.extend(args);
            break;
        }
        let long_body = match text.strip_prefix("--") {
            Some(body) => Some(body),
            None => text.strip_prefix('-').filter(|body| {
                let name = body.split_once('=').map_or(*body, |(name, _)| name);
                name.chars().count() > 1
            }),
        };
        if let Some(body) = long_body {
            let mut long = OsString::from("--");
            long.push(body);
            if !body.contains('=')
                && long_flag_kind(current, body) == FlagKind::Value
                && let Some(value) = args.next()
            {
                long.push("=");
                long.push(value);
            }
            out.push(long);
        } else if let Some(short) = text.strip_prefix('-').and_then(|s| {
            let mut chars = s.chars();
            chars.next().filter(|_| chars.as_str().is_empty())
        }) {
            // `-f value`: the value is passed through untouched, even if it looks like a flag.
            out.push(arg.clone());
            if short_flag_kind(current, short) == FlagKind::Value
                && let Some(value) = args.next()
            {
                out.push(value);
            }
        } else {
            if let Some(sub) = current.find_subcommand(text) {
                current = sub;
            }
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<RunConfig, CliError> {
        let argv = std::iter::once("rollout-operator").chain(args.iter().copied());
        match parse(argv)? {
            Command::Run(cfg) => Ok(*cfg),
            Command::Plan { .. } => panic!("expected the controller, got plan"),
            #[cfg(not(madsim))]
            Command::Review { .. } => panic!("expected the controller, got review"),
            Command::Rbac(_) => panic!("expected the controller, got rbac"),
            #[cfg(not(madsim))]
            Command::Status { .. } => panic!("expected the controller, got status"),
        }
    }

    fn run_ok(args: &[&str]) -> RunConfig {
        match run(args) {
            Ok(cfg) => cfg,
            Err(e) => panic!("{args:?} should parse: {e}"),
        }
    }

    fn run_err(args: &[&str]) -> CliError {
        match run(args) {
            Ok(cfg) => panic!("{args:?} should fail, got {cfg:?}"),
            Err(e) => e,
        }
    }

    /// The message and exit code of a validation failure.
    fn invalid(args: &[&str]) -> (String, u8) {
        let err = run_err(args);
        assert!(matches!(err, CliError::Invalid(_)), "{args:?}: expected a validation error, got {err:?}");
        (err.to_string(), err.exit_code())
    }

    fn parse_error(args: &[&str]) -> CliError {
        let err = run_err(args);
        assert!(matches!(err, CliError::Parse(_)), "{args:?}: expected a parse error, got {err:?}");
        assert_eq!(err.exit_code(), 2, "{args:?}");
        err
    }

    const NS: &str = "-kubernetes.namespace=ns";

    #[test]
    fn defaults_match_the_reference() {
        let cfg = run_ok(&[NS]);
        let f = &cfg.flags;
        assert_eq!(f.kubernetes_namespace, "ns");
        assert_eq!(f.kubernetes_cluster_domain, "cluster.local.");
        assert_eq!(f.kubernetes_client_timeout, Duration::from_secs(300));
        assert_eq!(f.reconcile_interval, Duration::from_secs(5));
        assert_eq!(f.server_port, 8001);
        assert_eq!(cfg.log, LogConfig { format: LogFormat::Logfmt, level: LogLevel::Debug });
        assert_eq!(f.config_file(), None);
        assert_eq!(f.api_url(), None);
        assert_eq!(f.kubernetes_client_qps, 5.0);
        assert_eq!(f.kubernetes_client_burst, 10);
        assert_eq!(f.pods_client_timeout, Duration::from_secs(5));
        assert!(!f.cluster_validation_enabled && !f.cluster_validation_soft);
        assert_eq!(f.cluster_validation_excluded_paths.0, ["admission/no-downscale", "admission/prepare-downscale"]);
        assert!(f.cluster_validation_excluded_user_agents.0.is_empty());
        assert!(!f.server_tls_enabled);
        assert_eq!(f.server_tls_port, 8443);
        assert_eq!(f.server_tls_request_timeout, Duration::from_secs(10));
        assert!(f.self_signed_cert_enabled);
        assert_eq!(f.self_signed_cert_secret_name, "rollout-operator-self-signed-certificate");
        assert_eq!(f.self_signed_cert_dns_name, "");
        assert_eq!(f.self_signed_cert_org, "Grafana Labs");
        assert_eq!(f.self_signed_cert_expiration, Duration::from_secs(365 * 24 * 3600));
        assert!(f.webhooks_update_ca_bundle);
        assert!(!f.use_zone_tracker);
        assert_eq!(f.zone_tracker_config_map_name, "rollout-operator-zone-tracker");
        assert_eq!(f.zpdb_pod_ready_annotation_patch_timeout, Duration::from_secs(5));
        assert!(!f.events_enabled, "Events are opt-in: the reference's deployments grant none");
        assert_eq!(f.rollout_progress_deadline, Duration::from_secs(30 * 60));
    }

    #[test]
    fn events_and_the_progress_deadline_take_the_reference_syntax() {
        let cfg = run_ok(&[NS, "-events.enabled", "-rollout.progress-deadline=1h30m"]);
        assert!(cfg.flags.events_enabled);
        assert_eq!(cfg.flags.rollout_progress_deadline, Duration::from_secs(90 * 60));
        assert_eq!(run_ok(&[NS, "-rollout.progress-deadline", "0"]).flags.rollout_progress_deadline, Duration::ZERO);
        parse_error(&[NS, "-rollout.progress-deadline=30"]);
        parse_error(&[NS, "-events.enabled=maybe"]);
    }

    #[test]
    fn leader_election_is_off_by_default_and_takes_the_reference_syntax() {
        let f = run_ok(&[NS]).flags;
        assert!(!f.leader_election_enabled, "off by default: the reference's deployments grant no Leases");
        assert_eq!(f.leader_election_lease_name, "rollout-operator-leader");
        assert_eq!(f.leader_election_lease_duration, Duration::from_secs(15));
        assert_eq!(f.leader_election_renew_deadline, Duration::from_secs(10));
        assert_eq!(f.leader_election_retry_period, Duration::from_secs(2));
        let f = run_ok(&[
            NS,
            "-leader-election.enabled",
            "-leader-election.lease-name=ops-leader",
            "-leader-election.lease-duration=30s",
            "-leader-election.renew-deadline",
            "20s",
            "--leader-election.retry-period=5s",
        ])
        .flags;
        assert!(f.leader_election_enabled);
        assert_eq!(f.leader_election_lease_name, "ops-leader");
        let config = f.election_config("pod-a");
        assert_eq!(config.identity, "pod-a");
        assert_eq!(
            (config.lease_duration, config.renew_deadline, config.retry_period),
            (Duration::from_secs(30), Duration::from_secs(20), Duration::from_secs(5))
        );
        parse_error(&[NS, "-leader-election.enabled=maybe"]);
        parse_error(&[NS, "-leader-election.lease-duration=15"]);
    }

    #[test]
    fn leader_election_timings_are_validated_only_when_enabled() {
        let on = "-leader-election.enabled=true";
        let (message, code) = invalid(&[NS, on, "-leader-election.renew-deadline=15s"]);
        assert_eq!(code, 1);
        assert!(
            message.contains(
                "-leader-election.renew-deadline (15s) must be shorter than -leader-election.lease-duration (15s)"
            ),
            "{message}"
        );
        let (message, _) = invalid(&[NS, on, "-leader-election.retry-period=10s"]);
        assert!(message.contains("-leader-election.retry-period (10s) must be positive and shorter"), "{message}");
        let (message, _) = invalid(&[NS, on, "-leader-election.retry-period=0s"]);
        assert!(message.contains("-leader-election.retry-period"), "{message}");
        let (message, _) = invalid(&[NS, on, "-leader-election.lease-duration=15500ms"]);
        assert!(message.contains("whole number of seconds"), "{message}");
        let (message, _) = invalid(&[NS, on, "-leader-election.lease-name="]);
        assert!(message.contains("-leader-election.lease-name"), "{message}");
        // Off (the default), the timings are not looked at: nothing changes for existing deployments.
        run_ok(&[NS, "-leader-election.renew-deadline=15s", "-leader-election.lease-name="]);
    }

    #[test]
    fn value_flags_accept_every_go_form() {
        for args in [
            ["-kubernetes.namespace=a", "-log.level=info"].as_slice(),
            &["--kubernetes.namespace=a", "--log.level=info"],
            &["-kubernetes.namespace", "a", "-log.level", "info"],
            &["--kubernetes.namespace", "a", "--log.level", "info"],
        ] {
            let cfg = run_ok(args);
            assert_eq!(cfg.flags.kubernetes_namespace, "a", "{args:?}");
            assert_eq!(cfg.log.level, LogLevel::Info, "{args:?}");
        }
    }

    #[test]
    fn a_value_that_looks_like_a_flag_is_still_the_value() {
        // Go's flag package takes the next argument as the value of a non-boolean flag, whatever it looks like.
        let cfg = run_ok(&[NS, "-kubernetes.client-qps", "-1", "-kubernetes.client-burst", "-5"]);
        assert_eq!(cfg.flags.kubernetes_client_qps, -1.0);
        assert_eq!(cfg.flags.kubernetes_client_burst, -5);
        let cfg = run_ok(&["-kubernetes.namespace", "-log.level=info"]);
        assert_eq!(cfg.flags.kubernetes_namespace, "-log.level=info");
        assert_eq!(cfg.log.level, LogLevel::Debug);
    }

    #[test]
    fn booleans_accept_bare_and_explicit_values() {
        assert!(run_ok(&[NS, "-server-tls.enabled"]).flags.server_tls_enabled);
        assert!(run_ok(&[NS, "--server-tls.enabled"]).flags.server_tls_enabled);
        assert!(run_ok(&[NS, "-server-tls.enabled=true"]).flags.server_tls_enabled);
        assert!(run_ok(&[NS, "-use-zone-tracker=T"]).flags.use_zone_tracker);
        assert!(run_ok(&[NS, "-use-zone-tracker=1"]).flags.use_zone_tracker);
        assert!(!run_ok(&[NS, "-server-tls.self-signed-cert.enabled=false"]).flags.self_signed_cert_enabled);
        assert!(!run_ok(&[NS, "--webhooks.update-ca-bundle=False"]).flags.webhooks_update_ca_bundle);
        assert!(!run_ok(&[NS, "-webhooks.update-ca-bundle=0"]).flags.webhooks_update_ca_bundle);
    }

    #[test]
    fn a_bare_boolean_does_not_consume_the_next_argument() {
        let cfg = run_ok(&["-server-tls.enabled", "-kubernetes.namespace", "ns"]);
        assert!(cfg.flags.server_tls_enabled);
        assert_eq!(cfg.flags.kubernetes_namespace, "ns");
        // `-flag false` is a bare boolean followed by a stray argument, never `-flag=false`.
        parse_error(&[NS, "-server-tls.enabled", "false"]);
    }

    #[test]
    fn bad_boolean_is_a_parse_error() {
        parse_error(&[NS, "-server-tls.enabled=yes"]);
    }

    #[test]
    fn later_occurrences_override_earlier_ones() {
        let cfg = run_ok(&[NS, "-log.level=info", "-log.level=error", "-kubernetes.namespace=other"]);
        assert_eq!(cfg.log.level, LogLevel::Error);
        assert_eq!(cfg.flags.kubernetes_namespace, "other");
    }

    #[test]
    fn durations_use_go_syntax() {
        let cfg = run_ok(&[NS, "-reconcile.interval=1m30s", "-kubernetes.client-timeout", "1.5s"]);
        assert_eq!(cfg.flags.reconcile_interval, Duration::from_secs(90));
        assert_eq!(cfg.flags.kubernetes_client_timeout, Duration::from_millis(1500));
        let cfg = run_ok(&[NS, "-pods.client-timeout=250ms", "-reconcile.interval=0"]);
        assert_eq!(cfg.flags.pods_client_timeout, Duration::from_millis(250));
        assert_eq!(cfg.flags.reconcile_interval, Duration::ZERO);
    }

    #[test]
    fn bad_durations_are_parse_errors() {
        for bad in ["-reconcile.interval=5", "-reconcile.interval=1d", "-kubernetes.client-timeout=soon"] {
            let err = parse_error(&[NS, bad]);
            assert!(err.to_string().contains("invalid value"), "{bad}: {err}");
        }
        parse_error(&[NS, "-server-tls.self-signed-cert.expiration=1.5y"]);
    }

    #[test]
    fn an_empty_record_name_resolves_to_the_default_for_controller_and_webhooks_alike() {
        let cfg = run_ok(&[NS, "-use-zone-tracker=false", "-zone-tracker.config-map-name="]);
        assert_eq!(cfg.flags.downscale_record_name(), "rollout-operator-zone-tracker");
        let cfg = run_ok(&[NS, "-zone-tracker.config-map-name=record"]);
        assert_eq!(cfg.flags.downscale_record_name(), "record");
    }

    #[test]
    fn certificate_expiration_uses_prometheus_syntax() {
        for v in ["1y", "52w1d", "365d", "8760h"] {
            let cfg = run_ok(&[NS, &format!("-server-tls.self-signed-cert.expiration={v}")]);
            assert_eq!(cfg.flags.self_signed_cert_expiration, Duration::from_secs(365 * 24 * 3600), "{v}");
        }
    }

    #[test]
    fn unknown_flags_are_parse_errors() {
        let err = parse_error(&[NS, "-no.such-flag=1"]);
        assert!(err.to_string().contains("--no.such-flag"), "{err}");
        parse_error(&[NS, "-x"]);
        parse_error(&[NS, "stray"]);
    }

    #[test]
    fn missing_value_is_a_parse_error() {
        parse_error(&["-kubernetes.namespace"]);
    }

    #[test]
    fn help_exits_zero() {
        let err = run_err(&["-help"]);
        assert!(matches!(&err, CliError::Parse(e) if e.kind() == clap::error::ErrorKind::DisplayHelp));
        assert_eq!(err.exit_code(), 0);
        assert!(err.to_string().contains("--kubernetes.namespace"));
    }

    #[test]
    fn validation_messages_and_order_match_the_reference() {
        let cases: &[(&[&str], &str)] = &[
            (&["-kubernetes.cluster-domain="], "-kubernetes.cluster-domain cannot be an empty string"),
            (&[], "-kubernetes.namespace has not been specified"),
            (
                &[NS, "-kubernetes.api-url=https://k8s:6443"],
                "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
            ),
            (
                &[NS, "-kubernetes.config-file=/kubeconfig"],
                "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
            ),
            (
                &[NS, "-use-zone-tracker", "-zone-tracker.config-map-name="],
                "-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified",
            ),
            (
                &[NS, "-kubernetes.client-burst=0"],
                "-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is greater than 0, since each request consumes one token",
            ),
            (&[NS, "-server-tls.request-timeout=0s"], "-server-tls.request-timeout must be positive"),
            (&[NS, "-server-tls.request-timeout=-1s"], "-server-tls.request-timeout must be positive"),
            (
                &[NS, "-zpdb.pod-ready-annotation-patch-timeout=0"],
                "-zpdb.pod-ready-annotation-patch-timeout must be positive",
            ),
            (
                &[NS, "-server.cluster-validation.http.soft-validation"],
                "http: soft validation can be enabled only if cluster validation is enabled",
            ),
            (&[NS, "-log.format=text"], "unknown log format: text"),
            (&[NS, "-log.level=trace"], "unknown log level: trace"),
            // Order: each earlier check wins over every later one.
            (&["-kubernetes.cluster-domain=", "-log.format=x"], "-kubernetes.cluster-domain cannot be an empty string"),
            (&["-kubernetes.api-url=u"], "-kubernetes.namespace has not been specified"),
            (
                &[NS, "-kubernetes.api-url=u", "-use-zone-tracker", "-zone-tracker.config-map-name="],
                "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
            ),
            (
                &[NS, "-use-zone-tracker", "-zone-tracker.config-map-name=", "-kubernetes.client-burst=0"],
                "-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified",
            ),
            (
                &[NS, "-kubernetes.client-burst=0", "-server-tls.request-timeout=0"],
                "-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is greater than 0, since each request consumes one token",
            ),
            (
                &[NS, "-server-tls.request-timeout=0", "-zpdb.pod-ready-annotation-patch-timeout=0"],
                "-server-tls.request-timeout must be positive",
            ),
            (
                &[NS, "-zpdb.pod-ready-annotation-patch-timeout=0", "-server.cluster-validation.http.soft-validation"],
                "-zpdb.pod-ready-annotation-patch-timeout must be positive",
            ),
            (
                &[NS, "-server.cluster-validation.http.soft-validation", "-log.format=x"],
                "http: soft validation can be enabled only if cluster validation is enabled",
            ),
            (&[NS, "-log.format=x", "-log.level=y"], "unknown log format: x"),
        ];
        for (args, message) in cases {
            assert_eq!(invalid(args), (message.to_string(), 1), "{args:?}");
        }
    }

    #[test]
    fn valid_combinations_pass_validation() {
        let cfg = run_ok(&[NS, "-kubernetes.api-url=https://k8s:6443", "-kubernetes.config-file=/kc"]);
        assert_eq!(cfg.flags.config_file(), Some(Path::new("/kc")));
        assert_eq!(cfg.flags.api_url(), Some("https://k8s:6443"));
        // Rate limiting disabled: any burst is fine.
        run_ok(&[NS, "-kubernetes.client-qps=0", "-kubernetes.client-burst=0"]);
        run_ok(&[NS, "-server.cluster-validation.http.enabled", "-server.cluster-validation.http.soft-validation"]);
        run_ok(&[NS, "-use-zone-tracker=false", "-zone-tracker.config-map-name="]);
        let cfg = run_ok(&[NS, "-log.format=json", "-log.level=warn"]);
        assert_eq!(cfg.log, LogConfig { format: LogFormat::Json, level: LogLevel::Warn });
    }

    #[test]
    fn csv_flags_split_on_commas() {
        let cfg = run_ok(&[
            NS,
            "-server.cluster-validation.http.excluded-paths=a,b/c",
            "-server.cluster-validation.http.excluded-user-agents",
            "kube-probe/.*",
        ]);
        assert_eq!(cfg.flags.cluster_validation_excluded_paths.0, ["a", "b/c"]);
        assert_eq!(cfg.flags.cluster_validation_excluded_user_agents.0, ["kube-probe/.*"]);
    }

    #[test]
    fn the_deployed_jsonnet_arguments_parse() {
        let cfg = run_ok(&[
            "-kubernetes.namespace=mimir",
            "-use-zone-tracker=true",
            "-zone-tracker.config-map-name=rollout-operator-zone-tracker",
            "-zpdb.pod-ready-annotation-patch-timeout=5s",
            "-server-tls.enabled=true",
            "-reconcile.interval=1s",
            "-server-tls.self-signed-cert.secret-name=certificate",
        ]);
        assert!(cfg.flags.server_tls_enabled && cfg.flags.use_zone_tracker);
        assert_eq!(cfg.flags.reconcile_interval, Duration::from_secs(1));
        assert_eq!(cfg.flags.self_signed_cert_secret_name, "certificate");
    }

    fn plan(args: &[&str]) -> (PlanArgs, LogConfig) {
        let argv = std::iter::once("rollout-operator").chain(args.iter().copied());
        match parse(argv) {
            Ok(Command::Plan { args, log }) => (args, log),
            other => panic!("{args:?}: expected plan, got {other:?}"),
        }
    }

    #[test]
    fn plan_subcommand_needs_no_namespace() {
        let (args, log) = plan(&["plan", "-f", "examples/three-zone-mid-rollout.yaml"]);
        assert_eq!(args.files, [Path::new("examples/three-zone-mid-rollout.yaml")]);
        assert_eq!(args.output, "text");
        assert_eq!(log, LogConfig { format: LogFormat::Logfmt, level: LogLevel::Warn });
    }

    #[test]
    fn plan_subcommand_flags() {
        let (args, _) =
            plan(&["plan", "-f", "a.yaml", "--filename=b.json", "-f", "-", "-o", "json", "-namespace", "ns"]);
        assert_eq!(args.files, [Path::new("a.yaml"), Path::new("b.json"), Path::new("-")]);
        assert_eq!(args.output, "json");
        assert_eq!(args.namespace.as_deref(), Some("ns"));
        let (args, log) =
            plan(&["-log.level=debug", "-log.format", "json", "plan", "-f", "x", "--now", "2024-05-01T12:00:00Z"]);
        assert_eq!(args.now.as_deref(), Some("2024-05-01T12:00:00Z"));
        assert_eq!(log, LogConfig { format: LogFormat::Json, level: LogLevel::Debug });
    }

    #[test]
    fn plan_subcommand_errors() {
        let argv =
            |args: &[&'static str]| std::iter::once("rollout-operator").chain(args.iter().copied()).collect::<Vec<_>>();
        // -f is required.
        let err = parse(argv(&["plan"])).err().map(|e| e.exit_code());
        assert_eq!(err, Some(2));
        // Controller flags belong before the subcommand.
        let err = parse(argv(&["plan", "-f", "x", "-kubernetes.namespace=ns"])).err().map(|e| e.exit_code());
        assert_eq!(err, Some(2));
        let err = parse(argv(&["-log.level=verbose", "plan", "-f", "x"])).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("unknown log level: verbose"));
    }

    #[test]
    fn normalisation_rewrites_only_long_single_dash_flags() {
        let mut cmd = Cli::command();
        cmd.build();
        let norm = |args: &[&str]| -> Vec<String> {
            normalise_args(&cmd, args.iter().map(OsString::from))
                .into_iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            norm(&["bin", "-log.level", "-x", "-server-tls.enabled", "-h", "-", "--a=b"]),
            ["bin", "--log.level=-x", "--server-tls.enabled", "-h", "-", "--a=b"]
        );
        assert_eq!(norm(&["bin", "--", "-log.level"]), ["bin", "--", "-log.level"]);
        assert_eq!(norm(&["bin", "plan", "-f", "-o", "-o", "json"]), ["bin", "plan", "-f", "-o", "-o", "json"]);
        assert_eq!(norm(&["bin", "-log.level"]), ["bin", "--log.level"]);
    }

    #[cfg(not(madsim))]
    #[test]
    fn review_subcommand_needs_no_namespace() {
        let argv = ["rollout-operator", "review", "--path", "/admission/no-downscale", "-f", "r.json", "-f", "d.yaml"];
        match parse(argv) {
            Ok(Command::Review { args, .. }) => {
                assert_eq!(args.path, "/admission/no-downscale");
                assert_eq!(args.files.len(), 2);
                assert_eq!(args.record_config_map, None, "without the flag, judged as with the zone tracker off");
            }
            other => panic!("expected review, got {other:?}"),
        }
    }

    #[cfg(not(madsim))]
    #[test]
    fn status_takes_the_controllers_flags_after_it_and_its_own_options() {
        let argv = [
            "rollout-operator",
            "status",
            "-kubernetes.namespace=mimir",
            "-use-zone-tracker=true",
            "--watch",
            "--interval=5s",
            "-o",
            "json",
        ];
        match parse(argv) {
            Ok(Command::Status { args, log }) => {
                assert_eq!(args.flags.kubernetes_namespace, "mimir");
                assert_eq!(args.flags.downscale_record(), Some("rollout-operator-zone-tracker"));
                assert!(args.watch);
                assert_eq!(args.interval, Duration::from_secs(5));
                assert_eq!(args.output, "json");
                assert_eq!(log.level, LogLevel::Warn);
            }
            other => panic!("expected status, got {other:?}"),
        }
        let err = parse(["rollout-operator", "-kubernetes.namespace=x", "status"]).expect_err("flag before status");
        assert!(err.to_string().contains("must come after `status`"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn service_name_flag_defaults_to_rollout_operator() {
        assert_eq!(run_ok(&[NS]).flags.server_tls_service_name, "rollout-operator");
        assert_eq!(run_ok(&[NS, "-server-tls.service-name=webhooks"]).flags.server_tls_service_name, "webhooks");
    }
}
