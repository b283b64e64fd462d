//! Chain and canonical-form verification.
//!
//! Each line is re-encoded from its parsed fields with the writer's own encoder; the
//! line must equal that encoding byte for byte (canonical form and hash at once), its
//! `seq` must equal its position and its `prev` the previous line's hash. The first line
//! that fails is reported by position, so an edit, a deleted, swapped or inserted event
//! and a truncated last line are all named at the first `seq` they break; so is any
//! event after `run_completed`. What the chain alone cannot show — a lost tail cut at a
//! line boundary, a log re-chained from an edit — the run manifest does
//! (`crate::evidence`).

use std::io::BufRead;

use serde_json::Value;

use super::{CheckError, Data, Event, Kind, Unhashed, scan};
use crate::canon::{self, Digest};

/// A log whose every line verified.
#[derive(Debug)]
pub struct Verified {
    pub events: Vec<Event>,
    /// Hash of the last event (the log's head); `None` for an empty log.
    pub head: Option<Digest>,
    /// The log ends with `run_completed`. A run killed mid-way leaves `false`.
    pub complete: bool,
}

/// What a streamed verification keeps: counts and the head, never the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub events: u64,
    pub head: Option<Digest>,
    pub complete: bool,
    /// Bytes of whole, verified lines (where a torn tail would be cut).
    pub bytes: u64,
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
    /// The last line has no terminating newline: a write cut short (a torn tail), which
    /// a reader may drop; every line before it verified.
    pub torn: bool,
}

/// An event as verification sees it without its data: what `verify`, `reindex` and
/// `merge` need, read by [`Chain::push_envelope`] without parsing the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub seq: u64,
    pub turn: Option<u32>,
    pub t: u64,
    pub kind: Kind,
    pub hash: Digest,
}

impl Envelope {
    fn of(event: &Event) -> Self {
        Envelope { seq: event.seq, turn: event.turn, t: event.t, kind: event.kind, hash: event.hash }
    }
}

/// Verifies a log line by line, keeping only the previous hash: memory does not grow
/// with the log. The writer and this check share one encoder ([`Unhashed::encode`]).
#[derive(Debug, Default)]
pub struct Chain {
    position: u64,
    prev: Option<Digest>,
    complete: bool,
    bytes: u64,
    /// Reused for each line's canonical pieces.
    scratch: Vec<u8>,
}

impl Chain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Verify the next line (without its newline) and return its event. A line already
    /// in canonical form is checked where it lies and its data kept as the bytes it has
    /// ([`scan`]); any other line — and every line that fails — is parsed, re-encoded
    /// and compared ([`push_parsed`](Self::push_parsed)), which decides it and names
    /// what is wrong. Both accept the same lines.
    pub fn push(&mut self, line: &[u8]) -> Result<Event, VerifyError> {
        if let Some(s) = self.scanned(line) {
            self.accept(s.hash, s.kind, line);
            let data = Data::from_canonical(&line[s.data]);
            return Ok(Event { seq: s.seq, turn: s.turn, t: s.t, kind: s.kind, data, hash: s.hash });
        }
        self.push_parsed(line)
    }

    /// The line scanned, when the scanner vouches for it and it continues the chain.
    fn scanned(&self, line: &[u8]) -> Option<scan::Scanned> {
        let s = scan::scan(line).filter(|_| !self.complete)?;
        (s.seq == self.position && s.prev == self.prev && s.hash == s.computed).then_some(s)
    }

    /// The full check of one line: parse it, re-encode its fields with the writer's
    /// encoder and compare bytes.
    fn push_parsed(&mut self, line: &[u8]) -> Result<Event, VerifyError> {
        let position = self.position;
        let fail = |reason: String| VerifyError { line: position as usize + 1, seq: position, reason, torn: false };
        if self.complete {
            return Err(fail("an event after run_completed (nothing is written once a run has ended)".into()));
        }
        let (event, prev, data) = parse_parts(line).map_err(fail)?;
        if event.seq != self.position {
            return Err(fail(format!(
                "expected seq {}, found seq {} (an event is missing, inserted or out of order)",
                self.position, event.seq
            )));
        }
        if prev != self.prev {
            return Err(fail("prev does not match the previous event's hash (the chain is broken)".into()));
        }
        let canonical = canon::to_canonical(&data).map_err(|e| fail(e.to_string()))?;
        let unhashed = Unhashed {
            seq: event.seq,
            turn: event.turn,
            t: event.t,
            kind: event.kind,
            data: &canonical,
            prev: prev.as_ref(),
        };
        match unhashed.check_line(line, &mut self.scratch) {
            Ok(hash) if hash == event.hash => {}
            Ok(_) | Err(CheckError::Hash) => {
                return Err(fail("hash does not match the event's content (the event was edited)".into()));
            }
            Err(CheckError::NotCanonical) => return Err(fail("not in RFC 8785 canonical form".into())),
        }
        self.accept(event.hash, event.kind, line);
        Ok(Event { data: Data::from_canonical(&canonical), ..event })
    }

    /// Verify the next line as [`push`](Self::push) does, and return only its envelope,
    /// without copying its data.
    pub fn push_envelope(&mut self, line: &[u8]) -> Result<Envelope, VerifyError> {
        if let Some(s) = self.scanned(line) {
            self.accept(s.hash, s.kind, line);
            return Ok(Envelope { seq: s.seq, turn: s.turn, t: s.t, kind: s.kind, hash: s.hash });
        }
        self.push_parsed(line).map(|event| Envelope::of(&event))
    }

    fn accept(&mut self, hash: Digest, kind: Kind, line: &[u8]) {
        self.prev = Some(hash);
        self.complete = kind == Kind::RunCompleted;
        self.position += 1;
        self.bytes += line.len() as u64 + 1;
    }

    /// The error for the current position.
    fn error(&self, reason: String) -> VerifyError {
        VerifyError { line: self.position as usize + 1, seq: self.position, reason, torn: false }
    }

    /// The error for a last line without its newline.
    fn torn(&self) -> VerifyError {
        VerifyError { torn: true, ..self.error("truncated line: no terminating newline (a torn tail)".into()) }
    }

    pub fn summary(&self) -> Summary {
        Summary { events: self.position, head: self.prev, complete: self.complete, bytes: self.bytes }
    }
}

/// Why a streamed log did not verify.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(#[from] VerifyError),
}

/// Verify a log from a reader, one line in memory at a time; `visit` sees each event
/// with its line as it verifies (`show` prints them).
pub fn verify_stream<R: BufRead>(reader: R, visit: impl FnMut(&Event, &[u8])) -> Result<Summary, StreamError> {
    whole(stream_lines(reader, Chain::push, visit)?)
}

/// Like [`verify_stream`], but a last line without its newline — the torn tail a
/// writer killed inside a `write` leaves — ends the log instead of failing it: the
/// summary covers the whole lines, and the torn bytes are counted beside it. Every
/// whole line must still verify.
pub fn verify_stream_whole_lines<R: BufRead>(
    reader: R,
    visit: impl FnMut(&Event, &[u8]),
) -> Result<(Summary, u64), StreamError> {
    stream_lines(reader, Chain::push, visit)
}

/// [`verify_stream`] for a reader that needs no event's data (`verify`, `reindex`,
/// `merge`): the same lines pass and fail, at a fraction of the cost
/// ([`Chain::push_envelope`]).
pub fn verify_envelopes<R: BufRead>(reader: R, visit: impl FnMut(&Envelope, &[u8])) -> Result<Summary, StreamError> {
    whole(stream_lines(reader, Chain::push_envelope, visit)?)
}

/// [`verify_stream_whole_lines`] without the events' data.
pub fn verify_envelopes_whole_lines<R: BufRead>(
    reader: R,
    visit: impl FnMut(&Envelope, &[u8]),
) -> Result<(Summary, u64), StreamError> {
    stream_lines(reader, Chain::push_envelope, visit)
}

/// A torn tail is an error for a reader that wants every line.
fn whole((summary, torn): (Summary, u64)) -> Result<Summary, StreamError> {
    if torn == 0 {
        return Ok(summary);
    }
    let chain = Chain { position: summary.events, ..Chain::default() };
    Err(chain.torn().into())
}

fn stream_lines<R: BufRead, T>(
    mut reader: R,
    mut step: impl FnMut(&mut Chain, &[u8]) -> Result<T, VerifyError>,
    mut visit: impl FnMut(&T, &[u8]),
) -> Result<(Summary, u64), StreamError> {
    let mut chain = Chain::new();
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok((chain.summary(), 0));
        }
        let Some(body) = line.strip_suffix(b"\n") else {
            return Ok((chain.summary(), line.len() as u64));
        };
        let item = step(&mut chain, body)?;
        visit(&item, &line);
    }
}

/// Verify a whole log held in memory, keeping its events.
pub fn verify_bytes(bytes: &[u8]) -> Result<Verified, VerifyError> {
    let mut events = Vec::new();
    let mut chain = Chain::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(i) = rest.iter().position(|&b| b == b'\n') else {
            return Err(chain.torn());
        };
        events.push(chain.push(&rest[..i])?);
        rest = &rest[i + 1..];
    }
    let Summary { head, complete, .. } = chain.summary();
    Ok(Verified { events, head, complete })
}

/// The envelope as a line holds it; strings borrow from the line where they can.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    data: Value,
    #[serde(borrow)]
    hash: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    prev: Option<std::borrow::Cow<'a, str>>,
    seq: Value,
    t: Value,
    turn: Value,
}

/// Parse one line into an event without checking the chain or its form: the envelope
/// (its data empty), the `prev` it states and the data as parsed.
fn parse_parts(line: &[u8]) -> Result<(Event, Option<Digest>, Value), String> {
    let parsed: Line<'_> = serde_json::from_slice(line).map_err(|e| describe(&e))?;
    let hash = digest_text(parsed.hash.as_deref(), "hash")?.ok_or("hash must not be null")?;
    let kind = parsed.kind.parse::<Kind>()?;
    let prev = digest_text(parsed.prev.as_deref(), "prev")?;
    let seq = parsed.seq.as_u64().ok_or("seq must be a non-negative integer")?;
    let t = parsed.t.as_u64().ok_or("t must be a non-negative integer")?;
    let turn = match parsed.turn {
        Value::Null => None,
        v => Some(v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or("turn must be null or a non-negative integer")?),
    };
    let empty = Data::from_canonical(b"{}");
    Ok((Event { seq, turn, t, kind, data: empty, hash }, prev, parsed.data))
}

/// Parse one line into an event, its data canonicalised, checking nothing else: not the
/// chain, not the hash, not the line's form (tests forge lines from it).
pub fn parse_line(line: &[u8]) -> Result<Event, String> {
    parse_line_and_prev(line).map(|(event, _)| event)
}

/// [`parse_line`] with the `prev` the line states, which an [`Event`] does not keep.
pub(crate) fn parse_line_and_prev(line: &[u8]) -> Result<(Event, Option<Digest>), String> {
    let (event, prev, data) = parse_parts(line)?;
    let bytes = canon::to_canonical(&data).map_err(|e| e.to_string())?;
    Ok((Event { data: Data::from_canonical(&bytes), ..event }, prev))
}

/// serde's message in the log's own words: which field, and JSON errors as such.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = text.split(" at line ").next().unwrap_or(&text).to_string();
    if let Some(field) = text.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
        return format!("missing field \"{field}\"");
    }
    if let Some(rest) = text.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or_default();
        return format!("unexpected field \"{field}\"");
    }
    if e.is_data() {
        return format!("expected a JSON object of an event: {text}");
    }
    format!("not valid JSON: {text}")
}

fn digest_text(text: Option<&str>, name: &str) -> Result<Option<Digest>, String> {
    text.map(|s| s.parse().map_err(|e| format!("{name}: {e}"))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon;
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
        assert!(err.torn, "a cut inside the last line is a torn tail");
    }

    #[test]
    fn an_event_appended_after_run_completed_is_rejected() {
        let log = sample_log(4);
        let l = lines(&log);
        // a forged copy of the first event, re-chained onto the completed log
        let mut w = LogWriter::new(Vec::new());
        for line in &l {
            let e = parse_line(&line[..line.len() - 1]).unwrap();
            w.append_data(e.turn, e.t, e.kind, e.data);
        }
        w.append(None, 99, Kind::ToolExecuted, json!({"call_id": "forged"})).unwrap();
        let forged = w.finish().unwrap().0;
        let err = verify_bytes(&forged).unwrap_err();
        assert_eq!(err.seq, 4);
        assert!(err.reason.contains("after run_completed"), "{}", err.reason);
    }

    #[test]
    fn streaming_and_in_memory_verification_agree() {
        let log = sample_log(7);
        let mut seen = 0;
        let summary = verify_stream(&log[..], |_, _| seen += 1).unwrap();
        let whole = verify_bytes(&log).unwrap();
        assert_eq!((summary.events, summary.head, summary.complete), (7, whole.head, true));
        assert_eq!((seen, summary.bytes), (7, log.len() as u64));
        let torn = verify_stream(&log[..log.len() - 3], |_, _| {}).unwrap_err();
        assert!(matches!(torn, StreamError::Invalid(VerifyError { torn: true, seq: 6, .. })));
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

        /// Reading envelopes only (`verify`, `reindex`, `merge`) passes and fails exactly
        /// the logs reading whole events does, naming the same line and reason: a byte
        /// flipped, a line dropped, repeated or moved, or an event forged after the end.
        #[test]
        fn envelope_and_event_verification_agree_on_edited_logs(
            n in 3u64..8,
            how in 0u8..8,
            a in 0usize..10_000,
            b in 0usize..10_000,
            bit in 0u8..8,
        ) {
            let log = sample_log(n);
            let mut l = lines(&log);
            let (i, j) = (a % l.len(), b % l.len());
            match how {
                0 => {
                    let flat = &mut l[i];
                    let at = b % flat.len();
                    flat[at] ^= 1 << bit;
                }
                1 => { l.remove(i); }
                2 => { let copy = l[i].clone(); l.insert(j, copy); }
                3 => l.swap(i, j),
                4 => { let first = l[0].clone(); l.push(first); }
                // forged and re-hashed, so only the rules the hash cannot carry catch them:
                // a line chained onto its predecessor but numbered one too high …
                5 => {
                    let prev = parse_line(&l[i][..l[i].len() - 1]).unwrap().hash;
                    let next = (i + 1) % l.len();
                    let e = parse_line(&l[next][..l[next].len() - 1]).unwrap();
                    let forged = Unhashed { seq: e.seq + 1, ..Unhashed::of(&e, Some(&prev)) };
                    let mut line = forged.encode().0;
                    line.push(b'\n');
                    l[next] = line;
                }
                // … a line of the right number chained onto the wrong predecessor …
                6 => {
                    let next = (i + 1) % l.len();
                    let e = parse_line(&l[next][..l[next].len() - 1]).unwrap();
                    let wrong = canon::digest(canon::Context::Event, b"not the previous line");
                    let forged = Unhashed::of(&e, Some(&wrong));
                    let mut line = forged.encode().0;
                    line.push(b'\n');
                    l[next] = line;
                }
                // … and an event properly chained after run_completed
                _ => {
                    let mut w = LogWriter::new(Vec::new());
                    for line in &l {
                        let e = parse_line(&line[..line.len() - 1]).unwrap();
                        w.append_data(e.turn, e.t, e.kind, e.data);
                    }
                    w.append(None, 99, Kind::ToolExecuted, json!({"call_id": "forged"})).unwrap();
                    l = lines(&w.finish().unwrap().0);
                }
            }
            let edited = l.concat();
            let events = verify_stream(&edited[..], |_, _| {});
            let envelopes = verify_envelopes(&edited[..], |_, _| {});
            match (events, envelopes) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
                (Err(StreamError::Invalid(a)), Err(StreamError::Invalid(b))) => proptest::prop_assert_eq!(a, b),
                (a, b) => proptest::prop_assert!(false, "events: {:?}, envelopes: {:?}", a, b),
            }
        }
    }
}
