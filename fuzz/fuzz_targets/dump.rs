//! The dump reader of `plan`, `status` and `review` (YAML or JSON; one object, a stream, Lists; UTF-8 or UTF-16):
//! `load_objects` on the bytes as stdin, then what each command does with what loads: `plan`'s pass over every
//! group rendered as text and JSON, `status`'s view, and `review`'s in-memory cluster and budgets.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollout_fuzz::webhook::runtime;
use rollout_fuzz::world::now;
use rollout_operator::cli::{Command, parse};
use rollout_operator::commands::plan::{load_objects, plan_objects, render_json, render_text};
use rollout_operator::commands::review::DumpCluster;
use rollout_operator::commands::status::StatusOptions;
use rollout_operator::commands::status::command::show;
use std::path::PathBuf;
use std::sync::OnceLock;

fn status_args(json: bool) -> &'static StatusOptions {
    static ARGS: OnceLock<[StatusOptions; 2]> = OnceLock::new();
    let args = ARGS.get_or_init(|| {
        let parsed = |output: &str| match parse(["rollout-operator", "status", "-f", "-", "-o", output]) {
            Ok(Command::Status { args, .. }) => args.options(),
            other => panic!("status arguments: {other:?}"),
        };
        [parsed("text"), parsed("json")]
    });
    &args[usize::from(json)]
}

fuzz_target!(|data: &[u8]| {
    let objects = match load_objects(&[PathBuf::from("-")], &mut &data[..]) {
        Ok(objects) => objects,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let plans = plan_objects(&objects, None, now());
    render_text(&plans, &mut Vec::new()).expect("written to memory");
    render_json(&plans, &mut Vec::new()).expect("written to memory");
    let namespace =
        objects.statefulsets.iter().find_map(|s| s.metadata.namespace.clone()).unwrap_or_else(|| "default".to_string());
    plan_objects(&objects, Some(&namespace), now());
    let api = DumpCluster::from_objects(&objects, &namespace);
    let _ = api.budgets();
    let args = status_args(data.len() % 2 == 1);
    runtime()
        .block_on(show(&api, args, &namespace, now(), None, &mut Vec::new()))
        .expect("a dump's view is always shown");
});
