//! Trajectory validation tests: one per mode and edge rule, plus the matching property.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::metrics::trace::read_call_list;

fn expected(mode: &str, calls: Value) -> ExpectedTrace {
    ExpectedTrace::parse(&json!({"mode": mode, "calls": calls}), "").unwrap()
}

fn run(mode: &str, calls: Value, recorded: Value) -> TrajectoryReport {
    validate(&expected(mode, calls), &read_call_list(&recorded))
}

#[test]
fn strict_passes_one_for_one_and_names_the_position_that_differs() {
    // position 0: "rust" in "rust lang"; position 1: id 8 vs 7 at /id
    let r = run(
        "strict",
        json!([{"name": "search", "args": {"subset": {"q": "rust"}}}, {"name": "open", "args": {"exact": {"id": 8}}}]),
        json!([{"name": "search", "args": {"q": "rust lang"}}, {"name": "open", "args": {"id": 7}}]),
    );
    assert_eq!((r.passed, r.mismatch_count), (false, 1));
    let m = &r.mismatches[0];
    assert_eq!((m.expected_index, m.actual_index, m.diffs[0].path.as_str()), (1, Some(1), "/id"));
}

#[test]
fn strict_reports_each_extra_call_at_the_expected_length() {
    // 1 expected, 3 recorded: two extras, both at expected index 1
    let r = run("exact_sequence", json!(["a"]), json!(["a", "b", "c"]));
    let at: Vec<(usize, Option<usize>)> = r.mismatches.iter().map(|m| (m.expected_index, m.actual_index)).collect();
    assert_eq!(at, [(1, Some(1)), (1, Some(2))]);
}

#[test]
fn strict_reports_a_trace_that_ran_out_with_no_recorded_index() {
    let r = run("strict", json!(["a", "b"]), json!(["a"]));
    assert_eq!((r.mismatches[0].expected_index, r.mismatches[0].actual_index), (1, None));
}

#[test]
fn a_name_mismatch_carries_both_names_and_no_args_diffs() {
    let r = run(
        "strict",
        json!([{"name": "open", "args": {"exact": {"id": 1}}}]),
        json!([{"name": "search", "args": {"q": 1}}]),
    );
    let m = &r.mismatches[0];
    assert_eq!((m.expected_name.as_deref(), m.actual_name.as_deref()), (Some("open"), Some("search")));
    assert!(m.diffs.is_empty());
}

#[test]
fn the_server_wire_prefix_is_ignored_when_matching_names() {
    // docs__search is search after the first "__"; the full wire name also matches
    assert!(run("strict", json!(["search"]), json!(["docs__search"])).passed);
    assert!(run("strict", json!(["docs__search"]), json!(["docs__search"])).passed);
    assert!(!run("strict", json!(["docs"]), json!(["docs__search"])).passed);
}

#[test]
fn missing_recorded_args_read_as_an_empty_object() {
    assert!(run("strict", json!([{"name": "a", "args": {"exact": {}}}]), json!([{"name": "a"}])).passed);
    assert!(
        run("strict", json!([{"name": "a", "args": {"schema": {"type": "object"}}}]), json!([{"name": "a"}])).passed
    );
}

#[test]
fn subsequence_allows_extras_but_not_reordering() {
    // a, c in order among a b c
    assert!(run("subsequence", json!(["a", "c"]), json!(["a", "b", "c"])).passed);
    // c then a: c is placed at recorded 2, and no a follows it
    let r = run("subsequence", json!(["c", "a"]), json!(["a", "b", "c"]));
    assert_eq!((r.passed, r.mismatch_count), (false, 1));
    assert_eq!(r.mismatches[0].expected_index, 1);
}

#[test]
fn subsequence_keeps_checking_after_a_missing_call() {
    // b is missing; a and c are still placed -> one mismatch, at expected index 1
    let r = run("subsequence", json!(["a", "b", "c"]), json!(["a", "c"]));
    assert_eq!(r.mismatches.iter().map(|m| m.expected_index).collect::<Vec<_>>(), [1]);
}

#[test]
fn subsequence_counts_from_the_largest_in_order_matching_not_a_greedy_scan() {
    // expected 0 fits only recorded 1; greedy put it there and stranded the rest (4).
    // The largest in-order matching places expected 1 -> 0 and 2 -> 1: 5 - 2 = 3.
    let r = run(
        "subsequence",
        json!([{"name": "search", "args": {"exact": {"q": "a"}}}, {"name": "search", "args": "any"},
               {"name": "search", "args": "ignore"}, {"name": "search", "args": {"exact": {"q": "a"}}},
               {"name": "search", "args": "any"}]),
        json!([{"name": "search", "server": "docs"}, {"name": "search", "args": {"q": "a"}}]),
    );
    assert_eq!((r.passed, r.mismatch_count), (false, 3));
    assert_eq!(r.mismatches.iter().map(|m| m.expected_index).collect::<Vec<_>>(), [0, 3, 4]);
    // expected 0 fits recorded 1, but placing it there places nothing else
    assert_eq!(r.mismatches[0].actual_index, Some(1));
    assert!(
        r.mismatches[0].reason.contains("recorded call 1 fits, but no in-order placement"),
        "{}",
        r.mismatches[0].reason
    );
}

/// The largest number of expected calls (any subset, kept in order) that embed in order
/// into the recorded calls, by trying every subset: greedy earliest placement decides
/// whether one fixed list embeds.
fn brute_force_matched(exp: &ExpectedTrace, calls: &[crate::metrics::trace::TracedCall]) -> usize {
    let n = exp.calls.len();
    (0u32..1 << n)
        .filter(|mask| {
            let mut cursor = 0;
            (0..n).filter(|i| mask & (1 << i) != 0).all(|i| {
                let e = &exp.calls[i];
                match (cursor..calls.len()).find(|&j| calls.is_named(j, &e.name) && calls.fits(i, e, j)) {
                    Some(j) => {
                        cursor = j + 1;
                        true
                    }
                    None => false,
                }
            })
        })
        .map(u32::count_ones)
        .max()
        .unwrap_or(0) as usize
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn subsequence_mismatches_are_the_expected_calls_a_largest_matching_leaves_out(
        wanted in proptest::collection::vec((0usize..2, 0u8..4, 0u8..3), 0..8),
        recorded in proptest::collection::vec((0usize..2, 0u8..3), 0..8),
    ) {
        let names = ["a", "b"];
        let expected_calls: Vec<Value> = wanted
            .iter()
            .map(|(t, shape, q)| match shape {
                0 => json!({"name": names[*t], "args": "any"}),
                1 => json!({"name": names[*t], "args": "ignore"}),
                2 => json!({"name": names[*t], "args": {"exact": {"q": q}}}),
                _ => json!({"name": names[*t], "args": {"subset": {"q": q}}}),
            })
            .collect();
        let exp = expected("subsequence", Value::Array(expected_calls));
        let calls = read_call_list(&Value::Array(
            recorded.iter().map(|(t, q)| json!({"name": names[*t], "args": {"q": q}})).collect(),
        ));
        let r = validate(&exp, &calls);
        let matched = brute_force_matched(&exp, &calls);
        prop_assert_eq!(r.mismatch_count, exp.calls.len() - matched);
        prop_assert_eq!(r.passed, matched == exp.calls.len());
        // the named mismatches are in expected order, each once
        let at: Vec<usize> = r.mismatches.iter().map(|m| m.expected_index).collect();
        prop_assert!(at.windows(2).all(|w| w[0] < w[1]), "{:?}", at);
    }
}

#[test]
fn unordered_finds_the_assignment_a_first_fit_scan_misses() {
    // any takes get{id:2}, exact{id:1} takes get{id:1}
    let r = run(
        "unordered",
        json!([{"name": "get", "args": "any"}, {"name": "get", "args": {"exact": {"id": 1}}}]),
        json!([{"name": "get", "args": {"id": 1}}, {"name": "get", "args": {"id": 2}}]),
    );
    assert!(r.passed);
}

#[test]
fn unordered_needs_distinct_recorded_calls_and_allows_extras() {
    // two expected a's, one recorded a -> one mismatch; extras b, c allowed
    let r = run("unordered", json!(["a", "a"]), json!(["b", "a", "c"]));
    assert_eq!(r.mismatch_count, 1);
    assert!(run("superset", json!(["a"]), json!(["b", "a", "c"])).passed);
}

#[test]
fn an_unmatched_expected_call_is_compared_with_a_free_call_of_its_name() {
    let r = run(
        "unordered",
        json!([{"name": "get", "args": {"exact": {"id": 3}}}]),
        json!([{"name": "get", "args": {"id": 1}}]),
    );
    let m = &r.mismatches[0];
    assert_eq!((m.actual_index, m.diffs[0].path.as_str()), (Some(0), "/id"));
}

#[test]
fn subset_flags_each_over_call_at_the_expected_length() {
    // expected a, b; recorded a, a, c: the second a and c are over-calls
    let r = run("subset", json!(["a", "b"]), json!(["a", "a", "c"]));
    let at: Vec<(usize, Option<usize>)> = r.mismatches.iter().map(|m| (m.expected_index, m.actual_index)).collect();
    assert_eq!(at, [(2, Some(1)), (2, Some(2))]);
    // calling fewer is fine
    assert!(run("subset", json!(["a", "b"]), json!(["b"])).passed);
}

#[test]
fn an_empty_reference_passes_every_mode_but_subset_where_only_an_empty_trace_passes() {
    for mode in ["strict", "subsequence", "unordered", "superset"] {
        assert!(run(mode, json!([]), json!(["a", "b"])).passed, "{mode}");
    }
    let r = run("subset", json!([]), json!(["a"]));
    assert_eq!((r.passed, r.mismatch_count), (false, 1));
    assert!(run("subset", json!([]), json!([])).passed);
}

#[test]
fn an_unknown_mode_or_malformed_call_is_an_error_with_its_place() {
    let err = ExpectedTrace::parse(&json!({"mode": "fuzzy", "calls": []}), "/expected").unwrap_err();
    assert_eq!(err.pointer(), Some("/expected/mode"));
    let err =
        ExpectedTrace::parse(&json!({"calls": [{"name": "a"}, {"name": "b", "args": {"exactt": 1}}]}), "").unwrap_err();
    assert_eq!(err.pointer(), Some("/calls/1/args"));
    assert!(ExpectedTrace::parse(&json!({"mode": "strict"}), "").is_err());
    assert!(ExpectedTrace::parse(&json!({"calls": [], "mdoe": "strict"}), "").is_err());
    assert!(ExpectedTrace::parse(&json!({"calls": [{"args": "any"}]}), "").is_err());
}

#[test]
fn the_mode_defaults_to_strict() {
    assert_eq!(ExpectedTrace::parse(&json!({"calls": []}), "").unwrap().mode, MatchMode::Strict);
}

#[test]
fn the_block_is_gated_over_every_run_not_only_the_last() {
    let block = TrajectoryBlock::from_block(&json!({"mode": "strict", "calls": ["a"]})).unwrap();
    // run 0 fails, run 1 passes: the block fails and names run 0
    let outcome = block.evaluate(&[json!({"tool_calls": ["b"]}), json!({"tool_calls": ["a"]})]).unwrap();
    assert!(!outcome.passed);
    assert_eq!(outcome.failures.len(), 1);
    assert!(
        outcome.messages()[0].starts_with("run 0: trajectory.passed = 0, below the bound 1 (expected call 0 (a)"),
        "{:?}",
        outcome.messages()
    );
    assert_eq!(outcome.runs[1].targets["trajectory.passed"], json!(1));
}

// ---- property: maximum matching never false-fails -------------------------------------

/// Overlapping shapes over a tiny domain (ids 0..2, mostly one name), so most expected
/// calls fit several recorded ones and a first-fit scan would often choose wrongly.
fn shape_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => Just(json!("any")),
        2 => (0..2i64).prop_map(|id| json!({"exact": {"id": id}})),
        1 => (0..2i64).prop_map(|id| json!({"subset": {"id": id}})),
        1 => (0..2i64).prop_map(|min| json!({"schema": {"properties": {"id": {"minimum": min}}}})),
    ]
}

fn name_strategy() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a", "a", "a", "b"])
}

fn expected_strategy(max: usize) -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((name_strategy(), shape_strategy()), 0..=max)
        .prop_map(|v| v.into_iter().map(|(n, s)| json!({"name": n, "args": s})).collect())
}

fn recorded_strategy(max: usize) -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((name_strategy(), 0..2i64, any::<bool>()), 0..=max).prop_map(|v| {
        v.into_iter()
            .map(|(n, id, extra)| {
                if extra {
                    json!({"name": n, "args": {"id": id, "x": 1}})
                } else {
                    json!({"name": n, "args": {"id": id}})
                }
            })
            .collect()
    })
}

/// Is there an injective map from each of `left` items to a distinct right item?
fn brute_force_assignment(left: usize, right: usize, edge: &dyn Fn(usize, usize) -> bool) -> bool {
    fn place(i: usize, left: usize, right: usize, used: &mut Vec<bool>, edge: &dyn Fn(usize, usize) -> bool) -> bool {
        if i == left {
            return true;
        }
        (0..right).any(|j| {
            if used[j] || !edge(i, j) {
                return false;
            }
            used[j] = true;
            let ok = place(i + 1, left, right, used, edge);
            used[j] = false;
            ok
        })
    }
    place(0, left, right, &mut vec![false; right], edge)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn unordered_and_superset_pass_exactly_when_an_assignment_exists(exp in expected_strategy(4), rec in recorded_strategy(5)) {
        let calls = read_call_list(&Value::Array(rec));
        let e = expected("unordered", Value::Array(exp.clone()));
        let exists = brute_force_assignment(e.calls.len(), calls.len(), &|i, j| e.calls[i].matches(&calls[j]));
        prop_assert_eq!(validate(&e, &calls).passed, exists);
        prop_assert_eq!(validate(&expected("superset", Value::Array(exp)), &calls).passed, exists);
    }

    #[test]
    fn subset_passes_exactly_when_every_recorded_call_has_a_distinct_expected_call(exp in expected_strategy(5), rec in recorded_strategy(4)) {
        let calls = read_call_list(&Value::Array(rec));
        let e = expected("subset", Value::Array(exp));
        let exists = brute_force_assignment(calls.len(), e.calls.len(), &|j, i| e.calls[i].matches(&calls[j]));
        prop_assert_eq!(validate(&e, &calls).passed, exists);
    }
}
