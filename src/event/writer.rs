//! The log writer: one per run, appending canonical hash-chained lines.
//!
//! Lines are buffered in memory and written whole at turn boundaries ([`LogWriter::flush`]),
//! never from a half-full buffer, so a process killed mid-run leaves only complete lines
//! and a prefix that verifies. A boundary may also keep its lines for a later one
//! ([`LogWriter::flush_if_due`]): a replayed turn takes well under a millisecond, and a
//! `write` for each was about a tenth of a run's time. [`LogWriter::finish`] flushes and
//! syncs the sink (a run's log files leave their fsync to the run's end:
//! `runner::syncer`).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::payload::Written;
use super::{Data, Event, Kind, LINE_OPEN, Unhashed};
use crate::canon::{self, CanonError, Digest};

/// Where log bytes go: a file (fsync'd at the end, or noted for the run's syncer) or
/// memory (tests, benchmarks).
pub trait Sink: Write {
    fn sync(&mut self) -> io::Result<()>;
}

impl Sink for File {
    fn sync(&mut self) -> io::Result<()> {
        self.sync_all()
    }
}

impl Sink for Vec<u8> {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Discards bytes but still canonicalises and hashes (used when only the head matters).
impl Sink for io::Sink {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("event {seq} ({kind}): {source}")]
    Canon { seq: u64, kind: Kind, source: CanonError },
    #[error("writing the event log: {0}")]
    Io(#[from] io::Error),
}

/// [`LogWriter::flush_if_due`] writes once this much is pending …
pub const WRITE_AT_BYTES: usize = 64 * 1024;
/// … or this long after the last write.
pub const WRITE_AFTER: Duration = Duration::from_millis(100);

pub struct LogWriter<S: Sink> {
    sink: S,
    pending: Vec<u8>,
    /// When lines last reached the sink (or the writer was made).
    written_at: Instant,
    /// Reused for the canonical bytes of each `Value` appended.
    data_scratch: Vec<u8>,
    /// Reused (reset) to hash each line.
    digester: canon::Digester,
    seq: u64,
    prev: Option<Digest>,
    /// The hex of `prev`'s hash, written into the next line's `prev`.
    prev_hex: [u8; 64],
    /// Bytes appended so far (flushed or pending): the offset of the next line.
    offset: u64,
}

impl LogWriter<File> {
    /// Create (truncate) the log file at `path`, creating parent directories.
    pub fn create(path: &Path) -> io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        Ok(Self::new(File::create(path)?))
    }
}

impl<S: Sink> LogWriter<S> {
    pub fn new(sink: S) -> Self {
        LogWriter {
            sink,
            // what a log's buffer grows to anyway: it is written at a turn boundary once
            // past WRITE_AT_BYTES, so it holds up to that and a turn more (doubling from
            // 16 KiB, each log copied 112 KiB to get there: 1 % of a suite's instructions)
            pending: Vec::with_capacity(2 * WRITE_AT_BYTES),
            written_at: Instant::now(),
            data_scratch: Vec::with_capacity(512),
            digester: canon::Digester::new(canon::Context::Event),
            seq: 0,
            prev: None,
            prev_hex: [0; 64],
            offset: 0,
        }
    }

    /// Append one event; returns it with its hash. Nothing reaches the sink until
    /// [`flush`](Self::flush).
    pub fn append(&mut self, turn: Option<u32>, t: u64, kind: Kind, data: Value) -> Result<Event, WriteError> {
        let mut bytes = std::mem::take(&mut self.data_scratch);
        bytes.clear();
        let canonical = canon::write_canonical(&mut bytes, &data);
        let event = canonical
            .map_err(|source| WriteError::Canon { seq: self.seq, kind, source })
            .map(|()| self.append_data(turn, t, kind, Data::from_canonical(&bytes)));
        self.data_scratch = bytes;
        event
    }

    /// [`append`](Self::append) an event whose data a typed writer has written as
    /// `canonical`, its canonical bytes (`payload::write`); debug builds check them.
    pub fn append_canonical(&mut self, turn: Option<u32>, t: u64, kind: Kind, canonical: &[u8]) -> Event {
        self.append_data(turn, t, kind, Data::checked(canonical))
    }

    /// Append an event with data already held as [`Data`]: re-chaining verified events
    /// (goldens), where the bytes are canonical and need no second pass.
    pub fn append_data(&mut self, turn: Option<u32>, t: u64, kind: Kind, data: Data) -> Event {
        let start = self.pending.len();
        self.pending.extend_from_slice(LINE_OPEN);
        self.pending.extend_from_slice(data.as_bytes());
        self.close(turn, t, kind, data, start)
    }

    /// Append an event whose data `data`'s writer writes straight into the line, with no
    /// buffer between; on an error nothing is appended.
    pub fn append_written<W: Written>(&mut self, turn: Option<u32>, t: u64, data: &W) -> Result<Event, WriteError> {
        let start = self.pending.len();
        self.pending.extend_from_slice(LINE_OPEN);
        let at = self.pending.len();
        if let Err(source) = data.write(&mut self.pending) {
            self.pending.truncate(start);
            return Err(WriteError::Canon { seq: self.seq, kind: W::KIND, source });
        }
        let written = Data::checked(&self.pending[at..]);
        Ok(self.close(turn, t, W::KIND, written, start))
    }

    /// Finish the line whose opening and data are in `pending` from `start` on.
    fn close(&mut self, turn: Option<u32>, t: u64, kind: Kind, data: Data, start: usize) -> Event {
        let seq = self.seq;
        let unhashed = Unhashed { seq, turn, t, kind, data: data.as_bytes(), prev: self.prev.as_ref() };
        let prev_hex = self.prev.is_some().then_some(&self.prev_hex);
        let (hash, hex) = unhashed.close_line(&mut self.pending, start, prev_hex, &mut self.digester);
        self.prev_hex = hex;
        self.pending.push(b'\n');
        self.offset += (self.pending.len() - start) as u64;
        let event = Event { seq, turn, t, kind, data, hash };
        self.seq += 1;
        self.prev = Some(hash);
        event
    }

    /// The event [`append`](Self::append) would write next, without writing it: same
    /// seq, `prev` and hash. Grading reads a run's log this way while the run's last
    /// event is still held back (see `agent::Recorder`).
    pub fn preview(&self, turn: Option<u32>, t: u64, kind: Kind, canonical: &[u8]) -> Event {
        let seq = self.seq;
        let data = Data::checked(canonical);
        let unhashed = Unhashed { seq, turn, t, kind, data: data.as_bytes(), prev: self.prev.as_ref() };
        let (_, hash) = unhashed.encode();
        Event { seq, turn, t, kind, data, hash }
    }

    /// Write every buffered line. Called at turn boundaries.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.sink.write_all(&self.pending)?;
            self.pending.clear();
            self.written_at = Instant::now();
        }
        self.sink.flush()
    }

    /// At a turn boundary: [`flush`](Self::flush) once [`WRITE_AT_BYTES`] are pending or
    /// [`WRITE_AFTER`] has passed since the last write, else keep the lines for a later
    /// boundary. What reaches the sink still ends at a turn boundary; a process killed
    /// in between loses at most the turns of the last [`WRITE_AFTER`] of writing. Only
    /// for turns that cannot wait on anything outside the process: a turn boundary that
    /// follows a long wait should [`flush`](Self::flush), or the turns before the wait
    /// stay unwritten through it.
    pub fn flush_if_due(&mut self) -> io::Result<()> {
        if self.pending.len() >= WRITE_AT_BYTES || self.written_at.elapsed() >= WRITE_AFTER {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Bytes appended but not yet written to the sink.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Flush, sync, and return the sink and the log's head (last hash).
    pub fn finish(mut self) -> io::Result<(S, Option<Digest>)> {
        self.flush()?;
        self.sink.sync()?;
        Ok((self.sink, self.prev))
    }

    pub fn head(&self) -> Option<Digest> {
        self.prev
    }

    pub fn events_written(&self) -> u64 {
        self.seq
    }

    /// Byte offset at which the next event's line will start.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Keeps each `write` the writer makes, to see where they end.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink for Writes {
        fn sync(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// One turn of about 1 KB: started, a call, completed.
    fn turn(w: &mut LogWriter<Writes>, turn: u32) {
        let filler = "x".repeat(300);
        for kind in [Kind::TurnStarted, Kind::ToolExecuted, Kind::TurnCompleted] {
            w.append(Some(turn), u64::from(turn), kind, json!({"turn": turn, "text": filler})).expect("append");
        }
    }

    #[test]
    fn turns_wait_for_a_later_boundary_until_enough_is_pending_and_writes_end_on_one() {
        let mut w = LogWriter::new(Writes::default());
        let mut turns = 0;
        while w.sink.0.is_empty() {
            turn(&mut w, turns);
            turns += 1;
            w.flush_if_due().expect("write");
            assert!(turns < 1_000, "nothing written after {turns} turns");
        }
        // written at the first boundary with 64 KiB pending, unless a slow machine took
        // 100 ms first: never at the first few boundaries
        assert!(turns > 4, "written after {turns} turns of about 1 KB");
        assert_eq!(w.pending(), 0);
        let written = &w.sink.0[0];
        assert!(written.len() >= WRITE_AT_BYTES || turns < 64, "{} bytes", written.len());
        let last = written.split(|&b| b == b'\n').rev().nth(1).expect("a line");
        let last: Value = serde_json::from_slice(last).expect("a whole line");
        assert_eq!(last["kind"], "turn_completed", "the write ends at a turn boundary");

        // what is still pending reaches the sink at the end, after what was written
        turn(&mut w, turns);
        w.flush_if_due().expect("write");
        let (sink, _) = w.finish().expect("finish");
        let all: Vec<u8> = sink.0.concat();
        let lines = all.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        assert_eq!(lines as u32, 3 * (turns + 1), "every line, once");
    }

    /// A typed writer writes into the line itself: one that fails part way (an integer
    /// JSON cannot carry, in its last member) leaves nothing of its line, and the next
    /// event chains on from the last one written, as if it had never been tried.
    #[test]
    fn a_payload_that_fails_part_way_leaves_no_trace_in_the_log() {
        use crate::event::payload::{Out, write};
        let mut tried = LogWriter::new(Vec::new());
        let mut clean = LogWriter::new(Vec::new());
        for w in [&mut tried, &mut clean] {
            w.append_written(
                Some(0),
                0,
                &write::TurnStarted { turn: 0u32.into(), input: "hi".into(), source: Out::Absent, absent: Out::Absent },
            )
            .expect("append");
        }
        let (pending, offset) = (tried.pending(), tried.offset());
        let huge = write::TurnStarted {
            turn: Out::Uint(1 << 60),
            input: "a long input written first".into(),
            source: Out::Absent,
            absent: Out::Absent,
        };
        let error = tried.append_written(Some(0), 0, &huge).expect_err("2^60 is not I-JSON");
        assert!(matches!(error, WriteError::Canon { seq: 1, kind: Kind::TurnStarted, .. }), "{error}");
        assert!(error.to_string().contains("turn"), "{error}");
        assert_eq!((tried.pending(), tried.offset(), tried.events_written()), (pending, offset, 1));
        for w in [&mut tried, &mut clean] {
            w.append_written(
                Some(1),
                5,
                &write::TurnStarted {
                    turn: 1u32.into(),
                    input: "again".into(),
                    source: Out::Absent,
                    absent: Out::Absent,
                },
            )
            .expect("append");
        }
        let (tried, tried_head) = tried.finish().expect("finish");
        let (clean, clean_head) = clean.finish().expect("finish");
        assert_eq!(tried, clean);
        assert_eq!(tried_head, clean_head);
        // and what a typed writer wrote in place is what the same data appended whole gives
        let mut whole = LogWriter::new(Vec::new());
        whole.append(Some(0), 0, Kind::TurnStarted, json!({"turn": 0, "input": "hi"})).expect("append");
        whole.append(Some(1), 5, Kind::TurnStarted, json!({"turn": 1, "input": "again"})).expect("append");
        assert_eq!(whole.finish().expect("finish").0, clean);
    }

    #[test]
    fn a_boundary_long_after_the_last_write_writes() {
        let mut w = LogWriter::new(Writes::default());
        turn(&mut w, 0);
        w.flush().expect("write");
        turn(&mut w, 1);
        std::thread::sleep(WRITE_AFTER + Duration::from_millis(10));
        w.flush_if_due().expect("write");
        assert_eq!((w.sink.0.len(), w.pending()), (2, 0), "the second turn was written at its boundary");
    }
}
