//! The agent reliability dimensions at suite scale: 50 tasks × 10 runs × 50 actions,
//! every field present, one fault perturbation per task.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use stateval::metrics::dimensions::{
    Perturbed, PerturbedTask, RunSample, Severity, Task, Variant, evaluate, evaluate_tasks,
};

const TASKS: usize = 50;
const RUNS: usize = 10;
const ACTIONS: usize = 50;
const TOOLS: [&str; 8] = ["search", "fetch", "read", "write", "list", "delete", "login", "send"];

/// A small deterministic generator (64-bit LCG): the same suite on every machine.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn unit(&mut self) -> f64 {
        (self.next() % 1000) as f64 / 999.0
    }
}

fn runs(rng: &mut Lcg) -> Vec<RunSample> {
    (0..RUNS)
        .map(|_| RunSample {
            success: !rng.next().is_multiple_of(3),
            confidence: Some(rng.unit()),
            actions: (0..ACTIONS).map(|_| TOOLS[(rng.next() % TOOLS.len() as u64) as usize].to_string()).collect(),
            cost: 0.01 + rng.unit(),
            time: 100.0 + 50.0 * rng.unit(),
            model_calls: 5 + rng.next() % 10,
            errors: rng.next() % 3,
            latency: 200.0 + 100.0 * rng.unit(),
            violations: if rng.next().is_multiple_of(10) { vec![Severity::Medium] } else { vec![] },
        })
        .collect()
}

fn suite() -> (Vec<Task>, Perturbed) {
    let mut rng = Lcg(42);
    let tasks: Vec<Task> = (0..TASKS).map(|i| Task { id: format!("task-{i}"), runs: runs(&mut rng) }).collect();
    let fault = (0..TASKS).map(|i| PerturbedTask { of: format!("task-{i}"), runs: runs(&mut rng) }).collect();
    let perturbed = Perturbed { fault, ..Perturbed::default() };
    (tasks, perturbed)
}

fn run_json(run: &RunSample) -> Value {
    json!({
        "success": run.success,
        "confidence": run.confidence,
        "actions": run.actions,
        "cost": run.cost,
        "time": run.time,
        "model_calls": run.model_calls,
        "errors": run.errors,
        "latency": run.latency,
        "violations": run.violations.iter().map(|_| json!({"severity": "medium"})).collect::<Vec<_>>(),
    })
}

fn suite_json(tasks: &[Task], perturbed: &Perturbed) -> Value {
    let tasks: Vec<Value> =
        tasks.iter().map(|t| json!({"id": t.id, "runs": t.runs.iter().map(run_json).collect::<Vec<_>>()})).collect();
    let fault: Vec<Value> = perturbed
        .fault
        .iter()
        .map(|t| json!({"of": t.of, "runs": t.runs.iter().map(run_json).collect::<Vec<_>>()}))
        .collect();
    json!({"tasks": tasks, "perturbed": {"fault": fault}})
}

fn bench(c: &mut Criterion) {
    let (tasks, perturbed) = suite();
    let input = suite_json(&tasks, &perturbed);
    c.bench_function("evaluate (json) 50x10x50", |b| b.iter(|| evaluate(black_box(&input))));
    c.bench_function("evaluate_tasks 50x10x50", |b| {
        b.iter(|| evaluate_tasks(black_box(&tasks), black_box(&perturbed), Variant::CameraReady))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
