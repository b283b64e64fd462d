//! `stateval import [--from FORMAT] [--trace-id ID] FILE [-o LOG | -o DIR/]`: a foreign
//! trace → a canonical event log.
//!
//! The log goes to stdout, or to LOG with `-o` (written whole, then renamed into
//! place, so a failed import never leaves half a log). A file with several traces
//! (OpenTelemetry) is never merged: `--trace-id` picks one, and `-o DIR` (an existing
//! directory, or a path ending in `/`) writes one log per trace, `DIR/TRACE_ID.jsonl`. A summary and every import
//! warning go to stderr. Exit 0 when the trace was imported (warnings included), 2
//! when it could not be: unreadable, not the format, or inconsistent (the error names
//! `file:line:column`).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::event::{Event, Kind, payload};
use stateval::import::writer::{self, WARNING_KIND};
use stateval::import::{self, Format, ImportError, Trace};

#[derive(clap::Args)]
pub struct Args {
    /// Trace file: JSON or JSONL, or an Inspect AI `.eval` log (a zip archive); with
    /// `--from agentdojo`, AgentDojo's logdir (or one run file).
    file: PathBuf,
    /// Format of FILE: openai, openai-responses, anthropic, otel, mcp, envelope, openai-agents, langsmith,
    /// agentdojo (run files, replayed on the converted suites: `-o DIR/`), or auto
    /// (told from the content; an ambiguous or unknown file is an error; a directory is AgentDojo's logdir).
    #[arg(long = "from", value_name = "FORMAT", default_value = "auto")]
    from: String,
    /// Write the event log to this file instead of stdout; a directory (existing, or
    /// ending in `/`) gets one log per trace of FILE.
    #[arg(short = 'o', long = "output", value_name = "LOG")]
    output: Option<PathBuf>,
    /// Import only this trace of a file that holds several (OpenTelemetry trace id).
    #[arg(long = "trace-id", value_name = "ID")]
    trace_id: Option<String>,
    /// With `--from agentdojo`: the pipeline of the converted AgentDojo suites the runs
    /// are matched to.
    #[arg(long, value_name = "PIPELINE", default_value = super::import_agentdojo::DEFAULT_SUITES)]
    suites: PathBuf,
    /// With `--from agentdojo`: the results and effects of the runs' calls, written by
    /// tools/agentdojo/cover_runs.py, for the calls the converted fixtures do not answer.
    #[arg(long, value_name = "FILE")]
    cover: Option<PathBuf>,
}

/// An imported trace: the intermediate, the log bytes and its events.
pub struct Imported {
    pub trace: Trace,
    pub bytes: Vec<u8>,
    pub events: Vec<Event>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    if args.from == "agentdojo" || (args.from == "auto" && args.file.is_dir()) {
        let Some(out) = args.output.as_deref() else {
            return Err(CliError::invalid(
                "AgentDojo runs are imported as a project of cases, recordings and pipelines: give -o DIR/",
            ));
        };
        if args.trace_id.is_some() {
            return Err(CliError::invalid("--trace-id picks a trace of one file; AgentDojo runs are imported whole"));
        }
        return super::import_agentdojo::run(&args.file, out, &args.suites, args.cover.as_deref());
    }
    let format = parse_format(&args.from)?;
    if let Some(dir) = args.output.as_deref().filter(|o| is_dir_target(o)) {
        return per_trace(&args.file, format, args.trace_id.as_deref(), dir);
    }
    let imported = import_file(&args.file, format, args.trace_id.as_deref())?;
    match &args.output {
        Some(path) => write_atomically(path, &imported.bytes)?,
        None => {
            let mut stdout = std::io::stdout().lock();
            if let Err(e) = stdout.write_all(&imported.bytes).and_then(|()| stdout.flush())
                && e.kind() != std::io::ErrorKind::BrokenPipe
            {
                return Err(CliError::internal(format!("writing the log to stdout: {e}")));
            }
        }
    }
    report(&args.file, &imported, args.output.as_deref());
    Ok(Exit::Pass)
}

/// `-o` names a directory: one that exists, or a path ending in a separator.
fn is_dir_target(path: &Path) -> bool {
    path.is_dir() || path.to_string_lossy().ends_with(['/', '\\'])
}

/// `-o DIR`: one log per trace (or the one trace `--trace-id` picks), each named by its
/// trace id; a file of one trace (or not OpenTelemetry) is one log named after FILE.
fn per_trace(file: &Path, format: Option<Format>, only: Option<&str>, dir: &Path) -> Result<Exit, CliError> {
    let ids = match read_trace(file, format)? {
        Read::Text(text) => import::trace_ids(file, &text),
        Read::Eval(bytes) => import::eval_sample_keys(file, &bytes),
    };
    let picked: Vec<Option<&str>> = match (only, ids.len()) {
        (Some(id), _) => vec![Some(id)],
        (None, 0 | 1) => vec![None],
        (None, _) => ids.iter().map(|id| Some(id.as_str())).collect(),
    };
    for id in picked {
        let imported = import_file(file, format, id)?;
        let name = match id {
            Some(id) => format!("{id}.jsonl"),
            None => file.file_stem().map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned()) + ".jsonl",
        };
        let out = dir.join(name);
        write_atomically(&out, &imported.bytes)?;
        report(file, &imported, Some(&out));
    }
    Ok(Exit::Pass)
}

/// `auto` → `None`.
pub fn parse_format(from: &str) -> Result<Option<Format>, CliError> {
    if from == "auto" {
        return Ok(None);
    }
    from.parse::<Format>().map(Some).map_err(|e| CliError::invalid(format!("--from: {e}")))
}

/// Read and import `path` (only trace `trace_id` when given), and write it as an event
/// log in memory.
pub fn import_file(path: &Path, format: Option<Format>, trace_id: Option<&str>) -> Result<Imported, CliError> {
    let read = read_trace(path, format)?;
    let trace = match &read {
        Read::Text(text) => import::import_trace(path, text, format, trace_id),
        Read::Eval(bytes) => import::import_eval(path, bytes, trace_id),
    }
    .map_err(|e| match e {
        ImportError::Input(e) => CliError::invalid(e.to_string()),
        e @ ImportError::Detect { .. } => CliError::invalid(e.to_string()),
    })?;
    let case = path.file_stem().map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned());
    let shown = path.to_string_lossy().replace('\\', "/");
    let file_bytes = match &read {
        Read::Text(text) => text.as_bytes(),
        Read::Eval(bytes) => bytes.as_slice(),
    };
    let (bytes, events) = writer::write(&trace, &case, &shown, file_bytes).map_err(|e| {
        // at the response the event came from, in a text trace
        let place = match (&read, &e.at) {
            (Read::Text(text), Some(at)) => import::place(path, text, at),
            _ => None,
        };
        let (line, column) = place.unwrap_or((1, 1));
        CliError::invalid(format!("{}:{line}:{column}: the trace cannot be written as a log: {e}", path.display()))
    })?;
    Ok(Imported { trace, bytes, events })
}

/// A trace file as read: text (JSON or JSONL), or an Inspect AI `.eval` archive.
enum Read {
    Text(String),
    Eval(Vec<u8>),
}

/// The file as text, or a zip archive read as an Inspect AI `.eval` log (the only zip
/// stateval reads, so `--from` does not apply to one). Bytes that are not UTF-8 are
/// refused at the line and column of the first bad one.
fn read_trace(path: &Path, format: Option<Format>) -> Result<Read, CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::invalid(format!("{}: cannot read the trace: {e}", path.display())))?;
    if import::inspect_eval::is_zip(&bytes) {
        if let Some(format) = format {
            return Err(CliError::invalid(format!(
                "{}: this is a zip archive, read as an Inspect AI .eval log; --from {format} names a JSON trace \
                 format (leave --from out)",
                path.display()
            )));
        }
        return Ok(Read::Eval(bytes));
    }
    stateval::diag::utf8_text(path, bytes, "the trace")
        .map(Read::Text)
        .map_err(|e| CliError::invalid(format!("{e}: stateval reads JSON or JSONL traces")))
}

/// Write `bytes` to `path` whole or not at all.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    stateval::atomic::replace(path, bytes).map_err(|e| CliError::internal(format!("{}: {e}", path.display())))
}

/// The summary and the warnings, on stderr.
fn report(file: &Path, imported: &Imported, output: Option<&Path>) {
    let events = &imported.events;
    let calls = events.iter().filter(|e| e.kind == Kind::ToolExecuted).count();
    // the import writes its warnings as `error` events of kind `import_warning`
    let warnings: Vec<payload::Error> = events
        .iter()
        .filter(|e| e.kind == Kind::Error)
        .map(|e| e.view::<payload::Error>())
        .filter(|w| w.kind.as_str().as_deref() == Some(WARNING_KIND))
        .collect();
    // a warning quotes the trace, which may hold an escape sequence: shown spelt out
    for w in &warnings {
        let at = w.at.as_str().map(|a| format!("{a}: ")).unwrap_or_default();
        let line = format!("{at}{} [{}]", w.message.as_str().unwrap_or_default(), w.code.as_str().unwrap_or_default());
        super::err(format_args!("warning: {}", stateval::diag::visible(&line)));
    }
    let to = output.map_or_else(|| "stdout".to_string(), |p| p.display().to_string());
    super::err(format_args!(
        "imported {} ({}) → {to}: {} events, {} turns, {calls} tool calls, {} warnings",
        file.display(),
        imported.trace.format,
        events.len(),
        imported.trace.turns.len(),
        warnings.len()
    ));
}
