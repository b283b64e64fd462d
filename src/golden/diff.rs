//! The structural diff of two event logs: which events correspond, and how every
//! difference is classified.
//!
//! Lines of a log cannot be diffed as text: one inserted event changes every later
//! `seq`, `prev` and `hash`. So events are aligned first, on a key of kind and tool
//! (`tool_executed transfer`), with Myers' shortest edit script ([`super::align`]),
//! turn by turn: turns are aligned on their numbers, then the events inside each pair
//! of turns. An event of one log without a counterpart is then *added* or *missing*
//! (a `tool_executed` one is a *tool call* extra or missing: what the agent observably
//! did), unless an identical event sits elsewhere in the other log (*reordered*).
//! Aligned events whose content differs are *payload changed*, with a JSON Pointer per
//! differing leaf.
//!
//! Three parts of an event are not compared as written, so that one cause gives one
//! difference and not a cascade:
//! - `seq`, `prev`, `hash` are positions and chain links, derived from everything else.
//! - `t` is compared as the virtual time since the previous event of the same log: one
//!   slower model call is one difference, not a shift of every later timestamp. That
//!   time is signed ([`elapsed`]): in a log whose clock goes back, a later event is
//!   still later in one log than in the other, and elapsed times add up, so equal
//!   elapsed times all along mean equal timestamps.
//! - Seq references (`source`, `supersedes` in `data`) are mapped through the
//!   alignment: a memory write whose source event moved from seq 6 to seq 7 because
//!   an event was inserted before it still points at the same event.
//!
//! The *first divergence* is the earliest difference in alignment order, so everything
//! before it is identical in both logs and its seq is the same in both. One exception
//! keeps it useful: input digests in `run_started` (the case line, profile, manifest,
//! recording) change whenever an input is edited, and would otherwise always be the
//! first divergence. They are reported (and counted) as a payload change, and named as
//! [`Diff::changed_inputs`], but the first divergence is the first difference in what
//! the run did, when there is one.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use serde::Serialize;
use serde_json::Value;

use super::align::{self, EditStep, MAX_EDITS};
use crate::canon;
use crate::event::{Event, Kind};

/// Fields of `data` that hold the seq of another event of the same log.
pub(crate) const SEQ_REFERENCES: [&str; 2] = ["source", "supersedes"];
/// Fields of `run_started` that are content digests of the run's inputs.
const INPUT_DIGESTS: [&str; 4] = ["dataset_line", "profile", "recording", "tools"];

/// What kind of difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// An event of the golden has no counterpart in the actual log.
    EventMissing,
    /// An event of the actual log has no counterpart in the golden.
    EventAdded,
    /// The same event (kind and data) sits at another place.
    EventReordered,
    /// A `tool_executed` of the golden did not happen.
    ToolCallMissing,
    /// A `tool_executed` happened that the golden does not have.
    ToolCallExtra,
    /// Aligned events whose content differs.
    PayloadChanged,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::EventMissing => "event missing",
            Class::EventAdded => "event added",
            Class::EventReordered => "event reordered",
            Class::ToolCallMissing => "tool call missing",
            Class::ToolCallExtra => "tool call extra",
            Class::PayloadChanged => "payload changed",
        }
    }
}

/// One differing leaf of an aligned pair of events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// JSON Pointer into the event (`/data/result/status`, `/t`, `/turn`).
    pub path: String,
    /// The golden's value; absent when the golden has nothing at `path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub golden: Option<Value>,
    /// The actual value; absent when the actual log has nothing at `path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<Value>,
}

/// One classified difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub class: Class,
    /// Seq of the event in the golden (absent for an added event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub golden_seq: Option<u64>,
    /// Seq of the event in the actual log (absent for a missing event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_seq: Option<u64>,
    /// The event's turn (the golden's for a missing event).
    pub turn: Option<u32>,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Payload changes, one per differing leaf (empty for other classes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Index in [`Diff::steps`] where it first shows; orders differences.
    #[serde(skip)]
    pub step: usize,
    /// For a reordered event, the step of its other place.
    #[serde(skip)]
    pub also_at: Option<usize>,
}

/// The diff of a golden and an actual log.
#[derive(Debug, Clone)]
pub struct Diff {
    pub golden_events: usize,
    pub actual_events: usize,
    /// In alignment order: the first is the first divergence.
    pub differences: Vec<Difference>,
    /// The alignment, for rendering context around differences.
    pub steps: Vec<EditStep>,
    /// Turns whose events differed too much to align one by one (more than
    /// [`MAX_EDITS`] edits): their events are all missing and added, or reordered.
    pub coarse_turns: Vec<Option<u32>>,
}

impl Difference {
    /// Only input digests of `run_started` changed: what went in differs, not yet what
    /// the run did.
    pub fn inputs_only(&self) -> bool {
        self.class == Class::PayloadChanged
            && self.kind == Kind::RunStarted.as_str()
            && self.changes.iter().all(|c| input_digest(&c.path).is_some())
    }
}

fn input_digest(path: &str) -> Option<&str> {
    path.strip_prefix("/data/").filter(|f| INPUT_DIGESTS.contains(f))
}

impl Diff {
    pub fn is_identical(&self) -> bool {
        self.differences.is_empty()
    }

    /// The first difference in what the run did, or else the first difference.
    pub fn first_divergence(&self) -> Option<&Difference> {
        self.differences.iter().find(|d| !d.inputs_only()).or(self.differences.first())
    }

    /// Inputs whose digests differ (`recording`, `profile`, …), in field order.
    pub fn changed_inputs(&self) -> Vec<&str> {
        let started = self.differences.iter().filter(|d| d.class == Class::PayloadChanged && d.kind == "run_started");
        started.flat_map(|d| d.changes.iter().filter_map(|c| input_digest(&c.path))).collect()
    }

    /// How many differences of each class, in class order.
    pub fn counts(&self) -> std::collections::BTreeMap<Class, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for d in &self.differences {
            *counts.entry(d.class).or_insert(0) += 1;
        }
        counts
    }
}

/// Align and compare two logs (both already verified).
pub fn diff(golden: &[Event], actual: &[Event]) -> Diff {
    diff_around(golden, actual, None)
}

/// Events both logs held at the same seqs, identical pair by pair, and left out of the
/// slices given to [`diff_around`] (a streamed diff does not keep them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// Seq of the first event left out, the same in both logs.
    pub seq: u64,
    /// How many events were left out of each log.
    pub len: u64,
}

/// [`diff`] of two logs whose events `gap` are left out of both slices. The caller
/// vouches that the events left out are identical pair by pair, with the same seqs,
/// in whole turns, and that the turns kept on either side of the gap differ in number;
/// the result is then the diff of the whole logs, with steps counted over the slices.
pub fn diff_around(golden: &[Event], actual: &[Event], gap: Option<Gap>) -> Diff {
    let (steps, coarse_turns) = align_by_turn(golden, actual);
    let mut by_index: Vec<Option<u64>> = vec![None; actual.len()];
    for s in &steps {
        if let EditStep::Keep(i, j) = *s {
            by_index[j] = Some(golden[i].seq);
        }
    }
    let actual_to_golden = SeqMap { by_index, gap };

    let mut differences = Vec::new();
    let mut missing: Vec<(usize, usize)> = Vec::new();
    let mut added: Vec<(usize, usize)> = Vec::new();
    for (n, s) in steps.iter().enumerate() {
        match *s {
            EditStep::Keep(i, j) => {
                let changes = compare(golden, i, actual, j, &actual_to_golden);
                if !changes.is_empty() {
                    let (g, a) = (Some(golden[i].seq), Some(actual[j].seq));
                    differences.push(difference(Class::PayloadChanged, &actual[j], g, a, n, changes));
                }
            }
            EditStep::Delete(i) => missing.push((i, n)),
            EditStep::Insert(j) => added.push((j, n)),
        }
    }

    // an event missing here and added there with the same kind and data was moved
    // (kind, canonical data) → the missing events with that content: (index, step)
    let mut unmatched: HashMap<ContentKey, VecDeque<(usize, usize)>> = HashMap::new();
    for &(i, n) in &missing {
        unmatched.entry(content_key(&golden[i])).or_default().push_back((i, n));
    }
    let mut moved = vec![false; golden.len()];
    for &(j, n) in &added {
        let e = &actual[j];
        match unmatched.get_mut(&content_key(e)).and_then(VecDeque::pop_front) {
            Some((i, m)) => {
                moved[i] = true;
                let (g, a) = (Some(golden[i].seq), Some(e.seq));
                let mut d = difference(Class::EventReordered, e, g, a, n.min(m), Vec::new());
                d.also_at = Some(n.max(m));
                differences.push(d);
            }
            None => {
                let class = if e.kind == Kind::ToolExecuted { Class::ToolCallExtra } else { Class::EventAdded };
                differences.push(difference(class, e, None, Some(e.seq), n, Vec::new()));
            }
        }
    }
    for &(i, n) in missing.iter().filter(|(i, _)| !moved[*i]) {
        let e = &golden[i];
        let class = if e.kind == Kind::ToolExecuted { Class::ToolCallMissing } else { Class::EventMissing };
        differences.push(difference(class, e, Some(e.seq), None, n, Vec::new()));
    }
    differences.sort_by_key(|d| d.step);
    let left_out = gap.map_or(0, |g| g.len as usize);
    Diff {
        golden_events: golden.len() + left_out,
        actual_events: actual.len() + left_out,
        differences,
        steps,
        coarse_turns,
    }
}

/// Which golden event an actual event's seq corresponds to, through the alignment and
/// across a [`Gap`] (whose events correspond seq for seq).
struct SeqMap {
    /// By index into the actual slice: the golden seq it is aligned with.
    by_index: Vec<Option<u64>>,
    gap: Option<Gap>,
}

impl SeqMap {
    fn golden_seq(&self, actual_seq: u64) -> Option<u64> {
        let index = match self.gap {
            Some(g) if actual_seq >= g.seq + g.len => actual_seq - g.len,
            Some(g) if actual_seq >= g.seq => return Some(actual_seq),
            _ => actual_seq,
        };
        self.by_index.get(usize::try_from(index).ok()?).copied().flatten()
    }
}

/// Turn, kind, tool and call id come from `event`: the actual one, or the golden's
/// when it is missing.
fn difference(
    class: Class,
    event: &Event,
    golden_seq: Option<u64>,
    actual_seq: Option<u64>,
    step: usize,
    changes: Vec<Change>,
) -> Difference {
    Difference {
        class,
        golden_seq,
        actual_seq,
        turn: event.turn,
        kind: event.kind.as_str(),
        tool: event.data.member("tool").as_str().map(Cow::into_owned),
        call_id: event.data.member("call_id").as_str().map(Cow::into_owned),
        changes,
        step,
        also_at: None,
    }
}

/// What events are aligned on.
#[derive(PartialEq)]
struct Key<'a> {
    kind: Kind,
    tool: Option<Cow<'a, str>>,
}

fn key(e: &Event) -> Key<'_> {
    Key { kind: e.kind, tool: e.data.member("tool").as_str() }
}

/// An event's kind and canonical data: equal keys are the same event.
type ContentKey = (Kind, Vec<u8>);

fn content_key(e: &Event) -> ContentKey {
    (e.kind, e.data.as_bytes().to_vec())
}

/// Runs of consecutive events with the same turn, and that turn.
fn turns(events: &[Event]) -> (Vec<Range<usize>>, Vec<Option<u32>>) {
    let (mut ranges, mut labels) = (Vec::new(), Vec::new());
    let mut start = 0;
    for i in 1..=events.len() {
        if i == events.len() || events[i].turn != events[start].turn {
            ranges.push(start..i);
            labels.push(events[start].turn);
            start = i;
        }
    }
    (ranges, labels)
}

/// Align turns on their numbers, then events within each pair of turns.
fn align_by_turn(golden: &[Event], actual: &[Event]) -> (Vec<EditStep>, Vec<Option<u32>>) {
    let (mut g_turns, g_labels) = turns(golden);
    let (mut a_turns, a_labels) = turns(actual);
    let turn_steps = align::align(&g_labels, &a_labels, MAX_EDITS).unwrap_or_else(|| {
        // turn numbers beyond aligning (not a log the runtime writes): one section each
        g_turns = std::iter::once(0..golden.len()).collect();
        a_turns = std::iter::once(0..actual.len()).collect();
        vec![EditStep::Keep(0, 0)]
    });
    let mut steps = Vec::with_capacity(golden.len().max(actual.len()));
    let mut coarse = Vec::new();
    for t in turn_steps {
        match t {
            EditStep::Keep(gt, at) => {
                let (g, a) = (g_turns[gt].clone(), a_turns[at].clone());
                let g_keys: Vec<Key> = golden[g.clone()].iter().map(key).collect();
                let a_keys: Vec<Key> = actual[a.clone()].iter().map(key).collect();
                match align::align(&g_keys, &a_keys, MAX_EDITS) {
                    Some(inner) => steps.extend(inner.into_iter().map(|s| match s {
                        EditStep::Keep(i, j) => EditStep::Keep(g.start + i, a.start + j),
                        EditStep::Delete(i) => EditStep::Delete(g.start + i),
                        EditStep::Insert(j) => EditStep::Insert(a.start + j),
                    })),
                    None => {
                        coarse.push(golden.get(g.start).and_then(|e| e.turn));
                        steps.extend(g.map(EditStep::Delete));
                        steps.extend(a.map(EditStep::Insert));
                    }
                }
            }
            EditStep::Delete(gt) => steps.extend(g_turns[gt].clone().map(EditStep::Delete)),
            EditStep::Insert(at) => steps.extend(a_turns[at].clone().map(EditStep::Insert)),
        }
    }
    (steps, coarse)
}

/// Changes between aligned events `golden[i]` and `actual[j]`.
fn compare(golden: &[Event], i: usize, actual: &[Event], j: usize, actual_to_golden: &SeqMap) -> Vec<Change> {
    let (g, a) = (&golden[i], &actual[j]);
    let mut changes = Vec::new();
    if g.turn != a.turn {
        changes.push(Change { path: "/turn".into(), golden: Some(g.turn.into()), actual: Some(a.turn.into()) });
    }
    let since_previous = |events: &[Event], k: usize| elapsed(events[k].t, if k == 0 { 0 } else { events[k - 1].t });
    if since_previous(golden, i) != since_previous(actual, j) {
        changes.push(Change { path: "/t".into(), golden: Some(g.t.into()), actual: Some(a.t.into()) });
    }
    // canonical bytes are equal exactly when the data are equal as JSON
    if g.data == a.data && same_references(g, a, actual_to_golden) {
        // the common case, decided without allocating
        return changes;
    }
    match (g.data.tree(), a.data.tree()) {
        (Value::Object(gm), Value::Object(am)) => {
            let mut keys: Vec<&String> = gm.keys().chain(am.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let (gv, av) = (gm.get(k), am.get(k));
                let path = format!("/data/{}", escape(k));
                if SEQ_REFERENCES.contains(&k.as_str())
                    && let (Some(Value::Number(gs)), Some(Value::Number(as_))) = (gv, av)
                    && let (Some(gs), Some(as_)) = (gs.as_u64(), as_.as_u64())
                {
                    let same_event = actual_to_golden.golden_seq(as_) == Some(gs);
                    if !same_event {
                        changes.push(Change { path, golden: gv.cloned(), actual: av.cloned() });
                    }
                    continue;
                }
                diff_values(gv, av, path, &mut changes);
            }
        }
        (gd, ad) => diff_values(Some(&gd), Some(&ad), "/data".into(), &mut changes),
    }
    changes
}

/// The virtual time from `previous` to `t`, negative when the clock went back. Not
/// clamped at zero: a clamp would make a time that goes back by 50 and one that goes
/// back by 43 compare equal, and the sum of elapsed times over a run of events would
/// no longer be the time across it (which a streamed diff's gap relies on).
pub(crate) fn elapsed(t: u64, previous: u64) -> i128 {
    i128::from(t) - i128::from(previous)
}

/// Every seq reference of `actual` points at the counterpart of the event `golden`'s
/// points at.
fn same_references(golden: &Event, actual: &Event, actual_to_golden: &SeqMap) -> bool {
    SEQ_REFERENCES.iter().all(|k| match (golden.data.member(k).as_u64(), actual.data.member(k).as_u64()) {
        (Some(g), Some(a)) => actual_to_golden.golden_seq(a) == Some(g),
        _ => true,
    })
}

/// Every differing leaf between two values, by JSON Pointer (`""` is the whole value),
/// with arrays compared index by index: the payload comparison of aligned events, for
/// any two JSON values (the HTML report shows the state change between turns with it;
/// there `golden` is the earlier value and `actual` the later).
pub fn value_changes(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    diff_values(Some(before), Some(after), String::new(), &mut out);
    out
}

/// Every differing leaf under `path`; arrays are compared index by index.
fn diff_values(golden: Option<&Value>, actual: Option<&Value>, path: String, out: &mut Vec<Change>) {
    match (golden, actual) {
        (Some(Value::Object(g)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = g.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff_values(g.get(k), a.get(k), format!("{path}/{}", escape(k)), out);
            }
        }
        (Some(Value::Array(g)), Some(Value::Array(a))) => {
            for n in 0..g.len().max(a.len()) {
                diff_values(g.get(n), a.get(n), format!("{path}/{n}"), out);
            }
        }
        (Some(g), Some(a)) if canon::json_eq(g, a) => {}
        (None, None) => {}
        (g, a) => out.push(Change { path, golden: g.cloned(), actual: a.cloned() }),
    }
}

/// A JSON Pointer reference token (RFC 6901 §3).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;
