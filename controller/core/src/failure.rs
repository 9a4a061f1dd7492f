//! How a request to the cluster went wrong, as every step machine observes it.
//!
//! Owns the classification the step machines decide on: RBAC's refusal (the only one that turns a feature off), the
//! API server's judgement (an admission webhook's denial, a validation error), a stale precondition, an object not
//! there, no answer in time (the outcome unknown) and an answer that cannot be read. The shell maps each API answer to
//! a [`Failure`] once, where it reads the answer; nothing here looks at the message text, which is kept only to be
//! shown.

use std::fmt;

/// A failed request, classified once where the answer is read, with the answer's text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Refused by RBAC (403, reason `Forbidden`): the permission is not granted.
    Forbidden(String),
    /// The API server judged the request and said no (an admission webhook's denial, a validation error): not a
    /// missing permission.
    Denied(String),
    NotFound(String),
    /// A precondition (uid, resourceVersion) failed: the view was stale.
    Conflict(String),
    /// No answer (unreachable, overloaded): the write may or may not have been applied.
    Unavailable(String),
    /// The request's deadline passed before its answer: the write may or may not have been applied.
    Deadline(String),
    /// The answer came but cannot be read (an object that is not what it should be).
    Unreadable(String),
    /// Anything else: a request that could not be sent, an answer nobody expected.
    Failed(String),
}

impl Failure {
    /// The answer's text, as read.
    pub fn message(&self) -> &str {
        match self {
            Failure::Forbidden(m)
            | Failure::Denied(m)
            | Failure::NotFound(m)
            | Failure::Conflict(m)
            | Failure::Unavailable(m)
            | Failure::Deadline(m)
            | Failure::Unreadable(m)
            | Failure::Failed(m) => m,
        }
    }

    /// What kind of failure, as logs and reports name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Forbidden(_) => "forbidden",
            Failure::Denied(_) => "denied",
            Failure::NotFound(_) => "not-found",
            Failure::Conflict(_) => "conflict",
            Failure::Unavailable(_) => "unavailable",
            Failure::Deadline(_) => "deadline",
            Failure::Unreadable(_) => "unreadable",
            Failure::Failed(_) => "failed",
        }
    }

    /// Whether the write may still have been applied.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, Failure::Unavailable(_) | Failure::Deadline(_))
    }

    /// Whether RBAC refused it.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Failure::Forbidden(_))
    }

    /// The same failure with `context` before its text (`"<context>: <text>"`).
    pub fn in_context(self, context: &str) -> Failure {
        self.map_message(|m| format!("{context}: {m}"))
    }

    /// The same failure with its text changed by `f`.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Failure {
        match self {
            Failure::Forbidden(m) => Failure::Forbidden(f(m)),
            Failure::Denied(m) => Failure::Denied(f(m)),
            Failure::NotFound(m) => Failure::NotFound(f(m)),
            Failure::Conflict(m) => Failure::Conflict(f(m)),
            Failure::Unavailable(m) => Failure::Unavailable(f(m)),
            Failure::Deadline(m) => Failure::Deadline(f(m)),
            Failure::Unreadable(m) => Failure::Unreadable(f(m)),
            Failure::Failed(m) => Failure::Failed(f(m)),
        }
    }
}

/// The answer's text, as read: what logs and denial messages show.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Failure {}
