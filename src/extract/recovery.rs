//! Recovery marks (docs/metrics.md §4): where in a run's log a fault started, was detected
//! and was recovered from.
//!
//! The marks are about the **first faulted call** — the first `tool_executed` whose
//! `fault` is not null (a timeout, a slow answer or an injected error):
//!
//! - call start: the virtual `t` of that call's `tool_proposed` (the user's wait begins
//!   when the agent asks, not when the runtime gives up);
//! - detection: the `t` of its `tool_executed` when that is a timeout — the moment the
//!   runtime stopped waiting. A slow answer or an injected error is not a timeout, so it
//!   has no detection mark;
//! - recovery: the `t` of the first successful tool result (`is_error = false`) or the
//!   first final answer with visible text (`turn_completed` with a non-blank response),
//!   from that call's own result on — so a slow call that answers is its own recovery.
//!
//! Besides the marks: `detections` (timeouts in the whole run), `fault_fired` and the
//! timeout budget (`timeout_ms` of the faulted call). The derived times come from
//! [`score_recovery`](crate::metrics::recovery::score_recovery) through
//! [`RecoveryMarks::report`], exactly as the `recovery` block computes them, so an
//! `expect` on `recovery.time_to_recovery_ms` and the block always agree.
//!
//! | target | value |
//! |---|---|
//! | `recovery.call_start_ms` / `.detected_ms` / `.recovered_ms` | the marks (virtual ms) |
//! | `recovery.timeout_budget_ms` | the per-call timeout of the faulted call |
//! | `recovery.detections` / `recovery.fault_fired` | timeouts in the run / 0 or 1 |
//! | `recovery.time_to_detection_ms` / `.time_to_recovery_ms` | mark − call start |
//! | `recovery.user_visible_hang_ms` / `.recovered` / `.clean_timeout` | as in docs/metrics.md §4 |
//!
//! Absent marks and times are absent, not null; without a faulted call only
//! `detections` and `fault_fired` exist.

use serde_json::{Map, Value, json};

use crate::event::{Event, Kind, payload};
use crate::metrics::recovery::RecoveryMarks;

/// `tool_executed.fault` of a call that timed out.
const TIMEOUT: &str = "timeout";

/// The recovery marks of one run's events. Without a faulted call, only `detections`
/// (0) and `fault_fired` (false) are set.
pub fn marks(events: &[Event]) -> RecoveryMarks {
    fn fault(e: &Event) -> Option<payload::Json<'_>> {
        (e.kind == Kind::ToolExecuted).then(|| e.view::<payload::ToolExecuted>().fault)
    }
    let detections = events.iter().filter_map(fault).filter(|f| f.as_str().as_deref() == Some(TIMEOUT)).count() as u64;
    let Some(first) = events.iter().position(|e| fault(e).is_some_and(|f| !f.is_null())) else {
        return RecoveryMarks { detections: Some(detections), fault_fired: Some(false), ..RecoveryMarks::default() };
    };
    let faulted = &events[first];
    let call: payload::ToolExecuted = faulted.view();
    let millis = |t: u64| i64::try_from(t).ok();
    // the proposal of the same call; a log without one (imported, hand-written) starts
    // the call when its result arrived minus the time it took
    let proposed = events[..first]
        .iter()
        .rev()
        .find(|e| e.kind == Kind::ToolProposed && e.view::<payload::ToolProposed>().call_id.raw() == call.call_id.raw())
        .map(|e| e.t)
        .unwrap_or_else(|| faulted.t.saturating_sub(call.duration_ms.as_u64().unwrap_or(0)));
    let recovered = events[first..].iter().find(|e| match e.kind {
        Kind::ToolExecuted => e.view::<payload::ToolExecuted>().is_error.as_bool() == Some(false),
        Kind::TurnCompleted => {
            e.view::<payload::TurnCompleted>().response.as_str().is_some_and(|r| !r.trim().is_empty())
        }
        _ => false,
    });
    RecoveryMarks {
        call_start_ms: millis(proposed),
        detected_ms: (call.fault.as_str().as_deref() == Some(TIMEOUT)).then(|| millis(faulted.t)).flatten(),
        recovered_ms: recovered.and_then(|e| millis(e.t)),
        timeout_budget_ms: call.timeout_ms.as_i64(),
        detections: Some(detections),
        fault_fired: Some(true),
    }
}

/// The per-run input of the `recovery` block:
/// `{"recovery": {"call_start_ms", "detected_ms"?, "recovered_ms"?, "timeout_budget_ms"?,
/// "detections", "fault_fired"}}`, absent marks left out.
pub fn recovery_input(events: &[Event]) -> Value {
    json!({ "recovery": Value::Object(mark_fields(&marks(events))) })
}

/// The extractor root `recovery`: the marks, plus — when a fault fired — the derived
/// `recovery.*` targets of docs/metrics.md §4 (`time_to_detection_ms`, `time_to_recovery_ms`,
/// `user_visible_hang_ms`, `recovered`, `clean_timeout`). Booleans are 0/1; absent
/// values are absent, so an assertion on them fails with "no value" like the block does.
pub fn root(events: &[Event]) -> Value {
    let marks = marks(events);
    let mut fields = mark_fields(&marks);
    if let Some(fired) = marks.fault_fired {
        fields.insert("fault_fired".into(), json!(u8::from(fired)));
    }
    if let Some(report) = marks.report(marks.timeout_budget_ms.unwrap_or(0)) {
        for (target, value) in report.targets() {
            let name = target.strip_prefix("recovery.").unwrap_or(&target).to_string();
            if !value.is_null() {
                fields.insert(name, value);
            }
        }
    }
    Value::Object(fields)
}

fn mark_fields(marks: &RecoveryMarks) -> Map<String, Value> {
    let mut fields = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            fields.insert(key.into(), v);
        }
    };
    put("call_start_ms", marks.call_start_ms.map(Value::from));
    put("detected_ms", marks.detected_ms.map(Value::from));
    put("recovered_ms", marks.recovered_ms.map(Value::from));
    put("timeout_budget_ms", marks.timeout_budget_ms.map(Value::from));
    put("detections", marks.detections.map(Value::from));
    put("fault_fired", marks.fault_fired.map(Value::from));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::Digest;
    use crate::metrics::block::MetricBlock;

    /// Events at virtual times, built by hand (only kind, t and data matter here).
    fn log(spec: &[(u64, Kind, Value)]) -> Vec<Event> {
        spec.iter()
            .enumerate()
            .map(|(seq, (t, kind, data))| Event {
                seq: seq as u64,
                turn: Some(0),
                t: *t,
                kind: *kind,
                data: crate::event::Data::from_value(data.clone()).expect("canonical"),
                hash: Digest([0; 32]),
            })
            .collect()
    }

    fn proposed(t: u64, id: &str) -> (u64, Kind, Value) {
        (t, Kind::ToolProposed, json!({"call_id": id, "tool": "x", "args": {}}))
    }

    fn executed(t: u64, id: &str, fault: Option<&str>, is_error: bool) -> (u64, Kind, Value) {
        let mut data = json!({"call_id": id, "tool": "x", "is_error": is_error, "fault": fault, "duration_ms": 0});
        if fault.is_some() {
            data["timeout_ms"] = json!(5000);
        }
        (t, Kind::ToolExecuted, data)
    }

    fn answered(t: u64, text: &str) -> (u64, Kind, Value) {
        (t, Kind::TurnCompleted, json!({"turn": 0, "response": text}))
    }

    #[test]
    fn a_hang_then_a_fallback_gives_start_detection_and_recovery() {
        // proposed 400, timed out 5400, fallback answered 5700: 5000 to detect, 5300 to recover
        let events = log(&[
            proposed(400, "s1"),
            executed(5400, "s1", Some("timeout"), true),
            proposed(5700, "c1"),
            executed(5700, "c1", None, false),
            answered(6200, "Checkout is degraded."),
        ]);
        assert_eq!(
            recovery_input(&events),
            json!({"recovery": {"call_start_ms": 400, "detected_ms": 5400, "recovered_ms": 5700,
                                "timeout_budget_ms": 5000, "detections": 1, "fault_fired": true}})
        );
        assert_eq!(
            root(&events),
            json!({"call_start_ms": 400, "detected_ms": 5400, "recovered_ms": 5700, "timeout_budget_ms": 5000,
                   "detections": 1, "fault_fired": 1, "time_to_detection_ms": 5000, "time_to_recovery_ms": 5300,
                   "user_visible_hang_ms": 5000, "recovered": 1, "clean_timeout": 1})
        );
    }

    #[test]
    fn with_no_fault_fired_only_the_counts_are_present() {
        let events = log(&[proposed(100, "a"), executed(100, "a", None, false), answered(300, "Done.")]);
        assert_eq!(recovery_input(&events), json!({"recovery": {"detections": 0, "fault_fired": false}}));
        assert_eq!(root(&events), json!({"detections": 0, "fault_fired": 0}));
    }

    #[test]
    fn an_empty_or_blank_final_answer_is_not_a_recovery() {
        // two timeouts, then the agent gives up without a word
        let events = log(&[
            proposed(400, "a"),
            executed(30_400, "a", Some("timeout"), true),
            proposed(30_700, "b"),
            executed(60_700, "b", Some("timeout"), true),
            answered(60_900, " "),
        ]);
        let r = root(&events);
        assert_eq!((&r["recovered"], &r["detections"], r.get("recovered_ms")), (&json!(0), &json!(2), None));
        // nobody recovered: the user saw the hang until detection, 30000
        assert_eq!(r["user_visible_hang_ms"], json!(30_000));
    }

    #[test]
    fn recover_after_recovers_at_the_first_call_that_gets_through_and_counts_every_timeout() {
        // 300 → 5300 timeout, 5500 → 10500 timeout, 10700 ok
        let events = log(&[
            proposed(300, "d1"),
            executed(5300, "d1", Some("timeout"), true),
            proposed(5500, "d2"),
            executed(10_500, "d2", Some("timeout"), true),
            proposed(10_700, "d3"),
            executed(10_700, "d3", None, false),
        ]);
        let r = root(&events);
        assert_eq!(
            (&r["detections"], &r["time_to_detection_ms"], &r["time_to_recovery_ms"]),
            (&json!(2), &json!(5000), &json!(10_400))
        );
    }

    #[test]
    fn a_slow_answer_is_its_own_recovery_and_no_detection() {
        // proposed 350, answered 1550 after slow:1200
        let events =
            log(&[proposed(350, "m1"), executed(1550, "m1", Some("slow"), false), answered(1900, "p99 is fine")]);
        let r = root(&events);
        assert_eq!(r.get("detected_ms"), None);
        assert_eq!(
            (&r["recovered_ms"], &r["time_to_recovery_ms"], &r["user_visible_hang_ms"]),
            (&json!(1550), &json!(1200), &json!(1200))
        );
        assert_eq!((&r["detections"], &r["clean_timeout"], &r["fault_fired"]), (&json!(0), &json!(0), &json!(1)));
    }

    #[test]
    fn an_injected_error_recovers_at_the_answer_that_explains_it() {
        // proposed 300, error at 300, answer at 750: recovered after 450
        let events = log(&[
            proposed(300, "p1"),
            executed(300, "p1", Some("error"), true),
            answered(750, "Paging failed; call the phone."),
        ]);
        let r = root(&events);
        assert_eq!(
            (&r["call_start_ms"], &r["recovered_ms"], &r["time_to_recovery_ms"]),
            (&json!(300), &json!(750), &json!(450))
        );
        assert_eq!((r.get("detected_ms"), &r["detections"]), (None, &json!(0)));
    }

    #[test]
    fn a_reused_call_id_starts_at_the_nearest_proposal_before_the_fault() {
        // recordings may reuse ids across turns: "a" at 100 (fine), "a" again at 900 (hangs)
        let events = log(&[
            proposed(100, "a"),
            executed(100, "a", None, false),
            proposed(900, "a"),
            executed(5900, "a", Some("timeout"), true),
        ]);
        assert_eq!(marks(&events).call_start_ms, Some(900));
    }

    #[test]
    fn without_a_proposal_the_call_starts_its_duration_before_its_result() {
        let mut timeout = executed(5400, "s1", Some("timeout"), true);
        timeout.2["duration_ms"] = json!(5000);
        assert_eq!(marks(&log(&[timeout])).call_start_ms, Some(400));
    }

    #[test]
    fn the_block_grades_the_input_with_the_same_numbers_as_the_root() {
        let events = log(&[
            proposed(400, "s1"),
            executed(5400, "s1", Some("timeout"), true),
            proposed(5700, "c1"),
            executed(5700, "c1", None, false),
        ]);
        let block = MetricBlock::from_key("recovery", &json!({"max_recovery_ms": 6000})).unwrap().unwrap();
        let outcome = block.evaluate(&[recovery_input(&events)]).unwrap();
        assert!(outcome.passed, "{:?}", outcome.messages());
        let r = root(&events);
        for (target, value) in &outcome.runs[0].targets {
            assert_eq!(&r[target.strip_prefix("recovery.").unwrap()], value, "{target}");
        }
        // and a run where nothing fired fails the block, as it has no call start
        let quiet = log(&[proposed(1, "a"), executed(1, "a", None, false)]);
        assert!(!block.evaluate(&[recovery_input(&quiet)]).unwrap().passed);
    }
}
