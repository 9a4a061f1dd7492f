//! Reading and checking the repository's manifests (`deploy/`, `kind-configs/`) without a cluster.
//!
//! Owns: finding the manifest files, splitting YAML streams, parsing each document into its typed object
//! (k8s-openapi for Kubernetes kinds, small serde structs for kind and kustomize files), detecting fields the typed
//! object does not know (typos such as `readOnlyRootFileSystem` would otherwise be dropped silently), and running
//! `kubectl kustomize`. It must not decide what a correct deployment is: the tests in `e2e/tests/` do.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use thiserror::Error;

/// Why a manifest could not be read or is not what it claims to be. Every variant names the file.
#[derive(Debug, Error)]
pub enum ManifestError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: not valid YAML: {reason}", path.display())]
    Yaml { path: PathBuf, reason: String },
    #[error("{}: document {index} ({what}): {reason}", path.display())]
    Invalid { path: PathBuf, index: usize, what: String, reason: String },
    #[error(
        "kubectl not found ({reason}); the overlay checks need it: install it with `apt-get install \
         kubernetes-client` (Debian/Ubuntu; .ci/run does this), or see https://kubernetes.io/docs/tasks/tools/, \
         or point $KUBECTL at a kubectl binary"
    )]
    KubectlMissing { reason: String },
    #[error("`{command}` failed ({status}): {stderr}")]
    Kustomize { command: String, status: String, stderr: String },
}

/// The repository root (the workspace this crate lives in).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(".."))
}

/// Every `*.yaml` / `*.yml` file under `dir`, sorted, recursively.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| ManifestError::Read { path: d.clone(), source })?;
        for entry in entries {
            let entry = entry.map_err(|source| ManifestError::Read { path: d.clone(), source })?;
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The non-empty documents of a YAML stream.
pub fn parse_yaml_stream(path: &Path, text: &str) -> Result<Vec<Value>, ManifestError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| ManifestError::Yaml { path: path.to_path_buf(), reason: e.to_string() })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Reads a YAML file into its documents.
pub fn read_yaml(path: &Path) -> Result<Vec<Value>, ManifestError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ManifestError::Read { path: path.to_path_buf(), source })?;
    parse_yaml_stream(path, &text)
}

/// A Kubernetes object of one of the kinds this repository ships, parsed into its k8s-openapi type.
// Few and short-lived (one per manifest): boxing every variant would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum KubeObject {
    Namespace(Namespace),
    ServiceAccount(ServiceAccount),
    Role(Role),
    RoleBinding(RoleBinding),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    Deployment(Box<Deployment>),
    Service(Service),
    ValidatingWebhookConfiguration(ValidatingWebhookConfiguration),
    MutatingWebhookConfiguration(MutatingWebhookConfiguration),
    CustomResourceDefinition(Box<CustomResourceDefinition>),
    PrometheusRule(Box<PrometheusRule>),
    PodDisruptionBudget(k8s_openapi::api::policy::v1::PodDisruptionBudget),
}

/// A Prometheus Operator `PrometheusRule` (`monitoring.coreos.com/v1`), limited to the fields `deploy/monitoring`
/// uses, so a misspelt field is caught as for the Kubernetes kinds.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRule {
    pub api_version: String,
    pub kind: String,
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: PrometheusRuleSpec,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct PrometheusRuleSpec {
    pub groups: Vec<RuleGroup>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct RuleGroup {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    pub rules: Vec<Rule>,
}

/// An alerting rule (`alert`) or a recording rule (`record`).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    pub expr: String,
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `apiVersion` and `kind` of a document, for messages.
pub fn type_of(doc: &Value) -> String {
    let s = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    format!(
        "{}/{} {}",
        s("apiVersion"),
        s("kind"),
        doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?")
    )
}

/// Parses `doc` into `T` and fails if `T` does not carry every field of `doc` (an unknown or misspelt field).
pub fn parse_exact<T: DeserializeOwned + serde::Serialize>(doc: &Value) -> Result<T, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut lost = Vec::new();
    fields_missing_from(doc, &back, String::new(), &mut lost);
    if lost.is_empty() {
        Ok(typed)
    } else {
        Err(format!("fields the type does not know (misspelt or misplaced?): {}", lost.join(", ")))
    }
}

/// Collects the paths of `original` that are absent from, or different in, `typed` (its typed round trip).
pub fn fields_missing_from(original: &Value, typed: &Value, path: String, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(w) => fields_missing_from(v, w, p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                fields_missing_from(v, w, format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        _ => out.push(format!("{path} (became {typed})")),
    }
}

/// Parses one Kubernetes document into its typed object; kinds this repository does not ship are an error.
pub fn parse_kube_object(doc: &Value) -> Result<KubeObject, String> {
    let api_version = doc.get("apiVersion").and_then(Value::as_str).ok_or("no apiVersion")?;
    let kind = doc.get("kind").and_then(Value::as_str).ok_or("no kind")?;
    Ok(match (api_version, kind) {
        ("v1", "Namespace") => KubeObject::Namespace(parse_exact(doc)?),
        ("v1", "ServiceAccount") => KubeObject::ServiceAccount(parse_exact(doc)?),
        ("v1", "Service") => KubeObject::Service(parse_exact(doc)?),
        ("rbac.authorization.k8s.io/v1", "Role") => KubeObject::Role(parse_exact(doc)?),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => KubeObject::RoleBinding(parse_exact(doc)?),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => KubeObject::ClusterRole(parse_exact(doc)?),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => KubeObject::ClusterRoleBinding(parse_exact(doc)?),
        ("apps/v1", "Deployment") => KubeObject::Deployment(Box::new(parse_exact(doc)?)),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            KubeObject::ValidatingWebhookConfiguration(parse_exact(doc)?)
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            KubeObject::MutatingWebhookConfiguration(parse_exact(doc)?)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            KubeObject::CustomResourceDefinition(Box::new(parse_exact(doc)?))
        }
        ("monitoring.coreos.com/v1", "PrometheusRule") => KubeObject::PrometheusRule(Box::new(parse_exact(doc)?)),
        ("policy/v1", "PodDisruptionBudget") => KubeObject::PodDisruptionBudget(parse_exact(doc)?),
        _ => return Err(format!("unexpected kind {api_version}/{kind}: add it to parse_kube_object")),
    })
}

/// A kind cluster configuration (`kind.x-k8s.io/v1alpha4`), limited to the fields this repository uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KindCluster {
    pub kind: String,
    pub api_version: String,
    #[serde(default)]
    pub name: Option<String>,
    pub nodes: Vec<KindNode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KindNode {
    pub role: KindRole,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KindRole {
    ControlPlane,
    Worker,
}

/// A kustomization, limited to the fields kustomize v2.0.3 (Debian's kubectl) and v5 both understand and this
/// repository uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub bases: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub images: Vec<KustomizeImage>,
    #[serde(default, rename = "patchesJson6902")]
    pub patches_json6902: Vec<KustomizeJsonPatch>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KustomizeImage {
    pub name: String,
    #[serde(default)]
    pub new_name: Option<String>,
    #[serde(default)]
    pub new_tag: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KustomizeJsonPatch {
    pub target: KustomizeTarget,
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KustomizeTarget {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
}

/// One RFC 6902 operation, as the JSON patch files of the overlays hold them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonPatchOp {
    pub op: JsonPatchVerb,
    pub path: String,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub from: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonPatchVerb {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

/// The kubectl to use: `$KUBECTL`, else `kubectl` on the PATH.
pub fn kubectl() -> Result<PathBuf, ManifestError> {
    let candidate = std::env::var_os("KUBECTL").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("kubectl"));
    match Command::new(&candidate).args(["version", "--client"]).output() {
        Ok(out) if out.status.success() => Ok(candidate),
        Ok(out) => Err(ManifestError::KubectlMissing {
            reason: format!(
                "`{} version --client` exited with {}: {}",
                candidate.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
        Err(e) => Err(ManifestError::KubectlMissing { reason: format!("cannot run {}: {e}", candidate.display()) }),
    }
}

/// `kubectl kustomize <dir>`: the documents the overlay deploys.
pub fn kustomize_build(dir: &Path) -> Result<Vec<Value>, ManifestError> {
    let kubectl = kubectl()?;
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| ManifestError::KubectlMissing { reason: format!("cannot run {}: {e}", kubectl.display()) })?;
    let command = format!("{} kustomize {}", kubectl.display(), dir.display());
    if !out.status.success() {
        return Err(ManifestError::Kustomize {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_yaml_stream(&dir.join("<kustomize output>"), &text)
}

/// The overlays under `deploy/overlays`, by name.
pub fn overlays() -> Result<Vec<(String, PathBuf)>, ManifestError> {
    let dir = repo_root().join("deploy/overlays");
    let entries = std::fs::read_dir(&dir).map_err(|source| ManifestError::Read { path: dir.clone(), source })?;
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|source| ManifestError::Read { path: dir.clone(), source })?;
        if e.path().join("kustomization.yaml").is_file() {
            out.push((e.file_name().to_string_lossy().into_owned(), e.path()));
        }
    }
    out.sort();
    Ok(out)
}
