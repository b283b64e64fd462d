//! Narrative claims beside their evidence: for a case with a `narrative` block, the
//! final answer next to the calls the run executed, each divergence linked to the
//! event that shows it (docs/metrics.md §5).
//!
//! The block's own verdict is in the checks; this view re-scores the run's final
//! answer with the default narrative options to list *which* claims and calls diverge
//! (the case's `mutating_tools`/`readonly_tools` are in the dataset, not the outcome,
//! and only change whether an item counts as mutating, not whether it is listed).

use std::fmt::Write as _;

use super::event::payload;
use super::markup::{Anchor, esc};
use crate::event::{Event, Kind};
use crate::extract::envelope::envelope;
use crate::metrics::narrative::{NarrativeItem, NarrativeOptions, final_answer, score_narrative};
use crate::metrics::trace::MetricTrace;
use crate::outcome::CaseOutcome;

/// The name of the metric block this view explains.
const BLOCK: &str = "narrative";

/// Does `case` grade its narrative?
pub fn applies(case: &CaseOutcome) -> bool {
    case.blocks.iter().any(|b| b.name == BLOCK)
}

/// The final answer and every divergence, linked to its event.
pub fn section(events: &[Event], passed: bool, anchor: &Anchor, k: usize) -> String {
    let envelope = envelope(events, passed);
    let trace = MetricTrace::read(&envelope);
    let answer = final_answer(&envelope, &trace);
    let report = score_narrative(&answer, &trace.tool_calls, &NarrativeOptions::default());
    let executed: Vec<u64> = events.iter().filter(|e| e.kind == Kind::ToolExecuted).map(|e| e.seq).collect();
    let answered = events.iter().rev().find(|e| e.kind == Kind::TurnCompleted).map(|e| e.seq);
    let link = |seq: Option<u64>| match seq {
        Some(s) => format!("<a href=\"#{}\">seq {s}</a>", anchor.seq(k, s)),
        None => "<span class=\"muted\">–</span>".to_string(),
    };
    let mut out = format!(
        "<h4>Narrative vs trace</h4>\n<p>Final answer ({}): {}</p>\n<p class=\"muted\">{}</p>\n",
        link(answered),
        payload(&serde_json::Value::String(answer.clone())),
        esc(&report.summary())
    );
    if report.items.is_empty() {
        out.push_str("<p class=\"muted\">Every executed call is accounted for and every claim has a call.</p>\n");
        return out;
    }
    out.push_str(
        "<table class=\"narrative\">\n<thead><tr><th scope=\"col\">Divergence</th><th scope=\"col\">Claim or call</th>\
         <th scope=\"col\">Evidence</th></tr></thead>\n<tbody>\n",
    );
    for item in &report.items {
        let (what, subject, evidence) = match item {
            NarrativeItem::ClaimedButAbsent { action, .. } => (
                "claimed but absent",
                format!("<code>{}</code> <span class=\"muted\">(no executed call matches)</span>", esc(action)),
                link(answered),
            ),
            NarrativeItem::PresentButUnclaimed { call_index, tool, .. } => (
                "executed but not narrated",
                format!("<code>{}</code>", esc(tool)),
                link(executed.get(*call_index).copied()),
            ),
            NarrativeItem::ArgMismatch { call_index, tool, key, value, .. } => (
                "argument misstated",
                format!("<code>{}</code> <code>{}</code> = {}", esc(tool), esc(key), payload(value)),
                link(executed.get(*call_index).copied()),
            ),
        };
        let _ = writeln!(out, "<tr><td class=\"fail\">{what}</td><td>{subject}</td><td>{evidence}</td></tr>");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}
