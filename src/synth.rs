//! Deterministic synthetic suites, for benchmarks and stress tests.
//!
//! [`write_suite`] writes a complete project — pipeline, tool manifest, dataset,
//! recordings — whose every case passes. Each turn replays one tool call and one final
//! answer (9 events); every tenth turn also writes memory (4 more). The same spec
//! always writes the same bytes.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::json;

/// Shape of a synthetic suite.
#[derive(Debug, Clone, Copy)]
pub struct SynthSpec {
    pub cases: usize,
    pub turns: usize,
    /// Recorded runs per case.
    pub runs: usize,
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec { cases: 100, turns: 50, runs: 1, seed: 7 }
    }
}

/// A small xorshift: deterministic and dependency-free; quality is irrelevant here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const WORDS: [&str; 12] = [
    "ledger", "invoice", "refund", "balance", "payee", "audit", "policy", "report", "quota", "ticket", "limit", "batch",
];

/// Events written per turn without / with a memory write (see the module doc).
pub const EVENTS_PER_TURN: usize = 9;
pub const EVENTS_PER_MEMORY_TURN: usize = 13;

/// Episodic entries live this many turns (the pipeline's `episodic_ttl_turns`).
pub const EPISODIC_TTL_TURNS: usize = 5;

/// Events one run of a case writes: run_started, the turns (memory writes every tenth
/// turn, each expiring with a `memory_expired` event TTL turns later if the run is
/// still going), run_completed.
pub fn events_per_run(turns: usize) -> usize {
    let memory_turns = turns.div_ceil(10);
    let expiries = (0..turns).step_by(10).filter(|t| t + EPISODIC_TTL_TURNS < turns).count();
    2 + turns * EVENTS_PER_TURN + memory_turns * (EVENTS_PER_MEMORY_TURN - EVENTS_PER_TURN) + expiries
}

/// Write the suite under `dir`; returns the pipeline path.
pub fn write_suite(dir: &Path, spec: &SynthSpec) -> io::Result<PathBuf> {
    for sub in ["pipeline", "datasets/synth", "fixtures/tools", "fixtures/recordings"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(
        dir.join("pipeline/synth.toml"),
        format!(
            "[pipeline]\nname = \"synth\"\ndatasets = [\"datasets/synth/*.jsonl\"]\nstore = \".stateval\"\n\n\
         # generated afresh for each use: no golden is kept for it, under CI or not\n\
         [goldens]\nrequired = false\n\n\
         [agents.synth]\nsystem = \"You are a diligent back-office assistant.\"\n\
         tools = \"fixtures/tools/synth.json\"\nmemory = {{ episodic_ttl_turns = {EPISODIC_TTL_TURNS} }}\n\
         policy = [\n  {{ id = \"writes\", safety_class = \"write\", verdict = \"allow\" }},\n]\n\n\
         [gates]\ndefault = {{ min_pass_rate = 1.0 }}\n\n\
         [report]\njunit = \"reports/junit.xml\"\ntap = \"reports/results.tap\"\njson = \"reports/report.json\"\n"
        ),
    )?;
    let manifest = json!({
        "state": {"lookups": 0},
        "tools": [{
            "name": "lookup",
            "description": "Look up a record by query.",
            "input_schema": {"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}},
            "safety_class": "read",
            "default": {"result": {"found": true, "record": {"status": "ok", "owner": "ops"}}}
        }]
    });
    std::fs::write(dir.join("fixtures/tools/synth.json"), serde_json::to_vec_pretty(&manifest)?)?;

    let mut rng = Rng(spec.seed.max(1));
    let mut dataset = String::new();
    for case in 0..spec.cases {
        let mut turns = Vec::with_capacity(spec.turns);
        let mut recordings = Vec::with_capacity(spec.runs);
        for run in 0..spec.runs.max(1) {
            let mut rec = String::new();
            for turn in 0..spec.turns {
                let word = WORDS[(rng.next() % WORDS.len() as u64) as usize];
                if run == 0 {
                    turns.push(format!("Turn {turn}: check the {word} for account {case}."));
                }
                let mut calls = vec![json!({"name": "lookup", "args": {"q": format!("{word}-{case}-{turn}")}})];
                if turn % 10 == 0 {
                    calls.push(json!({"name": "memory_write",
                                      "args": {"tier": "episodic", "key": format!("note-{turn}"), "value": word}}));
                }
                let usage = json!({"input_tokens": 300 + turn * 40, "output_tokens": 20});
                let step0 = json!({"turn": turn, "step": 0, "response": {"content": "", "tool_calls": calls},
                                   "usage": usage, "latency_ms": 200 + rng.next() % 300});
                let step1 = json!({"turn": turn, "step": 1,
                                   "response": {"content": format!("The {word} for account {case} is in order."), "confidence": 0.9},
                                   "usage": usage, "latency_ms": 100 + rng.next() % 200});
                let _ = writeln!(rec, "{step0}\n{step1}");
            }
            let name = format!("fixtures/recordings/synth-{case:05}-{run}.jsonl");
            std::fs::write(dir.join(&name), rec)?;
            recordings.push(name);
        }
        let line = json!({
            "id": format!("synth-{case:05}"),
            "tags": [if case % 2 == 0 { "even" } else { "odd" }],
            "agent": "synth",
            "turns": turns,
            "recordings": recordings,
            "expect": [
                {"target": "status", "matcher": {"exact": "completed"}},
                {"target": "tool_sequence", "matcher": {"schema": {"minItems": spec.turns}}},
                {"target": "final_response", "matcher": {"regex": "is in order\\.$"}},
                {"target": "policy.denials", "matcher": {"exact": 0}}
            ]
        });
        let _ = writeln!(dataset, "{line}");
    }
    std::fs::write(dir.join("datasets/synth/suite.jsonl"), dataset)?;
    Ok(dir.join("pipeline/synth.toml"))
}

/// The long-horizon regression suite (`datasets/long_horizon/`): one case of `turns`
/// user turns for the `longhaul` profile. Facts are planted at turn 0 and read back at
/// the last turn, a preference is superseded half-way, episodic notes expire, and the
/// conversation outgrows the context budget so history is dropped while memory holds.
/// Returns the dataset line and the recording (JSONL).
pub fn long_horizon(turns: usize) -> (String, String) {
    assert!(turns >= 10, "a long-horizon case needs room for its plan");
    let id = format!("long-horizon-{turns}");
    let recording_path = format!("fixtures/recordings/{id}.jsonl");
    let last = turns - 1;
    let half = turns / 2;
    let mut inputs = Vec::with_capacity(turns);
    let mut rec = String::new();
    let mut executed = 0usize; // index of the next tool_calls[i]
    let mut read_index = 0usize;
    let line = |turn: usize, step: usize, response: serde_json::Value, rec: &mut String| {
        let _ = writeln!(rec, "{}", json!({"turn": turn, "step": step, "response": response, "latency_ms": 200}));
    };
    let write = |tier: &str, key: &str, value: &str| json!({"name": "memory_write", "args": {"tier": tier, "key": key, "value": value}});
    for turn in 0..turns {
        let (input, calls, answer) = if turn == 0 {
            (
                "I'm Priya; my account number is AC-7731. Please remember both.".to_string(),
                vec![write("semantic", "user.name", "Priya"), write("semantic", "user.account", "AC-7731")],
                "Noted, Priya: account AC-7731.".to_string(),
            )
        } else if turn == 1 {
            (
                "Please contact me by email.".to_string(),
                vec![write("semantic", "contact.preference", "email")],
                "Email it is.".to_string(),
            )
        } else if turn == half {
            (
                "Change of plan: contact me by phone from now on.".to_string(),
                vec![write("semantic", "contact.preference", "phone")],
                "Updated: phone from now on.".to_string(),
            )
        } else if turn == last {
            read_index = executed;
            (
                "What is my account number, and how should you contact me?".to_string(),
                vec![
                    json!({"name": "memory_read", "args": {"tier": "semantic", "key": "user.account"}}),
                    json!({"name": "memory_read", "args": {"tier": "semantic", "key": "contact.preference"}}),
                ],
                "Your account number is AC-7731, and we will contact you by phone.".to_string(),
            )
        } else if turn % 7 == 2 {
            let topic = WORDS[turn % WORDS.len()];
            (
                format!("Turn {turn}: let's talk about the {topic} for a moment."),
                vec![write("episodic", "current_topic", topic)],
                format!("Sure, the {topic}."),
            )
        } else {
            let topic = WORDS[turn % WORDS.len()];
            (
                format!("Turn {turn}: what do the docs say about the {topic} process? Please be thorough."),
                vec![json!({"name": "search_docs", "args": {"query": format!("{topic} process")}})],
                format!("The docs describe the {topic} process step by step; nothing unusual applies to your account."),
            )
        };
        executed += calls.len();
        inputs.push(input);
        line(turn, 0, json!({"content": "", "tool_calls": calls}), &mut rec);
        line(turn, 1, json!({"content": answer}), &mut rec);
    }
    let case = json!({
        "id": id,
        "description": format!("{turns} user turns: facts planted at turn 0 are read back at turn {last}; the contact preference is superseded at turn {half}; episodic notes expire; the history outgrows the context budget."),
        "tags": ["long-horizon", "memory"],
        "agent": "longhaul",
        "turns": inputs,
        "recordings": [recording_path],
        "expect": [
            {"target": "memory.semantic.user.account", "matcher": {"exact": "AC-7731"}},
            {"target": "memory.semantic.contact.preference", "matcher": {"exact": "phone"}},
            {"target": format!("memory_at[{}].semantic.contact.preference", half - 1), "matcher": {"exact": "email"}},
            {"target": format!("tool_calls[{read_index}].result"), "matcher": {"exact": {"value": "AC-7731"}}},
            {"target": format!("tool_calls[{}].result", read_index + 1), "matcher": {"exact": {"value": "phone"}}},
            {"target": format!("turns[{last}].response"), "matcher": {"all_of": [{"contains": "AC-7731"}, {"contains": "phone"}]}},
            {"target": "context.budget_exceeded", "matcher": {"exact": 0}},
            {"target": "context.max_total", "matcher": {"schema": {"maximum": LONG_HORIZON_BUDGET}}},
            {"target": "memory", "matcher": {"not": {"contains": {"episodic": {"current_topic": WORDS[2 % WORDS.len()]}}}}},
            {"target": format!("memory_at[{}].episodic.current_topic", 2), "matcher": {"exact": WORDS[2 % WORDS.len()]}},
            {"target": "status", "matcher": {"exact": "completed"}}
        ]
    });
    (case.to_string(), rec)
}

/// The `longhaul` profile's context budget (tokens); small enough that every
/// long-horizon case outgrows it and must drop history.
pub const LONG_HORIZON_BUDGET: u64 = 1600;

/// Turn counts of the committed long-horizon suite.
pub const LONG_HORIZON_TURNS: [usize; 3] = [50, 120, 300];
