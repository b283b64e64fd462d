//! The run loop's ledger, and a run's end: its manifest waits for the catalog's flush
//! and for pending work.

use super::execute::{CaseResult, Ledger};
use super::*;
use crate::evidence::RunManifest;
use crate::gate::Tally;
use crate::outcome::{CaseOutcome, CaseSpill};
use crate::store::{LogRecord, RunRecord, Store, StoreError, VerdictRecord};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A case outcome named `case-{index}` (for the ledger's tests).
fn outcome(index: usize) -> CaseOutcome {
    CaseOutcome {
        dataset: "d".into(),
        id: format!("case-{index}"),
        tags: vec![],
        agent: "a".into(),
        source: format!("d.jsonl:{}", index + 1),
        runs: vec![],
        blocks: vec![],
        passed: !index.is_multiple_of(3),
        score: None,
    }
}

/// The ids a ledger wrote, and the error it ended with; or the error of a panic.
type Ran = Result<(Vec<String>, Option<RunnerError>), RunnerError>;

/// Runs `cases` cases on `jobs` workers of a fresh ledger, each case through `case`;
/// returns what was written, the error, and the order progress saw the cases in.
fn run_ledger(cases: usize, jobs: usize, case: &(dyn Fn(usize) -> CaseResult + Sync)) -> (Ran, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cases.jsonl");
    let spill = CaseSpill::create(&path, "").expect("spill");
    let mut seen = Vec::new();
    let mut progress = |case: &CaseOutcome, _: std::time::Duration| seen.push(case.id.clone());
    let ledger = Ledger::new(cases, jobs, spill, path.clone(), &mut progress);
    let made = std::sync::atomic::AtomicUsize::new(0);
    let ran = ledger.run(jobs, &|| {
        made.fetch_add(1, Ordering::SeqCst);
        case
    });
    assert_eq!(made.into_inner(), jobs.min(cases), "one worker per job, never more than there are cases");
    let ran = ran.map(|ledgered| {
        let written = ledgered.spill.finish().expect("spill finishes").to_vec().expect("spill reads back");
        (written.into_iter().map(|c| c.id).collect(), ledgered.error)
    });
    (ran, seen)
}

#[test]
fn cases_finished_out_of_order_are_written_in_dataset_order_and_never_far_ahead() {
    let cases = 60;
    let highest_written = std::sync::atomic::AtomicUsize::new(0);
    let started = Mutex::new(Vec::new());
    let case = |index: usize| {
        started.lock().unwrap().push(index);
        // every fifth case is slow: the ones after it finish first and wait
        if index.is_multiple_of(5) {
            std::thread::sleep(std::time::Duration::from_millis(15));
        }
        highest_written.fetch_max(index, Ordering::SeqCst);
        Ok((None, outcome(index)))
    };
    let (ran, seen) = run_ledger(cases, 3, &case);
    let (written, error) = ran.expect("no worker panicked");
    assert!(error.is_none(), "{error:?}");
    let expected: Vec<String> = (0..cases).map(|i| format!("case-{i}")).collect();
    assert_eq!(written, expected, "the spill holds every case once, in dataset order");
    let mut seen_sorted = seen.clone();
    seen_sorted.sort_by_key(|id| id[5..].parse::<usize>().unwrap());
    assert_eq!(seen_sorted, expected, "progress saw every case once");
    assert_ne!(seen, expected, "slow cases let later ones finish first (else the test proves nothing)");
    let mut started = started.into_inner().unwrap();
    started.sort_unstable();
    assert_eq!(started, (0..cases).collect::<Vec<_>>(), "each case ran exactly once");
}

#[test]
fn no_case_starts_more_than_the_window_ahead_of_the_oldest_unwritten_one() {
    // case 0 runs until the other workers have run cases 1 to 23, all the window
    // allows; no worker may take case 24 or later while case 0 is unwritten
    let (jobs, cases) = (3, 100);
    let window = jobs * 8;
    let release = AtomicBool::new(false);
    let beyond = AtomicBool::new(false);
    let running = std::sync::atomic::AtomicUsize::new(0);
    let case = |index: usize| {
        if index >= window && !release.load(Ordering::SeqCst) {
            beyond.store(true, Ordering::SeqCst);
        }
        if index == 0 {
            // wait until the other workers have run everything the window allows
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while running.load(Ordering::SeqCst) < window - 1 && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            // and a little longer, for a worker that would wrongly take one more
            std::thread::sleep(std::time::Duration::from_millis(30));
            release.store(true, Ordering::SeqCst);
        } else {
            running.fetch_add(1, Ordering::SeqCst);
        }
        Ok((None, outcome(index)))
    };
    let (ran, _) = run_ledger(cases, jobs, &case);
    let (written, error) = ran.expect("no worker panicked");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(written.len(), cases, "the waiting workers went on once case 0 was written");
    assert!(!beyond.load(Ordering::SeqCst), "a case at or past the window started while case 0 ran");
}

#[test]
fn an_error_in_one_case_stops_the_run_and_is_what_it_ends_with() {
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // run on a thread of its own: a stop that woke no worker would leave one waiting at
    // the window's edge for good, and this test should fail on that, not hang
    let (sent, received) = std::sync::mpsc::channel();
    let counted = started.clone();
    std::thread::spawn(move || {
        let case = |index: usize| {
            counted.fetch_add(1, Ordering::SeqCst);
            if index == 7 {
                return Err(RunnerError::Internal("case 7 broke".into()));
            }
            Ok((None, outcome(index)))
        };
        let _ = sent.send(run_ledger(1000, 2, &case).0);
    });
    let ran = received
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run ended: the stop woke every waiting worker");
    let (written, error) = ran.expect("no worker panicked");
    assert!(matches!(&error, Some(RunnerError::Internal(m)) if m == "case 7 broke"), "{error:?}");
    assert!(written.len() <= 7, "nothing at or after the failed case is written: {}", written.len());
    // Until the failure reaches the ledger, the other worker may go on taking cases (it
    // did once, under load, while case 7's worker was between returning its error and
    // taking the lock), but never past the window after the last written case: 2 jobs
    // × 8 ahead of case 7, which is never written.
    let window = 2 * 8;
    assert!(started.load(Ordering::SeqCst) <= 7 + window, "{} cases started", started.load(Ordering::SeqCst));
}

#[test]
fn a_worker_that_panics_stops_the_others_and_the_run_is_an_internal_error() {
    let started = std::sync::atomic::AtomicUsize::new(0);
    let case = |index: usize| {
        started.fetch_add(1, Ordering::SeqCst);
        assert!(index != 3, "case 3 panics");
        std::thread::sleep(std::time::Duration::from_millis(1));
        Ok((None, outcome(index)))
    };
    let (ran, _) = run_ledger(1000, 2, &case);
    match ran {
        Err(RunnerError::Internal(message)) => assert!(message.contains("case 3 panics"), "{message}"),
        other => panic!("expected an internal error, got {:?}", other.map(|(w, e)| (w.len(), e))),
    }
    // the other worker may run on until the window ends (the panic's unwinding takes
    // a while), but no further: case 3 is never written
    let started = started.load(Ordering::SeqCst);
    assert!(started <= 4 + 2 * 8, "{started} cases of 1,000 started after a panic");
}

#[test]
fn more_jobs_than_cases_start_a_worker_per_case_and_run_each_once() {
    let ran = std::sync::atomic::AtomicUsize::new(0);
    let case = |index: usize| {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok((None, outcome(index)))
    };
    // run_ledger checks that 2 workers were made, not 64
    let (result, _) = run_ledger(2, 64, &case);
    let (written, error) = result.expect("no worker panicked");
    assert!(error.is_none(), "{error:?}");
    assert_eq!((written.len(), ran.into_inner()), (2, 2));
}

/// A store whose every flush fails, as a full or failed disk makes sled's.
struct UnflushableStore(crate::store::SledStore);

impl Store for UnflushableStore {
    fn put_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.0.put_run(run)
    }
    fn begin_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.0.begin_run(run)
    }
    fn put_log(&self, log: &LogRecord) -> Result<(), StoreError> {
        self.0.put_log(log)
    }
    fn put_verdict(&self, verdict: &VerdictRecord) -> Result<(), StoreError> {
        self.0.put_verdict(verdict)
    }
    fn runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.0.runs()
    }
    fn logs(&self, run_id: &str) -> Result<Vec<LogRecord>, StoreError> {
        self.0.logs(run_id)
    }
    fn verdicts(&self, run_id: &str) -> Result<Vec<VerdictRecord>, StoreError> {
        self.0.verdicts(run_id)
    }
    fn clear(&self) -> Result<(), StoreError> {
        self.0.clear()
    }
    fn flush(&self) -> Result<(), StoreError> {
        Err(StoreError::Io(std::io::Error::other("no space left on the catalog's disk")))
    }
}

/// The plan of `pipeline/ci.toml` with its store in a fresh directory (kept while the
/// returned guard lives).
fn ci_plan_in_a_fresh_store() -> Result<(tempfile::TempDir, Plan), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let pipeline = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipeline/ci.toml");
    let mut plan = Plan::load(&pipeline, &Selection::default())?;
    plan.pipeline.pipeline.store = dir.path().to_string_lossy().into_owned();
    Ok((dir, plan))
}

/// The catalog's first flush runs beside the reports: its failure must still stop
/// the run before the manifest claims it finished, not be lost on its thread.
#[test]
fn a_catalog_that_cannot_be_flushed_fails_the_run_before_its_manifest() -> Result<(), Box<dyn std::error::Error>> {
    let (_store_dir, plan) = ci_plan_in_a_fresh_store()?;
    let layout = plan.layout();
    let run_dir = layout.run_dir(&plan.run_id);
    let store: Arc<dyn Store> = Arc::new(UnflushableStore(crate::store::SledStore::open(&layout.catalog())?));
    let options = Options { jobs: 2, selective: false, signer: None, shard: None, reuse: None };
    let result = execute(Arc::new(plan), store, &options, &mut |_, _| {});
    match result {
        Err(RunnerError::Store(e)) => assert!(e.to_string().contains("no space left"), "{e}"),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("the run passed with a catalog it could not flush"),
    }
    assert!(!run_dir.join(crate::evidence::manifest::MANIFEST_FILE).exists(), "a manifest was written");
    assert!(!layout.suite_path(&run_dir.file_name().unwrap().to_string_lossy()).exists(), "suite.json was written");
    Ok(())
}

#[test]
fn a_run_of_no_cases_ends_at_once() {
    let (ran, seen) = run_ledger(0, 4, &|_| panic!("no case to run"));
    let (written, error) = ran.expect("no worker panicked");
    assert!(written.is_empty() && error.is_none() && seen.is_empty());
}

/// [`ci_plan_in_a_fresh_store`], with the store's catalog open.
fn ci_plan_and_catalog_in_a_fresh_store()
-> Result<(tempfile::TempDir, Plan, crate::store::SledStore), Box<dyn std::error::Error>> {
    let (dir, plan) = ci_plan_in_a_fresh_store()?;
    let store = crate::store::SledStore::open(&plan.layout().catalog())?;
    Ok((dir, plan, store))
}

/// A run on one worker, unsigned, whole.
const ONE_JOB: Options = Options { jobs: 1, selective: false, signer: None, shard: None, reuse: None };

/// The plan's run started and, with no case decided, concluded up to its manifest.
fn concluded_without_cases<'a>(
    plan: &'a Plan,
    store: &'a dyn Store,
    options: &'a Options,
) -> Result<Concluding<'a>, Box<dyn std::error::Error>> {
    let (run, started) = start_run(plan, store)?;
    started.sync()?;
    let cases = CaseSpill::create(&plan.layout().cases_path(&plan.run_id), "")?.finish()?;
    let decided = Decided { cases, tally: Tally::default(), card_cases: BTreeMap::new() };
    Ok(conclude_staged(plan, store, run, decided, options)?)
}

/// A rerun replaces the earlier run of its id whole: that run's directory is renamed
/// aside at once and deleted beside the new run, and it is gone once the start is
/// synced; a directory a kill left mid-deletion is swept first.
#[test]
fn a_rerun_deletes_the_earlier_run_beside_it_and_leaves_nothing_aside() -> Result<(), Box<dyn std::error::Error>> {
    let (_store_dir, plan, store) = ci_plan_and_catalog_in_a_fresh_store()?;
    let run_dir = plan.layout().run_dir(&plan.run_id);
    let runs = run_dir.parent().expect("runs/").to_path_buf();
    std::fs::create_dir_all(run_dir.join("case-a"))?;
    std::fs::write(run_dir.join("case-a/0.jsonl"), "the earlier run's log")?;
    std::fs::write(run_dir.join("planted"), "not this run's")?;
    // the earlier run's code under test left links to files of the user's in its run
    // directory; deleted beside the new run, while its agent runs, they go and their
    // targets stay
    let outside = tempfile::tempdir()?;
    std::fs::write(outside.path().join("precious"), "the user's")?;
    std::fs::create_dir_all(outside.path().join("kept"))?;
    std::fs::write(outside.path().join("kept/file"), "the user's too")?;
    std::os::unix::fs::symlink(outside.path().join("precious"), run_dir.join("case-a/link"))?;
    std::os::unix::fs::symlink(outside.path().join("kept"), run_dir.join("case-a/dir-link"))?;
    let leftover = runs.join(format!(".deleting-{}", plan.run_id));
    std::fs::create_dir_all(leftover.join("case-b"))?;
    std::fs::write(leftover.join("case-b/0.jsonl"), "a kill's leftover")?;

    let (_run, started) = start_run(&plan, &store)?;
    assert!(run_dir.join("run.json").is_file(), "the new run started under its name");
    assert!(!run_dir.join("planted").exists() && !run_dir.join("case-a").exists(), "nothing of the earlier run in it");
    started.sync()?;
    let left: Vec<String> = std::fs::read_dir(&runs)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    assert_eq!(left, std::slice::from_ref(&plan.run_id), "the earlier run and the leftover are both deleted");
    assert_eq!(std::fs::read_to_string(outside.path().join("precious"))?, "the user's", "a link's target is kept");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("kept/file"))?,
        "the user's too",
        "so is a linked directory's"
    );
    Ok(())
}

/// A merge's links are the pending work: the manifest, which anchors the logs and
/// marks the run finished, must not be written before that work is done.
#[test]
fn a_run_is_finished_only_after_its_pending_work() -> Result<(), Box<dyn std::error::Error>> {
    let (_store_dir, plan, store) = ci_plan_and_catalog_in_a_fresh_store()?;
    let (layout, options) = (plan.layout(), ONE_JOB);
    let run_dir = layout.run_dir(&plan.run_id);
    let mut concluding = concluded_without_cases(&plan, &store, &options)?;

    let saw_manifest = Arc::new(AtomicBool::new(false));
    let (seen, manifest) = (saw_manifest.clone(), run_dir.join(crate::evidence::manifest::MANIFEST_FILE));
    concluding.pending = Some(std::thread::spawn(move || {
        // slower than writing a manifest by far: a finish that did not wait would
        // have written it by now
        std::thread::sleep(std::time::Duration::from_millis(300));
        seen.store(manifest.exists(), Ordering::SeqCst);
        Ok(())
    }));
    let root = concluding.outcome().root.clone();
    let outcome = concluding.finish()?;
    assert!(!saw_manifest.load(Ordering::SeqCst), "the manifest was written before the pending work ended");
    assert!(run_dir.join(crate::evidence::manifest::MANIFEST_FILE).is_file());
    // the root the reports rendered with is the one the manifest has
    assert_eq!(outcome.root, root);
    assert_eq!(Some(RunManifest::read(&run_dir)?.root().to_string()), root);
    Ok(())
}

/// A run concluded but never finished (its reports failed, a signal came) has written
/// what marks it finished only under temporary names: dropped, it leaves none of them,
/// and its directory reads as a run that stopped before its manifest.
#[test]
fn a_run_concluded_and_dropped_is_left_unfinished_with_nothing_beside_it() -> Result<(), Box<dyn std::error::Error>> {
    let (_store_dir, plan, store) = ci_plan_and_catalog_in_a_fresh_store()?;
    let (layout, options) = (plan.layout(), ONE_JOB);
    let run_dir = layout.run_dir(&plan.run_id);
    let names = || -> std::io::Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(&run_dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        names.sort();
        Ok(names)
    };
    let concluding = concluded_without_cases(&plan, &store, &options)?;
    let staged: Vec<String> = names()?.into_iter().filter(|n| n.ends_with(".tmp")).collect();
    assert!(staged.iter().any(|n| n.starts_with(".manifest.json.")), "the manifest is staged: {staged:?}");
    drop(concluding);
    let left = names()?;
    assert!(
        !left.iter().any(|n| n.starts_with('.') && n.ends_with(".tmp") || n == "manifest.json" || n == "suite.json"),
        "{left:?}"
    );
    let run: RunRecord = serde_json::from_slice(&std::fs::read(layout.meta_path(&plan.run_id))?)?;
    assert_eq!(run.passed, None, "run.json still says the run is unfinished");
    Ok(())
}

/// The code under test runs with the run's user id and may outlive its case: whatever
/// it writes under the temporary names of `suite.json`, the manifest or `run.json` while
/// the run finishes is never put in place. The run fails as a run whose files changed,
/// with no manifest, and `run.json` still says it is unfinished.
#[test]
fn a_finishing_file_forged_under_its_temporary_name_leaves_the_run_without_a_verdict()
-> Result<(), Box<dyn std::error::Error>> {
    for target in ["suite.json", crate::evidence::manifest::MANIFEST_FILE, "run.json"] {
        let (_store_dir, plan, store) = ci_plan_and_catalog_in_a_fresh_store()?;
        let (layout, options) = (plan.layout(), ONE_JOB);
        let run_dir = layout.run_dir(&plan.run_id);
        let concluding = concluded_without_cases(&plan, &store, &options)?;
        let temp = concluding
            .staged
            .finishing
            .iter()
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!(".{target}."))))
            .cloned()
            .ok_or(format!("no staged {target}"))?;
        std::fs::write(&temp, b"{\"passed\":true}\n")?;
        match concluding.finish() {
            Err(RunnerError::Changed(path)) => assert_eq!(path.file_name(), Some(std::ffi::OsStr::new(target))),
            other => panic!("{target} forged: {:?}", other.map(|o| o.passed)),
        }
        assert!(!run_dir.join(crate::evidence::manifest::MANIFEST_FILE).exists(), "{target} forged: a manifest");
        let run: RunRecord = serde_json::from_slice(&std::fs::read(layout.meta_path(&plan.run_id))?)?;
        assert_eq!(run.passed, None, "{target} forged: run.json says finished");
    }
    Ok(())
}

/// Every verdict file the manifest lists must be on disk to stay before the manifest is:
/// `run` hands those not yet synced to the logs' fsync ([`Concluding::unsynced`]), and
/// `finish` syncs what no caller took. Either way `verdicts.jsonl` ends in dataset
/// order in its place, and nothing is left beside it.
#[test]
fn every_verdict_file_the_manifest_lists_is_synced_before_it() -> Result<(), Box<dyn std::error::Error>> {
    for taken in [true, false] {
        let (_store_dir, plan, store) = ci_plan_and_catalog_in_a_fresh_store()?;
        let (layout, options) = (plan.layout(), ONE_JOB);
        let run_dir = layout.run_dir(&plan.run_id);
        let mut concluding = concluded_without_cases(&plan, &store, &options)?;
        let names = |paths: Vec<std::path::PathBuf>| -> Result<Vec<String>, std::path::StripPrefixError> {
            paths.iter().map(|p| p.strip_prefix(&run_dir).map(|p| p.to_string_lossy().into_owned())).collect()
        };
        let (verdict_files, finishing) = (concluding.unsynced(), concluding.finishing());
        assert_eq!(finishing.len(), 3, "suite.json, the manifest and run.json: {finishing:?}");
        if !taken {
            // handed back: this caller leaves them to `finish`
            concluding.staged.unsynced = verdict_files.clone();
            concluding.staged.finishing = finishing.clone();
        }
        let unsynced: Vec<String> = [names(verdict_files)?, names(finishing)?].concat();
        // (asked only of a caller that took them: asking takes them)
        assert!(!taken || concluding.unsynced().is_empty(), "taken once");
        assert!(!taken || concluding.finishing().is_empty(), "taken once");
        concluding.finish()?;
        // the sorted verdicts, suite.json, the manifest and run.json were synced under
        // their temporary names and renamed into place
        let sorted = layout.verdicts_path(&plan.run_id).with_extension("jsonl.tmp");
        let sorted = sorted.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let pid = format!(".{}.tmp", std::process::id());
        let placed = |name: String| match name.strip_prefix('.').and_then(|n| n.strip_suffix(&pid)) {
            _ if name == sorted => "verdicts.jsonl".to_string(),
            Some(target) => target.to_string(),
            None => name,
        };
        let synced: Vec<String> = unsynced.into_iter().map(placed).collect();
        for listed in RunManifest::read(&run_dir)?.files {
            assert!(synced.contains(&listed.path), "{} is listed but never synced (taken: {taken})", listed.path);
        }
        for marks_finished in [crate::evidence::manifest::MANIFEST_FILE, "run.json"] {
            assert!(synced.iter().any(|s| s == marks_finished), "{marks_finished} never synced (taken: {taken})");
        }
        let mut left: Vec<String> = std::fs::read_dir(&run_dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()?;
        left.retain(|name| name.ends_with(".tmp"));
        assert!(left.is_empty(), "{left:?} left in the run directory (taken: {taken})");
        assert!(!run_dir.join(&sorted).exists(), "{sorted} left beside verdicts.jsonl (taken: {taken})");
        assert!(layout.verdicts_path(&plan.run_id).is_file(), "verdicts.jsonl in place (taken: {taken})");
    }
    Ok(())
}
