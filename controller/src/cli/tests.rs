//! Tests of the command line: the reference's flag syntax, defaults, validation messages and order, and the
//! subcommands' arguments.

use super::*;

fn run(args: &[&str]) -> Result<RunConfig, CliError> {
    let argv = std::iter::once("rollout-operator").chain(args.iter().copied());
    match parse(argv)? {
        Command::Run(cfg) => Ok(*cfg),
        Command::Plan { .. } => panic!("expected the controller, got plan"),
        #[cfg(not(madsim))]
        Command::Review { .. } => panic!("expected the controller, got review"),
        Command::Rbac(_) => panic!("expected the controller, got rbac"),
        #[cfg(not(madsim))]
        Command::Status { .. } => panic!("expected the controller, got status"),
        Command::Version => panic!("expected the controller, got version"),
    }
}

fn run_ok(args: &[&str]) -> RunConfig {
    match run(args) {
        Ok(cfg) => cfg,
        Err(e) => panic!("{args:?} should parse: {e}"),
    }
}

fn run_err(args: &[&str]) -> CliError {
    match run(args) {
        Ok(cfg) => panic!("{args:?} should fail, got {cfg:?}"),
        Err(e) => e,
    }
}

/// The message and exit code of a validation failure.
fn invalid(args: &[&str]) -> (String, u8) {
    let err = run_err(args);
    assert!(matches!(err, CliError::Invalid(_)), "{args:?}: expected a validation error, got {err:?}");
    (err.to_string(), err.exit_code())
}

fn parse_error(args: &[&str]) -> CliError {
    let err = run_err(args);
    assert!(matches!(err, CliError::Parse(_)), "{args:?}: expected a parse error, got {err:?}");
    assert_eq!(err.exit_code(), 2, "{args:?}");
    err
}

const NS: &str = "-kubernetes.namespace=ns";

#[test]
fn defaults_match_the_reference() {
    let cfg = run_ok(&[NS]);
    let f = &cfg.flags;
    assert_eq!(f.kubernetes_namespace, "ns");
    assert_eq!(f.kubernetes_cluster_domain, "cluster.local.");
    assert_eq!(f.kubernetes_client_timeout, Duration::from_secs(300));
    assert_eq!(f.reconcile_interval, Duration::from_secs(5));
    assert_eq!(f.server_port, 8001);
    assert_eq!(cfg.log, LogConfig { format: LogFormat::Logfmt, level: LogLevel::Debug });
    assert_eq!(f.config_file(), None);
    assert_eq!(f.api_url(), None);
    assert_eq!(f.kubernetes_client_qps, 5.0);
    assert_eq!(f.kubernetes_client_burst, 10);
    assert_eq!(f.pods_client_timeout, Duration::from_secs(5));
    assert!(!f.cluster_validation_enabled && !f.cluster_validation_soft);
    assert_eq!(f.cluster_validation_excluded_paths.0, ["admission/no-downscale", "admission/prepare-downscale"]);
    assert!(f.cluster_validation_excluded_user_agents.0.is_empty());
    assert!(!f.server_tls_enabled);
    assert_eq!(f.server_tls_port, 8443);
    assert_eq!(f.server_tls_request_timeout, Duration::from_secs(10));
    assert!(f.self_signed_cert_enabled);
    assert_eq!(f.self_signed_cert_secret_name, "rollout-operator-self-signed-certificate");
    assert_eq!(f.self_signed_cert_dns_name, "");
    assert_eq!(f.self_signed_cert_org, "Grafana Labs");
    assert_eq!(f.self_signed_cert_expiration, Duration::from_secs(365 * 24 * 3600));
    assert!(f.webhooks_update_ca_bundle);
    assert!(!f.use_zone_tracker);
    assert_eq!(f.zone_tracker_config_map_name, "rollout-operator-zone-tracker");
    assert_eq!(f.zpdb_pod_ready_annotation_patch_timeout, Duration::from_secs(5));
    assert!(!f.events_enabled, "Events are opt-in: the reference's deployments grant none");
    assert_eq!(f.rollout_progress_deadline, Duration::from_secs(30 * 60));
}

#[test]
fn events_and_the_progress_deadline_take_the_reference_syntax() {
    let cfg = run_ok(&[NS, "-events.enabled", "-rollout.progress-deadline=1h30m"]);
    assert!(cfg.flags.events_enabled);
    assert_eq!(cfg.flags.rollout_progress_deadline, Duration::from_secs(90 * 60));
    assert_eq!(run_ok(&[NS, "-rollout.progress-deadline", "0"]).flags.rollout_progress_deadline, Duration::ZERO);
    parse_error(&[NS, "-rollout.progress-deadline=30"]);
    parse_error(&[NS, "-events.enabled=maybe"]);
}

#[test]
fn leader_election_is_off_by_default_and_takes_the_reference_syntax() {
    let f = run_ok(&[NS]).flags;
    assert!(!f.leader_election_enabled, "off by default: the reference's deployments grant no Leases");
    assert_eq!(f.leader_election_lease_name, "rollout-operator-leader");
    assert_eq!(f.leader_election_lease_duration, Duration::from_secs(15));
    assert_eq!(f.leader_election_renew_deadline, Duration::from_secs(10));
    assert_eq!(f.leader_election_retry_period, Duration::from_secs(2));
    let f = run_ok(&[
        NS,
        "-leader-election.enabled",
        "-leader-election.lease-name=ops-leader",
        "-leader-election.lease-duration=30s",
        "-leader-election.renew-deadline",
        "20s",
        "--leader-election.retry-period=5s",
    ])
    .flags;
    assert!(f.leader_election_enabled);
    assert_eq!(f.leader_election_lease_name, "ops-leader");
    let config = f.election_config("pod-a");
    assert_eq!(config.identity, "pod-a");
    assert_eq!(
        (config.lease_duration, config.renew_deadline, config.retry_period),
        (Duration::from_secs(30), Duration::from_secs(20), Duration::from_secs(5))
    );
    parse_error(&[NS, "-leader-election.enabled=maybe"]);
    parse_error(&[NS, "-leader-election.lease-duration=15"]);
}

#[test]
fn leader_election_timings_are_validated_only_when_enabled() {
    let on = "-leader-election.enabled=true";
    let (message, code) = invalid(&[NS, on, "-leader-election.renew-deadline=15s"]);
    assert_eq!(code, 1);
    assert!(
        message.contains(
            "-leader-election.renew-deadline (15s) must be shorter than -leader-election.lease-duration (15s)"
        ),
        "{message}"
    );
    let (message, _) = invalid(&[NS, on, "-leader-election.retry-period=10s"]);
    assert!(message.contains("-leader-election.retry-period (10s) must be positive and shorter"), "{message}");
    let (message, _) = invalid(&[NS, on, "-leader-election.retry-period=0s"]);
    assert!(message.contains("-leader-election.retry-period"), "{message}");
    let (message, _) = invalid(&[NS, on, "-leader-election.lease-duration=15500ms"]);
    assert!(message.contains("whole number of seconds"), "{message}");
    let (message, _) = invalid(&[NS, on, "-leader-election.lease-name="]);
    assert!(message.contains("-leader-election.lease-name"), "{message}");
    // Off (the default), the timings are not looked at: nothing changes for existing deployments.
    run_ok(&[NS, "-leader-election.renew-deadline=15s", "-leader-election.lease-name="]);
}

#[test]
fn value_flags_accept_every_go_form() {
    for args in [
        ["-kubernetes.namespace=a", "-log.level=info"].as_slice(),
        &["--kubernetes.namespace=a", "--log.level=info"],
        &["-kubernetes.namespace", "a", "-log.level", "info"],
        &["--kubernetes.namespace", "a", "--log.level", "info"],
    ] {
        let cfg = run_ok(args);
        assert_eq!(cfg.flags.kubernetes_namespace, "a", "{args:?}");
        assert_eq!(cfg.log.level, LogLevel::Info, "{args:?}");
    }
}

#[test]
fn a_value_that_looks_like_a_flag_is_still_the_value() {
    // Go's flag package takes the next argument as the value of a non-boolean flag, whatever it looks like.
    let cfg = run_ok(&[NS, "-kubernetes.client-qps", "-1", "-kubernetes.client-burst", "-5"]);
    assert_eq!(cfg.flags.kubernetes_client_qps, -1.0);
    assert_eq!(cfg.flags.kubernetes_client_burst, -5);
    let cfg = run_ok(&["-kubernetes.namespace", "-log.level=info"]);
    assert_eq!(cfg.flags.kubernetes_namespace, "-log.level=info");
    assert_eq!(cfg.log.level, LogLevel::Debug);
}

#[test]
fn booleans_accept_bare_and_explicit_values() {
    assert!(run_ok(&[NS, "-server-tls.enabled"]).flags.server_tls_enabled);
    assert!(run_ok(&[NS, "--server-tls.enabled"]).flags.server_tls_enabled);
    assert!(run_ok(&[NS, "-server-tls.enabled=true"]).flags.server_tls_enabled);
    assert!(run_ok(&[NS, "-use-zone-tracker=T"]).flags.use_zone_tracker);
    assert!(run_ok(&[NS, "-use-zone-tracker=1"]).flags.use_zone_tracker);
    assert!(!run_ok(&[NS, "-server-tls.self-signed-cert.enabled=false"]).flags.self_signed_cert_enabled);
    assert!(!run_ok(&[NS, "--webhooks.update-ca-bundle=False"]).flags.webhooks_update_ca_bundle);
    assert!(!run_ok(&[NS, "-webhooks.update-ca-bundle=0"]).flags.webhooks_update_ca_bundle);
}

#[test]
fn a_bare_boolean_does_not_consume_the_next_argument() {
    let cfg = run_ok(&["-server-tls.enabled", "-kubernetes.namespace", "ns"]);
    assert!(cfg.flags.server_tls_enabled);
    assert_eq!(cfg.flags.kubernetes_namespace, "ns");
    // `-flag false` is a bare boolean followed by a stray argument, never `-flag=false`.
    parse_error(&[NS, "-server-tls.enabled", "false"]);
}

#[test]
fn bad_boolean_is_a_parse_error() {
    parse_error(&[NS, "-server-tls.enabled=yes"]);
}

#[test]
fn later_occurrences_override_earlier_ones() {
    let cfg = run_ok(&[NS, "-log.level=info", "-log.level=error", "-kubernetes.namespace=other"]);
    assert_eq!(cfg.log.level, LogLevel::Error);
    assert_eq!(cfg.flags.kubernetes_namespace, "other");
}

#[test]
fn durations_use_go_syntax() {
    let cfg = run_ok(&[NS, "-reconcile.interval=1m30s", "-kubernetes.client-timeout", "1.5s"]);
    assert_eq!(cfg.flags.reconcile_interval, Duration::from_secs(90));
    assert_eq!(cfg.flags.kubernetes_client_timeout, Duration::from_millis(1500));
    let cfg = run_ok(&[NS, "-pods.client-timeout=250ms", "-reconcile.interval=0"]);
    assert_eq!(cfg.flags.pods_client_timeout, Duration::from_millis(250));
    assert_eq!(cfg.flags.reconcile_interval, Duration::ZERO);
}

#[test]
fn bad_durations_are_parse_errors() {
    for bad in ["-reconcile.interval=5", "-reconcile.interval=1d", "-kubernetes.client-timeout=soon"] {
        let err = parse_error(&[NS, bad]);
        assert!(err.to_string().contains("invalid value"), "{bad}: {err}");
    }
    parse_error(&[NS, "-server-tls.self-signed-cert.expiration=1.5y"]);
}

#[test]
fn an_empty_record_name_resolves_to_the_default_for_controller_and_webhooks_alike() {
    let cfg = run_ok(&[NS, "-use-zone-tracker=false", "-zone-tracker.config-map-name="]);
    assert_eq!(cfg.flags.zone_tracker_config_map_or_default(), "rollout-operator-zone-tracker");
    let cfg = run_ok(&[NS, "-zone-tracker.config-map-name=record"]);
    assert_eq!(cfg.flags.zone_tracker_config_map_or_default(), "record");
}

#[test]
fn certificate_expiration_uses_prometheus_syntax() {
    for v in ["1y", "52w1d", "365d", "8760h"] {
        let cfg = run_ok(&[NS, &format!("-server-tls.self-signed-cert.expiration={v}")]);
        assert_eq!(cfg.flags.self_signed_cert_expiration, Duration::from_secs(365 * 24 * 3600), "{v}");
    }
}

#[test]
fn unknown_flags_are_parse_errors() {
    let err = parse_error(&[NS, "-no.such-flag=1"]);
    assert!(err.to_string().contains("--no.such-flag"), "{err}");
    parse_error(&[NS, "-x"]);
    parse_error(&[NS, "stray"]);
}

#[test]
fn missing_value_is_a_parse_error() {
    parse_error(&["-kubernetes.namespace"]);
}

#[test]
fn help_exits_zero() {
    let err = run_err(&["-help"]);
    assert!(matches!(&err, CliError::Parse(e) if e.kind() == clap::error::ErrorKind::DisplayHelp));
    assert_eq!(err.exit_code(), 0);
    assert!(err.to_string().contains("--kubernetes.namespace"));
}

#[test]
fn validation_messages_and_order_match_the_reference() {
    let cases: &[(&[&str], &str)] = &[
        (&["-kubernetes.cluster-domain="], "-kubernetes.cluster-domain cannot be an empty string"),
        (&[], "-kubernetes.namespace has not been specified"),
        (
            &[NS, "-kubernetes.api-url=https://k8s:6443"],
            "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
        ),
        (
            &[NS, "-kubernetes.config-file=/kubeconfig"],
            "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
        ),
        (
            &[NS, "-use-zone-tracker", "-zone-tracker.config-map-name="],
            "-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified",
        ),
        (
            &[NS, "-kubernetes.client-burst=0"],
            "-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is greater than 0, since each request consumes one token",
        ),
        (&[NS, "-server-tls.request-timeout=0s"], "-server-tls.request-timeout must be positive"),
        (&[NS, "-server-tls.request-timeout=-1s"], "-server-tls.request-timeout must be positive"),
        (
            &[NS, "-zpdb.pod-ready-annotation-patch-timeout=0"],
            "-zpdb.pod-ready-annotation-patch-timeout must be positive",
        ),
        (
            &[NS, "-server.cluster-validation.http.soft-validation"],
            "http: soft validation can be enabled only if cluster validation is enabled",
        ),
        (&[NS, "-log.format=text"], "unknown log format: text"),
        (&[NS, "-log.level=trace"], "unknown log level: trace"),
        // Order: each earlier check wins over every later one.
        (&["-kubernetes.cluster-domain=", "-log.format=x"], "-kubernetes.cluster-domain cannot be an empty string"),
        (&["-kubernetes.api-url=u"], "-kubernetes.namespace has not been specified"),
        (
            &[NS, "-kubernetes.api-url=u", "-use-zone-tracker", "-zone-tracker.config-map-name="],
            "either configure both -kubernetes.api-url and -kubernetes.config-file or neither",
        ),
        (
            &[NS, "-use-zone-tracker", "-zone-tracker.config-map-name=", "-kubernetes.client-burst=0"],
            "-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified",
        ),
        (
            &[NS, "-kubernetes.client-burst=0", "-server-tls.request-timeout=0"],
            "-kubernetes.client-burst must be at least 1 when -kubernetes.client-qps is greater than 0, since each request consumes one token",
        ),
        (
            &[NS, "-server-tls.request-timeout=0", "-zpdb.pod-ready-annotation-patch-timeout=0"],
            "-server-tls.request-timeout must be positive",
        ),
        (
            &[NS, "-zpdb.pod-ready-annotation-patch-timeout=0", "-server.cluster-validation.http.soft-validation"],
            "-zpdb.pod-ready-annotation-patch-timeout must be positive",
        ),
        (
            &[NS, "-server.cluster-validation.http.soft-validation", "-log.format=x"],
            "http: soft validation can be enabled only if cluster validation is enabled",
        ),
        (&[NS, "-log.format=x", "-log.level=y"], "unknown log format: x"),
    ];
    for (args, message) in cases {
        assert_eq!(invalid(args), (message.to_string(), 1), "{args:?}");
    }
}

#[test]
fn valid_combinations_pass_validation() {
    let cfg = run_ok(&[NS, "-kubernetes.api-url=https://k8s:6443", "-kubernetes.config-file=/kc"]);
    assert_eq!(cfg.flags.config_file(), Some(Path::new("/kc")));
    assert_eq!(cfg.flags.api_url(), Some("https://k8s:6443"));
    // Rate limiting disabled: any burst is fine.
    run_ok(&[NS, "-kubernetes.client-qps=0", "-kubernetes.client-burst=0"]);
    run_ok(&[NS, "-server.cluster-validation.http.enabled", "-server.cluster-validation.http.soft-validation"]);
    run_ok(&[NS, "-use-zone-tracker=false", "-zone-tracker.config-map-name="]);
    let cfg = run_ok(&[NS, "-log.format=json", "-log.level=warn"]);
    assert_eq!(cfg.log, LogConfig { format: LogFormat::Json, level: LogLevel::Warn });
}

#[test]
fn csv_flags_split_on_commas() {
    let cfg = run_ok(&[
        NS,
        "-server.cluster-validation.http.excluded-paths=a,b/c",
        "-server.cluster-validation.http.excluded-user-agents",
        "kube-probe/.*",
    ]);
    assert_eq!(cfg.flags.cluster_validation_excluded_paths.0, ["a", "b/c"]);
    assert_eq!(cfg.flags.cluster_validation_excluded_user_agents.0, ["kube-probe/.*"]);
}

#[test]
fn the_deployed_jsonnet_arguments_parse() {
    let cfg = run_ok(&[
        "-kubernetes.namespace=mimir",
        "-use-zone-tracker=true",
        "-zone-tracker.config-map-name=rollout-operator-zone-tracker",
        "-zpdb.pod-ready-annotation-patch-timeout=5s",
        "-server-tls.enabled=true",
        "-reconcile.interval=1s",
        "-server-tls.self-signed-cert.secret-name=certificate",
    ]);
    assert!(cfg.flags.server_tls_enabled && cfg.flags.use_zone_tracker);
    assert_eq!(cfg.flags.reconcile_interval, Duration::from_secs(1));
    assert_eq!(cfg.flags.self_signed_cert_secret_name, "certificate");
}

fn plan(args: &[&str]) -> (PlanArgs, LogConfig) {
    let argv = std::iter::once("rollout-operator").chain(args.iter().copied());
    match parse(argv) {
        Ok(Command::Plan { args, log }) => (args, log),
        other => panic!("{args:?}: expected plan, got {other:?}"),
    }
}

#[test]
fn plan_subcommand_needs_no_namespace() {
    let (args, log) = plan(&["plan", "-f", "examples/three-zone-mid-rollout.yaml"]);
    assert_eq!(args.files, [Path::new("examples/three-zone-mid-rollout.yaml")]);
    assert_eq!(args.output, "text");
    assert_eq!(log, LogConfig { format: LogFormat::Logfmt, level: LogLevel::Warn });
}

#[test]
fn plan_subcommand_flags() {
    let (args, _) = plan(&["plan", "-f", "a.yaml", "--filename=b.json", "-f", "-", "-o", "json", "-namespace", "ns"]);
    assert_eq!(args.files, [Path::new("a.yaml"), Path::new("b.json"), Path::new("-")]);
    assert_eq!(args.output, "json");
    assert_eq!(args.namespace.as_deref(), Some("ns"));
    let (args, log) =
        plan(&["-log.level=debug", "-log.format", "json", "plan", "-f", "x", "--now", "2024-05-01T12:00:00Z"]);
    assert_eq!(args.now.as_deref(), Some("2024-05-01T12:00:00Z"));
    assert_eq!(log, LogConfig { format: LogFormat::Json, level: LogLevel::Debug });
}

#[test]
fn plan_subcommand_errors() {
    let argv =
        |args: &[&'static str]| std::iter::once("rollout-operator").chain(args.iter().copied()).collect::<Vec<_>>();
    // -f is required.
    let err = parse(argv(&["plan"])).err().map(|e| e.exit_code());
    assert_eq!(err, Some(2));
    // Controller flags belong before the subcommand (the namespace, spelled as everywhere, is plan's own).
    let err = parse(argv(&["plan", "-f", "x", "-use-zone-tracker=true"])).err().map(|e| e.exit_code());
    assert_eq!(err, Some(2));
    // A bad log flag is bad input to plan: exit 2, as its other bad input.
    let err = parse(argv(&["-log.level=verbose", "plan", "-f", "x"])).expect_err("a bad level");
    assert_eq!(err.to_string(), "unknown log level: verbose");
    assert_eq!(err.exit_code(), 2);
}

/// The same spelling for the same thing in every subcommand: the namespace is `-n`, `--namespace` or
/// `-kubernetes.namespace`; the cluster domain `--cluster-domain` or `-kubernetes.cluster-domain`; the zone tracker's
/// ConfigMap `-zone-tracker.config-map-name`.
#[cfg(not(madsim))]
#[test]
fn namespace_cluster_domain_and_context_are_spelled_alike_in_every_subcommand() {
    let argv = |args: &[&str]| -> Vec<String> {
        std::iter::once("rollout-operator").chain(args.iter().copied()).map(str::to_string).collect()
    };
    for spelling in
        [&["-n", "mimir"][..], &["--namespace=mimir"], &["-namespace", "mimir"], &["-kubernetes.namespace=mimir"]]
    {
        let with = |sub: &'static str| [&[sub][..], spelling].concat();
        match parse(argv(&with("status"))) {
            Ok(Command::Status { args, .. }) => assert_eq!(args.flags.kubernetes_namespace, "mimir", "{spelling:?}"),
            other => panic!("{spelling:?}: {other:?}"),
        }
        match parse(argv(&[&with("rbac")[..], &["-server-tls.enabled"]].concat())) {
            Ok(Command::Rbac(args)) => assert_eq!(args.flags.kubernetes_namespace, "mimir", "{spelling:?}"),
            other => panic!("{spelling:?}: {other:?}"),
        }
        match parse(argv(&[&with("plan")[..], &["-f", "x"]].concat())) {
            Ok(Command::Plan { args, .. }) => assert_eq!(args.namespace.as_deref(), Some("mimir"), "{spelling:?}"),
            other => panic!("{spelling:?}: {other:?}"),
        }
    }
    for spelling in ["--cluster-domain=example.org", "-kubernetes.cluster-domain=example.org"] {
        match parse(argv(&["status", spelling])) {
            Ok(Command::Status { args, .. }) => assert_eq!(args.flags.kubernetes_cluster_domain, "example.org"),
            other => panic!("{spelling}: {other:?}"),
        }
        let review = ["review", "--path", "/admission/no-downscale", "-f", "r.json", spelling];
        match parse(argv(&review)) {
            Ok(Command::Review { args, .. }) => assert_eq!(args.cluster_domain, "example.org"),
            other => panic!("{spelling}: {other:?}"),
        }
    }
    let review =
        ["review", "--path", "/admission/prepare-downscale", "-f", "r.json", "-zone-tracker.config-map-name=zt"];
    match parse(argv(&review)) {
        Ok(Command::Review { args, .. }) => assert_eq!(args.zone_tracker_config_map.as_deref(), Some("zt")),
        other => panic!("{other:?}"),
    }
    match parse(argv(&["status", "--context", "staging"])) {
        Ok(Command::Status { args, .. }) => {
            assert_eq!(args.context.as_deref(), Some("staging"));
            assert_eq!(args.flags.kubernetes_namespace, "", "left to the context");
        }
        other => panic!("{other:?}"),
    }
}

/// `--help` of the subcommands lists their own options first, then the controller's flags under their heading.
#[cfg(not(madsim))]
#[test]
fn subcommand_help_lists_its_own_options_before_the_controllers_flags() {
    let mut cmd = Cli::command();
    cmd.build();
    for (sub, own) in [("status", "--watch"), ("rbac", "--required-only"), ("review", "--path")] {
        let help = cmd.find_subcommand_mut(sub).expect(sub).render_long_help().to_string();
        let own_at = help.find(own).unwrap_or_else(|| panic!("{sub}: no {own} in\n{help}"));
        match help.find(CONTROLLER_FLAGS_HEADING) {
            Some(heading) => {
                assert!(own_at < heading, "{sub}: its options come first\n{help}");
                let first_flag = help.find("--log.format").expect("the controller's flags");
                assert!(heading < first_flag, "{sub}: the controller's flags are under the heading\n{help}");
            }
            None => assert!(!help.contains("--log.format"), "{sub} takes no controller flag\n{help}"),
        }
    }
}

/// Exit codes: the controller keeps the reference's (2 unparsable, 1 an invalid configuration), as does `rbac`,
/// whose check is the controller's; `plan`, `review` and `status` exit 2 for any bad input.
#[cfg(not(madsim))]
#[test]
fn exit_codes_are_two_for_bad_input_and_one_for_a_refused_configuration() {
    let code = |args: &[&str]| {
        parse(std::iter::once("rollout-operator").chain(args.iter().copied())).expect_err("an error").exit_code()
    };
    assert_eq!(code(&["-kubernetes.namespace=x", "-log.level=loud"]), 1);
    assert_eq!(code(&["-kubernetes.namespace=x", "-no-such-flag"]), 2);
    assert_eq!(code(&["rbac", "-kubernetes.cluster-domain="]), 1, "the controller refuses it");
    assert_eq!(code(&["rbac", "-no-such-flag"]), 2);
    assert_eq!(code(&["status", "-log.level=loud"]), 2);
    assert_eq!(code(&["-log.format=xml", "review", "--path", "/p", "-f", "r.json"]), 2);
    assert_eq!(code(&["status", "--interval=soon"]), 2);
}

#[test]
fn normalisation_rewrites_only_long_single_dash_flags() {
    let mut cmd = Cli::command();
    cmd.build();
    let norm = |args: &[&str]| -> Vec<String> {
        normalise_args(&cmd, args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        norm(&["bin", "-log.level", "-x", "-server-tls.enabled", "-h", "-", "--a=b"]),
        ["bin", "--log.level=-x", "--server-tls.enabled", "-h", "-", "--a=b"]
    );
    assert_eq!(norm(&["bin", "--", "-log.level"]), ["bin", "--", "-log.level"]);
    assert_eq!(norm(&["bin", "plan", "-f", "-o", "-o", "json"]), ["bin", "plan", "-f", "-o", "-o", "json"]);
    assert_eq!(norm(&["bin", "-log.level"]), ["bin", "--log.level"]);
}

#[cfg(not(madsim))]
#[test]
fn review_subcommand_needs_no_namespace() {
    let argv = ["rollout-operator", "review", "--path", "/admission/no-downscale", "-f", "r.json", "-f", "d.yaml"];
    match parse(argv) {
        Ok(Command::Review { args, .. }) => {
            assert_eq!(args.path, "/admission/no-downscale");
            assert_eq!(args.files.len(), 2);
            assert_eq!(args.zone_tracker_config_map, None, "without the flag, judged as with the zone tracker off");
        }
        other => panic!("expected review, got {other:?}"),
    }
}

#[cfg(not(madsim))]
#[test]
fn status_takes_the_controllers_flags_after_it_and_its_own_options() {
    let argv = [
        "rollout-operator",
        "status",
        "-kubernetes.namespace=mimir",
        "-use-zone-tracker=true",
        "--watch",
        "--interval=5s",
        "-o",
        "json",
    ];
    match parse(argv) {
        Ok(Command::Status { args, log }) => {
            assert_eq!(args.flags.kubernetes_namespace, "mimir");
            assert_eq!(args.flags.zone_tracker_config_map(), Some("rollout-operator-zone-tracker"));
            assert!(args.watch);
            assert_eq!(args.interval, Duration::from_secs(5));
            assert_eq!(args.output, "json");
            assert_eq!(log.level, LogLevel::Warn);
        }
        other => panic!("expected status, got {other:?}"),
    }
    let err = parse(["rollout-operator", "-kubernetes.namespace=x", "status"]).expect_err("flag before status");
    assert!(err.to_string().contains("must come after `status`"), "{err}");
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn service_name_flag_defaults_to_rollout_operator() {
    assert_eq!(run_ok(&[NS]).flags.server_tls_service_name, "rollout-operator");
    assert_eq!(run_ok(&[NS, "-server-tls.service-name=webhooks"]).flags.server_tls_service_name, "webhooks");
}

#[test]
fn version_flag_prints_the_version_line_and_exits_zero_without_needing_a_namespace() {
    // `-version` is `--version` in Go's syntax, like every other flag.
    for flag in ["--version", "-version"] {
        let err = run_err(&[flag]);
        assert!(matches!(&err, CliError::Parse(e) if e.kind() == clap::error::ErrorKind::DisplayVersion), "{flag}");
        assert_eq!(err.exit_code(), 0, "{flag}");
        assert_eq!(err.to_string(), crate::ops::build_info::version_text(), "{flag}");
    }
    // Whatever else is on the command line.
    assert_eq!(run_err(&[NS, "-log.level=nope", "--version"]).exit_code(), 0);
    // The reference has no one-letter version flag.
    parse_error(&[NS, "-V"]);
}

#[test]
fn version_subcommand_takes_no_flags() {
    let parse_version = |args: &[&str]| parse(std::iter::once("rollout-operator").chain(args.iter().copied()));
    assert!(matches!(parse_version(&["version"]), Ok(Command::Version)));
    let err = parse_version(&["-kubernetes.namespace=x", "version"]).expect_err("a flag before version");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("`version` takes no flags, but -kubernetes.namespace was given"), "{err}");
    let err = parse_version(&["version", "-kubernetes.namespace=x"]).expect_err("a flag after version");
    assert_eq!(err.exit_code(), 2);
}
