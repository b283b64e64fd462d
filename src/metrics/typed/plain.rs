//! The five families' everyday documents read with [`Scan`]: the same structures the
//! serde readers of [`super`] build, from lines of plain tokens only (see `scan`).
//!
//! Each reader mirrors its serde twin field for field — the same keys, each at most once,
//! the same defaults — and answers `None` for anything the twin might read differently;
//! the caller then asks the twin. The tests of [`super`] compare the two on every shape.

use std::ops::Range;

use serde_json::Value;

use crate::canon::scan::Scan;
use crate::metrics::stability::{CallKey, StabilityReport, score_calls};
use crate::metrics::trace::{MetricTrace, TracedCall, recorded_args};
use crate::metrics::trajectory::canonical::RawCall;

/// `{"outcomes": [true, false, …]}`.
pub(super) fn outcomes(text: &str) -> Option<Vec<bool>> {
    let mut s = Scan::new(text);
    let mut outcomes = None;
    s.object(|s, key| {
        if key != "outcomes" || outcomes.is_some() {
            return None;
        }
        let mut list = Vec::with_capacity(64);
        s.array(|s| {
            list.push(s.boolean()?);
            Some(())
        })?;
        outcomes = Some(list);
        Some(())
    })?;
    s.end()?;
    outcomes
}

/// A trace envelope `{"tool_calls"?, "conversation"?}`.
pub(super) fn envelope(text: &str) -> Option<PlainTrace<'_>> {
    let mut s = Scan::new(text);
    let trace = envelope_at(&mut s)?;
    s.end()?;
    Some(trace)
}

/// `{"runs": [envelope, …]}`, each run as [`super::Envelope`] gives it.
pub(super) fn across(text: &str) -> Option<Vec<MetricTrace>> {
    let mut s = Scan::new(text);
    let mut runs = None;
    s.object(|s, key| {
        if key != "runs" || runs.is_some() {
            return None;
        }
        let mut list = Vec::new();
        s.array(|s| {
            list.push(envelope_at(s)?.into_trace()?);
            Some(())
        })?;
        runs = Some(list);
        Some(())
    })?;
    s.end()?;
    runs
}

/// A trace envelope as the scanner reads it: names, servers and turn texts borrowed
/// from the line, the calls' canonical args written into one buffer.
pub(super) struct PlainTrace<'a> {
    calls: Vec<PlainCall<'a>>,
    canonical: Vec<u8>,
    /// The texts of the assistant turns that have any, in order.
    turns: Vec<&'a str>,
    total_tokens: f64,
}

/// One call: a bare name (`args` `None`) or a call object, whose canonical args are
/// `canonical[args]` (`{}` when it has none).
struct PlainCall<'a> {
    name: &'a str,
    server: Option<&'a str>,
    args: Option<Range<usize>>,
}

impl PlainTrace<'_> {
    /// [`score_trace`](crate::metrics::stability::score_trace) of this trace.
    pub(super) fn score(&self) -> Option<StabilityReport> {
        let text = std::str::from_utf8(&self.canonical).ok()?;
        let keys: Vec<CallKey<'_>> =
            self.calls.iter().map(|c| (c.name, c.server, c.args.clone().map_or("{}", |r| &text[r]))).collect();
        Some(score_calls(&keys, &self.turns, self.total_tokens))
    }

    /// The trace [`super::Envelope::into_trace`] gives.
    fn into_trace(self) -> Option<MetricTrace> {
        let text = std::str::from_utf8(&self.canonical).ok()?;
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(index, c)| match c.args {
                None => TracedCall::new(index, c.name, None, recorded_args(None)),
                Some(r) => TracedCall::with_canonical_args(
                    index,
                    c.name.to_string(),
                    c.server.map(str::to_string),
                    text[r].to_string(),
                ),
            })
            .collect();
        let assistant_turns = self.turns.into_iter().map(str::to_string).collect();
        Some(MetricTrace { tool_calls, assistant_turns, total_tokens: self.total_tokens })
    }
}

fn envelope_at<'a>(s: &mut Scan<'a>) -> Option<PlainTrace<'a>> {
    let mut trace = PlainTrace { calls: Vec::new(), canonical: Vec::new(), turns: Vec::new(), total_tokens: 0.0 };
    let (mut calls, mut conversation) = (false, false);
    s.object(|s, key| {
        match key {
            "tool_calls" if !calls => {
                calls = true;
                canonical_calls(s, &mut trace)?;
            }
            "conversation" if !conversation => {
                conversation = true;
                conversation_at(s, &mut trace)?;
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(trace)
}

/// The calls of an envelope, as [`super::Calls`] of `CanonArgs` reads them.
fn canonical_calls<'a>(s: &mut Scan<'a>, trace: &mut PlainTrace<'a>) -> Option<()> {
    trace.calls.reserve(64);
    trace.canonical.reserve(64 * 48);
    s.array(|s| {
        if s.peek()? == b'"' {
            trace.calls.push(PlainCall { name: s.string()?, server: None, args: None });
            return Some(());
        }
        let start = trace.canonical.len();
        let (mut name, mut server, mut args) = (None, None, false);
        s.object(|s, key| {
            match key {
                "name" if name.is_none() => name = Some(s.string()?),
                "server" if server.is_none() => server = Some(s.string()?),
                "args" if !args => {
                    args = true;
                    if !s.null()? {
                        s.canonical_object(&mut trace.canonical)?;
                    }
                }
                _ => return None,
            }
            Some(())
        })?;
        if trace.canonical.len() == start {
            // no args, or `null`: `{}`
            trace.canonical.extend_from_slice(b"{}");
        }
        trace.calls.push(PlainCall { name: name?, server, args: Some(start..trace.canonical.len()) });
        Some(())
    })
}

/// `{"tokens"?: {"total"?}, "turns"?: [{"role"?, "content"?}]}`: the assistant turns'
/// texts and the total tokens, as `Conversation` gives them.
fn conversation_at<'a>(s: &mut Scan<'a>, trace: &mut PlainTrace<'a>) -> Option<()> {
    let (mut tokens, mut turns) = (false, false);
    s.object(|s, key| {
        match key {
            "tokens" if !tokens => {
                tokens = true;
                let mut total = None;
                s.object(|s, key| {
                    if key != "total" || total.is_some() {
                        return None;
                    }
                    total = Some(s.number()?.as_f64()?);
                    Some(())
                })?;
                trace.total_tokens = total.filter(|t| t.is_finite() && *t > 0.0).unwrap_or(0.0);
            }
            "turns" if !turns => {
                turns = true;
                s.array(|s| {
                    let (mut role, mut content) = (None, None);
                    s.object(|s, key| {
                        match key {
                            "role" if role.is_none() => role = Some(s.string()?),
                            "content" if content.is_none() => content = Some(s.string()?),
                            _ => return None,
                        }
                        Some(())
                    })?;
                    if let (Some("assistant"), Some(text)) = (role, content)
                        && !text.is_empty()
                    {
                        trace.turns.push(text);
                    }
                    Some(())
                })?;
            }
            _ => return None,
        }
        Some(())
    })
}

/// `{"tool_calls"?, "golden"}`: the calls' recorded names (their arguments checked and
/// dropped, as `Calls` of `Skipped` reads them) and the golden block as a tree.
pub(super) fn golden_input(text: &str) -> Option<(Vec<&str>, Value)> {
    let mut s = Scan::new(text);
    let (mut names, mut seen_calls, mut golden) = (Vec::new(), false, None);
    s.object(|s, key| {
        match key {
            "tool_calls" if !seen_calls => {
                seen_calls = true;
                call_names(s, &mut names)?;
            }
            "golden" if golden.is_none() => golden = Some(s.tree()?),
            _ => return None,
        }
        Some(())
    })?;
    s.end()?;
    Some((names, golden?))
}

fn call_names<'a>(s: &mut Scan<'a>, names: &mut Vec<&'a str>) -> Option<()> {
    names.reserve(64);
    s.array(|s| {
        if s.peek()? == b'"' {
            names.push(s.string()?);
            return Some(());
        }
        let (mut name, mut server, mut args) = (None, false, false);
        s.object(|s, key| {
            match key {
                "name" if name.is_none() => name = Some(s.string()?),
                "server" if !server => {
                    server = true;
                    s.string()?;
                }
                "args" if !args => {
                    args = true;
                    s.skip()?;
                }
                _ => return None,
            }
            Some(())
        })?;
        names.push(name?);
        Some(())
    })
}

/// A trajectory line's calls with their arguments as written and their canonical text
/// (`text[spans[j]]` for call `j`), and the expectation as a tree.
pub(super) struct TrajectoryLine<'a> {
    pub calls: Vec<RawCall<'a>>,
    pub text: Vec<u8>,
    pub spans: Vec<std::ops::Range<usize>>,
    pub expected: Value,
}

/// `{"tool_calls"?, "expected"}`, as `TrajectoryInput` and `CanonicalCalls` read it.
pub(super) fn trajectory_line(text: &str) -> Option<TrajectoryLine<'_>> {
    let mut s = Scan::new(text);
    let (mut line, mut seen_calls, mut expected) =
        (TrajectoryLine { calls: Vec::new(), text: Vec::new(), spans: Vec::new(), expected: Value::Null }, false, None);
    s.object(|s, key| {
        match key {
            "tool_calls" if !seen_calls => {
                seen_calls = true;
                raw_calls(s, &mut line)?;
            }
            "expected" if expected.is_none() => expected = Some(s.tree()?),
            _ => return None,
        }
        Some(())
    })?;
    s.end()?;
    line.expected = expected?;
    Some(line)
}

fn raw_calls<'a>(s: &mut Scan<'a>, line: &mut TrajectoryLine<'a>) -> Option<()> {
    line.calls.reserve(64);
    line.text.reserve(64 * 48);
    s.array(|s| {
        let index = line.calls.len();
        let start = line.text.len();
        if s.peek()? == b'"' {
            line.calls.push(RawCall { index, name: s.string()?.into(), args: None });
            line.text.extend_from_slice(b"{}");
            line.spans.push(start..line.text.len());
            return Some(());
        }
        let (mut name, mut server, mut args) = (None, false, None);
        s.object(|s, key| {
            match key {
                "name" if name.is_none() => name = Some(s.string()?),
                "server" if !server => {
                    server = true;
                    s.string()?;
                }
                "args" if args.is_none() => {
                    line.text.truncate(start);
                    args = Some(if s.null()? { None } else { Some(s.canonical_object(&mut line.text)?) });
                }
                _ => return None,
            }
            Some(())
        })?;
        let args = args.flatten();
        if args.is_none() {
            line.text.truncate(start);
            line.text.extend_from_slice(b"{}");
        }
        line.calls.push(RawCall { index, name: name?.into(), args });
        line.spans.push(start..line.text.len());
        Some(())
    })
}
