//! `stateval verify RUN_DIR | LOG…`: check logs against their chain, their run's
//! manifest, an archived root and, with `--pubkey`, the manifest's signature.
//!
//! Exit 0 when everything holds, 1 when anything does not (each finding names the log
//! and its first bad event; the first printed is the first found), 2 when a path
//! cannot be read or an option is malformed.

use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::canon::Digest;
use stateval::evidence::{CheckOptions, PublicKey, RunCheck, check_log, check_run};

#[derive(clap::Args)]
pub struct Args {
    /// A run directory (`<store>/runs/<run-id>`: every log against its manifest) or
    /// event log files.
    #[arg(required = true, value_name = "RUN_DIR|LOG")]
    paths: Vec<PathBuf>,
    /// The root an archived report printed (JUnit property `root`, TAP `# run … root`,
    /// `report.json`, `summary.md`): the run's manifest must hash to it.
    #[arg(long, value_name = "DIGEST", value_parser = parse_root)]
    root: Option<Digest>,
    /// The public key of the run's signer (`stateval keygen`): the manifest must carry
    /// a signature by it.
    #[arg(long, value_name = "FILE")]
    pubkey: Option<PathBuf>,
    /// Accept a run without a manifest and logs without `run_completed` (a killed
    /// run), checking their chains alone.
    #[arg(long)]
    allow_incomplete: bool,
}

fn parse_root(text: &str) -> Result<Digest, String> {
    text.trim().parse().map_err(|e| format!("{e} (the root as a report prints it)"))
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let pubkey =
        args.pubkey.as_deref().map(PublicKey::read).transpose().map_err(|e| CliError::invalid(e.to_string()))?;
    let options = CheckOptions { root: args.root, pubkey, allow_incomplete: args.allow_incomplete };
    let mut exit = Exit::Pass;
    for path in &args.paths {
        let metadata = std::fs::metadata(path).map_err(|e| CliError::invalid(format!("{}: {e}", path.display())))?;
        let check = if metadata.is_dir() { check_run(path, &options) } else { check_log(path, &options) };
        if check.passed() {
            super::out(describe(path, metadata.is_dir(), &check, &options));
        } else {
            for finding in &check.findings {
                super::err(format_args!("FAILED {finding}"));
            }
            exit = exit.max_with(Exit::Fail);
        }
    }
    Ok(exit)
}

/// `ok RUN_DIR: 24 logs, 1380 events, root blake3:… (matches --root; …)` for a run,
/// `ok LOG: 45 events, head blake3:… (complete; as its run's manifest lists)` for a log.
fn describe(path: &std::path::Path, is_dir: bool, check: &RunCheck, options: &CheckOptions) -> String {
    let events: u64 = check.logs.iter().map(|l| l.summary.events).sum();
    let mut notes = Vec::new();
    let mut text = if is_dir {
        let mut text = format!("ok {}: {} logs, {events} events", path.display(), check.logs.len());
        match check.root {
            Some(root) => text.push_str(&format!(", root {root}")),
            None => notes.push("chain only: no run manifest anchors them".to_string()),
        }
        let torn = check.logs.iter().filter(|l| l.torn_tail > 0).count();
        if torn > 0 {
            notes.push(format!("{torn} torn last line(s) left out (a killed writer)"));
        }
        text
    } else {
        let log = check.logs.first();
        notes.push(match log {
            Some(l) if l.summary.complete => "complete".to_string(),
            _ => "incomplete: no run_completed".to_string(),
        });
        if let Some(l) = log.filter(|l| l.torn_tail > 0) {
            notes.push(format!("a torn last line of {} bytes left out (a killed writer)", l.torn_tail));
        }
        notes.push(match check.root {
            Some(_) => "as its run's manifest lists".to_string(),
            None => "chain only: no run manifest anchors it".to_string(),
        });
        let head = log.and_then(|l| l.summary.head).map_or("none".to_string(), |h| h.to_string());
        format!("ok {}: {events} events, head {head}", path.display())
    };
    if options.root.is_some() && check.root.is_some() {
        notes.push("root matches --root".to_string());
    }
    match (&check.signed_by, check.signature_checked) {
        (Some(key), true) => notes.push(format!("signature by {key} verified")),
        (Some(key), false) => notes.push(format!("signed by {key}, not checked: pass --pubkey")),
        (None, _) => {}
    }
    if !notes.is_empty() {
        text.push_str(&format!(" ({})", notes.join("; ")));
    }
    text
}

impl Exit {
    /// The more severe of two exits.
    pub fn max_with(self, other: Exit) -> Exit {
        if other as u8 > self as u8 { other } else { self }
    }
}
