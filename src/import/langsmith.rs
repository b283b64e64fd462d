//! LangSmith run trees (a run exported with its `child_runs`, or a list of runs).
//!
//! A run has `id`, `name`, `run_type` (`chain`, `llm`, `tool`, `retriever`, …),
//! `inputs`, `outputs`, `error`, `start_time` and `child_runs`. Read here:
//!
//! - every `tool` run, in start order, is one call: `name`, `inputs` as the arguments
//!   (a lone `input` string that is JSON is parsed), `outputs.output` (else `outputs`)
//!   as the result, `error` a failed call (a tool error);
//! - the root run's `inputs.input` (or the last user / human message of
//!   `inputs.messages`) is the turn's input, and its `outputs.output` the answer;
//! - other runs are counted in `source.other_messages`.
//!
//! Like an MCP log, calls are not grouped by model response: each is one response
//! whose text is absent.

use serde_json::{Value, json};

use super::Format;
use super::builder::Builder;
use super::source::Source;
use super::trace::{Args, Call, Content, ErrorKind, Outcome, Ptr, Step, Trace, provenance, str_field};
use crate::diag::InputError;

const READS: &str =
    "LangSmith run tree (run_type, inputs, outputs, child_runs): tool runs and the root's input / output";

/// Is `src` a LangSmith run tree?
pub fn detect(src: &Source) -> bool {
    src.records()
        .iter()
        .any(|(_, _, r)| r.get("run_type").is_some() && (r.get("inputs").is_some() || r.get("child_runs").is_some()))
}

pub fn parse(src: &Source) -> Result<Trace, InputError> {
    let mut b = Builder::new(src, Format::LangSmith, READS);
    let roots: Vec<(Ptr, &Value)> = src
        .records()
        .into_iter()
        .map(|(d, p, v)| (Ptr::new(d, p), v))
        .filter(|(_, v)| v.get("run_type").is_some())
        .collect();
    if roots.len() > 1 {
        let ids: Vec<String> = roots.iter().map(|(_, r)| str_field(r, "id").unwrap_or("?").to_string()).collect();
        return Err(src.error(
            0,
            "",
            format!(
                "this file holds {} root runs ({}): each is its own conversation; split it, one run tree per file",
                roots.len(),
                ids.join(", ")
            ),
        ));
    }
    let Some((root_at, root)) = roots.first() else {
        return Err(src.error(0, "", "no LangSmith run in this file"));
    };
    b.meta("run_id", root.get("id").cloned().unwrap_or(Value::Null));
    b.meta("run_name", root.get("name").cloned().unwrap_or(Value::Null));
    let input = root.pointer("/inputs/input").and_then(Value::as_str).map(str::to_string).or_else(|| {
        let messages = root.pointer("/inputs/messages")?.as_array()?;
        let flat: Vec<&Value> =
            messages.iter().flat_map(|m| m.as_array().map_or_else(|| vec![m], |a| a.iter().collect())).collect();
        flat.iter().rev().find_map(|m| {
            let role = str_field(m, "role").or(str_field(m, "type"))?;
            matches!(role, "user" | "human").then(|| str_field(m, "content").unwrap_or_default().to_string())
        })
    });
    match input {
        Some(text) => {
            b.user(Content::Text(text), provenance([("run", root.get("id").cloned())]), None, &root_at.join("/inputs"))
        }
        None => b.user(Content::Absent, Default::default(), None, root_at),
    }
    let mut runs = Vec::new();
    walk(root_at.clone(), root, &mut runs);
    runs.sort_by(|a, b| str_field(a.1, "start_time").cmp(&str_field(b.1, "start_time")));
    let mut results = Vec::new();
    for (k, (at, run)) in runs.iter().enumerate() {
        let kind = str_field(run, "run_type").unwrap_or("unknown");
        if kind != "tool" {
            b.count_other(&format!("run:{kind}"));
            continue;
        }
        let id = str_field(run, "id").map_or_else(|| format!("tool-{k}"), str::to_string);
        let inputs = run.get("inputs").cloned().unwrap_or(Value::Null);
        let args = match inputs.get("input") {
            Some(Value::String(s)) if inputs.as_object().is_some_and(|o| o.len() == 1) => Args::from_text(s),
            _ => Args::from_value(&inputs),
        };
        let call = Call::new(Some(id.clone()), str_field(run, "name").unwrap_or("unnamed"), args, at.clone());
        let mut step = Step::new(Content::Absent, at.clone());
        step.calls.push(call);
        b.step(step)?;
        let error = run.get("error").filter(|e| !e.is_null());
        let result = run.pointer("/outputs/output").or(run.get("outputs")).filter(|o| !o.is_null()).or(error).cloned();
        let outcome = Outcome {
            result,
            is_error: Some(error.is_some()),
            error_kind: error.map(|_| ErrorKind::Tool),
            ..Outcome::default()
        };
        results.push((id, outcome, at.clone()));
    }
    for (id, outcome, at) in results {
        b.result(&id, outcome, &at)?;
    }
    if let Some(answer) = root.pointer("/outputs/output").and_then(Value::as_str) {
        let mut step = Step::new(Content::Text(answer.to_string()), root_at.join("/outputs"));
        step.source.insert("run".into(), json!(root.get("id")));
        b.step(step)?;
    }
    b.finish()
}

/// Every run under `run` (itself excluded), with its place.
fn walk<'v>(at: Ptr, run: &'v Value, out: &mut Vec<(Ptr, &'v Value)>) {
    for (i, child) in run.get("child_runs").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let here = at.join(format!("/child_runs/{i}"));
        out.push((here.clone(), child));
        walk(here, child, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn tool_runs_are_the_calls_and_the_root_gives_input_and_answer() {
        let text = r#"{"id": "r0", "name": "AgentExecutor", "run_type": "chain", "start_time": "2024-05-01T10:00:00",
          "inputs": {"input": "what is 2 to the 10th?"}, "outputs": {"output": "1024"}, "error": null,
          "child_runs": [
            {"id": "r1", "name": "ChatOpenAI", "run_type": "llm", "start_time": "2024-05-01T10:00:01", "inputs": {}, "outputs": {}, "child_runs": []},
            {"id": "r2", "name": "power", "run_type": "tool", "start_time": "2024-05-01T10:00:02",
             "inputs": {"input": "{\"base\": 2, \"exp\": 10}"}, "outputs": {"output": "1024"}, "error": null, "child_runs": []},
            {"id": "r3", "name": "notify", "run_type": "tool", "start_time": "2024-05-01T10:00:03",
             "inputs": {"to": "ops"}, "outputs": null, "error": "ConnectionError: refused", "child_runs": []}]}"#;
        let src = Source::parse(Path::new("run.json"), text).unwrap();
        assert!(detect(&src));
        let trace = parse(&src).unwrap();
        assert_eq!(trace.calls().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["power", "notify"]);
        assert_eq!(trace.turns[0].input, Content::Text("what is 2 to the 10th?".into()));
        let first = trace.calls().next().unwrap();
        assert_eq!(
            first.args,
            Args::Json { value: json!({"base": 2, "exp": 10}), raw: Some("{\"base\": 2, \"exp\": 10}".into()) }
        );
        assert_eq!(trace.calls().nth(1).and_then(|c| c.outcome.as_ref()).and_then(|o| o.is_error), Some(true));
        assert_eq!(trace.turns[0].steps.last().map(|s| s.content.clone()), Some(Content::Text("1024".into())));
    }
}
