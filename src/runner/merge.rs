//! `stateval merge`: shard runs put back together into the run one machine would have
//! written.
//!
//! A merge is a checked union. Every shard must have run against the same plan (its
//! digest), verify against its own manifest — and, when the merge signs its result,
//! carry a signature by the same key ([`crate::evidence::trust`]: a shard that merely
//! verifies may be a consistent forgery) — and hold each unit at most once with one
//! log head (a unit run twice with the same head — a retried Kubernetes pod — is
//! deduplicated); every planned unit must be present. Then the logs are copied into the
//! run directory an unsharded run would use, and the run ends as any run does
//! ([`super::conclude_staged`]): per-tag gates, reliability cards, manifest and root computed
//! once over the whole. The reports of a merge are byte-identical to those of one
//! unsharded run of the same plan.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::shard::{PlanFile, SHARD_FILE, ShardRecord, UNITS_FILE, UnitRecord, unit_id};
use super::{Concluding, Decided, Options, Plan, RunnerError, at, cards, conclude_staged, start_run};
use crate::canon::Digest;
use crate::dataset::ValidatedRecordings;
use crate::evidence::check::relative_text;
use crate::evidence::{CheckOptions, Trust, check_run};
use crate::gate::Tally;
use crate::metrics::dimensions as cards_api;
use crate::outcome::{CaseIter, CaseOutcome, CaseSpill, Cases};
use crate::pipeline::AgentKind;
use crate::store::{Layout, LogRecord, Store};

/// One shard run: opened by [`open_shards`] (its record and unit records, read without
/// the plan), then verified by [`ShardRun::verify`], which can run while the plan loads.
pub struct ShardRun {
    dir: PathBuf,
    /// Its `cases.jsonl`: the outcomes of the cases it decided, in dataset order.
    cases_path: PathBuf,
    record: ShardRecord,
    /// Its `units.jsonl`, or why it cannot be read.
    units: Result<Vec<UnitRecord>, RunnerError>,
    /// Its logs checked against its manifest: the turn offsets of each log by
    /// `<case>/<k>.jsonl` (noted while verifying), or why they do not hold; `None`
    /// until verified.
    checked: Option<Result<HashMap<String, Vec<u64>>, RunnerError>>,
}

impl ShardRun {
    /// Check every log of the shard against its manifest, and the manifest's root
    /// against what `trust` asks for (the merge's own signature, when it signs).
    pub fn verify(&mut self, trust: &Trust) {
        self.checked = Some(check_shard(&self.dir, trust));
    }
}

/// What a shard that ran this plan and verifies holds: its units and the turn offsets
/// of its logs.
struct Checked<'a> {
    units: &'a [UnitRecord],
    turn_offsets: &'a HashMap<String, Vec<u64>>,
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

/// Why a verified shard's code under test ran unisolated, as its `suite.json` says.
fn unisolated(dir: &Path) -> Option<String> {
    let text = std::fs::read(dir.join(crate::outcome::SUITE_FILE)).ok()?;
    let suite: serde_json::Value = serde_json::from_slice(&text).ok()?;
    Some(suite.get("extras")?.get(crate::isolation::EXTRA)?.get("why")?.as_str()?.to_string())
}

fn refused(message: String) -> RunnerError {
    RunnerError::Refused(message)
}

/// Open every shard output in `dirs`: its record and its unit records. A directory
/// that is not a shard output is an error here; whether each shard ran this plan and
/// verifies is decided by [`merge`], shard by shard, in order.
pub fn open_shards(dirs: &[PathBuf]) -> Result<Vec<ShardRun>, RunnerError> {
    dirs.iter().map(|d| open_shard(d)).collect()
}

fn open_shard(dir: &Path) -> Result<ShardRun, RunnerError> {
    let dir = shard_dir(dir)?;
    let record_path = dir.join(SHARD_FILE);
    let text = std::fs::read_to_string(&record_path).map_err(at(&record_path))?;
    let record: ShardRecord = serde_json::from_str(&text)
        .map_err(|e| refused(format!("{}: not a stateval shard record: {e}", record_path.display())))?;
    let units = read_units(&dir);
    let cases_path = dir.join(crate::outcome::CASES_FILE);
    Ok(ShardRun { dir, cases_path, record, units, checked: None })
}

/// The recording files the shards validated, when this version of stateval ran them:
/// a plan loaded with these does not parse them again (see
/// [`crate::dataset::ValidatedRecordings`]).
pub fn validated_recordings(shards: &[ShardRun]) -> ValidatedRecordings {
    shards
        .iter()
        .filter(|s| s.record.stateval == env!("CARGO_PKG_VERSION"))
        .filter_map(|s| s.units.as_ref().ok())
        .flatten()
        .filter_map(|u| u.recording.map(|r| (r.bytes, r.content)))
        .collect()
}

fn read_units(dir: &Path) -> Result<Vec<UnitRecord>, RunnerError> {
    let units_path = dir.join(UNITS_FILE);
    let text = std::fs::read_to_string(&units_path).map_err(at(&units_path))?;
    let mut units = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let unit: UnitRecord = serde_json::from_str(line)
            .map_err(|e| refused(format!("{}:{}: not a unit record: {e}", units_path.display(), i + 1)))?;
        units.push(unit);
    }
    Ok(units)
}

fn check_shard(dir: &Path, trust: &Trust) -> Result<HashMap<String, Vec<u64>>, RunnerError> {
    let check = check_run(dir, &CheckOptions::default());
    if let Some(first) = check.findings.first() {
        return Err(refused(format!("{}: does not verify: {first}", dir.display())));
    }
    let root = check.root.ok_or_else(|| refused(format!("{}: has no manifest", dir.display())))?;
    if let Err(why) = trust.check(dir, root) {
        return Err(refused(format!(
            "shard {}: {why}. Sign each shard (`stateval sign`) with the merge's key, or merge without \
             STATEVAL_SIGNING_KEY and sign the merged run on its own (`stateval sign`)",
            dir.display()
        )));
    }
    Ok(check
        .logs
        .into_iter()
        .filter_map(|log| Some((log.path.strip_prefix(dir).ok().map(relative_text)?, log.turn_offsets)))
        .collect())
}

/// Every shard of the split is among `shards`, and they were all cut one way: a missing
/// one is named as such (`shard hash:3/3 is missing`), before any unit is looked for.
fn every_shard_given(shards: &[ShardRun]) -> Result<(), RunnerError> {
    let Some(first) = shards.first() else { return Ok(()) };
    let cut = |s: &super::shard::Shard| (s.strategy, s.total);
    if let Some(other) = shards.iter().find(|s| cut(&s.record.shard) != cut(&first.record.shard)) {
        return Err(refused(format!(
            "{} is shard {} and {} is shard {}: the shards were cut differently",
            first.dir.display(),
            first.record.shard,
            other.dir.display(),
            other.record.shard
        )));
    }
    let (strategy, total) = cut(&first.record.shard);
    let given: std::collections::BTreeSet<usize> = shards.iter().map(|s| s.record.shard.index).collect();
    let missing: Vec<String> = (1..=total)
        .filter(|i| !given.contains(i))
        .filter_map(|i| super::shard::Shard::new(strategy, i, total))
        .map(|s| s.to_string())
        .collect();
    match missing.as_slice() {
        [] => Ok(()),
        [one] => Err(refused(format!(
            "shard {one} is missing: {} of {total} shard outputs were given, none of them shard {one}",
            given.len()
        ))),
        many => Err(refused(format!(
            "shards {} are missing: {} of {total} shard outputs were given",
            many.join(", "),
            given.len()
        ))),
    }
}

/// Each shard ran `plan` and verified, checked in the order the shards were named.
fn checked<'a>(plan: &Plan, shards: &'a [ShardRun]) -> Result<Vec<Checked<'a>>, RunnerError> {
    let mut out = Vec::with_capacity(shards.len());
    for shard in shards {
        if shard.record.plan != plan.digest {
            // what the shard ran, against what this pipeline plans for the same cases
            let now = super::shard::PlanFile::of(plan);
            let dataset_of: HashMap<&str, &str> =
                now.units.iter().map(|u| (u.case.as_str(), u.dataset.as_str())).collect();
            let ran: Vec<((&str, &str), Digest)> = match &shard.units {
                Ok(units) => units
                    .iter()
                    .map(|u| {
                        (
                            (dataset_of.get(u.case.as_str()).copied().unwrap_or("not planned now"), u.case.as_str()),
                            u.unit,
                        )
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            let planned = now.units.iter().map(|u| ((u.dataset.as_str(), u.case.as_str()), u.unit));
            let changes = super::shard::describe_changes(ran.into_iter(), planned, false);
            let changes: Vec<String> = changes.into_iter().map(|l| format!("  {l}")).collect();
            return Err(refused(format!(
                "{}: shard {} ran against plan {} (stateval {}), but this pipeline's plan is {}: the inputs \
                 changed since it ran:\n{}",
                shard.dir.display(),
                shard.record.shard,
                shard.record.plan,
                shard.record.stateval,
                plan.digest,
                changes.join("\n")
            )));
        }
        let turn_offsets = match &shard.checked {
            Some(Ok(offsets)) => offsets,
            Some(Err(e)) => return Err(refused(e.to_string())),
            None => {
                return Err(RunnerError::Internal(format!("{}: merged before it was verified", shard.dir.display())));
            }
        };
        match &shard.units {
            Ok(units) => out.push(Checked { units, turn_offsets }),
            Err(e) => return Err(refused(e.to_string())),
        }
    }
    Ok(out)
}

/// Merge shard outputs ([`open_shards`], each verified) into the plan's run (in the plan's store).
/// The run is decided and judged but not yet finished: the logs may still be being
/// linked into it while its reports are rendered, and [`Concluding::finish`] waits for
/// them before writing the manifest.
pub fn merge<'a>(
    plan: &'a Plan,
    store: &'a dyn Store,
    shards: &[ShardRun],
    plan_file: Option<&PlanFile>,
    options: &'a Options,
) -> Result<Concluding<'a>, RunnerError> {
    if let Some(file) = plan_file
        && file.plan != plan.digest
    {
        let changes: Vec<String> = file.changes(plan).into_iter().map(|l| format!("  {l}")).collect();
        return Err(refused(format!(
            "the inputs changed since `stateval plan` (plan file {}, this pipeline now {}):\n{}",
            file.plan,
            plan.digest,
            changes.join("\n")
        )));
    }
    every_shard_given(shards)?;
    let checked = checked(plan, shards)?;
    // a shard whose code under test ran unisolated leaves the whole run unisolated: the
    // merge says so, and signs it only as a run would (`[isolation] sign_unisolated`)
    for shard in shards {
        if let Some(why) = unisolated(&shard.dir) {
            plan.confinement().note_unisolated(format!("shard {}: {why}", shard.record.shard));
        }
    }
    // every unit once: identical reruns deduplicated, conflicting ones refused
    let mut units: BTreeMap<Digest, (usize, &UnitRecord)> = BTreeMap::new();
    for (s, shard) in shards.iter().enumerate() {
        for unit in checked[s].units {
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
    let (run, started) = start_run(plan, store)?;
    started.sync()?;

    // One pass over the plan: each case's outcome streamed from its shard, indexed,
    // carded and written, while a second thread makes the case directories and links
    // the logs, on through the gates and the reports, until the manifest needs them.
    // One thread making every directory keeps them from contending for the run
    // directory's lock, which cost more than two threads gained.
    let run_dir = layout.run_dir(&plan.run_id);
    let spill_path = layout.cases_path(&plan.run_id);
    let mut spill = CaseSpill::create(&spill_path, &plan.shown_run_dir()).map_err(at(&spill_path))?;
    let mut tally = Tally::default();
    let mut card_cases = BTreeMap::new();
    let mut outcomes = Outcomes::open(shards);
    let (to_link, links) = std::sync::mpsc::channel::<(PathBuf, PathBuf, Vec<usize>, bool)>();
    let linker = std::thread::spawn(move || -> Result<(), RunnerError> {
        // a copied log is new to the disk: synced, as a run's own logs are, before the manifest
        let copies = super::syncer::Syncer::default();
        let copied = copies.logs();
        for (from_case, to_case, runs, external) in links {
            make_case_dir(&to_case)?;
            runs.into_iter().try_for_each(|k| link_log(&from_case, &to_case, k, external, &copied))?;
        }
        drop(copied);
        copies.finish().map(drop)
    });
    let walked = (|| -> Result<(), RunnerError> {
        for (index, case_ref) in plan.cases.iter().enumerate() {
            crate::interrupt::boundary(crate::interrupt::Phase::Cases)?;
            let owner = owner_of_case[index];
            let shard = &shards[owner];
            let mut outcome = outcomes.find(owner, &case_ref.id)?.ok_or_else(|| {
                refused(format!(
                    "case {}: {} ran its units but holds no outcome for it",
                    case_ref.id,
                    shard.dir.display()
                ))
            })?;
            let from_case = shard.dir.join(&outcome.id);
            // only an external agent's run leaves its stderr beside the log
            let external = plan.pipeline.agents.get(&case_ref.agent).is_some_and(|p| p.kind == AgentKind::External);
            // a send fails only when the linker stopped on an error, which it returns
            let _ = to_link.send((
                from_case.clone(),
                run_dir.join(&outcome.id),
                outcome.runs.iter().map(|r| r.index).collect(),
                external,
            ));
            for r in &mut outcome.runs {
                r.log = plan.shown_log(&outcome.id, r.index);
            }
            for r in &outcome.runs {
                let rel = format!("{}/{}.jsonl", outcome.id, r.index);
                let turn_offsets = checked[owner].turn_offsets.get(&rel).cloned().ok_or_else(|| {
                    refused(format!(
                        "{}: {rel}: the outcome names a log its manifest does not list",
                        shard.dir.display()
                    ))
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
            // only a card needs the case read again; its logs are read where the shard
            // wrote them (the merged run's are links to the same bytes, maybe not made yet)
            if case_ref.recordings.len() >= 2 || case_ref.perturbed {
                let case = plan.case(index)?;
                let price = plan.pipeline.agents.get(&case.agent).and_then(|p| *p.price);
                let mut runs = Vec::new();
                for r in &outcome.runs {
                    let events = crate::event::reader::read_log(&from_case.join(format!("{}.jsonl", r.index)))
                        .map_err(|e| refused(e.to_string()))?
                        .events;
                    runs.push(cards_api::RunSample { success: r.passed, ..cards::card_run(&events, r.passed, price) });
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
            tally.add_case(&outcome);
            spill.push(&outcome).map_err(at(&spill_path))?;
        }
        Ok(())
    })();
    drop(to_link);
    if let Err(e) = walked {
        // the linker stops with the channel; its own error, if any, matters less
        let _ = linker.join();
        return Err(e);
    }
    let cases = spill.finish().map_err(at(&spill_path))?;
    match conclude_staged(plan, store, run, Decided { cases, tally, card_cases }, options) {
        Ok(mut concluding) => {
            concluding.pending = Some(linker);
            Ok(concluding)
        }
        Err(e) => {
            let _ = linker.join();
            Err(e)
        }
    }
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

/// Link log `k` (and, for an `external` agent, its stderr when there is one) from a
/// shard's case directory into the merged run's. A finished log never changes: a hard
/// link is a copy without the bytes (and `verify` would catch a later edit of either
/// name against the manifest); where links cannot be made, the file is copied, and a
/// copied log noted in `copied` for its fsync.
fn link_log(
    from_case: &Path,
    to_case: &Path,
    k: usize,
    external: bool,
    copied: &super::syncer::Logs,
) -> Result<(), RunnerError> {
    let files: &[&str] = if external { &["jsonl", "stderr"] } else { &["jsonl"] };
    for &ext in files {
        let from = from_case.join(format!("{k}.{ext}"));
        let to = to_case.join(format!("{k}.{ext}"));
        match std::fs::hard_link(&from, &to) {
            Ok(()) => {}
            Err(e) if ext == "stderr" && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => {
                std::fs::copy(&from, &to).map_err(at(&from))?;
                if ext == "jsonl" {
                    copied.note(to)?;
                }
            }
        }
    }
    Ok(())
}
