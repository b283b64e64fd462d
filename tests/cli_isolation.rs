//! Case runs of external agents cannot reach each other, and a slow client cannot hold
//! the endpoints: the real binary runs real agents (Python on the standard library)
//! that attack their neighbour or trickle a request (docs/security.md, "Cases cannot
//! reach each other").

mod common;

use std::path::Path;

use common::Project;
use serde_json::{Value, json};

fn python() -> bool {
    let ok =
        std::process::Command::new("python3").arg("-c").arg("import json").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no python3 on PATH (the test agents need it)");
    }
    ok
}

/// A project whose pipeline runs `agent` (a file of tests/agents) with the `python`
/// given, as profile `ext`, on `cases`: each a case id with the content of its one
/// recorded response.
fn project(agent: &str, python: &str, cases: &[(&str, &str)]) -> Project {
    let cases: Vec<(&str, &str, &str)> = cases.iter().map(|(id, content)| (*id, "ext", *content)).collect();
    project_with(agent, python, &[("ext", "")], &cases)
}

/// The cross-case agents swap their endpoints through a directory they share; isolated,
/// they cannot (`an_isolated_agent_cannot_leave_its_neighbour_a_note`), so the tests of
/// the server's own checks — which hold for an agent that learns another's token some
/// other way — run them as plain processes.
const UNISOLATED: &str = "[isolation]\nmode = \"off\"\n";

/// [`project`] with several profiles of the agent, each with its own `env` (TOML), and
/// cases that name theirs: (id, profile, content).
fn project_with(agent: &str, python: &str, profiles: &[(&str, &str)], cases: &[(&str, &str, &str)]) -> Project {
    let p = Project::empty();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    p.write(format!("agents/{agent}"), std::fs::read(repo.join("tests/agents").join(agent)).unwrap());
    p.write("fixtures/tools/none.json", r#"{"tools": []}"#);
    let profiles: String = profiles
        .iter()
        .map(|(name, env)| {
            format!(
                "[agents.{name}]\nkind = \"external\"\ncommand = [{python:?}, \"agents/{agent}\"]\n\
                 tools = \"fixtures/tools/none.json\"\ntimeout_ms = 20000\nenv = {{ {env} }}\n\n"
            )
        })
        .collect();
    p.write(
        "pipeline/iso.toml",
        format!(
            "[pipeline]\nname = \"iso\"\ndatasets = [\"datasets/iso.jsonl\"]\n\n{profiles}\
             [gates]\ndefault = {{ min_pass_rate = 1.0 }}\n\n[report]\njson = \"reports/report.json\"\n\n\
             {UNISOLATED}"
        ),
    );
    let lines: Vec<String> = cases
        .iter()
        .map(|(id, profile, content)| {
            json!({"id": id, "agent": profile, "turns": ["go"],
                   "recordings": [{"responses": [{"response": {"content": content}}]}]})
            .to_string()
        })
        .collect();
    p.write("datasets/iso.jsonl", lines.join("\n") + "\n");
    p
}

/// The events of run 0 of `case`.
fn events(p: &Project, case: &str) -> Vec<Value> {
    let log = p.log_files().into_iter().find(|f| f.contains(&format!("/{case}/0.jsonl"))).expect("a log");
    p.read(&log).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// What the case's agent answered (cross_agent.py's JSON).
fn answer(events: &[Value]) -> Value {
    let done = of_kind(events, "turn_completed");
    serde_json::from_str(done[0]["data"]["response"].as_str().unwrap()).unwrap()
}

/// `TOKEN` of `http://127.0.0.1:PORT/r/TOKEN/v1`.
fn token_of(base: &str) -> &str {
    base.split("/r/").nth(1).and_then(|rest| rest.split('/').next()).unwrap()
}

/// The token the server used to derive from public names, before it was random.
fn old_token(run_id: &str, case: &str, k: usize) -> String {
    let digest =
        stateval::canon::digest(stateval::canon::Context::Content, format!("token\0{run_id}\0{case}\0{k}").as_bytes());
    digest.to_hex()[..24].to_string()
}

#[test]
fn two_concurrent_cases_that_try_each_others_endpoints_are_refused_and_flagged_in_their_own_logs() {
    if !python() {
        return;
    }
    let p = project("cross_agent.py", "python3", &[("alpha", "alpha's answer"), ("beta", "beta's answer")]);
    p.stateval(&["run", "pipeline/iso.toml", "--jobs", "2"]).expect_code(0);
    let run_id = p.run_ids().pop().expect("a run");
    let mut tokens = Vec::new();
    for (case, content) in [("alpha", "alpha's answer"), ("beta", "beta's answer")] {
        let events = events(&p, case);
        let answer = answer(&events);
        // refused, and its own recorded response was still there for it
        assert_eq!((answer["tried"].clone(), answer["own"].as_str()), (json!(403), Some(content)), "{case}");
        let flags = of_kind(&events, "security_flagged");
        assert_eq!(flags.len(), 1, "{case}: one flag, for its own attempt only: {flags:?}");
        let flag = &flags[0]["data"];
        assert_eq!((flag["class"].as_str(), flag["severity"].as_str()), (Some("cross_case"), Some("high")));
        assert!(flag["detail"].as_str().unwrap().contains("another case run in progress"), "{flag}");
        assert_eq!(flag["request"], "POST /r/…/v1/chat/completions", "the other token is not logged");
        assert_eq!(of_kind(&events, "model_called").len(), 1, "{case}: exactly its own call was answered");
        // the token is random, not the digest of names a report shows
        let base = answer["base"].as_str().unwrap();
        let token = token_of(base);
        assert_eq!(token.len(), 32, "{base}");
        assert_ne!(token, old_token(&run_id, case, 0));
        tokens.push(token.to_string());
    }
    // the same inputs again: the same run id, case and run index, new tokens
    std::fs::remove_dir_all(p.join("peers")).unwrap();
    p.stateval(&["run", "pipeline/iso.toml", "--jobs", "2"]).expect_code(0);
    assert_eq!(p.run_ids().pop().as_ref(), Some(&run_id));
    for (case, before) in ["alpha", "beta"].into_iter().zip(tokens) {
        let base = answer(&events(&p, case))["base"].as_str().unwrap().to_string();
        assert!(!base.contains(&before), "{case} got the token of its previous run: {base}");
    }
}

#[test]
fn an_agent_that_trickles_a_request_body_fails_its_case_naming_the_timeout() {
    if !python() {
        return;
    }
    let p = project("trickle_agent.py", "python3", &[("slow", "never served")]);
    let started = std::time::Instant::now();
    p.stateval(&["run", "pipeline/iso.toml"]).expect_code(1);
    let events = events(&p, "slow");
    let error = of_kind(&events, "error");
    let data = &error.last().expect("an error event")["data"];
    assert_eq!(data["kind"], "agent_slow_request", "{data}");
    let limit = stateval::external::server::BODY_READ_MS;
    let message = data["message"].as_str().unwrap();
    assert!(message.contains(&format!("did not arrive within {limit} ms")), "{message}");
    assert!(message.contains("POST /r/…/v1/chat/completions"), "{message}");
    assert!(of_kind(&events, "model_called").is_empty());
    // the agent would trickle for 30 s; it was cut off at the limit
    assert!(started.elapsed().as_millis() < u128::from(limit) + 10_000, "{:?}", started.elapsed());
}

/// The vendors' SDKs send the case run's key on their own, so an agent that points
/// them at another case run's URL is refused and flagged, whichever API it speaks.
#[test]
fn an_agent_that_points_the_vendors_sdks_at_another_case_run_is_refused_and_flagged() {
    let Some(python) = common::sdk_python() else { return };
    let python = python.to_string_lossy().into_owned();
    let p = project_with(
        "cross_agent.py",
        &python,
        &[("via_openai", r#"CROSS_SDK = "openai""#), ("via_anthropic", r#"CROSS_SDK = "anthropic""#)],
        &[("alpha", "via_openai", "alpha's answer"), ("beta", "via_anthropic", "beta's answer")],
    );
    p.stateval(&["run", "pipeline/iso.toml", "--jobs", "2"]).expect_code(0);
    for (case, content) in [("alpha", "alpha's answer"), ("beta", "beta's answer")] {
        let events = events(&p, case);
        let answer = answer(&events);
        assert_eq!((answer["tried"].clone(), answer["own"].as_str()), (json!(403), Some(content)), "{case}");
        let flags = of_kind(&events, "security_flagged");
        assert_eq!(flags.len(), 1, "{case}: {flags:?}");
        assert_eq!(flags[0]["data"]["class"], "cross_case");
    }
    common::mark_ran("cross-case-sdks");
}

/// Isolated, two concurrent agents have no file to leave each other a note in: the
/// project is read-only and each has a scratch directory of its own, so the agent that
/// swaps endpoints through `peers/` fails at its first write, in each case.
#[test]
fn an_isolated_agent_cannot_leave_its_neighbour_a_note() {
    if !python() {
        return;
    }
    if let Some(why) = stateval::isolation::unavailable() {
        assert!(std::env::var_os("STATEVAL_REQUIRE_SANDBOX").is_none(), "no sandbox: {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let p = project("cross_agent.py", "python3", &[("alpha", "alpha's answer"), ("beta", "beta's answer")]);
    let pipeline = p.read("pipeline/iso.toml").replace(UNISOLATED, "");
    p.write("pipeline/iso.toml", pipeline);
    p.stateval(&["run", "pipeline/iso.toml", "--jobs", "2"]).expect_code(1);
    for case in ["alpha", "beta"] {
        let log = p.log_files().into_iter().find(|f| f.contains(&format!("/{case}/0.jsonl"))).expect("a log");
        let stderr = p.read(log.replace(".jsonl", ".stderr"));
        assert!(stderr.contains("Read-only file system"), "{case}: {stderr}");
        assert!(of_kind(&events(&p, case), "model_called").is_empty(), "{case} reached nobody");
    }
    assert!(!p.exists("peers"), "nothing was written into the project");
}
