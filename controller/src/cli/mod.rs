//! The command line: the reference's flags, with Go `flag` package syntax, `--version`, and the subcommands.
//!
//! Users swap the image and keep their manifests, so every flag keeps the reference's name, default and meaning,
//! and validation fails with the reference's messages, in the reference's order. Go's `flag` package accepts
//! `-name=value`, `--name=value` and `-name value`, and a boolean given bare (`-server-tls.enabled`) or as
//! `-name=true|false` (a bare boolean never consumes the next argument). clap only understands `--long`, so argv is
//! first rewritten by [`normalise_args`]; clap then parses a strict, unambiguous form.

pub mod subcommands;

use crate::cli::subcommands::RbacArgs;
#[cfg(not(madsim))]
use crate::cli::subcommands::StatusArgs;
use crate::commands::plan::PlanArgs;
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, Subcommand};
use rollout_core::duration::parse_go_duration;
use rollout_core::prom_duration::parse_prom_duration;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use thiserror::Error;

/// The help heading of the controller's flags in the subcommands that take them (`status`, `rbac`), listed after
/// the subcommand's own options.
pub const CONTROLLER_FLAGS_HEADING: &str = "Controller flags (as in the Deployment's args)";

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

impl OperatorFlags {
    /// The zone tracker's ConfigMap (the group downscale record), shared by the controller and the webhooks, when
    /// `-use-zone-tracker` is true; `None` otherwise (downscales are recorded in StatefulSet annotations).
    pub fn zone_tracker_config_map(&self) -> Option<&str> {
        self.use_zone_tracker.then(|| self.zone_tracker_config_map_or_default())
    }

    /// `-zone-tracker.config-map-name`, or its default when set empty (the reference accepts an empty name when
    /// `-use-zone-tracker` is false).
    pub fn zone_tracker_config_map_or_default(&self) -> &str {
        if self.zone_tracker_config_map_name.is_empty() {
            crate::cluster::zone_tracker::DEFAULT_CONFIG_MAP
        } else {
            &self.zone_tracker_config_map_name
        }
    }

    /// What decides the permissions these flags need (`rollout-operator rbac`, the RBAC tests).
    pub fn rbac_settings(&self) -> crate::kube::rbac::RbacSettings {
        crate::kube::rbac::RbacSettings {
            webhooks: self.server_tls_enabled,
            zone_tracker: self.use_zone_tracker,
            self_signed_certificate: self.self_signed_cert_enabled,
            update_ca_bundle: self.webhooks_update_ca_bundle,
            events: self.events_enabled,
            leader_election: self.leader_election_enabled,
            zone_tracker_config_map: self.zone_tracker_config_map_or_default().to_string(),
            certificate_secret: self.self_signed_cert_secret_name.clone(),
            leader_lease: self.leader_election_lease_name.clone(),
        }
    }

    /// What the webhook server is started with.
    pub fn webhook_server_config(&self) -> crate::admission::server::WebhookServerConfig {
        crate::admission::server::WebhookServerConfig {
            namespace: self.kubernetes_namespace.clone(),
            cluster_domain: self.kubernetes_cluster_domain.clone(),
            port: self.server_tls_port,
            request_timeout: self.server_tls_request_timeout,
            cert_file: self.server_tls_cert_file.clone(),
            key_file: self.server_tls_key_file.clone(),
            self_signed: self.self_signed_cert_enabled,
            self_signed_secret: self.self_signed_cert_secret_name.clone(),
            self_signed_org: self.self_signed_cert_org.clone(),
            self_signed_dns_name: self.self_signed_cert_dns_name.clone(),
            self_signed_validity: self.self_signed_cert_expiration,
            service_name: self.server_tls_service_name.clone(),
            update_ca_bundle: self.webhooks_update_ca_bundle,
            pods_client_timeout: self.pods_client_timeout,
            zone_tracker_config_map: self.zone_tracker_config_map().map(str::to_string),
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

/// A boolean flag value that Go's `strconv.ParseBool` refuses (clap names the flag and the value; Go's `flag`
/// package says no more than this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("parse error")]
pub(crate) struct GoBoolError;

/// Go's `strconv.ParseBool`, which the `flag` package uses for boolean flags.
pub(crate) fn parse_go_bool(s: &str) -> Result<bool, GoBoolError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(GoBoolError),
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
    /// A subcommand's flags parsed but are not valid: bad input to the command (exit 2, as its other bad input).
    #[error("{0}")]
    InvalidInput(ConfigError),
}

impl CliError {
    /// The reference's exit codes for the controller: 2 for parse errors (Go's `flag` package), 1 for an invalid
    /// configuration (as `rbac` does: the controller refusing its flags is what it checks). The other subcommands
    /// exit 2 for any bad input.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Parse(e) => u8::try_from(e.exit_code()).unwrap_or(2),
            CliError::Invalid(_) => 1,
            CliError::InvalidInput(_) => 2,
        }
    }

    /// Prints the error (or the help text) where the reference does, and returns the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            // clap prints help to stdout and errors to stderr; if stdout/stderr is gone there is nobody to tell.
            CliError::Parse(e) => {
                let _ = e.print();
            }
            CliError::Invalid(e) | CliError::InvalidInput(e) => eprintln!("{e}"),
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
    Review { args: crate::commands::review::ReviewArgs, log: LogConfig },
    /// `rollout-operator rbac [flags]`: print the Role and ClusterRole the controller's flags need.
    Rbac(Box<RbacArgs>),
    /// `rollout-operator status [flags]`: a read-only view of the namespace's rollout groups.
    #[cfg(not(madsim))]
    Status { args: Box<StatusArgs>, log: LogConfig },
    /// `rollout-operator version`: print the version, the git revision and the Rust version of the build.
    Version,
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
    args_override_self = true,
    // `--version` only (declared below): the reference has no version flag, and no one-letter flag to keep free.
    version = crate::ops::build_info::VERSION_LINE,
    disable_version_flag = true
)]
struct Cli {
    #[command(flatten)]
    flags: OperatorFlags,
    /// Print the version, the git revision and the Rust version of the build, and exit.
    #[arg(long = "version", action = ArgAction::Version)]
    version: Option<bool>,
    #[command(subcommand)]
    command: Option<SubCommand>,
}

#[derive(Debug, Subcommand)]
enum SubCommand {
    /// Plan one reconcile pass of every rollout group in a dump of a cluster (no cluster access).
    Plan(PlanArgs),
    /// Answer one AdmissionReview as the webhook would, looking up objects in cluster dumps (no cluster access).
    #[cfg(not(madsim))]
    Review(crate::commands::review::ReviewArgs),
    /// Print the Role and ClusterRole the controller's flags (given after `rbac`) need, as a v1 List.
    #[command(
        args_override_self = true,
        mut_arg("kubernetes_namespace", namespace_alias),
        mut_arg("kubernetes_cluster_domain", cluster_domain_alias)
    )]
    Rbac(Box<RbacArgs>),
    /// Show each rollout group of the namespace (its zones, what the controller would do next and why it waits,
    /// downscales), read live with the controller's kube config flags (given after `status`), or from dumps (-f).
    #[cfg(not(madsim))]
    #[command(
        args_override_self = true,
        mut_arg("kubernetes_namespace", status_namespace),
        mut_arg("kubernetes_cluster_domain", cluster_domain_alias)
    )]
    Status(Box<StatusArgs>),
    /// Print the version, the git revision and the Rust version of the build (as --version does).
    Version,
}

/// In the subcommands, `-kubernetes.namespace` is also `-n` and `--namespace`, as in `plan` (and kubectl).
fn namespace_alias(arg: clap::Arg) -> clap::Arg {
    arg.short('n').visible_alias("namespace")
}

/// `status` shows the kubeconfig context's namespace when none is given.
#[cfg(not(madsim))]
fn status_namespace(arg: clap::Arg) -> clap::Arg {
    namespace_alias(arg)
        .help("The namespace to show [default: the kubeconfig context's, as kubectl; with -f, the dump's]")
        .hide_default_value(true)
}

/// In the subcommands, `-kubernetes.cluster-domain` is also `--cluster-domain`, as in `review`.
fn cluster_domain_alias(arg: clap::Arg) -> clap::Arg {
    arg.visible_alias("cluster-domain")
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
            let log = LogConfig::from_flags(&cli.flags, "warn").map_err(CliError::InvalidInput)?;
            Ok(Command::Plan { args, log })
        }
        #[cfg(not(madsim))]
        Some(SubCommand::Review(args)) => {
            let log = LogConfig::from_flags(&cli.flags, "warn").map_err(CliError::InvalidInput)?;
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
            let log = LogConfig::from_flags(&args.flags, "warn").map_err(CliError::InvalidInput)?;
            Ok(Command::Status { args, log })
        }
        // It takes no flags: one given before it would be silently ignored, so it is refused.
        Some(SubCommand::Version) => match flag_given(&cmd, &matches) {
            Some(flag) => {
                let message = format!("`version` takes no flags, but -{flag} was given: leave it out");
                Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, message).into())
            }
            None => Ok(Command::Version),
        },
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

/// `rollout-operator version`: [`crate::ops::build_info::version_text`] on stdout, exit 0; exit 1 if stdout is
/// closed.
pub fn run_version() -> ExitCode {
    use std::io::Write;
    // Written through a handle, not println!, so that a closed stdout is an exit status rather than a panic.
    match std::io::stdout().lock().write_all(crate::ops::build_info::version_text().as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// Refuses a controller flag given before `subcommand`: it would be silently ignored (the subcommand reads its own).
fn refuse_flags_before(cmd: &mut clap::Command, matches: &clap::ArgMatches, subcommand: &str) -> Result<(), CliError> {
    match flag_given(cmd, matches) {
        Some(flag) => {
            let message = format!("-{flag} must come after `{subcommand}`, with the controller's other flags");
            Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, message).into())
        }
        None => Ok(()),
    }
}

/// The first of the top-level flags given on the command line, if any (without its leading dashes).
fn flag_given(cmd: &clap::Command, matches: &clap::ArgMatches) -> Option<String> {
    cmd.get_arguments()
        .filter(|arg| matches.value_source(arg.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .find_map(|arg| arg.get_long().map(str::to_string))
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
mod tests;
