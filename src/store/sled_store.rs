//! The sled implementation of [`Store`]: three trees of JSON records.

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{LogRecord, RunRecord, Store, StoreError, VerdictRecord};

/// sled's default page cache is 1 GiB. A run writes the catalog once and reads it rarely,
/// so 1 MiB is plenty. (This bounds the cache, not all of sled's memory: sled holds a
/// little more as the catalog grows, measured at about 1 KB per case in `stateval run`.)
const CACHE_BYTES: u64 = 1024 * 1024;

pub struct SledStore {
    db: sled::Db,
    runs: sled::Tree,
    logs: sled::Tree,
    verdicts: sled::Tree,
}

impl SledStore {
    /// Opens (or creates) the catalog in `dir`. A catalog another process holds is
    /// [`StoreError::Locked`], so callers can tell the user rather than report a bug.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = match sled::Config::new().path(dir).cache_capacity(CACHE_BYTES).open() {
            Ok(db) => db,
            // sled 0.34 says so only in the message of an `Other` I/O error
            Err(sled::Error::Io(e)) if e.to_string().starts_with("could not acquire lock") => {
                return Err(StoreError::Locked { dir: dir.to_path_buf() });
            }
            Err(e) => return Err(e.into()),
        };
        Ok(SledStore {
            runs: db.open_tree("runs")?,
            logs: db.open_tree("logs")?,
            verdicts: db.open_tree("verdicts")?,
            db,
        })
    }
}

/// `run \0 case \0 k` with k zero-padded so keys sort by run index.
fn key(run_id: &str, case: &str, k: usize) -> Vec<u8> {
    format!("{run_id}\0{case}\0{k:08}").into_bytes()
}

fn put<T: Serialize>(tree: &sled::Tree, key: Vec<u8>, value: &T) -> Result<(), StoreError> {
    tree.insert(key, serde_json::to_vec(value)?)?;
    Ok(())
}

fn scan<T: DeserializeOwned>(tree: &sled::Tree, prefix: &[u8]) -> Result<Vec<T>, StoreError> {
    tree.scan_prefix(prefix).map(|kv| Ok(serde_json::from_slice(&kv?.1)?)).collect()
}

impl Store for SledStore {
    fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        put(&self.runs, run.run_id.as_bytes().to_vec(), run)
    }
    fn put_log(&self, log: &LogRecord) -> Result<(), StoreError> {
        put(&self.logs, key(&log.run_id, &log.case, log.k), log)
    }
    fn put_verdict(&self, v: &VerdictRecord) -> Result<(), StoreError> {
        put(&self.verdicts, key(&v.run_id, &v.case, v.k), v)
    }
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        scan(&self.runs, b"")
    }
    fn logs(&self, run_id: &str) -> Result<Vec<LogRecord>, StoreError> {
        scan(&self.logs, format!("{run_id}\0").as_bytes())
    }
    fn verdicts(&self, run_id: &str) -> Result<Vec<VerdictRecord>, StoreError> {
        scan(&self.verdicts, format!("{run_id}\0").as_bytes())
    }
    fn clear(&self) -> Result<(), StoreError> {
        self.runs.clear()?;
        self.logs.clear()?;
        self.verdicts.clear()?;
        Ok(())
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }
}
