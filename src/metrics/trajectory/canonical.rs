//! Recorded calls judged from their args' canonical text, for the batch reader
//! (`metrics::typed`): a trajectory line of 200 calls is compared without building 200
//! args trees.
//!
//! Design choice: each call keeps its args as written (a slice of the input line) and
//! their RFC 8785 canonical text (one buffer per line). `exact` is equality of canonical
//! texts; `subset` walks the expected tree against the canonical text, matching object
//! keys and string containment in place and parsing only a small value it cannot judge
//! there (an array, a number, a string with escapes); a `schema` shape and every diff
//! read a tree parsed from the args as written, so a mismatch prints the recorded values
//! exactly as the tree reader prints them. Equal canonical texts are `json_eq` values
//! when no integer lies beyond ±(2^53−1); [`CanonicalCalls::new`] refuses a line where
//! one might (then it is graded from trees).

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value;

use super::args::{ArgsShape, Diff};
use super::{ExpectedCall, ExpectedTrace, Recorded};
use crate::canon::to_canonical;
use crate::containment::contains;
use crate::metrics::trace::recorded_args;
use crate::metrics::typed::canonical_into;

/// One recorded call as the batch reader read it.
pub struct RawCall<'a> {
    /// Position in the input `tool_calls` array.
    pub index: usize,
    pub name: Cow<'a, str>,
    /// The `args` value as written; `None` when absent or `null`.
    pub args: Option<&'a str>,
}

/// A line's recorded calls with their args' canonical texts, and the canonical text of
/// each `exact` shape of the expectation they are judged against.
pub struct CanonicalCalls<'a> {
    calls: Vec<RawCall<'a>>,
    /// Call `j`'s canonical args are `text[spans[j]]`.
    text: String,
    spans: Vec<Range<usize>>,
    /// For expected call `i` with an `exact` shape, that shape's canonical text.
    exact: Vec<Option<String>>,
}

impl<'a> CanonicalCalls<'a> {
    /// `None` when some args or some `exact`/`subset` value has no canonical text (an
    /// integer beyond ±(2^53−1), a repeated key): such a line is graded from trees.
    pub fn new(calls: Vec<RawCall<'a>>, expected: &ExpectedTrace) -> Option<Self> {
        let mut text = Vec::with_capacity(calls.len() * 48);
        let mut spans = Vec::with_capacity(calls.len());
        for call in &calls {
            let start = text.len();
            match call.args.map(str::trim) {
                None | Some("null") => text.extend_from_slice(b"{}"),
                // an encoded object (OpenAI) is read as the tree reader decodes it
                Some(raw) if raw.starts_with('"') => {
                    let decoded = recorded_args(Some(serde_json::from_str(raw).ok()?));
                    text.extend_from_slice(&to_canonical(&decoded).ok()?);
                }
                Some(raw) => {
                    if !canonical_into(raw, &mut text) {
                        return None;
                    }
                }
            }
            spans.push(start..text.len());
        }
        Self::from_parts(calls, text, spans, expected)
    }

    /// [`CanonicalCalls::new`] of calls whose canonical args the caller wrote already:
    /// call `j`'s are `text[spans[j]]`.
    pub fn from_parts(
        calls: Vec<RawCall<'a>>,
        text: Vec<u8>,
        spans: Vec<Range<usize>>,
        expected: &ExpectedTrace,
    ) -> Option<Self> {
        let exact = expected
            .calls
            .iter()
            .map(|e| match &e.args {
                ArgsShape::Exact(v) => to_canonical(v).ok().and_then(|t| String::from_utf8(t).ok()).map(Some),
                ArgsShape::Subset(v) => to_canonical(v).ok().map(|_| None),
                _ => Some(None),
            })
            .collect::<Option<_>>()?;
        Some(CanonicalCalls { calls, text: String::from_utf8(text).ok()?, spans, exact })
    }

    fn canonical(&self, j: usize) -> &str {
        &self.text[self.spans[j].clone()]
    }

    /// Call `j`'s args as the tree reader reads them.
    fn tree(&self, j: usize) -> Value {
        recorded_args(self.calls[j].args.and_then(|raw| serde_json::from_str(raw).ok()))
    }
}

impl Recorded for CanonicalCalls<'_> {
    fn count(&self) -> usize {
        self.calls.len()
    }
    fn index(&self, j: usize) -> usize {
        self.calls[j].index
    }
    fn name(&self, j: usize) -> &str {
        &self.calls[j].name
    }
    fn fits(&self, i: usize, e: &ExpectedCall, j: usize) -> bool {
        match &e.args {
            ArgsShape::Any | ArgsShape::Ignore => true,
            ArgsShape::Exact(_) => self.exact[i].as_deref() == Some(self.canonical(j)),
            ArgsShape::Subset(want) => contains_canonical(want, self.canonical(j)),
            ArgsShape::Schema { .. } => e.args.matches(&self.tree(j)),
        }
    }
    fn diffs(&self, _: usize, e: &ExpectedCall, j: usize) -> Vec<Diff> {
        e.args.diffs(&self.tree(j))
    }
}

/// `contains(want, have)` (`grade::contains`) for `have` given as canonical text.
fn contains_canonical(want: &Value, have: &str) -> bool {
    match want {
        Value::Object(members) => {
            have.starts_with('{')
                && members.iter().all(|(key, w)| member(have, key).is_some_and(|h| contains_canonical(w, h)))
        }
        Value::String(needle) => match have.strip_prefix('"').and_then(|h| h.strip_suffix('"')) {
            Some(plain) if !plain.contains('\\') => plain.contains(needle.as_str()),
            Some(_) => serde_json::from_str::<String>(have).is_ok_and(|h| h.contains(needle.as_str())),
            None => false,
        },
        // numbers, arrays, booleans and null: judged on the (small) value parsed
        _ => serde_json::from_str::<Value>(have).is_ok_and(|h| contains(want, &h)),
    }
}

/// The value of member `key` of the canonical object text `object`.
fn member<'t>(object: &'t str, key: &str) -> Option<&'t str> {
    let b = object.as_bytes();
    let mut at = 1;
    while b.get(at) == Some(&b'"') {
        let key_end = string_end(b, at);
        let value_end = value_end(b, key_end + 1);
        let raw_key = &object[at..key_end];
        let same = if raw_key.contains('\\') {
            serde_json::from_str::<String>(raw_key).is_ok_and(|k| k == key)
        } else {
            &raw_key[1..raw_key.len() - 1] == key
        };
        if same {
            return Some(&object[key_end + 1..value_end]);
        }
        at = value_end + 1;
    }
    None
}

/// The position after the string whose opening quote is at `start`.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < b.len() && b[at] != b'"' {
        at += if b[at] == b'\\' { 2 } else { 1 };
    }
    at + 1
}

/// The position after the value starting at `start` (canonical text has no whitespace).
fn value_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut at = start;
    while at < b.len() {
        match b[at] {
            b'"' => {
                at = string_end(b, at);
                if depth == 0 {
                    return at;
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth <= 1 => return if depth == 0 { at } else { at + 1 },
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => return at,
            _ => {}
        }
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canonical(v: &Value) -> String {
        String::from_utf8(to_canonical(v).unwrap()).unwrap()
    }

    #[test]
    fn members_are_found_in_canonical_text_whatever_they_hold() {
        let have = json!({"a": [1, {"b": "]}"}], "q\"x": "k\\1", "z": {"y": []}, "n": -0.5, "s": "x,y"});
        let text = canonical(&have);
        assert_eq!(member(&text, "a"), Some(r#"[1,{"b":"]}"}]"#));
        assert_eq!(member(&text, "q\"x"), Some(r#""k\\1""#));
        assert_eq!(member(&text, "z"), Some(r#"{"y":[]}"#));
        assert_eq!(member(&text, "n"), Some("-0.5"));
        assert_eq!(member(&text, "s"), Some(r#""x,y""#));
        assert_eq!(member(&text, "missing"), None);
        assert_eq!(member("{}", "a"), None);
    }

    #[test]
    fn subset_on_canonical_text_agrees_with_the_tree_relation() {
        let haves = [
            json!({"q": "rust lang", "limit": 3, "opts": {"lang": "en", "deep": [1, 2.0, "x"]}, "esc": "a\"b\nc"}),
            json!({"q": "go", "limit": 3.0}),
            json!([1, 2]),
            json!("rust"),
            json!({}),
        ];
        let wants = [
            json!({"q": "rust"}),
            json!({"q": "rust", "limit": 3.0}),
            json!({"opts": {"lang": "e"}}),
            json!({"opts": {"deep": [2, 1]}}),
            json!({"opts": {"deep": [3]}}),
            json!({"esc": "b\nc"}),
            json!({"esc": "b\tc"}),
            json!({"nope": null}),
            json!({}),
            json!([1]),
            json!("rus"),
            json!({"q": {"x": 1}}),
        ];
        for have in &haves {
            let text = canonical(have);
            for want in &wants {
                assert_eq!(contains_canonical(want, &text), contains(want, have), "{want} in {have}");
            }
        }
    }
}
