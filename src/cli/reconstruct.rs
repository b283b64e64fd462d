//! `stateval reconstruct TRACE --as ID [--agent PROFILE] [--out DIR]`: keep an incident
//! as a regression case, and replay it now.
//!
//! TRACE is an event log (verified first) or any foreign trace `stateval import` reads.
//! Written under DIR (the project, default `.`), all named after ID:
//!
//! | file | what |
//! |---|---|
//! | `datasets/incidents/ID.jsonl` | the case: user turns, tag `incident`, agent PROFILE, an exact `tool_sequence` expectation |
//! | `fixtures/recordings/incidents/ID.jsonl` | the model's responses, one line per model call, with `turn` / `step` |
//! | `fixtures/tools/incidents/ID.json` | fixture tool responses keyed by the recorded arguments (`is_error` kept, protocol errors as `protocol_error`) |
//! | `goldens/incidents/ID/ID.0.jsonl` | the replay's log in golden form, where `stateval run` looks for the golden of the case's first run (dataset `incidents/ID`, case `ID`); written only when the replay reproduces the trace |
//! | `pipeline/incidents/ID.toml` | a pipeline with the one case and PROFILE pointed at the fixture manifest |
//!
//! A tool manifest belongs to an agent profile, not to a case, so the incident gets its
//! own pipeline whose profile is PROFILE (copied from `--pipeline`, default
//! `DIR/pipeline/ci.toml`) with its `tools` replaced by the incident's manifest — built
//! on PROFILE's own manifest, so descriptions, safety classes and trust stay today's.
//! Without `--agent`, the profile is `incident`: the trace's system prompt and no policy.
//!
//! The case is then replayed once, in memory, under that profile, and compared with the
//! trace by the golden diff, the trace as the golden
//! ([`stateval::import::reconstruct::first_divergence`]): exit 0 when the replay
//! reproduces the trace's tool sequence and its final answer (the golden is then
//! written), 1 when it diverges (the first difference is named, seq / turn / kind, in
//! both logs), 2 for bad input or existing files (`--force` replaces them).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::import::{import_file, parse_format, write_atomically};
use super::{CliError, Exit};
use stateval::diag::parse_json_strict;
use stateval::event::Event;
use stateval::event::reader::{ReadError, read_log};
use stateval::import::reconstruct::{self, Incident, Options, final_answer, first_divergence};
use stateval::pipeline::Pipeline;
use stateval::pipeline::manifest::Manifest;
use stateval::runner::{Plan, RunnerError, Selection};

/// The profile name used without `--agent`.
const DEFAULT_AGENT: &str = "incident";

#[derive(clap::Args)]
pub struct Args {
    /// The trace: an event log, or a foreign trace (see `stateval import`).
    trace: PathBuf,
    /// Case id of the incident (letters, digits, '.', '_', '-'); names every file written.
    #[arg(long = "as", value_name = "ID")]
    id: String,
    /// Agent profile to replay under, from `--pipeline` (default: a profile with the
    /// trace's system prompt and no policy, named "incident").
    #[arg(long, value_name = "PROFILE")]
    agent: Option<String>,
    /// Project directory to write into.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Format of a foreign TRACE (see `stateval import --from`).
    #[arg(long = "from", value_name = "FORMAT", default_value = "auto")]
    from: String,
    /// Pipeline that defines PROFILE (default: DIR/pipeline/ci.toml).
    #[arg(long, value_name = "FILE")]
    pipeline: Option<PathBuf>,
    /// Replace the incident's files when they exist.
    #[arg(long)]
    force: bool,
}

/// The project-relative paths of one incident.
struct Paths {
    case: String,
    recording: String,
    tools: String,
    golden: String,
    pipeline: String,
}

impl Paths {
    fn new(id: &str) -> Self {
        Paths {
            case: format!("datasets/incidents/{id}.jsonl"),
            recording: format!("fixtures/recordings/incidents/{id}.jsonl"),
            tools: format!("fixtures/tools/incidents/{id}.json"),
            // where `stateval run` looks: goldens/<dataset>/<case>.<k>.jsonl
            golden: format!("goldens/incidents/{id}/{id}.0.jsonl"),
            pipeline: format!("pipeline/incidents/{id}.toml"),
        }
    }

    fn all(&self) -> [&str; 5] {
        [&self.case, &self.recording, &self.tools, &self.golden, &self.pipeline]
    }
}

/// The profile the incident replays under.
struct Profile {
    name: String,
    /// The profile's TOML table, `tools` not yet replaced.
    table: toml::Table,
    /// Its own manifest as JSON, when it has one.
    manifest: Option<Value>,
    on_divergence: String,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let id_ok = !args.id.is_empty()
        && args.id.len() <= 128
        && args.id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && args.id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !id_ok {
        return Err(CliError::invalid(format!(
            "--as {:?}: a case id is letters, digits, '.', '_' and '-', starting with a letter or digit",
            args.id
        )));
    }
    let format = parse_format(&args.from)?;
    let (events, source) = load_trace(&args.trace, format)?;
    let paths = Paths::new(&args.id);
    let existing: Vec<&str> = paths.all().into_iter().filter(|p| args.out.join(p).exists()).collect();
    if !existing.is_empty() && !args.force {
        return Err(CliError::invalid(format!(
            "incident \"{}\" already exists ({}); pass --force to replace it",
            args.id,
            existing.join(", ")
        )));
    }
    let profile = profile(&args, &events)?;
    let incident = reconstruct::build(
        &events,
        &Options {
            id: &args.id,
            agent: &profile.name,
            recording_path: &paths.recording,
            source: &source,
            base_manifest: profile.manifest.clone(),
        },
    )
    .map_err(|m| CliError::invalid(format!("{}: {m}", args.trace.display())))?;
    // a golden left from an earlier reconstruction would judge the new case
    let _ = std::fs::remove_file(args.out.join(&paths.golden));
    write_incident(&args.out, &paths, &incident, &profile, &args.id, &source)?;
    for p in paths.all().into_iter().filter(|p| *p != paths.golden) {
        super::out(format!("wrote {}", shown(&args.out, p)));
    }
    for note in &incident.notes {
        super::out(format!("note: {note}"));
    }
    // the path `stateval run` is told to use (no "./"): the dataset's name, which the
    // golden records, is derived from it
    let pipeline = PathBuf::from(shown(&args.out, &paths.pipeline));
    let actual = replay(&pipeline, &args.id).inspect_err(|_| {
        for p in paths.all() {
            let _ = std::fs::remove_file(args.out.join(p));
        }
    })?;
    // one comparison: the golden diff of the trace (as the golden) and the replay, which
    // covers the tool path and the final answer both
    let divergence = first_divergence(&events, &actual).map_err(CliError::internal)?;
    let exit = match divergence {
        None => {
            // the replay is what `stateval run` will produce: its log is the golden
            let normalized = stateval::golden::normalize::normalize(&actual)
                .map_err(|e| CliError::internal(format!("writing the golden: {e}")))?;
            write_atomically(&args.out.join(&paths.golden), &normalized.bytes)?;
            super::out(format!("wrote {}", shown(&args.out, &paths.golden)));
            super::out(format!(
                "replay under agent \"{}\" reproduces the trace's {}{}",
                profile.name,
                match incident.tool_sequence.len() {
                    0 => "0 tool calls".to_string(),
                    n => format!("{n} tool call(s): {}", incident.tool_sequence.join(", ")),
                },
                if final_answer(&events).is_some() {
                    " and its final answer"
                } else {
                    " (the trace captured no final answer to compare)"
                }
            ));
            Exit::Pass
        }
        Some(d) => {
            let what = if d.is_final_answer() {
                "reproduces the trace's tool calls but not its final answer"
            } else {
                "diverges from the trace"
            };
            super::out(format!(
                "replay under agent \"{}\" {what}: first divergence (the trace as the golden) at {d}",
                profile.name
            ));
            super::out(format!("no golden written: the replay does not reproduce the trace ({})", paths.golden));
            Exit::Fail
        }
    };
    super::out(format!("run it: stateval run {}", shown(&args.out, &paths.pipeline)));
    Ok(exit)
}

/// `rel` under `out`, without a leading `./`.
fn shown(out: &Path, rel: &str) -> String {
    if out == Path::new(".") { rel.to_string() } else { out.join(rel).display().to_string() }
}

/// An event log (verified) or a foreign trace (imported): its events and a
/// description of the source.
fn load_trace(path: &Path, format: Option<stateval::import::Format>) -> Result<(Vec<Event>, String), CliError> {
    let shown = path.to_string_lossy().replace('\\', "/");
    if format.is_none() && is_event_log(path) {
        let verified = read_log(path).map_err(|e| match e {
            ReadError::Invalid { source, .. } => CliError::invalid(format!(
                "{shown}: refusing to reconstruct from a log that does not verify: line {}: event seq {}: {}",
                source.line, source.seq, source.reason
            )),
            e @ ReadError::Io { .. } => CliError::invalid(e.to_string()),
        })?;
        return Ok((verified.events, format!("{shown} (event log)")));
    }
    let imported = import_file(path, format, None)?;
    let source = format!("{shown} ({})", imported.trace.format);
    Ok((imported.events, source))
}

/// Does the file start with an event-log line?
fn is_event_log(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str::<Value>(first)
        .is_ok_and(|v| v.get("hash").is_some() && v.get("seq").is_some() && v.get("kind").is_some())
}

fn profile(args: &Args, events: &[Event]) -> Result<Profile, CliError> {
    let Some(name) = &args.agent else {
        // an imported log's `run_started` holds the parts of its system prompt
        let system = events.first().map(|e| e.data.member("system"));
        let system: Vec<Cow<'_, str>> =
            system.map(|s| s.items().iter().filter_map(|part| part.as_str()).collect()).unwrap_or_default();
        let mut table = toml::Table::new();
        table.insert("system".into(), toml::Value::String(system.join("\n\n")));
        return Ok(Profile { name: DEFAULT_AGENT.into(), table, manifest: None, on_divergence: "fail".into() });
    };
    let path = args.pipeline.clone().unwrap_or_else(|| args.out.join(super::DEFAULT_PIPELINE));
    let pipeline = Pipeline::load(&path).map_err(|e| CliError::invalid(e.to_string()))?;
    let Some(agent) = pipeline.agents.get(name) else {
        let known: Vec<&str> = pipeline.agents.keys().map(String::as_str).collect();
        return Err(CliError::invalid(format!(
            "--agent {name}: {} defines no such profile (it defines: {})",
            path.display(),
            known.join(", ")
        )));
    };
    let doc: toml::Table =
        toml::from_str(&pipeline.text).map_err(|e| CliError::invalid(format!("{}: {e}", path.display())))?;
    let table = doc
        .get("agents")
        .and_then(|a| a.get(name.as_str()))
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    let manifest = match &agent.tools {
        Some(rel) => {
            let full = pipeline.resolve(rel);
            let shown = full.to_string_lossy().to_string();
            Manifest::load(&full, &shown).map_err(|e| CliError::invalid(e.to_string()))?;
            let text = std::fs::read_to_string(&full).map_err(|e| CliError::invalid(format!("{shown}: {e}")))?;
            Some(parse_json_strict(&text).map_err(|(l, c, m)| CliError::invalid(format!("{shown}:{l}:{c}: {m}")))?)
        }
        None => None,
    };
    let on_divergence = match pipeline.replay.on_divergence {
        stateval::pipeline::OnDivergence::Fail => "fail",
        stateval::pipeline::OnDivergence::Warn => "warn",
    };
    Ok(Profile { name: name.clone(), table, manifest, on_divergence: on_divergence.into() })
}

fn write_incident(
    out: &Path,
    paths: &Paths,
    incident: &Incident,
    profile: &Profile,
    id: &str,
    source: &str,
) -> Result<(), CliError> {
    let json_line = |v: &Value| serde_json::to_string(v).map_err(|e| CliError::internal(e.to_string()));
    write_atomically(&out.join(&paths.case), format!("{}\n", json_line(&incident.case)?).as_bytes())?;
    let mut recording = String::new();
    for line in &incident.recording {
        recording.push_str(&json_line(line)?);
        recording.push('\n');
    }
    write_atomically(&out.join(&paths.recording), recording.as_bytes())?;
    let manifest = serde_json::to_string_pretty(&incident.manifest).map_err(|e| CliError::internal(e.to_string()))?;
    write_atomically(&out.join(&paths.tools), format!("{manifest}\n").as_bytes())?;
    write_atomically(&out.join(&paths.pipeline), pipeline_toml(paths, profile, id, source)?.as_bytes())
}

/// The incident's pipeline: its one dataset, the profile with the incident's manifest.
fn pipeline_toml(paths: &Paths, profile: &Profile, id: &str, source: &str) -> Result<String, CliError> {
    let mut agent = profile.table.clone();
    agent.insert("tools".into(), toml::Value::String(paths.tools.clone()));
    // a digest pin names the profile's own manifest; the incident's manifest is another
    // file, so a copied pin could never match and would refuse every run
    agent.remove("tools_digest");
    let text = |s: &str| toml::Value::String(s.to_string());
    let table = |pairs: Vec<(&str, toml::Value)>| {
        toml::Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    };
    let mut doc = toml::Table::new();
    doc.insert(
        "pipeline".into(),
        table(vec![
            ("name", text(&format!("incident-{id}"))),
            // the file sits in pipeline/incidents/: paths resolve from the project
            ("base", text("../..")),
            ("datasets", toml::Value::Array(vec![text(&paths.case)])),
            ("goldens", text("goldens")),
            ("store", text(".stateval")),
        ]),
    );
    doc.insert("replay".into(), table(vec![("on_divergence", text(&profile.on_divergence))]));
    doc.insert("gates".into(), table(vec![("default", table(vec![("min_pass_rate", toml::Value::Float(1.0))]))]));
    let mut agents = toml::Table::new();
    agents.insert(profile.name.clone(), toml::Value::Table(agent));
    doc.insert("agents".into(), toml::Value::Table(agents));
    // sections in the order a reader expects, not the table's sorted order
    let mut text = format!("# Incident {id}, reconstructed from {source} by `stateval reconstruct`.\n");
    for key in ["pipeline", "replay", "gates", "agents"] {
        let mut section = toml::Table::new();
        if let Some(v) = doc.remove(key) {
            section.insert(key.to_string(), v);
        }
        let body = toml::to_string(&section).map_err(|e| CliError::internal(format!("writing the pipeline: {e}")))?;
        text.push_str(&body);
        text.push('\n');
    }
    Ok(text)
}

/// Replay the incident's case once, in memory, under its pipeline.
fn replay(pipeline: &Path, id: &str) -> Result<Vec<Event>, CliError> {
    let filter = glob::Pattern::new(&glob::Pattern::escape(id)).map_err(|e| CliError::internal(e.to_string()))?;
    let plan = Plan::load(pipeline, &Selection { filter: Some(filter), tags: Vec::new() }).map_err(|e| match e {
        RunnerError::Input(errors) => CliError::internal(format!(
            "the reconstructed incident does not load (a bug in reconstruct; the files were removed):\n{}",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
        )),
        other => CliError::from(other),
    })?;
    if plan.cases.is_empty() {
        return Err(CliError::internal(format!("case {id} is not in {}", pipeline.display())));
    }
    let case = &plan.case(0)?;
    let reference = case.recordings.first().ok_or_else(|| CliError::internal("the case has no recording"))?;
    let recording = reference.load().map_err(CliError::internal)?;
    let assertions = stateval::runner::log_assertions(case);
    let replayed = plan
        .replay(case, 0, &recording, Box::new(Vec::<u8>::new()), None, &assertions)
        .map_err(|e| CliError { message: format!("replaying {id}: {e}"), ..CliError::from(e) })?;
    Ok(replayed.events)
}
