//! Typed reading of the `stateval metric` documents graded in bulk (docs/metrics.md §9):
//! stability, stability-across, reliability, trajectory and golden-path.
//!
//! [`cli::run`](super::cli::run) reads a document as a `serde_json::Value` tree and then
//! walks it; on a batch of thousands of traces building that tree is most of the time.
//! Here a document of the everyday shape is read straight into the structures the metric
//! needs — only the fields it reads, call arguments kept as a tree only where a metric
//! compares them — and its output is written straight to bytes.
//!
//! Design choice: this is a fast path, never a second contract. [`grade`] answers only
//! for a document it reads completely — the keys of the everyday shape, each at most once
//! (serde's derive refuses a repeated field; trees and skipped values refuse repeated keys
//! too), the types the metric reads. Anything else — an unknown key, a `trace` or `floors`
//! wrapper, an `arguments` alias, a wrong type, a syntax error — returns `false` and the
//! caller grades the text the generic way, which gives the same output or the located
//! error it always gave. So the output of every input is the generic path's, byte for
//! byte (the tests below compare the two).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::golden_path::{GoldenPath, score_names};
use super::reliability::score_outcomes;
use super::stability::{Floors, StabilityReport, drift_flags, score_across, score_trace};
use super::trace::{MetricTrace, TracedCall, content_text, recorded_args};
use super::trajectory::canonical::{CanonicalCalls, RawCall};
use super::trajectory::{Diff, ExpectedTrace, Mismatch, validate_recorded};
use crate::diag::StrictValue;

mod plain;

/// Grade `text` (one JSON document) with metric `name`, appending its output object to
/// `out`, when the document has the everyday shape of that metric. `false` (and `out`
/// as it was) when it does not, or for another metric: grade it the generic way then.
pub fn grade(name: &str, text: &str, out: &mut Vec<u8>) -> bool {
    grade_plain(name, text, out) || grade_serde(name, text, out)
}

/// [`grade`] of a document of plain tokens only, read by [`Scan`](crate::canon::scan::Scan) (`plain`);
/// `false` (and `out` as it was) for any other.
fn grade_plain(name: &str, text: &str, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let written = match name {
        "stability" => plain::envelope(text).and_then(|trace| trace.score()).is_some_and(|r| stability(&r, out)),
        "stability-across" if text.len() < PARALLEL_READ => plain::across(text).is_some_and(|runs| across(&runs, out)),
        "reliability" => plain::outcomes(text).is_some_and(|outcomes| reliability(Outcomes { outcomes }, out)),
        "trajectory" => plain::trajectory_line(text).is_some_and(|line| plain_trajectory(line, out)),
        "golden-path" => plain::golden_input(text).is_some_and(|(names, golden)| golden_path(&names, &golden, out)),
        _ => false,
    };
    if !written {
        out.truncate(start);
    }
    written
}

/// [`grade`] of a document read by the serde readers below.
fn grade_serde(name: &str, text: &str, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let written = match name {
        "stability" => read::<Envelope>(text).is_some_and(|e| stability(&score_trace(&e.into_trace()), out)),
        "stability-across" => read_across(text).is_some_and(|runs| across(&runs, out)),
        "reliability" => read::<Outcomes>(text).is_some_and(|o| reliability(o, out)),
        "trajectory" => read::<TrajectoryInput>(text).is_some_and(|t| trajectory(t, out)),
        "golden-path" => read::<GoldenInput>(text).is_some_and(|g| {
            let calls = g.tool_calls.map(|c| c.0).unwrap_or_default();
            golden_path(&calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), &g.golden.0, out)
        }),
        _ => false,
    };
    if !written {
        out.truncate(start);
    }
    written
}

/// The whole of `text` as a `T`, or `None` (a syntax error, trailing text, a shape `T`
/// does not read).
fn read<'de, T: Deserialize<'de>>(text: &'de str) -> Option<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(value)
}

// ---- inputs -------------------------------------------------------------------------

/// A trace envelope: `{"tool_calls"?, "conversation"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    #[serde(default)]
    tool_calls: Option<Calls<CanonArgs>>,
    #[serde(default, borrow)]
    conversation: Option<Conversation<'a>>,
}

impl Envelope<'_> {
    /// The trace [`MetricTrace::read`] would give for the same envelope.
    fn into_trace(self) -> MetricTrace {
        let (assistant_turns, total_tokens) = match self.conversation {
            Some(c) => {
                let total = c.total_tokens();
                (c.assistant_turns(), total)
            }
            None => (Vec::new(), 0.0),
        };
        MetricTrace { tool_calls: self.tool_calls.map(|c| c.0).unwrap_or_default(), assistant_turns, total_tokens }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Conversation<'a> {
    #[serde(default)]
    tokens: Option<Tokens>,
    #[serde(default, borrow)]
    turns: Option<Vec<Turn<'a>>>,
}

impl Conversation<'_> {
    fn total_tokens(&self) -> f64 {
        self.tokens.as_ref().and_then(|t| t.total).filter(|t| t.is_finite() && *t > 0.0).unwrap_or(0.0)
    }

    fn assistant_turns(self) -> Vec<String> {
        self.turns
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.role.as_deref() == Some("assistant"))
            .map(|t| match t.content {
                Some(Content::Text(text)) => text.into_owned(),
                Some(Content::Other(StrictValue(content))) => content_text(&content),
                None => String::new(),
            })
            .filter(|text| !text.is_empty())
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tokens {
    #[serde(default)]
    total: Option<f64>,
}

/// A turn: its role and text are borrowed from the line (a user turn is never copied).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn<'a> {
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<Content<'a>>,
}

/// A turn's `content`: text, or blocks (any other value) read as a tree.
enum Content<'a> {
    Text(Cow<'a, str>),
    Other(StrictValue),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("turn content")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Content<'de>, E> {
                Ok(Content::Text(Cow::Owned(text.to_string())))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Content<'de>, E> {
                Ok(Content::Other(StrictValue(Value::Bool(v))))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Content<'de>, E> {
                Ok(Content::Other(StrictValue(Value::from(v))))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Content<'de>, E> {
                Ok(Content::Other(StrictValue(Value::from(v))))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Content<'de>, E> {
                Ok(Content::Other(StrictValue(Value::from(v))))
            }
            fn visit_unit<E>(self) -> Result<Content<'de>, E> {
                Ok(Content::Other(StrictValue(Value::Null)))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> Result<Content<'de>, S::Error> {
                StrictValue::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Content::Other)
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Content<'de>, M::Error> {
                StrictValue::deserialize(MapAccessDeserializer::new(map)).map(Content::Other)
            }
        }
        d.deserialize_any(ContentVisitor)
    }
}

/// `{"runs": [envelope, …]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Across<'a> {
    #[serde(borrow)]
    runs: Vec<Envelope<'a>>,
}

/// [`Across`] with each run kept as written, to be read as an [`Envelope`] on its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcrossRaw<'a> {
    #[serde(borrow)]
    runs: Vec<&'a RawValue>,
}

/// A document at least this long has its runs read on every core.
const PARALLEL_READ: usize = 1 << 20;

/// The runs of a `stability-across` document as traces, or `None` when it (or one of its
/// runs) does not have the everyday shape. A small one is read in one pass; a large one
/// is checked as JSON once, then its runs, each a slice of it, are read on every core,
/// in order.
fn read_across(text: &str) -> Option<Vec<MetricTrace>> {
    if text.len() < PARALLEL_READ {
        // one pass: a batch line is small, and read twice it would cost twice
        return Some(read::<Across>(text)?.runs.into_iter().map(Envelope::into_trace).collect());
    }
    let runs = read::<AcrossRaw>(text)?.runs;
    let trace = |run: &&RawValue| read::<Envelope>(run.get()).map(Envelope::into_trace);
    crate::par::in_parallel(&runs, trace).into_iter().collect()
}

/// `{"outcomes": [true, false, …]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Outcomes {
    outcomes: Vec<bool>,
}

/// `{"tool_calls"?, "expected": {…}}`: each call's arguments are kept as written (a
/// slice of the line) and judged from their canonical text (`trajectory::canonical`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrajectoryInput<'a> {
    #[serde(default, borrow)]
    tool_calls: Option<RawCalls<'a>>,
    expected: StrictValue,
}

/// A `tool_calls` array whose entries are all calls, arguments left unparsed.
struct RawCalls<'a>(Vec<RawCall<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for RawCalls<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = RawCalls<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of tool calls")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<RawCalls<'de>, S::Error> {
                let mut calls = Vec::with_capacity(64);
                while let Some(RawEntry(name, args)) = seq.next_element()? {
                    calls.push(RawCall { index: calls.len(), name, args: args.map(RawValue::get) });
                }
                Ok(RawCalls(calls))
            }
        }
        d.deserialize_seq(Entries)
    }
}

/// A name, or `{"name", "server"?, "args"?}` with the args as written.
struct RawEntry<'a>(Cow<'a, str>, Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for RawEntry<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Object<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
            #[serde(default, borrow)]
            #[allow(dead_code)]
            // read for its type: a server that is not a string is left to the tree reader
            server: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            args: Option<&'a RawValue>,
        }
        struct Entry;
        impl<'de> Visitor<'de> for Entry {
            type Value = RawEntry<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool name or a call object")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<RawEntry<'de>, E> {
                Ok(RawEntry(Cow::Borrowed(name), None))
            }
            fn visit_str<E>(self, name: &str) -> Result<RawEntry<'de>, E> {
                Ok(RawEntry(Cow::Owned(name.to_string()), None))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<RawEntry<'de>, M::Error> {
                let call = Object::deserialize(MapAccessDeserializer::new(map))?;
                Ok(RawEntry(call.name, call.args))
            }
        }
        d.deserialize_any(Entry)
    }
}

/// `{"tool_calls"?, "golden": {…}}`: the golden path reads names only, so arguments are
/// checked (well-formed, no repeated key) and dropped.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoldenInput {
    #[serde(default)]
    tool_calls: Option<Calls<Skipped>>,
    golden: StrictValue,
}

/// What a call's arguments are read into: a tree, their canonical text, or nothing.
trait Args: Sized {
    fn into_call(index: usize, name: String, server: Option<String>, args: Option<Self>) -> TracedCall;
}

impl Args for StrictValue {
    fn into_call(index: usize, name: String, server: Option<String>, args: Option<Self>) -> TracedCall {
        TracedCall::new(index, name, server, recorded_args(args.map(|v| v.0)))
    }
}

impl Args for CanonArgs {
    fn into_call(index: usize, name: String, server: Option<String>, args: Option<Self>) -> TracedCall {
        let canonical = args.map_or_else(|| "{}".to_string(), |a| a.0);
        TracedCall::with_canonical_args(index, name, server, canonical)
    }
}

impl Args for Skipped {
    /// The arguments are never read by the metric that skips them: left `{}`.
    fn into_call(index: usize, name: String, server: Option<String>, _: Option<Self>) -> TracedCall {
        TracedCall::new(index, name, server, recorded_args(None))
    }
}

/// A `tool_calls` array whose entries are all calls: a name, or `{"name", "server"?,
/// "args"?}`. Any other entry (which the generic reader would skip, keeping the indices
/// of the rest) is not read here.
struct Calls<A>(Vec<TracedCall>, std::marker::PhantomData<A>);

impl<'de, A: Deserialize<'de> + Args> Deserialize<'de> for Calls<A> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(CallsVisitor(std::marker::PhantomData))
    }
}

struct CallsVisitor<A>(std::marker::PhantomData<A>);

impl<'de, A: Deserialize<'de> + Args> Visitor<'de> for CallsVisitor<A> {
    type Value = Calls<A>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of tool calls")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Calls<A>, S::Error> {
        // serde_json gives no length: start where a batch line usually is, not at 4
        let mut calls = Vec::with_capacity(seq.size_hint().unwrap_or(64));
        while let Some(entry) = seq.next_element_seed(EntrySeed::<A>(calls.len(), std::marker::PhantomData))? {
            calls.push(entry);
        }
        Ok(Calls(calls, std::marker::PhantomData))
    }
}

struct EntrySeed<A>(usize, std::marker::PhantomData<A>);

impl<'de, A: Deserialize<'de> + Args> de::DeserializeSeed<'de> for EntrySeed<A> {
    type Value = TracedCall;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<TracedCall, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, A: Deserialize<'de> + Args> Visitor<'de> for EntrySeed<A> {
    type Value = TracedCall;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool name or a call object")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<TracedCall, E> {
        Ok(TracedCall::new(self.0, name, None, recorded_args(None)))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<TracedCall, M::Error> {
        let call = CallObject::<A>::deserialize(MapAccessDeserializer::new(map))?;
        Ok(A::into_call(self.0, call.name, call.server, call.args))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallObject<A> {
    name: String,
    #[serde(default)]
    server: Option<String>,
    #[serde(default = "none")]
    args: Option<A>,
}

fn none<A>() -> Option<A> {
    None
}

/// Any JSON value, read and dropped, with a repeated key in any object refused as the
/// strict reader refuses it.
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skipped;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Skipped, S::Error> {
        while seq.next_element::<Skipped>()?.is_some() {}
        Ok(Skipped)
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Skipped, M::Error> {
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        let mut many: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(Key(key)) = map.next_key()? {
            // a handful of keys is searched in place; a big object is hashed
            let repeated = if keys.len() < 16 {
                let seen = keys.contains(&key);
                keys.push(key);
                seen
            } else {
                if many.is_empty() {
                    many.extend(keys.iter().cloned());
                }
                !many.insert(key)
            };
            if repeated {
                return Err(de::Error::custom("duplicate key"));
            }
            map.next_value::<Skipped>()?;
        }
        Ok(Skipped)
    }
}

/// A call's arguments as their RFC 8785 canonical text (what [`TracedCall::canonical_args`]
/// gives), written while they are parsed instead of from a tree. Refused, so that the
/// generic path reads them: a string (an OpenAI-style encoded object), an integer beyond
/// ±(2^53−1) (canonical text falls back to another form there), a repeated key.
struct CanonArgs(String);

impl<'de> Deserialize<'de> for CanonArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::with_capacity(64);
        d.deserialize_any(Canon { out: &mut out, top: true })?;
        // canonical text is built from whole strings and ASCII punctuation
        String::from_utf8(out).map(CanonArgs).map_err(de::Error::custom)
    }
}

/// Append the canonical text of the arguments `raw` (JSON text) to `out`, as
/// [`CanonArgs`] reads them; `false` where it refuses them.
pub(crate) fn canonical_into(raw: &str, out: &mut Vec<u8>) -> bool {
    let mut de = serde_json::Deserializer::from_str(raw);
    de.deserialize_any(Canon { out, top: true }).is_ok() && de.end().is_ok()
}

/// Writes the canonical text of the value it visits to `out`.
struct Canon<'a> {
    out: &'a mut Vec<u8>,
    top: bool,
}

impl<'de> de::DeserializeSeed<'de> for Canon<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Canon<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tool call arguments")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.number(serde_json::Number::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.number(serde_json::Number::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        let n = serde_json::Number::from_f64(v).ok_or_else(|| E::custom("number is not finite"))?;
        self.number(n)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if self.top {
            return Err(E::custom("string arguments are decoded by the generic reader"));
        }
        crate::canon::write_canonical_str(self.out, v);
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        self.out.push(b'[');
        let mut first = true;
        loop {
            let mark = self.out.len();
            if !std::mem::take(&mut first) {
                self.out.push(b',');
            }
            if seq.next_element_seed(Canon { out: &mut *self.out, top: false })?.is_none() {
                self.out.truncate(mark);
                break;
            }
        }
        self.out.push(b']');
        Ok(())
    }
    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        // Each member is written as `"key":value` in input order, then the members are
        // moved into key order when they are not in it already (the canonical form sorts
        // by UTF-16 code units; byte order gives the same answer unless a key holds a
        // character at or above U+E000).
        let body = self.out.len() + 1;
        self.out.push(b'{');
        let mut members = Members::default();
        while let Some(Key(key)) = map.next_key()? {
            if members.len() > 0 {
                self.out.push(b',');
            }
            let start = self.out.len();
            crate::canon::write_canonical_str(self.out, &key);
            self.out.push(b':');
            map.next_value_seed(Canon { out: &mut *self.out, top: false })?;
            members.push((key, start, self.out.len()));
        }
        let members = members.as_mut_slice();
        let by_bytes = !members.iter().any(|(k, _, _)| k.chars().any(|c| c >= '\u{E000}'));
        let sorted = if by_bytes {
            members.is_sorted_by(|a, b| a.0 < b.0)
        } else {
            members.is_sorted_by(|a, b| a.0.encode_utf16().lt(b.0.encode_utf16()))
        };
        if !sorted {
            if by_bytes {
                members.sort_by(|a, b| a.0.cmp(&b.0));
            } else {
                members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            }
            if members.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(de::Error::custom("duplicate key"));
            }
            SCRATCH.with_borrow_mut(|scratch| {
                scratch.clear();
                scratch.extend_from_slice(&self.out[body..]);
                self.out.truncate(body);
                for (i, (_, start, end)) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    self.out.extend_from_slice(&scratch[start - body..end - body]);
                }
            });
        }
        self.out.push(b'}');
        Ok(())
    }
}

thread_local! {
    /// The members of an object being put in key order, copied aside.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An object's members while its canonical text is written: each key and where its
/// `"key":value` lies. The first few are kept in place, without an allocation.
#[derive(Default)]
struct Members<'de> {
    few: [(Cow<'de, str>, usize, usize); 8],
    count: usize,
    many: Vec<(Cow<'de, str>, usize, usize)>,
}

impl<'de> Members<'de> {
    fn len(&self) -> usize {
        self.count + self.many.len()
    }

    fn push(&mut self, member: (Cow<'de, str>, usize, usize)) {
        if self.many.is_empty() && self.count < self.few.len() {
            self.few[self.count] = member;
            self.count += 1;
        } else {
            if self.many.is_empty() {
                self.many.extend(self.few.iter_mut().map(std::mem::take));
                self.count = 0;
            }
            self.many.push(member);
        }
    }

    fn as_mut_slice(&mut self) -> &mut [(Cow<'de, str>, usize, usize)] {
        if self.many.is_empty() { &mut self.few[..self.count] } else { &mut self.many }
    }
}

impl Canon<'_> {
    fn number<E: de::Error>(self, n: serde_json::Number) -> Result<(), E> {
        if crate::canon::write_canonical_number(self.out, &n) {
            Ok(())
        } else {
            Err(E::custom("an integer is outside ±(2^53−1)"))
        }
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

// ---- metrics and outputs ------------------------------------------------------------
//
// Each output struct lists the generic path's keys in their printed (sorted) order, with
// the same JSON types: counts as integers, booleans as 0/1, scores as floats (a
// non-finite one, which no metric produces, would print `null` either way).

fn write<T: Serialize>(value: &T, out: &mut Vec<u8>) -> bool {
    serde_json::to_writer(out, value).is_ok()
}

fn stability(r: &StabilityReport, out: &mut Vec<u8>) -> bool {
    #[derive(Serialize)]
    struct Output<'a> {
        cost_per_progress: f64,
        drift_flags: Vec<&'static str>,
        redundancy: f64,
        response_consistency: f64,
        summary: &'a str,
        tool_usage_stability: f64,
        weakest_score: f64,
    }
    let summary = r.summary();
    write(
        &Output {
            cost_per_progress: r.cost_per_progress,
            drift_flags: drift_flags(r, &Floors::default()),
            redundancy: r.redundancy,
            response_consistency: r.response_consistency,
            summary: &summary,
            tool_usage_stability: r.tool_usage_stability,
            weakest_score: r.weakest_score,
        },
        out,
    )
}

fn across(runs: &[MetricTrace], out: &mut Vec<u8>) -> bool {
    #[derive(Serialize)]
    struct Output {
        argument_consistency: f64,
        early_divergence: u8,
        runs: usize,
        score: f64,
        tool_sequence_similarity: f64,
        variance: f64,
        weakest_score: f64,
    }
    let r = score_across(runs);
    write(
        &Output {
            argument_consistency: r.argument_consistency,
            early_divergence: u8::from(r.early_divergence),
            runs: r.runs,
            score: r.score,
            tool_sequence_similarity: r.tool_sequence_similarity,
            variance: r.variance,
            weakest_score: r.weakest_score,
        },
        out,
    )
}

fn reliability(input: Outcomes, out: &mut Vec<u8>) -> bool {
    let r = score_outcomes(&input.outcomes);
    // Written by hand in the generic path's key order and types (all integers): a line
    // is a few hundred bytes, and serde's escaping of each key was a fifth of its cost.
    let mut number = itoa::Buffer::new();
    out.extend_from_slice(b"{\"decay_curve\":[");
    for (i, entry) in r.decay_curve.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(number.format(*entry).as_bytes());
    }
    for (key, value) in [
        ("],\"graceful_degradation\":", r.graceful_degradation as usize),
        (",\"pass_at_k\":", r.pass_at_k as usize),
        (",\"passhat_k\":", r.passhat_k as usize),
        (",\"runs\":", r.runs),
        (",\"variance_amplification\":", r.variance_amplification as usize),
    ] {
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(number.format(value).as_bytes());
    }
    out.push(b'}');
    true
}

fn trajectory(input: TrajectoryInput, out: &mut Vec<u8>) -> bool {
    let Ok(expected) = ExpectedTrace::parse(&input.expected.0, "/expected") else { return false };
    let calls = input.tool_calls.map(|c| c.0).unwrap_or_default();
    let Some(calls) = CanonicalCalls::new(calls, &expected) else { return false };
    trajectory_output(&expected, &calls, out)
}

/// [`trajectory`] of a line [`plain::trajectory_line`] read, its canonical texts made.
fn plain_trajectory(line: plain::TrajectoryLine, out: &mut Vec<u8>) -> bool {
    let Ok(expected) = ExpectedTrace::parse(&line.expected, "/expected") else { return false };
    let Some(calls) = CanonicalCalls::from_parts(line.calls, line.text, line.spans, &expected) else { return false };
    trajectory_output(&expected, &calls, out)
}

fn trajectory_output(expected: &ExpectedTrace, calls: &CanonicalCalls, out: &mut Vec<u8>) -> bool {
    #[derive(Serialize)]
    struct Output<'a> {
        mismatch_count: usize,
        mismatches: Vec<SortedMismatch<'a>>,
        passed: u8,
    }
    let r = validate_recorded(expected, calls);
    let mismatches = r.mismatches.iter().map(SortedMismatch).collect();
    write(&Output { mismatch_count: r.mismatch_count, mismatches, passed: u8::from(r.passed) }, out)
}

/// A mismatch printed as the generic path prints it (through a tree): keys sorted.
struct SortedMismatch<'a>(&'a Mismatch);

impl Serialize for SortedMismatch<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut object = s.serialize_struct("Mismatch", 6)?;
        object.serialize_field("actual_index", &m.actual_index)?;
        object.serialize_field("actual_name", &m.actual_name)?;
        object.serialize_field("diffs", &SortedDiffs(&m.diffs))?;
        object.serialize_field("expected_index", &m.expected_index)?;
        object.serialize_field("expected_name", &m.expected_name)?;
        object.serialize_field("reason", &m.reason)?;
        object.end()
    }
}

struct SortedDiffs<'a>(&'a [Diff]);

impl Serialize for SortedDiffs<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Sorted<'a> {
            actual: &'a Value,
            expected: &'a Value,
            path: &'a str,
        }
        s.collect_seq(self.0.iter().map(|d| Sorted { actual: &d.actual, expected: &d.expected, path: &d.path }))
    }
}

fn golden_path(names: &[&str], golden: &Value, out: &mut Vec<u8>) -> bool {
    #[derive(Serialize)]
    struct Output {
        backtracks: usize,
        extra_steps: usize,
        missing_steps: usize,
        passed: u8,
        penalty: f64,
        repeated_tools: usize,
    }
    let Ok(golden) = GoldenPath::parse(golden, "/golden") else { return false };
    let r = score_names(&golden, names);
    write(
        &Output {
            backtracks: r.backtracks,
            extra_steps: r.extra_steps,
            missing_steps: r.missing_steps,
            passed: u8::from(r.passed),
            penalty: r.penalty,
            repeated_tools: r.repeated_tools,
        },
        out,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::parse_json_strict;
    use crate::metrics::cli::run_owned;

    /// The generic path's output text, or `None` when it refuses the document.
    fn generic(name: &str, text: &str) -> Option<String> {
        let value = parse_json_strict(text).ok()?;
        run_owned(name, value).ok().map(|v| v.to_string())
    }

    /// Whenever the typed path answers, it answers what the generic path does; and it
    /// never answers a document the generic path refuses.
    fn same(name: &str, text: &str) -> bool {
        let mut out = Vec::new();
        let typed = grade(name, text, &mut out);
        if typed {
            assert_eq!(Some(String::from_utf8(out).unwrap()), generic(name, text), "{name}: {text}");
        }
        // the scanner answers only where the serde readers do, and as they do
        let (mut plain, mut serde) = (Vec::new(), Vec::new());
        if grade_plain(name, text, &mut plain) {
            assert!(grade_serde(name, text, &mut serde), "only the scanner read {name}: {text}");
            assert_eq!(String::from_utf8(plain).unwrap(), String::from_utf8(serde).unwrap(), "{name}: {text}");
        }
        typed
    }

    /// Whether the scanner (`plain`) read `text`, checked against the serde readers by [`same`].
    fn plain(name: &str, text: &str) -> bool {
        same(name, text);
        grade_plain(name, text, &mut Vec::new())
    }

    const CALLS: &str = r#"[{"name": "srv__search", "server": "srv", "args": {"q": "a", "n": 1}},
        "open", {"name": "srv__search", "server": "srv", "args": {"n": 1.0, "q": "a"}},
        {"name": "x", "args": null}, {"name": "x", "server": null, "args": {"k": [1, 2.5, {"b": 1, "a": -0.0}]}},
        {"name": "x", "server": null, "args": {"k": [1, 2.5, {"a": 0, "b": 1}]}}, {"name": "open", "args": [1]}]"#;

    /// The same with arguments as OpenAI encodes them: read typed where the arguments
    /// are kept as a tree (trajectory) or skipped (golden path).
    const ENCODED_CALLS: &str = r#"[{"name": "x", "args": "{\"k\": [1, 2.5]}"}, {"name": "open", "args": "raw"}, "x"]"#;

    #[test]
    fn arguments_are_canonicalised_while_read_as_from_a_tree() {
        let texts = [
            r#"{"q": "a", "limit": 3, "opts": {"lang": "en", "deep": [true, false, null]}}"#,
            r#"{"b": 1e3, "a": -0.0, "c": 0.1, "d": 1.5e-7, "e": -12, "f": 9007199254740991}"#,
            r#"{"\u20ac": 1, "\ue000": 2, "\ud83d\ude00": 3, "z": 4, "a\"b\n": "\u0001\t\u2028"}"#,
            r#"[]"#,
            r#"{}"#,
            r#"[{}, [], "x", 1, {"y": {"x": {}}}]"#,
            r#"7"#,
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            let CanonArgs(canonical) = serde_json::from_str(text).unwrap();
            assert_eq!(canonical, crate::metrics::trace::canonical_args(&value), "{text}");
        }
        for refused in [r#""{}""#, r#"{"a": 9007199254740992}"#, r#"{"a": 1, "a": 1}"#, r#"[{"b": [], "b": []}]"#] {
            assert!(serde_json::from_str::<CanonArgs>(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_everyday_shapes_are_read_typed_and_print_what_the_generic_path_prints() {
        let conversation = r#"{"tokens": {"total": 12000}, "turns": [{"role": "assistant", "content": "done done"}, {"role": "assist\u0061nt", "content": "caf\u00e9 \"x\""},
            {"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": "ab"}]},
            {"role": "assistant"}, {"content": "no role"}]}"#;
        let cases = [
            ("stability", format!(r#"{{"tool_calls": {CALLS}, "conversation": {conversation}}}"#)),
            ("stability", r#"{"tool_calls": ["a", "a", "a", "a"], "conversation": {"tokens": {"total": 1e4}}}"#.into()),
            ("stability", "{}".into()),
            ("stability", r#"{"tool_calls": null, "conversation": null}"#.into()),
            (
                "stability-across",
                format!(
                    r#"{{"runs": [{{"tool_calls": {CALLS}, "conversation": {conversation}}}, {{"tool_calls": ["srv__search", "open"]}}, {{}}]}}"#
                ),
            ),
            ("stability-across", r#"{"runs": []}"#.into()),
            ("reliability", r#"{"outcomes": [true, false, true, true]}"#.into()),
            ("reliability", r#"{"outcomes": []}"#.into()),
            (
                "trajectory",
                format!(
                    r#"{{"tool_calls": {CALLS}, "expected": {{"mode": "strict", "calls": [{{"name": "search", "args": {{"exact": {{"q": "b", "n": 1}}}}}}, "open"]}}}}"#
                ),
            ),
            (
                "trajectory",
                format!(r#"{{"tool_calls": {CALLS}, "expected": {{"mode": "unordered", "calls": ["open", "nope"]}}}}"#),
            ),
            (
                "golden-path",
                format!(
                    r#"{{"tool_calls": {CALLS}, "golden": {{"calls": ["search", {{"name": "open"}}, "x"], "allow_extra_steps": true}}}}"#
                ),
            ),
            ("golden-path", r#"{"golden": {"calls": []}}"#.into()),
            (
                "trajectory",
                format!(
                    r#"{{"tool_calls": {ENCODED_CALLS}, "expected": {{"calls": [{{"name": "x", "args": {{"subset": {{"k": [1, 2.5]}}}}}}]}}}}"#
                ),
            ),
            ("golden-path", format!(r#"{{"tool_calls": {ENCODED_CALLS}, "golden": {{"calls": ["x", "open"]}}}}"#)),
            // every args shape and mode judged from canonical text, with diffs printed
            // from the args as written (1.0 stays 1.0, -0.0 stays -0.0)
            (
                "trajectory",
                format!(
                    r#"{{"tool_calls": {CALLS}, "expected": {{"mode": "subsequence", "calls": [
                        {{"name": "search", "args": {{"exact": {{"n": 1, "q": "a"}}}}}},
                        {{"name": "srv__search", "args": {{"subset": {{"q": "a", "n": 1}}}}}},
                        {{"name": "x", "args": {{"subset": {{"k": [{{"a": 0}}, 1]}}}}}},
                        {{"name": "x", "args": {{"exact": {{"k": [1, 2.5, {{"a": 0, "b": 2}}]}}}}}},
                        {{"name": "open", "args": {{"schema": {{"type": "array", "maxItems": 0}}}}}}]}}}}"#
                ),
            ),
            (
                "trajectory",
                format!(
                    r#"{{"tool_calls": {CALLS}, "expected": {{"mode": "unordered", "calls": [
                        {{"name": "search", "args": {{"subset": {{"q": "b"}}}}}},
                        {{"name": "x", "args": {{"exact": {{"k": [1, 2.5, {{"b": 1, "a": 0}}]}}}}}},
                        {{"name": "x", "args": {{"exact": {{"k": [1, 2.5, {{"b": 1, "a": 0}}]}}}}}},
                        {{"name": "x", "args": {{"exact": {{"k": [1, 2.5, {{"b": 1, "a": 0}}]}}}}}}]}}}}"#
                ),
            ),
            (
                "trajectory",
                r#"{"tool_calls": [{"name": "a", "args": {"s": "tab\there \"q\"", "\u00e9": {"z": null, "y": false}}}],
                    "expected": {"mode": "subset", "calls": [{"name": "a", "args": {"subset": {"s": "\there \"", "é": {"y": true}}}}]}}"#
                    .into(),
            ),
        ];
        for (name, text) in cases {
            assert!(same(name, &text), "{name} was not read typed: {text}");
        }
    }

    /// A stability-across document past [`PARALLEL_READ`] has its runs read on every
    /// core: the same output as the generic path, and one bad run anywhere still sends
    /// the whole document there.
    #[test]
    fn a_large_across_document_read_on_every_core_prints_what_the_generic_path_prints() {
        let mut seed = 19u64;
        let mut next = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let runs: Vec<String> = (0..140)
            .map(|r| {
                let calls: Vec<String> = (0..150)
                    .map(|_| {
                        let (tool, q, limit) = (next(6), next(30), next(4));
                        format!(
                            r#"{{"name": "srv__t{tool}", "server": "srv", "args": {{"q": "k{q}", "limit": {limit}}}}}"#
                        )
                    })
                    .collect();
                let turns = format!(r#"[{{"role": "assistant", "content": "done {r}"}}]"#);
                format!(
                    r#"{{"tool_calls": [{}], "conversation": {{"tokens": {{"total": {}}}, "turns": {turns}}}}}"#,
                    calls.join(", "),
                    1000 + r
                )
            })
            .collect();
        let text = format!(r#"{{"runs": [{}]}}"#, runs.join(",\n"));
        assert!(text.len() > PARALLEL_READ, "{} bytes", text.len());
        assert!(same("stability-across", &text));

        let mut bad = runs.clone();
        bad[97] = r#"{"tool_calls": [{"name": "a", "args": {"n": 9007199254740993}}]}"#.into();
        let text = format!(r#"{{"runs": [{}]}}"#, bad.join(",\n"));
        assert!(text.len() > PARALLEL_READ);
        assert!(!same("stability-across", &text));
    }

    /// Lines of plain tokens are read by the scanner; a line with any other token is
    /// left to the serde readers, and either way the output is theirs (see [`same`]).
    #[test]
    fn the_scanner_reads_plain_lines_and_leaves_the_rest_to_the_serde_readers() {
        let calls = r#"[{"name": "srv__search", "server": "srv", "args": {"q": "a", "n": 1, "o": {"z": [1, -2, true, null], "a": {}}}},
            "open", {"name": "srv__search", "args": {"o": {"a": {}, "z": [1, -2, true, null]}, "n": 1, "q": "a"}},
            {"name": "x", "args": null}, {"server": "s", "name": "x"}, {"name": "x", "args": {}}]"#;
        let conversation = r#"{"tokens": {"total": 12000}, "turns": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "an answer of some length"}, {"content": "x"}, {"role": "assistant"},
            {"role": "assistant", "content": ""}, {"role": "assistant", "content": "café ok"}]}"#;
        let expected = r#"{"mode": "subsequence", "calls": [{"name": "search", "args": {"exact": {"n": 1, "q": "a", "o": {"a": {}, "z": [1, -2, true, null]}}}},
            {"name": "x", "args": {"subset": {}}}, "open", {"name": "x", "args": "any"}, {"name": "nope"}]}"#;
        let plain_lines = [
            ("stability", format!(r#"{{"tool_calls": {calls}, "conversation": {conversation}}}"#)),
            ("stability", format!(r#" {{"conversation": {conversation}, "tool_calls": {calls}}} "#)),
            ("stability", "{}".into()),
            ("stability", r#"{"tool_calls": [], "conversation": {}}"#.into()),
            ("stability", r#"{"conversation": {"tokens": {"total": -3}, "turns": []}}"#.into()),
            (
                "stability-across",
                format!(r#"{{"runs": [{{"tool_calls": {calls}}}, {{}}, {{"conversation": {conversation}}}]}}"#),
            ),
            ("stability-across", r#"{"runs": []}"#.into()),
            ("reliability", r#"{"outcomes": [true, false, true, true, true, false]}"#.into()),
            ("reliability", r#"{"outcomes": []}"#.into()),
            ("trajectory", format!(r#"{{"tool_calls": {calls}, "expected": {expected}}}"#)),
            (
                "trajectory",
                format!(
                    r#"{{"expected": {{"mode": "unordered", "calls": ["x", "open", "x"]}}, "tool_calls": {calls}}}"#
                ),
            ),
            ("trajectory", r#"{"expected": {"calls": []}}"#.into()),
            (
                "golden-path",
                format!(
                    r#"{{"tool_calls": {calls}, "golden": {{"calls": ["search", {{"name": "open"}}, "x"], "allow_extra_steps": true}}}}"#
                ),
            ),
            ("golden-path", r#"{"golden": {"calls": []}}"#.into()),
            ("golden-path", r#"{"tool_calls": ["a"], "golden": {"calls": ["a"], "allow_extra_steps": null}}"#.into()),
        ];
        for (name, text) in &plain_lines {
            assert!(plain(name, text), "{name} was not read by the scanner: {text}");
        }
        let other_lines = [
            // tokens the scanner leaves alone: escapes, fractions, exponents, -0, long integers
            ("stability", r#"{"tool_calls": [{"name": "a\u0062", "args": {"q": 1}}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": {"q": 1.5}}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": {"q": 1e2}}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": {"q": -0}}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": {"q": 1000000000000000}}]}"#),
            ("stability", r#"{"conversation": {"tokens": {"total": 1.5e3}}}"#),
            ("stability", r#"{"conversation": {"tokens": {"total": null}}}"#),
            (
                "stability",
                r#"{"conversation": {"turns": [{"role": "assistant", "content": [{"type": "text", "text": "ab"}]}]}}"#,
            ),
            ("stability", r#"{"conversation": {"turns": [{"role": "assistant", "content": "tab\there"}]}}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "server": null}]}"#),
            ("stability", r#"{"tool_calls": null}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": [1, 2]}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": "{\"x\": 1}"}]}"#),
            (
                "trajectory",
                r#"{"tool_calls": [{"name": "a", "args": {"n": 2.0}}], "expected": {"calls": [{"name": "a", "args": {"exact": {"n": 2}}}]}}"#,
            ),
            ("golden-path", r#"{"tool_calls": [{"name": "a", "args": {"x": 0.5}}], "golden": {"calls": ["a"]}}"#),
            ("reliability", r#"{"outcomes": [true, false], "outcomes": [true]}"#),
            // objects of more keys than the scanner searches
            (
                "golden-path",
                r#"{"tool_calls": [{"name": "a", "args": {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1, "i": 1, "j": 1, "k": 1, "l": 1, "m": 1, "n": 1, "o": 1, "p": 1, "q": 1}}], "golden": {"calls": ["a"]}}"#,
            ),
        ];
        for (name, text) in other_lines {
            assert!(!plain(name, text), "{name} was read by the scanner: {text}");
        }
        // a key at or above U+E000 sorts differently in UTF-16: left to the serde readers
        let high = "{\"tool_calls\": [{\"name\": \"a\", \"args\": {\"\u{E000}\": 1, \"z\": 2}}]}";
        assert!(!plain("stability", high));
        // and every bad line the tests below send to the tree reader is refused by both
    }

    #[test]
    fn other_shapes_and_bad_documents_are_left_to_the_generic_path() {
        let cases = [
            // wrappers, aliases and keys the typed shapes do not have
            ("stability", r#"{"trace": {"tool_calls": ["a"]}}"#),
            ("stability", r#"{"tool_calls": ["a"], "floors": {"redundancy": 0.9}}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "arguments": {"x": 1}}]}"#),
            ("stability", r#"{"tool_calls": [1, "a"]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": "{\"x\": 1}"}]}"#),
            ("stability-across", r#"{"runs": [{"tool_calls": [{"name": "a", "args": {"n": 9007199254740993}}]}, {}]}"#),
            ("stability", r#"{"tool_calls": "none", "extra": 1}"#),
            ("stability-across", r#"{"runs": 3}"#),
            ("stability-across", r#"{"runs": [1]}"#),
            ("reliability", r#"{"outcomes": [true, 1]}"#),
            ("reliability", r#"{"outcomes": [true], "k": 1}"#),
            ("golden-path", r#"{"tool_calls": []}"#),
            ("golden-path", r#"{"tool_calls": [], "golden": {"calls": 1}}"#),
            ("trajectory", r#"{"tool_calls": [], "expected": {"mode": "sideways", "calls": []}}"#),
            // an integer beyond ±(2^53−1) in a shape: canonical text would not decide as json_eq does
            (
                "trajectory",
                r#"{"tool_calls": [{"name": "a", "args": {"n": 9007199254740992.0}}], "expected": {"calls": [{"name": "a", "args": {"exact": {"n": 9007199254740993}}}]}}"#,
            ),
            (
                "trajectory",
                r#"{"tool_calls": [{"name": "a", "args": {"n": 1, "n": 2}}], "expected": {"calls": ["a"]}}"#,
            ),
            // repeated keys anywhere, including inside arguments the metric never reads
            ("reliability", r#"{"outcomes": [true], "outcomes": [false]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "name": "b"}]}"#),
            ("stability", r#"{"tool_calls": [{"name": "a", "args": {"q": 1, "q": 2}}]}"#),
            (
                "golden-path",
                r#"{"tool_calls": [{"name": "a", "args": {"o": {"q": 1, "q": 2}}}], "golden": {"calls": []}}"#,
            ),
            ("stability", r#"{"conversation": {"turns": [{"role": "assistant", "role": "user"}]}}"#),
            // syntax
            ("reliability", r#"{"outcomes": [true,]}"#),
            ("reliability", r#"{"outcomes": [true]} x"#),
            ("stability", ""),
            ("pass-k", r#"{"tasks": [], "k": [1]}"#),
        ];
        for (name, text) in cases {
            assert!(!same(name, text), "{name} was read typed: {text}");
        }
    }

    #[test]
    fn skipped_arguments_refuse_a_repeated_key_in_a_big_object() {
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let ok = format!(
            r#"{{"tool_calls": [{{"name": "a", "args": {{{}}}}}], "golden": {{"calls": ["a"]}}}}"#,
            keys.join(", ")
        );
        assert!(same("golden-path", &ok));
        let repeated = format!(
            r#"{{"tool_calls": [{{"name": "a", "args": {{{}, "k3": 0}}}}], "golden": {{"calls": ["a"]}}}}"#,
            keys.join(", ")
        );
        assert!(!same("golden-path", &repeated));
    }

    #[test]
    fn every_public_vector_of_these_families_prints_the_same_either_way() {
        let text = include_str!("../../tests/vectors/public.jsonl");
        let mut typed = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let vector: Value = serde_json::from_str(line).unwrap();
            let (Some(name), Some(input)) = (vector.get("metric").and_then(Value::as_str), vector.get("input")) else {
                continue;
            };
            typed += usize::from(same(name, &input.to_string()));
        }
        assert!(typed > 0, "no public vector was read typed");
    }
}
