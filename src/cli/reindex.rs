//! `stateval reindex`: rebuild the sled catalog from the log files alone.

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
    let summary = reindex(&store, &layout).map_err(|e| CliError::internal(e.to_string()))?;
    super::out(format!(
        "reindexed {}: {} runs, {} logs ({} incomplete), {} verdicts",
        root.display(),
        summary.runs,
        summary.logs,
        summary.incomplete_logs,
        summary.verdicts
    ));
    for p in &summary.problems {
        eprintln!("warning: {p}");
    }
    Ok(Exit::Pass)
}
