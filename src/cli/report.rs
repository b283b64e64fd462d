//! `stateval report RUN_DIR --html OUT`: render reports again from a finished run.
//!
//! A run directory (`<store>/runs/<run-id>/`) keeps everything a report is made of:
//! `suite.json` (gates, extras, verdict), `cases.jsonl` (every case outcome) and the
//! logs. So the HTML page — or any other report — can be rendered later, on another
//! machine, from a directory CI kept as an artifact, without running anything again.
//! Goldens are looked up where the run's log paths say the project was; when they are
//! not there, the page shows what the golden check recorded. So are the agents' system
//! prompts (the project's `pipeline/*.toml` named like the run's pipeline): a prompt is
//! shown only when its profile's digest is the one the run recorded.
//!
//! The run is verified first, as `stateval verify RUN_DIR` would (every log, every
//! verdict file against the manifest, the files against each other): a report is never
//! rendered from a verdict the manifest does not anchor, and its root is the manifest's.
//! A run that verifies may still be a consistent forgery by whoever could write the
//! directory, so every report says who signed it: `unsigned`, `signed by <public key>`
//! (`manifest.sig` verifies with the key it names), or, with `--pubkey KEY.pub`,
//! `verified with <public key>` — and a run that key did not sign is refused.
//!
//! Exit 0 when the reports were written, 2 when RUN_DIR is not a finished run, does
//! not verify, or is not signed by `--pubkey`'s key; 3 when a report cannot be written.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::evidence::{CheckOptions, PublicKey, check_run, trust};
use stateval::outcome::SuiteOutcome;
use stateval::pipeline::reports::TapVersion;
use stateval::report::{self, Format, html};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("formats").required(true).multiple(true)))]
pub struct Args {
    /// A finished run's directory: `<store>/runs/<run-id>` (`.stateval/runs/r-…`).
    run_dir: PathBuf,
    /// Write the HTML report (one offline page) to this file.
    #[arg(long, value_name = "OUT", group = "formats")]
    html: Option<PathBuf>,
    /// Write the Markdown summary to this file.
    #[arg(long, value_name = "OUT", group = "formats")]
    markdown: Option<PathBuf>,
    /// Write the JSON report to this file.
    #[arg(long, value_name = "OUT", group = "formats")]
    json: Option<PathBuf>,
    /// Write the JUnit XML report to this file.
    #[arg(long, value_name = "OUT", group = "formats")]
    junit: Option<PathBuf>,
    /// Write the TAP 13 report to this file.
    #[arg(long, value_name = "OUT", group = "formats")]
    tap: Option<PathBuf>,
    /// The public key of the run's signer (`stateval keygen`): refuse a run it did not
    /// sign, and say `verified with` it in every report.
    #[arg(long, value_name = "FILE")]
    pubkey: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let dir = &args.run_dir;
    if !dir.is_dir() {
        return Err(CliError::invalid(format!(
            "{}: not a directory (a run directory is <store>/runs/<run-id>)",
            dir.display()
        )));
    }
    // a report is rendered only from what the run's manifest anchors: an edited verdict
    // file never reaches a report under the run's genuine root
    let pubkey =
        args.pubkey.as_deref().map(PublicKey::read).transpose().map_err(|e| CliError::invalid(e.to_string()))?;
    let check = check_run(dir, &CheckOptions { pubkey: pubkey.clone(), ..CheckOptions::default() });
    if let Some(finding) = check.findings.first() {
        return Err(CliError::invalid(format!(
            "{finding}\n{}: does not verify against its manifest; refusing to render a report from it \
             (`stateval verify {}` lists every finding)",
            dir.display(),
            dir.display()
        )));
    }
    let mut outcome = SuiteOutcome::read_run_dir(dir).map_err(|e| {
        CliError::invalid(format!("{e}: {} is not a finished run of this version of stateval", dir.display()))
    })?;
    outcome.root = check.root.map(|root| root.to_string());
    let root = check.root.ok_or_else(|| CliError::internal(format!("{}: verified without a root", dir.display())))?;
    let signature = match &pubkey {
        // check_run refused any run this key did not sign
        Some(key) => trust::verified_with(key),
        None => trust::describe(dir, root).map_err(CliError::invalid)?,
    };
    super::out(format!("signature: {signature}"));
    outcome.signature = Some(signature);
    let first = outcome.cases.iter().next().transpose().map_err(|e| CliError::invalid(e.to_string()))?;
    let sample = first.as_ref().and_then(|case| case.runs.first().map(|run| (case.as_ref(), run)));
    let mut logs = html::LogFiles::in_run_dir(dir, sample);
    logs.prompts = prompts_near(&logs.base, &outcome.pipeline);
    let outputs = [
        (Format::Json, &args.json),
        (Format::Junit, &args.junit),
        (Format::Tap(TapVersion::V13), &args.tap),
        (Format::Markdown, &args.markdown),
        (Format::Html, &args.html),
    ];
    for (format, path) in outputs {
        let Some(path) = path else { continue };
        report::write_report(path, format, &outcome, &logs).map_err(|e| CliError::internal(e.to_string()))?;
        super::out(format!("report: {}", path.display()));
    }
    Ok(Exit::Pass)
}

/// The system prompts of the pipeline named `name` among the project's
/// `pipeline/*.toml` under `base`, or none. Only a hint: the HTML report shows a prompt
/// only when its profile's digest matches the run's, so a pipeline edited since the run
/// (or another of the same name) shows nothing rather than something wrong.
fn prompts_near(base: &std::path::Path, name: &str) -> html::Prompts {
    let Ok(entries) = std::fs::read_dir(base.join("pipeline")) else {
        return html::Prompts::new();
    };
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|path| stateval::pipeline::Pipeline::load(path).ok())
        .find(|pipeline| pipeline.pipeline.name == name)
        .map(|pipeline| html::prompts(&pipeline.agents))
        .unwrap_or_default()
}
