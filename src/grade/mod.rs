//! Grading: assertions (`{"target", "matcher"}`) applied to extracted values.
//!
//! The one assertion grammar is compiled with the case (`dataset::expect`); here
//! extractors produce values, matchers judge them, and the result is a [`Check`] per
//! assertion per run. Custom graders ([`custom`]) and recorded judges ([`judge`]) are
//! matchers of the same grammar that call out; a [`calls::Grading`] serves them while
//! the run's log is open.

pub mod calls;
pub mod custom;
pub mod judge;
pub mod matcher;

use crate::dataset::expect::Assertion;
use crate::event::Event;
use crate::outcome::Check;
pub use matcher::{Caller, NoCalls};

/// Apply every assertion to one run's events (custom graders and judges fail: see
/// [`grade_with`]).
pub fn grade<'a>(assertions: impl IntoIterator<Item = &'a Assertion>, events: &[Event]) -> Vec<Check> {
    grade_with(assertions, events, &mut NoCalls)
}

/// Apply every assertion to one run's events, in order, with custom graders and judges
/// served by `caller`.
pub fn grade_with<'a>(
    assertions: impl IntoIterator<Item = &'a Assertion>,
    events: &[Event],
    caller: &mut dyn Caller,
) -> Vec<Check> {
    assertions
        .into_iter()
        .map(|a| {
            let actual = crate::extract::resolve(&a.target, events);
            caller.begin(&a.target);
            let outcome = a.matcher.apply_with(actual.as_ref(), caller);
            // Kept for passing checks too: a reviewer checking that a check tests what
            // it should reads the value it held, not only that it held (outcomes are
            // streamed to `cases.jsonl`, never all in memory).
            Check {
                name: a.target.clone(),
                passed: outcome.passed,
                reason: outcome.reason,
                expected: Some(a.spec.clone()),
                actual,
            }
        })
        .collect()
}
