//! Signals and closed pipes in every phase of a run (issue #32): SIGINT or SIGTERM at
//! any phase exits 130, leaves no report, no `suite.json` and no manifest (the run is
//! unfinished), and leaves logs that verify with `--allow-incomplete`; a closed stdout
//! or stderr never changes the exit code and never panics.
//!
//! Each signal is sent at a moment the test controls: `STATEVAL_TEST_PAUSE_AT=PHASE`
//! makes the run say `stateval: paused at PHASE` on stderr and wait there for it.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{CI_REPORTS, FAILING_REPORTS, Project};
use nix::sys::signal::Signal;

/// Long enough for a run of the core suite on a loaded machine; only a hang takes it.
const DEADLINE: Duration = Duration::from_secs(120);

/// `stateval ARGS…` in `p`, as a process of its own (its streams are the caller's to set).
fn stateval(p: &Project, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stateval"));
    cmd.current_dir(p.path()).args(args).env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE").env_remove("CI");
    cmd.stdin(Stdio::null());
    cmd
}

/// `stateval ARGS…` in `p`, paused at `phase`, its stdout discarded and its stderr piped.
fn spawn_paused(p: &Project, args: &[&str], phase: &str) -> Child {
    stateval(p, args)
        .env("STATEVAL_TEST_PAUSE_AT", phase)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start stateval")
}

/// Waits for the run to say it paused at `phase`, sends `signal`, and returns its exit
/// code and everything it wrote on stderr.
fn interrupt(child: Child, phase: &str, signal: Signal) -> (i32, String) {
    interrupt_when(child, phase, signal, || {})
}

/// [`interrupt`], calling `paused` while the run waits, before the signal.
fn interrupt_when(mut child: Child, phase: &str, signal: Signal, paused: impl FnOnce()) -> (i32, String) {
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
    let marker = format!("stateval: paused at {phase}");
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let read = stderr.read_line(&mut line).expect("read stderr");
        seen.push_str(&line);
        if read == 0 {
            let status = child.wait().expect("reap");
            panic!("the run ended ({status}) without pausing at {phase}:\n{seen}");
        }
        if line.trim_end() == marker {
            break;
        }
    }
    // a failed check must not leave the run waiting for a signal that never comes
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(paused)) {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic);
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
    nix::sys::signal::kill(pid, signal).expect("send the signal");
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let status = wait_within(&mut child, DEADLINE);
    seen.push_str(&rest.join().expect("the stderr reader"));
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().unwrap_or_else(|| panic!("died by signal {:?}:\n{seen}", status.signal()));
    (code, seen)
}

/// The child's exit status, or a failed test (and a killed child) after `deadline`.
fn wait_within(child: &mut Child, deadline: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for stateval") {
            return status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stateval did not exit within {deadline:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What an interrupted run must leave in `p`: no report file (nor a staged one), no
/// verdict, no manifest (it marks a run finished), and run directories whose logs
/// verify as an incomplete run's.
#[track_caller]
fn assert_no_verdict(p: &Project, reports: &[&str], what: &str) {
    for report in reports {
        assert!(!p.exists(report), "{what}: {report} was left behind");
    }
    let report_dir = std::path::Path::new(reports[0]).parent().expect("reports sit in a directory");
    let left = p.files_under(&report_dir.to_string_lossy());
    assert!(left.is_empty(), "{what}: report files left: {left:?}");
    for id in p.run_ids().into_iter().filter(|id| !id.starts_with('.')) {
        let run = format!(".stateval/runs/{id}");
        assert!(!p.exists(format!("{run}/suite.json")), "{what}: {run}/suite.json holds a verdict");
        assert!(!p.exists(format!("{run}/manifest.json")), "{what}: {run} has a manifest");
        if p.exists(format!("{run}/run.json")) {
            let meta = p.json(format!("{run}/run.json"));
            assert!(meta["passed"].is_null(), "{what}: {run}/run.json says {meta}");
        }
        let verified = p.stateval(&["verify", "--allow-incomplete", &run]);
        assert_eq!(verified.code, 0, "{what}: {run} does not verify:\n{}", verified.stderr);
    }
}

/// Interrupt `stateval run --jobs 1` (the core suite, which passes) at `phase`, once
/// with SIGINT and once with SIGTERM; returns the project of the SIGTERM round.
fn interrupt_run_at(phase: &str) -> Project {
    let mut last = None;
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let p = Project::new();
        let child = spawn_paused(&p, &["run", "--jobs", "1"], phase);
        let (code, stderr) = interrupt(child, phase, signal);
        let what = format!("{signal} at {phase}");
        assert_eq!(code, 130, "{what}:\n{stderr}");
        assert!(stderr.contains(&format!("interrupted at {phase}")), "{what}: the error names the phase:\n{stderr}");
        assert_no_verdict(&p, &CI_REPORTS, &what);
        last = Some(p);
    }
    last.expect("two rounds")
}

#[test]
fn a_signal_while_the_pipeline_loads_exits_130_before_anything_is_written() {
    let p = interrupt_run_at("loading");
    assert!(p.run_ids().is_empty(), "a run directory: {:?}", p.run_ids());
}

#[test]
fn a_signal_after_validation_exits_130_before_anything_is_written() {
    let p = interrupt_run_at("validation");
    assert!(p.run_ids().is_empty(), "a run directory: {:?}", p.run_ids());
}

#[test]
fn a_signal_between_cases_exits_130_and_the_logs_written_verify() {
    let p = interrupt_run_at("cases");
    // paused once the first case was written, with one worker: its log, and no other
    assert_eq!(p.log_files().len(), 1, "{:?}", p.log_files());
}

#[test]
fn a_signal_before_the_logs_are_synced_exits_130_without_a_manifest() {
    let p = interrupt_run_at("fsync");
    // every case ran (17 logs), but the run never became finished
    assert_eq!(p.log_files().len(), 17, "{:?}", p.log_files());
}

#[test]
fn a_signal_before_the_manifest_exits_130_without_a_manifest() {
    let p = interrupt_run_at("manifest");
    assert_eq!(p.log_files().len(), 17, "{:?}", p.log_files());
}

#[test]
fn a_signal_before_the_reports_are_in_place_exits_130_and_takes_the_run_back() {
    // the manifest, suite.json and run.json were written before the pause: all taken back
    let p = interrupt_run_at("reports");
    assert_eq!(p.log_files().len(), 17, "{:?}", p.log_files());
}

#[test]
fn a_signal_once_the_reports_are_in_place_exits_130_and_takes_them_back() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let p = Project::new();
        let child = spawn_paused(&p, &["run", "--jobs", "1"], "summary");
        let (code, stderr) = interrupt_when(child, "summary", signal, || {
            // the moment is real: every report is in place, saying the run passed
            assert!(CI_REPORTS.iter().all(|r| p.exists(r)), "the reports are not in place yet");
        });
        let what = format!("{signal} at summary");
        assert_eq!(code, 130, "{what}:\n{stderr}");
        assert_no_verdict(&p, &CI_REPORTS, &what);
    }
}

#[test]
fn a_merge_interrupted_in_any_phase_exits_130_and_leaves_no_verdict() {
    for phase in stateval::interrupt::Phase::ALL.map(|p| p.as_str()) {
        let p = Project::new();
        p.stateval(&["run", "--shard", "slice:1/1", "--out", "shards/1"]).expect_code(0);
        let child = spawn_paused(&p, &["merge", "shards/1"], phase);
        let (code, stderr) = interrupt(child, phase, Signal::SIGINT);
        assert_eq!(code, 130, "merge at {phase}:\n{stderr}");
        assert_no_verdict(&p, &CI_REPORTS, &format!("merge at {phase}"));
    }
}

// ---- closed pipes -------------------------------------------------------------------

/// A pipe whose reading end is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

#[test]
fn a_failed_gate_exits_1_when_stdout_is_closed() {
    let p = Project::new();
    let output = stateval(&p, &["run", "pipeline/failing.toml"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("run stateval");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // `stateval run pipeline/failing.toml | true` was exit 3, "a bug"
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // the reports are written all the same
    assert!(FAILING_REPORTS.iter().all(|r| p.exists(r)));
}

#[test]
fn a_failed_gate_exits_1_when_stdout_and_stderr_are_closed() {
    let p = Project::new();
    let pipe = closed_pipe();
    let output = stateval(&p, &["run", "pipeline/failing.toml"])
        .stdout(pipe.try_clone().expect("a second end"))
        .stderr(pipe)
        .output()
        .expect("run stateval");
    // `stateval run pipeline/failing.toml 2>&1 | true` panicked (101)
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_passing_run_exits_0_when_stdout_and_stderr_are_closed() {
    let p = Project::new();
    let pipe = closed_pipe();
    let status = stateval(&p, &["run"])
        .stdout(pipe.try_clone().expect("a second end"))
        .stderr(pipe)
        .status()
        .expect("run stateval");
    assert_eq!(status.code(), Some(0));
    assert!(CI_REPORTS.iter().all(|r| p.exists(r)));
}

#[test]
fn verify_keeps_its_exit_code_when_stdout_is_closed() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run = format!(".stateval/runs/{}", p.run_ids()[0]);
    // the first path verifies (a line on stdout), the second does not exist (exit 2);
    // a closed stdout once ended the command at its first line, with exit 0
    let status = stateval(&p, &["verify", &run, "no-such.jsonl"])
        .stdout(closed_pipe())
        .stderr(Stdio::null())
        .status()
        .expect("run stateval");
    assert_eq!(status.code(), Some(2));
}

#[test]
fn an_invalid_input_exits_2_when_stderr_is_closed() {
    let p = Project::new();
    // the error message goes to a closed stderr: lost, and the exit code stays 2
    let status = stateval(&p, &["run", "pipeline/no-such.toml"])
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .status()
        .expect("run stateval");
    assert_eq!(status.code(), Some(2));
}

#[test]
fn a_metric_batch_grades_every_line_after_stdout_closes() {
    use std::io::Write;
    // far more output than one pipe buffer and stateval's own (64 KiB): the pipe is
    // found closed long before the bad last line, which still makes the exit 2
    let mut input = "{\"outcomes\": [true, false]}\n".repeat(20_000);
    input.push_str("{\"outcomes\": [1]}\n");
    let mut child = stateval(&Project::empty(), &["metric", "reliability", "--batch"])
        .stdin(Stdio::piped())
        .stdout(closed_pipe())
        .stderr(Stdio::null())
        .spawn()
        .expect("start stateval");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let status = wait_within(&mut child, DEADLINE);
    let read = writer.join().expect("the stdin writer");
    assert_eq!(status.code(), Some(2), "it stopped after stdout closed");
    read.expect("stateval read all its input");
}
