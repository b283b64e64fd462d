//! `stateval golden accept|review`: accept the golden changes of the last run one
//! cause at a time (docs/report.md, "Golden changes by cause").
//!
//! Both read a finished run directory — by default the newest in the pipeline's store —
//! and its failed golden checks, grouped by cause as the run's reports show them
//! ([`stateval::golden::churn`]). Accepting a group writes the logs of exactly that
//! group's runs as their goldens, from the run's own (verified) logs, without running
//! anything again; every other golden is left alone. `review` asks per group on a
//! terminal, as `cargo insta review` does; off a terminal it refuses and points at
//! `accept`, unless `--answers` gives the answers (for scripts and tests).
//!
//! A golden is taken only from a run that completed on its own
//! ([`stateval::golden::complete`]): a run whose agent crashed or whose judge missed is
//! in no group, and `--cause` naming only such runs is refused, naming each and why.
//!
//! A golden is what later runs are judged against, so the run it comes from must be
//! one stateval wrote, not one the agent under test planted in the store (it runs with
//! stateval's user id; a planted run can verify against its own manifest). With a key
//! — `--pubkey KEY.pub`, or the public half of `STATEVAL_SIGNING_KEY` — the run must be
//! signed by it. Without one, the run must be one the store's catalog recorded as
//! finished, and every log of its manifest must have the head the catalog recorded when
//! the run wrote it: the catalog is written by the run itself, under a lock the agent
//! cannot take while the run lasts, so a run directory planted or rewritten afterwards
//! is refused (`stateval reindex` rebuilds the catalog from the files, and so would
//! catalogue a planted run: reindex only a store you trust).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::catalog::Catalog;
use super::{CliError, Exit};
use stateval::event::verify::verify_bytes;
use stateval::evidence::{CheckOptions, PublicKey, SecretKey, Trust, check_run};
use stateval::golden::churn::{self, Group, Grouper, Member};
use stateval::golden::{Goldens, Written, bless, complete, normalize};
use stateval::outcome::{CASES_FILE, SUITE_FILE, SuiteOutcome};
use stateval::pipeline::Pipeline;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Re-bless exactly the goldens of one cause from the last run's logs
    /// (`--cause tools:fixtures/tools/treasury.json`, as the run's summary prints it).
    Accept(AcceptArgs),
    /// Accept, reject or skip each cause of the last run's golden changes, on a terminal.
    Review(ReviewArgs),
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Pipeline definition.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// The run directory to read (`<store>/runs/<run-id>`; default: the newest finished
    /// run in the pipeline's store).
    #[arg(long, value_name = "DIR")]
    run: Option<PathBuf>,
    /// Write goldens even where the environment says CI.
    #[arg(long)]
    allow_bless_in_ci: bool,
    /// Accept only from a run signed by this public key (`stateval keygen`), such as a
    /// CI run's directory kept as an artifact. Without it, a set
    /// `STATEVAL_SIGNING_KEY`'s public key; without either, a run the store's catalog
    /// recorded.
    #[arg(long, value_name = "FILE")]
    pubkey: Option<PathBuf>,
}

#[derive(clap::Args)]
struct AcceptArgs {
    #[command(flatten)]
    common: Common,
    /// The cause to accept, as the run's summary names it.
    #[arg(long, value_name = "ID")]
    cause: String,
}

#[derive(clap::Args)]
struct ReviewArgs {
    #[command(flatten)]
    common: Common,
    /// Answer without a terminal: one letter per cause, in the order shown — `a`
    /// accept, `r` reject, `s` skip (`--answers ar`). For scripts and tests.
    #[arg(long, value_name = "LETTERS")]
    answers: Option<String>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    match args.command {
        Sub::Accept(args) => accept(args),
        Sub::Review(args) => review(args),
    }
}

/// A finished run's golden churn, ready to accept.
struct Loaded {
    goldens: Goldens,
    run_dir: PathBuf,
    shown_run: String,
    grouper: Grouper,
    groups: Vec<Group>,
}

fn load(common: &Common) -> Result<Loaded, CliError> {
    let found = Common { pipeline: super::find_pipeline(&common.pipeline), ..common.clone() };
    let common = &found;
    if super::run::in_ci() && !common.allow_bless_in_ci {
        return Err(CliError::invalid(
            "refusing to accept goldens under CI (CI is set): goldens change in a reviewed commit, \
             not in a CI job; pass --allow-bless-in-ci to do it anyway",
        ));
    }
    let pipeline = Pipeline::load(&common.pipeline).map_err(|e| CliError::invalid(e.to_string()))?;
    let key = match &common.pubkey {
        Some(path) => Some(PublicKey::read(path).map_err(|e| CliError::invalid(e.to_string()))?),
        None => SecretKey::from_env().map_err(|e| CliError::invalid(e.to_string()))?.map(|k| k.public()),
    };
    // without a key, only the runs the catalog recorded are candidates
    let catalog = match key {
        Some(_) => None,
        None => Some(Catalog::open(&pipeline.store_dir())?),
    };
    let run_dir = match &common.run {
        Some(dir) => dir.clone(),
        None => newest_run(&pipeline.store_dir(), catalog.as_ref())?.ok_or_else(|| {
            CliError::invalid(format!(
                "no finished run in {}{}: `stateval run {}` first, or name one with --run DIR",
                pipeline.display(&pipeline.store_dir()),
                if catalog.is_some() { " that its catalog recorded (with no key, only those count)" } else { "" },
                common.pipeline.display()
            ))
        })?,
    };
    let shown_run = pipeline.display(&run_dir);
    // goldens are accepted only from what the run's manifest anchors: a run directory
    // edited after the run (a log re-chained, a head rewritten to match) blesses nothing
    let check = check_run(&run_dir, &CheckOptions::default());
    if let Some(finding) = check.findings.first() {
        return Err(CliError::invalid(format!(
            "{finding}\n{shown_run}: does not verify against its manifest; accepting nothing from it \
             (`stateval verify {shown_run}` lists every finding)"
        )));
    }
    // ... and it must be a run stateval wrote, which verifying alone does not show
    let manifest =
        check.manifest.ok_or_else(|| CliError::internal(format!("{shown_run}: verified without a manifest")))?;
    let vouched = match (&key, &catalog) {
        (Some(key), _) => Trust::SignedBy(key.clone()).check(&run_dir, manifest.root()),
        (None, Some(catalog)) => catalog.vouches_for(&run_dir, &manifest),
        (None, None) => Err("no key and no catalog to hold it to".to_string()),
    };
    if let Err(why) = vouched {
        return Err(CliError::invalid(format!("{shown_run}: {why}; accepting nothing from it")));
    }
    let outcome = SuiteOutcome::read_run_dir(&run_dir)
        .map_err(|e| CliError::invalid(format!("{shown_run} is not a finished run directory: {e}")))?;
    let mut grouper = Grouper::with_members();
    for case in outcome.cases.iter() {
        let case = case.map_err(|e| CliError::invalid(format!("{shown_run}/{CASES_FILE}: {e}")))?;
        grouper.see(&case);
    }
    let given = common.pipeline.to_string_lossy();
    let pipeline_arg = (given != super::DEFAULT_PIPELINE).then_some(given.as_ref());
    let groups = grouper.groups(|id| churn::accept_command(pipeline_arg, id));
    Ok(Loaded { goldens: Goldens::from_pipeline(&pipeline), run_dir, shown_run, grouper, groups })
}

/// The run directory under `store` whose `suite.json` was written last (ties: by name),
/// among the runs `catalog` recorded as finished when there is one.
fn newest_run(store: &Path, catalog: Option<&Catalog>) -> Result<Option<PathBuf>, CliError> {
    let runs = store.join("runs");
    let entries = match std::fs::read_dir(&runs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::invalid(format!("{}: {e}", runs.display()))),
    };
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in entries.flatten() {
        let dir = entry.path();
        if catalog.is_some_and(|c| !c.finished(&entry.file_name().to_string_lossy())) {
            continue;
        }
        let Ok(modified) = std::fs::metadata(dir.join(SUITE_FILE)).and_then(|m| m.modified()) else { continue };
        if newest.as_ref().is_none_or(|(t, d)| (modified, &dir) > (*t, d)) {
            newest = Some((modified, dir));
        }
    }
    Ok(newest.map(|(_, dir)| dir))
}

fn accept(args: AcceptArgs) -> Result<Exit, CliError> {
    let loaded = load(&args.common)?;
    let refused = loaded.grouper.incomplete_of(&args.cause);
    let Some(group) = loaded.groups.iter().find(|g| g.id == args.cause) else {
        if !refused.is_empty() {
            return Err(CliError::invalid(format!(
                "--cause {}: accepting nothing: {}",
                args.cause,
                not_accepted(&refused)
            )));
        }
        return Err(CliError::invalid(no_such_cause(&loaded, &args.cause)));
    };
    super::out(write_group(&loaded, group)?);
    if !refused.is_empty() {
        super::out(format!("not accepted: {}", not_accepted(&refused)));
    }
    Ok(Exit::Pass)
}

/// Runs of a cause whose golden is not accepted, and why: each is named with its case.
fn not_accepted(runs: &[&churn::IncompleteRun]) -> String {
    let mut text = format!(
        "{} run{} of this cause did not complete on {} own, and a golden is taken only from a run \
         that did (fix them and run again):",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        if runs.len() == 1 { "its" } else { "their" }
    );
    for run in runs {
        text.push_str("\n  ");
        text.push_str(&run.line());
    }
    text
}

fn no_such_cause(loaded: &Loaded, cause: &str) -> String {
    if loaded.groups.is_empty() {
        return format!("--cause {cause}: every golden matched in {}: nothing to accept", loaded.shown_run);
    }
    let mut text = format!("--cause {cause}: no golden of {} differs for that cause; its causes:", loaded.shown_run);
    for g in &loaded.groups {
        text.push_str(&format!("\n  {} ({})", g.id, cases(g.cases)));
    }
    text
}

/// Write the goldens of `group` from the run's logs; one line saying what was written.
fn write_group(loaded: &Loaded, group: &Group) -> Result<String, CliError> {
    let members = loaded.grouper.members(&group.id).unwrap_or_default();
    let mut counts = [0usize; 3];
    for m in members {
        counts[write_member(loaded, m)? as usize] += 1;
    }
    let dir = loaded.goldens.shown.trim_end_matches('/');
    Ok(format!(
        "accepted {}: {} golden{} of {} in {dir}/ ({} created, {} updated, {} unchanged)",
        group.id,
        members.len(),
        if members.len() == 1 { "" } else { "s" },
        cases(group.cases),
        counts[Written::Created as usize],
        counts[Written::Updated as usize],
        counts[Written::Unchanged as usize],
    ))
}

fn write_member(loaded: &Loaded, m: &Member) -> Result<Written, CliError> {
    let log = loaded.run_dir.join(&m.case).join(format!("{}.jsonl", m.k));
    let shown = log.display();
    let bytes = std::fs::read(&log).map_err(|e| CliError::invalid(format!("{shown}: {e}")))?;
    let verified =
        verify_bytes(&bytes).map_err(|e| CliError::invalid(format!("{shown} does not verify ({e}): not accepted")))?;
    if m.head.as_deref() != verified.events.last().map(|e| e.hash.to_string()).as_deref() {
        return Err(CliError::invalid(format!(
            "{shown}: its head is not the one the run recorded in {CASES_FILE}: not accepted"
        )));
    }
    // the run's outcome said it completed; its log must say so too
    if let Some(why) = complete::why_log_incomplete(&verified.events) {
        return Err(CliError::invalid(format!(
            "{shown}: the run did not complete on its own ({why}): a golden is taken only from a run that did; \
             nothing more accepted"
        )));
    }
    let golden = normalize::normalize(&verified.events).map_err(|e| CliError::internal(e.to_string()))?;
    let (path, shown_golden) = loaded.goldens.path(&m.dataset, &m.case, m.k);
    bless::write_atomic(&path, &golden.bytes).map_err(|e| CliError::internal(format!("writing {shown_golden}: {e}")))
}

fn cases(n: usize) -> String {
    format!("{n} case{}", if n == 1 { "" } else { "s" })
}

/// One group as review shows it.
fn describe(group: &Group, at: usize, of: usize) -> String {
    format!("[{at}/{of}] {}\n      {}\n      {}: {}", group.id, group.what, group.size(), group.names())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Accept,
    Reject,
    Skip,
}

fn answer(letter: &str) -> Option<Answer> {
    match letter.trim().to_ascii_lowercase().as_str() {
        "a" | "accept" => Some(Answer::Accept),
        "r" | "reject" => Some(Answer::Reject),
        "s" | "skip" | "" => Some(Answer::Skip),
        _ => None,
    }
}

fn review(args: ReviewArgs) -> Result<Exit, CliError> {
    let terminal = std::io::stdin().is_terminal();
    if args.answers.is_none() && !terminal {
        return Err(CliError::invalid(
            "golden review asks on a terminal, and stdin is not one: accept a cause with \
             `stateval golden accept --cause ID` (the run's summary prints each cause's command), \
             or give --answers",
        ));
    }
    let loaded = load(&args.common)?;
    if loaded.groups.is_empty() {
        super::out(format!("every golden matched in {}: nothing to review", loaded.shown_run));
        return Ok(Exit::Pass);
    }
    let mut scripted = match &args.answers {
        Some(letters) => {
            let answers: Option<Vec<Answer>> = letters.chars().map(|c| answer(&c.to_string())).collect();
            let answers = answers.ok_or_else(|| {
                CliError::invalid(format!("--answers {letters:?}: one letter per cause, each a, r or s"))
            })?;
            if answers.len() != loaded.groups.len() {
                return Err(CliError::invalid(format!(
                    "--answers {letters:?}: {} answer(s) for {} cause(s)",
                    answers.len(),
                    loaded.groups.len()
                )));
            }
            Some(answers.into_iter())
        }
        None => None,
    };
    let of = loaded.groups.len();
    let (mut accepted, mut rejected, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    for (i, group) in loaded.groups.iter().enumerate() {
        super::out(describe(group, i + 1, of));
        let choice = match scripted.as_mut() {
            Some(answers) => answers.next().unwrap_or(Answer::Skip),
            None => loop {
                print!("      accept, reject or skip? [a/r/S] ");
                let _ = std::io::stdout().flush();
                match lines.next() {
                    // end of input: leave the rest undecided
                    None => break Answer::Skip,
                    Some(Err(e)) => return Err(CliError::internal(format!("reading the answer: {e}"))),
                    Some(Ok(line)) => match answer(&line) {
                        Some(a) => break a,
                        None => super::out("      a (accept), r (reject) or s (skip)"),
                    },
                }
            },
        };
        match choice {
            Answer::Accept => {
                super::out(format!("      {}", write_group(&loaded, group)?));
                accepted.push(group.id.clone());
            }
            Answer::Reject => rejected.push(group.id.clone()),
            Answer::Skip => skipped.push(group.id.clone()),
        }
    }
    super::out(format!(
        "golden review: {} accepted, {} rejected, {} skipped",
        accepted.len(),
        rejected.len(),
        skipped.len()
    ));
    if !rejected.is_empty() {
        super::out(format!(
            "rejected causes keep their goldens, so their cases fail until the change is undone: {}",
            rejected.join(", ")
        ));
    }
    if !accepted.is_empty() {
        super::out("`stateval run` again to confirm; `git diff` shows the goldens accepted");
    }
    Ok(Exit::Pass)
}
