//! The webhook server's certificate: which DNS names it must carry, whether a stored certificate may be reused or
//! must be replaced, when to renew it, and how a webhook configuration's CA bundles must change.
//!
//! Owns these decisions only; generating keys, parsing X.509, the Secret and the listener are the shell's
//! (`controller/src/tls/`). Renewal happens when two thirds of the lifetime have passed, so a certificate is
//! never served expired and there is a whole third of its lifetime to retry a failed renewal.

use jiff::Timestamp;
use serde_json::{Value, json};

/// What the shell read from a certificate (each certificate of the chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFacts {
    pub subject: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    pub dns_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateVerdict {
    /// Keep serving it; renew at `renew_at`.
    Reuse { renew_at: Timestamp },
    /// Generate a new one, for this reason.
    Replace(String),
}

/// The DNS names the webhook certificate carries: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`,
/// `<svc>.<ns>.svc.<cluster-domain>` (without the trailing dot of an absolute domain), plus `extra`
/// (`-server-tls.self-signed-cert.dns-name`) when set. No duplicates, in that order.
pub fn service_dns_names(service: &str, namespace: &str, cluster_domain: &str, extra: &str) -> Vec<String> {
    let domain = cluster_domain.trim_end_matches('.');
    let mut names = vec![service.to_string(), format!("{service}.{namespace}"), format!("{service}.{namespace}.svc")];
    if !domain.is_empty() {
        names.push(format!("{service}.{namespace}.svc.{domain}"));
    }
    let extra = extra.trim().trim_end_matches('.');
    if !extra.is_empty() && !names.iter().any(|n| n == extra) {
        names.push(extra.to_string());
    }
    names
}

/// When a certificate valid from `not_before` to `not_after` is renewed: after two thirds of its lifetime.
pub fn renew_at(not_before: Timestamp, not_after: Timestamp) -> Timestamp {
    let lifetime = not_after.duration_since(not_before);
    let two_thirds = jiff::SignedDuration::from_nanos(
        (lifetime.as_nanos() / 3 * 2).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
    );
    not_before.checked_add(two_thirds).unwrap_or(not_after)
}

/// Whether the stored self-signed certificate `chain` (leaf first, then the CA) may be reused at `now` for
/// `wanted_dns` names.
pub fn judge_self_signed(chain: &[CertificateFacts], wanted_dns: &[String], now: Timestamp) -> CertificateVerdict {
    let Some(leaf) = chain.first() else {
        return CertificateVerdict::Replace("the secret holds no certificate".to_string());
    };
    for cert in chain {
        if now >= cert.not_after {
            return CertificateVerdict::Replace(format!(
                "certificate for {} expired at {}",
                cert.subject,
                crate::downscale::format_timestamp(cert.not_after)
            ));
        }
        if now < cert.not_before {
            return CertificateVerdict::Replace(format!(
                "certificate for {} is not valid before {}",
                cert.subject,
                crate::downscale::format_timestamp(cert.not_before)
            ));
        }
    }
    let missing: Vec<&str> = wanted_dns.iter().filter(|n| !leaf.dns_names.contains(n)).map(String::as_str).collect();
    if !missing.is_empty() {
        return CertificateVerdict::Replace(format!("certificate does not cover DNS names {}", missing.join(", ")));
    }
    let renew = chain.iter().map(|c| renew_at(c.not_before, c.not_after)).min().unwrap_or(leaf.not_after);
    if now >= renew {
        return CertificateVerdict::Replace(format!(
            "two thirds of the certificate's lifetime have passed (renewal was due at {})",
            crate::downscale::format_timestamp(renew)
        ));
    }
    CertificateVerdict::Reuse { renew_at: renew }
}

/// One CA certificate of a bundle: its PEM block and, when it could be read, what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledCa {
    pub pem: String,
    pub facts: Option<CertificateFacts>,
}

/// The CAs a webhook configuration trusts once `ours` is injected: ours, and each CA the bundle holds now with our
/// CA's subject that is still valid at `now`: an earlier CA of this operator, whose certificate another replica
/// serves until it takes up the renewed one (or which this replica serves until the new CA is in every
/// configuration). Newest first (by expiry, then PEM), so replicas that hold different CAs agree on one bundle and
/// never patch it back and forth. Anything else (expired, unreadable, someone else's) is dropped: as the
/// reference's injection, which replaces the bundle whole.
pub fn trusted_cas(ours: &BundledCa, current: &[BundledCa], now: Timestamp) -> Vec<String> {
    let subject = ours.facts.as_ref().map(|f| f.subject.as_str());
    let mut kept: Vec<&BundledCa> = vec![ours];
    for ca in current {
        let earlier_of_ours =
            ca.facts.as_ref().is_some_and(|f| Some(f.subject.as_str()) == subject && now < f.not_after);
        if earlier_of_ours && !kept.iter().any(|k| k.pem == ca.pem) {
            kept.push(ca);
        }
    }
    let expiry = |ca: &BundledCa| ca.facts.as_ref().map(|f| f.not_after);
    kept.sort_by(|a, b| expiry(b).cmp(&expiry(a)).then_with(|| a.pem.cmp(&b.pem)));
    kept.into_iter().map(|ca| ca.pem.clone()).collect()
}

/// The JSON merge patch that sets `caBundle` to `wanted(current caBundle)` (both base64) on every entry of a webhook
/// configuration's `webhooks[]` whose bundle differs, or `None` when all match. A merge patch replaces arrays whole,
/// so the patch carries every entry in full, and `metadata.resourceVersion`, which makes it conditional.
pub fn ca_bundle_patch(configuration: &Value, wanted: impl Fn(Option<&str>) -> String) -> Option<Value> {
    let webhooks = configuration.get("webhooks")?.as_array()?;
    let mut changed = false;
    let patched: Vec<Value> = webhooks
        .iter()
        .map(|w| {
            let mut w = w.clone();
            let current = w.pointer("/clientConfig/caBundle").and_then(Value::as_str);
            let bundle = wanted(current);
            if current != Some(bundle.as_str()) {
                changed = true;
                if let Some(obj) = w.as_object_mut() {
                    let client_config = obj.entry("clientConfig").or_insert_with(|| json!({}));
                    if !client_config.is_object() {
                        *client_config = json!({});
                    }
                    client_config["caBundle"] = json!(bundle);
                }
            }
            w
        })
        .collect();
    if !changed {
        return None;
    }
    let resource_version = configuration.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
    Some(json!({ "metadata": { "resourceVersion": resource_version }, "webhooks": patched }))
}
