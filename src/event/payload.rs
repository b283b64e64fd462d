//! Typed payloads: one struct per event kind, read from an event's canonical data bytes
//! ([`Event::view`]) in one pass, each member kept as its canonical bytes ([`Json`])
//! and read as what the reader needs: a string (borrowed when it has no escapes), a
//! number, a bool, or — for values the agent or its tools chose (arguments, results,
//! responses, memory values) — a tree, parsed only then.
//!
//! The members of each kind are the contract in [`super::Kind`]'s docs. Reading is as
//! lenient as reading a tree was: a log may come from `stateval import` (extra
//! `source` and `absent` members, nulls where a source captured nothing) or be any
//! verified log, so no member is required, unknown members are skipped, and a member of
//! an unexpected type reads as absent through the typed accessors — exactly what
//! `value.get(name).and_then(Value::as_str)` gave — and as itself through
//! [`Json::value`].
//!
//! The same declaration gives each kind its writer ([`write`]): a struct with one
//! [`Out`] per member, written straight to the data's canonical bytes in the members'
//! canonical order (worked out at compile time from the declared names), with no
//! `Value` tree in between. It is the only way an event's data is written — by the
//! runtime, the external session, the importers and the graders alike — and each write
//! names every member (`Out::Absent` for one it leaves out), so a member added here is
//! added at every writer or the build fails.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Event, Kind};
use crate::canon::{self, CanonError, Digest};

/// A payload of one kind.
pub trait Payload<'a>: Members<'a> {
    const KIND: Kind;
}

/// A struct read member by member from a canonical JSON object.
pub trait Members<'a>: Default {
    /// Take `raw` (a member's canonical text) when `key` is one of this struct's members.
    fn take(&mut self, key: &str, raw: &'a str);

    /// Read `text`, a canonical JSON object: every member this struct declares, the
    /// others skipped. Text that is not an object reads as all absent.
    fn read(text: &'a str) -> Self {
        let mut out = Self::default();
        for (key, raw) in object_members(text) {
            out.take(key, raw);
        }
        out
    }
}

impl Event {
    /// This event's data as payload `T`. Debug builds check the kind.
    pub fn view<'a, T: Payload<'a>>(&'a self) -> T {
        debug_assert_eq!(self.kind, T::KIND, "reading a {} as a {}", self.kind, T::KIND);
        T::read(self.data.as_str())
    }
}

/// The members of a canonical JSON object, as `(key, value text)`, read without parsing:
/// the text is canonical (written by the canonical writer, or cut from a verified line),
/// so a value is skipped by matching brackets outside strings. A key is given as it is
/// written; JCS escapes only quotes, backslashes and control characters, so a member
/// named with none of those is always written as its name. Anything that is not an
/// object yields nothing; text that is not canonical JSON yields what can be read of it
/// and never panics.
pub fn object_members(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let bytes = text.as_bytes();
    let mut at = usize::from(bytes.first() == Some(&b'{'));
    let mut done = at == 0 || bytes.get(1) == Some(&b'}');
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        // at: the opening quote of a key
        let key_end = string_end(bytes, at)?;
        let key = text.get(at + 1..key_end - 1)?;
        let value_start = key_end + 1; // past the colon
        let value_end = value_end(bytes, value_start)?;
        let value = text.get(value_start..value_end)?;
        match bytes.get(value_end) {
            Some(b',') => at = value_end + 1,
            _ => done = true,
        }
        Some((key, value))
    })
}

/// The last member of a canonical JSON object, as `(key, value text)`, read backwards
/// from its closing brace, when its value is a string, number, `true`, `false` or
/// `null` (`None` otherwise, or when the text is not shaped as a canonical object).
/// In canonical text a quote inside a string is always escaped, so the unescaped quote
/// met first going back from a string's end is the one that opens it.
fn last_scalar_member(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'{') || bytes.last() != Some(&b'}') || bytes.len() < 2 {
        return None;
    }
    let value_end = bytes.len() - 1;
    let value_start = match bytes[value_end - 1] {
        b'"' => string_start(bytes, value_end - 1)?,
        b'}' | b']' => return None,
        // a number or a literal: no colon, quote or comma inside
        _ => memchr::memrchr3(b':', b'"', b',', &bytes[..value_end]).filter(|&at| bytes[at] == b':')? + 1,
    };
    let colon = value_start.checked_sub(1).filter(|&at| bytes[at] == b':')?;
    let key_close = colon.checked_sub(1).filter(|&at| bytes[at] == b'"')?;
    let key_open = string_start(bytes, key_close)?;
    // the key opens the object or follows a comma
    let before = key_open.checked_sub(1)?;
    if !matches!(bytes[before], b'{' | b',') {
        return None;
    }
    Some((text.get(key_open + 1..key_close)?, text.get(value_start..value_end)?))
}

/// The index of the quote that opens the string whose closing quote is at `close`.
fn string_start(bytes: &[u8], close: usize) -> Option<usize> {
    let mut end = close;
    loop {
        let at = memchr::memrchr(b'"', &bytes[..end])?;
        // escaped when an odd number of backslashes stands right before it
        let backslashes = bytes[..at].iter().rev().take_while(|&&b| b == b'\\').count();
        if backslashes % 2 == 0 {
            return Some(at);
        }
        end = at;
    }
}

/// The index just past the string that opens at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    // most strings are keys and short values: look at their first bytes one by one
    // (setting up the vector search cost more than reading a short string whole)
    let short = bytes.len().min(i + 16);
    while i < short {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    loop {
        // most of a log's bytes are in strings: skip to the next quote or escape at once
        let j = i + memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
    }
}

/// The index just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => Some(at + bytes[at..].iter().position(|b| matches!(b, b',' | b'}' | b']')).unwrap_or(bytes.len() - at)),
    }
}

/// Any JSON value, kept as its canonical text; absent and `null` read alike.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Json<'a>(Option<&'a str>);

impl<'a> Json<'a> {
    /// A value from its canonical text.
    pub fn of(raw: &'a str) -> Self {
        Json(Some(raw))
    }

    /// The canonical text (`null` when absent).
    pub fn raw(&self) -> &'a str {
        self.0.unwrap_or("null")
    }

    pub fn is_null(&self) -> bool {
        self.raw() == "null"
    }

    /// The value as a tree (`Value::Null` when absent).
    pub fn value(&self) -> Value {
        self.0.and_then(|raw| serde_json::from_str(raw).ok()).unwrap_or(Value::Null)
    }

    /// The string, when the value is one: borrowed when it holds no escape.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        let inner = self.raw().strip_prefix('"')?.strip_suffix('"')?;
        if !inner.contains('\\') {
            return Some(Cow::Borrowed(inner));
        }
        serde_json::from_str::<Text<'a>>(self.raw()).ok()?.0
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.raw() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// The number as a `u64`, when it is a non-negative integer (`Value::as_u64`).
    pub fn as_u64(&self) -> Option<u64> {
        // canonical numbers: an integer is its digits, anything else has `.`, `e` or `-`
        self.raw().parse().ok()
    }

    /// The number as an `i64`, when it is an integer in range (`Value::as_i64`).
    pub fn as_i64(&self) -> Option<i64> {
        self.raw().parse().ok()
    }

    /// The number as an `f64`, when it is one (`Value::as_f64`).
    pub fn as_f64(&self) -> Option<f64> {
        let raw = self.raw();
        if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) { raw.parse().ok() } else { None }
    }

    /// Member `name` of the value, when it is an object holding one.
    pub fn member(&self, name: &str) -> Json<'a> {
        object_members(self.raw()).find(|(key, _)| *key == name).map_or(Json(None), |(_, raw)| Json::of(raw))
    }

    /// [`Json::member`] for a member that is usually the object's last (a kind's key
    /// that sorts after all the others: `tool_executed`'s `tool`, `policy_decided`'s
    /// `verdict`): read from the end when it is there and holds a scalar, without
    /// passing over the members before it (a call's arguments and result); otherwise
    /// read as [`Json::member`] reads it.
    pub fn last_member(&self, name: &str) -> Json<'a> {
        match last_scalar_member(self.raw()) {
            Some((key, raw)) if key == name => Json::of(raw),
            _ => self.member(name),
        }
    }

    /// The items of the value, each as its canonical text, when it is an array (none
    /// otherwise).
    pub fn items(&self) -> Vec<Json<'a>> {
        let raw = self.raw();
        if !raw.starts_with('[') {
            return Vec::new();
        }
        let parsed: Result<Vec<&'a serde_json::value::RawValue>, _> = serde_json::from_str(raw);
        parsed.map(|items| items.into_iter().map(|item| Json::of(item.get())).collect()).unwrap_or_default()
    }

    /// The value read as `T` (a nested payload), all absent when it is not an object.
    pub fn view<T: Members<'a>>(&self) -> T {
        T::read(self.raw())
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// A value read as a string: `None` when it is of another type (what a string member
/// with escapes is decoded by).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Lenient;
        impl<'de> Visitor<'de> for Lenient {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        d.deserialize_any(Lenient).map(Text)
    }
}

/// One member's value as a writer gives it.
#[derive(Clone, Copy)]
pub enum Out<'a> {
    /// Not written at all (a member only some events of the kind carry).
    Absent,
    Null,
    Bool(bool),
    /// A count; past 2^53−1 it cannot be written (I-JSON), as `json!` of it could not.
    Uint(u64),
    Int(i64),
    /// A number as `json!` of an `f64` gives it: `null` when not finite.
    Float(f64),
    Str(&'a str),
    /// A digest as its text, `blake3:<hex>`.
    Digest(&'a Digest),
    /// A value the agent or its tools chose (arguments, results, memory values),
    /// canonicalised into place.
    Value(&'a Value),
    /// An object given as its map (as [`Out::Value`] of `Value::Object`).
    Map(&'a serde_json::Map<String, Value>),
    /// A value already in canonical form: a member read from a verified event.
    Canonical(&'a str),
    /// A nested object with members of its own (a [`write`] struct).
    Object(&'a dyn WriteObject),
    /// An array, each item written by the array's writer.
    Array(&'a dyn WriteArray),
}

impl<'a> From<&'a str> for Out<'a> {
    fn from(v: &'a str) -> Self {
        Out::Str(v)
    }
}

impl<'a> From<&'a String> for Out<'a> {
    fn from(v: &'a String) -> Self {
        Out::Str(v)
    }
}

impl<'a> From<&'a Value> for Out<'a> {
    fn from(v: &'a Value) -> Self {
        Out::Value(v)
    }
}

impl<'a> From<&'a Digest> for Out<'a> {
    fn from(v: &'a Digest) -> Self {
        Out::Digest(v)
    }
}

impl From<bool> for Out<'_> {
    fn from(v: bool) -> Self {
        Out::Bool(v)
    }
}

impl From<u64> for Out<'_> {
    fn from(v: u64) -> Self {
        Out::Uint(v)
    }
}

impl From<u32> for Out<'_> {
    fn from(v: u32) -> Self {
        Out::Uint(u64::from(v))
    }
}

impl From<usize> for Out<'_> {
    fn from(v: usize) -> Self {
        Out::Uint(v as u64)
    }
}

impl From<i64> for Out<'_> {
    fn from(v: i64) -> Self {
        Out::Int(v)
    }
}

impl From<f64> for Out<'_> {
    fn from(v: f64) -> Self {
        Out::Float(v)
    }
}

/// `None` is written as `null`, as `json!` of an `Option` gives it.
impl<'a, T: Into<Out<'a>>> From<Option<T>> for Out<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Out::Null, Into::into)
    }
}

/// An object written as its canonical bytes.
pub trait WriteObject {
    /// Append the canonical bytes; on an error (an integer outside ±(2^53−1)) the
    /// error names where, as the canonical writer of the same tree would, and what was
    /// appended is to be discarded.
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError>;
}

/// The data of one kind of event.
pub trait Written: WriteObject {
    const KIND: Kind;
}

/// An event's data written ahead of its event: its kind and canonical bytes, or why
/// they could not be written (grading events, written after the grading that made
/// them).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub kind: Kind,
    pub data: Result<super::Data, CanonError>,
}

impl Rendered {
    pub fn of<W: Written>(data: &W) -> Rendered {
        let mut bytes = Vec::new();
        let data = data.write(&mut bytes).map(|()| super::Data::checked(&bytes));
        Rendered { kind: W::KIND, data }
    }
}

/// An array written as its canonical bytes.
pub trait WriteArray {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError>;
}

impl<T: WriteObject> WriteArray for Vec<T> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError> {
        write_items(out, self.iter().map(|item| |out: &mut Vec<u8>| item.write(out)))
    }
}

impl WriteArray for Vec<&str> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError> {
        write_items(
            out,
            self.iter().map(|item| {
                |out: &mut Vec<u8>| {
                    canon::write_canonical_str(out, item);
                    Ok(())
                }
            }),
        )
    }
}

impl WriteArray for Vec<String> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError> {
        write_items(
            out,
            self.iter().map(|item| {
                |out: &mut Vec<u8>| {
                    canon::write_canonical_str(out, item);
                    Ok(())
                }
            }),
        )
    }
}

impl WriteArray for Vec<Out<'_>> {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError> {
        write_items(out, self.iter().map(|item| |out: &mut Vec<u8>| write_out(out, item)))
    }
}

fn write_items<F: FnOnce(&mut Vec<u8>) -> Result<(), CanonError>>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = F>,
) -> Result<(), CanonError> {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        item(out).map_err(|e| under(e, itoa::Buffer::new().format(i)))?;
    }
    out.push(b']');
    Ok(())
}

/// An error at `pointer` inside a member (or item) named `segment`: at
/// `/segment/pointer` of the document around it. Inside a writer a pointer is relative
/// to the value being written (empty: the value itself); a kind's data is an object, so
/// every error out of it names a member.
fn under(error: CanonError, segment: &str) -> CanonError {
    match error {
        CanonError::UnsafeInteger { pointer, value } => {
            CanonError::UnsafeInteger { pointer: format!("/{}{pointer}", escape_segment(segment)), value }
        }
        other => other,
    }
}

/// Where in `value` its first integer outside ±(2^53−1) lies, as a relative pointer.
fn unsafe_in(value: &Value) -> CanonError {
    match canon::check_ijson_under(value, "/".into()) {
        Err(CanonError::UnsafeInteger { pointer, value }) => {
            CanonError::UnsafeInteger { pointer: pointer[1..].to_string(), value }
        }
        Err(other) => other,
        Ok(()) => CanonError::Serialize("an integer is outside ±(2^53−1)".into()),
    }
}

/// A JSON Pointer segment (RFC 6901): `~` as `~0`, `/` as `~1`.
fn escape_segment(segment: &str) -> Cow<'_, str> {
    if segment.contains(['~', '/']) {
        Cow::Owned(segment.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(segment)
    }
}

fn unsafe_integer(value: String) -> CanonError {
    CanonError::UnsafeInteger { pointer: String::new(), value }
}

/// One value, canonically.
fn write_out(out: &mut Vec<u8>, value: &Out<'_>) -> Result<(), CanonError> {
    match *value {
        Out::Absent | Out::Null => out.extend_from_slice(b"null"),
        Out::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Out::Uint(n) => {
            if n > canon::MAX_SAFE_INTEGER {
                return Err(unsafe_integer(n.to_string()));
            }
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        Out::Int(n) => {
            if n.unsigned_abs() > canon::MAX_SAFE_INTEGER {
                return Err(unsafe_integer(n.to_string()));
            }
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        }
        Out::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => {
                if !canon::write_canonical_number(out, &n) {
                    return Err(unsafe_integer(n.to_string()));
                }
            }
            None => out.extend_from_slice(b"null"),
        },
        Out::Str(s) => canon::write_canonical_str(out, s),
        Out::Digest(d) => {
            out.extend_from_slice(b"\"blake3:");
            out.extend_from_slice(&d.hex());
            out.push(b'"');
        }
        Out::Value(v) => {
            let start = out.len();
            if canon::write_canonical(out, v).is_err() {
                out.truncate(start);
                return Err(unsafe_in(v));
            }
        }
        Out::Map(map) => {
            if canon::write_canonical_map(out, map).is_err() {
                return Err(unsafe_in(&Value::Object(map.clone())));
            }
        }
        Out::Canonical(text) => out.extend_from_slice(text.as_bytes()),
        Out::Object(o) => o.write(out)?,
        Out::Array(a) => a.write(out)?,
    }
    Ok(())
}

/// An object's members: `keys[i]` holds `members[i]`, written as `quoted[i]` (`"key":`)
/// and the value, in the order `order` gives (the keys' canonical order,
/// [`canonical_order`]), absent members skipped.
#[doc(hidden)]
pub fn write_object(
    out: &mut Vec<u8>,
    keys: &[&str],
    quoted: &[&str],
    order: &[usize],
    members: &[&Out<'_>],
) -> Result<(), CanonError> {
    out.push(b'{');
    let mut first = true;
    for &i in order {
        let member = members[i];
        if matches!(member, Out::Absent) {
            continue;
        }
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        // the key as written, `"key":`, spelt out at compile time (no key needs an
        // escape: `canonical_order` checks it)
        out.extend_from_slice(quoted[i].as_bytes());
        write_out(out, member).map_err(|e| under(e, keys[i]))?;
    }
    out.push(b'}');
    Ok(())
}

/// The order in which an object's members are written: by key, in UTF-16 code units
/// (RFC 8785 §3.2.3). Evaluated at compile time for each payload, where it also refuses
/// (fails the build on) a key that would need escaping or is not plain ASCII (whose
/// UTF-8 and UTF-16 orders could differ), and a key declared twice.
#[doc(hidden)]
pub const fn canonical_order<const N: usize>(keys: &[&str]) -> [usize; N] {
    assert!(keys.len() == N);
    let mut order = [0usize; N];
    let mut i = 0;
    while i < N {
        let key = keys[i].as_bytes();
        let mut b = 0;
        while b < key.len() {
            assert!(
                key[b] >= 0x20 && key[b] < 0x7f && key[b] != b'"' && key[b] != b'\\',
                "a payload key needs no escape"
            );
            b += 1;
        }
        order[i] = i;
        i += 1;
    }
    // insertion sort: a handful of keys
    let mut i = 1;
    while i < N {
        let mut j = i;
        while j > 0 && key_before(keys[order[j]].as_bytes(), keys[order[j - 1]].as_bytes()) {
            let t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
            j -= 1;
        }
        i += 1;
    }
    let mut i = 1;
    while i < N {
        assert!(key_before(keys[order[i - 1]].as_bytes(), keys[order[i]].as_bytes()), "a payload key declared twice");
        i += 1;
    }
    order
}

/// `a` sorts strictly before `b`, byte by byte (ASCII: as UTF-16 code units do).
const fn key_before(a: &[u8], b: &[u8]) -> bool {
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

/// A kind's (or a nested object's) writer: one [`Out`] per member.
macro_rules! writer {
    ($name:ident { $($field:ident,)* }) => {
        #[doc = concat!("Writes what [`super::", stringify!($name), "`] reads: every member, in canonical order.")]
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            $(pub $field: Out<'a>,)*
        }

        impl WriteObject for $name<'_> {
            fn write(&self, out: &mut Vec<u8>) -> Result<(), CanonError> {
                const KEYS: &[&str] = &[$(stringify!($field),)*];
                const QUOTED: &[&str] = &[$(concat!("\"", stringify!($field), "\":"),)*];
                const ORDER: [usize; KEYS.len()] = canonical_order::<{ KEYS.len() }>(KEYS);
                write_object(out, KEYS, QUOTED, &ORDER, &[$(&self.$field,)*])
            }
        }
    };
}

/// A struct of members, each a [`Json`], read by [`Members::read`].
macro_rules! members {
    ($(#[$doc:meta])* $name:ident { $($field:ident,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $name<'a> {
            $(pub $field: Json<'a>,)*
        }

        impl<'a> Members<'a> for $name<'a> {
            fn take(&mut self, key: &str, raw: &'a str) {
                match key {
                    $(stringify!($field) => self.$field = Json::of(raw),)*
                    _ => {}
                }
            }
        }

        impl<'a> $name<'a> {
            /// Each member's name and value, in declaration order.
            pub fn members(&self) -> Vec<(&'static str, Json<'a>)> {
                vec![$((stringify!($field), self.$field),)*]
            }
        }
    };
}

macro_rules! payloads {
    (
        $($(#[$doc:meta])* $name:ident = $kind:ident { $($field:ident,)* })*
        ;
        $($(#[$ndoc:meta])* $nname:ident { $($nfield:ident,)* })*
    ) => {
        $(
            members! { $(#[$doc])* $name { $($field,)* } }

            impl<'a> Payload<'a> for $name<'a> {
                const KIND: Kind = Kind::$kind;
            }
        )*
        $(
            members! { $(#[$ndoc])* $nname { $($nfield,)* } }
        )*

        /// The writers: one per kind, and one per nested object, each with the members
        /// its reader declares.
        pub mod write {
            use super::{CanonError, Kind, Out, WriteObject, Written, canonical_order, write_object};
            $(
                writer! { $name { $($field,)* } }

                impl Written for $name<'_> {
                    const KIND: Kind = Kind::$kind;
                }
            )*
            $(
                writer! { $nname { $($nfield,)* } }
            )*

            /// Each kind's member names, as declared.
            pub const MEMBERS: &[(Kind, &[&str])] = &[$((Kind::$kind, &[$(stringify!($field),)*]),)*];
        }

        /// The members of `e`'s payload, read as its kind's payload: what a reader of
        /// any kind (a test, a viewer) can walk.
        pub fn members(e: &Event) -> Vec<(&'static str, Json<'_>)> {
            match e.kind {
                $(Kind::$kind => e.view::<$name>().members(),)*
            }
        }
    };
}

payloads! {
    /// `run_started`.
    RunStarted = RunStarted {
        case, run, agent, dataset_line, profile, tools, recording, sandbox, dataset, runtime,
        imported, system, declared_tools, source,
    }
    /// `turn_started`.
    TurnStarted = TurnStarted { turn, input, source, absent, }
    /// `context_compiled`.
    ContextCompiled = ContextCompiled { budget, total, sections, messages, dropped, over_section_budget, }
    /// `model_called`: `response` holds `content`, `tool_calls` and maybe `confidence`
    /// ([`Response`]); `usage` holds the tokens ([`Usage`]).
    ModelCalled = ModelCalled { request_hash, position, response, usage, latency_ms, api, source, absent, }
    /// `tool_proposed`.
    ToolProposed = ToolProposed { call_id, tool, args, }
    /// `policy_decided`.
    PolicyDecided = PolicyDecided {
        call_id, tool, verdict, rule, reason, args_tainted,
        tainted_by, grounded, ungrounded,
    }
    /// `approval_requested`.
    ApprovalRequested = ApprovalRequested { call_id, tool, route, }
    /// `approval_resolved`.
    ApprovalResolved = ApprovalResolved { call_id, approved, by, }
    /// `tool_withheld`.
    ToolWithheld = ToolWithheld { call_id, tool, rule, by, effect, idempotency_key, }
    /// `tool_executed`.
    ToolExecuted = ToolExecuted {
        call_id, tool, args, result, is_error, fault,
        duration_ms, deduplicated, effect, injected, timeout_ms,
        idempotency_key, first_execution, error_kind, source,
        args_raw, args_error, absent,
    }
    /// `memory_written`.
    MemoryWritten = MemoryWritten { tier, key, value, confidence, supersedes, source, }
    /// `memory_expired`.
    MemoryExpired = MemoryExpired { tier, key, value, source, }
    /// `memory_read`.
    MemoryRead = MemoryRead { tier, key, value, source, }
    /// `handoff`.
    Handoff = Handoff { call_id, from, to, allowed, payload_hash, taint, tainted_by, reason, }
    /// `security_flagged`: `request` (the request an external agent sent) for a
    /// `cross_case` flag, `call_id` for an `unrequested_tool` one.
    SecurityFlagged = SecurityFlagged { class, severity, source, tool, detail, request, call_id, }
    /// `replay_diverged`: `pointers` only from an agent behind the wire endpoints, whose
    /// neutral request is compared member by member.
    ReplayDiverged = ReplayDiverged { position, recorded_request_hash, actual_request_hash, reason, pointers, }
    /// `error`.
    Error = Error { kind, message, code, at, source, }
    /// `turn_completed`.
    TurnCompleted = TurnCompleted { turn, response, absent, }
    /// `grader_called`.
    GraderCalled = GraderCalled { target, command, input_digest, output_digest, pass, score, reason, error, message, }
    /// `judge_called`.
    JudgeCalled = JudgeCalled { target, judge, request_hash, sample, answer, usage, error, pointers, }
    /// `judge_verdict`.
    JudgeVerdict = JudgeVerdict { target, judge, request_hash, votes, reduce, value, passed, }
    /// `run_completed`.
    RunCompleted = RunCompleted { status, turns, tokens, }

    ; // nested objects

    /// `model_called.response`.
    Response { content, tool_calls, confidence, }
    /// `model_called.usage`.
    Usage { input_tokens, output_tokens, }
    /// One of `model_called.response.tool_calls`.
    LoggedCall { id, name, args, }
    /// `context_compiled.sections`: tokens per section.
    Sections { system, memory, history, tools, }
    /// `policy_decided.tainted_by`, `handoff.tainted_by`: the event whose untrusted
    /// content reached the call.
    TaintedBy { seq, tool, }
    /// `policy_decided.ungrounded`: the first argument no source grounds.
    Ungrounded { arg, value, }
    /// `run_started.imported` of an imported log: what was read, from which file.
    Imported { format, reads, file, digest, }
    /// One of `run_started.declared_tools` of an imported log.
    DeclaredTool { name, description, input_schema, safety_class, trust, classified_by, destructive, }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon;
    use crate::event::writer::LogWriter;
    use serde_json::json;

    fn event(kind: Kind, data: Value) -> Event {
        LogWriter::new(Vec::new()).append(Some(0), 0, kind, data).unwrap()
    }

    #[test]
    fn a_payload_reads_what_a_tree_would_and_borrows_its_strings() {
        let e = event(
            Kind::ToolExecuted,
            json!({"call_id": "c1", "tool": "pay", "args": {"to": "bob", "amount": 5}, "result": [1, "x"],
                   "is_error": false, "fault": null, "effect": null, "source": {"span": 9}}),
        );
        let p: ToolExecuted = e.view();
        assert!(matches!(p.tool.as_str(), Some(Cow::Borrowed("pay"))));
        assert_eq!(p.args.value(), e.get("args"));
        assert_eq!(p.args.raw(), "{\"amount\":5,\"to\":\"bob\"}");
        assert_eq!(p.result.value(), json!([1, "x"]));
        assert_eq!(p.is_error.as_bool(), Some(false));
        assert!(p.fault.is_null() && p.effect.is_null() && p.injected.is_null());
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent_as_it_did_from_a_tree() {
        for (data, tool) in [
            (json!({"tool": 7}), None),
            (json!({"tool": ["pay"]}), None),
            (json!({"tool": {"name": "pay"}}), None),
            (json!({"tool": null}), None),
            (json!({}), None),
            (json!({"tool": "a\"b\u{7}"}), Some("a\"b\u{7}")),
        ] {
            let e = event(Kind::ToolProposed, data.clone());
            let p: ToolProposed = e.view();
            assert_eq!(p.tool.as_str().as_deref(), tool, "{data}");
            assert_eq!(p.tool.as_str().as_deref(), e.get("tool").as_str(), "{data}");
        }
    }

    #[test]
    fn object_members_split_canonical_text_and_never_panic_on_anything_else() {
        let text =
            canon::to_canonical_string(&json!({"a\"]": "x\\\"}{", "b": [{"c": "]"}, []], "d": -1.5e-7, "e": {}}))
                .unwrap();
        let members: Vec<(&str, &str)> = object_members(&text).collect();
        assert_eq!(
            members,
            vec![("a\\\"]", "\"x\\\\\\\"}{\""), ("b", "[{\"c\":\"]\"},[]]"), ("d", "-1.5e-7"), ("e", "{}")]
        );
        for not_an_object in ["", "{}", "[1]", "5", "\"{\"", "null"] {
            assert_eq!(object_members(not_an_object).count(), 0, "{not_an_object}");
        }
        // cut anywhere, the rest reads as what can be read, without a panic
        for cut in 0..text.len() {
            if let Some(prefix) = text.get(..cut) {
                assert!(object_members(prefix).count() <= 4);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn object_members_are_the_trees_members_in_canonical_text(value in json_object()) {
            let text = canon::to_canonical_string(&value).unwrap();
            let split: Vec<(String, String)> = object_members(&text).map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let mut keys: Vec<(&String, &Value)> = value.as_object().unwrap().iter().collect();
            // canonical order is by UTF-16 code units of the keys
            keys.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            let tree: Vec<(String, String)> = keys
                .into_iter()
                .map(|(k, v)| {
                    let key = canon::to_canonical_string(&Value::String(k.clone())).unwrap();
                    (key[1..key.len() - 1].to_string(), canon::to_canonical_string(v).unwrap())
                })
                .collect();
            proptest::prop_assert_eq!(&split, &tree);
            for (key, raw) in &split {
                let member = Json::of(raw);
                if !key.contains('\\') {
                    proptest::prop_assert_eq!(Json::of(&text).member(key).raw(), raw.as_str());
                }
                proptest::prop_assert_eq!(member.as_str().map(|s| s.into_owned()), serde_json::from_str::<Value>(raw).unwrap().as_str().map(str::to_string));
            }
        }
    }

    proptest::proptest! {
        /// Reading a member from the end finds what reading from the start finds, for
        /// every key of the object and for keys it lacks, whatever the keys and strings
        /// hold (quotes, backslashes, braces, colons, commas).
        #[test]
        fn a_member_read_from_the_end_is_the_member(value in json_object(), missing in "[a-z\"\\\\]{0,6}") {
            let text = canon::to_canonical_string(&value).unwrap();
            let json = Json::of(&text);
            for (key, _) in object_members(&text).chain([(missing.as_str(), "")]) {
                proptest::prop_assert_eq!(json.last_member(key), json.member(key), "{} in {}", key, text);
            }
            // and when the last member holds a scalar, it is read from the end
            if let Some((key, raw)) = object_members(&text).last()
                && !raw.starts_with(['{', '['])
            {
                proptest::prop_assert_eq!(last_scalar_member(&text), Some((key, raw)), "{}", text);
            }
        }
    }

    /// The members the readers take from the end are their kinds' last: were a member
    /// added after them, they would be read from the start, correctly but slowly.
    #[test]
    fn tool_and_verdict_are_their_kinds_last_members() {
        let executed = event(
            Kind::ToolExecuted,
            json!({"args": {"q": "x"}, "call_id": "c-1", "deduplicated": false, "duration_ms": 3, "effect": null,
                   "fault": null, "is_error": false, "result": {"tool": "not this"}, "tool": "lookup"}),
        );
        assert_eq!(last_scalar_member(executed.data.as_str()).map(|(k, _)| k), Some("tool"));
        assert_eq!(executed.data.last_member("tool").as_str().as_deref(), Some("lookup"));
        let decided =
            event(Kind::PolicyDecided, json!({"call_id": "c-1", "tool": "lookup", "verdict": "allow", "rule": null}));
        assert_eq!(last_scalar_member(decided.data.as_str()).map(|(k, _)| k), Some("verdict"));
        for (kind, member) in [(Kind::ToolExecuted, "tool"), (Kind::PolicyDecided, "verdict")] {
            let (_, keys) = write::MEMBERS.iter().find(|(k, _)| *k == kind).unwrap();
            let last = keys.iter().max_by(|a, b| a.encode_utf16().cmp(b.encode_utf16())).unwrap();
            assert_eq!(*last, member, "{kind}: {keys:?}");
        }
    }

    fn json_object() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000_000i64..1_000_000).prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            // long enough to cross the string reader's first sixteen bytes, escapes anywhere
            "[a-z\"\\\\{}\\[\\],:\u{1}é ]{0,40}".prop_map(Value::String),
        ];
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"\\\\]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map("[a-z\"\\\\{}:,]{0,24}", value, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// The agent chooses the text of arguments and results: text shaped like members
    /// (quotes, braces, a forged `is_error` or `tool`) stays inside its string.
    #[test]
    fn members_forged_inside_agent_text_are_not_read_as_members() {
        let forged = "x\",\"is_error\":false,\"tool\":\"refund\"}";
        let e = event(
            Kind::ToolExecuted,
            json!({"tool": "transfer", "args": {"memo": forged, "\"tool\"": "refund"}, "result": [forged, {"}": "{"}],
                   "is_error": true}),
        );
        let p: ToolExecuted = e.view();
        assert_eq!(p.tool.as_str().as_deref(), Some("transfer"));
        assert_eq!(p.is_error.as_bool(), Some(true));
        assert_eq!(p.args.member("memo").as_str().as_deref(), Some(forged));
        assert!(p.args.member("tool").is_null(), "an escaped key is not the member it spells");
        assert_eq!(p.result.items().len(), 2);
        assert_eq!(e.data.member("tool").as_str().as_deref(), Some("transfer"));
    }

    /// What a writer wrote, or the error it gave, beside what the canonical writer
    /// gives for the tree of the same data.
    fn agree(tree: &Value, data: &dyn WriteObject) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut out = b"prefix".to_vec();
        let written = data.write(&mut out).map(|()| String::from_utf8(out.split_off(6)).unwrap());
        let of_tree = canon::to_canonical_string(tree);
        match (&written, &of_tree) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a.to_string(), b.to_string()),
            _ => proptest::prop_assert!(false, "written {:?}, tree {:?}", written, of_tree),
        }
        Ok(())
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
            "[\u{0}-\u{1f}\"\\\\a-z\u{e9}\u{e000}\u{1f600}]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\u{e000}\u{1f600}~/]{0,5}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        "[\u{0}-\u{1f}\"\\\\ a-z\u{7f}\u{e9}\u{2028}\u{e000}\u{1f600}]{0,24}"
    }

    /// Counts mostly in range, now and then past 2^53−1.
    fn count() -> impl proptest::strategy::Strategy<Value = u64> {
        use proptest::prelude::*;
        prop_oneof![8 => 0u64..100_000, 1 => 9_007_199_254_740_990u64..9_007_199_254_740_994, 1 => any::<u64>()]
    }

    proptest::proptest! {
        /// The runtime's most frequent event, nested objects, an array of them, an
        /// optional member and agent-chosen arguments: the bytes (or the error, naming
        /// the same place) of the tree of the same data.
        #[test]
        fn model_called_writes_what_its_tree_canonicalises_to(
            hash in proptest::prelude::any::<[u8; 32]>(),
            position in 0usize..1000,
            content in text(),
            calls in proptest::collection::vec((text(), text(), json_value()), 0..3),
            confidence in proptest::option::of(proptest::prop_oneof![0.0f64..=1.0, proptest::prelude::any::<f64>(), proptest::strategy::Just(1e17), proptest::strategy::Just(-0.0)]),
            (input_tokens, output_tokens, latency_ms) in (count(), count(), count()),
        ) {
            let hash = Digest(hash);
            let tool_calls: Vec<write::LoggedCall> = calls
                .iter()
                .map(|(id, name, args)| write::LoggedCall { id: id.into(), name: name.into(), args: args.into() })
                .collect();
            let data = write::ModelCalled {
                request_hash: (&hash).into(),
                position: position.into(),
                response: Out::Object(&write::Response {
                    content: (&content).into(),
                    tool_calls: Out::Array(&tool_calls),
                    confidence: confidence.map_or(Out::Absent, Out::Float),
                }),
                usage: Out::Object(&write::Usage { input_tokens: input_tokens.into(), output_tokens: output_tokens.into() }),
                latency_ms: latency_ms.into(),
                api: Out::Absent, source: Out::Absent, absent: Out::Absent, };
            let mut response = json!({"content": content,
                "tool_calls": calls.iter().map(|(id, name, args)| json!({"id": id, "name": name, "args": args})).collect::<Vec<_>>()});
            if let Some(c) = confidence {
                response["confidence"] = json!(c);
            }
            let tree = json!({"request_hash": hash.to_string(), "position": position, "response": response,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}, "latency_ms": latency_ms});
            agree(&tree, &data)?;
        }

        #[test]
        fn context_compiled_writes_what_its_tree_canonicalises_to(
            budget in proptest::option::of(count()),
            (total, system, memory, history, tools) in (count(), count(), count(), count(), count()),
            (messages, dropped) in (0usize..500, 0usize..500),
            over in proptest::sample::subsequence(vec!["system", "memory", "tools"], 0..=3),
        ) {
            let data = write::ContextCompiled {
                budget: budget.into(),
                total: total.into(),
                sections: Out::Object(&write::Sections { system: system.into(), memory: memory.into(), history: history.into(), tools: tools.into() }),
                messages: messages.into(),
                dropped: dropped.into(),
                over_section_budget: Out::Array(&over),
            };
            let tree = json!({"budget": budget, "total": total,
                "sections": {"system": system, "memory": memory, "history": history, "tools": tools},
                "messages": messages, "dropped": dropped, "over_section_budget": over});
            agree(&tree, &data)?;
        }

        #[test]
        fn tool_executed_writes_what_its_tree_canonicalises_to(
            (call_id, tool) in (text(), text()),
            (args, result) in (json_value(), json_value()),
            effect in proptest::option::of(json_value()),
            is_error in proptest::prelude::any::<bool>(),
            duration_ms in count(),
            key in proptest::option::of(text()),
            grounded in proptest::option::of(json_value()),
        ) {
            let data = write::ToolExecuted {
                call_id: (&call_id).into(),
                tool: (&tool).into(),
                args: (&args).into(),
                result: (&result).into(),
                is_error: is_error.into(),
                fault: Out::Null,
                duration_ms: duration_ms.into(),
                deduplicated: false.into(),
                effect: effect.as_ref().into(),
                injected: Out::Absent,
                timeout_ms: Out::Absent,
                idempotency_key: key.as_ref().map_or(Out::Absent, Out::from),
                first_execution: Out::Absent,
                error_kind: Out::Absent,
                source: grounded.as_ref().and_then(Value::as_object).map_or(Out::Absent, Out::Map), args_raw: Out::Absent, args_error: Out::Absent, absent: Out::Absent, };
            let mut tree = json!({"call_id": call_id, "tool": tool, "args": args, "result": result, "is_error": is_error,
                "fault": null, "duration_ms": duration_ms, "deduplicated": false, "effect": effect});
            if let Some(key) = &key {
                tree["idempotency_key"] = json!(key);
            }
            if let Some(map) = grounded.as_ref().filter(|g| g.is_object()) {
                tree["source"] = map.clone();
            }
            agree(&tree, &data)?;
        }

        #[test]
        fn scalars_and_options_write_what_json_of_them_canonicalises_to(
            turn in proptest::prelude::any::<u32>(),
            input in text(),
            signed in proptest::prelude::any::<i64>(),
            float in proptest::prop_oneof![proptest::prelude::any::<f64>(), proptest::strategy::Just(f64::NAN), proptest::strategy::Just(1e17)],
            maybe in proptest::option::of(count()),
        ) {
            agree(&json!({"turn": turn, "input": input}), &write::TurnStarted { turn: turn.into(), input: (&input).into(), source: Out::Absent, absent: Out::Absent, })?;
            let data = write::MemoryWritten {
                tier: "episodic".into(),
                key: (&input).into(),
                value: Out::Canonical("[1,\"a\"]"),
                confidence: float.into(),
                supersedes: maybe.into(),
                source: signed.into(),
            };
            let tree = json!({"tier": "episodic", "key": input, "value": [1, "a"], "confidence": float,
                "supersedes": maybe, "source": signed});
            agree(&tree, &data)?;
        }
    }

    /// Keys are written in UTF-16 order whatever order they are declared in, and the
    /// order refuses what cannot be a payload key.
    #[test]
    fn canonical_order_sorts_keys_and_refuses_duplicates_and_escapes() {
        assert_eq!(canonical_order::<4>(&["turn", "input", "b", "a_b"]), [3, 2, 1, 0]);
        assert_eq!(canonical_order::<3>(&["ab", "a", "B"]), [2, 1, 0]);
        for bad in [&["a", "b", "a"][..], &["a\"b", "c", "d"][..], &["é", "b", "c"][..]] {
            let refused = std::panic::catch_unwind(|| canonical_order::<3>(bad));
            assert!(refused.is_err(), "{bad:?}");
        }
        // every kind's writer writes its members in the order the canonical writer does
        for (kind, keys) in write::MEMBERS {
            let tree = Value::Object(keys.iter().map(|k| (k.to_string(), json!(1))).collect());
            let canonical = canon::to_canonical_string(&tree).unwrap();
            let split: Vec<&str> = object_members(&canonical).map(|(k, _)| k).collect();
            let mut sorted = keys.to_vec();
            sorted.sort();
            assert_eq!(split, sorted, "{kind}");
        }
    }

    /// The published schema (`stateval schema event`) and docs/design.md's table list,
    /// per kind, exactly the members the declaration above gives each kind's writer.
    #[test]
    fn the_event_schema_and_the_design_docs_list_each_kinds_declared_members() {
        let schema: Value = serde_json::from_str(include_str!("../../schemas/event.json")).unwrap();
        let from_schema: Vec<(String, Vec<String>)> = schema["allOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rule| {
                let kind = rule["if"]["properties"]["kind"]["const"].as_str().unwrap().to_string();
                let names = &rule["then"]["properties"]["data"]["propertyNames"]["enum"];
                (kind, names.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect())
            })
            .collect();
        let declared: Vec<(String, Vec<String>)> = write::MEMBERS
            .iter()
            .map(|(kind, keys)| (kind.as_str().to_string(), keys.iter().map(|k| k.to_string()).collect()))
            .collect();
        assert_eq!(from_schema, declared);

        let design = include_str!("../../docs/design.md");
        let begin = design.find("<!-- event-members: begin -->").expect("the table's start");
        let end = design.find("<!-- event-members: end -->").expect("the table's end");
        let from_docs: Vec<(String, Vec<String>)> = design[begin..end]
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
                let names = |cell: &str| -> Vec<String> {
                    cell.split(',').map(|n| n.trim().trim_matches('`').to_string()).filter(|n| !n.is_empty()).collect()
                };
                (names(cells[0]).concat(), names(cells[1]))
            })
            .collect();
        assert_eq!(from_docs, declared);
    }

    #[test]
    fn numbers_read_as_value_reads_them() {
        for n in [
            json!(0),
            json!(7),
            json!(9007199254740991u64),
            json!(-3),
            json!(2.5),
            json!(1e21),
            json!("5"),
            json!(null),
        ] {
            let e = event(Kind::ContextCompiled, json!({"total": n}));
            let p: ContextCompiled = e.view();
            assert_eq!(p.total.as_u64(), e.get("total").as_u64(), "{n}");
            assert_eq!(p.total.as_f64(), e.get("total").as_f64(), "{n}");
            assert_eq!(p.total.as_str().as_deref(), e.get("total").as_str(), "{n}");
        }
        let called = event(Kind::ModelCalled, json!({"usage": {"input_tokens": 3}}));
        let usage: Usage = called.view::<ModelCalled>().usage.view();
        assert_eq!((usage.input_tokens.as_u64(), usage.output_tokens.as_u64()), (Some(3), None));
    }
}
