//! `rollout-operator rbac [the controller's flags] [-o yaml|json]`: prints the Role and ClusterRole those flags
//! need, as a `v1` List ready for `kubectl apply -f -`.
//!
//! This module owns only the command: its arguments, the objects it prints and how it prints them. The rules come
//! from [`crate::kube::rbac::rules_for`], so what is printed is what the adapter's tests check requests against. It reads
//! no cluster and writes nothing but stdout (and an error on stderr).

use crate::cli::OperatorFlags;
use crate::kube::rbac::{RbacError, Rules, rules_for};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;
use thiserror::Error;

/// Name of the Role and of the ClusterRole, as the deploy/ base names the operator's objects.
pub const NAME: &str = "rollout-operator";

/// Arguments of the `rbac` subcommand: the controller's own flags, parsed and validated as the controller does, so
/// a Deployment's args can be passed unchanged.
#[derive(Debug, Clone, clap::Args)]
pub struct RbacArgs {
    #[command(flatten)]
    pub flags: OperatorFlags,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Yaml)]
    pub output: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
}

/// Why the command printed nothing.
#[derive(Debug, Error)]
pub enum RbacCmdError {
    #[error(transparent)]
    Rules(#[from] RbacError),
    #[error("cannot render the RBAC objects as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot render the RBAC objects as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
    #[error("cannot write to stdout: {0}")]
    Write(#[from] std::io::Error),
}

/// One item of the printed List.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RbacObject {
    Role(Role),
    ClusterRole(ClusterRole),
}

/// A `v1` List (typed, so its fields print in the usual order: apiVersion, kind, metadata, items).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RbacList {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: ObjectMeta,
    pub items: Vec<RbacObject>,
}

/// The Role (in `-kubernetes.namespace`) and, if any rule is cluster-scoped, the ClusterRole these flags need.
pub fn objects(flags: &OperatorFlags) -> Result<RbacList, RbacError> {
    let Rules { role, cluster_role } = rules_for(flags)?;
    let mut items = vec![RbacObject::Role(Role {
        metadata: ObjectMeta {
            name: Some(NAME.to_string()),
            namespace: Some(flags.kubernetes_namespace.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(role),
    })];
    if !cluster_role.is_empty() {
        items.push(RbacObject::ClusterRole(ClusterRole {
            metadata: ObjectMeta { name: Some(NAME.to_string()), ..ObjectMeta::default() },
            rules: Some(cluster_role),
            aggregation_rule: None,
        }));
    }
    Ok(RbacList { api_version: "v1", kind: "List", metadata: ObjectMeta::default(), items })
}

/// The List as text in `format`, ending with a newline.
pub fn render(list: &RbacList, format: OutputFormat) -> Result<String, RbacCmdError> {
    Ok(match format {
        OutputFormat::Json => serde_json::to_string_pretty(list)? + "\n",
        OutputFormat::Yaml => {
            let text = serde_saphyr::to_string(list)?;
            if text.ends_with('\n') { text } else { text + "\n" }
        }
    })
}

/// The command's output for these arguments.
pub fn execute(args: &RbacArgs) -> Result<String, RbacCmdError> {
    render(&objects(&args.flags)?, args.output)
}

/// Runs the command: the List on stdout and exit 0, or one line on stderr and exit 1.
pub fn run(args: &RbacArgs) -> ExitCode {
    // Written through a handle, not println!, so that a closed stdout is an error message rather than a panic.
    let result = execute(args).and_then(|text| Ok(std::io::stdout().lock().write_all(text.as_bytes())?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // If stderr is gone too there is nobody to tell; the exit status still says it failed.
            let _ = writeln!(std::io::stderr(), "rollout-operator rbac: {e}");
            ExitCode::FAILURE
        }
    }
}
