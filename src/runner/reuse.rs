//! `--reuse DIR`: a case whose every unit already has a verified log in an earlier run
//! is not replayed again; its logs are copied and its outcome taken over.
//!
//! A unit id covers everything that decides a log (see [`super::shard::unit_id`]), so
//! the same id means the same log. Two things are checked again rather than trusted:
//! each log verifies against its run's manifest with the head the earlier run
//! recorded, and the golden comparison is redone (goldens are not part of a unit's
//! id: a golden blessed since must judge the reused log as it would a new one).
//!
//! A run that verifies against its own manifest may still be a consistent forgery (see
//! [`crate::evidence::trust`]): a run that signs takes cases over only from earlier
//! runs signed by its own key, and replays the rest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::shard::{UNITS_FILE, UnitRecord, unit_id};
use super::{Plan, RunnerError, at, cards};
use crate::canon::Digest;
use crate::event::verify::{Verified, verify_bytes};
use crate::evidence::Trust;
use crate::evidence::check::against_entry;
use crate::evidence::manifest::{FileEntry, LogEntry, RunManifest};
use crate::metrics::dimensions as cards_api;
use crate::outcome::CaseOutcome;
use crate::store::{Store, log_record};

/// Where a unit's earlier log is.
#[derive(Debug, Clone)]
struct Source {
    run_dir: PathBuf,
    head: Option<Digest>,
    /// Its run carries what this run's [`Trust`] asks for (a signature by its key).
    trusted: bool,
}

/// A run's manifest entries by log path.
type Listed = Arc<HashMap<String, LogEntry>>;

/// The units of earlier finished runs, and their case outcomes (read on first use).
#[derive(Debug)]
pub struct Reuse {
    units: HashMap<Digest, Source>,
    outcomes: Mutex<HashMap<PathBuf, HashMap<String, CaseOutcome>>>,
    /// Each earlier run's manifest entries by log path (read once per run, when the run
    /// is scanned; `None`: the manifest does not read).
    manifests: Mutex<HashMap<PathBuf, Option<Listed>>>,
    /// Each earlier run's `cases.jsonl` as its manifest lists it: the outcomes are read
    /// on first use, while this run's agents run, so they are checked again then.
    cases_files: HashMap<PathBuf, Option<FileEntry>>,
    /// Cases taken over, for the summary.
    pub reused: std::sync::atomic::AtomicUsize,
    /// Cases replayed instead, by why: for the summary.
    not_reused: Mutex<std::collections::BTreeMap<&'static str, Vec<String>>>,
    /// What an earlier run must carry to be taken over: this run's signature, or nothing
    /// when this run signs nothing.
    trust: Trust,
    /// The earlier run of this very run id, found by the scan where it is.
    replaced: Option<PathBuf>,
    /// That run (where it was, where it is), moved aside so that its logs can be taken
    /// over while the run directory is made anew.
    set_aside: Option<(PathBuf, PathBuf)>,
}

impl Drop for Reuse {
    /// The earlier run set aside goes once the run is done with it — or goes back where
    /// it was when the new run never started (it is not lost to a run that failed
    /// before making its directory).
    fn drop(&mut self) {
        if let Some((was, aside)) = self.set_aside.take() {
            if was.exists() {
                let _ = std::fs::remove_dir_all(aside);
            } else {
                let _ = std::fs::rename(aside, was);
            }
        }
    }
}

/// Why a case was replayed although `--reuse` was given.
const CHANGED: &str = "no earlier run has its units (its inputs changed, or it never ran)";
const SPLIT: &str = "its recorded runs are in different earlier runs";
const UNVERIFIED: &str = "its earlier log does not verify against its run's manifest";
const NO_OUTCOME: &str = "its earlier outcome is missing or lists other runs";
const UNSIGNED: &str =
    "its earlier run is not signed by this run's key (STATEVAL_SIGNING_KEY), so nothing shows stateval wrote it";

/// The name a run directory is moved aside to while its own rerun takes its logs over.
fn aside_name(run_dir: &Path) -> Option<PathBuf> {
    let name = run_dir.file_name()?.to_string_lossy().into_owned();
    Some(run_dir.with_file_name(format!(".reusing-{name}")))
}

impl Reuse {
    /// Every finished run under `dir`: `dir` itself, or `dir/runs/*` (a store or a shard
    /// output). A run without a manifest (killed) offers nothing, nor does `exclude`:
    /// the run directory about to be replaced. A run that lacks what `trust` asks for
    /// (this run's signature) offers its units only to be replayed, with the reason.
    pub fn scan(dir: &Path, exclude: &Path, trust: &Trust) -> Result<Reuse, String> {
        if !dir.is_dir() {
            return Err(format!("--reuse {}: not a directory", dir.display()));
        }
        let mut run_dirs = vec![dir.to_path_buf()];
        if let Ok(entries) = std::fs::read_dir(dir.join("runs")) {
            run_dirs.extend(
                entries
                    .filter_map(Result::ok)
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .map(|e| e.path())
                    .filter(|p| p.is_dir()),
            );
        }
        let mut reuse = Reuse {
            units: HashMap::new(),
            outcomes: Mutex::default(),
            manifests: Mutex::default(),
            cases_files: HashMap::new(),
            reused: Default::default(),
            not_reused: Mutex::default(),
            trust: trust.clone(),
            replaced: None,
            set_aside: None,
        };
        for run_dir in run_dirs {
            let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if !run_dir.join(crate::evidence::manifest::MANIFEST_FILE).is_file() {
                continue;
            }
            // the run this one replaces (the same inputs make the same run id): its
            // directory is made anew before any case runs, so it is moved aside once the
            // store is this run's ([`Reuse::set_aside`]), and taken over from there
            if same(&run_dir, exclude) {
                reuse.replaced = Some(run_dir.clone());
            }
            // a manifest of another format offers nothing; verdict files that are not
            // the ones the manifest lists are refused: an outcome taken over would
            // carry an edited verdict into this run, under this run's root
            let Ok(manifest) = RunManifest::read(&run_dir) else { continue };
            if let Some(finding) = crate::evidence::verdicts::check_files(&run_dir, &manifest).first() {
                return Err(format!(
                    "--reuse {}: {finding}: the run's verdict files do not match its manifest; \
                     refusing to take cases over from it",
                    dir.display()
                ));
            }
            let trusted = trust.check(&run_dir, manifest.root()).is_ok();
            reuse.cases_files.insert(run_dir.clone(), manifest.file(crate::outcome::CASES_FILE).cloned());
            let listed: Listed = Arc::new(manifest.logs.into_iter().map(|e| (e.path.clone(), e)).collect());
            reuse
                .manifests
                .get_mut()
                .map_err(|_| "reuse cache poisoned".to_string())?
                .insert(run_dir.clone(), Some(listed));
            let Ok(text) = std::fs::read_to_string(run_dir.join(UNITS_FILE)) else { continue };
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let unit: UnitRecord = serde_json::from_str(line)
                    .map_err(|e| format!("{}: not a unit record: {e}", run_dir.join(UNITS_FILE).display()))?;
                let source = Source { run_dir: run_dir.clone(), head: unit.head, trusted };
                // a trusted run's units win over an untrusted one's, whichever came first
                match reuse.units.entry(unit.unit) {
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(source);
                    }
                    std::collections::hash_map::Entry::Occupied(mut e) if trusted && !e.get().trusted => {
                        e.insert(source);
                    }
                    std::collections::hash_map::Entry::Occupied(_) => {}
                }
            }
        }
        Ok(reuse)
    }

    /// What an earlier run had to carry to be taken over.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    pub fn units(&self) -> usize {
        self.units.len()
    }

    /// Move the earlier run this one replaces aside, so that its logs outlive the new
    /// run directory. Call it once this run holds the store (no other run is writing
    /// there) and just before the run starts; a scan without such a run does nothing.
    pub fn set_aside(&mut self) -> Result<(), String> {
        let Some(was) = self.replaced.take() else { return Ok(()) };
        let Some(aside) = aside_name(&was) else { return Ok(()) };
        if aside.exists() {
            std::fs::remove_dir_all(&aside).map_err(|e| format!("{}: {e}", aside.display()))?;
        }
        std::fs::rename(&was, &aside).map_err(|e| format!("{}: {e}", was.display()))?;
        for source in self.units.values_mut().filter(|s| s.run_dir == was) {
            source.run_dir = aside.clone();
        }
        let manifests = self.manifests.get_mut().map_err(|_| "reuse cache poisoned".to_string())?;
        if let Some(listed) = manifests.remove(&was) {
            manifests.insert(aside.clone(), listed);
        }
        if let Some(entry) = self.cases_files.remove(&was) {
            self.cases_files.insert(aside.clone(), entry);
        }
        self.set_aside = Some((was, aside));
        Ok(())
    }

    /// The cases replayed instead of taken over, by why, each reason with its cases in
    /// the order they were decided.
    pub fn not_reused(&self) -> Vec<(&'static str, Vec<String>)> {
        let Ok(map) = self.not_reused.lock() else { return Vec::new() };
        map.iter().map(|(why, cases)| (*why, cases.clone())).collect()
    }

    fn replay(&self, case: &str, why: &'static str) -> Option<(Option<cards::CardCase>, CaseOutcome)> {
        if let Ok(mut map) = self.not_reused.lock() {
            map.entry(why).or_default().push(case.to_string());
        }
        None
    }

    fn manifest(&self, run_dir: &Path) -> Result<Option<Listed>, RunnerError> {
        let mut cache = self.manifests.lock().map_err(|_| RunnerError::Internal("reuse cache poisoned".into()))?;
        let entries = cache.entry(run_dir.to_path_buf()).or_insert_with(|| {
            let manifest = RunManifest::read(run_dir).ok()?;
            Some(Arc::new(manifest.logs.into_iter().map(|e| (e.path.clone(), e)).collect()))
        });
        Ok(entries.clone())
    }

    fn outcome(&self, run_dir: &Path, case: &str) -> Result<Option<CaseOutcome>, RunnerError> {
        let mut cache = self.outcomes.lock().map_err(|_| RunnerError::Internal("reuse cache poisoned".into()))?;
        if !cache.contains_key(run_dir) {
            // read once, into memory, and held to the manifest the scan checked: a file
            // rewritten since (by an agent this run started, say) is refused, never read
            let path = run_dir.join(crate::outcome::CASES_FILE);
            let bytes = std::fs::read(&path).map_err(at(&path))?;
            let digest = crate::canon::digest(crate::canon::Context::Content, &bytes);
            let listed = self.cases_files.get(run_dir).cloned().flatten();
            if listed.is_none_or(|e| e.bytes != bytes.len() as u64 || e.digest != digest) {
                return Err(RunnerError::Refused(format!(
                    "--reuse: {}: not the file its run's manifest lists (changed after the run was checked); \
                     refusing to take cases over from it",
                    path.display()
                )));
            }
            let mut by_id = HashMap::new();
            for (n, line) in bytes.split(|b| *b == b'\n').enumerate().filter(|(_, l)| !l.is_empty()) {
                let c: CaseOutcome = serde_json::from_slice(line).map_err(|e| {
                    RunnerError::Refused(format!("{}:{}: not a case outcome: {e}", path.display(), n + 1))
                })?;
                by_id.insert(c.id.clone(), c);
            }
            cache.insert(run_dir.to_path_buf(), by_id);
        }
        Ok(cache.get(run_dir).and_then(|m| m.get(case)).cloned())
    }
}

/// Take case `index` over from an earlier run when every one of its units is there and
/// verifies; `None` means replay it.
pub(super) fn take_over(
    plan: &Plan,
    index: usize,
    reuse: &Reuse,
    store: &dyn Store,
    verdicts: &Mutex<std::fs::File>,
    synced: &super::syncer::Logs,
) -> Result<Option<(Option<cards::CardCase>, CaseOutcome)>, RunnerError> {
    let case_ref = &plan.cases[index];
    let id = case_ref.id.as_str();
    let n = case_ref.recordings.len();
    let mut sources = Vec::with_capacity(n);
    for k in 0..n {
        match reuse.units.get(&unit_id(plan, case_ref, k)) {
            Some(source) => sources.push(source),
            None => return Ok(reuse.replay(id, CHANGED)),
        }
    }
    let Some(first) = sources.first() else { return Ok(reuse.replay(id, CHANGED)) };
    if sources.iter().any(|s| s.run_dir != first.run_dir) {
        return Ok(reuse.replay(id, SPLIT));
    }
    if !first.trusted {
        return Ok(reuse.replay(id, UNSIGNED));
    }
    // each earlier log is read once: verified against its manifest entry, then copied,
    // graded against today's golden and indexed from the same bytes
    let from_case = first.run_dir.join(&case_ref.id);
    let Some(manifest) = reuse.manifest(&first.run_dir)? else { return Ok(reuse.replay(id, UNVERIFIED)) };
    let mut logs: Vec<(Vec<u8>, Verified)> = Vec::with_capacity(n);
    for (k, source) in sources.iter().enumerate() {
        let Some(entry) = manifest.get(&format!("{}/{k}.jsonl", case_ref.id)) else {
            return Ok(reuse.replay(id, UNVERIFIED));
        };
        let Ok(bytes) = std::fs::read(from_case.join(format!("{k}.jsonl"))) else {
            return Ok(reuse.replay(id, UNVERIFIED));
        };
        let Ok(log) = verify_bytes(&bytes) else { return Ok(reuse.replay(id, UNVERIFIED)) };
        if entry.head != source.head || against_entry(&log, entry).is_err() {
            return Ok(reuse.replay(id, UNVERIFIED));
        }
        logs.push((bytes, log));
    }
    let Some(mut outcome) = reuse.outcome(&first.run_dir, &case_ref.id)? else {
        return Ok(reuse.replay(id, NO_OUTCOME));
    };
    if outcome.runs.len() != n || outcome.runs.iter().enumerate().any(|(k, r)| r.index != k) {
        return Ok(reuse.replay(id, NO_OUTCOME));
    }

    let case = plan.case(index)?;
    let layout = plan.layout();
    let profile = &plan.pipeline.agents[&case.agent];
    let mut card_runs = Vec::new();
    for (r, (bytes, log)) in outcome.runs.iter_mut().zip(logs) {
        let to = layout.log_path(&plan.run_id, &case.id, r.index);
        let dir = to.parent().unwrap_or(&layout.root).to_path_buf();
        std::fs::create_dir_all(&dir).map_err(at(&dir))?;
        std::fs::write(&to, &bytes).map_err(at(&to))?;
        synced.note(to.clone())?;
        let stderr = from_case.join(format!("{}.stderr", r.index));
        if stderr.exists() {
            std::fs::copy(&stderr, dir.join(format!("{}.stderr", r.index))).map_err(at(&stderr))?;
        }
        r.log = plan.shown_log(&case.id, r.index);
        // the golden may have been blessed since: judge the log against today's
        let incomplete = crate::golden::complete::why_incomplete(&r.status, r.error.as_deref(), &log.events);
        let golden = plan.golden_check(&case, r.index, &log.events, &r.log, incomplete.as_deref())?;
        if let Some(c) = r.checks.iter_mut().find(|c| c.name == golden.name) {
            *c = golden;
        }
        r.passed = r.status == "completed" && r.error.is_none() && r.checks.iter().all(|c| c.passed);
        if cards::feeds_card(&case) {
            card_runs.push(cards_api::RunSample {
                success: r.passed,
                ..cards::card_run(&log.events, r.passed, *profile.price)
            });
        }
        store.put_log(&log_record(&plan.run_id, &case.id, r.index, &bytes, &log))?;
    }
    outcome.passed = outcome.runs.iter().all(|r| r.passed) && outcome.blocks.iter().all(|c| c.passed);
    super::record_verdicts(plan, &outcome, store, verdicts)?;
    let card_case = cards::feeds_card(&case).then(|| cards::CardCase {
        id: case.id.clone(),
        agent: case.agent.clone(),
        perturbation: case.perturbation.clone(),
        runs: card_runs,
    });
    reuse.reused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Some((card_case, outcome)))
}
