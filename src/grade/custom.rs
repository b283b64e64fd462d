//! Custom graders: `{"custom": {"command": ["python3", "graders/tone.py"], "timeout_ms": 5000}}`.
//!
//! A team's own program judges one extracted value. stateval writes
//! `{"target", "value", "case", "run"}` as canonical JSON to its stdin and reads
//! `{"pass": bool, "score"?: number, "reason"?: string}` from its stdout. Everything
//! here is pure: the spec, the input, and how a finished process's output is read. The
//! runner owns the process (spawn, timeout, kill: `runner::graders`).
//!
//! The digests of the input and of the (canonical) output go into the log as a
//! `grader_called` event, so a golden catches a grader that changed its verdict, its
//! score or its reason, and a changed input shows as a changed `input_digest`.
//! Stderr never enters the log: it carries machine-specific paths (tracebacks), and a
//! golden must be the same on every machine. It is shown in the case error instead.

use serde_json::{Map, Value, json};

use crate::canon::{self, Context};
use crate::dataset::expect::brief;
use crate::dataset::expect::custom::CustomSpec;
use crate::event::payload::{Out, Rendered, write};

/// How much of a failed grader's stderr a case error shows: the end, where the error is.
pub const STDERR_TAIL_CHARS: usize = 800;

/// Largest stdout read from a grader; its verdict is a few hundred bytes.
pub const MAX_STDOUT_BYTES: usize = 1 << 20;

/// What the grader is told about the case it grades.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseInfo {
    pub id: String,
    pub dataset: String,
    pub tags: Vec<String>,
    pub turns: Vec<String>,
    /// Run index k.
    pub run: usize,
}

/// The grader's stdin: `{"target", "value", "case": {id, dataset, tags, turns}, "run"}`.
pub fn input(target: &str, value: &Value, case: &CaseInfo) -> Value {
    json!({
        "target": target,
        "value": value,
        "case": {"id": case.id, "dataset": case.dataset, "tags": case.tags, "turns": case.turns},
        "run": case.run,
    })
}

/// How a grader process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Still running at its deadline; its process group was killed.
    TimedOut,
    /// It could not be started at all.
    NotStarted(String),
}

/// A finished grader process, as the runner saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    /// The end of its stderr (at most [`STDERR_TAIL_CHARS`] characters are shown).
    pub stderr: Vec<u8>,
}

/// A grader's verdict, read from its stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct GraderVerdict {
    pub pass: bool,
    pub score: Option<f64>,
    pub reason: Option<String>,
    /// The verdict as JSON, canonicalised for its digest.
    pub output: Value,
}

/// Why a grader call is a case error. `kind` and `message` are deterministic (they go
/// into the log); `stderr` is the tail shown to a person, never logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `timeout`, `exit`, `signal`, `not_started`, `bad_output`.
    pub kind: &'static str,
    pub message: String,
    pub stderr: String,
}

impl Failure {
    /// One line for the case error: the message and the stderr tail.
    pub fn explain(&self, spec: &CustomSpec) -> String {
        let tail = if self.stderr.trim().is_empty() {
            "(stderr was empty)".to_string()
        } else {
            format!("stderr: {}", self.stderr.trim().replace('\n', " | "))
        };
        format!("custom grader `{}` {}; {tail}", spec.command.join(" "), self.message)
    }
}

/// Read a finished grader: a zero exit with exactly one JSON object on stdout holding
/// a boolean `pass` (and optionally a number `score` and a string `reason`, nothing else).
pub fn interpret(spec: &CustomSpec, finished: &Finished) -> Result<GraderVerdict, Failure> {
    let stderr = tail(&finished.stderr);
    let fail = |kind: &'static str, message: String| Failure { kind, message, stderr: stderr.clone() };
    match &finished.exit {
        Exit::Code(0) => {}
        Exit::Code(code) => return Err(fail("exit", format!("exited with status {code}"))),
        Exit::Signal(signal) => return Err(fail("signal", format!("was killed by signal {signal}"))),
        Exit::TimedOut => {
            return Err(fail("timeout", format!("timed out after {} ms and was killed", spec.timeout_ms)));
        }
        Exit::NotStarted(why) => return Err(fail("not_started", format!("could not start: {why}"))),
    }
    let text = std::str::from_utf8(&finished.stdout)
        .map_err(|_| fail("bad_output", "printed stdout that is not UTF-8".into()))?;
    let value = crate::diag::parse_json_strict(text.trim()).map_err(|(_, _, message)| {
        let shown = brief(&Value::String(text.trim().to_string()));
        fail("bad_output", format!("printed bad JSON ({message}): {shown}"))
    })?;
    let Some(obj) = value.as_object() else {
        return Err(fail("bad_output", format!("printed {}, not a JSON object", brief(&value))));
    };
    read_verdict(obj).map_err(|m| fail("bad_output", m))
}

fn read_verdict(obj: &Map<String, Value>) -> Result<GraderVerdict, String> {
    const FIELDS: [&str; 3] = ["pass", "score", "reason"];
    if let Some(key) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        let hint =
            crate::diag::did_you_mean(key, FIELDS).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
        return Err(format!("printed an unknown field \"{key}\"{hint}; a verdict has pass, score?, reason?"));
    }
    let pass = match obj.get("pass") {
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("printed \"pass\": {}, not a boolean", brief(other))),
        None => return Err("printed no \"pass\" (a verdict is {\"pass\": true|false, ...})".into()),
    };
    let score = match obj.get("score") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| format!("printed \"score\": {}, not a number", brief(v)))?),
    };
    let reason = match obj.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => return Err(format!("printed \"reason\": {}, not a string", brief(v))),
    };
    canon::check_ijson(&Value::Object(obj.clone()))
        .map_err(|e| format!("printed a verdict that is not I-JSON: {e}"))?;
    Ok(GraderVerdict { pass, score, reason, output: Value::Object(obj.clone()) })
}

/// The last [`STDERR_TAIL_CHARS`] characters of stderr, lossily decoded.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let count = text.chars().count();
    if count <= STDERR_TAIL_CHARS {
        return text.into_owned();
    }
    let cut: String = text.chars().skip(count - STDERR_TAIL_CHARS).collect();
    format!("...{cut}")
}

/// `grader_called` for a call that produced a verdict.
pub fn called_event(target: &str, spec: &CustomSpec, input: &Value, verdict: &GraderVerdict) -> Rendered {
    let (input_digest, output_digest) = (digest_of(input), digest_of(&verdict.output));
    Rendered::of(&write::GraderCalled {
        target: target.into(),
        command: Out::Array(&spec.command),
        input_digest: input_digest.as_ref().into(),
        output_digest: output_digest.as_ref().into(),
        pass: verdict.pass.into(),
        score: verdict.score.map_or(Out::Absent, Out::Float),
        reason: verdict.reason.as_ref().map_or(Out::Absent, Out::from),
        error: Out::Absent,
        message: Out::Absent,
    })
}

/// `grader_called` for a call that failed (no output digest: there is no verdict).
pub fn failed_event(target: &str, spec: &CustomSpec, input: &Value, failure: &Failure) -> Rendered {
    let input_digest = digest_of(input);
    Rendered::of(&write::GraderCalled {
        target: target.into(),
        command: Out::Array(&spec.command),
        input_digest: input_digest.as_ref().into(),
        output_digest: Out::Absent,
        pass: Out::Absent,
        score: Out::Absent,
        reason: Out::Absent,
        error: failure.kind.into(),
        message: (&failure.message).into(),
    })
}

/// Digest of a JSON value's canonical bytes (`null` if it cannot be canonicalised,
/// which [`read_verdict`] and the input's own canonicalisation rule out).
fn digest_of(value: &Value) -> Option<canon::Digest> {
    canon::canonical_digest(Context::Content, value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CustomSpec {
        CustomSpec { command: vec!["python3".into(), "g.py".into()], timeout_ms: 5000, env_passthrough: Vec::new() }
    }

    fn finished(exit: Exit, stdout: &str, stderr: &str) -> Finished {
        Finished { exit, stdout: stdout.into(), stderr: stderr.into() }
    }

    #[test]
    fn a_zero_exit_with_a_verdict_object_is_read_with_its_score_and_reason() {
        let v = interpret(
            &spec(),
            &finished(Exit::Code(0), "{\"pass\": true, \"score\": 4.5, \"reason\": \"kind\"}\n", ""),
        )
        .unwrap();
        assert_eq!((v.pass, v.score, v.reason.as_deref()), (true, Some(4.5), Some("kind")));
    }

    #[test]
    fn every_way_a_grader_can_fail_is_a_failure_with_its_stderr_tail() {
        let cases = [
            (finished(Exit::Code(2), "", "Traceback\nValueError: no\n"), "exit", "exited with status 2"),
            (finished(Exit::TimedOut, "", ""), "timeout", "timed out after 5000 ms"),
            (finished(Exit::Signal(9), "", ""), "signal", "signal 9"),
            (finished(Exit::Code(0), "pass", ""), "bad_output", "printed bad JSON"),
            (finished(Exit::Code(0), "[true]", ""), "bad_output", "not a JSON object"),
            (finished(Exit::Code(0), "{\"score\": 1}", ""), "bad_output", "no \"pass\""),
            (finished(Exit::Code(0), "{\"pass\": \"yes\"}", ""), "bad_output", "not a boolean"),
            (
                finished(Exit::Code(0), "{\"pass\": true, \"passed\": true}", ""),
                "bad_output",
                "unknown field \"passed\"",
            ),
            (finished(Exit::Code(0), "{\"pass\": true, \"pass\": false}", ""), "bad_output", "duplicate"),
        ];
        for (f, kind, needle) in cases {
            let failure = interpret(&spec(), &f).unwrap_err();
            assert_eq!(failure.kind, kind, "{failure:?}");
            assert!(failure.message.contains(needle), "{needle:?} not in {:?}", failure.message);
        }
        let failure = interpret(&spec(), &finished(Exit::Code(1), "", "line one\nValueError: bad tone\n")).unwrap_err();
        // the case error ends with the stderr tail, on one line
        assert!(
            failure.explain(&spec()).ends_with("stderr: line one | ValueError: bad tone"),
            "{}",
            failure.explain(&spec())
        );
    }

    #[test]
    fn only_the_end_of_a_long_stderr_is_kept() {
        let long = format!("{}END", "x".repeat(5000));
        let t = tail(long.as_bytes());
        assert!(t.ends_with("END") && t.chars().count() == STDERR_TAIL_CHARS + 3, "{}", t.len());
    }

    #[test]
    fn the_logged_digests_change_with_the_verdict_and_the_input_but_not_with_whitespace() {
        let case = CaseInfo { id: "c".into(), dataset: "d".into(), tags: vec![], turns: vec!["hi".into()], run: 0 };
        let input = input("final_response", &json!("Hello"), &case);
        let read = |out: &str| interpret(&spec(), &finished(Exit::Code(0), out, "")).unwrap();
        let a = called_event("final_response", &spec(), &input, &read("{\"pass\":true,\"score\":5}"));
        let b = called_event("final_response", &spec(), &input, &read("{ \"score\": 5, \"pass\": true }\n"));
        let c = called_event("final_response", &spec(), &input, &read("{\"pass\":true,\"score\":4}"));
        assert_eq!(a, b);
        let member = |e: &Rendered, name: &str| e.data.as_ref().unwrap().member(name).raw().to_string();
        assert_ne!(member(&a, "output_digest"), member(&c, "output_digest"));
        let other = super::input("final_response", &json!("Hi"), &case);
        let d = called_event("final_response", &spec(), &other, &read("{\"pass\":true}"));
        assert_ne!(member(&a, "input_digest"), member(&d, "input_digest"));
    }
}
