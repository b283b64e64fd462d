//! The store end to end: a run killed mid-way leaves logs whose completed prefix
//! verifies, and `stateval reindex` rebuilds the sled catalog from the files alone —
//! after a kill, after losing the catalog, and identically to what a run records.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Project, events_of, lines_of};
use stateval::store::{Layout, LogRecord, SledStore, Store};
use stateval::synth::{SynthSpec, events_per_run, write_suite};

/// What `stateval verify` says about one log: events, head, complete.
#[derive(Debug, PartialEq)]
struct Verified {
    events: u64,
    head: Option<String>,
    complete: bool,
}

/// Verify `logs` in one invocation (exit 0 expected) and parse its `ok` lines.
fn verify_all(p: &Project, logs: &[String]) -> BTreeMap<String, Verified> {
    // a killed run leaves logs without run_completed and no manifest: their chains alone
    let mut args = vec!["verify", "--allow-incomplete"];
    args.extend(logs.iter().map(String::as_str));
    let out = p.stateval(&args);
    out.expect_code(0);
    assert_eq!(out.stderr, "");
    let mut seen = BTreeMap::new();
    for line in out.stdout.lines() {
        // ok PATH: N events, head H (STATE; HOW)
        let rest = line.strip_prefix("ok ").unwrap_or_else(|| panic!("not an ok line: {line}"));
        let (path, rest) = rest.split_once(": ").expect("path: ");
        let (events, rest) = rest.split_once(" events, head ").expect("events, head");
        let (head, notes) = rest.split_once(" (").expect("(state)");
        let notes: Vec<&str> = notes.strip_suffix(')').expect("notes end with )").split("; ").collect();
        let state = notes[0];
        // a kill inside a write leaves a torn last line: named, never counted
        if let Some(torn) = notes.iter().find_map(|n| n.strip_prefix("a torn last line of ")) {
            let bytes: u64 = torn.split_once(' ').expect("N bytes").0.parse().expect("a byte count");
            let file = p.read_bytes(path);
            assert!(bytes > 0 && !file.ends_with(b"\n"), "{line}");
            assert_eq!(file.len() - whole_prefix(&file).len(), bytes as usize, "{line}");
        }
        let complete = match state {
            "complete" => true,
            "incomplete: no run_completed" => false,
            other => panic!("unknown state {other:?} in {line}"),
        };
        let head = (head != "none").then(|| head.to_string());
        seen.insert(path.to_string(), Verified { events: events.parse().expect("count"), head, complete });
    }
    assert_eq!(seen.len(), logs.len(), "one ok line per log:\n{}", out.stdout);
    seen
}

/// `stateval reindex PIPELINE` → (runs, logs, incomplete, verdicts).
fn reindex(p: &Project, pipeline: &str) -> (usize, usize, usize, usize) {
    let out = p.stateval(&["reindex", pipeline]);
    out.expect_code(0);
    // incomplete logs (a killed run) are named, one warning each, and are no failure
    for line in out.stderr.lines() {
        assert!(
            line.starts_with("warning: incomplete: runs/")
                || (line.starts_with("warning: torn: runs/") && line.contains("a torn last line (")),
            "no other problem for reindex: {line}"
        );
    }
    let line = out.stdout.strip_suffix('\n').expect("one line");
    assert!(line.starts_with("reindexed ") && !line.contains('\n'), "{line}");
    let counts = line.rsplit_once(": ").expect("reindexed ROOT: counts").1;
    let n: Vec<usize> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("number"))
        .collect();
    assert_eq!(counts, format!("{} runs, {} logs ({} incomplete), {} verdicts", n[0], n[1], n[2], n[3]), "{line}");
    (n[0], n[1], n[2], n[3])
}

fn open_catalog(p: &Project) -> SledStore {
    SledStore::open(&Layout::new(&p.join(".stateval")).catalog()).expect("open the catalog")
}

/// Lines of a file that end with `\n` (a killed writer may leave a torn last line).
fn whole_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// The file up to and including its last newline: what a torn tail leaves whole.
fn whole_prefix(bytes: &[u8]) -> &[u8] {
    bytes.iter().rposition(|&b| b == b'\n').map_or(&[][..], |i| &bytes[..=i])
}

fn canonical(p: &Project, rel: &str) -> PathBuf {
    p.join(rel).canonicalize().unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Catalog paths are relative to the store directory.
fn in_store(p: &Project, rel: &str) -> PathBuf {
    canonical(p, &format!(".stateval/{rel}"))
}

/// Big enough that a debug build takes seconds, so the kill lands mid-run, in long
/// cases, so that it finds one in progress whatever the machine's timing: with short
/// ones, both workers were now and then between cases (grading, recording a verdict)
/// at the moment of the kill.
const SPEC: SynthSpec = SynthSpec { cases: 40, turns: 400, runs: 1, seed: 7 };

fn count_kind(events: &[serde_json::Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

#[test]
fn a_run_killed_mid_way_leaves_logs_that_verify_and_a_store_that_reindex_restores() {
    let p = Project::empty();
    let pipeline = write_suite(p.path(), &SPEC).expect("write the synthetic suite");
    let pipeline = pipeline.strip_prefix(p.path()).expect("inside the project").to_str().expect("UTF-8").to_string();
    let pipeline = pipeline.as_str();

    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("stateval"))
        .args(["run", pipeline, "--jobs", "2"])
        .current_dir(p.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn stateval run");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            panic!("the run ended ({status}) before it could be killed: make the suite bigger");
        }
        if p.log_files().len() >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "no logs appeared within 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().expect("SIGKILL the run");
    let status = child.wait().expect("reap the run");
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "the run was killed, not finished: {status}");
    }

    let run_ids = p.run_ids();
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    let run_id = &run_ids[0];
    let logs = p.log_files();
    assert!(logs.len() >= 4 && logs.len() < SPEC.cases, "killed mid-run: {} logs", logs.len());

    // every log verifies; completed ones are whole, the others hold whole turns and at
    // most the start of one more (a kill can stop a write part-way, at a page boundary)
    let verified = verify_all(&p, &logs);
    let complete = verified.values().filter(|v| v.complete).count();
    let incomplete = verified.len() - complete;
    assert!(incomplete >= 1, "a run in progress was killed, so at least one log is incomplete: {verified:#?}");
    for (log, v) in &verified {
        let events = events_of(whole_prefix(&p.read_bytes(log)));
        assert_eq!(events.len() as u64, v.events, "{log}");
        if v.complete {
            let turns = (count_kind(&events, "turn_started"), count_kind(&events, "turn_completed"));
            assert_eq!(turns, (SPEC.turns, SPEC.turns), "{log} holds every turn");
        } else {
            let (started, completed) = (count_kind(&events, "turn_started"), count_kind(&events, "turn_completed"));
            assert!(
                started == completed || started == completed + 1,
                "{log}: {started} turns started, {completed} completed"
            );
            // every turn but the last one started is whole
            let last_completed = events.iter().rposition(|e| e["kind"] == "turn_completed");
            let last_started = events.iter().rposition(|e| e["kind"] == "turn_started");
            assert!(
                started == completed || last_started > last_completed,
                "{log}: a turn left unfinished before another"
            );
        }
    }

    // reindex counts what is on disk
    let verdict_lines = whole_lines(&p.read_bytes(format!(".stateval/runs/{run_id}/verdicts.jsonl")));
    assert!(
        verdict_lines <= complete && verdict_lines + 2 >= complete,
        "{verdict_lines} verdicts, {complete} complete logs"
    );
    assert_eq!(reindex(&p, pipeline), (1, logs.len(), incomplete, verdict_lines));

    // the catalog lists exactly the files on disk, as verify sees them
    let store = open_catalog(&p);
    let runs = store.runs().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!((&runs[0].run_id, runs[0].passed), (run_id, None), "a killed run has no verdict");
    let records = store.logs(run_id).expect("logs");
    let on_disk: BTreeSet<PathBuf> = logs.iter().map(|l| canonical(&p, l)).collect();
    let catalogued: BTreeSet<PathBuf> = records.iter().map(|r| in_store(&p, &r.path)).collect();
    assert_eq!(catalogued, on_disk);
    assert_eq!(records.len(), logs.len(), "no log is catalogued twice");
    for r in &records {
        let log = logs.iter().find(|l| canonical(&p, l) == in_store(&p, &r.path)).expect("on disk");
        let v = &verified[log];
        assert_eq!((r.events, &r.head, r.complete), (v.events, &v.head, v.complete), "{log}");
        let turns = count_kind(&events_of(&p.read_bytes(log)), "turn_started");
        assert_eq!(r.turn_offsets.len(), turns, "{log}: one offset per turn");
    }
    assert_eq!(store.verdicts(run_id).expect("verdicts").len(), verdict_lines);
}

#[test]
fn synth_events_per_run_matches_the_events_a_run_writes() {
    // the synthetic suite documents its log length; benchmarks and this file rely on it
    let p = Project::empty();
    let spec = SynthSpec { cases: 2, turns: 40, runs: 1, seed: 7 };
    write_suite(p.path(), &spec).expect("write the synthetic suite");
    p.stateval(&["run", "pipeline/synth.toml"]).expect_code(0);
    let logs = p.log_files();
    assert_eq!(logs.len(), 2);
    for log in &logs {
        let events = events_of(&p.read_bytes(log));
        let kinds = |k: &str| count_kind(&events, k);
        assert_eq!(
            events.len(),
            events_per_run(spec.turns),
            "{log}: {} memory_written, {} memory_expired",
            kinds("memory_written"),
            kinds("memory_expired")
        );
    }
}

#[test]
fn reindex_counts_every_run_log_and_verdict_of_both_pipelines() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    assert_eq!(reindex(&p, "pipeline/ci.toml"), (1, 17, 0, 17));
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    // both pipelines share the `.stateval` store
    assert_eq!(reindex(&p, "pipeline/ci.toml"), (2, 23, 0, 23));
}

#[test]
fn reindex_rebuilds_a_lost_catalog_from_the_log_files() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run_id = p.run_ids().pop().expect("a run");
    std::fs::remove_dir_all(p.join(".stateval/catalog")).expect("lose the catalog");
    assert_eq!(reindex(&p, "pipeline/ci.toml"), (1, 17, 0, 17));

    let store = open_catalog(&p);
    let runs = store.runs().expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].run_id.as_str(), runs[0].pipeline.as_str(), runs[0].cases, runs[0].passed),
        (run_id.as_str(), "ci", 15, Some(true))
    );
    let logs = store.logs(&run_id).expect("logs");
    let catalogued: BTreeSet<PathBuf> = logs.iter().map(|r| in_store(&p, &r.path)).collect();
    let on_disk: BTreeSet<PathBuf> = p.log_files().iter().map(|l| canonical(&p, l)).collect();
    assert_eq!(catalogued, on_disk);
    let verdicts = store.verdicts(&run_id).expect("verdicts");
    assert_eq!(verdicts.len(), 17);
    assert!(verdicts.iter().all(|v| v.passed && v.status == "completed"), "{verdicts:#?}");
}

/// Names of the fields that differ between two records of the same log.
fn differing_fields(a: &LogRecord, b: &LogRecord) -> Vec<String> {
    let mut out = Vec::new();
    if a.path != b.path {
        out.push(format!("path: {:?} vs {:?}", a.path, b.path));
    }
    if a.head != b.head {
        out.push(format!("head: {:?} vs {:?}", a.head, b.head));
    }
    if a.events != b.events {
        out.push(format!("events: {} vs {}", a.events, b.events));
    }
    if a.complete != b.complete {
        out.push(format!("complete: {} vs {}", a.complete, b.complete));
    }
    if a.turn_offsets != b.turn_offsets {
        out.push(format!("turn_offsets: {:?} vs {:?}", a.turn_offsets, b.turn_offsets));
    }
    out
}

#[test]
fn reindex_reproduces_the_catalog_the_run_recorded() {
    // The catalog is only an index of the files (docs/design.md §3): rebuilding it must give
    // back what the run itself recorded, field for field.
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run_id = p.run_ids().pop().expect("a run");
    let (runs, logs, verdicts) = {
        let store = open_catalog(&p);
        (store.runs().expect("runs"), store.logs(&run_id).expect("logs"), store.verdicts(&run_id).expect("verdicts"))
    };
    assert_eq!(logs.len(), 17);

    reindex(&p, "pipeline/ci.toml");
    let store = open_catalog(&p);
    assert_eq!(store.runs().expect("runs"), runs);
    assert_eq!(store.verdicts(&run_id).expect("verdicts"), verdicts);
    let rebuilt = store.logs(&run_id).expect("logs");
    assert_eq!(rebuilt.len(), logs.len());
    let diffs: Vec<String> = logs
        .iter()
        .zip(&rebuilt)
        .filter_map(|(a, b)| {
            let d = differing_fields(a, b);
            (!d.is_empty()).then(|| format!("{}/{}: {}", a.case, a.k, d.join("; ")))
        })
        .collect();
    assert!(diffs.is_empty(), "recorded by the run vs rebuilt by reindex:\n{}", diffs.join("\n"));
}

#[test]
fn turn_offsets_in_the_catalog_point_at_turn_started_lines() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    reindex(&p, "pipeline/ci.toml");
    let run_id = p.run_ids().pop().expect("a run");
    let store = open_catalog(&p);
    let record = store
        .logs(&run_id)
        .expect("logs")
        .into_iter()
        .find(|r| r.case == "docs-session-episodic-expiry")
        .expect("the 4-turn case");
    let bytes = std::fs::read(p.join(".stateval").join(&record.path)).expect("read the log");
    assert_eq!(record.turn_offsets.len(), 4);
    let lines = lines_of(&bytes);
    for (turn, &offset) in record.turn_offsets.iter().enumerate() {
        let line = &bytes[offset as usize..];
        let event: serde_json::Value =
            serde_json::from_slice(&line[..line.iter().position(|&b| b == b'\n').expect("a whole line")])
                .expect("JSON");
        assert_eq!((event["kind"].as_str(), event["turn"].as_u64()), (Some("turn_started"), Some(turn as u64)));
        assert!(lines.iter().any(|l| line.starts_with(l)), "offset {offset} starts a line");
    }
}
