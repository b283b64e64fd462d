//! How a file frames its JSON documents, undone before they are parsed.
//!
//! Production rarely writes bare JSON lines. A recorded stream is Server-Sent Events
//! (`event: …` / `data: {…}` lines, `data: [DONE]` at the end); an MCP host log puts a
//! timestamp, a server name and a level before each JSON-RPC message. Both are turned
//! into JSONL here **without moving a byte of JSON**: the framing is overwritten with
//! spaces and lines that hold no document are blanked, so every line and column an
//! error or warning names is still the one in the file the user has.

/// What framing was removed, for `reads` and the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Bare JSON or JSONL.
    Plain,
    /// Server-Sent Events: `data:` lines.
    Sse,
    /// Log lines with a prefix before each JSON document (MCP host logs).
    Prefixed,
}

impl Framing {
    pub fn describe(self) -> Option<&'static str> {
        match self {
            Framing::Plain => None,
            Framing::Sse => Some("Server-Sent Events (data: lines)"),
            Framing::Prefixed => Some("log lines with a prefix before each JSON document"),
        }
    }
}

/// `text` with its framing replaced by spaces, and which framing it had.
pub fn unframe(text: &str) -> (String, Framing) {
    let first = text.lines().map(str::trim_start).find(|l| !l.is_empty()).unwrap_or("");
    if is_sse_field(first) {
        return (map_lines(text, sse_line), Framing::Sse);
    }
    if !first.starts_with(['{', '[']) && text.lines().any(|l| json_start(l).is_some()) {
        return (map_lines(text, prefixed_line), Framing::Prefixed);
    }
    // a stream saved one payload per line, SSE's `data: ` cut off, keeps its `[DONE]`
    // sentinel: it is no document, so its line is blanked
    if text.lines().skip(1).any(|l| l.trim() == "[DONE]") {
        return (map_lines(text, done_line), Framing::Plain);
    }
    (text.to_string(), Framing::Plain)
}

fn done_line(line: &str) -> String {
    if line.trim() == "[DONE]" { String::new() } else { line.to_string() }
}

fn is_sse_field(line: &str) -> bool {
    ["data:", "event:", "id:", "retry:"].iter().any(|f| line.starts_with(f)) || line.starts_with(':')
}

/// Apply `f` to each line, keeping line ends as they are.
fn map_lines(text: &str, f: fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    for raw in text.split_inclusive('\n') {
        let body = raw.trim_end_matches(['\n', '\r']);
        out.push_str(&f(body));
        out.push_str(&raw[body.len()..]);
    }
    out
}

/// `data: {…}` keeps the JSON in place; every other SSE field, comments and the
/// `[DONE]` sentinel become blank.
fn sse_line(line: &str) -> String {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix("data:") {
        let payload = rest.trim_start();
        if payload.starts_with(['{', '[']) && payload.trim_end() != "[DONE]" {
            return blank(&line[..line.len() - payload.len()]) + payload;
        }
    }
    String::new()
}

/// A log line: the JSON from its first `{` on, or nothing when it holds none.
fn prefixed_line(line: &str) -> String {
    match json_start(line) {
        Some(i) => blank(&line[..i]) + &line[i..],
        None => String::new(),
    }
}

/// Where a JSON object starts on a log line: the first `{` that begins a document
/// which parses to the end of the line.
fn json_start(line: &str) -> Option<usize> {
    let line = line.trim_end();
    line.char_indices()
        .filter(|(_, c)| *c == '{')
        .map(|(i, _)| i)
        .find(|i| line[*i..].ends_with('}') && serde_json::from_str::<serde_json::Value>(&line[*i..]).is_ok())
}

/// As many spaces as `prefix` has characters (columns are counted in characters).
fn blank(prefix: &str) -> String {
    " ".repeat(prefix.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_data_lines_keep_their_json_in_place_and_the_rest_is_blanked() {
        let text = "event: message_start\ndata: {\"type\":\"ping\"}\n\ndata: [DONE]\n";
        let (out, framing) = unframe(text);
        assert_eq!(framing, Framing::Sse);
        assert_eq!(out, "\n      {\"type\":\"ping\"}\n\n\n");
    }

    #[test]
    fn log_prefixes_are_blanked_and_lines_without_json_dropped() {
        let text = "2025-06-01T10:00:00Z [srv] [info] Message from client: {\"jsonrpc\":\"2.0\",\"id\":1}\n\
                    2025-06-01T10:00:01Z [srv] [info] Server started\n";
        let (out, framing) = unframe(text);
        assert_eq!(framing, Framing::Prefixed);
        let first = out.lines().next().unwrap();
        assert!(first.trim_start().starts_with("{\"jsonrpc\""), "{first}");
        assert_eq!(first.len(), text.lines().next().unwrap().len());
        assert_eq!(out.lines().nth(1), Some(""));
    }

    #[test]
    fn a_done_sentinel_after_bare_jsonl_is_blanked() {
        let text = "{\"a\": 1}\n[DONE]\n";
        assert_eq!(unframe(text), ("{\"a\": 1}\n\n".to_string(), Framing::Plain));
        // a one-line file "[DONE]" is left for the parser to refuse
        assert_eq!(unframe("[DONE]\n").0, "[DONE]\n");
    }

    #[test]
    fn bare_json_is_left_alone() {
        let text = "{\"a\": 1}\n{\"b\": 2}\n";
        assert_eq!(unframe(text), (text.to_string(), Framing::Plain));
    }
}
