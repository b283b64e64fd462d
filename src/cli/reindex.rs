//! `stateval reindex`: rebuild the sled catalog from the log files alone.
//!
//! Names every incomplete, torn or tampered log and every run without `run.json`;
//! exits 1 when any log fails to verify (`--repair` moves those aside).

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::pipeline::Pipeline;
use stateval::store::{Layout, reindex};

#[derive(clap::Args)]
pub struct Args {
    /// The pipeline whose store to rebuild.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// The store directory, instead of the pipeline's.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Move logs that fail to verify to `<store>/quarantine/` and leave them out of the
    /// catalog.
    #[arg(long)]
    repair: bool,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let (root, setting) = match args.store {
        Some(dir) => (dir, "--store"),
        None => (
            Pipeline::load(&args.pipeline).map_err(|e| CliError::invalid(e.to_string()))?.store_dir(),
            "pipeline.store",
        ),
    };
    let layout = Layout::new(&root);
    let store = super::open_store(&layout, setting)?;
    let summary = reindex(&store, &layout, args.repair).map_err(|e| CliError::internal(e.to_string()))?;
    super::out(format!(
        "reindexed {}: {} runs, {} logs ({} incomplete), {} verdicts",
        root.display(),
        summary.runs,
        summary.logs,
        summary.incomplete.len(),
        summary.verdicts
    ));
    for run in &summary.without_meta {
        super::err(format_args!("warning: {run}: no run.json (the run was killed before it started writing)"));
    }
    for log in &summary.incomplete {
        super::err(format_args!("warning: incomplete: {log}"));
    }
    for log in &summary.torn {
        super::err(format_args!("warning: torn: {log}"));
    }
    for p in &summary.problems {
        super::err(format_args!("warning: {p}"));
    }
    for log in &summary.failed {
        super::err(format_args!("FAILED {log}"));
    }
    for (from, to) in &summary.moved {
        super::err(format_args!("moved {} to {}", from.display(), to.display()));
    }
    Ok(if summary.failed.is_empty() { Exit::Pass } else { Exit::Fail })
}
