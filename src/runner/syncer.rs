//! A run's logs are fsync'd together, just before the manifest that anchors them.
//!
//! A case's log is complete when its run ends; what an fsync adds is that it survives a
//! power cut or an operating-system crash (a killed process loses nothing the kernel
//! was given). That matters once the manifest is written, so the cases do not wait for
//! the disk: each finished log's path is noted ([`LogFile`]), and before the manifest is
//! written every noted log is opened again and fsync'd, on [`THREADS`] threads at once
//! ([`Syncer::finish`]). A failed fsync fails the run, naming the log.
//!
//! Each log's writeback is started as its case ends (`writeback::start`, Linux's
//! `sync_file_range` without waiting): the device writes it while later cases run, and
//! the fsyncs at the end find little left to write. On this project's ext4 machine that
//! took a 50-case suite's wall 2–9 % lower by the rounds' median in quieter sets
//! (`docs/speed.md`, 2026-12-07). It commits nothing, so it does not hold up the cases
//! as fsyncs did.
//!
//! Both halves are measured (`docs/speed.md`). An fsync per case on the case's own
//! thread cost a 4,000-case suite 2.7 s of its 4 s on ext4; fsyncs on background threads
//! while cases ran still slowed every `mkdir` and `write` of the cases, which waited for
//! the journal commits. Syncing together at the end lets the file system commit many
//! logs at once: ext4 and most journalling file systems join concurrent fsyncs into
//! one commit.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{RunnerError, at};
use crate::event::writer::Sink;

/// Threads that fsync at once: ext4 joins concurrent fsyncs into one journal commit, so
/// the sync needs many in flight. Measured (`docs/speed.md`, issue #52): 4,000 small
/// logs took 0.31 s on 16 threads, 0.37 s on 8, 0.68 s on 4 and over 2 s on 2.
pub const THREADS: usize = 16;

/// The logs of a run to be synced before its manifest.
#[derive(Default)]
pub struct Syncer {
    written: Arc<Mutex<Vec<PathBuf>>>,
}

impl Syncer {
    /// What the cases' threads note their logs with.
    pub fn logs(&self) -> Logs {
        Logs { written: self.written.clone() }
    }

    /// Fsync every noted log (every [`Logs`] and [`LogFile`] should be gone: a log noted
    /// later is not synced). Returns how many were; the first log whose fsync failed, in
    /// the order they were noted, is the error; a signal seen first is
    /// [`RunnerError::Interrupted`].
    pub fn finish(self) -> Result<usize, RunnerError> {
        // a run interrupted before its logs are synced stays unfinished: no manifest waits
        crate::interrupt::boundary(crate::interrupt::Phase::Fsync)?;
        let paths = std::mem::take(&mut *self.written.lock().unwrap_or_else(|e| e.into_inner()));
        let next = AtomicUsize::new(0);
        let failed: Mutex<Option<(usize, RunnerError)>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..THREADS.min(paths.len()) {
                s.spawn(|| {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = paths.get(index) else { break };
                        if let Err(e) = OpenOptions::new().write(true).open(path).and_then(|f| f.sync_all()) {
                            let mut failed = failed.lock().unwrap_or_else(|e| e.into_inner());
                            if failed.as_ref().is_none_or(|(at_index, _)| index < *at_index) {
                                *failed = Some((index, at(path)(e)));
                            }
                        }
                    }
                });
            }
        });
        match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some((_, e)) => Err(e),
            None => Ok(paths.len()),
        }
    }
}

/// Notes logs for a [`Syncer`]; one per case's thread.
#[derive(Clone)]
pub struct Logs {
    written: Arc<Mutex<Vec<PathBuf>>>,
}

impl Logs {
    /// The log file at `path`, as a sink whose [`Sink::sync`] closes it and notes it.
    pub fn log(&self, path: PathBuf, file: File) -> LogFile {
        LogFile { file: Some(file), path, written: self.written.clone() }
    }

    /// Note a log written whole some other way (a reused log's copy).
    pub fn note(&self, path: PathBuf) -> Result<(), RunnerError> {
        let mut written =
            self.written.lock().map_err(|_| RunnerError::Internal("the run's list of logs is poisoned".into()))?;
        written.push(path);
        Ok(())
    }
}

/// A run's log file: written like any file; [`Sink::sync`] closes it and leaves its
/// fsync to the run's [`Syncer`].
pub struct LogFile {
    file: Option<File>,
    path: PathBuf,
    written: Arc<Mutex<Vec<PathBuf>>>,
}

impl LogFile {
    fn file(&mut self) -> io::Result<&mut File> {
        let path = &self.path;
        self.file.as_mut().ok_or_else(|| io::Error::other(format!("{}: written after it was closed", path.display())))
    }
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file()?.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file()?.flush()
    }
}

impl Sink for LogFile {
    fn sync(&mut self) -> io::Result<()> {
        let file = self.file()?;
        file.flush()?;
        // its pages go to the device now, while later cases run, rather than all at
        // once when the run syncs (see the module notes). Only a head start: a file
        // system that refuses it loses nothing, and a write that fails is the run's
        // fsync's error, named with the log
        let _ = writeback::start(file);
        self.file = None;
        self.written
            .lock()
            .map_err(|_| io::Error::other("the run's list of logs is poisoned"))?
            .push(self.path.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_closed_log_is_synced_by_finish_and_a_log_is_closed_by_its_sync() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let syncer = Syncer::default();
        // more logs than threads, from two writers at once; one never finished
        std::thread::scope(|s| {
            for writer in 0..2 {
                let (logs, dir) = (syncer.logs(), dir.path());
                s.spawn(move || {
                    for i in 0..THREADS + 3 {
                        let path = dir.join(format!("{writer}-{i}.jsonl"));
                        let mut log = logs.log(path.clone(), File::create(&path).unwrap());
                        log.write_all(b"{}\n").unwrap();
                        log.sync().unwrap();
                        assert!(log.write_all(b"late\n").is_err(), "a log written after it was closed");
                    }
                });
            }
        });
        let path = dir.path().join("unfinished.jsonl");
        drop(syncer.logs().log(path.clone(), File::create(&path)?));
        assert_eq!(syncer.finish()?, 2 * (THREADS + 3));
        assert_eq!(std::fs::read(dir.path().join("1-0.jsonl"))?, b"{}\n");
        Ok(())
    }

    #[test]
    fn a_log_that_cannot_be_synced_fails_the_run_naming_it() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let syncer = Syncer::default();
        let logs = syncer.logs();
        for name in ["0.jsonl", "1.jsonl"] {
            let path = dir.path().join(name);
            logs.log(path.clone(), File::create(&path)?).sync()?;
        }
        // the second log is gone by the time the run syncs: a stand-in for a disk error
        std::fs::remove_file(dir.path().join("1.jsonl"))?;
        drop(logs);
        let error = syncer.finish().unwrap_err().to_string();
        assert!(error.contains("1.jsonl"), "{error}");
        Ok(())
    }
}
