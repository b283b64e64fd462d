//! Invalid input end to end: every broken input is refused before anything runs, with
//! `error: PATH:LINE:COL: message` naming the exact line and a sensible column, exit 2,
//! nothing claiming success, and nothing written: the store is left exactly as it was.
//! An earlier run's reports go as soon as the pipeline file is parsed (a refused run
//! leaves no report beside a change that fails); a pipeline file that does not parse
//! names none, and they are left as they were. Also `stateval schema` and `stateval
//! validate`.

mod common;

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use common::{CI_REPORTS, Project, column_of, parse_located_error};
use serde_json::Value;

const TREASURY: &str = "datasets/examples/treasury.jsonl";
const PAY_ALICE: &str = "fixtures/recordings/pay-alice.jsonl";

/// A project after a green run of ci.toml, with its reports in place; returns the
/// store's run files and the reports so a refused run can be shown to leave them alone.
fn green() -> (Project, BTreeMap<String, Vec<u8>>) {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    for r in CI_REPORTS {
        assert!(p.exists(r), "the green run wrote {r}");
    }
    let mut files = p.snapshot(".stateval/runs");
    files.extend(p.snapshot("reports"));
    (p, files)
}

/// What a refused input must look like.
struct Expected<'a> {
    path: &'a str,
    line: usize,
    columns: RangeInclusive<usize>,
    /// Substrings of the message.
    says: &'a [&'a str],
}

/// `stateval run` on the broken copy: exit 2, exactly one located error, nothing on
/// stdout, the store's run files untouched and the earlier reports gone.
#[track_caller]
fn refused(p: &Project, before: &BTreeMap<String, Vec<u8>>, expected: &Expected<'_>) {
    refused_keeping(p, before, expected, false);
}

/// [`refused`] for a pipeline file that does not parse: it names no report, and the
/// earlier ones are left as they were.
#[track_caller]
fn refused_unparsed(p: &Project, before: &BTreeMap<String, Vec<u8>>, expected: &Expected<'_>) {
    refused_keeping(p, before, expected, true);
}

#[track_caller]
fn refused_keeping(p: &Project, before: &BTreeMap<String, Vec<u8>>, expected: &Expected<'_>, reports_kept: bool) {
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one error for one defect: {}", out.stderr);
    let (path, line, column, message) = parse_located_error(lines[0]);
    assert_eq!((path.as_str(), line), (expected.path, expected.line), "{}", lines[0]);
    assert!(expected.columns.contains(&column), "column {column} not in {:?}: {}", expected.columns, lines[0]);
    for s in expected.says {
        assert!(message.contains(s), "message lacks {s:?}: {message}");
    }
    assert_eq!(out.stdout, "", "nothing claims success on stdout");
    assert!(!out.stderr.contains("PASS") && !out.stderr.contains("report:"), "{}", out.stderr);
    let mut after = p.snapshot(".stateval/runs");
    if reports_kept {
        after.extend(p.snapshot("reports"));
    } else {
        for r in CI_REPORTS {
            assert!(!p.exists(r), "{r} outlived a refused run");
        }
        after.extend(before.iter().filter(|(k, _)| k.starts_with("reports")).map(|(k, v)| (k.clone(), v.clone())));
    }
    assert_eq!(common::differing(before, &after), Vec::<String>::new(), "nothing ran or was written");
}

/// `stateval ARGS` refused (exit 2, nothing on stdout): the place and message of its
/// first error.
#[track_caller]
fn first_refusal(p: &Project, args: &[&str]) -> (String, usize, usize, String) {
    let out = p.stateval(args);
    out.expect_code(2);
    assert_eq!(out.stdout, "", "nothing claims success on stdout");
    parse_located_error(out.stderr.lines().next().unwrap_or_default())
}

/// Columns `from..=to` of `needle` in `line` (1-based, inclusive).
fn span(line: &str, needle: &str) -> RangeInclusive<usize> {
    let start = column_of(line, needle);
    start..=start + needle.chars().count() - 1
}

#[test]
fn a_malformed_jsonl_line_is_refused_at_the_missing_comma() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 3, r#""tags":["memory"],"agent""#, r#""tags":["memory"] "agent""#);
    // the parser stops at the space where the comma should be or at the next key
    let at = column_of(&line, r#"] "agent""#) + 1;
    refused(&p, &before, &Expected { path: TREASURY, line: 3, columns: at..=at + 1, says: &["expected `,` or `}`"] });
}

#[test]
fn a_case_folded_over_several_lines_is_refused_saying_a_case_is_one_line() {
    // the README prints a case folded for reading; pasted as it is, the first line ends
    // inside the object
    let p = Project::new();
    let case = p.line(TREASURY, 1);
    let folded = case.replacen(r#","agent""#, ",\n \"agent\"", 1);
    assert_ne!(folded, case, "the case has an agent to fold at");
    p.write("datasets/examples/folded.jsonl", format!("{folded}\n"));
    let (path, line, _, message) = first_refusal(&p, &["validate", "pipeline/ci.toml"]);
    assert_eq!((path.as_str(), line), ("datasets/examples/folded.jsonl", 1), "{message}");
    assert!(message.contains("EOF while parsing"), "{message}");
    assert!(message.contains("one case per line (JSON Lines)"), "{message}");
}

#[test]
fn a_judge_recording_that_is_not_there_is_refused_where_the_pipeline_names_it() {
    let p = Project::new();
    let ci = p.read("pipeline/ci.toml");
    let judge = "\n[judges.tone]\nrecordings = \"judges/tone.jsonl\"\nmodel = \"gpt-4o-mini-2024-07-18\"\n";
    p.write("pipeline/ci.toml", format!("{ci}{judge}"));
    let line = ci.lines().count() + 3;
    let (path, at_line, column, message) = first_refusal(&p, &["validate", "pipeline/ci.toml"]);
    assert_eq!((path.as_str(), at_line), ("pipeline/ci.toml", line), "{message}");
    assert_eq!(column, column_of(r#"recordings = "judges/tone.jsonl""#, r#""judges"#), "{message}");
    assert!(message.contains("judges.tone.recordings: judges/tone.jsonl not found"), "{message}");
}

#[test]
fn a_command_outside_any_project_says_there_is_no_pipeline_and_what_to_do() {
    // `run` also looks in the directories above; `plan` does not: neither is told it did
    let p = Project::empty();
    for command in ["run", "plan"] {
        let (path, _, _, message) = first_refusal(&p, &[command]);
        assert_eq!(path, "pipeline/ci.toml", "{command}: {message}");
        assert_eq!(
            message,
            "no such pipeline file: run stateval from inside your project, or name the pipeline file \
             (`stateval COMMAND path/to/pipeline.toml`)",
            "{command}"
        );
    }
}

#[test]
fn a_key_with_a_line_break_and_a_terminal_escape_is_quoted_escaped_on_one_line() {
    // an untrusted dataset could otherwise split its error in two or colour the CI log
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 2, r#""expect":"#, r#""exp\nect\u001b[31m":"#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 2,
            columns: span(&line, r#""exp\nect\u001b[31m""#),
            says: &[r#"unknown field "exp\nect\u{1b}[31m""#],
        },
    );
}

#[test]
fn an_unknown_case_key_is_refused_at_the_key_and_suggests_the_right_one() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 2, r#""expect":"#, r#""expct":"#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 2,
            columns: span(&line, r#""expct""#),
            says: &[r#"unknown field "expct""#, r#"did you mean "expect""#],
        },
    );
}

#[test]
fn a_duplicate_case_id_is_refused_naming_the_first_definition() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 5, r#""id":"invoice-clean-paid""#, r#""id":"balance-check""#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 5,
            columns: span(&line, r#""id":"balance-check""#),
            says: &[r#"duplicate case id "balance-check""#, "first defined at datasets/examples/treasury.jsonl:1"],
        },
    );
}

#[test]
fn a_case_id_duplicated_across_datasets_is_refused_naming_the_other_file() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 7, r#""id":"greeting-inline""#, r#""id":"greeting-support""#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 7,
            columns: span(&line, r#""id":"greeting-support""#),
            says: &[r#"duplicate case id "greeting-support""#, "first defined at datasets/examples/support.jsonl:4"],
        },
    );
}

#[test]
fn a_bad_regex_in_a_matcher_is_refused_at_the_matcher() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 2, r#""Shall I send \\$100\\?$""#, r#""Shall I send (\\$100\\?$""#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 2,
            columns: span(&line, r#"{"regex":"Shall I send (\\$100\\?$"}"#),
            says: &["invalid regex", "unclosed group"],
        },
    );
}

#[test]
fn a_malformed_json_schema_in_a_schema_matcher_is_refused_at_the_schema() {
    let (p, before) = green();
    let line = p.edit_line(TREASURY, 4, r#"{"schema":{"minimum":1}}"#, r#"{"schema":{"minimum":"one"}}"#);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 4,
            columns: span(&line, r#"{"schema":{"minimum":"one"}}"#),
            says: &["malformed JSON Schema", "\"one\""],
        },
    );
}

#[test]
fn a_missing_recording_file_is_refused_at_its_path_in_the_case() {
    let (p, before) = green();
    std::fs::remove_file(p.join(PAY_ALICE)).expect("remove the recording");
    let line = p.line(TREASURY, 2);
    refused(
        &p,
        &before,
        &Expected {
            path: TREASURY,
            line: 2,
            columns: span(&line, r#""fixtures/recordings/pay-alice.jsonl""#),
            says: &[r#"recording "fixtures/recordings/pay-alice.jsonl" not found"#],
        },
    );
}

#[test]
fn a_recording_line_with_an_unknown_field_is_refused_at_its_own_file_and_line() {
    let (p, before) = green();
    let line = p.edit_line(PAY_ALICE, 2, r#""latency_ms":460"#, r#""latncy_ms":460"#);
    refused(
        &p,
        &before,
        &Expected {
            path: PAY_ALICE,
            line: 2,
            columns: span(&line, r#""latncy_ms""#),
            says: &[r#"unknown field "latncy_ms""#, r#"did you mean "latency_ms""#],
        },
    );
}

#[test]
fn a_recording_line_with_a_wrong_type_is_refused_at_its_own_file_and_line() {
    let (p, before) = green();
    let line = p.edit_line(PAY_ALICE, 2, r#""latency_ms":460"#, r#""latency_ms":"slow""#);
    refused(
        &p,
        &before,
        &Expected {
            path: PAY_ALICE,
            line: 2,
            columns: span(&line, r#""latency_ms":"slow""#),
            says: &["latency_ms", "integer"],
        },
    );
}

#[test]
fn a_pipeline_with_an_unknown_key_is_refused_at_the_key_and_deletes_nothing() {
    let (p, before) = green();
    p.edit_line("pipeline/ci.toml", 5, r#"goldens = "goldens""#, "goldens = \"goldens\"\nstorre = \"x\"");
    refused_unparsed(
        &p,
        &before,
        &Expected {
            path: "pipeline/ci.toml",
            line: 6,
            columns: 1..=1,
            says: &[r#"unknown field "storre""#, r#"did you mean "store""#],
        },
    );
}

#[test]
fn a_byte_that_is_not_utf8_is_refused_where_it_stands_in_each_kind_of_input() {
    // a dataset line, a recording and the pipeline: each at its own line and column
    for (file, line_no, after) in
        [(TREASURY, 3, r#""tags":["#), (PAY_ALICE, 2, r#""content":""#), ("pipeline/ci.toml", 3, "name = \"")]
    {
        let (p, before) = green();
        let text = p.read(file);
        let line = text.lines().nth(line_no - 1).expect("the line");
        let column = column_of(line, after) + after.chars().count();
        let offset = text.lines().take(line_no - 1).map(|l| l.len() + 1).sum::<usize>()
            + line.find(after).unwrap()
            + after.len();
        let mut bytes = text.into_bytes();
        bytes.insert(offset, 0xff);
        p.write(file, &bytes);
        let says = [" not UTF-8 text (byte 0xff here)"];
        let expected = Expected { path: file, line: line_no, columns: column..=column, says: &says };
        if file.ends_with(".toml") {
            refused_unparsed(&p, &before, &expected);
        } else {
            refused(&p, &before, &expected);
        }
    }
}

#[test]
fn a_dataset_pattern_that_matches_no_file_is_refused_where_it_is_written() {
    let (p, before) = green();
    let line = p.edit_line(
        "pipeline/ci.toml",
        4,
        r#""datasets/examples/*.jsonl""#,
        r#""datasets/examples/*.jsonl", "datasets/exmaples/*.jsonl""#,
    );
    refused(
        &p,
        &before,
        &Expected {
            path: "pipeline/ci.toml",
            line: 4,
            columns: span(&line, r#""datasets/exmaples/*.jsonl""#),
            says: &[r#"dataset pattern "datasets/exmaples/*.jsonl" matches no file"#],
        },
    );
}

#[test]
fn a_tool_manifest_not_there_or_not_as_pinned_is_refused_where_the_pipeline_names_it() {
    let (p, before) = green();
    let line = p.edit_line("pipeline/ci.toml", 13, "fixtures/tools/treasury.json", "fixtures/tools/treasurry.json");
    let says = [r#"agents.treasury.tools: tool manifest "fixtures/tools/treasurry.json" not found"#];
    let columns = span(&line, r#""fixtures/tools/treasurry.json""#);
    refused(&p, &before, &Expected { path: "pipeline/ci.toml", line: 13, columns, says: &says });

    let (p, before) = green();
    let line = p.line("pipeline/ci.toml", 60);
    let pinned = line.split('"').nth(1).expect("a pinned digest").to_string();
    let line = p.edit_line("pipeline/ci.toml", 60, &pinned[..20], "blake3:0000000000000");
    let says = ["the tool manifest is pinned to blake3:0000000000000", "but is now blake3:"];
    let columns = column_of(&line, "blake3:0000") - 1..=column_of(&line, "blake3:0000") - 1;
    refused(&p, &before, &Expected { path: "pipeline/ci.toml", line: 60, columns, says: &says });
}

#[test]
fn a_pipeline_with_an_unknown_agent_key_is_refused_at_the_key_and_deletes_nothing() {
    let (p, before) = green();
    let text = p.read("pipeline/ci.toml");
    assert_eq!(
        text.lines().nth(20),
        Some(r#"approvals = { financial = "approve", privileged = "human" }"#),
        "fixture changed"
    );
    p.edit_line("pipeline/ci.toml", 21, "approvals", "polcy = []\napprovals");
    refused_unparsed(
        &p,
        &before,
        &Expected {
            path: "pipeline/ci.toml",
            line: 21,
            columns: 1..=1,
            says: &["agents.treasury", r#"unknown field "polcy""#, r#"did you mean "policy""#],
        },
    );
}

// ---------------------------------------------------------------------------------
// Configuration that names nothing: refused at the name, with the closest real one

/// The 1-based number of the only line of `rel` that contains `needle`.
#[track_caller]
fn line_with(p: &Project, rel: &str, needle: &str) -> usize {
    let text = p.read(rel);
    let found: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.contains(needle)).map(|(i, _)| i + 1).collect();
    assert_eq!(found.len(), 1, "{rel} must contain {needle:?} on exactly one line: {found:?}");
    found[0]
}

#[test]
fn a_policy_rule_naming_a_tool_no_manifest_has_is_refused_at_the_name() {
    let (p, before) = green();
    let line = p.edit_line("pipeline/ci.toml", 17, r#"tool = "transfer""#, r#"tool = "transfr""#);
    let says = [
        r#"agents.treasury.policy[0].tool: policy rule "untrusted-recipient" names tool "transfr""#,
        r#"(did you mean "transfer"?)"#,
    ];
    refused(
        &p,
        &before,
        &Expected { path: "pipeline/ci.toml", line: 17, columns: span(&line, r#""transfr""#), says: &says },
    );
}

#[test]
fn an_approval_naming_neither_a_class_nor_a_reachable_tool_is_refused_at_the_key() {
    let (p, before) = green();
    let line = p.edit_line("pipeline/ci.toml", 21, "privileged = \"human\"", "transfr = \"human\"");
    let says = [r#"agents.treasury.approvals.transfr: an approval names "transfr""#, r#"(did you mean "transfer"?)"#];
    refused(
        &p,
        &before,
        &Expected { path: "pipeline/ci.toml", line: 21, columns: span(&line, "transfr"), says: &says },
    );
}

#[test]
fn a_destructive_tool_detector_matching_no_tool_is_refused_at_the_pattern() {
    let (p, before) = green();
    p.edit_line("pipeline/ci.toml", 21, "approvals", "safety = { destructive_tools = [\"close_acount\"] }\napprovals");
    let line = p.line("pipeline/ci.toml", 21);
    let says = [
        r#"agents.treasury.safety.destructive_tools[0]: the destructive-tool detector's pattern "close_acount" matches no tool"#,
        r#"(did you mean "close_account"?)"#,
    ];
    let columns = span(&line, r#""close_acount""#);
    refused(&p, &before, &Expected { path: "pipeline/ci.toml", line: 21, columns, says: &says });
}

#[test]
fn a_case_allowing_a_tool_its_agent_cannot_reach_is_refused_at_the_name() {
    let (p, before) = green();
    let line = p.edit_line(
        TREASURY,
        1,
        r#""agent":"treasury","#,
        r#""agent":"treasury","allowed_tools":["get_balance","transfr"],"#,
    );
    let says = [r#"allowed_tools names tool "transfr""#, r#"(did you mean "transfer"?)"#];
    refused(&p, &before, &Expected { path: TREASURY, line: 1, columns: span(&line, r#""transfr""#), says: &says });
}

#[test]
fn a_gate_on_a_tag_no_case_carries_is_refused_at_the_gate() {
    let (p, before) = green();
    let at = line_with(&p, "pipeline/ci.toml", "tags.memory = ");
    let line = p.edit_line("pipeline/ci.toml", at, "tags.memory", "tags.memroy");
    let says = [r#"gates.tags.memroy: no case carries the tag "memroy" (did you mean "memory"?)"#];
    refused(&p, &before, &Expected { path: "pipeline/ci.toml", line: at, columns: span(&line, "memroy"), says: &says });
}

#[test]
fn an_unknown_key_in_any_table_of_a_pipeline_is_refused_at_its_line() {
    // one bogus key in each table and inline table the shipped pipelines use
    let p = Project::new();
    let ci = p.read("pipeline/ci.toml");
    let edits: [(&str, &str); 13] = [
        ("[pipeline]\n", "[pipeline]\nbogus = 1\n"),
        ("[replay]\n", "[replay]\nbogus = 1\n"),
        ("[agents.treasury]\n", "[agents.treasury]\nbogus = 1\n"),
        ("context = { budget_tokens = 24000 }", "context = { budget_tokens = 24000, bogus = 1 }"),
        ("memory = { episodic_ttl_turns = 10 }", "memory = { episodic_ttl_turns = 10, bogus = 1 }"),
        (r#"{ id = "financial-approval","#, r#"{ bogus = 1, id = "financial-approval","#),
        ("max_calls_per_tool_per_turn = 3 }", "max_calls_per_tool_per_turn = 3, bogus = 1 }"),
        (r#"fault = "error" }"#, r#"fault = "error", bogus = 1 }"#),
        ("[gates]\n", "[gates]\nbogus = 1\n"),
        ("default = { min_pass_rate = 1.0 }", "default = { min_pass_rate = 1.0, bogus = 1 }"),
        ("tags.memory = { min_pass_rate = 1.0,", "tags.memory = { bogus = 1, min_pass_rate = 1.0,"),
        ("[report]\n", "[report]\nbogus = 1\n"),
        ("[report]\n", "[goldens]\nbogus = 1\n\n[report]\n"),
    ];
    for (from, to) in edits {
        assert_eq!(ci.matches(from).count(), 1, "pipeline/ci.toml no longer has {from:?} once");
        let edited = ci.replacen(from, to, 1);
        p.write("pipeline/ci.toml", &edited);
        let out = p.stateval(&["run"]);
        out.expect_code(2);
        let (path, line, _, message) = parse_located_error(out.stderr.lines().next().unwrap_or_default());
        let bogus = edited.lines().position(|l| l.contains("bogus")).map(|i| i + 1);
        assert_eq!((path.as_str(), Some(line)), ("pipeline/ci.toml", bogus), "{to}: {}", out.stderr);
        assert!(message.contains(r#"unknown field "bogus""#), "{to}: {message}");
    }
    // a judge's table too
    p.write("pipeline/ci.toml", format!("{ci}\n[judges.tone]\nrecordings = \"j.jsonl\"\nmodel = \"m\"\nbogus = 1\n"));
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    assert!(out.stderr.contains(r#"unknown field "bogus""#), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------
// Outputs outside the project

#[test]
fn a_report_path_outside_the_project_is_refused_and_the_file_there_is_untouched() {
    let (p, before) = green();
    // beside the project's temporary directory, under a name only this test uses
    let name = format!("{}-outside.xml", p.path().file_name().unwrap().to_string_lossy());
    let outside = p.path().parent().unwrap().join(&name);
    std::fs::write(&outside, "an earlier file of someone else's").unwrap();
    let at = line_with(&p, "pipeline/ci.toml", "junit = ");
    for path in [format!("../{name}"), outside.to_string_lossy().into_owned()] {
        let original = p.line("pipeline/ci.toml", at);
        let line = p.edit_line("pipeline/ci.toml", at, "reports/junit.xml", &path);
        let says = ["report.junit: ", "the files a pipeline writes (reports, goldens, the store) stay inside its base"];
        let columns = span(&line, &format!("\"{path}\""));
        refused_unparsed(&p, &before, &Expected { path: "pipeline/ci.toml", line: at, columns, says: &says });
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "an earlier file of someone else's");
        p.edit_line("pipeline/ci.toml", at, &path, "reports/junit.xml");
        assert_eq!(p.line("pipeline/ci.toml", at), original);
    }
    std::fs::remove_file(&outside).unwrap();
}

#[test]
fn goldens_and_store_outside_the_project_are_refused_at_their_keys() {
    let p = Project::new();
    let ci = p.read("pipeline/ci.toml");
    for (from, to, key) in [
        (r#"goldens = "goldens""#, r#"goldens = "../goldens""#, "pipeline.goldens"),
        (r#"store = ".stateval""#, r#"store = "/tmp/elsewhere""#, "pipeline.store"),
        ("[report]\n", "[goldens]\ndir = \"x/../../g\"\n\n[report]\n", "goldens.dir"),
    ] {
        p.write("pipeline/ci.toml", ci.replacen(from, to, 1));
        let out = p.stateval(&["run"]);
        out.expect_code(2);
        assert!(
            out.stderr.contains(&format!(": {key}: ")) && out.stderr.contains("stay inside its base"),
            "{}",
            out.stderr
        );
        assert!(!p.exists(".stateval") && !p.exists("reports"), "nothing ran");
    }
}

// ---------------------------------------------------------------------------------
// stateval schema

fn printed_schema(p: &Project, name: &str) -> Value {
    let out = p.stateval(&["schema", name]);
    out.expect_code(0);
    assert_eq!(out.stderr, "", "{name}");
    let schema: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("schema {name} is JSON: {e}"));
    assert!(jsonschema::meta::is_valid(&schema), "schema {name} is a valid JSON Schema");
    schema
}

#[track_caller]
fn assert_accepts(schema: &Value, name: &str, what: &str, instance: &Value) {
    let validator = jsonschema::validator_for(schema).expect("compiles");
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema {name} rejects {what}: {errors:?}");
}

fn jsonl(p: &Project, rel: &str) -> Vec<Value> {
    p.read(rel).lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("JSON line")).collect()
}

#[test]
fn every_schema_prints_as_a_valid_json_schema_that_accepts_the_shipped_inputs() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);

    let case = printed_schema(&p, "case");
    let mut lines = 0;
    for file in p.files_under("datasets") {
        for (i, v) in jsonl(&p, &file).iter().enumerate() {
            assert_accepts(&case, "case", &format!("{file}:{}", i + 1), v);
            lines += 1;
        }
    }
    assert_eq!(lines, 15 + 6);

    let recording = printed_schema(&p, "recording");
    for file in p.files_under("fixtures/recordings") {
        for (i, v) in jsonl(&p, &file).iter().enumerate() {
            assert_accepts(&recording, "recording", &format!("{file}:{}", i + 1), v);
        }
    }

    let tools = printed_schema(&p, "tools");
    for file in p.files_under("fixtures/tools") {
        assert_accepts(&tools, "tools", &file, &p.json(&file));
    }

    let pipeline = printed_schema(&p, "pipeline");
    for file in p.files_under("pipeline") {
        let v: Value = toml::from_str(&p.read(&file)).expect("TOML");
        assert_accepts(&pipeline, "pipeline", &file, &v);
    }

    let event = printed_schema(&p, "event");
    let logs = p.log_files();
    assert_eq!(logs.len(), 17);
    for log in &logs {
        for (i, v) in jsonl(&p, log).iter().enumerate() {
            assert_accepts(&event, "event", &format!("{log}:{}", i + 1), v);
        }
    }
}

#[test]
fn printed_schemas_reject_what_the_loaders_reject() {
    let p = Project::new();
    let case = jsonschema::validator_for(&printed_schema(&p, "case")).expect("compiles");
    let mut bad: Value = serde_json::from_str(&p.line(TREASURY, 2)).expect("JSON");
    bad["expct"] = bad["expect"].take();
    bad.as_object_mut().expect("object").remove("expect");
    assert!(!case.is_valid(&bad));

    let recording = jsonschema::validator_for(&printed_schema(&p, "recording")).expect("compiles");
    let mut bad: Value = serde_json::from_str(&p.line(PAY_ALICE, 2)).expect("JSON");
    bad["latency_ms"] = "slow".into();
    assert!(!recording.is_valid(&bad));

    let pipeline = jsonschema::validator_for(&printed_schema(&p, "pipeline")).expect("compiles");
    let mut bad: Value = toml::from_str(&p.read("pipeline/ci.toml")).expect("TOML");
    bad["pipeline"]["storre"] = "x".into();
    assert!(!pipeline.is_valid(&bad));
}

#[test]
fn an_unknown_schema_name_exits_2_listing_the_known_ones() {
    let p = Project::new();
    let out = p.stateval(&["schema", "nope"]);
    out.expect_code(2);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "error: unknown schema \"nope\" (known: case, recording, judge-recording, tools, pipeline, event)\n"
    );
}

// ---------------------------------------------------------------------------------
// stateval validate

#[test]
fn validate_accepts_the_ci_pipeline_with_everything_it_references() {
    let p = Project::new();
    for args in [&["validate", "pipeline/ci.toml"][..], &["validate"][..]] {
        let out = p.stateval(args);
        out.expect_code(0);
        assert_eq!(out.stdout, "ok pipeline/ci.toml: pipeline \"ci\", 15 cases\n", "{args:?}");
        assert_eq!(out.stderr, "", "{args:?}");
    }
    let out = p.stateval(&["validate", TREASURY, PAY_ALICE, "fixtures/tools/treasury.json"]);
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[..2],
        [format!("ok {TREASURY}: dataset, 7 cases"), format!("ok {PAY_ALICE}: recording, 4 responses")]
    );
    let manifest = lines[2].strip_prefix("ok fixtures/tools/treasury.json: tool manifest, 5 tools, digest blake3:");
    assert!(manifest.is_some_and(|hex| hex.len() == 64), "{}", lines[2]);
    assert_eq!(lines.len(), 3);
    assert!(!p.exists(".stateval") && !p.exists("reports"), "validate runs nothing and writes nothing");
}

#[test]
fn validate_refuses_a_broken_dataset_with_its_location_and_exit_2() {
    let p = Project::new();
    let line = p.edit_line(TREASURY, 2, r#""expect":"#, r#""expct":"#);
    let col = column_of(&line, r#""expct""#);
    for args in [&["validate"][..], &["validate", TREASURY][..]] {
        let out = p.stateval(args);
        out.expect_code(2);
        assert_eq!(out.stdout, "", "{args:?}");
        assert_eq!(
            out.stderr,
            format!("error: {TREASURY}:2:{col}: unknown field \"expct\" (did you mean \"expect\"?)\n"),
            "{args:?}"
        );
    }
}

#[test]
fn validate_refuses_configuration_that_names_nothing_as_run_does() {
    let p = Project::new();
    let rule = p.edit_line("pipeline/ci.toml", 17, r#"tool = "transfer""#, r#"tool = "transfr""#);
    let col = column_of(&rule, r#""transfr""#);
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    assert!(
        out.stderr.starts_with(&format!(
            "error: pipeline/ci.toml:17:{col}: agents.treasury.policy[0].tool: policy rule \"untrusted-recipient\" names tool \"transfr\""
        )),
        "{}",
        out.stderr
    );
    p.edit_line("pipeline/ci.toml", 17, r#"tool = "transfr""#, r#"tool = "transfer""#);
    // a case's allowed tool, with the dataset validated on its own against the pipeline
    let case =
        p.edit_line(TREASURY, 1, r#""agent":"treasury","#, r#""agent":"treasury","allowed_tools":["get_balanse"],"#);
    let col = column_of(&case, r#""get_balanse""#);
    for args in [&["validate"][..], &["validate", TREASURY][..]] {
        let out = p.stateval(args);
        out.expect_code(2);
        assert!(
            out.stderr.starts_with(&format!(
                "error: {TREASURY}:1:{col}: allowed_tools names tool \"get_balanse\", which no manifest the profile can \
                 reach has (did you mean \"get_balance\"?)"
            )),
            "{args:?}: {}",
            out.stderr
        );
    }
    // a case's recorded approval for a tool its agent cannot reach
    p.edit_line(TREASURY, 1, r#""allowed_tools":["get_balanse"],"#, r#""approvals":{"close_acount":"approve"},"#);
    let out = p.stateval(&["validate"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains(r#"an approval names "close_acount", which is neither a safety class"#)
            && out.stderr.contains(r#"(did you mean "close_account"?)"#),
        "{}",
        out.stderr
    );
}

#[test]
fn validate_checks_event_logs_and_refuses_a_tampered_one() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let log = p.log_files().into_iter().find(|l| l.ends_with("/balance-check/0.jsonl")).expect("a log");
    let out = p.stateval(&["validate", &log]);
    out.expect_code(0);
    assert_eq!(out.stdout, format!("ok {log}: event log, 11 events\n"));

    let mut lines = common::lines_of(&p.read_bytes(&log));
    lines.swap(4, 5);
    p.write("tampered.jsonl", lines.concat());
    let out = p.stateval(&["validate", "tampered.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.starts_with("error: tampered.jsonl:5: event seq 4: "), "{}", out.stderr);
}

#[test]
fn a_run_that_cannot_write_its_logs_fails_and_leaves_no_stale_report() {
    // A failure inside the run (here the runs directory is a file, so no log can be
    // created) ends it with exit 3; the reports of the earlier green run must go, not
    // stand in for this one.
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    assert!(CI_REPORTS.iter().all(|r| p.exists(r)));
    std::fs::remove_dir_all(p.join(".stateval/runs")).expect("remove the runs");
    std::fs::write(p.join(".stateval/runs"), b"not a directory").expect("a file in its place");
    let out = p.stateval(&["run"]);
    out.expect_code(3);
    assert!(out.stderr.contains(".stateval/runs/r-"), "the error names the path: {}", out.stderr);
    let left: Vec<&str> = CI_REPORTS.iter().copied().filter(|r| p.exists(r)).collect();
    assert!(left.is_empty(), "stale reports survived a failed run: {left:?}");
}

#[test]
fn targets_lists_every_assertion_target_with_where_it_comes_from_and_what_it_means() {
    let p = Project::new();
    let out = p.stateval(&["targets"]);
    out.expect_code(0);
    let line = out.stdout.lines().find(|l| l.starts_with("policy.denials ")).expect("policy.denials is listed");
    assert!(line.contains(" log ") && line.ends_with("how many proposals policy denied"), "{line}");
    let line = out.stdout.lines().find(|l| l.starts_with("golden_path.penalty ")).expect("block targets are listed");
    assert!(line.contains(" golden_path "), "{line}");
}

/// Manifests are validated on every core: what each broken one says still comes once
/// for each profile that names it, in the profiles' order, whichever file finished
/// first, and nothing is written.
#[test]
fn broken_manifests_are_each_named_for_every_profile_that_uses_them_in_order() {
    let (p, before) = green();
    p.write("fixtures/tools/support.json", "{\"tools\": [");
    p.write("fixtures/tools/ops.json", "{\"tools\": 7}\n");
    let out = p.stateval(&["run"]);
    out.expect_code(2);
    let named: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| ["support.json", "ops.json"].into_iter().find(|f| l.contains(&format!("fixtures/tools/{f}:"))))
        .collect();
    // longhaul and support name support.json; ops names ops.json (profiles by name)
    assert_eq!(named, ["support.json", "ops.json", "support.json"], "{}", out.stderr);
    // the earlier run is untouched; its reports went as the pipeline was read, so no
    // green report stands beside the refusal
    let kept: BTreeMap<String, Vec<u8>> = before.into_iter().filter(|(k, _)| !k.starts_with("reports")).collect();
    assert_eq!(p.snapshot(".stateval/runs"), kept);
    for report in CI_REPORTS {
        assert!(!p.exists(report), "{report} was left beside the refusal");
    }
}
