//! The runtime with injected faults: virtual time, the recorded fault fields, and the
//! same bytes for the same inputs.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::canon::Digest;
use crate::dataset::Case;
use crate::dataset::RecordingRef;
use crate::dataset::recording::Recording;
use crate::event::Event;
use crate::pipeline::AgentProfile;

fn manifest(faults: Value) -> Manifest {
    let mut m: Manifest = serde_json::from_value(json!({
        "server": "status-api",
        "tools": [
            {"name": "status", "description": "Live status.", "default": {"result": {"state": "up"}}},
            {"name": "cached", "description": "Cached status.", "default": {"result": {"state": "up", "age_s": 60}}}
        ],
        "faults": faults
    }))
    .unwrap();
    m.compile().unwrap();
    m
}

/// Responses as a recording: each `(tool or None for a final answer, latency)`.
fn recording(steps: &[(Option<&str>, u64)]) -> Recording {
    let responses: Vec<Value> = steps
        .iter()
        .map(|(tool, latency)| match tool {
            Some(name) => json!({"response": {"tool_calls": [{"name": name}]}, "latency_ms": latency}),
            None => json!({"response": {"content": "Done."}, "latency_ms": latency}),
        })
        .collect();
    Recording::inline(&responses, "", "").unwrap()
}

fn run(profile_toml: &str, manifest: &Manifest, recording: &Recording) -> Vec<Event> {
    let profile: AgentProfile = toml::from_str(profile_toml).unwrap();
    run_with(&profile, manifest, recording, &mut ReplayProvider::new(recording))
}

/// The one-turn case `run` builds ("Is it up?" to agent `ops`), run by the built-in
/// runtime against `provider`; it must complete.
fn run_with(
    profile: &AgentProfile,
    manifest: &Manifest,
    recording: &Recording,
    provider: &mut dyn crate::replay::ModelProvider,
) -> Vec<Event> {
    run_turns(profile, manifest, recording, provider, &["Is it up?"], Box::new(Vec::<u8>::new()))
}

/// [`run_with`] with these user turns, its log written to `sink`.
fn run_turns(
    profile: &AgentProfile,
    manifest: &Manifest,
    recording: &Recording,
    provider: &mut dyn crate::replay::ModelProvider,
    turns: &[&str],
    sink: Box<dyn crate::event::writer::Sink + Send>,
) -> Vec<Event> {
    let case = Case {
        id: "c".into(),
        description: None,
        tags: Vec::new(),
        agent: "ops".into(),
        turns: turns.iter().map(|t| t.to_string()).collect(),
        recordings: vec![RecordingRef::Inline(Arc::new(recording.clone()))],
        expect: Vec::new(),
        blocks: Vec::new(),
        block_expect: Vec::new(),
        role: None,
        task_expect: Vec::new(),
        perturbation: None,
        allowed_tools: None,
        human_approvals: Default::default(),
        trusted_values: Vec::new(),
        dataset: "d".into(),
        path: PathBuf::from("d.jsonl"),
        display_path: "d.jsonl".into(),
        line: 1,
        digest: Digest([0; 32]),
    };
    let input = RunInput {
        case: &case,
        run_index: 0,
        agent: "ops",
        profile,
        profile_digest: Digest([0; 32]),
        manifest,
        recording,
        on_divergence: OnDivergence::Fail,
        peers: Default::default(),
    };
    let mut rec = Recorder::new(sink);
    let summary = BuiltinAgent.run(&input, provider, &mut rec).unwrap();
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    rec.finish().unwrap().0
}

fn of(events: &[Event], kind: Kind) -> Vec<&Event> {
    events.iter().filter(|e| e.kind == kind).collect()
}

#[test]
fn a_hang_advances_the_virtual_clock_by_the_timeout_and_records_a_timeout() {
    // proposed at 100 (model latency), timed out at 100 + 5000, answered 50 later
    let m = manifest(json!([{"tool": "status", "fault": "hang"}]));
    let events = run("tool_timeout_ms = 5000", &m, &recording(&[(Some("status"), 100), (None, 50)]));
    assert_eq!(of(&events, Kind::ToolProposed)[0].t, 100);
    let executed = of(&events, Kind::ToolExecuted)[0];
    assert_eq!(executed.t, 5100);
    assert_eq!(
        executed.data.tree(),
        json!({"call_id": "call-0-0-0", "tool": "status", "args": {}, "result": {"error": "timed out after 5000 ms"},
               "is_error": true, "fault": "timeout", "injected": "hang", "timeout_ms": 5000, "duration_ms": 5000,
               "deduplicated": false, "effect": null})
    );
    assert_eq!(of(&events, Kind::TurnCompleted)[0].t, 5150);
}

#[test]
fn without_a_profile_timeout_a_hang_costs_the_default_thirty_seconds() {
    let m = manifest(json!([{"tool": "status", "fault": "wedged"}]));
    let events = run("", &m, &recording(&[(Some("status"), 0), (None, 0)]));
    let executed = of(&events, Kind::ToolExecuted)[0];
    assert_eq!((executed.t, executed.str("injected")), (30_000, Some("wedged")));
}

#[test]
fn slow_and_error_faults_record_their_kind_and_duration() {
    // slow:700 answers at 700 with the fixture's result; error answers at once
    let m = manifest(json!([{"tool": "status", "fault": "slow:700"}, {"tool": "cached", "fault": "error"}]));
    let events = run("", &m, &recording(&[(Some("status"), 0), (Some("cached"), 0), (None, 0)]));
    let executed = of(&events, Kind::ToolExecuted);
    let fields = |e: &Event| (e.t, e.get("fault"), e.get("duration_ms"), e.get("is_error"));
    assert_eq!(fields(executed[0]), (700, json!("slow"), json!(700), json!(false)));
    assert_eq!(executed[0].get("result"), json!({"state": "up"}));
    assert_eq!(fields(executed[1]), (700, json!("error"), json!(0), json!(true)));
}

#[test]
fn a_profile_fault_counts_its_own_calls_per_run() {
    // recover-after:1 from the profile: the first call hangs, the second runs; a new run
    // counts from zero again
    let m = manifest(json!([]));
    let profile = "tool_timeout_ms = 1000\nfaults = [{ tool = \"status\", fault = \"recover-after:1\" }]";
    let rec = recording(&[(Some("status"), 0), (Some("status"), 0), (None, 0)]);
    for _ in 0..2 {
        let events = run(profile, &m, &rec);
        let faults: Vec<Value> = of(&events, Kind::ToolExecuted).iter().map(|e| e.get("fault")).collect();
        assert_eq!(faults, [json!("timeout"), Value::Null]);
    }
}

#[test]
fn unfaulted_calls_keep_a_null_fault_and_no_fault_details() {
    let m = manifest(json!([{"tool": "status", "fault": "hang"}]));
    let events = run("", &m, &recording(&[(Some("cached"), 10), (None, 0)]));
    let executed = of(&events, Kind::ToolExecuted)[0];
    assert_eq!((executed.t, executed.get("fault"), executed.get("duration_ms")), (10, Value::Null, json!(0)));
    assert!(executed.data.tree().get("injected").is_none() && executed.data.tree().get("timeout_ms").is_none());
}

#[test]
fn the_same_inputs_give_the_same_log_head() {
    let m =
        manifest(json!([{"server": "status-api", "fault": "recover-after:2"}, {"tool": "cached", "fault": "slow:9"}]));
    let rec = recording(&[(Some("status"), 3), (Some("cached"), 5), (Some("status"), 7), (None, 1)]);
    let head = |events: Vec<Event>| events.last().map(|e| e.hash);
    assert_eq!(head(run("tool_timeout_ms = 10", &m, &rec)), head(run("tool_timeout_ms = 10", &m, &rec)));
}

/// A provider that asks for the compiled request, checks that it is the document its
/// digest covers, and replays.
struct Checking<'r> {
    replay: ReplayProvider<'r>,
    /// Per call: messages sent, and whether memory held anything.
    seen: Vec<(usize, bool)>,
}

impl ModelProvider for Checking<'_> {
    fn wants_compiled(&self) -> bool {
        true
    }

    fn complete(&mut self, request: &ModelRequest) -> Result<crate::replay::Replayed<'_>, ProviderError> {
        let compiled = request.compiled.as_ref().expect("a provider that wants it gets the compiled request");
        let digest = crate::replay::digest::of(compiled).unwrap();
        assert_eq!(digest, request.hash, "the compiled document is not what was digested: {compiled}");
        let messages = compiled["messages"].as_array().unwrap().len();
        let memory = compiled["memory"].as_object().unwrap().values().any(|t| t != &json!({}));
        self.seen.push((messages, memory));
        self.replay.complete(request)
    }
}

#[test]
fn a_provider_that_asks_gets_exactly_the_document_each_request_digest_covers() {
    let profile: AgentProfile =
        toml::from_str("system = \"Ops.\"\ntools = \"t.json\"\n[context]\nhistory = 40\n").unwrap();
    let manifest = manifest(json!([]));
    let responses = [
        json!({"response": {"tool_calls": [{"name": "memory_write", "args": {"tier": "semantic", "key": "k", "value": "v"}}]}}),
        json!({"response": {"tool_calls": [{"name": "status"}]}}),
        json!({"response": {"tool_calls": [{"name": "cached"}]}}),
        json!({"response": {"content": "Up."}}),
    ];
    let recording = Recording::inline(&responses, "", "").unwrap();
    let mut provider = Checking { replay: ReplayProvider::new(&recording), seen: Vec::new() };
    let events = run_with(&profile, &manifest, &recording, &mut provider);
    let dropped: Vec<u64> =
        of(&events, Kind::ContextCompiled).iter().map(|e| e.data.member("dropped").as_u64().unwrap()).collect();
    // memory was written, and the window dropped messages: both reached the document
    assert_eq!(provider.seen.len(), 4);
    assert!(provider.seen[1..].iter().all(|(_, memory)| *memory), "{:?}", provider.seen);
    assert!(dropped.iter().any(|d| *d > 0), "the history cap never dropped anything: {dropped:?}");
    for ((messages, _), event) in provider.seen.iter().zip(of(&events, Kind::ContextCompiled)) {
        assert_eq!(*messages as u64, event.data.member("messages").as_u64().unwrap());
    }
}

/// Counts the writes a log makes, shared with the test that moved it into a recorder.
#[derive(Clone, Default)]
struct CountedWrites(Arc<std::sync::Mutex<Vec<usize>>>);

impl std::io::Write for CountedWrites {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().push(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl crate::event::writer::Sink for CountedWrites {
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Replays, but says it waits outside the process, as the live provider does.
struct Waiting<'r>(ReplayProvider<'r>);

impl ModelProvider for Waiting<'_> {
    fn waits(&self) -> bool {
        true
    }

    fn complete(&mut self, request: &ModelRequest) -> Result<crate::replay::Replayed<'_>, ProviderError> {
        self.0.complete(request)
    }
}

#[test]
fn replayed_turns_share_a_write_and_turns_that_wait_outside_get_one_each() {
    let profile: AgentProfile = toml::from_str("system = \"Ops.\"\ntools = \"t.json\"\n").unwrap();
    let manifest = manifest(json!([]));
    let responses: Vec<Value> = (0..3).map(|i| json!({"response": {"content": format!("Answer {i}.")}})).collect();
    let recording = Recording::inline(&responses, "", "").unwrap();
    let turns = ["One?", "Two?", "Three?"];

    let replayed = CountedWrites::default();
    let events = run_turns(
        &profile,
        &manifest,
        &recording,
        &mut ReplayProvider::new(&recording),
        &turns,
        Box::new(replayed.clone()),
    );
    assert_eq!(of(&events, Kind::TurnCompleted).len(), 3);
    let writes = replayed.0.lock().unwrap().clone();
    assert_eq!(writes.len(), 1, "three small replayed turns, written once at the end: {writes:?}");

    let waited = CountedWrites::default();
    let mut provider = Waiting(ReplayProvider::new(&recording));
    let same = run_turns(&profile, &manifest, &recording, &mut provider, &turns, Box::new(waited.clone()));
    assert_eq!(same.last().map(|e| e.hash), events.last().map(|e| e.hash), "the same log either way");
    // one write as each turn ends, and the run's last events at the end
    let writes = waited.0.lock().unwrap().clone();
    assert_eq!(writes.len(), 4, "{writes:?}");
}
