//! `stateval diff GOLDEN ACTUAL`: compare two event logs structurally.
//!
//! Both logs are verified as they are read; nothing is printed unless both verify. The output names the first divergent event (seq,
//! turn, kind) and classifies every difference (docs/design.md §8, `golden::diff`), as a
//! unified diff for people or, with `--format json`, the same findings for machines.
//! Exit 0 when the logs are identical, 1 when they differ, 2 when either cannot be
//! read or does not verify.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::event::reader::ReadError;
use stateval::golden::render;
use stateval::golden::stream::{self, LogSide, StreamError};

#[derive(clap::Args)]
pub struct Args {
    /// The expected log (a golden, or any event log).
    golden: PathBuf,
    /// The log to compare with it.
    actual: PathBuf,
    /// Output: a unified diff (text) or the findings as JSON.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    // each log is verified and put in golden form on its own core as it streams, and
    // what the two share is compared as it arrives rather than kept (`golden::stream`)
    let streamed = stream::diff_files(&args.golden, &args.actual).map_err(|(role, e)| {
        let role = match role {
            LogSide::Golden => "golden",
            LogSide::Actual => "actual",
        };
        match e {
            StreamError::Read(e @ ReadError::Invalid { .. }) => {
                CliError::invalid(format!("{role} log does not verify: {e}"))
            }
            StreamError::Read(e @ ReadError::Io { .. }) => CliError::invalid(format!("{role} log: {e}")),
            e @ StreamError::Normalize { .. } => CliError::invalid(e.to_string()),
        }
    })?;
    let d = &streamed.diff;
    let (g_label, a_label) = (args.golden.display().to_string(), args.actual.display().to_string());
    let g = streamed.golden.side(&g_label);
    let a = streamed.actual.side(&a_label);
    let text = match args.format {
        Format::Text => render::text(d, &g, &a),
        Format::Json => render::json(d, &g, &a).map_err(|e| CliError::internal(e.to_string()))?,
    };
    super::out(text.trim_end());
    Ok(if d.is_identical() { Exit::Pass } else { Exit::Fail })
}
