//! Golden churn by cause: the failed golden checks of a run, grouped by [`Cause`].
//!
//! A suite whose fixture changed fails hundreds of goldens for one reason. Listed case
//! by case that is a wall of alike failures with no hint of what to do; grouped, it is
//! one line — the cause, how many cases, the first few — and one command that accepts
//! exactly that change (`stateval golden accept --cause ID`, which re-blesses the
//! runs of that group from the run's own logs and nothing else). A behaviour change
//! is a group of its own, never folded into an input's.
//!
//! A run that did not complete on its own ([`super::complete`]: its agent crashed, a
//! grader or judge could not answer) belongs to no group: its golden differs because it
//! broke, and accepting that would bless the breakage. Such runs are kept apart
//! ([`Incomplete`]), listed after the failing cases, with no accept command.
//!
//! Groups are computed from case outcomes alone (each failed `golden` check carries
//! its cause), so a run, a merge and `stateval golden accept` reading a finished run
//! directory all find the same groups.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::CHECK;
use super::cause::{self, Cause, CauseKind};
use crate::outcome::{CaseOutcome, RunResult};

/// The key of the groups in a run's extras (`report.json`, `suite.json`).
pub const EXTRA: &str = "golden_groups";
/// How many case ids a group names.
pub const SHOWN: usize = 5;

/// One cause and the runs whose golden differs for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The cause's id: what `--cause` takes.
    pub id: String,
    pub kind: CauseKind,
    /// What changed, for people.
    pub what: String,
    /// Cases with at least one run in the group.
    pub cases: usize,
    /// Runs in the group.
    pub runs: usize,
    /// The first [`SHOWN`] cases, in dataset order.
    pub first: Vec<String>,
    /// The command that accepts exactly this group's goldens.
    pub accept: String,
}

impl Group {
    /// `a, b, c and 10 more`: the cases named, and how many are not.
    pub fn names(&self) -> String {
        let more = self.cases.saturating_sub(self.first.len());
        let mut names = self.first.join(", ");
        if more > 0 {
            names.push_str(&format!(" and {more} more"));
        }
        names
    }

    /// `13 cases (17 runs)`.
    pub fn size(&self) -> String {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        format!("{} ({})", plural(self.cases, "case"), plural(self.runs, "run"))
    }
}

/// Does a summary need a line for this failed case, beside the groups? Not when it
/// failed only golden checks, each for a cause that [`explains`] it.
pub fn listed_apart(case: &CaseOutcome) -> bool {
    !golden_only(case) || case.runs.iter().filter_map(run_cause).any(|c| !explains(c.kind))
}

/// A run's golden churn: its groups (most cases first), and the gates that failed only
/// because golden checks failed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    pub groups: Vec<Group>,
    /// The scope of each failed gate that passes once every run that failed only its
    /// golden check counts as passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates_only_goldens: Vec<String>,
    /// Runs whose golden check failed but which did not complete on their own: in no
    /// group, and never accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<Incomplete>,
}

/// The runs of a run whose golden check failed and which did not complete on their
/// own ([`super::complete`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Incomplete {
    /// Cases with at least one such run.
    pub cases: usize,
    /// Such runs.
    pub runs: usize,
    /// The first [`SHOWN`] of them, in dataset order.
    pub first: Vec<IncompleteRun>,
}

/// One run that did not complete on its own, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncompleteRun {
    pub case: String,
    pub k: usize,
    pub why: String,
    /// The cause its golden differs for, as a group would name it.
    pub cause: String,
}

impl IncompleteRun {
    /// `case (run 0): why`.
    pub fn line(&self) -> String {
        format!("{} (run {}): {}", self.case, self.k, self.why)
    }
}

impl Incomplete {
    /// `runs that did not complete: 6 cases (6 runs): a (run 0): why; …` — the line a
    /// summary gives them.
    pub fn summary(&self) -> String {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let mut lines: Vec<String> = self.first.iter().map(IncompleteRun::line).collect();
        if self.runs > self.first.len() {
            lines.push(format!("and {} more", self.runs - self.first.len()));
        }
        format!(
            "runs that did not complete: {} ({}), fix them before accepting goldens (no golden is taken from them): {}",
            plural(self.cases, "case"),
            plural(self.runs, "run"),
            lines.join("; ")
        )
    }
}

impl Churn {
    /// The churn a run recorded in its extras, if any.
    pub fn from_extras(extras: &serde_json::Map<String, serde_json::Value>) -> Option<Churn> {
        serde_json::from_value(extras.get(EXTRA)?.clone()).ok()
    }

    /// Cases of groups whose cause is an input or the digest definition: a case that
    /// failed only such golden checks needs no line of its own in a summary.
    pub fn explained(&self) -> usize {
        self.groups.iter().filter(|g| explains(g.kind)).map(|g| g.cases).sum()
    }
}

/// Causes that say what changed without the run's behaviour changing. (A missing
/// golden is a group too, but its cases keep their own lines: each names the file to
/// write, as the summary's list of missing goldens does.)
pub fn explains(kind: CauseKind) -> bool {
    matches!(kind, CauseKind::Inputs | CauseKind::Digests)
}

/// One run of a group: where its golden goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub dataset: String,
    pub case: String,
    pub k: usize,
    /// The head of the run's log as the run recorded it.
    pub head: Option<String>,
}

#[derive(Debug)]
struct Building {
    cause: Cause,
    cases: usize,
    runs: usize,
    first: Vec<String>,
    members: Vec<Member>,
}

/// Gathers groups one case at a time (cases are streamed, never all in memory).
#[derive(Debug, Default)]
pub struct Grouper {
    groups: BTreeMap<String, Building>,
    keep_members: bool,
    /// Runs that did not complete on their own: the first [`SHOWN`], or every one
    /// when members are kept.
    incomplete: Vec<IncompleteRun>,
    incomplete_runs: usize,
    incomplete_cases: usize,
}

/// The cause of a run's failed golden check, if it failed one.
pub fn run_cause(run: &RunResult) -> Option<Cause> {
    let check = run.checks.iter().find(|c| c.name == CHECK && !c.passed)?;
    if let Some(cause) = cause::of_check(check.actual.as_ref()) {
        return Some(cause);
    }
    // a required golden that does not exist records no value, only its reason; a check
    // from before causes were recorded gets behaviour, the one cause that claims nothing
    Some(if check.reason.starts_with(super::NO_GOLDEN) { Cause::missing() } else { Cause::behaviour() })
}

/// Why `run`, whose golden check failed, did not complete on its own: what its check
/// recorded ([`super::complete::KEY`]), else its error or status (a check from before
/// that was recorded).
pub fn run_incomplete(run: &RunResult) -> Option<String> {
    let check = run.checks.iter().find(|c| c.name == CHECK && !c.passed)?;
    let recorded = check.actual.as_ref().and_then(|a| a.get(super::complete::KEY)).and_then(|w| w.as_str());
    if let Some(why) = recorded {
        return Some(why.to_string());
    }
    super::complete::why_incomplete(&run.status, run.error.as_deref(), &[])
}

/// Did this run fail, and fail only its golden check?
pub fn golden_only_run(run: &RunResult) -> bool {
    !run.passed
        && run.error.is_none()
        && run.status == "completed"
        && run.checks.iter().any(|c| c.name == CHECK && !c.passed)
        && run.checks.iter().all(|c| c.passed || c.name == CHECK)
}

/// Did this case fail, and only because golden checks failed?
pub fn golden_only(case: &CaseOutcome) -> bool {
    !case.passed && case.blocks.iter().all(|b| b.passed) && case.runs.iter().all(|r| r.passed || golden_only_run(r))
}

impl Grouper {
    /// A grouper that also keeps every member of every group (for `golden accept`).
    pub fn with_members() -> Grouper {
        Grouper { keep_members: true, ..Grouper::default() }
    }

    pub fn see(&mut self, case: &CaseOutcome) {
        let mut counted: Vec<String> = Vec::new();
        let mut broken = false;
        for run in &case.runs {
            let Some(cause) = run_cause(run) else { continue };
            if let Some(why) = run_incomplete(run) {
                self.incomplete_runs += 1;
                broken = true;
                if self.keep_members || self.incomplete.len() < SHOWN {
                    self.incomplete.push(IncompleteRun { case: case.id.clone(), k: run.index, why, cause: cause.id });
                }
                continue;
            }
            let id = cause.id.clone();
            let group = self.groups.entry(id.clone()).or_insert_with(|| Building {
                cause,
                cases: 0,
                runs: 0,
                first: Vec::new(),
                members: Vec::new(),
            });
            group.runs += 1;
            if !counted.contains(&id) {
                group.cases += 1;
                if group.first.len() < SHOWN {
                    group.first.push(case.id.clone());
                }
                counted.push(id);
            }
            if self.keep_members {
                group.members.push(Member {
                    dataset: case.dataset.clone(),
                    case: case.id.clone(),
                    k: run.index,
                    head: run.head.clone(),
                });
            }
        }
        self.incomplete_cases += usize::from(broken);
    }

    /// The runs seen that did not complete on their own, if any.
    pub fn incomplete(&self) -> Option<Incomplete> {
        (self.incomplete_runs > 0).then(|| Incomplete {
            cases: self.incomplete_cases,
            runs: self.incomplete_runs,
            first: self.incomplete.iter().take(SHOWN).cloned().collect(),
        })
    }

    /// Every run seen whose golden differs for cause `id` and which did not complete on
    /// its own (all of them only [`Grouper::with_members`]).
    pub fn incomplete_of(&self, id: &str) -> Vec<&IncompleteRun> {
        self.incomplete.iter().filter(|r| r.cause == id).collect()
    }

    /// The members of group `id` (kept only [`Grouper::with_members`]).
    pub fn members(&self, id: &str) -> Option<&[Member]> {
        self.groups.get(id).map(|g| g.members.as_slice())
    }

    /// The groups, most cases first (ties by id); `accept` gives each its command.
    pub fn groups(&self, accept: impl Fn(&str) -> String) -> Vec<Group> {
        let mut out: Vec<Group> = self
            .groups
            .values()
            .map(|b| Group {
                id: b.cause.id.clone(),
                kind: b.cause.kind,
                what: b.cause.what.clone(),
                cases: b.cases,
                runs: b.runs,
                first: b.first.clone(),
                accept: accept(&b.cause.id),
            })
            .collect();
        out.sort_by(|a, b| b.cases.cmp(&a.cases).then_with(|| a.id.cmp(&b.id)));
        out
    }
}

/// `stateval golden accept [PIPELINE] --cause ID`, quoted for a POSIX shell where needed;
/// `pipeline` is left out when it is the default.
pub fn accept_command(pipeline: Option<&str>, id: &str) -> String {
    let pipeline = pipeline.map(|p| format!("{} ", shell_word(p))).unwrap_or_default();
    format!("stateval golden accept {pipeline}--cause {}", shell_word(id))
}

/// `word` as one word of a POSIX shell command: as it is when plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:+=@,".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Check;
    use serde_json::json;

    fn golden(cause: Option<Cause>) -> Check {
        Check {
            name: CHECK.into(),
            passed: cause.is_none(),
            reason: "r".into(),
            expected: None,
            actual: cause.map(|c| json!({"cause": c})),
        }
    }

    fn run(index: usize, cause: Option<Cause>) -> RunResult {
        RunResult {
            attempt: None,
            index,
            log: "l".into(),
            head: None,
            events: 1,
            virtual_ms: 0,
            status: "completed".into(),
            passed: cause.is_none(),
            checks: vec![golden(cause)],
            task_checks: vec![],
            error: None,
            warnings: vec![],
            diagnosis: None,
        }
    }

    fn case(id: &str, runs: Vec<RunResult>) -> CaseOutcome {
        CaseOutcome {
            dataset: "d".into(),
            id: id.into(),
            tags: vec![],
            agent: "a".into(),
            source: "d.jsonl:1".into(),
            passed: runs.iter().all(|r| r.passed),
            runs,
            blocks: vec![],
            score: None,
        }
    }

    fn tools() -> Cause {
        Cause { kind: CauseKind::Inputs, id: "tools:t.json".into(), what: "tool manifest t.json changed".into() }
    }

    #[test]
    fn runs_of_one_cause_make_one_group_counting_cases_once_and_behaviour_stays_apart() {
        let mut g = Grouper::with_members();
        for i in 0..7 {
            g.see(&case(&format!("c{i}"), vec![run(0, Some(tools())), run(1, Some(tools()))]));
        }
        g.see(&case("odd", vec![run(0, Some(Cause::behaviour())), run(1, None)]));
        g.see(&case("fine", vec![run(0, None)]));
        let groups = g.groups(|id| accept_command(None, id));
        // 7 cases × 2 runs in one group; the behaviour change alone in its own
        assert_eq!(
            groups.iter().map(|g| (g.id.as_str(), g.cases, g.runs)).collect::<Vec<_>>(),
            [("tools:t.json", 7, 14), ("behaviour", 1, 1)]
        );
        assert_eq!(groups[0].first, ["c0", "c1", "c2", "c3", "c4"]);
        assert_eq!(groups[0].accept, "stateval golden accept --cause tools:t.json");
        assert_eq!(
            g.members("behaviour").unwrap(),
            [Member { dataset: "d".into(), case: "odd".into(), k: 0, head: None }]
        );
    }

    #[test]
    fn a_required_golden_that_does_not_exist_is_the_missing_cause_and_its_case_keeps_its_line() {
        let mut c = case("new-case", vec![run(0, Some(tools()))]);
        c.runs[0].checks[0].actual = None;
        c.runs[0].checks[0].reason = "no golden: goldens/d/new-case.0.jsonl does not exist, and under CI …".into();
        let mut g = Grouper::default();
        g.see(&c);
        assert_eq!(g.groups(|_| String::new())[0].id, "missing");
        assert!(listed_apart(&c));
        // a failed check with neither a cause nor that reason claims nothing: behaviour
        c.runs[0].checks[0].reason = "something else".into();
        assert_eq!(run_cause(&c.runs[0]), Some(Cause::behaviour()));
    }

    #[test]
    fn a_case_that_also_fails_an_assertion_is_not_golden_only() {
        let mut c = case("c", vec![run(0, Some(tools()))]);
        assert!(golden_only(&c));
        c.runs[0].checks.push(Check {
            name: "final_response".into(),
            passed: false,
            reason: "r".into(),
            expected: None,
            actual: None,
        });
        assert!(!golden_only(&c));
    }

    #[test]
    fn an_awkward_id_or_pipeline_is_quoted_for_the_shell() {
        assert_eq!(
            accept_command(Some("my pipes/ci.toml"), "profile:it's"),
            r"stateval golden accept 'my pipes/ci.toml' --cause 'profile:it'\''s'"
        );
    }
}
