//! A dataset case's metric blocks, dispatched by key (`trajectory`, `trajectory_axes`,
//! `golden_path`, `stability`, `reliability`, `recovery`, `narrative`).
//!
//! The dataset loader checks each block of a case through [`check`] (which parses it with
//! [`MetricBlock::from_key`]), refuses the case when a block errors or when the case has
//! fewer runs than [`MetricBlock::min_runs`], and keeps the block as written; the runner
//! later parses it again and calls [`MetricBlock::evaluate`] with every run's trace
//! envelope.

use serde_json::Value;

use super::MetricError;
use super::axes::AxesBlock;
use super::gate::{BlockOutcome, CaseBlock};
use super::golden_path::GoldenPath;
use super::narrative::NarrativeBlock;
use super::recovery::RecoveryBlock;
use super::reliability::ReliabilityBlock;
use super::stability::StabilityBlock;
use super::trajectory::TrajectoryBlock;
use crate::dataset::blocks::{Block, BlockError, BlockFacts};

use crate::dataset::blocks::BLOCK_KEYS;

/// One parsed metric block of a case.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricBlock {
    Trajectory(TrajectoryBlock),
    TrajectoryAxes(AxesBlock),
    GoldenPath(GoldenPath),
    Stability(StabilityBlock),
    Reliability(ReliabilityBlock),
    Recovery(RecoveryBlock),
    Narrative(NarrativeBlock),
}

/// The dataset loader's check of the block under `key` (a [`crate::dataset::CheckBlock`]):
/// what it needs to know of a valid block, or the error placed under `/<key>`.
pub fn check(key: &str, block: &Value) -> Option<Result<BlockFacts, BlockError>> {
    MetricBlock::from_key(key, block).map(|parsed| {
        parsed
            .map(|b| BlockFacts { min_runs: b.min_runs(), targets: b.target_names() })
            .map_err(|e| BlockError { pointer: e.pointer().map(str::to_string), message: e.to_string() })
    })
}

fn parse<B: CaseBlock>(block: &Value, wrap: fn(B) -> MetricBlock) -> Result<MetricBlock, MetricError> {
    B::from_block(block).map(wrap).map_err(|e| e.under(&format!("/{}", B::KEY)))
}

impl MetricBlock {
    /// Parse the block under dataset key `key`; `None` when `key` is not a metric block.
    /// Error pointers are placed under `/<key>`, relative to the case object.
    pub fn from_key(key: &str, block: &Value) -> Option<Result<Self, MetricError>> {
        Some(match key {
            "trajectory" => parse(block, MetricBlock::Trajectory),
            "trajectory_axes" => parse(block, MetricBlock::TrajectoryAxes),
            "golden_path" => parse(block, MetricBlock::GoldenPath),
            "stability" => parse(block, MetricBlock::Stability),
            "reliability" => parse(block, MetricBlock::Reliability),
            "recovery" => parse(block, MetricBlock::Recovery),
            "narrative" => parse(block, MetricBlock::Narrative),
            _ => return None,
        })
    }

    /// A case's block as the dataset keeps it, parsed. The loader checked it with
    /// [`check`], so this fails only for a key that holds no metric block.
    pub fn parse(block: &Block) -> Result<Self, MetricError> {
        Self::from_key(block.key, &block.spec).unwrap_or_else(|| {
            Err(MetricError::UnknownKey { pointer: String::new(), key: block.key.to_string(), allowed: &BLOCK_KEYS })
        })
    }

    /// The block's dataset key.
    pub fn key(&self) -> &'static str {
        match self {
            MetricBlock::Trajectory(_) => TrajectoryBlock::KEY,
            MetricBlock::TrajectoryAxes(_) => AxesBlock::KEY,
            MetricBlock::GoldenPath(_) => GoldenPath::KEY,
            MetricBlock::Stability(_) => StabilityBlock::KEY,
            MetricBlock::Reliability(_) => ReliabilityBlock::KEY,
            MetricBlock::Recovery(_) => RecoveryBlock::KEY,
            MetricBlock::Narrative(_) => NarrativeBlock::KEY,
        }
    }

    /// Every target this block gives values for, per run or across runs: what a case's
    /// `expect` may name under the block's root (`trajectory.passed`). The lists are the
    /// names the block reports fill in; a test holds the two together.
    pub fn target_names(&self) -> Vec<String> {
        let names: &[&str] = match self {
            MetricBlock::Trajectory(_) => &["trajectory.passed", "trajectory.mismatch_count"],
            MetricBlock::TrajectoryAxes(_) => &["trajectory.dependency_satisfaction", "trajectory.order_satisfaction"],
            MetricBlock::GoldenPath(_) => &[
                "golden_path.passed",
                "golden_path.penalty",
                "golden_path.extra_steps",
                "golden_path.backtracks",
                "golden_path.repeated_tools",
                "golden_path.missing_steps",
            ],
            MetricBlock::Stability(_) => return super::stability::across_target_names(),
            MetricBlock::Reliability(b) => return ReliabilityBlock::target_names(&b.k),
            MetricBlock::Recovery(_) => &[
                "recovery.time_to_detection_ms",
                "recovery.time_to_recovery_ms",
                "recovery.user_visible_hang_ms",
                "recovery.recovered",
                "recovery.clean_timeout",
                "recovery.detections",
            ],
            MetricBlock::Narrative(_) => &[
                "narrative.divergence_score",
                "narrative.claimed_but_absent",
                "narrative.present_but_unclaimed",
                "narrative.arg_mismatch",
                "narrative.gate_passed",
            ],
        };
        names.iter().map(|s| (*s).to_string()).collect()
    }

    /// Fewest runs the case needs for this block (a load error below it).
    pub fn min_runs(&self) -> usize {
        match self {
            MetricBlock::Trajectory(b) => b.min_runs(),
            MetricBlock::TrajectoryAxes(b) => b.min_runs(),
            MetricBlock::GoldenPath(b) => b.min_runs(),
            MetricBlock::Stability(b) => b.min_runs(),
            MetricBlock::Reliability(b) => b.min_runs(),
            MetricBlock::Recovery(b) => b.min_runs(),
            MetricBlock::Narrative(b) => b.min_runs(),
        }
    }

    /// Grade the case's runs (see each block type for the envelope fields it reads;
    /// `reliability` reads each run's `passed` verdict).
    pub fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        match self {
            MetricBlock::Trajectory(b) => b.evaluate(runs),
            MetricBlock::TrajectoryAxes(b) => b.evaluate(runs),
            MetricBlock::GoldenPath(b) => b.evaluate(runs),
            MetricBlock::Stability(b) => b.evaluate(runs),
            MetricBlock::Reliability(b) => b.evaluate(runs),
            MetricBlock::Recovery(b) => b.evaluate(runs),
            MetricBlock::Narrative(b) => b.evaluate(runs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_key_parses_its_default_shape() {
        let minimal = |key: &str| match key {
            "trajectory" | "golden_path" => json!({"calls": []}),
            _ => json!({}),
        };
        for key in BLOCK_KEYS {
            let block = MetricBlock::from_key(key, &minimal(key)).unwrap().unwrap();
            assert_eq!(block.key(), key);
        }
        assert!(MetricBlock::from_key("expect", &json!([])).is_none());
    }

    #[test]
    fn block_errors_are_placed_under_the_block_key() {
        let err = MetricBlock::from_key("trajectory", &json!({"calls": [{"name": "a", "args": {"exactt": 1}}]}))
            .unwrap()
            .unwrap_err();
        assert!(err.to_string().starts_with("/trajectory/calls/0/args: unknown args shape \"exactt\""), "{err}");
    }

    /// A run envelope with a tool call, a fault and a final answer, so every block has
    /// something to score.
    fn envelope(passed: bool) -> Value {
        json!({"passed": passed,
               "tool_calls": [{"name": "get_balance", "args": {}}],
               "conversation": {"tokens": {"total": 10}, "turns": [{"role": "assistant", "content": "done"}]},
               "narrative": "done",
               "recovery": {"call_start_ms": 0, "detected_ms": 5, "recovered_ms": 9, "timeout_budget_ms": 10}})
    }

    #[test]
    fn the_target_names_of_every_block_are_exactly_the_targets_it_reports() {
        let shapes = [
            ("trajectory", json!({"calls": ["get_balance"]})),
            ("trajectory_axes", json!({"order": [{"first": "a", "second": "b"}]})),
            ("golden_path", json!({"calls": ["get_balance"]})),
            ("stability", json!({})),
            ("reliability", json!({"k": [1, 2]})),
            ("recovery", json!({})),
            ("narrative", json!({})),
        ];
        for (key, shape) in shapes {
            let block = MetricBlock::from_key(key, &shape).unwrap().unwrap();
            let outcome = block.evaluate(&[envelope(true), envelope(false)]).unwrap();
            let mut reported: Vec<String> = outcome.targets.keys().cloned().collect();
            for run in &outcome.runs {
                reported.extend(run.targets.keys().cloned());
            }
            reported.sort();
            reported.dedup();
            let mut declared = block.target_names();
            declared.sort();
            assert_eq!(reported, declared, "{key}");
        }
    }

    #[test]
    fn only_stability_needs_two_runs_by_default() {
        let stability = MetricBlock::from_key("stability", &json!({})).unwrap().unwrap();
        let narrative = MetricBlock::from_key("narrative", &json!({})).unwrap().unwrap();
        assert_eq!((stability.min_runs(), narrative.min_runs()), (2, 1));
    }
}
