//! The store's catalog as `golden accept` reads it when no key can vouch for a run: the
//! runs it recorded as finished, and the head of every log each of them wrote.
//!
//! The catalog is written by the run itself, under a lock no other process can take
//! while the run lasts, so a run directory planted in the store afterwards is not in it,
//! and one rewritten afterwards no longer has the heads it recorded. (`stateval reindex`
//! rebuilds the catalog from the files, and so would catalogue a planted run.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::CliError;
use stateval::evidence::RunManifest;
use stateval::store::{Layout, SledStore, Store};

/// The store's catalog, read once and closed: the runs it recorded as finished and the
/// head of every log they wrote.
pub struct Catalog {
    /// Run id → (`case/k.jsonl` → head), for finished runs.
    runs: HashMap<String, HashMap<String, Option<String>>>,
    shown: PathBuf,
}

impl Catalog {
    pub fn open(store: &Path) -> Result<Catalog, CliError> {
        let layout = Layout::new(store);
        let shown = layout.catalog();
        if !shown.exists() {
            return Ok(Catalog { runs: Default::default(), shown });
        }
        let catalog = SledStore::open(&shown).map_err(|e| CliError::invalid(format!("{}: {e}", shown.display())))?;
        let mut runs = HashMap::new();
        let read = |e: stateval::store::StoreError| CliError::invalid(format!("{}: {e}", shown.display()));
        for run in catalog.runs().map_err(read)?.into_iter().filter(|r| r.passed.is_some()) {
            let logs = catalog.logs(&run.run_id).map_err(read)?;
            runs.insert(run.run_id, logs.into_iter().map(|l| (format!("{}/{}.jsonl", l.case, l.k), l.head)).collect());
        }
        Ok(Catalog { runs, shown })
    }

    pub fn finished(&self, run_id: &str) -> bool {
        self.runs.contains_key(run_id)
    }

    /// Is the run in `dir` (verified against `manifest`) the one the catalog recorded:
    /// the same logs, each with the head the run wrote?
    pub fn vouches_for(&self, dir: &Path, manifest: &RunManifest) -> Result<(), String> {
        let run_id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(logs) = self.runs.get(&run_id) else {
            return Err(format!(
                "not a finished run of this store's catalog ({}), and with no key (--pubkey, \
                 STATEVAL_SIGNING_KEY) nothing else shows stateval wrote it",
                self.shown.display()
            ));
        };
        let differs = manifest.logs.iter().find(|e| logs.get(&e.path) != Some(&e.head.map(|h| h.to_string())));
        if let Some(entry) = differs {
            return Err(format!(
                "{}: not the log the catalog ({}) recorded for run {run_id}: the run directory was rewritten \
                 after the run",
                entry.path,
                self.shown.display()
            ));
        }
        if logs.len() != manifest.logs.len() {
            return Err(format!(
                "its manifest lists {} logs, the catalog ({}) recorded {} for run {run_id}: the run directory \
                 was rewritten after the run",
                manifest.logs.len(),
                self.shown.display(),
                logs.len()
            ));
        }
        Ok(())
    }
}
