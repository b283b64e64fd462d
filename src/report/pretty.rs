//! Terminal output: a live progress bar on stderr while cases run, and a summary at
//! the end: failing cases with every reason, warnings, the cases of each dataset, one
//! line per reliability card (every metric of it with `verbose`), gates, verdict. A
//! green run's first screen says what ran and what held, not forty numbers.
//!
//! Colour is the caller's choice ([`ColorChoice`]), so tests can pin both forms; the
//! CLI passes [`stdout_color_choice`], which is anstream's rule: colour only on a
//! terminal, never with `NO_COLOR` set (and `CLICOLOR`/`CLICOLOR_FORCE` honoured).
//! Text from datasets is shown with control characters spelt out, so a case id or a
//! reason can neither inject escape sequences into the terminal nor break a line.

use crate::diag::visible;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use anstream::AutoStream;
pub use anstream::ColorChoice;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::golden::churn::{Churn, explains, listed_apart};
use crate::outcome::{CaseOutcome, SuiteOutcome};
use crate::report::gate_detail;

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// How progress is shown while cases run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live bar on stderr, failing cases printed above it: stderr is a terminal.
    Bar,
    /// One line per finished case on stderr, written and flushed as the case finishes,
    /// and a closing line with counts and wall time: stderr is a pipe or a file (a CI
    /// log), where a bar's redraws would arrive all at once at the end.
    Lines,
    /// Nothing while cases run (`--quiet`); the summary still follows.
    Quiet,
}

impl ProgressMode {
    /// [`ProgressMode::Bar`] on a terminal, else [`ProgressMode::Lines`].
    pub fn for_stderr() -> Self {
        if io::stderr().is_terminal() { ProgressMode::Bar } else { ProgressMode::Lines }
    }
}

/// Live progress over the cases of a run, fed one [`CaseOutcome`] at a time.
///
/// Safe to share between the runner's tasks (`&self` methods, atomic counters). Wall
/// time appears only here, on stderr, never in a report or the summary, which stay
/// byte-identical from run to run.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    mode: ProgressMode,
    started: std::time::Instant,
    total: usize,
    passed: AtomicUsize,
    failed: AtomicUsize,
}

impl Progress {
    /// Progress over `total` cases on stderr: a bar on a terminal, lines elsewhere.
    pub fn new(total: usize) -> Self {
        Self::with_mode(total, ProgressMode::for_stderr())
    }

    /// Progress over `total` cases shown as `mode` says.
    pub fn with_mode(total: usize, mode: ProgressMode) -> Self {
        let target =
            if mode == ProgressMode::Bar { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Self::with_target(total, target, mode)
    }

    /// A progress that counts but never draws.
    pub fn hidden(total: usize) -> Self {
        Self::with_target(total, ProgressDrawTarget::hidden(), ProgressMode::Quiet)
    }

    fn with_target(total: usize, target: ProgressDrawTarget, mode: ProgressMode) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total as u64), target);
        // No colour in the template: the bar needs none, and so NO_COLOR holds here too.
        let style = ProgressStyle::with_template("{pos:>5}/{len} [{bar:30}] {msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress {
            bar,
            mode,
            started: std::time::Instant::now(),
            total,
            passed: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
        }
    }

    /// Records a finished case that took `wall` of wall-clock time: advances the bar and
    /// prints a failing case above it, or (lines) prints the case's line.
    pub fn case_done(&self, case: &CaseOutcome, wall: std::time::Duration) {
        if case.passed {
            self.passed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        match self.mode {
            ProgressMode::Bar => {
                if !case.passed {
                    self.bar.println(format!("FAIL {} :: {}", visible(&case.dataset), visible(&case.id)));
                }
                self.bar.set_message(format!("{} passed, {} failed", self.passed(), self.failed()));
            }
            ProgressMode::Lines => emit(&case_line(case, wall)),
            ProgressMode::Quiet => {}
        }
        self.bar.inc(1);
    }

    pub fn passed(&self) -> usize {
        self.passed.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether anything is drawn.
    pub fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Removes the bar, before the summary is printed; with lines, or after a bar, the
    /// closing line: `     Summary [   3.104s] 84/84 cases run: 83 passed, 1 failed`.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        if self.mode != ProgressMode::Quiet {
            let (passed, failed) = (self.passed(), self.failed());
            let wall = self.started.elapsed();
            emit(&format!(
                "{:>12} [{}] {}/{} cases run: {passed} passed, {failed} failed",
                "Summary",
                seconds(wall),
                passed + failed,
                self.total
            ));
        }
    }
}

/// `        PASS [   0.214s] examples/treasury::pay-known-payee (1 run, 1.900s virtual)`,
/// or `FAIL …` with the first reason: one line a case, complete in itself, so lines
/// from cases finishing in any order read the same.
pub fn case_line(case: &CaseOutcome, wall: std::time::Duration) -> String {
    let runs = case.runs.len();
    let virtual_ms = case.runs.iter().map(|r| r.virtual_ms).max().unwrap_or(0);
    let mut line = format!(
        "{:>12} [{}] {}::{} ({runs} run{}, {}.{:03}s virtual)",
        if case.passed { "PASS" } else { "FAIL" },
        seconds(wall),
        visible(&case.dataset),
        visible(&case.id),
        if runs == 1 { "" } else { "s" },
        virtual_ms / 1000,
        virtual_ms % 1000,
    );
    if let Some(reason) = case.failure() {
        line.push_str(": ");
        line.push_str(&visible(&reason));
    }
    line
}

/// `   0.214s`: wall time, right-aligned to nine places.
fn seconds(d: std::time::Duration) -> String {
    format!("{:>8.3}s", d.as_secs_f64())
}

/// One line to stderr, flushed at once; a closed stderr is not an error of the run.
fn emit(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}").and_then(|()| err.flush());
}

/// anstream's decision for stdout: colour on a terminal unless `NO_COLOR` is set.
pub fn stdout_color_choice() -> ColorChoice {
    AutoStream::choice(&io::stdout())
}

/// Writes the end-of-run summary to `out`, coloured per `color`.
///
/// `ColorChoice::Auto` on a `dyn Write` cannot see a terminal and so means no colour;
/// pass [`stdout_color_choice`] for the real decision.
/// With `verbose`, every metric of every suite extra (reliability card) is listed; else
/// one line per extra.
pub fn write_summary(outcome: &SuiteOutcome, out: &mut dyn Write, color: ColorChoice, verbose: bool) -> io::Result<()> {
    // Rendered into memory first: anstream's streams only wrap `'static` writers, and
    // one write of the finished summary keeps it from interleaving with other output.
    let mut buffer = AutoStream::new(Vec::new(), color);
    render_summary(outcome, &mut buffer, verbose)?;
    out.write_all(&buffer.into_inner())?;
    out.flush()
}

fn render_summary(outcome: &SuiteOutcome, out: &mut impl Write, verbose: bool) -> io::Result<()> {
    // one pass over the cases: failures and warnings are listed in two blocks, so the
    // warnings wait in their own buffer; the slowest cases are kept as they go by
    let (mut warnings, mut slowest) = (Vec::new(), Slowest::default());
    let churn = Churn::from_extras(&outcome.extras);
    let mut listed = false;
    if let Some(churn) = churn.as_ref().filter(|c| !c.groups.is_empty()) {
        golden_groups(churn, out)?;
        listed = true;
    }
    let mut grouped = 0;
    for case in outcome.cases.iter() {
        let case = case?;
        slowest.see(&case);
        for run in &case.runs {
            for warning in &run.warnings {
                writeln!(
                    warnings,
                    "{YELLOW}WARN{RESET} {} :: {}: run {}: {}",
                    visible(&case.dataset),
                    visible(&case.id),
                    run.index,
                    visible(warning)
                )?;
            }
        }
        if case.passed {
            continue;
        }
        listed = true;
        // a case the groups above account for would only repeat them, a line per case
        if churn.is_some() && !listed_apart(&case) {
            grouped += 1;
            continue;
        }
        writeln!(out, "{RED}{BOLD}FAIL{RESET} {} :: {}", visible(&case.dataset), visible(&case.id))?;
        let mut reasons = case.failures();
        if reasons.is_empty() {
            reasons.push("case failed without a recorded reason".into());
        }
        for reason in reasons {
            writeln!(out, "     {}", visible(&reason))?;
        }
        for line in case.diagnoses().iter().flat_map(|d| d.lines()) {
            writeln!(out, "       {}", visible(line))?;
        }
    }
    if grouped > 0 {
        let s = if grouped == 1 { "" } else { "s" };
        writeln!(
            out,
            "({grouped} failing case{s} that only differ from their goldens for a cause above are not listed one by one; \
             the JSON and HTML reports list them)"
        )?;
    }
    // after the failing cases (each listed above with its reason): the runs whose
    // golden is not to be accepted, and why
    if let Some(incomplete) = churn.as_ref().and_then(|c| c.incomplete.as_ref()) {
        writeln!(out, "{RED}{}{RESET}", visible(&incomplete.summary()))?;
    }
    out.write_all(&warnings)?;
    if listed || !warnings.is_empty() {
        writeln!(out)?;
    }

    datasets(outcome, out)?;
    slowest.write(out)?;

    let extras = crate::report::metric_extras(&outcome.extras);
    let width = extras.iter().map(|(name, _)| visible(name).chars().count()).max().unwrap_or(0);
    for (name, fields) in &extras {
        if verbose {
            writeln!(out, "{BOLD}{}{RESET}", visible(name))?;
            for (key, value) in fields {
                writeln!(out, "  {:<40} {:>8}", visible(key), crate::report::metric_value(value))?;
            }
        } else {
            writeln!(out, "{BOLD}{:<width$}{RESET}  {}", visible(name), headline(fields))?;
        }
    }
    if !verbose && !extras.is_empty() {
        writeln!(out, "  (--verbose lists every metric; docs/metrics.md §6 says what each means)")?;
    }

    if let Some(card) = &outcome.scorecard {
        let rows = crate::report::score_rows(card);
        let shown = if verbose { rows.len() } else { 1 };
        for row in rows.iter().take(shown) {
            let unscored = match row.unscored {
                0 => String::new(),
                n => format!(" · {n} unscored (their runs failed on their own)"),
            };
            let stopped = match row.stopped_by.as_str() {
                "–" => String::new(),
                layers => format!(" · stopped by {}", visible(layers)),
            };
            writeln!(
                out,
                "{BOLD}security {}{RESET}: benign utility {} · utility under attack {} · attack success {} · \
                 attempted {}{stopped}{unscored}",
                visible(&row.scope),
                row.benign_utility,
                row.utility_under_attack,
                row.asr,
                row.attempts
            )?;
        }
        if !verbose && rows.len() > 1 {
            writeln!(out, "  (--verbose lists the scorecard of each of {} tags)", rows.len() - 1)?;
        }
    }
    if let Some(not_run) = outcome.extras.get(crate::outcome::NOT_RUN) {
        let n = |k: &str| not_run[k].as_u64().unwrap_or(0);
        writeln!(
            out,
            "{BOLD}not run{RESET}: {} attacks and {} controls of the benchmark are not in this suite, so the rates \
             above are of the rest ({} names each, and why)",
            n("attacks"),
            n("controls"),
            visible(not_run["file"].as_str().unwrap_or_default())
        )?;
    }

    for gate in &outcome.gates {
        let status = if gate.passed { format!("{GREEN}PASS{RESET}") } else { format!("{RED}FAIL{RESET}") };
        writeln!(out, "{status} gate {}: {}", visible(&gate.scope), visible(gate_detail(gate)))?;
    }

    let failed_gates = outcome.gates.iter().filter(|g| !g.passed).count();
    let verdict =
        if outcome.passed { format!("{GREEN}{BOLD}PASSED{RESET}") } else { format!("{RED}{BOLD}FAILED{RESET}") };
    writeln!(
        out,
        "{verdict} {}: {}/{} cases passed, {}/{} gates failed (run {})",
        visible(&outcome.pipeline),
        outcome.passed_cases(),
        outcome.cases.len(),
        failed_gates,
        outcome.gates.len(),
        visible(&outcome.run_id)
    )?;
    match (&outcome.root, &outcome.signature) {
        (Some(root), Some(signature)) => writeln!(out, "root {} ({})", visible(root), visible(signature))?,
        (Some(root), None) => writeln!(out, "root {}", visible(root))?,
        (None, _) => {}
    }
    match outcome.unisolated() {
        Some(why) => writeln!(out, "the code under test ran WITHOUT ISOLATION: {}", visible(why)),
        None => Ok(()),
    }
}

/// The golden groups, before the failing cases: each cause, its size, the first cases
/// and the command that accepts it.
fn golden_groups(churn: &Churn, out: &mut impl Write) -> io::Result<()> {
    let n = churn.groups.len();
    writeln!(
        out,
        "{BOLD}goldens differ for {n} cause{}{RESET} (each accepted on its own):",
        if n == 1 { "" } else { "s" }
    )?;
    for group in &churn.groups {
        let colour = if explains(group.kind) { YELLOW } else { RED };
        writeln!(out, "  {colour}{}{RESET}: {}: {}", visible(&group.id), group.size(), visible(&group.what))?;
        writeln!(out, "    {}", visible(&group.names()))?;
        writeln!(out, "    accept: {}", visible(&group.accept))?;
    }
    if !churn.gates_only_goldens.is_empty() {
        writeln!(out, "  gates failing only because of these: {}", visible(&churn.gates_only_goldens.join(", ")))?;
    }
    writeln!(out, "  (`stateval golden review` goes through them on a terminal)")?;
    writeln!(out)
}

/// How many of the slowest cases the summary names.
const SLOWEST: usize = 3;

/// `slowest (virtual time): a 12.4 s, b 9.1 s, c 0.8 s` — by the longest recorded run of
/// each case, in virtual time (recorded latencies, injected delays), so it is the same
/// on every machine. Ties keep dataset order.
#[derive(Default)]
struct Slowest {
    top: Vec<(u64, String)>,
}

impl Slowest {
    fn see(&mut self, case: &CaseOutcome) {
        let ms = case.runs.iter().map(|r| r.virtual_ms).max().unwrap_or(0);
        let at = self.top.iter().position(|(t, _)| ms > *t).unwrap_or(self.top.len());
        if at < SLOWEST {
            self.top.insert(at, (ms, case.id.clone()));
            self.top.truncate(SLOWEST);
        }
    }

    fn write(&self, out: &mut impl Write) -> io::Result<()> {
        if self.top.is_empty() || self.top.iter().all(|(ms, _)| *ms == 0) {
            return Ok(());
        }
        let listed: Vec<String> =
            self.top.iter().map(|(ms, id)| format!("{} {:.1} s", visible(id), *ms as f64 / 1000.0)).collect();
        writeln!(out, "slowest (virtual time): {}", listed.join(", "))
    }
}

/// One line per dataset: its passing and total cases, in dataset order.
fn datasets(outcome: &SuiteOutcome, out: &mut impl Write) -> io::Result<()> {
    let counts = outcome.cases.datasets();
    let width = counts.iter().map(|d| visible(&d.dataset).chars().count()).max().unwrap_or(0);
    for d in counts {
        let colour = if d.passed == d.cases { GREEN } else { RED };
        writeln!(out, "{:<width$}  {colour}{}/{}{RESET} passed", visible(&d.dataset), d.passed, d.cases)?;
    }
    Ok(())
}

/// The card scores that sum a reliability card up, in the order they are read.
const HEADLINE: [(&str, &str); 5] = [
    ("reliability.overall", "overall"),
    ("consistency.score", "consistency"),
    ("predictability.score", "predictability"),
    ("robustness.score", "robustness"),
    ("safety.score", "safety"),
];

/// A card's scores on one line; an extra that is not a card shows every field.
fn headline(fields: &[(&String, &serde_json::Value)]) -> String {
    let value = |key: &str| fields.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| *v);
    let parts: Vec<String> = if value(HEADLINE[0].0).is_some() {
        HEADLINE
            .iter()
            .filter_map(|(key, label)| value(key).map(|v| format!("{label} {}", crate::report::metric_value(v))))
            .collect()
    } else {
        fields.iter().map(|(k, v)| format!("{} {}", visible(k), crate::report::metric_value(v))).collect()
    };
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn summary(color: ColorChoice) -> String {
        summary_of(color, false)
    }

    fn summary_of(color: ColorChoice, verbose: bool) -> String {
        let mut bytes = Vec::new();
        let result = write_summary(&fixture::suite(), &mut bytes, color, verbose);
        assert!(result.is_ok(), "{result:?}");
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("summary is not UTF-8: {e}"))
    }

    #[test]
    fn the_uncoloured_summary_is_pinned_and_has_no_escape_sequence() {
        let text = summary(ColorChoice::Never);
        assert!(!text.contains('\u{1b}'), "{text:?}");
        insta::assert_snapshot!("pretty", text);
    }

    #[test]
    fn verbose_lists_every_metric_of_an_extra_where_the_short_form_has_one_line() {
        let short = summary(ColorChoice::Never);
        assert!(
            short.contains("reliability  pass_at_1 0.333 · pass_hat_k 0.000 · runs 4 · tool|calls` 12.500\n"),
            "{short}"
        );
        assert!(!short.contains("  pass_at_1  "), "{short}");
        let verbose = summary_of(ColorChoice::Never, true);
        assert!(verbose.contains("\n  pass_at_1                                   0.333\n"), "{verbose}");
        assert!(!verbose.contains("--verbose lists"), "{verbose}");
    }

    #[test]
    fn a_card_line_leads_with_its_overall_score_and_the_four_dimensions() {
        let card = serde_json::json!({"reliability.overall": 0.978, "consistency.score": 0.987,
            "consistency.outcome": 1.0, "predictability.score": 0.969, "robustness.score": null,
            "safety.score": 1.0});
        let fields: Vec<(String, serde_json::Value)> =
            card.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
        let borrowed: Vec<(&String, &serde_json::Value)> = fields.iter().map(|(k, v)| (k, v)).collect();
        assert_eq!(
            headline(&borrowed),
            "overall 0.978 · consistency 0.987 · predictability 0.969 · robustness n/a · safety 1.000"
        );
    }

    #[test]
    fn golden_groups_come_first_and_cases_they_account_for_get_no_line_of_their_own() {
        let mut out = Vec::new();
        write_summary(&fixture::churned(), &mut out, ColorChoice::Never, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("goldens differ for 1 cause"), "{text}");
        assert!(text.contains("  tools:fixtures/tools/treasury.json: 2 cases (2 runs): tool manifest"), "{text}");
        assert!(text.contains("    churned-one, churned-two\n"), "{text}");
        assert!(
            text.contains("    accept: stateval golden accept --cause tools:fixtures/tools/treasury.json\n"),
            "{text}"
        );
        assert!(text.contains("gates failing only because of these: smoke"), "{text}");
        // the churned cases are in the group, not in a FAIL line; the others keep theirs
        assert!(!text.contains(":: churned-"), "{text}");
        assert!(text.contains("(2 failing cases that only differ from their goldens"), "{text}");
        assert_eq!(text.matches("FAIL examples/").count(), 1, "{text}");
    }

    #[test]
    fn each_dataset_has_a_line_with_its_passing_and_total_cases() {
        let text = summary(ColorChoice::Never);
        assert!(text.contains("examples/treasury  1/2 passed\nsecurity/replay    0/1 passed\n"), "{text}");
    }

    #[test]
    fn the_coloured_summary_is_the_uncoloured_one_plus_our_own_styles() {
        let coloured = summary(ColorChoice::Always);
        assert!(coloured.contains(&format!("{RED}{BOLD}FAIL{RESET}")), "{coloured:?}");
        let mut stripped = coloured;
        for style in [RED, GREEN, YELLOW, BOLD, RESET] {
            stripped = stripped.replace(style, "");
        }
        assert_eq!(stripped, summary(ColorChoice::Never));
    }

    #[test]
    fn auto_colour_on_a_plain_writer_means_no_colour() {
        assert_eq!(summary(ColorChoice::Auto), summary(ColorChoice::Never));
    }

    #[test]
    fn an_escape_sequence_in_a_reason_is_shown_not_obeyed() {
        // The fixture's second reason carries ESC[31m: it must reach the terminal as
        // text even when our own colours are on.
        let coloured = summary(ColorChoice::Always);
        assert!(coloured.contains("found:\\nline two \\u{1b}[31mred\\u{1b}[0m"), "{coloured:?}");
        assert_eq!(visible("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn the_stdout_colour_choice_is_always_decided() {
        assert_ne!(stdout_color_choice(), ColorChoice::Auto);
    }

    #[test]
    fn progress_counts_passed_and_failed_cases() {
        let outcome = fixture::suite();
        let progress = Progress::hidden(outcome.cases.len());
        assert!(progress.is_hidden());
        for case in outcome.cases.iter() {
            progress.case_done(&case.unwrap_or_else(|e| panic!("{e}")), std::time::Duration::ZERO);
        }
        assert_eq!((progress.passed(), progress.failed()), (1, 2));
        progress.finish();
    }

    #[test]
    fn only_a_bar_draws_a_bar() {
        for (mode, hidden) in [(ProgressMode::Bar, false), (ProgressMode::Lines, true), (ProgressMode::Quiet, true)] {
            let progress = Progress::with_mode(3, mode);
            // the bar draws to stderr only when stderr is a terminal: under `cargo test`
            // it may not be, and indicatif then hides it itself
            assert!(progress.is_hidden() || !hidden, "{mode:?}");
            progress.bar.finish_and_clear();
        }
    }

    #[test]
    fn a_case_line_holds_the_status_the_case_its_runs_times_and_a_failures_reason() {
        let outcome = fixture::suite();
        let lines: Vec<String> = outcome
            .cases
            .iter()
            .map(|c| case_line(&c.unwrap_or_else(|e| panic!("{e}")), std::time::Duration::from_millis(1234)))
            .collect();
        assert!(lines.iter().all(|l| l.contains("[   1.234s] ")), "{lines:?}");
        let pass = lines.iter().find(|l| l.trim_start().starts_with("PASS")).expect("a passing case");
        assert!(!pass.contains("):"), "a passing line has no reason: {pass}");
        let fail = lines.iter().find(|l| l.trim_start().starts_with("FAIL")).expect("a failing case");
        assert!(fail.contains("s virtual): run 0: "), "a failing line says why: {fail}");
        assert!(lines.iter().all(|l| !l.contains('\n')));
    }
}
