//! `stateval recording lint [PATH…] [--pipeline P]`: what is wrong with recordings, by
//! file and line — a secret written into one (each kind by name: `holds a secret: GitHub
//! token`, see `stateval::secrets`), responses no run ever reaches, and request
//! digests that no longer match what the agent sends today (found by replaying every
//! case that uses the recording). Judge recordings are linted too: a secret in a line,
//! and votes no run asks for any more (the rubric, the judged answer or the profile
//! changed since they were recorded), found by replaying the cases that ask a judge.
//! Exit 0 clean, 1 with findings, 2 on invalid input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::dataset::RecordingRef;
use stateval::event::Kind as EventKind;
use stateval::grade::Assertion;
use stateval::pipeline::OnDivergence;
use stateval::runner::{Plan, Selection, log_assertions};
use stateval::secrets::{Kind, Scrubber};

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
    // judge recordings to lint (canonical path → as shown), and the keys runs ask
    let judge_files: BTreeMap<PathBuf, String> = plan
        .pipeline
        .judges
        .values()
        .map(|j| plan.pipeline.resolve(&j.recordings))
        .map(|full| (canonical(&full), plan.pipeline.display(&full)))
        .filter(|(path, _)| wanted.is_empty() || wanted.contains(path))
        .collect();
    let mut asked: BTreeSet<(String, u64)> = BTreeSet::new();
    for index in 0..plan.cases.len() {
        let case = plan.case(index)?;
        let scrubber = Scrubber::new(&plan.pipeline.agents[&case.agent].scrub);
        let judged: Vec<&Assertion> = if judge_files.is_empty() {
            Vec::new()
        } else {
            log_assertions(&case).into_iter().filter(|a| a.matcher.uses_judge()).collect()
        };
        for (k, reference) in case.recordings.iter().enumerate() {
            let file = match reference {
                RecordingRef::File { path, display, .. } if wanted.is_empty() || wanted.contains(&canonical(path)) => {
                    Some((path, display))
                }
                _ => None,
            };
            if file.is_none() && judged.is_empty() {
                continue;
            }
            // one replay serves both lints: the judges asked, and the agent's requests
            let recording = reference.load().map_err(CliError::invalid)?;
            let events = plan
                .replay(&case, k, &recording, Box::new(Vec::<u8>::new()), None, &judged)
                .map(|run| run.events)
                .map_err(CliError::from)?;
            for event in events.iter().filter(|e| e.kind == EventKind::JudgeCalled) {
                if let (Some(hash), Some(sample)) = (event.data["request_hash"].as_str(), event.data["sample"].as_u64())
                {
                    asked.insert((hash.to_string(), sample));
                }
            }
            let Some((path, display)) = file else { continue };
            let lines = data_lines(path).map_err(|e| CliError::invalid(format!("{display}: {e}")))?;
            if checked.insert(canonical(path)) {
                for (number, text) in &lines {
                    for kind in scrubber.kinds(text) {
                        findings.insert((display.clone(), *number, secret_finding(kind)));
                    }
                }
            }
            let used = events.iter().filter(|e| e.kind == EventKind::ModelCalled).count();
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
            for event in events.iter().filter(|e| e.kind == EventKind::ReplayDiverged) {
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
    for (path, display) in &judge_files {
        if !checked.insert(path.clone()) {
            continue;
        }
        let lines = data_lines(path).map_err(|e| CliError::invalid(format!("{display}: {e}")))?;
        for (number, text) in &lines {
            for kind in Scrubber::default().kinds(text) {
                findings.insert((display.clone(), *number, secret_finding(kind)));
            }
            let Ok(line) = serde_json::from_str::<serde_json::Value>(text) else { continue };
            let key =
                (line["request_hash"].as_str().unwrap_or_default().to_string(), line["sample"].as_u64().unwrap_or(0));
            if !asked.contains(&key) {
                findings.insert((
                    display.clone(),
                    *number,
                    format!(
                        "no run asks for this vote ({}#{}): the rubric, the judged value or the profile changed since it was recorded",
                        key.0, key.1
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

/// A line holding a secret, by kind: `holds a secret: GitHub token`.
fn secret_finding(kind: Kind) -> String {
    format!("holds a secret: {}", kind.name())
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
