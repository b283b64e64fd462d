//! The JSON Schemas of stateval's inputs and logs, compiled once.
//!
//! They are part of the product (`stateval schema NAME`), so editors and CI can
//! validate files without stateval; the loaders validate against the very same text.

use std::sync::LazyLock;

use serde_json::Value;

use crate::diag::InputSchema;

const CASE: &str = include_str!("../schemas/case.json");
const RECORDING: &str = include_str!("../schemas/recording.json");
const TOOLS: &str = include_str!("../schemas/tools.json");
const PIPELINE: &str = include_str!("../schemas/pipeline.json");
const EVENT: &str = include_str!("../schemas/event.json");
const JUDGE_RECORDING: &str = include_str!("../schemas/judge_recording.json");

/// Names accepted by `stateval schema`.
pub const NAMES: &[&str] = &["case", "recording", "judge-recording", "tools", "pipeline", "event"];

/// The full text of a schema by name. The case schema embeds the recording-line schema
/// (inline recordings), so it is composed here rather than kept twice.
pub fn text(name: &str) -> Option<String> {
    let raw = match name {
        "case" => return Some(case_schema().to_string()),
        "recording" => RECORDING,
        "judge-recording" => JUDGE_RECORDING,
        "tools" => TOOLS,
        "pipeline" => PIPELINE,
        "event" => EVENT,
        _ => return None,
    };
    Some(raw.to_string())
}

fn case_schema() -> Value {
    let mut case: Value = serde_json::from_str(CASE).expect("case schema is JSON");
    let mut line: Value = serde_json::from_str(RECORDING).expect("recording schema is JSON");
    if let Some(obj) = line.as_object_mut() {
        obj.remove("$schema");
    }
    case["$defs"]["recorded_response"] = line;
    case
}

pub static CASE_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(&case_schema().to_string()));
pub static RECORDING_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(RECORDING));
pub static TOOLS_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(TOOLS));
pub static PIPELINE_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(PIPELINE));
pub static JUDGE_RECORDING_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(JUDGE_RECORDING));
pub static EVENT_SCHEMA: LazyLock<InputSchema> = LazyLock::new(|| InputSchema::builtin(EVENT));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles_and_is_valid_draft_2020_12() {
        for name in NAMES {
            let text = text(name).unwrap();
            let schema: Value = serde_json::from_str(&text).unwrap();
            assert!(jsonschema::meta::is_valid(&schema), "{name}");
        }
        LazyLock::force(&CASE_SCHEMA);
        LazyLock::force(&RECORDING_SCHEMA);
        LazyLock::force(&TOOLS_SCHEMA);
        LazyLock::force(&PIPELINE_SCHEMA);
        LazyLock::force(&EVENT_SCHEMA);
        LazyLock::force(&JUDGE_RECORDING_SCHEMA);
    }

    #[test]
    fn unknown_case_fields_suggest_the_closest_name() {
        let v: Value =
            serde_json::from_str(r#"{"id":"a","agent":"x","turns":["hi"],"recordings":["r"],"expct":[]}"#).unwrap();
        let violation = CASE_SCHEMA.check(&v).unwrap();
        assert_eq!(violation.pointer, "/expct");
        assert_eq!(violation.message, "unknown field \"expct\" (did you mean \"expect\"?)");
    }
}
