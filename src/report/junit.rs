//! The JUnit XML report, for CI systems that render test results (GitLab, Jenkins,
//! GitHub annotations via third-party actions).
//!
//! Mapping: the report is named after the pipeline; one `<testsuite>` per dataset, in
//! the order datasets first appear; one `<testcase>` per case with `classname` = the
//! dataset and `name` = the case id. A failing case carries one `<failure>`: its
//! `message` is the first reason ([`CaseOutcome::failure`]) and its text lists every
//! reason ([`CaseOutcome::failures`]), one per line.
//!
//! Properties: the suite carries `run_id`; each case carries `source`, `agent`, and
//! `head.<k>` per run (the blake3 head of run k's event log, so a log rewritten after
//! the fact is caught by comparing heads; omitted for a run that wrote no event).
//! quick-junit supports properties on test cases, so heads sit beside the case they
//! belong to rather than in one long suite-level list. Per-run status, event count,
//! log path and warnings go to the case's `<system-out>`.
//!
//! No timestamps and no durations: the same outcome gives the same bytes.

use quick_junit::{NonSuccessKind, Property, Report, SerializeError, TestCase, TestCaseStatus, TestSuite};

use crate::runner::outcome::{CaseOutcome, SuiteOutcome};

/// `outcome` as JUnit XML.
pub fn render(outcome: &SuiteOutcome) -> Result<String, SerializeError> {
    // Datasets in first-appearance order; the runner already orders cases by dataset.
    let mut suites: Vec<TestSuite> = Vec::new();
    for case in &outcome.cases {
        let index = match suites.iter().position(|s| s.name.as_str() == case.dataset) {
            Some(index) => index,
            None => {
                let mut suite = TestSuite::new(&case.dataset);
                suite.add_property(Property::new("run_id", &outcome.run_id));
                suites.push(suite);
                suites.len() - 1
            }
        };
        suites[index].add_test_case(test_case(case));
    }

    let mut report = Report::new(&outcome.pipeline);
    report.add_test_suites(suites);
    let mut xml = report.to_string()?;
    if !xml.ends_with('\n') {
        xml.push('\n');
    }
    Ok(xml)
}

fn test_case(case: &CaseOutcome) -> TestCase {
    let status = if case.passed {
        TestCaseStatus::success()
    } else {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
        // `passed = false` with no failing check would be a runner bug; say so rather
        // than emit an empty message.
        let message = case.failure().unwrap_or_else(|| "case failed without a recorded reason".into());
        status.set_message(one_line(&message));
        let run_error = case.runs.iter().any(|r| r.error.is_some());
        status.set_type(if run_error { "run_error" } else { "check_failed" });
        status.set_description(case.failures().join("\n"));
        status
    };

    let mut test_case = TestCase::new(&case.id, status);
    test_case.set_classname(&case.dataset);
    test_case.add_property(Property::new("source", &case.source));
    test_case.add_property(Property::new("agent", &case.agent));
    for run in &case.runs {
        if let Some(head) = &run.head {
            test_case.add_property(Property::new(format!("head.{}", run.index), head));
        }
    }
    test_case.set_system_out(runs_text(case));
    test_case
}

/// One line per run (and per warning), for whoever opens the case in a CI viewer.
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
    fn the_junit_report_counts_tests_and_failures_per_dataset() {
        parse_and(|doc| {
            let root = doc.root_element();
            assert_eq!(root.tag_name().name(), "testsuites");
            assert_eq!(attr(root, "name"), "ci");
            assert_eq!(attr(root, "tests"), "3");
            assert_eq!(attr(root, "failures"), "2");
            assert_eq!(attr(root, "errors"), "0");

            let suites: Vec<(&str, &str, &str)> = root
                .children()
                .filter(|n| n.has_tag_name("testsuite"))
                .map(|s| (attr(s, "name"), attr(s, "tests"), attr(s, "failures")))
                .collect();
            assert_eq!(suites, [("examples/treasury", "2", "1"), ("security/replay", "1", "1")]);
        });
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
    fn every_run_head_is_a_case_property_and_the_run_id_a_suite_property() {
        parse_and(|doc| {
            let properties = |node: roxmltree::Node<'_, '_>| -> Vec<(String, String)> {
                node.children()
                    .filter(|n| n.has_tag_name("properties"))
                    .flat_map(|p| p.children().filter(|n| n.has_tag_name("property")))
                    .map(|p| (attr(p, "name").to_string(), attr(p, "value").to_string()))
                    .collect()
            };
            for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
                assert_eq!(properties(suite), [("run_id".to_string(), "run-3f2a9c1d".to_string())]);
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
    fn the_junit_report_has_no_timestamps_or_durations() -> Result<(), SerializeError> {
        let xml = render(&fixture::suite())?;
        assert!(!xml.contains("timestamp="), "{xml}");
        assert!(!xml.contains("time="), "{xml}");
        assert_eq!(xml, render(&fixture::suite())?);
        Ok(())
    }

    #[test]
    fn the_junit_report_is_pinned() -> Result<(), SerializeError> {
        insta::assert_snapshot!("junit", render(&fixture::suite())?);
        Ok(())
    }
}
