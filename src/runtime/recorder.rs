//! The runtime's side of the event log: a writer plus the events written so far, the
//! current turn and the virtual clock.

use serde_json::Value;

use crate::event::writer::{LogWriter, Sink, WriteError};
use crate::event::{Event, Kind};
use crate::runtime::detectors::Detectors;

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
        }
    }

    /// Watch every event with the profile's safety detectors; each finding is written as
    /// a `security_flagged` event right after the event it is about.
    pub fn with_detectors(mut self, detectors: Detectors) -> Self {
        self.detectors = Some(detectors);
        self
    }

    /// Append an event at the current turn and virtual time; returns its seq.
    pub fn emit(&mut self, kind: Kind, data: Value) -> Result<u64, WriteError> {
        if kind == Kind::TurnStarted {
            self.turn_offsets.push(self.writer.offset());
        }
        let event = self.writer.append(self.turn, self.clock, kind, data)?;
        let seq = event.seq;
        let findings = self.detectors.as_mut().map(|d| d.observe(&event)).unwrap_or_default();
        self.events.push(event);
        for finding in findings {
            let flagged = self.writer.append(self.turn, self.clock, Kind::SecurityFlagged, finding)?;
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

    /// Flush and fsync; returns the events and the turn offsets.
    pub fn finish(self) -> Result<(Vec<Event>, Vec<u64>), WriteError> {
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
