//! `stateval metric NAME`: one metric over JSON input (docs/metrics.md §9).
//!
//! Reads one JSON document from `--input` or stdin and prints one JSON object. With
//! `--batch` the input is JSONL and each line gets its output line, in order; a bad line
//! prints `{"error": "..."}` there, the others still run, and the exit code is 2.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

use serde_json::json;

use super::{CliError, Exit};
use stateval::diag::parse_json_strict;
use stateval::metrics::cli::{METRIC_NAMES, run_owned as run_metric};

/// Each metric's input, as `stateval metric --help` lists it, with an example that grades
/// as it stands: a user who installed the binary alone (a wheel, the action) has no
/// docs/metrics.md to read. `tests/metric_vectors.rs` runs every example from the help
/// text and holds the list to the metrics `run` knows.
const INPUTS: [(&str, &str, &str); 12] = [
    (
        "stability",
        "one trace, or {\"trace\": TRACE, \"floors\": {...}}",
        r#"{"tool_calls": [{"name": "lookup", "args": {"key": "a"}}], "conversation": {"tokens": {"total": 300}, "turns": [{"role": "assistant", "content": "The value is 1."}]}}"#,
    ),
    (
        "stability-across",
        "{\"runs\": [TRACE, ...]}",
        r#"{"runs": [{"tool_calls": [{"name": "lookup"}]}, {"tool_calls": [{"name": "lookup"}]}]}"#,
    ),
    ("reliability", "one case's outcomes over its runs", r#"{"outcomes": [true, true, false]}"#),
    (
        "pass-k",
        "tasks of n runs with c passes each, and the k to report",
        r#"{"tasks": [{"n": 5, "c": 3}], "k": [1, 2]}"#,
    ),
    ("recommend-runs", "the runs a confidence band needs", r#"{"half_width_percent": 5, "confidence_percent": 95}"#),
    ("confidence-band", "the band so many runs give", r#"{"runs": 100, "confidence_percent": 95}"#),
    (
        "trajectory",
        "calls against expected ones (mode: strict, subsequence, unordered, superset, subset)",
        r#"{"tool_calls": [{"name": "lookup"}], "expected": {"mode": "strict", "calls": [{"name": "lookup"}]}}"#,
    ),
    (
        "trajectory-axes",
        "calls against dependencies and an order",
        r#"{"tool_calls": [{"name": "auth"}, {"name": "search"}], "dependencies": [{"producer": "auth", "consumer": "search"}], "order": [{"first": "auth", "second": "search"}]}"#,
    ),
    (
        "golden-path",
        "calls against an ideal path",
        r#"{"tool_calls": [{"name": "lookup"}], "golden": {"calls": [{"name": "lookup"}]}}"#,
    ),
    (
        "recovery",
        "the times of a fault's call, its detection and its recovery",
        r#"{"call_start_ms": 0, "detected_ms": 100, "recovered_ms": 400, "timeout_budget_ms": 1000}"#,
    ),
    (
        "narrative",
        "what the answer says against the calls made",
        r#"{"narrative": "I looked up the key.", "tool_calls": [{"name": "lookup"}]}"#,
    ),
    (
        "agent-reliability",
        "tasks' runs for the four reliability cards",
        r#"{"tasks": [{"id": "t1", "runs": [{"success": true}, {"success": false}]}]}"#,
    ),
];

/// The help's list of inputs: each name, what it takes, and its example on a line of its own.
fn inputs_help() -> String {
    let mut help = String::from(
        "Inputs: one JSON document (with --batch, one per line). A TRACE is an object of
\"tool_calls\" ([{\"name\", \"args\"?, \"server\"?}]) and \"conversation\" ({\"tokens\": {\"total\"},
\"turns\": [{\"role\", \"content\"}]}), or both under \"trace\"; a key beside a trace that no
metric reads is refused. Each example below runs as it stands:\n",
    );
    for (name, takes, example) in INPUTS {
        help.push_str(&format!("\n  {name}: {takes}\n    {example}\n"));
    }
    help.push_str(
        "\nEvery input and output field is described in docs/metrics.md (section 9) of stateval's repository.",
    );
    help
}

#[derive(clap::Args)]
#[command(after_long_help = inputs_help())]
pub struct Args {
    /// The metric: stability, stability-across, reliability, pass-k, recommend-runs,
    /// confidence-band, trajectory, trajectory-axes, golden-path, recovery, narrative,
    /// agent-reliability.
    name: String,
    /// Input file; `-` or absent reads stdin.
    #[arg(long, short)]
    input: Option<PathBuf>,
    /// The input is JSONL: grade each line, print one output line each.
    #[arg(long)]
    batch: bool,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    if !METRIC_NAMES.contains(&args.name.as_str()) {
        return Err(CliError::invalid(format!(
            "unknown metric \"{}\" (known: {})",
            args.name,
            METRIC_NAMES.join(", ")
        )));
    }
    let source = match &args.input {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => "<stdin>".to_string(),
    };
    // read in large blocks: a batch is tens of megabytes, and stdin's own buffer is 8 KB
    const BLOCK: usize = 1 << 20;
    let reader: Box<dyn BufRead> = match &args.input {
        Some(p) if p.as_os_str() != "-" => Box::new(std::io::BufReader::with_capacity(
            BLOCK,
            std::fs::File::open(p).map_err(|e| CliError::invalid(format!("{source}: {e}")))?,
        )),
        _ => Box::new(std::io::BufReader::with_capacity(BLOCK, std::io::stdin().lock())),
    };
    if args.batch { batch(&args.name, &source, reader) } else { single(&args.name, &source, reader) }
}

fn single(name: &str, source: &str, mut reader: Box<dyn BufRead>) -> Result<Exit, CliError> {
    let mut text = String::new();
    reader.read_to_string(&mut text).map_err(|e| CliError::invalid(format!("{source}: {e}")))?;
    let mut output = Vec::new();
    grade(name, stateval::diag::strip_bom(&text), &mut output).map_err(|e| CliError::invalid(e.at(source, None)))?;
    super::out(String::from_utf8_lossy(&output));
    Ok(Exit::Pass)
}

fn batch(name: &str, source: &str, mut reader: Box<dyn BufRead>) -> Result<Exit, CliError> {
    let mut exit = Exit::Pass;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    // one line buffer and one output buffer for the whole batch
    let (mut line, mut printed) = (String::new(), Vec::new());
    // a closed stdout (`| head`) stops the printing, not the grading: a bad line after
    // it still makes the exit 2
    let mut closed = false;
    for i in 0.. {
        line.clear();
        let read = reader.read_line(&mut line).map_err(|e| CliError::invalid(format!("{source}:{}: {e}", i + 1)))?;
        if read == 0 {
            break;
        }
        // the line as `BufRead::lines` gives it: without its `\n` or `\r\n`
        let text = line.strip_suffix('\n').map_or(line.as_str(), |l| l.strip_suffix('\r').unwrap_or(l));
        printed.clear();
        if let Err(e) = grade(name, text, &mut printed) {
            exit = Exit::Invalid;
            printed.clear();
            printed.extend_from_slice(json!({ "error": e.at(source, Some(i + 1)) }).to_string().as_bytes());
        }
        printed.push(b'\n');
        if closed {
            continue;
        }
        match out.write_all(&printed) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => closed = true,
            Err(e) => return Err(CliError::internal(e.to_string())),
            Ok(()) => {}
        }
    }
    if !closed
        && let Err(e) = out.flush()
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(CliError::internal(e.to_string()));
    }
    if exit == Exit::Invalid {
        super::err(format_args!("error: some input lines were invalid; their output lines carry {{\"error\": …}}"));
    }
    Ok(exit)
}

/// Why a document could not be graded: a JSON syntax error has a place in the text.
struct GradeError {
    place: Option<(usize, usize)>,
    message: String,
}

impl GradeError {
    /// `source:line:col: message`; in a batch the line is the input line and the
    /// column the one inside it.
    fn at(&self, source: &str, batch_line: Option<usize>) -> String {
        match (self.place, batch_line) {
            (Some((_, col)), Some(line)) | (Some((line, col)), None) => {
                format!("{source}:{line}:{col}: {}", self.message)
            }
            (None, Some(line)) => format!("{source}:{line}: {}", self.message),
            (None, None) => format!("{source}: {}", self.message),
        }
    }
}

/// Grade one document into `out`: read typed when it has its metric's everyday shape
/// (`metrics::typed`), else parsed strictly into a tree and graded from it, which also
/// names what is wrong with a bad document.
fn grade(name: &str, text: &str, out: &mut Vec<u8>) -> Result<(), GradeError> {
    if stateval::metrics::typed::grade(name, text, out) {
        return Ok(());
    }
    if text.trim().is_empty() {
        return Err(GradeError { place: None, message: "empty input: expected one JSON document".into() });
    }
    let input =
        parse_json_strict(text).map_err(|(line, col, message)| GradeError { place: Some((line, col)), message })?;
    let output = run_metric(name, input).map_err(|e| GradeError { place: None, message: e.to_string() })?;
    serde_json::to_writer(out, &output).map_err(|e| GradeError { place: None, message: e.to_string() })
}
