//! `stateval recording lint [PATH…] [--pipeline P]`: what is wrong with recordings, by
//! file and line — a secret written into one, responses no run ever reaches, and request
//! digests that no longer match what the agent sends today (found by replaying every
//! case that uses the recording). Exit 0 clean, 1 with findings, 2 on invalid input.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::dataset::RecordingRef;
use stateval::event::Kind;
use stateval::external::scrub::Scrubber;
use stateval::pipeline::OnDivergence;
use stateval::runner::{Plan, Selection};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Secrets, unused responses and stale request digests, with file:line.
    Lint(LintArgs),
}

#[derive(clap::Args)]
struct LintArgs {
    /// Recording files to check (default: every recording file the pipeline's cases name).
    paths: Vec<PathBuf>,
    /// The pipeline whose cases replay the recordings.
    #[arg(long, default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let Sub::Lint(args) = args.command;
    let mut plan = Plan::load(&args.pipeline, &Selection::default())?;
    // replays run to their end so that every stale digest is seen, not only the first
    plan.pipeline.replay.on_divergence = OnDivergence::Warn;
    let wanted: BTreeSet<PathBuf> = args.paths.iter().map(|p| canonical(p)).collect();
    for path in &args.paths {
        if !path.is_file() {
            return Err(CliError::invalid(format!("{}: no such recording file", path.display())));
        }
    }
    let mut findings: BTreeSet<(String, usize, String)> = BTreeSet::new();
    let mut checked: BTreeSet<PathBuf> = BTreeSet::new();
    for index in 0..plan.cases.len() {
        let case = plan.case(index)?;
        let scrubber = Scrubber::new(&plan.pipeline.agents[&case.agent].scrub);
        for (k, reference) in case.recordings.iter().enumerate() {
            let RecordingRef::File { path, display, .. } = reference else { continue };
            if !wanted.is_empty() && !wanted.contains(&canonical(path)) {
                continue;
            }
            let lines = data_lines(path).map_err(|e| CliError::invalid(format!("{display}: {e}")))?;
            if checked.insert(canonical(path)) {
                for (number, text) in &lines {
                    if scrubber.text(text).is_some() {
                        findings.insert((display.clone(), *number, "holds a secret (an API key, token or JWT)".into()));
                    }
                }
            }
            let recording = reference.load().map_err(CliError::invalid)?;
            let events = plan
                .replay(&case, k, &recording, Box::new(Vec::<u8>::new()), None, &[])
                .map(|run| run.events)
                .map_err(|e| CliError::internal(e.to_string()))?;
            let used = events.iter().filter(|e| e.kind == Kind::ModelCalled).count();
            if let Some((number, _)) = lines.get(used) {
                findings.insert((
                    display.clone(),
                    *number,
                    format!(
                        "this and the {} response(s) after it are never used: run {k} of {} made {used} model call(s)",
                        lines.len() - used - 1,
                        case.id
                    ),
                ));
            }
            for event in events.iter().filter(|e| e.kind == Kind::ReplayDiverged) {
                let position = event.data["position"].as_u64().unwrap_or(0) as usize;
                let number = lines.get(position).map_or(0, |(n, _)| *n);
                let pointers: Vec<&str> = event.data["pointers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(serde_json::Value::as_str)
                    .collect();
                let at =
                    if pointers.is_empty() { String::new() } else { format!(" (differs at {})", pointers.join(", ")) };
                findings.insert((
                    display.clone(),
                    number,
                    format!(
                        "the request digest no longer matches what {} sends in run {k} of {}{at}",
                        case.agent, case.id
                    ),
                ));
            }
        }
    }
    for path in &wanted {
        if !checked.contains(path) {
            return Err(CliError::invalid(format!(
                "{}: no case of {} uses this recording",
                path.display(),
                args.pipeline.display()
            )));
        }
    }
    for (file, line, message) in &findings {
        super::out(format!("{file}:{line}: {message}"));
    }
    super::out(format!("recording lint: {} file(s), {} finding(s)", checked.len(), findings.len()));
    Ok(if findings.is_empty() { Exit::Pass } else { Exit::Fail })
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The non-blank lines of a recording with their 1-based numbers: the n-th is the
/// response at position n.
fn data_lines(path: &Path) -> std::io::Result<Vec<(usize, String)>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, l)| (i + 1, l.to_string())).collect())
}
