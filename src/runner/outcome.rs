//! The runner's result stream: what every reporter and gate consumes.
//!
//! Everything here is deterministic for the same inputs (no wall-clock time, cases in
//! dataset order), so every report rendered from it is byte-stable.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One check of a case: an `expect` assertion on one run, or a metric block over runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The assertion target (`policy.denials`) or block target (`trajectory.passed`).
    pub name: String,
    pub passed: bool,
    /// One line: why it failed, or what held.
    pub reason: String,
    /// The matcher or bound, as written.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expected: Option<Value>,
    /// The extracted value (absent when the target had no value).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub actual: Option<Value>,
}

/// One recorded run (k) of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Run index k, from 0.
    pub index: usize,
    /// Log path, relative to the working directory.
    pub log: String,
    /// `blake3:…` of the last event; absent only when nothing was written.
    pub head: Option<String>,
    pub events: u64,
    /// `run_completed.status`.
    pub status: String,
    pub checks: Vec<Check>,
    /// A failure of the run itself (replay miss, divergence under `fail`), one line.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// Non-failing findings (divergence under `warn`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<String>,
    pub passed: bool,
}

/// A dataset case over all its recorded runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseOutcome {
    /// Dataset name: its path under `datasets/` without `.jsonl` (`examples/treasury`).
    pub dataset: String,
    pub id: String,
    pub tags: Vec<String>,
    pub agent: String,
    /// `file:line` of the case.
    pub source: String,
    pub runs: Vec<RunResult>,
    /// Metric blocks gated across all runs.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub blocks: Vec<Check>,
    pub passed: bool,
}

impl CaseOutcome {
    /// The first reason this case failed, as one line, or `None` when it passed.
    pub fn failure(&self) -> Option<String> {
        if self.passed {
            return None;
        }
        for run in &self.runs {
            if let Some(err) = &run.error {
                return Some(format!("run {}: {err}", run.index));
            }
            if let Some(c) = run.checks.iter().find(|c| !c.passed) {
                return Some(format!("run {}: {}: {}", run.index, c.name, c.reason));
            }
        }
        self.blocks.iter().find(|c| !c.passed).map(|c| format!("{}: {}", c.name, c.reason))
    }

    /// Every failing check, one line each (reports show all, not only the first).
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for run in &self.runs {
            if let Some(err) = &run.error {
                out.push(format!("run {}: {err}", run.index));
            }
            for c in run.checks.iter().filter(|c| !c.passed) {
                out.push(format!("run {}: {}: {}", run.index, c.name, c.reason));
            }
        }
        out.extend(self.blocks.iter().filter(|c| !c.passed).map(|c| format!("{}: {}", c.name, c.reason)));
        out
    }
}

/// One gate's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// `default` (every case) or the tag it gates.
    pub scope: String,
    pub cases: usize,
    pub passed_cases: usize,
    pub pass_rate: f64,
    pub passed: bool,
    /// One line: the bound that held or failed, with numbers.
    pub reason: String,
}

/// A whole `stateval run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteOutcome {
    pub pipeline: String,
    /// Content-derived: the same inputs give the same id.
    pub run_id: String,
    pub cases: Vec<CaseOutcome>,
    pub gates: Vec<GateOutcome>,
    /// Every gate passed.
    pub passed: bool,
    /// Suite-level extras keyed by name (agent reliability cards, …).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty", default)]
    pub extras: serde_json::Map<String, Value>,
}

impl SuiteOutcome {
    pub fn passed_cases(&self) -> usize {
        self.cases.iter().filter(|c| c.passed).count()
    }
}
