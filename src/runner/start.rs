//! A run's start: a fresh run directory before any case runs, its `run.json`, and the
//! earlier run of the same id deleted beside the new one.

use std::path::{Path, PathBuf};

use super::{Plan, RunnerError, at};
use crate::store::{RunRecord, Store};

/// A fresh run directory (the same inputs give the same run id: a rerun replaces the
/// earlier one whole) and its `run.json`, before any case runs; made durable by the
/// [`RunStarted::sync`] the caller finishes before the manifest.
pub(crate) fn start_run(plan: &Plan, store: &dyn Store) -> Result<(RunRecord, RunStarted), RunnerError> {
    let layout = plan.layout();
    let run_dir = layout.run_dir(&plan.run_id);
    let sweep = remove_run_dir(&run_dir)?;
    std::fs::create_dir_all(&run_dir).map_err(at(&run_dir))?;
    let run = unfinished(plan);
    let meta = layout.meta_path(&plan.run_id);
    // whole or absent, whenever the run is killed: reindex reads it back. Its fsyncs
    // (about 8 ms on a virtual disk, a seventh of a 50-case suite's wall time) wait for
    // the logs' own, before the manifest: until then nothing of the run is durable anyway
    let bytes = serde_json::to_vec_pretty(&run).map_err(|e| RunnerError::Internal(e.to_string()))?;
    let unsynced = crate::atomic::replace_unsynced(&meta, &bytes).map_err(at(&meta))?;
    store.begin_run(&run)?;
    Ok((run, RunStarted { unsynced, meta, sweep }))
}

/// A started run's `run.json`, in place and not yet durable, and the earlier run of the
/// same id being deleted.
pub(crate) struct RunStarted {
    unsynced: crate::atomic::Unsynced,
    meta: std::path::PathBuf,
    sweep: Option<Sweep>,
}

impl RunStarted {
    /// Make `run.json` durable, and wait until the earlier run is deleted: a run whose
    /// predecessor could not be deleted fails as it did when that came first.
    pub(crate) fn sync(mut self) -> Result<(), RunnerError> {
        self.unsynced.sync().map_err(at(&self.meta))?;
        self.sweep.take().map_or(Ok(()), Sweep::wait)
    }
}

/// An earlier run's directory, renamed aside, being deleted beside the new run: on the
/// repository's disk, deleting the 50-case suite's earlier run took 9–10 ms of wall (3 ms
/// of it CPU), a fifth of a rerun's wall when it came before the first case.
struct Sweep {
    doomed: PathBuf,
    deleting: Option<Deleting>,
}

enum Deleting {
    Beside(std::thread::JoinHandle<std::io::Result<()>>),
    /// No thread was to be had: deleted on the caller's, as before.
    Done(std::io::Result<()>),
}

impl Sweep {
    fn start(doomed: PathBuf) -> Sweep {
        let path = doomed.clone();
        let deleting =
            match std::thread::Builder::new().name("sweep".into()).spawn(move || std::fs::remove_dir_all(&path)) {
                Ok(thread) => Deleting::Beside(thread),
                Err(_) => Deleting::Done(std::fs::remove_dir_all(&doomed)),
            };
        Sweep { doomed, deleting: Some(deleting) }
    }

    fn wait(mut self) -> Result<(), RunnerError> {
        let done = match self.deleting.take() {
            Some(Deleting::Beside(thread)) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Some(Deleting::Done(done)) => done,
            None => Ok(()),
        };
        done.map_err(at(&self.doomed))
    }
}

impl Drop for Sweep {
    /// A run that stops early still deletes its predecessor before it returns: no
    /// thread of it outlives the run.
    fn drop(&mut self) {
        if let Some(Deleting::Beside(thread)) = self.deleting.take() {
            let _ = thread.join();
        }
    }
}

/// The catalog's record of the plan's run while it has no verdict.
pub(super) fn unfinished(plan: &Plan) -> RunRecord {
    RunRecord {
        run_id: plan.run_id.clone(),
        pipeline: plan.pipeline.pipeline.name.clone(),
        cases: plan.cases.len(),
        passed: None,
    }
}

/// Remove an earlier run's directory. It is first renamed aside (one atomic step), so
/// a kill while deleting never leaves a half-deleted directory under the run's name;
/// leftovers of such a kill are swept on the next run, before anything else. The
/// renamed directory is deleted beside the new run ([`Sweep`]).
fn remove_run_dir(run_dir: &Path) -> Result<Option<Sweep>, RunnerError> {
    let (Some(runs), Some(name)) = (run_dir.parent(), run_dir.file_name()) else { return Ok(None) };
    let doomed = runs.join(format!(".deleting-{}", name.to_string_lossy()));
    if doomed.exists() {
        std::fs::remove_dir_all(&doomed).map_err(at(&doomed))?;
    }
    match std::fs::rename(run_dir, &doomed) {
        Ok(()) => Ok(Some(Sweep::start(doomed))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(at(run_dir)(e)),
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::Sweep;

    /// A predecessor that cannot be deleted fails the run at [`RunStarted::sync`],
    /// naming it, as it failed the run's start when it was deleted first.
    #[test]
    fn a_sweep_that_fails_is_reported_naming_what_it_could_not_delete() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let missing = dir.path().join(".deleting-r-gone");
        let error = Sweep::start(missing).wait().expect_err("nothing there to delete");
        assert!(error.to_string().contains(".deleting-r-gone"), "{error}");
        // dropped unwaited, it still ends its thread before the run returns
        let doomed = dir.path().join(".deleting-r-other");
        std::fs::create_dir_all(doomed.join("case/deep")).expect("a tree to delete");
        drop(Sweep::start(doomed.clone()));
        assert!(!doomed.exists(), "the dropped sweep deleted its tree before returning");
    }
}
