//! `stateval targets`: every assertion target with what it means.

use super::{CliError, Exit};
use stateval::extract::targets;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<Exit, CliError> {
    for line in targets::render().lines() {
        super::out(line);
    }
    Ok(Exit::Pass)
}
