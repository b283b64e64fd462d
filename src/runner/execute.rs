//! The run loop: [`execute`] runs the plan's cases on a few workers, the [`Ledger`]
//! writes what they finish in dataset order, and the run concludes
//! ([`super::conclude_staged`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::case::run_case;
use super::{
    Concluding, Decided, Plan, RunnerError, at, cards, conclude_staged, graders, reuse, shard, start_run, syncer,
};
use crate::evidence::SecretKey;
use crate::gate::Tally;
use crate::outcome::{CaseOutcome, CaseSpill, SuiteOutcome};
use crate::store::Store;

/// Options for [`execute`].
pub struct Options {
    pub jobs: usize,
    /// Only some cases were selected (`--filter`, `--tag`): `min_cases` bounds are not
    /// applied, and tag gates without a selected case are left out.
    pub selective: bool,
    /// Sign the run's root (`STATEVAL_SIGNING_KEY`).
    pub signer: Option<Arc<SecretKey>>,
    /// Run one shard of the plan (its cases are already selected, see
    /// [`Plan::keep_shard`]): logs and case outcomes, no gates.
    pub shard: Option<shard::Shard>,
    /// Take cases over from earlier runs whose units have verified logs (`--reuse`).
    pub reuse: Option<Arc<reuse::Reuse>>,
}

/// How often the run's main thread looks for a signal while its workers run cases: a
/// run stops this soon after Ctrl-C even in a long case (its agent's processes are
/// killed), and a thread that wakes 40 times a second costs nothing.
const INTERRUPT_POLL: std::time::Duration = std::time::Duration::from_millis(25);

/// What a case's progress is shown through: called once per finished case, on the
/// worker that ran it (one at a time), with the wall time the case took.
pub type Progress<'a> = dyn FnMut(&CaseOutcome, std::time::Duration) + Send + 'a;

/// Run every case of the plan. `progress` sees each case as it finishes, with the wall
/// time it took (for the terminal only: wall time never reaches a log or a report), in completion
/// order); the returned outcome lists cases in dataset order.
///
/// `jobs` workers take cases in dataset order, each the next one not yet taken, and
/// write what they finish: a case finished ahead of an earlier one waits until every
/// case before it is written ([`Ledger`]). Nothing passes between threads per case but
/// that ledger's lock: handing each case from the main thread to a worker and its
/// outcome back (four context switches, and an eventfd and an epoll wait) cost the
/// 220 × 50 suite about a tenth of its CPU (docs/speed.md). The main thread only
/// watches for signals meanwhile.
pub fn execute(
    plan: Arc<Plan>,
    store: Arc<dyn Store>,
    options: &Options,
    progress: &mut Progress<'_>,
) -> Result<SuiteOutcome, RunnerError> {
    execute_staged(&plan, &store, options, progress)?.finish()
}

/// [`execute`] up to the run's last step: every case decided and indexed, its logs and
/// verdict files being fsync'd on another thread, and its manifest not yet written
/// ([`Concluding::finish`] writes it once they are). The caller can render its reports
/// meanwhile, from [`Concluding::outcome`], and put them in place after `finish`.
pub fn execute_staged<'a>(
    plan: &'a Plan,
    store: &'a Arc<dyn Store>,
    options: &'a Options,
    progress: &mut Progress<'_>,
) -> Result<Concluding<'a>, RunnerError> {
    let layout = plan.layout();
    let (run, started) = start_run(plan, store.as_ref())?;
    let verdicts_path = layout.verdicts_path(&plan.run_id);
    let verdicts = Mutex::new(std::fs::File::create(&verdicts_path).map_err(at(&verdicts_path))?);
    let syncer = syncer::Syncer::default();
    let spill_path = layout.cases_path(&plan.run_id);
    let spill = CaseSpill::create(&spill_path, &plan.shown_run_dir()).map_err(at(&spill_path))?;
    let jobs = options.jobs.max(1);
    let ledger = Ledger::new(plan.cases.len(), jobs, spill, spill_path, progress);
    let work = Work { plan, store: store.as_ref(), verdicts: &verdicts, reuse: options.reuse.as_deref() };
    let Ledgered { error, spill, tally, card_cases, .. } = ledger.run(jobs, &|| {
        let logs = syncer.logs();
        move |index| work.run(index, &logs)
    })?;
    let interrupted = crate::interrupt::check(crate::interrupt::Phase::Cases).err().map(RunnerError::from);
    if let Some(error) = error.or(interrupted) {
        if matches!(error, RunnerError::Interrupted(_)) {
            crate::external::process::kill_all();
            graders::kill_all();
            store.flush()?;
        }
        return Err(error);
    }

    // The catalog's rows so far go to disk while the run concludes, beside the reports
    // and the logs' fsync: sled starts its seven I/O threads at its first write, and
    // they spin in its lazy initialiser while it starts them. Left to the flush after
    // the manifest, that was about an eighth of a 50-case suite's wall time (docs/speed.md).
    // Not before the cases: each of those threads then holds a 2 MiB page of its own
    // through them, 16 MB more at the peak of a long case.
    let flushing = {
        let store = store.clone();
        std::thread::spawn(move || store.flush().map_err(RunnerError::from))
    };
    let joined = |flushing: std::thread::JoinHandle<Result<(), RunnerError>>| {
        flushing.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    };
    let concluded = spill
        .finish()
        .map_err(at(&layout.cases_path(&plan.run_id)))
        .and_then(|cases| conclude_staged(plan, store.as_ref(), run, Decided { cases, tally, card_cases }, options));
    let mut concluding = match concluded {
        Ok(concluding) => concluding,
        Err(e) => {
            // the run fails with what stopped it; a flush that failed beside it is the
            // same disk's trouble, told by the next command that opens the catalog
            let _ = joined(flushing);
            return Err(e);
        }
    };
    // the manifest waits for every log's fsync (see `syncer`) and for the flush
    // and for run.json's and the verdict files', beside them: one journal commit for all
    // (an fsync while the cases ran would hold up their own writes, see `syncer`)
    let logs = syncer.logs();
    for path in concluding.unsynced() {
        logs.note(path)?;
    }
    drop(logs);
    // what marks the run finished is synced after run.json, on its thread
    let finishing = concluding.finishing();
    concluding.pending = Some(std::thread::spawn(move || {
        let (logs, started) = std::thread::scope(|s| {
            let started = s.spawn(|| started.sync().and_then(|()| super::conclude::sync_in_turn(&finishing)));
            (syncer.finish(), started.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
        });
        logs.map(drop).and(started).and(joined(flushing))
    }));
    Ok(concluding)
}

/// A case's outcome (and its card inputs, when it feeds a reliability card), or the
/// error that ends the run.
pub(super) type CaseResult = Result<(Option<cards::CardCase>, CaseOutcome), RunnerError>;

/// What every worker of [`execute`] runs cases with.
#[derive(Clone, Copy)]
struct Work<'a> {
    plan: &'a Plan,
    store: &'a dyn Store,
    verdicts: &'a Mutex<std::fs::File>,
    reuse: Option<&'a reuse::Reuse>,
}

impl Work<'_> {
    fn run(&self, index: usize, logs: &syncer::Logs) -> CaseResult {
        let taken = match self.reuse {
            Some(reuse) => reuse::take_over(self.plan, index, reuse, self.store, self.verdicts, logs)?,
            None => None,
        };
        match taken {
            Some(result) => Ok(result),
            None => run_case(self.plan, index, self.store, self.verdicts, logs),
        }
    }
}

/// The cases of a run as its workers take and write them.
pub(super) struct Ledger<'p> {
    state: Mutex<Ledgered<'p>>,
    /// Told when `written` moves while a worker waits for the window.
    window_moved: std::sync::Condvar,
    /// Set on a signal or an error: no worker takes another case.
    stop: std::sync::atomic::AtomicBool,
    window: usize,
    cases: usize,
    spill_path: PathBuf,
}

pub(super) struct Ledgered<'p> {
    /// The next case to take.
    next: usize,
    /// Cases written to the spill, in dataset order.
    written: usize,
    /// Finished cases waiting for an earlier one.
    waiting: BTreeMap<usize, (Option<cards::CardCase>, CaseOutcome)>,
    pub(super) spill: CaseSpill,
    tally: Tally,
    /// Only cases that feed a reliability card keep their card inputs.
    card_cases: BTreeMap<usize, cards::CardCase>,
    progress: &'p mut Progress<'p>,
    /// The first error of a case; the run ends with it.
    pub(super) error: Option<RunnerError>,
    /// The test knob (`interrupt::boundary`) paused once, when the first case was written.
    paused: bool,
    /// Workers waiting for the window to move.
    idle: usize,
}

impl<'p> Ledger<'p> {
    pub(super) fn new(
        cases: usize,
        jobs: usize,
        spill: CaseSpill,
        spill_path: PathBuf,
        progress: &'p mut Progress<'p>,
    ) -> Self {
        Ledger {
            state: Mutex::new(Ledgered {
                next: 0,
                written: 0,
                waiting: BTreeMap::new(),
                spill,
                tally: Tally::default(),
                card_cases: BTreeMap::new(),
                progress,
                error: None,
                paused: false,
                idle: 0,
            }),
            window_moved: std::sync::Condvar::new(),
            stop: std::sync::atomic::AtomicBool::new(false),
            // Cases finish out of order but are kept in dataset order: a finished case
            // waits until every case before it is written. Starting a case at most
            // `window` cases ahead of the oldest unwritten one bounds how many can wait.
            window: jobs * 8,
            cases,
            spill_path,
        }
    }

    /// Run every case on `jobs` workers (no more than there are cases), each running
    /// cases with the function `worker` makes for it, while this thread watches for
    /// signals; what was written, and the first error, when they are done. A worker's
    /// panic is an error here.
    pub(super) fn run<W, F>(self, jobs: usize, worker: &W) -> Result<Ledgered<'p>, RunnerError>
    where
        W: Fn() -> F + Sync,
        F: FnMut(usize) -> CaseResult,
    {
        let (alive, all_done) = std::sync::mpsc::channel::<std::convert::Infallible>();
        let panicked = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..jobs.min(self.cases))
                .map(|_| {
                    let (ledger, alive) = (&self, alive.clone());
                    scope.spawn(move || {
                        let _alive = alive;
                        ledger.work(worker());
                    })
                })
                .collect();
            drop(alive);
            // the channel carries nothing: it closes when the last worker lets go of it
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = all_done.recv_timeout(INTERRUPT_POLL) {
                if crate::interrupt::interrupted() {
                    // cases under way end as their agents' processes are killed
                    self.halt();
                    crate::external::process::kill_all();
                    graders::kill_all();
                }
            }
            workers.into_iter().filter_map(|worker| worker.join().err()).next()
        });
        if let Some(panic) = panicked {
            let what = panic.downcast_ref::<&str>().copied().or(panic.downcast_ref::<String>().map(String::as_str));
            return Err(RunnerError::Internal(format!("a case worker panicked: {}", what.unwrap_or("(no message)"))));
        }
        Ok(self.state.into_inner().unwrap_or_else(|e| e.into_inner()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledgered<'p>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker's life: take the next case, run it, write it, until none is left or the
    /// run stops.
    fn work(&self, mut run: impl FnMut(usize) -> CaseResult) {
        // a worker that panics stops the others after their cases: the run ends in error
        struct HaltOnPanic<'a, 'p>(&'a Ledger<'p>);
        impl Drop for HaltOnPanic<'_, '_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.halt();
                }
            }
        }
        let _guard = HaltOnPanic(self);
        while let Some(index) = self.take() {
            let started = std::time::Instant::now();
            let result = run(index);
            self.finish(index, result, started.elapsed());
        }
    }

    /// The next case to run, or `None` once every case is taken or the run stops.
    fn take(&self) -> Option<usize> {
        let pause = {
            let mut state = self.lock();
            state.written > 0 && !std::mem::replace(&mut state.paused, true)
        };
        // the knob pauses once, when the first case is written, outside the lock
        let boundary = if pause {
            crate::interrupt::boundary(crate::interrupt::Phase::Cases)
        } else {
            crate::interrupt::check(crate::interrupt::Phase::Cases)
        };
        let mut state = self.lock();
        if let Err(interrupted) = boundary {
            self.fail(&mut state, RunnerError::from(interrupted));
        }
        loop {
            if self.stop.load(std::sync::atomic::Ordering::SeqCst) || state.next >= self.cases {
                return None;
            }
            if state.next < state.written + self.window {
                state.next += 1;
                return Some(state.next - 1);
            }
            state.idle += 1;
            state = self.window_moved.wait(state).unwrap_or_else(|e| e.into_inner());
            state.idle -= 1;
        }
    }

    /// Show a finished case, and write it and every case after it that waited for it.
    fn finish(&self, index: usize, result: CaseResult, wall: std::time::Duration) {
        let mut state = self.lock();
        let state = &mut *state;
        let finished = match result {
            Ok(finished) => finished,
            Err(e) => return self.fail(state, e),
        };
        (state.progress)(&finished.1, wall);
        state.waiting.insert(index, finished);
        let before = state.written;
        while let Some((card_case, outcome)) = state.waiting.remove(&state.written) {
            state.tally.add_case(&outcome);
            if let Err(e) = state.spill.push(&outcome) {
                return self.fail(state, at(&self.spill_path)(e));
            }
            if let Some(card_case) = card_case {
                state.card_cases.insert(state.written, card_case);
            }
            state.written += 1;
        }
        if state.written > before && state.idle > 0 {
            self.window_moved.notify_all();
        }
    }

    /// The run ends with `error` (or the one before it): no worker takes another case.
    fn fail(&self, state: &mut Ledgered<'p>, error: RunnerError) {
        state.error.get_or_insert(error);
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.window_moved.notify_all();
    }

    /// No worker takes another case, and none waits for the window: a worker waiting
    /// behind a case that will never be written (its worker panicked, or a signal came
    /// while it ran) would wait for ever. Told under the lock, so a worker between
    /// looking at `stop` and waiting cannot miss it.
    fn halt(&self) {
        let _state = self.lock();
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.window_moved.notify_all();
    }
}
