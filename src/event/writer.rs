//! The log writer: one per run, appending canonical hash-chained lines.
//!
//! Lines are buffered in memory and written whole at turn boundaries ([`LogWriter::flush`]),
//! never from a half-full buffer, so a process killed mid-run leaves only complete lines
//! and a prefix that verifies. [`LogWriter::finish`] flushes and fsyncs.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use serde_json::Value;

use super::{Event, Kind, Unhashed};
use crate::canon::{CanonError, Digest};

/// Where log bytes go: a file (fsync'd at the end) or memory (tests, benchmarks).
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

pub struct LogWriter<S: Sink> {
    sink: S,
    pending: Vec<u8>,
    /// Reused by [`Unhashed::encode_into`].
    scratch: Vec<u8>,
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
            pending: Vec::with_capacity(16 * 1024),
            scratch: Vec::with_capacity(160),
            seq: 0,
            prev: None,
            prev_hex: [0; 64],
            offset: 0,
        }
    }

    /// Append one event; returns it with its hash. Nothing reaches the sink until
    /// [`flush`](Self::flush).
    pub fn append(&mut self, turn: Option<u32>, t: u64, kind: Kind, data: Value) -> Result<Event, WriteError> {
        self.append_written(turn, t, kind, data, None)
    }

    /// [`append`](Self::append), with the canonical bytes of `data` when a typed writer
    /// has written them (see [`Unhashed::encode_written`]).
    pub fn append_written(
        &mut self,
        turn: Option<u32>,
        t: u64,
        kind: Kind,
        data: Value,
        written: Option<&[u8]>,
    ) -> Result<Event, WriteError> {
        let seq = self.seq;
        let unhashed = Unhashed { seq, turn, t, kind, data: &data, prev: self.prev.as_ref() };
        let start = self.pending.len();
        let prev_hex = self.prev.is_some().then_some(&self.prev_hex);
        let (hash, hex) = unhashed
            .encode_written(&mut self.pending, &mut self.scratch, written, prev_hex)
            .map_err(|source| WriteError::Canon { seq, kind, source })?;
        self.prev_hex = hex;
        self.pending.push(b'\n');
        self.offset += (self.pending.len() - start) as u64;
        let event = Event { seq, turn, t, kind, data, prev: self.prev, hash };
        self.seq += 1;
        self.prev = Some(hash);
        Ok(event)
    }

    /// The event [`append`](Self::append) would write next, without writing it: same
    /// seq, `prev` and hash. Grading reads a run's log this way while the run's last
    /// event is still held back (see `runtime::Recorder`).
    pub fn preview(&self, turn: Option<u32>, t: u64, kind: Kind, data: Value) -> Result<Event, WriteError> {
        let seq = self.seq;
        let unhashed = Unhashed { seq, turn, t, kind, data: &data, prev: self.prev.as_ref() };
        let (_, hash) = unhashed.encode().map_err(|source| WriteError::Canon { seq, kind, source })?;
        Ok(Event { seq, turn, t, kind, data, prev: self.prev, hash })
    }

    /// Write every buffered line. Called at turn boundaries.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.sink.write_all(&self.pending)?;
            self.pending.clear();
        }
        self.sink.flush()
    }

    /// Flush, fsync, and return the sink and the log's head (last hash).
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
