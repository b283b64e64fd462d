//! The small vocabulary every part of the HTML report writes with: escaping, anchors,
//! payloads cut to size, and number formats.
//!
//! Everything that came from a run (case ids, payloads, reasons, tool descriptions
//! written by an attacker) passes through [`esc`] before it touches the page, in text
//! and in attributes alike; nothing is ever inserted as markup. The page's
//! Content-Security-Policy is the second line: even a string that escaped escaping
//! could not run a script or load anything.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use crate::canon::{self, Context};
use crate::event::payload::Json;

/// Bytes of one payload (arguments, a result, a response, a state) shown before it is
/// cut: enough for any ordinary value, and a 5 MB tool result cannot make the report
/// 5 MB larger. What is cut says how many bytes there were and their digest, so the
/// full value can be found in the log.
pub const PAYLOAD_LIMIT: usize = 4096;

/// Text for HTML text and double-quoted attribute values: `& < > " '` as references,
/// control characters (ANSI escapes in tool output, say) shown as `\u{1b}` rather than
/// passed to the page.
pub fn esc(raw: &str) -> Cow<'_, str> {
    escape(raw, true)
}

/// Text for HTML text content only (never an attribute): as [`esc`], but quotes stay
/// quotes, which keeps the JSON payloads that make up most of a report a sixth smaller.
pub fn text(raw: &str) -> Cow<'_, str> {
    escape(raw, false)
}

fn escape(raw: &str, quotes: bool) -> Cow<'_, str> {
    let special = |c: char| match c {
        '&' | '<' | '>' => true,
        '"' | '\'' => quotes,
        '\n' | '\t' => false,
        c => c.is_control(),
    };
    if !raw.chars().any(special) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len() + 16);
    for c in raw.chars() {
        match c {
            c if !special(c) => out.push(c),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// A case id as it appears in anchors: bytes outside `A-Z a-z 0-9 - _ . ~` percent-
/// encoded, so an id is a valid HTML id (no spaces) and reads the same in a URL
/// fragment (`#case/redirect%20attack/run/0/seq/7`) as in the element's id, which is
/// what browsers match first.
pub fn anchor_id(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Anchors of one case: `case/ID`, `case/ID/run/K`, `case/ID/run/K/seq/N`,
/// `case/ID/run/K/turn/T`.
#[derive(Debug, Clone)]
pub struct Anchor {
    case: String,
}

impl Anchor {
    pub fn case(id: &str) -> Self {
        Anchor { case: format!("case/{}", anchor_id(id)) }
    }

    pub fn id(&self) -> &str {
        &self.case
    }

    pub fn run(&self, k: usize) -> String {
        format!("{}/run/{k}", self.case)
    }

    /// The case's metric blocks (checks across its runs).
    pub fn blocks(&self) -> String {
        format!("{}/blocks", self.case)
    }

    pub fn seq(&self, k: usize, seq: u64) -> String {
        format!("{}/run/{k}/seq/{seq}", self.case)
    }

    /// A turn group; `None` is the events before the first turn (`pre`) or after the
    /// last (`post`).
    pub fn turn(&self, k: usize, turn: &str) -> String {
        format!("{}/run/{k}/turn/{turn}", self.case)
    }
}

/// A value as shown: canonical JSON (strings unquoted), cut at `limit` bytes.
pub struct Shown {
    pub text: String,
    /// Set when the value was cut: its full size in bytes and digest.
    pub cut: Option<(usize, String)>,
}

impl Shown {
    /// The escaped text (for text content, not attributes) followed, when cut, by a
    /// marker saying so.
    pub fn html(&self) -> String {
        match &self.cut {
            None => text(&self.text).into_owned(),
            Some((bytes, digest)) => format!(
                "{}<span class=\"cut\" title=\"{digest}\">… cut: {} bytes, {}</span>",
                text(&self.text),
                thousands(*bytes as u64),
                short_digest(digest)
            ),
        }
    }
}

/// `value` as canonical JSON, or a string's own text, cut at `limit` bytes.
pub fn shown(value: &Value, limit: usize) -> Shown {
    match value {
        Value::String(s) => cut(s, limit),
        other => cut(&canon::to_canonical_string(other).unwrap_or_else(|_| other.to_string()), limit),
    }
}

/// [`shown`] of a member read from an event's canonical bytes, without a tree: a
/// string's own text, else the canonical text the member already is.
pub fn shown_json(value: Json<'_>, limit: usize) -> Shown {
    match value.as_str() {
        Some(s) => cut(&s, limit),
        None => cut(value.raw(), limit),
    }
}

/// A member as `serde_json` prints its tree (`{}` of a `Value`). That is its canonical
/// text for a string, an integer, a bool or null, read without a tree; a float (which
/// ECMAScript and `serde_json` print differently: `1e+21`, `1e21`) or a container is
/// printed through one.
pub fn plain(value: Json<'_>) -> Cow<'_, str> {
    let raw = value.raw();
    let integer = raw.strip_prefix('-').unwrap_or(raw);
    let same = raw.starts_with('"')
        || matches!(raw, "true" | "false" | "null")
        || (!integer.is_empty() && integer.bytes().all(|b| b.is_ascii_digit()));
    if same { Cow::Borrowed(raw) } else { Cow::Owned(value.value().to_string()) }
}

/// Whether an object has member `value` at all (`null` included), as `Value::get`
/// told: [`Json`] reads absent and `null` alike.
pub fn present(value: Json<'_>) -> bool {
    value != Json::default()
}

/// `value` pretty-printed (for states, which are read rather than scanned), cut at
/// `limit` bytes; the digest is over the canonical bytes, as everywhere else.
pub fn pretty(value: &Value, limit: usize) -> Shown {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    if text.len() <= limit {
        return Shown { text, cut: None };
    }
    let canonical = canon::to_canonical(value).unwrap_or_else(|_| text.clone().into_bytes());
    let digest = canon::digest(Context::Content, &canonical).to_string();
    Shown { text: text[..floor_boundary(&text, limit)].to_string(), cut: Some((canonical.len(), digest)) }
}

/// `text` cut at `limit` bytes (on a character boundary), with the full length and
/// digest when it was.
pub fn cut(text: &str, limit: usize) -> Shown {
    if text.len() <= limit {
        return Shown { text: text.to_string(), cut: None };
    }
    let digest = canon::digest(Context::Content, text.as_bytes()).to_string();
    Shown { text: text[..floor_boundary(text, limit)].to_string(), cut: Some((text.len(), digest)) }
}

/// Shown and escaped in one call.
pub fn value_html(value: &Value, limit: usize) -> String {
    shown(value, limit).html()
}

fn floor_boundary(text: &str, limit: usize) -> usize {
    (0..=limit.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0)
}

/// `blake3:0f3a9c1d…` (the first 8 hex digits) for tight places; titles carry the rest.
pub fn short_digest(digest: &str) -> String {
    match digest.strip_prefix("blake3:") {
        Some(hex) if hex.len() > 8 => format!("blake3:{}…", &hex[..8]),
        _ => digest.to_string(),
    }
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate as a percentage with one decimal, rounded down (a rate just under a bound
/// never prints as equal to it; the same rule as the gates' reasons).
pub fn percent(rate: f64) -> String {
    let tenths = (rate * 1000.0 + 1e-9).floor() / 10.0;
    format!("{tenths:.1} %")
}

/// `s` when `n` is not 1.
pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markup_and_quotes_are_escaped_in_text_and_attributes() {
        assert_eq!(esc("</script><img src=x onerror=alert(1)>"), "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;");
        assert_eq!(esc("a \"b\" & 'c'"), "a &quot;b&quot; &amp; &#39;c&#39;");
        assert_eq!(esc("plain"), Cow::Borrowed("plain"));
    }

    #[test]
    fn text_content_escapes_markup_but_keeps_quotes() {
        assert_eq!(text("{\"a\":\"</script>\"}"), "{\"a\":\"&lt;/script&gt;\"}");
        assert_eq!(text("x\u{1b}"), "x\\u{1b}");
    }

    #[test]
    fn control_characters_are_shown_not_passed_through() {
        assert_eq!(esc("red\u{1b}[31m\u{0}"), "red\\u{1b}[31m\\u{0}");
        assert_eq!(esc("line\nnext\ttab"), "line\nnext\ttab");
    }

    #[test]
    fn an_anchor_id_has_no_spaces_quotes_or_markup() {
        let id = anchor_id("redirect \"attack\": # | <b>&co `x`");
        assert_eq!(id, "redirect%20%22attack%22%3A%20%23%20%7C%20%3Cb%3E%26co%20%60x%60");
        assert_eq!(anchor_id("plain-id_1.x~y"), "plain-id_1.x~y");
        assert_eq!(Anchor::case("a b").seq(1, 7), "case/a%20b/run/1/seq/7");
    }

    #[test]
    fn a_payload_over_the_limit_is_cut_with_its_size_and_digest() {
        let big = "é".repeat(3000); // 6000 bytes, two per character
        let s = shown(&json!(big), PAYLOAD_LIMIT);
        assert_eq!(s.text.len(), PAYLOAD_LIMIT);
        let (bytes, digest) = s.cut.clone().unwrap_or_default();
        assert_eq!(bytes, 6000);
        assert_eq!(digest, canon::digest(Context::Content, big.as_bytes()).to_string());
        assert!(s.html().ends_with(&format!("… cut: 6,000 bytes, {}</span>", short_digest(&digest))), "{}", s.html());
        // a cut never splits a character: 4095 bytes of "é" is 4094
        assert_eq!(cut(&big, 4095).text.len(), 4094);
    }

    #[test]
    fn a_payload_within_the_limit_is_whole_and_canonical() {
        let s = shown(&json!({"b": 1, "a": [true, null]}), PAYLOAD_LIMIT);
        assert_eq!((s.text.as_str(), s.cut.is_none()), ("{\"a\":[true,null],\"b\":1}", true));
        assert_eq!(shown(&json!("text"), 10).text, "text");
    }

    #[test]
    fn numbers_are_grouped_and_rates_round_down() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(percent(0.9995), "99.9 %");
        assert_eq!(percent(1.0 / 3.0), "33.3 %");
    }
}
