//! `rollout-operator rbac [the controller's flags] [--required-only] [-o yaml|json]`: prints the Role and
//! ClusterRole those flags need, as a `v1` List ready for `kubectl apply -f -`.
//!
//! Each rule is marked required (the operator cannot do its job without it) or optional (refused, only the feature
//! that uses it degrades, with a log line and `rollout_operator_feature_disabled`), with the features that use it
//! and the flags that switch them on: in the [`RULES_ANNOTATION`] annotation of the Role and of the ClusterRole
//! (one line per rule, by index), and, in YAML, in a comment above each rule. `--required-only` prints the
//! required rules alone.
//!
//! This module owns only the command: its arguments, the objects it prints and how it prints them. The rules come
//! from [`crate::kube::rbac::marked_rules_for`], so what is printed is what the adapter's tests check requests
//! against. It reads no cluster and writes nothing but stdout (and an error on stderr).

use crate::kube::rbac::{MarkedRule, MarkedRules, RbacError, RbacSettings, marked_rules_for};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use thiserror::Error;

/// Name of the Role and of the ClusterRole, as the deploy/ base names the operator's objects.
pub const NAME: &str = "rollout-operator";

/// The annotation of the Role and of the ClusterRole that marks each of their rules: one line per rule,
/// `rules[<index>] required: <feature> (<flags>), ...` or `rules[<index>] optional: ...`.
pub const RULES_ANNOTATION: &str = "rollout-operator.grafana.com/rbac-rules";

/// What `rbac` is asked: the permissions' settings and the namespace from the controller's flags, and its own
/// options. Built from the command line by `cli::RbacArgs::options`.
#[derive(Debug, Clone)]
pub struct RbacOptions {
    /// `-kubernetes.namespace`: the Role's namespace.
    pub namespace: String,
    pub settings: RbacSettings,
    /// `--required-only`: print only the rules the operator cannot do its job without.
    pub required_only: bool,
    /// `-o`.
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

/// The Role (in `namespace`) and, if any rule is cluster-scoped, the ClusterRole these settings need (only their
/// required rules with `required_only`), each annotated with what its rules are for.
pub fn objects(settings: &RbacSettings, namespace: &str, required_only: bool) -> Result<RbacList, RbacError> {
    let MarkedRules { mut role, mut cluster_role } = marked_rules_for(settings)?;
    if required_only {
        role.retain(|rule| rule.required);
        cluster_role.retain(|rule| rule.required);
    }
    let metadata = |namespace: Option<String>, rules: &[MarkedRule]| ObjectMeta {
        name: Some(NAME.to_string()),
        namespace,
        annotations: Some(BTreeMap::from([(RULES_ANNOTATION.to_string(), annotation(rules))])),
        ..ObjectMeta::default()
    };
    let rules = |rules: &[MarkedRule]| -> Vec<PolicyRule> { rules.iter().map(|m| m.rule.clone()).collect() };
    let mut items = vec![RbacObject::Role(Role {
        metadata: metadata(Some(namespace.to_string()), &role),
        rules: Some(rules(&role)),
    })];
    if !cluster_role.is_empty() {
        items.push(RbacObject::ClusterRole(ClusterRole {
            metadata: metadata(None, &cluster_role),
            rules: Some(rules(&cluster_role)),
            aggregation_rule: None,
        }));
    }
    Ok(RbacList { api_version: "v1", kind: "List", metadata: ObjectMeta::default(), items })
}

/// What a rule is for: `required: rollouts (always on), webhooks (-server-tls.enabled); also used by the optional
/// zpdb (always on)` or `optional: events (-events.enabled)`.
pub fn describe(rule: &MarkedRule) -> String {
    let named = |optional: bool| -> Vec<String> {
        let features = rule.features.iter().filter(|f| f.is_optional() == optional);
        features.map(|f| format!("{} ({})", f.name(), f.switched_on_by())).collect()
    };
    if rule.required {
        let also = named(true);
        let mut text = format!("required: {}", named(false).join(", "));
        if !also.is_empty() {
            text.push_str(&format!("; also used by the optional {}", also.join(", ")));
        }
        text
    } else {
        format!("optional: {}", named(true).join(", "))
    }
}

/// The [`RULES_ANNOTATION`] value: `rules[<index>] <what the rule is for>`, one line per rule.
fn annotation(rules: &[MarkedRule]) -> String {
    let lines: Vec<String> =
        rules.iter().enumerate().map(|(i, rule)| format!("rules[{i}] {}", describe(rule))).collect();
    lines.join("\n")
}

/// The List as text in `format`, ending with a newline. In YAML each rule is preceded by a comment saying what it
/// is for (the annotation says the same, in both formats).
pub fn render(list: &RbacList, format: OutputFormat) -> Result<String, RbacCmdError> {
    Ok(match format {
        OutputFormat::Json => serde_json::to_string_pretty(list)? + "\n",
        OutputFormat::Yaml => {
            let text = serde_saphyr::to_string(list)?;
            let text = with_rule_comments(&text, &comments(list));
            if text.ends_with('\n') { text } else { text + "\n" }
        }
    })
}

/// The annotation's line of each rule, in the order the rules are printed.
fn comments(list: &RbacList) -> Vec<String> {
    let annotated = |metadata: &ObjectMeta| -> Vec<String> {
        let value = metadata.annotations.as_ref().and_then(|a| a.get(RULES_ANNOTATION));
        value.map(|v| v.lines().map(str::to_string).collect()).unwrap_or_default()
    };
    list.items
        .iter()
        .flat_map(|item| match item {
            RbacObject::Role(role) => annotated(&role.metadata),
            RbacObject::ClusterRole(cluster_role) => annotated(&cluster_role.metadata),
        })
        .collect()
}

/// `yaml` with `# <comment>` above each rule (each `- apiGroups:` item, the first field of every printed rule). If
/// the rules cannot be matched one to one with the comments, the text is left as it is: the annotation still says
/// what each rule is for.
fn with_rule_comments(yaml: &str, comments: &[String]) -> String {
    let starts_rule = |line: &str| line.trim_start().starts_with("- apiGroups:");
    if yaml.lines().filter(|line| starts_rule(line)).count() != comments.len() {
        return yaml.to_string();
    }
    let mut comments = comments.iter();
    let mut out = String::with_capacity(yaml.len() + 80 * comments.len());
    for line in yaml.lines() {
        if starts_rule(line)
            && let Some(comment) = comments.next()
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(&format!("{indent}# {comment}\n"));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The command's output for these arguments.
pub fn execute(options: &RbacOptions) -> Result<String, RbacCmdError> {
    render(&objects(&options.settings, &options.namespace, options.required_only)?, options.output)
}

/// Runs the command: the List on stdout and exit 0, or one line on stderr and exit 1.
pub fn run(options: &RbacOptions) -> ExitCode {
    // Written through a handle, not println!, so that a closed stdout is an error message rather than a panic.
    let result = execute(options).and_then(|text| Ok(std::io::stdout().lock().write_all(text.as_bytes())?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // If stderr is gone too there is nobody to tell; the exit status still says it failed.
            let _ = writeln!(std::io::stderr(), "rollout-operator rbac: {e}");
            ExitCode::FAILURE
        }
    }
}
