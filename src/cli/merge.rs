//! `stateval merge DIR…`: shard runs put back together; gates, cards and reports once
//! over the whole, byte-identical to one unsharded run.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::evidence::Trust;
use stateval::interrupt::{self, Phase};
use stateval::pipeline::Pipeline;
use stateval::runner::shard::PlanFile;
use stateval::runner::{Options, Plan, RunnerError, Selection, merge};

#[derive(clap::Args)]
pub struct Args {
    /// Shard outputs: the `--out` directories of `stateval run --shard`, or their run
    /// directories.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Pipeline definition (the one the shards ran).
    #[arg(long, default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// The plan written by `stateval plan`: every shard must have run it.
    #[arg(long, value_name = "PLAN.json")]
    plan: Option<PathBuf>,
    /// The store directory for the merged run instead of the pipeline's.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// List every metric of each reliability card in the summary.
    #[arg(long, short)]
    verbose: bool,
    /// As `stateval run --quiet`: no progress, the summary still follows. A merge shows
    /// no progress (it runs no case), so this changes nothing it prints; it is taken so
    /// that a CI job can give the shard runs and the merge the same flags.
    #[arg(long, short)]
    #[allow(dead_code)]
    quiet: bool,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    // a signal from here on stops the merge at its next phase boundary (exit 130)
    interrupt::defer();
    let loaded = Pipeline::load(&args.pipeline);
    interrupt::boundary(Phase::Loading)?;
    let mut pipeline = loaded.map_err(|e| CliError::from(RunnerError::Input(vec![e])))?;
    if let Some(out) = &args.out {
        pipeline.pipeline.store = out.to_string_lossy().into_owned();
    }
    let signer = stateval::evidence::SecretKey::from_env()
        .map_err(|e| CliError::invalid(e.to_string()))?
        .map(std::sync::Arc::new);
    // a merge that signs takes over only shards its own key signed (docs/evidence.md)
    let trust = Trust::of_signer(signer.as_deref());
    let mut shards = merge::open_shards(&args.dirs)?;
    // the recordings the shards validated are not parsed again, and the shards verify
    // while the plan loads: neither needs the other until the merge
    let validated = std::sync::Arc::new(merge::validated_recordings(&shards));
    let plan = std::thread::scope(|scope| {
        scope.spawn(|| shards.iter_mut().for_each(|shard| shard.verify(&trust)));
        Plan::from_pipeline_with(pipeline, Vec::new(), &Selection::default(), Some(validated))
    })?;
    crate::release_freed_memory();
    interrupt::boundary(Phase::Validation)?;
    let plan_file = args.plan.as_deref().map(PlanFile::read).transpose().map_err(CliError::invalid)?;
    // the inputs are valid: an earlier run's reports go before anything is merged (see
    // `run::remove_stale_reports`)
    super::run::remove_stale_reports(&plan.pipeline)?;
    let layout = plan.layout();
    let store = super::open_store(&layout, if args.out.is_some() { "--out" } else { "pipeline.store" })?;
    let options = Options { jobs: 1, selective: false, signer, shard: None, reuse: None };
    let concluding = merge::merge(&plan, &store, &shards, plan_file.as_ref(), &options)?;
    // the reports render while the logs are still being linked into the run; they are
    // put in place only once the run is finished (its manifest written)
    let rendered = super::run::render_reports(concluding.outcome(), &plan, args.verbose, false);
    // the run is finished whether its reports rendered or not, as `stateval run`'s is
    let outcome = concluding.finish()?;
    // the run is finished on disk: a signal from here on takes its verdict back
    let published = rendered
        .and_then(|rendered| rendered.publish(&outcome, &plan))
        .and_then(|()| interrupt::check(Phase::Summary).map_err(CliError::from));
    if published.as_ref().is_err_and(|e| e.exit == Exit::Interrupted) {
        super::run::retract(&plan, &store)?;
    }
    published?;
    if let Some(notice) = trust.notice("merge", "shards") {
        super::out(notice);
    }
    Ok(if outcome.passed { Exit::Pass } else { Exit::Fail })
}
