//! Input diagnostics: errors that name their place (`file:line:column: message`).
//!
//! Every input stateval reads — dataset lines, recordings, manifests, pipelines — is
//! parsed strictly (duplicate keys are errors, not "last one wins"), validated against
//! its JSON Schema, and every error is mapped back to the line and column of the value
//! it is about, so a user can jump straight to it.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// An error in an input file, at a 1-based line and column. Shown as one line,
/// `file:line:column: message`, with any control character of the path or message
/// escaped ([`visible`]): a message quotes the input (a key, a value), which
/// can hold a line break or a terminal escape sequence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}:{column}: {}", visible(&path.display().to_string()), visible(message))]
pub struct InputError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl InputError {
    pub fn new(path: &Path, line: usize, column: usize, message: impl Into<String>) -> Self {
        InputError { path: path.to_path_buf(), line, column, message: message.into() }
    }

    /// An error about a whole file (it is missing, unreadable, empty).
    pub fn file(path: &Path, message: impl Into<String>) -> Self {
        Self::new(path, 1, 1, message)
    }
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
pub const BOM: char = '\u{feff}';

/// `text` without a leading byte-order mark. Every text input (pipelines, datasets,
/// recordings, manifests, imported traces) accepts one: it says nothing in UTF-8, and
/// refusing it would fail files that Windows editors save by default.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// `text` with its control characters (line breaks, tabs, ESC, DEL, the C1 range) and
/// the bidirectional overrides that can make a terminal show text in another order
/// than it is ("Trojan Source") spelt out (`\n`, `\u{1b}`, `\u{202e}`), so that text
/// quoted from an input prints as itself, on one line, and steers no terminal.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The bytes of an input file as text (`shown` and `what` name it in errors): refused
/// at the line and column of the first byte that is not UTF-8, not at the file's start.
pub fn utf8_text(shown: &Path, bytes: Vec<u8>, what: &str) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let before = std::str::from_utf8(&e.as_bytes()[..valid]).unwrap_or_default();
        let (line, column) = line_col(before, before.len());
        let byte = e.as_bytes()[valid];
        InputError::new(shown, line, column, format!("cannot read {what}: not UTF-8 text (byte {byte:#04x} here)"))
    })
}

/// The text of the input file at `path` (`shown` and `what` name it in errors): an
/// error at the file when it cannot be read, [`utf8_text`]'s when it is not text.
pub fn read_text(path: &Path, shown: &Path, what: &str) -> Result<String, InputError> {
    let bytes = std::fs::read(path).map_err(|e| InputError::file(shown, format!("cannot read {what}: {e}")))?;
    utf8_text(shown, bytes, what)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Parse JSON text, refusing duplicate object keys. Errors carry the 1-based line and
/// column that serde_json reports.
pub fn parse_json_strict(text: &str) -> Result<Value, (usize, usize, String)> {
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = StrictValue::deserialize(&mut de).and_then(|v| de.end().map(|()| v.0));
    parsed.map_err(|e| {
        let message = strip_position(&e.to_string());
        (e.line().max(1), e.column().max(1), message)
    })
}

/// A JSON Lines file's parse error at a line, with the usual cause of an EOF inside one:
/// a record spread over several lines, as it is printed for reading (`holds`: "a dataset
/// holds one case", `item`: "case").
pub fn one_per_line(message: String, holds: &str, item: &str) -> String {
    if message.starts_with("EOF while parsing") {
        format!("{message}: {holds} per line (JSON Lines), so the whole {item} goes on this line")
    } else {
        message
    }
}

/// serde_json appends " at line L column C"; we print the place ourselves.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A JSON value read with duplicate keys refused, for typed readers that keep one field
/// as a tree (the metrics' call arguments and expectations).
pub struct StrictValue(pub Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key \"{key}\"")));
            }
            let StrictValue(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Byte offset in `text` (one JSON document) of what JSON Pointer `pointer` names: the
/// key of an object member, the start of an array element; for a missing member, its
/// parent. Used to turn schema and matcher errors, which know a pointer, into a column.
pub fn locate(text: &str, pointer: &str) -> usize {
    let segments: Vec<String> = pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect();
    let mut scanner = Scanner { bytes: text.as_bytes(), pos: 0 };
    scanner.skip_ws();
    let mut best = scanner.pos;
    for segment in &segments {
        match scanner.descend(segment) {
            Some(pos) => best = pos,
            None => break,
        }
    }
    best
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// With `pos` at a container, move to the start of member `segment`.
    fn descend(&mut self, segment: &str) -> Option<usize> {
        match self.peek()? {
            b'{' => {
                self.pos += 1;
                loop {
                    self.skip_ws();
                    if self.peek()? != b'"' {
                        return None;
                    }
                    let key_start = self.pos;
                    let key = self.string()?;
                    self.skip_ws();
                    if self.peek()? != b':' {
                        return None;
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if key == segment {
                        return Some(key_start);
                    }
                    self.skip_value()?;
                    self.skip_ws();
                    match self.peek()? {
                        b',' => self.pos += 1,
                        _ => return None,
                    }
                }
            }
            b'[' => {
                let index: usize = segment.parse().ok()?;
                self.pos += 1;
                for _ in 0..index {
                    self.skip_ws();
                    self.skip_value()?;
                    self.skip_ws();
                    if self.peek()? != b',' {
                        return None;
                    }
                    self.pos += 1;
                }
                self.skip_ws();
                Some(self.pos)
            }
            _ => None,
        }
    }

    /// Read a JSON string at `pos` and decode it (escapes included).
    fn string(&mut self) -> Option<String> {
        let start = self.pos;
        self.pos += 1;
        while self.pos < self.bytes.len() {
            match self.bytes[self.pos] {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    let raw = std::str::from_utf8(&self.bytes[start..self.pos]).ok()?;
                    return serde_json::from_str(raw).ok();
                }
                _ => self.pos += 1,
            }
        }
        None
    }

    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                while self.pos < self.bytes.len() {
                    match self.bytes[self.pos] {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.pos += 1;
                }
                None
            }
            _ => {
                while self.pos < self.bytes.len() && !matches!(self.bytes[self.pos], b',' | b'}' | b']') {
                    self.pos += 1;
                }
                Some(())
            }
        }
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (levenshtein(word, c), c))
        .filter(|(d, c)| *d <= c.len().max(word.len()).div_ceil(3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A JSON Schema for one of stateval's input formats, with errors mapped to messages a
/// person can act on.
pub struct InputSchema {
    text: Cow<'static, str>,
    /// Whether an input is valid, generated when stateval is built
    /// (`#[jsonschema::validator]`), so that a valid input costs no compilation.
    generated: Option<fn(&Value) -> bool>,
    /// The schema compiled, when first wanted: for an input the generated check refuses
    /// (its errors are the compiled validator's, which reports each of them), or for a
    /// schema with no generated check.
    compiled: OnceLock<(Value, jsonschema::Validator)>,
}

/// One schema violation: where (JSON Pointer) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub pointer: String,
    pub message: String,
}

impl InputSchema {
    /// A built-in schema with a validity check generated at build time from the same text.
    pub const fn generated(text: Cow<'static, str>, is_valid: fn(&Value) -> bool) -> Self {
        InputSchema { text, generated: Some(is_valid), compiled: OnceLock::new() }
    }

    /// One of the built-in schemas, compiled when first wanted.
    pub fn builtin(text: impl Into<Cow<'static, str>>) -> Self {
        InputSchema { text: text.into(), generated: None, compiled: OnceLock::new() }
    }

    /// The schema compiled. The built-in schemas are part of the binary and tested, so a
    /// failure here is a bug, not an input error.
    pub(crate) fn compiled(&self) -> &(Value, jsonschema::Validator) {
        self.compiled.get_or_init(|| {
            let schema: Value = serde_json::from_str(&self.text).expect("built-in schema is valid JSON");
            let validator = jsonschema::validator_for(&schema).expect("built-in schema compiles");
            (schema, validator)
        })
    }

    /// The generated validity check, where there is one.
    #[cfg(test)]
    pub(crate) fn generated_check(&self) -> Option<fn(&Value) -> bool> {
        self.generated
    }

    /// Whether the schema has been compiled in this process.
    #[cfg(test)]
    pub(crate) fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }

    /// The first violation of `instance`, if any, phrased for people. An unknown field
    /// comes before any other: a misspelt key (`datasetz`) also leaves the key it meant
    /// missing, and "datasets is required" hides the typo that caused it.
    pub fn check(&self, instance: &Value) -> Option<Violation> {
        let unknown = |e: &jsonschema::ValidationError<'_>| {
            matches!(e.kind(), jsonschema::error::ValidationErrorKind::AdditionalProperties { .. })
        };
        if self.generated.is_some_and(|is_valid| is_valid(instance)) {
            return None;
        }
        let (schema, validator) = self.compiled();
        let mut errors = validator.iter_errors(instance);
        let first = errors.next()?;
        let error = if unknown(&first) { first } else { errors.find(|e| unknown(e)).unwrap_or(first) };
        let pointer = error.instance_path().as_str().to_string();
        let message = match error.kind() {
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                let field = unexpected.first().cloned().unwrap_or_default();
                let allowed = allowed_properties(schema, error.schema_path().as_str());
                let hint = did_you_mean(&field, allowed.iter().map(String::as_str))
                    .map(|s| format!(" (did you mean \"{s}\"?)"))
                    .unwrap_or_default();
                return Some(Violation {
                    pointer: format!("{pointer}/{}", field.replace('~', "~0").replace('/', "~1")),
                    message: format!("unknown field \"{field}\"{hint}"),
                });
            }
            _ => error.to_string(),
        };
        let place = if pointer.is_empty() { String::new() } else { format!("{pointer}: ") };
        Some(Violation { message: format!("{place}{message}"), pointer })
    }
}

/// Property names allowed beside an `additionalProperties` keyword.
fn allowed_properties(schema: &Value, schema_path: &str) -> Vec<String> {
    let parent = schema_path.strip_suffix("/additionalProperties").unwrap_or(schema_path);
    schema
        .pointer(parent)
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// What kind of JSON value `value` is, as an error message names it ("a list").
pub fn kind_of(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_quoting_control_characters_shows_them_escaped_on_one_line() {
        let e = InputError::new(Path::new("d\u{1b}.jsonl"), 2, 3, "unknown field \"a\nb\u{1b}[31m\u{9b}\u{7f}\tc\"");
        let shown = e.to_string();
        assert_eq!(shown, r#"d\u{1b}.jsonl:2:3: unknown field "a\nb\u{1b}[31m\u{9b}\u{7f}\tc""#);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        // a bidirectional override too; plain text, accents and emoji are left as they are
        assert_eq!(visible("a\u{202e}b\u{2066}\r\0"), r"a\u{202e}b\u{2066}\r\u{0}");
        assert_eq!(visible("café 😀 \"x\""), "café 😀 \"x\"");
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_place() {
        let (line, col, msg) = parse_json_strict(r#"{"a": 1, "b": {"c": 1, "c": 2}}"#).unwrap_err();
        assert_eq!(line, 1);
        assert!(col > 20, "{col}");
        assert_eq!(msg, "duplicate key \"c\"");
    }

    #[test]
    fn malformed_json_reports_line_and_column() {
        let (line, col, _) = parse_json_strict("{\"a\": [1, 2,, 3]}").unwrap_err();
        assert_eq!((line, col), (1, 13));
    }

    #[test]
    fn locate_finds_nested_values_by_pointer() {
        let text = r#"{"id": "x", "expect": [{"target": "a"}, {"target": "b", "matcher": {"regex": "("}}]}"#;
        let at = locate(text, "/expect/1/matcher/regex");
        assert_eq!(&text[at..at + 11], "\"regex\": \"(");
        let element = locate(text, "/expect/1");
        assert_eq!(&text[element..element + 10], "{\"target\":");
        // a missing member points at its parent
        let parent = locate(text, "/expect/1/nope");
        assert_eq!(&text[parent..parent + 1], "{");
    }

    #[test]
    fn line_col_counts_characters_not_bytes() {
        assert_eq!(line_col("é\nab", 4), (2, 2));
        assert_eq!(line_col("ééx", 4), (1, 3));
    }

    #[test]
    fn did_you_mean_suggests_only_close_words() {
        assert_eq!(did_you_mean("expct", ["expect", "id", "tags"]), Some("expect"));
        assert_eq!(did_you_mean("zzzzzz", ["expect", "id"]), None);
    }
}
