//! A finished run's golden churn: its failed goldens grouped by cause
//! ([`crate::golden::churn`]), and which failed gates failed only because of them.
//!
//! "Only because of goldens" is decided, not guessed: the gates are evaluated again
//! as if every run that failed nothing but its golden check had passed — tag gates on
//! a tally of cases (a control case's benign utility with them), reliability cards on
//! their runs — and a failed gate that passes then says so. A fixture edit that fails `security` and `reliability.overall`
//! through golden checks alone is then one cause, not three alarms.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{Plan, RunnerError, cards};
use crate::gate::Tally;
use crate::golden::churn::{self, Churn, Grouper};
use crate::outcome::{Cases, GateOutcome, Role, Score};

/// The default pipeline, left out of the accept command it would only lengthen.
const DEFAULT_PIPELINE: &str = "pipeline/ci.toml";

/// Group `cases`' failed goldens into `extras` ([`churn::EXTRA`]) and mark the failed
/// `gates` that fail only because of golden checks; `evaluate` decides tag gates as
/// this run does. Nothing is added when no golden check failed.
pub(super) fn golden_churn(
    plan: &Plan,
    cases: &Cases,
    gates: &mut [GateOutcome],
    card_cases: &BTreeMap<usize, cards::CardCase>,
    evaluate: &dyn Fn(&Tally) -> Vec<GateOutcome>,
    extras: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), RunnerError> {
    let mut grouper = Grouper::default();
    let mut without_goldens = Tally::default();
    let mut golden_only_runs: BTreeSet<(String, usize)> = BTreeSet::new();
    for case in cases.iter() {
        let case = case.map_err(|e| RunnerError::Internal(format!("reading case outcomes: {e}")))?;
        grouper.see(&case);
        let passed = case.passed || churn::golden_only(&case);
        // a control's benign utility is its verdict; an attack's score never reads the
        // golden check (outcome::score)
        let score = case.score.clone().map(|s| match s.role {
            Role::Control => Score { task_completed: Some(passed), ..s },
            Role::Attack => s,
        });
        without_goldens.add(&case.tags, passed, score.as_ref());
        for run in case.runs.iter().filter(|r| churn::golden_only_run(r)) {
            golden_only_runs.insert((case.id.clone(), run.index));
        }
    }
    let shown = plan.pipeline.display(&plan.pipeline.path);
    let pipeline = (shown != DEFAULT_PIPELINE).then_some(shown.as_str());
    let groups = grouper.groups(|id| churn::accept_command(pipeline, id));
    let incomplete = grouper.incomplete();
    if groups.is_empty() && incomplete.is_none() {
        return Ok(());
    }
    let mut churn = Churn { groups, gates_only_goldens: Vec::new(), incomplete };
    if gates.iter().any(|g| !g.passed) && !golden_only_runs.is_empty() {
        let mut passing: BTreeMap<String, bool> =
            evaluate(&without_goldens).into_iter().map(|g| (g.scope, g.passed)).collect();
        let mut cases = card_cases.clone();
        for case in cases.values_mut() {
            for (k, run) in case.runs.iter_mut().enumerate() {
                if golden_only_runs.contains(&(case.id.clone(), k)) {
                    run.success = true;
                }
            }
        }
        let targets =
            cards::cards(cases.values()).into_iter().map(|(agent, report)| (agent, report.targets())).collect();
        passing.extend(
            crate::gate::evaluate_cards(&plan.pipeline.gates, &targets).into_iter().map(|g| (g.scope, g.passed)),
        );
        for gate in gates.iter_mut().filter(|g| !g.passed) {
            if passing.get(&gate.scope) == Some(&true) {
                gate.reason.push_str("; fails only because golden checks failed (with them passing it passes)");
                churn.gates_only_goldens.push(gate.scope.clone());
            }
        }
    }
    extras.insert(churn::EXTRA.to_string(), json!(churn));
    Ok(())
}
