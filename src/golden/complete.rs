//! Whether a run completed on its own: the only kind of run a golden is taken from.
//!
//! A golden says what a case's agent does. A run whose agent crashed, exited or timed
//! out, whose log holds an `error` event (a fixture error, a replay miss, a request
//! stateval could not read), or whose custom grader or judge could not answer says
//! instead what went wrong around the agent. Kept as a golden, the breakage becomes the
//! expectation: a mistyped script path, blessed, makes the next crash pass its golden
//! check. So `stateval run --bless` and `stateval golden accept` write goldens only of
//! runs this module calls complete, and the summary lists the others apart, after the
//! failing cases, with no command that accepts them.

use crate::event::payload as p;
use crate::event::{Event, Kind};

/// The member of a failed `golden` check's value that says why its run did not
/// complete on its own.
pub const KEY: &str = "incomplete";

/// Why run `events` did not complete on its own, or `None` when it did. `status` is its
/// `run_completed.status`; `error` the run's own failure as the runner recorded it
/// (the agent's, a fixture error, a grader's or judge's), which names the cause best.
/// Without them ([`why_log_incomplete`]) the log alone decides, as it can: every such
/// failure leaves an event.
pub fn why_incomplete(status: &str, error: Option<&str>, events: &[Event]) -> Option<String> {
    if let Some(error) = error {
        return Some(error.to_string());
    }
    if status != "completed" {
        return Some(format!("the run ended {status}"));
    }
    events.iter().find_map(failure)
}

/// [`why_incomplete`] of a log read back (a run directory's, for `stateval golden
/// accept`): the status is its `run_completed`'s.
pub fn why_log_incomplete(events: &[Event]) -> Option<String> {
    let status = events
        .iter()
        .rev()
        .find(|e| e.kind == Kind::RunCompleted)
        .map(|e| e.view::<p::RunCompleted>().status.as_str().unwrap_or_default().into_owned());
    match status {
        Some(status) => why_incomplete(&status, None, events),
        None => Some("its log has no run_completed event".to_string()),
    }
}

/// The failure event `e` records, if it records one.
fn failure(e: &Event) -> Option<String> {
    let text = |j: p::Json<'_>| j.as_str().map(|s| s.into_owned()).unwrap_or_else(|| j.raw().to_string());
    match e.kind {
        Kind::Error => {
            let error = e.view::<p::Error>();
            Some(format!("its log holds an error event ({}: {})", text(error.kind), text(error.message)))
        }
        Kind::GraderCalled => {
            let called = e.view::<p::GraderCalled>();
            (!called.error.is_null()).then(|| {
                format!(
                    "custom grader {} could not answer ({}: {})",
                    called.command.raw(),
                    text(called.error),
                    text(called.message)
                )
            })
        }
        Kind::JudgeCalled => {
            let called = e.view::<p::JudgeCalled>();
            (!called.error.is_null())
                .then(|| format!("judge {} could not answer ({})", text(called.judge), text(called.error)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_error_or_a_status_other_than_completed_is_why_and_the_error_is_named_first() {
        assert_eq!(why_incomplete("completed", None, &[]), None);
        assert_eq!(why_incomplete("failed", None, &[]).as_deref(), Some("the run ended failed"));
        // the recorded error says more than the status it led to
        assert_eq!(why_incomplete("failed", Some("agent exited with 2"), &[]).as_deref(), Some("agent exited with 2"));
        assert_eq!(
            why_incomplete("completed", Some("judge miss"), &[]).as_deref(),
            Some("judge miss"),
            "a grader or judge that could not answer leaves the status completed"
        );
    }
}
