//! Progress that streams: when stderr is not a terminal (a CI log), `stateval run`
//! prints one line per case as the case finishes, flushed, and a closing line with
//! counts and wall time; `--quiet` prints neither. Read incrementally from a real child
//! whose second case waits until the test has seen the first case's line.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::Project;
use serde_json::json;

/// Answers every turn; with `WAIT_FOR` set, first waits (a bounded minute) for that file.
const AGENT: &str = r#"import json, os, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "turn":
        wait = os.environ.get("WAIT_FOR")
        deadline = time.time() + 60
        while wait and not os.path.exists(wait) and time.time() < deadline:
            time.sleep(0.02)
        print(json.dumps({"type": "turn_result", "turn": m["turn"], "output": "ok"}), flush=True)
    elif m["type"] == "end":
        break
"#;

fn project() -> Project {
    let p = Project::empty();
    p.write("agents/agent.py", AGENT);
    p.write(
        "pipeline/p.toml",
        "[pipeline]\nname = \"p\"\ndatasets = [\"datasets/p.jsonl\"]\n\n\
         [agents.fast]\nkind = \"external\"\ncommand = [\"python3\", \"agents/agent.py\"]\n\n\
         [agents.slow]\nkind = \"external\"\ncommand = [\"python3\", \"agents/agent.py\"]\n\
         env = { WAIT_FOR = \"release\" }\n\n\
         [goldens]\nrequired = false\n\n[gates]\ndefault = { min_pass_rate = 1.0 }\n",
    );
    let case = |id: &str, agent: &str| {
        json!({"id": id, "agent": agent, "turns": ["hello"],
               "recordings": [{"responses": [{"response": {"content": "unused"}}]}]})
        .to_string()
    };
    p.write("datasets/p.jsonl", format!("{}\n{}\n", case("first", "fast"), case("second", "slow")));
    p
}

fn python_ok() -> bool {
    std::process::Command::new("python3").arg("-c").arg("import json").output().is_ok_and(|o| o.status.success())
}

#[test]
fn a_case_line_arrives_while_the_run_is_still_going() {
    if !python_ok() {
        eprintln!("skipped: no python3 on PATH");
        return;
    }
    let p = project();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("stateval"))
        .current_dir(p.path())
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .args(["run", "pipeline/p.toml", "--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stateval");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // the first case's line, while the second case's agent still waits for `release`
    let first = loop {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("a line for the first case within a minute");
        if line.contains("::first") {
            break line;
        }
    };
    assert!(first.trim_start().starts_with("PASS ["), "{first}");
    assert!(first.contains("s] p::first (1 run, "), "{first}");
    assert!(child.try_wait().expect("wait").is_none(), "the run is still going when the first line is read");
    assert!(!p.exists("release"));
    p.write("release", "");
    let status = child.wait().expect("wait");
    reader.join().expect("reader");
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(rest.iter().any(|l| l.trim_start().starts_with("PASS [") && l.contains("::second")), "{rest:?}");
    // on a machine without a sandbox the run closes by saying so, once, after its summary
    let unisolated = |l: &&String| l.contains("the code under test runs WITHOUT ISOLATION");
    let warned = rest.iter().filter(unisolated).count();
    assert_eq!(warned, usize::from(stateval::isolation::unavailable().is_some()), "{rest:?}");
    let last = rest.iter().rev().find(|l| !unisolated(l)).expect("a closing line");
    assert!(last.trim_start().starts_with("Summary ["), "{last}");
    assert!(last.ends_with("2/2 cases run: 2 passed, 0 failed"), "{last}");
}

#[test]
fn quiet_prints_no_progress_and_the_summary_still_follows() {
    if !python_ok() {
        eprintln!("skipped: no python3 on PATH");
        return;
    }
    let p = project();
    p.write("release", "");
    let quiet = p.stateval(&["run", "pipeline/p.toml", "--quiet"]);
    quiet.expect_code(0);
    assert!(!quiet.stderr.contains("PASS") && !quiet.stderr.contains("Summary"), "{}", quiet.stderr);
    assert!(quiet.stdout.contains("PASSED"), "{}", quiet.stdout);
    let loud = p.stateval(&["run", "pipeline/p.toml"]);
    loud.expect_code(0);
    assert_eq!(loud.stderr.lines().filter(|l| l.trim_start().starts_with("PASS [")).count(), 2, "{}", loud.stderr);
    // wall time stays on stderr: the summary on stdout is the same bytes both times
    assert_eq!(quiet.stdout, loud.stdout);
}

#[test]
fn a_failing_case_line_says_why() {
    let p = Project::new();
    let out = p.stateval(&["run", "pipeline/failing.toml"]);
    out.expect_code(1);
    let fails: Vec<&str> = out.stderr.lines().filter(|l| l.trim_start().starts_with("FAIL [")).collect();
    assert!(!fails.is_empty(), "{}", out.stderr);
    assert!(fails.iter().all(|l| l.contains("s virtual): run ")), "{fails:?}");
}
