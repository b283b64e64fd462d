//! Golden diffs at scale: two 100,000-event logs, the second with a few edits (a changed
//! payload, an inserted event, a dropped tool call, two swapped events, a slower model
//! call), written with the event writer. The target is under a second for the diff.
//!
//! `cargo bench --bench golden -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use stateval::event::Kind;
use stateval::event::verify::verify_bytes;
use stateval::event::writer::LogWriter;
use stateval::golden::{self, render};

const EVENTS: usize = 100_000;
/// Events per turn in the generated logs (a tool round trip and an answer).
const PER_TURN: usize = 9;

/// One turn's events: (kind, data), at virtual times the writer is given.
fn turn_events(turn: usize) -> Vec<(Kind, Value)> {
    let call = format!("call-{turn}");
    vec![
        (Kind::TurnStarted, json!({"turn": turn, "input": format!("Look up order {turn} and tell me its status.")})),
        (
            Kind::ContextCompiled,
            json!({"budget": 24000, "total": 400 + turn % 97, "sections": {"system": 22, "memory": 1, "history": 50, "tools": 328}, "dropped": []}),
        ),
        (
            Kind::ModelCalled,
            json!({"latency_ms": 500, "position": 2 * turn, "request_hash": format!("blake3:{:064x}", 2 * turn),
            "response": {"content": "", "tool_calls": [{"id": call, "name": "get_order", "args": {"id": turn}}]},
            "usage": {"input_tokens": 400, "output_tokens": 20}}),
        ),
        (Kind::ToolProposed, json!({"call_id": call, "tool": "get_order", "args": {"id": turn}})),
        (
            Kind::PolicyDecided,
            json!({"call_id": call, "tool": "get_order", "verdict": "allow", "rule": "default", "reason": "no rule matched"}),
        ),
        (
            Kind::ToolExecuted,
            json!({"call_id": call, "tool": "get_order", "args": {"id": turn}, "result": {"status": "shipped", "items": [1, 2, 3]},
            "is_error": false, "fault": null, "duration_ms": 0, "deduplicated": false, "effect": null}),
        ),
        (
            Kind::ContextCompiled,
            json!({"budget": 24000, "total": 450 + turn % 97, "sections": {"system": 22, "memory": 1, "history": 100, "tools": 328}, "dropped": []}),
        ),
        (
            Kind::ModelCalled,
            json!({"latency_ms": 300, "position": 2 * turn + 1, "request_hash": format!("blake3:{:064x}", 2 * turn + 1),
            "response": {"content": format!("Order {turn} has shipped."), "tool_calls": []}, "usage": {"input_tokens": 450, "output_tokens": 8}}),
        ),
        (Kind::TurnCompleted, json!({"turn": turn, "response": format!("Order {turn} has shipped.")})),
    ]
}

/// A log of `EVENTS` events; `edit` may change each turn's events before they are written.
fn write_log(edit: impl Fn(usize, &mut Vec<(Kind, Value)>)) -> Vec<u8> {
    let mut w = LogWriter::new(Vec::new());
    let mut t = 0u64;
    w.append(None, t, Kind::RunStarted, json!({"case": "orders", "run": 0})).expect("append");
    let turns = (EVENTS - 2) / PER_TURN;
    for turn in 0..turns {
        let mut events = turn_events(turn);
        edit(turn, &mut events);
        for (kind, data) in events {
            t += data.get("latency_ms").and_then(Value::as_u64).unwrap_or(0);
            w.append(Some(turn as u32), t, kind, data).expect("append");
        }
    }
    let filler = EVENTS - 2 - turns * PER_TURN;
    for _ in 0..filler {
        w.append(None, t, Kind::Error, json!({"kind": "note", "message": "padding to a round count"})).expect("append");
    }
    w.append(None, t, Kind::RunCompleted, json!({"status": "completed", "turns": turns})).expect("append");
    w.finish().expect("finish").0
}

/// The golden and an actual log with five edits spread over it.
fn logs() -> (Vec<u8>, Vec<u8>) {
    let golden = write_log(|_, _| {});
    let actual = write_log(|turn, events| match turn {
        100 => events[5].1["result"]["status"] = json!("delayed"),
        2_000 => events.insert(6, (Kind::SecurityFlagged, json!({"class": "pii", "severity": "low", "source": 5}))),
        5_000 => {
            events.remove(5);
        }
        7_000 => events.swap(3, 4),
        9_000 => events[2].1["latency_ms"] = json!(900),
        _ => {}
    });
    (golden, actual)
}

fn diff_100k(c: &mut Criterion) {
    let (golden_bytes, actual_bytes) = logs();
    let golden = verify_bytes(&golden_bytes).expect("golden verifies").events;
    let actual = verify_bytes(&actual_bytes).expect("actual verifies").events;
    assert_eq!(golden.len(), EVENTS);
    let d = golden::diff(&golden, &actual);
    // 1 payload, 1 added, 1 tool call missing, 1 reordered, 1 slower call
    assert_eq!(d.differences.len(), 5, "{:#?}", d.counts());

    let mut group = c.benchmark_group("golden");
    group.sample_size(10);
    group.throughput(Throughput::Elements(2 * EVENTS as u64));
    group.bench_function("diff 2 x 100k events, 5 edits", |b| b.iter(|| black_box(golden::diff(&golden, &actual))));
    group.bench_function("verify both + diff + render text, 2 x 100k events", |b| {
        b.iter(|| {
            let g = verify_bytes(&golden_bytes).expect("verifies").events;
            let a = verify_bytes(&actual_bytes).expect("verifies").events;
            let d = golden::diff(&g, &a);
            let text =
                render::text(&d, &render::Side::whole("golden.jsonl", &g), &render::Side::whole("actual.jsonl", &a));
            black_box(text)
        })
    });
    group.finish();
}

criterion_group!(benches, diff_100k);
criterion_main!(benches);
