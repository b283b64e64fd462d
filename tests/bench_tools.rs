//! The benchmark tools docs/speed.md and the README's speed table ask a reader to run
//! (`benches/inputs/gen_same_shape.py`, `benches/inputs/gen_perf_batches.py`,
//! `benches/inputs/rounds.py` and the floor, `examples/floor.rs`), run at small sizes so
//! that none of them rots: each generator's output is taken by the stateval of this build,
//! the rounds runner times that build on it and hands the floor its logs, and the floor
//! reproduces every hash of a log that build wrote. The profile-optimised build
//! (`tools/pgo/build.py`) is built whole by CI; here only its refusal is checked.

mod common;

#[path = "../examples/floor.rs"]
mod floor;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Project;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/inputs").join(name)
}

/// Run `python3 SCRIPT ARGS` in `dir`; (exit code, stdout, stderr). Without `CI`, as
/// [`stateval_in`]: the stateval a script runs would otherwise ask for goldens.
fn python(dir: &Path, name: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("python3")
        .arg(script(name))
        .args(args)
        .current_dir(dir)
        .env_remove("CI")
        .output()
        .expect("python3 runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `dir`, relative, with its bytes, sorted.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("inside").to_string_lossy().into_owned();
                files.push((rel, std::fs::read(&path).expect("read")));
            }
        }
    }
    files.sort();
    files
}

/// The case logs of the one run under `store`.
fn case_logs(store: &Path) -> Vec<String> {
    let runs: Vec<PathBuf> =
        std::fs::read_dir(store.join("runs")).expect("runs/").map(|e| e.expect("entry").path()).collect();
    assert_eq!(runs.len(), 1, "one run in {}", store.display());
    let mut logs = Vec::new();
    for case in std::fs::read_dir(&runs[0]).expect("the run's directory") {
        let case = case.expect("entry").path();
        if case.is_dir() {
            for log in std::fs::read_dir(&case).expect("case dir") {
                logs.push(log.expect("entry").path().to_string_lossy().into_owned());
            }
        }
    }
    logs.sort();
    logs
}

#[test]
fn the_same_shape_suite_runs_green_in_every_fixture_layout_and_the_floor_reproduces_its_hashes() {
    for fixture in ["per-case", "keyed-shared", "default"] {
        let p = Project::empty();
        let (code, stdout, stderr) = python(p.path(), "gen_same_shape.py", &["suite", "3", "4", "--fixture", fixture]);
        assert_eq!(code, 0, "{fixture}: {stderr}");
        assert_eq!(stdout.trim(), "suite/pipeline/same.toml");
        let manifests = std::fs::read_dir(p.join("suite/fixtures/tools")).expect("tools/").count();
        assert_eq!(manifests, if fixture == "per-case" { 3 } else { 1 }, "{fixture}");

        // the docs' command, from the suite's directory
        let run = stateval_in(&p.join("suite"), &["run", "pipeline/same.toml", "--jobs", "1"]);
        assert_eq!(run.0, 0, "{fixture}: {}\n{}", run.1, run.2);
        assert!(run.1.contains("3/3 cases passed"), "{fixture}: {}", run.1);
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.join("suite/reports/report.json")).expect("report.json"))
                .expect("JSON");
        let text = report.to_string();
        // both checks ran on every case: the final answer and 4 lookups
        assert!(text.contains("value-2-3"), "the last case's final answer is graded: {text:.400}");

        if fixture == "per-case" {
            let logs = case_logs(&p.join("suite/.stateval"));
            assert_eq!(logs.len(), 3, "{logs:?}");
            let events: u64 =
                logs.iter().map(|l| std::fs::read_to_string(l).expect("log").lines().count() as u64).sum();
            let tally = floor::floor("canon-hash", &logs).expect("the floor reads the logs");
            assert_eq!(tally.lines, events);
            assert_eq!(tally.hash_mismatches, 0, "the floor reproduces every hash stateval wrote");
            for mode in ["hash", "parse"] {
                assert_eq!(floor::floor(mode, &logs).expect(mode).lines, events);
            }
            // hash-write reproduces every hash without parsing, and leaves a copy of each log
            let tally = floor::floor("hash-write", &logs).expect("hash-write");
            assert_eq!((tally.lines, tally.hash_mismatches), (events, 0));
            for log in &logs {
                let copy = format!("{log}.floor");
                assert_eq!(std::fs::read(&copy).expect("copy"), std::fs::read(log).expect("log"));
                std::fs::remove_file(copy).expect("remove the copy");
            }

            // an edited event is one mismatch: the floor's check is not vacuous
            let first = &logs[0];
            let text = std::fs::read_to_string(first).expect("log");
            std::fs::write(first, text.replacen("\"turn\":0", "\"turn\":7", 1)).expect("write");
            assert_ne!(std::fs::read_to_string(first).expect("log"), text, "the edit changed the log");
            assert_eq!(floor::floor("canon-hash", &logs).expect("floor").hash_mismatches, 1);
            assert_eq!(floor::floor("hash-write", &logs).expect("floor").hash_mismatches, 1);
            assert!(
                floor::floor("nosuch", &logs)
                    .unwrap_err()
                    .contains("expected one of hash, parse, canon-hash, hash-write")
            );
        }
    }
}

#[test]
fn the_same_shape_generator_is_deterministic_and_refuses_bad_arguments() {
    let p = Project::empty();
    for dir in ["a", "b"] {
        assert_eq!(python(p.path(), "gen_same_shape.py", &[dir, "2", "3", "--fixture", "per-case"]).0, 0);
    }
    assert_eq!(tree(&p.join("a")), tree(&p.join("b")));
    let (code, _, stderr) = python(p.path(), "gen_same_shape.py", &["c", "2", "3", "--fixture", "shared"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("unknown --fixture 'shared'"), "{stderr}");
    let (code, _, stderr) = python(p.path(), "gen_same_shape.py", &["c", "two", "3"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("N and T must be whole numbers"), "{stderr}");
}

#[test]
fn every_perf_batch_is_graded_line_by_line_by_stateval_metric() {
    let p = Project::empty();
    let (code, stdout, stderr) = python(p.path(), "gen_perf_batches.py", &["b", "--scale", "0.002"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "b");
    for name in ["stability", "stability-across", "trajectory", "golden-path", "reliability"] {
        let input = p.join(format!("b/{name}.jsonl"));
        let lines = std::fs::read_to_string(&input).expect("batch").lines().count();
        assert!(lines >= 1, "{name}");
        let input = input.to_string_lossy().into_owned();
        let (code, out, err) = stateval_in(p.path(), &["metric", name, "--batch", "--input", &input]);
        assert_eq!(code, 0, "{name}: {err}");
        let graded: Vec<serde_json::Value> =
            out.lines().map(|l| serde_json::from_str(l).expect("one JSON document a line")).collect();
        assert_eq!(graded.len(), lines, "{name}: one output line per input line");
        assert!(graded.iter().all(|g| g.get("error").is_none()), "{name}: {out:.300}");
    }
    let again = Project::empty();
    assert_eq!(python(again.path(), "gen_perf_batches.py", &["b", "--scale", "0.002"]).0, 0);
    assert_eq!(tree(&p.join("b")), tree(&again.join("b")), "a fixed seed: the same bytes");
}

#[test]
fn the_rounds_runner_alternates_fresh_copies_and_hands_the_floor_the_first_builds_logs() {
    let p = Project::empty();
    assert_eq!(python(p.path(), "gen_same_shape.py", &["suite", "2", "3", "--fixture", "per-case"]).0, 0);
    let (record, fake) = fake_floor(&p);
    let stateval = env!("CARGO_BIN_EXE_stateval");
    let order = p.join("order.txt");
    let builds = noting_builds(&p, &order);
    let scratch = p.join("scratch");
    let (code, out, err) = python(
        p.path(),
        "rounds.py",
        &[
            "2",
            "suite",
            "pipeline/same.toml",
            "--jobs",
            "1",
            "--scratch",
            &scratch.to_string_lossy(),
            "--floor",
            &fake.to_string_lossy(),
            "--",
            &builds[0],
            &builds[1],
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // the builds took turns, the second going first every other round
    assert_eq!(noted(&order), ["a run", "b run", "b run", "a run"]);
    for row in ["build 1 ", "build 2 ", "floor canon-hash ", "floor hash-write "] {
        assert!(out.lines().any(|l| l.starts_with(row)), "a row for {row:?}:\n{out}");
    }
    for ratio in [
        "build 1 / build 2, CPU",
        "build 1 / build 2, wall",
        "build 1 / floor canon-hash, CPU",
        "build 2 / floor hash-write, CPU",
    ] {
        assert!(out.contains(ratio), "{ratio:?}:\n{out}");
    }

    // each round ran both floor modes, over the same copies of the two cases' logs
    let calls = floor_calls(&record);
    let modes: Vec<&str> = calls.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(modes, ["canon-hash", "hash-write", "canon-hash", "hash-write"]);
    let logs = &calls[0][1..];
    assert_eq!(logs.len(), 2, "one log per case: {logs:?}");
    assert!(calls.iter().all(|c| &c[1..] == logs), "{calls:?}");
    for log in logs {
        assert!(log.starts_with(&*scratch.to_string_lossy()), "kept in the scratch directory: {log}");
        let first = std::fs::read_to_string(log).expect("the kept log").lines().next().map(str::to_string);
        assert!(first.is_some_and(|l| l.contains("\"kind\":\"run_started\"")), "{log} is a case log");
        assert!(!Path::new(&format!("{log}.floor")).exists(), "hash-write's copy is removed");
    }
    // the copies run in are removed; the suite itself is untouched
    assert!(!scratch.join("suite").exists());
    assert!(!p.join("suite/.stateval").exists() && !p.join("suite/reports").exists());

    // a build that fails stops the rounds, saying which and why: no time for a failed run
    p.write("broken", "#!/bin/sh\necho 'no such pipeline' >&2\nexit 3\n");
    make_executable(&p.join("broken"));
    let broken = p.join("broken").to_string_lossy().into_owned();
    let (code, out, err) =
        python(p.path(), "rounds.py", &["1", "suite", "pipeline/same.toml", "--", stateval, &broken]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("exited 3") && err.contains("no such pipeline"), "{err}");
    assert!(!out.contains("CPU ms"), "no figures printed after a failure: {out}");
    let (code, _, err) = python(p.path(), "rounds.py", &["1", "suite", "pipeline/same.toml", "--", "./no-such-build"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot run ./no-such-build: No such file or directory"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    let (code, _, err) = python(p.path(), "rounds.py", &["1", "suite", "pipeline/nope.toml", "--", stateval]);
    assert_ne!(code, 0);
    assert!(err.contains("no pipeline pipeline/nope.toml in suite"), "{err}");

    // a suite that holds an earlier run's store is refused: each copy's run would first
    // replace that run, and time it too; --rerun measures exactly that, on purpose
    let (code, _, err) = stateval_in(&p.join("suite"), &["run", "pipeline/same.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(p.join("suite/.stateval").is_dir());
    let (code, out, err) = python(p.path(), "rounds.py", &["1", "suite", "pipeline/same.toml", "--", stateval]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("suite holds a store (.stateval) from an earlier run") && err.contains("--rerun"), "{err}");
    assert!(!out.contains("CPU ms"), "nothing measured: {out}");
    let (code, out, err) =
        python(p.path(), "rounds.py", &["1", "suite", "pipeline/same.toml", "--rerun", "--", stateval]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.lines().any(|l| l.starts_with("build 1 ")), "{out}");
}

#[test]
fn the_rounds_budget_times_the_first_builds_plan_and_the_floor_over_the_suites_own_inputs() {
    let p = Project::empty();
    assert_eq!(python(p.path(), "gen_same_shape.py", &["suite", "2", "3", "--fixture", "per-case"]).0, 0);
    // one manifest spread over lines, as a person writes one: the floor reads JSON Lines
    let manifests: Vec<PathBuf> = std::fs::read_dir(p.join("suite/fixtures/tools"))
        .expect("manifests")
        .map(|e| e.expect("entry").path())
        .collect();
    let pretty = manifests.iter().min().expect("a manifest").clone();
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pretty).expect("manifest")).expect("JSON");
    std::fs::write(&pretty, serde_json::to_string_pretty(&value).expect("JSON")).expect("write");
    let (record, fake) = fake_floor(&p);
    let stateval = env!("CARGO_BIN_EXE_stateval");
    let said = p.join("said.txt");
    let builds = noting_builds(&p, &said);
    let scratch = p.join("scratch").to_string_lossy().into_owned();
    let floor = fake.to_string_lossy().into_owned();
    let args = ["2", "suite", "pipeline/same.toml", "--scratch", &scratch, "--floor", &floor, "--budget", "--"];
    let (code, out, err) = python(p.path(), "rounds.py", &[&args[..], &[&builds[0], &builds[1]]].concat());
    assert_eq!(code, 0, "{out}\n{err}");
    // the first build's plan, once a round after its run; the second build only runs
    assert_eq!(noted(&said), ["a run", "a plan", "b run", "b run", "a run", "a plan"]);
    for row in ["build 1 plan ", "floor canon-hash inputs "] {
        assert!(out.lines().any(|l| l.starts_with(row)), "a row for {row:?}:\n{out}");
    }
    // the budget is the table's least figures, put together as it says
    let least = |row: &str| -> f64 {
        let line = out.lines().find(|l| l.get(..24).is_some_and(|n| n.trim_end() == row)).expect(row);
        line[24..].split_whitespace().next().and_then(|n| n.parse().ok()).expect("a least CPU")
    };
    let (run, plan, floor) = (least("build 1"), least("build 1 plan"), least("floor canon-hash"));
    let write = least("floor hash-write");
    let close = |said: f64, want: f64| assert!((said - want).abs() < 0.16, "{said} against {want}:\n{out}");
    close(budget_ms(&out, "  the run: "), run);
    close(budget_ms(&out, "  its plan (every input validated once): "), plan);
    close(budget_ms(&out, "left for the cases' own work (run - plan - hash-write): "), run - plan - write);
    close(budget_ms(&out, "beside this plan and hash-write: "), 0.6 * floor - plan - write);
    // each round: the floor over the inputs, then both modes over the logs
    let calls = floor_calls(&record);
    assert_eq!(calls.len(), 6, "{calls:?}");
    let inputs = &calls[0][1..];
    assert_eq!(calls[0][0], "canon-hash");
    assert_eq!(&calls[3][1..], inputs, "the same inputs each round");
    // the suite's dataset, its two recordings and two manifests, from the suite itself
    // but for the one spread over lines, which is a one-line copy of the same JSON
    let copied = Path::new(&scratch).join("inputs");
    let mut names: Vec<String> = inputs
        .iter()
        .map(|i| {
            let i = Path::new(i);
            let rel = match i.strip_prefix(&copied) {
                Ok(rel) => {
                    let text = std::fs::read_to_string(i).expect("the copy");
                    assert_eq!(text.lines().count(), 1, "{text}");
                    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).expect("JSON"), value);
                    assert_eq!(p.join("suite").join(rel), pretty, "the copy is of the pretty manifest");
                    rel
                }
                Err(_) => i.strip_prefix(p.join("suite")).expect("under the suite"),
            };
            rel.to_string_lossy().into_owned()
        })
        .collect();
    assert!(inputs.iter().any(|i| i.starts_with(&*copied.to_string_lossy())), "{inputs:?}");
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("datasets/")), "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("fixtures/recordings/")).count(), 2, "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("fixtures/tools/")).count(), 2, "{names:?}");
    assert_eq!(calls[1][0], "canon-hash");
    assert!(calls[1][1].starts_with(&scratch), "then the logs: {:?}", calls[1]);
    // the plan ran in a copy too: the suite has no plan.json
    assert!(!p.join("suite/plan.json").exists());

    // an input that is not JSON is named, not a traceback
    p.write("suite/fixtures/broken.json", "{\n  \"tools\": \n");
    let (code, _, err) = python(p.path(), "rounds.py", &[&args[..], &[&builds[0]]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--budget cannot read") && err.contains("broken.json"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");

    // a budget needs the floor to set it against
    let (code, _, err) =
        python(p.path(), "rounds.py", &["1", "suite", "pipeline/same.toml", "--budget", "--", stateval]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--budget needs --floor FLOOR"), "{err}");
}

/// A stand-in floor that notes each call's arguments in the file it returns first, and
/// leaves the copy `hash-write` leaves.
fn fake_floor(p: &Project) -> (PathBuf, PathBuf) {
    let record = p.join("floor-calls.jsonl");
    p.write(
        "fake-floor",
        format!(
            "#!/usr/bin/env python3\nimport json, shutil, sys\n\
             open({record:?}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n\
             if sys.argv[1] == 'hash-write':\n    [shutil.copy(l, l + '.floor') for l in sys.argv[2:]]\n",
            record = record.to_string_lossy()
        ),
    );
    let fake = p.join("fake-floor");
    make_executable(&fake);
    (record, fake)
}

/// The fake floor's calls, each its arguments.
fn floor_calls(record: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(record)
        .expect("the floor ran")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

/// Two builds, `a` and `b`: this stateval behind wrappers that note in `log` each time
/// one ran and the command it was given.
fn noting_builds(p: &Project, log: &Path) -> Vec<String> {
    let stateval = env!("CARGO_BIN_EXE_stateval");
    let log = log.to_string_lossy();
    ["a", "b"]
        .into_iter()
        .map(|name| {
            p.write(name, format!("#!/bin/sh\necho {name} $1 >> '{log}'\nexec '{stateval}' \"$@\"\n"));
            make_executable(&p.join(name));
            p.join(name).to_string_lossy().into_owned()
        })
        .collect()
}

/// What the builds of [`noting_builds`] noted, a line each.
fn noted(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).expect("the builds ran").lines().map(str::to_string).collect()
}

/// The milliseconds a budget line of rounds.py gives right after `label`.
fn budget_ms(out: &str, label: &str) -> f64 {
    let at = out.find(label).unwrap_or_else(|| panic!("{label:?} in:\n{out}")) + label.len();
    out[at..].split(" ms").next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("ms after {label:?}"))
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `stateval ARGS` in `dir`: (exit code, stdout, stderr).
fn stateval_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stateval"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .output()
        .expect("run stateval");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tools/pgo/build.py` refuses an `llvm-profdata` of another LLVM than rustc's, exit 2,
/// saying which it needs, before it builds anything: a profile written by one LLVM is
/// not reliably read by another's tools. (CI runs the whole build, `.ci/run`.)
#[test]
fn the_pgo_build_refuses_an_llvm_profdata_of_another_llvm_before_building() {
    let dir = tempfile::tempdir().expect("tempdir");
    // a `cargo` first on PATH that fails loudly: a script that did not refuse builds
    let fake_cargo = dir.path().join("cargo");
    std::fs::write(&fake_cargo, "#!/bin/sh\necho 'fake cargo ran' >&2\nexit 97\n").expect("write");
    make_executable(&fake_cargo);
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap_or_default());
    let build = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pgo/build.py");
    for (name, body, says) in [
        ("old-profdata", "#!/bin/sh\necho 'LLVM (http://llvm.org/):'\necho '  LLVM version 1.0.0'\n", "is LLVM 1,"),
        ("mute-profdata", "#!/bin/sh\necho 'Unknown command!'\n", "is of no version it reports,"),
    ] {
        let profdata = dir.path().join(name);
        std::fs::write(&profdata, body).expect("write");
        make_executable(&profdata);
        let out = Command::new("python3")
            .arg(&build)
            .env("PATH", &path)
            .env("LLVM_PROFDATA", &profdata)
            .output()
            .expect("python3 runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{name}: {stdout}{stderr}");
        assert!(stderr.contains(&format!("LLVM_PROFDATA={}", profdata.display())), "{name}: {stderr}");
        assert!(stderr.contains(says) && stderr.contains("rustc is built on LLVM "), "{name}: {stderr}");
        assert!(
            !stderr.contains("fake cargo ran") && !stdout.contains("cargo build"),
            "{name} built: {stdout}{stderr}"
        );
    }
}
