//! `stateval mcp-stdio`: the fixture tools as an MCP server on stdin/stdout, for agents
//! that only spawn MCP servers. It runs inside an agent that `stateval run` started and
//! serves that case run's tools (from `STATEVAL_TOOLS_URL` in its environment).

use super::{CliError, Exit};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<Exit, CliError> {
    stateval::external::mcp::serve_stdio().map_err(CliError::invalid)?;
    Ok(Exit::Pass)
}
