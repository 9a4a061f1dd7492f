//! The RolloutHealthCheck of docs/health-checks.md is the one of examples/gated-by-health-check.yaml, and the
//! operator accepts it as written.

use rollout_operator::commands::plan::Objects;
use rollout_operator::health_check::offline::health_checks;

const DOC: &str = include_str!("../../docs/health-checks.md");
const EXAMPLE: &str = include_str!("../../examples/gated-by-health-check.yaml");

fn health_check_of(file: &str, text: &str) -> serde_json::Value {
    let mut objects = Objects::default();
    objects.parse(file, text).unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<_> = objects.others.iter().filter(|o| o["kind"] == "RolloutHealthCheck").cloned().collect();
    assert_eq!(found.len(), 1, "{file}");
    found[0].clone()
}

#[test]
fn the_documented_health_check_is_the_examples_and_is_valid() {
    let block = DOC.split("```yaml\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a yaml block");
    let documented = health_check_of("docs/health-checks.md", block);
    let example = health_check_of("examples/gated-by-health-check.yaml", EXAMPLE);
    assert_eq!(documented, example);
    let checks = health_checks([&documented]);
    let config = checks["mimir-ingester-health"].as_ref().expect("valid");
    assert_eq!(config.checks[0].name, "request-error-rate");
}
