use serde_json::{Value, json};

use super::*;
use crate::event::writer::LogWriter;

/// One event of a test log: turn, virtual time, kind, data.
type Spec = (Option<u32>, u64, Kind, Value);

fn log(specs: &[Spec]) -> Vec<Event> {
    let mut w = LogWriter::new(Vec::new());
    specs.iter().map(|(turn, t, kind, data)| w.append(*turn, *t, *kind, data.clone()).unwrap()).collect()
}

/// A one-turn run: a model call asking for a transfer, the transfer, the answer.
fn run() -> Vec<Spec> {
    vec![
        (None, 0, Kind::RunStarted, json!({"case": "pay", "run": 0})),
        (Some(0), 0, Kind::TurnStarted, json!({"turn": 0, "input": "Pay Alice"})),
        (Some(0), 500, Kind::ModelCalled, json!({"latency_ms": 500, "response": {"content": ""}})),
        (Some(0), 500, Kind::ToolProposed, json!({"call_id": "c1", "tool": "transfer", "args": {"to": "alice"}})),
        (Some(0), 500, Kind::PolicyDecided, json!({"call_id": "c1", "tool": "transfer", "verdict": "allow"})),
        (Some(0), 500, Kind::ToolExecuted, json!({"call_id": "c1", "tool": "transfer", "result": {"status": "sent"}})),
        (Some(0), 500, Kind::MemoryWritten, json!({"key": "payee", "value": "alice", "source": 5, "supersedes": null})),
        (Some(0), 800, Kind::ModelCalled, json!({"latency_ms": 300, "response": {"content": "Sent."}})),
        (Some(0), 800, Kind::TurnCompleted, json!({"turn": 0, "response": "Sent."})),
        (None, 800, Kind::RunCompleted, json!({"status": "completed"})),
    ]
}

fn diff_of(golden: &[Spec], actual: &[Spec]) -> Diff {
    diff(&log(golden), &log(actual))
}

fn classes(d: &Diff) -> Vec<Class> {
    d.differences.iter().map(|x| x.class).collect()
}

#[test]
fn identical_logs_have_no_difference() {
    let d = diff_of(&run(), &run());
    assert!(d.is_identical());
    assert_eq!(d.first_divergence(), None);
}

#[test]
fn an_inserted_event_is_one_event_added_and_nothing_after_it_changes() {
    let mut actual = run();
    actual.insert(3, (Some(0), 500, Kind::SecurityFlagged, json!({"class": "pii", "source": 2})));
    actual[7].3["source"] = json!(6);
    let d = diff_of(&run(), &actual);
    // the memory write's source moved from seq 5 to seq 6 with its event: still the same event
    assert_eq!(classes(&d), [Class::EventAdded]);
    let added = &d.differences[0];
    assert_eq!((added.golden_seq, added.actual_seq, added.kind), (None, Some(3), "security_flagged"));
}

#[test]
fn a_dropped_event_is_one_event_missing() {
    let mut actual = run();
    actual.remove(4); // policy_decided
    actual[5].3["source"] = json!(4);
    let d = diff_of(&run(), &actual);
    assert_eq!(classes(&d), [Class::EventMissing]);
    assert_eq!((d.differences[0].golden_seq, d.differences[0].actual_seq), (Some(4), None));
}

#[test]
fn a_tool_execution_that_no_longer_happens_is_a_tool_call_missing_with_its_call_id() {
    let mut actual = run();
    actual.remove(5);
    let d = diff_of(&run(), &actual);
    // the memory write sourced from it now points at an event the golden's source does not match
    assert_eq!(classes(&d), [Class::ToolCallMissing, Class::PayloadChanged]);
    let missing = &d.differences[0];
    assert_eq!((missing.tool.as_deref(), missing.call_id.as_deref()), (Some("transfer"), Some("c1")));
    assert_eq!(d.differences[1].changes[0].path, "/data/source");
}

#[test]
fn a_tool_execution_the_golden_does_not_have_is_a_tool_call_extra() {
    let mut actual = run();
    let extra = json!({"call_id": "c2", "tool": "get_balance", "result": {"balance": 10}});
    actual.insert(6, (Some(0), 500, Kind::ToolExecuted, extra));
    let d = diff_of(&run(), &actual);
    assert_eq!(classes(&d), [Class::ToolCallExtra]);
    assert_eq!(d.differences[0].tool.as_deref(), Some("get_balance"));
}

#[test]
fn a_tool_swapped_for_another_is_one_call_missing_and_one_extra_not_a_payload_change() {
    let mut actual = run();
    actual[5].3 = json!({"call_id": "c1", "tool": "fetch_page", "result": {"text": "…"}});
    let d = diff_of(&run(), &actual);
    let mut found = classes(&d);
    found.retain(|c| *c != Class::PayloadChanged); // the memory write's source has no counterpart now
    assert_eq!(found, [Class::ToolCallMissing, Class::ToolCallExtra]);
}

#[test]
fn two_swapped_events_are_one_event_reordered() {
    let mut actual = run();
    actual.swap(3, 4); // the policy decided before the call was proposed, same payloads
    let d = diff_of(&run(), &actual);
    assert_eq!(classes(&d), [Class::EventReordered]);
    let moved = &d.differences[0];
    assert_ne!(moved.golden_seq, moved.actual_seq);
}

#[test]
fn a_changed_payload_names_every_differing_leaf_by_json_pointer() {
    let mut actual = run();
    actual[5].3 = json!({"call_id": "c1", "tool": "transfer", "result": {"status": "queued", "id/x": 1}});
    let d = diff_of(&run(), &actual);
    assert_eq!(classes(&d), [Class::PayloadChanged]);
    let paths: Vec<&str> = d.differences[0].changes.iter().map(|c| c.path.as_str()).collect();
    // "/" in a key is escaped as ~1 (RFC 6901)
    assert_eq!(paths, ["/data/result/id~1x", "/data/result/status"]);
    let status = &d.differences[0].changes[1];
    assert_eq!((status.golden.clone(), status.actual.clone()), (Some(json!("sent")), Some(json!("queued"))));
    assert_eq!(d.differences[0].changes[0].golden, None);
}

#[test]
fn one_slower_model_call_is_one_time_change_not_a_shift_of_every_later_event() {
    let mut actual = run();
    // the first model call takes 700 ms instead of 500: every later t is 200 ms later
    actual[2] = (Some(0), 700, Kind::ModelCalled, json!({"latency_ms": 700, "response": {"content": ""}}));
    for spec in &mut actual[3..] {
        spec.1 += 200;
    }
    let d = diff_of(&run(), &actual);
    assert_eq!(classes(&d), [Class::PayloadChanged]);
    let paths: Vec<&str> = d.differences[0].changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/t", "/data/latency_ms"]);
}

#[test]
fn a_delay_where_the_clock_goes_back_is_still_a_time_change() {
    // the golden's clock goes back 300 ms at seq 8; the actual one's goes back only 293
    // ms there (that event came 7 ms later), and every later event keeps that 7 ms
    let mut golden = run();
    golden[8].1 = 500;
    golden[9].1 = 500;
    let mut actual = golden.clone();
    actual[8].1 += 7;
    actual[9].1 += 7;
    let d = diff_of(&golden, &actual);
    // one difference, where the time moved: clamping elapsed time at zero called both 0
    assert_eq!(classes(&d), [Class::PayloadChanged]);
    let first = &d.differences[0];
    assert_eq!((first.golden_seq, first.kind), (Some(8), "turn_completed"));
    assert_eq!(first.changes, [Change { path: "/t".into(), golden: Some(json!(500)), actual: Some(json!(507)) }]);
    // and a clock that goes back by the same amount in both is no difference
    assert!(diff_of(&golden, &golden).is_identical());
}

#[test]
fn the_first_divergence_is_the_earliest_difference_and_everything_before_it_is_identical() {
    let mut actual = run();
    actual[7].3 = json!({"latency_ms": 300, "response": {"content": "Done."}});
    actual.remove(4);
    actual[5].3["source"] = json!(4);
    let d = diff_of(&run(), &actual);
    let first = d.first_divergence().unwrap();
    assert_eq!(
        (first.class, first.golden_seq, first.turn, first.kind),
        (Class::EventMissing, Some(4), Some(0), "policy_decided")
    );
    // the changed answer comes after: golden seq 7 is actual seq 6
    assert_eq!((d.differences[1].golden_seq, d.differences[1].actual_seq), (Some(7), Some(6)));
}

#[test]
fn a_run_cut_short_misses_its_tail_from_the_first_missing_seq() {
    let actual: Vec<Spec> = run()[..6].to_vec();
    let d = diff_of(&run(), &actual);
    assert_eq!(d.first_divergence().unwrap().golden_seq, Some(6));
    assert_eq!(d.differences.len(), 4);
    assert!(d.differences.iter().all(|x| x.class == Class::EventMissing));
}

#[test]
fn turns_align_on_their_numbers_so_an_extra_turn_is_added_whole() {
    let mut golden = run();
    golden.pop();
    let mut actual = golden.clone();
    actual.push((Some(1), 900, Kind::TurnStarted, json!({"turn": 1, "input": "Thanks"})));
    actual.push((Some(1), 900, Kind::TurnCompleted, json!({"turn": 1, "response": "You're welcome"})));
    let d = diff_of(&golden, &actual);
    assert_eq!(classes(&d), [Class::EventAdded, Class::EventAdded]);
    assert_eq!(d.differences[0].turn, Some(1));
}

#[test]
fn counts_group_differences_by_class() {
    let mut actual = run();
    actual.remove(4);
    actual.insert(1, (None, 0, Kind::Error, json!({"kind": "x", "message": "y"})));
    let d = diff_of(&run(), &actual);
    let counts: Vec<(Class, usize)> = d.counts().into_iter().collect();
    assert_eq!(counts, [(Class::EventMissing, 1), (Class::EventAdded, 1)]);
}

#[test]
fn a_changed_input_digest_is_reported_but_the_first_divergence_is_where_the_run_differs() {
    let mut golden = run();
    golden[0].3 = json!({"case": "pay", "run": 0, "recording": "blake3:aa", "profile": "blake3:pp"});
    let mut actual = golden.clone();
    actual[0].3["recording"] = json!("blake3:bb");
    actual[8].3["response"] = json!("Done.");
    let d = diff_of(&golden, &actual);
    assert_eq!(d.differences.len(), 2);
    assert_eq!(d.changed_inputs(), ["recording"]);
    assert_eq!(
        (d.first_divergence().unwrap().golden_seq, d.first_divergence().unwrap().kind),
        (Some(8), "turn_completed")
    );
    // with nothing else different, the input change is the first divergence
    actual[8] = golden[8].clone();
    let d = diff_of(&golden, &actual);
    assert_eq!(d.first_divergence().unwrap().kind, "run_started");
}
