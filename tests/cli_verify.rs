//! `stateval verify` end to end: every log a pipeline writes verifies, and every kind of
//! tampering is rejected at the first `seq` it breaks, in the documented format
//! `FAILED <path>:<line>: event seq <n>: <reason>`, with exit 1.

mod common;

use common::{FAILING_CASES, Project, events_of, lines_of};
use serde_json::Value;

/// The 45-event log of `docs-session-episodic-expiry` (4 turns, tool calls, memory).
const CASE: &str = "docs-session-episodic-expiry";
const EVENTS: usize = 45;

/// A project after a green run, and the relative path of the log of [`CASE`].
fn project_with_log() -> (Project, String) {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let log = p.log_files().into_iter().find(|l| l.contains(&format!("/{CASE}/0.jsonl"))).expect("the case's log");
    assert_eq!(lines_of(&p.read_bytes(&log)).len(), EVENTS, "fixture changed: {log}");
    (p, log)
}

/// Verify `bytes` written as `tampered/<name>.jsonl`; assert the exact place of the
/// failure and return its reason.
#[track_caller]
fn rejected_at(p: &Project, name: &str, bytes: &[u8], line: usize, seq: usize) -> String {
    let rel = format!("tampered/{name}.jsonl");
    p.write(&rel, bytes);
    let out = p.stateval(&["verify", &rel]);
    out.expect_code(1);
    assert_eq!(out.stdout, "", "{name}: nothing is claimed ok");
    let prefix = format!("FAILED {rel}:{line}: event seq {seq}: ");
    let stderr =
        out.stderr.strip_suffix('\n').unwrap_or_else(|| panic!("{name}: stderr ends a line: {:?}", out.stderr));
    assert!(!stderr.contains('\n'), "{name}: one line for one bad log: {stderr}");
    let reason = stderr.strip_prefix(&prefix).unwrap_or_else(|| panic!("{name}: expected {prefix:?}…, got {stderr:?}"));
    assert!(!reason.trim().is_empty(), "{name}: a reason is given");
    reason.to_string()
}

/// Flip one byte of line `seq` (0-based), at the first occurrence of `needle` + `offset`.
fn flip(log: &[u8], seq: usize, needle: &str, offset: usize) -> Vec<u8> {
    let lines = lines_of(log);
    let start: usize = lines[..seq].iter().map(Vec::len).sum();
    let line = &lines[seq];
    let at = line.windows(needle.len()).position(|w| w == needle.as_bytes()).expect("needle in the line") + offset;
    let mut out = log.to_vec();
    out[start + at] = if out[start + at] == b'a' { b'b' } else { b'a' };
    out
}

#[test]
fn every_log_of_both_pipelines_verifies_with_the_heads_and_counts_of_the_reports() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let logs = p.log_files();
    assert_eq!(logs.len(), 17 + 6, "{logs:#?}");

    let mut args = vec!["verify"];
    args.extend(logs.iter().map(String::as_str));
    let out = p.stateval(&args);
    out.expect_code(0);
    assert_eq!(out.stderr, "");

    let mut expected = Vec::new();
    for report in ["reports/report.json", "reports/failing/report.json"] {
        for case in p.json(report)["cases"].as_array().expect("cases") {
            for run in case["runs"].as_array().expect("runs") {
                expected.push(format!(
                    "ok {}: {} events, head {} (complete; as its run's manifest lists)",
                    run["log"].as_str().expect("log"),
                    run["events"],
                    run["head"].as_str().expect("head")
                ));
            }
        }
    }
    expected.sort();
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort();
    assert_eq!(got, expected);
}

#[test]
fn one_changed_byte_is_named_at_the_event_that_holds_it() {
    let (p, log) = project_with_log();
    let bytes = p.read_bytes(&log);
    for seq in [0, 20, EVENTS - 1] {
        // a byte inside `data` (the first key's first letter): the content no longer
        // matches the hash
        let reason = rejected_at(&p, &format!("data-{seq}"), &flip(&bytes, seq, "{\"data\":{\"", 10), seq + 1, seq);
        assert!(reason.contains("hash does not match"), "seq {seq}: {reason}");
    }
    // a byte of the hash itself
    let reason = rejected_at(&p, "hash-20", &flip(&bytes, 20, "\"hash\":\"blake3:", 20), 21, 20);
    assert!(reason.contains("hash does not match"), "{reason}");
    // a byte of prev: the chain is broken at that event
    let reason = rejected_at(&p, "prev-20", &flip(&bytes, 20, "\"prev\":\"blake3:", 20), 21, 20);
    assert!(reason.contains("prev does not match"), "{reason}");
}

#[test]
fn a_deleted_event_is_named_at_the_seq_it_leaves_empty() {
    let (p, log) = project_with_log();
    let lines = lines_of(&p.read_bytes(&log));
    let mut kept = lines.clone();
    kept.remove(20);
    let reason = rejected_at(&p, "deleted", &kept.concat(), 21, 20);
    assert!(reason.contains("expected seq 20, found seq 21"), "{reason}");

    let mut first_gone = lines;
    first_gone.remove(0);
    let reason = rejected_at(&p, "deleted-first", &first_gone.concat(), 1, 0);
    assert!(reason.contains("expected seq 0, found seq 1"), "{reason}");
}

#[test]
fn two_swapped_events_are_named_at_the_first_of_them() {
    let (p, log) = project_with_log();
    let mut lines = lines_of(&p.read_bytes(&log));
    lines.swap(20, 21);
    let reason = rejected_at(&p, "swapped", &lines.concat(), 21, 20);
    assert!(reason.contains("expected seq 20, found seq 21"), "{reason}");
}

#[test]
fn an_inserted_event_is_named_at_the_position_it_was_inserted() {
    let (p, log) = project_with_log();
    let lines = lines_of(&p.read_bytes(&log));

    // a duplicated line: line 22 repeats seq 20
    let mut duplicated = lines.clone();
    duplicated.insert(21, lines[20].clone());
    let reason = rejected_at(&p, "duplicated", &duplicated.concat(), 22, 21);
    assert!(reason.contains("expected seq 21, found seq 20"), "{reason}");

    // a well-formed event from another log, with the right seq but another chain
    let other = p.log_files().into_iter().find(|l| l.contains("/resolve-login-ticket/0.jsonl")).expect("other log");
    let foreign = lines_of(&p.read_bytes(&other))[20].clone();
    let mut inserted = lines;
    inserted.insert(20, foreign);
    let reason = rejected_at(&p, "foreign", &inserted.concat(), 21, 20);
    assert!(reason.contains("prev does not match"), "{reason}");
}

#[test]
fn a_truncated_last_line_is_named_at_the_last_seq() {
    let (p, log) = project_with_log();
    let bytes = p.read_bytes(&log);
    let cut = &bytes[..bytes.len() - 10];
    let reason = rejected_at(&p, "truncated", cut, EVENTS, EVENTS - 1);
    assert!(reason.contains("truncated"), "{reason}");

    let no_newline = &bytes[..bytes.len() - 1];
    let reason = rejected_at(&p, "no-newline", no_newline, EVENTS, EVENTS - 1);
    assert!(reason.contains("no terminating newline"), "{reason}");
}

#[test]
fn a_log_cut_at_a_line_boundary_fails_unless_incomplete_logs_are_allowed() {
    let (p, log) = project_with_log();
    let lines = lines_of(&p.read_bytes(&log));
    p.write("tampered/prefix.jsonl", lines[..12].concat());
    // alone, a prefix is a valid chain; without run_completed it is no finished run
    let out = p.stateval(&["verify", "tampered/prefix.jsonl"]);
    out.expect_code(1);
    assert_eq!(
        out.stderr,
        "FAILED tampered/prefix.jsonl: incomplete: 12 events, no run_completed (a killed run; \
         --allow-incomplete accepts it)\n"
    );
    let out = p.stateval(&["verify", "--allow-incomplete", "tampered/prefix.jsonl"]);
    out.expect_code(0);
    let head = events_of(&lines[11])[0]["hash"].as_str().expect("hash").to_string();
    assert_eq!(
        out.stdout,
        format!(
            "ok tampered/prefix.jsonl: 12 events, head {head} (incomplete: no run_completed; \
             chain only: no run manifest anchors it)\n"
        )
    );
}

#[test]
fn an_empty_log_fails_unless_incomplete_logs_are_allowed() {
    let p = Project::new();
    p.write("tampered/empty.jsonl", "");
    let out = p.stateval(&["verify", "tampered/empty.jsonl"]);
    out.expect_code(1);
    assert_eq!(out.stderr, "FAILED tampered/empty.jsonl: empty: no event at all\n");
    p.stateval(&["verify", "--allow-incomplete", "tampered/empty.jsonl"]).expect_code(0);
}

#[test]
fn good_logs_still_verify_beside_a_bad_one_and_the_exit_is_1() {
    let (p, log) = project_with_log();
    let mut lines = lines_of(&p.read_bytes(&log));
    lines.swap(3, 4);
    p.write("tampered/swapped.jsonl", lines.concat());
    let good = p.log_files();
    let out = p.stateval(&["verify", &good[0], "tampered/swapped.jsonl", &good[1]]);
    out.expect_code(1);
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("ok ")).count(), 2, "{}", out.stdout);
    assert!(out.stderr.starts_with("FAILED tampered/swapped.jsonl:4: event seq 3: "), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

#[test]
fn a_missing_log_file_exits_2() {
    let p = Project::new();
    let out = p.stateval(&["verify", "no/such/log.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.starts_with("error: no/such/log.jsonl: "), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[test]
fn the_failing_pipeline_logs_end_with_their_run_status() {
    // a failed case still leaves a complete, verifiable log that says why it stopped
    let p = Project::new();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let report = p.json("reports/failing/report.json");
    let statuses: Vec<(String, String)> = report["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            let log = c["runs"][0]["log"].as_str().expect("log");
            let events = events_of(&p.read_bytes(log));
            let last: &Value = events.last().expect("events");
            assert_eq!(last["kind"], "run_completed", "{log}");
            (c["id"].as_str().unwrap().to_string(), last["data"]["status"].as_str().unwrap().to_string())
        })
        .collect();
    let expected: Vec<(String, String)> = FAILING_CASES
        .iter()
        .zip(["completed", "replay_exhausted", "completed", "replay_diverged", "failed", "completed"])
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(statuses, expected);
}

#[test]
fn any_single_bit_flip_in_a_real_log_is_named_at_the_line_that_holds_it() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let (p, log) = project_with_log();
    let bytes = p.read_bytes(&log);
    // each case spawns the binary: a few dozen keep the test quick
    let mut runner = TestRunner::new(Config { cases: 32, failure_persistence: None, ..Config::default() });
    runner
        .run(&(0..bytes.len(), 0u8..8), |(i, bit)| {
            let mut edited = bytes.clone();
            edited[i] ^= 1 << bit;
            // every line before the edited byte is untouched, so that line is the first bad one
            let seq = bytes[..i].iter().filter(|&&b| b == b'\n').count();
            p.write("tampered/flip.jsonl", &edited);
            let out = p.stateval(&["verify", "tampered/flip.jsonl"]);
            prop_assert_eq!(out.code, 1, "byte {} bit {}: {}", i, bit, out.stderr);
            let prefix = format!("FAILED tampered/flip.jsonl:{}: event seq {seq}: ", seq + 1);
            prop_assert!(
                out.stderr.starts_with(&prefix),
                "byte {} bit {}: expected {:?}, got {:?}",
                i,
                bit,
                prefix,
                out.stderr
            );
            Ok(())
        })
        .expect("every flip is caught at its own line");
}
