//! `stateval plan [PIPELINE] -o plan.json`: validate every input once and list the
//! units of work (case × recorded run), each with its unit id.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::runner::shard::PlanFile;
use stateval::runner::{Plan, Selection};

#[derive(clap::Args)]
pub struct Args {
    /// Pipeline definition.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// Where to write the plan (JSON).
    #[arg(short, long, default_value = "plan.json")]
    out: PathBuf,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let plan = Plan::load(&args.pipeline, &Selection::default())?;
    let file = PlanFile::of(&plan);
    let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| CliError::internal(e.to_string()))?;
    bytes.push(b'\n');
    stateval::atomic::replace(&args.out, &bytes)
        .map_err(|e| CliError::invalid(format!("{}: {e}", args.out.display())))?;
    super::out(format!(
        "plan {} ({}): {} cases, {} units → {}",
        file.plan,
        file.run_id,
        file.cases,
        file.units.len(),
        args.out.display()
    ));
    Ok(Exit::Pass)
}
