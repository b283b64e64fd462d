//! Pipeline definitions (TOML) and the agent profiles they declare.
//!
//! A pipeline names its datasets, its agent profiles (system prompt, tool manifest,
//! policy, approvals, budgets), its gates and its reports. Loading validates the TOML
//! against the pipeline JSON Schema and reports errors at their line and column.

pub mod computed;
pub mod fault;
pub mod gates;
pub mod judges;
pub mod manifest;
pub mod outputs;
pub mod profile;
pub mod reach;
pub mod reports;
pub mod sparse;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::diag::{InputError, line_col};
use gates::GatesConfig;
use judges::JudgeProfile;
use manifest::Manifest;
pub use manifest::SafetyClass;
pub use profile::{
    AgentKind, AgentProfile, ApprovalAnswer, DEFAULT_TOOL_TIMEOUT_MS, Enforcement, MAX_TOOL_TIMEOUT_MS, NormalizeRule,
    PolicyRule, RuleWhen, Ungrounded, Verdict,
};
use reports::ReportConfig;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    pub pipeline: PipelineSection,
    #[serde(default)]
    pub replay: ReplayConfig,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentProfile>,
    /// Recorded LLM judges (`judge` matchers name one by `profile`).
    #[serde(default)]
    pub judges: BTreeMap<String, JudgeProfile>,
    #[serde(default)]
    pub gates: GatesConfig,
    #[serde(default)]
    pub report: ReportConfig,
    #[serde(default)]
    pub goldens: GoldensConfig,
    /// How the code under test is isolated (`[isolation]`, see [`crate::isolation`]).
    #[serde(default)]
    pub isolation: crate::isolation::IsolationConfig,
    /// `[scorecard]`: the attack and control cases a benchmark has that this suite does
    /// not run, so the scorecard counts and names them.
    #[serde(default)]
    pub scorecard: ScorecardConfig,
    /// The entries of `[scorecard] not_run`, read by [`Pipeline::load`].
    #[serde(skip)]
    pub not_run: Vec<NotRun>,
    /// Where the file was read from (not part of the TOML).
    #[serde(skip)]
    pub path: PathBuf,
    /// The directory relative paths resolve from.
    #[serde(skip)]
    pub base: PathBuf,
    /// The file's text, hashed into run ids; empty in a [`crate::runner::Plan`]'s
    /// pipeline, which drops it once hashed.
    #[serde(skip)]
    pub text: String,
    /// The tool names of the manifests its profiles name, read by [`Pipeline::load`] so
    /// that what cases name can be checked too (`None`: not read, nothing is checked;
    /// a plan drops them once its cases are loaded).
    #[serde(skip)]
    pub tool_names: Option<reach::ToolNames>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSection {
    pub name: String,
    pub datasets: Vec<String>,
    pub base: Option<String>,
    /// Shorthand for `[goldens] dir`.
    pub goldens: Option<String>,
    #[serde(default = "default_store")]
    pub store: String,
    pub jobs: Option<usize>,
}

fn default_store() -> String {
    ".stateval".into()
}

/// `[goldens]`: where golden traces live and whether every run must have one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldensConfig {
    /// Directory of `<dataset>/<case>.<k>.jsonl` goldens (default `goldens`; the older
    /// `[pipeline] goldens = "…"` says the same, and only one of the two may be given).
    pub dir: Option<String>,
    /// `true`: a run without a golden fails its case. `false`: it passes, reported as
    /// such (a suite that keeps no goldens). Unset: it fails under CI (`CI` set), as a
    /// snapshot test's missing snapshot does, and passes elsewhere, where the summary
    /// names it and `stateval run --bless` writes it.
    pub required: Option<bool>,
}

/// `[scorecard]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScorecardConfig {
    /// A JSONL file, one line per case of the benchmark the suite does not run:
    /// `{"id", "tags", "role", "reason"}`. The scorecard counts them beside the scored
    /// ones and names each, so a denominator never shrinks unseen.
    pub not_run: Option<String>,
}

/// A case of the benchmark the suite does not run (`[scorecard] not_run`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotRun {
    pub id: String,
    pub tags: Vec<String>,
    /// `attack` or `control`.
    pub role: crate::outcome::Role,
    /// Why it is not run.
    pub reason: String,
}

/// The [`crate::outcome::NOT_RUN`] extra of a run: the file, the counts overall and per tag, and every case with
/// why it is not run.
pub fn not_run_extra(file: &str, entries: &[NotRun]) -> serde_json::Value {
    let count = |role: crate::outcome::Role, tag: Option<&str>| {
        entries.iter().filter(|n| n.role == role && tag.is_none_or(|t| n.tags.iter().any(|x| x == t))).count()
    };
    let tags: std::collections::BTreeSet<&str> =
        entries.iter().flat_map(|n| n.tags.iter().map(String::as_str)).collect();
    let by_tag: serde_json::Map<String, Value> = tags
        .into_iter()
        .map(|t| {
            (
                t.to_string(),
                serde_json::json!({"attacks": count(crate::outcome::Role::Attack, Some(t)), "controls": count(crate::outcome::Role::Control, Some(t))}),
            )
        })
        .collect();
    serde_json::json!({
        "file": file,
        "attacks": count(crate::outcome::Role::Attack, None),
        "controls": count(crate::outcome::Role::Control, None),
        "tags": by_tag,
        "cases": entries,
    })
}

/// Where goldens live when the pipeline does not say.
pub const DEFAULT_GOLDENS: &str = "goldens";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDivergence {
    /// A request that differs from the recorded one fails the case.
    #[default]
    Fail,
    /// It is reported, and the run goes on.
    Warn,
}

/// What a run that completed without asking for every recorded response does. A
/// recording longer than the run usually means the agent stopped early (it answered
/// without a tool call the recording expected): worth knowing, and in a suite whose
/// recordings are meant to match exactly, worth failing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnused {
    /// Reported as a warning of the run.
    #[default]
    Warn,
    /// Fails the case.
    Fail,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    #[serde(default)]
    pub on_divergence: OnDivergence,
    /// Recorded responses the run never used: `warn` (the default) or `fail`.
    #[serde(default)]
    pub unused: OnUnused,
}

impl Pipeline {
    /// Read, schema-check and parse a pipeline file, and check the tools its profiles
    /// name (faults, policy rules, approvals, detectors) against the tool manifests they
    /// can reach.
    pub fn load(path: &Path) -> Result<Pipeline, InputError> {
        Self::read(path)?.checked()
    }

    /// The first half of [`Pipeline::load`]: the file read and parsed, and the paths it
    /// writes checked against the files there ([`outputs::leads_outside`]), so that its
    /// report files are known (and safe to remove) before anything else is read.
    pub fn read(path: &Path) -> Result<Pipeline, InputError> {
        if !path.exists() {
            // most often a command run outside any project; only some commands look in
            // the directories above (the CLI's `find_pipeline`), so this says neither
            return Err(InputError::file(
                path,
                "no such pipeline file: run stateval from inside your project, or name the pipeline file \
                 (`stateval COMMAND path/to/pipeline.toml`)",
            ));
        }
        let text = crate::diag::read_text(path, path, "pipeline")?;
        let pipeline = Self::parse(path, &text)?;
        pipeline.check_links()?;
        Ok(pipeline)
    }

    /// A path the pipeline writes that a symbolic link leads out of its base is a load
    /// error at its key, naming the link: nothing outside the project is written or
    /// deleted because a committed link said so.
    fn check_links(&self) -> Result<(), InputError> {
        let mut written = vec![("/pipeline/store".to_string(), self.pipeline.store.as_str())];
        written.extend(self.pipeline.goldens.as_deref().map(|g| ("/pipeline/goldens".to_string(), g)));
        written.extend(self.goldens.dir.as_deref().map(|g| ("/goldens/dir".to_string(), g)));
        if self.pipeline.goldens.is_none() && self.goldens.dir.is_none() {
            written.push(("/pipeline/goldens".to_string(), DEFAULT_GOLDENS));
        }
        let reports = self.report.files().unwrap_or_default();
        written.extend(reports.into_iter().map(|(key, path)| (format!("/report/{key}"), path)));
        for (pointer, written) in written {
            let pointer = pointer.as_str();
            if let Some((link, to)) = outputs::leads_outside(&self.base, written) {
                let to = if to.as_os_str().is_empty() { "nowhere".to_string() } else { to.display().to_string() };
                let message = format!(
                    "{written:?} leads out of the project through the link {} (to {to}): the files a pipeline \
                     writes stay inside its base directory",
                    self.display(&link)
                );
                return Err(self.error_at(pointer, written, message));
            }
        }
        Ok(())
    }

    /// The second half of [`Pipeline::load`]: the tools its profiles name, checked
    /// against the tool manifests they can reach.
    pub fn checked(self) -> Result<Pipeline, InputError> {
        let (pipeline, mut errors) = self.checked_keeping()?;
        if errors.is_empty() { Ok(pipeline) } else { Err(errors.remove(0)) }
    }

    /// [`Pipeline::checked`] that goes on past what leaves a pipeline to plan: every fault
    /// that could never fire and every tool name no manifest of its profile has, beside the
    /// pipeline, so that a plan reports them with everything else it finds (a reader fixing
    /// one error at a time met the next only on the next try).
    pub fn checked_keeping(mut self) -> Result<(Pipeline, Vec<InputError>), InputError> {
        let mut errors = self.fault_target_errors();
        self.not_run = self.read_not_run()?;
        let names = reach::ToolNames::read(self.agents.values(), |rel| self.resolve(rel));
        errors.extend(self.tool_name_errors(&names));
        self.tool_names = Some(names);
        Ok((self, errors))
    }

    /// The lines of `[scorecard] not_run`, each checked: a bad line is an error at its
    /// line and column; an id twice is one at the second.
    fn read_not_run(&self) -> Result<Vec<NotRun>, InputError> {
        let Some(rel) = &self.scorecard.not_run else { return Ok(Vec::new()) };
        let path = self.resolve(rel);
        let shown = self.display(&path);
        let shown = Path::new(&shown);
        let text = crate::diag::read_text(&path, shown, "[scorecard] not_run")?;
        let mut out: Vec<NotRun> = Vec::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let at = |column: usize, message: String| InputError::new(shown, i + 1, column, message);
            let value = crate::diag::parse_json_strict(line).map_err(|(_, column, message)| at(column, message))?;
            let entry: NotRun = serde_json::from_value(value).map_err(|e| {
                at(1, format!("{e}; expected {{\"id\", \"tags\", \"role\" (attack or control), \"reason\"}}"))
            })?;
            if out.iter().any(|n| n.id == entry.id) {
                return Err(at(1, format!("{:?} is listed twice", entry.id)));
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// A profile's fault that names a tool (or server) its manifest does not have could
    /// never fire: a load error in the pipeline, at the name. Manifests are read only for
    /// profiles that declare faults; a manifest that does not load is left for the
    /// runner to report with its own location.
    fn fault_target_errors(&self) -> Vec<InputError> {
        let mut errors = Vec::new();
        for (name, agent) in self.agents.iter().filter(|(_, a)| !a.faults.is_empty()) {
            let manifest = match &agent.tools {
                Some(rel) => {
                    let full = self.resolve(rel);
                    match Manifest::load(&full, &full.to_string_lossy()) {
                        Ok(m) => m,
                        Err(_) => continue,
                    }
                }
                None => Manifest::empty(),
            };
            if let Err(e) = fault::check_targets(&agent.faults, &manifest.tools, manifest.server.as_deref()) {
                let pointer = format!("/agents/{name}/faults/{}/{}", e.index, e.field);
                let (line, col) = locate_toml_value(&self.text, &pointer, &e.name);
                errors.push(InputError::new(&self.path, line, col, format!("{}{}", dotted(&pointer), e.message)));
            }
        }
        errors
    }

    pub fn parse(path: &Path, text: &str) -> Result<Pipeline, InputError> {
        let toml_error = |e: toml::de::Error| {
            let (line, col) = e.span().map_or((1, 1), |s| line_col(text, s.start));
            InputError::new(path, line, col, e.message().to_string())
        };
        let value: Value = toml::from_str(text).map_err(toml_error)?;
        // before the schema, whose "does not match" would hide what is wrong with a fault
        for (name, agent) in value.get("agents").and_then(Value::as_object).into_iter().flatten() {
            if let Some((pointer, message)) = agent.get("faults").and_then(fault::check_spellings) {
                let pointer = format!("/agents/{name}/faults{pointer}");
                let spelling = value.pointer(&pointer).and_then(Value::as_str).unwrap_or_default();
                let (line, col) = locate_toml_value(text, &pointer, spelling);
                return Err(InputError::new(path, line, col, format!("{}{message}", dotted(&pointer))));
            }
        }
        if let Some(v) = crate::schemas::PIPELINE_SCHEMA.check(&value) {
            let (line, col) = locate_toml(text, &v.pointer);
            return Err(InputError::new(path, line, col, format!("{}{}", dotted(&v.pointer), v.message)));
        }
        // before anything is written or deleted: see `outputs`
        for pointer in outputs::OUTPUT_KEYS {
            let Some(Value::String(written)) = value.pointer(pointer) else { continue };
            if !outputs::stays_inside(written) {
                let (line, col) = locate_toml_value(text, pointer, written);
                let message = outputs::outside_message(dotted(pointer).trim_end_matches(": "), written);
                return Err(InputError::new(path, line, col, message));
            }
        }
        // typed from the value already parsed: parsing the text a second time held a
        // second TOML document beside the value (tens of MB for 10,000 profiles); the
        // text is parsed again only to place an error the value cannot locate
        let mut pipeline: Pipeline = match serde_json::from_value(value) {
            Ok(pipeline) => pipeline,
            Err(_) => toml::from_str(text).map_err(toml_error)?,
        };
        // serde inserts the profiles one at a time, in key order, and a B-tree filled
        // that way splits each node in half and leaves it there: about half of every
        // node (11 slots of a whole profile each) stays empty. Collected from the sorted
        // entries, the map is built in bulk with full nodes: for 10,000 profiles about
        // 5 MB less, held for the whole run.
        pipeline.agents = std::mem::take(&mut pipeline.agents).into_iter().collect();
        pipeline.path = path.to_path_buf();
        pipeline.text = text.to_string();
        pipeline.base = match &pipeline.pipeline.base {
            Some(b) => path.parent().unwrap_or(Path::new(".")).join(b),
            None => default_base(path),
        };
        pipeline.gates.validate().map_err(|e| {
            let (line, col) = locate_toml(text, "/gates");
            InputError::new(path, line, col, e.to_string())
        })?;
        if pipeline.pipeline.goldens.is_some() && pipeline.goldens.dir.is_some() {
            let (line, col) = locate_toml(text, "/pipeline/goldens");
            let message =
                "pipeline.goldens: the goldens directory is given twice; keep [goldens] dir and drop this line";
            return Err(InputError::new(path, line, col, message.to_string()));
        }
        pipeline.report.validate().map_err(|e| {
            let (line, col) = locate_toml(text, "/report");
            InputError::new(path, line, col, e.to_string())
        })?;
        for (name, agent) in &pipeline.agents {
            agent.validate().map_err(|m| {
                let (line, col) = locate_toml(text, &format!("/agents/{name}"));
                InputError::new(path, line, col, format!("agents.{name}: {m}"))
            })?;
        }
        Ok(pipeline)
    }

    pub fn store_dir(&self) -> PathBuf {
        self.base.join(&self.pipeline.store)
    }

    pub fn goldens_dir(&self) -> PathBuf {
        let dir = self.goldens.dir.as_deref().or(self.pipeline.goldens.as_deref()).unwrap_or(DEFAULT_GOLDENS);
        self.base.join(dir)
    }

    /// Resolve a path written in the pipeline or a dataset.
    pub fn resolve(&self, relative: &str) -> PathBuf {
        self.base.join(relative)
    }

    /// A load error about the value at `pointer` (or its key, when `value` is empty),
    /// placed at its line and column in the pipeline's text and prefixed with its
    /// dotted key.
    pub fn error_at(&self, pointer: &str, value: &str, message: impl std::fmt::Display) -> InputError {
        let (line, column) = locate_toml_value(&self.text, pointer, value);
        InputError::new(&self.path, line, column, format!("{}{message}", dotted(pointer)))
    }

    /// A path as reports show it: relative to the base, with `/` separators, so the
    /// same project gives the same reports wherever it is checked out.
    pub fn display(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.base).unwrap_or(path);
        let text = rel.to_string_lossy().replace('\\', "/");
        text.strip_prefix("./").map(str::to_string).unwrap_or(text)
    }
}

/// Pipelines conventionally live in `<project>/pipeline/*.toml` and name paths relative
/// to the project; anywhere else, paths are relative to the file's own directory.
/// The directory's own name is read from the file system when the path does not
/// spell it (`ci.toml` run from inside `pipeline/`, `./ci.toml`), so a pipeline means
/// the same files from any working directory.
pub fn default_base(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = match dir.file_name() {
        Some(name) => Some(name.to_os_string()),
        None => dir.canonicalize().ok().and_then(|d| d.file_name().map(ToOwned::to_owned)),
    };
    if name.is_none_or(|n| n != "pipeline") {
        return dir.to_path_buf();
    }
    match dir.file_name() {
        Some(_) => match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => parent.to_path_buf(),
            None => PathBuf::from("."),
        },
        None if dir == Path::new(".") => PathBuf::from(".."),
        None => dir.join(".."),
    }
}

/// `/agents/treasury/policy/0` → `agents.treasury.policy[0]: `.
fn dotted(pointer: &str) -> String {
    if pointer.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    out + ": "
}

impl Pipeline {
    /// Line and column of the quoted `value` under `pointer` in the pipeline's text (best
    /// effort, as for its own load errors), for a later check that names a place in it.
    pub fn locate_value(&self, pointer: &str, value: &str) -> (usize, usize) {
        locate_toml_value(&self.text, pointer, value)
    }
}

/// Best-effort line and column of a JSON Pointer in TOML text: the line of the deepest
/// key of the pointer found after the lines of the keys before it.
fn locate_toml(text: &str, pointer: &str) -> (usize, usize) {
    let mut line_idx = 0usize;
    let mut col = 1usize;
    let lines: Vec<&str> = text.lines().collect();
    for seg in pointer.split('/').skip(1).filter(|s| s.parse::<usize>().is_err()) {
        if let Some((i, c)) =
            lines.iter().enumerate().skip(line_idx).find_map(|(i, l)| find_key(l, seg).map(|c| (i, c)))
        {
            line_idx = i;
            col = c;
        }
    }
    (line_idx + 1, col)
}

/// Like [`locate_toml`], then on to the quoted `value` at or after that line when it is
/// there: the column of the very name or spelling an error is about.
fn locate_toml_value(text: &str, pointer: &str, value: &str) -> (usize, usize) {
    let (line, col) = locate_toml(text, pointer);
    if value.is_empty() {
        return (line, col);
    }
    let quoted = [format!("\"{value}\""), format!("'{value}'")];
    text.lines()
        .enumerate()
        .skip(line - 1)
        .find_map(|(i, l)| {
            quoted.iter().filter_map(|q| l.find(q.as_str())).min().map(|at| (i + 1, l[..at].chars().count() + 1))
        })
        .unwrap_or((line, col))
}

fn find_key(line: &str, key: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    if trimmed.starts_with('#') {
        return None;
    }
    let at = line.find(key)?;
    let before = line[..at].chars().last();
    let after = line[at + key.len()..].chars().next();
    let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
    (boundary(before) && boundary(after)).then(|| line[..at].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "[pipeline]\nname = \"ci\"\ndatasets = [\"datasets/*.jsonl\"]\n";

    #[test]
    fn a_minimal_pipeline_gets_defaults() {
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), MINIMAL).unwrap();
        assert_eq!(p.pipeline.store, ".stateval");
        assert_eq!(p.replay.on_divergence, OnDivergence::Fail);
        assert_eq!(p.base, PathBuf::from("."));
    }

    #[test]
    fn an_unknown_key_names_its_line_and_column() {
        let text = format!("{MINIMAL}\n[agents.bank]\nsystem = \"s\"\npolcy = []\n");
        let err = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
        assert_eq!((err.line, err.column), (7, 1), "{err}");
        assert!(err.message.contains("unknown field \"polcy\" (did you mean \"policy\"?)"), "{err}");
    }

    #[test]
    fn a_bad_enum_value_names_its_place() {
        let text = format!("{MINIMAL}[replay]\non_divergence = \"ignore\"\n");
        let err = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
        assert_eq!(err.line, 5, "{err}");
        assert!(err.message.starts_with("replay.on_divergence: "), "{err}");
    }

    #[test]
    fn a_misspelt_fault_names_its_line_and_the_column_of_the_spelling() {
        let text = format!(
            "{MINIMAL}\n[agents.ops]\nfaults = [\n  {{ tool = \"a\", fault = \"hang\" }},\n  {{ tool = \"b\", fault = \"slow\" }},\n]\n"
        );
        let err = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
        // line 8 is the second declaration; column 25 is its "slow"
        assert_eq!((err.line, err.column), (8, 25), "{err}");
        assert_eq!(
            err.message,
            "agents.ops.faults[1].fault: fault \"slow\" needs a number: \"slow:<n>\" (expected hang, wedged, slow:<ms>, recover-after:<n> or error)"
        );
        let text = format!("{MINIMAL}[agents.ops]\nfaults = [{{ fault = \"hang\" }}]\n");
        let err = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
        assert!(err.message.starts_with("agents.ops.faults[0]: a fault targets a tool, a server, or both"), "{err}");
    }

    #[test]
    fn a_profile_fault_naming_a_tool_its_manifest_lacks_is_a_load_error_in_the_pipeline() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ops.json"),
            r#"{"server": "api", "tools": [{"name": "get_status", "description": "d"}]}"#,
        )
        .unwrap();
        let pipeline = |faults: &str| {
            let path = dir.path().join("p.toml");
            let text = format!("{MINIMAL}[agents.ops]\ntools = \"ops.json\"\nfaults = [{faults}]\n");
            std::fs::write(&path, text).unwrap();
            Pipeline::load(&path)
        };
        assert!(pipeline(r#"{ tool = "get_status", server = "api", fault = "wedged" }"#).is_ok());
        let err = pipeline(r#"{ tool = "get_statuss", fault = "hang" }"#).unwrap_err();
        assert_eq!((err.line, err.column), (6, 20), "{err}");
        assert_eq!(
            err.message,
            "agents.ops.faults[0].tool: fault names tool \"get_statuss\", which the manifest does not have (did you mean \"get_status\"?)"
        );
        let err = pipeline(r#"{ server = "mail", fault = "error" }"#).unwrap_err();
        assert_eq!(
            err.message,
            "agents.ops.faults[0].server: fault names server \"mail\", but its tools are served by \"api\""
        );
    }

    #[test]
    fn the_tool_timeout_must_be_positive_and_at_most_a_day() {
        for bad in ["0", "86400001"] {
            let text = format!("{MINIMAL}[agents.ops]\ntool_timeout_ms = {bad}\n");
            let err = Pipeline::parse(Path::new("p.toml"), &text).unwrap_err();
            assert!(err.message.starts_with("agents.ops.tool_timeout_ms: "), "{err}");
        }
    }

    #[test]
    fn the_fault_grammar_is_the_same_in_the_pipeline_and_manifest_schemas() {
        let defs = |text: &str| serde_json::from_str::<Value>(text).unwrap()["$defs"]["fault"].clone();
        let tools = defs(include_str!("../../schemas/tools.json"));
        assert_eq!(defs(include_str!("../../schemas/pipeline.json")), tools);
        let max = &serde_json::from_str::<Value>(include_str!("../../schemas/pipeline.json")).unwrap()["$defs"]["agent"]
            ["properties"]["tool_timeout_ms"]["maximum"];
        assert_eq!(max, &serde_json::json!(MAX_TOOL_TIMEOUT_MS));
        // the schema's pattern accepts exactly what the parser accepts
        let pattern = regex::Regex::new(tools["properties"]["fault"]["pattern"].as_str().unwrap()).unwrap();
        for spelling in
            ["hang", "wedged", "error", "slow:0", "slow:250", "recover-after:2", "slow", "slow:+1", "Hang", "hang "]
        {
            assert_eq!(pattern.is_match(spelling), spelling.parse::<fault::Fault>().is_ok(), "{spelling:?}");
        }
    }

    #[test]
    fn goldens_default_to_the_goldens_directory_and_leave_required_to_the_environment() {
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), MINIMAL).unwrap();
        assert_eq!(p.goldens_dir(), PathBuf::from("./goldens"));
        assert_eq!(p.goldens.required, None);
    }

    #[test]
    fn the_goldens_table_and_the_older_pipeline_key_both_name_the_directory() {
        let table = format!("{MINIMAL}[goldens]\ndir = \"traces\"\nrequired = true\n");
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), &table).unwrap();
        assert_eq!((p.goldens_dir(), p.goldens.required), (PathBuf::from("./traces"), Some(true)));
        let shorthand = MINIMAL.replace("[pipeline]\n", "[pipeline]\ngoldens = \"old\"\n");
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), &shorthand).unwrap();
        assert_eq!(p.goldens_dir(), PathBuf::from("./old"));
    }

    #[test]
    fn a_goldens_directory_given_twice_is_refused_at_the_older_key() {
        let both = "[pipeline]\nname = \"ci\"\ngoldens = \"a\"\ndatasets = [\"d\"]\n[goldens]\ndir = \"b\"\n";
        let err = Pipeline::parse(Path::new("p.toml"), both).unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("given twice"), "{err}");
    }

    #[test]
    fn toml_syntax_errors_carry_their_position() {
        let err = Pipeline::parse(Path::new("p.toml"), "[pipeline\nname=1").unwrap_err();
        assert_eq!(err.line, 1, "{err}");
    }
}
