//! Repeated watch errors, folded: while the API server is unreachable a watch fails again at every retry of its
//! back-off, with the same error each time, and each consumer logs what it is given. A watch stream therefore passes
//! on the first error of a run at once and then the same error at most once per [`REPORT_EVERY`], saying how many
//! times it came meanwhile. A different error, or any event, ends the run.
//!
//! Consumers lose nothing by it: an error repeated identically changes nothing they know.

use crate::cluster::ApiError;
use std::time::Duration;
use tokio::time::Instant;

/// How often the same error is passed on while it repeats.
pub const REPORT_EVERY: Duration = Duration::from_secs(30);

/// The state of one watch stream's errors.
#[derive(Debug, Default)]
pub struct Repeats {
    /// The error of the current run (as displayed), when it was last passed on, and how often it came since.
    run: Option<(String, Instant, u64)>,
}

impl Repeats {
    /// An event arrived: the run of errors, if any, is over.
    pub fn event(&mut self) {
        self.run = None;
    }

    /// `err` arrived at `now`: `Some` to pass it on (with how often it repeated since it was last passed on), `None`
    /// to drop it as a repeat.
    pub fn error(&mut self, err: ApiError, now: Instant) -> Option<ApiError> {
        let text = err.to_string();
        match &mut self.run {
            Some((last, reported_at, repeats)) if *last == text => {
                *repeats += 1;
                if now.saturating_duration_since(*reported_at) < REPORT_EVERY {
                    return None;
                }
                let note =
                    format!(" (the same error {} in the last {}s)", times(*repeats), (now - *reported_at).as_secs());
                *reported_at = now;
                *repeats = 0;
                Some(with_note(err, &note))
            }
            _ => {
                self.run = Some((text, now, 0));
                Some(err)
            }
        }
    }
}

fn times(n: u64) -> String {
    if n == 1 { "once".to_string() } else { format!("{n} times") }
}

/// `err` with `note` appended to its message.
fn with_note(err: ApiError, note: &str) -> ApiError {
    match err {
        ApiError::Conflict(m) => ApiError::Conflict(m + note),
        ApiError::NotFound(m) => ApiError::NotFound(m + note),
        ApiError::Forbidden(m) => ApiError::Forbidden(m + note),
        ApiError::Rejected { code, message } => ApiError::Rejected { code, message: message + note },
        ApiError::Unavailable(m) => ApiError::Unavailable(m + note),
        ApiError::InvalidRequest(m) => ApiError::InvalidRequest(m + note),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> ApiError {
        ApiError::Unavailable(
            "watch pods in namespace x: request to the Kubernetes API server at https://a/ failed".into(),
        )
    }

    #[test]
    fn the_first_error_of_a_run_passes_and_repeats_pass_once_per_period_with_their_count() {
        let start = Instant::now();
        let mut repeats = Repeats::default();
        assert_eq!(repeats.error(unreachable(), start), Some(unreachable()));
        // kube's back-off: 0.8 s, 1.6 s, 3.2 s, ... between attempts.
        for seconds in [1, 2, 5, 11, 24] {
            assert_eq!(repeats.error(unreachable(), start + Duration::from_secs(seconds)), None, "at {seconds}s");
        }
        let passed = repeats.error(unreachable(), start + Duration::from_secs(50)).expect("passed on after 30 s");
        assert_eq!(
            passed.to_string(),
            format!("{} (the same error 6 times in the last 50s)", unreachable()),
            "says how often it came"
        );
        assert_eq!(repeats.error(unreachable(), start + Duration::from_secs(60)), None);
        let passed = repeats.error(unreachable(), start + Duration::from_secs(81)).expect("and again 30 s later");
        assert_eq!(passed.to_string(), format!("{} (the same error 2 times in the last 31s)", unreachable()));
        // A repeat that comes after a full period is passed on at once.
        let passed = repeats.error(unreachable(), start + Duration::from_secs(120)).expect("after a long back-off");
        assert_eq!(passed.to_string(), format!("{} (the same error once in the last 39s)", unreachable()));
    }

    #[test]
    fn an_event_or_a_different_error_ends_the_run() {
        let start = Instant::now();
        let mut repeats = Repeats::default();
        assert!(repeats.error(unreachable(), start).is_some());
        repeats.event();
        assert_eq!(repeats.error(unreachable(), start + Duration::from_secs(1)), Some(unreachable()));
        let forbidden = ApiError::Forbidden("watch pods: forbidden".into());
        assert_eq!(repeats.error(forbidden.clone(), start + Duration::from_secs(2)), Some(forbidden));
        assert_eq!(repeats.error(unreachable(), start + Duration::from_secs(3)), Some(unreachable()));
    }

    #[test]
    fn every_kind_of_error_keeps_its_kind_with_the_note() {
        for err in [
            ApiError::Conflict("c".into()),
            ApiError::NotFound("n".into()),
            ApiError::Forbidden("r".into()),
            ApiError::Unavailable("u".into()),
            ApiError::InvalidRequest("i".into()),
        ] {
            let noted = with_note(err.clone(), " (note)");
            assert_eq!(noted.kind(), err.kind());
            assert_eq!(noted.to_string(), format!("{err} (note)"));
        }
    }
}
