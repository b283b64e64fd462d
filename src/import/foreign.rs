//! Other tools' logs that are not one of the formats read: recognised by their own
//! marks and refused with a message that names the tool and what would be read.
//!
//! Refusing by name beats "unknown format": the user learns what the file is and
//! which export of that tool stateval does read.

use serde_json::Value;

use super::source::Source;

/// Why `src` is another tool's log, if it is one.
pub fn recognise(src: &Source) -> Option<String> {
    let first = &src.docs.first()?.value;
    let has = |v: &Value, k: &str| v.get(k).is_some();
    if has(first, "eval") && has(first, "samples")
        || has(first, "eval") && has(first, "status") && has(first, "version")
    {
        return Some(
            "an Inspect AI eval log without its samples (a header-only log): there is no conversation in it; write \
             the log with its samples (import the .eval log itself, or `inspect log convert FILE --to json` of it)"
                .into(),
        );
    }
    if has(first, "evalId") || first.pointer("/results/results").is_some_and(Value::is_array) {
        return Some(
            "promptfoo eval results (evalId / results.results): prompt–response pairs graded by promptfoo, not an \
             agent's trace; import the provider exchanges promptfoo recorded instead"
                .into(),
        );
    }
    None
}

/// A file that is not JSON but is a known text format.
pub fn recognise_text(text: &str) -> Option<String> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'))?;
    if first.starts_with("interactions:") {
        return Some(
            "a VCR cassette in YAML (interactions: request / response): stateval reads recorded exchanges as JSON \
             or JSONL of {\"request\", \"response\"} records; record the cassette with a JSON serializer, or convert \
             it (bodies decoded) to that shape"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn why(text: &str) -> Option<String> {
        recognise(&Source::parse(Path::new("x.json"), text).unwrap())
    }

    #[test]
    fn each_tool_is_named_by_its_own_marks() {
        assert!(why(r#"{"version":2,"status":"success","eval":{}}"#).unwrap().contains("Inspect AI"));
        assert!(why(r#"{"evalId":"e","results":{"results":[]}}"#).unwrap().contains("promptfoo"));
        assert_eq!(why(r#"{"messages":[]}"#), None);
        assert!(recognise_text("interactions:\n- request:\n").unwrap().contains("VCR cassette"));
    }
}
