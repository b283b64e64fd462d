//! Recovery from injected faults (docs/metrics.md §4).
//!
//! A fault (`hang`, `wedged`, `slow:<ms>`, `recover-after:<n>`, `error`) is injected into
//! tool calls; the runtime never blocks a real clock, it advances virtual time by the
//! per-call timeout and records the timeout. Three marks come out of the event log — the
//! call start, the detection (the timeout event) and the recovery (the first later
//! successful tool result, or a non-empty final answer) — and this module turns them into
//! times a user would feel. Extracting the marks from the log is the runner's job; this
//! module is pure arithmetic over them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::gate::{BlockOutcome, Bound, CaseBlock, GateFailure, RunOutcome, flag, optional_bool, optional_number};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Times derived from the recovery marks of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// `detected − start`; `None` when there is no detection or it precedes the start.
    pub time_to_detection_ms: Option<i64>,
    /// `recovered − start`; `None` when there is no recovery or it precedes the start.
    pub time_to_recovery_ms: Option<i64>,
    /// The earlier of the two times when both exist, else whichever exists, else the
    /// timeout budget (the user waited the whole budget).
    pub user_visible_hang_ms: i64,
    /// `time_to_recovery_ms` exists.
    pub recovered: bool,
    /// Detected within `[start, start + budget]`.
    pub clean_timeout: bool,
    /// How many timeouts were detected in the run (reported, not gated).
    pub detections: u64,
}

/// `score_recovery(call_start_ms, detected_ms?, recovered_ms?, timeout_budget_ms)`.
pub fn score_recovery(
    call_start_ms: i64,
    detected_ms: Option<i64>,
    recovered_ms: Option<i64>,
    timeout_budget_ms: i64,
) -> RecoveryReport {
    let since_start = |mark: Option<i64>| mark.filter(|t| *t >= call_start_ms).map(|t| t.saturating_sub(call_start_ms));
    let time_to_detection_ms = since_start(detected_ms);
    let time_to_recovery_ms = since_start(recovered_ms);
    let user_visible_hang_ms = match (time_to_detection_ms, time_to_recovery_ms) {
        (Some(d), Some(r)) => d.min(r),
        (Some(t), None) | (None, Some(t)) => t,
        (None, None) => timeout_budget_ms,
    };
    let clean_timeout = time_to_detection_ms.is_some_and(|d| d <= timeout_budget_ms);
    RecoveryReport {
        time_to_detection_ms,
        time_to_recovery_ms,
        user_visible_hang_ms,
        recovered: time_to_recovery_ms.is_some(),
        clean_timeout,
        detections: u64::from(detected_ms.is_some()),
    }
}

impl RecoveryReport {
    /// `recovered after 5000 ms (detected at 3000 ms, clean), visible hang 3000 ms`.
    pub fn summary(&self) -> String {
        let ms = |t: Option<i64>| t.map_or("never".to_string(), |t| format!("{t} ms"));
        format!(
            "{} (detection {}, {}), visible hang {} ms",
            if self.recovered {
                format!("recovered after {}", ms(self.time_to_recovery_ms))
            } else {
                "not recovered".into()
            },
            ms(self.time_to_detection_ms),
            if self.clean_timeout { "clean timeout" } else { "no clean timeout" },
            self.user_visible_hang_ms
        )
    }

    /// `recovery.*` (booleans as 0/1, absent times as null).
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("recovery.time_to_detection_ms".into(), self.time_to_detection_ms.map_or(Value::Null, Value::from)),
            ("recovery.time_to_recovery_ms".into(), self.time_to_recovery_ms.map_or(Value::Null, Value::from)),
            ("recovery.user_visible_hang_ms".into(), Value::from(self.user_visible_hang_ms)),
            ("recovery.recovered".into(), flag(self.recovered)),
            ("recovery.clean_timeout".into(), flag(self.clean_timeout)),
            ("recovery.detections".into(), Value::from(self.detections)),
        ])
    }
}

/// The recovery gate's options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecoveryGate {
    /// Fail when `time_to_recovery_ms` exceeds this.
    pub max_recovery_ms: Option<f64>,
    /// Fail when a fault fired and the timeout was not clean.
    pub require_clean_timeout: bool,
}

impl RecoveryGate {
    /// The failures of one run: not recovered; recovered too slowly; a fault fired under
    /// `require_clean_timeout` without a clean timeout.
    pub fn check(&self, run: Option<usize>, report: &RecoveryReport, fault_fired: bool) -> Vec<GateFailure> {
        let targets = report.targets();
        let failure = |target: &str, bound: Bound, detail: &str| GateFailure {
            run,
            target: target.to_string(),
            value: targets.get(target).cloned().unwrap_or(Value::Null),
            bound,
            detail: Some(detail.to_string()),
        };
        let mut failures = Vec::new();
        if !report.recovered {
            failures.push(failure(
                "recovery.recovered",
                Bound::AtLeast(1.0),
                "no successful tool result or final answer after the fault",
            ));
        }
        if let (Some(max), Some(t)) = (self.max_recovery_ms, report.time_to_recovery_ms)
            && t as f64 > max
        {
            failures.push(failure("recovery.time_to_recovery_ms", Bound::AtMost(max), "recovered too slowly"));
        }
        if self.require_clean_timeout && fault_fired && !report.clean_timeout {
            failures.push(failure(
                "recovery.clean_timeout",
                Bound::AtLeast(1.0),
                "a fault fired but no timeout was detected within the budget",
            ));
        }
        failures
    }
}

/// Recovery marks of one run, as the runner's extractor (or `stateval metric recovery`)
/// gives them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecoveryMarks {
    pub call_start_ms: Option<i64>,
    pub detected_ms: Option<i64>,
    pub recovered_ms: Option<i64>,
    pub timeout_budget_ms: Option<i64>,
    /// Timeouts detected; defaults to 1 when `detected_ms` is present, else 0.
    pub detections: Option<u64>,
    /// A fault fired in the run; defaults to `detections > 0`.
    pub fault_fired: Option<bool>,
}

const MARK_KEYS: &[&str] =
    &["call_start_ms", "detected_ms", "recovered_ms", "timeout_budget_ms", "detections", "fault_fired"];

fn millis(object: &Map<String, Value>, key: &str, pointer: &str) -> Result<Option<i64>, MetricError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match (v.as_i64(), v.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => Err(MetricError::WrongType {
                pointer: pointer_join(pointer, key),
                expected: "a whole number of milliseconds",
                found: type_name(v),
            }),
        },
    }
}

impl RecoveryMarks {
    /// Read marks from an object; `extra` names keys that may sit beside them (the CLI's
    /// gate options). Values must be whole milliseconds.
    pub fn parse(value: &Value, pointer: &str, extra: &'static [&'static str]) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        if let Some(key) = object.keys().find(|k| !MARK_KEYS.contains(&k.as_str()) && !extra.contains(&k.as_str())) {
            let allowed: &'static [&'static str] = if extra.is_empty() { MARK_KEYS } else { CLI_KEYS };
            return Err(MetricError::UnknownKey { pointer: pointer.into(), key: key.clone(), allowed });
        }
        let detections = match object.get("detections") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| MetricError::WrongType {
                pointer: pointer_join(pointer, "detections"),
                expected: "a non-negative integer",
                found: type_name(v),
            })?),
        };
        Ok(RecoveryMarks {
            call_start_ms: millis(object, "call_start_ms", pointer)?,
            detected_ms: millis(object, "detected_ms", pointer)?,
            recovered_ms: millis(object, "recovered_ms", pointer)?,
            timeout_budget_ms: millis(object, "timeout_budget_ms", pointer)?,
            detections,
            fault_fired: optional_bool(object, "fault_fired", pointer)?,
        })
    }

    /// The report for these marks with `budget_ms` as the timeout budget; `None` without a
    /// call start (nothing to recover from).
    pub fn report(&self, budget_ms: i64) -> Option<RecoveryReport> {
        let start = self.call_start_ms?;
        let mut report = score_recovery(start, self.detected_ms, self.recovered_ms, budget_ms);
        report.detections = self.detections.unwrap_or(report.detections);
        Some(report)
    }

    /// Whether a fault fired: as recorded, else inferred from the detections.
    pub fn fault_fired(&self, report: &RecoveryReport) -> bool {
        self.fault_fired.unwrap_or(report.detections > 0)
    }
}

/// Gate options `stateval metric recovery` accepts beside the marks.
pub const CLI_GATE_KEYS: &[&str] = &["max_recovery_ms", "require_clean_timeout"];

/// Every key `stateval metric recovery` accepts: the marks and the gate options.
const CLI_KEYS: &[&str] = &[
    "call_start_ms",
    "detected_ms",
    "recovered_ms",
    "timeout_budget_ms",
    "detections",
    "fault_fired",
    "max_recovery_ms",
    "require_clean_timeout",
];

/// The `recovery` block: `{"max_recovery_ms"?, "require_clean_timeout"?: false,
/// "timeout_budget_ms"?}`.
///
/// Input per run: a trace envelope carrying the marks the runner extracted,
/// `{"recovery": {"call_start_ms", "detected_ms"?, "recovered_ms"?, "timeout_budget_ms"?,
/// "detections"?, "fault_fired"?}}` (whole milliseconds of virtual time). The budget is
/// the block's `timeout_budget_ms` when set, else the run's, else 0. A run without
/// `recovery.call_start_ms` fails the block (`recovery.recovered = null`): a recovery case
/// whose fault never started proves nothing. Gated in every run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecoveryBlock {
    pub gate: RecoveryGate,
    pub timeout_budget_ms: Option<i64>,
}

const RECOVERY_KEYS: &[&str] = &["max_recovery_ms", "require_clean_timeout", "timeout_budget_ms"];

impl CaseBlock for RecoveryBlock {
    const KEY: &'static str = "recovery";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        let object = expect_object(block, "")?;
        reject_unknown_keys(object, "", RECOVERY_KEYS)?;
        let max_recovery_ms = optional_number(object, "max_recovery_ms", "")?;
        if let Some(max) = max_recovery_ms
            && max < 0.0
        {
            return Err(MetricError::OutOfRange {
                pointer: "/max_recovery_ms".into(),
                message: format!("must not be negative, got {max}"),
            });
        }
        Ok(RecoveryBlock {
            gate: RecoveryGate {
                max_recovery_ms,
                require_clean_timeout: optional_bool(object, "require_clean_timeout", "")?.unwrap_or(false),
            },
            timeout_budget_ms: millis(object, "timeout_budget_ms", "")?,
        })
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let mut outcomes = Vec::with_capacity(runs.len());
        for (run, envelope) in runs.iter().enumerate() {
            let marks = match envelope.get("recovery") {
                Some(marks) => RecoveryMarks::parse(marks, "/recovery", &[])?,
                None => RecoveryMarks::default(),
            };
            let budget = self.timeout_budget_ms.or(marks.timeout_budget_ms).unwrap_or(0);
            let outcome = match marks.report(budget) {
                Some(report) => {
                    let failures = self.gate.check(Some(run), &report, marks.fault_fired(&report));
                    RunOutcome { run, passed: failures.is_empty(), targets: report.targets(), failures }
                }
                None => RunOutcome {
                    run,
                    passed: false,
                    targets: BTreeMap::new(),
                    failures: vec![GateFailure {
                        run: Some(run),
                        target: "recovery.recovered".into(),
                        value: Value::Null,
                        bound: Bound::AtLeast(1.0),
                        detail: Some("no fault mark recorded (recovery.call_start_ms is absent)".into()),
                    }],
                },
            };
            outcomes.push(outcome);
        }
        Ok(BlockOutcome::per_run(Self::KEY, outcomes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_measured_from_the_call_start() {
        // start 1000, detected 4000, recovered 6000: 3000 and 5000; visible hang = the earlier, 3000
        let r = score_recovery(1000, Some(4000), Some(6000), 3000);
        assert_eq!(
            (r.time_to_detection_ms, r.time_to_recovery_ms, r.user_visible_hang_ms),
            (Some(3000), Some(5000), 3000)
        );
        assert!(r.recovered && r.clean_timeout);
    }

    #[test]
    fn a_mark_before_the_start_is_treated_as_absent() {
        // detected 500 < start 1000 -> none; recovered 1200 -> 200
        let r = score_recovery(1000, Some(500), Some(1200), 3000);
        assert_eq!((r.time_to_detection_ms, r.time_to_recovery_ms, r.user_visible_hang_ms), (None, Some(200), 200));
        assert!(!r.clean_timeout);
    }

    #[test]
    fn with_no_marks_the_user_waits_the_whole_budget() {
        let r = score_recovery(0, None, None, 30_000);
        assert_eq!((r.user_visible_hang_ms, r.recovered, r.clean_timeout), (30_000, false, false));
    }

    #[test]
    fn a_detection_after_the_budget_is_not_a_clean_timeout() {
        // 3001 > 3000; exactly 3000 is still clean (closed interval)
        assert!(!score_recovery(0, Some(3001), Some(4000), 3000).clean_timeout);
        assert!(score_recovery(0, Some(3000), Some(4000), 3000).clean_timeout);
        assert!(score_recovery(0, Some(0), None, 3000).clean_timeout);
    }

    #[test]
    fn the_gate_fails_when_not_recovered_or_too_slow_or_unclean_under_require_clean_timeout() {
        let gate = RecoveryGate { max_recovery_ms: Some(4000.0), require_clean_timeout: true };
        // recovered at 5000 > 4000; detected at 3500 > budget 3000 -> not clean
        let r = score_recovery(0, Some(3500), Some(5000), 3000);
        let failures: Vec<String> = gate.check(None, &r, true).iter().map(|f| f.target.clone()).collect();
        assert_eq!(failures, ["recovery.time_to_recovery_ms", "recovery.clean_timeout"]);
        // no fault fired -> cleanliness is not required
        assert_eq!(gate.check(None, &score_recovery(0, None, Some(100), 3000), false), []);
        // not recovered -> fails even without options
        assert_eq!(RecoveryGate::default().check(None, &score_recovery(0, None, None, 3000), false).len(), 1);
    }

    #[test]
    fn the_block_reads_marks_from_each_run_and_fails_a_run_without_them() {
        let block = RecoveryBlock::from_block(&json!({"max_recovery_ms": 10_000, "timeout_budget_ms": 3000})).unwrap();
        let good = json!({"recovery": {"call_start_ms": 0, "detected_ms": 3000, "recovered_ms": 3500}});
        let outcome = block.evaluate(&[good, json!({})]).unwrap();
        assert!(outcome.runs[0].passed);
        assert_eq!(outcome.runs[0].targets["recovery.time_to_recovery_ms"], json!(3500));
        assert_eq!(outcome.runs[0].targets["recovery.detections"], json!(1));
        assert!(!outcome.passed);
        assert_eq!(
            outcome.messages(),
            [
                "run 1: recovery.recovered = null, below the bound 1 (no fault mark recorded (recovery.call_start_ms is absent))"
            ]
        );
    }

    #[test]
    fn marks_must_be_whole_milliseconds_and_blocks_reject_unknown_keys() {
        assert!(RecoveryMarks::parse(&json!({"call_start_ms": 1.5}), "", &[]).is_err());
        assert_eq!(RecoveryMarks::parse(&json!({"call_start_ms": 2.0}), "", &[]).unwrap().call_start_ms, Some(2));
        assert!(RecoveryBlock::from_block(&json!({"max_recovery": 1})).is_err());
        assert!(RecoveryBlock::from_block(&json!({"max_recovery_ms": -1})).is_err());
    }
}
