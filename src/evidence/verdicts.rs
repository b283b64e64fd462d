//! The run's verdict against its manifest and its logs.
//!
//! The manifest lists every file a verdict is read from with its size and digest
//! ([`super::manifest::FileEntry`]), so an edited `cases.jsonl` or `suite.json` no
//! longer verifies under a genuine root or signature. Beyond the digests, what can be
//! derived again from the logs and the other files is derived and compared, so that a
//! run whose files disagree with each other — a bug, or a forger who also rewrote the
//! manifest and holds no key — is named where they disagree:
//!
//! - every case outcome's run names a log the manifest lists, with its head and event
//!   count, and the status its log's `run_completed` carries;
//! - no log is left without an outcome;
//! - a run that passed completed, with no error and every check passed; a case passed
//!   exactly when its runs and its metric blocks did;
//! - `verdicts.jsonl` says what `cases.jsonl` says, run by run;
//! - `suite.json`'s verdict is the manifest's, and for an unsharded run it is "every
//!   gate passed", with the case counts of the `default` and tag gates counted again.
//!
//! What cannot be derived from the run directory alone — whether a check's matcher
//! holds on its log, whether a gate's counts meet its bound — would take the pipeline
//! and the datasets; the signature and the archived root hold those, and a rerun of
//! the same inputs gives the same root.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::check::Finding;
use super::manifest::{FileEntry, RunManifest, VERDICT_FILES};
use crate::outcome::{CASES_FILE, Cases, SUITE_FILE, SuiteHeader};

/// The verdict files in `dir` against the manifest's entries: each listed file is there
/// with its size and digest, and no verdict file is there unlisted.
pub fn check_files(dir: &Path, manifest: &RunManifest) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut fail = |name: &str, problem: String| {
        findings.push(Finding { subject: dir.join(name), line: None, problem });
    };
    for listed in &manifest.files {
        if !VERDICT_FILES.contains(&listed.path.as_str()) {
            fail(super::manifest::MANIFEST_FILE, format!("lists \"{}\", which is not a verdict file", listed.path));
            continue;
        }
        match FileEntry::of(dir, &listed.path) {
            Ok(found) if found == *listed => {}
            Ok(found) => fail(
                &listed.path,
                format!(
                    "edited after the run: {} bytes with digest {}, the manifest lists {} bytes with digest {}",
                    found.bytes, found.digest, listed.bytes, listed.digest
                ),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fail(&listed.path, "missing: the manifest lists it".into())
            }
            Err(e) => fail(&listed.path, e.to_string()),
        }
    }
    for name in VERDICT_FILES {
        if manifest.file(name).is_none() && dir.join(name).exists() {
            fail(name, "not in the run's manifest (written after the run)".into());
        }
    }
    findings
}

/// One verified log as the cross-check needs it.
#[derive(Debug, Clone)]
pub struct LogFacts {
    pub head: Option<crate::canon::Digest>,
    pub events: u64,
    /// `run_completed.status`, when the log has one.
    pub status: Option<String>,
}

/// The verdict files against each other and against the logs (`logs` by manifest path,
/// only logs that verified). Call it once [`check_files`] found nothing.
pub fn cross_check(dir: &Path, manifest: &RunManifest, logs: &HashMap<String, LogFacts>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let cases_path = dir.join(CASES_FILE);
    let mut at = |subject: &Path, line: Option<usize>, problem: String| {
        findings.push(Finding { subject: subject.to_path_buf(), line, problem });
    };
    if manifest.file(CASES_FILE).is_none() {
        at(&dir.join(super::manifest::MANIFEST_FILE), None, format!("lists no {CASES_FILE}: no verdict to check"));
        return findings;
    }
    let listed: BTreeMap<&str, &super::manifest::LogEntry> =
        manifest.logs.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    // (case, k) → (passed, status), for verdicts.jsonl
    let mut runs: BTreeMap<(String, usize), (bool, String)> = BTreeMap::new();
    let mut tags: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut scorecard = crate::outcome::Scorecard::default();
    let (mut total, mut passed_cases) = (0usize, 0usize);
    let cases = match Cases::from_file(&cases_path) {
        Ok(cases) => cases,
        Err(e) => {
            at(&cases_path, None, e.to_string());
            return findings;
        }
    };
    for (i, case) in cases.iter().enumerate() {
        let line = Some(i + 1);
        let case = match case {
            Ok(case) => case,
            Err(e) => {
                at(&cases_path, line, e.to_string());
                return findings;
            }
        };
        total += 1;
        passed_cases += usize::from(case.passed);
        for tag in case.tags.iter().collect::<BTreeSet<_>>() {
            let count = tags.entry(tag.clone()).or_default();
            count.0 += 1;
            count.1 += usize::from(case.passed);
        }
        for r in &case.runs {
            let rel = format!("{}/{}.jsonl", case.id, r.index);
            let name = format!("case {} run {}", case.id, r.index);
            match (listed.get(rel.as_str()), logs.get(&rel)) {
                (None, _) => at(&cases_path, line, format!("{name}: its log {rel} is not in the manifest")),
                (Some(_), None) => {} // the log itself did not verify: named already
                (Some(entry), Some(log)) => {
                    let head = r.head.as_deref().and_then(|h| h.parse().ok());
                    if head != entry.head || r.events != entry.events {
                        at(&cases_path, line, format!("{name}: head and event count differ from its log's"));
                    }
                    if log.status.as_deref() != Some(r.status.as_str()) {
                        at(
                            &cases_path,
                            line,
                            format!(
                                "{name}: status \"{}\", but its log ends with status {}",
                                r.status,
                                log.status.as_deref().map_or("none".into(), |s| format!("\"{s}\""))
                            ),
                        );
                    }
                }
            }
            seen.insert(rel);
            let holds = r.status == "completed" && r.error.is_none() && r.checks.iter().all(|c| c.passed);
            if r.passed && !holds {
                at(&cases_path, line, format!("{name}: passed, but its status, error or checks say it failed"));
            }
            runs.insert((case.id.clone(), r.index), (r.passed, r.status.clone()));
        }
        if let Some(score) = &case.score {
            let derived = crate::outcome::score(score.role, &case.runs, &case.blocks, case.passed);
            if *score != derived {
                at(&cases_path, line, format!("case {}: its score differs from what its runs say", case.id));
            }
            scorecard.add(&case.tags, score);
        }
        let derived = case.runs.iter().all(|r| r.passed) && case.blocks.iter().all(|c| c.passed);
        if case.passed != derived {
            at(
                &cases_path,
                line,
                format!("case {}: passed is {}, its runs and blocks say {derived}", case.id, case.passed),
            );
        }
    }
    for entry in &manifest.logs {
        if !seen.contains(&entry.path) {
            at(&cases_path, None, format!("no case outcome for the log {}", entry.path));
        }
    }
    if manifest.file("verdicts.jsonl").is_some() {
        check_verdict_lines(&dir.join("verdicts.jsonl"), &manifest.run_id, &runs, &mut at);
    }
    if manifest.file(SUITE_FILE).is_some() {
        let shard = manifest.file("shard.json").is_some();
        let counted = Counted { total, passed: passed_cases, tags, scorecard };
        check_suite(&dir.join(SUITE_FILE), manifest, shard, &counted, &mut at);
    }
    findings
}

fn check_verdict_lines(
    path: &Path,
    run_id: &str,
    runs: &BTreeMap<(String, usize), (bool, String)>,
    at: &mut impl FnMut(&Path, Option<usize>, String),
) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return at(path, None, e.to_string()),
    };
    let mut count = 0usize;
    for (i, line) in text.lines().enumerate() {
        count += 1;
        let v: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return at(path, Some(i + 1), format!("not a verdict record: {e}")),
        };
        let case = v["case"].as_str().unwrap_or_default().to_string();
        let k = v["k"].as_u64().and_then(|k| usize::try_from(k).ok()).unwrap_or(usize::MAX);
        let said = (v["passed"].as_bool(), v["status"].as_str(), v["run_id"].as_str());
        match runs.get(&(case.clone(), k)) {
            Some((passed, status)) if said == (Some(*passed), Some(status.as_str()), Some(run_id)) => {}
            Some(_) => at(path, Some(i + 1), format!("case {case} run {k}: differs from {CASES_FILE}")),
            None => at(path, Some(i + 1), format!("case {case} run {k}: not in {CASES_FILE}")),
        }
    }
    if count != runs.len() {
        at(path, None, format!("{count} verdicts, {CASES_FILE} holds {} runs", runs.len()));
    }
}

/// What `cases.jsonl` counts, for `suite.json` to agree with.
struct Counted {
    total: usize,
    passed: usize,
    tags: BTreeMap<String, (usize, usize)>,
    scorecard: crate::outcome::Scorecard,
}

fn check_suite(
    path: &Path,
    manifest: &RunManifest,
    shard: bool,
    counted: &Counted,
    at: &mut impl FnMut(&Path, Option<usize>, String),
) {
    let Counted { total, passed, tags, scorecard } = counted;
    let (total, passed) = (*total, *passed);
    let header: SuiteHeader = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| format!("not a suite record: {e}")))
    {
        Ok(header) => header,
        Err(e) => return at(path, None, e),
    };
    if header.passed != manifest.passed {
        at(path, None, format!("passed is {}, the manifest's verdict is {}", header.passed, manifest.passed));
    }
    if header.root.is_some() {
        at(path, None, "carries a root: a run's root is its manifest's digest, never a field".into());
    }
    let recounted = (!scorecard.is_empty()).then_some(scorecard);
    if header.scorecard.as_ref() != recounted {
        at(path, None, format!("its security scorecard differs from what {CASES_FILE} counts"));
    }
    if shard {
        if manifest.passed != (passed == total) {
            at(path, None, format!("a shard with {passed} of {total} cases passed has verdict {}", manifest.passed));
        }
        return;
    }
    let all = header.gates.iter().all(|g| g.passed);
    if header.passed != all {
        at(path, None, format!("passed is {}, its gates say {all}", header.passed));
    }
    for gate in &header.gates {
        let counted = if gate.scope == crate::outcome::DEFAULT_SCOPE {
            (total, passed)
        } else if gate.scope.starts_with("reliability:") {
            continue; // a card's gate counts metrics, not cases
        } else {
            tags.get(&gate.scope).copied().unwrap_or((0, 0))
        };
        if (gate.cases, gate.passed_cases) != counted {
            at(
                path,
                None,
                format!(
                    "gate {}: {}/{} cases passed, {CASES_FILE} counts {}/{}",
                    gate.scope, gate.passed_cases, gate.cases, counted.1, counted.0
                ),
            );
        }
    }
}
