//! The runtime's side of the event log: a writer plus the events written so far, the
//! current turn and the virtual clock.
//!
//! A recorder may hold back the run's `run_completed` ([`Recorder::holding_completion`]):
//! the runner then grades the run over its events with that last event previewed
//! ([`Recorder::before_completion`]), writes what custom graders and judges were asked
//! and answered ([`Recorder::emit_grading`]), and only then the held `run_completed`,
//! so the log still ends with it and its chain covers the grading. A run graded without
//! calls out writes exactly the bytes it would have written without holding.

use crate::agent::detectors::Detectors;
use crate::event::payload::{Rendered, Written};
use crate::event::writer::{LogWriter, Sink, WriteError};
use crate::event::{Event, Kind};

impl Sink for Box<dyn Sink + Send> {
    fn sync(&mut self) -> std::io::Result<()> {
        (**self).sync()
    }
}

pub struct Recorder {
    writer: LogWriter<Box<dyn Sink + Send>>,
    events: Vec<Event>,
    turn: Option<u32>,
    /// Virtual milliseconds: advanced by recorded latencies and injected delays only.
    clock: u64,
    /// Byte offset of each `turn_started` line, by turn (the store's seek index).
    turn_offsets: Vec<u64>,
    /// Safety detectors that watch every event written.
    detectors: Option<Detectors>,
    /// Hold back `run_completed` until [`Recorder::finish`].
    hold: bool,
    held: Option<Held>,
}

/// A `run_completed` not yet written: its data's canonical bytes.
struct Held {
    turn: Option<u32>,
    t: u64,
    data: Vec<u8>,
}

impl Recorder {
    pub fn new(sink: Box<dyn Sink + Send>) -> Self {
        Recorder {
            writer: LogWriter::new(sink),
            events: Vec::new(),
            turn: None,
            clock: 0,
            turn_offsets: Vec::new(),
            detectors: None,
            hold: false,
            held: None,
        }
    }

    /// Room for about `events` events, so a long run's event list is not copied each
    /// time it doubles (each copy left the old list's pages resident: a long case's
    /// peak memory held them all). Room that is never written costs no memory.
    /// Capped at a million events (128 MB of room), so a huge recording does not ask
    /// for an address range out of proportion.
    pub fn expecting(mut self, events: usize) -> Self {
        self.events.reserve(events.min(1 << 20));
        self
    }

    /// Hold the run's `run_completed` back until [`Recorder::finish`], so grading events
    /// can be written before it (see the module doc).
    pub fn holding_completion(mut self) -> Self {
        self.hold = true;
        self
    }

    /// Watch every event with the profile's safety detectors; each finding is written as
    /// a `security_flagged` event right after the event it is about.
    pub fn with_detectors(mut self, detectors: Detectors) -> Self {
        self.detectors = Some(detectors);
        self
    }

    /// Append an event of `data`'s kind, its data written by `data`'s writer
    /// ([`payload::write`]), at the current turn and virtual time; returns its seq. A
    /// held `run_completed` is written first if anything but grading follows it, so the
    /// agent's own order is never changed.
    pub fn emit<W: Written>(&mut self, data: &W) -> Result<u64, WriteError> {
        self.release()?;
        if W::KIND == Kind::RunCompleted && self.hold {
            let mut bytes = Vec::new();
            data.write(&mut bytes).map_err(|source| self.canon_error(W::KIND, source))?;
            self.held = Some(Held { turn: self.turn, t: self.clock, data: bytes });
            return Ok(self.next_seq());
        }
        self.append(data)
    }

    /// Append a grading event (`grader_called`, `judge_called`, `judge_verdict`),
    /// written when it was graded, before a held `run_completed`.
    pub fn emit_grading(&mut self, event: &Rendered) -> Result<u64, WriteError> {
        match &event.data {
            Ok(data) => self.append_canonical(event.kind, data.as_bytes()),
            Err(source) => Err(self.canon_error(event.kind, source.clone())),
        }
    }

    fn canon_error(&self, kind: Kind, source: crate::canon::CanonError) -> WriteError {
        WriteError::Canon { seq: self.writer.events_written(), kind, source }
    }

    /// Run `grade` over the events so far, with a held `run_completed` previewed as the
    /// last of them exactly as it will be written if nothing is written before it.
    pub fn before_completion<T>(&mut self, grade: impl FnOnce(&[Event]) -> T) -> Result<T, WriteError> {
        let Some(held) = &self.held else {
            return Ok(grade(&self.events));
        };
        let preview = self.writer.preview(held.turn, held.t, Kind::RunCompleted, &held.data);
        self.events.push(preview);
        let out = grade(&self.events);
        self.events.pop();
        Ok(out)
    }

    /// Write a held `run_completed`.
    fn release(&mut self) -> Result<(), WriteError> {
        if let Some(held) = self.held.take() {
            let (turn, clock) = (self.turn, self.clock);
            (self.turn, self.clock) = (held.turn, held.t);
            let written = self.append_canonical(Kind::RunCompleted, &held.data);
            (self.turn, self.clock) = (turn, clock);
            written?;
        }
        Ok(())
    }

    /// Append an event whose data `data`'s writer writes straight into the log's line,
    /// then what the detectors find in it.
    fn append<W: Written>(&mut self, data: &W) -> Result<u64, WriteError> {
        let offset = self.writer.offset();
        let event = self.writer.append_written(self.turn, self.clock, data)?;
        self.appended(event, offset)
    }

    /// Append an event whose data is `canonical`, then what the detectors find in it.
    fn append_canonical(&mut self, kind: Kind, canonical: &[u8]) -> Result<u64, WriteError> {
        let offset = self.writer.offset();
        let event = self.writer.append_canonical(self.turn, self.clock, kind, canonical);
        self.appended(event, offset)
    }

    /// Keep `event`, appended at `offset`, and append what the detectors find in it.
    fn appended(&mut self, event: Event, offset: u64) -> Result<u64, WriteError> {
        if event.kind == Kind::TurnStarted {
            self.turn_offsets.push(offset);
        }
        let seq = event.seq;
        let findings = self.detectors.as_mut().map(|d| d.observe(&event)).unwrap_or_default();
        self.events.push(event);
        for finding in findings {
            let flagged = self.writer.append_written(self.turn, self.clock, &finding.data())?;
            self.events.push(flagged);
        }
        Ok(seq)
    }

    pub fn event(&self, seq: u64) -> &Event {
        &self.events[seq as usize]
    }

    pub fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    pub fn turn(&self) -> Option<u32> {
        self.turn
    }

    pub fn set_turn(&mut self, turn: Option<u32>) {
        self.turn = turn;
    }

    pub fn advance(&mut self, ms: u64) {
        self.clock += ms;
    }

    pub fn now(&self) -> u64 {
        self.clock
    }

    /// Write buffered lines (turn boundary).
    pub fn flush(&mut self) -> Result<(), WriteError> {
        Ok(self.writer.flush()?)
    }

    /// A turn boundary of a turn that waited on nothing outside the process: write the
    /// buffered lines when enough are pending or enough time has passed (see
    /// [`LogWriter::flush_if_due`]).
    pub fn turn_ended(&mut self) -> Result<(), WriteError> {
        Ok(self.writer.flush_if_due()?)
    }

    /// Write a held `run_completed`, flush and sync the sink; returns the events and the turn
    /// offsets.
    pub fn finish(mut self) -> Result<(Vec<Event>, Vec<u64>), WriteError> {
        self.release()?;
        self.writer.finish()?;
        Ok((self.events, self.turn_offsets))
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    pub fn turn_offsets(&self) -> &[u64] {
        &self.turn_offsets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::payload::{Out, write};

    fn run(rec: &mut Recorder) {
        rec.emit(&write::RunStarted {
            case: "c".into(),
            run: Out::Absent,
            agent: Out::Absent,
            dataset_line: Out::Absent,
            profile: Out::Absent,
            tools: Out::Absent,
            recording: Out::Absent,
            sandbox: Out::Absent,
            dataset: Out::Absent,
            runtime: Out::Absent,
            imported: Out::Absent,
            system: Out::Absent,
            declared_tools: Out::Absent,
            source: Out::Absent,
        })
        .unwrap();
        rec.set_turn(Some(0));
        rec.emit(&write::TurnCompleted { turn: 0u32.into(), response: "hi".into(), absent: Out::Absent }).unwrap();
        rec.set_turn(None);
        rec.emit(&write::RunCompleted { status: "completed".into(), turns: 1u64.into(), tokens: 0u64.into() }).unwrap();
    }

    #[test]
    fn a_held_completion_graded_without_calls_writes_the_log_it_would_have_written() {
        let mut plain = Recorder::new(Box::new(Vec::new()));
        run(&mut plain);
        let mut held = Recorder::new(Box::new(Vec::new())).holding_completion();
        run(&mut held);
        // the preview is the very event that is then written
        let previewed = held.before_completion(|events| events.last().cloned()).unwrap().unwrap();
        let (plain, _) = plain.finish().unwrap();
        let (held, _) = held.finish().unwrap();
        assert_eq!(plain, held);
        assert_eq!(previewed, *held.last().unwrap());
    }

    #[test]
    fn grading_events_go_before_the_held_completion_and_the_chain_covers_them() {
        let mut rec = Recorder::new(Box::new(Vec::new())).holding_completion();
        run(&mut rec);
        assert_eq!(rec.before_completion(|events| events.len()).unwrap(), 3);
        let verdict = write::JudgeVerdict {
            target: Out::Absent,
            judge: Out::Absent,
            request_hash: Out::Absent,
            votes: Out::Absent,
            reduce: Out::Absent,
            value: Out::Absent,
            passed: true.into(),
        };
        rec.emit_grading(&Rendered::of(&verdict)).unwrap();
        let (events, _) = rec.finish().unwrap();
        let kinds: Vec<Kind> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![Kind::RunStarted, Kind::TurnCompleted, Kind::JudgeVerdict, Kind::RunCompleted]);
        // the completion is hashed over the grading event's hash: the chain runs through it
        let unhashed = crate::event::Unhashed::of(&events[3], Some(&events[2].hash));
        assert_eq!(unhashed.encode().1, events[3].hash);
        assert_eq!(events[3].seq, 3);
    }

    #[test]
    fn an_event_after_a_held_completion_keeps_the_agents_order() {
        let mut rec = Recorder::new(Box::new(Vec::new())).holding_completion();
        run(&mut rec);
        let late = write::Error {
            kind: "late".into(),
            message: Out::Absent,
            code: Out::Absent,
            at: Out::Absent,
            source: Out::Absent,
        };
        rec.emit(&late).unwrap();
        let (events, _) = rec.finish().unwrap();
        assert_eq!(events[2].kind, Kind::RunCompleted);
        assert_eq!(events[3].kind, Kind::Error);
    }
}
