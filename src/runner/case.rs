//! One case: each recorded run replayed with the case's agent and graded over its log
//! ([`Plan::replay`]), checked against its golden, the metric blocks graded across the
//! runs, and the case's verdicts recorded ([`run_case`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Plan, Replayable, RunnerError, at, attempt, cards, graders, inputs, record_verdicts, syncer};
use crate::agent::detectors::Detectors;
use crate::agent::{Agent, Recorder, RunInput, RunStatus, RunSummary};
use crate::dataset::Case;
use crate::dataset::expect::Assertion;
use crate::dataset::recording::RecordedLines;
use crate::dataset::recording::Recording;
use crate::diag::InputError;
use crate::event::Event;
use crate::event::writer::{Sink, WriteError};
use crate::external::{ExternalAgent, Launch};
use crate::grade::calls::Grading;
use crate::grade::custom::CaseInfo;
use crate::metrics::block::MetricBlock;
use crate::metrics::dimensions as cards_api;
use crate::outcome::{AgentDiagnosis, CaseOutcome, Check, RunResult};
use crate::pipeline::{AgentKind, OnUnused};
use crate::replay::ReplayProvider;
use crate::runtime::BuiltinAgent;
use crate::store::{Layout, LogRecord, Store};
use serde_json::{Value, json};

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
        for event in &graded.events {
            rec.emit_grading(event)?;
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

/// Run all recorded runs of one case, grade them, record them.
pub(super) fn run_case(
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
        runs: card_runs
            .into_iter()
            .zip(&runs)
            .map(|(card, r)| cards_api::RunSample { success: r.passed, ..card })
            .collect(),
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
