//! `stateval run [PIPELINE]`: the main job.

use std::path::PathBuf;
use std::sync::Arc;

use super::{CliError, Exit};
use stateval::pipeline::Pipeline;
use stateval::report;
use stateval::runner::{self, Options, Plan, RunnerError, Selection};
use stateval::store::SledStore;

#[derive(clap::Args)]
pub struct Args {
    /// Pipeline definition.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// Run only cases whose id matches this glob (`transfer-*`).
    #[arg(long)]
    filter: Option<String>,
    /// Run only cases with this tag (repeatable: any of them).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Cases run at once (default: the pipeline's `jobs`, else the number of cores).
    #[arg(long, short)]
    jobs: Option<usize>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let filter = args
        .filter
        .as_deref()
        .map(glob::Pattern::new)
        .transpose()
        .map_err(|e| CliError::invalid(format!("--filter: {e}")))?;
    let selection = Selection { filter, tags: args.tags };
    let plan = match Plan::load(&args.pipeline, &selection) {
        Ok(plan) => plan,
        Err(e) => {
            remove_stale_reports(&args.pipeline);
            return Err(e.into());
        }
    };
    if plan.cases.is_empty() {
        remove_stale_reports(&args.pipeline);
        return Err(CliError::invalid("no case matches the selection: nothing to run"));
    }
    let jobs = args
        .jobs
        .or(plan.pipeline.pipeline.jobs)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let layout = plan.layout();
    std::fs::create_dir_all(&layout.root).map_err(|e| CliError::internal(format!("{}: {e}", layout.root.display())))?;
    let store = SledStore::open(&layout.catalog()).map_err(|e| CliError::internal(e.to_string()))?;
    let plan = Arc::new(plan);

    let total = plan.cases.len();
    let selective = selection.filter.is_some() || !selection.tags.is_empty();
    let progress = report::pretty::Progress::new(total);
    let outcome = runner::execute(plan.clone(), Arc::new(store), &Options { jobs, selective }, &mut |case| {
        progress.case_done(case)
    });
    progress.finish();
    let outcome = match outcome {
        Ok(o) => o,
        Err(RunnerError::Interrupted) => {
            remove_stale_reports(&args.pipeline);
            return Err(RunnerError::Interrupted.into());
        }
        Err(e) => return Err(e.into()),
    };

    let written = report::write_reports(&outcome, &plan.pipeline.report, &plan.pipeline.base)
        .map_err(|e| CliError::internal(e.to_string()))?;
    let mut stdout = std::io::stdout().lock();
    report::pretty::write_summary(&outcome, &mut stdout, report::pretty::stdout_color_choice())
        .map_err(|e| CliError::internal(e.to_string()))?;
    drop(stdout);
    for path in written {
        super::out(format!("report: {}", plan.pipeline.display(&path)));
    }
    Ok(if outcome.passed { Exit::Pass } else { Exit::Fail })
}

/// Reports from an earlier run must not stand in for a run that did not happen: when
/// the inputs are invalid or the run is interrupted, the configured report files go.
/// The pipeline itself may be the invalid input, so its `[report]` table is read
/// leniently, as plain TOML.
fn remove_stale_reports(pipeline: &std::path::Path) {
    let Ok(text) = std::fs::read_to_string(pipeline) else { return };
    let Ok(value) = toml::from_str::<toml::Table>(&text) else { return };
    let base = match Pipeline::parse(pipeline, &text) {
        Ok(p) => p.base,
        Err(_) => stateval::pipeline::default_base(pipeline),
    };
    let Some(report) = value.get("report").and_then(toml::Value::as_table) else { return };
    for key in ["junit", "tap", "json", "markdown"] {
        if let Some(rel) = report.get(key).and_then(toml::Value::as_str) {
            let _ = std::fs::remove_file(base.join(rel));
        }
    }
}
