//! The JSON Schemas of stateval's inputs and logs, compiled once.
//!
//! They are part of the product (`stateval schema NAME`), so editors and CI can
//! validate files without stateval; the loaders validate against the very same text.

use std::borrow::Cow;
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

// Whether an input of the formats a run reads before anything else is valid, generated
// from the same files when stateval is built: a run with valid inputs compiles none of
// these schemas, and one with an invalid input compiles the schema it broke to report
// every error as before (the generated code's own error reports differ in places: it
// names a failed `anyOf` without the `required` beside it, and a failed `propertyNames`
// by the keyword inside it). JSON Schema's meta-schemas are generated the same way, so
// the schemas a run does compile, the tools' input schemas, are checked against the
// meta-schema without building its validator first.
#[jsonschema::validator(
    path = "schemas/case.json",
    resources = { "urn:stateval:recording-line" => { path = "schemas/recording.json" } }
)]
struct CaseCheck;
#[jsonschema::validator(path = "schemas/pipeline.json")]
struct PipelineCheck;
#[jsonschema::validator(path = "schemas/tools.json")]
struct ToolsCheck;
#[jsonschema::validator(path = "schemas/recording.json")]
struct RecordingCheck;
#[jsonschema::validator(path = "schemas/judge_recording.json")]
struct JudgeRecordingCheck;

/// The case schema as served embeds the recording-line schema, which the file refers to.
pub static CASE_SCHEMA: LazyLock<InputSchema> =
    LazyLock::new(|| InputSchema::generated(Cow::Owned(case_schema().to_string()), CaseCheck::is_valid));
pub static RECORDING_SCHEMA: InputSchema = InputSchema::generated(Cow::Borrowed(RECORDING), RecordingCheck::is_valid);
pub static TOOLS_SCHEMA: InputSchema = InputSchema::generated(Cow::Borrowed(TOOLS), ToolsCheck::is_valid);
pub static PIPELINE_SCHEMA: InputSchema = InputSchema::generated(Cow::Borrowed(PIPELINE), PipelineCheck::is_valid);
pub static JUDGE_RECORDING_SCHEMA: InputSchema =
    InputSchema::generated(Cow::Borrowed(JUDGE_RECORDING), JudgeRecordingCheck::is_valid);
/// No run reads events against it: compiled when a test or a tool wants it.
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
        // each compiles as served (the case schema with the recording schema put in)
        for schema in
            [&*CASE_SCHEMA, &RECORDING_SCHEMA, &TOOLS_SCHEMA, &PIPELINE_SCHEMA, &*EVENT_SCHEMA, &JUDGE_RECORDING_SCHEMA]
        {
            schema.compiled();
        }
    }

    /// `instance`, and variants of it, each wrong in one place: a member added, a member
    /// taken away, or a value replaced by one of each JSON kind or by a string no pattern
    /// accepts; at up to `places_wanted` places spread over the whole document.
    fn variants(instance: &Value, places_wanted: usize) -> Vec<Value> {
        fn places(v: &Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match v {
                Value::Object(m) => m
                    .iter()
                    .for_each(|(k, c)| places(c, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out)),
                Value::Array(a) => a.iter().enumerate().for_each(|(i, c)| places(c, format!("{at}/{i}"), out)),
                _ => {}
            }
        }
        let mut at = Vec::new();
        places(instance, String::new(), &mut at);
        let kinds = [
            Value::Null,
            Value::Bool(true),
            serde_json::json!(-7),
            serde_json::json!(1.5),
            serde_json::json!(""),
            // a string no `pattern` of these schemas accepts (an id, a pointer, a digest)
            serde_json::json!(" x/"),
            serde_json::json!([]),
            serde_json::json!({}),
        ];
        let mut out = vec![instance.clone()];
        for pointer in at.iter().step_by(at.len().div_ceil(places_wanted).max(1)) {
            let mut added = instance.clone();
            if let Some(Value::Object(m)) = added.pointer_mut(pointer) {
                m.insert("zz_unknown".into(), Value::Null);
                out.push(added);
            }
            if let Some((parent, key)) = pointer.rsplit_once('/') {
                let mut removed = instance.clone();
                if let Some(Value::Object(m)) = removed.pointer_mut(parent) {
                    m.remove(&key.replace("~1", "/").replace("~0", "~"));
                    out.push(removed);
                }
            }
            for kind in &kinds {
                let mut replaced = instance.clone();
                *replaced.pointer_mut(pointer).unwrap() = kind.clone();
                out.push(replaced);
            }
        }
        out
    }

    fn files(dir: &str, ext: &str, out: &mut Vec<std::path::PathBuf>) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let Ok(entries) = std::fs::read_dir(&root) else { return };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                files(&rel, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }

    /// The validity checks generated at build time accept exactly what the same schemas
    /// compiled at run time accept, on every input of each format the repository holds
    /// and on variants of each broken in one place.
    #[test]
    fn generated_checks_find_what_the_compiled_schemas_find() {
        let mut corpus: Vec<(&str, &InputSchema, Cow<'static, str>, Vec<Value>)> = Vec::new();
        let mut pipelines = Vec::new();
        for path in {
            let mut f = Vec::new();
            files("pipeline", "toml", &mut f);
            f
        } {
            let value: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            pipelines.push(serde_json::to_value(value).unwrap());
        }
        corpus.push(("pipeline", &PIPELINE_SCHEMA, PIPELINE.into(), pipelines));
        let json_files = |dirs: &[&str], ext: &str| {
            let mut f = Vec::new();
            dirs.iter().for_each(|d| files(d, ext, &mut f));
            f
        };
        let tools = json_files(&["fixtures/tools", "examples/record"], "json")
            .iter()
            .filter_map(|p| serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).ok())
            .filter(|v| v.get("tools").is_some())
            .collect();
        corpus.push(("tools", &TOOLS_SCHEMA, TOOLS.into(), tools));
        let lines = |dirs: &[&str], every: usize| -> Vec<Value> {
            json_files(dirs, "jsonl")
                .iter()
                .flat_map(|p| {
                    std::fs::read_to_string(p)
                        .unwrap()
                        .lines()
                        .step_by(every)
                        .filter_map(|l| serde_json::from_str(l).ok())
                        .collect::<Vec<Value>>()
                })
                .collect()
        };
        corpus.push(("recording", &RECORDING_SCHEMA, RECORDING.into(), lines(&["fixtures/recordings"], 23)));
        corpus.push((
            "judge-recording",
            &JUDGE_RECORDING_SCHEMA,
            JUDGE_RECORDING.into(),
            lines(&["examples/graders/judges"], 1),
        ));
        // inline recordings too: the case schema embeds the recording-line schema
        corpus.push(("case", &CASE_SCHEMA, case_schema().to_string().into(), lines(&["datasets"], 3)));
        for (name, generated, text, instances) in corpus {
            assert!(instances.len() >= 3, "{name}: only {} inputs found", instances.len());
            let compiled = InputSchema::builtin(text);
            let (_, validator) = compiled.compiled();
            let is_valid = generated.generated_check().expect("a generated check");
            let mut broken = 0;
            for instance in &instances {
                assert!(validator.is_valid(instance), "{name}: the repository's own input is refused: {instance}");
                for variant in variants(instance, 40) {
                    let valid = validator.is_valid(&variant);
                    assert_eq!(is_valid(&variant), valid, "{name}: {variant}");
                    broken += usize::from(!valid);
                }
            }
            // the variants reach the checks: most of them are refused
            assert!(broken > instances.len(), "{name}: {broken} refused of {} inputs' variants", instances.len());
        }
    }

    /// A valid input is passed by the generated check alone; a refused one is reported by
    /// the schema compiled then, with the message the compiled schema gives.
    #[test]
    fn a_valid_input_compiles_nothing_and_a_refused_one_is_reported_as_compiled() {
        let tools = InputSchema::generated(Cow::Borrowed(TOOLS), ToolsCheck::is_valid);
        let valid = serde_json::json!({"tools": [{"name": "lookup", "description": "Look a key up."}]});
        assert_eq!(tools.check(&valid), None);
        assert!(!tools.is_compiled(), "a valid manifest compiled the tools schema");
        let mut misspelt = valid.clone();
        misspelt["tools"][0]["descripton"] = serde_json::json!("x");
        let violation = tools.check(&misspelt).expect("an unknown field is refused");
        assert!(tools.is_compiled());
        assert_eq!(violation.pointer, "/tools/0/descripton");
        assert_eq!(violation.message, "unknown field \"descripton\" (did you mean \"description\"?)");
        // the same verdict and message as the schema compiled alone
        assert_eq!(InputSchema::builtin(TOOLS).check(&misspelt), Some(violation));
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
