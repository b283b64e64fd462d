//! `stateval record --judge`: fill judge recordings from the live judge model.
//!
//! The selected cases are replayed from their recordings with the same plan and the
//! same grading as `stateval run`, so each judge request is rendered exactly as a run
//! renders it and keyed the same (request digest + sample index). A sample the judge
//! recording lacks (every sample asked, with `--force`) goes to the upstream the judge
//! profile names: OpenAI Chat Completions (the default) or Anthropic Messages
//! (`upstream = "anthropic"`). Nothing is written unless every replay finished and every
//! sample came back as an answer the recording can hold; then each judge recording is
//! rewritten whole — its old lines kept byte for byte, the new ones after them — and
//! loaded as `run` will load it before it replaces the old file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::super::{CliError, Exit};
use stateval::external::upstream::{Provider, Upstream};
use stateval::pipeline::Pipeline;
use stateval::pipeline::judges::JudgeUpstream;
use stateval::replay::judge::{Ask, Asked, JudgeBook};
use stateval::runner::{Plan, Selection, log_assertions};

pub(super) fn record(args: &super::Args, only: Option<Provider>) -> Result<Exit, CliError> {
    let pipeline = Pipeline::load(&args.pipeline).map_err(|e| CliError::invalid(e.to_string()))?;
    if pipeline.judges.is_empty() {
        return Err(CliError::invalid(format!(
            "{} defines no [judges.NAME]: there is no judge to record",
            args.pipeline.display()
        )));
    }
    // a judge recording may not exist yet: an empty one is a judge with no answers
    let placeholders = placeholders(&pipeline)?;
    let filter = match &args.case {
        Some(id) => Some(glob::Pattern::new(&glob::Pattern::escape(id)).map_err(|e| CliError::invalid(e.to_string()))?),
        None => None,
    };
    let mut plan = Plan::load(&args.pipeline, &Selection { filter, tags: Vec::new() })?;
    if let (Some(id), true) = (&args.case, plan.cases.is_empty()) {
        return Err(CliError::invalid(format!("no case {id:?} in {}", args.pipeline.display())));
    }
    let books = filled_books(&plan, Arc::new(Upstream::new(only, args.upstream_url.clone())), args.force)?;
    plan.judges = plan
        .pipeline
        .judges
        .iter()
        .filter_map(|(name, profile)| {
            let full = plan.pipeline.resolve(&profile.recordings);
            books.get(&full).map(|book| (name.clone(), book.clone()))
        })
        .collect();

    let mut replayed = 0;
    for index in 0..plan.cases.len() {
        let case = plan.case(index)?;
        // only what asks a judge is graded: custom graders have nothing to record
        let assertions: Vec<_> = log_assertions(&case).into_iter().filter(|a| a.matcher.uses_judge()).collect();
        if assertions.is_empty() {
            continue;
        }
        for (k, reference) in case.recordings.iter().enumerate() {
            let recording = reference.load().map_err(CliError::invalid)?;
            let run = plan
                .replay(&case, k, &recording, Box::new(Vec::<u8>::new()), None, &assertions)
                .map_err(CliError::from)?;
            let failures: Vec<String> = run.summary.error.into_iter().chain(run.grading_errors).collect();
            if !failures.is_empty() {
                return Err(CliError {
                    exit: Exit::Fail,
                    message: format!("run {k} of {:?}: {}; no judge answer written", case.id, failures.join("; ")),
                });
            }
            replayed += 1;
        }
    }
    if replayed == 0 {
        return Err(CliError::invalid("no selected case asks a judge"));
    }

    let mut written = Vec::new();
    for (path, book) in &books {
        let shown = plan.pipeline.display(path);
        let fresh = book.fresh().len();
        if fresh == 0 {
            super::super::out(format!("{shown}: every judge sample asked is recorded already"));
            continue;
        }
        let (text, kept, replaced) = book.merged().map_err(CliError::internal)?;
        let check = |tmp: &std::path::Path| JudgeBook::load(tmp, &shown).map(|_| ()).map_err(|e| e.to_string());
        super::replace_file(path, &text, check).map_err(|e| CliError::internal(format!("{shown}: {e}")))?;
        written.push(path.clone());
        super::super::out(format!("recorded {fresh} judge answer(s) into {shown} ({kept} kept, {replaced} replaced)"));
    }
    placeholders.keep(&written);
    Ok(Exit::Pass)
}

/// Empty judge recordings for the profiles whose file does not exist yet.
pub(super) fn placeholders(pipeline: &Pipeline) -> Result<super::Placeholders, CliError> {
    let mut created = Vec::new();
    for profile in pipeline.judges.values() {
        let full = pipeline.resolve(&profile.recordings);
        if full.exists() || created.contains(&full) {
            continue;
        }
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).map_err(|e| CliError::invalid(format!("{}: {e}", dir.display())))?;
        }
        std::fs::write(&full, b"").map_err(|e| CliError::invalid(format!("{}: {e}", full.display())))?;
        created.push(full);
    }
    Ok(super::Placeholders { named: Vec::new(), created })
}

/// One judge recording per file, validated as `run` validates it and filled by the live
/// judge; profiles sharing a file must ask through the same API.
fn filled_books(
    plan: &Plan,
    upstream: Arc<Upstream>,
    force: bool,
) -> Result<BTreeMap<PathBuf, Arc<JudgeBook>>, CliError> {
    let mut books: BTreeMap<PathBuf, (JudgeUpstream, Arc<JudgeBook>)> = BTreeMap::new();
    for (name, profile) in &plan.pipeline.judges {
        let full = plan.pipeline.resolve(&profile.recordings);
        let api = profile.upstream.unwrap_or(JudgeUpstream::Openai);
        if let Some((other, _)) = books.get(&full) {
            if *other != api {
                return Err(CliError::invalid(format!(
                    "judges.{name}: shares {} with a profile that asks through another upstream",
                    plan.pipeline.display(&full)
                )));
            }
            continue;
        }
        let book =
            JudgeBook::load(&full, &plan.pipeline.display(&full)).map_err(|e| CliError::invalid(e.to_string()))?;
        let upstream = upstream.clone();
        let ask: Ask = Box::new(move |request, _sample| {
            let fetched = upstream.ask_judge(api, request)?;
            Ok(Asked { content: fetched.content, usage: fetched.usage, latency_ms: fetched.latency_ms })
        });
        books.insert(full, (api, Arc::new(book.filled_by(ask, force))));
    }
    Ok(books.into_iter().map(|(path, (_, book))| (path, book)).collect())
}
