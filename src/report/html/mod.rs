//! The HTML report: one offline file to look at a run, not read it.
//!
//! A reviewer of a failure wants to see what the agent did, where it first did
//! something else than expected, and what it knew at that point. The report is one
//! self-contained page — style, script and data inline, opened from `file://`, no
//! request of any kind (its Content-Security-Policy forbids them, see [`page`]) — with
//! the verdict, the gates, an index of cases (failing first, each with its one-line
//! reason and a link to its first divergent event, see [`analysis`]), and a section per
//! case: checks with the events their values came from, the golden diff, and a
//! timeline by turn with the state after each turn ([`case`], [`timeline`]). Deep links
//! have one shape: `#case/ID/run/K/seq/N` (and `…/turn/T`).
//!
//! Reading needs no script: folds are `<details>`, links are anchors, and a link to a
//! case shows that case alone through CSS. The small inline script adds search and
//! filters, opens the folds a link points into, and unfolds for printing — and draws
//! the turns of long runs, which are embedded as data ([`timeline::VIRTUAL_TURNS`]).
//! Above each timeline and at each model call, what the model was sent ([`sent`]).
//!
//! Like every reporter it consumes the [`SuiteOutcome`], streaming its cases (read
//! five times: tags, the two halves of the index, the two halves of the cases; never
//! all held), and it also reads each run's log through [`Logs`]: the log is where the
//! timeline is. Determinism: the same outcome and logs give the same bytes (no clock,
//! ordered maps, cases in a fixed order).
//!
//! Size discipline, so a 1,000-case suite opens and scrolls: payloads are cut at
//! [`markup::PAYLOAD_LIMIT`] with their size and digest; long runs fold, are
//! virtualised, and past a limit embed only the turns that matter
//! ([`timeline::FOLD_EVENTS`], [`timeline::VIRTUAL_TURNS`], [`timeline::MAX_RUN_EVENTS`]);
//! and cases are drawn in full, failing first, until [`DETAIL_BUDGET`] bytes of case
//! detail are spent, then compact (reasons and checks, the logs not read).

pub mod analysis;
pub mod case;
pub mod churn;
pub mod event;
pub mod index;
pub mod markup;
pub mod narrative;
pub mod page;
pub mod sent;
pub mod state;
pub mod timeline;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::event::payload::{self, Json};
use crate::event::reader::read_log;
use crate::event::{Event, Kind};
use crate::golden::normalize::normalize_events;
use crate::outcome::{CaseOutcome, RunResult, SuiteOutcome};

/// Bytes of case detail (timelines, diffs, states) drawn in full before the remaining
/// cases are drawn compact. Failing cases come first, so they are the ones in full:
/// about 60 cases of 50 turns, far more than a reviewer reads, and a report a browser
/// opens in about two seconds however large the suite (docs/report.md).
pub const DETAIL_BUDGET: usize = 8 * 1024 * 1024;

/// Where a report finds the logs it draws.
pub trait Logs {
    /// The verified events of `run` of `case`, or why they cannot be read.
    fn events(&self, case: &CaseOutcome, run: &RunResult) -> Result<Vec<Event>, String>;
    /// The verified events, in golden form, of the golden a check names as `shown`;
    /// `Ok(None)` when there is no such file.
    fn golden(&self, shown: &str) -> Result<Option<Vec<Event>>, String>;
    /// The system prompt of `agent`, when the profile at hand is the one whose digest a
    /// run recorded (`run_started.profile`): never a prompt that changed since.
    fn system_prompt(&self, agent: &str, profile: &str) -> Option<String> {
        let _ = (agent, profile);
        None
    }
}

/// Agent name → (profile digest, system prompt), for [`Logs::system_prompt`].
pub type Prompts = BTreeMap<String, (String, String)>;

/// The system prompts of a pipeline's agents, under the digest each profile has in
/// `run_started` (the same canonical digest the runner computes).
pub fn prompts(agents: &BTreeMap<String, crate::pipeline::AgentProfile>) -> Prompts {
    agents
        .iter()
        .filter(|(_, profile)| !profile.system.is_empty())
        .filter_map(|(name, profile)| {
            let value = serde_json::to_value(profile).ok()?;
            let digest = crate::canon::canonical_digest(crate::canon::Context::Content, &value).ok()?;
            Some((name.clone(), (digest.to_string(), profile.system.clone())))
        })
        .collect()
}

/// Logs and goldens on disk. Reports name them relative to the pipeline's base
/// directory; a run directory read later (`stateval report RUN_DIR`) holds its logs at
/// `<case>/<k>.jsonl` wherever it was moved.
#[derive(Debug, Clone)]
pub struct LogFiles {
    pub base: PathBuf,
    pub run_dir: Option<PathBuf>,
    /// The pipeline's system prompts, when the report is written with the pipeline at
    /// hand (`stateval run`); a run directory rendered later has none.
    pub prompts: Prompts,
}

impl LogFiles {
    /// Logs and goldens under the pipeline's base directory, as a run names them.
    pub fn under(base: &Path) -> Self {
        LogFiles { base: base.to_path_buf(), run_dir: None, prompts: Prompts::new() }
    }

    /// Logs in `run_dir`; goldens under the base directory the run's log paths imply
    /// (the store usually sits in the project), found from any one of its runs.
    pub fn in_run_dir(run_dir: &Path, sample: Option<(&CaseOutcome, &RunResult)>) -> Self {
        let base = sample
            .and_then(|(case, run)| {
                let log = Path::new(&run.log);
                if log.is_absolute() {
                    return None;
                }
                // <base>/<store…>/runs/<id>/<case>/<k>.jsonl is run_dir/<case>/<k>.jsonl
                let mut base = run_dir.join(&case.id).join(format!("{}.jsonl", run.index));
                for _ in log.components() {
                    base = base.parent()?.to_path_buf();
                }
                Some(base)
            })
            .unwrap_or_else(|| PathBuf::from("."));
        LogFiles { base, run_dir: Some(run_dir.to_path_buf()), prompts: Prompts::new() }
    }
}

impl Logs for LogFiles {
    fn events(&self, case: &CaseOutcome, run: &RunResult) -> Result<Vec<Event>, String> {
        let path = match &self.run_dir {
            Some(dir) => dir.join(&case.id).join(format!("{}.jsonl", run.index)),
            None => self.base.join(&run.log),
        };
        let events = read_log(&path).map(|v| v.events).map_err(|e| e.to_string())?;
        // the chain verified; its head must be the one the run's writer had, which the
        // case outcome carries: a log re-chained by something else (the code under
        // test, which runs with our user id) is not shown as this run's
        let head = events.last().map(|e| e.hash.to_string());
        if run.head.is_some() && head != run.head {
            return Err(format!(
                "{}: not the log the run wrote (its head is {}, the run's {})",
                path.display(),
                head.as_deref().unwrap_or("none"),
                run.head.as_deref().unwrap_or("none")
            ));
        }
        Ok(events)
    }

    fn golden(&self, shown: &str) -> Result<Option<Vec<Event>>, String> {
        let path = self.base.join(shown);
        if !path.is_file() {
            return Ok(None);
        }
        let verified = read_log(&path).map_err(|e| format!("the golden does not verify: {e}"))?;
        normalize_events(verified.events).map(Some).map_err(|e| format!("{shown}: {e}"))
    }

    fn system_prompt(&self, agent: &str, profile: &str) -> Option<String> {
        self.prompts.get(agent).filter(|(digest, _)| digest == profile).map(|(_, system)| system.clone())
    }
}

/// `outcome` as an HTML page, in memory (for tests).
pub fn render(outcome: &SuiteOutcome, logs: &dyn Logs) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, logs, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as one self-contained HTML page.
pub fn write(outcome: &SuiteOutcome, logs: &dyn Logs, out: &mut dyn Write) -> io::Result<()> {
    let verdict = if outcome.passed { "passed" } else { "failed" };
    out.write_all(page::head(&format!("stateval {}: {verdict}", outcome.pipeline)).as_bytes())?;
    out.write_all(index::header(outcome).as_bytes())?;

    let mut tags = BTreeSet::new();
    for case in outcome.cases.iter() {
        tags.extend(case?.tags.iter().cloned());
    }
    let total = outcome.cases.len();
    let failing = total - outcome.passed_cases();
    out.write_all(b"<main>\n<a class=\"skip\" href=\"#index\">Skip to the cases</a>\n")?;
    out.write_all(churn::section(&outcome.extras).as_bytes())?;
    out.write_all(index::filters(&tags, total).as_bytes())?;
    out.write_all(index::gates(&outcome.gates).as_bytes())?;
    if let Some(card) = &outcome.scorecard {
        out.write_all(index::scorecard(card, &outcome.gates).as_bytes())?;
    }
    if let Some(not_run) = outcome.extras.get(crate::outcome::NOT_RUN) {
        out.write_all(index::not_run(not_run).as_bytes())?;
    }
    out.write_all(index::extras(&outcome.extras).as_bytes())?;

    out.write_all(index::open(total, failing).as_bytes())?;
    // the first divergent event of each failing case, in order: the index links to it,
    // and a case drawn compact names it under that link's id (~200 bytes a case)
    let mut pointers = Vec::with_capacity(failing);
    for wanted in [false, true] {
        for case in outcome.cases.iter() {
            let case = case?;
            if case.passed != wanted {
                continue;
            }
            let pointer = if case.passed { None } else { index::first_divergence(&case, logs) };
            out.write_all(index::row(&case, pointer.as_ref()).as_bytes())?;
            if !case.passed {
                pointers.push(pointer);
            }
        }
    }
    out.write_all(index::close().as_bytes())?;

    out.write_all(b"<section id=\"cases\" aria-label=\"Cases\">\n")?;
    let mut spent = 0usize;
    let mut full = true;
    let mut pointers = pointers.into_iter();
    for wanted in [false, true] {
        for case in outcome.cases.iter() {
            let case = case?;
            if case.passed != wanted {
                continue;
            }
            let first = if case.passed { None } else { pointers.next().flatten() };
            let mut html = String::new();
            if full {
                html = case::section(&case, logs, case::Detail::Full);
                full = spent + html.len() <= DETAIL_BUDGET;
            }
            if full {
                spent += html.len();
            } else {
                html = case::section(&case, logs, case::Detail::Compact { first: first.as_ref() });
            }
            out.write_all(html.as_bytes())?;
        }
    }
    out.write_all(b"</section>\n</main>\n")?;
    out.write_all(page::tail().as_bytes())
}

/// One log as an HTML page (`stateval show LOG --html OUT`): an imported incident, a
/// log from another machine. There is no outcome, so no checks and no gates: the
/// timeline, the state at each turn, and the run's own verdict.
pub fn write_log(label: &str, events: &[Event], out: &mut dyn Write) -> io::Result<()> {
    let started = events.iter().find(|e| e.kind == Kind::RunStarted).map(|e| e.view::<payload::RunStarted>());
    let field = |f: Json<'_>| f.as_str().map(Cow::into_owned);
    let status = events
        .iter()
        .rev()
        .find(|e| e.kind == Kind::RunCompleted)
        .and_then(|e| e.view::<payload::RunCompleted>().status.as_str())
        .map_or_else(|| "incomplete".to_string(), Cow::into_owned);
    let passed = status == "completed";
    let run = RunResult {
        attempt: None,
        index: started.and_then(|s| s.run.as_u64()).unwrap_or(0) as usize,
        log: label.to_string(),
        head: events.last().map(|e| e.hash.to_string()),
        events: events.len() as u64,
        virtual_ms: events.last().map_or(0, |e| e.t),
        status: status.clone(),
        checks: Vec::new(),
        task_checks: Vec::new(),
        error: None,
        warnings: Vec::new(),
        diagnosis: None,
        passed,
    };
    let case = CaseOutcome {
        dataset: started.and_then(|s| field(s.dataset)).unwrap_or_default(),
        id: started.and_then(|s| field(s.case)).unwrap_or_else(|| label.to_string()),
        tags: Vec::new(),
        agent: started.and_then(|s| field(s.agent)).unwrap_or_default(),
        source: label.to_string(),
        runs: vec![run],
        blocks: Vec::new(),
        passed,
        score: None,
    };
    let logs = Loaded(events);
    out.write_all(page::head(&format!("stateval log {label}")).as_bytes())?;
    let head = events.last().map_or_else(|| "none".to_string(), |e| e.hash.to_string());
    let header = format!(
        "<header>\n<h1>stateval log <code>{}</code></h1>\n<p class=\"muted\">{} events · head <code>{}</code> · {}</p>\n</header>\n",
        markup::esc(label),
        events.len(),
        markup::esc(&head),
        markup::esc(&status)
    );
    out.write_all(header.as_bytes())?;
    out.write_all(b"<main>\n<section id=\"cases\" aria-label=\"The log\">\n")?;
    out.write_all(case::section(&case, &logs, case::Detail::Full).as_bytes())?;
    out.write_all(b"</section>\n</main>\n")?;
    out.write_all(page::tail().as_bytes())
}

/// The one log of [`write_log`], already read.
struct Loaded<'a>(&'a [Event]);

impl Logs for Loaded<'_> {
    fn events(&self, _: &CaseOutcome, _: &RunResult) -> Result<Vec<Event>, String> {
        Ok(self.0.to_vec())
    }

    fn golden(&self, _: &str) -> Result<Option<Vec<Event>>, String> {
        Ok(None)
    }
}
