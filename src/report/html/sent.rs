//! What the model was sent: the system prompt once per run, and at each model call the
//! context the runtime compiled — its sections' tokens, the memory view, and which
//! messages of the conversation were in the window.
//!
//! The log does not hold the request document itself (only its digest, on
//! `model_called`), but everything in it is in the log or the run's profile: the
//! messages are the user inputs (`turn_started`), the model's responses
//! (`model_called`) and the results of the calls it proposed (`tool_proposed`, one
//! message each), in order; the memory view is the memory fold at that point, the
//! one the runtime digests. So each call's context is shown by *reference* — the seqs
//! of the messages in its window, the memory view only when it changed since the call
//! before, the system prompt by a link to the run's one copy — rather than repeating
//! text the timeline already holds: a 1,000-turn run stays the size of its events.
//!
//! The count is checked against the log: `context_compiled` records how many messages
//! were sent and how many dropped, and when the conversation rebuilt from the events
//! has another length (a handoff's nested conversation, a foreign log), the block says
//! so and shows only what the event recorded.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::event::payload;
use super::markup::{Anchor, plural, thousands};
use crate::event::payload as p;
use crate::event::{Event, Kind, fold};

/// The system prompt the run was given, when it is known: an imported trace carries it
/// on `run_started`; a built-in run's comes from its agent profile (see
/// [`super::Logs::system_prompt`]).
pub fn system_prompt(events: &[Event], from_profile: Option<String>) -> Option<String> {
    let started = events.iter().find(|e| e.kind == Kind::RunStarted)?;
    let system = started.view::<p::RunStarted>().system;
    if let Some(text) = system.as_str() {
        return Some(text.into_owned());
    }
    if system.raw().starts_with('[') {
        let parts: Vec<_> = system.items().iter().filter_map(|part| part.as_str()).collect();
        return Some(parts.join("\n\n"));
    }
    from_profile
}

/// The run's one copy of its system prompt, folded, under `…/run/K/system` (each call's
/// context links to it).
pub fn system_block(anchor: &Anchor, k: usize, prompt: Option<&str>) -> String {
    let id = format!("{}/system", anchor.run(k));
    match prompt {
        Some(text) => format!(
            "<details class=\"sent\" id=\"{id}\"><summary>System prompt <span class=\"muted\">· {} characters · \
             sent with every model call of this run, with the tool manifest its <code>run_started</code> names by \
             digest</span></summary><pre>{}</pre></details>\n",
            thousands(text.chars().count() as u64),
            super::markup::text(text)
        ),
        None => format!(
            "<p class=\"muted\" id=\"{id}\">System prompt: not in the log, and the run's agent profile was not at hand \
             when this report was written (or has changed since the run); each model call's context still counts \
             its tokens.</p>\n"
        ),
    }
}

/// For each `context_compiled` event (by seq), a folded block: what the model call it
/// prepared was sent.
pub fn contexts(anchor: &Anchor, k: usize, events: &[Event], prompt_known: bool) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let mut memory = fold::Memory::default();
    // the conversation so far: (seq, what) per message
    let mut messages: Vec<(u64, Kind)> = Vec::new();
    let mut last_view: Option<(String, u64)> = None;
    for e in events {
        match e.kind {
            Kind::TurnStarted | Kind::ModelCalled | Kind::ToolProposed => messages.push((e.seq, e.kind)),
            Kind::ContextCompiled => {
                let view = fold::memory_values(&memory);
                let canonical = crate::canon::to_canonical_string(&view).unwrap_or_else(|_| view.to_string());
                let unchanged = last_view.as_ref().filter(|(before, _)| *before == canonical).map(|(_, seq)| *seq);
                out.insert(e.seq, block(anchor, k, e, &messages, &view, unchanged, prompt_known));
                if unchanged.is_none() {
                    last_view = Some((canonical, e.seq));
                }
            }
            _ => {}
        }
        fold::apply_memory(&mut memory, e);
    }
    out
}

fn block(
    anchor: &Anchor,
    k: usize,
    e: &Event,
    messages: &[(u64, Kind)],
    view: &Value,
    unchanged_since: Option<u64>,
    prompt_known: bool,
) -> String {
    // one of these per model call: short, and the tokens are on the event's own line
    let link = |seq: u64| format!("<a href=\"#{}\">seq {seq}</a>", anchor.seq(k, seq));
    let mut out = String::from("<details class=\"sent\"><summary>what the model was sent</summary>");
    if prompt_known {
        let _ = write!(out, "<a href=\"#{}/system\">the system prompt</a>", anchor.run(k));
    } else {
        out.push_str("the system prompt");
    }
    out.push_str(", the tool manifest, memory ");
    match unchanged_since {
        Some(seq) => {
            let _ = write!(out, "as at {}", link(seq));
        }
        None => out.push_str(&payload(view)),
    }
    let compiled: p::ContextCompiled = e.view();
    let sent = compiled.messages.as_u64().unwrap_or(0) as usize;
    let dropped = compiled.dropped.as_u64().unwrap_or(0) as usize;
    if sent + dropped == messages.len() && sent > 0 {
        let window = &messages[dropped..];
        let count = |kind: Kind| window.iter().filter(|(_, k)| *k == kind).count();
        let _ = write!(
            out,
            " and {} message{}, {}–{} <span class=\"muted\">({} user, {} model, {} tool)</span>",
            thousands(sent as u64),
            plural(sent),
            link(window[0].0),
            link(window[window.len() - 1].0),
            count(Kind::TurnStarted),
            count(Kind::ModelCalled),
            count(Kind::ToolProposed)
        );
        if dropped > 0 {
            let _ = write!(out, "; {} older dropped to fit the budget", thousands(dropped as u64));
        }
    } else {
        let _ = write!(
            out,
            " and {sent} message{}, {dropped} dropped <span class=\"muted\">(which ones this log cannot tell: it holds \
             {} before this call)</span>",
            plural(sent),
            messages.len()
        );
    }
    // every value above is a number, a link, or escaped by `payload`
    out.push_str("</details>");
    out
}
