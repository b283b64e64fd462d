//! Every worked example of docs/metrics.md (`tests/vectors/public.jsonl`, §8) through
//! the real binary: `stateval metric NAME --batch`, one process per metric.

use std::collections::BTreeMap;
use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/public.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("vector line")).collect()
}

/// `mismatches[0].diffs[0].path` → walk objects and arrays.
fn lookup<'v>(mut value: &'v Value, path: &str) -> Option<&'v Value> {
    // dotted keys such as `consistency.outcome` may name nested objects or be keys
    if let Some(v) = value.get(path) {
        return Some(v);
    }
    for part in path.split('.') {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            value = value.get(key)?;
        }
        for index in indices.split('[').skip(1) {
            value = value.get(index.trim_end_matches(']').parse::<usize>().ok()?)?;
        }
    }
    Some(value)
}

fn close(expected: &Value, actual: &Value, tol: f64) -> bool {
    match (expected, actual) {
        (Value::Number(e), Value::Number(a)) => {
            if e.is_f64() {
                (e.as_f64().unwrap() - a.as_f64().unwrap()).abs() <= tol
            } else {
                // an integer in the contract must come out as an integer, exactly
                !a.is_f64() && e.as_i64() == a.as_i64()
            }
        }
        (Value::Array(e), Value::Array(a)) => e.len() == a.len() && e.iter().zip(a).all(|(e, a)| close(e, a, tol)),
        _ => expected == actual,
    }
}

#[test]
fn every_public_vector_reproduces_through_stateval_metric() {
    let vectors = vectors();
    let mut by_metric: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for v in &vectors {
        by_metric.entry(v["metric"].as_str().expect("metric name").to_string()).or_default().push(v);
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for (metric, cases) in &by_metric {
        let input: String = cases.iter().map(|v| format!("{}\n", v["input"])).collect();
        let output = Command::cargo_bin("stateval")
            .unwrap()
            .args(["metric", metric, "--batch"])
            .write_stdin(input)
            .output()
            .expect("run stateval");
        let stdout = String::from_utf8(output.stdout).expect("utf-8");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), cases.len(), "{metric}: one output line per input line\n{stdout}");
        for (vector, line) in cases.iter().zip(lines) {
            let out: Value = serde_json::from_str(line).expect("each output line is JSON");
            let tol = vector["tol"].as_f64().unwrap_or(1e-9);
            for (key, expected) in vector["expect"].as_object().expect("expect object") {
                checked += 1;
                match lookup(&out, key) {
                    Some(actual) if close(expected, actual, tol) => {}
                    actual => failures
                        .push(format!("{} ({metric}): {key}: expected {expected}, got {actual:?}", vector["id"])),
                }
            }
        }
        assert!(output.status.success(), "{metric}: exit {:?}", output.status.code());
    }
    assert!(failures.is_empty(), "{} of {checked} expectations failed:\n{}", failures.len(), failures.join("\n"));
    assert!(vectors.len() >= 19 && checked >= 50, "only {} vectors / {checked} expectations", vectors.len());
}

#[test]
fn invalid_input_is_a_one_line_error_with_exit_2() {
    let out = Command::cargo_bin("stateval")
        .unwrap()
        .args(["metric", "trajectory"])
        .write_stdin(r#"{"tool_calls": [], "expected": {"mode": "sideways", "calls": []}}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unknown mode \"sideways\""), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_batch_reports_bad_lines_in_place_and_exits_2_at_the_end() {
    let out = Command::cargo_bin("stateval")
        .unwrap()
        .args(["metric", "reliability", "--batch"])
        .write_stdin("{\"outcomes\": [true]}\n{\"outcomes\": [1]}\n{\"outcomes\": [false, true]}\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["runs"], 1);
    assert!(lines[1]["error"].as_str().unwrap().starts_with("<stdin>:2: /outcomes/0"), "{}", lines[1]);
    assert_eq!(lines[2]["graceful_degradation"], 67);
}

#[test]
fn an_unknown_metric_name_lists_the_known_ones() {
    let out = Command::cargo_bin("stateval").unwrap().args(["metric", "stabilty"]).write_stdin("{}").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("agent-reliability") && stderr.contains("stability"), "{stderr}");
}

fn metric(args: &[&str], stdin: &str) -> std::process::Output {
    Command::cargo_bin("stateval").unwrap().arg("metric").args(args).write_stdin(stdin.to_string()).output().unwrap()
}

#[test]
fn the_help_lists_every_metric_with_an_example_that_grades() {
    // the names the binary knows, from its own refusal of an unknown one
    let refused = String::from_utf8(metric(&["nope"], "{}").stderr).unwrap();
    let known: Vec<String> = refused
        .split("(known: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no list of known metrics in {refused:?}"))
        .split(", ")
        .map(str::to_string)
        .collect();
    assert_eq!(known.len(), 12, "{known:?}");
    let help = String::from_utf8(metric(&["--help"], "").stdout).unwrap();
    // `  NAME: what it takes` then the example alone on the next line, indented by four
    let lines: Vec<&str> = help.lines().collect();
    let mut listed = Vec::new();
    for pair in lines.windows(2) {
        let (Some(entry), Some(example)) = (pair[0].strip_prefix("  "), pair[1].strip_prefix("    ")) else { continue };
        let Some((name, _)) = entry.split_once(": ") else { continue };
        if name.starts_with(' ') || !example.starts_with('{') {
            continue;
        }
        let out = metric(&[name], example);
        assert_eq!(out.status.code(), Some(0), "{name} {example}: {}", String::from_utf8_lossy(&out.stderr));
        let graded: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(graded.is_object(), "{name}: {graded}");
        listed.push(name.to_string());
    }
    assert_eq!(listed, known, "the help's examples, in the order the binary lists its metrics:\n{help}");
}

#[test]
fn a_key_beside_a_trace_that_no_metric_reads_is_refused_at_its_place() {
    // a typo of an optional key was read as absent: every call counted as unclassified
    let cases = [
        ("narrative", r#"{"narrative": "Done.", "tool_calls": [{"name": "pay"}], "mutating_tool": ["pay"]}"#, "/"),
        ("stability", r#"{"tool_calls": [], "floor": {"redundancy": 0.9}}"#, "/"),
        // with floors, the trace is under `trace`: calls beside it were read as none
        ("stability", r#"{"tool_calls": [{"name": "a"}], "floors": {}}"#, "/"),
        ("stability-across", r#"{"runs": [{"tool_calls": []}, {"tool_call": []}]}"#, "/runs/1"),
        ("trajectory", r#"{"tool_calls": [], "expected": {"calls": []}, "strict": true}"#, "/"),
        ("trajectory-axes", r#"{"tool_calls": [], "dependencies": [], "orders": []}"#, "/"),
        ("golden-path", r#"{"tool_calls": [], "golden": {"calls": []}, "allow_extra_steps": true}"#, "/"),
    ];
    for (name, input, at) in cases {
        for batch in [false, true] {
            let args: &[&str] = if batch { &[name, "--batch"] } else { &[name] };
            let out = metric(args, input);
            assert_eq!(out.status.code(), Some(2), "{name} {input} (batch {batch})");
            let said = if batch {
                let line: Value = serde_json::from_slice(&out.stdout).unwrap();
                line["error"].as_str().unwrap().to_string()
            } else {
                String::from_utf8(out.stderr).unwrap()
            };
            assert!(said.contains(&format!(": {at}: unknown key")), "{name} {input}: {said}");
        }
    }
    // a trace's own keys, nested or not, are no typo
    for (name, input) in [
        ("stability", r#"{"trace": {"tool_calls": [{"name": "a"}]}, "floors": {}}"#),
        ("stability", r#"{"trace": {"tool_calls": []}, "conversation": {"turns": []}}"#),
        ("narrative", r#"{"final_response": "Done.", "trace": {"tool_calls": []}, "max_divergence_score": 0.5}"#),
    ] {
        let out = metric(&[name], input);
        assert_eq!(out.status.code(), Some(0), "{name} {input}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
