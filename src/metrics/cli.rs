//! `stateval metric NAME`: one metric over one JSON document (docs/metrics.md §9).
//!
//! [`run`] maps a metric name and its input document to the output object; field names
//! and integer-vs-float types are part of the contract (percents and counts are integers,
//! scores are floats, booleans are 0/1, undefined values are `null`). Reading files,
//! `--batch` and exit codes belong to the binary's `cli/`; this is the pure middle.

use serde_json::{Map, Value, json};

use super::axes::{AxesBlock, score_axes};
use super::gate::{flag, float, optional_bool, optional_number};
use super::golden_path::{GoldenPath, GoldenPathReport, score_golden_path};
use super::narrative::{NarrativeOptions, final_answer, score_narrative};
use super::recovery::{CLI_GATE_KEYS, RecoveryGate, RecoveryMarks};
use super::reliability::{
    Confidence, MAX_RUNS_PER_CASE, TaskCounts, confidence_band, pass_at, pass_hat, recommend_runs, score_outcomes,
    suite_mean,
};
use super::stability::{Floors, StabilityAcrossReport, StabilityReport, drift_flags, score_across, score_trace};
use super::trace::{MetricTrace, read_tool_calls, take_tool_calls};
use super::trajectory::{ExpectedTrace, TrajectoryReport, validate};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Every metric name `run` knows, in docs/metrics.md §9 order.
pub const METRIC_NAMES: [&str; 12] = [
    "stability",
    "stability-across",
    "reliability",
    "pass-k",
    "recommend-runs",
    "confidence-band",
    "trajectory",
    "trajectory-axes",
    "golden-path",
    "recovery",
    "narrative",
    "agent-reliability",
];

/// What a trace envelope holds: its calls, its conversation, or both nested under `trace`.
const TRACE_KEYS: &[&str] = &["tool_calls", "conversation", "trace"];

/// The keys an input of a metric that reads a trace may hold at its top level: the
/// trace's own beside the metric's, or (stability with floors) the trace nested. A trace
/// is read as far as it goes, but a key beside it that names nothing would be a typo
/// read as absent: `"mutating_tool"` for `"mutating_tools"` left every call unclassified.
/// `None`: the metric checks its own keys.
fn top_level_keys(name: &str, object: &Map<String, Value>) -> Option<&'static [&'static str]> {
    Some(match name {
        "stability" if object.contains_key("floors") => &["trace", "floors"],
        "stability" => TRACE_KEYS,
        "stability-across" => &["runs"],
        "trajectory" => &["tool_calls", "conversation", "trace", "expected"],
        "trajectory-axes" => &["tool_calls", "conversation", "trace", "dependencies", "order"],
        "golden-path" => &["tool_calls", "conversation", "trace", "golden"],
        "narrative" => &[
            "tool_calls",
            "conversation",
            "trace",
            "narrative",
            "final_response",
            "mutating_tools",
            "readonly_tools",
            "max_divergence_score",
        ],
        _ => return None,
    })
}

/// Refuse a key no part of `name`'s input reads, at the top level and (stability across
/// runs) at each run's.
fn check_keys(name: &str, object: &Map<String, Value>) -> Result<(), MetricError> {
    if let Some(allowed) = top_level_keys(name, object) {
        reject_unknown_keys(object, "", allowed)?;
    }
    if name == "stability-across"
        && let Some(Value::Array(runs)) = object.get("runs")
    {
        for (i, run) in runs.iter().enumerate() {
            if let Value::Object(run) = run {
                reject_unknown_keys(run, &format!("/runs/{i}"), TRACE_KEYS)?;
            }
        }
    }
    Ok(())
}

/// RunSample metric `name` over `input`, returning its output object.
pub fn run(name: &str, input: &Value) -> Result<Value, MetricError> {
    let object = expect_object(input, "")?;
    check_keys(name, object)?;
    match name {
        "stability" => stability(input, object),
        "stability-across" => stability_across(object),
        "reliability" => reliability(object),
        "pass-k" => pass_k(object),
        "recommend-runs" => recommend(object),
        "confidence-band" => band(object),
        "trajectory" => trajectory(input, object),
        "trajectory-axes" => axes(input),
        "golden-path" => golden_path(input, object),
        "recovery" => recovery(input, object),
        "narrative" => narrative(input),
        "agent-reliability" => super::dimensions::evaluate(input)
            .map(|report| report.to_json())
            .map_err(|e| MetricError::Dimensions(e.to_string())),
        _ => Err(MetricError::UnknownMetric { name: name.to_string(), known: METRIC_NAMES.to_vec() }),
    }
}

/// [`run`] over an input the caller no longer needs: the trace families move the
/// recorded calls' arguments out of it instead of copying them. Same output, same errors.
pub fn run_owned(name: &str, mut input: Value) -> Result<Value, MetricError> {
    let Value::Object(object) = &mut input else {
        return run(name, &input);
    };
    check_keys(name, object)?;
    match name {
        "stability" if !object.contains_key("floors") => {
            let report = score_trace(&MetricTrace::take(&mut input));
            Ok(stability_output(&report, &Floors::default()))
        }
        "stability-across" if matches!(object.get("runs"), Some(Value::Array(_))) => {
            let Some(Value::Array(runs)) = object.get_mut("runs") else { return run(name, &input) };
            let runs: Vec<MetricTrace> = runs.iter_mut().map(MetricTrace::take).collect();
            Ok(across_output(&score_across(&runs)))
        }
        "trajectory" => {
            let expected = ExpectedTrace::parse(required(object, "expected")?, "/expected")?;
            Ok(trajectory_output(&validate(&expected, &take_tool_calls(&mut input))))
        }
        "golden-path" => {
            let golden = GoldenPath::parse(required(object, "golden")?, "/golden")?;
            Ok(golden_output(&score_golden_path(&golden, &take_tool_calls(&mut input))))
        }
        _ => run(name, &input),
    }
}

fn required<'a>(object: &'a Map<String, Value>, key: &'static str) -> Result<&'a Value, MetricError> {
    object.get(key).ok_or(MetricError::Missing { pointer: String::new(), field: key })
}

fn array<'a>(object: &'a Map<String, Value>, key: &'static str) -> Result<&'a Vec<Value>, MetricError> {
    let value = required(object, key)?;
    value.as_array().ok_or_else(|| MetricError::WrongType {
        pointer: format!("/{key}"),
        expected: "an array",
        found: type_name(value),
    })
}

fn stability(input: &Value, object: &Map<String, Value>) -> Result<Value, MetricError> {
    // `{"trace": envelope, "floors": …}` is that form exactly when `floors` is present;
    // otherwise the input is the envelope (which may itself nest its calls under
    // `trace`). Either envelope may hold its calls under `trace.tool_calls`.
    let (floors, envelope) = match object.get("floors") {
        Some(f) => (Floors::from_value(f, "/floors")?, object.get("trace").unwrap_or(&Value::Null)),
        None => (Floors::default(), input),
    };
    Ok(stability_output(&score_trace(&MetricTrace::read(envelope)), &floors))
}

fn stability_output(report: &StabilityReport, floors: &Floors) -> Value {
    json!({
        "tool_usage_stability": report.tool_usage_stability,
        "response_consistency": report.response_consistency,
        "redundancy": report.redundancy,
        "cost_per_progress": report.cost_per_progress,
        "weakest_score": report.weakest_score,
        "drift_flags": drift_flags(report, floors),
        "summary": report.summary(),
    })
}

fn stability_across(object: &Map<String, Value>) -> Result<Value, MetricError> {
    let runs: Vec<MetricTrace> = array(object, "runs")?.iter().map(MetricTrace::read).collect();
    Ok(across_output(&score_across(&runs)))
}

fn across_output(r: &StabilityAcrossReport) -> Value {
    json!({
        "score": r.score,
        "weakest_score": r.weakest_score,
        "variance": r.variance,
        "tool_sequence_similarity": r.tool_sequence_similarity,
        "argument_consistency": r.argument_consistency,
        "early_divergence": flag(r.early_divergence),
        "runs": r.runs,
    })
}

fn reliability(object: &Map<String, Value>) -> Result<Value, MetricError> {
    reject_unknown_keys(object, "", &["outcomes"])?;
    let outcomes = array(object, "outcomes")?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_bool().ok_or_else(|| MetricError::WrongType {
                pointer: pointer_join("/outcomes", i),
                expected: "a boolean",
                found: type_name(v),
            })
        })
        .collect::<Result<Vec<bool>, _>>()?;
    let r = score_outcomes(&outcomes);
    Ok(json!({
        "runs": r.runs,
        "pass_at_k": r.pass_at_k,
        "passhat_k": r.passhat_k,
        "decay_curve": r.decay_curve,
        "variance_amplification": r.variance_amplification,
        "graceful_degradation": r.graceful_degradation,
    }))
}

fn count(object: &Map<String, Value>, key: &'static str, pointer: &str) -> Result<u64, MetricError> {
    let value = object.get(key).ok_or_else(|| MetricError::Missing { pointer: pointer.to_string(), field: key })?;
    value.as_u64().ok_or_else(|| MetricError::WrongType {
        pointer: pointer_join(pointer, key),
        expected: "a non-negative integer",
        found: type_name(value),
    })
}

fn pass_k(object: &Map<String, Value>) -> Result<Value, MetricError> {
    reject_unknown_keys(object, "", &["tasks", "k"])?;
    let mut tasks = Vec::new();
    for (i, task) in array(object, "tasks")?.iter().enumerate() {
        let at = pointer_join("/tasks", i);
        let task = expect_object(task, &at)?;
        reject_unknown_keys(task, &at, &["id", "n", "c"])?;
        let (n, c) = (count(task, "n", &at)?, count(task, "c", &at)?);
        if n > MAX_RUNS_PER_CASE {
            return Err(MetricError::OutOfRange {
                pointer: pointer_join(&at, "n"),
                message: format!("n = {n} runs is above the supported {MAX_RUNS_PER_CASE}"),
            });
        }
        if c > n {
            return Err(MetricError::OutOfRange {
                pointer: pointer_join(&at, "c"),
                message: format!("c = {c} passes cannot exceed n = {n} runs"),
            });
        }
        tasks.push(TaskCounts { n, c });
    }
    let (mut at, mut hat) = (Map::new(), Map::new());
    for (i, k) in array(object, "k")?.iter().enumerate() {
        let k = k.as_u64().filter(|k| *k >= 1).ok_or_else(|| MetricError::WrongType {
            pointer: pointer_join("/k", i),
            expected: "a positive integer",
            found: type_name(k),
        })?;
        at.insert(k.to_string(), suite_mean(&tasks, k, pass_at).map_or(Value::Null, float));
        hat.insert(k.to_string(), suite_mean(&tasks, k, pass_hat).map_or(Value::Null, float));
    }
    Ok(json!({"pass_at": at, "pass_hat": hat}))
}

fn confidence(object: &Map<String, Value>) -> Result<Confidence, MetricError> {
    let value = required(object, "confidence_percent")?;
    let percent = value.as_f64().ok_or_else(|| MetricError::WrongType {
        pointer: "/confidence_percent".into(),
        expected: "90, 95 or 99",
        found: type_name(value),
    })?;
    Confidence::from_percent(percent, "/confidence_percent")
}

fn recommend(object: &Map<String, Value>) -> Result<Value, MetricError> {
    reject_unknown_keys(object, "", &["half_width_percent", "confidence_percent"])?;
    let value = required(object, "half_width_percent")?;
    let half_width = value.as_f64().ok_or_else(|| MetricError::WrongType {
        pointer: "/half_width_percent".into(),
        expected: "a number of percent",
        found: type_name(value),
    })?;
    Ok(json!({"recommended_runs": recommend_runs(half_width, confidence(object)?)?}))
}

fn band(object: &Map<String, Value>) -> Result<Value, MetricError> {
    reject_unknown_keys(object, "", &["runs", "confidence_percent"])?;
    let runs = count(object, "runs", "")?;
    Ok(json!({"half_width_percent": confidence_band(runs, confidence(object)?)?}))
}

fn trajectory(input: &Value, object: &Map<String, Value>) -> Result<Value, MetricError> {
    let expected = ExpectedTrace::parse(required(object, "expected")?, "/expected")?;
    Ok(trajectory_output(&validate(&expected, &read_tool_calls(input))))
}

fn trajectory_output(report: &TrajectoryReport) -> Value {
    json!({
        "passed": flag(report.passed),
        "mismatch_count": report.mismatch_count,
        "mismatches": report.mismatches,
    })
}

fn axes(input: &Value) -> Result<Value, MetricError> {
    let block = AxesBlock::parse(input, "", false)?;
    let report = score_axes(&block, &read_tool_calls(input));
    Ok(json!({
        "dependency_satisfaction": report.dependency_satisfaction,
        "order_satisfaction": report.order_satisfaction,
    }))
}

fn golden_path(input: &Value, object: &Map<String, Value>) -> Result<Value, MetricError> {
    let golden = GoldenPath::parse(required(object, "golden")?, "/golden")?;
    Ok(golden_output(&score_golden_path(&golden, &read_tool_calls(input))))
}

fn golden_output(r: &GoldenPathReport) -> Value {
    json!({
        "passed": flag(r.passed),
        "penalty": r.penalty,
        "extra_steps": r.extra_steps,
        "backtracks": r.backtracks,
        "repeated_tools": r.repeated_tools,
        "missing_steps": r.missing_steps,
    })
}

fn recovery(input: &Value, object: &Map<String, Value>) -> Result<Value, MetricError> {
    let marks = RecoveryMarks::parse(input, "", CLI_GATE_KEYS)?;
    let budget =
        marks.timeout_budget_ms.ok_or(MetricError::Missing { pointer: String::new(), field: "timeout_budget_ms" })?;
    let report = marks.report(budget).ok_or(MetricError::Missing { pointer: String::new(), field: "call_start_ms" })?;
    let gate = RecoveryGate {
        max_recovery_ms: optional_number(object, "max_recovery_ms", "")?,
        require_clean_timeout: optional_bool(object, "require_clean_timeout", "")?.unwrap_or(false),
    };
    let passed = gate.check(None, &report, marks.fault_fired(&report)).is_empty();
    Ok(json!({
        "time_to_detection_ms": report.time_to_detection_ms,
        "time_to_recovery_ms": report.time_to_recovery_ms,
        "user_visible_hang_ms": report.user_visible_hang_ms,
        "recovered": flag(report.recovered),
        "clean_timeout": flag(report.clean_timeout),
        "detections": report.detections,
        "passed": flag(passed),
    }))
}

fn narrative(input: &Value) -> Result<Value, MetricError> {
    let options = NarrativeOptions::parse(input, "", false)?;
    if let Some(text) = input.get("narrative").filter(|t| !t.is_string()) {
        return Err(MetricError::WrongType {
            pointer: "/narrative".into(),
            expected: "a string",
            found: type_name(text),
        });
    }
    let trace = MetricTrace::read(input);
    let r = score_narrative(&final_answer(input, &trace), &trace.tool_calls, &options);
    Ok(json!({
        "divergence_score": r.divergence_score,
        "claimed_but_absent": r.claimed_but_absent,
        "present_but_unclaimed": r.present_but_unclaimed,
        "arg_mismatch": r.arg_mismatch,
        "gate_passed": flag(r.gate_passed),
        "items": r.items,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_bearing_input_takes_every_key_its_metric_and_its_trace_read() {
        // the lists beside a trace spell out keys the metric modules own: a key one of
        // them gains must be added here too, or its own input would refuse it
        let object = Map::new();
        let takes = |name: &str, keys: &[&str]| {
            let allowed = top_level_keys(name, &object).unwrap_or_else(|| panic!("{name} reads a trace"));
            for key in keys {
                assert!(allowed.contains(key), "{name} refuses {key:?}: {allowed:?}");
            }
        };
        for name in ["stability", "trajectory", "trajectory-axes", "golden-path", "narrative"] {
            takes(name, TRACE_KEYS);
        }
        takes("trajectory", &["expected"]);
        takes("trajectory-axes", crate::metrics::axes::AXES_KEYS);
        takes("golden-path", &["golden"]);
        takes("narrative", crate::metrics::narrative::NARRATIVE_KEYS);
        // the answer the narrative is read from, under either name
        takes("narrative", &["narrative", "final_response"]);
        let floors = Map::from_iter([("floors".to_string(), json!({}))]);
        assert_eq!(top_level_keys("stability", &floors), Some(&["trace", "floors"][..]));
    }

    #[test]
    fn the_owned_run_gives_the_same_output_and_errors_as_the_borrowed_one() {
        let calls = json!([{"name": "s__a", "args": {"x": 1}}, "b", {"name": "a", "arguments": "{\"x\":1}"}]);
        let inputs = [
            (
                "stability",
                json!({"tool_calls": calls, "conversation": {"turns": [{"role": "assistant", "content": "a"}]}}),
            ),
            ("stability", json!({"trace": {"tool_calls": calls}, "floors": {"redundancy": 0.9}})),
            ("stability-across", json!({"runs": [{"tool_calls": calls}, {"trace": {"tool_calls": ["a"]}}]})),
            ("stability-across", json!({"runs": 3})),
            ("trajectory", json!({"tool_calls": calls, "expected": {"mode": "unordered", "calls": ["a", "c"]}})),
            ("trajectory", json!({"tool_calls": calls})),
            ("golden-path", json!({"tool_calls": calls, "golden": {"calls": ["a", "b"]}})),
            ("golden-path", json!({"golden": {"calls": 1}})),
            ("reliability", json!({"outcomes": [true, false]})),
            ("trajectory", json!([1])),
        ];
        for (name, input) in inputs {
            assert_eq!(run_owned(name, input.clone()), run(name, &input), "{name} {input}");
        }
    }

    #[test]
    fn an_unknown_metric_lists_the_known_names() {
        let err = run("stabilty", &json!({})).unwrap_err();
        assert!(
            err.to_string().starts_with("unknown metric \"stabilty\"; known metrics: stability, stability-across,"),
            "{err}"
        );
    }

    #[test]
    fn an_input_that_is_not_an_object_is_an_error() {
        assert!(run("stability", &json!([1])).is_err());
    }

    #[test]
    fn percents_and_counts_are_integers_and_scores_are_floats() {
        let out = run("reliability", &json!({"outcomes": [true, false, true]})).unwrap();
        assert!(out["graceful_degradation"].is_u64() && out["decay_curve"][0].is_u64());
        let out = run("golden-path", &json!({"tool_calls": ["a"], "golden": {"calls": ["a"]}})).unwrap();
        assert!(out["penalty"].is_f64() && out["passed"].is_u64() && out["extra_steps"].is_u64());
        let out = run("stability", &json!({})).unwrap();
        assert!(out["weakest_score"].is_f64());
    }

    #[test]
    fn stability_reads_floors_beside_a_nested_trace() {
        // 4 identical calls: redundancy 0.25 < 0.3; tool usage 1.0
        let trace = json!({"tool_calls": ["a", "a", "a", "a"]});
        let out = run("stability", &json!({"trace": trace, "floors": {"redundancy": 0.3, "cost_per_progress": 1.0}}))
            .unwrap();
        assert_eq!(out["drift_flags"], json!(["redundancy"]));
        assert_eq!(out["redundancy"], json!(0.25));
    }

    #[test]
    fn stability_with_floors_reads_an_envelope_whose_calls_sit_under_trace_tool_calls() {
        // the same 4 identical calls, one level deeper: redundancy 1/4 = 0.25 < 0.3
        let envelope = json!({"trace": {"tool_calls": ["a", "a", "a", "a"]}});
        let out = run("stability", &json!({"trace": envelope, "floors": {"redundancy": 0.3}})).unwrap();
        assert_eq!(out["redundancy"], json!(0.25));
        assert_eq!(out["drift_flags"], json!(["redundancy"]));
        // without floors the input is the envelope itself, calls under trace.tool_calls
        let out = run("stability", &envelope).unwrap();
        assert_eq!(out["redundancy"], json!(0.25));
    }

    #[test]
    fn stability_across_reports_early_divergence_as_zero_or_one() {
        let out = run("stability-across", &json!({"runs": [{"tool_calls": ["a"]}, {"tool_calls": ["b"]}]})).unwrap();
        assert_eq!((out["early_divergence"].clone(), out["runs"].clone()), (json!(1), json!(2)));
    }

    #[test]
    fn pass_k_averages_cases_and_prints_undefined_as_null() {
        // k=1: (3/5 + 1/2)/2 = 0.55; k=3: only the n=5 case -> 1 - C(2,3)/C(5,3) = 1
        let out = run("pass-k", &json!({"tasks": [{"n": 5, "c": 3}, {"n": 2, "c": 1}], "k": [1, 3, 9]})).unwrap();
        assert!((out["pass_at"]["1"].as_f64().unwrap() - 0.55).abs() < 1e-12);
        assert_eq!(out["pass_at"]["3"], json!(1.0));
        assert_eq!(out["pass_hat"]["9"], Value::Null);
        assert!(run("pass-k", &json!({"tasks": [{"n": 2, "c": 3}], "k": [1]})).is_err());
        assert!(run("pass-k", &json!({"tasks": [], "k": [0]})).is_err());
        // a run count no suite has would make the estimator loop for hours: refused
        assert!(
            run("pass-k", &json!({"tasks": [{"n": 1_000_000_000_000u64, "c": 500_000_000_000u64}], "k": [1]})).is_err()
        );
    }

    #[test]
    fn power_analysis_rejects_unsupported_confidence_and_zero_runs() {
        let err = run("recommend-runs", &json!({"half_width_percent": 5, "confidence_percent": 93})).unwrap_err();
        assert_eq!(err.pointer(), Some("/confidence_percent"));
        assert!(run("confidence-band", &json!({"runs": 0, "confidence_percent": 95})).is_err());
        assert!(run("recommend-runs", &json!({"half_width_percent": 0, "confidence_percent": 95})).is_err());
        assert_eq!(
            run("confidence-band", &json!({"runs": 1, "confidence_percent": 99})).unwrap(),
            json!({"half_width_percent": 129})
        );
    }

    #[test]
    fn trajectory_errors_point_into_the_expected_block() {
        let err = run(
            "trajectory",
            &json!({"tool_calls": [], "expected": {"mode": "strict", "calls": [{}, {}, {"name": "a", "args": {"exactt": {}}}]}}),
        );
        // the first call lacks a name: the first error wins
        assert_eq!(err.unwrap_err().pointer(), Some("/expected/calls/0"));
        let err =
            run("trajectory", &json!({"expected": {"calls": [{"name": "a", "args": {"exactt": {}}}]}})).unwrap_err();
        assert!(err.to_string().starts_with("/expected/calls/0/args: unknown args shape \"exactt\""), "{err}");
    }

    #[test]
    fn recovery_needs_a_start_and_a_budget_and_exposes_booleans_as_zero_or_one() {
        let out = run("recovery", &json!({"call_start_ms": 0, "detected_ms": 3000, "recovered_ms": 3200, "timeout_budget_ms": 3000, "max_recovery_ms": 3100})).unwrap();
        assert_eq!(
            out,
            json!({"time_to_detection_ms": 3000, "time_to_recovery_ms": 3200, "user_visible_hang_ms": 3000, "recovered": 1, "clean_timeout": 1, "detections": 1, "passed": 0})
        );
        assert!(run("recovery", &json!({"call_start_ms": 0})).is_err());
        assert!(run("recovery", &json!({"timeout_budget_ms": 10})).is_err());
        assert!(run("recovery", &json!({"call_start_ms": 0, "timeout_budget_ms": 1, "max_recovery": 1})).is_err());
    }

    #[test]
    fn narrative_lists_its_items_with_their_kind() {
        let out = run("narrative", &json!({"narrative": "I deleted the branch.", "tool_calls": []})).unwrap();
        assert_eq!(out["claimed_but_absent"], json!(1));
        assert_eq!(out["gate_passed"], json!(0));
        assert_eq!(out["items"][0]["kind"], json!("claimed_but_absent"));
        assert_eq!(out["items"][0]["action"], json!("delete_branch"));
    }
}
