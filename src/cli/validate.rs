//! `stateval validate [PATH...]`: check inputs without running anything.
//!
//! A `.toml` is a pipeline, validated with everything it references (datasets,
//! recordings, manifests). A `.json` is a tool manifest. A `.jsonl` is recognised by
//! its first line: an event log (verified), a recording, a judge recording, or a dataset (validated in
//! the context of `--pipeline`, which resolves agents and recording paths).

use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::dataset::Loader;
use stateval::dataset::recording::Recording;
use stateval::diag::InputError;
use stateval::event::reader::read_log;
use stateval::pipeline::Pipeline;
use stateval::pipeline::manifest::Manifest;
use stateval::replay::judge::JudgeBook;
use stateval::runner::{Plan, RunnerError, Selection};

#[derive(clap::Args)]
pub struct Args {
    /// Files to check (default: the default pipeline and everything it references).
    paths: Vec<PathBuf>,
    /// Pipeline that datasets are validated against.
    #[arg(long, default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let paths = if args.paths.is_empty() { vec![args.pipeline.clone()] } else { args.paths.clone() };
    let mut errors: Vec<String> = Vec::new();
    for path in &paths {
        match check(path, &args.pipeline) {
            Ok(summary) => super::out(format!("ok {}: {summary}", path.display())),
            Err(mut e) => errors.append(&mut e),
        }
    }
    if errors.is_empty() { Ok(Exit::Pass) } else { Err(CliError::invalid(errors.join("\n"))) }
}

fn check(path: &Path, pipeline: &Path) -> Result<String, Vec<String>> {
    let one = |e: InputError| vec![e.to_string()];
    if !path.is_file() {
        return Err(vec![format!("{}: no such file", path.display())]);
    }
    let shown = path.to_string_lossy().to_string();
    match path.extension().and_then(|e| e.to_str()) {
        Some("toml") => match Plan::load(path, &Selection::default()) {
            Ok(plan) => Ok(format!("pipeline \"{}\", {} cases", plan.pipeline.pipeline.name, plan.cases.len())),
            Err(RunnerError::Input(errors)) => Err(errors.iter().map(ToString::to_string).collect()),
            Err(e) => Err(vec![e.to_string()]),
        },
        Some("json") => Manifest::load(path, &shown)
            .map(|m| {
                let digest = m.digest.map(|d| d.to_string()).unwrap_or_default();
                format!("tool manifest, {} tools, digest {digest}", m.tools.len())
            })
            .map_err(one),
        Some("jsonl") => {
            let text = std::fs::read_to_string(path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
            let first = stateval::diag::strip_bom(&text).lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let probe: serde_json::Value = serde_json::from_str(first).unwrap_or_default();
            if probe.get("hash").is_some() && probe.get("seq").is_some() {
                read_log(path)
                    .map(|v| {
                        format!("event log, {} events{}", v.events.len(), if v.complete { "" } else { " (incomplete)" })
                    })
                    .map_err(|e| vec![e.to_string()])
            } else if probe.get("sample").is_some() && probe.get("request_hash").is_some() {
                JudgeBook::load(path, &shown).map(|b| format!("judge recording, {} answers", b.len())).map_err(one)
            } else if probe.get("response").is_some() {
                Recording::load(path, &shown)
                    .map(|r| format!("recording, {} responses", r.responses.len()))
                    .map_err(one)
            } else {
                let p = Pipeline::load(pipeline)
                    .map_err(|e| vec![format!("datasets are validated against a pipeline: {e}")])?;
                let mut loader = Loader::new(&p, stateval::metrics::block::check);
                loader.load_file(path);
                if loader.errors.is_empty() {
                    Ok(format!("dataset, {} cases", loader.cases.len()))
                } else {
                    Err(loader.errors.iter().map(ToString::to_string).collect())
                }
            }
        }
        _ => Err(vec![format!("{}: unknown kind of file (expected .toml, .json or .jsonl)", path.display())]),
    }
}
