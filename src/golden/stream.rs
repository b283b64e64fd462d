//! The golden diff of two log files, read as streams (`stateval diff`).
//!
//! Each log is verified and put in golden form on its own thread, one line at a time,
//! and handed over turn by turn. Turns that are identical in both logs — the same
//! seqs, kinds, tools, elapsed time and data — are compared as they arrive and left
//! out, keeping only the [`CONTEXT`] events a rendered hunk shows on either side of a
//! difference. From the first turn that differs, both logs are kept to their ends and
//! aligned as [`diff`](super::diff) aligns whole logs. So memory holds the part of the
//! logs from where they first diverge (plus their first turn), not the part they
//! share: two identical 1 GB logs are diffed in a few megabytes.
//!
//! The result is the diff of the whole logs ([`diff_around`] with the left-out
//! [`Gap`]); where leaving events out could change an alignment (turns beyond
//! aligning one by one), both logs are read again whole and diffed as before.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::diff::{Diff, Gap, SEQ_REFERENCES, diff_around, elapsed};
use super::normalize::normalize_events;
use super::render::{CONTEXT, Side};
use crate::canon::Digest;
use crate::event::Event;
use crate::event::reader::{ReadError, read_log, stream_log};
use crate::event::writer::{LogWriter, WriteError};

/// Chunks in flight between a reader thread and the comparison, and events per chunk.
const IN_FLIGHT: usize = 4;
const CHUNK: usize = 512;

/// One log as the diff kept it.
#[derive(Debug)]
pub struct Kept {
    /// The events the diff's steps index: every event but those of the gap.
    pub events: Vec<Event>,
    /// Events in the whole log (in golden form).
    pub total: usize,
    /// The hash of its last event in golden form.
    pub head: Option<Digest>,
}

impl Kept {
    pub fn side<'a>(&'a self, label: &'a str) -> Side<'a> {
        Side { label, events: &self.events, total: self.total, head: self.head }
    }
}

/// The diff of two log files, with what was kept of each to render it.
#[derive(Debug)]
pub struct Streamed {
    pub diff: Diff,
    pub golden: Kept,
    pub actual: Kept,
    /// The events both logs shared and the diff left out, if any.
    pub gap: Option<Gap>,
}

/// Why a log could not be diffed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The log cannot be read or does not verify.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// A verified log that cannot be put in golden form (its data does not canonicalise).
    #[error("{path}: {source}")]
    Normalize { path: String, source: WriteError },
}

/// Which log an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSide {
    Golden,
    Actual,
}

/// Diff the logs at `golden` and `actual`, each verified first. An error names the
/// log it is about (the golden's when both fail).
pub fn diff_files(golden: &Path, actual: &Path) -> Result<Streamed, (LogSide, StreamError)> {
    let (g_tx, g_rx) = sync_channel(IN_FLIGHT);
    let (a_tx, a_rx) = sync_channel(IN_FLIGHT);
    let (kept, g_read, a_read) = std::thread::scope(|s| {
        let g = s.spawn(|| read_events(golden, g_tx));
        let a = s.spawn(|| read_events(actual, a_tx));
        let kept = keep(Cursor::new(&g_rx), Cursor::new(&a_rx));
        // a reader that panicked is a bug, not a property of the log
        (kept, g.join().expect("golden reader"), a.join().expect("actual reader"))
    });
    let g_read = g_read.map_err(|e| (LogSide::Golden, e))?;
    let a_read = a_read.map_err(|e| (LogSide::Actual, e))?;
    let Some((g_events, a_events, gap)) = kept else {
        // turns the gap would have run together (see `keep`)
        return diff_whole(golden, actual);
    };
    let diff = diff_around(&g_events, &a_events, gap);
    if gap.is_some() && !diff.coarse_turns.is_empty() {
        // an alignment that gave up may have differed with the gap's events in it
        return diff_whole(golden, actual);
    }
    Ok(Streamed {
        diff,
        golden: Kept { events: g_events, total: g_read.total, head: g_read.head },
        actual: Kept { events: a_events, total: a_read.total, head: a_read.head },
        gap,
    })
}

/// Both logs read whole and diffed, as the runner diffs a run against its golden.
fn diff_whole(golden: &Path, actual: &Path) -> Result<Streamed, (LogSide, StreamError)> {
    let whole = |path: &Path| -> Result<Kept, StreamError> {
        let events = normalize_events(read_log(path)?.events)
            .map_err(|source| StreamError::Normalize { path: path.display().to_string(), source })?;
        Ok(Kept { total: events.len(), head: events.last().map(|e| e.hash), events })
    };
    let golden = whole(golden).map_err(|e| (LogSide::Golden, e))?;
    let actual = whole(actual).map_err(|e| (LogSide::Actual, e))?;
    Ok(Streamed { diff: super::diff(&golden.events, &actual.events), golden, actual, gap: None })
}

/// What a reader saw of its whole log.
struct Read {
    total: usize,
    head: Option<Digest>,
}

/// Verify the log at `path` as a stream, put it in golden form (re-chained from seq 0
/// when it does not start there, as [`normalize_events`] does) and send it on in
/// chunks of [`CHUNK`] events.
fn read_events(path: &Path, out: SyncSender<Vec<Event>>) -> Result<Read, StreamError> {
    let mut chunk: Vec<Event> = Vec::with_capacity(CHUNK);
    let mut rechain: Option<LogWriter<std::io::Sink>> = None;
    let (mut total, mut head, mut first) = (0usize, None, true);
    stream_log(path, |e, _| {
        if std::mem::take(&mut first) && e.seq != 0 {
            rechain = Some(LogWriter::new(std::io::sink()));
        }
        let event = match rechain.as_mut() {
            None => e.clone(),
            Some(w) => w.append_data(e.turn, e.t, e.kind, e.data.clone()),
        };
        (total, head) = (total + 1, Some(event.hash));
        chunk.push(event);
        if chunk.len() == CHUNK {
            // the comparison reads both logs to their ends: a send fails only if it panicked
            let _ = out.send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK)));
        }
    })?;
    if !chunk.is_empty() {
        let _ = out.send(chunk);
    }
    Ok(Read { total, head })
}

/// One log's events as they arrive, one at a time.
struct Cursor<'a> {
    chunks: &'a Receiver<Vec<Event>>,
    chunk: std::vec::IntoIter<Event>,
    peeked: Option<Event>,
}

impl<'a> Cursor<'a> {
    fn new(chunks: &'a Receiver<Vec<Event>>) -> Self {
        Cursor { chunks, chunk: Vec::new().into_iter(), peeked: None }
    }

    fn peek(&mut self) -> Option<&Event> {
        if self.peeked.is_none() {
            self.peeked = self.next();
        }
        self.peeked.as_ref()
    }

    /// The events of the first turn (a run of events with the same `turn`).
    fn first_turn(&mut self) -> Vec<Event> {
        let mut turn: Vec<Event> = Vec::new();
        while let Some(e) = self.peek() {
            if turn.first().is_some_and(|first| first.turn != e.turn) {
                break;
            }
            turn.extend(self.next());
        }
        turn
    }

    fn rest(&mut self, into: &mut Vec<Event>) {
        into.extend(std::iter::from_fn(|| self.next()));
    }
}

impl Iterator for Cursor<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if let Some(e) = self.peeked.take() {
            return Some(e);
        }
        loop {
            if let Some(e) = self.chunk.next() {
                return Some(e);
            }
            self.chunk = self.chunks.recv().ok()?.into_iter();
        }
    }
}

/// Where the comparison is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// After a difference: this many more events are kept, for the hunk's context.
    Context(usize),
    /// Identical events are left out, bar the last few.
    Skipping,
}

/// The events left out so far, and what decides whether leaving them out is sound.
struct Left {
    gap: Gap,
    /// The turn of the event kept just before the gap.
    before: Option<u32>,
    /// The turn of the last event left out.
    last: Option<u32>,
    /// A turn ends inside the gap.
    crosses_turns: bool,
}

/// Read both logs in step, leaving out what they share (see the module doc): the
/// events each kept, and the gap; `None` when the gap would have run two turns with
/// the same number together (the turn kept after it is numbered as the one before,
/// but other turns lay between), which the runtime never writes. Reads both logs to
/// their ends, whatever they hold.
fn keep(mut golden: Cursor, mut actual: Cursor) -> Option<(Vec<Event>, Vec<Event>, Option<Gap>)> {
    let (mut kept_g, mut kept_a) = (golden.first_turn(), actual.first_turn());
    let mut head_t = (0u64, 0u64);
    let same_shape = kept_g.len() == kept_a.len() && kept_g.first().map(|e| e.turn) == kept_a.first().map(|e| e.turn);
    let head_identical = same_shape && kept_g.iter().zip(&kept_a).all(|(g, a)| identical(g, a, &mut head_t, None));
    // events of the first turn, which later references may point into
    let outside_head = (!head_identical).then_some(kept_g.len() as u64);
    let mut phase = match (same_shape, head_identical) {
        (false, _) => None,
        // one event of the next turn is kept, so the gap follows a numbered turn
        (true, true) => Some(Phase::Context(1)),
        (true, false) => Some(Phase::Context(CONTEXT + 1)),
    };
    let mut last_t = (kept_g.last().map_or(0, |e| e.t), kept_a.last().map_or(0, |e| e.t));
    // identical events not yet left out: the context before a later difference
    let mut pending: VecDeque<(Event, Event)> = VecDeque::new();
    let mut left: Option<Left> = None;
    while let Some(current) = phase {
        let (g, a) = match (golden.next(), actual.next()) {
            (Some(g), Some(a)) if identical(&g, &a, &mut last_t, outside_head) => (g, a),
            (g, a) => {
                for (pg, pa) in pending.drain(..) {
                    kept_g.push(pg);
                    kept_a.push(pa);
                }
                kept_g.extend(g);
                kept_a.extend(a);
                phase = None;
                continue;
            }
        };
        match current {
            Phase::Context(n) => {
                kept_g.push(g);
                kept_a.push(a);
                phase = Some(if n > 1 { Phase::Context(n - 1) } else { Phase::Skipping });
            }
            Phase::Skipping => {
                pending.push_back((g, a));
                if pending.len() > CONTEXT + 1 {
                    let (out, _) = pending.pop_front().expect("pending events");
                    let before = kept_g.last().and_then(|e| e.turn);
                    let l = left.get_or_insert(Left {
                        gap: Gap { seq: out.seq, len: 0 },
                        before,
                        last: before,
                        crosses_turns: false,
                    });
                    l.crosses_turns |= l.last != out.turn;
                    (l.gap.len, l.last) = (l.gap.len + 1, out.turn);
                }
            }
        }
    }
    for (pg, pa) in pending {
        kept_g.push(pg);
        kept_a.push(pa);
    }
    golden.rest(&mut kept_g);
    actual.rest(&mut kept_a);
    let Some(left) = left else { return Some((kept_g, kept_a, None)) };
    // the event kept after the gap, in either log: a difference may be right there
    let after = kept_g.get(kept_g.iter().position(|e| e.seq >= left.gap.seq)?).map(|e| e.turn);
    let crosses = left.crosses_turns || after.is_some_and(|t| t != left.last);
    if crosses && after == Some(left.before) {
        return None;
    }
    Some((kept_g, kept_a, Some(left.gap)))
}

/// An event pair the whole-log diff would align with no difference: the same seq,
/// turn, kind, elapsed time and data, and seq references that point at the same event
/// in both (outside the first turn, unless it was identical). `last_t` holds each log's
/// previous time, and moves on whatever the answer. Elapsed time is the diff's signed
/// one: the event kept after a gap is timed from the event kept before it, which is
/// the same comparison only if elapsed times over the gap add up.
fn identical(g: &Event, a: &Event, last_t: &mut (u64, u64), outside_head: Option<u64>) -> bool {
    let (gt, at) = std::mem::replace(last_t, (g.t, a.t));
    g.seq == a.seq
        && g.turn == a.turn
        && g.kind == a.kind
        && elapsed(g.t, gt) == elapsed(a.t, at)
        && g.data == a.data
        && references_outside(g, outside_head)
}

/// No seq reference in `data` points below `bound`.
fn references_outside(e: &Event, bound: Option<u64>) -> bool {
    let Some(bound) = bound else { return true };
    SEQ_REFERENCES.iter().all(|k| e.data.member(k).as_u64().is_none_or(|seq| seq >= bound))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::event::Kind;
    use crate::golden::render;

    /// One event of a test log: turn, virtual time, kind, data.
    type Spec = (Option<u32>, u64, Kind, Value);

    /// A run with one turn per entry of `shape`, holding that many of: its start, a
    /// model call, a tool call, a memory write (its `source` the tool result of a turn
    /// half as old, its `supersedes` the previous write), its end.
    fn run_of(shape: &[usize]) -> Vec<Spec> {
        let mut specs = vec![(None, 0, Kind::RunStarted, json!({"case": "c", "recording": "r1"}))];
        let (mut t, mut tools, mut last_write): (u64, Vec<u64>, Option<u64>) = (0, Vec::new(), None);
        for (turn, &events) in shape.iter().enumerate() {
            let turn = turn as u32;
            let tool = ["lookup", "transfer", "notify"][turn as usize % 3];
            t += 100;
            let all = [
                (t, Kind::TurnStarted, json!({"turn": turn, "input": format!("step {turn}")})),
                (t, Kind::ModelCalled, json!({"latency_ms": 100, "response": {"content": ""}})),
                (t, Kind::ToolExecuted, json!({"tool": tool, "call_id": format!("c{turn}")})),
                (t, Kind::MemoryWritten, Value::Null),
                (t + 50, Kind::TurnCompleted, json!({"turn": turn, "response": "ok"})),
            ];
            for (t_event, kind, data) in all.into_iter().take(events) {
                let seq = specs.len() as u64;
                let data = match kind {
                    Kind::ToolExecuted => {
                        tools.push(seq);
                        data
                    }
                    Kind::MemoryWritten => {
                        let source = tools[(tools.len() - 1) / 2];
                        let supersedes = last_write.replace(seq);
                        json!({"key": "k", "value": turn, "source": source, "supersedes": supersedes})
                    }
                    _ => data,
                };
                specs.push((Some(turn), t_event, kind, data));
                t = t.max(t_event);
            }
        }
        specs.push((None, t, Kind::RunCompleted, json!({"status": "completed"})));
        specs
    }

    fn run(turns: usize) -> Vec<Spec> {
        run_of(&vec![5; turns])
    }

    fn bytes(specs: &[Spec]) -> Vec<u8> {
        let mut w = LogWriter::new(Vec::new());
        for (turn, t, kind, data) in specs {
            w.append(*turn, *t, *kind, data.clone()).unwrap();
        }
        w.finish().unwrap().0
    }

    /// One edit of a log, at a position taken modulo its length.
    #[derive(Debug, Clone)]
    enum Edit {
        Data(usize),
        Slower(usize),
        Insert(usize),
        Delete(usize),
        Swap(usize),
        Input,
        /// An event with no turn inside the run.
        Unnumbered(usize),
    }

    fn apply(specs: &mut Vec<Spec>, edit: &Edit) {
        // the first and last events stay: run_started and run_completed frame a log
        let inner = |at: usize, n: usize| 1 + at % (n - 2).max(1);
        match *edit {
            Edit::Data(at) => {
                let at = inner(at, specs.len());
                specs[at].3["edited"] = json!(true);
            }
            Edit::Slower(at) => {
                let at = inner(at, specs.len());
                for s in &mut specs[at..] {
                    s.1 += 7;
                }
            }
            Edit::Insert(at) => {
                let at = inner(at, specs.len());
                let (turn, t) = (specs[at].0, specs[at].1);
                specs.insert(at, (turn, t, Kind::ToolExecuted, json!({"tool": "extra", "call_id": "x"})));
            }
            Edit::Delete(at) => {
                let at = inner(at, specs.len());
                if specs.len() > 3 {
                    specs.remove(at);
                }
            }
            Edit::Swap(at) => {
                let at = inner(at, specs.len());
                if at + 1 < specs.len() - 1 && specs[at].0 == specs[at + 1].0 {
                    specs.swap(at, at + 1);
                }
            }
            Edit::Input => specs[0].3["recording"] = json!("r2"),
            Edit::Unnumbered(at) => {
                let at = inner(at, specs.len());
                let t = specs[at].1;
                specs.insert(at, (None, t, Kind::ModelCalled, json!({"unnumbered": at})));
            }
        }
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            any::<usize>().prop_map(Edit::Data),
            any::<usize>().prop_map(Edit::Slower),
            any::<usize>().prop_map(Edit::Insert),
            any::<usize>().prop_map(Edit::Delete),
            any::<usize>().prop_map(Edit::Swap),
            Just(Edit::Input),
            any::<usize>().prop_map(Edit::Unnumbered),
        ]
    }

    /// Both renderings of the streamed diff and of the whole-log diff of two logs.
    fn rendered(golden: &[u8], actual: &[u8]) -> ((String, String), (String, String), Option<Gap>) {
        let dir = tempfile::tempdir().unwrap();
        let (g_path, a_path) = (dir.path().join("g.jsonl"), dir.path().join("a.jsonl"));
        std::fs::write(&g_path, golden).unwrap();
        std::fs::write(&a_path, actual).unwrap();
        let render = |s: &Streamed| {
            let (g, a) = (s.golden.side("g"), s.actual.side("a"));
            (render::text(&s.diff, &g, &a), render::json(&s.diff, &g, &a).unwrap())
        };
        let streamed = diff_files(&g_path, &a_path).unwrap();
        let whole = diff_whole(&g_path, &a_path).unwrap();
        (render(&streamed), render(&whole), streamed.gap)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// What is left out never shows: the streamed diff renders byte for byte what
        /// the diff of the whole logs renders, text and JSON.
        #[test]
        fn a_streamed_diff_renders_exactly_the_whole_logs_diff(
            shape in prop::collection::vec(1usize..=5, 1..40),
            golden_edits in prop::collection::vec(edit(), 0..3),
            actual_edits in prop::collection::vec(edit(), 0..4),
        ) {
            let mut golden = run_of(&shape);
            golden_edits.iter().for_each(|e| apply(&mut golden, e));
            let mut actual = golden.clone();
            actual_edits.iter().for_each(|e| apply(&mut actual, e));
            let (golden, actual) = (bytes(&golden), bytes(&actual));
            let (streamed, whole, _) = rendered(&golden, &actual);
            prop_assert_eq!(&streamed, &whole);
            // and it is exact: identical only when the logs are
            let said: Value = serde_json::from_str(&streamed.1).unwrap();
            prop_assert_eq!(said["identical"].as_bool(), Some(golden == actual), "{}", streamed.0);
        }
    }

    #[test]
    fn a_delay_hidden_where_the_clock_goes_back_is_found_not_left_out() {
        // proptest's saved case (proptest-regressions/golden/stream.txt): in the golden a
        // swap puts turn 3's turn_completed (t 500) before its memory write (t 450) and an
        // inserted tool call (t 450) follows; the actual log is 7 ms slower from that
        // tool call on (seq 13). Elapsed time clamped at zero saw 0 = 0 at seq 13, so the
        // whole-log diff said identical and the streamed one left seq 13 in its gap, then
        // timed seq 105 from seq 1 across the gap and found 3650 ms against 3657.
        let shape =
            [1, 2, 5, 5, 4, 5, 2, 3, 1, 2, 3, 3, 4, 5, 4, 3, 4, 2, 5, 1, 3, 2, 4, 5, 1, 4, 3, 3, 5, 2, 1, 1, 4, 4];
        let mut golden = run_of(&shape);
        apply(&mut golden, &Edit::Swap(8316004543910476483));
        apply(&mut golden, &Edit::Insert(88345742020253846));
        let mut actual = golden.clone();
        apply(&mut actual, &Edit::Slower(11171936024533077654));
        // the shape the comment describes
        assert_eq!((golden[12].1, golden[13].1, actual[12].1, actual[13].1), (500, 450, 500, 457));
        assert_eq!((golden[12].2, golden[13].2), (Kind::TurnCompleted, Kind::ToolExecuted));
        assert!(golden[..13].iter().zip(&actual).all(|(g, a)| g == a) && golden.len() == actual.len());
        let (streamed, whole, _) = rendered(&bytes(&golden), &bytes(&actual));
        assert_eq!(streamed, whole);
        assert!(!streamed.0.contains("identical"), "{}", streamed.0);
        assert!(
            streamed
                .0
                .contains("first divergence: seq 13 (turn 3, tool_executed extra): payload changed at /t: 450 → 457"),
            "{}",
            streamed.0
        );
        assert!(streamed.0.contains("1 difference (1 payload changed)"), "{}", streamed.0);
    }

    #[test]
    fn identical_logs_keep_only_their_first_turn_and_the_last_few_events() {
        let log = bytes(&run(200));
        let (streamed, whole, gap) = rendered(&log, &log);
        assert_eq!(streamed, whole);
        assert!(streamed.0.contains("identical: 1002 events"), "{}", streamed.0);
        let gap = gap.expect("identical turns left out");
        // the first turn (run_started), one event of the next, and CONTEXT + 1 at the end
        assert_eq!(gap.seq, 2);
        assert_eq!(1002 - gap.len as usize, 2 + CONTEXT + 1);
    }

    #[test]
    fn one_long_turn_is_left_out_too() {
        let mut specs = run(1);
        let at = specs.len() - 2;
        for n in 0..5000u64 {
            specs.insert(at, (Some(0), 100 + n, Kind::ModelCalled, json!({"latency_ms": 1, "n": n})));
        }
        let mut actual = specs.clone();
        actual[at + 4000].3["n"] = json!("changed");
        let (streamed, whole, gap) = rendered(&bytes(&specs), &bytes(&actual));
        assert_eq!(streamed, whole);
        assert!(streamed.0.contains("first divergence: seq 4005"), "{}", streamed.0);
        assert!(gap.expect("a gap").len > 3900);
    }

    #[test]
    fn a_gap_that_would_run_two_turns_together_is_not_taken() {
        // turn 0, unnumbered events, then turn 0 again: leaving out the middle would
        // make one turn of two
        let mut specs = vec![(None, 0, Kind::RunStarted, json!({"case": "c"}))];
        for (turn, n) in [(Some(0), 10), (None, 10), (Some(0), 10)] {
            specs.extend((0..n).map(|i| (turn, 0, Kind::ModelCalled, json!({"i": i}))));
        }
        specs.push((None, 0, Kind::RunCompleted, json!({"status": "completed"})));
        let log = bytes(&specs);
        let (streamed, whole, gap) = rendered(&log, &log);
        assert_eq!(streamed, whole);
        assert_eq!(gap, None, "read whole instead");
    }

    #[test]
    fn logs_that_part_late_keep_what_follows_the_parting_and_its_context() {
        let golden = run(200);
        let mut actual = golden.clone();
        apply(&mut actual, &Edit::Data(900));
        let (streamed, whole, gap) = rendered(&bytes(&golden), &bytes(&actual));
        assert_eq!(streamed, whole);
        assert!(streamed.0.contains("payload_changed") || streamed.0.contains("first divergence"), "{}", streamed.0);
        let gap = gap.expect("the shared turns left out");
        assert!(gap.len > 850, "left out only {} events", gap.len);
    }

    #[test]
    fn a_log_that_does_not_verify_is_named_and_nothing_is_diffed() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.jsonl");
        let bad = dir.path().join("bad.jsonl");
        let log = bytes(&run(3));
        std::fs::write(&good, &log).unwrap();
        let mut edited = String::from_utf8(log).unwrap();
        edited = edited.replacen("step 1", "step 9", 1);
        std::fs::write(&bad, edited).unwrap();
        match diff_files(&good, &bad) {
            Err((LogSide::Actual, StreamError::Read(ReadError::Invalid { .. }))) => {}
            other => panic!("expected the actual log refused, got {other:?}"),
        }
        match diff_files(&bad, &bad) {
            Err((LogSide::Golden, StreamError::Read(ReadError::Invalid { .. }))) => {}
            other => panic!("expected the golden log refused first, got {other:?}"),
        }
    }
}
