//! The TAP report (Test Anything Protocol, versions 13 and 14), for `prove`-style
//! harnesses and CI plugins that read TAP.
//!
//! One test point per case (`ok 3 - examples/treasury :: case-id`), in outcome order,
//! then one per gate (`not ok 16 - [gates] :: security`), so a harness that counts test
//! points fails a run whose cases all passed but whose gate did not. A failing point is
//! followed by an indented YAML diagnostics block: the first reason as `message`,
//! `severity`, and for a case every failing check under `failures` (a mapping each:
//! `run`, `check`, `reason`, or `run` and `error`), per run its verdict, log, head and
//! status, and per metric block its verdict. The verdict closes the stream as a comment.
//!
//! Quoting: case ids and reasons are arbitrary text. In a description `\` and `#` are
//! backslash-escaped (an unescaped `# TODO` would turn a failure into a pass) and
//! control characters are spelt out; every YAML string is double-quoted with escapes
//! limited to the set both YAML 1.2 and Perl's TAP::Parser YAMLish reader decode
//! (`\"`, `\\`, `\n`, `\r`, `\t`, `\xHH`), so no text can end or restructure a block.
//! Versions 13 and 14 differ here only in the version line: the output uses nothing
//! (subtests, pragmas) whose syntax changed.

use std::fmt::Write as _;
use std::io;

use crate::outcome::{CaseOutcome, Check, GateOutcome, RunResult, SuiteOutcome};
use crate::report::junit::GATES_SUITE;

/// The version [`render`] and [`write`] take; the setting is `[report]`'s (`pipeline::reports`).
use crate::pipeline::reports::TapVersion;

/// `outcome` as a TAP stream of the given version, in memory.
pub fn render(outcome: &SuiteOutcome, version: TapVersion) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, version, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as a TAP stream, one test point at a time.
pub fn write(outcome: &SuiteOutcome, version: TapVersion, out: &mut dyn io::Write) -> io::Result<()> {
    // Each part is built in a `String` (`fmt::Write` into a `String` cannot fail, so
    // those results are ignored) and written out whole.
    let mut text = String::new();
    let _ = writeln!(text, "TAP version {}", version.number());
    let points = outcome.cases.len() + outcome.gates.len();
    if points == 0 {
        text.push_str("1..0 # SKIP no cases\n");
    } else {
        let _ = writeln!(text, "1..{points}");
    }
    if let Some(root) = &outcome.root {
        // the digest that anchors this run's logs: `stateval verify RUN_DIR --root ROOT`
        let _ = writeln!(text, "# run {} root {}", comment_text(&outcome.run_id), comment_text(root));
    }
    if let Some(signature) = &outcome.signature {
        // `unsigned`, or who signed the root (`stateval verify RUN_DIR --pubkey KEY.pub`)
        let _ = writeln!(text, "# signature {}", comment_text(signature));
    }
    if let Some(why) = outcome.unisolated() {
        let _ = writeln!(text, "# the code under test ran WITHOUT ISOLATION: {}", comment_text(why));
    }
    out.write_all(text.as_bytes())?;
    let mut number = 0;
    for case in outcome.cases.iter() {
        number += 1;
        text.clear();
        test_point(&mut text, number, case?.as_ref());
        out.write_all(text.as_bytes())?;
    }
    text.clear();
    for gate in &outcome.gates {
        number += 1;
        gate_point(&mut text, number, gate);
    }
    let failed_gates: Vec<&str> = outcome.gates.iter().filter(|g| !g.passed).map(|g| g.scope.as_str()).collect();
    let _ = writeln!(
        text,
        "# verdict: {} - {}/{} cases passed, {}",
        if outcome.passed { "PASS" } else { "FAIL" },
        outcome.passed_cases(),
        outcome.cases.len(),
        if failed_gates.is_empty() {
            "every gate passed".to_string()
        } else {
            comment_text(&format!("gates failed: {}", failed_gates.join(", ")))
        }
    );
    out.write_all(text.as_bytes())
}

fn test_point(out: &mut String, number: usize, case: &CaseOutcome) {
    let _ = writeln!(
        out,
        "{} {number} - {} :: {}",
        if case.passed { "ok" } else { "not ok" },
        description_text(&case.dataset),
        description_text(&case.id)
    );
    if case.passed {
        for run in &case.runs {
            for warning in &run.warnings {
                let _ = writeln!(out, "# warning: run {}: {}", run.index, comment_text(warning));
            }
        }
        return;
    }

    out.push_str("  ---\n");
    let message = case.failure().unwrap_or_else(|| "case failed without a recorded reason".into());
    let _ = writeln!(out, "  message: {}", yaml_string(&message));
    out.push_str("  severity: fail\n");
    let _ = writeln!(out, "  source: {}", yaml_string(&case.source));
    failures(out, case);
    if !case.runs.is_empty() {
        out.push_str("  runs:\n");
        for run in &case.runs {
            run_diagnostics(out, run);
        }
    }
    if !case.blocks.is_empty() {
        out.push_str("  blocks:\n");
        for block in &case.blocks {
            let _ = writeln!(out, "    - check: {}", yaml_string(&block.name));
            let _ = writeln!(out, "      passed: {}", block.passed);
        }
    }
    out.push_str("  ...\n");
}

/// Every failing check of a case, as mappings (the same list, in the same order, as
/// [`CaseOutcome::failures`] gives as lines). A mapping per item, rather than one
/// string, keeps each field plain: a string item starting `word: …` would need its
/// colon escaped for TAP::Parser's YAMLish reader.
fn failures(out: &mut String, case: &CaseOutcome) {
    let failed_check = |out: &mut String, run: Option<usize>, check: &Check| {
        match run {
            Some(index) => {
                let _ = writeln!(out, "    - run: {index}");
                let _ = writeln!(out, "      check: {}", yaml_string(&check.name));
            }
            None => {
                let _ = writeln!(out, "    - check: {}", yaml_string(&check.name));
            }
        }
        let _ = writeln!(out, "      reason: {}", yaml_string(&check.reason));
    };
    let mut any = false;
    let mut heading = |out: &mut String| {
        if !any {
            out.push_str("  failures:\n");
            any = true;
        }
    };
    for run in &case.runs {
        if let Some(error) = &run.error {
            heading(out);
            let _ = writeln!(out, "    - run: {}", run.index);
            let _ = writeln!(out, "      error: {}", yaml_string(error));
        }
        for check in run.checks.iter().filter(|c| !c.passed) {
            heading(out);
            failed_check(out, Some(run.index), check);
        }
    }
    for check in case.blocks.iter().filter(|c| !c.passed) {
        heading(out);
        failed_check(out, None, check);
    }
}

/// A gate as a test point after the cases, with the gate's reason as the YAML
/// `message` when it failed.
fn gate_point(out: &mut String, number: usize, gate: &GateOutcome) {
    let _ = writeln!(
        out,
        "{} {number} - {GATES_SUITE} :: {}",
        if gate.passed { "ok" } else { "not ok" },
        description_text(&gate.scope)
    );
    if gate.passed {
        return;
    }
    out.push_str("  ---\n");
    let _ = writeln!(out, "  message: {}", yaml_string(&gate.reason));
    out.push_str("  severity: fail\n");
    let _ = writeln!(out, "  cases: {}", gate.cases);
    let _ = writeln!(out, "  passed_cases: {}", gate.passed_cases);
    out.push_str("  ...\n");
}

fn run_diagnostics(out: &mut String, run: &RunResult) {
    let _ = writeln!(out, "    - index: {}", run.index);
    let _ = writeln!(out, "      passed: {}", run.passed);
    let _ = writeln!(out, "      status: {}", yaml_string(&run.status));
    let _ = writeln!(out, "      events: {}", run.events);
    let _ = writeln!(out, "      log: {}", yaml_string(&run.log));
    match &run.head {
        Some(head) => {
            let _ = writeln!(out, "      head: {}", yaml_string(head));
        }
        None => out.push_str("      head: ~\n"),
    }
    if let Some(error) = &run.error {
        let _ = writeln!(out, "      error: {}", yaml_string(error));
    }
    if !run.warnings.is_empty() {
        out.push_str("      warnings:\n");
        for warning in &run.warnings {
            // a mapping, not a bare string: see `failures`
            let _ = writeln!(out, "        - message: {}", yaml_string(warning));
        }
    }
}

/// A YAML double-quoted scalar that any YAML 1.1/1.2 reader and TAP::Parser's
/// YAMLish reader decode back to `text`. Characters YAML forbids raw (C0 and C1
/// controls, DEL) are `\xHH`; everything else printable passes through as UTF-8.
fn yaml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                // C0, DEL and C1 are all below U+0100: two hex digits suffice.
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text for a test point description: one line, `\` and `#` escaped so no directive
/// (`# SKIP`, `# TODO`) can be smuggled in by a case id.
fn description_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '#' => out.push_str("\\#"),
            c => push_visible(&mut out, c),
        }
    }
    out
}

/// Text for a comment line: one line, controls spelt out.
fn comment_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_visible(&mut out, c);
    }
    out
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_control() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    use serde_json::Value;

    use super::*;
    use crate::report::fixture;

    fn tap(outcome: &SuiteOutcome, version: TapVersion) -> String {
        render(outcome, version).unwrap_or_else(|e| panic!("render failed: {e}"))
    }

    /// Parses `tap` with Perl's TAP::Parser and returns what it understood as JSON.
    /// Fails the test (never skips it) when perl or TAP::Parser is missing: CI must
    /// have them (Debian's `perl` package ships TAP::Parser and JSON::PP).
    fn tap_parser(tap: &str) -> Value {
        const SCRIPT: &str = r#"
            use strict; use warnings;
            use TAP::Parser; use JSON::PP;
            binmode STDIN, ':encoding(UTF-8)';
            my $tap = do { local $/; <STDIN> };
            my $parser = TAP::Parser->new({ tap => $tap });
            my (@descriptions, @yaml, @comments);
            while (my $result = $parser->next) {
                push @descriptions, $result->description if $result->is_test;
                push @yaml, $result->data if $result->is_yaml;
                push @comments, $result->comment if $result->is_comment;
            }
            print JSON::PP->new->utf8->canonical->encode({
                version => 0 + $parser->version,
                plan => $parser->plan,
                good_plan => $parser->good_plan ? JSON::PP::true : JSON::PP::false,
                tests_run => $parser->tests_run,
                passed => [$parser->passed],
                failed => [$parser->failed],
                todo => scalar($parser->todo),
                skipped => scalar($parser->skipped),
                parse_errors => [$parser->parse_errors],
                descriptions => \@descriptions,
                yaml => \@yaml,
                comments => \@comments,
            });
        "#;
        let child = Command::new("perl")
            .args(["-e", SCRIPT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = child.unwrap_or_else(|e| panic!("cannot run perl: {e}"));
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(tap.as_bytes()).unwrap_or_else(|e| panic!("cannot feed perl: {e}"));
        }
        let output = child.wait_with_output().unwrap_or_else(|e| panic!("perl failed: {e}"));
        assert!(output.status.success(), "perl TAP::Parser failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("perl said: {e}"))
    }

    /// What both versions must parse to: the plan (3 cases, 3 gates), 2 passes (a case
    /// and a gate), 4 real failures (not TODO: the tricky id's `# TODO` is escaped), the
    /// YAML decoded exactly.
    fn assert_parsed_like_the_fixture(parsed: &Value) {
        assert_eq!(parsed["plan"], "1..6");
        assert_eq!(parsed["good_plan"], true);
        assert_eq!(parsed["tests_run"], 6);
        assert_eq!(parsed["passed"], serde_json::json!([1, 5]));
        assert_eq!(parsed["failed"], serde_json::json!([2, 3, 4, 6]));
        assert_eq!(parsed["todo"], 0);
        assert_eq!(parsed["skipped"], 0);

        assert_eq!(parsed["descriptions"][1], "- examples/treasury :: redirect \"attack\": \\# TODO \\#1 | <b>&co `x`");

        assert_eq!(
            parsed["descriptions"].as_array().map(|d| d[3..].to_vec()),
            Some(vec![
                Value::from("- [gates] :: default"),
                Value::from("- [gates] :: long-horizon"),
                Value::from("- [gates] :: security"),
            ])
        );

        let yaml = &parsed["yaml"];
        assert_eq!(yaml.as_array().map(Vec::len), Some(4), "{yaml}");
        let tricky = &yaml[0];
        assert_eq!(tricky["message"], format!("run 0: policy.denials: {}", fixture::FIRST_REASON));
        assert_eq!(tricky["severity"], "fail");
        // YAMLish reads every scalar as a string
        assert_eq!(
            tricky["failures"],
            serde_json::json!([
                {"run": "0", "check": "policy.denials", "reason": fixture::FIRST_REASON},
                {"run": "1", "check": "memory.semantic.payee", "reason": fixture::SECOND_REASON},
            ])
        );
        assert_eq!(tricky["runs"][1]["head"], "blake3:1f3a91c1d");
        assert_eq!(tricky["runs"][1]["status"], "completed");
        assert_eq!(tricky["runs"][1]["log"], ".stateval/runs/r1/case/1.jsonl");

        let miss = &yaml[1];
        assert_eq!(
            miss["failures"],
            serde_json::json!([
                {"run": "0", "error": fixture::REPLAY_MISS},
                {"check": "stability.passed", "reason": "only 0/1 runs completed"},
            ])
        );
        assert_eq!(miss["blocks"], serde_json::json!([{"check": "stability.passed", "passed": "false"}]));
        assert_eq!(miss["message"], format!("run 0: {}", fixture::REPLAY_MISS));
        assert_eq!(miss["runs"][0]["head"], Value::Null);
        assert_eq!(miss["runs"][0]["error"], fixture::REPLAY_MISS);
        assert_eq!(miss["runs"][0]["status"], "replay_exhausted");

        let security = &yaml[3];
        assert_eq!(security["message"], "security: 0/2 passed (0.0 %), below min_cases 3, below min_pass_rate 95.0 %");
        assert_eq!((&security["cases"], &security["passed_cases"]), (&Value::from("2"), &Value::from("0")));

        let comments: Vec<&str> =
            parsed["comments"].as_array().map(|c| c.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        assert_eq!(
            comments,
            [
                "run run-3f2a9c1d root blake3:5b0e7a4c2f1d9e8b6a3c0f7e4d1b8a5c2e9f6d3b0a7c4e1f8d5b2a9c6e3f0d7a",
                "signature unsigned",
                "warning: run 0: replay diverged at position 2 (on_divergence = warn)",
                "verdict: FAIL - 1/3 cases passed, gates failed: default, security"
            ]
        );
    }

    #[test]
    fn no_yaml_string_carries_an_escaped_colon() {
        let text = tap(&fixture::suite(), TapVersion::V13);
        assert!(!text.contains("\\x3a"), "{text}");
    }

    #[test]
    fn a_failed_gate_fails_the_tap_stream_when_every_case_passed() {
        let mut outcome = fixture::suite();
        let passing: Vec<CaseOutcome> =
            outcome.cases.to_vec().unwrap_or_default().into_iter().filter(|c| c.passed).collect();
        outcome.cases = passing.into();
        outcome.gates.retain(|g| g.scope == "security");
        let parsed = tap_parser(&tap(&outcome, TapVersion::V13));
        assert_eq!(parsed["plan"], "1..2");
        assert_eq!(parsed["passed"], serde_json::json!([1]));
        assert_eq!(parsed["failed"], serde_json::json!([2]));
        assert_eq!(parsed["parse_errors"], serde_json::json!([]));
    }

    #[test]
    fn tap_13_is_read_by_perls_tap_parser_without_errors() {
        let parsed = tap_parser(&tap(&fixture::suite(), TapVersion::V13));
        assert_eq!(parsed["version"], 13);
        assert_eq!(parsed["parse_errors"], serde_json::json!([]));
        assert_parsed_like_the_fixture(&parsed);
    }

    #[test]
    fn tap_14_is_read_by_perls_tap_parser_apart_from_the_version_it_may_not_know() {
        // TAP::Parser 3.44 (Debian 12's perl) knows versions up to 13: it reports
        // exactly one parse error for the version line, then parses the rest as 13.
        // A newer parser that knows 14 reports none. Anything else is our fault.
        let parsed = tap_parser(&tap(&fixture::suite(), TapVersion::V14));
        let errors = parsed["parse_errors"].as_array().cloned().unwrap_or_default();
        let only_unknown_version = errors
            .iter()
            .all(|e| e.as_str().is_some_and(|e| e.starts_with("TAP specified version 14 but we don't know")));
        assert!(errors.len() <= 1 && only_unknown_version, "{errors:?}");
        assert_parsed_like_the_fixture(&parsed);
    }

    #[test]
    fn an_empty_suite_is_a_skipped_plan() {
        let mut outcome = fixture::suite();
        outcome.cases = Vec::new().into();
        outcome.gates.clear();
        let parsed = tap_parser(&tap(&outcome, TapVersion::V13));
        assert_eq!(parsed["plan"], "1..0");
        assert_eq!(parsed["good_plan"], true);
        assert_eq!(parsed["parse_errors"], serde_json::json!([]));
    }

    #[test]
    fn yaml_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(yaml_string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(yaml_string("x\ny\tz\r"), r#""x\ny\tz\r""#);
        assert_eq!(yaml_string("\u{1b}[0m\u{7f}\u{85}"), r#""\x1b[0m\x7f\x85""#);
        assert_eq!(yaml_string("key: #1 ≥ 2"), "\"key: #1 ≥ 2\"");
    }

    #[test]
    fn a_description_cannot_carry_a_directive_or_a_line_break() {
        assert_eq!(description_text("a # SKIP\nok 2"), "a \\# SKIP\\nok 2");
        assert_eq!(description_text("back\\slash"), "back\\\\slash");
    }

    #[test]
    fn tap_13_is_pinned() {
        insta::assert_snapshot!("tap13", tap(&fixture::suite(), TapVersion::V13));
    }

    #[test]
    fn tap_14_differs_from_13_only_in_the_version_line() {
        let v13 = tap(&fixture::suite(), TapVersion::V13);
        let v14 = tap(&fixture::suite(), TapVersion::V14);
        assert!(v14.starts_with("TAP version 14\n"));
        assert_eq!(v13.replacen("TAP version 13\n", "TAP version 14\n", 1), v14);
    }
}
