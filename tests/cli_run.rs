//! `stateval run` end to end: byte-identical logs and reports across copies and reruns,
//! JUnit and TAP that real consumers parse with the right counts and reasons, a replay
//! miss that fails its case and not the run, and case selection with `--filter`/`--tag`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{CI_CASES, CI_REPORTS, FAILING_CASES, FAILING_REPORTS, Project, differing, events_of, head_of, lines_of};
use serde_json::Value;

/// The event logs and report files of a project after a run.
fn logs_and_reports(project: &Project, reports: &[&str]) -> BTreeMap<String, Vec<u8>> {
    let mut snapshot = project.snapshot_files(reports);
    for log in project.log_files() {
        snapshot.insert(log.clone(), project.read_bytes(&log));
    }
    snapshot
}

#[track_caller]
fn assert_same(what: &str, a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) {
    let diff = differing(a, b);
    assert!(diff.is_empty(), "{what}: these files differ: {diff:#?}");
}

#[test]
fn the_ci_pipeline_gives_byte_identical_logs_and_reports_in_two_copies_and_on_a_rerun() {
    let (a, b) = (Project::new(), Project::new());
    a.stateval(&["run", "--jobs", "1"]).expect_code(0);
    let first = logs_and_reports(&a, &CI_REPORTS);
    // 15 cases, two of them with 2 recorded runs → 17 logs, plus 5 reports
    assert_eq!(a.log_files().len(), 17, "{:#?}", a.log_files());
    assert_eq!(first.len(), 17 + CI_REPORTS.len());
    assert_eq!(CI_REPORTS.len(), 5);

    b.stateval(&["run", "--jobs", "4"]).expect_code(0);
    assert_same("two copies (--jobs 1 vs --jobs 4)", &first, &logs_and_reports(&b, &CI_REPORTS));

    a.stateval(&["run", "--jobs", "3"]).expect_code(0);
    assert_same("the same copy run twice", &first, &logs_and_reports(&a, &CI_REPORTS));
    assert_eq!(a.run_ids().len(), 1, "a rerun of the same inputs replaces its run: {:?}", a.run_ids());
}

#[test]
fn the_failing_pipeline_gives_byte_identical_logs_and_reports_in_two_copies_and_on_a_rerun() {
    let (a, b) = (Project::new(), Project::new());
    a.stateval(&["run", "pipeline/failing.toml", "--jobs", "1"]).expect_code(1);
    let first = logs_and_reports(&a, &FAILING_REPORTS);
    assert_eq!(a.log_files().len(), 6, "{:#?}", a.log_files());

    b.stateval(&["run", "pipeline/failing.toml", "--jobs", "4"]).expect_code(1);
    assert_same("two copies (--jobs 1 vs --jobs 4)", &first, &logs_and_reports(&b, &FAILING_REPORTS));

    a.stateval(&["run", "pipeline/failing.toml", "--jobs", "2"]).expect_code(1);
    assert_same("the same copy run twice", &first, &logs_and_reports(&a, &FAILING_REPORTS));
}

#[test]
fn every_file_under_the_runs_directory_is_byte_identical_however_the_workers_interleave() {
    // run.json, verdicts.jsonl, cases.jsonl, suite.json, manifest.json and units.jsonl
    // sit beside the logs; reindex
    // rebuilds the catalog from them and `stateval report` renders from them, so they must
    // be as reproducible as the logs themselves (docs/design.md §3, STYLE: "results re-ordered by
    // case index before they are written").
    let (a, b) = (Project::new(), Project::new());
    a.stateval(&["run", "--jobs", "1"]).expect_code(0);
    b.stateval(&["run", "--jobs", "4"]).expect_code(0);
    let (sa, sb) = (a.snapshot(".stateval/runs"), b.snapshot(".stateval/runs"));
    // 17 logs + run.json + verdicts.jsonl + cases.jsonl + suite.json + manifest.json + units.jsonl
    assert_eq!(sa.len(), 23, "{:#?}", sa.keys());
    assert_same("every file under .stateval/runs (--jobs 1 vs --jobs 4)", &sa, &sb);
}

#[test]
fn reports_are_byte_identical_across_copies_when_the_pipeline_is_named_by_an_absolute_path() {
    // `stateval run /abs/path/pipeline/ci.toml` from CI scripts must not leak the
    // checkout directory into reports (runner::display_path: "Paths in reports are
    // relative and use `/`, so reports are identical across checkouts").
    let (a, b) = (Project::new(), Project::new());
    for p in [&a, &b] {
        let pipeline = p.join("pipeline/ci.toml");
        p.stateval(&["run", pipeline.to_str().expect("UTF-8 temp path")]).expect_code(0);
    }
    let (ra, rb) = (a.snapshot_files(&CI_REPORTS), b.snapshot_files(&CI_REPORTS));
    for (name, bytes) in &ra {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains(&*a.path().to_string_lossy()),
            "{name} contains the checkout directory {}",
            a.path().display()
        );
    }
    assert_same("two copies run by absolute pipeline path", &ra, &rb);
}

// ---------------------------------------------------------------------------------
// JUnit

/// The scopes of a JSON report's gates, in order.
fn gate_scopes(report: &Value) -> Vec<String> {
    report["gates"].as_array().expect("gates").iter().map(|g| g["scope"].as_str().expect("scope").to_string()).collect()
}

/// (classname, name, failure message, failure text) of every case's testcase (the
/// gates' testcases left out), in order.
fn junit_cases(xml: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    let doc = roxmltree::Document::parse(xml).expect("JUnit XML parses");
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase") && n.attribute("classname") != Some("[gates]"))
        .map(|n| {
            let failure = n.children().find(|c| c.has_tag_name("failure"));
            (
                n.attribute("classname").expect("classname").to_string(),
                n.attribute("name").expect("name").to_string(),
                failure.and_then(|f| f.attribute("message")).map(str::to_string),
                failure.and_then(|f| f.text()).map(str::to_string),
            )
        })
        .collect()
}

fn attr<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> &'a str {
    node.attribute(name).unwrap_or_else(|| panic!("<{}> has no {name}", node.tag_name().name()))
}

#[test]
fn junit_of_the_ci_pipeline_parses_with_fifteen_cases_and_every_gate_as_tests_no_failures_and_dataset_classnames() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let xml = p.read("reports/junit.xml");
    let gates = gate_scopes(&p.json("reports/report.json"));
    assert!(gates.len() >= 2 && gates[0] == "default", "{gates:?}");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let tests = (15 + gates.len()).to_string();
    assert_eq!((attr(root, "tests"), attr(root, "failures"), attr(root, "errors")), (tests.as_str(), "0", "0"));

    let suites: Vec<(&str, &str, &str)> = root
        .children()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|s| (attr(s, "name"), attr(s, "tests"), attr(s, "failures")))
        .collect();
    let gate_count = gates.len().to_string();
    assert_eq!(
        suites,
        [
            ("examples/recovery", "4", "0"),
            ("examples/support", "4", "0"),
            ("examples/treasury", "7", "0"),
            ("[gates]", gate_count.as_str(), "0")
        ]
    );
    let gate_cases: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase") && n.attribute("classname") == Some("[gates]"))
        .map(|n| attr(n, "name"))
        .collect();
    assert_eq!(gate_cases, gates);

    let cases = junit_cases(&xml);
    let names: Vec<&str> = cases.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(names, CI_CASES);
    for (classname, name, failure, _) in &cases {
        let expected = match CI_CASES.iter().position(|c| c == name) {
            Some(0..4) => "examples/recovery",
            Some(4..8) => "examples/support",
            _ => "examples/treasury",
        };
        assert_eq!(classname, expected, "classname of {name}");
        assert_eq!(failure, &None, "{name} passed and must carry no <failure>");
    }
}

#[test]
fn junit_heads_are_the_last_hashes_of_the_logs_on_disk() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let xml = p.read("reports/junit.xml");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let run_id = doc
        .descendants()
        .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("run_id"))
        .and_then(|n| n.attribute("value"))
        .expect("a run_id property")
        .to_string();
    let mut checked = 0;
    for case in doc.descendants().filter(|n| n.has_tag_name("testcase")) {
        let name = attr(case, "name");
        for prop in case.descendants().filter(|n| n.has_tag_name("property")) {
            let Some(k) = attr(prop, "name").strip_prefix("head.") else { continue };
            let log = p.read_bytes(format!(".stateval/runs/{run_id}/{name}/{k}.jsonl"));
            assert_eq!(attr(prop, "value"), head_of(&log), "head.{k} of {name}");
            checked += 1;
        }
    }
    assert_eq!(checked, 17, "one head per log");
}

#[test]
fn junit_of_the_failing_pipeline_has_five_failures_carrying_the_graders_reasons() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let xml = p.read("reports/failing/junit.xml");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let root = doc.root_element();
    // 6 cases and the default gate; 5 cases and the gate fail
    assert_eq!((attr(root, "tests"), attr(root, "failures"), attr(root, "errors")), ("7", "6", "0"));
    let suite = root.children().find(|n| n.has_tag_name("testsuite")).expect("a testsuite");
    assert_eq!((attr(suite, "name"), attr(suite, "tests"), attr(suite, "failures")), ("failing/mixed", "6", "5"));
    let gate = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("classname") == Some("[gates]"))
        .expect("the default gate is a testcase");
    let failure = gate.children().find(|n| n.has_tag_name("failure")).expect("the failed gate carries a <failure>");
    assert_eq!((attr(gate, "name"), attr(failure, "type")), ("default", "gate_failed"));
    assert_eq!(attr(failure, "message"), "default: 1/6 passed (16.6 %), below min_pass_rate 100.0 %");

    let cases = junit_cases(&xml);
    let names: Vec<&str> = cases.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(names, FAILING_CASES);
    assert!(cases.iter().all(|c| c.0 == "failing/mixed"), "classname is the dataset: {cases:#?}");
    let by_name: BTreeMap<&str, (Option<&str>, Option<&str>)> =
        cases.iter().map(|c| (c.1.as_str(), (c.2.as_deref(), c.3.as_deref()))).collect();

    assert_eq!(by_name["passes-alongside"], (None, None));

    let (message, text) = by_name["wrong-expectation"];
    let message = message.expect("wrong-expectation has a failure message");
    assert!(message.contains("final_response") && message.contains("$9,999"), "{message}");
    assert!(message.contains("Your balance is $1,250."), "the message shows what was got: {message}");
    let text = text.expect("wrong-expectation has a failure body");
    assert!(text.contains("tool_sequence") && text.contains(r#"["get_balance","transfer"]"#), "{text}");

    let message = by_name["replay-miss"].0.expect("replay-miss fails");
    assert!(message.contains("replay miss") && message.contains("position 1"), "{message}");
    let message = by_name["diverged-request"].0.expect("diverged-request fails");
    assert!(message.contains("replay diverged at position 0"), "{message}");
    let message = by_name["tool-loop"].0.expect("tool-loop fails");
    assert!(message.contains("after 3 steps") && message.contains("max_steps_per_turn"), "{message}");
    let message = by_name["status-wedged-no-fallback"].0.expect("status-wedged-no-fallback fails");
    assert_eq!(message, "run 0: recovery.recovered: expected exactly 1, got 0");

    // junitparser, the reader CI integrations use, counts the same failures
    if let Some(counts) = junitparser_counts(&p, "reports/failing/junit.xml") {
        assert_eq!((counts["tests"].as_u64(), counts["failures"].as_u64()), (Some(7), Some(6)), "{counts}");
        let failed: Vec<&str> =
            counts["failed"].as_array().expect("failed").iter().filter_map(|f| f[1].as_str()).collect();
        assert_eq!(
            failed,
            [
                "replay-miss",
                "wrong-expectation",
                "diverged-request",
                "tool-loop",
                "status-wedged-no-fallback",
                "default"
            ],
            "{counts}"
        );
        common::mark_ran("junit-consumers");
    }
}

/// What junitparser (Python) counts in a JUnit report: `tests/python/junit_counts.py`,
/// run by the SDK Python `.ci/run` installs it in. `None` (a skip, which CI refuses)
/// when there is no such Python.
fn junitparser_counts(p: &Project, report: &str) -> Option<Value> {
    let python = common::sdk_python()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/junit_counts.py");
    let out = std::process::Command::new(python).arg(script).arg(p.join(report)).output().expect("run the SDK python");
    assert!(out.status.success(), "junitparser could not read {report}: {}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).expect("junit_counts.py prints JSON"))
}

// ---------------------------------------------------------------------------------
// TAP

/// What Perl's TAP::Parser makes of a TAP file.
struct Tap {
    /// `version=13 good_plan=1 planned=N run=N passed=N failed=N parse_errors=N`
    summary: String,
    /// (number, ok, description) per test line.
    tests: Vec<(u32, bool, String)>,
    /// (test number, `message` of the YAML diagnostics) per YAML block.
    yaml: Vec<(u32, String)>,
    parse_errors: Vec<String>,
}

const TAP_PARSER: &str = r#"
use strict; use warnings; use TAP::Parser;
my $tap = do { local $/; open my $f, '<', $ARGV[0] or die "$ARGV[0]: $!"; <$f> };
my $p = TAP::Parser->new({ tap => $tap });
my $last = 0;
while (my $r = $p->next) {
    if ($r->is_test) {
        $last = $r->number;
        print join("\t", 'test', $r->number, ($r->is_ok ? 1 : 0), $r->description), "\n";
    } elsif ($r->is_yaml) {
        my $d = $r->data;
        my $m = (ref $d eq 'HASH' && defined $d->{message}) ? $d->{message} : '';
        $m =~ s/\n/\\n/g;
        print join("\t", 'yaml', $last, $m), "\n";
    }
}
printf "summary\tversion=%d good_plan=%d planned=%d run=%d passed=%d failed=%d parse_errors=%d\n",
    $p->version, ($p->is_good_plan ? 1 : 0), $p->tests_planned, $p->tests_run,
    scalar($p->passed), scalar($p->failed), scalar($p->parse_errors);
print "parse_error\t$_\n" for $p->parse_errors;
"#;

fn parse_tap(project: &Project, rel: &str) -> Tap {
    let output = std::process::Command::new("perl")
        .arg("-e")
        .arg(TAP_PARSER)
        .arg(project.join(rel))
        .output()
        .expect("perl with TAP::Parser is installed");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(output.status.success(), "perl failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let mut tap = Tap { summary: String::new(), tests: Vec::new(), yaml: Vec::new(), parse_errors: Vec::new() };
    for line in stdout.lines() {
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        match fields[0] {
            "test" => tap.tests.push((fields[1].parse().expect("number"), fields[2] == "1", fields[3].to_string())),
            "yaml" => tap.yaml.push((fields[1].parse().expect("number"), fields[2].to_string())),
            "summary" => tap.summary = fields[1].to_string(),
            "parse_error" => tap.parse_errors.push(fields[1].to_string()),
            other => panic!("unexpected perl output {other:?} in {stdout}"),
        }
    }
    tap
}

#[test]
fn tap_of_the_ci_pipeline_passes_tap_parser_with_a_good_plan_and_a_pass_per_case_and_gate() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let gates = gate_scopes(&p.json("reports/report.json"));
    let tap = parse_tap(&p, "reports/results.tap");
    assert_eq!(tap.parse_errors, Vec::<String>::new());
    let n = 15 + gates.len();
    assert_eq!(tap.summary, format!("version=13 good_plan=1 planned={n} run={n} passed={n} failed=0 parse_errors=0"));
    let described: Vec<String> = tap.tests.iter().map(|t| format!("{} {} {}", t.0, t.1, t.2)).collect();
    assert_eq!(described[0], "1 true - examples/recovery :: status-hang-falls-back-to-cache");
    assert_eq!(described[4], "5 true - examples/support :: resolve-login-ticket");
    assert_eq!(described[14], "15 true - examples/treasury :: greeting-inline");
    for (i, scope) in gates.iter().enumerate() {
        assert_eq!(described[15 + i], format!("{} true - [gates] :: {scope}", 16 + i));
    }
    assert!(tap.yaml.is_empty(), "no diagnostics for passing tests: {:?}", tap.yaml);
}

#[test]
fn tap_of_the_failing_pipeline_passes_tap_parser_with_one_pass_five_failures_and_yaml_reasons() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let tap = parse_tap(&p, "reports/failing/results.tap");
    assert_eq!(tap.parse_errors, Vec::<String>::new());
    // 6 cases and the default gate
    assert_eq!(tap.summary, "version=13 good_plan=1 planned=7 run=7 passed=1 failed=6 parse_errors=0");
    let oks: Vec<(u32, bool)> = tap.tests.iter().map(|t| (t.0, t.1)).collect();
    assert_eq!(oks, [(1, true), (2, false), (3, false), (4, false), (5, false), (6, false), (7, false)]);
    for (t, id) in tap.tests.iter().zip(FAILING_CASES) {
        assert_eq!(t.2, format!("- failing/mixed :: {id}"));
    }
    assert_eq!(tap.tests[6].2, "- [gates] :: default");
    // the YAML diagnostics parse, one block per failing test, with the grader's reason
    let numbers: Vec<u32> = tap.yaml.iter().map(|y| y.0).collect();
    assert_eq!(numbers, [2, 3, 4, 5, 6, 7]);
    assert_eq!(tap.yaml[5].1, "default: 1/6 passed (16.6 %), below min_pass_rate 100.0 %");
    assert!(tap.yaml[0].1.contains("replay miss") && tap.yaml[0].1.contains("position 1"), "{:?}", tap.yaml[0]);
    assert!(tap.yaml[1].1.contains("final_response") && tap.yaml[1].1.contains("$9,999"), "{:?}", tap.yaml[1]);
    assert!(tap.yaml[2].1.contains("replay diverged at position 0"), "{:?}", tap.yaml[2]);
    assert!(tap.yaml[3].1.contains("max_steps_per_turn"), "{:?}", tap.yaml[3]);
    assert!(tap.yaml[4].1.contains("recovery.recovered"), "{:?}", tap.yaml[4]);
}

// ---------------------------------------------------------------------------------
// A replay miss fails its case, not the run

fn case<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["cases"].as_array().expect("cases").iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("no case {id}"))
}

#[test]
fn a_replay_miss_fails_its_case_while_the_other_cases_run_and_are_reported() {
    let p = Project::new();
    let out = p.stateval(&["run", "pipeline/failing.toml"]);
    out.expect_code(1);
    let report = p.json("reports/failing/report.json");
    let ids: Vec<&str> = report["cases"].as_array().expect("cases").iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, FAILING_CASES, "all 6 cases are reported, in dataset order");
    assert_eq!(report["passed"], false);

    let miss = case(&report, "replay-miss");
    assert_eq!(miss["passed"], false);
    assert_eq!(miss["runs"][0]["status"], "replay_exhausted");
    let error = miss["runs"][0]["error"].as_str().expect("the run names its error");
    assert_eq!(
        error,
        "replay miss: model call at position 1 (turn 1, step 0) but the recording ends after 1 response(s)"
    );

    let alongside = case(&report, "passes-alongside");
    assert_eq!(
        (&alongside["passed"], &alongside["runs"][0]["status"]),
        (&Value::Bool(true), &Value::from("completed"))
    );

    let gates = report["gates"].as_array().expect("gates");
    assert_eq!(gates.len(), 1);
    assert_eq!(
        (&gates[0]["scope"], &gates[0]["cases"], &gates[0]["passed_cases"]),
        (&"default".into(), &6.into(), &1.into())
    );
    assert_eq!(gates[0]["passed"], false);
    assert!(out.stdout.contains("FAILED failing: 1/6 cases passed"), "{}", out.stdout);
}

#[test]
fn a_replay_miss_is_logged_as_an_error_event_of_the_turn_that_missed() {
    // docs/design.md §3: `turn` is the user-turn index, null only before the first turn. The miss
    // happens in turn 1, at the second model call.
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let report = p.json("reports/failing/report.json");
    let log = case(&report, "replay-miss")["runs"][0]["log"].as_str().expect("log path").to_string();
    let events = events_of(&p.read_bytes(&log));
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "turn_started",
            "context_compiled",
            "model_called",
            "turn_completed",
            "turn_started",
            "context_compiled",
            "error",
            "run_completed"
        ]
    );
    assert_eq!(events[7]["data"]["kind"], "replay_miss");
    assert_eq!(events[8]["data"]["status"], "replay_exhausted");
    assert_eq!(events[7]["turn"], 1, "the replay miss event belongs to turn 1: {}", events[7]);
}

// ---------------------------------------------------------------------------------
// Selection

fn reported_ids(p: &Project, rel: &str) -> Vec<String> {
    p.json(rel)["cases"].as_array().expect("cases").iter().map(|c| c["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn filter_keeps_only_cases_whose_id_matches_the_glob() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "passes-*"]).expect_code(0);
    assert_eq!(reported_ids(&p, "reports/failing/report.json"), ["passes-alongside"]);
    assert_eq!(p.log_files().len(), 1, "only the selected case runs: {:#?}", p.log_files());

    // every id but tool-loop has an "e"
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "*e*"]).expect_code(1);
    assert_eq!(
        reported_ids(&p, "reports/failing/report.json"),
        ["passes-alongside", "replay-miss", "wrong-expectation", "diverged-request", "status-wedged-no-fallback"]
    );
}

#[test]
fn tag_keeps_cases_carrying_any_of_the_given_tags() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml", "--tag", "smoke"]).expect_code(1);
    assert_eq!(reported_ids(&p, "reports/failing/report.json"), ["passes-alongside", "wrong-expectation"]);

    // memory (2 cases) + security (3 cases) satisfy every gate of ci.toml
    p.stateval(&["run", "--tag", "memory", "--tag", "security"]).expect_code(0);
    assert_eq!(
        reported_ids(&p, "reports/report.json"),
        [
            "docs-session-episodic-expiry",
            "remember-default-payee",
            "invoice-injection-blocked",
            "invoice-clean-paid",
            "close-account-needs-approval"
        ]
    );
    let xml = p.read("reports/junit.xml");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let tests = (5 + gate_scopes(&p.json("reports/report.json")).len()).to_string();
    assert_eq!(doc.root_element().attribute("tests"), Some(tests.as_str()));
}

#[test]
fn a_gate_whose_cases_the_selection_left_out_is_skipped_and_the_summary_says_why() {
    let p = Project::new();
    let out = p.stateval(&["run", "--tag", "recovery"]);
    out.expect_code(0);
    // the recovery cases carry no memory or security tag: those gates are not this run's
    assert_eq!(gate_scopes(&p.json("reports/report.json")), ["default", "recovery"]);
    for tag in ["memory", "security"] {
        let line = format!("SKIP gate {tag}: left out: no case this selection (--tag recovery) kept carries the tag");
        assert!(out.stdout.lines().any(|l| l == line), "no {line:?} in\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("SKIP gate recovery"), "{}", out.stdout);
    // the whole suite judges every gate and skips none
    let whole = p.stateval(&["run"]);
    whole.expect_code(0);
    assert!(!whole.stdout.contains("SKIP gate"), "{}", whole.stdout);
}

#[test]
fn filter_and_tag_together_keep_the_intersection() {
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "*e*", "--tag", "replay"]).expect_code(1);
    assert_eq!(reported_ids(&p, "reports/failing/report.json"), ["replay-miss", "diverged-request"]);
}

#[test]
fn a_selection_matching_nothing_exits_2_runs_nothing_and_leaves_no_report() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    assert!(CI_REPORTS.iter().all(|r| p.exists(r)));
    let before = p.snapshot(".stateval/runs");
    // a tag no case carries is a typo, named with the tags there are (cli_newcomer)
    for (args, error) in [
        (&["run", "--filter", "no-such-case-*"][..], "no case matches the selection: nothing to run"),
        (&["run", "--tag", "no-such-tag"][..], "--tag \"no-such-tag\": no case of the suite carries it;"),
    ] {
        let out = p.stateval(args);
        out.expect_code(2);
        assert!(out.stderr.starts_with(&format!("error: {error}")), "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
        // refused before anything runs: the store is as it was, and the earlier run's
        // reports went when the pipeline was read (no report stands beside a refusal)
        let left: Vec<&str> = CI_REPORTS.iter().copied().filter(|r| p.exists(r)).collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
        assert_eq!(differing(&before, &p.snapshot(".stateval/runs")), Vec::<String>::new(), "{args:?}");
    }
    let out = p.stateval(&["run", "--filter", "["]);
    out.expect_code(2);
    assert!(out.stderr.starts_with("error: --filter: "), "{}", out.stderr);
}

#[test]
fn verdicts_file_has_one_line_per_recorded_run() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run_id = p.json("reports/report.json")["run_id"].as_str().expect("run_id").to_string();
    let verdicts = p.read_bytes(format!(".stateval/runs/{run_id}/verdicts.jsonl"));
    // 13 cases with one run + 2 cases with two runs
    assert_eq!(lines_of(&verdicts).len(), 17);
}

#[test]
fn under_on_divergence_warn_a_diverged_request_is_reported_and_the_run_goes_on() {
    let p = Project::new();
    let toml = p.read("pipeline/failing.toml").replace(r#"on_divergence = "fail""#, r#"on_divergence = "warn""#);
    p.write("pipeline/failing.toml", &toml);
    p.stateval(&["run", "pipeline/failing.toml", "--filter", "diverged-request"]).expect_code(0);
    let report = p.json("reports/failing/report.json");
    let run = &report["cases"][0]["runs"][0];
    assert_eq!(run["status"], "completed");
    assert_eq!(run["passed"], true);
    let warning = run["warnings"][0].as_str().expect("a warning");
    assert!(warning.starts_with("replay diverged at position 0: request hash blake3:"), "{warning}");
    let log = p.log_files().into_iter().find(|l| l.contains("diverged-request")).unwrap();
    let kinds: Vec<String> =
        common::events_of(&p.read_bytes(&log)).iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect();
    assert!(
        kinds.contains(&"replay_diverged".to_string()) && kinds.contains(&"turn_completed".to_string()),
        "{kinds:?}"
    );
    // the reason is the event's own, read through its typed payload
    let diverged = common::events_of(&p.read_bytes(&log)).into_iter().find(|e| e["kind"] == "replay_diverged").unwrap();
    assert!(diverged["data"]["reason"].as_str().is_some_and(|r| r.starts_with("request hash blake3:")), "{diverged}");
    assert_eq!(common::undeclared_members(&p.join(&log)), BTreeMap::new());
    // and the timeline says why
    let shown = p.stateval(&["show", &log]).expect_code(0).stdout.clone();
    let line = shown.lines().find(|l| l.contains("replay_diverged")).unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("request hash blake3:"), "{line}");
}

#[test]
fn the_json_report_holds_exactly_the_case_outcomes_the_run_wrote_in_dataset_order() {
    // Outcomes are streamed to runs/<id>/cases.jsonl as cases finish (re-ordered), and
    // the reports read them back from there: with three workers, the file and the JSON
    // report's cases are the same list, in dataset order.
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml", "--jobs", "3"]).expect_code(1);
    let run_ids = p.run_ids();
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    let spilled: Vec<Value> = p
        .read(format!(".stateval/runs/{}/cases.jsonl", run_ids[0]))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a case outcome per line"))
        .collect();
    let report = p.json("reports/failing/report.json");
    // the file records each log in the run directory; the report shows it from the project
    let shown: Vec<Value> = spilled
        .iter()
        .cloned()
        .map(|mut case| {
            for run in case["runs"].as_array_mut().expect("runs") {
                run["log"] =
                    Value::from(format!(".stateval/runs/{}/{}", run_ids[0], run["log"].as_str().expect("log")));
            }
            case
        })
        .collect();
    assert_eq!(report["cases"], Value::Array(shown));
    assert_eq!(spilled.len(), FAILING_CASES.len());
    // dataset order: file by file, line by line
    let sources: Vec<(String, usize)> = spilled
        .iter()
        .map(|c| {
            let source = c["source"].as_str().expect("source");
            let (file, line) = source.rsplit_once(':').expect("file:line");
            (file.to_string(), line.parse().expect("line number"))
        })
        .collect();
    let mut sorted = sources.clone();
    sorted.sort();
    assert_eq!(sources, sorted);
}

// ---------------------------------------------------------------------------------
// A gate that fails while every case passes

#[test]
fn a_failed_gate_fails_junit_tap_and_prove_when_every_case_passed() {
    // memory has 2 cases in the core suite: a minimum of 3 fails its gate, and only it
    let p = Project::new();
    let ci = p.read("pipeline/ci.toml");
    let line = "tags.memory = { min_pass_rate = 1.0, min_cases = 2 }";
    assert!(ci.contains(line), "pipeline/ci.toml no longer has {line:?}");
    p.write("pipeline/ci.toml", ci.replace(line, "tags.memory = { min_pass_rate = 1.0, min_cases = 3 }"));
    p.stateval(&["run"]).expect_code(1);
    let report = p.json("reports/report.json");
    assert!(report["cases"].as_array().expect("cases").iter().all(|c| c["passed"] == true));

    let xml = p.read("reports/junit.xml");
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    assert_eq!(doc.root_element().attribute("failures"), Some("1"));
    let failed: Vec<(&str, &str)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase") && n.children().any(|c| c.has_tag_name("failure")))
        .map(|n| (attr(n, "classname"), attr(n, "name")))
        .collect();
    assert_eq!(failed, [("[gates]", "memory")]);
    if let Some(counts) = junitparser_counts(&p, "reports/junit.xml") {
        assert_eq!(counts["failures"], 1, "junitparser sees the failed gate: {counts}");
        let first = &counts["failed"][0];
        assert_eq!((first[0].as_str(), first[1].as_str()), (Some("[gates]"), Some("memory")), "{counts}");
    }

    let tap = parse_tap(&p, "reports/results.tap");
    assert_eq!(tap.parse_errors, Vec::<String>::new());
    let failed: Vec<&str> = tap.tests.iter().filter(|t| !t.1).map(|t| t.2.as_str()).collect();
    assert_eq!(failed, ["- [gates] :: memory"]);
    assert!(tap.yaml[0].1.starts_with("memory: 2/2 passed (100.0 %), below min_cases 3"), "{:?}", tap.yaml);

    // prove, the harness most TAP users have, reads the file and fails
    let prove = std::process::Command::new("prove")
        .args(["--exec", "cat", "reports/results.tap"])
        .current_dir(p.path())
        .output()
        .expect("prove (Perl's TAP harness) is installed");
    let stdout = String::from_utf8_lossy(&prove.stdout);
    assert!(!prove.status.success(), "prove passed a run whose gate failed:\n{stdout}");
    assert!(stdout.contains("Result: FAIL"), "{stdout}");
}
