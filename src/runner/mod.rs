//! The runner: every case × recorded run → an event log → checks → a case verdict.
//!
//! [`Plan::load`] reads and validates every input before anything runs, keeping a small
//! reference per case. [`execute`] runs cases with bounded concurrency (each case read
//! again, its runs in order, on one worker), grades each as it finishes, records it in
//! the store, and writes outcomes to the run's `cases.jsonl` in dataset order, so every
//! report is byte-stable however the workers interleaved and no suite is ever held in
//! memory whole.

pub mod attempt;
pub mod cards;
mod churn;
pub mod graders;
pub mod inputs;
pub mod merge;
pub mod reuse;
pub mod shard;
pub mod syncer;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::canon::{self, Context, Digest};
use crate::dataset::expect::Assertion;
use crate::dataset::recording::RecordedLines;
use crate::dataset::recording::Recording;
use crate::dataset::{Case, CaseParser, CaseRef, Loader, RecordingRef, ValidatedRecordings};
use crate::diag::InputError;
use crate::event::Event;
use crate::event::writer::{Sink, WriteError};
use crate::evidence::{FileEntry, LogEntry, ManifestError, RunManifest, SecretKey};
use crate::external::{ExternalAgent, Launch, RecordMode, Server};
use crate::gate::Tally;
use crate::grade::calls::Grading;
use crate::grade::custom::CaseInfo;
use crate::isolation::Confinement;
use crate::metrics::block::{self as metric_block, MetricBlock};
use crate::metrics::dimensions as cards_api;
use crate::outcome::{AgentDiagnosis, CaseOutcome, CaseSpill, Cases, Check, RunResult, SuiteOutcome};
use crate::pipeline::Pipeline;
use crate::pipeline::manifest::Manifest;
use crate::pipeline::{AgentKind, AgentProfile, OnUnused};
use crate::replay::ReplayProvider;
use crate::replay::judge::JudgeBook;
use crate::runtime::detectors::Detectors;
use crate::runtime::{Agent, BuiltinAgent, Recorder, RunInput, RunStatus, RunSummary};
use crate::store::{Layout, LogRecord, RunRecord, Store, StoreError, VerdictRecord};
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Input(Vec<InputError>),
    #[error("writing {path}: {source}")]
    Log { path: PathBuf, source: WriteError },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A signal, seen at the end of this phase (exit 130).
    #[error(
        "interrupted at {0}: the run has no verdict; the logs written so far verify \
         (`stateval verify --allow-incomplete`) up to their last complete turn"
    )]
    Interrupted(crate::interrupt::Phase),
    #[error("internal error: {0}")]
    Internal(String),
    /// A file the run wrote is no longer what it wrote: something else edited it while
    /// the run went on (exit 3, and no manifest).
    #[error("{} changed during the run: it is not what the run wrote there; the run has no verdict", .0.display())]
    Changed(PathBuf),
    /// A merge or shard request that cannot be honoured as given (exit 2).
    #[error("{0}")]
    Refused(String),
}

impl From<crate::interrupt::Interrupted> for RunnerError {
    fn from(e: crate::interrupt::Interrupted) -> Self {
        RunnerError::Interrupted(e.0)
    }
}

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
    confinement: std::sync::OnceLock<Confinement>,
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

/// Why [`Plan::replay`] could not replay a run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The log could not be written.
    #[error("{0}")]
    Log(#[from] WriteError),
    /// An input is no longer what the plan validated (a tool manifest edited or removed
    /// while the run went on).
    #[error("{0}")]
    Input(InputError),
}

impl Plan {
    pub fn load(pipeline_path: &Path, selection: &Selection) -> Result<Plan, RunnerError> {
        let pipeline = Pipeline::load(pipeline_path).map_err(|e| RunnerError::Input(vec![e]))?;
        Self::from_pipeline(pipeline, selection)
    }

    /// [`Plan::load`] from a pipeline already loaded (with [`Pipeline::load`]): a caller
    /// that needs the pipeline before the plan parses it once, not twice.
    pub fn from_pipeline(pipeline: Pipeline, selection: &Selection) -> Result<Plan, RunnerError> {
        Self::from_pipeline_with(pipeline, selection, None)
    }

    /// [`Plan::from_pipeline`], taking the recording files in `validated` as valid
    /// without parsing them again (a merge knows them from its shards' unit records).
    pub fn from_pipeline_with(
        pipeline: Pipeline,
        selection: &Selection,
        recordings: Option<Arc<ValidatedRecordings>>,
    ) -> Result<Plan, RunnerError> {
        // listed first and collected in bulk: one at a time, in key order, the map's
        // nodes would stay half empty (see `Pipeline::parse`)
        let mut agents = Vec::new();
        let mut errors = Vec::new();
        // each manifest file is validated once, however many profiles name it, and only
        // its digests are kept (of its content, and of its bytes for `Plan::manifest`)
        let mut validated: BTreeMap<PathBuf, (Option<Digest>, Digest)> = BTreeMap::new();
        for (name, profile) in &pipeline.agents {
            let (manifest, manifest_bytes) = match &profile.tools {
                Some(rel) => {
                    let (full, shown) = manifest_path(&pipeline, rel);
                    match validated.get(&full) {
                        Some((digest, bytes)) => (*digest, Some(*bytes)),
                        None => match Manifest::load_file(&full, &shown) {
                            Ok((m, bytes)) => {
                                validated.insert(full, (m.digest, bytes));
                                (m.digest, Some(bytes))
                            }
                            Err(e) => {
                                errors.push(e);
                                continue;
                            }
                        },
                    }
                }
                None => (None, None),
            };
            if let Some(pinned) = &*profile.tools_digest {
                let found = manifest.map(|d| d.to_string()).unwrap_or_default();
                if *pinned != found {
                    errors.push(InputError::file(
                        &pipeline.path,
                        format!("agents.{name}: the tool manifest is pinned to {pinned} but is now {found}"),
                    ));
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
        let programs = programs_digest(&pipeline, &mut inputs);
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

    /// Case `index` in full, read again from its dataset (see [`CaseRef::load`]).
    pub fn case(&self, index: usize) -> Result<Case, RunnerError> {
        let reference = self.cases.get(index).ok_or_else(|| RunnerError::Internal(format!("no case {index}")))?;
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

    /// The `golden` check of run `k` of `case` ([`crate::golden::Goldens::check`]), its
    /// inputs named for the cause of a difference. `log` is how reports show the log;
    /// `incomplete` why the run did not complete on its own, if it did not.
    pub(crate) fn golden_check(
        &self,
        case: &Case,
        k: usize,
        events: &[Event],
        log: &str,
        incomplete: Option<&str>,
    ) -> Result<Check, RunnerError> {
        let pipeline = self.pipeline.display(&self.pipeline.path);
        let recording = match case.recordings.get(k) {
            Some(crate::dataset::RecordingRef::File { display, .. }) => Some(display.as_str()),
            _ => None,
        };
        let sources = crate::golden::cause::Sources {
            profile: &case.agent,
            pipeline: &pipeline,
            tools: self.pipeline.agents.get(&case.agent).and_then(|p| p.tools.as_deref()),
            recording,
            dataset: &case.display_path,
        };
        self.goldens.check(&case.dataset, &case.id, k, events, log, &sources, incomplete).map_err(|e| match e {
            // swapped while the run went on: an input error, as a changed manifest is
            crate::golden::GoldenError::Changed { .. } => {
                RunnerError::Input(vec![InputError::file(&self.goldens.dir, e.to_string())])
            }
            e => RunnerError::Internal(e.to_string()),
        })
    }

    /// Replays run `k` of `case` from `recording` with the case's agent (the built-in
    /// runtime or the team's own program), its log going to `sink` and an external
    /// agent's stderr to `stderr`, and grades `assertions` over it: the one way a case is
    /// replayed, by `stateval run` and by `stateval reconstruct` alike.
    ///
    /// Grading happens before the log is finished: the agent's `run_completed` is held
    /// back, the assertions are graded over the log with it previewed, what custom
    /// graders and judges were asked and answered is written (`grader_called`,
    /// `judge_called`, `judge_verdict`), and then `run_completed`, so the log still ends
    /// with it and a golden covers every grader's input and output. A run whose
    /// assertions make no calls out writes exactly the log it wrote before graders
    /// existed.
    pub fn replay(
        &self,
        case: &Case,
        k: usize,
        recording: &Recording,
        sink: Box<dyn Sink + Send>,
        stderr: Option<PathBuf>,
        assertions: &[&Assertion],
    ) -> Result<ReplayedRun, ReplayError> {
        self.replay_from(case, k, recording, ReplayProvider::new(recording), sink, stderr, assertions)
    }

    /// [`replay`](Self::replay) of a recording file read again for this run
    /// ([`Recording::reread`]): each response is parsed as it is served, so a long run
    /// holds the file's text and one response, never the recording parsed whole.
    #[allow(clippy::too_many_arguments)]
    pub fn replay_lines(
        &self,
        case: &Case,
        k: usize,
        recording: &Recording,
        lines: RecordedLines,
        sink: Box<dyn Sink + Send>,
        stderr: Option<PathBuf>,
        assertions: &[&Assertion],
    ) -> Result<ReplayedRun, ReplayError> {
        self.replay_from(case, k, recording, ReplayProvider::lines(lines), sink, stderr, assertions)
    }

    #[allow(clippy::too_many_arguments)]
    fn replay_from(
        &self,
        case: &Case,
        k: usize,
        recording: &Recording,
        mut provider: ReplayProvider<'_>,
        sink: Box<dyn Sink + Send>,
        stderr: Option<PathBuf>,
        assertions: &[&Assertion],
    ) -> Result<ReplayedRun, ReplayError> {
        let profile = &self.pipeline.agents[&case.agent];
        let profile_digest = self.agents[&case.agent].profile;
        let manifest = self.manifest(&case.agent).map_err(ReplayError::Input)?;
        let detectors = Detectors::new(&profile.safety, &manifest, case.allowed_tools.as_deref());
        // a turn starts and ends; a model call is a compiled context and the call, and
        // each tool call it makes is proposed, decided and executed (a few more, rarely)
        let expected = 2 * case.turns.len() + 6 * provider.recorded() + 16;
        let mut rec = Recorder::new(sink).with_detectors(detectors).holding_completion().expecting(expected);
        // handoff targets (the built-in runtime's only): the profiles this one can reach
        // by handing off, read only for profiles that hand off
        let reachable = self.handoff_targets(&case.agent).map_err(ReplayError::Input)?;
        let peers = reachable
            .iter()
            .map(|(name, manifest)| (*name, (&self.pipeline.agents[*name], manifest.as_ref())))
            .collect();
        let input = RunInput {
            case,
            run_index: k,
            agent: &case.agent,
            profile,
            profile_digest,
            manifest: &manifest,
            recording,
            on_divergence: self.pipeline.replay.on_divergence,
            peers,
        };
        let summary = match (profile.kind, self.record.as_deref()) {
            // `stateval record` of a built-in case: the runtime asks the live model
            (AgentKind::Builtin, Some(record)) => {
                let mut live = crate::external::live::LiveProvider::new(record, &profile.scrub);
                BuiltinAgent.run(&input, &mut live, &mut rec)?
            }
            (AgentKind::Builtin, None) => BuiltinAgent.run(&input, &mut provider, &mut rec)?,
            (AgentKind::External, _) => {
                let cwd = self.pipeline.resolve(profile.cwd.as_deref().unwrap_or("."));
                for (path, _) in inputs::command_files(&profile.command, &cwd) {
                    self.inputs.check(&path, &self.pipeline.display(&path)).map_err(ReplayError::Input)?;
                }
                let server = self.server().map_err(WriteError::Io)?;
                let launch = Launch {
                    server: &server,
                    run_id: &self.run_id,
                    command: &profile.command,
                    cwd: self.pipeline.resolve(profile.cwd.as_deref().unwrap_or(".")),
                    confinement: self.confinement(),
                    stderr,
                    binary: std::env::current_exe().ok(),
                    record: self.record.as_deref(),
                    requests: self.requests.as_ref(),
                };
                ExternalAgent { launch }.run(&input, &mut provider, &mut rec)?
            }
        };
        // the recording is not read again once the agent is done: let go of it (a file
        // served line by line holds its whole text) before grading, a long run's peak
        let (used, recorded) = (provider.position(), provider.recorded());
        drop(provider);
        let mut backend = graders::RunGraders::new(&self.pipeline, self.confinement(), &self.judges, &self.inputs);
        let info = CaseInfo {
            id: case.id.clone(),
            dataset: case.dataset.clone(),
            tags: case.tags.clone(),
            turns: case.turns.clone(),
            run: k,
        };
        let mut grading = Grading::new(&mut backend, info);
        let checks =
            rec.before_completion(|events| crate::grade::grade_with(assertions.iter().copied(), events, &mut grading))?;
        let graded = grading.finish();
        if let Some(changed) = backend.changed.take() {
            return Err(ReplayError::Input(changed));
        }
        for (kind, data) in graded.events {
            rec.emit_grading(kind, data)?;
        }
        let (events, turn_offsets) = rec.finish()?;
        let mut summary = summary;
        if summary.status == RunStatus::Completed && used < recorded {
            let unused = recorded - used;
            let message = format!(
                "the run completed without using {unused} of the {recorded} recorded responses of {} \
                 (the first unused is at position {used})",
                recording.source
            );
            match self.pipeline.replay.unused {
                OnUnused::Warn => summary.warnings.push(format!("{message}; replay.unused = \"fail\" fails on this")),
                OnUnused::Fail => summary.error = Some(format!("{message} (replay.unused = \"fail\")")),
            }
        }
        Ok(ReplayedRun { summary, events, turn_offsets, checks, grading_errors: graded.errors })
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
                Some(text) => Recording::held(text, display, *digest),
                None => Recording::reread(path, display, *digest, *bytes),
            },
        };
        read.map(|(recording, lines)| Replayable::Lines(recording, lines))
    }

    /// Every profile `agent` can reach by handing off, directly or through its targets
    /// (never `agent` itself), with its manifest; empty for a profile without handoffs.
    fn handoff_targets(&self, agent: &str) -> Result<Vec<(&str, Arc<Manifest>)>, InputError> {
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
    fn server(&self) -> std::io::Result<Arc<Server>> {
        let mut slot = self.server.lock().map_err(|_| std::io::Error::other("server lock poisoned"))?;
        if let Some(server) = slot.as_ref() {
            return Ok(server.clone());
        }
        let server = Arc::new(Server::start()?);
        *slot = Some(server.clone());
        Ok(server)
    }
}

/// What [`Plan::replay`] leaves: the run's summary, its events, the byte offset of each
/// turn in the log, one check per assertion (in order) and the case errors of graders
/// and judges that could not answer.
pub struct ReplayedRun {
    pub summary: RunSummary,
    pub events: Vec<Event>,
    pub turn_offsets: Vec<u64>,
    pub checks: Vec<Check>,
    pub grading_errors: Vec<String>,
}

/// The assertions of `case` graded over each run's log (the others target metric-block
/// values and are graded across runs).
pub fn log_assertions(case: &Case) -> Vec<&Assertion> {
    case.expect.iter().filter(|a| !targets_a_block(case, &a.target)).collect()
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
            errors.push(InputError::file(
                &pipeline.path,
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

/// The bytes of every file an external profile's command names (the program when it is
/// a path, and script arguments such as `agent.py`): a changed agent is a new run, not
/// a rerun that overwrites the last one. Programs found on PATH (`python3`) are the
/// machine's, not the project's, and are left out so run ids agree across machines.
///
/// Each file read is added to `inputs`, so that an agent starts only with its files as
/// digested here.
fn programs_digest(pipeline: &Pipeline, inputs: &mut inputs::Inputs) -> Option<Digest> {
    if pipeline.agents.values().all(|p| p.kind != AgentKind::External) {
        return None;
    }
    let mut digester = canon::Digester::new(Context::Content);
    for (name, profile) in pipeline.agents.iter().filter(|(_, p)| p.kind == AgentKind::External) {
        let cwd = pipeline.resolve(profile.cwd.as_deref().unwrap_or("."));
        for (path, arg) in inputs::command_files(&profile.command, &cwd) {
            if let Some(digest) = inputs.add(path) {
                digester.update(name.as_bytes());
                digester.update(arg.as_bytes());
                digester.update(&digest.0);
            }
        }
    }
    Some(digester.finish())
}

/// An external profile whose program cannot be found is a load error naming the
/// profile, before anything runs.
fn check_command(pipeline: &Pipeline, name: &str, profile: &AgentProfile) -> Result<(), InputError> {
    let cwd = pipeline.resolve(profile.cwd.as_deref().unwrap_or("."));
    if !cwd.is_dir() {
        return Err(InputError::file(
            &pipeline.path,
            format!("agents.{name}.cwd: {} is not a directory", pipeline.display(&cwd)),
        ));
    }
    let program = profile.command.first().map(String::as_str).unwrap_or_default();
    crate::child_env::resolve_program(program, &cwd)
        .map_err(|e| InputError::file(&pipeline.path, format!("agents.{name}.command: {e}")))?;
    match crate::child_env::missing_script(&profile.command, &cwd) {
        Some((i, e)) => {
            let (line, column) = pipeline.locate_value(&format!("/agents/{name}/command"), &profile.command[i]);
            Err(InputError::new(&pipeline.path, line, column, format!("agents.{name}.command[{i}]: {e}")))
        }
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
    let mut hasher = Vec::new();
    if let Some(programs) = programs {
        hasher.extend_from_slice(&programs.0);
    }
    hasher.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.extend_from_slice(pipeline.text.as_bytes());
    for (name, planned) in agents {
        hasher.extend_from_slice(name.as_bytes());
        hasher.extend_from_slice(&planned.profile.0);
        if let Some(d) = planned.manifest {
            hasher.extend_from_slice(&d.0);
        }
    }
    // judge recordings decide verdicts; a pipeline without judges hashes as before
    for (name, book) in judges {
        hasher.extend_from_slice(name.as_bytes());
        hasher.extend_from_slice(&book.digest.0);
    }
    hasher.extend_from_slice(&cases.0);
    // a verdict compares each run with its golden; a suite that keeps none hashes as before
    if let Some(goldens) = goldens {
        hasher.extend_from_slice(&goldens.0);
    }
    // the cases not run are named in the run's verdict (suite.json); a pipeline that names
    // none hashes as before
    if !pipeline.not_run.is_empty() {
        let named = serde_json::to_value(&pipeline.not_run).unwrap_or_default();
        hasher.extend_from_slice(&canon::to_canonical(&named).unwrap_or_default());
    }
    canon::digest(Context::Content, &hasher)
}

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
    let layout = plan.layout();
    let run = start_run(&plan, store.as_ref())?;
    let verdicts_path = layout.verdicts_path(&plan.run_id);
    let verdicts = Mutex::new(std::fs::File::create(&verdicts_path).map_err(at(&verdicts_path))?);
    let syncer = syncer::Syncer::default();
    let spill_path = layout.cases_path(&plan.run_id);
    let spill = CaseSpill::create(&spill_path, &plan.shown_run_dir()).map_err(at(&spill_path))?;
    let jobs = options.jobs.max(1);
    let ledger = Ledger::new(plan.cases.len(), jobs, spill, spill_path, progress);
    let work = Work { plan: &plan, store: store.as_ref(), verdicts: &verdicts, reuse: options.reuse.as_deref() };
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
        .and_then(|cases| conclude_staged(&plan, store.as_ref(), run, Decided { cases, tally, card_cases }, options));
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
    concluding.pending = Some(std::thread::spawn(move || syncer.finish().map(drop).and(joined(flushing))));
    concluding.finish()
}

/// A case's outcome (and its card inputs, when it feeds a reliability card), or the
/// error that ends the run.
type CaseResult = Result<(Option<cards::CardCase>, CaseOutcome), RunnerError>;

/// What every worker of [`execute`] runs cases with.
#[derive(Clone, Copy)]
struct Work<'a> {
    plan: &'a Arc<Plan>,
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
struct Ledger<'p> {
    state: Mutex<Ledgered<'p>>,
    /// Told when `written` moves while a worker waits for the window.
    window_moved: std::sync::Condvar,
    /// Set on a signal or an error: no worker takes another case.
    stop: std::sync::atomic::AtomicBool,
    window: usize,
    cases: usize,
    spill_path: PathBuf,
}

struct Ledgered<'p> {
    /// The next case to take.
    next: usize,
    /// Cases written to the spill, in dataset order.
    written: usize,
    /// Finished cases waiting for an earlier one.
    waiting: BTreeMap<usize, (Option<cards::CardCase>, CaseOutcome)>,
    spill: CaseSpill,
    tally: Tally,
    /// Only cases that feed a reliability card keep their card inputs.
    card_cases: BTreeMap<usize, cards::CardCase>,
    progress: &'p mut Progress<'p>,
    /// The first error of a case; the run ends with it.
    error: Option<RunnerError>,
    /// The test knob (`interrupt::boundary`) paused once, when the first case was written.
    paused: bool,
    /// Workers waiting for the window to move.
    idle: usize,
}

impl<'p> Ledger<'p> {
    fn new(cases: usize, jobs: usize, spill: CaseSpill, spill_path: PathBuf, progress: &'p mut Progress<'p>) -> Self {
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
    fn run<W, F>(self, jobs: usize, worker: &W) -> Result<Ledgered<'p>, RunnerError>
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

/// A fresh run directory (the same inputs give the same run id: a rerun replaces the
/// earlier one whole) and its `run.json`, before any case runs.
pub(crate) fn start_run(plan: &Plan, store: &dyn Store) -> Result<RunRecord, RunnerError> {
    let layout = plan.layout();
    let run_dir = layout.run_dir(&plan.run_id);
    remove_run_dir(&run_dir)?;
    std::fs::create_dir_all(&run_dir).map_err(at(&run_dir))?;
    let run = unfinished(plan);
    let meta = layout.meta_path(&plan.run_id);
    // whole or absent, whenever the run is killed: reindex reads it back
    crate::atomic::replace(&meta, &serde_json::to_vec_pretty(&run).map_err(|e| RunnerError::Internal(e.to_string()))?)
        .map_err(at(&meta))?;
    store.begin_run(&run)?;
    Ok(run)
}

/// The catalog's record of the plan's run while it has no verdict.
fn unfinished(plan: &Plan) -> RunRecord {
    RunRecord {
        run_id: plan.run_id.clone(),
        pipeline: plan.pipeline.pipeline.name.clone(),
        cases: plan.cases.len(),
        passed: None,
    }
}

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
    run: RunRecord,
    manifest: RunManifest,
    /// `suite.json`'s bytes, as the manifest lists them.
    suite: Vec<u8>,
    signer: Option<&'a SecretKey>,
    outcome: SuiteOutcome,
    pending: Pending,
}

/// Work the run's files wait for, on its own thread.
type Pending = Option<std::thread::JoinHandle<Result<(), RunnerError>>>;

impl Concluding<'_> {
    /// The run's outcome as it will be once finished.
    pub fn outcome(&self) -> &SuiteOutcome {
        &self.outcome
    }

    /// Wait for the pending work, then write what marks the run finished: `suite.json`,
    /// the manifest (it anchors the logs and the verdict files, so it waits for them),
    /// `run.json`.
    pub fn finish(mut self) -> Result<SuiteOutcome, RunnerError> {
        let waited = self.pending.take().map_or(Ok(()), |p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
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
        let Concluding { plan, store, ref run, ref manifest, signer, ref outcome, ref suite, .. } = self;
        let outcome = outcome.clone();
        let layout = plan.layout();
        let run_dir = layout.run_dir(&plan.run_id);
        // beside cases.jsonl, everything else a report needs (reports can be rendered
        // again later); before the manifest, which lists it and marks the run finished
        let suite_path = layout.suite_path(&plan.run_id);
        crate::atomic::replace(&suite_path, suite).map_err(at(&suite_path))?;
        unchanged(manifest, &run_dir)?;
        write_manifest(manifest, &run_dir, signer)?;
        let done = RunRecord { passed: Some(outcome.passed), ..run.clone() };
        let meta = layout.meta_path(&plan.run_id);
        crate::atomic::replace(
            &meta,
            &serde_json::to_vec_pretty(&done).map_err(|e| RunnerError::Internal(e.to_string()))?,
        )
        .map_err(at(&meta))?;
        store.put_run(&done)?;
        store.flush()?;
        Ok(outcome)
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
    let (logs, mut written) = write_indexes(plan, &layout, &run_dir, &cases)?;
    if let Some(spilled) = cases.spilled() {
        let name = crate::outcome::CASES_FILE.to_string();
        written.push(FileEntry { path: name, bytes: spilled.bytes, digest: spilled.digest });
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
    Ok(Concluding { plan, store, run, manifest, suite, signer, outcome, pending: None })
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
fn verdict(run_id: &str, case: &CaseOutcome, run: &RunResult) -> VerdictRecord {
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
fn write_indexes(
    plan: &Plan,
    layout: &Layout,
    run_dir: &Path,
    cases: &Cases,
) -> Result<(Vec<LogEntry>, Vec<FileEntry>), RunnerError> {
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
    let (file, bytes, digest) = verdicts.into_inner().map_err(|e| e.into_error()).map_err(at(&verdicts_tmp))?.finish();
    file.sync_all().map_err(at(&verdicts_tmp))?;
    std::fs::rename(&verdicts_tmp, &verdicts_path).map_err(at(&verdicts_path))?;
    let verdicts_name = verdicts_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let files = vec![entry(&verdicts_name, (file, bytes, digest)), entry(shard::UNITS_FILE, units)];
    Ok((logs, files))
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

/// The run's logs (heads and event counts, in dataset order) into `manifest.json`;
/// signed when a key is given. Returns the run's root.
fn write_manifest(manifest: &RunManifest, run_dir: &Path, signer: Option<&SecretKey>) -> Result<Digest, RunnerError> {
    let manifest_error = |e: ManifestError| RunnerError::Internal(e.to_string());
    let root = manifest.write(run_dir).map_err(manifest_error)?;
    if let Some(key) = signer {
        key.sign(root).write(run_dir).map_err(|e| RunnerError::Internal(e.to_string()))?;
    }
    Ok(root)
}

/// Remove an earlier run's directory. It is first renamed aside (one atomic step), so
/// a kill while deleting never leaves a half-deleted directory under the run's name;
/// leftovers of such a kill are swept on the next run.
fn remove_run_dir(run_dir: &Path) -> Result<(), RunnerError> {
    let (Some(runs), Some(name)) = (run_dir.parent(), run_dir.file_name()) else { return Ok(()) };
    let doomed = runs.join(format!(".deleting-{}", name.to_string_lossy()));
    if doomed.exists() {
        std::fs::remove_dir_all(&doomed).map_err(at(&doomed))?;
    }
    match std::fs::rename(run_dir, &doomed) {
        Ok(()) => std::fs::remove_dir_all(&doomed).map_err(at(&doomed))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(at(run_dir)(e)),
    }
    Ok(())
}

/// An I/O error on `path`, naming it.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::File { path: path.to_path_buf(), source }
}

/// Run all recorded runs of one case, grade them, record them.
fn run_case(
    plan: &Plan,
    index: usize,
    store: &dyn Store,
    verdicts: &Mutex<std::fs::File>,
    logs: &syncer::Logs,
) -> Result<(Option<cards::CardCase>, CaseOutcome), RunnerError> {
    let case = &plan.case(index)?;
    let layout = plan.layout();
    let profile = &plan.pipeline.agents[&case.agent];
    let metric_expect: Vec<&Assertion> = case.expect.iter().filter(|a| targets_a_block(case, &a.target)).collect();
    // the user task of an attack is graded after the case's own assertions, on the same log
    let log_expect: Vec<&Assertion> = log_assertions(case).into_iter().chain(&case.task_expect).collect();
    let task_from = log_expect.len() - case.task_expect.len();
    let mut runs = Vec::new();
    let mut envelopes = Vec::new();
    let mut card_runs = Vec::new();
    for (k, reference) in case.recordings.iter().enumerate() {
        let recording =
            plan.recording(reference).map_err(|e| RunnerError::Input(vec![InputError::file(&case.path, e)]))?;
        let path = layout.log_path(&plan.run_id, &case.id, k);
        let log_error = |source: WriteError| RunnerError::Log { path: path.clone(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(at(dir))?;
        }
        let file = logs.log(path.clone(), std::fs::File::create(&path).map_err(at(&path))?);
        let stderr = (profile.kind == AgentKind::External).then(|| path.with_extension("stderr"));
        // a recording file is parsed as it is served; one the case holds inline is
        // shared, and borrowed
        let replayed = match recording {
            Replayable::Lines(recording, lines) => {
                plan.replay_lines(case, k, &recording, lines, Box::new(file), stderr.clone(), &log_expect)
            }
            Replayable::Shared(shared) => plan.replay(case, k, &shared, Box::new(file), stderr.clone(), &log_expect),
        };
        let ReplayedRun { summary, events, turn_offsets, checks, grading_errors } = replayed.map_err(|e| match e {
            ReplayError::Log(source) => log_error(source),
            ReplayError::Input(e) => RunnerError::Input(vec![e]),
        })?;
        // an external agent goes on after a fixture error (the built-in runtime stops):
        // either way the log holds it, and it fails the run; so does a grader or judge
        // that could not answer, whatever its check says
        let error = summary.error.or_else(|| fixture_error(&events));
        let error = match (error, grading_errors.is_empty()) {
            (error, true) => error,
            (None, false) => Some(grading_errors.join("; ")),
            (Some(e), false) => Some(format!("{e}; {}", grading_errors.join("; "))),
        };
        let incomplete = crate::golden::complete::why_incomplete(summary.status.as_str(), error.as_deref(), &events);
        let shown = plan.shown_log(&case.id, k);
        let golden = plan.golden_check(case, k, &events, &shown, incomplete.as_deref())?;
        let mut checks = checks;
        let task_checks = checks.split_off(task_from.min(checks.len()));
        let checks: Vec<_> = checks.into_iter().chain([golden]).collect();
        let passed = summary.status == RunStatus::Completed && error.is_none() && checks.iter().all(|c| c.passed);
        // an attack's run: what the agent attempted, apart from what took effect
        let attempt = (case.role == Some(crate::outcome::Role::Attack)).then(|| {
            let took_effect = checks.iter().any(|c| c.name != crate::outcome::GOLDEN_CHECK && !c.passed);
            attempt::attempt(&log_expect[..task_from], &events, took_effect)
        });
        // explained only when the run itself failed: the agent's output is its own
        // (timings, addresses), and a passing run's report stays byte-identical
        let diagnosis = match (&error, &stderr) {
            (Some(_), Some(output)) => Some(diagnose(output, summary.refused.clone(), &plan.shown_run_dir(), case, k)),
            _ => None,
        };
        if !case.blocks.is_empty() {
            envelopes.push(crate::extract::envelope::envelope(&events, passed));
        }
        if cards::feeds_card(case) {
            card_runs.push(cards::card_run(&events, passed, *profile.price));
        }
        let head = events.last().map(|e| e.hash.to_string());
        store.put_log(&LogRecord {
            run_id: plan.run_id.clone(),
            case: case.id.clone(),
            k,
            path: Layout::log_rel(&plan.run_id, &case.id, k),
            head: head.clone(),
            events: events.len() as u64,
            complete: true,
            turn_offsets,
        })?;
        runs.push(RunResult {
            index: k,
            log: shown,
            head,
            events: events.len() as u64,
            virtual_ms: events.last().map_or(0, |e| e.t),
            status: summary.status.as_str().to_string(),
            checks,
            task_checks,
            attempt,
            error,
            warnings: summary.warnings,
            diagnosis,
            passed,
        });
    }
    let blocks = grade_blocks(case, &envelopes, &metric_expect, &mut runs);
    // a run's success on the card is its final verdict, block assertions included
    let card_case = cards::feeds_card(case).then(|| cards::CardCase {
        id: case.id.clone(),
        agent: case.agent.clone(),
        perturbation: case.perturbation.clone(),
        runs: card_runs.into_iter().zip(&runs).map(|(card, r)| cards_api::Run { success: r.passed, ..card }).collect(),
    });
    let passed = runs.iter().all(|r| r.passed) && blocks.iter().all(|c| c.passed);
    let score = case.role.map(|role| crate::outcome::score(role, &runs, &blocks, passed));
    let outcome = CaseOutcome {
        dataset: case.dataset.clone(),
        id: case.id.clone(),
        tags: case.tags.clone(),
        agent: case.agent.clone(),
        source: case.source(),
        runs,
        blocks,
        passed,
        score,
    };
    record_verdicts(plan, &outcome, store, verdicts)?;
    Ok((card_case, outcome))
}

/// An external agent's failed run explained: the last lines of its kept output (the
/// file is scrubbed as it is written, `external::process`) and stateval's last refusal.
fn diagnose(output: &Path, refused: Option<String>, run_dir: &str, case: &Case, k: usize) -> AgentDiagnosis {
    let text = std::fs::read(output).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let shown = format!("{run_dir}/{}/{k}.stderr", case.id);
    AgentDiagnosis { output: shown, tail: AgentDiagnosis::tail_of(&text), refused }
}

/// The message of the log's first fixture error (an effect the manifest cannot apply).
fn fixture_error(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| {
        let error = (e.kind == crate::event::Kind::Error).then(|| e.view::<crate::event::payload::Error>())?;
        (error.kind.as_str().as_deref() == Some("fixture_error"))
            .then(|| error.message.as_str().map_or_else(|| "fixture error".to_string(), std::borrow::Cow::into_owned))
    })
}

/// Does `target` name a value of one of the case's metric blocks? `recovery.*` never
/// does: the extractor root exposes every recovery value per run (the block's gate is
/// computed from the same marks), so those assertions read the log directly.
fn targets_a_block(case: &Case, target: &str) -> bool {
    let root = target.split(['.', '[']).next().unwrap_or_default();
    root != "recovery" && case.blocks.iter().any(|b| crate::dataset::block_root(b.key) == root)
}

/// Evaluate every metric block over every run, grade the assertions that target block
/// values (per run: `expect` on a per-run target is checked in each run), and return one
/// check per block plus one per block-level assertion.
fn grade_blocks(case: &Case, envelopes: &[Value], metric_expect: &[&Assertion], runs: &mut [RunResult]) -> Vec<Check> {
    if case.blocks.is_empty() {
        return Vec::new();
    }
    let mut checks = Vec::new();
    let mut across = BTreeMap::new();
    let mut per_run: Vec<BTreeMap<String, Value>> = vec![BTreeMap::new(); runs.len()];
    for block in &case.blocks {
        let key = block.key;
        match MetricBlock::parse(block).and_then(|b| b.evaluate(envelopes)) {
            Ok(outcome) => {
                across.extend(outcome.targets.clone());
                for r in &outcome.runs {
                    if let Some(slot) = per_run.get_mut(r.run) {
                        slot.extend(r.targets.clone());
                    }
                }
                // a run that failed a per-run block failed: its verdict, in every report
                // and on the reliability card, says so rather than "passed"
                for r in outcome.runs.iter().filter(|r| !r.passed) {
                    if let Some(run) = runs.get_mut(r.run) {
                        run.passed = false;
                    }
                }
                let actual = if outcome.runs.is_empty() {
                    json!(outcome.targets)
                } else {
                    Value::Array(outcome.runs.iter().map(|r| json!(r.targets)).collect())
                };
                let reason = if outcome.passed {
                    format!("held in all {} runs", envelopes.len())
                } else {
                    outcome.messages().join("; ")
                };
                checks.push(Check {
                    name: key.to_string(),
                    passed: outcome.passed,
                    reason,
                    expected: None,
                    actual: Some(actual),
                });
            }
            Err(e) => checks.push(Check {
                name: key.to_string(),
                passed: false,
                reason: format!("cannot evaluate: {e}"),
                expected: None,
                actual: None,
            }),
        }
    }
    for a in &case.block_expect {
        checks.push(check_value(a, across.get(&a.target)));
    }
    for (run, targets) in runs.iter_mut().zip(&per_run) {
        for a in metric_expect {
            let check = check_value(a, targets.get(&a.target).or_else(|| across.get(&a.target)));
            run.passed &= check.passed;
            run.checks.push(check);
        }
    }
    checks
}

fn check_value(a: &Assertion, value: Option<&Value>) -> Check {
    let outcome = a.matcher.apply(value);
    // the values are kept whether it held or not (see `grade::grade_with`)
    Check {
        name: a.target.clone(),
        passed: outcome.passed,
        reason: outcome.reason,
        expected: Some(a.spec.clone()),
        actual: value.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

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
        let started = std::sync::atomic::AtomicUsize::new(0);
        let case = |index: usize| {
            started.fetch_add(1, Ordering::SeqCst);
            if index == 7 {
                return Err(RunnerError::Internal("case 7 broke".into()));
            }
            Ok((None, outcome(index)))
        };
        let (ran, _) = run_ledger(1000, 2, &case);
        let (written, error) = ran.expect("no worker panicked");
        assert!(matches!(&error, Some(RunnerError::Internal(m)) if m == "case 7 broke"), "{error:?}");
        assert!(written.len() <= 7, "nothing at or after the failed case is written: {}", written.len());
        // the other worker finishes the case it holds, and takes no more
        assert!(started.load(Ordering::SeqCst) <= 9, "{} cases started", started.load(Ordering::SeqCst));
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

    /// A merge's links are the pending work: the manifest, which anchors the logs and
    /// marks the run finished, must not be written before that work is done.
    #[test]
    fn a_run_is_finished_only_after_its_pending_work() -> Result<(), Box<dyn std::error::Error>> {
        let (_store_dir, plan) = ci_plan_in_a_fresh_store()?;
        let layout = plan.layout();
        let store = crate::store::SledStore::open(&layout.catalog())?;
        let run = start_run(&plan, &store)?;
        let run_dir = layout.run_dir(&plan.run_id);
        let cases = CaseSpill::create(&layout.cases_path(&plan.run_id), "")?.finish()?;
        let decided = Decided { cases, tally: Tally::default(), card_cases: BTreeMap::new() };
        let options = Options { jobs: 1, selective: false, signer: None, shard: None, reuse: None };
        let mut concluding = conclude_staged(&plan, &store, run, decided, &options)?;

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
}
