//! The Go-style command line (`rollout_operator::cli::parse`): arbitrary argv, made of the flags and subcommands
//! the parser knows (each spelled `-name`, `--name`, `-name=value` or `-name value`), raw arguments and non-UTF-8
//! bytes. Every rejection must render its message and exit code; `rbac` goes on to render its objects.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rollout_fuzz::text::Text;
use rollout_operator::cli::{Command, parse};
use rollout_operator::commands::rbac;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

const FLAGS: &[&str] = &[
    "cluster-domain",
    "events.enabled",
    "filename",
    "f",
    "o",
    "h",
    "help",
    "interval",
    "kubernetes.api-url",
    "kubernetes.client-burst",
    "kubernetes.client-qps",
    "kubernetes.client-timeout",
    "kubernetes.cluster-domain",
    "kubernetes.config-file",
    "kubernetes.namespace",
    "leader-election.enabled",
    "leader-election.lease-duration",
    "leader-election.lease-name",
    "leader-election.renew-deadline",
    "leader-election.retry-period",
    "log.format",
    "log.level",
    "namespace",
    "now",
    "output",
    "path",
    "pods.client-timeout",
    "reconcile.interval",
    "required-only",
    "rollout.progress-deadline",
    "server-tls.cert-file",
    "server-tls.enabled",
    "server-tls.key-file",
    "server-tls.port",
    "server-tls.request-timeout",
    "server-tls.self-signed-cert.dns-name",
    "server-tls.self-signed-cert.enabled",
    "server-tls.self-signed-cert.expiration",
    "server-tls.self-signed-cert.org",
    "server-tls.self-signed-cert.secret-name",
    "server-tls.service-name",
    "server.cluster-validation.http.enabled",
    "server.cluster-validation.http.excluded-paths",
    "server.cluster-validation.http.excluded-user-agents",
    "server.cluster-validation.http.soft-validation",
    "server.port",
    "use-zone-tracker",
    "version",
    "watch",
    "webhooks.update-ca-bundle",
    "zone-tracker-config-map-name",
    "zone-tracker.config-map-name",
    "zpdb.pod-ready-annotation-patch-timeout",
];

const SUBCOMMANDS: &[&str] = &["plan", "review", "rbac", "status", "version", "help"];

#[derive(Arbitrary, Debug)]
enum Arg {
    /// `-name`, `--name`.
    Flag {
        flag: u8,
        double: bool,
    },
    /// `-name=value`.
    Joined {
        flag: u8,
        double: bool,
        value: Text,
    },
    /// `-name value`.
    Separate {
        flag: u8,
        double: bool,
        value: Text,
    },
    Subcommand(u8),
    Text(Text),
    Bytes(Vec<u8>),
    Stdin,
    EndOfFlags,
}

fn push(argv: &mut Vec<OsString>, arg: &Arg) {
    let name = |flag: &u8, double: &bool| {
        let name = FLAGS[usize::from(*flag) % FLAGS.len()];
        if *double { format!("--{name}") } else { format!("-{name}") }
    };
    match arg {
        Arg::Flag { flag, double } => argv.push(name(flag, double).into()),
        Arg::Joined { flag, double, value } => argv.push(format!("{}={}", name(flag, double), value.get()).into()),
        Arg::Separate { flag, double, value } => {
            argv.push(name(flag, double).into());
            argv.push(value.get().into());
        }
        Arg::Subcommand(i) => argv.push(SUBCOMMANDS[usize::from(*i) % SUBCOMMANDS.len()].into()),
        Arg::Text(t) => argv.push(t.get().into()),
        Arg::Bytes(b) => argv.push(OsString::from_vec(b.clone())),
        Arg::Stdin => argv.push("-".into()),
        Arg::EndOfFlags => argv.push("--".into()),
    }
}

fuzz_target!(|args: Vec<Arg>| {
    let mut argv = vec![OsString::from("rollout-operator")];
    for arg in args.iter().take(24) {
        push(&mut argv, arg);
    }
    match parse(argv) {
        Ok(Command::Rbac(args)) => {
            let _ = rbac::execute(&args.options());
        }
        Ok(_) => {}
        Err(e) => {
            assert!(!e.to_string().is_empty() || e.exit_code() == 0, "an error without a message: {e:?}");
            e.exit_code();
        }
    }
});
