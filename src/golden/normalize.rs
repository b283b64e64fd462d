//! Normalisation: the form a run's log takes as a golden.
//!
//! A golden must be byte-stable: the same inputs must give the same golden bytes on
//! every machine and in every checkout, or a golden blessed on a laptop fails in CI.
//! Normalisation is where any field that varies for the same inputs would be
//! rewritten. The decision, after auditing every field the runtime writes: **no field
//! is volatile, so normalisation rewrites no value.** Each candidate, and why it is
//! already stable:
//!
//! - `t`, `latency_ms`, `duration_ms`: virtual time from recorded latencies and
//!   injected delays; wall-clock time never enters an event (docs/design.md §3).
//! - Tool call ids (`call_id`, `response.tool_calls[].id`): the recorded provider's
//!   ids, or `call-<turn>-<step>-<j>` when the recording has none. They are inputs
//!   pinned by the `recording` digest; rewriting them would hide a runtime that pairs
//!   a result with the wrong call.
//! - Content digests in `run_started` (`dataset_line`, `profile`, `tools`,
//!   `recording`) and `request_hash`: taken over canonical JSON, not file bytes, so a
//!   checkout with CRLF line endings or another key order digests the same. A change
//!   to them is a change of input, which a golden should show.
//! - Paths: no event holds a resolved one. `dataset` is relative to the pipeline's base
//!   (`examples/treasury`), messages name positions, not files, and `grader_called`
//!   holds a grader's `command` as the dataset wrote it. A grader's stderr (tracebacks
//!   with absolute paths) is never logged.
//!
//! `tests/cli_golden.rs` pins this decision: the same case run from two checkouts at
//! different absolute paths, one invoked by absolute path from another directory and
//! with CRLF inputs, gives byte-identical goldens. What differs between checkouts is
//! the golden *file*: git's `autocrlf` would turn its `\n` into `\r\n`, which is no
//! longer canonical. `.gitattributes` pins `goldens/` to LF.
//!
//! What normalisation does do: it re-encodes every event with the log writer (the one
//! encoder of canonical lines), so `seq` counts from 0 and every `prev`/`hash` is
//! recomputed over the normalised content. A golden therefore always passes
//! `stateval verify`, and a future volatile field is one rule here, not a change to
//! the diff or to `bless`. ([`normalize_events`] skips the re-encoding for a log whose
//! chain already starts at seq 0, which is then its own golden form.)

use crate::event::Event;
use crate::event::writer::{LogWriter, WriteError};

/// A log in golden form: its bytes (canonical JSONL) and its events.
#[derive(Debug)]
pub struct Normalized {
    pub bytes: Vec<u8>,
    pub events: Vec<Event>,
}

/// Rewrite `events` in golden form, with its bytes: volatile fields normalised (none
/// today, see the module doc), then re-chained by the event writer from seq 0.
pub fn normalize(events: &[Event]) -> Result<Normalized, WriteError> {
    let mut writer = LogWriter::new(Vec::new());
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        out.push(writer.append_data(e.turn, e.t, e.kind, e.data.clone()));
    }
    let (bytes, _) = writer.finish()?;
    Ok(Normalized { bytes, events: out })
}

/// The events of [`normalize`] without their bytes, taking ownership so a large log is
/// never held twice. `events` are one log's, in order, as the writer or the verifier
/// made them; numbered from seq 0 without a gap they are that log's whole chain (as
/// [`verify`](crate::event::verify) returns it), already in golden form, and are
/// returned as they are. Any other run of them — a cut, a log not read from its start —
/// is re-chained.
pub fn normalize_events(events: Vec<Event>) -> Result<Vec<Event>, WriteError> {
    let whole_chain = events.iter().enumerate().all(|(i, e)| e.seq == i as u64);
    if whole_chain {
        return Ok(events);
    }
    let mut writer = LogWriter::new(std::io::sink());
    Ok(events.into_iter().map(|e| writer.append_data(e.turn, e.t, e.kind, e.data)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Kind;
    use crate::event::verify::verify_bytes;
    use serde_json::json;

    fn log() -> Vec<u8> {
        let mut w = LogWriter::new(Vec::new());
        w.append(None, 0, Kind::RunStarted, json!({"case": "c", "run": 0})).unwrap();
        w.append(Some(0), 0, Kind::TurnStarted, json!({"turn": 0, "input": "hi"})).unwrap();
        w.append(Some(0), 150, Kind::ModelCalled, json!({"latency_ms": 150, "response": {"content": "hello"}}))
            .unwrap();
        w.append(None, 150, Kind::RunCompleted, json!({"status": "completed"})).unwrap();
        w.finish().unwrap().0
    }

    #[test]
    fn normalising_a_freshly_written_log_changes_no_byte() {
        let bytes = log();
        let events = verify_bytes(&bytes).unwrap().events;
        assert_eq!(normalize(&events).unwrap().bytes, bytes);
    }

    #[test]
    fn normalising_twice_gives_the_same_bytes() {
        let once = normalize(&verify_bytes(&log()).unwrap().events).unwrap();
        let twice = normalize(&once.events).unwrap();
        assert_eq!(once.bytes, twice.bytes);
    }

    #[test]
    fn a_whole_chain_is_its_own_golden_form_and_a_cut_one_is_rechained() {
        let events = verify_bytes(&log()).unwrap().events;
        assert_eq!(normalize_events(events.clone()).unwrap(), events);
        let cut = normalize_events(events[1..3].to_vec()).unwrap();
        assert_eq!(cut, normalize(&events[1..3]).unwrap().events);
        assert_eq!(cut[0].seq, 0);
    }

    #[test]
    fn events_cut_from_the_middle_of_a_log_are_rechained_from_seq_0_and_verify() {
        // events 1..3 keep their seqs (1, 2) and prev hashes: as a log they break at line 1
        let events = verify_bytes(&log()).unwrap().events;
        let normalized = normalize(&events[1..3]).unwrap();
        let verified = verify_bytes(&normalized.bytes).unwrap();
        assert_eq!(verified.events.iter().map(|e| e.seq).collect::<Vec<_>>(), [0, 1]);
        let first = std::str::from_utf8(normalized.bytes.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert!(first.contains(r#""prev":null"#), "{first}");
        assert_eq!(verified.events[1].data, events[2].data);
        assert_eq!(verified.events, normalized.events);
    }
}
