//! `stateval diff GOLDEN ACTUAL`: compare two event logs structurally.
//!
//! Both logs are verified first. The output names the first divergent event (seq,
//! turn, kind) and classifies every difference (docs/design.md §8, `golden::diff`), as a
//! unified diff for people or, with `--format json`, the same findings for machines.
//! Exit 0 when the logs are identical, 1 when they differ, 2 when either cannot be
//! read or does not verify.

use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::event::reader::{ReadError, read_log};
use stateval::golden::{self, normalize::normalize_events, render};

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
    // each log is verified and normalised on its own core: that is most of the time
    let (golden, actual) = std::thread::scope(|s| {
        let golden = s.spawn(|| load(&args.golden, "golden"));
        let actual = load(&args.actual, "actual");
        (golden.join(), actual)
    });
    let golden = golden.map_err(|_| CliError::internal("reading the golden log panicked"))??;
    let actual = actual?;
    let d = golden::diff(&golden, &actual);
    let (g_label, a_label) = (args.golden.display().to_string(), args.actual.display().to_string());
    let g = render::Side { label: &g_label, events: &golden };
    let a = render::Side { label: &a_label, events: &actual };
    let text = match args.format {
        Format::Text => render::text(&d, &g, &a),
        Format::Json => render::json(&d, &g, &a).map_err(|e| CliError::internal(e.to_string()))?,
    };
    super::out(text.trim_end());
    Ok(if d.is_identical() { Exit::Pass } else { Exit::Fail })
}

/// A verified log in golden form.
fn load(path: &Path, role: &str) -> Result<Vec<stateval::event::Event>, CliError> {
    let verified = read_log(path).map_err(|e| match e {
        ReadError::Invalid { .. } => CliError::invalid(format!("{role} log does not verify: {e}")),
        ReadError::Io { .. } => CliError::invalid(format!("{role} log: {e}")),
    })?;
    normalize_events(verified.events).map_err(|e| CliError::invalid(format!("{}: {e}", path.display())))
}
