//! `stateval schema NAME`: print a JSON Schema.

use super::{CliError, Exit};
use stateval::schemas;

#[derive(clap::Args)]
pub struct Args {
    /// One of: case, recording, judge-recording, tools, pipeline, event.
    name: String,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let text = schemas::text(&args.name).ok_or_else(|| {
        CliError::invalid(format!("unknown schema \"{}\" (known: {})", args.name, schemas::NAMES.join(", ")))
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| CliError::internal(e.to_string()))?;
    super::out(serde_json::to_string_pretty(&value).map_err(|e| CliError::internal(e.to_string()))?);
    Ok(Exit::Pass)
}
