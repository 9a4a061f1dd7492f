//! `rollout-operator plan`: one offline reconcile pass of every rollout group in a dump of a cluster.
//!
//! This module owns the dry run end to end: reading dumps (files or stdin; YAML or JSON; one object, a
//! multi-document stream, or `List`s as `kubectl get -o yaml|json` prints them) into k8s-openapi objects with errors
//! that name the file, the object and the problem ([`load_objects`], [`Objects`]); splitting them by namespace and
//! rollout group and running the core planner once per group with no expectations ([`plan_objects`]); and printing
//! the plans for people ([`render_text`]) or programs ([`render_json`]). It touches no cluster.
//!
//! Namespaces: a group is identified by namespace + `rollout-group` value. Objects without `metadata.namespace` are
//! taken to be in the `--namespace` namespace, or in `default` without one (as kubectl does). When the planned
//! objects span several namespaces, group names are printed as `<namespace>/<group>`.

use crate::health_check::offline::{OfflineGates, health_checks};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use rollout_core::health_check as health;
use rollout_core::zpdb::{self, BudgetPod, BudgetScope, Budgets, KnownBudgets};
use rollout_core::{Action, GroupPlan, MirrorFindings, PassInput, PodView, StatefulSetView, build_groups, plan_pass};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use thiserror::Error;

/// Exit status for bad input or bad arguments.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status when the plan could not be written out.
pub const EXIT_OUTPUT_FAILED: u8 = 1;

/// Arguments of the `plan` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// YAML or JSON file to read (`-` for stdin); repeatable. One object, a multi-document YAML stream, or a List
    /// as printed by `kubectl get statefulsets,pods -o yaml`.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Only plan objects of this namespace (objects without a namespace are kept).
    #[arg(short = 'n', long, visible_alias = "kubernetes.namespace", value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Plan as of this time (RFC 3339, e.g. 2025-01-31T12:00:00Z) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    /// Output format: `text` or `json`.
    // A plain string, validated by `execute`, so that callers other than clap get the same clear error.
    #[arg(short = 'o', long = "output", default_value = "text")]
    pub output: String,
    /// Evaluate the RolloutHealthChecks of the dump against this Prometheus (its HTTP API base URL) instead of
    /// their own `prometheusURL`, which is usually reachable in-cluster only.
    #[arg(long = "prometheus-url", value_name = "URL")]
    pub prometheus_url: Option<String>,
}

/// How the plan is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

/// A bad command-line value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArgError {
    #[error("invalid --output value {0:?}: expected text or json")]
    Output(String),
    #[error("invalid --now value {value:?}: {reason}; expected an RFC 3339 timestamp such as 2025-01-31T12:00:00Z")]
    Now { value: String, reason: String },
    #[error("no input: give at least one -f FILE (or -f - for stdin)")]
    NoInput,
}

impl std::str::FromStr for OutputFormat {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(OutputFormat::Text),
            "json" => Ok(OutputFormat::Json),
            other => Err(ArgError::Output(other.to_string())),
        }
    }
}

/// Parses `--now`.
pub fn parse_now(value: &str) -> Result<Timestamp, ArgError> {
    value.trim().parse::<Timestamp>().map_err(|e| ArgError::Now { value: value.to_string(), reason: e.to_string() })
}

/// Where in a file an object is: its document in the stream (1-based, empty documents not counted), the line the
/// document starts on when known, and its item index (0-based) inside `List`s, outermost first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    pub document: usize,
    pub line: Option<u64>,
    pub items: Vec<usize>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        // The line is where the document starts; inside a List the item index is the better pointer.
        if let (Some(line), true) = (self.line, self.items.is_empty()) {
            write!(f, ", line {line}")?;
        }
        for item in &self.items {
            write!(f, ", item {item}")?;
        }
        Ok(())
    }
}

/// The object an error is about: kind and name when the object has them, and always its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: Option<String>,
    pub name: Option<String>,
    pub position: Position,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.name) {
            (Some(kind), Some(name)) => write!(f, "{kind}/{name} ({})", self.position),
            (Some(kind), None) => write!(f, "{kind} at {}", self.position),
            (None, Some(name)) => write!(f, "object {name:?} at {}", self.position),
            (None, None) => write!(f, "object at {}", self.position),
        }
    }
}

/// What is wrong with one object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Problem {
    #[error("not a Kubernetes object: expected a mapping, found {0}")]
    NotAMapping(&'static str),
    #[error("missing kind")]
    MissingKind,
    #[error("{field} must be a string, found {found}")]
    NotAString { field: &'static str, found: &'static str },
    #[error("items must be a sequence, found {0}")]
    ItemsNotASequence(&'static str),
    #[error("missing metadata.name")]
    MissingName,
    #[error("missing status (dump objects with `kubectl get -o yaml`, which includes it)")]
    MissingStatus,
    /// The object does not fit the Kubernetes schema; `path` is the offending field (`.` for the object itself).
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// Why a dump could not be loaded. Every variant names the file (`<stdin>` for `-`).
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not text: {reason}")]
    NotText {
        file: String,
        #[source]
        reason: NotText,
    },
    #[error("{file}: invalid YAML: {message}")]
    Yaml {
        file: String,
        #[source]
        message: YamlError,
    },
    #[error("{file}: invalid JSON: {message}")]
    Json {
        file: String,
        #[source]
        message: serde_json::Error,
    },
    #[error("{file}: the parser failed unexpectedly on this input (please report it)")]
    ParserFailed { file: String },
    #[error("{file}: {object}: {problem}")]
    // Boxed to keep `Result<_, LoadError>` small on the happy path.
    Object { file: String, object: Box<ObjectRef>, problem: Problem },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    StatefulSet,
    Pod,
}

/// The StatefulSets and pods found in one or more dumps, in input order. An object seen twice (same kind,
/// namespace and name) keeps its last version, so overlapping dumps do not count a pod twice.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub statefulsets: Vec<StatefulSet>,
    pub pods: Vec<Pod>,
    /// Objects of other kinds (Services, ConfigMaps...), skipped.
    pub ignored: usize,
    /// Those objects as read, for commands that look at other kinds (`review` reads ConfigMaps, Deployments,
    /// ReplicaSets). Kind and apiVersion are filled in from an enclosing typed list.
    pub others: Vec<Value>,
    /// Remarks about the input that did not stop loading (duplicates replaced).
    pub notes: Vec<String>,
    seen: HashMap<(Kind, Option<String>, String), usize>,
}

/// Stack for parsing. Parsers and serde recurse once per nesting level (a few tens of KiB per level in debug
/// builds); nesting is capped (64 levels for YAML, 128 for JSON), and this leaves a wide margin whatever thread the
/// caller runs on. Only the pages actually touched are committed.
const PARSE_STACK_BYTES: usize = 64 * 1024 * 1024;

impl Objects {
    /// Parses one input's text and adds its objects. `file` is only used in messages.
    ///
    /// Runs on a thread of its own with a known, large stack, so that deeply nested input ends in an error rather
    /// than a stack overflow on a small caller stack (test threads have 2 MiB).
    pub fn parse(&mut self, file: &str, text: &str) -> Result<(), LoadError> {
        let parsed = std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .name("plan-parse".to_string())
                .stack_size(PARSE_STACK_BYTES)
                .spawn_scoped(scope, || self.parse_here(file, text))?;
            Ok::<_, std::io::Error>(worker.join())
        });
        match parsed {
            Ok(Ok(result)) => result,
            // A parser bug on some input: report it as this file's problem instead of taking the process down.
            Ok(Err(_panic)) => Err(LoadError::ParserFailed { file: file.to_string() }),
            // No thread available (resource limits): parse here, with whatever stack we have.
            Err(_) => self.parse_here(file, text),
        }
    }

    fn parse_here(&mut self, file: &str, text: &str) -> Result<(), LoadError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        if looks_like_json(text) {
            match json_documents(text) {
                Ok(docs) => return self.add_documents(file, docs),
                // YAML is a superset of JSON; a YAML flow mapping also starts with `{`. Report the JSON error only
                // if YAML cannot make sense of the text either.
                Err(json_error) => {
                    return match yaml_documents(text) {
                        Ok(docs) => self.add_documents(file, docs),
                        Err(_) => Err(LoadError::Json { file: file.to_string(), message: json_error }),
                    };
                }
            }
        }
        match yaml_documents(text) {
            Ok(docs) => self.add_documents(file, docs),
            Err(message) => Err(LoadError::Yaml { file: file.to_string(), message }),
        }
    }

    fn add_documents(&mut self, file: &str, docs: Vec<(Value, Option<u64>)>) -> Result<(), LoadError> {
        for (i, (value, line)) in docs.into_iter().enumerate() {
            let position = Position { document: i + 1, line, items: Vec::new() };
            self.add_value(file, value, position, None)?;
        }
        Ok(())
    }

    /// Adds one object. `item_kind` is the element kind implied by an enclosing typed list (`PodList` -> `Pod`),
    /// whose items the API server prints without `kind`.
    fn add_value(
        &mut self,
        file: &str,
        value: Value,
        position: Position,
        item_kind: Option<(&str, Option<&str>)>,
    ) -> Result<(), LoadError> {
        let fail = |kind: Option<&str>, name: Option<&str>, position: Position, problem| LoadError::Object {
            file: file.to_string(),
            object: Box::new(ObjectRef { kind: kind.map(str::to_string), name: name.map(str::to_string), position }),
            problem,
        };
        let Value::Object(mut map) = value else {
            return Err(fail(None, None, position, Problem::NotAMapping(type_name(&value))));
        };
        let name = map.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).map(str::to_string);
        let name = name.as_deref();
        let kind = match map.get("kind") {
            Some(Value::String(k)) => k.clone(),
            None | Some(Value::Null) => match item_kind {
                Some((k, _)) => k.to_string(),
                None => return Err(fail(None, name, position, Problem::MissingKind)),
            },
            Some(other) => {
                let problem = Problem::NotAString { field: "kind", found: type_name(other) };
                return Err(fail(None, name, position, problem));
            }
        };
        let api_version = match map.get("apiVersion") {
            Some(Value::String(v)) => Some(v.clone()),
            None | Some(Value::Null) => item_kind.and_then(|(_, v)| v).map(str::to_string),
            Some(other) => {
                let problem = Problem::NotAString { field: "apiVersion", found: type_name(other) };
                return Err(fail(Some(&kind), name, position, problem));
            }
        };

        if kind == "List" || (kind.ends_with("List") && map.contains_key("items")) {
            let items = match map.remove("items") {
                Some(Value::Array(items)) => items,
                None | Some(Value::Null) => Vec::new(),
                Some(other) => {
                    return Err(fail(Some(&kind), name, position, Problem::ItemsNotASequence(type_name(&other))));
                }
            };
            let element = kind.strip_suffix("List").filter(|k| !k.is_empty());
            for (i, item) in items.into_iter().enumerate() {
                let mut at = position.clone();
                at.items.push(i);
                self.add_value(file, item, at, element.map(|k| (k, api_version.as_deref())))?;
            }
            return Ok(());
        }

        // Only the core kinds are ours; a custom resource that happens to be called StatefulSet is not.
        let target = match (kind.as_str(), api_version.as_deref()) {
            ("StatefulSet", None | Some("apps/v1")) => Kind::StatefulSet,
            ("Pod", None | Some("v1")) => Kind::Pod,
            _ => {
                self.ignored += 1;
                map.entry("kind").or_insert_with(|| Value::String(kind.clone()));
                if let Some(v) = &api_version {
                    map.entry("apiVersion").or_insert_with(|| Value::String(v.clone()));
                }
                self.others.push(Value::Object(map));
                return Ok(());
            }
        };
        let value = Value::Object(map);
        match target {
            Kind::StatefulSet => {
                let sts: StatefulSet =
                    typed(value).map_err(|problem| fail(Some(&kind), name, position.clone(), problem))?;
                let Some(sts_name) = sts.metadata.name.clone().filter(|n| !n.is_empty()) else {
                    return Err(fail(Some(&kind), None, position, Problem::MissingName));
                };
                if sts.status.is_none() {
                    return Err(fail(Some(&kind), Some(&sts_name), position, Problem::MissingStatus));
                }
                let key = (Kind::StatefulSet, sts.metadata.namespace.clone(), sts_name);
                let slot = self.slot(key, file, &position, self.statefulsets.len());
                put(&mut self.statefulsets, slot, sts);
            }
            Kind::Pod => {
                let pod: Pod = typed(value).map_err(|problem| fail(Some(&kind), name, position.clone(), problem))?;
                let Some(pod_name) = pod.metadata.name.clone().filter(|n| !n.is_empty()) else {
                    return Err(fail(Some(&kind), None, position, Problem::MissingName));
                };
                let key = (Kind::Pod, pod.metadata.namespace.clone(), pod_name);
                let slot = self.slot(key, file, &position, self.pods.len());
                put(&mut self.pods, slot, pod);
            }
        }
        Ok(())
    }

    /// Where an object goes: the index of its earlier version (with a note), or `next` for a new one.
    fn slot(&mut self, key: (Kind, Option<String>, String), file: &str, position: &Position, next: usize) -> usize {
        if let Some(&i) = self.seen.get(&key) {
            let (kind, namespace, name) = &key;
            let ns = namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
            self.notes.push(format!("{kind:?} {ns}{name} appears more than once; using the one in {file}, {position}"));
            return i;
        }
        self.seen.insert(key, next);
        next
    }
}

fn put<T>(list: &mut Vec<T>, slot: usize, value: T) {
    match list.get_mut(slot) {
        Some(existing) => *existing = value,
        None => list.push(value),
    }
}

/// Converts an untyped object into its k8s-openapi type, naming the offending field on error.
fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Problem> {
    serde_path_to_error::deserialize(value)
        .map_err(|e| Problem::Invalid { path: e.path().to_string(), message: e.inner().to_string() })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// One or more concatenated JSON values, each with the line it starts on.
fn json_documents(text: &str) -> Result<Vec<(Value, Option<u64>)>, serde_json::Error> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut docs = Vec::new();
    let mut end = 0;
    while let Some(next) = stream.next() {
        let value = next?;
        let start = text[end..].find(|c: char| !c.is_whitespace()).map_or(end, |i| end + i);
        docs.push((value, Some(line_of(text, start))));
        end = stream.byte_offset();
    }
    Ok(docs)
}

fn line_of(text: &str, byte: usize) -> u64 {
    text.as_bytes()[..byte.min(text.len())].iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

/// Why a YAML stream was not loaded.
#[derive(Debug, Error)]
pub enum YamlError {
    /// A safety limit was breached (on `line`, when known): the input is refused rather than loaded.
    #[error(
        "{at}{limit}; refused as unsafe to load (a dump written by `kubectl get -o yaml` has no aliases and is never \
         this deep)",
        at = line.map(|l| format!("line {l}: ")).unwrap_or_default()
    )]
    Unsafe { line: Option<u64>, limit: UnsafeYaml },
    /// Not YAML; the parser's message points at the offending text.
    #[error("{0}")]
    Syntax(Box<serde_saphyr::Error>),
}

/// The safety limit an unsafe YAML stream breaches, in words rather than the parser's internal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum UnsafeYaml {
    #[error("nested more than {} levels deep", serde_saphyr::Budget::default().max_depth)]
    TooDeep,
    #[error("too many aliases (*name), anchors (&name) or merge keys (<<)")]
    TooManyAliases,
    #[error("its aliases expand it to far more than the file holds (an alias bomb?)")]
    AliasBomb,
}

/// The documents of a YAML stream (empty documents skipped), each with the line it starts on.
fn yaml_documents(text: &str) -> Result<Vec<(Value, Option<u64>)>, YamlError> {
    // The default budget is sized for configuration files; a cluster dump is large but cannot hold more nodes or
    // documents than it has bytes. Aliases stay capped, so an alias bomb is still refused.
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = budget.max_events.max(text.len().saturating_mul(2));
    budget.max_nodes = budget.max_nodes.max(text.len());
    budget.max_documents = budget.max_documents.max(text.len() / 3 + 1);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(text.len());
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // Comments are never read; not capturing their text saves work on large dumps.
    options.emit_comments = false;
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(yaml_error)?;
    Ok(docs
        .into_iter()
        .map(|d| {
            let line = d.referenced.line();
            (d.value, (line > 0).then_some(line))
        })
        .collect())
}

/// A YAML parser error for people: a breached safety limit (an alias bomb, absurd nesting) is told apart from a
/// syntax error, with the line where it was found.
fn yaml_error(err: serde_saphyr::Error) -> YamlError {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach;
    // The error itself, under the wrappers that add a snippet or the anchor an aliased value comes from.
    let mut inner = &err;
    while let Error::WithSnippet { error, .. } | Error::AliasError { error, .. } = inner {
        inner = error;
    }
    let limit = match inner {
        Error::Budget { breach: BudgetBreach::Depth { .. }, .. } => UnsafeYaml::TooDeep,
        Error::Budget {
            breach:
                BudgetBreach::Aliases { .. }
                | BudgetBreach::AliasAnchorRatio { .. }
                | BudgetBreach::Anchors { .. }
                | BudgetBreach::MergeKeys { .. },
            ..
        } => UnsafeYaml::TooManyAliases,
        Error::Budget { .. }
        | Error::AliasReplayCounterOverflow { .. }
        | Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. } => UnsafeYaml::AliasBomb,
        _ => return YamlError::Syntax(Box::new(err)),
    };
    let line = err.location().or_else(|| inner.location()).map(|l| l.line()).filter(|&l| l > 0);
    YamlError::Unsafe { line, limit }
}

/// Remarks on a whole input that loaded: StatefulSets of `namespace` (any namespace when `None`) without a single
/// pod, which makes every pod of theirs count as missing.
pub fn input_notes(objects: &Objects, namespace: Option<&str>) -> Vec<String> {
    let in_scope = |ns: Option<&str>| match (namespace, ns) {
        (Some(wanted), Some(ns)) => ns == wanted,
        _ => true,
    };
    let statefulsets = objects.statefulsets.iter().filter(|s| in_scope(s.metadata.namespace.as_deref())).count();
    let pods = objects.pods.iter().filter(|p| in_scope(p.metadata.namespace.as_deref())).count();
    let mut notes = Vec::new();
    if statefulsets > 0 && pods == 0 {
        let of = namespace.map(|ns| format!(" of namespace {ns}")).unwrap_or_default();
        notes.push(format!(
            "the input has {}{of} but no pods, so every pod counts as missing; dump the pods too (kubectl get \
             statefulsets,pods -o yaml)",
            crate::commands::count(statefulsets as u64, "StatefulSet", "StatefulSets")
        ));
    }
    notes
}

/// Why an input is not text.
#[derive(Debug, Error)]
pub enum NotText {
    /// A UTF-16 byte-order mark, then an odd number of bytes.
    #[error("UTF-16 input with an odd number of bytes")]
    OddUtf16,
    #[error("invalid UTF-16: {0}")]
    Utf16(#[source] std::string::FromUtf16Error),
    #[error("invalid UTF-8: {0}")]
    Utf8(#[source] std::str::Utf8Error),
}

/// UTF-8, or UTF-16 with a byte-order mark (what `kubectl ... > dump.yaml` writes in Windows PowerShell).
fn decode(bytes: Vec<u8>) -> Result<String, NotText> {
    let utf16 = |body: &[u8], unit: fn([u8; 2]) -> u16| {
        if !body.len().is_multiple_of(2) {
            return Err(NotText::OddUtf16);
        }
        let units: Vec<u16> = body.chunks_exact(2).map(|c| unit([c[0], c[1]])).collect();
        String::from_utf16(&units).map_err(NotText::Utf16)
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, body @ ..] => utf16(body, u16::from_le_bytes),
        [0xFE, 0xFF, body @ ..] => utf16(body, u16::from_be_bytes),
        // The error alone: the bytes it would hold are the whole input.
        _ => String::from_utf8(bytes).map_err(|e| NotText::Utf8(e.utf8_error())),
    }
}

/// Reads every input (`-` is `stdin`) in order into one set of objects.
pub fn load_objects(files: &[PathBuf], stdin: &mut dyn Read) -> Result<Objects, LoadError> {
    let mut objects = Objects::default();
    for path in files {
        let (name, bytes) = if path.as_os_str() == "-" {
            let mut buf = Vec::new();
            let read = stdin.read_to_end(&mut buf);
            ("<stdin>".to_string(), read.map(|_| buf))
        } else {
            (path.display().to_string(), std::fs::read(path))
        };
        let bytes = bytes.map_err(|source| LoadError::Read { file: name.clone(), source })?;
        let text = decode(bytes).map_err(|reason| LoadError::NotText { file: name.clone(), reason })?;
        objects.parse(&name, &text)?;
    }
    Ok(objects)
}

/// Runs one reconcile pass of every rollout group in `objects`, with no expectations, as of `now`. Groups are
/// sorted by their printed name.
pub fn plan_objects(objects: &Objects, namespace: Option<&str>, now: Timestamp) -> Vec<GroupPlan> {
    plan_objects_with(objects, namespace, now, &OfflineGates::unevaluated())
}

/// [`plan_objects`], with the health gates of the groups resolved (and evaluated) by `gates`.
pub fn plan_objects_with(
    objects: &Objects,
    namespace: Option<&str>,
    now: Timestamp,
    gates: &OfflineGates,
) -> Vec<GroupPlan> {
    let implied = namespace.unwrap_or("default");
    let keep = |ns: Option<&str>| match (namespace, ns) {
        (Some(wanted), Some(ns)) => ns == wanted,
        _ => true,
    };
    let mut by_namespace: BTreeMap<&str, Namespace> = BTreeMap::new();
    for sts in &objects.statefulsets {
        let ns = sts.metadata.namespace.as_deref();
        // Loading already rejected nameless objects; a hand-built `Objects` with one just loses it.
        if let (true, Ok(view)) = (keep(ns), StatefulSetView::from_k8s(sts)) {
            by_namespace.entry(ns.unwrap_or(implied)).or_default().statefulsets.push(view);
        }
    }
    for pod in &objects.pods {
        let ns = pod.metadata.namespace.as_deref();
        if let (true, Ok(pod)) = (keep(ns), BudgetPod::from_k8s(pod)) {
            by_namespace.entry(ns.unwrap_or(implied)).or_default().pods.push(pod);
        }
    }
    for budget in objects.others.iter().filter(|o| o.get("kind").and_then(Value::as_str) == Some(zpdb::config::KIND)) {
        let ns = budget.pointer("/metadata/namespace").and_then(Value::as_str);
        if keep(ns) {
            by_namespace.entry(ns.unwrap_or(implied)).or_default().budgets.push(budget);
        }
    }
    for check in objects.others.iter().filter(|o| o.get("kind").and_then(Value::as_str) == Some(health::config::KIND)) {
        let ns = check.pointer("/metadata/namespace").and_then(Value::as_str);
        if keep(ns) {
            by_namespace.entry(ns.unwrap_or(implied)).or_default().health_checks.push(check);
        }
    }
    let qualify = by_namespace.len() > 1;
    let mut plans = Vec::new();
    for (ns, objects) in by_namespace {
        // The budgets of the dump, as the controller's watch would know them (invalid ones left out, as there).
        let known = KnownBudgets::Known(Budgets::from_objects(objects.budgets.iter().copied()).0.all());
        let budgets =
            BudgetScope { known: &known, namespace: ns, statefulsets: &objects.statefulsets, pods: &objects.pods };
        let input = PassInput { budgets: Some(budgets), ..PassInput::new(now, &[]) };
        let pods: Vec<PodView> = objects.pods.iter().map(|p| p.pod.clone()).collect();
        let health_checks = health_checks(objects.health_checks.iter().copied());
        for group in build_groups(objects.statefulsets.clone(), &pods) {
            // Gates on, as in the controller (a dump without RolloutHealthChecks: every gate misconfigured).
            let gate = gates.gate_blocking(ns, &group, &health_checks, now);
            let input = PassInput { health_gate: health::HealthGating::On(&gate), ..input };
            // The controller's pass, as it would run without a zone tracker; the mirror step needs a live cluster.
            let mut pass = plan_pass(&group, &input);
            if pass.mirror_due {
                pass = pass.with_mirror(MirrorFindings { waits: offline_mirror_waits(&group), ..Default::default() });
            }
            let mut plan = pass.plan;
            crate::rollout::report::add_setting_warnings(&mut plan, &group);
            if qualify {
                plan.group = format!("{ns}/{}", plan.group);
            }
            plans.push(plan);
        }
    }
    plans.sort_by(|a, b| a.group.cmp(&b.group));
    plans
}

/// One namespace of a dump, as the controller's cache and budget watch would hold it.
#[derive(Default)]
struct Namespace<'a> {
    statefulsets: Vec<StatefulSetView>,
    pods: Vec<BudgetPod>,
    budgets: Vec<&'a Value>,
    health_checks: Vec<&'a Value>,
}

/// Mirror and delayed downscale read the reference resource's `scale` subresource and call pods: a dump has
/// neither, so `plan` reports them as waits.
fn offline_mirror_waits(group: &rollout_core::GroupSnapshot) -> Vec<String> {
    group
        .members
        .iter()
        .filter_map(|m| match m.sts.scaling.mirror.clone() {
            Some(Ok(mirror)) => Some(format!(
                "{}: mirroring replicas from {}/{} needs a live cluster (the reference's scale subresource{})",
                m.sts.name,
                mirror.kind,
                mirror.name,
                if m.sts.annotations.contains_key(rollout_core::keys::ROLLOUT_DELAYED_DOWNSCALE) {
                    " and the pods' delayed-downscale endpoints"
                } else {
                    ""
                }
            )),
            _ => None,
        })
        .collect()
}

/// One line per group (state and reason: what it waits for, or why it is blocked), one line per action with its
/// reason, then the group's warnings.
pub fn render_text(plans: &[GroupPlan], out: &mut dyn Write) -> std::io::Result<()> {
    if plans.is_empty() {
        writeln!(out, "no rollout groups found (StatefulSets with a rollout-group label)")?;
    }
    for plan in plans {
        writeln!(out, "{}: {}: {}", plan.group, plan.state.as_str(), plan.reason)?;
        for action in &plan.actions {
            match action {
                Action::DeletePod { statefulset, pod, reason, .. } => {
                    writeln!(out, "  delete pod {pod} of StatefulSet {statefulset}: {reason}")?
                }
                Action::SetCurrentRevision { statefulset, revision, reason, .. } => {
                    writeln!(out, "  set currentRevision of StatefulSet {statefulset} to {revision}: {reason}")?
                }
                Action::Scale { statefulset, from, to, reason, .. } => {
                    let to = crate::commands::count(*to, "replica", "replicas");
                    writeln!(out, "  scale StatefulSet {statefulset} from {from} to {to}: {reason}")?
                }
            }
        }
        for warning in &plan.warnings {
            writeln!(out, "  warning: {warning}")?;
        }
    }
    Ok(())
}

/// `{"groups":[...]}`, each group as [`GroupPlan`] serializes, pretty-printed, with a final newline.
pub fn render_json(plans: &[GroupPlan], out: &mut dyn Write) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Output<'a> {
        groups: &'a [GroupPlan],
    }
    serde_json::to_writer_pretty(&mut *out, &Output { groups: plans })?;
    writeln!(out)
}

/// The whole subcommand against the given streams and clock; returns the exit status.
pub fn execute(args: &PlanArgs, stdin: &mut dyn Read, out: &mut dyn Write, err: &mut dyn Write, now: Timestamp) -> u8 {
    // Diagnostics are best effort: if stderr is gone there is nobody to tell.
    let report = |err: &mut dyn Write, message: &dyn fmt::Display| {
        let _ = writeln!(err, "error: {message}");
    };
    let format = match args.output.parse::<OutputFormat>() {
        Ok(f) => f,
        Err(e) => {
            report(err, &e);
            return EXIT_BAD_INPUT;
        }
    };
    let now = match args.now.as_deref().map(parse_now).transpose() {
        Ok(at) => at.unwrap_or(now),
        Err(e) => {
            report(err, &e);
            return EXIT_BAD_INPUT;
        }
    };
    if args.files.is_empty() {
        report(err, &ArgError::NoInput);
        return EXIT_BAD_INPUT;
    }
    let objects = match load_objects(&args.files, stdin) {
        Ok(o) => o,
        Err(e) => {
            report(err, &e);
            return EXIT_BAD_INPUT;
        }
    };
    // A whole dump given twice would otherwise print a note per object.
    const NOTES_SHOWN: usize = 10;
    for note in objects.notes.iter().take(NOTES_SHOWN) {
        let _ = writeln!(err, "note: {note}");
    }
    if objects.notes.len() > NOTES_SHOWN {
        let more = (objects.notes.len() - NOTES_SHOWN) as u64;
        let more = crate::commands::count(more, "more object appears", "more objects appear");
        let _ = writeln!(err, "note: ... and {more} more than once");
    }
    for note in input_notes(&objects, args.namespace.as_deref()) {
        let _ = writeln!(err, "note: {note}");
    }
    let gates = match OfflineGates::blocking(args.prometheus_url.as_deref()) {
        Ok(gates) => gates,
        Err(e) => {
            report(err, &e);
            return EXIT_BAD_INPUT;
        }
    };
    let plans = plan_objects_with(&objects, args.namespace.as_deref(), now, &gates);
    let written = match format {
        OutputFormat::Text => render_text(&plans, out),
        OutputFormat::Json => {
            // The JSON shape has no place for warnings; people running it still get to see them.
            for plan in &plans {
                for warning in &plan.warnings {
                    let _ = writeln!(err, "warning: {}: {warning}", plan.group);
                }
            }
            render_json(&plans, out)
        }
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            report(err, &format_args!("cannot write the plan: {e}"));
            EXIT_OUTPUT_FAILED
        }
    }
}

/// Entry point of `rollout-operator plan`: real stdin/stdout/stderr and the real clock.
pub fn run(args: PlanArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let code = execute(&args, &mut std::io::stdin().lock(), &mut out, &mut std::io::stderr().lock(), Timestamp::now());
    ExitCode::from(code)
}
