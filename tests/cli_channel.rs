//! The agent's protocol channel end to end: the real binary spawns sh agents that answer
//! on `STATEVAL_PROTOCOL_FD`, on stdout, or badly, while printing what libraries print.
//!
//! Each agent reads stateval's lines on stdin (`read l`): `start`, then one `turn` per
//! user turn, then `end`.

mod common;

use common::Project;
use serde_json::{Value, json};

/// A GitHub token shape the scrubber knows, for output that must not be kept as is.
const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/// A project whose pipeline has one sh agent per `(name, script)` and one case per
/// `(id, agent, turns)`.
fn project(agents: &[(&str, &str)], cases: &[(&str, &str, &[&str])]) -> Project {
    let p = Project::empty();
    let mut toml = "[pipeline]\nname = \"channel\"\ndatasets = [\"datasets/channel.jsonl\"]\n\n".to_string();
    for (name, script) in agents {
        toml.push_str(&format!(
            "[agents.{name}]\nkind = \"external\"\ncommand = [\"sh\", \"-c\", {}]\ntimeout_ms = 20000\n\n",
            Value::String(script.to_string())
        ));
    }
    toml.push_str("[gates]\ndefault = { min_pass_rate = 1.0 }\n\n[report]\njson = \"reports/report.json\"\n");
    p.write("pipeline/channel.toml", toml);
    let lines: Vec<String> = cases
        .iter()
        .map(|(id, agent, turns)| {
            let responses: Vec<Value> = Vec::new();
            json!({"id": id, "agent": agent, "turns": turns, "recordings": [{"responses": responses}]}).to_string()
        })
        .collect();
    p.write("datasets/channel.jsonl", lines.join("\n") + "\n");
    p
}

/// Run 0 of `case`: its events, and its kept output (`<k>.stderr` beside the log).
fn run_of(p: &Project, case: &str) -> (Vec<Value>, String) {
    let log = p
        .log_files()
        .into_iter()
        .find(|f| f.contains(&format!("/{case}/0.jsonl")))
        .unwrap_or_else(|| panic!("no log for {case}"));
    let events = p.read(&log).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (events, p.read(log.replace(".jsonl", ".stderr")))
}

fn responses(events: &[Value]) -> Vec<&str> {
    events.iter().filter(|e| e["kind"] == "turn_completed").map(|e| e["data"]["response"].as_str().unwrap()).collect()
}

fn report_run<'a>(report: &'a Value, id: &str) -> &'a Value {
    let case = report["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
    &case["runs"][0]
}

#[test]
fn an_agent_speaking_on_the_fd_passes_whatever_it_prints_on_stdout_and_its_output_is_kept_scrubbed() {
    // a banner, a JSON log line, a line that is not UTF-8 and a secret on stdout, a
    // secret on stderr; the answers on fd 3 (the second turn's stdout line looks like
    // an answer, but once the fd has spoken stdout is only output)
    let script = format!(
        "test \"$STATEVAL_PROTOCOL_FD\" = 3 || exit 9; read l; read l; \
         echo 'Warning: some SDK banner'; echo '{{\"type\":\"log\",\"msg\":\"starting\"}}'; \
         printf 'bytes \\377 here\\n'; echo 'token {TOKEN}'; echo 'stderr {TOKEN}' >&2; \
         echo '{{\"type\":\"turn_result\",\"turn\":0,\"output\":\"one\"}}' >&3; \
         read l; echo '{{\"type\":\"turn_result\",\"turn\":1,\"output\":\"from stdout\"}}'; \
         echo '{{\"type\":\"turn_result\",\"turn\":1,\"output\":\"two\"}}' >&3; read l; exit 0"
    );
    let p = project(&[("fd", &script)], &[("noisy", "fd", &["hi", "again"])]);
    p.stateval(&["run", "pipeline/channel.toml"]).expect_code(0);
    let (events, kept) = run_of(&p, "noisy");
    assert_eq!(responses(&events), ["one", "two"]);
    for line in [
        "[stdout] Warning: some SDK banner",
        "[stdout] {\"type\":\"log\",\"msg\":\"starting\"}",
        "[stdout] bytes \u{fffd} here",
        "[stdout] token ghp_[scrubbed]",
        "stderr ghp_[scrubbed]",
        "[stdout] {\"type\":\"turn_result\",\"turn\":1,\"output\":\"from stdout\"}",
    ] {
        assert!(kept.lines().any(|l| l == line), "{line:?} not kept in:\n{kept}");
    }
    assert!(!kept.contains(TOKEN), "a secret was kept as is:\n{kept}");
    // the log never holds the agent's output
    assert!(!events.iter().any(|e| e.to_string().contains("SDK banner")));
}

/// An agent that prints its own credentials (the route token in its base URL, its API
/// key) on stdout and stderr: none of it is kept as is. They die with the run, but what
/// an agent prints reaches the failure's explanation and every report, which CI
/// publishes.
#[test]
fn an_agent_printing_its_own_credentials_has_them_kept_scrubbed() {
    let script = "read l; read l; echo \"base $OPENAI_BASE_URL key $OPENAI_API_KEY\"; \
                  echo \"mcp $STATEVAL_MCP_URL anthropic $ANTHROPIC_API_KEY\" >&2; \
                  printf '{\"type\":\"turn_result\",\"turn\":0,\"output\":\"%s\\\\n%s\"}\\n' \"$OPENAI_BASE_URL\" \"$OPENAI_API_KEY\" >&3; \
                  read l; exit 0";
    let p = project(&[("leaky", script)], &[("leak", "leaky", &["hi"])]);
    p.stateval(&["run", "pipeline/channel.toml"]).expect_code(0);
    let (events, kept) = run_of(&p, "leak");
    // the credentials, as the agent answered them (the log keeps what it answered)
    let creds = responses(&events)[0].to_string();
    let (base, key) = creds.split_once('\n').expect("the agent wrote both");
    let token = base.split("/r/").nth(1).and_then(|rest| rest.split('/').next()).expect("a route token");
    assert!(token.len() >= 16 && key.trim().len() >= 16, "{creds}");
    for secret in [token, key.trim()] {
        assert!(!kept.contains(secret), "{secret} kept as is:\n{kept}");
    }
    assert!(kept.contains("[stdout] base http://") && kept.contains("/r/[scrubbed]/v1 key [scrubbed]"), "{kept}");
    assert!(kept.contains("mcp http://") && kept.contains("/r/[scrubbed]/mcp"), "{kept}");
}

#[test]
fn a_stdout_only_agent_still_passes_and_its_other_stdout_lines_are_output() {
    let script = "read l; read l; echo 'Loading…'; echo '{\"level\":\"info\"}'; \
                  echo '{\"type\":\"turn_result\",\"turn\":0,\"output\":\"plain\"}'; read l; exit 0";
    let p = project(&[("plain", script)], &[("simple", "plain", &["hi"])]);
    p.stateval(&["run", "pipeline/channel.toml"]).expect_code(0);
    let (events, kept) = run_of(&p, "simple");
    assert_eq!(responses(&events), ["plain"]);
    assert!(kept.contains("[stdout] Loading…\n[stdout] {\"level\":\"info\"}\n"), "{kept}");
}

#[test]
fn a_malformed_line_on_the_fd_fails_the_case_with_the_line_named() {
    let agents = [
        ("garbled", "read l; read l; echo 'this is not JSON' >&3; sleep 5"),
        ("typo", "read l; read l; echo '{\"type\":\"turn_reslt\",\"turn\":0}' >&3; sleep 5"),
        (
            "late",
            "read l; read l; echo '{\"type\":\"turn_result\",\"turn\":0,\"output\":\"x\"}' >&3; read l; echo '{}' >&3; sleep 5",
        ),
        // a stdout line meant as an answer is read strictly too
        ("badstdout", "read l; read l; echo '{\"type\":\"turn_result\",\"turn\":\"0\",\"output\":\"x\"}'; sleep 5"),
    ];
    let p = project(
        &agents,
        &[
            ("garbled", "garbled", &["hi"]),
            ("typo", "typo", &["hi"]),
            ("late", "late", &["hi"]),
            ("badstdout", "badstdout", &["hi"]),
        ],
    );
    p.stateval(&["run", "pipeline/channel.toml"]).expect_code(1);
    let report = p.json("reports/report.json");
    for (id, words) in [
        ("garbled", "line on the protocol fd is not JSON (expected ident at line 1 column 2): this is not JSON"),
        ("typo", "line on the protocol fd has unknown message type \"turn_reslt\""),
        ("late", "line on the protocol fd after \"end\": {}"),
        ("badstdout", "turn_result needs an integer \"turn\""),
    ] {
        let run = report_run(&report, id);
        assert!(run["error"].as_str().unwrap_or("").contains(words), "{id}: {run}");
        let (events, _) = run_of(&p, id);
        let error = events.iter().rfind(|e| e["kind"] == "error").unwrap();
        assert_eq!(error["data"]["kind"], "agent_protocol", "{id}");
    }
}
