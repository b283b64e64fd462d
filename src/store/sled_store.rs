//! The sled implementation of [`Store`]: records in four trees.
//!
//! - `runs`: one [`RunRecord`] per run, keyed by run id, as JSON.
//! - `cases`: a run's logs and verdicts, [`CHUNK`] cases to a record, keyed by run id
//!   and chunk number. One record per case kept every case's record in memory: sled
//!   0.34 pages a node out only after many accesses to its cache shard, which a run
//!   writing each key once never makes, so a 10,000-case run held about 20 MB of
//!   catalog. A chunk holds the same facts in a quarter of the bytes (`rows.rs`: no
//!   run id or path per row, numbers as varints, turn offsets as steps) and is flushed
//!   as it is written.
//! - `logs` and `verdicts`: one JSON record per log or verdict, as catalogs written before
//!   chunks were. They are read, never written; a rerun or `reindex` drops them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::rows::{Chunk, LogRow, VerdictRow};
use super::{Layout, LogRecord, RunRecord, Store, StoreError, VerdictRecord};

/// sled's default page cache is 1 GiB. A run writes the catalog once and reads it rarely,
/// so 1 MiB is plenty. (This bounds sled's cache, not what it holds of records written
/// once: see the module notes.)
const CACHE_BYTES: u64 = 1024 * 1024;

/// Cases per `cases` record: what a killed run can lose of its catalog (`reindex`
/// rebuilds it), and with [`CHUNK_ROWS`] what is held before it is written.
const CHUNK: usize = 64;
/// Rows per chunk at most, for runs of many recorded runs per case.
const CHUNK_ROWS: usize = 4 * CHUNK;

pub struct SledStore {
    db: sled::Db,
    runs: sled::Tree,
    cases: sled::Tree,
    legacy_logs: sled::Tree,
    legacy_verdicts: sled::Tree,
    pending: Mutex<Pending>,
}

/// Rows not yet written, all of one run.
#[derive(Default)]
struct Pending {
    run_id: String,
    /// The number of the next chunk of `run_id`; `None` until looked up.
    next: Option<u64>,
    chunk: Chunk,
}

/// Cases are counted by their verdicts, which follow their logs.
fn is_full(chunk: &Chunk) -> bool {
    chunk.verdicts.len() >= CHUNK || chunk.rows() >= CHUNK_ROWS
}

fn log_row(log: &LogRecord) -> LogRow {
    LogRow {
        case: log.case.clone(),
        k: log.k,
        head: log.head.clone(),
        events: log.events,
        complete: log.complete,
        steps: LogRow::steps(&log.turn_offsets),
    }
}

fn log_record(run_id: &str, row: LogRow) -> LogRecord {
    LogRecord {
        run_id: run_id.to_string(),
        path: Layout::log_rel(run_id, &row.case, row.k),
        turn_offsets: row.offsets(),
        case: row.case,
        k: row.k,
        head: row.head,
        events: row.events,
        complete: row.complete,
    }
}

fn verdict_row(v: &VerdictRecord) -> VerdictRow {
    VerdictRow { case: v.case.clone(), k: v.k, dataset: v.dataset.clone(), passed: v.passed, status: v.status.clone() }
}

fn verdict_record(run_id: &str, row: VerdictRow) -> VerdictRecord {
    let VerdictRow { case, k, dataset, passed, status } = row;
    VerdictRecord { run_id: run_id.to_string(), case, dataset, k, passed, status }
}

/// How long [`SledStore::open`] waits for a locked catalog before it is another run's,
/// and how often it tries meanwhile.
const LOCK_PATIENCE: Duration = Duration::from_millis(250);
const LOCK_RETRY: Duration = Duration::from_millis(10);

impl SledStore {
    /// Opens (or creates) the catalog in `dir`. A catalog another process holds is
    /// [`StoreError::Locked`], so callers can tell the user rather than report a bug.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        // no flusher thread: sled's default writes the catalog out every 500 ms from a
        // thread of its own, which cost a 10,000-case run about 6 MB of peak RSS (and a
        // 1,000-case run 5 MB). The catalog is written as each chunk fills, when the
        // run ends ([`Store::flush`]) and when the store is dropped; what a killed run
        // loses of it, `stateval reindex` rebuilds from the files.
        let config = sled::Config::new().path(dir).cache_capacity(CACHE_BYTES).flush_every_ms(None);
        // A catalog this process dropped a moment ago can still be locked: sled finishes
        // its last write on a thread-pool task that holds the file, and its lock, until
        // it ends (2 reopens in 300 failed so on a loaded machine). So a lock is waited
        // for a little before it is another run's.
        let mut waited = Duration::ZERO;
        let db = loop {
            match config.open() {
                Ok(db) => break db,
                // sled 0.34 says so only in the message of an `Other` I/O error
                Err(sled::Error::Io(e)) if e.to_string().starts_with("could not acquire lock") => {
                    if waited >= LOCK_PATIENCE {
                        return Err(StoreError::Locked { dir: dir.to_path_buf() });
                    }
                    std::thread::sleep(LOCK_RETRY);
                    waited += LOCK_RETRY;
                }
                Err(e) => return Err(e.into()),
            }
        };
        Ok(SledStore {
            runs: db.open_tree("runs")?,
            cases: db.open_tree("cases")?,
            legacy_logs: db.open_tree("logs")?,
            legacy_verdicts: db.open_tree("verdicts")?,
            pending: Mutex::new(Pending::default()),
            db,
        })
    }

    fn pending(&self) -> Result<std::sync::MutexGuard<'_, Pending>, StoreError> {
        self.pending.lock().map_err(|_| StoreError::Io(std::io::Error::other("the catalog's writer panicked")))
    }

    /// Add a row of `run_id` (`add` puts it in the chunk), writing the chunk out once
    /// it is full or when the rows before it belong to another run.
    fn add(&self, run_id: &str, add: impl FnOnce(&mut Chunk)) -> Result<(), StoreError> {
        let mut pending = self.pending()?;
        if pending.run_id != run_id {
            self.write_chunk(&mut pending)?;
            *pending = Pending { run_id: run_id.to_string(), next: None, chunk: Chunk::default() };
        }
        add(&mut pending.chunk);
        if is_full(&pending.chunk) {
            self.write_chunk(&mut pending)?;
            self.db.flush()?;
        }
        Ok(())
    }

    /// Write the pending rows as the run's next chunk (nothing when there are none).
    fn write_chunk(&self, pending: &mut Pending) -> Result<(), StoreError> {
        if pending.chunk.rows() == 0 {
            return Ok(());
        }
        let next = match pending.next {
            Some(next) => next,
            // rows added to a run this store did not start (a reindex, a second writer)
            // follow the chunks it already has
            None => match self.cases.scan_prefix(run_prefix(&pending.run_id)).keys().next_back() {
                Some(key) => chunk_number(&key?).map_or(0, |n| n + 1),
                None => 0,
            },
        };
        self.cases.insert(chunk_key(&pending.run_id, next), pending.chunk.encode())?;
        pending.next = Some(next + 1);
        pending.chunk = Chunk::default();
        Ok(())
    }

    /// Every row of a run, written or pending, in chunk order (a later row of the same
    /// log or verdict replaces an earlier one).
    fn chunks(&self, run_id: &str) -> Result<Vec<Chunk>, StoreError> {
        // held while scanning, so no chunk is written between the two reads
        let pending = self.pending()?;
        let mut chunks = Vec::new();
        for kv in self.cases.scan_prefix(run_prefix(run_id)) {
            let (key, bytes) = kv?;
            let chunk = Chunk::decode(&bytes)
                .map_err(|why| StoreError::Record { key: String::from_utf8_lossy(&key).replace('\0', "/"), why })?;
            chunks.push(chunk);
        }
        if pending.run_id == run_id {
            chunks.push(pending.chunk.clone());
        }
        Ok(chunks)
    }
}

/// `run \0`: the prefix of a run's keys in every per-case tree.
fn run_prefix(run_id: &str) -> Vec<u8> {
    format!("{run_id}\0").into_bytes()
}

/// `run \0 n`, n zero-padded so keys sort by chunk number.
fn chunk_key(run_id: &str, n: u64) -> Vec<u8> {
    format!("{run_id}\0{n:010}").into_bytes()
}

fn chunk_number(key: &[u8]) -> Option<u64> {
    let at = key.iter().rposition(|&b| b == 0)?;
    std::str::from_utf8(&key[at + 1..]).ok()?.parse().ok()
}

fn scan<T: DeserializeOwned>(tree: &sled::Tree, prefix: &[u8]) -> Result<Vec<T>, StoreError> {
    tree.scan_prefix(prefix).map(|kv| Ok(serde_json::from_slice(&kv?.1)?)).collect()
}

fn remove_prefix(tree: &sled::Tree, prefix: &[u8]) -> Result<(), StoreError> {
    for key in tree.scan_prefix(prefix).keys() {
        tree.remove(key?)?;
    }
    Ok(())
}

/// Records by case and run index: a later record of the same log replaces an earlier one.
fn by_log(records: impl IntoIterator<Item = LogRecord>) -> BTreeMap<(String, usize), LogRecord> {
    records.into_iter().map(|r| ((r.case.clone(), r.k), r)).collect()
}

impl Store for SledStore {
    fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.runs.insert(run.run_id.as_bytes(), serde_json::to_vec(run)?)?;
        Ok(())
    }
    fn begin_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        {
            let mut pending = self.pending()?;
            self.write_chunk(&mut pending)?;
            *pending = Pending { run_id: run.run_id.clone(), next: Some(0), chunk: Chunk::default() };
        }
        let prefix = run_prefix(&run.run_id);
        for tree in [&self.cases, &self.legacy_logs, &self.legacy_verdicts] {
            remove_prefix(tree, &prefix)?;
        }
        self.put_run(run)
    }
    fn put_log(&self, log: &LogRecord) -> Result<(), StoreError> {
        self.add(&log.run_id, |chunk| chunk.logs.push(log_row(log)))
    }
    fn put_verdict(&self, v: &VerdictRecord) -> Result<(), StoreError> {
        self.add(&v.run_id, |chunk| chunk.verdicts.push(verdict_row(v)))
    }
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        scan(&self.runs, b"")
    }
    fn logs(&self, run_id: &str) -> Result<Vec<LogRecord>, StoreError> {
        let mut logs = by_log(scan::<LogRecord>(&self.legacy_logs, &run_prefix(run_id))?);
        for chunk in self.chunks(run_id)? {
            logs.extend(by_log(chunk.logs.into_iter().map(|row| log_record(run_id, row))));
        }
        Ok(logs.into_values().collect())
    }
    fn verdicts(&self, run_id: &str) -> Result<Vec<VerdictRecord>, StoreError> {
        let key = |v: &VerdictRecord| (v.case.clone(), v.k);
        let mut verdicts: BTreeMap<_, _> = scan::<VerdictRecord>(&self.legacy_verdicts, &run_prefix(run_id))?
            .into_iter()
            .map(|v| (key(&v), v))
            .collect();
        for chunk in self.chunks(run_id)? {
            verdicts.extend(chunk.verdicts.into_iter().map(|row| verdict_record(run_id, row)).map(|v| (key(&v), v)));
        }
        Ok(verdicts.into_values().collect())
    }
    fn clear(&self) -> Result<(), StoreError> {
        *self.pending()? = Pending::default();
        for tree in [&self.runs, &self.cases, &self.legacy_logs, &self.legacy_verdicts] {
            tree.clear()?;
        }
        Ok(())
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.write_chunk(&mut *self.pending()?)?;
        self.db.flush()?;
        Ok(())
    }
}

impl Drop for SledStore {
    /// Without a flusher thread, whatever is pending or in sled's buffer is written
    /// here, on every way out of a command that opened the store.
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sled releases a dropped catalog's lock only once its last write's task ends; a
    /// reopen at once must wait for it, not call the catalog another run's. (Without
    /// the wait, 2 reopens in 300 were refused with both cores busy.)
    #[test]
    fn a_catalog_dropped_by_this_process_opens_again_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..200 {
            let store = SledStore::open(dir.path()).unwrap_or_else(|e| panic!("reopen {i}: {e}"));
            let run = RunRecord { run_id: format!("r-{i}"), pipeline: "p".into(), cases: 2, passed: None };
            store.begin_run(&run).expect("begin");
            store.flush().expect("flush");
        }
    }

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

    fn log(run: &str, case: &str, k: usize, turns: u64) -> LogRecord {
        LogRecord {
            run_id: run.into(),
            case: case.into(),
            k,
            path: Layout::log_rel(run, case, k),
            head: Some(format!("blake3:{}", "ab".repeat(32))),
            events: 5 * turns + 2,
            complete: true,
            // turns of about 2 KB, as a 50-turn replay writes them
            turn_offsets: (0..turns).map(|t| 180 + t * 2_113).collect(),
        }
    }

    fn verdict(run: &str, case: &str, k: usize) -> VerdictRecord {
        VerdictRecord {
            run_id: run.into(),
            case: case.into(),
            dataset: "long".into(),
            k,
            passed: k.is_multiple_of(2),
            status: "completed".into(),
        }
    }

    #[test]
    fn many_cases_read_back_in_case_order_before_and_after_a_flush() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = RunRecord { run_id: "r-2".into(), pipeline: "p".into(), cases: 300, passed: None };
        // finished out of order, as cases on several jobs finish; two runs of each
        let cases: Vec<String> = (0..300).rev().map(|i| format!("case-{i:03}")).collect();
        let store = SledStore::open(dir.path()).expect("open");
        store.begin_run(&run).expect("begin");
        for case in &cases {
            for k in 0..2 {
                store.put_log(&log("r-2", case, k, 50)).expect("log");
                store.put_verdict(&verdict("r-2", case, k)).expect("verdict");
            }
        }
        let mut logs: Vec<LogRecord> =
            cases.iter().flat_map(|c| [log("r-2", c, 0, 50), log("r-2", c, 1, 50)]).collect();
        logs.sort_by(|a, b| (&a.case, a.k).cmp(&(&b.case, b.k)));
        let mut verdicts: Vec<VerdictRecord> =
            cases.iter().flat_map(|c| [verdict("r-2", c, 0), verdict("r-2", c, 1)]).collect();
        verdicts.sort_by(|a, b| (&a.case, a.k).cmp(&(&b.case, b.k)));
        // some rows are still pending here: they are read all the same
        assert!(store.pending().expect("pending").chunk.rows() > 0);
        assert_eq!(store.logs("r-2").expect("logs"), logs);
        assert_eq!(store.verdicts("r-2").expect("verdicts"), verdicts);
        drop(store);
        let store = SledStore::open(dir.path()).expect("reopen");
        assert_eq!(store.logs("r-2").expect("logs"), logs);
        assert_eq!(store.verdicts("r-2").expect("verdicts"), verdicts);
        assert!(store.logs("r-20").expect("another run").is_empty());
    }

    #[test]
    fn a_rerun_replaces_every_record_an_earlier_run_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = RunRecord { run_id: "r-3".into(), pipeline: "p".into(), cases: 200, passed: None };
        let store = SledStore::open(dir.path()).expect("open");
        // a catalog written before chunks: one record per log and verdict
        let legacy = log("r-3", "old", 0, 3);
        store
            .legacy_logs
            .insert(b"r-3\x00old\x0000000000", serde_json::to_vec(&legacy).expect("json"))
            .expect("insert");
        store
            .legacy_verdicts
            .insert(b"r-3\x00old\x0000000000", serde_json::to_vec(&verdict("r-3", "old", 0)).expect("json"))
            .expect("insert");
        assert_eq!(store.logs("r-3").expect("legacy logs"), vec![legacy]);
        assert_eq!(store.verdicts("r-3").expect("legacy verdicts"), vec![verdict("r-3", "old", 0)]);
        store.begin_run(&run).expect("begin");
        for i in 0..200 {
            store.put_log(&log("r-3", &format!("c{i:03}"), 0, 2)).expect("log");
        }
        store.flush().expect("flush");
        // the rerun runs fewer cases: nothing of the first run's may stay
        store.begin_run(&run).expect("begin again");
        store.put_log(&log("r-3", "c000", 0, 4)).expect("log");
        assert_eq!(store.logs("r-3").expect("logs"), vec![log("r-3", "c000", 0, 4)]);
        assert!(store.verdicts("r-3").expect("verdicts").is_empty());
        assert_eq!(store.runs().expect("runs"), vec![run]);
    }

    #[test]
    fn rows_added_to_a_run_another_store_wrote_follow_its_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = RunRecord { run_id: "r-4".into(), pipeline: "p".into(), cases: 2, passed: None };
        {
            let store = SledStore::open(dir.path()).expect("open");
            store.begin_run(&run).expect("begin");
            store.put_log(&log("r-4", "a", 0, 2)).expect("log");
        }
        let store = SledStore::open(dir.path()).expect("reopen");
        store.put_log(&log("r-4", "b", 0, 2)).expect("log");
        store.flush().expect("flush");
        assert_eq!(store.cases.scan_prefix(b"r-4\0").count(), 2, "a second chunk, not the first overwritten");
        assert_eq!(store.logs("r-4").expect("logs"), vec![log("r-4", "a", 0, 2), log("r-4", "b", 0, 2)]);
    }

    #[test]
    fn chunked_rows_take_under_a_third_of_the_bytes_of_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run_id = "20261127-0a1b2c3d4e5f6a7b";
        let store = SledStore::open(dir.path()).expect("open");
        let (mut chunked, mut records) = (0, 0);
        for i in 0..CHUNK {
            let case = format!("case-{i:05}");
            let (l, v) = (log(run_id, &case, 0, 50), verdict(run_id, &case, 0));
            records += serde_json::to_vec(&l).expect("json").len() + serde_json::to_vec(&v).expect("json").len();
            store.put_log(&l).expect("log");
            store.put_verdict(&v).expect("verdict");
        }
        for kv in store.cases.scan_prefix(run_prefix(run_id)) {
            chunked += kv.expect("chunk").1.len();
        }
        assert!(chunked > 0, "a full chunk is written");
        assert!(chunked * 3 < records, "{chunked} bytes chunked, {records} as records");
    }
}
