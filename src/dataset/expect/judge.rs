//! Judge specs: `{"judge": {"rubric": "rubrics/tone.md", "profile": "tone", "samples": 3,
//! "reduce": "majority", "pass": {"schema": {"minimum": 4}}}}`, as a case writes them.
//! Rendering the request, reading answers and reducing votes is `grade::judge`'s.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Matcher;

/// Most samples one judge matcher may ask for: votes are recordings, and a suite that
/// needs more than this is paying for noise.
pub const MAX_SAMPLES: u64 = 32;

/// How votes become one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// The value more than half of the votes share (compared as JSON); without one, the
    /// judge fails.
    Majority,
    /// The arithmetic mean of numeric votes, summed in sample order.
    Mean,
}

impl Reduce {
    pub fn as_str(self) -> &'static str {
        match self {
            Reduce::Majority => "majority",
            Reduce::Mean => "mean",
        }
    }
}

/// A compiled `judge` matcher.
#[derive(Debug)]
pub struct JudgeSpec {
    /// Rubric file, relative to the pipeline's base.
    pub rubric: String,
    /// The `[judges.NAME]` profile.
    pub profile: String,
    pub samples: u32,
    pub reduce: Reduce,
    /// What a good answer looks like, if the case has one; part of the request.
    pub reference: Option<Value>,
    /// What the judge must answer; part of the request.
    pub output_schema: Value,
    output: Arc<jsonschema::Validator>,
    /// The reduced vote must satisfy this.
    pub pass: Box<Matcher>,
}

/// A judge's answer is an object whose `score` is its vote.
pub fn default_output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["score"],
        "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
    })
}

const FIELDS: [&str; 7] = ["rubric", "profile", "samples", "reduce", "reference", "output_schema", "pass"];

impl JudgeSpec {
    /// Parse the matcher's argument; errors are (pointer below `/judge`, message).
    pub fn parse(arg: &Value) -> Result<JudgeSpec, (String, String)> {
        let err = |at: &str, m: String| (at.to_string(), m);
        let Some(obj) = arg.as_object() else {
            return Err(err("", "judge takes {\"rubric\", \"profile\", \"pass\", ...}".into()));
        };
        if let Some(key) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            let hint =
                crate::diag::did_you_mean(key, FIELDS).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err(err(&format!("/{key}"), format!("unknown field \"{key}\"{hint}")));
        }
        let text = |key: &str| {
            obj.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| err(&format!("/{key}"), format!("judge needs \"{key}\", a non-empty string")))
        };
        let rubric = text("rubric")?;
        let profile = text("profile")?;
        let samples = match obj.get("samples") {
            None => 1,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_SAMPLES).contains(n))
                .ok_or_else(|| err("/samples", format!("samples is an integer from 1 to {MAX_SAMPLES}")))?
                as u32,
        };
        let reduce = match obj.get("reduce").map(|v| v.as_str()) {
            None | Some(Some("majority")) => Reduce::Majority,
            Some(Some("mean")) => Reduce::Mean,
            Some(_) => return Err(err("/reduce", "reduce is \"majority\" or \"mean\"".into())),
        };
        let output_schema = obj.get("output_schema").cloned().unwrap_or_else(default_output_schema);
        if let Err(e) = jsonschema::meta::validate(&output_schema) {
            return Err(err("/output_schema", format!("malformed JSON Schema: {e}")));
        }
        let output = jsonschema::validator_for(&output_schema)
            .map_err(|e| err("/output_schema", format!("malformed JSON Schema: {e}")))?;
        let pass_spec = obj
            .get("pass")
            .ok_or_else(|| err("/pass", "judge needs \"pass\", a matcher for the reduced vote".into()))?;
        let pass = Matcher::compile(pass_spec).map_err(|e| err(&format!("/pass{}", e.pointer), e.message))?;
        if pass.calls_out() {
            return Err(err(
                "/pass",
                "a judge's pass matcher judges the reduced vote; it cannot call a grader or judge".into(),
            ));
        }
        Ok(JudgeSpec {
            rubric,
            profile,
            samples,
            reduce,
            reference: obj.get("reference").cloned(),
            output_schema,
            output: Arc::new(output),
            pass: Box::new(pass),
        })
    }

    pub fn describe(&self) -> String {
        format!(
            "judge {} ({}, {} sample(s), {}) then {}",
            self.profile,
            self.rubric,
            self.samples,
            self.reduce.as_str(),
            self.pass.describe()
        )
    }

    /// What the judge must answer, compiled from `output_schema`.
    pub fn output(&self) -> &jsonschema::Validator {
        &self.output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_spec_names_the_field() {
        let bad = |arg: Value| JudgeSpec::parse(&arg).unwrap_err();
        let base = json!({"rubric": "r.md", "profile": "p", "pass": {"exact": 1}});
        let with = |k: &str, v: Value| {
            let mut a = base.clone();
            a[k] = v;
            a
        };
        assert_eq!(bad(with("samples", json!(0))).0, "/samples");
        assert_eq!(bad(with("reduce", json!("median"))).0, "/reduce");
        assert_eq!(bad(with("pass", json!({"regex": "("}))).0, "/pass/regex");
        assert_eq!(bad(with("pass", json!({"custom": {"command": ["x"]}}))).0, "/pass");
        assert_eq!(bad(with("output_schema", json!({"type": "objekt"}))).0, "/output_schema");
        let (at, message) = bad(with("rubrik", json!("x")));
        assert_eq!((at.as_str(), message.as_str()), ("/rubrik", "unknown field \"rubrik\" (did you mean \"rubric\"?)"));
    }
}
