//! `stateval record [PIPELINE] --case ID`: run a case's agent once (or `--runs K`
//! times) against the live model API and write what it answered as the case's
//! recordings, so every later `stateval run` replays it. An external agent's model
//! calls are forwarded as it sent them; the built-in runtime's compiled requests are
//! rendered as OpenAI Chat or Anthropic Messages requests (`external::live`).
//!
//! Tools still answer from the fixtures, so a recording agrees with them. The key comes
//! from stateval's environment and never reaches the agent or a file; requests are
//! scrubbed of secrets before they are digested or written. A run that does not finish
//! cleanly (an upstream error, an answer cut short, a stream that never reached its end
//! event, a failing agent) writes nothing, and every file is written whole or not at all.
//!
//! `--judge` records judges instead ([`judge`]): the case is replayed from its
//! recordings as `stateval run` replays it, and every judge sample its judge recording
//! does not hold yet is asked of the live judge model.

mod judge;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{CliError, Exit};
use stateval::dataset::recording::Recording;
use stateval::external::RecordMode;
use stateval::external::upstream::{Provider, Upstream};
use stateval::pipeline::{AgentKind, Pipeline};

#[derive(clap::Args)]
pub struct Args {
    /// Pipeline definition.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// The case to record (an external agent, or the built-in runtime); with `--judge`, the
    /// case whose judges to record (default: every case that asks a judge).
    #[arg(long = "case", value_name = "ID", required_unless_present = "judge")]
    case: Option<String>,
    /// Record judge answers, not the agent: replay the case from its recordings and ask
    /// the live judge model each judge sample its judge recording lacks.
    #[arg(long, conflicts_with_all = ["output", "runs"])]
    judge: bool,
    /// Recorded runs to make (default: as many as the case names, at least one).
    #[arg(long)]
    runs: Option<usize>,
    /// Send model calls only to this vendor (`openai` or `anthropic`); default: the
    /// vendor of the API the agent calls. A built-in case is sent as OpenAI Chat
    /// Completions, or as Anthropic Messages with `--upstream anthropic`.
    #[arg(long)]
    upstream: Option<String>,
    /// Built-in cases: the model to ask (default gpt-4o-mini, or
    /// claude-3-5-haiku-latest with `--upstream anthropic`).
    #[arg(long, value_name = "NAME", conflicts_with = "judge")]
    model: Option<String>,
    /// The upstream's base URL instead of the vendor's (a gateway, a proxy).
    #[arg(long, value_name = "URL")]
    upstream_url: Option<String>,
    /// Overwrite recordings that exist.
    #[arg(long)]
    force: bool,
    /// Write here instead of the files the case names (with several runs, `PATH`
    /// becomes `NAME.K.EXT`).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let only = args.upstream.as_deref().map(Provider::parse).transpose().map_err(CliError::invalid)?;
    if args.judge {
        return judge::record(&args, only);
    }
    let id = args.case.as_deref().ok_or_else(|| CliError::invalid("--case ID: the case to record"))?;
    let pipeline = Pipeline::load(&args.pipeline).map_err(|e| CliError::invalid(e.to_string()))?;
    // the recordings a case names may not exist yet: an empty placeholder lets the
    // dataset load, and goes again if nothing is recorded into it
    let placeholders = Placeholders::create(&pipeline, id).map_err(CliError::invalid)?;
    // nor may the judge recordings (nothing is graded while recording the agent)
    let _judges = judge::placeholders(&pipeline)?;
    let (mut plan, case) = super::one_case(&args.pipeline, id)?;
    let builtin = plan.pipeline.agents[&case.agent].kind == AgentKind::Builtin;
    if args.model.is_some() && !builtin {
        return Err(CliError::invalid(format!(
            "--model is for built-in cases; case {:?} runs the external agent {:?}, which names its own model",
            case.id, case.agent
        )));
    }
    let named = placeholders.named.clone();
    let runs = args.runs.unwrap_or(named.len()).max(1);
    let targets: Vec<PathBuf> = (0..runs)
        .map(|k| match &args.output {
            Some(path) if runs == 1 => Ok(path.clone()),
            Some(path) => Ok(numbered(path, k)),
            None => named.get(k).cloned().ok_or_else(|| {
                CliError::invalid(format!(
                    "case {:?} names {} recording file(s); pass -o PATH to write run {k}",
                    case.id,
                    named.len()
                ))
            }),
        })
        .collect::<Result<_, _>>()?;
    for target in &targets {
        let exists = std::fs::metadata(target).is_ok_and(|m| m.len() > 0);
        if exists && !args.force && !placeholders.created.contains(target) {
            return Err(CliError::invalid(format!("{} exists; pass --force to record over it", target.display())));
        }
    }
    let empty = Recording {
        responses: Vec::new(),
        digest: stateval::canon::digest(stateval::canon::Context::Content, b""),
        source: "record".into(),
    };
    let mut written = Vec::new();
    // an external agent's stderr is kept, as `run` keeps it beside the log: a failed
    // recording is diagnosed from it (and stateval's own reason)
    let external = plan.pipeline.agents.get(&case.agent).is_some_and(|p| p.kind == AgentKind::External);
    let stderr_dir = plan.layout().root.join("record").join(&case.id);
    if external {
        std::fs::create_dir_all(&stderr_dir)
            .map_err(|e| CliError::internal(format!("{}: {e}", stderr_dir.display())))?;
    }
    for (k, target) in targets.iter().enumerate() {
        plan.record = Some(Box::new(RecordMode {
            upstream: Upstream::new(only, args.upstream_url.clone()),
            provider: only,
            model: args.model.clone(),
            lines: Mutex::new(Vec::new()),
        }));
        let stderr = external.then(|| stderr_dir.join(format!("{k}.stderr")));
        let summary = plan
            .replay(&case, k, &empty, Box::new(Vec::<u8>::new()), stderr.clone(), &[])
            .map(|run| run.summary)
            .map_err(CliError::from)?;
        let lines = plan.record.take().map(|r| r.lines.into_inner().unwrap_or_default()).unwrap_or_default();
        if let Some(error) = summary.error {
            let mut message = format!("run {k} of {:?}: {error}; nothing written for it", case.id);
            if let Some(refused) = &summary.refused {
                message.push_str(&format!("\nlast refused request: {refused}"));
            }
            if let Some(path) = &stderr {
                let patterns = plan.pipeline.agents.get(&case.agent).map(|p| p.scrub.to_vec()).unwrap_or_default();
                message.push_str(&stderr_tail(path, &plan.pipeline, &patterns));
            }
            return Err(CliError { exit: Exit::Fail, message });
        }
        write_atomically(target, &lines).map_err(|e| CliError::internal(format!("{}: {e}", target.display())))?;
        written.push(target.clone());
        super::out(format!(
            "recorded run {k} of {}: {} ({} model call(s))",
            case.id,
            plan.pipeline.display(target),
            lines.len()
        ));
    }
    placeholders.keep(&written);
    Ok(Exit::Pass)
}

/// How many of the agent's last stderr lines a failed recording shows.
const STDERR_TAIL_LINES: usize = 20;

/// `\nthe agent's stderr (PATH), last lines:\n  …`, scrubbed of secrets, or a line
/// saying it wrote none.
fn stderr_tail(path: &Path, pipeline: &Pipeline, patterns: &[String]) -> String {
    let shown = pipeline.display(path);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return format!("\nthe agent wrote nothing to stderr ({shown})");
    }
    let scrubber = stateval::secrets::Scrubber::new(patterns);
    let tail: Vec<String> = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..]
        .iter()
        .map(|l| format!("  {}", scrubber.text(l).unwrap_or_else(|| l.to_string())))
        .collect();
    format!("\nthe agent's stderr ({shown}), last {} line(s):\n{}", tail.len(), tail.join("\n"))
}

/// `out/r.jsonl`, 2 → `out/r.2.jsonl`.
fn numbered(path: &Path, k: usize) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{k}"),
    };
    path.with_file_name(name)
}

fn write_atomically(path: &Path, lines: &[stateval::dataset::recording::RecordedResponse]) -> std::io::Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(&recording_line(line).to_string());
        text.push('\n');
    }
    replace_file(path, &text, |_| Ok(()))
}

/// Write `text` to `path` whole or not at all; `check` may refuse the written file
/// first (then `path` stays as it was).
fn replace_file(path: &Path, text: &str, check: impl FnOnce(&Path) -> Result<(), String>) -> std::io::Result<()> {
    stateval::atomic::replace_checked(path, text.as_bytes(), check)
}

/// One recording line, with only the fields that have values (the recording format
/// leaves out what it does not know rather than writing null).
fn recording_line(r: &stateval::dataset::recording::RecordedResponse) -> serde_json::Value {
    use serde_json::json;
    let calls: Vec<serde_json::Value> = r
        .response
        .tool_calls
        .iter()
        .map(|c| match &c.id {
            Some(id) => json!({"id": id, "name": c.name, "args": c.args}),
            None => json!({"name": c.name, "args": c.args}),
        })
        .collect();
    let mut response = json!({"content": r.response.content});
    if !calls.is_empty() {
        response["tool_calls"] = json!(calls);
    }
    let mut line = json!({"turn": r.turn, "step": r.step, "response": response,
                          "usage": {"input_tokens": r.usage.input_tokens, "output_tokens": r.usage.output_tokens},
                          "latency_ms": r.latency_ms});
    if let Some(hash) = r.request_hash {
        line["request_hash"] = json!(hash.to_string());
    }
    if let Some(request) = &r.request {
        line["request"] = request.clone();
    }
    line
}

/// Empty stand-ins for recording files a case names but that do not exist yet.
struct Placeholders {
    /// Every recording file the case names, resolved.
    named: Vec<PathBuf>,
    created: Vec<PathBuf>,
}

impl Placeholders {
    fn create(pipeline: &Pipeline, id: &str) -> Result<Placeholders, String> {
        let mut named = Vec::new();
        for pattern in &pipeline.pipeline.datasets {
            let full = pipeline.resolve(pattern);
            for path in glob::glob(&full.to_string_lossy()).map_err(|e| e.to_string())?.flatten() {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                for line in text.lines() {
                    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
                    if value.get("id").and_then(serde_json::Value::as_str) != Some(id) {
                        continue;
                    }
                    for r in value.get("recordings").and_then(serde_json::Value::as_array).into_iter().flatten() {
                        if let Some(rel) = r.as_str() {
                            named.push(stateval::dataset::paths::resolve(pipeline, &path, rel));
                        }
                    }
                }
            }
        }
        let mut created = Vec::new();
        for path in &named {
            if !path.exists() {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                }
                std::fs::write(path, b"").map_err(|e| format!("{}: {e}", path.display()))?;
                created.push(path.clone());
            }
        }
        Ok(Placeholders { named, created })
    }

    /// Placeholders that received a recording stay; the others go.
    fn keep(mut self, written: &[PathBuf]) {
        self.created.retain(|p| !written.contains(p));
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for path in &self.created {
            let _ = std::fs::remove_file(path);
        }
    }
}
