//! The JUnit XML report, for CI systems that render test results (GitLab, Jenkins,
//! GitHub annotations via third-party actions).
//!
//! Mapping: the report is named after the pipeline; one `<testsuite>` per dataset, in
//! the order datasets first appear; one `<testcase>` per case with `classname` = the
//! dataset and `name` = the case id. A failing case carries one `<failure>`: its
//! `message` is the first reason ([`CaseOutcome::failure`]) and its text lists every
//! reason ([`CaseOutcome::failures`]), one per line.
//!
//! Gates: after the datasets, one more `<testsuite>` named [`GATES_SUITE`] holds one
//! `<testcase>` per gate (`classname` = `[gates]`, `name` = the gate's scope), failing
//! with the gate's reason when the gate failed. A run whose cases all pass but whose
//! gate fails (too few cases, a reliability minimum) exits 1, and CI tools that count
//! JUnit failures must see that failure too. The name is the pipeline's section name in
//! brackets: a dataset cannot take it (a bracket in a dataset glob is a character
//! class), so the two never merge in a viewer.
//!
//! Properties: the suite carries `run_id`, the run's `root` and its `signature`
//! (`unsigned`, `signed by …`); each case carries `source`, `agent`, and `head.<k>`
//! per run (the blake3 head of run k's event log, so a log rewritten after the fact is
//! caught by comparing heads; omitted for a run that wrote no event).
//! quick-junit supports properties on test cases, so heads sit beside the case they
//! belong to rather than in one long suite-level list. Per-run status, event count,
//! log path and warnings go to the case's `<system-out>`.
//!
//! No timestamps and no durations: the same outcome gives the same bytes.

use std::borrow::Cow;
use std::io::{self, Write};

use quick_junit::XmlString;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

use crate::outcome::{CaseOutcome, DatasetTally, GateOutcome, SuiteOutcome};

/// The name (and classname) of the `<testsuite>` that holds the gates.
pub const GATES_SUITE: &str = "[gates]";

/// `outcome` as JUnit XML, in memory.
pub fn render(outcome: &SuiteOutcome) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as JUnit XML, one case at a time.
///
/// quick-junit builds a whole report in memory before it serialises it; a suite's
/// cases are streamed instead, so this writes the same document with quick-xml, the
/// writer quick-junit uses, in quick-junit's layout, and with quick-junit's own text
/// cleaning ([`XmlString`]: ANSI escapes and characters XML cannot hold removed). A
/// test renders random suites both ways and requires identical bytes.
///
/// A suite's counts head its element: they are the ones tallied as the cases were
/// written ([`Cases::datasets`](crate::outcome::Cases::datasets)), and each suite's
/// cases are checked against them as they are written.
pub fn write(outcome: &SuiteOutcome, out: &mut dyn Write) -> io::Result<()> {
    let suites = dataset_counts(outcome)?;
    let mut xml = Writer::new_with_indent(out, b' ', 4);
    xml.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let failed_gates = outcome.gates.iter().filter(|g| !g.passed).count();
    let failures = outcome.cases.len() - outcome.cases.passed() + failed_gates;
    let mut root = BytesStart::new("testsuites");
    root.push_attribute(("name", &*clean(&outcome.pipeline)));
    root.extend_attributes([
        ("tests", (outcome.cases.len() + outcome.gates.len()).to_string().as_str()),
        ("skipped", "0"),
        ("failures", failures.to_string().as_str()),
        ("errors", "0"),
    ]);
    xml.write_event(Event::Start(root))?;

    let mut cases = outcome.cases.iter();
    for suite in suites {
        let mut tag = BytesStart::new("testsuite");
        tag.extend_attributes([
            ("name", &*clean(&suite.dataset)),
            ("tests", suite.cases.to_string().as_str()),
            ("skipped", "0"),
            ("errors", "0"),
            ("failures", (suite.cases - suite.passed).to_string().as_str()),
        ]);
        xml.write_event(Event::Start(tag))?;
        properties(&mut xml, &suite_properties(outcome))?;
        for _ in 0..suite.cases {
            let case = cases.next().ok_or_else(|| changed("fewer cases than counted"))??;
            if case.dataset != suite.dataset {
                return Err(changed(&format!("case {} is not of dataset {}", case.id, suite.dataset)));
            }
            test_case(&mut xml, &case)?;
        }
        end(&mut xml, "testsuite")?;
    }
    if cases.next().is_some() {
        return Err(changed("more cases than counted"));
    }
    if !outcome.gates.is_empty() {
        gates_suite(&mut xml, outcome, failed_gates)?;
    }
    end(&mut xml, "testsuites")?;
    xml.write_event(Event::Eof)?;
    xml.write_indent()?;
    Ok(())
}

/// The datasets in order with their counts, as the cases were tallied when written or
/// read ([`Cases::datasets`](crate::outcome::Cases::datasets)). The cases of a dataset
/// are adjacent (the [`Cases`](crate::outcome::Cases) contract); a dataset seen again
/// after another is an error rather than a second suite of the same name.
fn dataset_counts(outcome: &SuiteOutcome) -> io::Result<&[DatasetTally]> {
    let suites = outcome.cases.datasets();
    for (i, suite) in suites.iter().enumerate() {
        if suites[..i].iter().any(|s| s.dataset == suite.dataset) {
            return Err(changed(&format!("the cases of dataset {} are not adjacent", suite.dataset)));
        }
    }
    Ok(suites)
}

fn changed(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("the cases changed while the JUnit report was written: {what}"))
}

fn test_case(xml: &mut Writer<&mut dyn Write>, case: &CaseOutcome) -> io::Result<()> {
    let mut tag = BytesStart::new("testcase");
    tag.push_attribute(("name", &*clean(&case.id)));
    tag.push_attribute(("classname", &*clean(&case.dataset)));
    xml.write_event(Event::Start(tag))?;

    let mut props = vec![("source", case.source.clone()), ("agent", case.agent.clone())];
    // an attack: what the agent attempted apart from what took effect
    if let Some(attempted) = case.score.as_ref().and_then(|s| s.attempted) {
        props.push(("attempted", attempted.to_string()));
    }
    if let Some(layer) = case.score.as_ref().and_then(|s| s.stopped_by.clone()) {
        props.push(("stopped_by", layer));
    }
    let heads: Vec<(String, String)> =
        case.runs.iter().filter_map(|r| r.head.as_ref().map(|h| (format!("head.{}", r.index), h.clone()))).collect();
    props.extend(heads.iter().map(|(name, head)| (name.as_str(), head.clone())));
    properties(xml, &props)?;

    if !case.passed {
        // `passed = false` with no failing check would be a runner bug; say so rather
        // than emit an empty message.
        let message = case.failure().unwrap_or_else(|| "case failed without a recorded reason".into());
        let run_error = case.runs.iter().any(|r| r.error.is_some());
        let mut failure = BytesStart::new("failure");
        failure.push_attribute(("message", &*clean(&one_line(&message))));
        failure.push_attribute(("type", if run_error { "run_error" } else { "check_failed" }));
        xml.write_event(Event::Start(failure))?;
        xml.write_event(Event::Text(BytesText::new(&clean(&case.failures().join("\n")))))?;
        end(xml, "failure")?;
    }

    xml.write_event(Event::Start(BytesStart::new("system-out")))?;
    xml.write_event(Event::Text(BytesText::new(&clean(&runs_text(case)))))?;
    end(xml, "system-out")?;
    // an external agent's failed run: its last output lines and stateval's last refusal
    if let Some(diagnoses) = case.diagnoses() {
        xml.write_event(Event::Start(BytesStart::new("system-err")))?;
        xml.write_event(Event::Text(BytesText::new(&clean(&diagnoses))))?;
        end(xml, "system-err")?;
    }
    end(xml, "testcase")
}

/// The `[gates]` suite: one test case per gate, in the order the gates were decided.
fn gates_suite(xml: &mut Writer<&mut dyn Write>, outcome: &SuiteOutcome, failed: usize) -> io::Result<()> {
    let mut tag = BytesStart::new("testsuite");
    tag.extend_attributes([
        ("name", GATES_SUITE),
        ("tests", outcome.gates.len().to_string().as_str()),
        ("skipped", "0"),
        ("errors", "0"),
        ("failures", failed.to_string().as_str()),
    ]);
    xml.write_event(Event::Start(tag))?;
    let mut props = suite_properties(outcome);
    props.extend(scorecard_properties(outcome));
    properties(xml, &props)?;
    // each gate's scope with its own scorecard row: per tag, as the other reports show it
    let rows = outcome.scorecard.as_ref().map(crate::report::score_rows).unwrap_or_default();
    for gate in &outcome.gates {
        let scope = if gate.scope == crate::outcome::DEFAULT_SCOPE { "overall" } else { gate.scope.as_str() };
        gate_case(xml, gate, rows.iter().find(|r| r.scope == scope))?;
    }
    end(xml, "testsuite")
}

/// One gate as a test case: its counts as properties, its reason as the failure
/// message when it failed and as `<system-out>` either way.
fn gate_case(
    xml: &mut Writer<&mut dyn Write>,
    gate: &GateOutcome,
    scores: Option<&crate::report::ScoreRow>,
) -> io::Result<()> {
    let mut tag = BytesStart::new("testcase");
    tag.push_attribute(("name", &*clean(&gate.scope)));
    tag.push_attribute(("classname", GATES_SUITE));
    xml.write_event(Event::Start(tag))?;
    let mut props = vec![("cases", gate.cases.to_string()), ("passed_cases", gate.passed_cases.to_string())];
    if let Some(row) = scores {
        props.push(("security.attack_success", row.asr.clone()));
        props.push(("security.attempt_rate", row.attempts.clone()));
        props.push(("security.stopped_by", row.stopped_by.clone()));
    }
    properties(xml, &props)?;
    if !gate.passed {
        let mut failure = BytesStart::new("failure");
        failure.push_attribute(("message", &*clean(&one_line(&gate.reason))));
        failure.push_attribute(("type", "gate_failed"));
        xml.write_event(Event::Start(failure))?;
        xml.write_event(Event::Text(BytesText::new(&clean(&gate.reason))))?;
        end(xml, "failure")?;
    }
    xml.write_event(Event::Start(BytesStart::new("system-out")))?;
    xml.write_event(Event::Text(BytesText::new(&clean(&gate_text(gate)))))?;
    end(xml, "system-out")?;
    end(xml, "testcase")
}

fn gate_text(gate: &GateOutcome) -> String {
    format!("{}\n", gate.reason)
}

/// Every suite carries the run id, the run's root (the digest that anchors its logs:
/// `stateval verify RUN_DIR --root ROOT`) and who signed it (`unsigned`, `signed by …`).
fn suite_properties(outcome: &SuiteOutcome) -> Vec<(&'static str, String)> {
    let mut props = vec![("run_id", outcome.run_id.clone())];
    if let Some(root) = &outcome.root {
        props.push(("root", root.clone()));
    }
    if let Some(signature) = &outcome.signature {
        props.push(("signature", signature.clone()));
    }
    if let Some(why) = outcome.unisolated() {
        props.push(("isolation", format!("none: {why}")));
    }
    props
}

/// The security scorecard overall, as the other reports print it: on the `[gates]`
/// suite, beside the gates that bound it.
fn scorecard_properties(outcome: &SuiteOutcome) -> Vec<(&'static str, String)> {
    let Some(row) = outcome.scorecard.as_ref().and_then(|card| crate::report::score_rows(card).into_iter().next())
    else {
        return Vec::new();
    };
    vec![
        ("security.benign_utility", row.benign_utility),
        ("security.utility_under_attack", row.utility_under_attack),
        ("security.attack_success", row.asr),
        ("security.attempt_rate", row.attempts),
        ("security.stopped_by", row.stopped_by),
        ("security.unscored", row.unscored.to_string()),
    ]
}

fn properties(xml: &mut Writer<&mut dyn Write>, props: &[(&str, String)]) -> io::Result<()> {
    xml.write_event(Event::Start(BytesStart::new("properties")))?;
    for (name, value) in props {
        let mut tag = BytesStart::new("property");
        tag.extend_attributes([("name", &*clean(name)), ("value", &*clean(value))]);
        xml.write_event(Event::Empty(tag))?;
    }
    end(xml, "properties")
}

fn end(xml: &mut Writer<&mut dyn Write>, name: &str) -> io::Result<()> {
    xml.write_event(Event::End(BytesEnd::new(name)))
}

/// quick-junit's cleaning of every string it writes (ANSI escapes and control
/// characters other than `\n` removed). Text of printable ASCII and newlines, nearly all
/// of a report, has nothing to remove and is returned as it is: the escape parser that
/// cleaning runs was a tenth of the time spent writing a large report.
fn clean(text: &str) -> Cow<'_, str> {
    if text.bytes().all(|b| matches!(b, b' '..=b'~' | b'\n')) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(XmlString::new(text).into_string())
    }
}

/// One line per run (and per warning), then one per metric block, for whoever opens
/// the case in a CI viewer. A block judged across runs (stability) can fail a case
/// whose every run passed its own checks: its line says so.
fn runs_text(case: &CaseOutcome) -> String {
    let mut text = String::new();
    for run in &case.runs {
        let verdict = if run.passed { "passed" } else { "failed" };
        text.push_str(&format!(
            "run {}: {verdict}, status {}, {} events, log {}\n",
            run.index, run.status, run.events, run.log
        ));
        for warning in &run.warnings {
            text.push_str(&format!("run {}: warning: {warning}\n", run.index));
        }
    }
    for block in &case.blocks {
        let verdict = if block.passed { "passed" } else { "failed" };
        text.push_str(&format!("{}: {verdict}: {}\n", block.name, block.reason));
    }
    text
}

/// XML parsers normalise a line break inside an attribute to a space; doing it here
/// keeps the written bytes equal to what readers see.
fn one_line(text: &str) -> String {
    text.split(['\r', '\n']).filter(|part| !part.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    proptest::proptest! {
        /// Text returned as it is must be text quick-junit would leave as it is.
        #[test]
        fn cleaning_is_quick_junits_whichever_way_it_goes(text in r"([ -~\n\t\r\x00-\x1f\x7f]|\x1b\[[0-9;]*m|\PC)*") {
            proptest::prop_assert_eq!(clean(&text).into_owned(), XmlString::new(&text).into_string());
        }

        /// Mostly plain text with at most one character that is not.
        #[test]
        fn cleaning_plain_text_with_one_odd_character_is_quick_junits(
            text in r"[ -~\n]{0,20}[\t\r\x00-\x1f\x7f\x1b\u{80}-\u{a0}é]?[ -~\n]{0,20}"
        ) {
            proptest::prop_assert_eq!(clean(&text).into_owned(), XmlString::new(&text).into_string());
        }
    }

    #[test]
    fn plain_text_is_not_copied_and_escapes_are_removed() {
        assert!(matches!(clean("run 0: passed, 24 events\n"), Cow::Borrowed(_)));
        assert_eq!(clean("\x1b[31mred\x1b[0m\tand\r\n"), "redand\n");
        assert_eq!(clean("a\tb\rc"), "abc");
    }

    fn parse_and<T>(check: impl FnOnce(roxmltree::Document<'_>) -> T) -> T {
        let xml = render(&fixture::suite()).map_err(|e| e.to_string());
        let xml = xml.unwrap_or_else(|e| panic!("render failed: {e}"));
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("bad XML: {e}"));
        check(doc)
    }

    fn attr<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> &'a str {
        node.attribute(name).unwrap_or_default()
    }

    #[test]
    fn the_junit_report_counts_tests_and_failures_per_dataset_and_for_the_gates() {
        parse_and(|doc| {
            let root = doc.root_element();
            assert_eq!(root.tag_name().name(), "testsuites");
            assert_eq!(attr(root, "name"), "ci");
            // 3 cases + 3 gates; 2 failing cases + 2 failing gates
            assert_eq!(attr(root, "tests"), "6");
            assert_eq!(attr(root, "failures"), "4");
            assert_eq!(attr(root, "errors"), "0");

            let suites: Vec<(&str, &str, &str)> = root
                .children()
                .filter(|n| n.has_tag_name("testsuite"))
                .map(|s| (attr(s, "name"), attr(s, "tests"), attr(s, "failures")))
                .collect();
            assert_eq!(suites, [("examples/treasury", "2", "1"), ("security/replay", "1", "1"), ("[gates]", "3", "2")]);
        });
    }

    #[test]
    fn every_gate_is_a_test_case_failing_with_its_reason_when_the_gate_failed() {
        parse_and(|doc| {
            let gates: Vec<(&str, &str, Option<&str>, Option<&str>)> = doc
                .descendants()
                .filter(|n| n.has_tag_name("testcase") && attr(*n, "classname") == GATES_SUITE)
                .map(|n| {
                    let failure = n.children().find(|c| c.has_tag_name("failure"));
                    (
                        attr(n, "name"),
                        attr(n, "classname"),
                        failure.map(|f| attr(f, "message")),
                        failure.map(|f| attr(f, "type")),
                    )
                })
                .collect();
            assert_eq!(
                gates,
                [
                    (
                        "default",
                        "[gates]",
                        Some("default: 1/3 passed (33.3 %), below min_pass_rate 100.0 %"),
                        Some("gate_failed")
                    ),
                    ("long-horizon", "[gates]", None, None),
                    (
                        "security",
                        "[gates]",
                        Some("security: 0/2 passed (0.0 %), below min_cases 3, below min_pass_rate 95.0 %"),
                        Some("gate_failed")
                    ),
                ]
            );
        });
    }

    #[test]
    fn a_failed_gate_is_a_junit_failure_when_every_case_passed() {
        let mut outcome = fixture::suite();
        let passing: Vec<CaseOutcome> =
            outcome.cases.to_vec().unwrap_or_default().into_iter().filter(|c| c.passed).collect();
        outcome.cases = passing.into();
        outcome.gates.retain(|g| g.scope == "security");
        let xml = render(&outcome).unwrap_or_else(|e| panic!("{e}"));
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("bad XML: {e}"));
        let root = doc.root_element();
        assert_eq!((attr(root, "tests"), attr(root, "failures")), ("2", "1"));
        let failed: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase") && n.children().any(|c| c.has_tag_name("failure")))
            .map(|n| attr(n, "name"))
            .collect();
        assert_eq!(failed, ["security"]);
    }

    #[test]
    fn a_case_failed_by_an_across_run_block_says_so_beside_its_passing_runs() {
        let outcome = fixture::suite();
        let cases = outcome.cases.to_vec().unwrap_or_default();
        let miss = cases.iter().find(|c| c.id == "idempotent-transfer-replay");
        let text = miss.map(runs_text).unwrap_or_default();
        assert!(text.ends_with("stability.passed: failed: only 0/1 runs completed\n"), "{text}");
    }

    #[test]
    fn a_failing_case_carries_its_first_reason_as_message_and_all_reasons_as_text() {
        parse_and(|doc| {
            let case = doc.descendants().find(|n| n.has_tag_name("testcase") && attr(*n, "name") == fixture::TRICKY_ID);
            let case = case.unwrap_or_else(|| panic!("tricky case missing"));
            assert_eq!(attr(case, "classname"), "examples/treasury");

            let failure = case.children().find(|n| n.has_tag_name("failure"));
            let failure = failure.unwrap_or_else(|| panic!("no <failure>"));
            assert_eq!(attr(failure, "message"), format!("run 0: policy.denials: {}", fixture::FIRST_REASON));
            assert_eq!(attr(failure, "type"), "check_failed");
            let text = failure.text().unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            // The second reason's escape sequence is stripped; its newline is kept.
            assert_eq!(
                lines,
                [
                    format!("run 0: policy.denials: {}", fixture::FIRST_REASON).as_str(),
                    "run 1: memory.semantic.payee: value \"mallory\" found:",
                    "line two red",
                ]
            );
        });
    }

    #[test]
    fn a_run_error_is_a_failure_typed_run_error() {
        parse_and(|doc| {
            let failure = doc
                .descendants()
                .filter(|n| n.has_tag_name("testcase"))
                .find(|n| attr(*n, "name") == "idempotent-transfer-replay")
                .and_then(|case| case.children().find(|n| n.has_tag_name("failure")));
            let failure = failure.unwrap_or_else(|| panic!("no failure for the replay miss"));
            assert_eq!(attr(failure, "type"), "run_error");
            assert_eq!(attr(failure, "message"), format!("run 0: {}", fixture::REPLAY_MISS));
        });
    }

    #[test]
    fn every_run_head_is_a_case_property_and_the_run_id_root_and_signature_suite_properties() {
        parse_and(|doc| {
            let properties = |node: roxmltree::Node<'_, '_>| -> Vec<(String, String)> {
                node.children()
                    .filter(|n| n.has_tag_name("properties"))
                    .flat_map(|p| p.children().filter(|n| n.has_tag_name("property")))
                    .map(|p| (attr(p, "name").to_string(), attr(p, "value").to_string()))
                    .collect()
            };
            for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
                let root = fixture::suite().root.unwrap_or_default();
                let mut expected = vec![
                    ("run_id".to_string(), "run-3f2a9c1d".to_string()),
                    ("root".to_string(), root),
                    ("signature".to_string(), "unsigned".to_string()),
                ];
                // the scorecard sits on the gates' suite: one attack carried out, one unscored
                if attr(suite, "name") == GATES_SUITE {
                    expected.extend(
                        [
                            ("security.benign_utility", "–"),
                            ("security.utility_under_attack", "–"),
                            ("security.attack_success", "1/1 (100.0 %)"),
                            ("security.attempt_rate", "1/1 (100.0 %)"),
                            ("security.stopped_by", "rule no-new-payee 1"),
                            ("security.unscored", "1"),
                        ]
                        .map(|(k, v)| (k.to_string(), v.to_string())),
                    );
                }
                assert_eq!(properties(suite), expected);
            }
            let tricky =
                doc.descendants().find(|n| n.has_tag_name("testcase") && attr(*n, "name") == fixture::TRICKY_ID);
            let heads: Vec<(String, String)> = tricky
                .map(properties)
                .unwrap_or_default()
                .into_iter()
                .filter(|(name, _)| name.starts_with("head."))
                .collect();
            assert_eq!(
                heads,
                [
                    ("head.0".to_string(), "blake3:0f3a90c1d".to_string()),
                    ("head.1".to_string(), "blake3:1f3a91c1d".to_string()),
                ]
            );
        });
    }

    #[test]
    fn the_junit_report_has_no_timestamps_or_durations() -> io::Result<()> {
        let xml = render(&fixture::suite())?;
        assert!(!xml.contains("timestamp="), "{xml}");
        assert!(!xml.contains("time="), "{xml}");
        assert_eq!(xml, render(&fixture::suite())?);
        Ok(())
    }

    /// The report as quick-junit itself writes it from its own model: the reference
    /// the streaming writer must match byte for byte.
    fn quick_junit_render(outcome: &SuiteOutcome) -> String {
        use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
        let mut suites: Vec<TestSuite> = Vec::new();
        for case in outcome.cases.to_vec().unwrap_or_else(|e| panic!("{e}")) {
            if suites.last().is_none_or(|s| s.name.as_str() != case.dataset) {
                let mut suite = TestSuite::new(&case.dataset);
                suite.add_property(Property::new("run_id", &outcome.run_id));
                if let Some(root) = &outcome.root {
                    suite.add_property(Property::new("root", root));
                }
                if let Some(signature) = &outcome.signature {
                    suite.add_property(Property::new("signature", signature));
                }
                if let Some(why) = outcome.unisolated() {
                    suite.add_property(Property::new("isolation", format!("none: {why}")));
                }
                suites.push(suite);
            }
            let status = if case.passed {
                TestCaseStatus::success()
            } else {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(one_line(
                    &case.failure().unwrap_or_else(|| "case failed without a recorded reason".into()),
                ));
                status.set_type(if case.runs.iter().any(|r| r.error.is_some()) { "run_error" } else { "check_failed" });
                status.set_description(case.failures().join("\n"));
                status
            };
            let mut test_case = TestCase::new(&case.id, status);
            test_case.set_classname(&case.dataset);
            test_case.add_property(Property::new("source", &case.source));
            test_case.add_property(Property::new("agent", &case.agent));
            if let Some(attempted) = case.score.as_ref().and_then(|s| s.attempted) {
                test_case.add_property(Property::new("attempted", attempted.to_string()));
            }
            if let Some(layer) = case.score.as_ref().and_then(|s| s.stopped_by.clone()) {
                test_case.add_property(Property::new("stopped_by", layer));
            }
            for run in &case.runs {
                if let Some(head) = &run.head {
                    test_case.add_property(Property::new(format!("head.{}", run.index), head));
                }
            }
            test_case.set_system_out(runs_text(&case));
            if let Some(suite) = suites.last_mut() {
                suite.add_test_case(test_case);
            }
        }
        if !outcome.gates.is_empty() {
            let mut suite = TestSuite::new(GATES_SUITE);
            suite.add_property(Property::new("run_id", &outcome.run_id));
            if let Some(root) = &outcome.root {
                suite.add_property(Property::new("root", root));
            }
            if let Some(signature) = &outcome.signature {
                suite.add_property(Property::new("signature", signature));
            }
            if let Some(why) = outcome.unisolated() {
                suite.add_property(Property::new("isolation", format!("none: {why}")));
            }
            if let Some(card) = &outcome.scorecard {
                let overall = &card.overall;
                let scored = overall.attacks - overall.attacks_unscored;
                let share = |part: usize, whole: usize| match whole {
                    0 => "–".to_string(),
                    _ => format!("{part}/{whole} ({}.{} %)", part * 1000 / whole / 10, part * 1000 / whole % 10),
                };
                let up = |part: usize, whole: usize| match whole {
                    0 => "–".to_string(),
                    _ => format!(
                        "{part}/{whole} ({}.{} %)",
                        (part * 1000).div_ceil(whole) / 10,
                        (part * 1000).div_ceil(whole) % 10
                    ),
                };
                suite.add_property(Property::new(
                    "security.benign_utility",
                    share(overall.controls_completed, overall.controls),
                ));
                suite.add_property(Property::new(
                    "security.utility_under_attack",
                    share(overall.attack_tasks_completed, overall.attack_tasks),
                ));
                suite.add_property(Property::new("security.attack_success", up(overall.attacks_succeeded, scored)));
                suite.add_property(Property::new("security.attempt_rate", up(overall.attacks_attempted, scored)));
                let mut layers: Vec<(&String, &usize)> = overall.stopped_by.iter().collect();
                layers.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let stopped: Vec<String> = layers.iter().map(|(l, n)| format!("{l} {n}")).collect();
                let stopped = if stopped.is_empty() { "–".to_string() } else { stopped.join(", ") };
                suite.add_property(Property::new("security.stopped_by", stopped));
                suite.add_property(Property::new("security.unscored", overall.attacks_unscored.to_string()));
            }
            for gate in &outcome.gates {
                let status = if gate.passed {
                    TestCaseStatus::success()
                } else {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message(one_line(&gate.reason));
                    status.set_type("gate_failed");
                    status.set_description(gate.reason.clone());
                    status
                };
                let mut test_case = TestCase::new(&gate.scope, status);
                test_case.set_classname(GATES_SUITE);
                test_case.add_property(Property::new("cases", gate.cases.to_string()));
                test_case.add_property(Property::new("passed_cases", gate.passed_cases.to_string()));
                let counts = outcome.scorecard.as_ref().and_then(|card| match gate.scope.as_str() {
                    crate::outcome::DEFAULT_SCOPE => Some(&card.overall),
                    tag => card.tags.get(tag),
                });
                if let Some(c) = counts {
                    let scored = c.attacks - c.attacks_unscored;
                    let up = |part: usize| match scored {
                        0 => "–".to_string(),
                        w => format!(
                            "{part}/{w} ({}.{} %)",
                            (part * 1000).div_ceil(w) / 10,
                            (part * 1000).div_ceil(w) % 10
                        ),
                    };
                    test_case.add_property(Property::new("security.attack_success", up(c.attacks_succeeded)));
                    test_case.add_property(Property::new("security.attempt_rate", up(c.attacks_attempted)));
                    let mut layers: Vec<(&String, &usize)> = c.stopped_by.iter().collect();
                    layers.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                    let stopped: Vec<String> = layers.iter().map(|(l, n)| format!("{l} {n}")).collect();
                    let stopped = if stopped.is_empty() { "–".to_string() } else { stopped.join(", ") };
                    test_case.add_property(Property::new("security.stopped_by", stopped));
                }
                test_case.set_system_out(gate_text(gate));
                suite.add_test_case(test_case);
            }
            suites.push(suite);
        }
        let mut report = Report::new(&outcome.pipeline);
        report.add_test_suites(suites);
        let mut xml = report.to_string().unwrap_or_else(|e| panic!("{e}"));
        if !xml.ends_with('\n') {
            xml.push('\n');
        }
        xml
    }

    #[test]
    fn the_streamed_report_is_what_quick_junit_writes() -> io::Result<()> {
        let outcome = fixture::suite();
        assert_eq!(render(&outcome)?, quick_junit_render(&outcome));
        let mut empty = fixture::suite();
        empty.cases = Vec::new().into();
        assert_eq!(render(&empty)?, quick_junit_render(&empty));
        Ok(())
    }

    #[test]
    fn a_dataset_whose_cases_are_not_adjacent_is_refused_not_split_in_two_suites() {
        let mut outcome = fixture::suite();
        let mut cases = outcome.cases.to_vec().unwrap_or_else(|e| panic!("{e}"));
        // treasury, replay, treasury
        cases.swap(1, 2);
        outcome.cases = cases.into();
        let err = render(&outcome).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("the cases of dataset examples/treasury are not adjacent"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn any_suite_streams_to_the_bytes_quick_junit_writes(
            cases in proptest::collection::vec(
                (0..3usize, "[a-z<>&\"' \\x1b\\n:#|-]{0,12}", proptest::bool::ANY, 0..3usize, "\\PC{0,10}"),
                0..8,
            )
        ) {
            let mut outcome = fixture::suite();
            let template = outcome.cases.to_vec().unwrap_or_default();
            let mut built = Vec::new();
            let mut sorted = cases;
            sorted.sort_by_key(|c| c.0);
            for (i, (dataset, id, passed, runs, reason)) in sorted.into_iter().enumerate() {
                let mut case = template[i % template.len()].clone();
                case.dataset = format!("set{dataset}");
                case.id = id;
                case.passed = passed;
                case.runs.truncate(runs);
                for run in &mut case.runs {
                    run.passed = passed;
                    run.error = (!passed).then(|| reason.clone());
                    run.warnings = vec![reason.clone()];
                }
                built.push(case);
            }
            outcome.cases = built.into();
            let streamed = render(&outcome).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert_eq!(streamed, quick_junit_render(&outcome));
        }
    }

    #[test]
    fn the_junit_report_is_pinned() -> io::Result<()> {
        insta::assert_snapshot!("junit", render(&fixture::suite())?);
        Ok(())
    }
}
