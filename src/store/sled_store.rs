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
        // no flusher thread: sled's default writes the catalog out every 500 ms from a
        // thread of its own, which cost a 10,000-case run about 6 MB of peak RSS (and a
        // 1,000-case run 5 MB). The catalog is written when its buffer fills, when the
        // run ends ([`Store::flush`]) and when the store is dropped; a killed run may
        // lose more of it than before, which `stateval reindex` rebuilds from the files.
        let config = sled::Config::new().path(dir).cache_capacity(CACHE_BYTES).flush_every_ms(None);
        let db = match config.open() {
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

impl Drop for SledStore {
    /// Without a flusher thread, whatever the last flush left in sled's buffer is
    /// written here, on every way out of a command that opened the store.
    fn drop(&mut self) {
        let _ = self.db.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_written_without_a_flush_are_read_back_after_the_store_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = RunRecord { run_id: "r-1".into(), pipeline: "p".into(), cases: 2, passed: None };
        let log = |case: &str| LogRecord {
            run_id: "r-1".into(),
            case: case.into(),
            k: 0,
            path: format!("runs/r-1/{case}/0.jsonl"),
            head: Some("blake3:00".into()),
            events: 7,
            complete: true,
            turn_offsets: vec![0, 120, 240],
        };
        let verdict = VerdictRecord {
            run_id: "r-1".into(),
            case: "a".into(),
            dataset: "d".into(),
            k: 0,
            passed: true,
            status: "completed".into(),
        };
        {
            let store = SledStore::open(dir.path()).expect("open");
            store.put_run(&run).expect("run");
            store.put_log(&log("a")).expect("log a");
            store.put_log(&log("b")).expect("log b");
            store.put_verdict(&verdict).expect("verdict");
            // no flush: the drop writes it
        }
        let store = SledStore::open(dir.path()).expect("reopen");
        assert_eq!(store.runs().expect("runs"), vec![run]);
        assert_eq!(store.logs("r-1").expect("logs"), vec![log("a"), log("b")]);
        assert_eq!(store.verdicts("r-1").expect("verdicts"), vec![verdict]);
    }
}
