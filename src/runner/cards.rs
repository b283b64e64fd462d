//! Reliability cards (docs/metrics.md §6) for each agent profile, from the runs of its cases.
//!
//! Inputs come from the event log of each run: success is the run's verdict, confidence
//! the last confidence the model reported, actions the executed tool names, and the
//! resources virtual time, model calls, actions, errors (error results and `error`
//! events), mean model latency and — when the profile has a price table — token cost.
//! Safety violations are the `security_flagged` events and their severities. Cases
//! declaring a `perturbation` feed robustness only.

use std::collections::BTreeMap;

use crate::dataset::{Case, Perturbation};
use crate::event::{Event, Kind, payload};
use crate::metrics::dimensions::{
    Perturbed, PerturbedTask, Report, RunSample, Severity, Task, Variant, evaluate_tasks,
};
use crate::pipeline::profile::Price;

/// Card inputs of one run.
pub fn card_run(events: &[Event], success: bool, price: Option<Price>) -> RunSample {
    let mut run = RunSample { success, ..RunSample::default() };
    let (mut latency_sum, mut input, mut output) = (0.0, 0u64, 0u64);
    for e in events {
        match e.kind {
            Kind::ModelCalled => {
                let called: payload::ModelCalled = e.view();
                let usage: payload::Usage = called.usage.view();
                run.model_calls += 1;
                latency_sum += called.latency_ms.as_f64().unwrap_or(0.0);
                input += usage.input_tokens.as_u64().unwrap_or(0);
                output += usage.output_tokens.as_u64().unwrap_or(0);
                if let Some(c) = called.response.view::<payload::Response>().confidence.as_f64() {
                    run.confidence = Some(c);
                }
            }
            Kind::ToolExecuted => {
                let call: payload::ToolExecuted = e.view();
                run.actions.push(call.tool.as_str().unwrap_or_default().into_owned());
                run.errors += u64::from(call.is_error.as_bool().unwrap_or(false));
            }
            Kind::Error => run.errors += 1,
            Kind::SecurityFlagged => {
                let severity = e.view::<payload::SecurityFlagged>().severity.as_str();
                run.violations.push(Severity::from_label(severity.as_deref().unwrap_or_default()));
            }
            _ => {}
        }
    }
    run.time = events.last().map_or(0.0, |e| e.t as f64);
    if run.model_calls > 0 {
        run.latency = latency_sum / run.model_calls as f64;
    }
    if let Some(p) = price {
        run.cost = input as f64 / 1000.0 * p.input_per_1k_tokens + output as f64 / 1000.0 * p.output_per_1k_tokens;
    }
    run
}

/// Does this case feed a card? Only cases with several runs or a perturbation do, so a
/// suite without them holds no card inputs at all.
pub fn feeds_card(case: &Case) -> bool {
    case.recordings.len() >= 2 || case.perturbation.is_some()
}

/// A case that feeds a card, with its runs' card inputs.
#[derive(Debug, Clone)]
pub struct CardCase {
    pub id: String,
    pub agent: String,
    pub perturbation: Option<Perturbation>,
    pub runs: Vec<RunSample>,
}

/// One card per agent that has a task with at least two runs.
pub fn cards<'a>(cases: impl IntoIterator<Item = &'a CardCase>) -> BTreeMap<String, Report> {
    let mut by_agent: BTreeMap<&str, (Vec<Task>, Perturbed)> = BTreeMap::new();
    for case in cases {
        let runs = &case.runs;
        if runs.is_empty() {
            continue;
        }
        let (tasks, perturbed) = by_agent.entry(case.agent.as_str()).or_default();
        match &case.perturbation {
            None => tasks.push(Task { id: case.id.clone(), runs: runs.clone() }),
            Some(p) => {
                let list = match p.kind.as_str() {
                    "fault" => &mut perturbed.fault,
                    "structural" => &mut perturbed.structural,
                    _ => &mut perturbed.prompt,
                };
                list.push(PerturbedTask { of: p.of.clone(), runs: runs.clone() });
            }
        }
    }
    by_agent
        .into_iter()
        .filter(|(_, (tasks, _))| tasks.iter().any(|t| t.runs.len() >= 2))
        .map(|(agent, (tasks, perturbed))| {
            (agent.to_string(), evaluate_tasks(&tasks, &perturbed, Variant::CameraReady))
        })
        .collect()
}
