//! Whole-pipeline throughput: replay → events canonicalised, hashed and written →
//! graded → gated → reported, on a synthetic suite, one worker (per-core figure).
//!
//! `cargo bench --bench pipeline`

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use stateval::event::Kind;
use stateval::event::verify::verify_bytes;
use stateval::event::writer::LogWriter;
use stateval::report::{junit, markdown, tap};
use stateval::runner::{self, Options, Plan, Selection};
use stateval::store::SledStore;
use stateval::synth::{SynthSpec, events_per_run, write_suite};

fn whole_pipeline(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = SynthSpec { cases: 100, turns: 50, runs: 1, seed: 7 };
    let pipeline = write_suite(dir.path(), &spec).expect("suite");
    let plan = Arc::new(Plan::load(&pipeline, &Selection::default()).expect("plan"));
    let store: Arc<dyn stateval::store::Store> = Arc::new(SledStore::open(&plan.layout().catalog()).expect("store"));
    let events = (spec.cases * events_per_run(spec.turns)) as u64;

    let mut group = c.benchmark_group("pipeline");
    group.sample_size(10);
    group.throughput(Throughput::Elements(events));
    group.bench_function("100 cases x 50 turns, 1 job", |b| {
        b.iter(|| {
            let outcome = runner::execute(
                plan.clone(),
                store.clone(),
                &Options { jobs: 1, selective: false, signer: None, shard: None, reuse: None },
                &mut |_, _| {},
            )
            .expect("run");
            assert!(outcome.passed);
            let reports = (
                junit::render(&outcome).expect("junit"),
                tap::render(&outcome, stateval::pipeline::reports::TapVersion::V13).expect("tap"),
                markdown::render(&outcome).expect("markdown"),
            );
            std::hint::black_box(reports);
        })
    });
    group.finish();
}

fn event_log(c: &mut Criterion) {
    let data = json!({"call_id": "call-3-1-0", "tool": "lookup", "args": {"q": "ledger-42-3"},
                      "result": {"found": true, "record": {"status": "ok", "owner": "ops"}},
                      "is_error": false, "fault": null, "duration_ms": 0, "deduplicated": false, "effect": null});
    let mut group = c.benchmark_group("event_log");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("append 1000 tool_executed events", |b| {
        b.iter(|| {
            let mut w = LogWriter::new(Vec::with_capacity(512 * 1024));
            for _ in 0..1000 {
                w.append(Some(3), 120, Kind::ToolExecuted, data.clone()).expect("append");
            }
            w.finish().expect("finish")
        })
    });
    let mut w = LogWriter::new(Vec::new());
    for _ in 0..1000 {
        w.append(Some(3), 120, Kind::ToolExecuted, data.clone()).expect("append");
    }
    let bytes = w.finish().expect("finish").0;
    group.bench_function("verify 1000 events", |b| b.iter(|| verify_bytes(&bytes).expect("verifies")));
    group.finish();
}

/// The 300-turn long-horizon case: replay, log, grade (issue target: under 100 ms).
fn long_horizon_300(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for sub in ["pipeline", "datasets/lh", "fixtures/tools", "fixtures/recordings"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(repo.join("fixtures/tools/support.json"), root.join("fixtures/tools/support.json"))
        .expect("manifest");
    let (case, recording) = stateval::synth::long_horizon(300);
    std::fs::write(root.join("datasets/lh/suite.jsonl"), format!("{case}\n")).expect("dataset");
    std::fs::write(root.join("fixtures/recordings/long-horizon-300.jsonl"), recording).expect("recording");
    std::fs::write(
        root.join("pipeline/lh.toml"),
        format!(
            "[pipeline]\nname = \"lh\"\ndatasets = [\"datasets/lh/*.jsonl\"]\n\n[agents.longhaul]\nsystem = \"s\"\n\
             tools = \"fixtures/tools/support.json\"\ncontext = {{ budget_tokens = {} }}\nmemory = {{ episodic_ttl_turns = 5 }}\n",
            stateval::synth::LONG_HORIZON_BUDGET
        ),
    )
    .expect("pipeline");
    let plan = Arc::new(Plan::load(&root.join("pipeline/lh.toml"), &Selection::default()).expect("plan"));
    let store: Arc<dyn stateval::store::Store> = Arc::new(SledStore::open(&plan.layout().catalog()).expect("store"));
    let mut group = c.benchmark_group("long_horizon");
    group.sample_size(20);
    group.bench_function("300 turns: replay, log, grade", |b| {
        b.iter(|| {
            let outcome = runner::execute(
                plan.clone(),
                store.clone(),
                &Options { jobs: 1, selective: false, signer: None, shard: None, reuse: None },
                &mut |_, _| {},
            )
            .expect("run");
            assert!(outcome.passed);
        })
    });
    group.finish();
}

criterion_group!(benches, event_log, long_horizon_300, whole_pipeline);
criterion_main!(benches);
