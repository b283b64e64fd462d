//! Datasets: JSONL files of cases, validated whole before anything runs, then read again
//! case by case as each runs.
//!
//! Each line is parsed strictly (duplicate keys refused), checked against the case
//! schema, typed, and cross-checked against the pipeline: the agent profile exists,
//! recordings exist and are valid, matchers compile, targets are known, ids are unique
//! across every dataset of the pipeline. Every error names file, line and column.
//!
//! Validation keeps a [`CaseRef`] per case (id, agent, tags, digests, and where the
//! line is), not the case: [`CaseRef::load`] reads the line again when the case runs,
//! checks it is byte for byte the line that was validated, and parses it with the same
//! code. So memory does not grow with the size of a suite.

pub mod blocks;
pub mod expect;
pub mod paths;
pub mod recording;
pub mod target;

pub use blocks::{BLOCK_KEYS, Block, CheckBlock, block_root};
pub use paths::dataset_name;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;

use crate::canon::{self, Context, Digest, Digester};
use crate::diag::{InputError, line_col, locate, parse_json_strict};
use crate::pipeline::Pipeline;
use crate::schemas::CASE_SCHEMA;
use blocks::BlockFacts;
use expect::{Assertion, Matcher};
use recording::Recording;

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
    /// Metric blocks, graded over every run of the case (by `metrics::block`).
    pub blocks: Vec<Block>,
    /// Assertions inside the blocks (`stability.expect`), compiled.
    pub block_expect: Vec<Assertion>,
    pub perturbation: Option<Perturbation>,
    /// Tools the case needs; others are flagged by the data-minimisation detector.
    pub allowed_tools: Option<Vec<String>>,
    /// Recorded human approval decisions (`true` = approved), by tool or safety class.
    pub human_approvals: BTreeMap<String, bool>,
    /// Values the case trusts as the user's own (a payee from an address book the user
    /// keeps): they ground consequential arguments (`agent::grounding`).
    pub trusted_values: Vec<String>,
    /// Attack or negative control, for the security scorecard (`role`, else the tags).
    pub role: Option<Role>,
    /// An attack case's user task: graded on every run, reported as utility under
    /// attack, never part of the case's verdict.
    pub task_expect: Vec<Assertion>,
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
    /// `bytes` is the digest of the file's bytes as validated.
    File {
        path: PathBuf,
        display: String,
        digest: Digest,
        bytes: Digest,
    },
}

/// What identifies a validated recording: its content digest and, for a file, the
/// digest of the bytes that were validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordingKey {
    pub digest: Digest,
    pub file: Option<Digest>,
}

impl RecordingRef {
    pub fn digest(&self) -> Digest {
        match self {
            RecordingRef::Inline(r) => r.digest,
            RecordingRef::File { digest, .. } => *digest,
        }
    }

    pub fn key(&self) -> RecordingKey {
        match self {
            RecordingRef::Inline(r) => RecordingKey { digest: r.digest, file: None },
            RecordingRef::File { digest, bytes, .. } => RecordingKey { digest: *digest, file: Some(*bytes) },
        }
    }

    /// The recording itself (re-read from disk for files).
    pub fn load(&self) -> Result<Arc<Recording>, String> {
        match self {
            RecordingRef::Inline(r) => Ok(r.clone()),
            RecordingRef::File { path, display, digest, bytes } => {
                Recording::reload(path, display, *digest, *bytes).map(Arc::new)
            }
        }
    }
}

impl Case {
    pub fn source(&self) -> String {
        format!("{}:{}", self.display_path, self.line)
    }
}

/// A dataset file of the pipeline.
#[derive(Debug)]
pub struct DatasetFile {
    pub path: PathBuf,
    /// Dataset name (`examples/treasury`).
    pub dataset: String,
}

/// A validated case as a plan keeps it: where its line is, and the hashes that prove
/// the line and its recordings unchanged when it runs. About a hundred bytes a case;
/// everything else is read again by [`CaseRef::load`].
#[derive(Debug, Clone)]
pub struct CaseRef {
    pub file: Arc<DatasetFile>,
    pub line: usize,
    /// Byte offset and length of the line in the file.
    offset: u64,
    len: usize,
    /// Digest of the line's bytes, to notice a file edited after validation.
    bytes: Digest,
    /// Each recorded run, in order.
    pub recordings: Box<[RecordingKey]>,
    pub id: String,
    pub agent: String,
    /// Over the case's line and the files its graders read: with a recording, the
    /// agent's profile and manifest, what decides one unit of work (`stateval plan`).
    pub inputs: Digest,
    /// The case is a perturbation of another (it feeds a reliability card).
    pub perturbed: bool,
}

impl CaseRef {
    /// Reads the case's line again and parses it into the case that was validated. A
    /// line that changed since is an error naming it, never a different case run.
    pub fn load(&self, pipeline: &Pipeline, parser: &Mutex<CaseParser>) -> Result<Case, InputError> {
        let at = |message: String| InputError::new(&self.file.path, self.line, 1, message);
        let mut parser = parser.lock().map_err(|_| at("internal error: the case parser was poisoned".into()))?;
        let bytes = parser
            .lines
            .read(&self.file, self.offset, self.len)
            .map_err(|e| at(format!("cannot read the case again: {e}")))?;
        let line = match String::from_utf8(bytes) {
            Ok(line) if canon::digest(Context::Content, line.as_bytes()) == self.bytes => line,
            _ => return Err(at("the dataset changed after it was validated; run again".into())),
        };
        parser.parse(pipeline, &self.file, self.line, &line, Recordings::Known(&self.recordings))
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
    #[serde(default)]
    trusted_values: Vec<String>,
    role: Option<Role>,
    #[serde(default)]
    task_expect: Vec<RawAssertion>,
}

/// A perturbed variant of another case (docs/metrics.md §6 robustness).
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

/// Parses case lines: the one code path for validating a line and for reading it again
/// when it runs. Compiled matchers and validated recordings are shared between cases.
pub struct CaseParser {
    /// The metrics stage's check of a case's blocks.
    check_block: CheckBlock,
    /// Recording files validated here, by path, so that cases sharing one validate it
    /// once. Bounded like the matchers: past `recording_cache` files it starts again (a
    /// forgotten file is validated again, alike), so a suite with a file per case does
    /// not hold every path and digest until its plan is made.
    recordings: HashMap<PathBuf, RecordingRef>,
    /// The tools each recording file validated here calls (none known for one validated
    /// before, [`CaseParser::validated`]); forgotten with `recordings`.
    calls: HashMap<PathBuf, Arc<[String]>>,
    /// Recording files kept in `recordings` at most ([`RECORDING_CACHE`]).
    recording_cache: usize,
    /// Compiled matchers by canonical spec: suites repeat the same regexes and schemas
    /// across thousands of cases, and a compiled one costs kilobytes. Bounded: past
    /// [`MATCHER_CACHE`] distinct specs it starts again, so a suite of all-different
    /// matchers costs compile time, not memory.
    matchers: BTreeMap<Vec<u8>, Arc<Matcher>>,
    /// Recording files this version of stateval validated before (a shard run of the
    /// same plan): content digest by the digest of the file's bytes. A file whose bytes
    /// are here is not parsed again; any other file is validated in full.
    validated: Option<Arc<ValidatedRecordings>>,
    /// Where [`CaseRef::load`] reads case lines again.
    lines: LineReader,
    /// Where a validating parse leaves the recording files it read, for their runs.
    held: Option<Arc<recording::HeldRecordings>>,
}

/// Reads validated case lines again for their runs ([`CaseRef::load`]): the dataset
/// file is opened once, not once per case, and read a window of [`LineReader::WINDOW`]
/// bytes at a time, from which the next cases' lines are taken. Cases run in dataset
/// order (a few jobs at most `8 × jobs` apart), so a window serves every case it holds:
/// a 220-case suite of 50-turn cases is four reads, where it was an open, a seek and a
/// read per case (docs/speed.md). Only the file being read is held open, and the window
/// is the only memory it keeps. A line is still checked against the digest it was
/// validated with, so a file edited in between is an error, never another case run.
#[derive(Default)]
struct LineReader {
    /// The dataset file read last, open.
    file: Option<(Arc<DatasetFile>, std::fs::File)>,
    /// Bytes of that file from an offset on.
    window: Option<(Arc<DatasetFile>, u64, Vec<u8>)>,
}

impl LineReader {
    /// Bytes read at once; a longer line is read alone and not kept.
    const WINDOW: usize = 256 * 1024;

    /// The `len` bytes of `file` at `offset`.
    fn read(&mut self, file: &Arc<DatasetFile>, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        if let Some((held, start, bytes)) = &self.window
            && Arc::ptr_eq(held, file)
            && offset >= *start
            && let Some(from) = usize::try_from(offset - start).ok().filter(|from| from + len <= bytes.len())
        {
            return Ok(bytes[from..from + len].to_vec());
        }
        let open = match self.file.take() {
            Some((held, open)) if Arc::ptr_eq(&held, file) => open,
            _ => std::fs::File::open(&file.path)?,
        };
        let open = &mut self.file.insert((file.clone(), open)).1;
        open.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::with_capacity(len.max(Self::WINDOW));
        open.take(len.max(Self::WINDOW) as u64).read_to_end(&mut bytes)?;
        if bytes.len() < len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if len > Self::WINDOW {
            self.window = None;
            return Ok(bytes);
        }
        let line = bytes[..len].to_vec();
        self.window = Some((file.clone(), offset, bytes));
        Ok(line)
    }
}

/// Recording files known valid: content digest by the digest of the file's bytes.
/// Validation is a function of those bytes alone, so the same bytes validate the same.
pub type ValidatedRecordings = HashMap<Digest, Digest>;

/// Distinct compiled matchers kept at once.
const MATCHER_CACHE: usize = 1024;

/// Validated recording files a parser remembers at once. A 10,000-case suite with a
/// recording per case held 3-4 MB of paths, digests and tool names for them while it
/// was validated, the largest part of its peak that grew with the suite.
const RECORDING_CACHE: usize = 1024;

/// How a parse treats a case's recording files.
pub enum Recordings<'a> {
    /// Read and validate each file (the validating pass).
    Validate,
    /// Already validated as these: refer to the files, which are read again (and
    /// checked against the validated bytes) when the run replays them.
    Known(&'a [RecordingKey]),
}

/// Loads datasets for one pipeline: validates every case, keeps a [`CaseRef`] for each
/// selected one.
pub struct Loader<'p> {
    pipeline: &'p Pipeline,
    /// One parser per core: a batch of lines is parsed on all of them at once.
    parsers: Vec<CaseParser>,
    /// Which valid cases to keep (every one by default).
    select: Box<dyn Fn(&Case) -> bool + 'p>,
    /// Every case id seen, for unique ids and perturbation references.
    ids: BTreeMap<String, Seen>,
    perturbed: Vec<Perturbed>,
    /// Content digest of the kept cases and their recordings, in order.
    content: Digester,
    pub cases: Vec<CaseRef>,
    pub errors: Vec<InputError>,
    /// Digests of the files graders and judges read (None: not a file), by path.
    files: BTreeMap<PathBuf, Option<Digest>>,
    /// The tags of every valid case, and of the selected ones.
    tags: BTreeSet<String>,
    selected_tags: BTreeSet<String>,
    /// Recording files kept as validating read them ([`Loader::holding`]).
    held: Arc<recording::HeldRecordings>,
    /// Cases kept as validating parsed them, when holding.
    held_cases: Option<HeldCases>,
}

/// Files a matcher's custom graders and judges read, relative to the pipeline's base:
/// rubrics, and the arguments of a grader's command that name files (its script). The
/// program itself counts only when it is a path: `python3` is the machine's.
fn grader_files(matcher: &Matcher) -> Vec<String> {
    let mut files = Vec::new();
    for m in matcher.callers() {
        match m {
            Matcher::Judge(spec) => files.push(spec.rubric.clone()),
            Matcher::Custom(spec) => {
                for (i, arg) in spec.command.iter().enumerate() {
                    if i > 0 || Path::new(arg).components().count() > 1 {
                        files.push(arg.clone());
                    }
                }
            }
            _ => {}
        }
    }
    files
}

/// Where a case was defined, and for which agent.
struct Seen {
    agent: String,
    file: Arc<DatasetFile>,
    line: usize,
}

/// A perturbed case, checked once every id is known.
struct Perturbed {
    id: String,
    agent: String,
    of: String,
    file: Arc<DatasetFile>,
    line: usize,
    /// Column of `perturbation.of` in the line.
    column: usize,
}

/// The selected cases of a pipeline, validated.
pub struct Loaded {
    pub cases: Vec<CaseRef>,
    /// Over every kept case's digest and its recordings' digests, in order: what the
    /// cases contribute to a run id.
    pub digest: Digest,
    /// Every tag a case of the pipeline carries, selected or not (a gate on any other
    /// tag could never hold a case).
    pub tags: BTreeSet<String>,
    /// Every tag a selected case carries.
    pub selected_tags: BTreeSet<String>,
    /// The digest of each file the selected cases' custom graders and judges read
    /// (rubrics, grader scripts; `None`: not a file that could be read), by path: what
    /// the run must find there when a grader runs or a judge reads its rubric.
    pub files: BTreeMap<PathBuf, Option<Digest>>,
    /// The kept cases' recording files as validating read them, for their runs.
    pub held: Arc<recording::HeldRecordings>,
    /// The first kept cases as validating parsed them, for their runs.
    pub held_cases: HeldCases,
}

/// Cases as validating parsed them, kept for their runs ([`HeldCases::take`]): a case
/// of a small suite is parsed once, not once to validate and again to run (its line
/// parsed, schema-checked and its matchers compiled: 3 % of a 50-case suite's
/// instructions). Bounded: once the lines of the cases kept reach [`HeldCases::BUDGET`]
/// bytes, later cases are read again as before, so memory does not grow with the
/// suite. A case is taken once; a second run of it reads it again.
#[derive(Default)]
pub struct HeldCases {
    /// The bytes of the lines of the cases kept, and the cases by file and line.
    held: Mutex<(usize, KeptCases)>,
}

type KeptCases = HashMap<(PathBuf, usize), Case>;

impl HeldCases {
    /// Bytes of case lines whose cases are kept at most: about a hundred cases of fifty
    /// turns. Kept cases stay from the plan until their runs: with 1 MiB (and 640 KiB),
    /// a 10,000-case suite of such cases peaked 5 MB (4 MB) higher and a 1,000-case one
    /// 2 MB, so the memory a suite grows by with its size (docs/speed.md) came close to
    /// its 1.5× limit; with 256 KiB both peak about 2 MB higher, as before in ratio.
    pub const BUDGET: usize = 256 << 10;

    /// Keep `case`, whose dataset line was `len` bytes long, if there is room.
    fn offer(&self, case: Case, len: usize) {
        let Ok(mut held) = self.held.lock() else { return };
        let (size, map) = &mut *held;
        if *size + len <= Self::BUDGET {
            *size += len;
            map.insert((case.path.clone(), case.line), case);
        }
    }

    /// The kept case at `line` of the dataset file `path`, handed over.
    pub fn take(&self, path: &Path, line: usize) -> Option<Case> {
        let mut held = self.held.lock().ok()?;
        held.1.remove(&(path.to_path_buf(), line))
    }
}

/// Stop collecting after this many errors: past it, more lines add noise, not help.
const MAX_ERRORS: usize = 20;

/// Dataset lines read, then parsed on every core, at a time.
const BATCH: usize = 256;

/// One non-blank dataset line: its text (no line ending, no byte-order mark), 1-based
/// number and byte offset.
struct Line {
    text: String,
    number: usize,
    start: u64,
}

impl<'p> Loader<'p> {
    /// `check_block` is the metrics stage's check of a case's metric blocks.
    pub fn new(pipeline: &'p Pipeline, check_block: CheckBlock) -> Self {
        Loader {
            pipeline,
            parsers: (0..std::thread::available_parallelism().map_or(1, |n| n.get()))
                .map(|_| CaseParser::new(check_block))
                .collect(),
            select: Box::new(|_| true),
            ids: BTreeMap::new(),
            perturbed: Vec::new(),
            content: Digester::new(Context::Content),
            cases: Vec::new(),
            errors: Vec::new(),
            files: BTreeMap::new(),
            tags: BTreeSet::new(),
            selected_tags: BTreeSet::new(),
            held: Arc::default(),
            held_cases: None,
        }
    }

    /// Keep the recording files validating reads, and the first cases it parses, within
    /// their budgets, in [`Loaded::held`] and [`Loaded::held_cases`]: a run takes them
    /// from there rather than reading them again.
    pub fn holding(mut self) -> Self {
        for parser in &mut self.parsers {
            parser.held = Some(self.held.clone());
        }
        self.held_cases = Some(HeldCases::default());
        self
    }

    /// Take recording files whose bytes are in `validated` as valid, with the content
    /// digest found there, instead of parsing them again.
    pub fn validated(mut self, validated: Arc<ValidatedRecordings>) -> Self {
        for parser in &mut self.parsers {
            parser.validated = Some(validated.clone());
        }
        self
    }

    /// Keep only the valid cases `select` accepts (every case is still validated).
    pub fn select(mut self, select: impl Fn(&Case) -> bool + 'p) -> Self {
        self.select = Box::new(select);
        self
    }

    /// The dataset files of the pipeline, sorted, deduplicated. A pattern that matches
    /// nothing is an error: a typo must not silently shrink the suite.
    pub fn dataset_files(&mut self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for pattern in &self.pipeline.pipeline.datasets {
            let full = self.pipeline.resolve(pattern);
            // said where the pattern is written
            let at = |message: String| {
                let (line, column) = self.pipeline.locate_value("/pipeline/datasets", pattern);
                InputError::new(&self.pipeline.path, line, column, message)
            };
            let matched: Vec<PathBuf> = match glob::glob(&full.to_string_lossy()) {
                Ok(paths) => paths.filter_map(Result::ok).filter(|p| p.is_file()).collect(),
                Err(e) => {
                    self.errors.push(at(format!("bad dataset pattern \"{pattern}\": {e}")));
                    continue;
                }
            };
            if matched.is_empty() {
                self.errors.push(at(format!("dataset pattern \"{pattern}\" matches no file")));
            }
            files.extend(matched);
        }
        files.sort();
        files.dedup();
        files
    }

    /// Validate every dataset of the pipeline.
    pub fn load_all(mut self) -> Result<Loaded, Vec<InputError>> {
        for file in self.dataset_files() {
            self.load_file(&file);
            if self.errors.len() >= MAX_ERRORS {
                break;
            }
        }
        self.check_perturbations();
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        // held for the whole run: grown by doubling, up to half of it would stay empty
        self.cases.shrink_to_fit();
        // only the recordings of the kept cases are taken by a run
        let wanted: std::collections::HashSet<Digest> =
            self.cases.iter().flat_map(|c| c.recordings.iter().filter_map(|r| r.file)).collect();
        self.held.retain(|digest| wanted.contains(digest));
        Ok(Loaded {
            held: self.held,
            held_cases: self.held_cases.unwrap_or_default(),
            cases: self.cases,
            digest: self.content.finish(),
            tags: self.tags,
            selected_tags: self.selected_tags,
            files: self.files,
        })
    }

    /// A perturbed case names a baseline case of the same agent (docs/metrics.md §6).
    fn check_perturbations(&mut self) {
        for case in &self.perturbed {
            let problem = match self.ids.get(&case.of).map(|seen| seen.agent.as_str()) {
                None => format!("perturbation.of names no case: \"{}\"", case.of),
                Some(agent) if *agent != case.agent => {
                    format!("perturbation.of names \"{}\", a case of agent {agent}, not {}", case.of, case.agent)
                }
                Some(_) if case.of == case.id => "a case cannot be a perturbation of itself".to_string(),
                Some(_) => continue,
            };
            self.errors.push(InputError::new(&case.file.path, case.line, case.column, problem));
        }
    }

    /// Validate one dataset file, a batch of lines at a time (the file is never held
    /// whole). Each batch is parsed on every core, then its cases are kept in file
    /// order, so errors and cases come out as a line-by-line pass gives them.
    pub fn load_file(&mut self, path: &Path) {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                self.errors.push(InputError::file(path, format!("cannot read dataset: {e}")));
                return;
            }
        };
        let file_ref =
            Arc::new(DatasetFile { path: path.to_path_buf(), dataset: dataset_name(&self.pipeline.base, path) });
        let mut reader = BufReader::new(file);
        let mut batch: Vec<Line> = Vec::with_capacity(BATCH);
        let (mut offset, mut line_no, mut cases) = (0u64, 0usize, 0usize);
        loop {
            let mut raw = Vec::new();
            line_no += 1;
            let read = reader.read_until(b'\n', &mut raw).map_err(|e| format!("cannot read dataset: {e}"));
            // a line that is not UTF-8 is refused at its first bad byte
            let text = match read {
                Ok(0) => break,
                Ok(_) => crate::diag::utf8_text(path, raw, "dataset").map_err(|e| InputError { line: line_no, ..e }),
                Err(message) => Err(InputError::new(path, line_no, 1, message)),
            };
            let mut text = match text {
                Ok(text) => text,
                Err(e) => {
                    if self.keep_batch(&file_ref, &mut batch) {
                        self.errors.push(e);
                    }
                    return;
                }
            };
            let read = text.len();
            let mut start = offset;
            offset += read as u64;
            let mut end = text.len();
            if text.ends_with('\n') {
                end -= 1;
                if text[..end].ends_with('\r') {
                    end -= 1;
                }
            }
            text.truncate(end);
            if line_no == 1 && text.starts_with(crate::diag::BOM) {
                // the case's bytes start after the mark (CaseRef::load reads them again)
                text.drain(..crate::diag::BOM.len_utf8());
                start += crate::diag::BOM.len_utf8() as u64;
            }
            if text.trim().is_empty() {
                continue;
            }
            cases += 1;
            batch.push(Line { text, number: line_no, start });
            if batch.len() == BATCH && !self.keep_batch(&file_ref, &mut batch) {
                return;
            }
        }
        if self.keep_batch(&file_ref, &mut batch) && cases == 0 {
            // a pattern that still matches an emptied file must not pass a suite that no
            // longer tests anything
            self.errors.push(InputError::file(path, "the dataset has no cases (the file is empty)"));
        }
    }

    /// Parse `batch` on every core and keep its cases in order; `false` once the error
    /// limit is reached (loading stops there, as a line-by-line pass would).
    fn keep_batch(&mut self, file_ref: &Arc<DatasetFile>, batch: &mut Vec<Line>) -> bool {
        let pipeline = self.pipeline;
        let parse = |parser: &mut CaseParser, lines: &[Line]| -> Vec<Result<Case, InputError>> {
            lines.iter().map(|l| parser.parse(pipeline, file_ref, l.number, &l.text, Recordings::Validate)).collect()
        };
        // a few dozen lines per core at least: below that a thread costs more than it saves
        let threads = self.parsers.len().min(batch.len().div_ceil(32)).max(1);
        let parsed: Vec<Result<Case, InputError>> = if threads == 1 {
            parse(&mut self.parsers[0], batch)
        } else {
            let share = batch.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let mut parts = self.parsers.iter_mut().zip(batch.chunks(share));
                let (first_parser, first_lines) = parts.next().expect("a batch has lines");
                let others: Vec<_> = parts.map(|(parser, lines)| scope.spawn(move || parse(parser, lines))).collect();
                let mut parsed = parse(first_parser, first_lines);
                for other in others {
                    parsed.extend(other.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
                }
                parsed
            })
        };
        for (line, parsed) in batch.drain(..).zip(parsed) {
            match parsed.and_then(|case| self.keep(case, file_ref, &line.text, line.start)) {
                Ok(Some(case)) => self.cases.push(case),
                Ok(None) => {}
                Err(e) => self.errors.push(e),
            }
            if self.errors.len() >= MAX_ERRORS {
                return false;
            }
        }
        true
    }

    /// Checks what needs every case (unique ids, later perturbation references) and
    /// keeps the reference when the case is selected.
    fn keep(
        &mut self,
        case: Case,
        file: &Arc<DatasetFile>,
        line: &str,
        offset: u64,
    ) -> Result<Option<CaseRef>, InputError> {
        if let Some(first) = self.ids.get(&case.id) {
            return Err(InputError::new(
                &case.path,
                case.line,
                line_col(line, locate(line, "/id")).1,
                format!(
                    "duplicate case id \"{}\" (first defined at {}:{})",
                    case.id,
                    first.file.path.display(),
                    first.line
                ),
            ));
        }
        let seen = Seen { agent: case.agent.clone(), file: file.clone(), line: case.line };
        self.ids.insert(case.id.clone(), seen);
        if let Some(p) = &case.perturbation {
            self.perturbed.push(Perturbed {
                id: case.id.clone(),
                agent: case.agent.clone(),
                of: p.of.clone(),
                file: file.clone(),
                line: case.line,
                column: line_col(line, locate(line, "/perturbation/of")).1,
            });
        }
        let selected = (self.select)(&case);
        for tag in &case.tags {
            for tags in [&mut self.tags].into_iter().chain(selected.then_some(&mut self.selected_tags)) {
                if !tags.contains(tag) {
                    tags.insert(tag.clone());
                }
            }
        }
        if !selected {
            return Ok(None);
        }
        self.content.update(&case.digest.0);
        for r in &case.recordings {
            self.content.update(&r.digest().0);
        }
        let mut inputs = canon::Digester::new(Context::Content);
        inputs.update(&case.digest.0);
        // the files custom graders and judges read decide verdicts: a changed one is a
        // new run, not a rerun that overwrites the last (cases without them hash as before)
        for a in &case.expect {
            for file in grader_files(&a.matcher) {
                let full = self.pipeline.resolve(&file);
                let digest = self
                    .files
                    .entry(full.clone())
                    .or_insert_with(|| std::fs::read(&full).ok().map(|bytes| canon::digest(Context::Content, &bytes)));
                if let Some(d) = digest {
                    self.content.update(file.as_bytes());
                    self.content.update(&d.0);
                    inputs.update(file.as_bytes());
                    inputs.update(&d.0);
                }
            }
        }
        let reference = CaseRef {
            file: file.clone(),
            line: case.line,
            offset,
            len: line.len(),
            bytes: canon::digest(Context::Content, line.as_bytes()),
            recordings: case.recordings.iter().map(RecordingRef::key).collect(),
            id: case.id.clone(),
            agent: case.agent.clone(),
            inputs: inputs.finish(),
            perturbed: case.perturbation.is_some(),
        };
        if let Some(held) = &self.held_cases {
            held.offer(case, line.len());
        }
        Ok(Some(reference))
    }
}

impl CaseParser {
    /// A parser that checks metric blocks with `check_block` (the metrics stage's).
    pub fn new(check_block: CheckBlock) -> Self {
        CaseParser {
            check_block,
            recordings: HashMap::new(),
            calls: HashMap::new(),
            recording_cache: RECORDING_CACHE,
            matchers: BTreeMap::new(),
            validated: None,
            lines: LineReader::default(),
            held: None,
        }
    }

    /// Parses and checks one case line.
    pub fn parse(
        &mut self,
        pipeline: &Pipeline,
        file: &DatasetFile,
        line_no: usize,
        line: &str,
        known: Recordings<'_>,
    ) -> Result<Case, InputError> {
        let path = file.path.as_path();
        let at = |pointer: &str, message: String| {
            InputError::new(path, line_no, line_col(line, locate(line, pointer)).1, message)
        };
        let value = parse_json_strict(line).map_err(|(_, col, msg)| {
            InputError::new(path, line_no, col, crate::diag::one_per_line(msg, "a dataset holds one case", "case"))
        })?;
        if let Some(v) = CASE_SCHEMA.check(&value) {
            return Err(at(&v.pointer, v.message));
        }
        let digest = canon::canonical_digest(Context::Content, &value).map_err(|e| at("", e.to_string()))?;
        let raw: RawCase = serde_json::from_value(value).map_err(|e| at("", e.to_string()))?;

        if !pipeline.agents.contains_key(&raw.agent) {
            let known: Vec<&str> = pipeline.agents.keys().map(String::as_str).collect();
            return Err(at(
                "/agent",
                format!("unknown agent profile \"{}\" (the pipeline defines: {})", raw.agent, known.join(", ")),
            ));
        }
        // a tool the agent cannot reach, allowed or approved, is configuration that does nothing
        if let Some(reach) = pipeline.tool_names.as_ref().and_then(|n| n.reach(&pipeline.agents[&raw.agent])) {
            if let Some((i, tool)) = raw.allowed_tools.iter().flatten().enumerate().find(|(_, t)| !reach.has(t)) {
                let message = format!("allowed_tools names tool \"{tool}\"{}", reach.names_nothing(tool));
                return Err(at(&format!("/allowed_tools/{i}"), message));
            }
            if let Some((key, message)) =
                raw.approvals.keys().find_map(|k| reach.approval_names_nothing(k).map(|m| (k, m)))
            {
                return Err(at(&format!("/approvals/{key}"), message));
            }
        }

        let mut recordings = Vec::new();
        for (i, r) in raw.recordings.iter().enumerate() {
            let pointer = format!("/recordings/{i}");
            let recording = match (r, &known) {
                (Value::String(rel), Recordings::Known(digests)) => {
                    let full = paths::resolve(pipeline, path, rel);
                    let display = pipeline.display(&full);
                    let Some(RecordingKey { digest, file: Some(bytes) }) = digests.get(i).copied() else {
                        return Err(at(&pointer, "the recording changed since validation".into()));
                    };
                    RecordingRef::File { path: full, display, digest, bytes }
                }
                (Value::String(rel), Recordings::Validate) => {
                    self.recording(pipeline, path, rel).map_err(|e| match e {
                        RecordingError::Missing(m) => at(&pointer, m),
                        RecordingError::Invalid(e) => e,
                    })?
                }
                (Value::Object(obj), _) => {
                    let responses = obj.get("responses").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                    let rec = Recording::inline(responses, line, &pointer)
                        .map_err(|(col, m)| InputError::new(path, line_no, line_col(line, col).1, m))?;
                    RecordingRef::Inline(Arc::new(rec))
                }
                (_, _) => return Err(at(&pointer, "a recording is a path or {\"responses\": [...]}".into())),
            };
            // a call of a tool the agent cannot reach only ever replays as an unknown
            // tool: the recording is of another agent, or the tool was renamed since
            let profile = &pipeline.agents[&raw.agent];
            let reach = pipeline.tool_names.as_ref().and_then(|n| n.reach(profile));
            // an external agent is held to it when stateval serves its tools (its profile
            // names a manifest); one with none runs only tools of its own
            let served = profile.kind == crate::pipeline::AgentKind::Builtin || profile.tools.is_some();
            if let Some(reach) = reach.filter(|_| served) {
                let called: Vec<String> = match &recording {
                    RecordingRef::File { path, .. } => self.calls.get(path).map(|c| c.to_vec()).unwrap_or_default(),
                    RecordingRef::Inline(rec) => rec
                        .responses
                        .iter()
                        .flat_map(|r| r.response.tool_calls.iter().map(|c| c.name.clone()))
                        .collect(),
                };
                if let Some(tool) = called.iter().find(|t| !reach.has(t)) {
                    let source = match &recording {
                        RecordingRef::File { display, .. } => format!("recording {display}"),
                        RecordingRef::Inline(_) => "the recording".to_string(),
                    };
                    let message = format!("{source} calls tool \"{tool}\"{}", reach.names_nothing(tool));
                    return Err(at(&pointer, message));
                }
            }
            recordings.push(recording);
        }

        let mut blocks = Vec::new();
        let mut block_facts = Vec::new();
        let mut block_expect = Vec::new();
        for (key, spec) in raw.blocks() {
            let facts = match (self.check_block)(key, spec) {
                Some(Ok(facts)) => facts,
                Some(Err(e)) => return Err(at(e.pointer.as_deref().unwrap_or(&format!("/{key}")), e.message)),
                None => continue,
            };
            if facts.min_runs > recordings.len() {
                return Err(at(
                    &format!("/{key}"),
                    format!(
                        "the {key} block needs at least {} recorded runs; this case has {}",
                        facts.min_runs,
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
                if compiled.calls_out() {
                    return Err(at(&format!("{place}/matcher"), CALLS_ON_BLOCKS.into()));
                }
                block_expect.push(Assertion {
                    target: target.to_string(),
                    matcher: compiled,
                    spec: matcher.clone(),
                    description: None,
                });
            }
            blocks.push(Block { key, spec: spec.clone() });
            block_facts.push((key, facts));
        }

        let mut expect = Vec::new();
        let root = paths::dataset_base(path);
        for (i, a) in raw.expect.into_iter().enumerate() {
            check_case_target(&a.target, &block_facts).map_err(|m| at(&format!("/expect/{i}/target"), m))?;
            // the files a grader or judge names are the dataset's, said as the runner reads them
            let rebased = paths::rebase_matcher(pipeline, &root, &a.matcher);
            let matcher = self.matcher(&rebased).map_err(|(ptr, m)| at(&format!("/expect/{i}/matcher{ptr}"), m))?;
            if matcher.calls_out() {
                if targets_block_value(&a.target, &blocks) {
                    return Err(at(&format!("/expect/{i}/matcher"), CALLS_ON_BLOCKS.into()));
                }
                check_calls(pipeline, &rebased, &format!("/expect/{i}/matcher")).map_err(|(ptr, m)| at(&ptr, m))?;
            }
            expect.push(Assertion { target: a.target, matcher, spec: a.matcher, description: a.description });
        }
        // a security verdict rests on what the agent observably did, never on a judge alone
        if raw.tags.iter().any(|t| t == SECURITY_TAG)
            && blocks.is_empty()
            && !expect.is_empty()
            && expect.iter().all(|a| a.matcher.uses_judge())
        {
            return Err(at(
                "/expect/0/matcher",
                "a case tagged security cannot rest on LLM judges alone: every assertion here asks a judge; \
                 add one on observable evidence (policy.denials, security.flags, tool_calls, ...)"
                    .into(),
            ));
        }

        let mut task_expect = Vec::new();
        for (i, a) in raw.task_expect.into_iter().enumerate() {
            if targets_block_value(&a.target, &blocks) {
                let message = "task_expect grades one run's log; a metric block's value belongs in expect".to_string();
                return Err(at(&format!("/task_expect/{i}/target"), message));
            }
            check_case_target(&a.target, &block_facts).map_err(|m| at(&format!("/task_expect/{i}/target"), m))?;
            let rebased = paths::rebase_matcher(pipeline, &root, &a.matcher);
            let pointer = format!("/task_expect/{i}/matcher");
            let matcher = self.matcher(&rebased).map_err(|(ptr, m)| at(&format!("{pointer}{ptr}"), m))?;
            if matcher.calls_out() {
                check_calls(pipeline, &rebased, &pointer).map_err(|(ptr, m)| at(&ptr, m))?;
            }
            task_expect.push(Assertion { target: a.target, matcher, spec: a.matcher, description: a.description });
        }
        let role = raw.role.or_else(|| Role::from_tags(&raw.tags));
        if !task_expect.is_empty() && role != Some(Role::Attack) {
            return Err(at(
                "/task_expect",
                "task_expect is the user task of an attack case; this case is not one \
                 (set \"role\": \"attack\" or tag it attack)"
                    .into(),
            ));
        }

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
            perturbation: raw.perturbation,
            allowed_tools: raw.allowed_tools,
            human_approvals: raw.approvals.iter().map(|(k, v)| (k.clone(), v == "approve")).collect(),
            trusted_values: raw.trusted_values,
            role,
            task_expect,
            dataset: file.dataset.clone(),
            path: path.to_path_buf(),
            display_path: pipeline.display(path),
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
        if self.matchers.len() >= MATCHER_CACHE {
            self.matchers.clear();
        }
        self.matchers.insert(key, m.clone());
        Ok(m)
    }

    fn recording(&mut self, pipeline: &Pipeline, dataset: &Path, rel: &str) -> Result<RecordingRef, RecordingError> {
        let full = paths::resolve(pipeline, dataset, rel);
        if let Some(r) = self.recordings.get(&full) {
            return Ok(r.clone());
        }
        if self.recordings.len() >= self.recording_cache {
            self.recordings.clear();
            self.calls.clear();
        }
        let display = pipeline.display(&full);
        let text = match std::fs::read(&full) {
            Ok(text) => text,
            Err(_) if !full.is_file() => {
                return Err(RecordingError::Missing(format!(
                    "recording \"{rel}\" not found (looked in {})",
                    full.display()
                )));
            }
            Err(e) => {
                let message = format!("cannot read recording: {e}");
                return Err(RecordingError::Invalid(InputError::file(Path::new(&display), message)));
            }
        };
        let bytes = Recording::bytes_digest(&text);
        let text = Recording::text(text, &display).map_err(RecordingError::Invalid)?;
        let digest = match self.validated.as_ref().and_then(|v| v.get(&bytes)) {
            Some(digest) => *digest,
            // checked and digested one response at a time: the run reads it again, a
            // line at a time as it is served, so no recording is held parsed whole
            None => {
                let (digest, calls) = Recording::validate_calls(&text, &display).map_err(RecordingError::Invalid)?;
                self.calls.insert(full.clone(), calls.into());
                digest
            }
        };
        if let Some(held) = &self.held {
            held.offer(bytes, text);
        }
        let reference = RecordingRef::File { path: full.clone(), display, digest, bytes };
        self.recordings.insert(full, reference.clone());
        Ok(reference)
    }
}

/// The tag whose cases must rest on observable evidence.
pub const SECURITY_TAG: &str = "security";

use crate::outcome::Role;

impl Role {
    /// The role a case's tags give it: `attack`, or `control`/`negative-control`, by
    /// name; otherwise a case tagged `security` is an attack. `None`: not scored.
    pub fn from_tags(tags: &[String]) -> Option<Role> {
        let has = |t: &str| tags.iter().any(|x| x == t);
        if has("control") || has("negative-control") {
            Some(Role::Control)
        } else if has("attack") || has(SECURITY_TAG) {
            Some(Role::Attack)
        } else {
            None
        }
    }
}

const CALLS_ON_BLOCKS: &str = "custom graders and judges grade one run's log; \
     an assertion on a metric block's values cannot use them";

/// Does `target` name a value of one of these metric blocks (graded across runs, not
/// over one run's log)? The runner splits a case's `expect` by the same rule.
fn targets_block_value(target: &str, blocks: &[Block]) -> bool {
    let root = target.split(['.', '[']).next().unwrap_or_default();
    root != "recovery" && blocks.iter().any(|b| block_root(b.key) == root)
}

/// Every `custom` and `judge` inside a matcher as written: (pointer, name, argument).
fn calls_in<'v>(spec: &'v Value, at: String, out: &mut Vec<(String, &'v str, &'v Value)>) {
    let Some((name, arg)) = spec.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
        return;
    };
    match name.as_str() {
        "custom" | "judge" => out.push((format!("{at}/{name}"), name.as_str(), arg)),
        "not" => calls_in(arg, format!("{at}/not"), out),
        "any_of" | "all_of" => {
            for (i, m) in arg.as_array().into_iter().flatten().enumerate() {
                calls_in(m, format!("{at}/{name}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// What a compiled custom grader or judge names must exist before anything runs: the
/// grader's program, the judge profile, the rubric. Errors are (pointer, message).
fn check_calls(pipeline: &Pipeline, spec: &Value, at: &str) -> Result<(), (String, String)> {
    let mut calls = Vec::new();
    calls_in(spec, at.to_string(), &mut calls);
    for (ptr, name, arg) in calls {
        if name == "custom" {
            let program = arg["command"][0].as_str().unwrap_or_default();
            crate::child_env::resolve_program(program, &pipeline.base)
                .map_err(|e| (format!("{ptr}/command/0"), format!("custom grader: {e}")))?;
            let command: Vec<String> = arg["command"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            if let Some((i, e)) = crate::child_env::missing_script(&command, &pipeline.base) {
                return Err((format!("{ptr}/command/{i}"), format!("custom grader: {e}")));
            }
            continue;
        }
        let profile = arg["profile"].as_str().unwrap_or_default();
        if !pipeline.judges.contains_key(profile) {
            let hint = crate::diag::did_you_mean(profile, pipeline.judges.keys().map(String::as_str))
                .map(|s| format!(" (did you mean \"{s}\"?)"))
                .unwrap_or_default();
            let defined = if pipeline.judges.is_empty() {
                "the pipeline defines no [judges.NAME]".to_string()
            } else {
                format!("the pipeline defines: {}", pipeline.judges.keys().cloned().collect::<Vec<_>>().join(", "))
            };
            return Err((format!("{ptr}/profile"), format!("unknown judge profile \"{profile}\"{hint} ({defined})")));
        }
        let rubric = arg["rubric"].as_str().unwrap_or_default();
        let full = pipeline.resolve(rubric);
        if !full.is_file() {
            return Err((
                format!("{ptr}/rubric"),
                format!("rubric \"{rubric}\" not found (looked in {})", full.display()),
            ));
        }
    }
    Ok(())
}

/// A case's `expect` may target extracted values and the targets of its own blocks.
/// A block target must be one the block reports (`trajectory.score` is not): refused
/// here, with the valid ones listed, rather than found missing when the case runs.
/// `recovery.*` is extracted from every log, block or not, so the extractor checks it.
fn check_case_target(target: &str, blocks: &[(&'static str, BlockFacts)]) -> Result<(), String> {
    let root = target.split(['.', '[']).next().unwrap_or_default();
    let mine: Vec<&(&str, BlockFacts)> = blocks.iter().filter(|(key, _)| block_root(key) == root).collect();
    if !mine.is_empty() && root != "recovery" {
        let names: Vec<String> = mine.iter().flat_map(|(_, facts)| facts.targets.iter().cloned()).collect();
        if names.iter().any(|n| n == target) {
            return Ok(());
        }
        // every valid name is listed: a did-you-mean among a handful would only guess
        let keys: Vec<&str> = mine.iter().map(|(key, _)| *key).collect();
        return Err(format!(
            "unknown target \"{target}\": the {} block{} of this case report{}: {}",
            keys.join(" and "),
            if keys.len() > 1 { "s" } else { "" },
            if keys.len() > 1 { "" } else { "s" },
            names.join(", ")
        ));
    }
    if BLOCK_KEYS.iter().any(|k| block_root(k) == root) && !target::ROOTS.contains(&root) {
        return Err(format!("target \"{target}\" needs a {root} block in this case"));
    }
    target::check_target(target)
}

enum RecordingError {
    Missing(String),
    Invalid(InputError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of every length, a long one past the window among them, taken out of order
    /// and across windows and files: each is exactly its bytes of its file.
    #[test]
    fn the_line_reader_gives_each_line_s_bytes_whatever_the_order_and_window() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut files = Vec::new();
        for f in 0..2 {
            let mut text = Vec::new();
            let mut lines = Vec::new();
            for i in 0..400usize {
                let len = if i == 123 { LineReader::WINDOW + 1000 } else { 1 + (i * 997 + f * 31) % 2000 };
                let line: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
                lines.push((text.len() as u64, line.clone()));
                text.extend_from_slice(&line);
                text.push(b'\n');
            }
            let path = dir.path().join(format!("{f}.jsonl"));
            std::fs::write(&path, &text).expect("write");
            files.push((Arc::new(DatasetFile { path, dataset: format!("d{f}") }), lines));
        }
        let mut reader = LineReader::default();
        let order = (0..400).chain((0..400).rev()).chain((0..400).map(|i| (i * 37) % 400));
        for (n, i) in order.enumerate() {
            let (file, lines) = &files[n % 2];
            let (offset, line) = &lines[i];
            assert_eq!(reader.read(file, *offset, line.len()).expect("read"), *line, "line {i} of {n}");
        }
        // past the end is an error, never a short line
        let (file, lines) = &files[0];
        let (offset, line) = lines.last().expect("a line");
        assert!(reader.read(file, *offset, line.len() + 2).is_err());
    }

    /// More recording files than a parser remembers: a forgotten one is validated again
    /// with the same digest and the same reach check (a call its agent cannot reach is
    /// refused the second time too), and no more than the bound is ever remembered.
    #[test]
    fn recordings_forgotten_past_the_bound_are_validated_again_alike() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |rel: &str, text: &str| std::fs::write(dir.path().join(rel), text).expect("write");
        write("p.toml", "[pipeline]\nname = \"p\"\ndatasets = [\"d.jsonl\"]\n\n[agents.a]\ntools = \"tools.json\"\n");
        write(
            "tools.json",
            r#"{"tools": [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}]}"#,
        );
        let calling = |tool: &str, i: usize| {
            format!(
                "{{\"response\":{{\"content\":\"\",\"tool_calls\":[{{\"name\":\"{tool}\",\"args\":{{\"q\":\"{i}\"}}}}]}}}}\n\
                 {{\"response\":{{\"content\":\"done {i}\"}}}}\n"
            )
        };
        for i in 0..6 {
            write(&format!("r{i}.jsonl"), &calling("lookup", i));
        }
        write("bad.jsonl", &calling("lokup", 9));
        let pipeline = Pipeline::load(&dir.path().join("p.toml")).expect("the pipeline loads");
        let file = DatasetFile { path: dir.path().join("d.jsonl"), dataset: "d".into() };
        // the cases have no metric blocks to check
        let mut parser = CaseParser::new(|_, _| None);
        parser.recording_cache = 2;
        let parse = |parser: &mut CaseParser, rec: &str| {
            let line = format!(r#"{{"id": "c", "agent": "a", "turns": ["hi"], "recordings": ["{rec}"]}}"#);
            parser.parse(&pipeline, &file, 1, &line, Recordings::Validate)
        };
        let refused = |result: Result<Case, InputError>| {
            let message = result.expect_err("a call of an unknown tool").to_string();
            assert!(message.contains("recording bad.jsonl calls tool \"lokup\""), "{message}");
        };

        refused(parse(&mut parser, "bad.jsonl"));
        let first = parse(&mut parser, "r0.jsonl").expect("r0 validates").recordings[0].key();
        for i in 1..6 {
            let case = parse(&mut parser, &format!("r{i}.jsonl")).expect("validates");
            assert_ne!(case.recordings[0].key(), first, "r{i} is another recording");
            assert!(parser.recordings.len() <= 2 && parser.calls.len() <= 2, "at most the bound is kept");
        }
        assert!(!parser.recordings.contains_key(&dir.path().join("r0.jsonl")), "r0 was forgotten");
        assert_eq!(parse(&mut parser, "r0.jsonl").expect("r0 again").recordings[0].key(), first);
        refused(parse(&mut parser, "bad.jsonl"));
    }
}
