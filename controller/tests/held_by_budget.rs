//! A rollout held by a ZoneAwarePodDisruptionBudget, as the offline commands see it: `plan` and `status -f` on the
//! example dump `examples/held-by-budget.yaml` (a three-zone Mimir ingester group, zone b with one new pod not Ready
//! and one old pod terminating, a budget with `maxUnavailable: 1`) say the group waits on the budget, naming it and
//! the pods it counts, and plan no deletion: what the controller does on the same cluster.
#![cfg(not(madsim))]

use jiff::Timestamp;
use rollout_operator::cli::{self, Command};
use rollout_operator::commands::plan::{PlanArgs, execute};
use rollout_operator::commands::status;
use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/held-by-budget.yaml");
const NOW: &str = "2026-01-01T12:00:00Z";
const HOLD: &str = "ZoneAwarePodDisruptionBudget mimir-ingester-rollout holds the replacement of pod \
                    mimir-ingester-zone-b-3 back: 2 pods not ready in mimir-ingester-zone-b (unavailable: \
                    mimir-ingester-zone-b-1, mimir-ingester-zone-b-2)";

fn plan(output: &str) -> String {
    let args = PlanArgs {
        files: vec![EXAMPLE.into()],
        namespace: None,
        now: Some(NOW.to_string()),
        output: output.to_string(),
        prometheus_url: None,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    String::from_utf8(out).unwrap()
}

fn status(extra: &[&str]) -> String {
    let argv = ["rollout-operator", "status", "-f", EXAMPLE, "--now", NOW].into_iter().chain(extra.iter().copied());
    let Ok(Command::Status { args, .. }) = cli::parse(argv) else { panic!("status arguments") };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = status::command::execute_on_dumps(
        &args.options(),
        &mut std::io::empty(),
        &mut out,
        &mut err,
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    String::from_utf8(out).unwrap()
}

#[test]
fn plan_says_the_budget_holds_the_rollout_and_deletes_nothing() {
    assert_eq!(plan("text"), format!("mimir-ingester: waiting: {HOLD}\n"));
    let v: Value = serde_json::from_str(&plan("json")).unwrap();
    let group = &v["groups"][0];
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["reason"], HOLD);
    assert_eq!(group["actions"], serde_json::json!([]));
}

#[test]
fn status_says_the_group_waits_on_the_budget() {
    let text = status(&[]);
    assert!(text.contains("rollout group mimir-ingester: waiting: held-by-budget (mimir-ingester-zone-b)\n"), "{text}");
    assert!(text.contains(&format!("  next: nothing; {HOLD}\n")), "{text}");
    let v: Value = serde_json::from_str(&status(&["-o", "json"])).unwrap();
    let group = &v["groups"][0];
    assert_eq!(group["wait"]["reason"], "held-by-budget", "{group:#}");
    assert_eq!(group["wait"]["statefulSet"], "mimir-ingester-zone-b");
    assert_eq!(group["next"], serde_json::json!([]));
}

/// Without its budget the same dump is a rollout that replaces both old Ready pods of zone b.
#[test]
fn without_the_budget_the_same_dump_would_replace_two_pods() {
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let without = text.split("\n---\n").filter(|doc| !doc.contains("kind: ZoneAwarePodDisruptionBudget"));
    let dir = std::env::temp_dir().join(format!("held-by-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("dump.yaml");
    std::fs::write(&file, without.collect::<Vec<_>>().join("\n---\n")).unwrap();
    let args = PlanArgs {
        files: vec![file],
        namespace: None,
        now: Some(NOW.to_string()),
        output: "text".to_string(),
        prometheus_url: None,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with(
            "mimir-ingester: progressing: replacing 2 pods of mimir-ingester-zone-b: mimir-ingester-zone-b-3, \
             mimir-ingester-zone-b-4"
        ),
        "{out}"
    );
}
