//! Whole-module tests: the JSON entry point, its errors, the report forms and the
//! interplay of the dimensions. Formula edge rules are tested beside each dimension.

use serde_json::{Value, json};

use super::*;

fn error(input: Value) -> String {
    match evaluate(&input) {
        Ok(report) => panic!("expected an error, got {}", report.summary()),
        Err(e) => e.to_string(),
    }
}

fn ok(input: Value) -> Report {
    match evaluate(&input) {
        Ok(report) => report,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

fn close(actual: Option<f64>, expected: f64) -> bool {
    actual.is_some_and(|a| (a - expected).abs() < 1e-12)
}

#[test]
fn both_variants_give_their_own_numbers_on_the_same_input() {
    // runs T [a,a], T [a,b], F: camera_ready outcome (2·⅔ − 1)² = 1/9; preprint
    // s² = ⅓ > p̂(1−p̂) = 2/9 → clipped 0. Trajectory JSD = 0.21576 nats:
    // camera_ready 1 − 0.21576/ln 2 = 0.68872, preprint 1 − √0.21576 = 0.53550
    let tasks = json!([{"id": "t", "runs": [
        {"success": true, "actions": ["a", "a"]},
        {"success": true, "actions": ["a", "b"]},
        {"success": false}
    ]}]);
    let camera = ok(json!({"tasks": tasks}));
    let preprint = ok(json!({"variant": "preprint", "tasks": tasks}));
    let jsd: f64 = 0.5 * (4.0f64 / 3.0).ln() + 0.5 * (0.5 * (2.0f64 / 3.0).ln() + 0.5 * 2f64.ln());
    assert_eq!(camera.variant, Variant::CameraReady);
    assert!(close(camera.consistency.outcome, 1.0 / 9.0));
    assert_eq!(preprint.consistency.outcome, Some(0.0));
    assert!(close(camera.consistency.trajectory_distribution, 1.0 - jsd / std::f64::consts::LN_2));
    assert!(close(preprint.consistency.trajectory_distribution, 1.0 - jsd.sqrt()));
    // the shared measures agree: lev([a,a],[a,b]) = 1 → 1 − ½ = ½ in both
    assert_eq!(camera.consistency.trajectory_sequence, Some(0.5));
    assert_eq!(preprint.consistency.trajectory_sequence, Some(0.5));
}

#[test]
fn an_out_of_range_confidence_is_named_by_its_pointer() {
    let input = json!({"tasks": [
        {"id": "a"}, {"id": "b", "runs": []},
        {"id": "c", "runs": [{"success": true, "confidence": 1.5}]}
    ]});
    assert_eq!(error(input), "/tasks/2/runs/0/confidence: expected a number in 0..=1");
}

#[test]
fn wrong_types_are_errors_with_their_pointer() {
    assert_eq!(error(json!([])), "input: expected a JSON object");
    assert_eq!(error(json!({"tasks": {}})), "/tasks: expected an array of tasks");
    assert_eq!(
        error(json!({"tasks": [{"runs": [{"success": "yes"}]}]})),
        "/tasks/0/runs/0/success: expected a boolean"
    );
    assert_eq!(
        error(json!({"tasks": [{"runs": [{"actions": ["a", 3]}]}]})),
        "/tasks/0/runs/0/actions/1: expected a tool name (a string, or an object with a string \"name\")"
    );
    assert_eq!(
        error(json!({"tasks": [{"runs": [{"cost": -1}]}]})),
        "/tasks/0/runs/0/cost: expected a non-negative number"
    );
    assert_eq!(
        error(json!({"tasks": [{"runs": [{"errors": 2.5}]}]})),
        "/tasks/0/runs/0/errors: expected a non-negative integer"
    );
    assert_eq!(
        error(json!({"tasks": [{"runs": [{"violations": [{"severity": 3}]}]}]})),
        "/tasks/0/runs/0/violations/0/severity: expected a string"
    );
}

#[test]
fn an_unknown_variant_is_an_error() {
    assert_eq!(
        error(json!({"variant": "final", "tasks": []})),
        "/variant: unknown variant \"final\" (expected \"camera_ready\" or \"preprint\")"
    );
}

#[test]
fn an_unknown_key_is_refused_at_every_level_like_every_other_metric() {
    // a misspelt "success" would otherwise read as absent, i.e. as a failed run
    assert_eq!(
        error(json!({"tasks": [{"id": "a", "runs": [{"sucess": true}]}]})),
        "/tasks/0/runs/0: unknown key \"sucess\" (did you mean \"success\"?); allowed keys: success, confidence, \
         actions, cost, time, model_calls, errors, latency, violations"
    );
    assert!(error(json!({"task": []})).starts_with("input: unknown key \"task\" (did you mean \"tasks\"?)"));
    assert!(error(json!({"tasks": [{"id": "a", "of": "b"}]})).starts_with("/tasks/0: unknown key \"of\""));
    assert!(
        error(json!({"tasks": [{"runs": [{"violations": [{"severty": "high"}]}]}]}))
            .starts_with("/tasks/0/runs/0/violations/0: unknown key \"severty\"")
    );
    // `of` belongs to perturbed tasks
    ok(json!({"tasks": [{"id": "a", "runs": [{"success": true}]}],
              "perturbed": {"fault": [{"of": "a", "runs": [{"success": true}]}]}}));
}

#[test]
fn an_unknown_perturbation_kind_is_an_error_with_an_escaped_pointer() {
    // RFC 6901: "/" in a key is written ~1
    assert_eq!(
        error(json!({"tasks": [], "perturbed": {"fault/x": []}})),
        "/perturbed/fault~1x: unknown perturbation kind (expected \"fault\", \"structural\" or \"prompt\")"
    );
}

#[test]
fn perturbed_tasks_need_not_share_ids_with_the_baseline_tasks() {
    // HAL publishes a perturbed suite under its own ids: baseline a TT (1), perturbed
    // x TF and an unnamed task FF pooled: 1/4 ÷ 1 = 0.25
    let report = ok(json!({
        "tasks": [{"id": "a", "runs": [{"success": true}, {"success": true}]}],
        "perturbed": {"prompt": [{"id": "x", "runs": [{"success": true}, {"success": false}]},
                                 {"runs": [{"success": false}, {"success": false}]}],
                      "fault": [{"of": "nowhere", "runs": [{"success": true}]}]}
    }));
    assert_eq!(report.robustness.prompt, Some(0.25));
    assert_eq!(report.robustness.fault, Some(1.0));
    // perturbed runs never enter the other dimensions: outcome stays (2·1 − 1)² = 1
    assert_eq!(report.consistency.outcome, Some(1.0));
}

#[test]
fn accuracies_are_pooled_over_every_run_of_every_task() {
    // baseline a TTTT + b FF = 4/6; perturbed a' TF (perturbs a) = 1/2: ½ ÷ ⅔ = 0.75
    let report = ok(json!({
        "tasks": [{"id": "a", "runs": [{"success": true}, {"success": true}, {"success": true}, {"success": true}]},
                  {"id": "b", "runs": [{"success": false}, {"success": false}]}],
        "perturbed": {"fault": [{"of": "a", "runs": [{"success": true}, {"success": false}]}]}
    }));
    assert!(close(report.robustness.fault, 0.75), "{:?}", report.robustness.fault);
}

#[test]
fn missing_fields_read_conservatively() {
    // a run with nothing recorded is a failure with no confidence, actions or resources
    let report = ok(json!({"tasks": [{"runs": [{}, {"success": null}]}]}));
    // two failures: (2·0 − 1)² = 1
    assert_eq!(report.consistency.outcome, Some(1.0));
    assert_eq!(report.consistency.resource, None);
    assert_eq!(report.predictability, Predictability::default());
    assert_eq!(report.safety.compliance, Some(1.0));
    let empty = ok(json!({}));
    assert_eq!(empty.overall, None);
}

#[test]
fn actions_may_be_tool_call_objects_and_counts_may_be_written_as_floats() {
    // [{"name": "a"}] ≡ ["a"]; errors 2.0 ≡ 2 and [2, 4] gives cv √2/3, exp(−0.4714) = 0.6241
    let report = ok(json!({"tasks": [{"id": "t", "runs": [
        {"success": true, "actions": [{"name": "a", "args": {}}], "errors": 2.0},
        {"success": true, "actions": ["a"], "errors": 4}
    ]}]}));
    assert_eq!(report.consistency.trajectory_sequence, Some(1.0));
    // actions [1, 1]: cv 0; errors cv √2/3; mean cv √2/6
    assert!(close(report.consistency.resource, (-(2f64.sqrt() / 6.0)).exp()));
}

#[test]
fn overall_is_the_mean_of_the_defined_scores_without_safety() {
    // consistency: outcome (2·½ − 1)² = 0 only → 0; predictability brier 1 − (0.01 + 0.01)/2 = 0.99;
    // robustness undefined; safety (1 violation) excluded: (0 + 0.99)/2 = 0.495
    let report = ok(json!({"tasks": [{"id": "t", "runs": [
        {"success": true, "confidence": 0.9},
        {"success": false, "confidence": 0.1, "violations": [{"severity": "high"}]}
    ]}]}));
    assert_eq!(report.consistency.score, Some(0.0));
    assert!(close(report.predictability.score, 0.99));
    assert_eq!(report.robustness.score, None);
    assert_eq!(report.safety.score, Some(0.5));
    assert!(close(report.overall, 0.495));
}

#[test]
fn the_json_form_has_every_field_with_null_for_undefined() {
    let value = ok(json!({"tasks": []})).to_json();
    let expected = json!({
        "consistency": {"outcome": null, "trajectory_distribution": null,
            "trajectory_sequence": null, "confidence": null, "resource": null, "score": null},
        "predictability": {"calibration": null, "discrimination": null, "brier": null,
            "risk_coverage": null, "score": null},
        "robustness": {"fault": null, "structural": null, "prompt": null, "score": null},
        "safety": {"compliance": null, "harm": null, "score": null},
        "overall": null
    });
    assert_eq!(value, expected);
}

#[test]
fn targets_mirror_the_json_under_full_dot_paths() {
    let report = ok(json!({"tasks": [{"id": "t", "runs": [
        {"success": true, "confidence": 0.9}, {"success": true, "confidence": 0.7}
    ]}]}));
    let targets = report.targets();
    assert_eq!(targets.len(), 6 + 5 + 4 + 3 + 1);
    let json = report.to_json();
    for (path, value) in &targets {
        let json_path = path.replace("reliability.overall", "overall");
        let found = json_path.split('.').try_fold(&json, |v, key| v.get(key)).unwrap_or(&Value::Null);
        assert_eq!(found.as_f64(), *value, "{path}");
    }
    // both runs succeed: outcome 1, brier 1 − (0.01 + 0.09)/2 = 0.95
    assert_eq!(targets["consistency.outcome"], Some(1.0));
    assert!(close(targets["predictability.brier"], 0.95));
    assert_eq!(targets["robustness.score"], None);
    assert_eq!(targets["reliability.overall"], report.overall);
}

#[test]
fn the_summary_is_one_line_with_two_decimals() {
    let report = ok(json!({"tasks": [{"id": "t", "runs": [
        {"success": true, "confidence": 0.9}, {"success": false, "confidence": 0.1}
    ]}]}));
    assert_eq!(
        report.summary(),
        "consistency 0.00, predictability 0.99, robustness n/a, safety 1.00, overall 0.49 (camera_ready)"
    );
}

#[test]
fn the_typed_entry_treats_unusable_numbers_as_absent() {
    // a NaN or out-of-range confidence and infinite cost are ignored: only 0.8 remains,
    // brier 1 − 0.04 = 0.96; no NaN reaches the report
    let runs = vec![
        RunSample { success: true, confidence: Some(0.8), cost: f64::INFINITY, ..RunSample::default() },
        RunSample { success: true, confidence: Some(f64::NAN), cost: 2.0, ..RunSample::default() },
        RunSample { success: true, confidence: Some(7.0), cost: f64::NAN, ..RunSample::default() },
    ];
    let tasks = [Task { id: "t".into(), runs }];
    let report = evaluate_tasks(&tasks, &Perturbed::default(), Variant::Preprint);
    assert!(close(report.predictability.brier, 0.96));
    assert_eq!(report.consistency.confidence, None);
    assert_eq!(report.consistency.resource, None);
    assert!(report.targets().values().flatten().all(|v| v.is_finite()));
}

#[test]
fn the_pipelines_list_of_card_targets_is_exactly_the_targets_a_card_reports() {
    // `[gates.reliability]` is checked against the list when a pipeline loads, before any
    // card exists; a target added to the card and not to the list would be refused there
    assert_eq!(target_names(), crate::pipeline::gates::RELIABILITY_TARGETS);
}
