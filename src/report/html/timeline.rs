//! A run's timeline, turn by turn, with the state after each turn.
//!
//! Each turn is a `<details>`: its summary says what happened in it (the input, how
//! many events, denials, faults, flags, differences from the golden), its body lists
//! the events — model calls with their recording position and a drift badge when the
//! request no longer matched the recording, tool proposals, policy verdicts,
//! executions with their faults and deduplication, security flags — each with a bar
//! placing it in the run's virtual time. After the events comes the state at the end
//! of the turn (memory, sandbox, approvals, folded with [`crate::event::fold`]) as the
//! change from the turn before, and in full when it changed.
//!
//! Size: a run of more than [`FOLD_EVENTS`] events opens only the turn of its first
//! divergence; a run of more than [`VIRTUAL_TURNS`] turns is virtualised (its turns are
//! JSON the page's script draws as they scroll into view, see `report.js`); a run of
//! more than [`MAX_RUN_EVENTS`] embeds only the turns around its first divergence and
//! its first and last turns, and names the command that shows the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::ops::Range;

use super::event::what;
use super::markup::{Anchor, esc, plural, thousands};
use super::state::State;
use crate::event::payload as p;
use crate::event::{Event, Kind};

/// A run with more events than this opens only the turn of its first divergence: a
/// reviewer starts there, and a browser lays out far less.
pub const FOLD_EVENTS: usize = 300;
/// A run with more turns than this is *virtualised*: its turns, folded but for the
/// first divergence's, are embedded as JSON and the page's script puts only those in
/// view into the DOM, so a 1,000-turn run costs the browser what 20 turns do. Below
/// it, turns are plain markup (readable without the script, found by find-in-page).
pub const VIRTUAL_TURNS: usize = 30;
/// A run with more events than this embeds only the turns that matter (see the module
/// doc). A 1,000-turn long-horizon run has ~8,000: virtualised, it is embedded whole;
/// the report's detail budget bounds the bytes.
pub const MAX_RUN_EVENTS: usize = 20_000;
/// Characters of a turn's input in its summary line.
const SUMMARY_INPUT: usize = 100;

/// What to point out in a run's timeline.
#[derive(Debug, Default)]
pub struct Marks {
    /// The first divergent event.
    pub first: Option<u64>,
    /// Events that differ from the golden.
    pub diffs: BTreeSet<u64>,
    /// Events a failing check's value came from → the checks' targets.
    pub evidence: BTreeMap<u64, Vec<String>>,
}

/// Which events share a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// Before the first turn (`run_started`, manifest checks).
    Pre,
    Turn(u32),
    /// After the last turn (`run_completed`).
    Post,
}

impl Label {
    fn key(self) -> String {
        match self {
            Label::Pre => "pre".into(),
            Label::Turn(t) => t.to_string(),
            Label::Post => "post".into(),
        }
    }

    fn title(self) -> String {
        match self {
            Label::Pre => "Before the first turn".into(),
            Label::Turn(t) => format!("Turn {t}"),
            Label::Post => "After the last turn".into(),
        }
    }
}

struct Group {
    label: Label,
    range: Range<usize>,
}

fn groups(events: &[Event]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut seen_turn = false;
    for (i, e) in events.iter().enumerate() {
        let label = match e.turn {
            Some(t) => {
                seen_turn = true;
                Label::Turn(t)
            }
            None if seen_turn => Label::Post,
            None => Label::Pre,
        };
        match out.last_mut() {
            Some(g) if g.label == label => g.range.end = i + 1,
            _ => out.push(Group { label, range: i..i + 1 }),
        }
    }
    out
}

/// What rows need to know about the whole run.
pub struct Context<'a> {
    pub anchor: &'a Anchor,
    pub k: usize,
    /// The run's virtual length, for the bars (at least 1).
    pub span: u64,
    /// Recording positions whose request drifted from the recording.
    pub drift: BTreeSet<u64>,
    pub marks: &'a Marks,
    /// What each model call was sent, by the seq of its `context_compiled`.
    pub sent: BTreeMap<u64, String>,
}

impl Context<'_> {
    /// A link to another event of the same run.
    pub fn link(&self, seq: u64) -> String {
        format!("<a href=\"#{}\">seq {seq}</a>", self.anchor.seq(self.k, seq))
    }
}

/// The timeline of run `k` (its events verified), as `<details>` per turn. `log` is how
/// the report names the log file, for the commands it suggests; `prompt_known` says
/// whether the run's system prompt is drawn above it (model calls link to it).
pub fn timeline(anchor: &Anchor, k: usize, events: &[Event], marks: &Marks, log: &str, prompt_known: bool) -> String {
    let groups = groups(events);
    let drift = events
        .iter()
        .filter(|e| e.kind == Kind::ReplayDiverged)
        .filter_map(|e| e.view::<p::ReplayDiverged>().position.as_u64())
        .collect();
    let span = events.iter().map(|e| e.t).max().unwrap_or(0).max(1);
    let sent = super::sent::contexts(anchor, k, events, prompt_known);
    let ctx = Context { anchor, k, span, drift, marks, sent };

    let focus_seq = marks.first.or_else(|| marks.evidence.keys().next().copied());
    let focus = focus_seq.and_then(|s| groups.iter().position(|g| events[g.range.clone()].iter().any(|e| e.seq == s)));
    let embedded = embedded_groups(events, &groups, focus);
    let virtual_list = groups.len() > VIRTUAL_TURNS;
    let fold_all = virtual_list || events.len() > FOLD_EVENTS;

    let mut out = String::new();
    if embedded.len() < groups.len() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">This run has {} events: the turns around its first divergence and its first and last \
             turns are embedded; <code>stateval show {} --at-turn N</code> shows any other.</p>",
            thousands(events.len() as u64),
            esc(log)
        );
    }
    let mut state = State::default();
    let mut items = Vec::with_capacity(if virtual_list { groups.len() } else { 0 });
    for (n, group) in groups.iter().enumerate() {
        let slice = &events[group.range.clone()];
        let state_html = state.advance(slice, group.label);
        let mut html = String::new();
        let open = !fold_all || Some(n) == focus;
        if !embedded.contains(&n) {
            let _ = writeln!(
                html,
                "<details class=\"turn\" id=\"{}\"><summary>{} · {} event{} <span class=\"muted\">(not embedded)</span>\
                 </summary><p class=\"muted\"><code>stateval show {} --at-turn {}</code></p></details>",
                anchor.turn(k, &group.label.key()),
                group.label.title(),
                slice.len(),
                plural(slice.len()),
                esc(log),
                group.label.key()
            );
        } else {
            let _ = writeln!(
                html,
                "<details class=\"turn\" id=\"{}\"{}><summary>{}</summary>\n<ol class=\"ev\">",
                anchor.turn(k, &group.label.key()),
                if open { " open" } else { "" },
                summary(group.label, slice, &ctx)
            );
            for e in slice {
                html.push_str(&row(e, &ctx));
            }
            html.push_str("</ol>\n");
            html.push_str(&state_html);
            html.push_str("</details>\n");
        }
        if virtual_list {
            let (first, last) = (slice.first().map_or(0, |e| e.seq), slice.last().map_or(0, |e| e.seq));
            items.push(Item { key: group.label.key(), first, last, open: open && embedded.contains(&n), html });
        } else {
            out.push_str(&html);
        }
    }
    if virtual_list {
        out.push_str(&virtual_turns(anchor, k, &items, log));
    }
    out
}

/// One turn of a virtualised run, as the script reads it.
struct Item {
    /// The turn's anchor key (`pre`, `7`, `post`).
    key: String,
    /// The seqs it holds, for deep links to an event not in the DOM.
    first: u64,
    last: u64,
    open: bool,
    /// Its `<details>`, exactly as an ordinary run draws it.
    html: String,
}

/// The turns of a long run as one JSON array (`[key, first seq, last seq, open, html]`
/// per turn) in a data block the script renders from, with a line saying so for a
/// reader without the script. A data block is not a script: the page's policy does
/// not run it, and the HTML inside was escaped like the rest of the page. In the
/// JSON, `</` is written `<\/` and `<!--` as `\u003c!--`, so nothing in it can end the
/// block (`</script>`) or change how the parser reads it.
fn virtual_turns(anchor: &Anchor, k: usize, items: &[Item], log: &str) -> String {
    let data: Vec<serde_json::Value> =
        items.iter().map(|i| serde_json::json!([i.key, i.first, i.last, u8::from(i.open), i.html])).collect();
    let json = serde_json::to_string(&data).unwrap_or_else(|_| "[]".to_string());
    let json = json.replace("</", "<\\/").replace("<!--", "\\u003c!--");
    format!(
        "<div class=\"vlist\" id=\"{id}/turns\">\n\
         <p class=\"muted vnote\">This run's {n} turns are drawn by the page's script as they scroll into view \
         (it is switched off); <code>stateval show {} --at-turn N</code> shows any of them.</p>\n\
         <script type=\"application/json\">{json}</script>\n</div>\n",
        esc(log),
        id = anchor.run(k),
        n = thousands(items.len() as u64),
    )
}

/// Which groups to embed: all, unless the run is over [`MAX_RUN_EVENTS`]; then the
/// focus group and its neighbours, the first error's, and the first and last groups.
fn embedded_groups(events: &[Event], groups: &[Group], focus: Option<usize>) -> BTreeSet<usize> {
    if events.len() <= MAX_RUN_EVENTS {
        return (0..groups.len()).collect();
    }
    let error = groups.iter().position(|g| events[g.range.clone()].iter().any(|e| e.kind == Kind::Error));
    let mut keep = BTreeSet::new();
    let last = groups.len().saturating_sub(1);
    for centre in [focus, error].into_iter().flatten() {
        keep.extend(centre.saturating_sub(1)..=(centre + 1).min(last));
    }
    keep.extend([0, 1.min(last), last.saturating_sub(1), last]);
    keep
}

/// A turn's summary line: title, input, events, virtual time, and what stands out.
fn summary(label: Label, events: &[Event], ctx: &Context) -> String {
    let mut out = format!("<strong>{}</strong>", label.title());
    if let Some(input) =
        events.iter().find(|e| e.kind == Kind::TurnStarted).and_then(|e| e.view::<p::TurnStarted>().input.as_str())
    {
        let cut: String = input.chars().take(SUMMARY_INPUT).collect();
        let more = if cut.len() < input.len() { "…" } else { "" };
        let _ = write!(out, " <q>{}{more}</q>", esc(&cut));
    }
    let (from, to) = (events.first().map_or(0, |e| e.t), events.last().map_or(0, |e| e.t));
    let _ = write!(
        out,
        " <span class=\"muted\">· {} event{} · t {}–{} ms</span> ",
        events.len(),
        plural(events.len()),
        thousands(from),
        thousands(to)
    );
    let count = |f: &dyn Fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
    let verdict = |e: &Event, v: &str| {
        e.kind == Kind::PolicyDecided && e.view::<p::PolicyDecided>().verdict.as_str().as_deref() == Some(v)
    };
    let badges: [(usize, &str, &str); 6] = [
        (count(&|e| verdict(e, "deny")), "fail", "denied"),
        (count(&|e| verdict(e, "escalate")), "warn", "escalated"),
        (count(&|e| e.kind == Kind::ToolExecuted && !e.view::<p::ToolExecuted>().fault.is_null()), "warn", "fault"),
        (count(&|e| e.kind == Kind::SecurityFlagged), "fail", "flag"),
        (count(&|e| e.kind == Kind::Error || e.kind == Kind::ReplayDiverged), "fail", "error"),
        (count(&|e| ctx.marks.diffs.contains(&e.seq)), "warn", "golden diff"),
    ];
    for (n, class, what) in badges.into_iter().filter(|(n, _, _)| *n > 0) {
        let _ = write!(out, "<span class=\"b {class}\">{n} {what}</span>");
    }
    if ctx.marks.first.is_some_and(|s| events.iter().any(|e| e.seq == s)) {
        out.push_str("<span class=\"b fail\">first divergence</span>");
    }
    out
}

/// One event: seq (its own link), virtual time, a bar, kind, and what happened.
fn row(e: &Event, ctx: &Context) -> String {
    let id = ctx.anchor.seq(ctx.k, e.seq);
    // rows are most of a report's bytes: classes only where they mark something, and
    // the cells are told apart by element (a, span, s, b, div), not by class
    let class = match (ctx.marks.diffs.contains(&e.seq), ctx.marks.first == Some(e.seq)) {
        (_, true) => " class=\"diff first\"",
        (true, false) => " class=\"diff\"",
        (false, false) => "",
    };
    let duration = match e.kind {
        Kind::ModelCalled => e.view::<p::ModelCalled>().latency_ms.as_u64(),
        Kind::ToolExecuted => e.view::<p::ToolExecuted>().duration_ms.as_u64(),
        _ => None,
    }
    .unwrap_or(0);
    let start = e.t.saturating_sub(duration);
    let offset = (start * 100 / ctx.span).min(100);
    let width = (duration * 100).div_ceil(ctx.span).min(100 - offset);
    let mut what = what(e, ctx);
    if let Some(sent) = ctx.sent.get(&e.seq) {
        what.push_str(sent);
    }
    if ctx.marks.first == Some(e.seq) {
        what.insert_str(0, "<span class=\"b fail\">first divergence</span>");
    }
    if let Some(targets) = ctx.marks.evidence.get(&e.seq) {
        let list: Vec<String> = targets.iter().map(|t| format!("<code>{}</code>", esc(t))).collect();
        let _ = write!(what, "<div class=\"fail\">failing check reads this event: {}</div>", list.join(", "));
    }
    format!(
        "<li id=\"{id}\"{class}><a href=\"#{id}\">{}</a><span>{}</span><s><i class=\"o{offset} w{width}\"></i></s>\
         <b>{}</b><div>{what}</div></li>\n",
        e.seq,
        thousands(e.t),
        e.kind.as_str(),
    )
}
