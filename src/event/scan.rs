//! A line checked in place: is it exactly some event's canonical line?
//!
//! Verification proper ([`super::verify::Chain::push`]) parses each line into an
//! [`Event`](super::Event), re-encodes it and compares bytes — building a `Value` tree
//! for every event, which is most of what `verify` and `merge` spend. A reader that
//! needs only the envelope (seq, turn, kind, hash) can instead walk the line's bytes
//! once and accept it when they are already in RFC 8785 form: no whitespace, object
//! keys strictly increasing, strings escaped as JCS escapes them, numbers as
//! ECMAScript prints them, the envelope fields in their fixed order. Then the line *is*
//! the canonical encoding of what it parses to, and its hash is the hash of its own
//! bytes without the `hash` member.
//!
//! The scanner only ever accepts: anything it is unsure of (an escape in a key, a key
//! with a character the UTF-16 order sorts differently, nesting near serde_json's
//! limit, a number it cannot vouch for) makes it give up, and the caller falls back
//! to the full check, which also names what is wrong. So a line the scanner accepts
//! is one the full check accepts with the same fields (a property test holds it to
//! that); it never decides a failure.

use std::ops::Range;
use std::str::FromStr;

use super::Kind;
use crate::canon::{self, Context, Digest};

/// What a line holds besides its data, read off a line that is canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    pub seq: u64,
    pub turn: Option<u32>,
    pub t: u64,
    pub kind: Kind,
    pub prev: Option<Digest>,
    /// The hash the line states.
    pub hash: Digest,
    /// The hash computed from the line's bytes.
    pub computed: Digest,
    /// Where the data member's value lies in the line.
    pub data: Range<usize>,
}

/// Below serde_json's recursion limit (128), so the full check can parse whatever
/// the scanner accepts.
const MAX_DEPTH: usize = 100;

/// The line's envelope and both hashes when the line is in canonical form; `None`
/// when it is not or the scanner cannot tell (the caller then runs the full check).
pub(crate) fn scan(line: &[u8]) -> Option<Scanned> {
    std::str::from_utf8(line).ok()?;
    const OPEN: &[u8] = b"{\"data\":";
    let mut s = Scanner { bytes: line, at: 0, number: Vec::new() };
    s.expect(OPEN)?;
    s.value(0)?;
    let data_end = s.at;
    s.expect(b",\"hash\":")?;
    let hash = s.digest()?;
    let tail_start = s.at;
    s.expect(b",\"kind\":\"")?;
    let name_start = s.at;
    let name_len = s.rest().iter().position(|&b| b == b'"')?;
    s.at += name_len;
    // names are ASCII snake case: the bytes are the string, no escapes to decode
    let name = std::str::from_utf8(&line[name_start..s.at]).ok()?;
    let kind = Kind::from_str(name).ok()?;
    s.expect(b"\",\"prev\":")?;
    let prev = if s.eat(b"null") { None } else { Some(s.digest()?) };
    s.expect(b",\"seq\":")?;
    let seq = s.unsigned()?;
    s.expect(b",\"t\":")?;
    let t = s.unsigned()?;
    s.expect(b",\"turn\":")?;
    let turn = if s.eat(b"null") { None } else { Some(u32::try_from(s.unsigned()?).ok()?) };
    s.expect(b"}")?;
    if s.at != line.len() {
        return None;
    }
    let computed = hash_without(line, data_end..tail_start);
    Some(Scanned { seq, turn, t, kind, prev, hash, computed, data: OPEN.len()..data_end })
}

/// The event hash of a canonical line: its bytes without the `hash` member.
fn hash_without(line: &[u8], hash_member: Range<usize>) -> Digest {
    let mut digester = canon::Digester::new(Context::Event);
    digester.update(&line[..hash_member.start]);
    digester.update(&line[hash_member.end..]);
    digester.finish()
}

/// Lowercase hex digits to their values; every other byte to 0xff.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 16 {
        table[b"0123456789abcdef"[i] as usize] = i as u8;
        i += 1;
    }
    table
};

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Reused for the canonical text of a non-integer number.
    number: Vec<u8>,
}

impl Scanner<'_> {
    fn rest(&self) -> &[u8] {
        &self.bytes[self.at..]
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, literal: &[u8]) -> bool {
        let found = self.rest().starts_with(literal);
        if found {
            self.at += literal.len();
        }
        found
    }

    fn expect(&mut self, literal: &[u8]) -> Option<()> {
        self.eat(literal).then_some(())
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(drop),
            b't' => self.expect(b"true"),
            b'f' => self.expect(b"false"),
            b'n' => self.expect(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        if self.eat(b"}") {
            return Some(());
        }
        let mut previous: Option<Range<usize>> = None;
        loop {
            let key = self.string()?;
            // JCS orders keys by UTF-16 code units. Raw bytes order the same way as
            // long as neither key has an escape (bytes ≠ characters) or a character at
            // or above U+E000 (where UTF-16 and code-point order part): lead bytes
            // 0xEE and up. Strictly increasing also rules out a repeated key.
            let plain = |r: &Range<usize>| !self.bytes[r.clone()].iter().any(|&b| b == b'\\' || b >= 0xEE);
            if !plain(&key) {
                return None;
            }
            if let Some(previous) = previous
                && self.bytes[previous] >= self.bytes[key.clone()]
            {
                return None;
            }
            previous = Some(key);
            self.expect(b":")?;
            self.value(depth)?;
            if self.eat(b"}") {
                return Some(());
            }
            self.expect(b",")?;
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        if self.eat(b"]") {
            return Some(());
        }
        loop {
            self.value(depth)?;
            if self.eat(b"]") {
                return Some(());
            }
            self.expect(b",")?;
        }
    }

    /// A string as JCS writes it; returns the range of its contents (between quotes).
    /// The line was checked to be UTF-8 as a whole.
    fn string(&mut self) -> Option<Range<usize>> {
        self.expect(b"\"")?;
        let start = self.at;
        loop {
            let offset = self.rest().iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
            self.at += offset;
            match self.bytes[self.at] {
                b'"' => {
                    self.at += 1;
                    return Some(start..self.at - 1);
                }
                b'\\' => {
                    let escape = self.bytes.get(self.at + 1)?;
                    self.at += 2;
                    match escape {
                        b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f' => {}
                        // other control characters only, lowercase hex
                        b'u' => {
                            let hex = self.bytes.get(self.at..self.at + 4)?;
                            let low = match hex[3] {
                                c @ b'0'..=b'9' => c - b'0',
                                c @ b'a'..=b'f' => c - b'a' + 10,
                                _ => return None,
                            };
                            let code = match &hex[..3] {
                                b"000" => low,
                                b"001" => 0x10 + low,
                                _ => return None,
                            };
                            if matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                            self.at += 4;
                        }
                        _ => return None,
                    }
                }
                // a raw control character is not JSON
                _ => return None,
            }
        }
    }

    /// A number exactly as the canonical writer prints it.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        let len = self.rest().iter().position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'));
        let end = len.map_or(self.bytes.len(), |l| start + l);
        let token = &self.bytes[start..end];
        self.at = end;
        let digits = token.strip_prefix(b"-").unwrap_or(token);
        if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
            // an integer: no leading zero, no "-0", within ±(2^53−1)
            if digits.len() > 16 || (digits[0] == b'0' && (digits.len() > 1 || digits.len() < token.len())) {
                return None;
            }
            let value = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            return (value <= canon::MAX_SAFE_INTEGER).then_some(());
        }
        // anything else: parsed as the full check parses it, printed as the writer prints it
        let parsed: serde_json::Number = serde_json::from_slice(token).ok()?;
        self.number.clear();
        if !canon::write_canonical_number(&mut self.number, &parsed) || self.number != token {
            return None;
        }
        Some(())
    }

    /// `"blake3:<64 lowercase hex>"`.
    fn digest(&mut self) -> Option<Digest> {
        self.expect(b"\"blake3:")?;
        let hex = self.bytes.get(self.at..self.at + 64)?;
        let mut digest = [0u8; 32];
        for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
            let (high, low) = (HEX_VALUE[usize::from(pair[0])], HEX_VALUE[usize::from(pair[1])]);
            if (high | low) & 0xf0 != 0 {
                return None;
            }
            *byte = high << 4 | low;
        }
        self.at += 64;
        self.expect(b"\"")?;
        Some(Digest(digest))
    }

    /// A non-negative integer as `{}` prints a `u64`: no leading zero, no overflow.
    fn unsigned(&mut self) -> Option<u64> {
        let len = self.rest().iter().position(|b| !b.is_ascii_digit()).unwrap_or(self.rest().len());
        let digits = &self.bytes[self.at..self.at + len];
        if digits.is_empty() || (digits[0] == b'0' && len > 1) {
            return None;
        }
        let value = digits.iter().try_fold(0u64, |n, d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))?;
        self.at += len;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::verify::parse_line_and_prev;
    use crate::event::writer::LogWriter;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The full check's view of a line: parsed, re-encoded by the writer's encoder and
    /// compared byte for byte (the stated hash aside); `None` when the line does not
    /// parse or is not the canonical encoding of what it parses to.
    fn full_check(line: &[u8]) -> Option<Scanned> {
        let (e, prev) = parse_line_and_prev(line).ok()?;
        let (encoded, computed) = crate::event::Unhashed::of(&e, prev.as_ref()).encode();
        let encoded = String::from_utf8(encoded).ok()?.replacen(&computed.to_hex(), &e.hash.to_hex(), 1);
        (encoded.as_bytes() == line).then_some(Scanned {
            seq: e.seq,
            turn: e.turn,
            t: e.t,
            kind: e.kind,
            prev,
            hash: e.hash,
            computed,
            data: 8..8 + e.data.as_bytes().len(),
        })
    }

    fn line_of(turn: Option<u32>, t: u64, data: Value) -> Vec<u8> {
        let mut w = LogWriter::new(Vec::new());
        w.append(None, 0, Kind::RunStarted, json!({})).unwrap();
        w.append(turn, t, Kind::ToolExecuted, data).unwrap();
        let log = w.finish().unwrap().0;
        let second = log.split(|&b| b == b'\n').nth(1).unwrap();
        second.to_vec()
    }

    #[test]
    fn a_written_line_scans_to_what_the_full_check_finds() {
        let data = json!({"a": [1, -2, 0.5, 1e21, -0.0, true, null, "x\u{1}\n\"\\é\u{7f}"], "b": {}, "": [[]]});
        let line = line_of(Some(3), 40, data);
        let scanned = scan(&line).expect("a canonical line scans");
        assert_eq!(Some(scanned.clone()), full_check(&line));
        assert_eq!(scanned.hash, scanned.computed);
        assert_eq!((scanned.seq, scanned.turn, scanned.t, scanned.kind), (1, Some(3), 40, Kind::ToolExecuted));
        assert!(scanned.prev.is_some());
    }

    #[test]
    fn non_canonical_spellings_of_the_same_line_are_not_accepted() {
        let line = String::from_utf8(line_of(None, 7, json!({"n": 10, "s": "A\u{1f}\n", "f": 1.5}))).unwrap();
        let hash_hex = line.split("\"hash\":\"blake3:").nth(1).unwrap()[..64].to_string();
        for (from, to) in [
            ("\"n\":10", "\"n\":-0"),
            ("\"n\":10", "\"n\":010"),
            ("\"n\":10", "\"n\":9007199254740993"),
            ("\"f\":1.5,", "\"f\":1.5,\"f\":1.5,"),
            ("\\n", "\\u000a"),
            ("\"A", "\"\\/A"),
            (hash_hex.as_str(), hash_hex.to_uppercase().as_str()),
            ("\"n\":10", "\"n\":10.0"),
            ("\"n\":10", "\"n\":1e1"),
            ("\"f\":1.5", "\"f\":1.50"),
            ("\\u001f", "\\u001F"),
            ("\"A", "\"\\u0041"),
            ("\"s\":", "\"s\" :"),
            ("{\"f\"", "{ \"f\""),
            ("\"f\":1.5,\"n\":10", "\"n\":10,\"f\":1.5"),
            (",\"turn\":null}", ",\"turn\":null} "),
        ] {
            assert!(line.contains(from), "{from} in {line}");
            let changed = line.replacen(from, to, 1);
            assert_eq!(scan(changed.as_bytes()), None, "{changed}");
            assert_eq!(full_check(changed.as_bytes()), None, "{changed}");
        }
        // canonical, but not what was hashed: scanned, and the hashes part
        let edited = line.replacen("\"turn\":null", "\"turn\":0", 1);
        let scanned = scan(edited.as_bytes()).unwrap();
        assert_ne!(scanned.hash, scanned.computed);
        assert_eq!(Some(scanned), full_check(edited.as_bytes()));
    }

    #[test]
    fn what_the_scanner_gives_up_on_is_left_to_the_full_check() {
        // keys the UTF-16 order sorts differently from their bytes, and escaped keys
        for data in [json!({"\u{e000}": 1, "\u{10000}": 2}), json!({"a\nb": 1})] {
            let line = line_of(None, 0, data);
            assert_eq!(scan(&line), None);
            assert!(full_check(&line).is_some(), "the full check accepts it");
        }
        let mut deep = json!(0);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        let line = line_of(None, 0, json!({ "d": deep }));
        assert_eq!(scan(&line), None);
        assert!(full_check(&line).is_some());
    }

    /// A key the scanner leaves to the full check: escaped, or with a character at or
    /// above U+E000.
    fn awkward_key(v: &Value) -> bool {
        match v {
            Value::Array(items) => items.iter().any(awkward_key),
            Value::Object(map) => map
                .iter()
                .any(|(k, v)| k.chars().any(|c| c < ' ' || c == '"' || c == '\\' || c >= '\u{e000}') || awkward_key(v)),
            _ => false,
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(Value::from),
            // doubles the writer refuses (1e17 prints as an unsafe integer) never reach a log
            any::<f64>().prop_map(Value::from).prop_filter("writable", |v| canon::to_canonical(v).is_ok()),
            "[ -~\u{0}-\u{1f}\u{7f}é\u{e000}\u{1f600}]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\u{e9}\u{e000}\u{1f600}\"]{0,4}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Sound and, on what stateval writes, complete: a written line scans to
        /// exactly what the full check finds, unless it is one the scanner leaves alone.
        #[test]
        fn written_lines_scan_to_the_full_checks_answer(data in arbitrary_json(), turn in any::<Option<u32>>(), t in any::<u64>()) {
            let awkward = awkward_key(&data);
            let line = line_of(turn, t, data);
            let full = full_check(&line);
            prop_assert!(full.is_some());
            match scan(&line) {
                Some(scanned) => prop_assert_eq!(Some(scanned), full),
                None => prop_assert!(awkward, "gave up on {}", String::from_utf8_lossy(&line)),
            }
        }

        /// Sound on anything: edit a written line (a byte changed, inserted or dropped)
        /// and whatever the scanner still reads as canonical, the full check reads the
        /// same way, down to the hash it computes.
        #[test]
        fn an_edited_line_the_scanner_accepts_is_one_the_full_check_accepts(
            data in arbitrary_json(),
            at in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"{}[]\",:\\ 0123456789.eE-+tfnul\x01abz\xc3\xa9".to_vec()),
            how in 0u8..3,
        ) {
            let mut line = line_of(Some(1), 5, data);
            let i = at.index(line.len());
            match how {
                0 => line[i] = byte,
                1 => line.insert(i, byte),
                _ => { line.remove(i); }
            }
            if let Some(scanned) = scan(&line) {
                prop_assert_eq!(Some(scanned), full_check(&line), "{}", String::from_utf8_lossy(&line));
            }
        }
    }
}
