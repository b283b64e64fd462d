//! The state after each turn — memory, sandbox, approvals, folded one event at a time
//! with [`crate::event::fold`] — shown as the change from the turn before (leaf by
//! leaf, as JSON Pointers) and, when it changed, in full.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::event::payload;
use super::markup::{self, esc, plural};
use super::timeline::Label;
use crate::event::Event;
use crate::event::fold;
use crate::golden::diff::{Change, value_changes};

/// State changes listed for one turn before the rest are counted.
const MAX_STATE_CHANGES: usize = 40;
/// Bytes of the full state shown after a turn.
const STATE_LIMIT: usize = 8 * 1024;

/// The folds, advanced one group of events at a time.
#[derive(Default)]
pub struct State {
    memory: fold::Memory,
    sandbox: Value,
    approvals: fold::Approvals,
    /// The first effect that did not apply (the fold stops changing the sandbox).
    sandbox_error: Option<String>,
    /// The state after the previous group, as JSON.
    previous: Option<Value>,
}

impl State {
    /// Fold `events`; for a turn (or the start), the state block to show after it.
    pub fn advance(&mut self, events: &[Event], label: Label) -> String {
        for e in events {
            fold::apply_memory(&mut self.memory, e);
            fold::apply_approval(&mut self.approvals, e);
            if self.sandbox_error.is_none()
                && let Err(err) = fold::apply_sandbox(&mut self.sandbox, e)
            {
                self.sandbox_error = Some(err);
            }
        }
        let now = json!({
            "memory": fold::memory_values(&self.memory),
            "sandbox": self.sandbox,
            "approvals": fold::approvals_values(&self.approvals),
        });
        let before =
            self.previous.replace(now.clone()).unwrap_or_else(|| json!({"memory": {}, "sandbox": {}, "approvals": {}}));
        let title = match label {
            Label::Pre => "State before the first turn".to_string(),
            Label::Turn(t) => format!("State after turn {t}"),
            Label::Post => return String::new(),
        };
        let changes = leaves(value_changes(&before, &now));
        let mut out = format!("<div class=\"state\"><p><strong>{title}</strong>");
        if changes.is_empty() {
            out.push_str(" <span class=\"muted\">· unchanged</span></p>\n");
        } else {
            let _ = write!(
                out,
                " <span class=\"muted\">· {} change{}</span></p>\n<ul>\n",
                changes.len(),
                plural(changes.len())
            );
            for c in changes.iter().take(MAX_STATE_CHANGES) {
                let (class, text) = match (&c.golden, &c.actual) {
                    (None, Some(a)) => ("add", payload(a)),
                    (Some(b), None) => ("del", format!("removed (was {})", payload(b))),
                    (Some(b), Some(a)) => ("chg", format!("{} → {}", payload(b), payload(a))),
                    (None, None) => continue,
                };
                let _ = writeln!(out, "<li class=\"{class}\"><code>{}</code>: {text}</li>", esc(&c.path));
            }
            if changes.len() > MAX_STATE_CHANGES {
                let _ = writeln!(out, "<li>… and {} more</li>", changes.len() - MAX_STATE_CHANGES);
            }
            out.push_str("</ul>\n");
            let full = markup::pretty(&now, STATE_LIMIT);
            let _ = writeln!(
                out,
                "<details><summary>memory, sandbox and approvals in full</summary><pre>{}</pre></details>",
                full.html()
            );
        }
        if let Some(err) = &self.sandbox_error {
            let _ = writeln!(out, "<p class=\"fail\">sandbox: {}</p>", esc(err));
        }
        out.push_str("</div>\n");
        out
    }
}

/// Changes with an added or removed object spelled out key by key (`/memory/semantic`
/// added whole reads better as `/memory/semantic/payee` added).
fn leaves(changes: Vec<Change>) -> Vec<Change> {
    let mut out = Vec::with_capacity(changes.len());
    for c in changes {
        match (&c.golden, &c.actual) {
            (None, Some(Value::Object(m))) if !m.is_empty() => {
                spell(&c.path, m, &mut |path, v| out.push(Change { path, golden: None, actual: Some(v.clone()) }));
            }
            (Some(Value::Object(m)), None) if !m.is_empty() => {
                spell(&c.path, m, &mut |path, v| out.push(Change { path, golden: Some(v.clone()), actual: None }));
            }
            _ => out.push(c),
        }
    }
    out
}

/// Calls `f` with the pointer and value of every leaf under `map` (non-empty objects
/// are descended, everything else is a leaf).
fn spell(path: &str, map: &serde_json::Map<String, Value>, f: &mut dyn FnMut(String, &Value)) {
    for (k, v) in map {
        let path = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
        match v {
            Value::Object(inner) if !inner.is_empty() => spell(&path, inner, f),
            v => f(path, v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_added_whole_is_listed_leaf_by_leaf() {
        let changes =
            leaves(value_changes(&json!({"memory": {}}), &json!({"memory": {"semantic": {"a/b": 1, "c": {}}}})));
        let paths: Vec<(&str, Option<&Value>)> = changes.iter().map(|c| (c.path.as_str(), c.actual.as_ref())).collect();
        assert_eq!(paths, [("/memory/semantic/a~1b", Some(&json!(1))), ("/memory/semantic/c", Some(&json!({})))]);
    }
}
