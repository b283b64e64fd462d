//! Canonical bytes and digests: the one place that decides what "the same JSON" means.
//!
//! Every hashed thing in stateval (events, requests, dataset lines, manifests) is first
//! turned into RFC 8785 (JCS) canonical bytes, then hashed with blake3 in derive-key
//! mode. Each use has its own derive-key context so a digest of one kind can never be
//! passed off as another. Digests are written `blake3:<64 hex>`.
//!
//! The I-JSON guard refuses integers outside ±(2^53−1) *before* hashing: JCS serialises
//! numbers as IEEE doubles, so a larger integer would be silently rounded and two
//! different inputs could share one digest.
//!
//! The JCS writer is our own: every event passes through it, and a general-purpose
//! canonicaliser that buffers and re-sorts each object was most of the pipeline's time.
//! serde_json's map is a `BTreeMap`, already in code-point order, which equals JCS's
//! UTF-16 order unless a key holds a character at or above U+E000 (then that object is
//! re-sorted). Numbers use ryu-js, the ECMAScript `Number::toString` algorithm JCS
//! prescribes. A property test checks the writer against a reference implementation.
//!
//! [`scan`] reads the plainest JSON (no escapes, plain integers) by hand and writes its
//! canonical text as it goes: the metric batch readers and the recording reader take
//! their everyday lines through it and hand everything else to `serde_json`.

pub(crate) mod scan;

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use serde_json::Value;

/// Largest integer an IEEE double holds exactly (I-JSON, RFC 7493 §2.2).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Derive-key contexts, one per kind of digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// An event-log line without its `hash` field.
    Event,
    /// A whole request document: a judge request's digest, and model requests recorded
    /// before their digest was taken member by member.
    Request,
    /// A model request's digest over its members' digests (`replay::digest`).
    ModelRequest,
    /// One member of a model request (`replay::digest`).
    RequestMember,
    /// Any input artefact: a dataset line, a profile, a tool manifest, a recording.
    Content,
    /// A run manifest (every log's head): its digest is the run's root.
    Manifest,
}

impl Context {
    fn key(self) -> &'static str {
        match self {
            Context::Event => "stateval event v1",
            Context::Request => "stateval request v1",
            Context::Content => "stateval content v1",
            Context::Manifest => "stateval manifest v1",
            Context::ModelRequest => "stateval request v2",
            Context::RequestMember => "stateval request member v2",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CanonError {
    #[error("integer {value} at {pointer} is outside ±(2^53−1) and cannot be represented exactly (I-JSON)")]
    UnsafeInteger { pointer: String, value: String },
    #[error("cannot canonicalise: {0}")]
    Serialize(String),
}

/// A blake3 digest, displayed as `blake3:<hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    pub fn to_hex(&self) -> String {
        self.hex_str().to_string()
    }

    /// The lowercase hex of the digest's bytes, as `blake3::Hash::to_hex` spells it,
    /// by a table of byte pairs: each event's line spells its hash and the one before
    /// it, and blake3's own spelling, a character at a time, was 1.4 % of a run.
    pub fn hex(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        const PAIRS: [[u8; 2]; 256] = {
            let mut pairs = [[0u8; 2]; 256];
            let mut i = 0;
            while i < 256 {
                pairs[i] = [DIGITS[i >> 4], DIGITS[i & 15]];
                i += 1;
            }
            pairs
        };
        let mut hex = [0u8; 64];
        for (pair, byte) in hex.chunks_exact_mut(2).zip(self.0) {
            pair.copy_from_slice(&PAIRS[usize::from(byte)]);
        }
        hex
    }

    /// [`Digest::hex`] as text.
    pub fn hex_str(&self) -> HexStr {
        HexStr(self.hex())
    }

    /// `to_string()` without the formatting machinery (for event data built per event).
    pub fn text(&self) -> String {
        let mut text = String::with_capacity(7 + 64);
        text.push_str("blake3:");
        text.push_str(self.hex_str().as_str());
        text
    }
}

/// A digest's 64 hex digits, on the stack.
#[derive(Clone, Copy)]
pub struct HexStr([u8; 64]);

impl HexStr {
    pub fn as_str(&self) -> &str {
        // only ASCII digits and a–f are ever written
        std::str::from_utf8(&self.0).expect("hex digits")
    }
}

impl fmt::Display for HexStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blake3:{}", self.hex_str())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a digest: expected \"blake3:\" followed by 64 hex digits")]
pub struct DigestParseError;

impl FromStr for Digest {
    type Err = DigestParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex = s.strip_prefix("blake3:").ok_or(DigestParseError)?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(DigestParseError);
        }
        blake3::Hash::from_hex(hex).map(|h| Digest(*h.as_bytes())).map_err(|_| DigestParseError)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Digest raw bytes under a context.
pub fn digest(context: Context, bytes: &[u8]) -> Digest {
    SCRATCH.with_borrow_mut(|scratch| {
        let digester = scratch[context.index()].get_or_insert_with(|| Digester::new(context));
        digester.reset();
        digester.update(bytes);
        digester.finish()
    })
}

thread_local! {
    /// A digester per context for [`digest`], reset for each use rather than made
    /// afresh: a fresh one is a copy of the derived hasher, 1.9 KB of state.
    static SCRATCH: std::cell::RefCell<[Option<Digester>; 6]> = const { std::cell::RefCell::new([const { None }; 6]) };
}

/// A digest fed piece by piece: the same as [`digest`] of the concatenated pieces. A clone
/// carries the state so far, so a shared prefix is hashed once (`runtime::context`).
#[derive(Clone)]
pub struct Digester(blake3::Hasher);

/// A fresh hasher per context, derived once: deriving the key hashes the context string,
/// which cost about as much as hashing a short event line; a copy of the derived state is
/// the same hasher.
static DERIVED: [LazyLock<blake3::Hasher>; 6] = [
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::Event.key())),
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::Request.key())),
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::Content.key())),
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::Manifest.key())),
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::ModelRequest.key())),
    LazyLock::new(|| blake3::Hasher::new_derive_key(Context::RequestMember.key())),
];

impl Context {
    /// Where its derived hasher is in [`DERIVED`].
    fn index(self) -> usize {
        match self {
            Context::Event => 0,
            Context::Request => 1,
            Context::Content => 2,
            Context::Manifest => 3,
            Context::ModelRequest => 4,
            Context::RequestMember => 5,
        }
    }
}

impl Digester {
    pub fn new(context: Context) -> Self {
        Digester(DERIVED[context.index()].clone())
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Back to what [`Digester::new`] of its context gives, in place: a writer reuses
    /// one for every line rather than copying a fresh hasher's couple of kilobytes each
    /// time.
    pub fn reset(&mut self) {
        self.0.reset();
    }

    pub fn finish(&self) -> Digest {
        Digest(*self.0.finalize().as_bytes())
    }
}

/// A writer that digests the bytes it passes on ([`Context::Content`], as a manifest
/// lists files): a run knows what it wrote without reading the file back.
pub struct Digesting<W> {
    inner: W,
    digester: Digester,
    bytes: u64,
}

impl<W: std::io::Write> Digesting<W> {
    pub fn new(inner: W) -> Self {
        Digesting { inner, digester: Digester::new(Context::Content), bytes: 0 }
    }

    /// The writer, the number of bytes written through it and their digest.
    pub fn finish(self) -> (W, u64, Digest) {
        (self.inner, self.bytes, self.digester.finish())
    }
}

impl<W: std::io::Write> std::io::Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.digester.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Refuse integers an IEEE double cannot hold exactly; report where the first one is.
pub fn check_ijson(value: &Value) -> Result<(), CanonError> {
    check_ijson_under(value, String::new())
}

/// [`check_ijson`] of a value that lies at `pointer` (`/a/0`; empty for the root, which
/// an error then names as `/`) inside a larger document: the error names the place in
/// that document.
pub(crate) fn check_ijson_under(value: &Value, mut pointer: String) -> Result<(), CanonError> {
    fn walk(value: &Value, pointer: &mut String) -> Result<(), CanonError> {
        match value {
            Value::Number(n) => {
                if is_unsafe_integer(n) {
                    let at = if pointer.is_empty() { "/".to_string() } else { pointer.clone() };
                    return Err(CanonError::UnsafeInteger { pointer: at, value: n.to_string() });
                }
                Ok(())
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(itoa::Buffer::new().format(i));
                    walk(item, pointer)?;
                    pointer.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (k, v) in map {
                    let len = pointer.len();
                    pointer.push('/');
                    // escaped in place: this walk runs on every recorded line, and two
                    // `replace`s allocated twice for every key
                    for c in k.chars() {
                        match c {
                            '~' => pointer.push_str("~0"),
                            '/' => pointer.push_str("~1"),
                            c => pointer.push(c),
                        }
                    }
                    walk(v, pointer)?;
                    pointer.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(value, &mut pointer)
}

/// Append the RFC 8785 canonical bytes of `value` to `out`, after the I-JSON guard.
pub fn write_canonical(out: &mut Vec<u8>, value: &Value) -> Result<(), CanonError> {
    let start = out.len();
    if write_value(out, value).is_err() {
        out.truncate(start);
        // one pass in the common case; a second walk only to say where the bad integer is
        check_ijson(value)?;
        return Err(CanonError::Serialize("an integer is outside ±(2^53−1)".into()));
    }
    Ok(())
}

/// An integer outside ±(2^53−1) was met (its place is found by [`check_ijson`]).
struct UnsafeInteger;

fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), UnsafeInteger> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n)?,
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(out, map)?,
    }
    Ok(())
}

/// Append the canonical bytes of an object given as its map; `Err` (nothing appended)
/// when it holds an integer outside ±(2^53−1) ([`check_ijson`] says where).
pub(crate) fn write_canonical_map(out: &mut Vec<u8>, map: &serde_json::Map<String, Value>) -> Result<(), ()> {
    let start = out.len();
    write_map(out, map).map_err(|UnsafeInteger| out.truncate(start))
}

fn write_map(out: &mut Vec<u8>, map: &serde_json::Map<String, Value>) -> Result<(), UnsafeInteger> {
    out.push(b'{');
    let mut first = true;
    let mut member = |out: &mut Vec<u8>, k: &str, v: &Value| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        write_string(out, k);
        out.push(b':');
        write_value(out, v)
    };
    // a char at or above U+E000 is the only kind whose UTF-8 lead byte is 0xEE or
    // more, and the only kind that sorts differently in UTF-16
    if map.keys().any(|k| k.bytes().any(|b| b >= 0xEE)) {
        let mut members: Vec<(&String, &Value)> = map.iter().collect();
        members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        for (k, v) in members {
            member(out, k, v)?;
        }
    } else {
        for (k, v) in map {
            member(out, k, v)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// An integer beyond ±(2^53−1), or a double ECMAScript prints as one (integral, below
/// 10^21: `1e17` prints as `100000000000000000`). Either would be read back as such an
/// integer, so both are refused alike: a line the writer wrote must verify.
fn is_unsafe_integer(n: &serde_json::Number) -> bool {
    match (n.as_u64(), n.as_i64(), n.as_f64()) {
        (Some(u), _, _) => u > MAX_SAFE_INTEGER,
        (None, Some(i), _) => i.unsigned_abs() > MAX_SAFE_INTEGER,
        (None, None, Some(f)) => f.fract() == 0.0 && f.abs() > MAX_SAFE_INTEGER as f64 && f.abs() < 1e21,
        _ => false,
    }
}

fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) -> Result<(), UnsafeInteger> {
    if is_unsafe_integer(n) {
        return Err(UnsafeInteger);
    }
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(itoa::Buffer::new().format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
    } else if let Some(f) = n.as_f64() {
        // ECMAScript prints -0 as "0"; ryu-js does the rest of Number::toString
        let f = if f == 0.0 { 0.0 } else { f };
        out.extend_from_slice(ryu_js::Buffer::new().format(f).as_bytes());
    }
    Ok(())
}

/// JSON string escaping as ECMAScript `JSON.stringify` does it (RFC 8785 §3.2.2.2):
/// `"` and `\\`, the five short control escapes, other controls as lowercase `\u00xx`,
/// everything else (including U+007F and U+2028) as is.
fn write_string(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    // `bytes[start..i]` is the run not yet copied: it needs no escape
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // most text needs no escape: pass over it eight bytes at a time (the last few
        // bytes padded with a letter, so short keys and values take one test too)
        let rest = &bytes[i..];
        let word = match rest.get(..8) {
            Some(word) => word.try_into().unwrap_or_default(),
            None => {
                let mut padded = [b'a'; 8];
                padded[..rest.len()].copy_from_slice(rest);
                padded
            }
        };
        if !word_needs_escape(u64::from_le_bytes(word)) {
            i += rest.len().min(8);
            continue;
        }
        let b = bytes[i];
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xf) as usize]);
        } else {
            out.extend_from_slice(escape);
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Does any of the eight bytes of `word` need escaping in a JSON string (a control
/// below 0x20, `"` or `\`)? Exact, by the usual borrow tricks: `(x - 0x01…) & !x &
/// 0x80…` is non-zero exactly when some byte of `x` is zero, and with `0x20…` exactly
/// when some byte is below 0x20.
#[inline]
fn word_needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS != 0;
    control || has_zero(word ^ (ONES * u64::from(b'"'))) || has_zero(word ^ (ONES * u64::from(b'\\')))
}

/// The RFC 8785 canonical bytes of `value`.
pub fn to_canonical(value: &Value) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::with_capacity(128);
    write_canonical(&mut out, value)?;
    Ok(out)
}

/// The canonical text of `value` (always valid UTF-8).
pub fn to_canonical_string(value: &Value) -> Result<String, CanonError> {
    to_canonical(value).map(|b| String::from_utf8(b).expect("JCS output is UTF-8"))
}

/// Append the canonical text of one number; `false` (nothing appended) for an integer
/// outside ±(2^53−1). For readers that canonicalise while they parse.
pub(crate) fn write_canonical_number(out: &mut Vec<u8>, n: &serde_json::Number) -> bool {
    write_number(out, n).is_ok()
}

/// Append the canonical text of one string. For readers that canonicalise while they parse,
/// and typed writers.
pub fn write_canonical_str(out: &mut Vec<u8>, s: &str) {
    write_string(out, s);
}

/// Digest of the canonical bytes of `value`.
pub fn canonical_digest(context: Context, value: &Value) -> Result<Digest, CanonError> {
    Ok(digest(context, &to_canonical(value)?))
}

/// Equality as JCS sees it: key order never matters and numbers compare by value, so
/// `1` equals `1.0` (both canonicalise to `1`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every context there is.
    const EVERY: [Context; 6] = [
        Context::Event,
        Context::Request,
        Context::Content,
        Context::Manifest,
        Context::ModelRequest,
        Context::RequestMember,
    ];

    /// A digest made with the reused digester of its context is the one a fresh
    /// digester makes, whatever was digested before it, in any context.
    #[test]
    fn a_reused_digester_digests_as_a_fresh_one() {
        let long = vec![7u8; 5000];
        let inputs: [&[u8]; 4] = [b"", b"abc", &long, b"{\"a\":1}"];
        for _ in 0..2 {
            for context in EVERY {
                for bytes in inputs {
                    let mut fresh = Digester::new(context);
                    fresh.update(bytes);
                    assert_eq!(digest(context, bytes), fresh.finish());
                }
            }
        }
        assert_ne!(digest(Context::Event, b"x"), digest(Context::Content, b"x"));
    }

    /// The table spelling is blake3's: every byte value in every position, and the
    /// digests of a few thousand inputs.
    #[test]
    fn a_digest_is_spelt_as_blake3_spells_it() {
        let blake3_hex = |d: &Digest| blake3::Hash::from_bytes(d.0).to_hex().to_string();
        for byte in 0..=255u8 {
            let d = Digest([byte; 32]);
            assert_eq!(d.to_hex(), blake3_hex(&d));
        }
        for i in 0..4096u32 {
            let d = Digest(*blake3::hash(&i.to_le_bytes()).as_bytes());
            assert_eq!(d.hex_str().as_str(), blake3_hex(&d));
            assert_eq!(d.to_string(), format!("blake3:{}", blake3_hex(&d)));
            assert_eq!(d.text(), d.to_string());
        }
    }

    #[test]
    fn canonical_form_sorts_keys_and_drops_whitespace() {
        let v: Value = serde_json::from_str(r#"{ "b": 1, "a": [true, null, "x"] }"#).unwrap();
        assert_eq!(to_canonical_string(&v).unwrap(), r#"{"a":[true,null,"x"],"b":1}"#);
    }

    #[test]
    fn canonical_numbers_follow_ecmascript() {
        let v = json!([1.0, 1e21, 0.000001, 1e-7, -0.0, 123.456]);
        assert_eq!(to_canonical_string(&v).unwrap(), "[1,1e+21,0.000001,1e-7,0,123.456]");
    }

    #[test]
    fn integers_beyond_two_to_the_53_are_refused_with_their_place() {
        let v = json!({"a": [1, 9007199254740992u64]});
        let err = to_canonical(&v).unwrap_err();
        assert_eq!(err, CanonError::UnsafeInteger { pointer: "/a/1".into(), value: "9007199254740992".into() });
        assert!(to_canonical(&json!(9007199254740991u64)).is_ok());
        assert!(to_canonical(&json!(-9007199254740991i64)).is_ok());
        assert!(to_canonical(&json!(-9007199254740992i64)).is_err());
        // the place is a JSON Pointer: `~` and `/` in keys escaped, `~` first
        let err = check_ijson(&json!({"a/~b": [0, {"~1": 9007199254740992u64}]})).unwrap_err();
        assert_eq!(
            err,
            CanonError::UnsafeInteger { pointer: "/a~1~0b/1/~01".into(), value: "9007199254740992".into() }
        );
    }

    #[test]
    fn a_double_printed_as_an_unsafe_integer_is_refused_like_one() {
        // 1e17 prints as 100000000000000000, which reads back as an unsafe integer
        let err = to_canonical(&json!({"x": 1e17})).unwrap_err();
        assert!(matches!(err, CanonError::UnsafeInteger { ref pointer, .. } if pointer == "/x"), "{err:?}");
        assert!(to_canonical(&json!(-1.4222095886570668e16)).is_err());
        assert!(to_canonical(&json!([1e21, 1.5e16])).is_err());
        assert_eq!(
            to_canonical_string(&json!([1e21, 9007199254740991.0, 0.5])).unwrap(),
            "[1e+21,9007199254740991,0.5]"
        );
    }

    #[test]
    fn digests_round_trip_through_text() {
        let d = digest(Context::Event, b"x");
        let text = d.to_string();
        assert_eq!(d.text(), text);
        assert!(text.starts_with("blake3:") && text.len() == 7 + 64);
        assert_eq!(text.parse::<Digest>().unwrap(), d);
        assert!("blake3:XYZ".parse::<Digest>().is_err());
        assert!(text.to_uppercase().parse::<Digest>().is_err());
    }

    #[test]
    fn a_digest_fed_in_pieces_is_the_digest_of_the_whole() {
        let mut digester = Digester::new(Context::Content);
        digester.update(b"ab");
        digester.update(b"c");
        assert_eq!(digester.finish(), digest(Context::Content, b"abc"));
        assert_ne!(digester.finish(), digest(Context::Event, b"abc"));
    }

    #[test]
    fn a_digester_from_the_derived_state_is_a_freshly_derived_one() {
        for context in EVERY {
            let mut fresh = blake3::Hasher::new_derive_key(context.key());
            fresh.update(b"some bytes");
            let mut digester = Digester::new(context);
            digester.update(b"some bytes");
            assert_eq!(digester.finish().0, *fresh.finalize().as_bytes());
            // and one reset after hashing more than a chunk is fresh again
            digester.update(&[7u8; 3000]);
            digester.reset();
            digester.update(b"some bytes");
            assert_eq!(digester.finish().0, *fresh.finalize().as_bytes());
        }
    }

    #[test]
    fn contexts_separate_digests_of_the_same_bytes() {
        assert_ne!(digest(Context::Event, b"x"), digest(Context::Request, b"x"));
        assert_ne!(digest(Context::Request, b"x"), digest(Context::Content, b"x"));
        assert_ne!(digest(Context::Request, b"x"), digest(Context::ModelRequest, b"x"));
        assert_ne!(digest(Context::ModelRequest, b"x"), digest(Context::RequestMember, b"x"));
    }

    #[test]
    fn json_eq_ignores_key_order_and_number_spelling() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"c":[1.0,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"c":[1,2.0]},"a":1.0}"#).unwrap();
        assert!(json_eq(&a, &b));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }

    #[test]
    fn strings_escape_as_ecmascript_json_stringify() {
        let v = json!("q\"b\\n\n\u{1}\u{7f}\u{2028}é");
        assert_eq!(to_canonical_string(&v).unwrap(), "\"q\\\"b\\\\n\\n\\u0001\u{7f}\u{2028}é\"");
    }

    #[test]
    fn keys_sort_by_utf16_code_units_not_code_points() {
        // U+1F600 is a surrogate pair (0xD83D…) in UTF-16 and sorts before U+E000
        let v = json!({"\u{E000}": 1, "\u{1F600}": 2, "a": 3});
        assert_eq!(to_canonical_string(&v).unwrap(), "{\"a\":3,\"\u{1F600}\":2,\"\u{E000}\":1}");
    }

    fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-9007199254740991i64..=9007199254740991).prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite, not printed as an unsafe integer", |f| {
                    f.is_finite() && !is_unsafe_integer(&serde_json::Number::from_f64(*f).unwrap())
                })
                .prop_map(|f| json!(f)),
            "\\PC{0,12}".prop_map(Value::String),
            "[\u{0}-\u{1f}\"\\\\a\u{e000}\u{1f600}]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn a_word_needs_escaping_exactly_when_one_of_its_bytes_does() {
        let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        // every byte value in every lane, among bytes that need nothing and bytes that
        // sit next to the thresholds (0x1f/0x20, 0x21/0x22/0x23, 0x5b/0x5c/0x5d, 0x7f-0xff)
        for filler in [b'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff] {
            for lane in 0..8 {
                for b in 0..=255u8 {
                    let mut word = [filler; 8];
                    word[lane] = b;
                    assert_eq!(word_needs_escape(u64::from_le_bytes(word)), needs(b), "{word:?}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Long strings with escapes anywhere: the eight-byte scan must find each one.
        #[test]
        fn long_strings_escape_as_the_reference_does(
            s in "[\u{0}-\u{1f}\"\\\\a-z \u{7f}\u{e9}\u{2028}\u{e000}\u{1f600}]{0,80}",
        ) {
            let v = json!({ s.clone(): s });
            let ours = to_canonical(&v).unwrap();
            let reference = serde_json_canonicalizer::to_vec(&v).unwrap();
            proptest::prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(reference).unwrap());
        }

        #[test]
        fn our_jcs_writer_agrees_with_a_reference_implementation(v in arbitrary_json()) {
            let ours = to_canonical(&v).unwrap();
            let reference = serde_json_canonicalizer::to_vec(&v).unwrap();
            proptest::prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(reference).unwrap());
        }

        /// What the writer accepts reads back to the same bytes: a log line it wrote
        /// verifies. (A double such as 1e17 prints as an integer beyond 2^53; it is
        /// refused on the way in, not found unreadable later.)
        #[test]
        fn whatever_the_writer_accepts_reads_back_to_itself(
            f in proptest::prelude::any::<f64>(),
            i in proptest::prelude::any::<i64>(),
            e in -30i32..30,
        ) {
            let v = json!([f, i, 10f64.powi(e), {"f": f, "g": f * 10f64.powi(e)}]);
            if let Ok(once) = to_canonical(&v) {
                let reparsed: Value = serde_json::from_slice(&once).unwrap();
                proptest::prop_assert_eq!(to_canonical(&reparsed).unwrap(), once);
            }
        }

        #[test]
        fn canonical_form_is_idempotent(s in "[ -~]{0,40}", n in -1_000_000i64..1_000_000, f in -1e6f64..1e6) {
            let v = json!({"s": s, "n": n, "f": f, "nested": {"z": [n, f], "a": s}});
            let once = to_canonical(&v).unwrap();
            let reparsed: Value = serde_json::from_slice(&once).unwrap();
            proptest::prop_assert_eq!(to_canonical(&reparsed).unwrap(), once);
        }
    }
}
