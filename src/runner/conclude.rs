//! Concluding a run once every case is decided: verdicts and units indexed in dataset
//! order, gates and cards, `suite.json`, the manifest (signed when asked) and
//! `run.json`; and a finished run taken back ([`retract`]). The run's other end, a
//! fresh run directory before any case runs, is [`super::start`].

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::start::unfinished;
use super::{Options, Plan, RunnerError, at, cards, churn, shard};
use crate::canon::{self, Digest};
use crate::evidence::{FileEntry, LogEntry, RunManifest, SecretKey};
use crate::gate::Tally;
use crate::isolation::Confinement;
use crate::outcome::{CaseOutcome, Cases, RunResult, SuiteOutcome};
use crate::store::{Layout, RunRecord, Store, VerdictRecord};
use serde_json::json;

/// A run's verdicts for one case: into the store, and appended to `verdicts.jsonl` as
/// the case finishes (rewritten in dataset order at the end).
pub(crate) fn record_verdicts(
    plan: &Plan,
    case: &CaseOutcome,
    store: &dyn Store,
    verdicts: &Mutex<std::fs::File>,
) -> Result<(), RunnerError> {
    let mut file = verdicts.lock().map_err(|_| RunnerError::Internal("verdict file lock poisoned".into()))?;
    for r in &case.runs {
        let v = verdict(&plan.run_id, case, r);
        store.put_verdict(&v)?;
        let mut line = serde_json::to_vec(&v).map_err(|e| RunnerError::Internal(e.to_string()))?;
        // one write per line: `writeln!` on a file writes the line and its newline apart
        line.push(b'\n');
        file.write_all(&line)?;
    }
    Ok(())
}

/// A run once every case is decided: its cases (in dataset order, on disk), the tally
/// of verdicts by tag and the inputs of reliability cards.
pub(crate) struct Decided {
    pub cases: Cases,
    pub tally: Tally,
    pub card_cases: BTreeMap<usize, cards::CardCase>,
}

/// A run decided, indexed and judged, whose manifest is not yet written: its outcome
/// (root included) is final, so reports can be rendered from it, but the run is not
/// finished until [`Concluding::finish`] has waited for `pending` (a run's log fsyncs, a
/// merge's log links) and written `suite.json`, the manifest and `run.json`.
pub struct Concluding<'a> {
    plan: &'a Plan,
    store: &'a dyn Store,
    manifest: RunManifest,
    /// `suite.json`, the manifest and `run.json`, written but not in place (taken when
    /// [`Concluding::finish`] puts them there).
    finished: Option<Finished>,
    signer: Option<&'a SecretKey>,
    outcome: SuiteOutcome,
    pub(super) pending: Pending,
    pub(super) staged: Staged,
}

/// Verdict files written while concluding that the manifest lists and that are not yet
/// durable: fsync'd with the logs (one journal commit for all, [`Concluding::unsynced`])
/// or, for a caller that does not, by [`Concluding::finish`]; and `verdicts.jsonl` in
/// dataset order, beside the file the cases appended to, renamed over it once synced.
pub(super) struct Staged {
    pub(super) unsynced: Vec<PathBuf>,
    /// The files that mark the run finished, under their temporary names, not yet
    /// synced: a caller syncs them beside the logs ([`Concluding::finishing`]), or
    /// [`Concluding::finish`] does.
    pub(super) finishing: Vec<PathBuf>,
    /// `(sorted, verdicts.jsonl)`.
    verdicts: (PathBuf, PathBuf),
}

/// Work the run's files wait for, on its own thread.
type Pending = Option<std::thread::JoinHandle<Result<(), RunnerError>>>;

impl Concluding<'_> {
    /// The run's outcome as it will be once finished.
    pub fn outcome(&self) -> &SuiteOutcome {
        &self.outcome
    }

    /// The verdict files not yet fsync'd, handed to a caller that fsyncs them before its
    /// [`Concluding::pending`] work ends (`run` syncs them with the logs); those not
    /// taken, `finish` syncs itself.
    pub(super) fn unsynced(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.staged.unsynced)
    }

    /// `suite.json`, the manifest and `run.json` under their temporary names, not yet
    /// synced, handed to a caller that syncs them ([`sync_in_turn`]) before its
    /// [`Concluding::pending`] work ends; those not taken, `finish` syncs itself.
    pub(super) fn finishing(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.staged.finishing)
    }

    /// Wait for the pending work, then put in place what marks the run finished:
    /// `suite.json`, the manifest (it anchors the logs and the verdict files, so it
    /// waits for them), `run.json`.
    ///
    /// The three were written under temporary names when the run was concluded, and
    /// their bytes synced beside the logs ([`Concluding::finishing`]; here, for a caller
    /// that did not take them). Once the pending work is done and the last boundary
    /// passed, each takes its name in turn, durable before the next: the manifest lists
    /// `suite.json`, and `run.json` says the run finished. Written and synced here one
    /// after another, their six fsyncs were most of a run's last milliseconds.
    pub fn finish(mut self) -> Result<SuiteOutcome, RunnerError> {
        let waited = self.pending.take().map_or(Ok(()), |p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        let mut unsynced = std::mem::take(&mut self.staged.unsynced);
        unsynced.append(&mut self.staged.finishing);
        let waited = waited.and_then(|()| sync_each(&unsynced));
        // the verdicts in dataset order take their place even when the run stops here: its
        // directory reads as it always did once every case was decided
        let (sorted, verdicts) = &self.staged.verdicts;
        let placed = std::fs::rename(sorted, verdicts).map_err(at(verdicts));
        let waited = waited.and(placed);
        // the last moment a signal leaves the run unfinished (no manifest, no verdict);
        // after it, the caller takes the verdict back ([`retract`])
        let waited =
            waited.and_then(|()| crate::interrupt::boundary(crate::interrupt::Phase::Manifest).map_err(Into::into));
        if let Err(e) = waited {
            if matches!(e, RunnerError::Interrupted(_)) {
                self.store.flush()?;
            }
            return Err(e);
        }
        let finished = self.finished.take().expect("a run is finished once");
        let (plan, store, manifest, signer) = (self.plan, self.store, &self.manifest, self.signer);
        let layout = plan.layout();
        let run_dir = layout.run_dir(&plan.run_id);
        // beside cases.jsonl, everything else a report needs (reports can be rendered
        // again later); one directory sync makes its name and the verdicts' durable
        let (suite_path, meta) = (layout.suite_path(&plan.run_id), layout.meta_path(&plan.run_id));
        let manifest_path = run_dir.join(crate::evidence::manifest::MANIFEST_FILE);
        // all three are still what the run wrote before the first takes its name: a run
        // refused here has no manifest
        for (file, path) in
            [(&finished.suite, &suite_path), (&finished.manifest, &manifest_path), (&finished.run, &meta)]
        {
            file.check().map_err(changed(path))?;
        }
        let placed = (|| {
            finished.suite.place().map_err(changed(&suite_path))?;
            unchanged(manifest, &run_dir)?;
            finished.manifest.place().map_err(changed(&manifest_path))?;
            if let Some(key) = signer {
                key.sign(finished.root).write(&run_dir).map_err(|e| RunnerError::Internal(e.to_string()))?;
            }
            finished.run.place().map_err(changed(&meta))
        })();
        // a file changed in the moment since it was checked, or swapped in as it took its
        // name: whatever of the run is already in place is taken back
        if let Err(e) = placed {
            if matches!(e, RunnerError::Changed(_)) {
                retract(plan, store)?;
            }
            return Err(e);
        }
        store.put_run(&finished.done)?;
        store.flush()?;
        Ok(self.outcome.clone())
    }
}

/// An error putting the file for `path` in place: one that changed under its temporary
/// name since the run wrote it (the code under test ran with the run's user id) is
/// refused as a verdict file changed during the run is.
fn changed(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |e| match e.kind() {
        std::io::ErrorKind::InvalidData => RunnerError::Changed(path.to_path_buf()),
        _ => at(path)(e),
    }
}

/// The files that mark a run finished, written under temporary names when it is
/// concluded and put in place by [`Concluding::finish`] (removed if dropped unplaced).
struct Finished {
    suite: crate::atomic::Unplaced,
    manifest: crate::atomic::Unplaced,
    /// The run's root: the manifest's digest.
    root: Digest,
    run: crate::atomic::Unplaced,
    /// What `run.json` and the catalog say of the finished run.
    done: RunRecord,
}

impl Finished {
    /// `suite.json` (`suite`), the manifest and the finished `run.json` (`done`) of `plan`'s
    /// run, written under temporary names beside their own.
    fn stage(plan: &Plan, suite: &[u8], manifest: &RunManifest, done: RunRecord) -> Result<Finished, RunnerError> {
        let layout = plan.layout();
        let (suite_path, meta) = (layout.suite_path(&plan.run_id), layout.meta_path(&plan.run_id));
        let suite = crate::atomic::stage(&suite_path, suite).map_err(at(&suite_path))?;
        let (manifest, root) =
            manifest.stage(&layout.run_dir(&plan.run_id)).map_err(|e| RunnerError::Internal(e.to_string()))?;
        let bytes = serde_json::to_vec_pretty(&done).map_err(|e| RunnerError::Internal(e.to_string()))?;
        let run = crate::atomic::stage(&meta, &bytes).map_err(at(&meta))?;
        Ok(Finished { suite, manifest, root, run, done })
    }

    /// The temporary files, to be synced before they are put in place.
    fn temps(&self) -> [PathBuf; 3] {
        [self.suite.temp(), self.manifest.temp(), self.run.temp()].map(Path::to_path_buf)
    }
}

/// Take back a run finished on disk, for a signal that came after [`Concluding::finish`]
/// passed its last boundary (while it wrote the manifest, or while the reports were put
/// in place): it is left as a run interrupted before its manifest. The manifest goes
/// first — one step that makes the run unfinished, so a kill part-way leaves nothing
/// `report`, `merge` or `--reuse` would read — then the signature and the verdict
/// (`suite.json`), and `run.json` and the catalog say unfinished again; the logs stay,
/// and verify with `--allow-incomplete`.
pub fn retract(plan: &Plan, store: &dyn Store) -> Result<(), RunnerError> {
    let layout = plan.layout();
    let run_dir = layout.run_dir(&plan.run_id);
    let signature = run_dir.join(crate::evidence::signing::SIGNATURE_FILE);
    let manifest = run_dir.join(crate::evidence::manifest::MANIFEST_FILE);
    for path in [manifest, signature, layout.suite_path(&plan.run_id)] {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(at(&path)(e)),
            _ => {}
        }
    }
    let run = unfinished(plan);
    let meta = layout.meta_path(&plan.run_id);
    let bytes = serde_json::to_vec_pretty(&run).map_err(|e| RunnerError::Internal(e.to_string()))?;
    crate::atomic::replace(&meta, &bytes).map_err(at(&meta))?;
    store.put_run(&run)?;
    store.flush()?;
    Ok(())
}

impl Drop for Concluding<'_> {
    /// A run abandoned before it finished (its reports failed) still waits for its
    /// pending work, so nothing writes into its directory after the caller moved on.
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            let _ = pending.join();
        }
    }
}

/// Everything written once every case is decided, up to the manifest: verdicts in
/// order, gates and cards (not for a shard: `merge` decides those over the whole), the
/// units and the manifest's root; [`Concluding::finish`] writes the rest (`suite.json`,
/// the manifest, `run.json`). `run` and `merge` both end here, so a merged run
/// writes what one unsharded run would.
pub(crate) fn conclude_staged<'a>(
    plan: &'a Plan,
    store: &'a dyn Store,
    run: RunRecord,
    decided: Decided,
    options: &'a Options,
) -> Result<Concluding<'a>, RunnerError> {
    crate::interrupt::boundary(crate::interrupt::Phase::Decided)?;
    let Decided { cases, tally, card_cases } = decided;
    let layout = plan.layout();
    let run_dir = layout.run_dir(&plan.run_id);
    let Indexes { logs, files: mut written, mut staged } = write_indexes(plan, &layout, &run_dir, &cases)?;
    if let Some(spilled) = cases.spilled() {
        let name = crate::outcome::CASES_FILE.to_string();
        written.push(FileEntry { path: name, bytes: spilled.bytes, digest: spilled.digest });
        staged.unsynced.push(layout.cases_path(&plan.run_id));
    }
    let evaluate = |tally: &Tally| {
        if options.selective {
            // a selection judges pass rates, not suite sizes: min_cases is the full run's
            // guard, and tags the selection left without cases are not this run's to judge
            let mut config = plan.pipeline.gates.clone();
            config.default.iter_mut().chain(config.tags.values_mut()).for_each(|g| g.min_cases = None);
            crate::gate::keep_judgeable_score_bounds(&mut config, tally);
            let mut gates = crate::gate::evaluate(&config, tally);
            gates.retain(|g| g.scope == crate::outcome::DEFAULT_SCOPE || g.cases > 0);
            gates
        } else {
            crate::gate::evaluate(&plan.pipeline.gates, tally)
        }
    };
    let mut gates = if options.shard.is_some() { Vec::new() } else { evaluate(&tally) };
    let mut extras = serde_json::Map::new();
    if options.shard.is_none() {
        let mut card_targets = BTreeMap::new();
        for (agent, report) in cards::cards(card_cases.values()) {
            let targets = report.targets();
            extras.insert(format!("reliability.{agent}"), json!(targets));
            card_targets.insert(agent, targets);
        }
        gates.extend(crate::gate::evaluate_cards(&plan.pipeline.gates, &card_targets));
        churn::golden_churn(plan, &cases, &mut gates, &card_cases, &evaluate, &mut extras)?;
    }
    // the benchmark's cases this suite does not run: counted and named beside the
    // scorecard (a selection is a slice, and judges no denominator)
    if options.shard.is_none() && !options.selective && !plan.pipeline.not_run.is_empty() {
        let file = plan.pipeline.scorecard.not_run.clone().unwrap_or_default();
        extras
            .insert(crate::outcome::NOT_RUN.to_string(), crate::pipeline::not_run_extra(&file, &plan.pipeline.not_run));
    }
    // a run whose code under test ran unisolated says so in its verdict (suite.json,
    // report.json), and is signed only where the pipeline asks for it
    let unisolated = plan.confinement.get().and_then(Confinement::unisolated);
    let signer = options.signer.as_deref().filter(|_| unisolated.is_none() || plan.pipeline.isolation.sign_unisolated);
    if let Some(why) = &unisolated {
        let allowed = plan.pipeline.isolation.sign_unisolated;
        extras.insert(crate::isolation::EXTRA.to_string(), crate::isolation::extra(why, signer.is_some(), allowed));
    }
    let passed = if options.shard.is_some() { cases.passed() == cases.len() } else { gates.iter().all(|g| g.passed) };
    if let Some(shard) = options.shard {
        let record = shard::ShardRecord {
            plan: plan.digest,
            run_id: plan.run_id.clone(),
            stateval: env!("CARGO_PKG_VERSION").into(),
            shard,
            cases: cases.len(),
        };
        let path = run_dir.join(shard::SHARD_FILE);
        let bytes = serde_json::to_vec_pretty(&record).map_err(|e| RunnerError::Internal(e.to_string()))?;
        std::fs::write(&path, &bytes).map_err(at(&path))?;
        staged.unsynced.push(path);
        let digest = crate::canon::digest(crate::canon::Context::Content, &bytes);
        written.push(FileEntry { path: shard::SHARD_FILE.to_string(), bytes: bytes.len() as u64, digest });
    }
    let mut outcome = SuiteOutcome {
        pipeline: plan.pipeline.pipeline.name.clone(),
        run_id: plan.run_id.clone(),
        root: None,
        // what `stateval report` will say of the run as it stands once finished
        signature: Some(match signer {
            Some(key) => crate::evidence::trust::signed_by(&key.public().to_line()),
            None => crate::evidence::trust::UNSIGNED.to_string(),
        }),
        cases,
        gates,
        passed,
        scorecard: tally.scorecard(),
        extras,
    };
    // `suite.json` carries no root (the manifest it is listed in does), so that the
    // manifest can list it: `stateval report` takes the root from the manifest
    let suite = serde_json::to_vec_pretty(&outcome.header()).map_err(|e| RunnerError::Internal(e.to_string()))?;
    let files = verdict_files(&run_dir, &suite, written)?;
    // the manifest marks the run finished and anchors its logs and everything its
    // verdict is read from; its root is known before it is written, so that every
    // report can carry it
    let manifest = RunManifest::new(&plan.run_id, plan.digest, logs, files, passed);
    outcome.root = Some(manifest.root().to_string());
    let finished = Finished::stage(plan, &suite, &manifest, RunRecord { passed: Some(passed), ..run })?;
    staged.finishing = finished.temps().to_vec();
    Ok(Concluding { plan, store, manifest, finished: Some(finished), signer, outcome, pending: None, staged })
}

/// The manifest's entries for the verdict files in `run_dir`, with `suite.json` as
/// `suite` (written once the manifest's root is known, beside it) and the files the run
/// wrote as it wrote them (`written`: digested on the way out, never read back, so an
/// edit on disk is not what the manifest anchors). Any other file of
/// [`crate::evidence::VERDICT_FILES`] is listed as its bytes are on disk now (cases a
/// caller built in memory).
fn verdict_files(run_dir: &Path, suite: &[u8], written: Vec<FileEntry>) -> Result<Vec<FileEntry>, RunnerError> {
    let mut files = Vec::new();
    for name in crate::evidence::VERDICT_FILES {
        if name == crate::outcome::SUITE_FILE {
            let digest = crate::canon::digest(crate::canon::Context::Content, suite);
            files.push(FileEntry { path: name.to_string(), bytes: suite.len() as u64, digest });
            continue;
        }
        if let Some(entry) = written.iter().find(|e| e.path == name) {
            files.push(entry.clone());
            continue;
        }
        let path = run_dir.join(name);
        match FileEntry::of(run_dir, name) {
            Ok(entry) => files.push(entry),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(at(&path)(e)),
        }
    }
    Ok(files)
}

/// The catalog's record of one run's verdict.
pub(super) fn verdict(run_id: &str, case: &CaseOutcome, run: &RunResult) -> VerdictRecord {
    VerdictRecord {
        run_id: run_id.to_string(),
        case: case.id.clone(),
        dataset: case.dataset.clone(),
        k: run.index,
        passed: run.passed,
        status: run.status.clone(),
    }
}

/// One pass over the decided cases (in dataset order) for the files that index them.
/// `verdicts.jsonl`: during the run, verdict lines are appended as cases finish (so a
/// killed run keeps what it graded); here the file is rewritten in dataset order,
/// atomically, so it is byte-identical however the workers interleaved. `units.jsonl`: each unit
/// with its log's head, so a merge can check shards and `--reuse` can find work already
/// done; and the manifest's entries, returned for [`write_manifest`], with the entries
/// of the two files as they were written.
///
/// The heads and event counts come from `cases`, which reads back only what this run
/// spilled ([`crate::outcome::Spilled`]): each is the head the case's log writer had in
/// memory, never one found on disk.
fn write_indexes(plan: &Plan, layout: &Layout, run_dir: &Path, cases: &Cases) -> Result<Indexes, RunnerError> {
    let verdicts_path = layout.verdicts_path(&plan.run_id);
    let verdicts_tmp = verdicts_path.with_extension("jsonl.tmp");
    let units_path = run_dir.join(shard::UNITS_FILE);
    let create = |path: &Path| {
        std::fs::File::create(path).map(|f| std::io::BufWriter::new(canon::Digesting::new(f))).map_err(at(path))
    };
    let (mut verdicts, mut units) = (create(&verdicts_tmp)?, create(&units_path)?);
    let mut logs = Vec::with_capacity(cases.len());
    let internal = |e: serde_json::Error| RunnerError::Internal(e.to_string());
    for (i, case) in cases.iter().enumerate() {
        let case = case?; // the error names the file and line
        let case_ref = plan.cases.get(i).filter(|r| r.id == case.id).ok_or_else(|| {
            RunnerError::Internal(format!("case {} decided out of the plan's order (position {i})", case.id))
        })?;
        for r in &case.runs {
            serde_json::to_writer(&mut verdicts, &verdict(&plan.run_id, &case, r)).map_err(internal)?;
            verdicts.write_all(b"\n").map_err(at(&verdicts_tmp))?;
            let head = r.head.as_deref().map(str::parse).transpose().map_err(|_| {
                RunnerError::Internal(format!("case {}: run {}: a log head that is not a digest", case.id, r.index))
            })?;
            let unit = shard::UnitRecord {
                unit: shard::unit_id(plan, case_ref, r.index),
                case: case.id.clone(),
                k: r.index,
                head,
                events: r.events,
                recording: case_ref
                    .recordings
                    .get(r.index)
                    .and_then(|key| key.file.map(|bytes| shard::RecordingFile { bytes, content: key.digest })),
            };
            serde_json::to_writer(&mut units, &unit).map_err(internal)?;
            units.write_all(b"\n").map_err(at(&units_path))?;
            logs.push(LogEntry { path: format!("{}/{}.jsonl", case.id, r.index), head, events: r.events });
        }
    }
    let entry = |name: &str, (_, bytes, digest): (std::fs::File, u64, Digest)| FileEntry {
        path: name.to_string(),
        bytes,
        digest,
    };
    let units = units.into_inner().map_err(|e| e.into_error()).map_err(at(&units_path))?.finish();
    let verdicts = verdicts.into_inner().map_err(|e| e.into_error()).map_err(at(&verdicts_tmp))?.finish();
    let verdicts_name = verdicts_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let files = vec![entry(&verdicts_name, verdicts), entry(shard::UNITS_FILE, units)];
    let staged = Staged {
        unsynced: vec![verdicts_tmp.clone(), units_path],
        finishing: Vec::new(),
        verdicts: (verdicts_tmp, verdicts_path),
    };
    Ok(Indexes { logs, files, staged })
}

/// What [`write_indexes`] wrote: the manifest's entries for the logs and for the two
/// files, and those files, not yet durable (`verdicts.jsonl` not yet in place).
struct Indexes {
    logs: Vec<LogEntry>,
    files: Vec<FileEntry>,
    staged: Staged,
}

/// Fsync each of `paths` in turn, on this thread: for a few small files whose syncs
/// overlap other work already, where a thread each would only add threads.
pub(super) fn sync_in_turn(paths: &[PathBuf]) -> Result<(), RunnerError> {
    for path in paths {
        std::fs::OpenOptions::new().write(true).open(path).and_then(|f| f.sync_all()).map_err(at(path))?;
    }
    Ok(())
}

/// Fsync each of `paths`, at once: the first that fails is the error.
fn sync_each(paths: &[PathBuf]) -> Result<(), RunnerError> {
    let sync = |path: &PathBuf| std::fs::OpenOptions::new().write(true).open(path).and_then(|f| f.sync_all());
    let Some((first, rest)) = paths.split_first() else { return Ok(()) };
    // the first on this thread: a file alone starts no thread
    std::thread::scope(|s| {
        let syncing: Vec<_> = rest.iter().map(|path| s.spawn(move || sync(path).map_err(at(path)))).collect();
        let here = sync(first).map_err(at(first));
        syncing.into_iter().fold(here, |done, t| done.and(t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))))
    })
}

/// Every verdict file the manifest lists is still on disk as the run wrote it: the code
/// under test runs with the run's user id, and what it left behind may have edited one
/// since (a verdict flipped in `cases.jsonl`). Such a run gets no manifest, so nothing
/// signs the edit, nor a manifest that the files beside it contradict.
fn unchanged(manifest: &RunManifest, run_dir: &Path) -> Result<(), RunnerError> {
    for written in &manifest.files {
        let path = run_dir.join(&written.path);
        let found = FileEntry::of(run_dir, &written.path).map_err(at(&path))?;
        if found != *written {
            return Err(RunnerError::Changed(path));
        }
    }
    Ok(())
}
