//! The run catalog: runs, logs (heads, event counts, turn offsets) and verdicts.
//!
//! The catalog is an index, never the only copy of anything: logs live in files under
//! `<store>/runs/<run-id>/<case>/<k>.jsonl`, each run's verdicts in
//! `<store>/runs/<run-id>/verdicts.jsonl` and its metadata in `run.json`, and
//! [`reindex`] rebuilds the catalog from those files alone.

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
        self.run_dir(run_id).join(crate::runner::outcome::CASES_FILE)
    }
    /// The run's outcome without its cases (gates, extras, verdict), written when the
    /// run finishes: with `cases.jsonl`, what `stateval report RUN_DIR` renders from.
    pub fn suite_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join(crate::runner::outcome::SUITE_FILE)
    }
    pub fn meta_path(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("run.json")
    }
}

/// Index one log file: verify it and record its head, length and turn offsets. A log
/// that does not verify is indexed up to its valid prefix and reported.
pub fn index_log(layout: &Layout, run_id: &str, case: &str, k: usize) -> Result<LogRecord, String> {
    let path = &layout.log_path(run_id, case, k);
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let valid = match crate::event::verify::verify_bytes(&bytes) {
        Ok(v) => v,
        Err(e) => {
            // index the prefix that does verify, so a killed run is still catalogued
            let cut: usize = bytes.split_inclusive(|&b| b == b'\n').take(e.line - 1).map(<[u8]>::len).sum();
            crate::event::verify::verify_bytes(&bytes[..cut]).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    let mut offsets = Vec::new();
    let mut offset = 0u64;
    for (line, event) in bytes.split_inclusive(|&b| b == b'\n').zip(&valid.events) {
        if event.kind == Kind::TurnStarted {
            offsets.push(offset);
        }
        offset += line.len() as u64;
    }
    Ok(LogRecord {
        run_id: run_id.to_string(),
        case: case.to_string(),
        k,
        path: Layout::log_rel(run_id, case, k),
        head: valid.head.map(|h| h.to_string()),
        events: valid.events.len() as u64,
        complete: valid.complete,
        turn_offsets: offsets,
    })
}

/// What `reindex` found.
#[derive(Debug, Default, PartialEq)]
pub struct ReindexSummary {
    pub runs: usize,
    pub logs: usize,
    pub incomplete_logs: usize,
    pub verdicts: usize,
    /// Files that could not be indexed, one line each.
    pub problems: Vec<String>,
}

/// Rebuild the catalog from the files under the store directory.
pub fn reindex(store: &dyn Store, layout: &Layout) -> Result<ReindexSummary, StoreError> {
    store.clear()?;
    let mut summary = ReindexSummary::default();
    let runs_dir = layout.root.join("runs");
    let mut run_ids: Vec<String> = match std::fs::read_dir(&runs_dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    run_ids.sort();
    for run_id in run_ids {
        let dir = layout.run_dir(&run_id);
        let mut run: RunRecord = match std::fs::read(layout.meta_path(&run_id)) {
            Ok(bytes) => serde_json::from_slice(&bytes)?,
            Err(_) => RunRecord { run_id: run_id.clone(), pipeline: String::new(), cases: 0, passed: None },
        };
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
            for (k, _) in logs {
                match index_log(layout, &run_id, &case, k) {
                    Ok(record) => {
                        summary.logs += 1;
                        summary.incomplete_logs += usize::from(!record.complete);
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
