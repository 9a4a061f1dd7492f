//! The admission guarantees: the no-downscale webhook's verdicts, and the prepare-downscale webhook letting through
//! what it does not serve.

use crate::oracle::checker::Checker;
use crate::oracle::checker::NO_DOWNSCALE_LABEL;
use crate::oracle::checker::PREPARE_FOREIGN;
use std::time::Duration;

impl Checker {
    /// Judges the no-downscale webhook's answer to a change of `what` from `from` to `to` replicas.
    #[allow(clippy::too_many_arguments)]
    pub fn judge_no_downscale(
        &mut self,
        at: Duration,
        what: &str,
        labelled: bool,
        from: u32,
        to: u32,
        allowed: bool,
        warnings: &[String],
        read_failed: bool,
    ) {
        match allowed {
            true => self.no_downscale_admissions.1 += 1,
            false => self.no_downscale_admissions.0 += 1,
        }
        // The fail-open answer is the reference's policy for a parent it could not read, and only for that: the
        // world knows whether the webhook asked for the parent without getting it (a fault), and every object and
        // resource it sends is well formed and supported.
        let lookup_failed = warnings.iter().any(|w| w.starts_with("can't get"));
        if lookup_failed && !read_failed {
            let detail = format!(
                "{what} {from} -> {to} answered as a failed read ({}), but no read failed",
                warnings.join("; ")
            );
            self.violate(at, NO_DOWNSCALE_LABEL, detail);
        }
        if allowed && labelled && to < from && !lookup_failed {
            let why = if warnings.is_empty() { String::new() } else { format!(" (warnings: {})", warnings.join("; ")) };
            let detail = format!("admitted {what} {from} -> {to}, labelled {}{why}", rollout_core::keys::NO_DOWNSCALE);
            self.violate(at, NO_DOWNSCALE_LABEL, detail);
        }
        if !allowed && (!labelled || to > from) {
            self.violate(at, NO_DOWNSCALE_LABEL, format!("denied {what} {from} -> {to}, which must be allowed"));
        }
    }

    /// [`PREPARE_FOREIGN`]: the prepare-downscale webhook's answer to a change of `kind` (`reads`: the parent
    /// objects it read by name meanwhile, as (asked, answered)). Only a downscale needs the webhook to look at the
    /// object's type; an upscale is let through as it is.
    #[allow(clippy::too_many_arguments)]
    pub fn judge_prepare_foreign(
        &mut self,
        at: Duration,
        what: &str,
        kind: &str,
        downscale: bool,
        allowed: bool,
        warnings: &[String],
        reads: (u32, u32),
    ) {
        self.prepare_foreign_admissions += 1;
        // A `/scale` of a StatefulSet whose read failed (an API error, not "not found") is denied by design: the
        // StatefulSet may be one the webhook serves.
        let excused = kind == "StatefulSet" && reads.0 > reads.1;
        if !allowed && !excused {
            self.violate(at, PREPARE_FOREIGN, format!("denied {what}, which it does not serve"));
        }
        if kind != "StatefulSet" {
            if reads.0 > 0 {
                let detail = format!("read {} parent objects for {what}, which is no StatefulSet", reads.0);
                self.violate(at, PREPARE_FOREIGN, detail);
            }
            if allowed && downscale && !warnings.iter().any(|w| w.ends_with("allowing the change")) {
                let detail = format!("let {what} through without saying it is not served (warnings: {warnings:?})");
                self.violate(at, PREPARE_FOREIGN, detail);
            }
        }
    }

    /// [`PREPARE_FOREIGN`] for a change in a namespace the operator does not manage: the prepare-downscale webhook
    /// lets it through, says so, and reads nothing (deciding it on the object of that name in its own namespace
    /// would decide about the wrong object).
    pub fn judge_foreign_namespace(
        &mut self,
        at: Duration,
        what: &str,
        allowed: bool,
        warnings: &[String],
        reads: (u32, u32),
    ) {
        self.prepare_foreign_admissions += 1;
        if !allowed {
            self.violate(at, PREPARE_FOREIGN, format!("denied {what}, in a namespace it does not manage"));
        }
        if reads.0 > 0 {
            let detail = format!("read {} objects for {what}, in a namespace it does not manage", reads.0);
            self.violate(at, PREPARE_FOREIGN, detail);
        }
        if allowed && !warnings.iter().any(|w| w.contains("is not managed by this rollout-operator")) {
            let detail = format!("let {what} through without saying its namespace is not managed ({warnings:?})");
            self.violate(at, PREPARE_FOREIGN, detail);
        }
    }
}
