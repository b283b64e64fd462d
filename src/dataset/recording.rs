//! Recordings: recorded model responses, one per model call, in call order.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canon::{self, Context, Digest};
use crate::diag::{InputError, locate, parse_json_strict};
use crate::schemas::RECORDING_SCHEMA;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ToolCall {
    /// The id of call `index` of the response at `step` of turn `turn` when its source
    /// gave none: `call-{turn}-{step}-{index}`, the one scheme the runtime, the external
    /// session and the importers share. (Written with `itoa`: `format!` was 1 % of a
    /// replay, one per call.)
    pub fn default_id(turn: impl itoa::Integer, step: impl itoa::Integer, index: usize) -> String {
        let mut id = String::with_capacity(20);
        let mut number = itoa::Buffer::new();
        id.push_str("call-");
        id.push_str(number.format(turn));
        id.push('-');
        id.push_str(number.format(step));
        id.push('-');
        id.push_str(number.format(index));
        id
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelResponse {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// The agent's own confidence in this answer (predictability metrics).
    pub confidence: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedResponse {
    pub turn: Option<u32>,
    pub step: Option<u32>,
    pub request_hash: Option<Digest>,
    /// The request this response was recorded for: an external agent's dialect-neutral
    /// request (when the agent's request differs, the divergence names the JSON
    /// Pointers), or the built-in runtime's compiled document (`stateval record`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    pub response: ModelResponse,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub latency_ms: u64,
}

/// One recorded run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub responses: Vec<RecordedResponse>,
    /// Content digest over the canonical responses.
    pub digest: Digest,
    /// Where it came from: a path, or `inline`.
    pub source: String,
}

impl Recording {
    /// Read a JSONL recording file; every line is parsed strictly and schema-checked.
    pub fn load(path: &Path, display: &str) -> Result<Recording, InputError> {
        Self::load_file(path, display).map(|(recording, _)| recording)
    }

    /// [`Recording::load`], with the digest of the file's bytes, which
    /// [`Recording::reload`] checks.
    pub fn load_file(path: &Path, display: &str) -> Result<(Recording, Digest), InputError> {
        let bytes = std::fs::read(path)
            .map_err(|e| InputError::file(Path::new(display), format!("cannot read recording: {e}")))?;
        let digest = Self::bytes_digest(&bytes);
        Ok((Self::validate(bytes, display)?, digest))
    }

    /// The digest of a recording file's bytes, as [`Recording::load_file`] gives it and
    /// [`Recording::reload`] checks it.
    pub fn bytes_digest(bytes: &[u8]) -> Digest {
        canon::digest(Context::Content, bytes)
    }

    /// Parse, schema-check and digest the bytes of a recording file read from `display`.
    pub fn validate(bytes: Vec<u8>, display: &str) -> Result<Recording, InputError> {
        let mut responses = Vec::new();
        let digest = Self::check(&Self::text(bytes, display)?, display, Keep::Responses(&mut responses))?;
        Ok(Recording { responses, digest, source: display.to_string() })
    }

    /// [`Recording::validate`], keeping only the content digest: each response is
    /// dropped once it is checked and digested, so a recording is never held parsed
    /// whole (five times its file's size) while a plan is validated.
    pub fn validate_digest(bytes: Vec<u8>, display: &str) -> Result<Digest, InputError> {
        Self::check(&Self::text(bytes, display)?, display, Keep::Digest)
    }

    /// The text of a recording file's bytes read from `display`; an error unless they
    /// are UTF-8. The text is checked once: what is validated and then held for a run
    /// ([`HeldRecordings`]) stays text.
    pub fn text(bytes: Vec<u8>, display: &str) -> Result<String, InputError> {
        crate::diag::utf8_text(Path::new(display), bytes, "recording")
    }

    /// [`Recording::validate_digest`], and the names of the tools the recording's
    /// responses call, sorted and each once: a dataset checks them against what its
    /// case's agent can reach.
    pub fn validate_calls(text: &str, display: &str) -> Result<(Digest, Vec<String>), InputError> {
        let mut names = std::collections::BTreeSet::new();
        let digest = Self::check(text, display, Keep::Calls(&mut names))?;
        Ok((digest, names.into_iter().collect()))
    }

    /// Check every line of a recording file, keeping what `keep` asks for; the content
    /// digest of them all.
    fn check(text: &str, display: &str, mut keep: Keep<'_>) -> Result<Digest, InputError> {
        let display_path = Path::new(display);
        let mut digest = ContentDigest::new();
        let mut scratch = plain::Scratch::default();
        for (i, line) in crate::diag::strip_bom(text).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            // when no response is kept, the usual line is digested as it is read, and
            // not made
            if !matches!(keep, Keep::Responses(_)) && digest.add_plain(line, &mut scratch) {
                if let Keep::Calls(names) = &mut keep {
                    for name in scratch.names.drain(..) {
                        if !names.contains(name.as_ref()) {
                            names.insert(name.into_owned());
                        }
                    }
                }
                continue;
            }
            // the usual line is read straight into its typed form; anything the quick
            // reader is not sure of is read the strict way, which says what is wrong
            let parsed = match quick::line(line) {
                Some(parsed) => parsed,
                None => {
                    let value = parse_json_strict(line).map_err(|(_, col, msg)| {
                        let msg = crate::diag::one_per_line(msg, "a recording holds one response", "response");
                        InputError::new(display_path, i + 1, col, msg)
                    })?;
                    check_line(value, line).map_err(|(col, msg)| InputError::new(display_path, i + 1, col, msg))?
                }
            };
            digest.add(&parsed);
            match &mut keep {
                Keep::Responses(responses) => responses.push(parsed),
                Keep::Calls(names) => names.extend(parsed.response.tool_calls.into_iter().map(|c| c.name)),
                Keep::Digest => {}
            }
        }
        Ok(digest.finish(display))
    }

    /// An inline recording (`{"responses": [...]}` in a dataset line). Errors give a
    /// column in `line_text`, the dataset line; `pointer` is where the object sits.
    pub fn inline(responses: &[Value], line_text: &str, pointer: &str) -> Result<Recording, (usize, String)> {
        let mut out = Vec::new();
        for (i, value) in responses.iter().enumerate() {
            let here = format!("{pointer}/responses/{i}");
            let parsed: RecordedResponse = serde_json::from_value(value.clone())
                .map_err(|e| (locate(line_text, &here), format!("recording response {i}: {e}")))?;
            out.push(parsed);
        }
        Ok(Self::from_values(out, "inline".into()))
    }

    /// Re-read a file that [`Recording::load_file`] already validated (the runner loads
    /// each recording only while its case runs, so memory does not grow with the suite).
    /// The file's bytes must still have the digest `bytes`; its content digest is then
    /// the validated one, `digest`, without canonicalising it again.
    pub fn reload(path: &Path, display: &str, digest: Digest, bytes: Digest) -> Result<Recording, String> {
        let (mut recording, lines) = Self::reread(path, display, digest, bytes)?;
        recording.responses = lines.collect::<Result<_, _>>()?;
        Ok(recording)
    }

    /// [`Recording::reload`] with the responses still unparsed: the recording without
    /// them, and its lines, each parsed when it is taken. A run that replays a file once
    /// holds its text (a fifth of its parsed size) and one response at a time.
    pub fn reread(
        path: &Path,
        display: &str,
        digest: Digest,
        bytes: Digest,
    ) -> Result<(Recording, RecordedLines), String> {
        let text = std::fs::read(path).map_err(|e| format!("{display}: cannot read recording: {e}"))?;
        if Self::bytes_digest(&text) != bytes {
            return Err(format!("{display}: recording changed on disk after the run was validated"));
        }
        let text = String::from_utf8(text).map_err(|e| format!("{display}: changed since validation: {e}"))?;
        Ok(Self::held(text, display, digest))
    }

    /// [`Recording::reread`] of text already read and checked: that of a file whose
    /// bytes digest is the validated one (kept by [`HeldRecordings`]).
    pub fn held(text: String, display: &str, digest: Digest) -> (Recording, RecordedLines) {
        let lines = RecordedLines::new(text, display);
        (Recording { responses: Vec::new(), digest, source: display.to_string() }, lines)
    }

    fn from_values(responses: Vec<RecordedResponse>, source: String) -> Recording {
        let mut digest = ContentDigest::new();
        responses.iter().for_each(|response| digest.add(response));
        Recording { digest: digest.finish(&source), responses, source }
    }
}

/// What [`Recording::check`] keeps of the lines it checks.
enum Keep<'k> {
    /// Every response.
    Responses(&'k mut Vec<RecordedResponse>),
    /// The names of the tools the responses call.
    Calls(&'k mut std::collections::BTreeSet<String>),
    /// Only the content digest.
    Digest,
}

/// Recording files' bytes as validating read them, kept for their runs so that a file
/// is read once per run, not once to validate and again to replay; each is handed over
/// ([`HeldRecordings::take`]) to the first run that replays it, and a later one reads
/// it again. Bounded: past [`HeldRecordings::BUDGET`] bytes in all, a file is not kept,
/// and its run reads it again as before. Keyed by the digest of the bytes, so what a run
/// takes is exactly what was validated; a file edited since is still refused, since its
/// run replays the validated bytes, never the edit.
#[derive(Default)]
pub struct HeldRecordings {
    held: std::sync::Mutex<(usize, std::collections::HashMap<Digest, String>)>,
}

impl HeldRecordings {
    /// Bytes kept at most: a 220-case suite of 50-turn cases has about 4 MB of
    /// recordings; a suite of thousands reads the rest again.
    pub const BUDGET: usize = 8 << 20;

    /// Keep `text`, of the bytes whose digest is `bytes`, if there is room.
    pub fn offer(&self, bytes: Digest, text: String) {
        let Ok(mut held) = self.held.lock() else { return };
        let (size, map) = &mut *held;
        if *size + text.len() <= Self::BUDGET && !map.contains_key(&bytes) {
            *size += text.len();
            map.insert(bytes, text);
        }
    }

    /// The kept text of the bytes whose digest is `bytes`, handed over: no longer kept.
    pub fn take(&self, bytes: &Digest) -> Option<String> {
        let mut held = self.held.lock().ok()?;
        let (size, map) = &mut *held;
        let text = map.remove(bytes)?;
        *size -= text.len();
        Some(text)
    }

    /// Keep only the bytes `wanted` says some run will take.
    pub fn retain(&self, wanted: impl Fn(&Digest) -> bool) {
        let Ok(mut held) = self.held.lock() else { return };
        let (size, map) = &mut *held;
        map.retain(|digest, _| wanted(digest));
        *size = map.values().map(String::len).sum();
        map.shrink_to_fit();
    }

    /// Bytes kept now.
    pub fn size(&self) -> usize {
        self.held.lock().map_or(0, |held| held.0)
    }
}

/// The lines of a validated recording file, read again for one run, each parsed into
/// its response when it is taken (in order, skipping blank lines, as
/// [`Recording::validate`] reads them). The file's bytes were checked against the
/// validated ones, so a line that no longer parses is an error, never skipped.
pub struct RecordedLines {
    text: String,
    /// Byte offset of the next line to read.
    at: usize,
    /// 1-based number of the line at `at`.
    line: usize,
    /// Responses not yet taken.
    left: usize,
    display: String,
}

impl RecordedLines {
    fn new(text: String, display: &str) -> RecordedLines {
        let at = text.len() - crate::diag::strip_bom(&text).len();
        let left = text[at..].lines().filter(|l| !l.trim().is_empty()).count();
        RecordedLines { text, at, line: 1, left, display: display.to_string() }
    }

    /// Responses not yet taken.
    pub fn len(&self) -> usize {
        self.left
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }
}

impl Iterator for RecordedLines {
    type Item = Result<RecordedResponse, String>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.at < self.text.len() {
            let rest = &self.text[self.at..];
            let end = memchr::memchr(b'\n', rest.as_bytes()).map_or(rest.len(), |i| i + 1);
            let (raw, number) = (&rest[..end], self.line);
            self.at += end;
            self.line += 1;
            // as `str::lines` splits: at `\n`, and a `\r` before it is not the line's
            let line = match raw.strip_suffix('\n') {
                Some(line) => line.strip_suffix('\r').unwrap_or(line),
                None => raw,
            };
            if line.trim().is_empty() {
                continue;
            }
            self.left -= 1;
            // validated, so the quick reader takes every line but the unusual ones
            return Some(match quick::line(line) {
                Some(parsed) => Ok(parsed),
                None => serde_json::from_str(line)
                    .map_err(|e| format!("{}:{number}: changed since validation: {e}", self.display)),
            });
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// The content digest of a recording's responses, fed one at a time: the digest of the
/// canonical bytes of `serde_json::to_value(responses)` (`[`, each response's
/// [`write_response`] bytes comma-separated, `]`), without holding them. Where one has
/// no canonical form, the digest of the recording's source instead.
struct ContentDigest {
    /// `None` once a response had no canonical form.
    digester: Option<canon::Digester>,
    /// Canonical bytes not yet fed: hashed [`ContentDigest::BATCH`] at a time, where
    /// blake3 hashes many chunks at once (a response at a time, it cost a third more).
    buf: Vec<u8>,
    /// Responses fed so far.
    count: usize,
}

impl ContentDigest {
    /// Enough for blake3 to hash sixteen chunks at once; the buffer is made with room
    /// for a batch and a response, so that it does not grow (growing it was an eighth
    /// of a run's page faults).
    const BATCH: usize = 16 << 10;

    fn new() -> ContentDigest {
        let mut buf = Vec::with_capacity(Self::BATCH + 4096);
        buf.push(b'[');
        ContentDigest { digester: Some(canon::Digester::new(Context::Content)), buf, count: 0 }
    }

    fn add(&mut self, response: &RecordedResponse) {
        if self.digester.is_none() {
            return;
        }
        if self.count > 0 {
            self.buf.push(b',');
        }
        self.count += 1;
        if write_response(&mut self.buf, response).is_none() {
            self.digester = None;
            self.buf = Vec::new();
            return;
        }
        self.feed();
    }

    /// [`ContentDigest::add`] of the response `line` holds, read by [`plain::canonical`]
    /// without being made; `false`, and nothing added, for a line that reading does not
    /// take (or once a response had no canonical form).
    fn add_plain<'a>(&mut self, line: &'a str, scratch: &mut plain::Scratch<'a>) -> bool {
        if self.digester.is_none() {
            return false;
        }
        let start = self.buf.len();
        if self.count > 0 {
            self.buf.push(b',');
        }
        if plain::canonical(line, &mut self.buf, scratch).is_none() {
            self.buf.truncate(start);
            return false;
        }
        self.count += 1;
        self.feed();
        true
    }

    /// Hash what is buffered once it is a batch.
    fn feed(&mut self) {
        if let Some(digester) = &mut self.digester
            && self.buf.len() >= Self::BATCH
        {
            digester.update(&self.buf);
            self.buf.clear();
        }
    }

    fn finish(mut self, source: &str) -> Digest {
        match self.digester.as_mut() {
            Some(digester) => {
                self.buf.push(b']');
                digester.update(&self.buf);
                digester.finish()
            }
            None => canon::digest(Context::Content, source.as_bytes()),
        }
    }
}

/// The canonical bytes of `serde_json::to_value(responses)`, whole: what
/// [`ContentDigest`] digests piece by piece (tests compare the two).
#[cfg(test)]
fn canonical_responses(responses: &[RecordedResponse]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(256 * responses.len() + 2);
    out.push(b'[');
    for (i, r) in responses.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_response(&mut out, r)?;
    }
    out.push(b']');
    Some(out)
}

/// One response's canonical bytes, as an element of `serde_json::to_value(responses)`,
/// written from the typed response instead of through a `Value` tree (building and
/// dropping that tree was most of a recording's validation). `None` where that value
/// has no canonical form (an integer beyond ±(2^53−1)), as `canonical_digest` would
/// fail. Keys are written in JCS order, and every field the derived `Serialize` writes
/// is written, so the bytes are the same
/// (`the_typed_canonical_bytes_are_those_of_the_serialised_value` checks it).
fn write_response(out: &mut Vec<u8>, r: &RecordedResponse) -> Option<()> {
    Parts {
        latency_ms: r.latency_ms,
        request: r.request.as_ref(),
        request_hash: r.request_hash.as_ref(),
        confidence: r.response.confidence,
        content: &r.response.content,
        calls: Calls::Typed(&r.response.tool_calls),
        step: r.step,
        turn: r.turn,
        usage: r.usage,
    }
    .write(out)
}

/// A response's members as [`write_response`] writes them: from a typed response, or
/// from a line as validation reads it ([`plain::canonical`]), whose tool calls are
/// already canonical text. One writer for both, so the two cannot lay a response out
/// differently.
struct Parts<'p> {
    latency_ms: u64,
    request: Option<&'p Value>,
    request_hash: Option<&'p Digest>,
    confidence: Option<f64>,
    content: &'p str,
    calls: Calls<'p>,
    step: Option<u32>,
    turn: Option<u32>,
    usage: Usage,
}

/// The `tool_calls` of [`Parts`].
enum Calls<'p> {
    Typed(&'p [ToolCall]),
    /// The canonical text of each call, comma-separated, without the brackets.
    Canonical(&'p [u8]),
}

impl Parts<'_> {
    fn write(&self, out: &mut Vec<u8>) -> Option<()> {
        fn number(out: &mut Vec<u8>, n: serde_json::Number) -> Option<()> {
            canon::write_canonical_number(out, &n).then_some(())
        }
        fn optional_u32(out: &mut Vec<u8>, n: Option<u32>) {
            match n {
                Some(n) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                None => out.extend_from_slice(b"null"),
            }
        }
        // latency_ms < request < request_hash < response < step < turn < usage
        out.extend_from_slice(b"{\"latency_ms\":");
        number(out, self.latency_ms.into())?;
        if let Some(request) = self.request {
            out.extend_from_slice(b",\"request\":");
            canon::write_canonical(out, request).ok()?;
        }
        out.extend_from_slice(b",\"request_hash\":");
        match self.request_hash {
            Some(d) => canon::write_canonical_str(out, &d.to_string()),
            None => out.extend_from_slice(b"null"),
        }
        // confidence < content < tool_calls
        out.extend_from_slice(b",\"response\":{\"confidence\":");
        match self.confidence.and_then(serde_json::Number::from_f64) {
            Some(n) => number(out, n)?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"content\":");
        canon::write_canonical_str(out, self.content);
        out.extend_from_slice(b",\"tool_calls\":[");
        match self.calls {
            Calls::Typed(calls) => {
                for (j, call) in calls.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_call(
                        out,
                        |out| canon::write_canonical(out, &call.args).ok(),
                        call.id.as_deref(),
                        &call.name,
                    )?;
                }
            }
            Calls::Canonical(calls) => out.extend_from_slice(calls),
        }
        out.extend_from_slice(b"]},\"step\":");
        optional_u32(out, self.step);
        out.extend_from_slice(b",\"turn\":");
        optional_u32(out, self.turn);
        out.extend_from_slice(b",\"usage\":{\"input_tokens\":");
        number(out, self.usage.input_tokens.into())?;
        out.extend_from_slice(b",\"output_tokens\":");
        number(out, self.usage.output_tokens.into())?;
        out.extend_from_slice(b"}}");
        Some(())
    }
}

/// One tool call's canonical text, its arguments written by `args`.
fn write_call(
    out: &mut Vec<u8>,
    args: impl FnOnce(&mut Vec<u8>) -> Option<()>,
    id: Option<&str>,
    name: &str,
) -> Option<()> {
    // args < id < name
    out.extend_from_slice(b"{\"args\":");
    args(out)?;
    out.extend_from_slice(b",\"id\":");
    match id {
        Some(id) => canon::write_canonical_str(out, id),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"name\":");
    canon::write_canonical_str(out, name);
    out.push(b'}');
    Some(())
}

/// Schema-check and type one recording line; errors carry a 1-based column.
fn check_line(value: Value, line: &str) -> Result<RecordedResponse, (usize, String)> {
    if let Some(v) = RECORDING_SCHEMA.check(&value) {
        let col = crate::diag::line_col(line, locate(line, &v.pointer)).1;
        return Err((col, v.message));
    }
    canon::check_ijson(&value).map_err(|e| (1, e.to_string()))?;
    serde_json::from_value(value).map_err(|e| (1, e.to_string()))
}

/// The plainest recording lines read with the byte scanner of `canon::scan`: no escaped
/// key, no `request` document, integers written plainly, arguments of plain tokens.
/// Strings with escapes and floats are read by `serde_json` itself (`Scan::text`,
/// `Scan::float`), so what this reader takes it takes as `quick` would; anything else it
/// hands on (`None`). Replayed recordings are almost all such lines, and serde's token
/// stream cost about five thousand instructions for each (a line is small values behind
/// many keys), twice: to validate and to replay.
/// `the_plain_reader_agrees_with_the_quick_one` checks it over generated lines.
mod plain {
    use std::borrow::Cow;

    use super::{ModelResponse, RecordedResponse, ToolCall, Usage};
    use crate::canon::Digest;
    use crate::canon::scan::Scan;

    pub(super) fn line(text: &str) -> Option<RecordedResponse> {
        let mut s = Scan::new(text);
        let (mut turn, mut step, mut request_hash) = (None, None, None);
        let (mut response, mut usage, mut latency_ms) = (None, None, None);
        s.object(|s, key| match key {
            "turn" => set(&mut turn, u32::try_from(s.count()?).ok()?),
            "step" => set(&mut step, u32::try_from(s.count()?).ok()?),
            "request_hash" => set(&mut request_hash, s.string()?.parse::<Digest>().ok()?),
            "response" => set(&mut response, self::response(s)?),
            "usage" => set(&mut usage, self::usage(s)?),
            "latency_ms" => set(&mut latency_ms, s.count()?),
            _ => None,
        })?;
        s.end()?;
        Some(RecordedResponse {
            turn,
            step,
            request_hash,
            request: None,
            response: response?,
            usage: usage.unwrap_or_default(),
            latency_ms: latency_ms.unwrap_or_default(),
        })
    }

    /// What validation reuses from line to line ([`canonical`]): the canonical text of a
    /// line's tool calls and of one call's arguments, and the names of the tools called.
    #[derive(Default)]
    pub(super) struct Scratch<'a> {
        calls: Vec<u8>,
        args: Vec<u8>,
        pub(super) names: Vec<Cow<'a, str>>,
    }

    /// Validation's reading of a line: what [`line`] reads, without building it. The
    /// canonical bytes `write_response` writes for that response are appended to `out`
    /// and the names of the tools it calls left in `scratch.names`; only a string with
    /// escapes is copied, and arguments go from the line straight to their canonical
    /// text. `None` (and `out` as it was) for a line this reading does not take,
    /// which [`line`] or serde may still take. Checking a recording made each response
    /// whole (its strings, a tree for each call's arguments) only to drop it: two thirds
    /// of validating a recording. `the_canonical_reading_is_the_plain_one_written`
    /// checks it against [`line`] and `write_response` over generated lines.
    pub(super) fn canonical<'a>(text: &'a str, out: &mut Vec<u8>, scratch: &mut Scratch<'a>) -> Option<()> {
        let start = out.len();
        let written = canonical_into(text, out, scratch);
        if written.is_none() {
            out.truncate(start);
        }
        written
    }

    fn canonical_into<'a>(text: &'a str, out: &mut Vec<u8>, scratch: &mut Scratch<'a>) -> Option<()> {
        let mut s = Scan::new(text);
        let (mut turn, mut step, mut request_hash) = (None, None, None);
        let (mut response, mut usage, mut latency_ms) = (None, None, None);
        scratch.calls.clear();
        scratch.names.clear();
        s.object(|s, key| match key {
            "turn" => set(&mut turn, u32::try_from(s.count()?).ok()?),
            "step" => set(&mut step, u32::try_from(s.count()?).ok()?),
            "request_hash" => set(&mut request_hash, s.string()?.parse::<Digest>().ok()?),
            "response" => set(&mut response, canonical_response(s, scratch)?),
            "usage" => set(&mut usage, self::usage(s)?),
            "latency_ms" => set(&mut latency_ms, s.count()?),
            _ => None,
        })?;
        s.end()?;
        let (confidence, content) = response?;
        super::Parts {
            latency_ms: latency_ms.unwrap_or_default(),
            request: None,
            request_hash: request_hash.as_ref(),
            confidence,
            content: &content.unwrap_or_default(),
            calls: super::Calls::Canonical(&scratch.calls),
            step,
            turn,
            usage: usage.unwrap_or_default(),
        }
        .write(out)
    }

    /// A response's confidence and content, its tool calls written to `scratch.calls`.
    fn canonical_response<'a>(
        s: &mut Scan<'a>,
        scratch: &mut Scratch<'a>,
    ) -> Option<(Option<f64>, Option<Cow<'a, str>>)> {
        let (mut content, mut tool_calls, mut confidence) = (None, None, None);
        s.object(|s, key| match key {
            "content" => set(&mut content, s.text_borrowed()?),
            "tool_calls" => {
                let mut first = true;
                s.array(|s| {
                    if !std::mem::take(&mut first) {
                        scratch.calls.push(b',');
                    }
                    canonical_call(s, scratch)
                })?;
                set(&mut tool_calls, ())
            }
            "confidence" => set(&mut confidence, s.float().filter(|c| (0.0..=1.0).contains(c))?),
            _ => None,
        })?;
        Some((confidence, content))
    }

    fn canonical_call<'a>(s: &mut Scan<'a>, scratch: &mut Scratch<'a>) -> Option<()> {
        let (mut id, mut name, mut args) = (None, None, None);
        scratch.args.clear();
        s.object(|s, key| match key {
            "id" => set(&mut id, s.text_borrowed()?),
            "name" => set(&mut name, s.text_borrowed()?),
            // an object of plain tokens, as [`call`] reads it with `Scan::tree`
            "args" => set(&mut args, s.canonical_object(&mut scratch.args).map(drop)?),
            _ => None,
        })?;
        let name = name.filter(|n| !n.is_empty())?;
        if id.as_ref().is_some_and(|id| id.is_empty()) {
            return None;
        }
        let args = match args {
            Some(()) => &scratch.args[..],
            None => b"{}",
        };
        super::write_call(
            &mut scratch.calls,
            |out| {
                out.extend_from_slice(args);
                Some(())
            },
            id.as_deref(),
            &name,
        )?;
        scratch.names.push(name);
        Some(())
    }

    /// Store `value` in `slot`; `None` for a key met twice.
    fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
        slot.replace(value).is_none().then_some(())
    }

    fn response(s: &mut Scan<'_>) -> Option<ModelResponse> {
        let (mut content, mut tool_calls, mut confidence) = (None, None, None);
        s.object(|s, key| match key {
            "content" => set(&mut content, s.text()?),
            "tool_calls" => {
                let mut calls = Vec::new();
                s.array(|s| {
                    calls.push(call(s)?);
                    Some(())
                })?;
                set(&mut tool_calls, calls)
            }
            "confidence" => set(&mut confidence, s.float().filter(|c| (0.0..=1.0).contains(c))?),
            _ => None,
        })?;
        Some(ModelResponse {
            content: content.unwrap_or_default(),
            tool_calls: tool_calls.unwrap_or_default(),
            confidence,
        })
    }

    fn call(s: &mut Scan<'_>) -> Option<ToolCall> {
        let (mut id, mut name, mut args) = (None, None, None);
        s.object(|s, key| match key {
            "id" => set(&mut id, s.text()?),
            "name" => set(&mut name, s.text()?),
            // an object of plain tokens, as `StrictValue` reads it (a repeated key and
            // an unsafe integer are refused); any other is serde's
            "args" => set(&mut args, Some(s.tree()?).filter(serde_json::Value::is_object)?),
            _ => None,
        })?;
        let name = name.filter(|n: &String| !n.is_empty())?;
        if id.as_ref().is_some_and(String::is_empty) {
            return None;
        }
        Some(ToolCall { id, name, args: args.unwrap_or_else(super::empty_object) })
    }

    fn usage(s: &mut Scan<'_>) -> Option<Usage> {
        let (mut input_tokens, mut output_tokens) = (None, None);
        s.object(|s, key| match key {
            "input_tokens" => set(&mut input_tokens, s.count()?),
            "output_tokens" => set(&mut output_tokens, s.count()?),
            _ => None,
        })?;
        Some(Usage { input_tokens: input_tokens.unwrap_or_default(), output_tokens: output_tokens.unwrap_or_default() })
    }
}

/// A recording line read in one pass into its typed form, checked as strictly as the
/// schema, the I-JSON guard and the typed reading together check it.
///
/// Validating a line the strict way builds a tree, checks the tree against the schema,
/// walks it for unsafe integers and types it: most of a suite's validation. This reader
/// does all of that on the token stream and gives up (`None`) on anything it is not sure
/// of — an unknown, duplicate or escaped key, a null where the schema wants a value, an
/// array where it wants an object, a number out of range — and the strict reading then
/// decides, with its own message. So it only ever accepts a line the strict reading
/// accepts, as the same response (`the_quick_reader_agrees_with_the_strict_one` checks
/// it over generated good and bad lines).
mod quick {
    use std::fmt;

    use serde::Deserialize;
    use serde::de::{self, MapAccess, Visitor};
    use serde_json::Value;

    use super::{ModelResponse, RecordedResponse, ToolCall, Usage};
    use crate::canon::{self, Digest, MAX_SAFE_INTEGER};
    use crate::diag::StrictValue;

    pub(super) fn line(text: &str) -> Option<RecordedResponse> {
        super::plain::line(text).or_else(|| by_serde(text))
    }

    /// The reader on serde's token stream, which [`super::plain`] hands what it does not
    /// take.
    pub(super) fn by_serde(text: &str) -> Option<RecordedResponse> {
        let mut de = serde_json::Deserializer::from_str(text);
        let Line(parsed) = Line::deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(parsed)
    }

    /// Gives up: the error's text is never shown (the strict reading's is).
    fn unsure<E: de::Error>() -> E {
        E::custom("not a plain recording line")
    }

    /// Store `value` in `slot`, giving up on a key met twice.
    fn set<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
        if slot.replace(value).is_some() {
            return Err(unsure());
        }
        Ok(())
    }

    /// A count (`latency_ms`, tokens): an integer from 0 to 2^53−1.
    fn count<'de, A: MapAccess<'de>>(map: &mut A) -> Result<u64, A::Error> {
        let n: u64 = map.next_value()?;
        if n > MAX_SAFE_INTEGER {
            return Err(unsure());
        }
        Ok(n)
    }

    /// A JSON object with no duplicate key and no unsafe integer.
    fn object<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Value, A::Error> {
        let StrictValue(value) = map.next_value()?;
        if !value.is_object() || canon::check_ijson(&value).is_err() {
            return Err(unsure());
        }
        Ok(value)
    }

    /// Read an object (never an array, which a derived reader would take for a struct)
    /// with `visit`, which sees each key as written, without escapes.
    macro_rules! object_reader {
        ($name:ident, $out:ty, |$map:ident| $body:block) => {
            struct $name($out);

            impl<'de> Deserialize<'de> for $name {
                fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    struct V;
                    impl<'de> Visitor<'de> for V {
                        type Value = $name;
                        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                            f.write_str("an object")
                        }
                        fn visit_map<A: MapAccess<'de>>(self, mut $map: A) -> Result<$name, A::Error> {
                            $body.map($name)
                        }
                    }
                    d.deserialize_map(V)
                }
            }
        };
    }

    object_reader!(Line, RecordedResponse, |map| {
        let (mut turn, mut step, mut request_hash, mut request) = (None, None, None, None);
        let (mut response, mut usage, mut latency_ms) = (None, None, None);
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                "turn" => set(&mut turn, map.next_value::<u32>()?)?,
                "step" => set(&mut step, map.next_value::<u32>()?)?,
                "request_hash" => {
                    let digest = map.next_value::<&str>()?.parse::<Digest>().map_err(|_| unsure())?;
                    set(&mut request_hash, digest)?
                }
                "request" => set(&mut request, object(&mut map)?)?,
                "response" => set(&mut response, map.next_value::<Response>()?.0)?,
                "usage" => set(&mut usage, map.next_value::<UsageReader>()?.0)?,
                "latency_ms" => set(&mut latency_ms, count(&mut map)?)?,
                _ => return Err(unsure()),
            }
        }
        Ok(RecordedResponse {
            turn,
            step,
            request_hash,
            request,
            response: response.ok_or_else(unsure)?,
            usage: usage.unwrap_or_default(),
            latency_ms: latency_ms.unwrap_or_default(),
        })
    });

    object_reader!(Response, ModelResponse, |map| {
        let (mut content, mut tool_calls, mut confidence) = (None, None, None);
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                "content" => set(&mut content, map.next_value::<String>()?)?,
                "tool_calls" => {
                    let calls = map.next_value::<Vec<Call>>()?;
                    set(&mut tool_calls, calls.into_iter().map(|c| c.0).collect())?
                }
                "confidence" => {
                    let c = map.next_value::<f64>()?;
                    if !(0.0..=1.0).contains(&c) {
                        return Err(unsure());
                    }
                    set(&mut confidence, c)?
                }
                _ => return Err(unsure()),
            }
        }
        Ok(ModelResponse {
            content: content.unwrap_or_default(),
            tool_calls: tool_calls.unwrap_or_default(),
            confidence,
        })
    });

    object_reader!(Call, ToolCall, |map| {
        let (mut id, mut name, mut args) = (None, None, None);
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                "id" => set(&mut id, map.next_value::<String>()?)?,
                "name" => set(&mut name, map.next_value::<String>()?)?,
                "args" => set(&mut args, object(&mut map)?)?,
                _ => return Err(unsure()),
            }
        }
        let name = name.filter(|n| !n.is_empty()).ok_or_else(unsure)?;
        if id.as_ref().is_some_and(String::is_empty) {
            return Err(unsure());
        }
        Ok(ToolCall { id, name, args: args.unwrap_or_else(super::empty_object) })
    });

    object_reader!(UsageReader, Usage, |map| {
        let (mut input_tokens, mut output_tokens) = (None, None);
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                "input_tokens" => set(&mut input_tokens, count(&mut map)?)?,
                "output_tokens" => set(&mut output_tokens, count(&mut map)?)?,
                _ => return Err(unsure()),
            }
        }
        Ok(Usage { input_tokens: input_tokens.unwrap_or_default(), output_tokens: output_tokens.unwrap_or_default() })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_call_id_is_turn_step_and_index_in_decimal() {
        for (turn, step, index) in [(0u32, 0usize, 0usize), (7, 1, 12), (49, 3, 9), (u32::MAX, usize::MAX, 1000)] {
            assert_eq!(ToolCall::default_id(turn, step, index), format!("call-{turn}-{step}-{index}"));
        }
        // the importers count steps in u32 as well
        assert_eq!(ToolCall::default_id(3u32, 2u32, 1), "call-3-2-1");
    }

    #[test]
    fn a_recording_folded_over_lines_is_refused_saying_a_response_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "{\"response\":\n  {\"content\":\"hi\"}}\n").unwrap();
        let err = Recording::load(&path, "r.jsonl").unwrap_err();
        assert_eq!(err.line, 1, "{err}");
        assert!(err.message.starts_with("EOF while parsing"), "{err}");
        assert!(err.message.contains("a recording holds one response per line (JSON Lines)"), "{err}");
        // a line broken elsewhere says only what is wrong
        std::fs::write(&path, "{\"response\":{\"content\":\"hi\"},}\n").unwrap();
        let err = Recording::load(&path, "r.jsonl").unwrap_err();
        assert!(!err.message.contains("JSON Lines"), "{err}");
    }

    #[test]
    fn a_recording_line_with_an_unknown_field_names_its_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(
            &path,
            "{\"response\":{\"content\":\"hi\"}}\n{\"response\":{\"content\":\"x\"},\"latncy_ms\":3}\n",
        )
        .unwrap();
        let err = Recording::load(&path, "r.jsonl").unwrap_err();
        assert_eq!((err.line, err.column), (2, 29), "{err}");
        assert!(err.message.contains("did you mean \"latency_ms\""), "{err}");
    }

    #[test]
    fn a_recording_starting_with_a_byte_order_mark_loads_and_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(&path, "\u{feff}{\"response\":{\"content\":\"a\"}}\n").unwrap();
        let (rec, bytes) = Recording::load_file(&path, "r.jsonl").unwrap();
        assert_eq!(rec.responses.len(), 1);
        let again = Recording::reload(&path, "r.jsonl", rec.digest, bytes).unwrap();
        assert_eq!(again.responses, rec.responses);
    }

    #[test]
    fn the_typed_canonical_bytes_are_those_of_the_serialised_value() {
        let lines = [
            r#"{"response":{"content":"a"}}"#,
            r#"{"turn":0,"step":1,"latency_ms":12,"usage":{"input_tokens":3,"output_tokens":9007199254740991},
               "request_hash":"blake3:0000000000000000000000000000000000000000000000000000000000000000",
               "request":{"z":[1,2.5,-0.0,1e21,"\u0001é\u2028"],"a":{"y":null,"b":true}},
               "response":{"content":"q\"\\\n\t\u007f😀","confidence":0.1,
                 "tool_calls":[{"name":"t","id":"c-1","args":{"b":[{}],"a":1.5e-7}},{"name":"u"}]}}"#,
            r#"{"response":{"content":"","confidence":1.0,"tool_calls":[]},"request":null}"#,
            r#"{"response":{"confidence":-3e300}}"#,
        ];
        let responses: Vec<RecordedResponse> =
            lines.iter().map(|l| serde_json::from_str(&l.replace('\n', "")).unwrap()).collect();
        for n in 0..=responses.len() {
            let value = serde_json::to_value(&responses[..n]).unwrap();
            let typed = canonical_responses(&responses[..n]).unwrap();
            assert_eq!(String::from_utf8(typed).unwrap(), canon::to_canonical_string(&value).unwrap());
        }
        // no canonical form (an unsafe integer in the arguments or a count): none here either
        let mut unsafe_args = responses[0].clone();
        unsafe_args.response.tool_calls =
            vec![ToolCall { id: None, name: "t".into(), args: serde_json::json!({"n": 1u64 << 60}) }];
        assert!(canonical_responses(&[unsafe_args]).is_none());
        let mut unsafe_count = responses[0].clone();
        unsafe_count.latency_ms = 1 << 60;
        assert!(canonical_responses(&[unsafe_count.clone()]).is_none());
        assert!(canon::canonical_digest(Context::Content, &serde_json::to_value([unsafe_count]).unwrap()).is_err());
    }

    /// The strict reading of one line: what `validate` does when the quick reader
    /// gives up.
    fn strict(line: &str) -> Result<RecordedResponse, String> {
        let value = parse_json_strict(line).map_err(|(_, _, m)| m)?;
        check_line(value, line).map_err(|(_, m)| m)
    }

    #[test]
    fn the_quick_reader_takes_plain_lines_and_leaves_the_unusual_ones() {
        let plain = [
            r#"{"response":{"content":"a"}}"#,
            r#"{"latency_ms":489,"response":{"content":"","tool_calls":[{"args":{"q":"b-70-0"},"name":"lookup"},{"id":"c-1","name":"m","args":{}}]},"step":0,"turn":0,"usage":{"input_tokens":300,"output_tokens":20}}"#,
            r#"{"request":{"a":[1,2.5,null]},"request_hash":"blake3:0000000000000000000000000000000000000000000000000000000000000000","response":{"confidence":0.9,"content":"q\"\\\n"}}"#,
        ];
        for line in plain {
            assert_eq!(quick::line(line), Some(strict(line).unwrap()), "{line}");
        }
        let unusual = [
            r#"{"response":{"content":"a"},"turn":null}"#,
            r#"{"response":["a",[],0.5]}"#,
            r#"{"response":{"content":"a"},"response":{"content":"a"}}"#,
            r#"{"response":{"tool_calls":[{"name":"t","args":{"a":1,"a":2}}]}}"#,
            r#"{"response":{"tool_calls":[{"name":""}]}}"#,
            r#"{"response":{"confidence":1.5}}"#,
            r#"{"response":{},"latency_ms":9007199254740992}"#,
            r#"{"response":{},"request":{"n":1e17}}"#,
            r#"{"respons\u0065":{}}"#,
            r#"{"response":{}} x"#,
        ];
        for line in unusual {
            assert_eq!(quick::line(line), None, "{line}");
        }
    }

    /// A line of recording-like JSON text: each field left out, well formed, or now and
    /// then wrong in one of the ways the schema, the I-JSON guard or the typed reading
    /// refuses (about a third of the lines are valid).
    fn arbitrary_line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        use proptest::sample::select;
        fn members(fields: Vec<(&'static str, Option<String>)>, extra: Option<String>) -> String {
            let mut parts: Vec<String> =
                fields.into_iter().filter_map(|(k, v)| v.map(|v| format!("\"{k}\":{v}"))).collect();
            parts.extend(extra);
            format!("{{{}}}", parts.join(","))
        }
        /// Left out (a quarter of the time), one of `good`, or now and then one of `bad`.
        fn field(good: &'static [&'static str], bad: &'static [&'static str]) -> BoxedStrategy<Option<String>> {
            let value = prop_oneof![12 => select(good), 1 => select(bad)].prop_map(String::from);
            proptest::option::weighted(0.75, value).boxed()
        }
        const INTEGERS: (&[&str], &[&str]) = (
            &["0", "7", "4294967295", "300"],
            &["4294967296", "-1", "1.0", "1.5", "null", "\"3\"", "9007199254740992", "-0", "1e2"],
        );
        const COUNTS: (&[&str], &[&str]) = (
            &["0", "7", "4294967296", "9007199254740991"],
            &["9007199254740992", "-1", "2.0", "null", "\"3\"", "18446744073709551616"],
        );
        const HASHES: (&[&str], &[&str]) = (
            &["\"blake3:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""],
            &[
                "\"blake3:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\"",
                "\"blake3:0123\"",
                "\"blake3:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\\n\"",
                "\"blake3:\\u0030123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"",
                "null",
                "5",
            ],
        );
        const OBJECTS: (&[&str], &[&str]) = (
            &["{}", "{\"a\":[1,2.5,{\"b\":null}],\"c\":\"x\"}", "{\"q\":\"b-70-0\"}", "{\"\\u0061\":1,\"b\":-0.0}"],
            &[
                "{\"n\":9007199254740992}",
                "{\"n\":[1e17]}",
                "{\"a\":1,\"a\":2}",
                "{\"a\":{\"b\":1,\"b\":1}}",
                "[]",
                "null",
                "\"x\"",
            ],
        );
        // a raw control character (the tab between `a` and `b`) is no JSON string
        const STRINGS: (&[&str], &[&str]) =
            (&["\"t\"", "\"q\\\"\\n\\u00e9\"", "\"lookup\""], &["\"\"", "null", "5", "[]", "{}", "\"a\tb\""]);
        const CONTENTS: (&[&str], &[&str]) =
            (&["\"\"", "\"The batch is in order.\"", "\"\\t\\u2028\""], &["null", "5", "\"a\tb\"", "\"a\u{1}\""]);
        const CONFIDENCES: (&[&str], &[&str]) =
            (&["0", "1", "0.5", "-0.0", "1e-400", "0.9"], &["1.5", "-0.1", "null", "\"0.5\"", "2"]);
        const EXTRAS: &[&str] =
            &["\"x\":1", "\"nam\\u0065\":\"t\"", "\"turn\":1", "\"name\":\"t\"", "\"content\":\"c\""];
        let extra = || proptest::option::weighted(0.04, select(EXTRAS).prop_map(String::from));
        let call = (field(STRINGS.0, STRINGS.1), field(STRINGS.0, STRINGS.1), field(OBJECTS.0, OBJECTS.1), extra())
            .prop_map(|(id, name, args, extra)| members(vec![("id", id), ("name", name), ("args", args)], extra));
        let calls = prop_oneof![
            16 => proptest::collection::vec(call, 0..3).prop_map(|c| Some(format!("[{}]", c.join(",")))),
            1 => field(&["[]"], &["{}", "null", "[1]"]),
        ];
        let response = (field(CONTENTS.0, CONTENTS.1), calls, field(CONFIDENCES.0, CONFIDENCES.1), extra()).prop_map(
            |(content, calls, confidence, extra)| {
                Some(members(vec![("content", content), ("tool_calls", calls), ("confidence", confidence)], extra))
            },
        );
        let response = prop_oneof![24 => response, 1 => field(&["{}"], &["null", "[\"a\",[],0.5]", "\"a\""])];
        let usage = (field(COUNTS.0, COUNTS.1), field(COUNTS.0, COUNTS.1), extra())
            .prop_map(|(i, o, extra)| Some(members(vec![("input_tokens", i), ("output_tokens", o)], extra)));
        let usage = prop_oneof![12 => usage, 1 => field(&["{}"], &["null", "[1,2]"])];
        (
            (field(INTEGERS.0, INTEGERS.1), field(INTEGERS.0, INTEGERS.1), field(HASHES.0, HASHES.1)),
            (field(OBJECTS.0, OBJECTS.1), response, usage, field(COUNTS.0, COUNTS.1), extra()),
            prop_oneof![24 => Just(""), 1 => select(&[" ", " x", ",", "\n", "}"][..])],
        )
            .prop_map(|((turn, step, hash), (request, response, usage, latency, extra), tail)| {
                let line = members(
                    vec![
                        ("turn", turn),
                        ("step", step),
                        ("request_hash", hash),
                        ("request", request),
                        ("response", response),
                        ("usage", usage),
                        ("latency_ms", latency),
                    ],
                    extra,
                );
                format!("{line}{tail}")
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// Whatever the quick reader takes, the strict reading takes too, as the same
        /// response; and a line the strict reading takes is never refused outright (the
        /// quick reader only ever hands it on).
        #[test]
        fn the_quick_reader_agrees_with_the_strict_one(line in arbitrary_line()) {
            if let Some(quick) = quick::line(&line) {
                proptest::prop_assert_eq!(Ok(quick), strict(&line), "{}", line);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// Whatever the plain reader takes, serde's quick reader takes too, as the same
        /// response (and so the strict reading, by the property above).
        #[test]
        fn the_plain_reader_agrees_with_the_quick_one(line in arbitrary_line()) {
            if let Some(plain) = plain::line(&line) {
                proptest::prop_assert_eq!(Some(plain), quick::by_serde(&line), "{}", line);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// Validation's reading takes the lines the plain reader takes (the generated
        /// keys are all below U+E000, the one place the two part), and gives the bytes
        /// `write_response` writes for the response that reader makes, and its tools.
        #[test]
        fn the_canonical_reading_is_the_plain_one_written(line in arbitrary_line()) {
            let mut out = b"before".to_vec();
            let mut scratch = plain::Scratch::default();
            let read = plain::canonical(&line, &mut out, &mut scratch);
            let made = plain::line(&line);
            proptest::prop_assert_eq!(read.is_some(), made.is_some(), "{}", line);
            match made {
                Some(made) => {
                    let mut written = b"before".to_vec();
                    write_response(&mut written, &made).expect("a plain line is canonical");
                    proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(written).unwrap());
                    let names: Vec<&str> = scratch.names.iter().map(|n| n.as_ref()).collect();
                    let called: Vec<&str> = made.response.tool_calls.iter().map(|c| c.name.as_str()).collect();
                    proptest::prop_assert_eq!(names, called);
                }
                None => proptest::prop_assert_eq!(out, b"before".to_vec(), "nothing is left of a line not taken"),
            }
        }
    }

    /// The lines `stateval record` and the benchmarks write are the plain reader's to
    /// take (else it would be a detour), escaped content, nested arguments and
    /// confidence included; what it hands on is still read, by serde.
    #[test]
    fn the_plain_reader_takes_the_usual_lines() {
        for line in [
            r#"{"latency_ms":452,"response":{"content":"","tool_calls":[{"args":{"q":"balance-0-0"},"name":"lookup"},{"args":{"key":"note-0","tier":"episodic","value":"balance"},"name":"memory_write"}]},"step":0,"turn":0,"usage":{"input_tokens":300,"output_tokens":20}}"#,
            r#"{"latency_ms":243,"response":{"confidence":0.9,"content":"The balance for account 0 is in order."},"step":1,"turn":0,"usage":{"input_tokens":300,"output_tokens":20}}"#,
            r#"{"request_hash":"blake3:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","response":{"content":"line one\nline \"two\" \u00e9","tool_calls":[{"args":{"a":[1,-2,{"b":null}],"c":true},"id":"call-1","name":"t"}]}}"#,
            r#"{ "response": {} }"#,
        ] {
            let plain = plain::line(line);
            assert!(plain.is_some(), "{line}");
            assert_eq!(plain, quick::by_serde(line), "{line}");
            // and validation reads it without making it
            let mut scratch = plain::Scratch::default();
            assert!(plain::canonical(line, &mut Vec::new(), &mut scratch).is_some(), "{line}");
        }
        for line in [
            // a request document, an escaped key, a float or escape in the arguments
            r#"{"request":{"messages":[]},"response":{"content":"a"}}"#,
            r#"{"res\u0070onse":{"content":"a"}}"#,
            r#"{"response":{"tool_calls":[{"args":{"a":2.5},"name":"t"}]}}"#,
            r#"{"response":{"tool_calls":[{"args":{"c":"x\\y"},"name":"t"}]}}"#,
        ] {
            assert_eq!(plain::line(line), None, "{line}");
            assert!(strict(line).is_ok(), "{line}");
        }
        // and a count the line does not allow is no one's
        assert_eq!(plain::line(r#"{"response":{},"turn":1.0}"#), None);
    }

    #[test]
    fn a_valid_recording_loads_in_order_with_a_stable_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        std::fs::write(
            &path,
            "{\"response\":{\"content\":\"a\"}}\n\n{\"response\":{\"tool_calls\":[{\"name\":\"t\"}]}}\n",
        )
        .unwrap();
        let a = Recording::load(&path, "r.jsonl").unwrap();
        let b = Recording::load(&path, "r.jsonl").unwrap();
        assert_eq!(a.responses.len(), 2);
        assert_eq!(a.responses[1].response.tool_calls[0].args, serde_json::json!({}));
        assert_eq!(a.digest, b.digest);
    }

    #[test]
    fn a_recording_checked_a_response_at_a_time_has_the_digest_and_lines_of_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        // past the digest's 64 KiB batch, with a byte order mark, blank lines, CRLF line
        // ends, a line only the strict reader takes (an escaped key) and no final newline
        let mut text = String::from("\u{feff}");
        for i in 0..700 {
            let content = format!("answer {i} {}", "é".repeat(i % 90));
            text += &format!(
                r#"{{"turn":{i},"step":0,"response":{{"content":"{content}","tool_calls":[{{"name":"t","id":"c{i}","args":{{"n":{i},"s":"x"}}}}]}}}}"#
            );
            text += match i % 4 {
                0 => "\r\n",
                1 => "\n\n",
                _ => "\n",
            };
        }
        text += r#"{"respons\u0065":{"content":"last"}}"#;
        std::fs::write(&path, &text).unwrap();
        assert!(text.len() > ContentDigest::BATCH);
        let (whole, bytes) = Recording::load_file(&path, "r.jsonl").unwrap();
        assert_eq!(whole.responses.len(), 701);
        assert_eq!(whole.responses[700].response.content, "last");
        let canonical = canonical_responses(&whole.responses).unwrap();
        assert_eq!(whole.digest, canon::digest(Context::Content, &canonical));
        assert_eq!(Recording::validate_digest(text.clone().into_bytes(), "r.jsonl").unwrap(), whole.digest);
        // read without making the responses (all but the last line), the same digest
        let (digest, calls) = Recording::validate_calls(&text, "r.jsonl").unwrap();
        assert_eq!((digest, calls), (whole.digest, vec!["t".to_string()]));
        // read again, each line parsed as it is taken
        let (again, mut lines) = Recording::reread(&path, "r.jsonl", whole.digest, bytes).unwrap();
        assert_eq!((again.digest, again.responses.len(), lines.len()), (whole.digest, 0, 701));
        for (i, expected) in whole.responses.iter().enumerate() {
            assert_eq!(lines.next().unwrap().as_ref(), Ok(expected), "line of response {i}");
            assert_eq!(lines.len(), 700 - i);
        }
        assert!(lines.next().is_none() && lines.is_empty());
        // edited after validation: refused before any line is read
        std::fs::write(&path, text.replace("answer 3 ", "answer 4 ")).unwrap();
        let refused = Recording::reread(&path, "r.jsonl", whole.digest, bytes).map(|_| ()).unwrap_err();
        assert!(refused.contains("changed on disk"), "{refused}");
    }

    /// A file that is not UTF-8 is refused by name, by every way of validating it.
    #[test]
    fn a_recording_that_is_not_utf8_is_refused_naming_the_file() {
        let bytes = b"{\"response\":{\"content\":\"caf\xe9\"}}\n".to_vec();
        for err in [
            Recording::validate(bytes.clone(), "r.jsonl").map(drop).unwrap_err(),
            Recording::validate_digest(bytes.clone(), "r.jsonl").map(drop).unwrap_err(),
            Recording::text(bytes.clone(), "r.jsonl").map(drop).unwrap_err(),
        ] {
            assert_eq!(err.to_string(), "r.jsonl:1:28: cannot read recording: not UTF-8 text (byte 0xe9 here)");
        }
    }

    #[test]
    fn a_recording_checked_a_response_at_a_time_refuses_what_the_whole_refuses() {
        let text = "{\"response\":{\"content\":\"a\"}}\n{\"response\":{},\"latency_ms\":9007199254740992}\n";
        let whole = Recording::validate(text.as_bytes().to_vec(), "r.jsonl").unwrap_err();
        let once = Recording::validate_digest(text.as_bytes().to_vec(), "r.jsonl").unwrap_err();
        assert_eq!((once.line, once.column, once.to_string()), (whole.line, whole.column, whole.to_string()));
        assert_eq!(once.line, 2);
    }

    #[test]
    fn responses_without_a_canonical_form_are_digested_by_their_source() {
        // only responses built in memory can carry one (a file's are refused above)
        let plain: RecordedResponse = serde_json::from_str(r#"{"response":{"content":"a"}}"#).unwrap();
        let mut unsafe_args = plain.clone();
        unsafe_args.response.tool_calls =
            vec![ToolCall { id: None, name: "t".into(), args: serde_json::json!({"n": 1u64 << 60}) }];
        let r = Recording::from_values(vec![plain.clone(), unsafe_args, plain], "inline".into());
        assert_eq!(r.digest, canon::digest(Context::Content, b"inline"));
    }

    /// Kept bytes never pass the budget, a take hands them over once, and only the
    /// bytes some run will take stay.
    #[test]
    fn held_recordings_keep_within_their_budget_and_are_taken_once() {
        let held = HeldRecordings::default();
        let digest = |n: u8| canon::digest(Context::Content, &[n]);
        let half = "7".repeat(HeldRecordings::BUDGET / 2);
        held.offer(digest(1), half.clone());
        held.offer(digest(2), half.clone());
        held.offer(digest(3), "1".into());
        assert_eq!(held.size(), HeldRecordings::BUDGET, "the third file is past the budget");
        assert_eq!(held.take(&digest(3)), None);
        assert_eq!(held.take(&digest(1)).as_deref(), Some(&half[..]));
        assert_eq!(held.take(&digest(1)), None, "taken once");
        assert_eq!(held.size(), HeldRecordings::BUDGET / 2);
        held.offer(digest(3), "12".into());
        held.retain(|d| *d == digest(3));
        assert_eq!(held.size(), 2);
        assert_eq!(held.take(&digest(2)), None);
    }
}
