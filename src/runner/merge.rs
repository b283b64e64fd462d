//! `stateval merge`: shard runs put back together into the run one machine would have
//! written.
//!
//! A merge is a checked union. Every shard must have run against the same plan (its
//! digest), verify against its own manifest, and hold each unit at most once with one
//! log head (a unit run twice with the same head — a retried Kubernetes pod — is
//! deduplicated); every planned unit must be present. Then the logs are copied into the
//! run directory an unsharded run would use, and the run ends as any run does
//! ([`super::conclude`]): per-tag gates, reliability cards, manifest and root computed
//! once over the whole. The reports of a merge are byte-identical to those of one
//! unsharded run of the same plan.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::shard::{PlanFile, SHARD_FILE, ShardRecord, UNITS_FILE, UnitRecord, unit_id};
use super::{Concluding, Decided, Options, Plan, RunnerError, at, cards, conclude_staged, start_run_from};
use crate::canon::Digest;
use crate::evidence::check::relative_text;
use crate::evidence::{CheckOptions, check_run};
use crate::gate::Tally;
use crate::metrics::dimensions as cards_api;
use crate::outcome::{CaseIter, CaseOutcome, CaseSpill, Cases};
use crate::pipeline::AgentKind;
use crate::store::{Layout, LogRecord, Store};

/// One shard run, read and verified: [`read_shards`] does this without the plan, so it
/// can run while the plan loads.
pub struct ShardRun {
    dir: PathBuf,
    /// Its `cases.jsonl`: the outcomes of the cases it decided, in dataset order.
    cases_path: PathBuf,
    record: ShardRecord,
    /// Its logs checked against its manifest: the units, and the turn offsets of each
    /// log by `<case>/<k>.jsonl` (noted while verifying); or why they do not hold.
    checked: Result<Checked, RunnerError>,
}

struct Checked {
    units: Vec<UnitRecord>,
    turn_offsets: HashMap<String, Vec<u64>>,
}

/// The run directory a shard output holds: `DIR` itself when it has `shard.json`, else
/// the one run under `DIR/runs/` that has.
fn shard_dir(dir: &Path) -> Result<PathBuf, RunnerError> {
    if dir.join(SHARD_FILE).is_file() {
        return Ok(dir.to_path_buf());
    }
    let runs = dir.join("runs");
    let found: Vec<PathBuf> = std::fs::read_dir(&runs)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.join(SHARD_FILE).is_file()).collect())
        .unwrap_or_default();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(refused(format!(
            "{}: no shard run here (no {SHARD_FILE} in it or in runs/*/): pass the --out directory of \
             `stateval run --shard`",
            dir.display()
        ))),
        many => Err(refused(format!(
            "{}: holds {} shard runs ({}); pass each run directory",
            dir.display(),
            many.len(),
            many.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

fn refused(message: String) -> RunnerError {
    RunnerError::Refused(message)
}

/// Read and verify every shard output in `dirs`. A directory that is not a shard
/// output is an error here; whether each shard ran this plan and verifies is decided by
/// [`merge`], shard by shard, in order.
pub fn read_shards(dirs: &[PathBuf]) -> Result<Vec<ShardRun>, RunnerError> {
    dirs.iter().map(|d| read_shard(d)).collect()
}

fn read_shard(dir: &Path) -> Result<ShardRun, RunnerError> {
    let dir = shard_dir(dir)?;
    let record_path = dir.join(SHARD_FILE);
    let text = std::fs::read_to_string(&record_path).map_err(at(&record_path))?;
    let record: ShardRecord = serde_json::from_str(&text)
        .map_err(|e| refused(format!("{}: not a stateval shard record: {e}", record_path.display())))?;
    let checked = check_shard(&dir);
    let cases_path = dir.join(crate::outcome::CASES_FILE);
    Ok(ShardRun { dir, cases_path, record, checked })
}

fn check_shard(dir: &Path) -> Result<Checked, RunnerError> {
    let check = check_run(dir, &CheckOptions::default());
    if let Some(first) = check.findings.first() {
        return Err(refused(format!("{}: does not verify: {first}", dir.display())));
    }
    let turn_offsets = check
        .logs
        .into_iter()
        .filter_map(|log| Some((log.path.strip_prefix(dir).ok().map(relative_text)?, log.turn_offsets)))
        .collect();
    let units_path = dir.join(UNITS_FILE);
    let text = std::fs::read_to_string(&units_path).map_err(at(&units_path))?;
    let mut units = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let unit: UnitRecord = serde_json::from_str(line)
            .map_err(|e| refused(format!("{}:{}: not a unit record: {e}", units_path.display(), i + 1)))?;
        units.push(unit);
    }
    Ok(Checked { units, turn_offsets })
}

/// The merged run's directory made ahead, while the plan loads: a hidden directory
/// beside the run's (`runs/.staging-<run id>`) with a directory per case and the case's
/// logs linked into it from the first shard (in the order named) that holds the case.
/// Making 10,000 directories and links is nearly all kernel time, which this way
/// overlaps validating the inputs instead of following it.
///
/// Nothing here is trusted: [`merge`] takes the staged directory only once every check
/// has passed, compares each case with what it would have linked (and links again any
/// that differs), and only then renames it into place. A refused merge drops it, so
/// an earlier run of the same plan is never touched.
pub struct Staged {
    dir: PathBuf,
    run_id: String,
    /// Case id → the shard its logs were linked from and the runs linked.
    cases: HashMap<String, (usize, Vec<usize>)>,
    /// Renamed into place: nothing left to remove.
    taken: bool,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.taken {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Stage the merged run's directory in `runs_dir` (the store's `runs/`) from shards
/// read by [`read_shards`], for the run of the plan they ran. Nothing is staged when a
/// shard failed its check or the shards ran different plans (the merge refuses those), nor when the staging
/// directory cannot be made. A case that cannot be staged (a log its shard's units name
/// but that is not there) is left out: the merge makes it itself, where a missing log
/// is refused with the case named, or not at all when the plan has no such case.
pub fn stage(shards: &[ShardRun], runs_dir: &Path) -> Option<Staged> {
    let plan = shards.first()?.record.plan;
    if shards.iter().any(|s| s.record.plan != plan || s.checked.is_err()) {
        return None;
    }
    let run_id = &super::run_id_of(&plan);
    let dir = runs_dir.join(format!(".staging-{run_id}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).ok()?;
    }
    std::fs::create_dir_all(&dir).ok()?;
    let mut cases: HashMap<String, (usize, Vec<usize>)> = HashMap::new();
    let mut failed = HashSet::new();
    for (s, shard) in shards.iter().enumerate() {
        let Ok(checked) = &shard.checked else { continue };
        for unit in &checked.units {
            if failed.contains(&unit.case) {
                continue;
            }
            let (owner, runs) = cases.entry(unit.case.clone()).or_insert((s, Vec::new()));
            if *owner != s || runs.contains(&unit.k) {
                continue;
            }
            let to_case = dir.join(&unit.case);
            let linked = if runs.is_empty() { make_case_dir(&to_case) } else { Ok(()) }
                .and_then(|()| link_log(&shard.dir.join(&unit.case), &to_case, unit.k));
            match linked {
                Ok(()) => runs.push(unit.k),
                Err(_) => {
                    cases.remove(&unit.case);
                    let _ = std::fs::remove_dir_all(&to_case);
                    failed.insert(unit.case.clone());
                }
            }
        }
    }
    Some(Staged { dir, run_id: run_id.clone(), cases, taken: false })
}

/// Each shard ran `plan` and verified, checked in the order the shards were named.
fn checked<'a>(plan: &Plan, shards: &'a [ShardRun]) -> Result<Vec<&'a Checked>, RunnerError> {
    let mut out = Vec::with_capacity(shards.len());
    for shard in shards {
        if shard.record.plan != plan.digest {
            return Err(refused(format!(
                "{}: ran against plan {} (stateval {}), but this pipeline's plan is {}: the shards ran against \
                 different plans or the inputs changed since",
                shard.dir.display(),
                shard.record.plan,
                shard.record.stateval,
                plan.digest
            )));
        }
        match &shard.checked {
            Ok(checked) => out.push(checked),
            Err(e) => return Err(refused(e.to_string())),
        }
    }
    Ok(out)
}

/// Merge shard outputs ([`read_shards`]) into the plan's run (in the plan's store).
/// The run is decided and judged but not yet finished: the logs may still be being
/// linked into it while its reports are rendered, and [`Concluding::finish`] waits for
/// them before writing the manifest.
pub fn merge<'a>(
    plan: &'a Plan,
    store: &'a dyn Store,
    shards: &[ShardRun],
    staged: Option<Staged>,
    plan_file: Option<&PlanFile>,
    options: &'a Options,
) -> Result<Concluding<'a>, RunnerError> {
    if let Some(file) = plan_file
        && file.plan != plan.digest
    {
        return Err(refused(format!(
            "the plan file is for plan {}, but this pipeline's plan is {}: the inputs changed since `stateval plan`",
            file.plan, plan.digest
        )));
    }
    let checked = checked(plan, shards)?;
    // every unit once: identical reruns deduplicated, conflicting ones refused
    let mut units: BTreeMap<Digest, (usize, &UnitRecord)> = BTreeMap::new();
    for (s, shard) in shards.iter().enumerate() {
        for unit in &checked[s].units {
            match units.get(&unit.unit) {
                Some((first, seen)) if seen.head != unit.head => {
                    return Err(refused(format!(
                        "unit {} (case {}, run {}) appears in {} and {} with different log heads: \
                         the same work gave two results",
                        unit.unit,
                        unit.case,
                        unit.k,
                        shards[*first].dir.display(),
                        shard.dir.display()
                    )));
                }
                Some(_) => {}
                None => {
                    units.insert(unit.unit, (s, unit));
                }
            }
        }
    }
    // every planned unit present
    let mut owner_of_case: Vec<usize> = Vec::with_capacity(plan.cases.len());
    for case in &plan.cases {
        let mut owner = None;
        for k in 0..case.recordings.len() {
            let id = unit_id(plan, case, k);
            let Some((s, _)) = units.get(&id) else {
                return Err(refused(format!("unit {id} (case {}, run {k}) is missing: no shard ran it", case.id)));
            };
            owner.get_or_insert(*s);
        }
        owner_of_case.push(owner.unwrap_or(0));
    }

    let layout = plan.layout();
    let mut staged = staged.filter(|st| st.run_id == plan.run_id);
    let run = start_run_from(plan, store, staged.as_ref().map(|st| st.dir.as_path()))?;
    let mut staged_cases = match &mut staged {
        Some(st) => {
            st.taken = true;
            std::mem::take(&mut st.cases)
        }
        None => HashMap::new(),
    };

    // One pass over the plan: each case's outcome streamed from its shard, indexed,
    // carded and written; its logs checked against what was staged, and linked where
    // they were not (or were linked otherwise).
    let run_dir = layout.run_dir(&plan.run_id);
    let spill_path = layout.cases_path(&plan.run_id);
    let mut spill = CaseSpill::create(&spill_path).map_err(at(&spill_path))?;
    let mut tally = Tally::default();
    let mut card_cases = BTreeMap::new();
    let mut outcomes = Outcomes::open(shards);
    for (index, case_ref) in plan.cases.iter().enumerate() {
        let owner = owner_of_case[index];
        let shard = &shards[owner];
        let mut outcome = outcomes.find(owner, &case_ref.id)?.ok_or_else(|| {
            refused(format!("case {}: {} ran its units but holds no outcome for it", case_ref.id, shard.dir.display()))
        })?;
        let from_case = shard.dir.join(&outcome.id);
        let to_case = run_dir.join(&outcome.id);
        let runs: Vec<usize> = outcome.runs.iter().map(|r| r.index).collect();
        if staged_cases.remove(&outcome.id).is_none_or(|(from, linked)| from != owner || linked != runs) {
            if to_case.exists() {
                std::fs::remove_dir_all(&to_case).map_err(at(&to_case))?;
            }
            make_case_dir(&to_case)?;
            runs.iter().try_for_each(|&k| link_log(&from_case, &to_case, k))?;
        }
        // only an external agent's run leaves its stderr beside the log
        if plan.pipeline.agents.get(&case_ref.agent).is_some_and(|p| p.kind == AgentKind::External) {
            runs.iter().try_for_each(|&k| link_stderr(&from_case, &to_case, k))?;
        }
        for r in &mut outcome.runs {
            r.log = plan.pipeline.display(&layout.log_path(&plan.run_id, &outcome.id, r.index));
        }
        for r in &outcome.runs {
            let rel = format!("{}/{}.jsonl", outcome.id, r.index);
            let turn_offsets = checked[owner].turn_offsets.get(&rel).cloned().ok_or_else(|| {
                refused(format!("{}: {rel}: the outcome names a log its manifest does not list", shard.dir.display()))
            })?;
            // the shard's check verified this log whole: index it without a second pass
            store.put_log(&LogRecord {
                run_id: plan.run_id.clone(),
                case: outcome.id.clone(),
                k: r.index,
                path: Layout::log_rel(&plan.run_id, &outcome.id, r.index),
                head: r.head.clone(),
                events: r.events,
                complete: true,
                turn_offsets,
            })?;
            store.put_verdict(&super::verdict(&plan.run_id, &outcome, r))?;
        }
        // only a card needs the case read again
        if case_ref.recordings.len() >= 2 || case_ref.perturbed {
            let case = plan.case(index)?;
            let price = plan.pipeline.agents.get(&case.agent).and_then(|p| p.price);
            let mut runs = Vec::new();
            for r in &outcome.runs {
                let events = crate::event::reader::read_log(&to_case.join(format!("{}.jsonl", r.index)))
                    .map_err(|e| refused(e.to_string()))?
                    .events;
                runs.push(cards_api::Run { success: r.passed, ..cards::card_run(&events, r.passed, price) });
            }
            card_cases.insert(
                index,
                cards::CardCase {
                    id: case.id.clone(),
                    agent: case.agent.clone(),
                    perturbation: case.perturbation.clone(),
                    runs,
                },
            );
        }
        tally.add(&outcome.tags, outcome.passed);
        spill.push(&outcome).map_err(at(&spill_path))?;
    }
    // staged from a shard's units but not in the plan: not this run's
    for case in staged_cases.keys() {
        let dir = run_dir.join(case);
        std::fs::remove_dir_all(&dir).map_err(at(&dir))?;
    }
    let cases = spill.finish().map_err(at(&spill_path))?;
    conclude_staged(plan, store, run, Decided { cases, tally, card_cases }, options)
}

/// The shards' case outcomes, taken in plan order. Each shard wrote its `cases.jsonl`
/// in dataset order, so walking the files alongside the plan finds each case at the
/// head of its shard's stream, and no map of every outcome is built; an outcome passed
/// over (one a shard holds that another owns, or a file out of order) is kept until it
/// is asked for.
struct Outcomes<'a> {
    streams: Vec<(CaseIter<'a>, HashMap<String, CaseOutcome>)>,
}

impl<'a> Outcomes<'a> {
    fn open(shards: &'a [ShardRun]) -> Self {
        Outcomes { streams: shards.iter().map(|s| (Cases::stream(&s.cases_path), HashMap::new())).collect() }
    }

    /// Case `id`'s outcome from shard `owner`, else from the first other shard holding it.
    fn find(&mut self, owner: usize, id: &str) -> Result<Option<CaseOutcome>, RunnerError> {
        if let Some(found) = self.take(owner, id)? {
            return Ok(Some(found));
        }
        for s in (0..self.streams.len()).filter(|s| *s != owner) {
            if let Some(found) = self.take(s, id)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    fn take(&mut self, s: usize, id: &str) -> Result<Option<CaseOutcome>, RunnerError> {
        let (stream, passed_over) = &mut self.streams[s];
        if let Some(found) = passed_over.remove(id) {
            return Ok(Some(found));
        }
        for next in stream {
            let outcome = next?.into_owned();
            if outcome.id == id {
                return Ok(Some(outcome));
            }
            passed_over.entry(outcome.id.clone()).or_insert(outcome);
        }
        Ok(None)
    }
}

/// A case's directory in the merged run, whose run directory exists.
fn make_case_dir(dir: &Path) -> Result<(), RunnerError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        // a case id with a `/` in it: its parents too
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir).map_err(at(dir)),
        Err(e) => Err(at(dir)(e)),
    }
}

/// Link log `k` from a shard's case directory into the merged run's. A finished log
/// never changes: a hard link is a copy without the bytes (and `verify` would catch a
/// later edit of either name against the manifest); where links cannot be made, the
/// file is copied.
fn link_log(from_case: &Path, to_case: &Path, k: usize) -> Result<(), RunnerError> {
    link_file(&from_case.join(format!("{k}.jsonl")), &to_case.join(format!("{k}.jsonl")))
}

/// Link run `k`'s stderr (an external agent's) the same way, when the shard kept one.
fn link_stderr(from_case: &Path, to_case: &Path, k: usize) -> Result<(), RunnerError> {
    let from = from_case.join(format!("{k}.stderr"));
    if !from.exists() {
        return Ok(());
    }
    link_file(&from, &to_case.join(format!("{k}.stderr")))
}

fn link_file(from: &Path, to: &Path) -> Result<(), RunnerError> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => std::fs::copy(from, to).map(drop).map_err(at(from)),
    }
}
