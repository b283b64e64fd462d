//! Foreign traces → one intermediate → a canonical event log (docs/design.md §1, §9).
//!
//! Each supported format has its own parser, one file each, and every parser produces
//! the same intermediate, [`trace::Trace`]: user turns, the model's responses in each
//! turn (its text and its tool calls in the order the model emitted them), and each
//! call's result. One writer ([`writer`]) turns the intermediate into an event log
//! through [`crate::event::writer`], so an imported log verifies like any run's.
//!
//! | `--from` | parser | what it reads |
//! |---|---|---|
//! | `openai` | [`openai`] | Chat Completions message lists (`[...]`, `{"messages": [...]}`, or JSONL) |
//! | `openai-responses` | [`openai_responses`] | Responses API items (`[...]`, `{"input", "output"}`, or JSONL) |
//! | `anthropic` | [`anthropic`] | Messages API (`tool_use` / `tool_result` blocks) |
//! | `otel` | [`otel`] | OTLP/JSON, Jaeger or Zipkin spans: GenAI semconv (events ≤ v1.36, attributes ≥ v1.37) and the libraries' dialects |
//! | `mcp` | [`mcp`] | MCP JSON-RPC logs: `tools/call` request/response pairs, task results |
//! | `envelope` | [`envelope`] | the trace envelope of docs/metrics.md §1 |
//! | `openai-agents` | [`agents_sdk`] | OpenAI Agents SDK trace exports |
//! | `langsmith` | [`langsmith`] | LangSmith run trees |
//! | `auto` | [`detect`] | one of the above, told from the content |
//!
//! Before a parser runs, what production wraps around a trace is taken off: SSE and
//! log-line framing ([`framing`]), recorded streams assembled into bodies
//! ([`stream`]), recorded HTTP exchanges unwrapped ([`exchange`]), an Inspect AI
//! log's sample picked ([`inspect`], from a `.eval` archive [`inspect_eval`]); other
//! tools' logs are refused by name ([`foreign`]).
//!
//! **Faithful, never guessed.** Original ids are kept as provenance (`source` in each
//! event's data); arguments sent as JSON strings are parsed and, when they do not
//! parse, kept as the raw text with the parse error beside them; content the source
//! did not capture is `null` and named in the event's `absent` list (JSON Pointers
//! into `data`), never turned into an empty string. An empty string means the source
//! said there was no text (a response that only called tools).
//!
//! **Errors or warnings.** Input that cannot be read as the format without guessing
//! — JSON that does not parse or is truncated, an unknown role, a tool result without
//! its call, a duplicate call id or result, a duplicate JSON key — is an error naming
//! `file:line:column` (exit 2): importing it anyway would put a result under the wrong
//! call or a message in the wrong turn. What can be kept but not fully — a call whose
//! result was never captured, a turn that ends without the model's answer, arguments
//! that are not JSON, content parts stateval does not model (images, reasoning,
//! server-side tools), MCP traffic that is not a tool call — is imported and marked
//! with an `error` event of kind `import_warning` at the place it concerns, so nothing
//! is dropped silently.

pub mod agentdojo;
pub mod agents_sdk;
pub mod anthropic;
pub mod builder;
pub mod detect;
pub mod envelope;
pub mod exchange;
pub mod foreign;
pub mod framing;
pub mod inspect;
pub mod inspect_eval;
pub mod langsmith;
pub mod mcp;
pub mod openai;
pub mod openai_responses;
pub mod otel;
pub mod reconstruct;
pub mod source;
pub mod stream;
pub mod trace;
pub mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::diag::InputError;
pub use source::Source;
pub use trace::{Ptr, Trace};

/// A foreign trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Format {
    OpenAi,
    OpenAiResponses,
    Anthropic,
    Otel,
    Mcp,
    Envelope,
    AgentsSdk,
    LangSmith,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::OpenAi,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Otel,
        Format::Mcp,
        Format::Envelope,
        Format::AgentsSdk,
        Format::LangSmith,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Otel => "otel",
            Format::Mcp => "mcp",
            Format::Envelope => "envelope",
            Format::AgentsSdk => "openai-agents",
            Format::LangSmith => "langsmith",
        }
    }

    /// `openai, openai-responses, …` for messages.
    pub fn list() -> String {
        Format::ALL.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| format!("unknown format \"{s}\" (expected one of: {}, auto)", Format::list()))
    }
}

/// Why a file could not be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The content is not valid for the format, at a place in the file.
    #[error("{0}")]
    Input(#[from] InputError),
    /// `auto` could not tell the format: a judgment of the whole file, placed at its
    /// start as every whole-file error is ([`InputError::file`]).
    #[error("{}:1:1: {message}", path.display())]
    Detect { path: PathBuf, message: String },
}

/// The line and column of `at` in the trace file `text` read from `path`, as the import
/// read it (framing removed); `None` when the text does not read as a trace.
pub fn place(path: &Path, text: &str, at: &Ptr) -> Option<(usize, usize)> {
    let (unframed, _) = framing::unframe(text);
    let source = Source::parse(path, &unframed).ok()?;
    let loc = source.loc(at.doc, &at.pointer);
    Some((loc.line, loc.column))
}

/// The trace ids of an OpenTelemetry file, in order (empty for other formats or a
/// file that cannot be read: [`import`] then says why).
pub fn trace_ids(path: &Path, text: &str) -> Vec<String> {
    let (text, _) = framing::unframe(text);
    let Ok(source) = Source::parse(path, &text) else { return Vec::new() };
    if inspect::detect(&source) {
        return inspect::sample_keys(&source);
    }
    if agents_sdk::detect(&source) {
        return agents_sdk::trace_ids(&source);
    }
    if detect::detect(&source).ok() != Some(Format::Otel) {
        return Vec::new();
    }
    otel::otlp::collect(&source).map(|d| d.trace_ids().into_iter().map(|(id, _)| id).collect()).unwrap_or_default()
}

/// Parse `text` (read from `path`) as `format`, or detect the format when `None`.
///
/// SSE and log-line framing is removed first ([`framing`]); a recorded stream is
/// assembled into the response bodies it streamed ([`stream`]) and those are read.
pub fn import(path: &Path, text: &str, format: Option<Format>) -> Result<Trace, ImportError> {
    import_trace(path, text, format, None)
}

/// [`import`], keeping only trace `trace_id` of a file that holds several (OTel). A
/// file with several traces and no `trace_id` is an error that lists them: read as
/// one, they would be merged into one conversation.
pub fn import_trace(
    path: &Path,
    text: &str,
    format: Option<Format>,
    trace_id: Option<&str>,
) -> Result<Trace, ImportError> {
    let (unframed, framing) = framing::unframe(text);
    let source = match Source::parse(path, &unframed) {
        Ok(source) => source,
        Err(e) => {
            return Err(match foreign::recognise_text(&unframed) {
                Some(what) => ImportError::Detect { path: path.to_path_buf(), message: format!("this is {what}") },
                None => e.into(),
            });
        }
    };
    if let Some(stream) = stream::detect(&source)
        && format.is_none_or(|f| f == stream.format())
    {
        let mut trace = import_stream(&source, stream)?;
        if let Some(f) = framing.describe() {
            trace.reads = format!("{} (framing: {f})", trace.reads);
        }
        return Ok(trace);
    }
    if format.is_none() && exchange::detect(&source) {
        return import_exchanges(&source);
    }
    if format.is_none() && inspect::detect(&source) {
        return import_inspect(&source, trace_id);
    }
    let format = match format {
        Some(f) => f,
        None => match detect::detect(&source) {
            Ok(f) => f,
            // read as log lines only because it does not parse whole: a JSON document
            // with a broken first line reads so too, and its own error says more
            Err(ImportError::Detect { message, .. })
                if framing == framing::Framing::Prefixed
                    && let Err((line, column, why)) = crate::diag::parse_json_strict(text) =>
            {
                let message = format!(
                    "not a JSON document ({why}), so it was read as log lines with a JSON payload each: {message}"
                );
                return Err(InputError::new(path, line, column, message).into());
            }
            Err(e) => return Err(e),
        },
    };
    if format == Format::AgentsSdk {
        return Ok(agents_sdk::parse(&source, trace_id)?);
    }
    if trace_id.is_some() && format != Format::Otel {
        return Err(InputError::file(
            path,
            format!("--trace-id selects a trace of an OpenTelemetry file; this is {format}"),
        )
        .into());
    }
    if format == Format::LangSmith
        && let Some((at, body, note)) = langsmith::conversation(&source)?
    {
        let places = vec![(String::new(), at)];
        let mut trace = read_rebuilt(&source, &body, Format::OpenAi, &places, "the LangSmith run's messages", None)?;
        let which = note.map(|n| format!(" of {n}")).unwrap_or_default();
        trace.reads =
            format!("LangSmith run (inputs.messages and outputs{which}): its messages read as {}", trace.reads);
        trace.format = Format::LangSmith;
        return Ok(trace);
    }
    let mut trace = match format {
        Format::Otel => otel::parse(&source, trace_id)?,
        other => parse_as(&source, other)?,
    };
    if let Some(f) = framing.describe() {
        trace.reads = format!("{} (framing: {f})", trace.reads);
    }
    Ok(trace)
}

fn parse_as(source: &Source, format: Format) -> Result<Trace, InputError> {
    match format {
        Format::OpenAi => openai::parse(source),
        Format::OpenAiResponses => openai_responses::parse(source),
        Format::Anthropic => anthropic::parse(source),
        Format::Otel => otel::parse(source, None),
        Format::Mcp => mcp::parse(source),
        Format::Envelope => envelope::parse(source),
        Format::AgentsSdk => agents_sdk::parse(source, None),
        Format::LangSmith => langsmith::parse(source),
    }
}

/// A stream → its assembled bodies → the format's parser, with the assembly's warnings.
fn import_stream(source: &Source, stream: stream::Stream) -> Result<Trace, ImportError> {
    let assembled = stream::assemble(source, stream);
    if assembled.bodies.is_empty() {
        return Err(source
            .error(0, "", format!("{} with no response in it: nothing to import", stream.describe()))
            .into());
    }
    let failure =
        assembled.warnings.iter().find(|w| w.code == "stream_error").map(|w| (w.at.clone(), w.message.clone()));
    let places: Vec<(String, Ptr)> =
        assembled.starts.iter().enumerate().map(|(i, at)| (format!("/{i}"), at.clone())).collect();
    let mut trace = read_rebuilt(
        source,
        &serde_json::Value::Array(assembled.bodies),
        stream.format(),
        &places,
        &format!("the response assembled from {}", stream.describe()),
        failure,
    )?;
    trace.reads = format!("{}, assembled from {}", trace.reads, stream.describe());
    trace.meta.insert("stream".into(), serde_json::Value::String(stream.describe().into()));
    trace.warnings.extend(assembled.warnings.into_iter().map(|w| trace::Warning {
        code: w.code,
        message: w.message,
        at: Some(source.at(w.at.doc, &w.at.pointer)),
    }));
    Ok(trace)
}

/// Recorded exchanges → the conversation of the last one → the API's parser.
fn import_exchanges(source: &Source) -> Result<Trace, ImportError> {
    let x = exchange::unwrap(source)?;
    let places = vec![(String::new(), x.at.clone())];
    let mut trace =
        read_rebuilt(source, &x.body, x.format, &places, &format!("the conversation of {}", x.container), None)?;
    trace.reads = format!("{}, from {} (the last request and its response)", trace.reads, x.container);
    trace.warnings.extend(x.warnings.into_iter().map(|(at, code, message)| trace::Warning {
        code,
        message,
        at: Some(source.at(at.doc, &at.pointer)),
    }));
    Ok(trace)
}

/// One sample of an Inspect AI log → Chat messages → the Chat parser; a tool message's
/// `error` marks its call failed.
fn import_inspect(source: &Source, trace_id: Option<&str>) -> Result<Trace, ImportError> {
    let sample = inspect::sample(source, trace_id)?;
    inspect_sample(source, sample, "JSON")
}

/// The sample keys of an Inspect AI `.eval` archive (`bytes`, read from `path`), for
/// `-o DIR/`; empty when it cannot be read ([`import_eval`] then says why).
pub fn eval_sample_keys(path: &Path, bytes: &[u8]) -> Vec<String> {
    let Ok(archive) = inspect_eval::open(path, bytes) else { return Vec::new() };
    let values: Vec<serde_json::Value> = archive.samples.into_iter().map(|m| m.value).collect();
    inspect::keys(&values)
}

/// One sample of an Inspect AI `.eval` archive (`bytes`, read from `path`): the only one,
/// or the one `trace_id` names. Errors name the member and the line in it.
pub fn import_eval(path: &Path, bytes: &[u8], trace_id: Option<&str>) -> Result<Trace, ImportError> {
    let archive = inspect_eval::open(path, bytes)?;
    let values: Vec<serde_json::Value> = archive.samples.iter().map(|m| m.value.clone()).collect();
    let keys = inspect::keys(&values);
    let i = inspect::pick(&keys, trace_id).map_err(|message| InputError::file(path, message))?;
    let member = &archive.samples[i];
    let member_path = inspect_eval::member_path(path, &member.name);
    let source = Source::parse(&member_path, &member.text)?;
    let sample = inspect::convert(&member.value, keys[i].clone(), trace::Ptr::new(0, ""), archive.model.clone());
    inspect_sample(&source, sample, &format!(".eval archive, member {}", member.name))
}

fn inspect_sample(source: &Source, sample: inspect::Sample, form: &str) -> Result<Trace, ImportError> {
    let places = vec![(String::new(), sample.at.clone())];
    let what = format!("sample {} of an Inspect AI log", sample.key);
    let mut trace = read_rebuilt(source, &sample.body, Format::OpenAi, &places, &what, None)?;
    trace.reads = format!("Inspect AI eval log ({form}), sample {}: its messages read as {}", sample.key, trace.reads);
    trace.meta.insert("inspect_sample".into(), serde_json::Value::String(sample.key.clone()));
    for (pointer, message) in &sample.by_function {
        let at = sample.at.join(pointer);
        trace.warnings.push(trace::Warning {
            code: "call_by_function",
            message: message.clone(),
            at: Some(source.at(at.doc, &at.pointer)),
        });
    }
    for call in trace.turns.iter_mut().flat_map(|t| t.steps.iter_mut()).flat_map(|s| s.calls.iter_mut()) {
        let Some(error) = call.id.as_ref().and_then(|id| sample.errors.get(id)) else { continue };
        if let Some(outcome) = call.outcome.as_mut() {
            outcome.is_error = Some(true);
            outcome.error_kind = Some(inspect::ERROR_KIND);
            outcome.source.insert("inspect_error".into(), error.clone());
        }
    }
    Ok(trace)
}

/// Read `value` — bodies rebuilt from `source` (assembled from a stream, unwrapped from
/// exchanges) — as `format`. Its errors and warnings point into the rebuilt text, so
/// they are moved to the place in `source` it came from: `places` maps the pointer of
/// each rebuilt body to the source value it was built from.
fn read_rebuilt(
    source: &Source,
    value: &serde_json::Value,
    format: Format,
    places: &[(String, Ptr)],
    what: &str,
    failure: Option<(Ptr, String)>,
) -> Result<Trace, ImportError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| InputError::file(&source.path, format!("rebuilding {what}: {e}")))?;
    let rebuilt = Source::parse(&source.path, &text)?;
    let lines: Vec<usize> = places.iter().map(|(p, _)| rebuilt.loc(0, p).line).collect();
    let origin = |line: usize| -> (usize, Ptr) {
        let i = lines.iter().rposition(|start| *start <= line).unwrap_or(0);
        (i, places.get(i).map(|(_, at)| at.clone()).unwrap_or_default())
    };
    let mut trace = parse_as(&rebuilt, format).map_err(|e| {
        // a stream whose only response failed holds no conversation: say why
        let (at, why) = match &failure {
            Some((at, why)) => (at.clone(), why.clone()),
            None => (origin(e.line).1, e.message),
        };
        let loc = source.loc(at.doc, &at.pointer);
        InputError::new(&source.path, loc.line, loc.column, format!("{what} cannot be read: {why}"))
    })?;
    let relocate = |w: &mut trace::Warning| {
        let line = w.at.as_deref().and_then(|a| a.rsplit(':').nth(1)).and_then(|l| l.parse::<usize>().ok());
        if let Some(line) = line {
            let (i, at) = origin(line);
            w.at = Some(source.at(at.doc, &at.pointer));
            let which = if places.len() > 1 { format!("response {i} of ") } else { String::new() };
            w.message = format!("{} (in {which}{what})", w.message);
        }
    };
    // and every place a response or call keeps, which would point into the rebuilt text
    let moved = |at: &Ptr| origin(rebuilt.loc(at.doc, &at.pointer).line).1;
    trace.warnings.iter_mut().for_each(&relocate);
    for turn in &mut trace.turns {
        turn.warnings.iter_mut().for_each(&relocate);
        for step in &mut turn.steps {
            step.warnings.iter_mut().for_each(&relocate);
            step.at = moved(&step.at);
            for call in &mut step.calls {
                call.at = moved(&call.at);
            }
        }
    }
    Ok(trace)
}
