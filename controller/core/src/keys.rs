//! Label and annotation keys shared with the reference operator. These strings are an interface: users' manifests
//! carry them, so they never change.

/// Label on a StatefulSet: the StatefulSet is managed iff the label exists; its value names the rollout group.
pub const ROLLOUT_GROUP: &str = "rollout-group";
/// Label Kubernetes sets on every pod of a StatefulSet: the revision the pod was created from.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// Annotation (no `grafana.com/` prefix, for compatibility): pods of the StatefulSet that may be unavailable at once.
pub const ROLLOUT_MAX_UNAVAILABLE: &str = "rollout-max-unavailable";
/// Annotation: `"true"` stops the controller from deleting pods of this StatefulSet.
pub const ROLLOUT_PAUSED: &str = "grafana.com/rollout-paused";

/// Update strategy the rollout controller requires: Kubernetes replaces pods only when they are deleted.
pub const ON_DELETE: &str = "OnDelete";
