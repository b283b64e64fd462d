//! The run catalog: runs, logs (heads, event counts, turn offsets) and verdicts.
//!
//! The catalog is an index, never the only copy of anything: logs live in files under
//! `<store>/runs/<run-id>/<case>/<k>.jsonl`, each run's verdicts in
//! `<store>/runs/<run-id>/verdicts.jsonl` and its metadata in `run.json`, and
//! [`reindex`] rebuilds the catalog from those files alone.

mod rows;
pub mod sled_store;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::event::Kind;
pub use sled_store::SledStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sled(#[from] sled::Error),
    #[error("store: {0}")]
    Io(#[from] std::io::Error),
    #[error("store: corrupt record: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("store: corrupt catalog record {key}: {why}")]
    Record { key: String, why: String },
    /// Another process (a second `stateval run`) holds the catalog open.
    #[error("{}: the store is in use by another stateval process (its catalog is locked)", dir.display())]
    Locked { dir: PathBuf },
}

/// One `stateval run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub pipeline: String,
    pub cases: usize,
    /// `None` until the run finished (a killed run stays `None`).
    pub passed: Option<bool>,
}

/// One log file, indexed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    pub run_id: String,
    pub case: String,
    pub k: usize,
    /// Relative to the store directory (`runs/<run-id>/<case>/<k>.jsonl`).
    pub path: String,
    pub head: Option<String>,
    pub events: u64,
    /// Ends with `run_completed`.
    pub complete: bool,
    /// Byte offset of each `turn_started` line, by turn.
    pub turn_offsets: Vec<u64>,
}

/// One graded run of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictRecord {
    pub run_id: String,
    pub case: String,
    pub dataset: String,
    pub k: usize,
    pub passed: bool,
    pub status: String,
}

pub trait Store: Send + Sync {
    fn put_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    /// Record a run that starts, dropping every log and verdict record an earlier run
    /// of the same id left: a rerun replaces it whole.
    fn begin_run(&self, run: &RunRecord) -> Result<(), StoreError>;
    fn put_log(&self, log: &LogRecord) -> Result<(), StoreError>;
    fn put_verdict(&self, verdict: &VerdictRecord) -> Result<(), StoreError>;
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError>;
    fn logs(&self, run_id: &str) -> Result<Vec<LogRecord>, StoreError>;
    fn verdicts(&self, run_id: &str) -> Result<Vec<VerdictRecord>, StoreError>;
    /// Drop every record (before a reindex).
    fn clear(&self) -> Result<(), StoreError>;
    /// Make everything written so far durable.
    fn flush(&self) -> Result<(), StoreError>;
}

/// Paths inside a store directory.
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(root: &Path) -> Self {
        Layout { root: root.to_path_buf() }
    }
    pub fn catalog(&self) -> PathBuf {
        self.root.join("catalog")
    }
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.root.join("runs").join(run_id)
    }
    pub fn log_path(&self, run_id: &str, case: &str, k: usize) -> PathBuf {
        self.root.join(Self::log_rel(run_id, case, k))
    }
    /// A log's path relative to the store root, as the catalog records it.
    pub fn log_rel(run_id: &str, case: &str, k: usize) -> String {
        format!("runs/{run_id}/{case}/{k}.jsonl")
    }
    pub fn verdicts_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("verdicts.jsonl")
    }
    /// Every case outcome of a run, one JSON object per line, in dataset order: what
    /// the reports are rendered from.
    pub fn cases_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join(crate::outcome::CASES_FILE)
    }
    /// The run's outcome without its cases (gates, extras, verdict), written when the
    /// run finishes: with `cases.jsonl`, what `stateval report RUN_DIR` renders from.
    pub fn suite_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join(crate::outcome::SUITE_FILE)
    }
    pub fn meta_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("run.json")
    }
}

/// Index one log file, streamed: verify it and record its head, length and turn
/// offsets. A log that does not verify is indexed up to its valid prefix and the
/// failure returned beside it; a torn tail (a last line without its newline, left by
/// a kill in mid-write) is cut off the file, as it holds no whole event.
pub fn index_log(
    layout: &Layout,
    run_id: &str,
    case: &str,
    k: usize,
) -> Result<(LogRecord, Option<LogProblem>), String> {
    use std::io::BufRead;
    let path = &layout.log_path(run_id, case, k);
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut chain = crate::event::verify::Chain::new();
    let mut offsets = Vec::new();
    let mut line = Vec::new();
    let mut problem = None;
    loop {
        line.clear();
        let offset = chain.summary().bytes;
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        let Some(body) = line.strip_suffix(b"\n") else {
            let file = std::fs::OpenOptions::new().write(true).open(path);
            let cut = file.and_then(|f| f.set_len(offset).and_then(|()| f.sync_all()));
            problem = Some(LogProblem::Torn {
                bytes: line.len(),
                cut: cut.map_err(|e| format!("{}: cannot cut the torn tail: {e}", path.display())).err(),
            });
            break;
        };
        match chain.push(body) {
            Ok(event) if event.kind == Kind::TurnStarted => offsets.push(offset),
            Ok(_) => {}
            Err(e) => {
                problem = Some(LogProblem::Invalid(e.to_string()));
                break;
            }
        }
    }
    let valid = chain.summary();
    let record = LogRecord {
        run_id: run_id.to_string(),
        case: case.to_string(),
        k,
        path: Layout::log_rel(run_id, case, k),
        head: valid.head.map(|h| h.to_string()),
        events: valid.events,
        complete: valid.complete,
        turn_offsets: offsets,
    };
    Ok((record, problem))
}

/// The catalog's record of a verified log, from its bytes and their events (as
/// [`index_log`] would make it, without reading the file again).
pub fn log_record(run_id: &str, case: &str, k: usize, bytes: &[u8], log: &crate::event::verify::Verified) -> LogRecord {
    let mut turn_offsets = Vec::new();
    let mut offset = 0u64;
    for (line, event) in bytes.split_inclusive(|&b| b == b'\n').zip(&log.events) {
        if event.kind == Kind::TurnStarted {
            turn_offsets.push(offset);
        }
        offset += line.len() as u64;
    }
    LogRecord {
        run_id: run_id.to_string(),
        case: case.to_string(),
        k,
        path: Layout::log_rel(run_id, case, k),
        head: log.head.map(|h| h.to_string()),
        events: log.events.len() as u64,
        complete: log.complete,
        turn_offsets,
    }
}

/// What is wrong with a log, beyond being incomplete.
#[derive(Debug, Clone, PartialEq)]
pub enum LogProblem {
    /// A last line without its newline, `bytes` long; cut off unless `cut` says why not.
    Torn { bytes: usize, cut: Option<String> },
    /// A line that does not verify (an edit, a lost or extra event, a re-chained log).
    Invalid(String),
}

/// What `reindex` found.
#[derive(Debug, Default, PartialEq)]
pub struct ReindexSummary {
    pub runs: usize,
    pub logs: usize,
    pub verdicts: usize,
    /// Logs without `run_completed` (a killed run), relative to the store.
    pub incomplete: Vec<String>,
    /// Logs whose torn last line was cut off, with what was cut.
    pub torn: Vec<String>,
    /// Logs that fail to verify — an edit, a lost tail, a re-chained log, events after
    /// `run_completed`, a log missing from or added to its run — one line each.
    pub failed: Vec<String>,
    /// Failing logs moved aside by `--repair`: (from, to).
    pub moved: Vec<(PathBuf, PathBuf)>,
    /// Runs without `run.json`.
    pub without_meta: Vec<String>,
    /// Other files that could not be read, one line each.
    pub problems: Vec<String>,
}

/// Rebuild the catalog from the files under the store directory. Every log is checked
/// against its run's manifest when the run has one (else its chain alone); with
/// `repair`, logs that fail are moved to `<store>/quarantine/<run-id>/…` and left out.
pub fn reindex(store: &dyn Store, layout: &Layout, repair: bool) -> Result<ReindexSummary, StoreError> {
    store.clear()?;
    let mut summary = ReindexSummary::default();
    let runs_dir = layout.root.join("runs");
    let mut run_ids: Vec<String> = match std::fs::read_dir(&runs_dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // `.deleting-*`: an earlier run's directory caught mid-removal
            .filter(|name| !name.starts_with('.'))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    run_ids.sort();
    for run_id in run_ids {
        let dir = layout.run_dir(&run_id);
        let unknown = || RunRecord { run_id: run_id.clone(), pipeline: String::new(), cases: 0, passed: None };
        let mut run: RunRecord = match std::fs::read(layout.meta_path(&run_id)) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(run) => run,
                // the catalog is rebuilt from what can be read; the run's logs still count
                Err(e) => {
                    summary.problems.push(format!("runs/{run_id}/run.json: not a run record: {e}"));
                    unknown()
                }
            },
            Err(_) => {
                summary.without_meta.push(format!("runs/{run_id}"));
                unknown()
            }
        };
        // a run killed in mid-write may leave a torn last line: cut what is not a
        // whole line (only where no manifest says the run finished), then check
        if !dir.join(crate::evidence::manifest::MANIFEST_FILE).exists() {
            for log in crate::evidence::check::logs_in(&dir) {
                match cut_torn_tail(&log) {
                    Ok(0) => {}
                    Ok(bytes) => summary
                        .torn
                        .push(format!("{}: a torn last line ({bytes} bytes) was cut off", shown(layout, &log))),
                    Err(e) => summary
                        .failed
                        .push(format!("{}: a torn last line that cannot be cut: {e}", shown(layout, &log))),
                }
            }
        }
        // against the manifest: lost tails, re-chained logs, missing and extra logs
        let options = crate::evidence::CheckOptions { allow_incomplete: true, ..Default::default() };
        let check = crate::evidence::check_run(&dir, &options);
        let mut bad: Vec<PathBuf> = Vec::new();
        for finding in &check.findings {
            let at = finding.line.map(|l| format!(":{l}")).unwrap_or_default();
            summary.failed.push(format!("{}{at}: {}", shown(layout, &finding.subject), finding.problem));
            bad.push(finding.subject.clone());
        }
        let mut cases: Vec<PathBuf> =
            std::fs::read_dir(&dir)?.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
        cases.sort();
        for case_dir in &cases {
            let case = case_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let mut logs: Vec<(usize, PathBuf)> = std::fs::read_dir(case_dir)?
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let p = e.path();
                    let k = p.file_stem()?.to_str()?.parse().ok()?;
                    (p.extension()? == "jsonl").then_some((k, p))
                })
                .collect();
            logs.sort();
            for (k, path) in logs {
                let rel = Layout::log_rel(&run_id, &case, k);
                if repair && bad.contains(&path) {
                    let to = layout.root.join("quarantine").join(&run_id).join(&case).join(format!("{k}.jsonl"));
                    if let Some(parent) = to.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::rename(&path, &to)?;
                    summary.moved.push((path, to));
                    continue;
                }
                match index_log(layout, &run_id, &case, k) {
                    Ok((record, problem)) => {
                        // a log that does not verify is read only up to its first bad
                        // line: it is named as failed, not as a run that was killed
                        let failed = bad.contains(&path) || matches!(problem, Some(LogProblem::Invalid(_)));
                        match problem {
                            Some(LogProblem::Torn { bytes, cut: None }) => {
                                summary.torn.push(format!("{rel}: a torn last line ({bytes} bytes) was cut off"))
                            }
                            Some(LogProblem::Torn { bytes, cut: Some(why) }) => {
                                summary.failed.push(format!("{rel}: a torn last line ({bytes} bytes): {why}"))
                            }
                            // named by the run check already when the run has a manifest
                            Some(LogProblem::Invalid(reason)) if !bad.contains(&path) => {
                                summary.failed.push(format!("{rel}: {reason}"));
                            }
                            Some(LogProblem::Invalid(_)) | None => {}
                        }
                        if !record.complete && !failed {
                            summary.incomplete.push(format!("{rel} ({} events, no run_completed)", record.events));
                        }
                        summary.logs += 1;
                        store.put_log(&record)?;
                    }
                    Err(problem) => summary.problems.push(problem),
                }
            }
        }
        if let Ok(file) = std::fs::File::open(layout.verdicts_path(&run_id)) {
            use std::io::BufRead;
            // line by line: a run's verdicts are never all in memory
            for line in std::io::BufReader::new(file).lines() {
                let line = match line {
                    Ok(line) if line.trim().is_empty() => continue,
                    Ok(line) => line,
                    Err(e) => {
                        summary.problems.push(format!("{}: {e}", layout.verdicts_path(&run_id).display()));
                        break;
                    }
                };
                let line = line.as_str();
                // a killed run may leave a torn last line: index what is whole
                match serde_json::from_str::<VerdictRecord>(line) {
                    Ok(v) => {
                        store.put_verdict(&v)?;
                        summary.verdicts += 1;
                    }
                    Err(e) => summary.problems.push(format!("{}: {e}", layout.verdicts_path(&run_id).display())),
                }
            }
        }
        if run.cases == 0 {
            run.cases = cases.len();
        }
        store.put_run(&run)?;
        summary.runs += 1;
    }
    store.flush()?;
    Ok(summary)
}

/// Cut a log back to its last newline; returns how many bytes were cut (0 when the
/// log ends with a whole line). Reads backwards from the end, not the whole file.
fn cut_torn_tail(path: &Path) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if end < len {
        file.set_len(end)?;
        file.sync_all()?;
    }
    Ok(len - end)
}

/// A path under the store, relative to it when it is.
fn shown(layout: &Layout, path: &Path) -> String {
    path.strip_prefix(&layout.root).unwrap_or(path).to_string_lossy().into_owned()
}
