//! Rendering a [`Diff`]: a unified diff of events for people (PR comments, terminals)
//! and JSON with the same findings for machines.
//!
//! The text form follows unified diff conventions so a ```` ```diff ```` block colours
//! it: `-` is the golden's, `+` the actual log's, `!` an aligned event whose payload
//! changed (its changed leaves follow as `-`/`+` pairs, by JSON Pointer), and each
//! hunk (`@@`) shows three aligned events of context either side. Events are shown by
//! seq in each log (golden, actual), turn, virtual time, kind and tool; an added or
//! missing event also shows its data. `prev` and `hash` never appear: they differ
//! after the first divergence by construction and say nothing a reviewer can use.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::align::{EditStep, MAX_EDITS};
use super::diff::{Class, Diff, Difference};
use crate::canon;
use crate::canon::Digest;
use crate::event::Event;

/// Aligned events of context shown before and after each difference.
pub const CONTEXT: usize = 3;
/// Differences the text form shows before it points at `--format json` for the rest
/// (a diverged 100,000-event log is read from its first divergence, not in full).
pub const MAX_SHOWN: usize = 50;
/// Characters of a value or of an event's data shown on one line of text.
const MAX_VALUE_CHARS: usize = 160;

/// One log of the comparison, as rendered.
pub struct Side<'a> {
    /// How the log is named (its path as given).
    pub label: &'a str,
    /// The events the diff's steps index: the whole log, or what a streamed diff kept
    /// of it (`golden::stream`).
    pub events: &'a [Event],
    /// Events in the whole log.
    pub total: usize,
    /// The hash of its last event.
    pub head: Option<Digest>,
}

impl<'a> Side<'a> {
    /// A log held whole.
    pub fn whole(label: &'a str, events: &'a [Event]) -> Self {
        Side { label, events, total: events.len(), head: events.last().map(|e| e.hash) }
    }
}

/// A difference in one line: the first divergence in a check's reason.
pub fn one_line(d: &Difference) -> String {
    let at = match (d.golden_seq, d.actual_seq) {
        (Some(g), Some(a)) if g != a && d.class != Class::EventReordered => format!("seq {a} (golden seq {g})"),
        (Some(g), Some(a)) => format!("seq {}", g.min(a)),
        (Some(s), None) | (None, Some(s)) => format!("seq {s}"),
        (None, None) => "seq ?".to_string(),
    };
    let what = match d.class {
        Class::PayloadChanged => match d.changes.first() {
            Some(c) => {
                let more =
                    if d.changes.len() > 1 { format!(" (+{} more)", d.changes.len() - 1) } else { String::new() };
                format!(
                    "payload changed at {}: {} → {}{more}",
                    c.path,
                    shown(c.golden.as_ref()),
                    shown(c.actual.as_ref())
                )
            }
            None => "payload changed".to_string(),
        },
        Class::EventReordered => format!(
            "event reordered (golden seq {} is seq {} here)",
            d.golden_seq.unwrap_or_default(),
            d.actual_seq.unwrap_or_default()
        ),
        Class::ToolCallMissing | Class::ToolCallExtra => match &d.call_id {
            Some(id) => format!("{} (call {id})", d.class.as_str()),
            None => d.class.as_str().to_string(),
        },
        Class::EventMissing | Class::EventAdded => d.class.as_str().to_string(),
    };
    format!("{at} ({}, {}): {what}", turn(d.turn), kind_and_tool(d.kind, d.tool.as_deref()))
}

/// `2 differences (1 payload changed, 1 event added)`, and the inputs whose digests
/// changed (`; inputs changed: recording`).
pub fn counts_line(diff: &Diff) -> String {
    let n = diff.differences.len();
    let parts: Vec<String> = diff.counts().iter().map(|(c, k)| format!("{k} {}", c.as_str())).collect();
    let inputs = diff.changed_inputs();
    let inputs = if inputs.is_empty() { String::new() } else { format!("; inputs changed: {}", inputs.join(", ")) };
    format!("{n} difference{} ({}){inputs}", if n == 1 { "" } else { "s" }, parts.join(", "))
}

/// The unified text diff.
pub fn text(diff: &Diff, golden: &Side, actual: &Side) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "--- golden {} ({} events)", golden.label, golden.total);
    let _ = writeln!(out, "+++ actual {} ({} events)", actual.label, actual.total);
    let Some(first) = diff.first_divergence() else {
        let _ = writeln!(out, "identical: {} events", golden.total);
        return out;
    };
    let _ = writeln!(out, "first divergence: {}", one_line(first));
    let _ = writeln!(out, "{}", counts_line(diff));
    for t in &diff.coarse_turns {
        let _ = writeln!(
            out,
            "note: {} differs in more than {MAX_EDITS} events; its events are listed as missing and added",
            turn(*t)
        );
    }

    // which difference each step shows (a reordered event shows at both its places)
    let shown_diffs = &diff.differences[..diff.differences.len().min(MAX_SHOWN)];
    let mut marks: BTreeMap<usize, &Difference> = BTreeMap::new();
    for d in shown_diffs {
        marks.insert(d.step, d);
        if let Some(other) = d.also_at {
            marks.insert(other, d);
        }
    }
    let width = golden.total.max(actual.total).max(1).to_string().len();
    for hunk in hunks(marks.keys().copied(), diff.steps.len()) {
        write_hunk(&mut out, diff, &marks, hunk, golden, actual, width);
    }
    if diff.differences.len() > MAX_SHOWN {
        let _ = writeln!(
            out,
            "… and {} more differences (`stateval diff --format json` lists them all)",
            diff.differences.len() - MAX_SHOWN
        );
    }
    out
}

/// Step ranges to print: each marked step with [`CONTEXT`] around it, overlaps merged.
fn hunks(marked: impl Iterator<Item = usize>, steps: usize) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for m in marked {
        let range = m.saturating_sub(CONTEXT)..(m + CONTEXT + 1).min(steps);
        match out.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

fn write_hunk(
    out: &mut String,
    diff: &Diff,
    marks: &BTreeMap<usize, &Difference>,
    hunk: std::ops::Range<usize>,
    golden: &Side,
    actual: &Side,
    width: usize,
) {
    let steps = &diff.steps[hunk.clone()];
    let span = |seqs: Vec<u64>| match (seqs.iter().min(), seqs.iter().max()) {
        (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        _ => "none".to_string(),
    };
    let g_seqs = steps.iter().filter_map(|s| match *s {
        EditStep::Keep(i, _) | EditStep::Delete(i) => Some(golden.events[i].seq),
        EditStep::Insert(_) => None,
    });
    let a_seqs = steps.iter().filter_map(|s| match *s {
        EditStep::Keep(_, j) | EditStep::Insert(j) => Some(actual.events[j].seq),
        EditStep::Delete(_) => None,
    });
    let _ = writeln!(out, "@@ golden seq {}, actual seq {} @@", span(g_seqs.collect()), span(a_seqs.collect()));
    let dot = |w: usize| format!("{:>w$}", ".");
    for (n, s) in hunk.zip(steps) {
        let mark = marks.get(&n);
        match *s {
            EditStep::Keep(i, j) => {
                let e = &actual.events[j];
                let changed = mark.filter(|d| d.class == Class::PayloadChanged);
                let marker = if changed.is_some() { '!' } else { ' ' };
                let _ = writeln!(out, "{marker} {:>width$} {:>width$}  {}", golden.events[i].seq, e.seq, describe(e));
                for c in changed.map(|d| d.changes.as_slice()).unwrap_or_default() {
                    let pad = " ".repeat(2 * width + 3);
                    let _ = writeln!(out, "-{pad}{}: {}", c.path, shown(c.golden.as_ref()));
                    let _ = writeln!(out, "+{pad}{}: {}", c.path, shown(c.actual.as_ref()));
                }
            }
            EditStep::Delete(i) => {
                let e = &golden.events[i];
                let note = match mark {
                    Some(d) if d.class == Class::EventReordered => {
                        format!("  (reordered: seq {} in actual)", d.actual_seq.unwrap_or_default())
                    }
                    _ => format!("  {}", data(e)),
                };
                let _ = writeln!(out, "- {:>width$} {}  {}{note}", e.seq, dot(width), describe(e));
            }
            EditStep::Insert(j) => {
                let e = &actual.events[j];
                let note = match mark {
                    Some(d) if d.class == Class::EventReordered => {
                        format!("  (reordered: seq {} in golden)", d.golden_seq.unwrap_or_default())
                    }
                    _ => format!("  {}", data(e)),
                };
                let _ = writeln!(out, "+ {} {:>width$}  {}{note}", dot(width), e.seq, describe(e));
            }
        }
    }
}

/// `turn 1  t 1500  tool_executed transfer`.
fn describe(e: &Event) -> String {
    format!(
        "{:<7} t {:<6} {}",
        turn(e.turn),
        e.t,
        kind_and_tool(e.kind.as_str(), e.data.member("tool").as_str().as_deref())
    )
}

fn turn(turn: Option<u32>) -> String {
    turn.map_or_else(|| "turn -".to_string(), |t| format!("turn {t}"))
}

fn kind_and_tool(kind: &str, tool: Option<&str>) -> String {
    match tool {
        Some(t) => format!("{kind} {t}"),
        None => kind.to_string(),
    }
}

fn data(e: &Event) -> String {
    clip(e.data.as_str().to_string())
}

/// A value on one line: canonical JSON, clipped; `(absent)` when there is none.
fn shown(value: Option<&Value>) -> String {
    match value {
        Some(v) => clip(canon::to_canonical_string(v).unwrap_or_default()),
        None => "(absent)".to_string(),
    }
}

fn clip(text: String) -> String {
    match text.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// One log in the JSON form.
#[derive(Serialize)]
struct SideJson<'a> {
    path: &'a str,
    events: usize,
    head: Option<String>,
}

impl<'a> SideJson<'a> {
    fn of(side: &Side<'a>) -> Self {
        SideJson { path: side.label, events: side.total, head: side.head.map(|h| h.to_string()) }
    }
}

/// Where the logs first differ, in the JSON form.
#[derive(Serialize)]
struct FirstJson<'a> {
    /// Where the run first did something else: every event before it is identical,
    /// input digests in `run_started` aside (see [`Diff::first_divergence`]).
    seq: u64,
    turn: Option<u32>,
    kind: &'a str,
    class: Class,
    summary: String,
}

#[derive(Serialize)]
struct DiffJson<'a> {
    identical: bool,
    golden: SideJson<'a>,
    actual: SideJson<'a>,
    first_divergence: Option<FirstJson<'a>>,
    counts: BTreeMap<Class, usize>,
    /// `run_started` input digests that differ (`recording`, `profile`, …).
    changed_inputs: Vec<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    coarse_turns: &'a [Option<u32>],
    differences: &'a [Difference],
}

/// The JSON form: the same findings as [`text`], every difference in full.
pub fn json(diff: &Diff, golden: &Side, actual: &Side) -> serde_json::Result<String> {
    let first = diff.first_divergence().map(|d| FirstJson {
        seq: d.golden_seq.into_iter().chain(d.actual_seq).min().unwrap_or_default(),
        turn: d.turn,
        kind: d.kind,
        class: d.class,
        summary: one_line(d),
    });
    let body = DiffJson {
        identical: diff.is_identical(),
        golden: SideJson::of(golden),
        actual: SideJson::of(actual),
        first_divergence: first,
        counts: diff.counts(),
        changed_inputs: diff.changed_inputs(),
        coarse_turns: &diff.coarse_turns,
        differences: &diff.differences,
    };
    serde_json::to_string_pretty(&body)
}
