//! No JSON input panics: every metric of `stateval metric` and every dataset block, over
//! arbitrary documents built from the field names the metrics read (so generated inputs
//! reach deep into the parsers instead of failing at the first key).

use proptest::prelude::*;
use serde_json::{Map, Value};
use stateval::dataset::blocks::BLOCK_KEYS;
use stateval::metrics::block::MetricBlock;
use stateval::metrics::cli::{METRIC_NAMES, run};

const KEYS: &[&str] = &[
    "tool_calls",
    "name",
    "args",
    "arguments",
    "server",
    "trace",
    "conversation",
    "turns",
    "role",
    "content",
    "tokens",
    "total",
    "expected",
    "mode",
    "calls",
    "exact",
    "subset",
    "schema",
    "golden",
    "runs",
    "outcomes",
    "tasks",
    "n",
    "c",
    "k",
    "floors",
    "dependencies",
    "order",
    "producer",
    "consumer",
    "first",
    "second",
    "narrative",
    "call_start_ms",
    "detected_ms",
    "recovered_ms",
    "timeout_budget_ms",
    "max_recovery_ms",
    "require_clean_timeout",
    "detections",
    "fault_fired",
    "half_width_percent",
    "confidence_percent",
    "type",
    "text",
    "mutating_tools",
    "readonly_tools",
    "max_divergence_score",
    "expect",
    "target",
    "matcher",
    "recovery",
    "passed",
    "allow_extra_steps",
    "redundancy",
    "minimum",
    "properties",
];

const WORDS: &[&str] = &[
    "any",
    "ignore",
    "strict",
    "subsequence",
    "unordered",
    "superset",
    "subset",
    "assistant",
    "text",
    "search",
    "docs__search",
    "create_issue",
    "I created the issues and sent 3 emails",
    "",
    "é__",
    "__",
    "get",
    "a",
    "b",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![-3i64..100, Just(i64::MAX), Just(i64::MIN), Just(9_007_199_254_740_993)].prop_map(Value::from),
        prop_oneof![Just(u64::MAX)].prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_metric_panics_on_any_document(input in json_value()) {
        for name in METRIC_NAMES {
            let _ = run(name, &input);
        }
    }

    #[test]
    fn no_block_panics_on_any_block_or_run(block in json_value(), runs in prop::collection::vec(json_value(), 0..3)) {
        for key in BLOCK_KEYS {
            if let Some(Ok(parsed)) = MetricBlock::from_key(key, &block) {
                let _ = parsed.min_runs();
                let _ = parsed.evaluate(&runs);
            }
        }
    }
}
