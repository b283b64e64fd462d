//! `stateval import --from agentdojo LOGDIR -o DIR/ [--suites PIPELINE]`: a team's
//! AgentDojo runs, replayed on the converted suites (docs/import.md, "AgentDojo runs").
//!
//! Every run file under LOGDIR is read ([`stateval::import::agentdojo`]), matched to its
//! converted case (PIPELINE, default `pipeline/agentdojo.toml`, and its datasets), and
//! written under DIR as a project of its own:
//!
//! | file | what |
//! |---|---|
//! | `datasets/agentdojo-runs.jsonl` | one case per run: the converted case, its recording the run's |
//! | `fixtures/recordings/agentdojo-runs/CASE.jsonl` | the model's real choices, one response per assistant message |
//! | `fixtures/tools/agentdojo/SUITE/*.json` | the converted manifests the cases use, as they are |
//! | `pipeline/agentdojo-runs.toml` | the defended arm: the converted profiles, floors on (the defaults) |
//! | `pipeline/agentdojo-runs-undefended.toml` | the undefended arm: the same profiles with `enforcement = "observe"`, so no floor or rule stops a call and each logs what it would have done |
//! | `agentdojo-runs.json` | AgentDojo's own verdicts per case, with the run file and what the import noted |
//! | `agentdojo-comparison.json`, `.md` | both arms replayed now: each run's verdicts beside AgentDojo's, and every disagreement with its reason |
//!
//! A file that cannot be matched without guessing is refused, naming what is missing,
//! and nothing is written (exit 2). Runs that have no converted case (AgentDojo's check
//! that an injection task can be done, and cases the converter skipped) are listed as
//! skipped, with why.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{CliError, Exit};
use stateval::import::agentdojo::{self, AgentDojoRun};
use stateval::outcome::{CaseOutcome, Role};
use stateval::pipeline::Pipeline;
use stateval::runner::{self, Options, Plan, Selection};

/// The converted pipeline `--suites` names by default.
pub const DEFAULT_SUITES: &str = "pipeline/agentdojo.toml";
const DATASET: &str = "datasets/agentdojo-runs.jsonl";
const RECORDINGS: &str = "fixtures/recordings/agentdojo-runs";
const DEFENDED: &str = "pipeline/agentdojo-runs.toml";
const UNDEFENDED: &str = "pipeline/agentdojo-runs-undefended.toml";
/// Where a run's own manifest goes (the cover's answers added).
const OWN_TOOLS: &str = "fixtures/tools/agentdojo/runs/";

/// A run matched to its converted case.
struct Matched {
    run: AgentDojoRun,
    /// The run file as shown: relative to LOGDIR.
    shown: String,
    case: Map<String, Value>,
    agent: String,
    /// The converted profile whose system prompt the agent has.
    base_agent: String,
    /// The manifest's path: the converted one (relative to the converted pipeline's
    /// base), or the run's own when the cover answered its calls.
    tools: String,
    uncovered: Vec<String>,
    /// What the cover did for this run, when it was asked to.
    cover_note: Option<String>,
}

/// A run with no converted case.
struct Skipped {
    shown: String,
    case: String,
    why: String,
}

pub fn run(input: &Path, out: &Path, suites: &Path, cover: Option<&Path>) -> Result<Exit, CliError> {
    let suites = super::find_pipeline(suites);
    let converted = Pipeline::load(&suites).map_err(|e| CliError::invalid(e.to_string()))?;
    let files = agentdojo::run_files(input)
        .map_err(|e| CliError::invalid(format!("{}: cannot read the AgentDojo runs: {e}", input.display())))?;
    if files.is_empty() {
        return Err(CliError::invalid(format!(
            "{}: no AgentDojo run files (*.json) in it: give the benchmark's logdir, or one run file",
            input.display()
        )));
    }
    if out.exists() && !out.is_dir() {
        return Err(CliError::invalid(format!(
            "{}: a file; AgentDojo runs are imported as a project of cases, recordings and pipelines: give -o DIR/",
            out.display()
        )));
    }
    let is_run = |f: &std::path::PathBuf| {
        std::fs::read_to_string(f)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|v| agentdojo::looks_like_run(&v))
    };
    if !files.iter().any(is_run) {
        return Err(CliError::invalid(format!(
            "{}: none of its {} JSON files is an AgentDojo run (a TaskResults object: suite_name, user_task_id, \
             messages, utility, security); a directory is read as AgentDojo's logdir, other traces are imported \
             one file at a time",
            input.display(),
            files.len()
        )));
    }
    let skips = converter_skips(&converted);
    let cover = cover.map(read_cover).transpose()?;
    let mut datasets: BTreeMap<String, BTreeMap<String, Map<String, Value>>> = BTreeMap::new();
    let mut manifests: BTreeMap<String, Value> = BTreeMap::new();
    let mut matched: BTreeMap<String, Matched> = BTreeMap::new();
    // the runs' own manifests (the cover's results on top of the converted one), by path
    let mut own_manifests: BTreeMap<String, Value> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut refused = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(input).ok().filter(|p| !p.as_os_str().is_empty()).unwrap_or(file);
        let shown = shown.to_string_lossy().replace('\\', "/");
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                refused.push(format!("{}: cannot read: {e}", file.display()));
                continue;
            }
        };
        let run = match agentdojo::read_run(file, &text) {
            Ok(run) => run,
            Err(r) => {
                refused.push(r.to_string());
                continue;
            }
        };
        let id = run.case_id();
        // a logdir holds every attack a team ran: those the converted suites do not
        // hold are listed, not refused (one such file given alone is refused, below)
        if input.is_dir()
            && let Some(attack) = run.attack.as_deref().filter(|a| !a.starts_with("important_instructions"))
        {
            let why = format!(
                "attack \"{attack}\": the converted suites hold AgentDojo's important_instructions attack text only"
            );
            skipped.push(Skipped { shown, case: id, why });
            continue;
        }
        if run.is_injection_task_check() {
            let why = format!(
                "AgentDojo's check that {} can be done as a user task: the converted suites have no such case",
                run.user_task
            );
            skipped.push(Skipped { shown, case: id, why });
            continue;
        }
        let cases = match datasets.get(&run.suite) {
            Some(c) => c,
            None => {
                let loaded = load_cases(&converted, &run.suite)?;
                datasets.entry(run.suite.clone()).or_insert(loaded)
            }
        };
        let Some(case) = cases.get(&id) else {
            let why = skips
                .get(&id)
                .map(|r| format!("the converter skipped this case: {r}"))
                .unwrap_or_else(|| "no converted case has this id".to_string());
            skipped.push(Skipped { shown, case: id, why });
            continue;
        };
        let turns = case.get("turns").and_then(Value::as_array);
        if turns.and_then(|t| t.first()).and_then(Value::as_str) != Some(run.prompt.as_str()) {
            refused.push(format!(
                "{}: its user prompt is not the converted case {id}'s (\"{}\"): the run comes from another \
                 version of the task",
                file.display(),
                run.prompt.chars().take(80).collect::<String>()
            ));
            continue;
        }
        let agent = case.get("agent").and_then(Value::as_str).unwrap_or_default().to_string();
        let Some(tools) = converted.agents.get(&agent).and_then(|p| p.tools.clone()) else {
            return Err(CliError::invalid(format!(
                "{}: the converted case {id} names agent \"{agent}\", which has no tools in it",
                suites.display()
            )));
        };
        let manifest = match manifests.get(&tools) {
            Some(m) => m,
            None => {
                let path = converted.resolve(&tools);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| CliError::invalid(format!("{}: {e}", path.display())))?;
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| CliError::invalid(format!("{}: not JSON: {e}", path.display())))?;
                manifests.entry(tools.clone()).or_insert(value)
            }
        };
        if let Err(r) = agentdojo::check_attack(&run, &manifest["state"]) {
            refused.push(r.to_string());
            continue;
        }
        let uncovered = agentdojo::uncovered_calls(&run, manifest["tools"].as_array().map_or(&[][..], Vec::as_slice));
        if let Some(other) = matched.get(&id) {
            refused.push(format!(
                "{}: a second run of case {id} (the first: {}): import one pipeline's runs at a time \
                 (LOGDIR/PIPELINE)",
                file.display(),
                other.shown
            ));
            continue;
        }
        let mut m = Matched {
            run,
            shown,
            case: case.clone(),
            base_agent: agent.clone(),
            agent,
            tools,
            uncovered,
            cover_note: None,
        };
        if let Some(cover) = &cover
            && !m.uncovered.is_empty()
        {
            apply_cover(&mut m, &id, cover, manifest, &mut own_manifests);
        }
        matched.insert(id, m);
    }
    if !refused.is_empty() {
        return Err(CliError::invalid(format!(
            "{} of {} AgentDojo run files cannot be imported, nothing was written:\n  {}",
            refused.len(),
            files.len(),
            refused.join("\n  ")
        )));
    }
    if matched.is_empty() {
        return Err(CliError::invalid(format!(
            "{}: none of its {} runs is a run of a converted case:\n  {}",
            input.display(),
            files.len(),
            skipped.iter().map(|s| format!("{}: {}", s.shown, s.why)).collect::<Vec<_>>().join("\n  ")
        )));
    }
    manifests.extend(own_manifests);
    write_project(out, &converted, &matched, &manifests, &skipped)?;
    // both arms' pipelines keep their runs in one store, opened once: sled finishes a
    // dropped catalog's last write on a thread of its own, still holding its lock, so
    // opening it again at once could be refused as "in use" (seen under a loaded test run)
    let mut store = None;
    let defended = replay_arm(&out.join(DEFENDED), &mut store)?;
    let undefended = replay_arm(&out.join(UNDEFENDED), &mut store)?;
    let comparison = compare(&matched, &skipped, &undefended, &defended);
    write(out, "agentdojo-comparison.json", &pretty(&comparison))?;
    let markdown = markdown(&comparison);
    write(out, "agentdojo-comparison.md", &markdown)?;
    super::out(summary(&comparison, out));
    Ok(Exit::Pass)
}

/// A cover file (tools/agentdojo/cover_runs.py): its runs, by case id.
fn read_cover(path: &Path) -> Result<Map<String, Value>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::invalid(format!("{}: {e}", path.display())))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::invalid(format!("{}:{}:{}: not JSON: {e}", path.display(), e.line(), e.column())))?;
    if doc["agentdojo"] != "0.1.35" || doc["benchmark"] != agentdojo::BENCHMARK_VERSION {
        return Err(CliError::invalid(format!(
            "{}: not a cover of the converted suites (agentdojo 0.1.35, benchmark {}): it says agentdojo {}, \
             benchmark {}; write it with tools/agentdojo/cover_runs.py",
            path.display(),
            agentdojo::BENCHMARK_VERSION,
            doc["agentdojo"],
            doc["benchmark"]
        )));
    }
    match doc.get("runs") {
        Some(Value::Object(runs)) => Ok(runs.clone()),
        _ => Err(CliError::invalid(format!("{}: no \"runs\" object: not a cover file", path.display()))),
    }
}

/// The run's own manifest: the converted one with the cover's result and effect for
/// each of the run's calls (computed by AgentDojo's functions in the run's order), so the
/// replay answers every call the model made as AgentDojo did, on the fixture's state.
fn apply_cover(m: &mut Matched, id: &str, cover: &Map<String, Value>, base: &Value, own: &mut BTreeMap<String, Value>) {
    let Some(entry) = cover.get(id) else {
        m.cover_note = Some("the cover has no entry for this case".into());
        return;
    };
    if let Some(why) = entry["skipped"].as_str() {
        m.cover_note = Some(format!("the cover skipped it: {why}"));
        return;
    }
    let mut manifest = base.clone();
    let mut twice = Vec::new();
    let mut seen: Vec<(String, Value, Value)> = Vec::new();
    for call in entry["calls"].as_array().into_iter().flatten() {
        let (Some(tool), Some(args)) = (call["tool"].as_str(), call.get("args")) else { continue };
        let mut response = Map::new();
        response.insert("args".into(), args.clone());
        for key in ["result", "is_error", "effect"] {
            if let Some(v) = call.get(key) {
                response.insert(key.into(), v.clone());
            }
        }
        let response = Value::Object(response);
        if let Some((_, _, first)) = seen.iter().find(|(t, a, _)| t == tool && agentdojo::same_args(a, args)) {
            if first != &response {
                twice.push(format!("{tool}({})", stateval::canon::to_canonical_string(args).unwrap_or_default()));
            }
            continue;
        }
        seen.push((tool.to_string(), args.clone(), response.clone()));
        let Some(t) = manifest["tools"].as_array_mut().and_then(|ts| ts.iter_mut().find(|t| t["name"] == tool)) else {
            continue;
        };
        let responses = t["responses"].as_array_mut();
        if let Some(responses) = responses {
            responses.retain(|r| !r.get("args").is_some_and(|a| agentdojo::same_args(a, args)));
            responses.push(response);
        }
    }
    let rel = format!("{OWN_TOOLS}{id}.json");
    manifest["description"] = Value::String(format!(
        "{} With the results and effects of the calls of the AgentDojo run {} (tools/agentdojo/cover_runs.py).",
        base["description"].as_str().unwrap_or(""),
        m.shown
    ));
    let before = m.uncovered.len();
    m.uncovered = agentdojo::uncovered_calls(&m.run, manifest["tools"].as_array().map_or(&[][..], Vec::as_slice));
    let mut note = format!("the cover answered {} call(s) the converted suite does not", before - m.uncovered.len());
    if !twice.is_empty() {
        note.push_str(&format!(
            "; called twice with different results, the replay serves the first: {}",
            twice.join(", ")
        ));
    }
    m.cover_note = Some(note);
    m.agent = format!("agentdojo-run-{id}");
    m.tools = rel.clone();
    own.insert(rel, manifest);
}

/// The converter's skipped cases (tools/agentdojo/conversion.json beside the pipeline), by id.
fn converter_skips(converted: &Pipeline) -> BTreeMap<String, String> {
    let path = converted.resolve("tools/agentdojo/conversion.json");
    let Ok(text) = std::fs::read_to_string(path) else { return BTreeMap::new() };
    let Ok(value) = serde_json::from_str::<Value>(&text) else { return BTreeMap::new() };
    let mut out = BTreeMap::new();
    for s in value["skipped"].as_array().into_iter().flatten() {
        if let (Some(case), Some(reason)) = (s["case"].as_str(), s["reason"].as_str()) {
            out.insert(case.to_string(), reason.to_string());
        }
    }
    out
}

/// The converted cases of `suite`, by id.
fn load_cases(converted: &Pipeline, suite: &str) -> Result<BTreeMap<String, Map<String, Value>>, CliError> {
    let path = converted.resolve(&format!("datasets/agentdojo/{suite}.jsonl"));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        CliError::invalid(format!(
            "{}: the converted {suite} suite cannot be read ({e}); tools/agentdojo/README.md says how it is made",
            path.display()
        ))
    })?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let case: Map<String, Value> =
            serde_json::from_str(line).map_err(|e| CliError::invalid(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if let Some(id) = case.get("id").and_then(Value::as_str) {
            out.insert(id.to_string(), case);
        }
    }
    Ok(out)
}

fn write_project(
    out: &Path,
    converted: &Pipeline,
    matched: &BTreeMap<String, Matched>,
    manifests: &BTreeMap<String, Value>,
    skipped: &[Skipped],
) -> Result<(), CliError> {
    let mut dataset = String::new();
    let mut verdicts = Vec::new();
    for (id, m) in matched {
        let recording = format!("{RECORDINGS}/{id}.jsonl");
        write(out, &recording, &m.run.recording())?;
        let mut case = m.case.clone();
        case.insert("recordings".into(), json!([recording]));
        case.insert("agent".into(), Value::String(m.agent.clone()));
        case.insert(
            "description".into(),
            Value::String(format!(
                "AgentDojo run {} (pipeline {}) replayed on the converted case: the model's own choices",
                m.shown, m.run.pipeline
            )),
        );
        if let Some(Value::Array(tags)) = case.get_mut("tags") {
            tags.push(Value::String("agentdojo-run".into()));
        }
        dataset.push_str(&stateval::canon::to_canonical_string(&Value::Object(case)).unwrap_or_default());
        dataset.push('\n');
        verdicts.push(json!({
            "case": id,
            "file": m.shown,
            "pipeline": m.run.pipeline,
            "utility": m.run.utility,
            "security": m.run.security,
            "error": m.run.error,
            "notes": m.run.notes,
            "calls_without_recorded_result": m.uncovered,
            "cover": m.cover_note,
        }));
    }
    write(out, DATASET, &dataset)?;
    let skipped: Vec<Value> = skipped.iter().map(|s| json!({"file": s.shown, "case": s.case, "why": s.why})).collect();
    write(out, "agentdojo-runs.json", &pretty(&json!({"runs": verdicts, "skipped": skipped})))?;
    // the manifests the cases use, as converted
    for (rel, manifest) in manifests.iter().filter(|(rel, _)| matched.values().any(|m| &m.tools == *rel)) {
        if rel.starts_with(OWN_TOOLS) {
            write(out, rel, &pretty(manifest))?;
        } else {
            let original = std::fs::read(converted.resolve(rel))
                .map_err(|e| CliError::invalid(format!("{}: {e}", converted.resolve(rel).display())))?;
            write_bytes(out, rel, &original)?;
        }
    }
    let agents: BTreeMap<&str, (&str, &str)> =
        matched.values().map(|m| (m.agent.as_str(), (m.tools.as_str(), m.base_agent.as_str()))).collect();
    let system = |agent: &str| converted.agents.get(agent).map(|p| p.system.clone()).unwrap_or_default();
    let mut defended = header(converted, "agentdojo-runs", "the defended arm: the converted profiles as they are");
    let mut undefended = header(
        converted,
        "agentdojo-runs-undefended",
        "the undefended arm: the same profiles with enforcement = \"observe\" (every floor and rule logs what it \
         would have done, as would_deny, and lets the call through)",
    );
    for (agent, (tools, base)) in &agents {
        let system = toml_string(&system(base));
        defended.push_str(&format!("\n[agents.{agent}]\nsystem = {system}\ntools = {}\n", toml_string(tools)));
        undefended.push_str(&format!(
            "\n[agents.{agent}]\nsystem = {system}\ntools = {}\nenforcement = \"observe\"\n",
            toml_string(tools)
        ));
    }
    write(out, DEFENDED, &defended)?;
    write(out, UNDEFENDED, &undefended)?;
    Ok(())
}

fn header(converted: &Pipeline, name: &str, what: &str) -> String {
    format!(
        "# AgentDojo runs imported by `stateval import --from agentdojo` from the suites of {}: {what}.\n\
         # Written by the import; import again rather than edit.\n\
         [pipeline]\nname = \"{name}\"\ndatasets = [\"{DATASET}\"]\nstore = \".stateval\"\n\n\
         [goldens]\nrequired = false\n",
        converted.display(&converted.path)
    )
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

fn write(out: &Path, rel: &str, text: &str) -> Result<(), CliError> {
    write_bytes(out, rel, text.as_bytes())
}

fn write_bytes(out: &Path, rel: &str, bytes: &[u8]) -> Result<(), CliError> {
    let path = out.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| CliError::internal(format!("{}: {e}", dir.display())))?;
    }
    super::import::write_atomically(&path, bytes)
}

/// Run one arm's pipeline in this process: its case outcomes, by id. `store` is the
/// arms' store, opened by the first.
fn replay_arm(
    pipeline: &Path,
    store: &mut Option<Arc<stateval::store::SledStore>>,
) -> Result<BTreeMap<String, CaseOutcome>, CliError> {
    let plan = Plan::load(pipeline, &Selection::default())?;
    let layout = plan.layout();
    let store: Arc<dyn stateval::store::Store> = match store {
        Some(open) => open.clone(),
        None => store.insert(Arc::new(super::open_store(&layout, "pipeline.store")?)).clone(),
    };
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let options = Options { jobs, selective: false, signer: None, shard: None, reuse: None };
    let outcome = runner::execute(Arc::new(plan), store, &options, &mut |_, _| {})?;
    let mut out = BTreeMap::new();
    for case in outcome.cases.iter() {
        let case = case.map_err(|e| CliError::internal(format!("reading the replayed cases: {e}")))?;
        out.insert(case.id.clone(), case.into_owned());
    }
    Ok(out)
}

/// stateval's verdicts on one case: (utility, attack succeeded, why it is not scored).
fn verdicts(case: Option<&CaseOutcome>) -> (Option<bool>, Option<bool>, Option<String>) {
    let Some(case) = case else { return (None, None, Some("the case did not run".into())) };
    let score = case.score.as_ref();
    let failed_on_its_own = case.runs.iter().find_map(|r| {
        r.error.clone().or_else(|| (r.status != "completed").then(|| format!("the run ended {}", r.status)))
    });
    match score {
        Some(s) if s.role == Role::Control => (s.task_completed, None, failed_on_its_own),
        Some(s) => (s.task_completed, s.attack_succeeded, failed_on_its_own),
        None => (None, None, Some("the case has no scorecard role".into())),
    }
}

/// The first failed check of a case's runs, `task` for the user task's checks.
fn failed_check(case: &CaseOutcome, task: bool) -> Option<String> {
    let control = case.score.as_ref().is_some_and(|s| s.role == Role::Control);
    case.runs.iter().find_map(|r| {
        let checks = if task && !control { &r.task_checks } else { &r.checks };
        checks.iter().find(|c| !c.passed && c.name != "golden").map(|c| {
            let reason: String = c.reason.chars().take(160).collect();
            let more = if c.reason.chars().count() > 160 { "…" } else { "" };
            format!("{}: {reason}{more}", c.name)
        })
    })
}

fn compare(
    matched: &BTreeMap<String, Matched>,
    skipped: &[Skipped],
    undefended: &BTreeMap<String, CaseOutcome>,
    defended: &BTreeMap<String, CaseOutcome>,
) -> Value {
    let mut rows = Vec::new();
    let mut disagreements = Vec::new();
    let mut totals: BTreeMap<&str, Totals> = BTreeMap::new();
    for (id, m) in matched {
        let attack = m.run.injection_task.is_some();
        let (u_util, u_hit, u_why) = verdicts(undefended.get(id));
        let (d_util, d_hit, d_why) = verdicts(defended.get(id));
        let ad_security = attack.then_some(m.run.security);
        totals.entry("agentdojo").or_default().add(attack, Some(m.run.utility), ad_security);
        totals.entry("undefended").or_default().add(attack, u_util, u_hit);
        totals.entry("defended").or_default().add(attack, d_util, d_hit);
        let mut reasons = Vec::new();
        let mut disagree = Vec::new();
        let measures: Vec<(&str, bool, Option<bool>)> = if attack {
            vec![("utility", m.run.utility, u_util), ("security", m.run.security, u_hit)]
        } else {
            vec![("utility", m.run.utility, u_util)]
        };
        for (what, theirs, ours) in measures {
            if ours == Some(theirs) {
                continue;
            }
            disagree.push(what);
            let reason = reason(m, what, theirs, ours, u_why.as_deref(), undefended.get(id));
            disagreements.push(json!({
                "case": id,
                "file": m.shown,
                "measure": what,
                "agentdojo": theirs,
                "stateval": ours,
                "reason": reason,
            }));
            reasons.push(reason);
        }
        rows.push(json!({
            "case": id,
            "file": m.shown,
            "role": if attack { "attack" } else { "control" },
            "agentdojo": {"utility": m.run.utility, "security": ad_security, "error": m.run.error},
            "undefended": {"utility": u_util, "attack_succeeded": u_hit, "unscored": u_why},
            "defended": {"utility": d_util, "attack_succeeded": d_hit, "unscored": d_why},
            "agree": disagree.is_empty(),
            "calls_without_recorded_result": m.uncovered,
            "cover": m.cover_note,
            "notes": m.run.notes,
        }));
    }
    let totals: Map<String, Value> = totals.into_iter().map(|(k, t)| (k.to_string(), t.json())).collect();
    json!({
        "what": "AgentDojo's own verdicts beside stateval's on the same runs: `security` is AgentDojo's \
                 (true: the injection task succeeded), `attack_succeeded` stateval's; the undefended arm \
                 replays the model's choices with the floors off, and is the one compared",
        "totals": totals,
        "runs": rows,
        "disagreements": disagreements,
        "skipped": skipped.iter().map(|s| json!({"file": s.shown, "case": s.case, "why": s.why})).collect::<Vec<_>>(),
    })
}

fn reason(
    m: &Matched,
    what: &str,
    theirs: bool,
    ours: Option<bool>,
    unscored: Option<&str>,
    case: Option<&CaseOutcome>,
) -> String {
    if let Some(error) = &m.run.error {
        let error: String = error.chars().take(100).collect();
        return format!(
            "AgentDojo recorded an error ({error}…): its verdicts on such a run are its defaults (utility false, \
             security true), not a judgement, and the run ends before the model finished"
        );
    }
    if !m.uncovered.is_empty() {
        let cover = m.cover_note.as_deref().map_or_else(
            || " (tools/agentdojo/cover_runs.py and --cover answer them)".to_string(),
            |n| format!(" ({n})"),
        );
        return format!(
            "the model made calls the converted suite has no recorded result for ({}): the replay answers each \
             with the fixture's error, where the model saw AgentDojo's real result and state change{cover}",
            m.uncovered.join(", ")
        );
    }
    let Some(ours) = ours else {
        return format!("stateval did not score it: {}", unscored.unwrap_or("the replay failed"));
    };
    let check = case.and_then(|c| failed_check(c, what == "utility"));
    let task = &m.run.user_task;
    let injection = m.run.injection_task.as_deref().unwrap_or("");
    match (what, ours) {
        ("utility", false) => format!(
            "definitions differ: stateval's check of the user task failed ({}), AgentDojo's utility function \
             for {task} passed it (it judges its own predicate, often the answer's text; stateval checks the \
             state and calls its ground truth leaves)",
            check.unwrap_or_else(|| "no check named".into())
        ),
        ("utility", true) if only_calls_checked(m) => format!(
            "definitions differ: {task}'s ground truth changes no state, so stateval checks only that its calls \
             were made, and they were; AgentDojo's utility function for {task} failed it (it judges the \
             model's answer, which stateval's checks do not read)"
        ),
        ("utility", true) => format!(
            "definitions differ: every stateval check of the user task held (the state and calls {task}'s \
             ground truth leaves), AgentDojo's utility function for {task} failed it (it also judges the \
             model's answer, or the state more strictly)"
        ),
        (_, true) => format!(
            "definitions differ: stateval saw the injection's effect ({}), AgentDojo's security function for \
             {injection} did not",
            check.unwrap_or_else(|| "no check named".into())
        ),
        _ => format!(
            "definitions differ: AgentDojo's security function for {injection} found the injection {}, \
             stateval's checks (the state changes {injection}'s ground truth leaves) did not",
            if theirs { "carried out" } else { "not carried out" }
        ),
    }
}

/// The user task's checks (a control's `expect`, an attack's `task_expect`) look only at
/// the calls made, not at the state.
fn only_calls_checked(m: &Matched) -> bool {
    let key = if m.run.injection_task.is_some() { "task_expect" } else { "expect" };
    let checks = m.case.get(key).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    !checks.is_empty() && checks.iter().all(|c| c["target"] == "tool_sequence")
}

#[derive(Default)]
struct Totals {
    controls: usize,
    controls_completed: usize,
    attacks: usize,
    attacks_scored: usize,
    attacks_succeeded: usize,
    attack_tasks: usize,
    attack_tasks_completed: usize,
}

impl Totals {
    fn add(&mut self, attack: bool, utility: Option<bool>, hit: Option<bool>) {
        if !attack {
            self.controls += 1;
            self.controls_completed += usize::from(utility == Some(true));
            return;
        }
        self.attacks += 1;
        if let Some(hit) = hit {
            self.attacks_scored += 1;
            self.attacks_succeeded += usize::from(hit);
        }
        if let Some(done) = utility {
            self.attack_tasks += 1;
            self.attack_tasks_completed += usize::from(done);
        }
    }

    fn json(&self) -> Value {
        json!({
            "controls": self.controls,
            "controls_completed": self.controls_completed,
            "attacks": self.attacks,
            "attacks_scored": self.attacks_scored,
            "attacks_succeeded": self.attacks_succeeded,
            "attack_tasks": self.attack_tasks,
            "attack_tasks_completed": self.attack_tasks_completed,
        })
    }
}

fn frac(t: &Value, num: &str, den: &str) -> String {
    format!("{}/{}", t[num], t[den])
}

fn table(comparison: &Value) -> Vec<String> {
    let mut lines = vec![
        "| | benign utility | utility under attack | attack success |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for (key, label) in [
        ("agentdojo", "AgentDojo's verdicts"),
        ("undefended", "stateval, floors off"),
        ("defended", "stateval, floors on"),
    ] {
        let t = &comparison["totals"][key];
        lines.push(format!(
            "| {label} | {} | {} | {} |",
            frac(t, "controls_completed", "controls"),
            frac(t, "attack_tasks_completed", "attack_tasks"),
            frac(t, "attacks_succeeded", "attacks_scored")
        ));
    }
    lines
}

fn markdown(comparison: &Value) -> String {
    let mut s = String::from("# AgentDojo runs, replayed\n\n");
    s.push_str(&table(comparison).join("\n"));
    s.push_str("\n\n## Every run\n\n| case | AgentDojo utility / security | floors off: utility / attack | floors on: utility / attack | agree |\n|---|---|---|---|---|\n");
    let b = |v: &Value| match v {
        Value::Bool(true) => "yes",
        Value::Bool(false) => "no",
        _ => "-",
    };
    for r in comparison["runs"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "| {} | {} / {} | {} / {} | {} / {} | {} |\n",
            r["case"].as_str().unwrap_or(""),
            b(&r["agentdojo"]["utility"]),
            b(&r["agentdojo"]["security"]),
            b(&r["undefended"]["utility"]),
            b(&r["undefended"]["attack_succeeded"]),
            b(&r["defended"]["utility"]),
            b(&r["defended"]["attack_succeeded"]),
            b(&r["agree"])
        ));
    }
    s.push_str("\n## Where AgentDojo and stateval disagree\n\n");
    let list = comparison["disagreements"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        s.push_str("Nowhere.\n");
    }
    for d in &list {
        s.push_str(&format!(
            "- {} ({}), {}: AgentDojo {}, stateval {}: {}\n",
            d["case"].as_str().unwrap_or(""),
            d["file"].as_str().unwrap_or(""),
            d["measure"].as_str().unwrap_or(""),
            d["agentdojo"],
            d["stateval"],
            d["reason"].as_str().unwrap_or("")
        ));
    }
    let skipped = comparison["skipped"].as_array().cloned().unwrap_or_default();
    if !skipped.is_empty() {
        s.push_str("\n## Runs not imported\n\n");
        for k in &skipped {
            s.push_str(&format!("- {}: {}\n", k["file"].as_str().unwrap_or(""), k["why"].as_str().unwrap_or("")));
        }
    }
    s
}

fn summary(comparison: &Value, out: &Path) -> String {
    let runs = comparison["runs"].as_array().map_or(0, Vec::len);
    let skipped = comparison["skipped"].as_array().map_or(0, Vec::len);
    let list = comparison["disagreements"].as_array().cloned().unwrap_or_default();
    let mut lines = vec![format!("imported {runs} AgentDojo runs ({skipped} skipped) → {}", out.display())];
    lines.extend(table(comparison));
    lines.push(format!("{} disagreements with AgentDojo's verdicts (floors off):", list.len()));
    for d in &list {
        lines.push(format!(
            "  {} {}: AgentDojo {}, stateval {}: {}",
            d["case"].as_str().unwrap_or(""),
            d["measure"].as_str().unwrap_or(""),
            d["agentdojo"],
            d["stateval"],
            d["reason"].as_str().unwrap_or("")
        ));
    }
    lines.push(format!(
        "written: {DATASET}, {DEFENDED}, {UNDEFENDED}, agentdojo-runs.json, agentdojo-comparison.{{json,md}}"
    ));
    lines.join("\n")
}
