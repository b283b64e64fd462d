//! A byte scanner for the plainest JSON, in front of serde readers: the metric batch
//! documents' (`metrics::typed`) and recording lines' (`dataset::recording`).
//!
//! A batch line of generated or exported traces is made of a few kinds of token: strings
//! without escapes, integers of at most 15 digits, `true`, `false`, `null`, objects with a
//! handful of keys, arrays. The serde readers pay for the generality they never use there
//! (a visitor per value, a deserializer per call object); this scanner reads those tokens
//! in one pass over the bytes, writes call arguments' canonical text as it goes, and
//! borrows every string from the line.
//!
//! Design choice: the scanner only ever answers for a line it reads completely and whose
//! every token is one of those kinds. Anything else — an escape, a control character, a
//! fraction or exponent, `-0`, a 16-digit integer, nesting deeper than [`MAX_DEPTH`], an
//! object of more than [`MAX_KEYS`] keys, a repeated key, a key at or above U+E000, a
//! syntax error, a shape the family does not read — gives `None`, and the line goes to the
//! serde reader as before, which answers or sends it on to the tree reader. So the scanner
//! needs to be right only about the plain tokens it accepts: for those, the canonical
//! text is the token itself (RFC 8785 leaves a plain string and a safe integer as
//! written), and the values are what serde reads.

use serde_json::{Map, Number, Value};

/// Deepest nesting the scanner reads (serde_json refuses beyond 128; the everyday
/// documents nest four or five deep).
const MAX_DEPTH: usize = 32;

/// Most keys an object may have for the scanner: the repeated-key test is a linear search.
pub(crate) const MAX_KEYS: usize = 16;

/// Longest integer (in digits) the scanner reads: below 10^15, within ±(2^53−1).
const MAX_DIGITS: usize = 15;

/// The scanner: the text and the position of the next unread byte.
pub(crate) struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scan { text, at: 0 }
    }

    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after any whitespace, not consumed.
    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        while let Some(&c) = b.get(self.at) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(c);
            }
            self.at += 1;
        }
        None
    }

    /// Consume `c`, the next byte after any whitespace.
    #[inline]
    pub(crate) fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.at += 1;
            Some(())
        } else {
            None
        }
    }

    /// Nothing but whitespace is left.
    pub(crate) fn end(mut self) -> Option<()> {
        match self.peek() {
            None => Some(()),
            Some(_) => None,
        }
    }

    /// A string without escapes or control characters; its text between the quotes.
    #[inline]
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.at;
        // a word at a time for the first two words (names and short values: most keys
        // are longer than eight bytes), then by memchr
        let mut at = start;
        let end = loop {
            match b.get(at..at + 8) {
                Some(word) => match stops(u64::from_le_bytes(word.try_into().ok()?)) {
                    0 if at - start < 8 => at += 8,
                    0 => break long_string_end(b, at + 8)?,
                    // the lowest flagged byte is the first that stops the string
                    flagged => break at + flagged.trailing_zeros() as usize / 8,
                },
                None => break at + b[at..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20)?,
            }
        };
        if b[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        // the quotes are ASCII, so both ends are character boundaries
        self.text.get(start..end)
    }

    /// A string, owned: a plain one copied from the text, one with escapes read by
    /// `serde_json` itself (so as serde reads it; a control character or a bad escape
    /// is refused as serde refuses it).
    pub(crate) fn text(&mut self) -> Option<String> {
        self.text_borrowed().map(std::borrow::Cow::into_owned)
    }

    /// [`Scan::text`], borrowing a plain string from the line: only one with escapes is
    /// copied (as serde reads it).
    pub(crate) fn text_borrowed(&mut self) -> Option<std::borrow::Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.at;
        if let Some(plain) = self.string() {
            return Some(std::borrow::Cow::Borrowed(plain));
        }
        let b = self.bytes();
        let mut i = start + 1;
        loop {
            match *b.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        let text: String = serde_json::from_str(self.text.get(start..=i)?).ok()?;
        self.at = i + 1;
        Some(std::borrow::Cow::Owned(text))
    }

    /// A number of any JSON form, read by `serde_json` itself as an `f64` (fractions and
    /// exponents round as serde rounds them).
    pub(crate) fn float(&mut self) -> Option<f64> {
        self.peek()?;
        let b = self.bytes();
        let start = self.at;
        let len = b[start..].iter().take_while(|c| matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')).count();
        let value = serde_json::from_str(self.text.get(start..start + len).filter(|t| !t.is_empty())?).ok()?;
        self.at = start + len;
        Some(value)
    }

    /// An integer of the plain form (`-?[1-9][0-9]*` or `0`, at most [`MAX_DIGITS`]
    /// digits, not `-0`, no fraction or exponent after it): its text.
    #[inline]
    pub(crate) fn integer(&mut self) -> Option<&'a str> {
        self.peek()?;
        let b = self.bytes();
        let start = self.at;
        let mut i = start + usize::from(b[start] == b'-');
        let first = i;
        match b.get(i)? {
            b'0' if i == start => i += 1,
            b'1'..=b'9' => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return None,
        }
        if i - first > MAX_DIGITS || matches!(b.get(i), Some(b'.' | b'e' | b'E' | b'0'..=b'9')) {
            return None;
        }
        self.at = i;
        self.text.get(start..i)
    }

    /// A non-negative integer of the plain form (what [`Scan::integer`] reads, but for a
    /// minus), as a number, read in one pass: recording lines carry five of them.
    #[inline]
    pub(crate) fn count(&mut self) -> Option<u64> {
        self.peek()?;
        let b = self.bytes();
        let start = self.at;
        let (mut i, mut n) = (start, 0u64);
        while let Some(&d) = b.get(i).filter(|d| d.is_ascii_digit()) {
            // past MAX_DIGITS the number is refused below: wrapping keeps the loop total
            n = n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
            i += 1;
        }
        let digits = i - start;
        if digits == 0 || digits > MAX_DIGITS || (digits > 1 && b[start] == b'0') {
            return None;
        }
        if matches!(b.get(i), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at = i;
        Some(n)
    }

    /// An integer of the plain form, as a number.
    pub(crate) fn number(&mut self) -> Option<Number> {
        let text = self.integer()?;
        Some(match text.strip_prefix('-') {
            Some(_) => Number::from(text.parse::<i64>().ok()?),
            None => Number::from(text.parse::<u64>().ok()?),
        })
    }

    /// `true` or `false`.
    #[inline]
    pub(crate) fn boolean(&mut self) -> Option<bool> {
        self.peek()?;
        let b = self.bytes();
        if b.get(self.at..self.at + 4)? == b"true" {
            self.at += 4;
            Some(true)
        } else if b.get(self.at..self.at + 5)? == b"false" {
            self.at += 5;
            Some(false)
        } else {
            None
        }
    }

    /// `null`, when it is next (consumed); `false` (nothing consumed) otherwise.
    pub(crate) fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' { self.word("null").map(|()| true) } else { Some(false) }
    }

    fn word(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        if self.bytes().get(self.at..end)? == word.as_bytes() {
            self.at = end;
            Some(())
        } else {
            None
        }
    }

    /// The elements of an array, each read by `element`.
    #[inline]
    pub(crate) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The members of an object, each value read by `member` (given its key). The caller
    /// refuses a repeated key it reads; [`Scan::skip`] and friends refuse every other.
    #[inline]
    pub(crate) fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any value, read and dropped; its text as written.
    pub(crate) fn skip(&mut self) -> Option<&'a str> {
        self.peek()?;
        let start = self.at;
        self.skip_at(0)?;
        self.text.get(start..self.at)
    }

    fn skip_at(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' if depth < MAX_DEPTH => {
                let mut keys = Keys::default();
                self.object(|s, key| {
                    keys.insert(key)?;
                    s.skip_at(depth + 1)
                })
            }
            b'[' if depth < MAX_DEPTH => self.array(|s| s.skip_at(depth + 1)),
            b't' | b'f' => self.boolean().map(drop),
            b'n' => self.null()?.then_some(()),
            _ => self.integer().map(drop),
        }
    }

    /// Any value as a tree, as [`crate::diag::StrictValue`] reads it.
    pub(crate) fn tree(&mut self) -> Option<Value> {
        self.tree_at(0)
    }

    fn tree_at(&mut self, depth: usize) -> Option<Value> {
        Some(match self.peek()? {
            b'"' => Value::String(self.string()?.to_string()),
            b'{' if depth < MAX_DEPTH => {
                let mut map = Map::new();
                self.object(|s, key| {
                    let value = s.tree_at(depth + 1)?;
                    map.insert(key.to_string(), value).is_none().then_some(())
                })?;
                Value::Object(map)
            }
            b'[' if depth < MAX_DEPTH => {
                let mut items = Vec::new();
                self.array(|s| {
                    items.push(s.tree_at(depth + 1)?);
                    Some(())
                })?;
                Value::Array(items)
            }
            b't' | b'f' => Value::Bool(self.boolean()?),
            b'n' => {
                self.null()?.then_some(())?;
                Value::Null
            }
            _ => Value::Number(self.number()?),
        })
    }

    /// An object, appending its RFC 8785 canonical text to `out`; its text as written.
    pub(crate) fn canonical_object(&mut self, out: &mut Vec<u8>) -> Option<&'a str> {
        if self.peek()? != b'{' {
            return None;
        }
        let start = self.at;
        self.canonical_at(out, 0)?;
        self.text.get(start..self.at)
    }

    fn canonical_at(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                let text = self.string()?;
                out.reserve(text.len() + 2);
                out.push(b'"');
                out.extend_from_slice(text.as_bytes());
                out.push(b'"');
            }
            b'{' if depth < MAX_DEPTH => self.canonical_members(out, depth)?,
            b'[' if depth < MAX_DEPTH => {
                out.push(b'[');
                let mut first = true;
                self.array(|s| {
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    s.canonical_at(out, depth + 1)
                })?;
                out.push(b']');
            }
            b't' | b'f' => out.extend_from_slice(if self.boolean()? { b"true" } else { b"false" }),
            b'n' => {
                self.null()?.then_some(())?;
                out.extend_from_slice(b"null");
            }
            _ => out.extend_from_slice(self.integer()?.as_bytes()),
        }
        Some(())
    }

    /// An object's canonical text: its members written in input order, then moved into
    /// key order when they are not in it (byte order is UTF-16 order for keys below
    /// U+E000; a key at or above it is left to the serde reader).
    fn canonical_members(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        let body = out.len() + 1;
        out.push(b'{');
        let mut members: [(&'a str, usize, usize); MAX_KEYS] = [("", 0, 0); MAX_KEYS];
        let mut count = 0;
        self.object(|s, key| {
            if count == MAX_KEYS || key.bytes().any(|b| b >= 0xEE) {
                return None;
            }
            if count > 0 {
                out.push(b',');
            }
            let start = out.len();
            out.push(b'"');
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(b"\":");
            s.canonical_at(out, depth + 1)?;
            members[count] = (key, start, out.len());
            count += 1;
            Some(())
        })?;
        let members = &mut members[..count];
        if !members.is_sorted_by(|a, b| a.0 < b.0) {
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            if members.windows(2).any(|w| w[0].0 == w[1].0) {
                return None;
            }
            // the members in key order after the text, then moved over it
            let written = out.len();
            for (i, (_, start, end)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_within(*start..*end);
            }
            out.copy_within(written.., body);
            out.truncate(written);
        }
        out.push(b'}');
        Some(())
    }
}

/// The bytes of `word` that stop a plain string (a quote, a backslash or a control), as
/// their high bits; the lowest one set is exact. (`x − 0x01…` and-not `x` and `0x80…`
/// flags the bytes of `x` that are zero, with `0x20…` those below 0x20; a borrow can flag
/// a byte wrongly only above one rightly flagged.)
#[inline]
fn stops(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    control | zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\')))
}

/// The position of the quote that ends a string past its first eight bytes (a text
/// rather than a name): the next quote or backslash by memchr, then no control before
/// it; `None` when a backslash or a control comes first.
#[inline(never)]
fn long_string_end(b: &[u8], from: usize) -> Option<usize> {
    let end = from + memchr::memchr2(b'"', b'\\', &b[from..])?;
    let controls = b[from..end].iter().fold(0u8, |any, &c| any | u8::from(c < 0x20));
    (b[end] == b'"' && controls == 0).then_some(end)
}

/// The keys of one object read so far, to refuse a repeated one.
#[derive(Default)]
pub(crate) struct Keys<'a> {
    keys: [&'a str; MAX_KEYS],
    count: usize,
}

impl<'a> Keys<'a> {
    /// `None` when `key` was read before or the object has too many keys to search.
    #[inline]
    pub(crate) fn insert(&mut self, key: &'a str) -> Option<()> {
        if self.count == MAX_KEYS || self.keys[..self.count].contains(&key) {
            return None;
        }
        self.keys[self.count] = key;
        self.count += 1;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two readers that hand a token to serde_json read it as serde reads it, and
    /// refuse what serde refuses.
    #[test]
    fn escaped_strings_and_floats_are_serdes() {
        for text in [r#""plain""#, r#""a\"b\n\u00e9""#, "\"tab\there\"", r#""bad \x""#, r#""open"#, r#""\ud800""#] {
            let ours = Scan::new(text).text();
            assert_eq!(ours, serde_json::from_str::<String>(text).ok(), "{text}");
        }
        for text in ["0.5", "1e-400", "-0.0", "7", "1.5e3", "01", "1e400", "-", "."] {
            let ours = Scan::new(text).float().map(f64::to_bits);
            assert_eq!(ours, serde_json::from_str::<f64>(text).ok().map(f64::to_bits), "{text}");
        }
        assert_eq!(Scan::new("true").float(), None);
    }

    /// `count` reads what `integer` reads without a minus, as that number, and leaves
    /// the scanner where `integer` leaves it.
    #[test]
    fn a_count_is_a_plain_integer_without_a_minus() {
        for text in [
            "0",
            "7",
            "300",
            "007",
            "01",
            "-1",
            "-0",
            "1.5",
            "2e3",
            "1E3",
            "123456789012345",
            "1234567890123456",
            "99999999999999999999999",
            " 42,",
            "42}",
            "",
            "x",
            "0x1",
            "9007199254740991",
        ] {
            let (mut a, mut b) = (Scan::new(text), Scan::new(text));
            let expected = a.integer().filter(|t| !t.starts_with('-')).map(|t| t.parse::<u64>().unwrap());
            assert_eq!(b.count(), expected, "{text:?}");
            if expected.is_some() {
                assert_eq!(a.at, b.at, "{text:?}");
            }
        }
    }

    #[test]
    fn plain_tokens_are_read_and_everything_else_is_refused() {
        for (text, ok) in [
            (r#""abc def""#, true),
            (r#""caf\u00e9""#, false),
            ("\"tab\there\"", false),
            ("\"a long string of more than eight bytes\"", true),
            ("\"unterminated", false),
        ] {
            assert_eq!(Scan::new(text).string().is_some(), ok, "{text}");
        }
        for (text, ok) in [
            ("0", true),
            ("-12", true),
            ("999999999999999", true),
            ("1000000000000000", false),
            ("-0", false),
            ("01", false),
            ("1.5", false),
            ("1e3", false),
            ("-", false),
        ] {
            assert_eq!(Scan::new(text).integer().is_some(), ok, "{text}");
        }
    }

    /// The word-at-a-time end of a string (`stops`, `long_string_end`) against the
    /// plain definition, over strings of every length up to 40 drawn from the bytes that
    /// matter: quotes, backslashes, controls, DEL, multi-byte characters, letters.
    #[test]
    fn a_string_ends_where_the_plain_definition_says() {
        let pieces = ["a", "\"", "\\", "\u{1}", "\u{1f}", " ", "\u{7f}", "é", "\u{e000}", "€", "z"];
        let mut seed = 7u64;
        for _ in 0..20_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let len = (seed >> 59) as usize + (seed >> 40) as usize % 10;
            let mut body = String::new();
            for i in 0..len {
                let pick = (seed.rotate_left(7 * i as u32) >> 32) as usize;
                // mostly letters, so that long runs without a stop are common
                body.push_str(if pick.is_multiple_of(4) { pieces[pick / 4 % pieces.len()] } else { "x" });
            }
            let text = format!("\"{body}\"");
            let first_stop = body.bytes().position(|c| c == b'"' || c == b'\\' || c < 0x20);
            let expected = match first_stop {
                None => Some(body.as_str()),
                Some(at) if body.as_bytes()[at] == b'"' => Some(&body[..at]),
                Some(_) => None,
            };
            assert_eq!(Scan::new(&text).string(), expected, "{text:?}");
        }
    }

    #[test]
    fn trees_read_as_the_strict_reader_reads_them() {
        for text in [r#"{"a": [1, -2, true, null, {"b": "x"}], "c": {}}"#, "[]", r#" "s" "#, "17"] {
            let mut scan = Scan::new(text);
            let tree = scan.tree().unwrap();
            assert!(scan.end().is_some());
            assert_eq!(tree, serde_json::from_str::<Value>(text).unwrap(), "{text}");
        }
        for refused in [r#"{"a": 1, "a": 2}"#, r#"{"a": 1.5}"#, "[1,]", r#"{"a" 1}"#, "tru"] {
            let mut scan = Scan::new(refused);
            assert!(scan.tree().is_none() || scan.end().is_none(), "{refused}");
        }
    }

    #[test]
    fn canonical_text_sorts_keys_and_refuses_repeats() {
        let mut out = Vec::new();
        let raw = Scan::new(r#"{"q": "k3", "limit": 0, "opts": {"z": [1, {"b": null, "a": false}], "lang": "en"}}"#)
            .canonical_object(&mut out)
            .unwrap();
        assert!(raw.ends_with("}}"));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"limit":0,"opts":{"lang":"en","z":[1,{"a":false,"b":null}]},"q":"k3"}"#
        );
        for refused in [r#"{"b": 1, "a": 2, "b": 3}"#, r#"{"\ue000": 1}"#, "[1]", r#"{"a": 1.0}"#] {
            assert!(Scan::new(refused).canonical_object(&mut Vec::new()).is_none(), "{refused}");
        }
    }

    /// A plain-token JSON value written as text, members in the order generated (the
    /// scanner must sort them), with random spacing.
    fn plain_text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = "[a-zA-Z_é日ü0-9]{0,6}";
        let leaf = prop_oneof![
            "[a-z é日ü\u{1F600}0-9]{0,12}".prop_map(|t| format!("\"{t}\"")),
            (-999_999_999_999_999i64..=999_999_999_999_999i64).prop_map(|n| n.to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            Just("null".to_string()),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(", "))),
                proptest::collection::btree_map(key, inner, 0..6)
                    .prop_map(|m| m.into_iter().map(|(k, v)| format!("\"{k}\":  {v}")).collect::<Vec<_>>())
                    .prop_shuffle()
                    .prop_map(|members| format!("{{ {} }}", members.join(" ,"))),
            ]
        })
    }

    proptest::proptest! {
        /// The scanner's canonical text is canon.rs's, byte for byte: it takes every
        /// object of plain tokens and writes what `canon::to_canonical` writes of it.
        #[test]
        fn canonical_text_is_what_canon_writes(members in proptest::collection::btree_map("[a-z_é]{0,5}", plain_text(), 0..8)) {
            let mut text = String::from("{");
            for (i, (k, v)) in members.iter().rev().enumerate() {
                text += &format!("{}\"{k}\": {v}", if i > 0 { ", " } else { "" });
            }
            text += "}";
            let mut out = Vec::new();
            proptest::prop_assert!(Scan::new(&text).canonical_object(&mut out).is_some(), "refused {}", text);
            let tree: Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), crate::canon::to_canonical_string(&tree).unwrap());
        }
    }

    #[test]
    fn skipping_refuses_a_repeated_key_at_any_depth() {
        assert_eq!(Scan::new(r#" {"a": [{"b": 1, "c": 2}]} "#).skip(), Some(r#"{"a": [{"b": 1, "c": 2}]}"#));
        assert!(Scan::new(r#"{"a": [{"b": 1, "b": 2}]}"#).skip().is_none());
        assert!(Scan::new(r#"{"a": 1, "a": 1}"#).skip().is_none());
    }
}
