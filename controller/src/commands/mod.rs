//! The subcommands besides running the operator: over a cluster dump, `plan` (what the controller's pass would do
//! next) and `review` (what the webhooks would answer to an AdmissionReview); `status`, the same pass over a live,
//! read-only view of a namespace (or a dump); and `rbac`, the Role and ClusterRole a set of controller flags needs.
//!
//! Owns each command's arguments, loading dumps, the live read of `status`, and rendering results. Parsing the
//! command line and choosing the command is `cli`'s. Runs the same core pass and step machine as the controller and
//! the webhooks; must never write to a cluster (`status` only lists and gets, `rbac` reads none).

pub mod plan;
pub mod rbac;
#[cfg(not(madsim))]
pub mod review;
#[cfg(not(madsim))]
pub mod status;

/// `n` and the noun, singular for 1: `1 replica`, `3 replicas`.
pub fn count(n: impl Into<u64>, singular: &str, plural: &str) -> String {
    let n = n.into();
    if n == 1 { format!("{n} {singular}") } else { format!("{n} {plural}") }
}

#[cfg(test)]
mod tests {
    #[test]
    fn count_is_singular_for_one_only() {
        assert_eq!(super::count(1u32, "pod", "pods"), "1 pod");
        assert_eq!(super::count(0u32, "pod", "pods"), "0 pods");
        assert_eq!(super::count(2u32, "replica", "replicas"), "2 replicas");
    }
}
