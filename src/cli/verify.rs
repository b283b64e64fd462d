//! `stateval verify LOG...`: check canonical form and the hash chain of event logs.
//!
//! Exit 0 when every log verifies (a log cut short at a turn boundary, as a killed run
//! leaves it, verifies and is reported as incomplete), 1 when one does not (the first
//! bad event is named), 2 when a file cannot be read.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::event::reader::{ReadError, read_log};

#[derive(clap::Args)]
pub struct Args {
    /// Event log files (JSONL).
    #[arg(required = true)]
    logs: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let mut exit = Exit::Pass;
    for path in &args.logs {
        match read_log(path) {
            Ok(v) => {
                let head = v.head.map_or_else(|| "none".to_string(), |h| h.to_string());
                let state = if v.complete { "complete" } else { "incomplete: no run_completed" };
                super::out(format!("ok {}: {} events, head {head} ({state})", path.display(), v.events.len()));
            }
            Err(e @ ReadError::Invalid { .. }) => {
                eprintln!("FAILED {e}");
                exit = exit.max_with(Exit::Fail);
            }
            Err(e @ ReadError::Io { .. }) => {
                eprintln!("error: {e}");
                exit = exit.max_with(Exit::Invalid);
            }
        }
    }
    Ok(exit)
}

impl Exit {
    /// The more severe of two exits.
    pub fn max_with(self, other: Exit) -> Exit {
        if other as u8 > self as u8 { other } else { self }
    }
}
