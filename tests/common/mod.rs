//! Shared helpers for the end-to-end tests: a throw-away copy of the project per test,
//! a way to run the real `stateval` binary in it, and readers for what it leaves.
//!
//! Every test works in its own temporary copy of `pipeline/`, `datasets/` and
//! `fixtures/`, so reports and stores never land in the repository and tests can run
//! in parallel.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The report files `pipeline/ci.toml` writes ([report]).
pub const CI_REPORTS: [&str; 5] =
    ["reports/junit.xml", "reports/results.tap", "reports/report.json", "reports/summary.md", "reports/report.html"];

/// The report files `pipeline/failing.toml` writes ([report]).
pub const FAILING_REPORTS: [&str; 5] = [
    "reports/failing/junit.xml",
    "reports/failing/results.tap",
    "reports/failing/report.json",
    "reports/failing/summary.md",
    "reports/failing/report.html",
];

/// Case ids of `datasets/examples/*.jsonl`, in the order the runner reports them
/// (files sorted by name, then line order).
pub const CI_CASES: [&str; 15] = [
    "status-hang-falls-back-to-cache",
    "metrics-slow-within-timeout",
    "page-error-reported",
    "deploys-recover-after-two-hangs",
    "resolve-login-ticket",
    "refund-email-bounces",
    "docs-session-episodic-expiry",
    "greeting-support",
    "balance-check",
    "pay-known-payee",
    "remember-default-payee",
    "invoice-injection-blocked",
    "invoice-clean-paid",
    "close-account-needs-approval",
    "greeting-inline",
];

/// Case ids of `datasets/failing/mixed.jsonl`, in line order.
pub const FAILING_CASES: [&str; 6] = [
    "passes-alongside",
    "replay-miss",
    "wrong-expectation",
    "diverged-request",
    "tool-loop",
    "status-wedged-no-fallback",
];

/// What one invocation of the binary did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// Panics with both streams when the exit code is not `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }
}

/// A temporary copy of the project.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

impl Project {
    /// A fresh copy of `pipeline/`, `datasets/` and `fixtures/`.
    /// A copy of the project holding only the core suites these end-to-end tests were
    /// written against (`CORE_DATASETS`), so their exact counts do not move whenever an
    /// example dataset is added; new example files are tested by their own test files.
    pub fn new() -> Self {
        let project = Self::full();
        for entry in files_in(&project.path().join("datasets")) {
            let rel =
                entry.strip_prefix(project.path()).expect("inside the project").to_string_lossy().replace('\\', "/");
            if !CORE_DATASETS.contains(&rel.as_str()) {
                std::fs::remove_file(&entry).unwrap_or_else(|e| panic!("{}: {e}", entry.display()));
            }
        }
        // ci.toml also gates and globs suites outside the core: drop exactly those lines
        let ci = project.read("pipeline/ci.toml");
        let mut core = ci.clone();
        for (line, replacement) in CI_NON_CORE_LINES {
            assert!(core.contains(line), "pipeline/ci.toml no longer has {line:?}: update CI_NON_CORE_LINES");
            core = core.replace(line, replacement);
        }
        project.write("pipeline/ci.toml", core);
        project
    }

    /// A copy of the whole project: every pipeline, dataset and fixture.
    pub fn full() -> Self {
        let project = Self::empty();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for dir in ["pipeline", "datasets", "fixtures"] {
            copy_dir(&repo.join(dir), &project.path().join(dir));
        }
        project
    }

    /// An empty temporary directory.
    pub fn empty() -> Self {
        Project { dir: tempfile::Builder::new().prefix("stateval-e2e-").tempdir().expect("create a temp dir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path().join(rel)
    }

    /// `stateval` with its working directory in the project.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("stateval").expect("the stateval binary is built");
        // CI=true changes behaviour: bless refuses, and a run without a golden fails (a
        // copy of the project has no goldens/ unless a test copies or blesses them);
        // tests that mean CI set it themselves (cli_golden's `in_ci`)
        cmd.current_dir(self.path()).env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE").env_remove("CI");
        cmd
    }

    /// Run `stateval ARGS...` in the project and collect what it did.
    pub fn stateval(&self, args: &[&str]) -> Outcome {
        let output = self.cmd().args(args).output().expect("run stateval");
        Outcome {
            code: output.status.code().expect("stateval exited normally, not by a signal"),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }

    pub fn exists(&self, rel: impl AsRef<Path>) -> bool {
        self.join(rel).exists()
    }

    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        let path = self.join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    pub fn read_bytes(&self, rel: impl AsRef<Path>) -> Vec<u8> {
        let path = self.join(rel);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent directories");
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    pub fn json(&self, rel: impl AsRef<Path>) -> Value {
        let rel = rel.as_ref();
        serde_json::from_str(&self.read(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
    }

    /// Replace the only occurrence of `from` in line `line_no` (1-based) of a text file;
    /// returns the edited line. Panics unless `from` occurs exactly once in that line,
    /// so a fixture change cannot silently turn a broken-input test into a no-op.
    #[track_caller]
    pub fn edit_line(&self, rel: &str, line_no: usize, from: &str, to: &str) -> String {
        let text = self.read(rel);
        let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        let line = &mut lines[line_no - 1];
        assert_eq!(line.matches(from).count(), 1, "{rel}:{line_no} must contain {from:?} exactly once: {line}");
        *line = line.replacen(from, to, 1);
        let edited = line.clone();
        self.write(rel, lines.join("\n"));
        edited
    }

    /// Line `line_no` (1-based) of a text file.
    pub fn line(&self, rel: &str, line_no: usize) -> String {
        self.read(rel).split('\n').nth(line_no - 1).unwrap_or_else(|| panic!("{rel} has no line {line_no}")).to_string()
    }

    /// Every event log under `.stateval/runs/<run>/<case>/<k>.jsonl`, relative to the
    /// project, sorted.
    pub fn log_files(&self) -> Vec<String> {
        self.files_under(".stateval/runs")
            .into_iter()
            .filter(|p| {
                let parts: Vec<&str> = p.split('/').collect();
                parts.len() == 5
                    && parts[4]
                        .strip_suffix(".jsonl")
                        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect()
    }

    /// The run directories under `.stateval/runs`, sorted.
    pub fn run_ids(&self) -> Vec<String> {
        let dir = self.join(".stateval/runs");
        let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
        let mut ids: Vec<String> = entries
            .map(|e| e.expect("read a run directory entry"))
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        ids.sort();
        ids
    }

    /// Every file under `rel` (recursively), relative to the project with `/`, sorted.
    pub fn files_under(&self, rel: &str) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.join(rel), &mut out);
        let mut rels: Vec<String> = out
            .into_iter()
            .map(|p| p.strip_prefix(self.path()).expect("inside the project").to_string_lossy().replace('\\', "/"))
            .collect();
        rels.sort();
        rels
    }

    /// Contents of every file under `rel`, keyed by project-relative path.
    pub fn snapshot(&self, rel: &str) -> BTreeMap<String, Vec<u8>> {
        self.files_under(rel).into_iter().map(|p| (p.clone(), self.read_bytes(&p))).collect()
    }

    /// Contents of the given files, keyed by path.
    pub fn snapshot_files(&self, rels: &[&str]) -> BTreeMap<String, Vec<u8>> {
        rels.iter().map(|p| (p.to_string(), self.read_bytes(p))).collect()
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Lines of pipeline/ci.toml about suites outside the core, and what the core copy has
/// instead.
const CI_NON_CORE_LINES: [(&str, &str); 4] = [
    (
        r#"datasets = ["datasets/examples/*.jsonl", "datasets/long_horizon/*.jsonl", "datasets/security/*.jsonl"]"#,
        r#"datasets = ["datasets/examples/*.jsonl"]"#,
    ),
    (
        "tags.security = { min_pass_rate = 1.0, min_cases = 110, max_asr = 0.0, min_benign_utility = 1.0 }",
        "tags.security = { min_pass_rate = 1.0, min_cases = 1, max_asr = 0.0, min_benign_utility = 1.0 }",
    ),
    ("tags.long-horizon = { min_pass_rate = 1.0, min_cases = 3 }\n", ""),
    ("reliability = { \"reliability.overall\" = 0.9, \"consistency.outcome\" = 0.9 }\n", ""),
];

/// The dataset files `Project::new` keeps.
pub const CORE_DATASETS: [&str; 4] = [
    "datasets/examples/recovery.jsonl",
    "datasets/examples/support.jsonl",
    "datasets/examples/treasury.jsonl",
    "datasets/failing/mixed.jsonl",
];

/// Every file under `dir`, recursively, sorted.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            out.extend(files_in(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        }
    }
}

/// Names of the files whose contents differ between two snapshots (or exist in only one).
pub fn differing(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| a.get(*n) != b.get(*n)).cloned().collect()
}

/// Split a log into its lines, each with its trailing `\n`.
pub fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

/// The events of a log, parsed.
pub fn events_of(bytes: &[u8]) -> Vec<Value> {
    lines_of(bytes).iter().map(|l| serde_json::from_slice(l).expect("a log line is JSON")).collect()
}

/// The members each kind of event in the log at `path` carries that its typed payload
/// does not declare (`stateval::event::payload`), by kind; empty when every member is
/// declared. `source` and `absent`, which `stateval import` may add to any event, are
/// declared for every kind.
pub fn undeclared_members(path: &Path) -> BTreeMap<String, BTreeSet<String>> {
    const ADDED_BY_IMPORT: [&str; 2] = ["source", "absent"];
    let log = stateval::event::reader::read_log(path).unwrap_or_else(|e| panic!("{e}"));
    let mut undeclared: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &log.events {
        let declared = stateval::event::payload::members(e);
        for key in e.data.tree().as_object().map(|o| o.keys()).into_iter().flatten() {
            if !declared.iter().any(|(name, _)| name == key) && !ADDED_BY_IMPORT.contains(&key.as_str()) {
                undeclared.entry(e.kind.to_string()).or_default().insert(key.clone());
            }
        }
    }
    undeclared
}

/// The `hash` of the last line of a log, i.e. its head.
pub fn head_of(bytes: &[u8]) -> String {
    let events = events_of(bytes);
    events.last().expect("a non-empty log")["hash"].as_str().expect("hash is a string").to_string()
}

/// `error: PATH:LINE:COL: MESSAGE` → (PATH, LINE, COL, MESSAGE).
#[track_caller]
pub fn parse_located_error(line: &str) -> (String, usize, usize, String) {
    let rest = line.strip_prefix("error: ").unwrap_or_else(|| panic!("not an `error: ` line: {line:?}"));
    let mut parts = rest.splitn(4, ':');
    let (Some(path), Some(l), Some(c), Some(message)) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        panic!("not `error: PATH:LINE:COL: MESSAGE`: {line:?}");
    };
    let l = l.parse().unwrap_or_else(|_| panic!("line is not a number in {line:?}"));
    let c = c.parse().unwrap_or_else(|_| panic!("column is not a number in {line:?}"));
    let message = message.strip_prefix(' ').unwrap_or_else(|| panic!("no space after the column in {line:?}"));
    (path.to_string(), l, c, message.to_string())
}

/// 1-based column (in characters) of the first occurrence of `needle` in `line`.
#[track_caller]
pub fn column_of(line: &str, needle: &str) -> usize {
    let at = line.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {line:?}"));
    line[..at].chars().count() + 1
}

/// The Python with `openai`, `anthropic`, `mcp` and `junitparser` installed (the
/// virtual environment `.ci/run` makes from `tests/python/requirements.txt`), or why
/// there is none.
pub fn sdk_python() -> Option<PathBuf> {
    match std::env::var_os("STATEVAL_SDK_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None if std::env::var_os("STATEVAL_REQUIRE_SDK").is_some() => {
            panic!("STATEVAL_REQUIRE_SDK is set but STATEVAL_SDK_PYTHON is not: the SDK suites must run")
        }
        None => {
            eprintln!(
                "skipped: STATEVAL_SDK_PYTHON is not set (the SDK conformance suites need a Python with \
                 openai, anthropic and mcp; .ci/run makes one)"
            );
            None
        }
    }
}

/// Leave proof that an SDK suite ran to its end (`.ci/run` checks for it): a suite
/// that returns early because the SDKs are missing leaves none.
pub fn mark_ran(suite: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-suites-ran");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(suite), b"ran\n").unwrap();
}

/// A marker no other process carries: a `sleep` of this many seconds is found by its
/// command line, whatever PID namespace it runs in (an isolated agent's `$!` is a PID
/// of its own namespace, which means nothing outside it).
#[allow(dead_code)]
pub fn marker_seconds() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}.{:06}{:03}", 300 + n, std::process::id() % 1_000_000, n)
}

/// The processes (not zombies) whose command line holds `arg` as an argument.
#[allow(dead_code)]
pub fn processes_with_arg(arg: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"));
            alive
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).any(|part| part == arg.as_bytes()))
        })
        .collect()
}

/// Whether every process carrying `arg` is gone within five seconds.
#[allow(dead_code)]
pub fn gone_within_5s(arg: &str) -> bool {
    (0..100).any(|_| {
        let gone = processes_with_arg(arg).is_empty();
        if !gone {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        gone
    })
}

/// `stateval ARGS…` started in `p`, returned once a process carrying `marker` (the
/// agent's `sleep`, see [`marker_seconds`]) runs; its output goes nowhere.
#[allow(dead_code)]
pub fn start_until_marker(p: &Project, args: &[&str], marker: &str) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_stateval"))
        .current_dir(p.path())
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start stateval");
    let started = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        !processes_with_arg(marker).is_empty()
    });
    assert!(started, "the agent never started its `sleep {marker}`");
    child
}
