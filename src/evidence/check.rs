//! `verify`'s checks: each log's chain, each log against the manifest, the manifest
//! against an archived root and, with a public key, against its signature.
//!
//! Logs are streamed (one line in memory at a time), so a check's memory does not grow
//! with the size of a log.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use super::manifest::{LogEntry, MANIFEST_FILE, ManifestError, RunManifest};
use super::signing::{PublicKey, SignatureFile};
use crate::canon::Digest;
use crate::event::Kind;
use crate::event::reader::{ReadError, stream_envelopes, stream_envelopes_whole_lines};
use crate::event::verify::Summary;

#[derive(Debug, Default, Clone)]
pub struct CheckOptions {
    /// The root an archived report printed; the manifest must hash to it.
    pub root: Option<Digest>,
    /// The manifest's signature must verify with this key.
    pub pubkey: Option<PublicKey>,
    /// Accept a run without a manifest and logs without `run_completed` (a killed run),
    /// checking their chains alone.
    pub allow_incomplete: bool,
}

/// One thing that does not hold, named by the file it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub subject: PathBuf,
    /// The 1-based line of the first bad event, when one line is to blame.
    pub line: Option<usize>,
    pub problem: String,
}

/// `path:line: problem`, or `path: problem`.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.subject.display(), self.problem),
            None => write!(f, "{}: {}", self.subject.display(), self.problem),
        }
    }
}

/// One log that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogCheck {
    pub path: PathBuf,
    pub summary: Summary,
    /// Bytes of a torn last line left out of the check: only for a log no manifest
    /// lists, checked with `--allow-incomplete` (a writer killed inside a `write`).
    pub torn_tail: u64,
    /// Byte offset of each `turn_started` line, seen on the way (the catalog's index).
    pub turn_offsets: Vec<u64>,
    /// `run_completed.status`, seen on the way (logs a manifest lists).
    pub status: Option<String>,
}

/// What checking a run directory (or some of its logs) found.
#[derive(Debug, Default)]
pub struct RunCheck {
    pub manifest: Option<RunManifest>,
    pub root: Option<Digest>,
    /// The key named in `manifest.sig`, and whether the signature was checked with the
    /// verifier's own key (`--pubkey`) and held.
    pub signed_by: Option<String>,
    pub signature_checked: bool,
    /// Logs that verified (their chain, and against the manifest when there is one).
    pub logs: Vec<LogCheck>,
    /// Everything that failed, in the order checked: the manifest first, then logs in
    /// manifest order, then logs the manifest does not list.
    pub findings: Vec<Finding>,
}

impl RunCheck {
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    fn fail(&mut self, subject: &Path, problem: impl Into<String>) {
        self.findings.push(Finding { subject: subject.to_path_buf(), line: None, problem: problem.into() });
    }
}

/// Check a whole run directory: its manifest, every listed log, and no log unlisted.
pub fn check_run(dir: &Path, options: &CheckOptions) -> RunCheck {
    check(dir, None, options)
}

/// Check one log file: against its run's manifest when it sits in a run directory that
/// has one, else its chain alone (which cannot see a lost tail or a re-chained edit).
pub fn check_log(path: &Path, options: &CheckOptions) -> RunCheck {
    if let Some((dir, rel)) = run_dir_of(path) {
        return check(&dir, Some(&rel), options);
    }
    let mut out = RunCheck::default();
    if options.root.is_some() || options.pubkey.is_some() {
        out.fail(path, "no run manifest beside this log (expected ../../manifest.json): --root and --pubkey need one");
    }
    chain_only(&mut out, path, options);
    out
}

/// A verified log against the entry its run's manifest lists for it, for a caller that
/// checks many logs of one run and reads the manifest once (`--reuse`): the log is
/// whole and has the listed event count and head. The error says why not.
pub fn against_entry(log: &crate::event::verify::Verified, entry: &LogEntry) -> Result<(), String> {
    let summary = Summary { events: log.events.len() as u64, head: log.head, complete: log.complete, bytes: 0 };
    if let Some((_, problem)) = against_manifest(&summary, entry.events, entry.head) {
        return Err(problem);
    }
    if !log.complete {
        return Err("incomplete: the log does not end with run_completed".into());
    }
    Ok(())
}

/// `<run dir>/<case>/<k>.jsonl` → (run dir, `<case>/<k>.jsonl`), when the run dir has
/// a manifest.
fn run_dir_of(path: &Path) -> Option<(PathBuf, String)> {
    let case_dir = path.parent()?;
    let run_dir = case_dir.parent()?;
    let run_dir = if run_dir.as_os_str().is_empty() { Path::new(".") } else { run_dir };
    if !run_dir.join(MANIFEST_FILE).is_file() {
        return None;
    }
    let rel = format!("{}/{}", case_dir.file_name()?.to_str()?, path.file_name()?.to_str()?);
    Some((run_dir.to_path_buf(), rel))
}

fn check(dir: &Path, only: Option<&str>, options: &CheckOptions) -> RunCheck {
    let mut out = RunCheck::default();
    let manifest_path = dir.join(MANIFEST_FILE);
    let manifest = match RunManifest::read(dir) {
        Ok(m) => m,
        Err(ManifestError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            if !options.allow_incomplete {
                out.fail(
                    &manifest_path,
                    "missing: the run did not finish (killed or interrupted), so nothing anchors its logs; \
                     --allow-incomplete checks their chains alone",
                );
            }
            if options.root.is_some() || options.pubkey.is_some() {
                out.fail(&manifest_path, "missing: --root and --pubkey need the run's manifest");
            }
            for log in logs_in(dir) {
                chain_only(&mut out, &log, options);
            }
            return out;
        }
        Err(e) => {
            out.fail(&manifest_path, e.to_string().trim_start_matches(&format!("{}: ", manifest_path.display())));
            return out;
        }
    };
    let root = manifest.root();
    out.root = Some(root);
    if let Some(expected) = options.root
        && expected != root
    {
        out.fail(
            &manifest_path,
            format!(
                "its root is {root}, the archived report's is {expected}: the manifest was rewritten \
                 (or this is another run)"
            ),
        );
    }
    check_signature(&mut out, dir, root, options);

    let listed: BTreeSet<String> = manifest.logs.iter().map(|e| e.path.clone()).collect();
    let checked: Vec<&LogEntry> = manifest.logs.iter().filter(|e| only.is_none_or(|rel| rel == e.path)).collect();
    // logs are independent: streamed on every core, judged in manifest order
    let streamed = crate::par::in_parallel(&checked, |entry| {
        is_plain_relative(&entry.path).then(|| stream_with_offsets(&dir.join(&entry.path)))
    });
    for (entry, streamed) in checked.into_iter().zip(streamed) {
        let path = dir.join(&entry.path);
        let (summary, turn_offsets, status) = match streamed {
            None => {
                out.fail(&manifest_path, format!("log path \"{}\" leaves the run directory", entry.path));
                continue;
            }
            Some(Ok(found)) => found,
            Some(Err(ReadError::Io { source, .. })) if source.kind() == std::io::ErrorKind::NotFound => {
                out.fail(&path, "missing: the manifest lists it");
                continue;
            }
            Some(Err(e)) => {
                out.findings.push(read_finding(&path, e));
                continue;
            }
        };
        if let Some((line, problem)) = against_manifest(&summary, entry.events, entry.head) {
            out.findings.push(Finding { subject: path, line, problem });
            continue;
        }
        if !summary.complete && !options.allow_incomplete {
            out.fail(&path, "incomplete: the log does not end with run_completed");
            continue;
        }
        out.logs.push(LogCheck { path, summary, torn_tail: 0, turn_offsets, status });
    }
    match only {
        Some(rel) if !listed.contains(rel) => {
            out.fail(&dir.join(rel), "not in the run's manifest (added after the run)");
        }
        Some(_) => {}
        None => {
            for log in logs_in(dir) {
                let rel = log.strip_prefix(dir).map(relative_text).unwrap_or_default();
                if !listed.contains(&rel) {
                    out.fail(&log, "not in the run's manifest (added after the run)");
                }
            }
        }
    }
    if only.is_none() {
        let files = super::verdicts::check_files(dir, &manifest);
        let files_hold = files.is_empty();
        out.findings.extend(files);
        if files_hold {
            let facts = out
                .logs
                .iter()
                .filter_map(|log| {
                    let rel = relative_text(log.path.strip_prefix(dir).ok()?);
                    let facts = super::verdicts::LogFacts {
                        head: log.summary.head,
                        events: log.summary.events,
                        status: log.status.clone(),
                    };
                    Some((rel, facts))
                })
                .collect();
            out.findings.extend(super::verdicts::cross_check(dir, &manifest, &facts));
        }
    }
    out.manifest = Some(manifest);
    out
}

fn check_signature(out: &mut RunCheck, dir: &Path, root: Digest, options: &CheckOptions) {
    let signature = match SignatureFile::read(dir) {
        Ok(s) => s,
        Err(e) => {
            out.fail(&dir.join(super::signing::SIGNATURE_FILE), e.to_string());
            return;
        }
    };
    out.signed_by = signature.as_ref().map(|s| s.public_key.clone());
    let Some(key) = &options.pubkey else { return };
    let sig_path = dir.join(super::signing::SIGNATURE_FILE);
    match signature {
        None => out.fail(&sig_path, "missing: --pubkey asks for a signed run, and this run was not signed"),
        Some(sig) => match sig.check(key, root) {
            Ok(()) => out.signature_checked = true,
            Err(e) => out.fail(&sig_path, e.to_string()),
        },
    }
}

/// How a verified log differs from its manifest entry, if it does: the line of the
/// first event that differs, when one can be named, and why.
fn against_manifest(found: &Summary, events: u64, head: Option<Digest>) -> Option<(Option<usize>, String)> {
    let line = |seq: u64| Some(seq as usize + 1);
    if found.events < events {
        return Some((
            line(found.events),
            format!(
                "event seq {}: lost tail: {} events verify, the manifest lists {events} (the log was cut short)",
                found.events, found.events
            ),
        ));
    }
    if found.events > events {
        return Some((
            line(events),
            format!(
                "event seq {events}: not in the manifest ({} events, the manifest lists {events}): \
                 appended after the run",
                found.events
            ),
        ));
    }
    if found.head != head {
        let shown = |d: Option<Digest>| d.map_or("none".to_string(), |d| d.to_string());
        return Some((
            None,
            format!(
                "head {} differs from the manifest's {}: the log was rewritten and re-chained",
                shown(found.head),
                shown(head)
            ),
        ));
    }
    None
}

/// A log with no manifest to hold it to: its chain, and completeness.
/// With `--allow-incomplete`, a torn last line is what a run killed inside a `write`
/// leaves (the kernel stops a write between pages): the whole lines before it are
/// checked and the torn bytes are named, never counted as events.
fn chain_only(out: &mut RunCheck, path: &Path, options: &CheckOptions) {
    let read = if options.allow_incomplete {
        stream_envelopes_whole_lines(path, |_, _| {})
    } else {
        stream_envelopes(path, |_, _| {}).map(|summary| (summary, 0))
    };
    match read {
        Ok((summary, _)) if summary.events == 0 && !options.allow_incomplete => {
            out.fail(path, "empty: no event at all");
        }
        Ok((summary, _)) if !summary.complete && !options.allow_incomplete => out.fail(
            path,
            format!(
                "incomplete: {} events, no run_completed (a killed run; --allow-incomplete accepts it)",
                summary.events
            ),
        ),
        Ok((summary, torn_tail)) if torn_tail > 0 && summary.complete => out.fail(
            path,
            format!(
                "event seq {}: bytes after run_completed without a newline (nothing is written once a run has ended)",
                summary.events
            ),
        ),
        Ok((summary, torn_tail)) => out.logs.push(LogCheck {
            path: path.to_path_buf(),
            summary,
            torn_tail,
            turn_offsets: Vec::new(),
            status: None,
        }),
        Err(e) => out.findings.push(read_finding(path, e)),
    }
}

/// Stream a log, noting the byte offset of each `turn_started` line and the status its
/// `run_completed` carries.
fn stream_with_offsets(path: &Path) -> Result<(Summary, Vec<u64>, Option<String>), ReadError> {
    let mut offsets = Vec::new();
    let mut status = None;
    let mut at = 0u64;
    let summary = stream_envelopes(path, |event, line| {
        if event.kind == Kind::TurnStarted {
            offsets.push(at);
        }
        if event.kind == Kind::RunCompleted {
            #[derive(serde::Deserialize)]
            struct Completed {
                data: Status,
            }
            #[derive(serde::Deserialize)]
            struct Status {
                status: String,
            }
            status = serde_json::from_slice::<Completed>(line).ok().map(|c| c.data.status);
        }
        at += line.len() as u64;
    })?;
    Ok((summary, offsets, status))
}

fn read_finding(path: &Path, e: ReadError) -> Finding {
    let (line, problem) = match e {
        ReadError::Io { source, .. } => (None, source.to_string()),
        ReadError::Invalid { source, .. } => {
            (Some(source.line), format!("event seq {}: {}", source.seq, source.reason))
        }
    };
    Finding { subject: path.to_path_buf(), line, problem }
}

/// Every `<case>/<k>.jsonl` under a run directory, sorted.
pub fn logs_in(dir: &Path) -> Vec<PathBuf> {
    let mut logs = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return logs };
    // the entry's type comes with the directory listing: no `stat` per case, except
    // to follow a symbolic link
    let is_dir = |e: &std::fs::DirEntry| match e.file_type() {
        Ok(t) if t.is_symlink() => e.path().is_dir(),
        Ok(t) => t.is_dir(),
        Err(_) => e.path().is_dir(),
    };
    for case in entries.filter_map(Result::ok).filter(is_dir).map(|e| e.path()) {
        let Ok(files) = std::fs::read_dir(&case) else { continue };
        logs.extend(
            files.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl")),
        );
    }
    logs.sort();
    logs
}

/// A relative path as manifests write it: `/` between components.
pub fn relative_text(rel: &Path) -> String {
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// `a/b.jsonl`: no root, no `..`, no `.`.
fn is_plain_relative(rel: &str) -> bool {
    !rel.is_empty() && Path::new(rel).components().all(|c| matches!(c, Component::Normal(_)))
}
