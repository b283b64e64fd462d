//! Grading one run with calls out: custom graders and recorded judges.
//!
//! [`Grading`] is the [`Caller`] the runner hands to the matchers while a run's log is
//! still open. It decides everything a call means — the grader's stdin, how its exit and
//! stdout are read, which judge recording key each sample is, how votes reduce — and
//! keeps, in call order, the events to write (`grader_called`, `judge_called`,
//! `judge_verdict`) and the case errors. The I/O itself (running a process, reading a
//! rubric, looking a key up in a judge recording) is behind [`Backend`], which the
//! runner implements; tests use a fake one.

use serde_json::{Value, json};

use super::custom::{self, CaseInfo, Finished};
use super::judge::{self, JudgeKey};
use super::matcher::{Caller, Matched};
use crate::canon;
use crate::dataset::expect::brief;
use crate::dataset::expect::custom::CustomSpec;
use crate::dataset::expect::judge::JudgeSpec;
use crate::event::payload::Rendered;
use crate::pipeline::judges::JudgeProfile;

/// A recorded judge answer, as a judge recording serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAnswer {
    /// The judge's response text: its JSON answer.
    pub content: String,
    /// `{input_tokens, output_tokens}` as recorded.
    pub usage: Value,
    /// `file:line` of the recorded line, for errors.
    pub at: String,
}

/// A judge sample that could not be served. Never answered live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeMiss {
    /// `miss` (no line has the key) or `changed` (the line changed after validation).
    pub kind: &'static str,
    /// One line naming the key, the recording and what to do.
    pub message: String,
    /// JSON Pointers where the nearest recorded request differs from the one asked.
    pub pointers: Vec<String>,
}

/// The I/O a grading needs, provided by the runner.
pub trait Backend {
    /// Run a custom grader with `stdin` and wait for it (at most its timeout).
    fn run(&mut self, spec: &CustomSpec, stdin: &[u8]) -> Finished;
    /// The text of a rubric file (a path relative to the pipeline's base).
    fn rubric(&mut self, path: &str) -> Result<String, String>;
    /// A `[judges.NAME]` profile.
    fn judge_profile(&self, name: &str) -> Option<JudgeProfile>;
    /// The recorded answer for `key` in the profile's judge recording; `request` is the
    /// rendered request, to say where the nearest recorded one differs on a miss.
    fn judge_answer(&mut self, profile: &str, key: &JudgeKey, request: &Value) -> Result<RecordedAnswer, JudgeMiss>;
}

/// Custom graders and judges for one run of one case.
pub struct Grading<'b> {
    backend: &'b mut dyn Backend,
    case: CaseInfo,
    target: String,
    events: Vec<Rendered>,
    errors: Vec<String>,
}

/// What a grading leaves: the events to write before `run_completed`, in call order,
/// and the case errors (a grader that could not answer, a judge recording miss).
#[derive(Debug, Default, PartialEq)]
pub struct Graded {
    pub events: Vec<Rendered>,
    pub errors: Vec<String>,
}

impl<'b> Grading<'b> {
    pub fn new(backend: &'b mut dyn Backend, case: CaseInfo) -> Self {
        Grading { backend, case, target: String::new(), events: Vec::new(), errors: Vec::new() }
    }

    pub fn finish(self) -> Graded {
        Graded { events: self.events, errors: self.errors }
    }

    /// A call that could not be made or read: a case error saying all of it (`full`),
    /// and a failed outcome saying what failed (`short`), so reports do not repeat it.
    fn error(&mut self, short: String, full: String) -> Matched {
        self.errors.push(format!("{}: {full}", self.target));
        Matched::fail(format!("{short} (a case error)"))
    }

    fn error_same(&mut self, message: String) -> Matched {
        self.error(message.clone(), message)
    }
}

impl Caller for Grading<'_> {
    fn begin(&mut self, target: &str) {
        self.target = target.to_string();
    }

    fn custom(&mut self, spec: &CustomSpec, value: &Value) -> Matched {
        let input = custom::input(&self.target, value, &self.case);
        let mut stdin = match canon::to_canonical(&input) {
            Ok(bytes) => bytes,
            Err(e) => return self.error_same(format!("custom grader `{}`: its input {e}", spec.command.join(" "))),
        };
        stdin.push(b'\n');
        let finished = self.backend.run(spec, &stdin);
        match custom::interpret(spec, &finished) {
            Ok(verdict) => {
                self.events.push(custom::called_event(&self.target, spec, &input, &verdict));
                let score = verdict.score.map(|s| format!(" (score {})", brief(&json!(s)))).unwrap_or_default();
                let why = verdict.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                let said = if verdict.pass { "passed" } else { "failed" };
                let reason = format!("custom grader `{}` {said}{score}{why}", spec.command.join(" "));
                if verdict.pass { Matched::pass(reason) } else { Matched::fail(reason) }
            }
            Err(failure) => {
                self.events.push(custom::failed_event(&self.target, spec, &input, &failure));
                let short = format!("custom grader `{}` {}", spec.command.join(" "), failure.message);
                self.error(short, failure.explain(spec))
            }
        }
    }

    fn judge(&mut self, spec: &JudgeSpec, value: &Value) -> Matched {
        let name = &spec.profile;
        let Some(profile) = self.backend.judge_profile(name) else {
            return self.error_same(format!("judge profile \"{name}\" is not defined ([judges.{name}])"));
        };
        let rubric = match self.backend.rubric(&spec.rubric) {
            Ok(text) => text,
            Err(e) => return self.error_same(format!("judge {name}: {e}")),
        };
        let request = match spec.request(&profile, &rubric, &self.target, value) {
            Ok(r) => r,
            Err(e) => return self.error_same(format!("judge {name}: the request {e}")),
        };
        let mut votes = Vec::new();
        for sample in 0..spec.samples {
            let key = request.key(sample);
            let answer = match self.backend.judge_answer(name, &key, &request.value) {
                Ok(answer) => answer,
                Err(miss) => {
                    let data = judge::failed_event(&self.target, spec, &key, miss.kind, &miss.pointers);
                    self.events.push(data);
                    let short = format!("judge {name}: no recorded answer for key {key}");
                    return self.error(short, format!("judge {name}: {}", miss.message));
                }
            };
            match spec.read_answer(&answer.content) {
                Ok((read, vote)) => {
                    let data = judge::called_event(&self.target, spec, &key, &read, &answer.usage);
                    self.events.push(data);
                    votes.push(vote);
                }
                Err(e) => {
                    self.events.push(judge::failed_event(&self.target, spec, &key, "bad_answer", &[]));
                    let short = format!("judge {name}: unreadable answer at {}", answer.at);
                    return self.error(short, format!("judge {name}: {e} ({}, key {key})", answer.at));
                }
            }
        }
        let shown = votes.iter().map(brief).collect::<Vec<_>>().join(", ");
        let reduced = match judge::reduce(spec.reduce, &votes) {
            Ok(reduced) => reduced,
            Err(e) => return self.error_same(format!("judge {name}: {e}")),
        };
        let outcome = match &reduced {
            None => Matched::fail(format!("judge {name}: no {} among the votes [{shown}]", spec.reduce.as_str())),
            Some(v) => {
                let inner = spec.pass.apply(Some(v));
                let reason =
                    format!("judge {name} voted [{shown}], {} {}: {}", spec.reduce.as_str(), brief(v), inner.reason);
                Matched { passed: inner.passed, reason }
            }
        };
        let data = judge::verdict_event(&self.target, spec, &request, &votes, reduced.as_ref(), outcome.passed);
        self.events.push(data);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dataset::expect::Matcher;
    use crate::event::Kind;
    use crate::grade::custom::Exit;

    /// Serves custom graders from a fixed output and judges from a map of keys.
    #[derive(Default)]
    struct Fake {
        finished: Option<Finished>,
        answers: BTreeMap<JudgeKey, String>,
        asked: Vec<JudgeKey>,
        stdin: Vec<Vec<u8>>,
    }

    impl Backend for Fake {
        fn run(&mut self, _: &CustomSpec, stdin: &[u8]) -> Finished {
            self.stdin.push(stdin.to_vec());
            self.finished.clone().unwrap()
        }
        fn rubric(&mut self, path: &str) -> Result<String, String> {
            Ok(format!("rubric at {path}"))
        }
        fn judge_profile(&self, name: &str) -> Option<JudgeProfile> {
            (name == "tone").then(|| JudgeProfile {
                recordings: "j.jsonl".into(),
                model: "m".into(),
                temperature: None,
                top_p: None,
                max_tokens: None,
                seed: None,
                upstream: None,
            })
        }
        fn judge_answer(&mut self, _: &str, key: &JudgeKey, _: &Value) -> Result<RecordedAnswer, JudgeMiss> {
            self.asked.push(*key);
            match self.answers.get(key) {
                Some(content) => {
                    Ok(RecordedAnswer { content: content.clone(), usage: json!({}), at: "j.jsonl:1".into() })
                }
                None => Err(JudgeMiss {
                    kind: "miss",
                    message: format!("no answer for key {key}"),
                    pointers: vec!["/value".into()],
                }),
            }
        }
    }

    fn case() -> CaseInfo {
        CaseInfo { id: "c".into(), dataset: "d".into(), tags: vec![], turns: vec!["hi".into()], run: 1 }
    }

    fn grade(matcher: Value, fake: &mut Fake, value: Value) -> (Matched, Graded) {
        let m = Matcher::compile(&matcher).unwrap();
        let mut grading = Grading::new(fake, case());
        grading.begin("final_response");
        let o = m.apply_with(Some(&value), &mut grading);
        (o, grading.finish())
    }

    /// The keys of `samples` samples of the `tone` judge's request about `value`.
    fn keys(matcher: &Value, value: &Value, samples: u32) -> Vec<JudgeKey> {
        let Matcher::Judge(spec) = Matcher::compile(matcher).unwrap() else { panic!("a judge") };
        let profile = Fake::default().judge_profile("tone").unwrap();
        let request = spec.request(&profile, &format!("rubric at {}", spec.rubric), "final_response", value).unwrap();
        (0..samples).map(|i| request.key(i)).collect()
    }

    #[test]
    fn a_custom_grader_gets_the_target_value_case_and_run_and_its_verdict_is_logged() {
        let mut fake = Fake {
            finished: Some(Finished {
                exit: Exit::Code(0),
                stdout: b"{\"pass\": false, \"reason\": \"curt\"}".to_vec(),
                stderr: vec![],
            }),
            ..Fake::default()
        };
        let (o, graded) = grade(json!({"custom": {"command": ["g"]}}), &mut fake, json!("Fine."));
        assert!(!o.passed && o.reason.ends_with("failed: curt"), "{}", o.reason);
        assert!(graded.errors.is_empty(), "a failing verdict is not a case error");
        let stdin: Value = serde_json::from_slice(&fake.stdin[0]).unwrap();
        assert_eq!(
            stdin,
            json!({"target": "final_response", "value": "Fine.", "run": 1,
                                 "case": {"id": "c", "dataset": "d", "tags": [], "turns": ["hi"]}})
        );
        assert_eq!(graded.events.len(), 1);
        assert_eq!(graded.events[0].kind, Kind::GraderCalled);
        assert_eq!(graded.events[0].data.as_ref().unwrap().member("pass").as_bool(), Some(false));
    }

    #[test]
    fn a_grader_that_cannot_answer_is_a_case_error_even_under_not() {
        let mut fake = Fake {
            finished: Some(Finished { exit: Exit::TimedOut, stdout: vec![], stderr: b"sleeping".to_vec() }),
            ..Fake::default()
        };
        let (o, graded) = grade(json!({"not": {"custom": {"command": ["g"], "timeout_ms": 50}}}), &mut fake, json!(1));
        // `not` turns the failed outcome into a pass, but the error still fails the run
        assert!(o.passed);
        assert_eq!(graded.errors.len(), 1);
        assert!(graded.errors[0].contains("timed out after 50 ms") && graded.errors[0].ends_with("stderr: sleeping"));
        assert_eq!(graded.events[0].data.as_ref().unwrap().member("error").as_str().as_deref(), Some("timeout"));
    }

    #[test]
    fn judge_votes_are_one_recording_each_and_reduce_before_the_pass_matcher() {
        let matcher =
            json!({"judge": {"rubric": "r.md", "profile": "tone", "samples": 3, "pass": {"schema": {"minimum": 4}}}});
        let mut fake = Fake::default();
        for (key, score) in keys(&matcher, &json!("Hi"), 3).into_iter().zip([5, 3, 5]) {
            fake.answers.insert(key, format!("{{\"score\": {score}}}"));
        }
        let (o, graded) = grade(matcher.clone(), &mut fake, json!("Hi"));
        assert!(o.passed, "{}", o.reason);
        assert_eq!(o.reason.split(':').next().unwrap(), "judge tone voted [5, 3, 5], majority 5");
        assert_eq!(fake.asked.iter().map(|k| k.sample).collect::<Vec<_>>(), vec![0, 1, 2]);
        let kinds: Vec<Kind> = graded.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![Kind::JudgeCalled, Kind::JudgeCalled, Kind::JudgeCalled, Kind::JudgeVerdict]);
        assert_eq!(graded.events[3].data.as_ref().unwrap().member("votes").value(), json!([5, 3, 5]));
    }

    #[test]
    fn a_split_vote_fails_without_a_case_error_and_a_miss_is_one() {
        let matcher = json!({"judge": {"rubric": "r.md", "profile": "tone", "samples": 2, "pass": {"exact": 5}}});
        let mut fake = Fake::default();
        for (key, score) in keys(&matcher, &json!("Hi"), 2).into_iter().zip([5, 4]) {
            fake.answers.insert(key, format!("{{\"score\": {score}}}"));
        }
        let (o, graded) = grade(matcher.clone(), &mut fake, json!("Hi"));
        assert!(!o.passed && o.reason.contains("no majority among the votes [5, 4]"), "{}", o.reason);
        assert!(graded.errors.is_empty());
        assert_eq!(graded.events.last().unwrap().data.as_ref().unwrap().member("value").value(), Value::Null);

        // another value is another request: every key misses, the first is named
        let (o, graded) = grade(matcher, &mut fake, json!("Hello"));
        assert!(!o.passed);
        assert_eq!(graded.errors.len(), 1);
        assert!(graded.errors[0].contains("no answer for key blake3:") && graded.errors[0].ends_with("#0"));
        assert_eq!(graded.events.iter().map(|e| e.kind).collect::<Vec<_>>(), [Kind::JudgeCalled]);
        assert_eq!(graded.events[0].data.as_ref().unwrap().member("pointers").value(), json!(["/value"]));
    }

    #[test]
    fn combinators_call_each_grader_at_most_once() {
        // any_of stops at the first pass; its failure reasons are not recomputed
        let mut fake = Fake {
            finished: Some(Finished { exit: Exit::Code(0), stdout: b"{\"pass\": false}".to_vec(), stderr: vec![] }),
            ..Fake::default()
        };
        let (o, _) = grade(
            json!({"any_of": [{"custom": {"command": ["g"]}}, {"custom": {"command": ["h"]}}]}),
            &mut fake,
            json!(1),
        );
        assert!(!o.passed);
        assert_eq!(fake.stdin.len(), 2);
    }
}
