//! `stateval recording lint [PATH…] [--pipeline P]`: what is wrong with recordings, by
//! file and line — a secret written into one (each kind by name: `holds a secret: GitHub
//! token`, see `stateval::secrets`), responses no run ever reaches, and request
//! digests that no longer match what the agent sends today (found by replaying every
//! case that uses the recording). Judge recordings are linted too: a secret in a line,
//! and votes no run asks for any more (the rubric, the judged answer or the profile
//! changed since they were recorded), found by replaying the cases that ask a judge.
//! Exit 0 clean, 1 with findings, 2 on invalid input.
//!
//! A recording made before a `normalize` rule was added to its agent's profile still
//! replays (its stored requests are normalised again, `replay::digest::renormalized`),
//! but lint names each such line as stale; `--fix` rewrites the stored requests and
//! their digests under today's rules, each file replaced whole (`stateval::atomic`),
//! then lints the result. Lines whose stored request no longer digests to its hash
//! (edited by hand) are left as they are: they are not the agent's, and still diverge.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::dataset::RecordingRef;
use stateval::dataset::expect::Assertion;
use stateval::event::Kind;
use stateval::pipeline::OnDivergence;
use stateval::runner::{Plan, Selection, log_assertions};
use stateval::secrets::{Scrubber, SecretKind};

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
    /// Rewrite stale request digests (and the stored requests) in place under the
    /// agents' normalize rules of today, then lint.
    #[arg(long)]
    fix: bool,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let Sub::Lint(args) = args.command;
    let mut plan = Plan::load(&args.pipeline, &Selection::default())?;
    let stale = stale_lines(&plan, &args.paths)?;
    let mut findings: BTreeSet<(String, usize, String)> = BTreeSet::new();
    if args.fix {
        let mut lines = 0;
        for file in stale.iter().filter(|f| !f.changes.is_empty()) {
            stateval::atomic::replace(&file.path, file.fixed.as_bytes())
                .map_err(|e| CliError::invalid(format!("{}: cannot rewrite: {e}", file.display)))?;
            for change in &file.changes {
                super::out(format!(
                    "{}:{}: rewritten under [agents.{}]'s normalize rules: {} -> {}",
                    file.display, change.line, file.agent, change.from, change.to
                ));
            }
            lines += file.changes.len();
        }
        super::out(format!(
            "recording lint --fix: {lines} line(s) rewritten in {} file(s)",
            stale.iter().filter(|f| !f.changes.is_empty()).count()
        ));
        // the plan validated the files as they were: read them again
        plan = Plan::load(&args.pipeline, &Selection::default())?;
    } else {
        for file in &stale {
            for change in &file.changes {
                findings.insert((
                    file.display.clone(),
                    change.line,
                    format!(
                        "recorded before [agents.{}]'s normalize rules of today (its request normalises again to \
                         {}); replay still matches it, `stateval recording lint --fix {}` rewrites it",
                        file.agent, change.to, file.display
                    ),
                ));
            }
        }
    }
    // replays run to their end so that every stale digest is seen, not only the first
    plan.pipeline.replay.on_divergence = OnDivergence::Warn;
    // each file named is linted or said why not, and the rest are still linted: a glob
    // over every recording names files other pipelines use (by the path as given)
    let mut not_linted: Vec<String> = Vec::new();
    let mut wanted: BTreeMap<PathBuf, String> = BTreeMap::new();
    for path in &args.paths {
        if path.is_file() {
            wanted.entry(canonical(path)).or_insert_with(|| path.display().to_string());
        } else {
            not_linted.push(format!("{}: no such recording file", path.display()));
        }
    }
    if wanted.is_empty() && !not_linted.is_empty() {
        return Err(CliError::invalid(not_linted.join("\n")));
    }
    let mut checked: BTreeSet<PathBuf> = BTreeSet::new();
    // judge recordings to lint (canonical path → as shown), and the keys runs ask
    let judge_files: BTreeMap<PathBuf, String> = plan
        .pipeline
        .judges
        .values()
        .map(|j| plan.pipeline.resolve(&j.recordings))
        .map(|full| (canonical(&full), plan.pipeline.display(&full)))
        .filter(|(path, _)| wanted.is_empty() || wanted.contains_key(path))
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
                RecordingRef::File { path, display, .. }
                    if wanted.is_empty() || wanted.contains_key(&canonical(path)) =>
                {
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
            for event in events.iter().filter(|e| e.kind == Kind::JudgeCalled) {
                let (hash, sample) = (event.data.member("request_hash"), event.data.member("sample"));
                if let (Some(hash), Some(sample)) = (hash.as_str(), sample.as_u64()) {
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
                let position = event.data.member("position").as_u64().unwrap_or(0) as usize;
                let number = lines.get(position).map_or(0, |(n, _)| *n);
                let pointers: Vec<String> = event
                    .data
                    .member("pointers")
                    .items()
                    .iter()
                    .filter_map(|p| p.as_str().map(Cow::into_owned))
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
    for (path, shown) in &wanted {
        if !checked.contains(path) {
            not_linted.push(format!(
                "{shown}: no case of {} uses this recording (lint it with --pipeline naming the pipeline that does)",
                args.pipeline.display()
            ));
        }
    }
    for (file, line, message) in &findings {
        super::out(format!("{file}:{line}: {message}"));
    }
    for why in &not_linted {
        super::err(format!("error: {why}"));
    }
    let skipped =
        if not_linted.is_empty() { String::new() } else { format!(", {} file(s) not linted", not_linted.len()) };
    super::out(format!("recording lint: {} file(s), {} finding(s){skipped}", checked.len(), findings.len()));
    // a file named that could not be linted is invalid input, whatever the others found
    Ok(if !not_linted.is_empty() {
        Exit::Invalid
    } else if findings.is_empty() {
        Exit::Pass
    } else {
        Exit::Fail
    })
}

/// A line holding a secret, by kind: `holds a secret: GitHub token`.
fn secret_finding(kind: SecretKind) -> String {
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

/// One recording file under the normalize rules of the agent whose cases replay it.
struct Renormalized {
    path: PathBuf,
    display: String,
    agent: String,
    /// The file with every stale line rewritten (the same bytes when none is).
    fixed: String,
    changes: Vec<Change>,
}

/// A line whose stored request normalises again to another digest.
#[derive(Debug, PartialEq)]
struct Change {
    line: usize,
    from: String,
    to: String,
}

/// Every recording file a case of `plan` names (only `wanted` ones, when given) whose
/// agent has normalize rules, normalised again under them. A file two agents replay
/// under rules that would rewrite it differently cannot be fixed for both: an error.
fn stale_lines(plan: &Plan, wanted: &[PathBuf]) -> Result<Vec<Renormalized>, CliError> {
    let wanted: BTreeSet<PathBuf> = wanted.iter().map(|p| canonical(p)).collect();
    let mut files: BTreeMap<PathBuf, Renormalized> = BTreeMap::new();
    for index in 0..plan.cases.len() {
        let case = plan.case(index)?;
        let Some(profile) = plan.pipeline.agents.get(&case.agent) else { continue };
        if profile.normalize.is_empty() {
            continue;
        }
        let rules = stateval::external::neutral::Rule::compile(&profile.normalize).map_err(CliError::invalid)?;
        let scrubber = Scrubber::new(&profile.scrub);
        for reference in &case.recordings {
            let RecordingRef::File { path, display, .. } = reference else { continue };
            let key = canonical(path);
            if !wanted.is_empty() && !wanted.contains(&key) {
                continue;
            }
            let text = std::fs::read_to_string(path).map_err(|e| CliError::invalid(format!("{display}: {e}")))?;
            let (fixed, changes) =
                renormalize_text(&text, &rules, &scrubber).map_err(|e| CliError::invalid(format!("{display}:{e}")))?;
            match files.get(&key) {
                Some(seen) if seen.fixed != fixed => {
                    return Err(CliError::invalid(format!(
                        "{display}: replayed by agents {} and {}, whose normalize rules would rewrite it differently; \
                         give each agent its own recording",
                        seen.agent, case.agent
                    )));
                }
                Some(_) => {}
                None => {
                    let file = Renormalized {
                        path: path.clone(),
                        display: display.clone(),
                        agent: case.agent.clone(),
                        fixed,
                        changes,
                    };
                    files.insert(key, file);
                }
            }
        }
    }
    Ok(files.into_values().collect())
}

/// `text` (a recording) with each line whose stored request, unedited since it was
/// recorded, normalises under `rules` to another digest rewritten: the normalised
/// request and its digest. Other lines keep their bytes. Errors are `line: message`.
fn renormalize_text(
    text: &str,
    rules: &[stateval::external::neutral::Rule],
    scrubber: &Scrubber,
) -> Result<(String, Vec<Change>), String> {
    use serde_json::Value;
    use stateval::canon::Digest;
    use stateval::replay::digest;
    let mut out = String::with_capacity(text.len());
    let mut changes = Vec::new();
    for (i, piece) in text.split_inclusive('\n').enumerate() {
        let body = piece.trim_end_matches(['\n', '\r']);
        let ending = &piece[body.len()..];
        let parsed = if body.trim().is_empty() { None } else { serde_json::from_str::<Value>(body).ok() };
        let Some(mut line) = parsed else {
            out.push_str(piece);
            continue;
        };
        let hash = line.get("request_hash").and_then(Value::as_str).and_then(|h| h.parse::<Digest>().ok());
        let (Some(hash), Some(request)) = (hash, line.get("request").filter(|r| r.is_object())) else {
            out.push_str(piece);
            continue;
        };
        let unedited = digest::of(request).is_ok_and(|h| h == hash) || digest::legacy(request).is_ok_and(|h| h == hash);
        let mut again = request.clone();
        stateval::external::neutral::normalize(&mut again, rules);
        scrubber.value(&mut again);
        let to = digest::of(&again).map_err(|e| format!("{}: the normalised request has no digest: {e}", i + 1))?;
        if !unedited || to == hash {
            out.push_str(piece);
            continue;
        }
        line["request"] = again;
        line["request_hash"] = Value::String(to.to_string());
        out.push_str(&line.to_string());
        out.push_str(ending);
        changes.push(Change { line: i + 1, from: hash.to_string(), to: to.to_string() });
    }
    Ok((out, changes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stateval::external::neutral::{self, Rule};
    use stateval::pipeline::NormalizeRule;

    fn date_rule() -> Vec<Rule> {
        Rule::compile(&[NormalizeRule {
            path: "/system".into(),
            drop: false,
            regex: Some(r"\d{4}-\d{2}-\d{2}".into()),
            replace: Some("<date>".into()),
        }])
        .unwrap()
    }

    fn line(request: &serde_json::Value) -> String {
        let hash = neutral::digest(request).unwrap().to_string();
        json!({"request": request, "request_hash": hash, "response": {"content": "hi"}}).to_string()
    }

    #[test]
    fn a_stale_line_is_rewritten_once_and_other_lines_keep_their_bytes() {
        let dated = json!({"system": "Today is 2026-11-27.", "messages": []});
        let edited = {
            let mut l: serde_json::Value = serde_json::from_str(&line(&dated)).unwrap();
            l["request"]["system"] = json!("Today is 2026-11-28, edited.");
            l.to_string()
        };
        let plain = r#"{"response":{"content":"no request"}}"#;
        let text = format!("{}\n\n{plain}\r\n{edited}\n", line(&dated));
        let (fixed, changes) = renormalize_text(&text, &date_rule(), &Scrubber::default()).unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].line, 1);
        let lines: Vec<&str> = fixed.split('\n').collect();
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        let normalised = json!({"system": "Today is <date>.", "messages": []});
        assert_eq!(first["request"], normalised);
        assert_eq!(first["request_hash"], neutral::digest(&normalised).unwrap().to_string());
        // the blank line, the line without a request and the edited line are as they were
        assert_eq!(&fixed[lines[0].len()..], &text[line(&dated).len()..]);
        // a second pass finds nothing to do
        let (again, none) = renormalize_text(&fixed, &date_rule(), &Scrubber::default()).unwrap();
        assert!(none.is_empty());
        assert_eq!(again, fixed);
    }
}
