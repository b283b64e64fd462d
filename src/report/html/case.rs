//! One case: its verdict and reasons, then each run — the checks with the event each
//! value came from, the golden diff with its first divergence highlighted and every
//! difference classified, narrative claims beside their evidence, and the timeline.
//!
//! A case is drawn in full or, once the report's detail budget is spent, compact:
//! reasons and checks only, without reading its logs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::Logs;
use super::analysis::{Golden, Pointer, RunAnalysis, analyse};
use super::markup::{Anchor, esc, plural, shown, text};
use super::narrative;
use super::sent;
use super::timeline::{self, Marks};
use crate::event::{Event, Kind, payload};
use crate::golden::{self, Class, Diff, render};
use crate::outcome::{CaseOutcome, Check, RunResult};

/// Characters of a matcher or an actual value shown in a checks table.
const CHECK_VALUE: usize = 600;
/// Characters of a passing check's folded matcher or value shown before it is opened.
const FOLDED_PREVIEW: usize = 48;
/// Leaf changes listed for one difference of a golden diff.
const MAX_CHANGES: usize = 10;

/// How much of a case to draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Detail<'a> {
    /// Everything, logs read.
    Full,
    /// Reasons and checks, logs not read; the first divergent event the index found
    /// (run, pointer) is named where the timeline would be, under the id the index
    /// links to.
    Compact { first: Option<&'a (usize, Pointer)> },
}

/// The case's `<section>`.
pub fn section(case: &CaseOutcome, logs: &dyn Logs, detail: Detail) -> String {
    let anchor = Anchor::case(&case.id);
    let (class, label) = if case.passed { ("passed", "PASS") } else { ("failed", "FAIL") };
    let badge = if case.passed { "pass" } else { "fail" };
    let tags: Vec<String> = case.tags.iter().map(|t| format!("<code>{}</code>", esc(t))).collect();
    let mut out = format!(
        "<section class=\"case {class}\" id=\"{}\">\n\
         <p class=\"focus-note\"><a href=\"#index\">← All cases</a></p>\n\
         <header><h3><span class=\"b {badge}\">{label}</span> <code>{}</code></h3>\n\
         <p class=\"muted\">{} · agent <code>{}</code> · <code>{}</code>{}</p></header>\n",
        anchor.id(),
        esc(&case.id),
        esc(&case.dataset),
        esc(&case.agent),
        esc(&case.source),
        if tags.is_empty() { String::new() } else { format!(" · tags {}", tags.join(" ")) },
    );
    let failures = case.failures();
    if !failures.is_empty() {
        out.push_str("<ul class=\"reasons fail\">\n");
        for f in &failures {
            let _ = writeln!(out, "<li>{}</li>", esc(f));
        }
        out.push_str("</ul>\n");
    }
    if !case.blocks.is_empty() {
        // the index links a case that failed on a block here: there is no one event
        let _ = writeln!(out, "<h4 id=\"{}\">Metric blocks, across runs</h4>", anchor.blocks());
        out.push_str(&checks_table(&case.blocks, &BTreeMap::new(), &anchor, 0));
    }
    if detail != Detail::Full {
        out.push_str(
            "<p class=\"muted\">Shown compact: the report's detail budget was spent on the cases above. \
             <code>stateval show LOG --html OUT</code> draws any run of it in full.</p>\n",
        );
    }
    // the system prompt is drawn once per case: a later run given the same one links
    // to the first copy
    let mut prompt_shown = None;
    for run in &case.runs {
        out.push_str(&run_details(case, run, logs, detail, &anchor, &mut prompt_shown));
    }
    out.push_str("</section>\n");
    out
}

fn run_details(
    case: &CaseOutcome,
    run: &RunResult,
    logs: &dyn Logs,
    detail: Detail,
    anchor: &Anchor,
    prompt_shown: &mut Option<(String, usize)>,
) -> String {
    let k = run.index;
    let (badge, status) = if run.passed { ("pass", "pass") } else { ("fail", "fail") };
    let mut out = format!(
        "<details class=\"run\" id=\"{}\"{}><summary><span class=\"b {badge}\">{status}</span> Run {k} · {} · {} event{}</summary>\n\
         <p class=\"muted\">log <code>{}</code> · head <code>{}</code></p>\n",
        anchor.run(k),
        if run.passed { "" } else { " open" },
        esc(&run.status),
        run.events,
        plural(run.events as usize),
        esc(&run.log),
        esc(run.head.as_deref().unwrap_or("none")),
    );
    if let Some(err) = &run.error {
        let _ = writeln!(out, "<p class=\"fail\">{}</p>", esc(err));
    }
    if let Some(diagnosis) = &run.diagnosis {
        let _ = writeln!(
            out,
            "<details class=\"diagnosis\" open><summary>The agent's output and stateval's last refusal</summary><pre>{}</pre></details>",
            esc(&diagnosis.lines().join("\n"))
        );
    }
    for w in &run.warnings {
        let _ = writeln!(out, "<p class=\"warn\">{}</p>", esc(w));
    }
    if let Detail::Compact { first } = detail {
        if let Some((_, p)) = first.filter(|(run_k, _)| *run_k == k) {
            let _ = writeln!(
                out,
                "<p class=\"callout\" id=\"{}\"><strong>First divergent event:</strong> seq {}{} · {} — {}</p>",
                anchor.seq(k, p.seq),
                p.seq,
                p.turn.map(|t| format!(" · turn {t}")).unwrap_or_default(),
                esc(&p.kind),
                esc(&super::markup::cut(&p.what, 600).text)
            );
        }
        // the checks carry their own values: no log is needed to show them
        out.push_str(&checks_table(&run.checks, &BTreeMap::new(), anchor, k));
        out.push_str("</details>\n");
        return out;
    }
    let RunAnalysis { events, golden, first } = analyse(case, run, logs);
    let events = match events {
        Ok(events) => events,
        Err(e) => {
            let _ = writeln!(out, "<p class=\"fail\">The log cannot be read: {}</p>", esc(&e));
            out.push_str(&checks_table(&run.checks, &BTreeMap::new(), anchor, k));
            out.push_str("</details>\n");
            return out;
        }
    };
    if let Some(p) = &first {
        out.push_str(&callout(p, anchor, k));
    }
    let evidence = evidence(&run.checks, &events, first.as_ref());
    out.push_str("<h4>Checks</h4>\n");
    out.push_str(&checks_table(&run.checks, &evidence, anchor, k));
    let mut marks = Marks { first: first.as_ref().map(|p| p.seq), ..Marks::default() };
    for (seq, names) in &evidence {
        marks.evidence.insert(*seq, names.clone());
    }
    match &golden {
        Golden::Agrees => {}
        Golden::Diff { shown, diff, golden } => {
            marks.diffs = diff.differences.iter().filter_map(|d| d.actual_seq).collect();
            out.push_str(&golden_diff(shown, diff, golden, &events, &run.log, anchor, k));
        }
        Golden::Recorded { shown, reason, why, .. } => {
            let _ = writeln!(
                out,
                "<h4 id=\"{}/diff\">Golden diff</h4>\n<p>{}</p>\n<p class=\"muted\">Not redrawn: {}. <code>stateval diff {} {}</code> compares them.</p>",
                anchor.run(k),
                esc(reason),
                esc(why),
                esc(shown),
                esc(&run.log)
            );
        }
    }
    if narrative::applies(case) {
        out.push_str(&narrative::section(&events, run.passed, anchor, k));
    }
    out.push_str("<h4>Timeline</h4>\n");
    let started = events.iter().find(|e| e.kind == Kind::RunStarted).map(|e| e.view::<payload::RunStarted>());
    let profile = started.and_then(|s| s.profile.as_str());
    let prompt = sent::system_prompt(&events, profile.and_then(|p| logs.system_prompt(&case.agent, &p)));
    match (&prompt, prompt_shown.as_ref()) {
        (Some(text), Some((shown, first))) if text == shown => {
            let _ = writeln!(
                out,
                "<p class=\"muted\" id=\"{}/system\">System prompt: the same as <a href=\"#{}/system\">run {first}'s</a>.</p>",
                anchor.run(k),
                anchor.run(*first)
            );
        }
        _ => {
            out.push_str(&sent::system_block(anchor, k, prompt.as_deref()));
            if let Some(text) = &prompt {
                *prompt_shown = Some((text.clone(), k));
            }
        }
    }
    out.push_str(&timeline::timeline(anchor, k, &events, &marks, &run.log, prompt.is_some()));
    out.push_str("</details>\n");
    out
}

fn callout(p: &Pointer, anchor: &Anchor, k: usize) -> String {
    format!(
        "<p class=\"callout\"><strong>First divergent event:</strong> <a href=\"#{}\">seq {}{} · {}</a> — {}</p>\n",
        anchor.seq(k, p.seq),
        p.seq,
        p.turn.map(|t| format!(" · turn {t}")).unwrap_or_default(),
        esc(&p.kind),
        esc(&super::markup::cut(&p.what, 600).text)
    )
}

/// Failing checks' source events: seq → the targets read from it.
fn evidence(checks: &[Check], events: &[Event], first: Option<&Pointer>) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for check in checks.iter().filter(|c| !c.passed) {
        let seqs = if check.name == golden::CHECK {
            first.map(|p| vec![p.seq]).unwrap_or_default()
        } else {
            crate::extract::evidence(&check.name, events)
        };
        for seq in seqs {
            out.entry(seq).or_default().push(check.name.clone());
        }
    }
    out
}

/// Result, target, matcher, actual value, reason and the events the value came from.
fn checks_table(checks: &[Check], evidence: &BTreeMap<u64, Vec<String>>, anchor: &Anchor, k: usize) -> String {
    if checks.is_empty() {
        return "<p class=\"muted\">No checks.</p>\n".to_string();
    }
    // where a failing value came from; a run whose checks all passed has no such column
    // (a column of dashes read as evidence that could not be found)
    let sourced = checks.iter().any(|c| !c.passed);
    let mut out = format!(
        "<table class=\"checks\">\n<thead><tr><th scope=\"col\">Result</th><th scope=\"col\">Target</th>\
         <th scope=\"col\">Matcher</th><th scope=\"col\">Actual</th><th scope=\"col\">Reason</th>{}</tr></thead>\n<tbody>\n",
        if sourced { "<th scope=\"col\">From event</th>" } else { "" }
    );
    for c in checks {
        // a golden that does not exist passes (outside CI, unless required) but compared
        // nothing: never the green of a comparison that held
        let unchecked = c.name == golden::CHECK && c.passed && c.reason == golden::NO_GOLDEN;
        let (class, label) = match (c.passed, unchecked) {
            (true, true) => ("warn", "no golden"),
            (true, false) => ("pass", "pass"),
            (false, _) => ("fail", "fail"),
        };
        let sources: Vec<String> = evidence
            .iter()
            .filter(|(_, names)| names.contains(&c.name))
            .map(|(seq, _)| format!("<a href=\"#{}\">seq {seq}</a>", anchor.seq(k, *seq)))
            .collect();
        // a failed golden check's value is the diff, drawn in full below the table
        let actual = if c.name == golden::CHECK && !c.passed {
            format!("<a href=\"#{}/diff\">the golden diff</a>", anchor.run(k))
        } else {
            value_cell(c.actual.as_ref(), c.passed)
        };
        let from = match (sourced, sources.is_empty(), c.passed) {
            (false, _, _) => String::new(),
            (true, false, _) => format!("<td>{}</td>", sources.join(" ")),
            // a passing check's value is not traced: nothing missing
            (true, true, true) => "<td></td>".to_string(),
            (true, true, false) => "<td><span class=\"muted\">–</span></td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><td><span class=\"b {class}\">{label}</span></td><td><code>{}</code></td><td>{}</td><td>{actual}</td><td>{}</td>{from}</tr>",
            esc(&c.name),
            value_cell(c.expected.as_ref(), c.passed),
            esc(&c.reason),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// A matcher or a value. A passing check's is folded when longer than
/// [`FOLDED_PREVIEW`]: it is there to confirm the check tests what it should, not news;
/// the summary shows its start.
fn value_cell(value: Option<&Value>, fold: bool) -> String {
    let Some(v) = value else {
        return "<span class=\"muted\">–</span>".to_string();
    };
    let full = shown(v, CHECK_VALUE);
    if !fold || (full.cut.is_none() && full.text.chars().count() <= FOLDED_PREVIEW) {
        return format!("<code>{}</code>", full.html());
    }
    let preview: String = full.text.chars().take(FOLDED_PREVIEW).collect();
    format!(
        "<details class=\"value\"><summary><code>{}</code>…</summary><code>{}</code></details>",
        text(&preview),
        full.html()
    )
}

/// The golden diff: counts, the first divergence, and every difference (up to
/// [`render::MAX_SHOWN`]) with its class, both seqs and the changed leaves.
fn golden_diff(
    shown_path: &str,
    diff: &Diff,
    golden: &[Event],
    events: &[Event],
    log: &str,
    anchor: &Anchor,
    k: usize,
) -> String {
    let mut out = format!(
        "<h4 id=\"{}/diff\">Golden diff</h4>\n<p>Against <code>{}</code> ({} events; this run {}): {}.</p>\n",
        anchor.run(k),
        esc(shown_path),
        golden.len(),
        events.len(),
        esc(&render::counts_line(diff))
    );
    for t in &diff.coarse_turns {
        let _ = writeln!(
            out,
            "<p class=\"muted\">{} differs in too many events to align one by one: its events are listed as missing and added.</p>",
            t.map_or_else(|| "A part outside the turns".to_string(), |t| format!("Turn {t}"))
        );
    }
    let first = diff.first_divergence().map(|d| d.step);
    out.push_str(
        "<table class=\"diff\">\n<thead><tr><th scope=\"col\">Difference</th><th scope=\"col\" class=\"num\">Golden seq</th>\
         <th scope=\"col\" class=\"num\">Actual seq</th><th scope=\"col\">Turn</th><th scope=\"col\">Event</th>\
         <th scope=\"col\">Changes (golden → actual)</th></tr></thead>\n<tbody>\n",
    );
    for d in diff.differences.iter().take(render::MAX_SHOWN) {
        let is_first = Some(d.step) == first;
        let actual = match d.actual_seq {
            Some(s) => format!("<a href=\"#{}\">{s}</a>", anchor.seq(k, s)),
            None => "–".to_string(),
        };
        let class = match d.class {
            Class::EventMissing | Class::ToolCallMissing => "fail",
            Class::EventAdded | Class::ToolCallExtra => "warn",
            Class::EventReordered | Class::PayloadChanged => "",
        };
        let mut changes = String::new();
        for c in d.changes.iter().take(MAX_CHANGES) {
            let side = |v: Option<&Value>| v.map_or_else(|| "(absent)".to_string(), |v| shown(v, 300).html());
            let _ = write!(
                changes,
                "<div><code>{}</code>: <code>{}</code> → <code>{}</code></div>",
                esc(&c.path),
                side(c.golden.as_ref()),
                side(c.actual.as_ref())
            );
        }
        if d.changes.len() > MAX_CHANGES {
            let _ = write!(changes, "<div class=\"muted\">… and {} more</div>", d.changes.len() - MAX_CHANGES);
        }
        let _ = writeln!(
            out,
            "<tr{}><td class=\"cls {class}\">{}{}</td><td class=\"num\">{}</td><td class=\"num\">{actual}</td><td>{}</td>\
             <td><code>{}</code>{}</td><td>{changes}</td></tr>",
            if is_first { " class=\"first\"" } else { "" },
            if is_first { "<span class=\"b fail\">first divergence</span><br>" } else { "" },
            d.class.as_str(),
            d.golden_seq.map_or_else(|| "–".to_string(), |s| s.to_string()),
            d.turn.map_or_else(|| "–".to_string(), |t| t.to_string()),
            d.kind,
            d.tool.as_deref().map(|t| format!(" <code>{}</code>", esc(t))).unwrap_or_default(),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    if diff.differences.len() > render::MAX_SHOWN {
        let _ = writeln!(
            out,
            "<p class=\"muted\">… and {} more differences: <code>stateval diff {} {} --format json</code> lists them all.</p>",
            diff.differences.len() - render::MAX_SHOWN,
            esc(shown_path),
            esc(log)
        );
    }
    out
}
