//! Logging set-up for `-log.level` and `-log.format`: logfmt (the reference's default) or JSON, to stderr.
//!
//! The logfmt lines look like the reference's go-kit logger: `ts=<RFC 3339 UTC> level=<lvl> msg=... key=value`,
//! quoted with go-logfmt's rules, so that log pipelines parsing the reference's output keep working.

use crate::cli::{LogConfig, LogFormat, LogLevel};
use std::fmt;
use thiserror::Error;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug, Error)]
pub enum LoggingError {
    #[error("failed to install the logger: {0}")]
    Install(String),
}

/// Installs the process-wide logger, writing to stderr.
pub fn init(config: LogConfig) -> Result<(), LoggingError> {
    subscriber(config, std::io::stderr).try_init().map_err(|e| LoggingError::Install(e.to_string()))
}

/// The subscriber [`init`] installs, writing to `make_writer` (tests capture the output this way).
pub fn subscriber<W>(config: LogConfig, make_writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = filter(config.level);
    match config.format {
        LogFormat::Logfmt => Box::new(
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .event_format(Logfmt::default())
                    .fmt_fields(LogfmtFields)
                    .with_writer(make_writer)
                    .with_filter(filter),
            ),
        ),
        LogFormat::Json => Box::new(
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_target(false)
                    .with_ansi(false)
                    .with_writer(make_writer)
                    .with_filter(filter),
            ),
        ),
    }
}

/// The module of kube's client that logs each failed request without saying which.
const KUBE_CLIENT_FAILURES: &str = "kube_client::client::builder";

/// Our own crates log at the configured level. Dependencies (kube, hyper, rustls) log at most at info: their debug
/// output is per-request noise, and the reference's debug level shows only the operator's own messages.
fn filter(level: LogLevel) -> Targets {
    let own = match level {
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Error => LevelFilter::ERROR,
    };
    Targets::new()
        .with_default(own.min(LevelFilter::INFO))
        .with_target("rollout_operator", own)
        .with_target("rollout_core", own)
        // kube's client logs every failed request as a bare `failed with error client error (Connect)`; each
        // failure reaches the operator as an error, which it logs once with the operation and the API server.
        .with_target(KUBE_CLIENT_FAILURES, LevelFilter::OFF)
}

/// Event formatter for logfmt. The clock is a field so tests can pin the timestamp.
#[derive(Debug, Clone, Copy)]
pub struct Logfmt {
    clock: fn() -> jiff::Timestamp,
}

impl Default for Logfmt {
    fn default() -> Self {
        Logfmt { clock: jiff::Timestamp::now }
    }
}

impl Logfmt {
    pub fn with_clock(clock: fn() -> jiff::Timestamp) -> Self {
        Logfmt { clock }
    }
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        // jiff prints RFC 3339 in UTC with only the fractional digits needed, like Go's RFC3339Nano.
        write!(writer, "ts={} level={}", (self.clock)(), level_name(event.metadata().level()))?;
        let mut fields = FieldCollector::default();
        event.record(&mut fields);
        if let Some(message) = &fields.message {
            writer.write_str(" msg=")?;
            write_value(&mut writer, message)?;
        }
        write_pairs(&mut writer, &fields.pairs)?;
        // Fields of the enclosing spans (e.g. the rollout group being reconciled), outermost first.
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                if let Some(formatted) = extensions.get::<FormattedFields<N>>()
                    && !formatted.fields.is_empty()
                {
                    write!(writer, " {}", formatted.fields)?;
                }
            }
        }
        writeln!(writer)
    }
}

/// Formats span fields as logfmt pairs (without a leading space), for [`Logfmt`] to append to events.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogfmtFields;

impl<'writer> FormatFields<'writer> for LogfmtFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut collector = FieldCollector::default();
        fields.record(&mut collector);
        let mut pairs = collector.pairs;
        if let Some(message) = collector.message {
            pairs.insert(0, ("msg", message));
        }
        let mut first = true;
        for (key, value) in &pairs {
            if !first {
                writer.write_char(' ')?;
            }
            first = false;
            write!(writer, "{key}=")?;
            write_value(&mut writer, value)?;
        }
        Ok(())
    }
}

fn write_pairs(writer: &mut impl fmt::Write, pairs: &[(&'static str, String)]) -> fmt::Result {
    for (key, value) in pairs {
        write!(writer, " {key}=")?;
        write_value(writer, value)?;
    }
    Ok(())
}

/// Collects an event's fields as strings: the `message` apart, the rest in declaration order.
#[derive(Default)]
struct FieldCollector {
    message: Option<String>,
    pairs: Vec<(&'static str, String)>,
}

impl FieldCollector {
    fn push(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = Some(value),
            // Metadata that tracing-log attaches to records from the `log` crate; not user fields.
            name if name.starts_with("log.") => {}
            name => self.pairs.push((name, value)),
        }
    }
}

impl Visit for FieldCollector {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.to_string());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}"));
    }
}

/// Writes a logfmt value with go-logfmt's rules: quoted if it contains a space, a control character, `=`, `"` or
/// U+FFFD; inside quotes `\`, `"` and control characters are escaped. The empty string is written as nothing, and
/// the string `null` is quoted so it is not read as a nil value.
pub fn write_value(out: &mut impl fmt::Write, value: &str) -> fmt::Result {
    if value == "null" {
        return out.write_str("\"null\"");
    }
    let needs_quotes = value.chars().any(|c| c <= ' ' || c == '=' || c == '"' || c == char::REPLACEMENT_CHARACTER);
    if !needs_quotes {
        return out.write_str(value);
    }
    out.write_char('"')?;
    for c in value.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '"' => out.write_str("\\\"")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if c < ' ' => write!(out, "\\u{:04x}", u32::from(c))?,
            c => out.write_char(c)?,
        }
    }
    out.write_char('"')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::{Arc, Mutex};

    /// Collects everything written, for assertions.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().map_err(|_| io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Capture {
        type Writer = Capture;
        fn make_writer(&'a self) -> Capture {
            self.clone()
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("capture lock").clone()).expect("utf-8 log output")
        }
    }

    fn fixed_clock() -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(1_714_564_800_123).expect("valid timestamp")
    }

    /// Runs `f` with a logfmt subscriber (pinned clock) and returns what it wrote.
    fn logfmt_output(level: LogLevel, f: impl FnOnce()) -> String {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .event_format(Logfmt::with_clock(fixed_clock))
                .fmt_fields(LogfmtFields)
                .with_writer(capture.clone())
                .with_filter(filter(level)),
        );
        tracing::subscriber::with_default(subscriber, f);
        capture.text()
    }

    fn quoted(value: &str) -> String {
        let mut out = String::new();
        write_value(&mut out, value).expect("writing to a String");
        out
    }

    #[test]
    fn logfmt_line_has_timestamp_level_message_and_fields() {
        let out = logfmt_output(LogLevel::Debug, || {
            tracing::info!(sts = "ingester-zone-a", replicas = 3, ready = true, "rolling pods");
        });
        assert_eq!(
            out,
            "ts=2024-05-01T12:00:00.123Z level=info msg=\"rolling pods\" sts=ingester-zone-a replicas=3 ready=true\n"
        );
    }

    #[test]
    fn logfmt_quotes_tricky_values() {
        let out = logfmt_output(LogLevel::Debug, || {
            tracing::warn!(
                reason = "a=b",
                quote = "say \"hi\"",
                lines = "one\ntwo",
                empty = "",
                path = "C:\\dir",
                nothing = "null",
                tab = "a\tb",
                err = %"boom: failed",
                "single"
            );
        });
        assert_eq!(
            out,
            "ts=2024-05-01T12:00:00.123Z level=warn msg=single reason=\"a=b\" quote=\"say \\\"hi\\\"\" \
             lines=\"one\\ntwo\" empty= path=C:\\dir nothing=\"null\" tab=\"a\\tb\" err=\"boom: failed\"\n"
        );
    }

    #[test]
    fn logfmt_value_quoting_rules() {
        assert_eq!(quoted("plain"), "plain");
        assert_eq!(quoted("two words"), "\"two words\"");
        assert_eq!(quoted("back\\slash \"q\""), "\"back\\\\slash \\\"q\\\"\"");
        assert_eq!(quoted("bell\u{7}"), "\"bell\\u0007\"");
        assert_eq!(quoted("cr\r"), "\"cr\\r\"");
        assert_eq!(quoted("bad\u{fffd}"), "\"bad\u{fffd}\"");
        assert_eq!(quoted("zoné"), "zoné");
    }

    #[test]
    fn logfmt_appends_span_fields() {
        let out = logfmt_output(LogLevel::Debug, || {
            let span = tracing::info_span!("reconcile", group = "ingester");
            let _entered = span.enter();
            tracing::debug!(pod = "ingester-zone-a-0", "deleting pod");
        });
        assert_eq!(
            out,
            "ts=2024-05-01T12:00:00.123Z level=debug msg=\"deleting pod\" pod=ingester-zone-a-0 group=ingester\n"
        );
    }

    #[test]
    fn level_filters_own_crate_and_caps_dependencies() {
        let out = logfmt_output(LogLevel::Warn, || {
            tracing::info!("hidden");
            tracing::warn!("shown");
        });
        assert!(!out.contains("hidden") && out.contains("msg=shown"), "{out}");
        let out = logfmt_output(LogLevel::Debug, || {
            tracing::debug!(target: "hyper::proto", "dependency noise");
            tracing::info!(target: "kube_runtime::watcher", "dependency info");
            tracing::debug!("own debug");
        });
        assert!(!out.contains("dependency noise"), "{out}");
        assert!(out.contains("dependency info") && out.contains("own debug"), "{out}");
    }

    #[test]
    fn kube_clients_bare_failure_lines_are_dropped() {
        let out = logfmt_output(LogLevel::Debug, || {
            tracing::error!(target: "kube_client::client::builder", "failed with error client error (Connect)");
            tracing::error!(target: "kube_client::client", "other kube error");
        });
        assert!(!out.contains("client error (Connect)"), "{out}");
        assert!(out.contains("other kube error"), "{out}");
    }

    #[test]
    fn json_format_writes_one_object_per_line() {
        let capture = Capture::default();
        let subscriber = subscriber(LogConfig { format: LogFormat::Json, level: LogLevel::Info }, capture.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(sts = "a b", "hello \"world\"");
            tracing::debug!("hidden");
        });
        let out = capture.text();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let value: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON line");
        assert_eq!(value["message"], "hello \"world\"");
        assert_eq!(value["sts"], "a b");
        assert_eq!(value["level"], "INFO");
        assert!(value["timestamp"].as_str().is_some_and(|ts| ts.ends_with('Z')), "{value}");
    }
}
