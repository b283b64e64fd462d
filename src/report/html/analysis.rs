//! What the report works out about one run before drawing it: its events, its golden
//! diff, and its *first divergent event* — the one place a reviewer should look first.
//!
//! The first divergent event is the earliest of: the golden diff's first divergence
//! (where the run first did something other than its golden), a `replay_diverged`
//! event (the agent asked the recording something it was not recorded with), and an
//! `error` event (a replay miss, a step limit). A run that fails only an assertion
//! points at the event its value came from ([`crate::extract::evidence`]); one that
//! only ended badly points at its `run_completed`.

use serde_json::Value;

use super::Logs;
use super::markup::plain;
use crate::event::payload as p;
use crate::event::{Event, Kind};
use crate::golden::{self, Diff, render};
use crate::outcome::{CaseOutcome, Check, RunResult};

/// Where to look first in a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Pointer {
    pub seq: u64,
    pub turn: Option<u32>,
    /// The event's kind (`turn_started`).
    pub kind: String,
    /// One line: what diverged there.
    pub what: String,
}

/// The golden comparison of a run, as far as the report can redo it.
pub enum Golden {
    /// The run passed its golden check, or had none.
    Agrees,
    /// The golden was read again and diffed with the log.
    Diff { shown: String, diff: Box<Diff>, golden: Vec<Event> },
    /// The golden check failed but the golden cannot be read now (another machine, a
    /// run directory copied from CI): what the check recorded is all there is.
    Recorded { shown: String, reason: String, recorded: Option<Value>, why: String },
}

/// One run, analysed.
pub struct RunAnalysis {
    /// The verified events, or why they cannot be read.
    pub events: Result<Vec<Event>, String>,
    pub golden: Golden,
    pub first: Option<Pointer>,
}

/// Reads and analyses run `run` of `case`. Passing runs are read but not searched.
pub fn analyse(case: &CaseOutcome, run: &RunResult, logs: &dyn Logs) -> RunAnalysis {
    let events = logs.events(case, run);
    let golden_check = run.checks.iter().find(|c| c.name == golden::CHECK && !c.passed);
    let golden = match (golden_check, &events) {
        (None, _) => Golden::Agrees,
        (Some(check), Ok(events)) => golden_diff(check, events, logs),
        (Some(check), Err(e)) => recorded(check, format!("the run's log cannot be read: {e}")),
    };
    let first = match (&events, run.passed) {
        (Ok(events), false) => first_divergence(run, events, &golden),
        _ => None,
    };
    RunAnalysis { events, golden, first }
}

fn recorded(check: &Check, why: String) -> Golden {
    Golden::Recorded {
        shown: check.expected.as_ref().and_then(Value::as_str).unwrap_or_default().to_string(),
        reason: check.reason.clone(),
        recorded: check.actual.clone(),
        why,
    }
}

fn golden_diff(check: &Check, events: &[Event], logs: &dyn Logs) -> Golden {
    let Some(shown) = check.expected.as_ref().and_then(Value::as_str) else {
        return recorded(check, "the check does not name its golden".into());
    };
    match logs.golden(shown) {
        Ok(Some(golden)) => {
            let diff = golden::diff(&golden, events);
            if diff.is_identical() {
                // the golden changed since the run (re-blessed): what was recorded stands
                return recorded(check, format!("{shown} now agrees with this run: it changed after the run"));
            }
            Golden::Diff { shown: shown.to_string(), diff: Box::new(diff), golden }
        }
        Ok(None) => recorded(check, format!("{shown} is not there to compare again")),
        Err(e) => recorded(check, e),
    }
}

/// The first divergent event of a failing run (see the module doc).
pub fn first_divergence(run: &RunResult, events: &[Event], golden: &Golden) -> Option<Pointer> {
    let at = |seq: u64, what: String| {
        let e = events.iter().find(|e| e.seq == seq);
        Pointer {
            seq,
            turn: e.and_then(|e| e.turn),
            kind: e.map_or_else(|| "event".to_string(), |e| e.kind.as_str().to_string()),
            what,
        }
    };
    let mut candidates = Vec::new();
    match golden {
        Golden::Diff { diff, .. } => {
            if let Some(d) = diff.first_divergence() {
                let seq = d.actual_seq.or(d.golden_seq).unwrap_or_default();
                let mut p = at(seq, format!("differs from the golden: {}", render::one_line(d)));
                (p.turn, p.kind) = (d.turn, d.kind.to_string());
                candidates.push(p);
            }
        }
        Golden::Recorded { recorded: Some(recorded), reason, .. } => {
            let first = &recorded["first_divergence"];
            let seq = first["actual_seq"].as_u64().or(first["golden_seq"].as_u64());
            if let Some(seq) = seq {
                candidates.push(at(seq, reason.clone()));
            }
        }
        _ => {}
    }
    for e in events {
        let what = match e.kind {
            Kind::ReplayDiverged => {
                format!("replay diverged at position {}", plain(e.view::<p::ReplayDiverged>().position))
            }
            Kind::Error => {
                let d: p::Error = e.view();
                format!("{}: {}", d.kind.as_str().as_deref().unwrap_or("error"), d.message.as_str().unwrap_or_default())
            }
            _ => continue,
        };
        candidates.push(at(e.seq, what));
        break;
    }
    if let Some(first) = candidates.into_iter().min_by_key(|p| p.seq) {
        return Some(first);
    }
    let failed = run.checks.iter().find(|c| !c.passed && c.name != golden::CHECK);
    if let Some(check) = failed
        && let Some(seq) = crate::extract::evidence(&check.name, events).first()
    {
        return Some(at(*seq, format!("{}: {}", check.name, check.reason)));
    }
    events
        .iter()
        .rev()
        .find(|e| {
            e.kind == Kind::RunCompleted && e.view::<p::RunCompleted>().status.as_str().as_deref() != Some("completed")
        })
        .map(|e| {
            at(e.seq, format!("run ended {}", e.view::<p::RunCompleted>().status.as_str().as_deref().unwrap_or("?")))
        })
}
