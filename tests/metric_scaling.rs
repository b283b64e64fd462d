//! Doubling a recorded trace at most roughly doubles the work of the metrics that used to
//! be super-linear in it (issue #19): the golden path's LCS and the order-free trajectory
//! matching. Work is counted in the algorithms' own units (word steps, edges examined),
//! never timed, so the test means the same on a loaded machine.

use proptest::prelude::*;
use serde_json::{Value, json};
use stateval::metrics::golden_path::common_steps;
use stateval::metrics::trace::{TracedCall, read_call_list};
use stateval::metrics::trajectory::{ExpectedTrace, unordered_work};

const TOOLS: [&str; 8] =
    ["search", "fetch_page", "read_file", "write_file", "get_weather", "lookup", "send_email", "create_issue"];

fn calls_json(picks: &[(usize, u8)]) -> Vec<Value> {
    picks.iter().map(|(t, q)| json!({"name": format!("srv__{}", TOOLS[*t]), "args": {"q": q}})).collect()
}

fn calls(items: &[Value]) -> Vec<TracedCall> {
    read_call_list(&Value::Array(items.to_vec()))
}

/// The trace twice over: every name occurs exactly twice as often.
fn doubled(items: &[Value]) -> Vec<Value> {
    items.iter().chain(items).cloned().collect()
}

fn picks(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<(usize, u8)>> {
    proptest::collection::vec((0..TOOLS.len(), 0u8..6), len)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn doubling_the_trace_at_most_doubles_the_golden_paths_lcs_steps(
        recorded in picks(200..600),
        golden in proptest::collection::vec(0..TOOLS.len(), 50..400),
    ) {
        let golden: Vec<String> = golden.iter().map(|t| TOOLS[*t].to_string()).collect();
        let once = calls_json(&recorded);
        let (lcs_once, work_once) = common_steps(&golden, &calls(&once));
        let (lcs_twice, work_twice) = common_steps(&golden, &calls(&doubled(&once)));
        prop_assert!(work_once > 0);
        prop_assert!(lcs_twice >= lcs_once);
        prop_assert!(work_twice <= 2 * work_once, "{work_once} word steps became {work_twice}");
    }

    #[test]
    fn doubling_the_trace_roughly_doubles_the_order_free_matching_work(
        recorded in picks(200..600),
        wanted in proptest::collection::vec((0..TOOLS.len(), 0u8..3, 0u8..6), 20..150),
        superset in any::<bool>(),
    ) {
        let expected: Vec<Value> = wanted
            .iter()
            .map(|(t, shape, q)| match shape {
                0 => json!({"name": TOOLS[*t], "args": "any"}),
                1 => json!({"name": TOOLS[*t], "args": {"exact": {"q": q}}}),
                _ => json!({"name": TOOLS[*t], "args": {"subset": {"q": q}}}),
            })
            .collect();
        let mode = if superset { "superset" } else { "unordered" };
        let expected = ExpectedTrace::parse(&json!({"mode": mode, "calls": expected}), "").expect("a valid expectation");
        let once = calls_json(&recorded);
        let work_once = unordered_work(&expected, &calls(&once));
        let work_twice = unordered_work(&expected, &calls(&doubled(&once)));
        prop_assert!(work_once > 0);
        prop_assert!(work_twice * 10 <= work_once * 25, "{work_once} edges became {work_twice}");
    }
}
