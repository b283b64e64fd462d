//! `stateval run [PIPELINE]`: the main job.

use std::path::PathBuf;
use std::sync::Arc;

use super::{CliError, Exit};
use stateval::evidence::SecretKey;
use stateval::golden;
use stateval::interrupt::{self, Phase};
use stateval::isolation;
use stateval::pipeline::Pipeline;
use stateval::report;
use stateval::runner::shard::{PlanFile, Shard, Strategy};
use stateval::runner::{self, Options, Plan, RunnerError, Selection};

#[derive(clap::Args)]
pub struct Args {
    /// Pipeline definition; a relative path not found here is looked for in the
    /// directories above, as git and cargo find their project.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// Run only cases whose id matches this glob (`transfer-*`).
    #[arg(long)]
    filter: Option<String>,
    /// Run only cases with this tag (repeatable: any of them).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Cases run at once, at least 1 (default: the pipeline's `jobs`, else the number of
    /// cores). The reports are the same for any number: results are put back in
    /// dataset order before they are written.
    #[arg(long, short, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    jobs: Option<u64>,
    /// Write each run's log as its golden (`<goldens>/<dataset>/<case>.<k>.jsonl`)
    /// instead of comparing with it. Refused under CI (`CI` set) unless
    /// `--allow-bless-in-ci`: goldens are reviewed in a PR, never rewritten by CI.
    #[arg(long)]
    bless: bool,
    /// Let `--bless` run where the environment says CI.
    #[arg(long, requires = "bless")]
    allow_bless_in_ci: bool,
    /// Run one shard of the suite, `hash:I/N` (a case by a digest of its id: stable when
    /// cases are added) or `slice:I/N` (round-robin), I from 1. Every recorded run of a
    /// case stays in its shard. Writes logs and case outcomes for `stateval merge`,
    /// which decides the gates; no reports.
    #[arg(long, value_name = "STRATEGY:I/N", conflicts_with_all = ["shard_from_env", "bless", "filter", "tags"])]
    shard: Option<Shard>,
    /// The shard from the CI engine's environment: `STATEVAL_SHARD=I/N` (a GitHub Actions
    /// matrix), `CI_NODE_INDEX`/`CI_NODE_TOTAL` (GitLab), `BUILDKITE_PARALLEL_JOB`/`_COUNT`,
    /// `JOB_COMPLETION_INDEX` with `STATEVAL_SHARD_TOTAL` (Kubernetes Indexed Job).
    #[arg(long, conflicts_with_all = ["bless", "filter", "tags"])]
    shard_from_env: bool,
    /// The plan written by `stateval plan`: refuse to run when the inputs changed since.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
    /// The store directory for this run instead of the pipeline's (a shard's output,
    /// uploaded for the merge job).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Skip cases whose every unit (case × recorded run, by content id) already has a
    /// verified log in DIR — a store, a shard output or a run directory; their logs are
    /// copied and their golden checks redone.
    #[arg(long, value_name = "DIR")]
    reuse: Option<PathBuf>,
    /// Show no progress while cases run: no bar on a terminal, no line per case in a log
    /// (the summary still follows).
    #[arg(long, short)]
    quiet: bool,
    /// List every metric of each reliability card in the summary, not one line per card
    /// (the JSON and Markdown reports always hold all of them).
    #[arg(long, short)]
    verbose: bool,
}

/// A `--tag` no case of the suite carries selects nothing, and with other tags given
/// shrinks the run silently: name it, with the tags there are.
fn unknown_tags(asked: &[String], suite: &std::collections::BTreeSet<String>) -> Result<(), CliError> {
    let Some(unknown) = asked.iter().find(|t| !suite.contains(*t)) else { return Ok(()) };
    let hint = stateval::diag::did_you_mean(unknown, suite.iter().map(String::as_str))
        .map(|t| format!(" (did you mean {t:?}?)"))
        .unwrap_or_default();
    let known = if suite.is_empty() {
        "no case of the suite has a tag".to_string()
    } else {
        format!("the suite's tags: {}", suite.iter().map(String::as_str).collect::<Vec<_>>().join(", "))
    };
    Err(CliError::invalid(format!("--tag {unknown:?}: no case of the suite carries it{hint}; {known}")))
}

/// `CI` as CI services set it (`true`, or `1`): set and not `false`/`0`/empty.
pub(super) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

/// Compile, on another core, what the process compiles once and wants only later: the
/// injection and text-reading patterns (wanted at the first case's tool descriptions),
/// and the case schema's text put together (its check is generated). On the main
/// thread they were about a sixteenth of a 50-case suite's work, all of it before the
/// first case; here they are ready by the time it gets there (or it waits for the
/// compilation under way, never doing it twice). The detectors' PII patterns are not
/// among them: they are wanted only for a reply or outbound call that could hold an
/// address or a number (`builtin_pii_possible`), which many suites never have, and
/// compiling them anyway was 2 % of a 50-case suite's instructions.
fn warm_up() {
    let warm = || {
        std::sync::LazyLock::force(&stateval::schemas::CASE_SCHEMA);
        stateval::text::injection::injection_patterns();
        stateval::text::normalize::warm();
    };
    // no thread to spare: the run compiles them where it needs them, as it did
    let _ = std::thread::Builder::new().name("warm-up".into()).spawn(warm);
}

pub fn run(mut args: Args) -> Result<Exit, CliError> {
    args.pipeline = super::find_pipeline(&args.pipeline);
    // a signal from here on stops the run at its next phase boundary (exit 130)
    interrupt::defer();
    warm_up();
    // parsed once, here, and handed to the plan: a pipeline of thousands of profiles is
    // a large document while it is parsed
    let read = Pipeline::read(&args.pipeline);
    // An earlier run's reports go as soon as the pipeline names them, before anything
    // else is read or can fail: no refusal, failure or signal from here on (SIGKILL
    // included) leaves a stale green report beside a change that fails.
    if let Ok(pipeline) = &read {
        remove_stale_reports(pipeline)?;
    }
    // what it finds wrong is reported with what the plan finds, all at once
    let loaded = read.and_then(Pipeline::checked_keeping);
    interrupt::boundary(Phase::Loading)?;
    let signer = SecretKey::from_env().map_err(|e| CliError::invalid(e.to_string()))?.map(Arc::new);
    if args.bless && in_ci() && !args.allow_bless_in_ci {
        return Err(CliError::invalid(
            "refusing to bless goldens under CI (CI is set): goldens change in a reviewed commit, \
             not in a CI job; pass --allow-bless-in-ci to do it anyway",
        ));
    }
    let filter = args
        .filter
        .as_deref()
        .map(glob::Pattern::new)
        .transpose()
        .map_err(|e| CliError::invalid(format!("--filter: {e}")))?;
    let selection = Selection { filter, tags: args.tags.clone() };
    let shard = match (args.shard, args.shard_from_env) {
        (Some(shard), _) => Some(shard),
        (None, true) => {
            let (shard, how) =
                Shard::from_env(Strategy::Hash, &|name| std::env::var(name).ok()).map_err(CliError::invalid)?;
            super::out(how);
            Some(shard)
        }
        (None, false) => None,
    };
    let (pipeline, errors) = loaded.map_err(|e| RunnerError::Input(vec![e]))?;
    let mut plan = Plan::from_pipeline_with(pipeline, errors, &selection, None)?;
    crate::release_freed_memory();
    interrupt::boundary(Phase::Validation)?;
    unknown_tags(&args.tags, &plan.suite_tags)?;
    if plan.cases.is_empty() {
        return Err(CliError::invalid("no case matches the selection: nothing to run"));
    }
    if let Some(path) = &args.plan {
        check_plan_file(path, &plan)?;
    }
    if let Some(out) = &args.out {
        plan.pipeline.pipeline.store = out.to_string_lossy().into_owned();
    }
    check_isolation(&plan, signer.is_some())?;
    let whole = plan.cases.len();
    // a run that signs takes over only runs its own key signed (docs/evidence.md)
    let trust = stateval::evidence::Trust::of_signer(signer.as_deref());
    let reuse = args
        .reuse
        .as_deref()
        .map(|dir| stateval::runner::reuse::Reuse::scan(dir, &plan.layout().run_dir(&plan.run_id), &trust))
        .transpose()
        .map_err(CliError::invalid)?;
    if let Some(shard) = shard {
        plan.keep_shard(shard);
        plan.run_id = format!("{}-shard-{}of{}", plan.run_id, shard.index, shard.total);
    }
    if args.bless {
        plan.goldens.mode = golden::GoldenMode::Bless;
    } else if in_ci() {
        plan.goldens.under_ci();
    }
    let jobs = args
        .jobs
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .or(plan.pipeline.pipeline.jobs)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let layout = plan.layout();
    let store = Arc::new(super::open_store(&layout, "pipeline.store")?);
    // the store is this run's now: an earlier run of the same id may be moved aside
    let mut reuse = reuse;
    if let Some(reuse) = reuse.as_mut() {
        reuse.set_aside().map_err(CliError::internal)?;
    }
    let reuse = reuse.map(Arc::new);
    let plan = Arc::new(plan);

    let total = plan.cases.len();
    let selective = selection.filter.is_some() || !selection.tags.is_empty();
    let mode =
        if args.quiet { report::pretty::ProgressMode::Quiet } else { report::pretty::ProgressMode::for_stderr() };
    let progress = report::pretty::Progress::with_mode(total, mode);
    let store: Arc<dyn stateval::store::Store> = store;
    let options = Options { jobs, selective, signer, shard, reuse: reuse.clone() };
    let concluding = runner::execute_staged(&plan, &store, &options, &mut |case, wall| progress.case_done(case, wall));
    progress.finish();
    let concluding = concluding?;
    // the reports render while the run's logs and verdict files are fsync'd (their own
    // temporary files' fsyncs join that commit); they are put in place only once the
    // run is finished, its manifest written. Those that read the logs (HTML) render
    // then, from the logs as the manifest found them: one swapped before it is shown
    // as not the run's
    let rendered = shard.is_none().then(|| render_reports(concluding.outcome(), &plan, args.verbose, false));
    // the run is finished whether its reports rendered or not
    let outcome = concluding.finish()?;
    // the run is finished on disk: a signal from here on takes its verdict back
    let told = tell(&args, &plan, &outcome, reuse.as_deref(), shard, whole, rendered)
        .and_then(|exit| interrupt::check(Phase::Summary).map(|()| exit).map_err(CliError::from));
    if told.as_ref().is_err_and(|e| e.exit == Exit::Interrupted) {
        retract(&plan, store.as_ref())?;
    }
    told
}

/// A pipeline whose external agents cannot be isolated here is refused under
/// `[isolation] mode = "required"`, and said loudly otherwise, before anything runs.
/// (Custom graders are found as cases are graded: a run that started one unisolated
/// says so at its end, see [`tell`].)
fn check_isolation(plan: &Plan, signing: bool) -> Result<(), CliError> {
    if plan.pipeline.agents.values().all(|p| p.kind != stateval::pipeline::AgentKind::External) {
        return Ok(());
    }
    let Some(why) = plan.confinement().why_not() else { return Ok(()) };
    if plan.pipeline.isolation.mode == isolation::IsolationMode::Required {
        return Err(CliError::invalid(format!(
            "{}: [isolation] mode = \"required\", and the code under test cannot be isolated here: {why}",
            plan.pipeline.display(&plan.pipeline.path)
        )));
    }
    let signs = signing.then_some(plan.pipeline.isolation.sign_unisolated);
    super::err(format_args!("stateval: {}", isolation::warning(&why, signs)));
    Ok(())
}

/// What a finished run prints and writes: what it reused, a shard's summary, or the
/// reports and the summary (and what it blessed); the run's exit.
fn tell(
    args: &Args,
    plan: &Plan,
    outcome: &stateval::outcome::SuiteOutcome,
    reuse: Option<&stateval::runner::reuse::Reuse>,
    shard: Option<Shard>,
    whole: usize,
    rendered: Option<Result<Rendered, CliError>>,
) -> Result<Exit, CliError> {
    if let Some(why) = outcome.extras.get(isolation::EXTRA).and_then(|x| x["why"].as_str()) {
        let signed = outcome.extras[isolation::EXTRA]["signed"].as_bool();
        let signing = SecretKey::from_env().ok().flatten().is_some().then_some(signed.unwrap_or(false));
        super::err(format_args!("stateval: {}", isolation::warning(why, signing)));
    }
    if let (Some(reuse), Some(dir)) = (reuse, &args.reuse) {
        let reused = reuse.reused.load(std::sync::atomic::Ordering::Relaxed);
        super::out(format!("reused {reused} of {} cases from {}", outcome.cases.len(), dir.display()));
        if let Some(notice) = reuse.trust().notice("--reuse", "runs") {
            super::out(notice);
        }
        for (why, cases) in reuse.not_reused() {
            const SHOWN: usize = 3;
            let more = cases.len().saturating_sub(SHOWN);
            let mut named = cases.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            let count = cases.len();
            super::out(format!("  replayed {count} case{}: {why}: {named}", if count == 1 { "" } else { "s" }));
        }
    }
    if let Some(shard) = shard {
        super::out(format!(
            "shard {shard}: {} of {whole} cases ({} passed) in {}; `stateval merge` decides the gates",
            outcome.cases.len(),
            outcome.passed_cases(),
            plan.pipeline.display(&plan.layout().run_dir(&plan.run_id)),
        ));
        // the root a separate step signs the shard against (`stateval sign`)
        if let (Some(root), Some(signature)) = (&outcome.root, &outcome.signature) {
            super::out(format!("root {root} ({signature})"));
        }
        return Ok(Exit::Pass);
    }

    // rendered while the run was being made durable, or now
    let rendered = rendered.unwrap_or_else(|| render_reports(outcome, plan, args.verbose, true));
    rendered?.publish(outcome, plan)?;
    for tag in &plan.gates_left_out {
        let selection = Selection {
            filter: args.filter.as_deref().and_then(|f| glob::Pattern::new(f).ok()),
            tags: args.tags.clone(),
        };
        super::out(format!(
            "SKIP gate {tag}: left out: no case this selection ({}) kept carries the tag",
            selection_args(&selection)
        ));
    }
    if args.bless {
        super::out(bless_summary(&plan.goldens));
    } else if let Some(missing) = missing_goldens(&plan.goldens, super::pipeline_word(&args.pipeline)) {
        super::out(missing);
    }
    Ok(if outcome.passed { Exit::Pass } else { Exit::Fail })
}

/// Take back what a finished run's verdict left, for a signal after
/// [`runner::Concluding::finish`]: its report files (put in place or not) and the run's
/// verdict ([`runner::retract`]).
pub fn retract(plan: &Plan, store: &dyn stateval::store::Store) -> Result<(), CliError> {
    remove_stale_reports(&plan.pipeline)?;
    runner::retract(plan, store)?;
    Ok(())
}

/// The report files and the summary of a run, rendered but not yet in place or shown.
pub struct Rendered {
    files: report::StagedReports,
    summary: Vec<u8>,
}

/// Render the report files (see [`report::stage_reports`] for `logs_ready`) and the
/// summary at once: each streams the cases on its own.
pub fn render_reports(
    outcome: &stateval::outcome::SuiteOutcome,
    plan: &Plan,
    verbose: bool,
    logs_ready: bool,
) -> Result<Rendered, CliError> {
    // the files are staged beside their places: those places must still be the project's
    check_report_paths(&plan.pipeline)?;
    let color = report::pretty::stdout_color_choice();
    let (files, summary) = std::thread::scope(|scope| {
        let summary = scope.spawn(|| {
            let mut summary = Vec::new();
            report::pretty::write_summary(outcome, &mut summary, color, verbose).map(|()| summary)
        });
        let prompts = report::html::prompts(&plan.pipeline.agents);
        let files =
            report::stage_reports_with(outcome, &plan.pipeline.report, &plan.pipeline.base, logs_ready, prompts);
        (files, summary.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let files = files.map_err(report_error)?;
    let summary = summary.map_err(|e| CliError::internal(e.to_string()))?;
    Ok(Rendered { files, summary })
}

impl Rendered {
    /// Put the report files in place, then print the summary and where they went. A
    /// signal seen before the summary is an interrupt: the caller takes back the files
    /// already in place ([`retract`]).
    pub fn publish(self, outcome: &stateval::outcome::SuiteOutcome, plan: &Plan) -> Result<(), CliError> {
        interrupt::boundary(Phase::Reports)?;
        // what the code under test could have changed since the run began
        check_report_paths(&plan.pipeline)?;
        let written = self.files.publish(outcome).map_err(report_error)?;
        interrupt::boundary(Phase::Summary)?;
        let mut stdout = std::io::stdout().lock();
        // a closed or full stdout (`| head -1`, `> /dev/full`: EPIPE, ENOSPC, EIO) loses
        // the summary, never the exit code: that is the verdict's
        let _ = std::io::Write::write_all(&mut stdout, &self.summary).and_then(|()| std::io::Write::flush(&mut stdout));
        drop(stdout);
        for path in written {
            super::out(format!("report: {}", plan.pipeline.display(&path)));
        }
        Ok(())
    }
}

fn report_error(e: report::ReportError) -> CliError {
    if e.is_users() { CliError::invalid(e.to_string()) } else { CliError::internal(e.to_string()) }
}

/// A plan file from `stateval plan` must be this plan: same digest.
pub fn check_plan_file(path: &std::path::Path, plan: &Plan) -> Result<(), CliError> {
    let file = PlanFile::read(path).map_err(CliError::invalid)?;
    if file.plan != plan.digest {
        let changes: Vec<String> = file.changes(plan).into_iter().map(|l| format!("  {l}")).collect();
        return Err(CliError::invalid(format!(
            "{}: the inputs changed since `stateval plan` (plan {}, now {}):\n{}",
            path.display(),
            file.plan,
            plan.digest,
            changes.join("\n")
        )));
    }
    Ok(())
}

/// Reports from an earlier run must not stand in for this one (an interrupt, a kill, a
/// failure part-way, a refused input): the configured report files go as soon as the
/// pipeline file is read, before anything else. Called only with a pipeline that was
/// read, so the files are the ones it names, inside its base (`pipeline::outputs`).
/// One that is not a regular file (a FIFO, a device, a directory) is an error naming
/// it, and nothing is removed.
pub fn remove_stale_reports(pipeline: &Pipeline) -> Result<(), CliError> {
    check_report_paths(pipeline)?;
    for (_, rel) in pipeline.report.outputs().into_iter().flatten() {
        // a link (one that leads inside: checked) goes itself, never what it names
        let _ = std::fs::remove_file(pipeline.base.join(rel));
    }
    Ok(())
}

/// Every report path of the pipeline still leads nowhere outside its base and is a
/// regular file or nothing: checked when the pipeline is read, and again before the
/// reports are written, for links or files the code under test made in the meantime.
fn check_report_paths(pipeline: &Pipeline) -> Result<(), CliError> {
    use stateval::pipeline::outputs;
    for (format, rel) in pipeline.report.outputs().into_iter().flatten() {
        let key = format!("report.{}", format.key());
        if let Some((link, to)) = outputs::leads_outside(&pipeline.base, rel) {
            return Err(CliError::invalid(format!(
                "{key}: {rel:?} leads out of the project through the link {} (to {}); nothing was written",
                pipeline.display(&link),
                to.display()
            )));
        }
        let path = pipeline.base.join(rel);
        if let Some(what) = outputs::not_a_file(&path) {
            return Err(CliError::invalid(format!(
                "{key}: {} is {what}, not a regular file: a report is written only where no file is or over a \
                 regular one; remove it or name another path",
                pipeline.display(&path)
            )));
        }
    }
    Ok(())
}

/// `--filter 'pay-*' --tag security`: the options that narrowed a run.
fn selection_args(selection: &Selection) -> String {
    let filter = selection.filter.iter().map(|f| format!("--filter '{}'", f.as_str()));
    filter.chain(selection.tags.iter().map(|t| format!("--tag {t}"))).collect::<Vec<_>>().join(" ")
}

/// Every golden the run looked for and did not find, one a line, and what follows
/// from it, with the command that writes them (`pipeline`: the pipeline as that command
/// names it, [`super::pipeline_word`]); nothing when all were there or the pipeline keeps
/// none.
fn missing_goldens(goldens: &golden::Goldens, pipeline: Option<String>) -> Option<String> {
    let missing = goldens.missing();
    if missing.is_empty() || goldens.none_kept() {
        return None;
    }
    let (n, dir) = (missing.len(), goldens.shown.trim_end_matches('/'));
    // (runs, they, pass, fail, them): the sentence in the singular or the plural
    let (runs, they, pass, fail, them) = match n {
        1 => ("1 run has".to_string(), "it", "passes", "fails", "it"),
        _ => (format!("{n} runs have"), "they", "pass", "fail", "them"),
    };
    let what = match goldens.required {
        golden::Required::No => format!("{they} {pass} for now, and {fail} under CI"),
        golden::Required::ByPipeline => format!("{they} {fail}: [goldens] required = true"),
        golden::Required::ByCi => format!("{they} {fail} under CI"),
    };
    let bless = match pipeline {
        Some(pipeline) => format!("stateval run {pipeline} --bless"),
        None => "stateval run --bless".to_string(),
    };
    let mut text = format!("goldens: {runs} no golden in {dir}/ ({what}; `{bless}` writes {them}):");
    for path in missing {
        text.push_str("\n  ");
        text.push_str(&path);
    }
    Some(text)
}

/// `goldens: 13 blessed in goldens/ (2 created, 1 updated, 10 unchanged)`, and the
/// goldens not written because their run did not complete on its own.
fn bless_summary(goldens: &golden::Goldens) -> String {
    let counts = goldens.blessed();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let parts: Vec<String> = counts.iter().map(|(how, n)| format!("{n} {}", how.as_str())).collect();
    let mut text =
        format!("goldens: {total} blessed in {}/ ({})", goldens.shown.trim_end_matches('/'), parts.join(", "));
    // each refused run's case is listed above with why it did not complete
    let refused = goldens.refused();
    if !refused.is_empty() {
        text.push_str(&format!(
            "\ngoldens: {} not blessed: their runs did not complete on their own (fix them, then bless again):",
            refused.len()
        ));
        for path in refused {
            text.push_str("\n  ");
            text.push_str(&path);
        }
    }
    text
}
