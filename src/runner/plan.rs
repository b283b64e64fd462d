//! Planning: a pipeline loaded and validated in one place ([`Plan::from_pipeline_with`]):
//! its agent profiles with their tool manifests and programs, its judges and gate tags,
//! the selected cases and their recordings, the goldens, and the digest the run id is
//! cut from. The plan then serves what a run reads again as it goes (a case, a tool
//! manifest, a recording), each checked against what was validated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{RunnerError, inputs, shard};
use crate::canon::{self, Context, Digest};
use crate::dataset::recording::RecordedLines;
use crate::dataset::recording::Recording;
use crate::dataset::{Case, CaseParser, CaseRef, Loader, RecordingRef, ValidatedRecordings};
use crate::diag::InputError;
use crate::external::{RecordMode, Server};
use crate::isolation::Confinement;
use crate::metrics::block::{self as metric_block};
use crate::pipeline::Pipeline;
use crate::pipeline::manifest::Manifest;
use crate::pipeline::{AgentKind, AgentProfile};
use crate::replay::judge::JudgeBook;
use crate::store::Layout;
use serde_json::Value;

/// Selection of cases within a pipeline.
#[derive(Debug, Default, Clone)]
pub struct Selection {
    /// Glob over case ids (`transfer-*`).
    pub filter: Option<glob::Pattern>,
    /// Keep cases carrying any of these tags.
    pub tags: Vec<String>,
}

impl Selection {
    fn keeps(&self, case: &Case) -> bool {
        self.filter.as_ref().is_none_or(|p| p.matches(&case.id))
            && (self.tags.is_empty() || case.tags.iter().any(|t| self.tags.contains(t)))
    }
}

/// Everything a run needs, validated.
pub struct Plan {
    pub pipeline: Pipeline,
    /// The selected cases, validated; [`Plan::case`] reads one in full.
    pub cases: Vec<CaseRef>,
    /// Every tag a case of the suite carries, selected or not.
    pub suite_tags: std::collections::BTreeSet<String>,
    parser: Mutex<CaseParser>,
    /// Agent profile name → where its tool manifest is and the digests that pin it.
    /// Manifests are not kept: [`Plan::manifest`] reads one when a case needs it, so a
    /// suite with a manifest per case holds only the few in use.
    pub agents: BTreeMap<String, PlannedAgent>,
    /// The manifests read lately (see [`Plan::manifest`]).
    manifests: Mutex<ManifestCache>,
    /// Recording files as validating read them, each taken by its run ([`Plan::recording`]).
    held: Arc<crate::dataset::recording::HeldRecordings>,
    /// The first cases as validating parsed them, each taken by its run ([`Plan::case`]).
    held_cases: crate::dataset::HeldCases,
    /// Content-derived: the same inputs give the same id.
    pub run_id: String,
    /// The digest the run id is cut from: everything that decides the run's logs. The
    /// run manifest records it.
    pub digest: Digest,
    /// Over the judges' recordings and the external agents' programs: what every unit
    /// shares besides its case (see [`shard::unit_id`]).
    pub graders: Digest,
    /// Where each run's golden is, and whether runs are compared with it or bless it.
    pub goldens: crate::golden::Goldens,
    /// Judge profile name → its validated judge recording.
    pub judges: BTreeMap<String, Arc<JudgeBook>>,
    /// The files graders, judges and external agents read, as digested into the plan:
    /// each is checked when it is used ([`inputs`]).
    pub inputs: inputs::Inputs,
    /// The replay endpoints for external agents, started on first use; stopped
    /// (no port outlives the run) when the plan is dropped.
    server: Mutex<Option<Arc<Server>>>,
    /// `stateval record`: model calls go live and are recorded instead of replayed.
    pub record: Option<Box<RecordMode>>,
    /// `stateval doctor`: external agents' model requests are collected here.
    pub requests: Option<Mutex<Vec<Value>>>,
    /// Tag gates whose tag some case carries but no selected one (`--filter`, `--tag`):
    /// this run does not judge them, and its summary says so.
    pub gates_left_out: Vec<String>,
    /// How external agents and custom graders are isolated (see [`Plan::confinement`]).
    pub(super) confinement: std::sync::OnceLock<Confinement>,
}

/// An agent profile as the plan keeps it once validated.
pub struct PlannedAgent {
    /// The manifest's digest when the plan was validated (`None`: no tools).
    pub manifest: Option<Digest>,
    /// The digest of the manifest file's bytes when the plan validated it (`None`: no
    /// tools): [`Plan::manifest`] takes the same bytes without validating them again.
    pub manifest_bytes: Option<Digest>,
    /// The digest of the profile itself.
    pub profile: Digest,
}

/// A tool manifest's file, resolved, and how messages show it.
fn manifest_path(pipeline: &Pipeline, rel: &str) -> (PathBuf, String) {
    let full = pipeline.resolve(rel);
    let shown = full.to_string_lossy().trim_start_matches("./").to_string();
    (full, shown)
}

/// The manifests read most recently, newest last: cases that share a manifest read it
/// once, and a suite with one per case holds only these few.
#[derive(Default)]
struct ManifestCache {
    recent: Vec<(PathBuf, Arc<Manifest>)>,
}

impl ManifestCache {
    /// Enough for every worker's case and its handoff targets on a small machine; a
    /// miss costs one read of a file that was already validated.
    const CAPACITY: usize = 16;

    fn get(&mut self, path: &Path) -> Option<Arc<Manifest>> {
        let at = self.recent.iter().position(|(p, _)| p == path)?;
        let entry = self.recent.remove(at);
        let manifest = entry.1.clone();
        self.recent.push(entry);
        Some(manifest)
    }

    fn put(&mut self, path: PathBuf, manifest: Arc<Manifest>) {
        if self.recent.len() >= Self::CAPACITY {
            self.recent.remove(0);
        }
        self.recent.push((path, manifest));
    }
}

/// A case's recording as its run gets it ([`Plan::recording`]).
pub enum Replayable {
    /// Inline in the dataset line, parsed with it and shared with the case.
    Shared(Arc<Recording>),
    /// A file read again for this run: the recording without its responses, and the
    /// file's lines, each parsed as it is served.
    Lines(Recording, RecordedLines),
}

impl Replayable {
    /// The whole recording, its lines all parsed.
    pub fn into_recording(self) -> Result<Recording, String> {
        match self {
            Replayable::Shared(recording) => Ok(Arc::unwrap_or_clone(recording)),
            Replayable::Lines(mut recording, lines) => {
                recording.responses = lines.collect::<Result<_, _>>()?;
                Ok(recording)
            }
        }
    }
}

impl Plan {
    pub fn load(pipeline_path: &Path, selection: &Selection) -> Result<Plan, RunnerError> {
        let checked = Pipeline::read(pipeline_path).and_then(Pipeline::checked_keeping);
        let (pipeline, errors) = checked.map_err(|e| RunnerError::Input(vec![e]))?;
        Self::from_pipeline_with(pipeline, errors, selection, None)
    }

    /// [`Plan::load`] from a pipeline already loaded (with [`Pipeline::load`]): a caller
    /// that needs the pipeline before the plan parses it once, not twice.
    pub fn from_pipeline(pipeline: Pipeline, selection: &Selection) -> Result<Plan, RunnerError> {
        Self::from_pipeline_with(pipeline, Vec::new(), selection, None)
    }

    /// [`Plan::from_pipeline`], reporting `errors` (what [`Pipeline::checked_keeping`]
    /// found) with its own, and taking the recording files in `validated` as valid
    /// without parsing them again (a merge knows them from its shards' unit records).
    pub fn from_pipeline_with(
        pipeline: Pipeline,
        mut errors: Vec<InputError>,
        selection: &Selection,
        recordings: Option<Arc<ValidatedRecordings>>,
    ) -> Result<Plan, RunnerError> {
        // listed first and collected in bulk: one at a time, in key order, the map's
        // nodes would stay half empty (see `Pipeline::parse`)
        let mut agents = Vec::new();
        // each manifest file is validated once, however many profiles name it, on every
        // core (a suite with a manifest per case validated them one after another before
        // its first case), and only its digests are kept (of its content, and of its
        // bytes for `Plan::manifest`)
        let mut files: Vec<(PathBuf, String)> = Vec::new();
        {
            let mut seen = std::collections::BTreeSet::new();
            for rel in pipeline.agents.values().filter_map(|p| p.tools.as_ref()) {
                let (full, shown) = manifest_path(&pipeline, rel);
                if seen.insert(full.clone()) {
                    files.push((full, shown));
                }
            }
        }
        let validated: BTreeMap<PathBuf, Result<(Option<Digest>, Digest), InputError>> = {
            let loaded = crate::par::in_parallel(&files, |(full, shown)| Manifest::digests_of_file(full, shown));
            files.into_iter().map(|(full, _)| full).zip(loaded).collect()
        };
        for (name, profile) in &pipeline.agents {
            let (manifest, manifest_bytes) =
                match profile.tools.as_ref().map(|rel| (rel, manifest_path(&pipeline, rel))) {
                    Some((rel, (full, shown))) => match &validated[&full] {
                        Ok((digest, bytes)) => (*digest, Some(*bytes)),
                        // a manifest that is not there is said where the pipeline names it
                        Err(_) if !full.is_file() => {
                            let (line, column) = pipeline.locate_value(&format!("/agents/{name}/tools"), rel);
                            let message =
                                format!("agents.{name}.tools: tool manifest \"{rel}\" not found (looked for {shown})");
                            errors.push(InputError::new(&pipeline.path, line, column, message));
                            continue;
                        }
                        // said for each profile that names it, as when each loaded it
                        Err(e) => {
                            errors.push(e.clone());
                            continue;
                        }
                    },
                    None => (None, None),
                };
            if let Some(pinned) = &*profile.tools_digest {
                let found = manifest.map(|d| d.to_string()).unwrap_or_default();
                if *pinned != found {
                    let (line, column) = pipeline.locate_value(&format!("/agents/{name}/tools_digest"), pinned);
                    let message = format!("agents.{name}: the tool manifest is pinned to {pinned} but is now {found}");
                    errors.push(InputError::new(&pipeline.path, line, column, message));
                    continue;
                }
            }
            if profile.kind == AgentKind::External
                && let Err(e) = check_command(&pipeline, name, profile)
            {
                errors.push(e);
                continue;
            }
            let profile_json = serde_json::to_value(profile).map_err(|e| RunnerError::Internal(e.to_string()))?;
            let digest = canon::canonical_digest(Context::Content, &profile_json)
                .map_err(|e| RunnerError::Internal(e.to_string()))?;
            agents.push((name.clone(), PlannedAgent { manifest, manifest_bytes, profile: digest }));
        }
        // a path and two digests per manifest, read by nothing after: not held while the
        // datasets are validated, when a large suite's memory peaks
        drop(validated);
        let agents: BTreeMap<String, PlannedAgent> = agents.into_iter().collect();
        let judges = load_judges(&pipeline, &mut errors);
        // every tag of the suite, kept or not: a `--tag` none carries is a typo to name
        let suite_tags = std::cell::RefCell::new(std::collections::BTreeSet::new());
        let mut loader = Loader::new(&pipeline, metric_block::check).holding().select(|case| {
            suite_tags.borrow_mut().extend(case.tags.iter().cloned());
            selection.keeps(case)
        });
        if let Some(recordings) = recordings {
            loader = loader.validated(recordings);
        }
        let loaded = loader.load_all();
        let mut loaded = match loaded {
            Ok(loaded) if errors.is_empty() => loaded,
            Ok(_) => return Err(RunnerError::Input(errors)),
            Err(mut e) => {
                errors.append(&mut e);
                return Err(RunnerError::Input(errors));
            }
        };
        let gates_left_out = gate_tags(&pipeline, &loaded)?;
        let mut inputs = inputs::Inputs::new(std::mem::take(&mut loaded.files));
        let programs = inputs.programs_digest(&pipeline);
        let mut goldens = crate::golden::Goldens::from_pipeline(&pipeline);
        let runs = loaded
            .cases
            .iter()
            .flat_map(|c| (0..c.recordings.len()).map(|k| (c.file.dataset.as_str(), c.id.as_str(), k)));
        let golden_digest = goldens.plan(runs);
        let digest = plan_digest(&pipeline, loaded.digest, &agents, programs, &judges, golden_digest);
        // hashed into the digest, and read by nothing the plan does after: a pipeline of
        // thousands of profiles is a text of about 100 bytes each, held for the whole run
        let mut pipeline = pipeline;
        pipeline.text = String::new();
        pipeline.tool_names = None;
        let graders = {
            let mut d = canon::Digester::new(Context::Content);
            if let Some(programs) = programs {
                d.update(&programs.0);
            }
            for (name, book) in &judges {
                d.update(name.as_bytes());
                d.update(&book.digest.0);
            }
            d.finish()
        };
        let (cases, run_id) = (loaded.cases, format!("r-{}", &digest.to_hex()[..16]));
        Ok(Plan {
            pipeline,
            cases,
            parser: Mutex::new(CaseParser::new(metric_block::check)),
            agents,
            manifests: Mutex::new(ManifestCache::default()),
            held: loaded.held,
            held_cases: loaded.held_cases,
            run_id,
            digest,
            graders,
            goldens,
            judges,
            inputs,
            server: Mutex::new(None),
            record: None,
            requests: None,
            gates_left_out,
            suite_tags: suite_tags.into_inner(),
            confinement: std::sync::OnceLock::new(),
        })
    }

    /// Keep only the cases of `shard`; the plan's digest and run id stay those of the
    /// whole plan, so every shard and the merge agree on them.
    pub fn keep_shard(&mut self, shard: shard::Shard) {
        let mut position = 0;
        self.cases.retain(|case| {
            position += 1;
            shard.keeps(position - 1, &case.id)
        });
    }

    /// Case `index` in full: as validating parsed it when it was kept
    /// ([`crate::dataset::HeldCases`]), else read again from its dataset (see
    /// [`CaseRef::load`]).
    pub fn case(&self, index: usize) -> Result<Case, RunnerError> {
        let reference = self.cases.get(index).ok_or_else(|| RunnerError::Internal(format!("no case {index}")))?;
        if let Some(case) = self.held_cases.take(&reference.file.path, reference.line) {
            return Ok(case);
        }
        reference.load(&self.pipeline, &self.parser).map_err(|e| RunnerError::Input(vec![e]))
    }

    /// This run's directory as reports show it: relative to the pipeline's base, also
    /// when the store is elsewhere (`--out ../out` shows `../out/runs/r-…`), so that no
    /// report holds an absolute path of this machine's.
    pub fn shown_run_dir(&self) -> String {
        let layout = self.layout();
        let shown = self.pipeline.display(&layout.run_dir(&self.run_id));
        if !Path::new(&shown).is_absolute() {
            return shown;
        }
        let (Ok(base), Ok(store)) = (self.pipeline.base.canonicalize(), layout.root.canonicalize()) else {
            return shown;
        };
        let common = base.components().zip(store.components()).take_while(|(a, b)| a == b).count();
        let mut rel = PathBuf::new();
        for _ in base.components().skip(common) {
            rel.push("..");
        }
        rel.extend(store.components().skip(common));
        rel.push("runs");
        rel.push(&self.run_id);
        rel.to_string_lossy().replace('\\', "/")
    }

    /// Run `k` of case `case`'s log, as reports show it ([`Plan::shown_run_dir`]).
    pub fn shown_log(&self, case: &str, k: usize) -> String {
        format!("{}/{case}/{k}.jsonl", self.shown_run_dir())
    }

    pub fn layout(&self) -> Layout {
        Layout::new(&self.pipeline.store_dir())
    }

    /// How this run's external agents and custom graders are started
    /// ([`crate::isolation`]): made at the first start, when the store is where the run
    /// writes (`--out` moves it after the plan is made), so that it is hidden.
    pub fn confinement(&self) -> &Confinement {
        self.confinement.get_or_init(|| Confinement::new(self.pipeline.isolation.clone(), &self.pipeline.store_dir()))
    }

    /// The tool manifest of agent profile `agent`, read again from its file (or taken
    /// from the few read lately) and checked against the digest it had when the plan
    /// was validated: a manifest edited during the run is an input error, never a run
    /// against other fixtures than the plan's id stands for.
    pub fn manifest(&self, agent: &str) -> Result<Arc<Manifest>, InputError> {
        let planned = self.agents.get(agent).ok_or_else(|| {
            InputError::file(&self.pipeline.path, format!("no agent profile named {agent:?} in the plan"))
        })?;
        // the path is worked out again rather than held: a plan of a profile per case
        // would hold two strings per profile for the whole run
        let Some(rel) = self.pipeline.agents.get(agent).and_then(|profile| profile.tools.as_deref()) else {
            return Ok(Arc::new(Manifest::empty()));
        };
        let (path, shown) = &manifest_path(&self.pipeline, rel);
        let cached =
            self.manifests.lock().map_err(|_| InputError::file(path, "manifest cache lock poisoned"))?.get(path);
        if let Some(manifest) = cached {
            return Ok(manifest);
        }
        let manifest = match planned.manifest_bytes {
            Some(bytes) => Manifest::reload(path, shown, planned.manifest, bytes)?,
            None => Manifest::load(path, shown)?,
        };
        if manifest.digest != planned.manifest {
            let hex = |d: Option<Digest>| d.map(|d| d.to_string()).unwrap_or_else(|| "none".into());
            return Err(InputError::file(
                Path::new(shown),
                format!(
                    "the tool manifest changed while the run went on (validated as {}, now {}); run again to plan with it",
                    hex(planned.manifest),
                    hex(manifest.digest)
                ),
            ));
        }
        let manifest = Arc::new(manifest);
        if let Ok(mut cache) = self.manifests.lock() {
            cache.put(path.clone(), manifest.clone());
        }
        Ok(manifest)
    }

    /// The recording `reference` names: an inline one as the case holds it, a file as
    /// validating read it when its bytes were kept ([`HeldRecordings`]), else read again
    /// ([`Recording::reread`]) and refused if it was edited since it was validated.
    ///
    /// No recording is kept parsed from the validating pass for its run, only its bytes.
    /// Kept parsed, a 50-case suite's recordings (0.9 MB of files) were held at 4–5 MB from
    /// the plan on: they saved parsing them again (5 % of its instructions) but cost 700
    /// more page faults, and on the development machine, where a fresh page is costly,
    /// the suite ran 15 % slower kept than read again (docs/speed.md).
    ///
    /// [`HeldRecordings`]: crate::dataset::recording::HeldRecordings
    pub fn recording(&self, reference: &RecordingRef) -> Result<Replayable, String> {
        let read = match reference {
            RecordingRef::Inline(recording) => return Ok(Replayable::Shared(recording.clone())),
            RecordingRef::File { path, display, digest, bytes } => match self.held.take(bytes) {
                Some(text) => Ok(Recording::held(text, display, *digest)),
                None => Recording::reread(path, display, *digest, *bytes),
            },
        };
        read.map(|(recording, lines)| Replayable::Lines(recording, lines))
    }

    /// Every profile `agent` can reach by handing off, directly or through its targets
    /// (never `agent` itself), with its manifest; empty for a profile without handoffs.
    pub(super) fn handoff_targets(&self, agent: &str) -> Result<Vec<(&str, Arc<Manifest>)>, InputError> {
        let mut reached = std::collections::BTreeSet::new();
        let mut todo = vec![agent];
        while let Some(from) = todo.pop() {
            let Some(profile) = self.pipeline.agents.get(from) else { continue };
            for to in profile.handoffs.iter() {
                if to != agent && self.pipeline.agents.contains_key(to) && reached.insert(to.as_str()) {
                    todo.push(to);
                }
            }
        }
        reached.into_iter().map(|name| Ok((name, self.manifest(name)?))).collect()
    }

    /// The replay endpoints, started on the first external case.
    pub(super) fn server(&self) -> std::io::Result<Arc<Server>> {
        let mut slot = self.server.lock().map_err(|_| std::io::Error::other("server lock poisoned"))?;
        if let Some(server) = slot.as_ref() {
            return Ok(server.clone());
        }
        let server = Arc::new(Server::start()?);
        *slot = Some(server.clone());
        Ok(server)
    }
}

/// A gate on a tag no case carries could never hold a case: a load error at the gate.
/// One whose cases the selection left out is not this run's to judge: its tag is
/// returned, for the summary to say so.
fn gate_tags(pipeline: &Pipeline, loaded: &crate::dataset::Loaded) -> Result<Vec<String>, RunnerError> {
    let mut left_out = Vec::new();
    for tag in pipeline.gates.tags.keys() {
        if loaded.selected_tags.contains(tag) {
            continue;
        }
        if loaded.tags.contains(tag) {
            left_out.push(tag.clone());
            continue;
        }
        let hint = crate::diag::did_you_mean(tag, loaded.tags.iter().map(String::as_str))
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_default();
        let message = format!("no case carries the tag \"{tag}\"{hint}, so this gate would pass over nothing");
        let pointer = format!("/gates/tags/{}", tag.replace('~', "~0").replace('/', "~1"));
        return Err(RunnerError::Input(vec![pipeline.error_at(&pointer, "", message)]));
    }
    Ok(left_out)
}

/// Validate the judge recording of every `[judges.NAME]` (one load per file).
fn load_judges(pipeline: &Pipeline, errors: &mut Vec<InputError>) -> BTreeMap<String, Arc<JudgeBook>> {
    let mut by_path: BTreeMap<PathBuf, Arc<JudgeBook>> = BTreeMap::new();
    let mut judges = BTreeMap::new();
    for (name, judge) in &pipeline.judges {
        let full = pipeline.resolve(&judge.recordings);
        if let Some(book) = by_path.get(&full) {
            judges.insert(name.clone(), book.clone());
            continue;
        }
        if !full.is_file() {
            // said where the pipeline names it
            let (line, column) = pipeline.locate_value(&format!("/judges/{name}/recordings"), &judge.recordings);
            errors.push(InputError::new(
                &pipeline.path,
                line,
                column,
                format!(
                    "judges.{name}.recordings: {} not found (`stateval record --judge` writes it; an empty file is a judge with no answers yet)",
                    pipeline.display(&full)
                ),
            ));
            continue;
        }
        match JudgeBook::load(&full, &pipeline.display(&full)) {
            Ok(book) => {
                let book = Arc::new(book);
                by_path.insert(full, book.clone());
                judges.insert(name.clone(), book);
            }
            Err(e) => errors.push(e),
        }
    }
    judges
}

/// An external profile whose program cannot be found is a load error naming the
/// profile, before anything runs.
fn check_command(pipeline: &Pipeline, name: &str, profile: &AgentProfile) -> Result<(), InputError> {
    // each said where the pipeline names it
    let at = |key: &str, value: &str, message: String| {
        let (line, column) = pipeline.locate_value(&format!("/agents/{name}/{key}"), value);
        InputError::new(&pipeline.path, line, column, message)
    };
    let cwd_text = profile.cwd.as_deref().unwrap_or(".");
    let cwd = pipeline.resolve(cwd_text);
    if !cwd.is_dir() {
        return Err(at("cwd", cwd_text, format!("agents.{name}.cwd: {} is not a directory", pipeline.display(&cwd))));
    }
    let program = profile.command.first().map(String::as_str).unwrap_or_default();
    crate::child_env::resolve_program(program, &cwd)
        .map_err(|e| at("command", program, format!("agents.{name}.command: {e}")))?;
    match crate::child_env::missing_script(&profile.command, &cwd) {
        Some((i, e)) => Err(at("command", &profile.command[i], format!("agents.{name}.command[{i}]: {e}"))),
        None => Ok(()),
    }
}

/// Digest over everything that decides a run's logs (`cases`: the selected cases and
/// their recordings, see [`crate::dataset::Loaded`]); the run id is its prefix.
fn plan_digest(
    pipeline: &Pipeline,
    cases: Digest,
    agents: &BTreeMap<String, PlannedAgent>,
    programs: Option<Digest>,
    judges: &BTreeMap<String, Arc<JudgeBook>>,
    goldens: Option<Digest>,
) -> Digest {
    // fed as it goes: the bytes of a pipeline of thousands of profiles, gathered first,
    // were two megabytes more at the end of planning, the run's peak
    let mut hasher = canon::Digester::new(Context::Content);
    if let Some(programs) = programs {
        hasher.update(&programs.0);
    }
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.update(pipeline.text.as_bytes());
    for (name, planned) in agents {
        hasher.update(name.as_bytes());
        hasher.update(&planned.profile.0);
        if let Some(d) = planned.manifest {
            hasher.update(&d.0);
        }
    }
    // judge recordings decide verdicts; a pipeline without judges hashes as before
    for (name, book) in judges {
        hasher.update(name.as_bytes());
        hasher.update(&book.digest.0);
    }
    hasher.update(&cases.0);
    // a verdict compares each run with its golden; a suite that keeps none hashes as before
    if let Some(goldens) = goldens {
        hasher.update(&goldens.0);
    }
    // the cases not run are named in the run's verdict (suite.json); a pipeline that names
    // none hashes as before
    if !pipeline.not_run.is_empty() {
        let named = serde_json::to_value(&pipeline.not_run).unwrap_or_default();
        hasher.update(&canon::to_canonical(&named).unwrap_or_default());
    }
    hasher.finish()
}
