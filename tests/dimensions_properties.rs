//! Properties of the agent reliability dimensions over generated inputs: no JSON input
//! panics, every defined value is a finite score in 0..=1, the JSON form and the
//! targets agree, and task order does not matter where the contract averages per task
//! or pools runs.

use proptest::prelude::*;
use serde_json::{Value, json};
use stateval::metrics::dimensions::evaluate;

/// Any JSON value, a few levels deep, biased towards the keys the reader looks at.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("tasks".to_string()),
        Just("runs".to_string()),
        Just("success".to_string()),
        Just("confidence".to_string()),
        Just("actions".to_string()),
        Just("perturbed".to_string()),
        Just("fault".to_string()),
        Just("of".to_string()),
        Just("id".to_string()),
        Just("variant".to_string()),
        Just("violations".to_string()),
        Just("severity".to_string()),
        Just("errors".to_string()),
        "[a-z~/]{0,4}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<f64>().prop_map(|x| json!(x)),
        any::<i64>().prop_map(Value::from),
        "[a-z_]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn run() -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        prop::option::of(0.0f64..=1.0),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "d"]), 0..6),
        prop::option::of(0.0f64..10.0),
        0u64..4,
        prop::collection::vec(prop::sample::select(vec!["low", "medium", "high", "odd"]), 0..3),
    )
        .prop_map(|(success, confidence, actions, cost, errors, severities)| {
            let violations: Vec<Value> = severities.iter().map(|s| json!({"severity": s})).collect();
            json!({"success": success, "confidence": confidence, "actions": actions,
                   "cost": cost, "errors": errors, "violations": violations})
        })
}

/// A well-formed input: up to 5 tasks `t0…`, fault copies of some of them, a variant.
fn well_formed() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(prop::collection::vec(run(), 0..5), 0..5),
        prop::collection::vec((0usize..5, prop::collection::vec(run(), 0..4)), 0..4),
        any::<bool>(),
    )
        .prop_map(|(tasks, faults, preprint)| {
            let count = tasks.len();
            let tasks: Vec<Value> =
                tasks.into_iter().enumerate().map(|(i, runs)| json!({"id": format!("t{i}"), "runs": runs})).collect();
            let faults: Vec<Value> = if count == 0 {
                vec![]
            } else {
                faults.into_iter().map(|(of, runs)| json!({"of": format!("t{}", of % count), "runs": runs})).collect()
            };
            let variant = if preprint { "preprint" } else { "camera_ready" };
            json!({"variant": variant, "tasks": tasks, "perturbed": {"fault": faults}})
        })
}

proptest! {
    #[test]
    fn no_json_input_panics(input in any_json()) {
        let _ = evaluate(&input);
        let _ = evaluate(&json!({"tasks": [input.clone()]}));
        let _ = evaluate(&json!({"tasks": [{"runs": [input]}]}));
    }

    #[test]
    fn every_defined_value_is_a_finite_score(input in well_formed()) {
        let report = evaluate(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (target, value) in report.targets() {
            if let Some(v) = value {
                prop_assert!(v.is_finite() && (0.0..=1.0).contains(&v), "{target} = {v}");
            }
        }
    }

    #[test]
    fn the_json_form_and_the_targets_agree(input in well_formed()) {
        let report = evaluate(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let json = report.to_json();
        for (target, value) in report.targets() {
            let path = target.replace("reliability.overall", "overall");
            let found = path.split('.').try_fold(&json, |v, key| v.get(key));
            prop_assert_eq!(found.and_then(Value::as_f64), value, "{}", target);
        }
    }

    #[test]
    fn task_order_does_not_change_consistency_robustness_or_safety(input in well_formed()) {
        let mut reversed = input.clone();
        if let Some(tasks) = reversed["tasks"].as_array_mut() {
            tasks.reverse();
        }
        let a = evaluate(&input).map_err(|e| TestCaseError::fail(e.to_string()))?.targets();
        let b = evaluate(&reversed).map_err(|e| TestCaseError::fail(e.to_string()))?.targets();
        for (target, value) in &a {
            if target.starts_with("consistency.") || target.starts_with("robustness.")
                || target.starts_with("safety.")
            {
                let other = b[target];
                let same = match (value, other) {
                    (Some(x), Some(y)) => (x - y).abs() < 1e-12,
                    (None, None) => true,
                    _ => false,
                };
                prop_assert!(same, "{target}: {value:?} vs {other:?}");
            }
        }
    }
}
