//! `[judges.NAME]`: a recorded LLM judge's model, sampling parameters and where its
//! answers are recorded. Plain settings; rendering judge requests and reading their
//! votes is `grade::judge`'s.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A judge profile: `[judges.NAME]` in the pipeline. What the judge model is and where
/// its answers are recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeProfile {
    /// The judge recording (JSONL, see `replay::judge`), relative to the pipeline's base.
    pub recordings: String,
    /// The judge model, as the upstream names it; part of every request.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Whose API `stateval record --judge` asks (OpenAI Chat Completions when unset).
    /// Not part of the request: the same model asked through a gateway is the same judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<JudgeUpstream>,
}

/// The API a judge model is asked through when its answers are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeUpstream {
    /// OpenAI Chat Completions (and every gateway that speaks it).
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

impl JudgeProfile {
    /// The sampling parameters that are set, by name.
    pub fn params(&self) -> Value {
        let mut params = Map::new();
        let mut put = |name: &str, v: Option<Value>| {
            if let Some(v) = v {
                params.insert(name.to_string(), v);
            }
        };
        put("temperature", self.temperature.map(|v| json!(v)));
        put("top_p", self.top_p.map(|v| json!(v)));
        put("max_tokens", self.max_tokens.map(|v| json!(v)));
        put("seed", self.seed.map(|v| json!(v)));
        Value::Object(params)
    }
}
