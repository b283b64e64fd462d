//! Metric families at realistic sizes (50 turns, 200 calls, 10 runs), plus `trajectory`
//! and `stability` over a 10,000-call trace. Inputs are built deterministically, so
//! figures compare across machines and commits.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use stateval::metrics::axes::{AxesBlock, score_axes};
use stateval::metrics::gate::CaseBlock;
use stateval::metrics::golden_path::{GoldenPath, score_golden_path};
use stateval::metrics::narrative::{NarrativeOptions, score_narrative};
use stateval::metrics::recovery::score_recovery;
use stateval::metrics::reliability::{TaskCounts, pass_at, pass_hat, score_outcomes, suite_mean};
use stateval::metrics::stability::{StabilityBlock, score_across, score_trace};
use stateval::metrics::trace::{MetricTrace, read_tool_calls};
use stateval::metrics::trajectory::{ExpectedTrace, validate};

const TOOLS: [&str; 12] = [
    "search",
    "fetch_page",
    "open",
    "summarize",
    "create_issue",
    "list_files",
    "read_file",
    "write_file",
    "send_email",
    "get_weather",
    "docs__lookup",
    "update_ticket",
];

fn call(i: usize) -> Value {
    json!({"name": TOOLS[(i * 7 + i / 5) % TOOLS.len()], "server": "s", "args": {"id": i % 37, "q": format!("query {}", i % 11)}})
}

/// A trace of `calls` calls and `turns` assistant turns of varied length.
fn envelope(calls: usize, turns: usize, seed: usize) -> Value {
    let tool_calls: Vec<Value> = (0..calls).map(|i| call(i + seed)).collect();
    let turns: Vec<Value> = (0..turns)
        .map(|t| json!({"role": "assistant", "content": "I looked it up and updated the ticket. ".repeat(1 + (t + seed) % 5)}))
        .collect();
    json!({"tool_calls": tool_calls, "conversation": {"tokens": {"total": 1500 * calls}, "turns": turns}})
}

/// Expected calls mirroring every `step`-th recorded call, with overlapping shapes.
fn expected(mode: &str, recorded: &Value, step: usize) -> ExpectedTrace {
    let calls: Vec<Value> = recorded["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .step_by(step)
                .enumerate()
                .map(|(k, c)| match k % 3 {
                    0 => json!({"name": c["name"], "args": "any"}),
                    1 => json!({"name": c["name"], "args": {"exact": c["args"]}}),
                    _ => json!({"name": c["name"], "args": {"subset": {"q": "query"}}}),
                })
                .collect()
        })
        .unwrap_or_default();
    ExpectedTrace::parse(&json!({"mode": mode, "calls": calls}), "").unwrap_or_else(|e| panic!("{e}"))
}

fn stability(c: &mut Criterion) {
    let trace = envelope(200, 50, 0);
    c.bench_function("stability/within 200 calls 50 turns", |b| {
        b.iter(|| score_trace(&MetricTrace::read(black_box(&trace))))
    });
    let big = envelope(10_000, 50, 0);
    c.bench_function("stability/within 10k calls", |b| b.iter(|| score_trace(&MetricTrace::read(black_box(&big)))));
    let runs: Vec<Value> = (0..10).map(|r| envelope(200, 50, r)).collect();
    let traces: Vec<MetricTrace> = runs.iter().map(MetricTrace::read).collect();
    c.bench_function("stability/across 10 runs x 200 calls", |b| b.iter(|| score_across(black_box(&traces))));
    let block = StabilityBlock::from_block(&json!({})).unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("stability/block 10 runs x 200 calls (read + grade)", |b| {
        b.iter(|| block.evaluate(black_box(&runs)))
    });
}

fn reliability(c: &mut Criterion) {
    let outcomes: Vec<bool> = (0..10).map(|i| i % 3 != 0).collect();
    c.bench_function("reliability/outcomes 10 runs", |b| b.iter(|| score_outcomes(black_box(&outcomes))));
    let tasks: Vec<TaskCounts> = (0..200).map(|i| TaskCounts { n: 10, c: i % 11 }).collect();
    c.bench_function("reliability/pass_at+pass_hat k=1..10 over 200 cases", |b| {
        b.iter(|| {
            (1..=10)
                .map(|k| {
                    suite_mean(black_box(&tasks), k, pass_at).unwrap_or(0.0)
                        + suite_mean(&tasks, k, pass_hat).unwrap_or(0.0)
                })
                .sum::<f64>()
        })
    });
}

fn trajectory(c: &mut Criterion) {
    let trace = envelope(200, 0, 0);
    let calls = read_tool_calls(&trace);
    for (mode, step) in [("strict", 1), ("subsequence", 4), ("unordered", 4), ("subset", 1)] {
        let exp = expected(mode, &trace, step);
        c.bench_function(&format!("trajectory/{mode} 200 calls, {} expected", exp.calls.len()), |b| {
            b.iter(|| validate(&exp, black_box(&calls)))
        });
    }
    let big = envelope(10_000, 0, 0);
    let big_calls = read_tool_calls(&big);
    for (mode, step) in [("strict", 1), ("subsequence", 50), ("unordered", 200), ("subset", 200)] {
        let exp = expected(mode, &big, step);
        c.bench_function(&format!("trajectory/{mode} 10k calls, {} expected", exp.calls.len()), |b| {
            b.iter(|| validate(&exp, black_box(&big_calls)))
        });
    }
}

fn axes_and_golden(c: &mut Criterion) {
    let calls = read_tool_calls(&envelope(200, 0, 0));
    let axes = AxesBlock::from_block(&json!({
        "dependencies": [{"producer": "search", "consumer": "fetch_page"}, {"producer": "list_files", "consumer": "read_file"}],
        "order": [{"first": "search", "second": "open"}, {"first": "read_file", "second": "write_file"}]
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("trajectory_axes/200 calls, 4 constraints", |b| b.iter(|| score_axes(&axes, black_box(&calls))));
    let golden = GoldenPath::from_block(&json!({"calls": TOOLS})).unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("golden_path/200 calls vs 12 golden", |b| {
        b.iter(|| score_golden_path(&golden, black_box(&calls)))
    });
}

fn recovery_and_narrative(c: &mut Criterion) {
    c.bench_function("recovery/score", |b| b.iter(|| score_recovery(black_box(1000), Some(4000), Some(6000), 3000)));
    let calls = read_tool_calls(&envelope(200, 0, 0));
    let text = "I searched the docs, opened the page and summarized it. Then I created the issue, \
                updated the ticket to id 12 and sent the email with query 3. I also wrote the file. "
        .repeat(6);
    let options = NarrativeOptions::default();
    c.bench_function("narrative/200 calls, 180-word answer", |b| {
        b.iter(|| score_narrative(black_box(&text), &calls, &options))
    });
}

/// The hand-sized inputs of issue #19 that used to take seconds to a minute: each must stay
/// well under a second (`benches/inputs/long_metric_inputs.py` writes the same shapes for
/// `stateval metric`).
fn long_inputs(c: &mut Criterion) {
    let mut group = c.benchmark_group("long");
    group.sample_size(10);
    let recorded = envelope(3000, 0, 0);
    let calls = read_tool_calls(&recorded);
    for mode in ["unordered", "superset"] {
        let exp = expected(mode, &recorded, 1);
        group.bench_function(format!("trajectory/{mode} 3,000 vs 3,000"), |b| {
            b.iter(|| validate(black_box(&exp), black_box(&calls)))
        });
    }
    let long = read_tool_calls(&envelope(20_000, 0, 3));
    let golden = GoldenPath {
        calls: (0..20_000).map(|i| TOOLS[(i * 5 + i / 3) % TOOLS.len()].to_string()).collect(),
        allow_extra_steps: false,
        penalize_backtracking: true,
        penalize_repeated_tools: true,
        penalize_missing_steps: true,
    };
    group.bench_function("golden_path/20,000 vs 20,000", |b| b.iter(|| score_golden_path(&golden, black_box(&long))));
    let runs: Vec<MetricTrace> = (0..500).map(|r| MetricTrace::read(&envelope(500, 2, r))).collect();
    group.bench_function("stability/across 500 runs x 500 calls", |b| b.iter(|| score_across(black_box(&runs))));
    let text = "I created the issue and sent the email with id 7 then updated the ticket. ".repeat(7_000);
    group.bench_function("narrative/20,000 calls, 500 KB", |b| {
        b.iter(|| score_narrative(black_box(&text), black_box(&long), &NarrativeOptions::default()))
    });
    group.finish();
}

criterion_group!(benches, stability, reliability, trajectory, axes_and_golden, recovery_and_narrative, long_inputs);
criterion_main!(benches);
