//! Chain and canonical-form verification.
//!
//! Each line is re-encoded from its parsed fields with the writer's own encoder; the
//! line must equal that encoding byte for byte (canonical form and hash at once), its
//! `seq` must equal its position and its `prev` the previous line's hash. The first line
//! that fails is reported by position, so an edit, a deleted, swapped or inserted event
//! and a truncated last line are all named at the first `seq` they break.

use serde_json::Value;

use super::{Event, Kind, Unhashed};
use crate::canon::Digest;

/// A log whose every line verified.
#[derive(Debug)]
pub struct Verified {
    pub events: Vec<Event>,
    /// Hash of the last event (the log's head); `None` for an empty log.
    pub head: Option<Digest>,
    /// The log ends with `run_completed`. A run killed mid-way leaves `false`.
    pub complete: bool,
}

/// The first line that does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: event seq {seq}: {reason}")]
pub struct VerifyError {
    /// 1-based line number.
    pub line: usize,
    /// The seq this position should hold (= line − 1).
    pub seq: u64,
    pub reason: String,
}

/// Verify a whole log held in memory.
pub fn verify_bytes(bytes: &[u8]) -> Result<Verified, VerifyError> {
    let mut events = Vec::new();
    let mut prev: Option<Digest> = None;
    let mut rest = bytes;
    let mut position: u64 = 0;
    while !rest.is_empty() {
        let line_no = position as usize + 1;
        let fail = |reason: String| VerifyError { line: line_no, seq: position, reason };
        let (line, tail) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => return Err(fail("truncated line: no terminating newline".into())),
        };
        rest = tail;
        let event = parse_line(line).map_err(fail)?;
        if event.seq != position {
            return Err(fail(format!(
                "expected seq {position}, found seq {} (an event is missing, inserted or out of order)",
                event.seq
            )));
        }
        if event.prev != prev {
            return Err(fail("prev does not match the previous event's hash (the chain is broken)".into()));
        }
        let unhashed = Unhashed {
            seq: event.seq,
            turn: event.turn,
            t: event.t,
            kind: event.kind,
            data: &event.data,
            prev: event.prev.as_ref(),
        };
        let (expected_line, hash) = unhashed.encode().map_err(|e| fail(e.to_string()))?;
        if hash != event.hash {
            return Err(fail("hash does not match the event's content (the event was edited)".into()));
        }
        if expected_line != line {
            return Err(fail("not in RFC 8785 canonical form".into()));
        }
        prev = Some(event.hash);
        events.push(event);
        position += 1;
    }
    let complete = events.last().is_some_and(|e| e.kind == Kind::RunCompleted);
    Ok(Verified { events, head: prev, complete })
}

/// Parse one line into an event without checking the chain.
pub fn parse_line(line: &[u8]) -> Result<Event, String> {
    let value: Value = serde_json::from_slice(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("expected a JSON object".into());
    };
    const FIELDS: [&str; 7] = ["data", "hash", "kind", "prev", "seq", "t", "turn"];
    if let Some(extra) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("unexpected field \"{extra}\""));
    }
    let mut take = |name: &str| map.remove(name).ok_or_else(|| format!("missing field \"{name}\""));
    let data = take("data")?;
    let hash = digest_field(take("hash")?, "hash")?.ok_or("hash must not be null")?;
    let kind = match take("kind")? {
        Value::String(s) => s.parse::<Kind>()?,
        _ => return Err("kind must be a string".into()),
    };
    let prev = digest_field(take("prev")?, "prev")?;
    let seq = take("seq")?.as_u64().ok_or("seq must be a non-negative integer")?;
    let t = take("t")?.as_u64().ok_or("t must be a non-negative integer")?;
    let turn = match take("turn")? {
        Value::Null => None,
        v => Some(v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or("turn must be null or a non-negative integer")?),
    };
    Ok(Event { seq, turn, t, kind, data, prev, hash })
}

fn digest_field(value: Value, name: &str) -> Result<Option<Digest>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => s.parse().map(Some).map_err(|e| format!("{name}: {e}")),
        _ => Err(format!("{name} must be a digest string or null")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::writer::LogWriter;
    use serde_json::json;

    fn sample_log(n: u64) -> Vec<u8> {
        let mut w = LogWriter::new(Vec::new());
        w.append(None, 0, Kind::RunStarted, json!({"case": "c", "run": 0})).unwrap();
        for i in 1..n - 1 {
            w.append(Some(0), i * 10, Kind::ToolExecuted, json!({"call_id": format!("c{i}"), "result": i})).unwrap();
        }
        w.append(None, n * 10, Kind::RunCompleted, json!({"status": "completed"})).unwrap();
        w.finish().unwrap().0
    }

    fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
        bytes.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn a_written_log_verifies_and_is_complete() {
        let log = sample_log(6);
        let v = verify_bytes(&log).unwrap();
        assert_eq!(v.events.len(), 6);
        assert!(v.complete);
        assert_eq!(v.head, Some(v.events[5].hash));
    }

    #[test]
    fn an_edited_byte_is_named_at_its_event() {
        let mut log = sample_log(6);
        let third_line_start = lines(&log)[..2].iter().map(Vec::len).sum::<usize>();
        let pos = third_line_start + log[third_line_start..].iter().position(|&b| b == b'"').unwrap() + 10;
        log[pos] ^= 0x01;
        assert_eq!(verify_bytes(&log).unwrap_err().seq, 2);
    }

    #[test]
    fn deleted_swapped_and_inserted_events_are_named_at_the_first_broken_seq() {
        let l = lines(&sample_log(6));
        let deleted: Vec<u8> = [&l[0][..], &l[1], &l[3], &l[4], &l[5]].concat();
        assert_eq!(verify_bytes(&deleted).unwrap_err().seq, 2);
        let swapped: Vec<u8> = [&l[0][..], &l[2], &l[1], &l[3], &l[4], &l[5]].concat();
        assert_eq!(verify_bytes(&swapped).unwrap_err().seq, 1);
        let inserted: Vec<u8> = [&l[0][..], &l[1], &l[1], &l[2], &l[3], &l[4], &l[5]].concat();
        assert_eq!(verify_bytes(&inserted).unwrap_err().seq, 2);
    }

    #[test]
    fn a_truncated_last_line_is_rejected_but_its_prefix_is_intact() {
        let log = sample_log(6);
        let cut = &log[..log.len() - 5];
        let err = verify_bytes(cut).unwrap_err();
        assert_eq!((err.seq, err.line), (5, 6));
        let l = lines(&log);
        let prefix: Vec<u8> = l[..3].concat();
        let v = verify_bytes(&prefix).unwrap();
        assert!(!v.complete);
    }

    #[test]
    fn non_canonical_spacing_is_rejected_even_with_a_valid_hash() {
        let log = sample_log(3);
        let l = lines(&log);
        let spaced = String::from_utf8(l[0].clone()).unwrap().replacen("{\"data\":", "{\"data\": ", 1);
        let bytes: Vec<u8> = [spaced.as_bytes(), &l[1], &l[2]].concat();
        let err = verify_bytes(&bytes).unwrap_err();
        assert_eq!(err.seq, 0);
        assert!(err.reason.contains("canonical"), "{}", err.reason);
    }

    proptest::proptest! {
        #[test]
        fn any_single_byte_edit_breaks_verification(n in 3u64..8, idx in 0usize..10_000, bit in 0u8..8) {
            let mut log = sample_log(n);
            let i = idx % log.len();
            log[i] ^= 1 << bit;
            proptest::prop_assert!(verify_bytes(&log).is_err());
        }
    }
}
