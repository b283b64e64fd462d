//! Recorded LLM judges: `{"judge": {"rubric": "rubrics/tone.md", "profile": "tone",
//! "samples": 3, "reduce": "majority", "pass": {"schema": {"minimum": 4}}}}`.
//!
//! A judge is a model call like any other, so it is replayed, never made live. The judge
//! request — the judge profile's model and sampling parameters, the rubric text, the
//! target and its value, the reference, the output schema — is rendered as one JSON
//! object ([`render_request`]); its canonical digest plus the sample index is the
//! [`JudgeKey`] a judge recording is looked up by, so `k` votes are `k` recorded lines
//! and any change to what the judge would be asked is a miss, not a stale verdict.
//!
//! Each vote is the `score` of the judge's JSON answer. Votes reduce by a pure rule
//! ([`reduce`]): `majority` (the value more than half the votes share; none is a
//! failure, never a coin toss) or `mean` (of numeric votes). The reduced value then goes
//! through the inner `pass` matcher, which is an ordinary matcher of the one grammar.
//!
//! Everything here is pure. Reading rubrics and judge recordings is the runner's
//! (`runner::graders`) and the recording format is `replay::judge`'s.

use std::fmt;

use serde_json::{Value, json};

use crate::canon::{self, CanonError, Context, Digest};
use crate::dataset::expect::brief;
use crate::event::payload::{Out, Rendered, write};

/// Version of the rendered request's layout and of the prompt text [`messages`] derives
/// from it. Part of every request, so changing either is a new key, never a silent reuse
/// of votes recorded for other words.
pub const FORMAT: &str = "stateval-judge-v1";

use crate::dataset::expect::judge::{JudgeSpec, Reduce};
use crate::pipeline::judges::JudgeProfile;

impl JudgeSpec {
    /// The request this matcher sends about `value` at `target`, under `profile`.
    pub fn request(
        &self,
        profile: &JudgeProfile,
        rubric_text: &str,
        target: &str,
        value: &Value,
    ) -> Result<JudgeRequest, CanonError> {
        render_request(profile, rubric_text, target, value, self.reference.as_ref(), &self.output_schema)
    }

    /// Read one recorded answer (the `content` of the judge's response): a JSON object
    /// satisfying the output schema, whose `score` is the vote. Returns (answer, vote).
    pub fn read_answer(&self, content: &str) -> Result<(Value, Value), String> {
        read_answer(self.output(), content)
    }
}

/// A rendered judge request and its digest (the `request_hash` of judge recordings).
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeRequest {
    pub value: Value,
    pub hash: Digest,
}

impl JudgeRequest {
    /// The key of sample `sample` of this request.
    pub fn key(&self, sample: u32) -> JudgeKey {
        JudgeKey { request_hash: self.hash, sample }
    }
}

/// Render the judge request. Every input is a field of one JSON object, canonicalised
/// for its digest, so the same inputs give the same key on every machine; `reference`
/// is left out when there is none (`null` would be a reference). The rubric's line ends
/// are normalised to `\n`, so a checkout that turned them into `\r\n` asks the same.
/// Secrets (every kind `crate::secrets` knows) are scrubbed from the whole request
/// before it is digested: a judge is never shown one, a judge recording never holds one,
/// and the key a recording was made under is the key a replay asks for.
pub fn render_request(
    profile: &JudgeProfile,
    rubric_text: &str,
    target: &str,
    value: &Value,
    reference: Option<&Value>,
    output_schema: &Value,
) -> Result<JudgeRequest, CanonError> {
    let mut request = json!({
        "format": FORMAT,
        "model": profile.model,
        "params": profile.params(),
        "rubric": rubric_text.replace("\r\n", "\n"),
        "target": target,
        "value": value,
        "output_schema": output_schema,
    });
    if let Some(reference) = reference {
        request["reference"] = reference.clone();
    }
    crate::secrets::Scrubber::default().value(&mut request);
    let hash = request_digest(&request)?;
    Ok(JudgeRequest { value: request, hash })
}

/// The digest of a rendered judge request, as judge recordings store it.
pub fn request_digest(request: &Value) -> Result<Digest, CanonError> {
    canon::canonical_digest(Context::Request, request)
}

/// What a judge recording line is found by: the request's digest and the sample index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JudgeKey {
    pub request_hash: Digest,
    pub sample: u32,
}

impl fmt::Display for JudgeKey {
    /// `blake3:…#2`: request digest, then the sample index.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.request_hash, self.sample)
    }
}

/// The chat messages an upstream judge model is sent for a rendered request: a pure
/// function of it (and of [`FORMAT`]), so the request's digest pins the exact text.
pub fn messages(request: &Value) -> Value {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => canon::to_canonical_string(other).unwrap_or_default(),
    };
    let schema = canon::to_canonical_string(&request["output_schema"]).unwrap_or_default();
    let system = format!(
        "{}\n\nAnswer with one JSON object and nothing else. It must satisfy this JSON Schema:\n{schema}",
        text(&request["rubric"]).trim_end()
    );
    let mut user = format!("Target: {}\n\nValue:\n{}", text(&request["target"]), text(&request["value"]));
    if let Some(reference) = request.get("reference") {
        user.push_str(&format!("\n\nReference:\n{}", text(reference)));
    }
    json!([{"role": "system", "content": system}, {"role": "user", "content": user}])
}

/// Read an answer against an output-schema validator; see [`JudgeSpec::read_answer`].
pub fn read_answer(output: &jsonschema::Validator, content: &str) -> Result<(Value, Value), String> {
    let answer = crate::diag::parse_json_strict(content.trim())
        .map_err(|(_, _, m)| format!("the answer is not JSON ({m}): {}", brief(&Value::String(content.into()))))?;
    if let Some(e) = output.iter_errors(&answer).next() {
        return Err(format!("the answer {} does not satisfy the output schema: {e}", brief(&answer)));
    }
    let vote = answer.get("score").cloned().ok_or_else(|| format!("the answer {} has no \"score\"", brief(&answer)))?;
    Ok((answer, vote))
}

/// Reduce votes by `rule`. `Ok(None)`: no majority. An error: `mean` over a vote that is
/// not a number.
pub fn reduce(rule: Reduce, votes: &[Value]) -> Result<Option<Value>, String> {
    match rule {
        Reduce::Majority => {
            let winner = votes.iter().find(|v| {
                let n = votes.iter().filter(|w| canon::json_eq(v, w)).count();
                n * 2 > votes.len()
            });
            Ok(winner.cloned())
        }
        Reduce::Mean => {
            if votes.is_empty() {
                return Ok(None);
            }
            let mut sum = 0.0;
            for (i, v) in votes.iter().enumerate() {
                sum += v.as_f64().ok_or_else(|| format!("mean needs numeric votes; sample {i} voted {}", brief(v)))?;
            }
            Ok(serde_json::Number::from_f64(sum / votes.len() as f64).map(Value::Number))
        }
    }
}

/// `judge_called` for one answered sample.
pub fn called_event(target: &str, spec: &JudgeSpec, key: &JudgeKey, answer: &Value, usage: &Value) -> Rendered {
    Rendered::of(&write::JudgeCalled {
        target: target.into(),
        judge: (&spec.profile).into(),
        request_hash: (&key.request_hash).into(),
        sample: key.sample.into(),
        answer: answer.into(),
        usage: usage.into(),
        error: Out::Absent,
        pointers: Out::Absent,
    })
}

/// `judge_called` for a sample that could not be served or read.
pub fn failed_event(target: &str, spec: &JudgeSpec, key: &JudgeKey, kind: &str, pointers: &[String]) -> Rendered {
    let pointers = pointers.to_vec();
    Rendered::of(&write::JudgeCalled {
        target: target.into(),
        judge: (&spec.profile).into(),
        request_hash: (&key.request_hash).into(),
        sample: key.sample.into(),
        answer: Out::Absent,
        usage: Out::Absent,
        error: kind.into(),
        pointers: Out::Array(&pointers),
    })
}

/// `judge_verdict`: the votes, the rule, the reduced value and the pass verdict.
pub fn verdict_event(
    target: &str,
    spec: &JudgeSpec,
    request: &JudgeRequest,
    votes: &[Value],
    value: Option<&Value>,
    passed: bool,
) -> Rendered {
    let votes: Vec<Out> = votes.iter().map(Out::Value).collect();
    Rendered::of(&write::JudgeVerdict {
        target: target.into(),
        judge: (&spec.profile).into(),
        request_hash: (&request.hash).into(),
        votes: Out::Array(&votes),
        reduce: spec.reduce.as_str().into(),
        value: value.into(),
        passed: passed.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> JudgeProfile {
        JudgeProfile {
            recordings: "j.jsonl".into(),
            model: "judge-model-1".into(),
            temperature: Some(0.7),
            top_p: None,
            max_tokens: Some(200),
            seed: None,
            upstream: None,
        }
    }

    fn spec(extra: Value) -> JudgeSpec {
        let mut arg = json!({"rubric": "r.md", "profile": "tone", "pass": {"schema": {"minimum": 4}}});
        arg.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        JudgeSpec::parse(&arg).unwrap()
    }

    #[test]
    fn the_rendered_request_holds_every_input_and_its_digest_is_canonical() {
        let s = spec(json!({"reference": "Thanks!"}));
        let r = s.request(&profile(), "Rate politeness 1-5.", "final_response", &json!("Hello")).unwrap();
        assert_eq!(r.value["format"], FORMAT);
        assert_eq!(r.value["params"], json!({"temperature": 0.7, "max_tokens": 200}));
        assert_eq!(
            (r.value["rubric"].as_str(), r.value["reference"].as_str()),
            (Some("Rate politeness 1-5."), Some("Thanks!"))
        );
        assert_eq!(r.value["output_schema"], crate::dataset::expect::judge::default_output_schema());
        // the same request spelled with other key order and number forms has the same digest
        let respelled: Value = serde_json::from_str(&r.value.to_string().replace("200", "200.0")).unwrap();
        assert_eq!(request_digest(&respelled).unwrap(), r.hash);
    }

    #[test]
    fn any_changed_input_changes_the_key() {
        let s = spec(json!({}));
        let base = s.request(&profile(), "rubric", "final_response", &json!("Hello")).unwrap().hash;
        let changed = [
            s.request(&profile(), "rubric!", "final_response", &json!("Hello")).unwrap().hash,
            s.request(&profile(), "rubric", "turns[0].response", &json!("Hello")).unwrap().hash,
            s.request(&profile(), "rubric", "final_response", &json!("Hello.")).unwrap().hash,
            s.request(
                &JudgeProfile { temperature: Some(0.0), ..profile() },
                "rubric",
                "final_response",
                &json!("Hello"),
            )
            .unwrap()
            .hash,
            spec(json!({"reference": null}))
                .request(&profile(), "rubric", "final_response", &json!("Hello"))
                .unwrap()
                .hash,
        ];
        for (i, h) in changed.iter().enumerate() {
            assert_ne!(*h, base, "change {i} kept the key");
        }
    }

    #[test]
    fn a_rubric_checked_out_with_crlf_line_ends_asks_the_same() {
        let s = spec(json!({}));
        let lf = s.request(&profile(), "# Tone\n\nRate 1-5.\n", "t", &json!(1)).unwrap();
        let crlf = s.request(&profile(), "# Tone\r\n\r\nRate 1-5.\r\n", "t", &json!(1)).unwrap();
        assert_eq!(lf, crlf);
    }

    #[test]
    fn the_key_of_a_fixed_request_never_moves() {
        // every judge recording ever made is keyed by this rendering: a change to it
        // (field names, FORMAT, canonical form) must be deliberate, with a new FORMAT
        let r = spec(json!({})).request(&profile(), "Rate it.", "final_response", &json!("Hello")).unwrap();
        assert_eq!(r.hash.to_string(), "blake3:cebb8107d09bef7539c2b72f50f9ce04a1dee3126941a32aedd9919a646e1d61");
    }

    #[test]
    fn a_secret_in_the_judged_value_is_scrubbed_before_the_judge_or_the_key_sees_it() {
        let s = spec(json!({}));
        let leaked = s.request(&profile(), "r", "t", &json!("key sk-proj-ABCDEFGHIJKLMNOPQRST, ok")).unwrap();
        let clean = s.request(&profile(), "r", "t", &json!("key [scrubbed], ok")).unwrap();
        assert_eq!(leaked.value["value"], "key [scrubbed], ok");
        assert_eq!(leaked.hash, clean.hash);
    }

    #[test]
    fn a_key_is_the_request_digest_and_the_sample_index() {
        let r = spec(json!({})).request(&profile(), "r", "t", &json!(1)).unwrap();
        assert_ne!(r.key(0), r.key(1));
        assert_eq!(r.key(2).to_string(), format!("{}#2", r.hash));
    }

    #[test]
    fn majority_needs_more_than_half_the_votes() {
        // 2 of 3 agree → majority; 1-1 → none; 5 and 5.0 are the same vote
        assert_eq!(reduce(Reduce::Majority, &[json!(5), json!(4), json!(5.0)]).unwrap(), Some(json!(5)));
        assert_eq!(reduce(Reduce::Majority, &[json!(5), json!(4)]).unwrap(), None);
        assert_eq!(
            reduce(Reduce::Majority, &[json!("good"), json!("good"), json!("bad")]).unwrap(),
            Some(json!("good"))
        );
        assert_eq!(reduce(Reduce::Majority, &[json!(3), json!(4), json!(5)]).unwrap(), None);
    }

    #[test]
    fn mean_averages_numbers_and_refuses_anything_else() {
        // (5 + 4 + 3) / 3 = 4
        assert_eq!(reduce(Reduce::Mean, &[json!(5), json!(4), json!(3)]).unwrap(), Some(json!(4.0)));
        // (5 + 4) / 2 = 4.5
        assert_eq!(reduce(Reduce::Mean, &[json!(5), json!(4)]).unwrap(), Some(json!(4.5)));
        let e = reduce(Reduce::Mean, &[json!(5), json!("good")]).unwrap_err();
        assert!(e.contains("sample 1"), "{e}");
    }

    #[test]
    fn answers_are_json_that_satisfies_the_output_schema_and_carries_a_score() {
        let s = spec(json!({}));
        assert_eq!(s.read_answer("{\"score\": 4, \"reason\": \"polite\"}").unwrap().1, json!(4));
        assert!(s.read_answer("four").unwrap_err().contains("not JSON"));
        assert!(s.read_answer("{\"score\": \"four\"}").unwrap_err().contains("output schema"));
        let labels = spec(json!({"output_schema": {"type": "object"}}));
        assert!(labels.read_answer("{\"verdict\": \"ok\"}").unwrap_err().contains("no \"score\""));
    }

    #[test]
    fn the_prompt_text_is_derived_from_the_request_alone() {
        let r = spec(json!({"reference": "Thanks!"}))
            .request(&profile(), "Rate it.", "final_response", &json!("Hi"))
            .unwrap();
        let m = messages(&r.value);
        assert!(m[0]["content"].as_str().unwrap().starts_with("Rate it.\n\nAnswer with one JSON object"));
        assert_eq!(m[1]["content"], "Target: final_response\n\nValue:\nHi\n\nReference:\nThanks!");
        assert_eq!(m, messages(&r.value));
    }
}
