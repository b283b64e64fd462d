//! The committed long-horizon suite is exactly what its generator writes, and its
//! budget assertion is load-bearing: the history really outgrows the budget.

mod common;

use common::Project;
use stateval::synth::{LONG_HORIZON_BUDGET, LONG_HORIZON_TURNS, long_horizon};

#[test]
fn the_committed_suite_is_byte_identical_to_the_generator_output() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dataset = std::fs::read_to_string(repo.join("datasets/long_horizon/suite.jsonl")).unwrap();
    let lines: Vec<&str> = dataset.lines().collect();
    assert_eq!(lines.len(), LONG_HORIZON_TURNS.len());
    for (line, turns) in lines.iter().zip(LONG_HORIZON_TURNS) {
        let (case, recording) = long_horizon(turns);
        assert_eq!(*line, case, "regenerate with `cargo run --example long_horizon`");
        let committed =
            std::fs::read_to_string(repo.join(format!("fixtures/recordings/long-horizon-{turns}.jsonl"))).unwrap();
        assert_eq!(committed, recording);
    }
}

#[test]
fn every_long_horizon_case_drops_history_yet_stays_within_budget_and_remembers() {
    let p = Project::full();
    p.stateval(&["run", "--tag", "long-horizon"]).expect_code(0);
    for turns in LONG_HORIZON_TURNS {
        let log = p.log_files().into_iter().find(|l| l.ends_with(&format!("long-horizon-{turns}/0.jsonl"))).unwrap();
        let events = common::events_of(&p.read_bytes(&log));
        let compiled: Vec<&serde_json::Value> = events.iter().filter(|e| e["kind"] == "context_compiled").collect();
        assert_eq!(compiled.len(), 2 * turns, "one compilation per model call");
        let dropped = compiled.iter().map(|e| e["data"]["dropped"].as_u64().unwrap()).max().unwrap();
        assert!(dropped > 0, "{turns} turns: the history must outgrow the budget for the test to mean anything");
        assert!(compiled.iter().all(|e| e["data"]["total"].as_u64().unwrap() <= LONG_HORIZON_BUDGET));
        let expired = events.iter().filter(|e| e["kind"] == "memory_expired").count();
        assert!(expired > 0, "episodic notes expire");
    }
}
