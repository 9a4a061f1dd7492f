//! What this binary is: its version, the git revision and the Rust compiler it was built from (`build.rs` finds
//! the last two, `unknown` when it cannot). `rollout-operator --version` and `rollout-operator version` print them,
//! and `/metrics` exports them as `rollout_operator_build_info`, the usual Prometheus exporter gauge.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// `git rev-parse --short HEAD` at build time, or `unknown`.
pub const REVISION: &str = env!("ROLLOUT_OPERATOR_REVISION");
/// The version of the Rust compiler that built the binary (`1.95.0`), or `unknown`.
pub const RUST_VERSION: &str = env!("ROLLOUT_OPERATOR_RUSTC_VERSION");

/// What `--version` prints after the program's name.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision: ",
    env!("ROLLOUT_OPERATOR_REVISION"),
    ", rust version: ",
    env!("ROLLOUT_OPERATOR_RUSTC_VERSION"),
    ")"
);

/// The whole output of `rollout-operator --version` and `rollout-operator version`.
pub fn version_text() -> String {
    format!("rollout-operator {VERSION_LINE}\n")
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildInfoLabels {
    pub version: String,
    pub revision: String,
    pub rustversion: String,
}

/// Registers `build_info` (under the registry's prefix): one series, always 1, labelled with this build.
pub fn register(registry: &mut Registry) {
    let family = Family::<BuildInfoLabels, Gauge>::default();
    family
        .get_or_create(&BuildInfoLabels {
            version: VERSION.to_string(),
            revision: REVISION.to_string(),
            rustversion: RUST_VERSION.to_string(),
        })
        .set(1);
    registry.register(
        "build_info",
        "A metric with a constant '1' value labeled by version, revision and rustversion from which \
         rollout-operator was built.",
        family,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_names_the_crate_version_the_revision_and_the_compiler() {
        assert_eq!(VERSION_LINE, format!("{VERSION} (revision: {REVISION}, rust version: {RUST_VERSION})"));
        assert_eq!(version_text(), format!("rollout-operator {VERSION_LINE}\n"));
        for value in [REVISION, RUST_VERSION] {
            assert!(!value.is_empty() && !value.contains(char::is_whitespace), "{value:?}");
        }
    }

    #[test]
    fn build_info_is_one_series_at_1_labelled_with_this_build() {
        let mut registry = Registry::default();
        register(registry.sub_registry_with_prefix("rollout_operator"));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let labels = format!("version=\"{VERSION}\",revision=\"{REVISION}\",rustversion=\"{RUST_VERSION}\"");
        let series = format!("rollout_operator_build_info{{{labels}}} 1");
        assert!(text.contains("# TYPE rollout_operator_build_info gauge"), "{text}");
        assert!(text.lines().any(|line| line == series), "{series} not in\n{text}");
    }
}
