//! Pipeline definitions (TOML) and the agent profiles they declare.
//!
//! A pipeline names its datasets, its agent profiles (system prompt, tool manifest,
//! policy, approvals, budgets), its gates and its reports. Loading validates the TOML
//! against the pipeline JSON Schema and reports errors at their line and column.

pub mod profile;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::diag::{InputError, line_col};
use crate::gate::GatesConfig;
use crate::report::ReportConfig;
pub use profile::{AgentProfile, ApprovalAnswer, PolicyRule, RuleWhen, SafetyClass, Verdict};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    pub pipeline: PipelineSection,
    #[serde(default)]
    pub replay: ReplayConfig,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentProfile>,
    #[serde(default)]
    pub gates: GatesConfig,
    #[serde(default)]
    pub report: ReportConfig,
    #[serde(default)]
    pub goldens: GoldensConfig,
    /// Where the file was read from (not part of the TOML).
    #[serde(skip)]
    pub path: PathBuf,
    /// The directory relative paths resolve from.
    #[serde(skip)]
    pub base: PathBuf,
    /// Content digest of the file, for run ids.
    #[serde(skip)]
    pub text: String,
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
    /// A run without a golden fails its case (default: it passes, reported as such).
    #[serde(default)]
    pub required: bool,
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    #[serde(default)]
    pub on_divergence: OnDivergence,
}

impl Pipeline {
    /// Read, schema-check and parse a pipeline file.
    pub fn load(path: &Path) -> Result<Pipeline, InputError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| InputError::file(path, format!("cannot read pipeline: {e}")))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Pipeline, InputError> {
        let toml_error = |e: toml::de::Error| {
            let (line, col) = e.span().map_or((1, 1), |s| line_col(text, s.start));
            InputError::new(path, line, col, e.message().to_string())
        };
        let value: Value = toml::from_str(text).map_err(toml_error)?;
        if let Some(v) = crate::schemas::PIPELINE_SCHEMA.check(&value) {
            let (line, col) = locate_toml(text, &v.pointer);
            return Err(InputError::new(path, line, col, format!("{}{}", dotted(&v.pointer), v.message)));
        }
        let mut pipeline: Pipeline = toml::from_str(text).map_err(toml_error)?;
        pipeline.path = path.to_path_buf();
        pipeline.text = text.to_string();
        pipeline.base = match &pipeline.pipeline.base {
            Some(b) => path.parent().unwrap_or(Path::new(".")).join(b),
            None => default_base(path),
        };
        pipeline.gates.validate().map_err(|e| {
            let (line, col) = locate_toml(text, "/gates");
            InputError::new(path, line, col, format!("gates.{e}"))
        })?;
        if pipeline.pipeline.goldens.is_some() && pipeline.goldens.dir.is_some() {
            let (line, col) = locate_toml(text, "/pipeline/goldens");
            let message =
                "pipeline.goldens: the goldens directory is given twice; keep [goldens] dir and drop this line";
            return Err(InputError::new(path, line, col, message.to_string()));
        }
        pipeline.report.validate().map_err(|e| {
            let (line, col) = locate_toml(text, "/report");
            InputError::new(path, line, col, format!("report.{e}"))
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
pub fn default_base(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new(""));
    let base = if dir.file_name().is_some_and(|n| n == "pipeline") {
        dir.parent().unwrap_or(Path::new("")).to_path_buf()
    } else {
        dir.to_path_buf()
    };
    if base.as_os_str().is_empty() { PathBuf::from(".") } else { base }
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
    fn goldens_default_to_the_goldens_directory_and_are_optional() {
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), MINIMAL).unwrap();
        assert_eq!(p.goldens_dir(), PathBuf::from("./goldens"));
        assert!(!p.goldens.required);
    }

    #[test]
    fn the_goldens_table_and_the_older_pipeline_key_both_name_the_directory() {
        let table = format!("{MINIMAL}[goldens]\ndir = \"traces\"\nrequired = true\n");
        let p = Pipeline::parse(Path::new("pipeline/ci.toml"), &table).unwrap();
        assert_eq!((p.goldens_dir(), p.goldens.required), (PathBuf::from("./traces"), true));
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
