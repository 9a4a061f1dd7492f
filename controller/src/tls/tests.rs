use super::certificate::*;
use super::injector::base64;
use super::secret::*;
use jiff::Timestamp;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::time::Duration;

#[test]
fn base64_matches_the_standard_alphabet_with_padding() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    assert_eq!(base64(b"CA"), "Q0E=");
}

#[test]
fn generated_certificates_have_the_names_validity_and_distinct_random_serials() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let settings = SelfSignedSettings {
        organization: "Grafana Labs".into(),
        dns_names: vec!["rollout-operator".into(), "rollout-operator.ns.svc".into()],
        required_dns_names: vec!["rollout-operator.ns.svc".into()],
        validity: Duration::from_secs(3 * 3600),
    };
    let a = generate(&settings, now).unwrap();
    let b = generate(&settings, now).unwrap();
    assert_eq!(a.facts[0].dns_names, settings.dns_names);
    assert_eq!(a.facts[0].not_before, now);
    assert_eq!(a.facts[0].not_after, "2026-01-01T03:00:00Z".parse().unwrap());
    assert_eq!(bundle_renew_at(&a), "2026-01-01T02:00:00Z".parse().unwrap());
    let serial = |pem: &str| {
        let der = CertificateDer::pem_slice_iter(pem.as_bytes()).next().unwrap().unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        cert.raw_serial().to_vec()
    };
    assert_ne!(serial(&a.cert_pem), serial(&b.cert_pem));
    assert_ne!(serial(&a.ca_pem), serial(&b.ca_pem));
    assert_ne!(serial(&a.cert_pem), serial(&a.ca_pem));
    // A key from another certificate is refused.
    let err = parse_bundle("mixed", &a.ca_pem, &a.cert_pem, &b.key_pem).unwrap_err();
    assert!(err.to_string().contains("do not match"), "{err}");
}
