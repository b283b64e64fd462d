//! Datasets: JSONL files of cases, loaded whole and validated before anything runs.
//!
//! Each line is parsed strictly (duplicate keys refused), checked against the case
//! schema, typed, and cross-checked against the pipeline: the agent profile exists,
//! recordings exist and are valid, matchers compile, targets are known, ids are unique
//! across every dataset of the pipeline. Every error names file, line and column.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::canon::{self, Context, Digest};
use crate::diag::{InputError, line_col, locate, parse_json_strict};
use crate::grade::{Assertion, Matcher};
use crate::metrics::block::{BLOCK_KEYS, MetricBlock};
use crate::pipeline::Pipeline;
use crate::replay::Recording;
use crate::schemas::CASE_SCHEMA;

/// A validated case, ready to run.
#[derive(Debug)]
pub struct Case {
    pub id: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub agent: String,
    pub turns: Vec<String>,
    /// One per recorded run.
    pub recordings: Vec<RecordingRef>,
    pub expect: Vec<Assertion>,
    /// Metric blocks, graded over every run of the case.
    pub blocks: Vec<MetricBlock>,
    /// Assertions inside the blocks (`stability.expect`), compiled.
    pub block_expect: Vec<Assertion>,
    pub perturbation: Option<Perturbation>,
    /// Column of `perturbation.of` in the case line, for errors found across cases.
    pub perturbation_column: usize,
    /// Tools the case needs; others are flagged by the data-minimisation detector.
    pub allowed_tools: Option<Vec<String>>,
    /// Recorded human approval decisions (`true` = approved), by tool or safety class.
    pub human_approvals: BTreeMap<String, bool>,
    /// Dataset name (`examples/treasury`).
    pub dataset: String,
    pub path: PathBuf,
    /// `path` relative to the pipeline's base, for reports.
    pub display_path: String,
    pub line: usize,
    /// Digest of the canonical case line.
    pub digest: Digest,
}

/// A validated recording: inline ones are kept (they are part of the dataset line);
/// files are re-read when their case runs, so memory does not grow with the suite.
#[derive(Debug, Clone)]
pub enum RecordingRef {
    Inline(Arc<Recording>),
    File { path: PathBuf, display: String, digest: Digest, responses: usize },
}

impl RecordingRef {
    pub fn digest(&self) -> Digest {
        match self {
            RecordingRef::Inline(r) => r.digest,
            RecordingRef::File { digest, .. } => *digest,
        }
    }

    /// The recording itself (re-read from disk for files).
    pub fn load(&self) -> Result<Arc<Recording>, String> {
        match self {
            RecordingRef::Inline(r) => Ok(r.clone()),
            RecordingRef::File { path, display, digest, .. } => Recording::reload(path, display, *digest).map(Arc::new),
        }
    }
}

impl Case {
    pub fn source(&self) -> String {
        format!("{}:{}", self.display_path, self.line)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: String,
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    agent: String,
    turns: Vec<String>,
    recordings: Vec<Value>,
    #[serde(default)]
    expect: Vec<RawAssertion>,
    trajectory: Option<Value>,
    trajectory_axes: Option<Value>,
    golden_path: Option<Value>,
    stability: Option<Value>,
    reliability: Option<Value>,
    recovery: Option<Value>,
    narrative: Option<Value>,
    perturbation: Option<Perturbation>,
    allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    approvals: BTreeMap<String, String>,
}

/// A perturbed variant of another case (METRICS.md §6 robustness).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Perturbation {
    pub kind: String,
    pub of: String,
}

impl RawCase {
    /// The metric blocks present, in [`BLOCK_KEYS`] order.
    fn blocks(&self) -> Vec<(&'static str, &Value)> {
        let all = [
            &self.trajectory,
            &self.trajectory_axes,
            &self.golden_path,
            &self.stability,
            &self.reliability,
            &self.recovery,
            &self.narrative,
        ];
        BLOCK_KEYS.iter().zip(all).filter_map(|(k, v)| v.as_ref().map(|v| (*k, v))).collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssertion {
    target: String,
    matcher: Value,
    description: Option<String>,
}

/// Loads datasets for one pipeline, sharing recordings between cases.
pub struct Loader<'p> {
    pipeline: &'p Pipeline,
    recordings: BTreeMap<PathBuf, RecordingRef>,
    ids: BTreeMap<String, String>,
    /// Compiled matchers by canonical spec: suites repeat the same regexes and schemas
    /// across thousands of cases, and a compiled one costs kilobytes.
    matchers: BTreeMap<Vec<u8>, Arc<Matcher>>,
    pub cases: Vec<Case>,
    pub errors: Vec<InputError>,
}

/// Stop collecting after this many errors: past it, more lines add noise, not help.
const MAX_ERRORS: usize = 20;

impl<'p> Loader<'p> {
    pub fn new(pipeline: &'p Pipeline) -> Self {
        Loader {
            pipeline,
            recordings: BTreeMap::new(),
            ids: BTreeMap::new(),
            matchers: BTreeMap::new(),
            cases: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// The dataset files of the pipeline, sorted, deduplicated. A pattern that matches
    /// nothing is an error: a typo must not silently shrink the suite.
    pub fn dataset_files(&mut self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for pattern in &self.pipeline.pipeline.datasets {
            let full = self.pipeline.resolve(pattern);
            let matched: Vec<PathBuf> = match glob::glob(&full.to_string_lossy()) {
                Ok(paths) => paths.filter_map(Result::ok).filter(|p| p.is_file()).collect(),
                Err(e) => {
                    self.errors
                        .push(InputError::file(&self.pipeline.path, format!("bad dataset pattern \"{pattern}\": {e}")));
                    continue;
                }
            };
            if matched.is_empty() {
                self.errors.push(InputError::file(
                    &self.pipeline.path,
                    format!("dataset pattern \"{pattern}\" matches no file"),
                ));
            }
            files.extend(matched);
        }
        files.sort();
        files.dedup();
        files
    }

    /// Load every dataset of the pipeline.
    pub fn load_all(mut self) -> Result<Vec<Case>, Vec<InputError>> {
        for file in self.dataset_files() {
            self.load_file(&file);
            if self.errors.len() >= MAX_ERRORS {
                break;
            }
        }
        self.check_perturbations();
        if self.errors.is_empty() { Ok(self.cases) } else { Err(self.errors) }
    }

    /// A perturbed case names a baseline case of the same agent (METRICS.md §6).
    fn check_perturbations(&mut self) {
        let agents: BTreeMap<&str, &str> = self.cases.iter().map(|c| (c.id.as_str(), c.agent.as_str())).collect();
        for case in &self.cases {
            let Some(p) = &case.perturbation else { continue };
            let problem = match agents.get(p.of.as_str()) {
                None => format!("perturbation.of names no case: \"{}\"", p.of),
                Some(agent) if *agent != case.agent => {
                    format!("perturbation.of names \"{}\", a case of agent {agent}, not {}", p.of, case.agent)
                }
                Some(_) if p.of == case.id => "a case cannot be a perturbation of itself".to_string(),
                Some(_) => continue,
            };
            self.errors.push(InputError::new(&case.path, case.line, case.perturbation_column, problem));
        }
    }

    pub fn load_file(&mut self, path: &Path) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(InputError::file(path, format!("cannot read dataset: {e}")));
                return;
            }
        };
        let dataset = dataset_name(&self.pipeline.base, path);
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match self.load_line(path, &dataset, i + 1, line) {
                Ok(case) => self.cases.push(case),
                Err(e) => self.errors.push(e),
            }
            if self.errors.len() >= MAX_ERRORS {
                return;
            }
        }
    }

    fn load_line(&mut self, path: &Path, dataset: &str, line_no: usize, line: &str) -> Result<Case, InputError> {
        let at = |pointer: &str, message: String| {
            InputError::new(path, line_no, line_col(line, locate(line, pointer)).1, message)
        };
        let value = parse_json_strict(line).map_err(|(_, col, msg)| InputError::new(path, line_no, col, msg))?;
        if let Some(v) = CASE_SCHEMA.check(&value) {
            return Err(at(&v.pointer, v.message));
        }
        let digest = canon::canonical_digest(Context::Content, &value).map_err(|e| at("", e.to_string()))?;
        let raw: RawCase = serde_json::from_value(value).map_err(|e| at("", e.to_string()))?;

        let here = format!("{}:{line_no}", path.display());
        if let Some(first) = self.ids.get(&raw.id) {
            return Err(at("/id", format!("duplicate case id \"{}\" (first defined at {first})", raw.id)));
        }
        if !self.pipeline.agents.contains_key(&raw.agent) {
            let known: Vec<&str> = self.pipeline.agents.keys().map(String::as_str).collect();
            return Err(at(
                "/agent",
                format!("unknown agent profile \"{}\" (the pipeline defines: {})", raw.agent, known.join(", ")),
            ));
        }

        let mut recordings = Vec::new();
        for (i, r) in raw.recordings.iter().enumerate() {
            let pointer = format!("/recordings/{i}");
            let recording = match r {
                Value::String(rel) => self.recording(rel).map_err(|e| match e {
                    RecordingError::Missing(m) => at(&pointer, m),
                    RecordingError::Invalid(e) => e,
                })?,
                Value::Object(obj) => {
                    let responses = obj.get("responses").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                    let rec = Recording::inline(responses, line, &pointer)
                        .map_err(|(col, m)| InputError::new(path, line_no, line_col(line, col).1, m))?;
                    RecordingRef::Inline(Arc::new(rec))
                }
                _ => return Err(at(&pointer, "a recording is a path or {\"responses\": [...]}".into())),
            };
            recordings.push(recording);
        }

        let mut blocks = Vec::new();
        let mut block_expect = Vec::new();
        for (key, spec) in raw.blocks() {
            let block = match MetricBlock::from_key(key, spec) {
                Some(Ok(block)) => block,
                Some(Err(e)) => return Err(at(e.pointer().unwrap_or(&format!("/{key}")), e.to_string())),
                None => continue,
            };
            if block.min_runs() > recordings.len() {
                return Err(at(
                    &format!("/{key}"),
                    format!(
                        "the {key} block needs at least {} recorded runs; this case has {}",
                        block.min_runs(),
                        recordings.len()
                    ),
                ));
            }
            // block-level assertions (shape-checked by the block) use the one grammar
            for (i, a) in spec.get("expect").and_then(Value::as_array).into_iter().flatten().enumerate() {
                let place = format!("/{key}/expect/{i}");
                let (Some(target), Some(matcher)) = (a.get("target").and_then(Value::as_str), a.get("matcher")) else {
                    continue;
                };
                let compiled = self.matcher(matcher).map_err(|(ptr, m)| at(&format!("{place}/matcher{ptr}"), m))?;
                block_expect.push(Assertion {
                    target: target.to_string(),
                    matcher: compiled,
                    spec: matcher.clone(),
                    description: None,
                });
            }
            blocks.push(block);
        }

        let mut expect = Vec::new();
        for (i, a) in raw.expect.into_iter().enumerate() {
            check_case_target(&a.target, &blocks).map_err(|m| at(&format!("/expect/{i}/target"), m))?;
            let matcher = self.matcher(&a.matcher).map_err(|(ptr, m)| at(&format!("/expect/{i}/matcher{ptr}"), m))?;
            expect.push(Assertion { target: a.target, matcher, spec: a.matcher, description: a.description });
        }

        self.ids.insert(raw.id.clone(), here);
        Ok(Case {
            id: raw.id,
            description: raw.description,
            tags: raw.tags,
            agent: raw.agent,
            turns: raw.turns,
            recordings,
            expect,
            blocks,
            block_expect,
            perturbation_column: line_col(line, locate(line, "/perturbation/of")).1,
            perturbation: raw.perturbation,
            allowed_tools: raw.allowed_tools,
            human_approvals: raw.approvals.iter().map(|(k, v)| (k.clone(), v == "approve")).collect(),
            dataset: dataset.to_string(),
            path: path.to_path_buf(),
            display_path: self.pipeline.display(path),
            line: line_no,
            digest,
        })
    }

    /// Compile a matcher once per distinct spec; errors are (pointer within it, message).
    fn matcher(&mut self, spec: &Value) -> Result<Arc<Matcher>, (String, String)> {
        let key = canon::to_canonical(spec).map_err(|e| (String::new(), e.to_string()))?;
        if let Some(m) = self.matchers.get(&key) {
            return Ok(m.clone());
        }
        let m = Arc::new(Matcher::compile(spec).map_err(|e| (e.pointer, e.message))?);
        self.matchers.insert(key, m.clone());
        Ok(m)
    }

    fn recording(&mut self, rel: &str) -> Result<RecordingRef, RecordingError> {
        let full = self.pipeline.resolve(rel);
        if let Some(r) = self.recordings.get(&full) {
            return Ok(r.clone());
        }
        if !full.is_file() {
            return Err(RecordingError::Missing(format!(
                "recording \"{rel}\" not found (looked in {})",
                full.display()
            )));
        }
        let display = full.to_string_lossy().trim_start_matches("./").to_string();
        let rec = Recording::load(&full, &display).map_err(RecordingError::Invalid)?;
        let reference =
            RecordingRef::File { path: full.clone(), display, digest: rec.digest, responses: rec.responses.len() };
        self.recordings.insert(full, reference.clone());
        Ok(reference)
    }
}

/// Target roots the metric blocks expose, by block key.
pub fn block_root(key: &str) -> &'static str {
    match key {
        "trajectory" | "trajectory_axes" => "trajectory",
        "golden_path" => "golden_path",
        "stability" => "stability",
        "reliability" => "reliability",
        "recovery" => "recovery",
        _ => "narrative",
    }
}

/// A case's `expect` may target extracted values and the targets of its own blocks.
fn check_case_target(target: &str, blocks: &[MetricBlock]) -> Result<(), String> {
    let root = target.split(['.', '[']).next().unwrap_or_default();
    if blocks.iter().any(|b| block_root(b.key()) == root) {
        return Ok(());
    }
    if BLOCK_KEYS.iter().any(|k| block_root(k) == root) && !crate::extract::ROOTS.contains(&root) {
        return Err(format!("target \"{target}\" needs a {root} block in this case"));
    }
    crate::extract::check_target(target)
}

enum RecordingError {
    Missing(String),
    Invalid(InputError),
}

/// `datasets/examples/treasury.jsonl` → `examples/treasury`.
pub fn dataset_name(base: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    let rel = rel.strip_prefix("datasets").unwrap_or(rel);
    let name = rel.with_extension("");
    name.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|s| s != "." && !s.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}
