//! The framework conformance suite: agents written on real agent frameworks, changed in
//! nothing but where their SDK's base URL points, recorded and replayed by stateval.
//!
//! One small agent per framework (`examples/agents/`), run in every API the framework
//! speaks — OpenAI Chat Completions, Responses, Anthropic Messages — whole and
//! streamed, and with tools over MCP where the framework has an MCP client. Each
//! variant goes through the same four steps: `stateval record` against the in-repo
//! fake vendor (`tests/frameworks/fake_vendor.rs`), `stateval run` green, a second run
//! byte-identical to the first, and a run with a changed system prompt that must fail
//! naming `/system`. And `pipeline/frameworks.toml`, the five agents on recorded cases
//! as a user runs them, passes against its committed goldens.
//!
//! The Python frameworks run on the Python named by `STATEVAL_FRAMEWORKS_PYTHON` (`.ci/run`
//! makes a virtual environment from `tests/frameworks/requirements.txt`); the Node ones on
//! the `node` on `PATH`, with `examples/agents/node_modules` installed by `npm ci`.
//! Without them a test prints why it is skipped, unless `STATEVAL_REQUIRE_SDK` is set,
//! when it fails; a test that ran to its end leaves its mark for `.ci/run`.

mod common;
#[path = "frameworks/fake_vendor.rs"]
mod fake_vendor;

use std::path::{Path, PathBuf};

use common::Project;
use fake_vendor::FakeVendor;
use serde_json::{Value, json};

const TOOLS: &str = r#"{"tools": [
  {"name": "get_order", "description": "Look an order up by its number.", "safety_class": "read",
   "input_schema": {"type": "object", "properties": {"order": {"type": "string", "description": "The order number."}},
                    "required": ["order"]},
   "responses": [{"args": {"order": "1042"}, "result": {"status": "shipped", "eta": "Thursday"}}]}]}"#;

/// The system prompt the agents are recorded with, and the one that must diverge.
const INSTRUCTIONS: &str = "You are an order-tracking assistant. Look orders up before answering.";
const CHANGED: &str = "You are an order-tracking assistant. Be brief.";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Why the suite cannot run here, or a panic when it must (`STATEVAL_REQUIRE_SDK`).
fn unavailable(why: String) -> Option<PathBuf> {
    if std::env::var_os("STATEVAL_REQUIRE_SDK").is_some() {
        panic!("STATEVAL_REQUIRE_SDK is set but {why}: the framework suite must run");
    }
    eprintln!("skipped: {why} (.ci/run installs the frameworks)");
    None
}

/// The Python with the agent frameworks installed.
fn frameworks_python() -> Option<PathBuf> {
    match std::env::var_os("STATEVAL_FRAMEWORKS_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None => unavailable("STATEVAL_FRAMEWORKS_PYTHON is not set".into()),
    }
}

/// `node`, when it runs and the example agents' packages are installed.
fn node() -> Option<PathBuf> {
    let runs = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !runs {
        return unavailable("there is no node on PATH".into());
    }
    if !repo().join("examples/agents/node_modules/ai/package.json").is_file() {
        return unavailable("examples/agents/node_modules is not installed (npm ci there)".into());
    }
    Some(PathBuf::from("node"))
}

/// One way to run an agent: its variant name and its environment knobs.
struct Variant {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
}

const fn variant(name: &'static str, env: &'static [(&'static str, &'static str)]) -> Variant {
    Variant { name, env }
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// A project whose one case runs `program agent` with `env` and `instructions`.
fn project(program: &Path, agent: &str, env: &[(&str, &str)], instructions: &str) -> Project {
    let p = Project::empty();
    p.write("fixtures/tools/orders.json", TOOLS);
    p.write("pipeline/fw.toml", pipeline(program, agent, env, instructions));
    let case = json!({"id": "order", "agent": "agent", "turns": ["Where is order 1042?", "Thanks! When does it arrive?"],
                      "recordings": ["fixtures/recordings/order.jsonl"],
                      "expect": [{"target": "final_response", "matcher": {"contains": "Thursday"}}]});
    p.write("datasets/fw.jsonl", format!("{case}\n"));
    p
}

/// The profile allows more than the default time to exit after `end`: a framework's
/// interpreter shutdown (hundreds of modules, an event loop, connection pools) takes
/// well under a second alone, but several seconds on a CI machine that is busy compiling.
fn pipeline(program: &Path, agent: &str, env: &[(&str, &str)], instructions: &str) -> String {
    let script = repo().join("examples/agents").join(agent);
    let mut vars: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {}", toml_string(v))).collect();
    vars.push(format!("AGENT_INSTRUCTIONS = {}", toml_string(instructions)));
    format!(
        "[pipeline]\nname = \"fw\"\ndatasets = [\"datasets/fw.jsonl\"]\n\n\
         [agents.agent]\nkind = \"external\"\ncommand = [{}, {}]\ntools = \"fixtures/tools/orders.json\"\n\
         timeout_ms = 120000\nexit_grace_ms = 30000\nenv = {{ {} }}\n\n\
         [replay]\non_divergence = \"fail\"\n\n[gates]\ndefault = {{ min_pass_rate = 1.0 }}\n",
        toml_string(&program.to_string_lossy()),
        toml_string(&script.to_string_lossy()),
        vars.join(", ")
    )
}

/// What went wrong in a variant, with the agent's stderr.
fn explain(p: &Project, what: &str, out: &common::Outcome) -> String {
    let stderr: Vec<String> = p
        .files_under(".stateval")
        .into_iter()
        .filter(|f| f.ends_with(".stderr"))
        .map(|f| format!("--- {f}\n{}", p.read(&f)))
        .collect();
    format!("{what}: exit {}\n--- stdout\n{}\n--- stderr\n{}\n{}", out.code, out.stdout, out.stderr, stderr.join("\n"))
}

fn events(p: &Project) -> Vec<Value> {
    let logs: Vec<String> = p.log_files().into_iter().filter(|f| f.ends_with("/order/0.jsonl")).collect();
    assert_eq!(logs.len(), 1, "one log: {logs:?}");
    common::events_of(&p.read_bytes(&logs[0]))
}

/// Record, replay twice byte-identically, then diverge on a changed system prompt.
/// Returns what failed, if anything.
fn conform(vendor: &FakeVendor, program: &Path, agent: &str, variant: &Variant) -> Result<(), String> {
    let what = format!("{agent} [{}]", variant.name);
    let p = project(program, agent, variant.env, INSTRUCTIONS);
    let output = p
        .cmd()
        .env("OPENAI_API_KEY", "sk-test-frameworks-0123456789")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-frameworks-0123456789")
        .args(["record", "pipeline/fw.toml", "--case", "order", "--upstream-url", &vendor.url])
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    let out = common::Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    if out.code != 0 {
        return Err(explain(&p, &format!("{what}: record"), &out));
    }
    let out = p.stateval(&["run", "pipeline/fw.toml"]);
    if out.code != 0 {
        return Err(explain(&p, &format!("{what}: first run"), &out));
    }
    let log = p.log_files().into_iter().find(|f| f.ends_with("/order/0.jsonl")).ok_or("no log")?;
    let first = p.read_bytes(&log);
    let out = p.stateval(&["run", "pipeline/fw.toml"]);
    if out.code != 0 {
        return Err(explain(&p, &format!("{what}: second run"), &out));
    }
    if p.read_bytes(&log) != first {
        return Err(format!("{what}: the second run wrote a different log"));
    }
    std::fs::remove_dir_all(p.join(".stateval")).map_err(|e| e.to_string())?;
    p.write("pipeline/fw.toml", pipeline(program, agent, variant.env, CHANGED));
    let out = p.stateval(&["run", "pipeline/fw.toml"]);
    let diverged: Vec<Value> =
        events(&p).into_iter().filter(|e| e["kind"] == "replay_diverged").map(|e| e["data"].clone()).collect();
    let named = diverged.first().and_then(|d| d["pointers"].as_array()).is_some_and(|p| p.contains(&json!("/system")));
    if out.code != 1 || !named {
        return Err(format!(
            "{}\nreplay_diverged: {diverged:?}",
            explain(&p, &format!("{what}: changed prompt"), &out)
        ));
    }
    Ok(())
}

/// Run every variant of `agent`; fail naming each variant that did not conform.
fn suite(program: &Path, agent: &str, variants: &[Variant]) {
    let vendor = FakeVendor::start();
    let failures: Vec<String> = variants.iter().filter_map(|v| conform(&vendor, program, agent, v).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} variants failed:\n\n{}",
        failures.len(),
        variants.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_openai_agents_sdk_records_and_replays_in_every_api_it_speaks() {
    let Some(python) = frameworks_python() else { return };
    suite(
        &python,
        "openai_agents_sdk_agent.py",
        &[
            variant("responses", &[("AGENT_API", "responses")]),
            variant("responses, streamed", &[("AGENT_API", "responses"), ("AGENT_STREAM", "1")]),
            variant("chat", &[("AGENT_API", "chat")]),
            variant("chat, streamed", &[("AGENT_API", "chat"), ("AGENT_STREAM", "1")]),
            variant("responses, MCP", &[("AGENT_API", "responses"), ("AGENT_TOOLS", "mcp")]),
        ],
    );
    common::mark_ran("frameworks-openai-agents");
}

#[test]
fn langgraph_records_and_replays_on_langchain_openai_and_langchain_anthropic() {
    let Some(python) = frameworks_python() else { return };
    suite(
        &python,
        "langgraph_agent.py",
        &[
            variant("chat", &[("AGENT_API", "chat")]),
            variant("chat, streamed", &[("AGENT_API", "chat"), ("AGENT_STREAM", "1")]),
            variant("responses", &[("AGENT_API", "responses")]),
            variant("messages", &[("AGENT_API", "messages")]),
            variant("messages, streamed", &[("AGENT_API", "messages"), ("AGENT_STREAM", "1")]),
        ],
    );
    common::mark_ran("frameworks-langgraph");
}

#[test]
fn pydantic_ai_records_and_replays_in_every_api_it_speaks() {
    let Some(python) = frameworks_python() else { return };
    suite(
        &python,
        "pydantic_ai_agent.py",
        &[
            variant("chat", &[("AGENT_API", "chat")]),
            variant("responses", &[("AGENT_API", "responses")]),
            variant("responses, streamed", &[("AGENT_API", "responses"), ("AGENT_STREAM", "1")]),
            variant("messages", &[("AGENT_API", "messages")]),
            variant("messages, streamed", &[("AGENT_API", "messages"), ("AGENT_STREAM", "1")]),
            variant("chat, MCP", &[("AGENT_API", "chat"), ("AGENT_TOOLS", "mcp")]),
        ],
    );
    common::mark_ran("frameworks-pydantic-ai");
}

#[test]
fn the_openai_npm_sdk_records_and_replays_chat_and_responses() {
    let Some(node) = node() else { return };
    suite(
        &node,
        "openai_node_agent.mjs",
        &[
            variant("chat", &[("AGENT_API", "chat")]),
            variant("chat, streamed", &[("AGENT_API", "chat"), ("AGENT_STREAM", "1")]),
            variant("responses", &[("AGENT_API", "responses")]),
            variant("responses, streamed", &[("AGENT_API", "responses"), ("AGENT_STREAM", "1")]),
        ],
    );
    common::mark_ran("frameworks-openai-node");
}

#[test]
fn the_vercel_ai_sdk_records_and_replays_with_its_default_providers() {
    let Some(node) = node() else { return };
    suite(
        &node,
        "ai_sdk_agent.mjs",
        &[
            // the default OpenAI provider speaks Responses with `store: true`: item_reference
            variant("openai (responses)", &[("AGENT_API", "responses")]),
            variant("openai (responses), streamed", &[("AGENT_API", "responses"), ("AGENT_STREAM", "1")]),
            variant("openai.chat", &[("AGENT_API", "chat")]),
            variant("anthropic", &[("AGENT_API", "messages")]),
            variant("anthropic, streamed", &[("AGENT_API", "messages"), ("AGENT_STREAM", "1")]),
        ],
    );
    common::mark_ran("frameworks-ai-sdk");
}

/// `pipeline/frameworks.toml`, as a user runs it: the five framework agents on their
/// recorded cases, the frameworks' Python first on PATH, compared with the committed
/// goldens as CI does (a missing golden fails). A changed system prompt in one profile
/// must fail that case at its first model request: the goldens hold what the frameworks
/// send, not only what they answer.
#[test]
fn the_frameworks_pipeline_passes_its_recorded_cases_against_its_goldens() {
    let Some(python) = frameworks_python() else { return };
    let Some(_node) = node() else { return };
    let p = Project::full();
    let agents = repo().join("examples/agents");
    for entry in std::fs::read_dir(&agents).expect("examples/agents") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("a name").to_string_lossy().into_owned();
        if path.is_file() {
            p.write(format!("examples/agents/{name}"), std::fs::read(&path).expect("read"));
        }
    }
    // the Node agents resolve their packages beside the script
    std::os::unix::fs::symlink(agents.join("node_modules"), p.join("examples/agents/node_modules"))
        .expect("link node_modules");
    common::copy_dir(&repo().join("goldens/frameworks"), &p.join("goldens/frameworks"));
    let bin = python.parent().expect("the frameworks python is in a bin directory").to_string_lossy().into_owned();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let run = |args: &[&str]| {
        let output = p.cmd().env("PATH", &path).env("CI", "true").args(args).output().expect("run stateval");
        common::Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    };

    let out = run(&["run", "pipeline/frameworks.toml"]);
    if out.code != 0 {
        panic!("{}", explain(&p, "pipeline/frameworks.toml", &out));
    }
    assert!(out.stdout.contains("PASSED frameworks: 5/5 cases passed"), "{}", out.stdout);
    let report = p.json("reports/frameworks/report.json");
    let cases = report["cases"].as_array().expect("cases");
    let agents_run: Vec<&str> = cases.iter().filter_map(|c| c["agent"].as_str()).collect();
    assert_eq!(cases.len(), 5, "{agents_run:?}");
    for case in cases {
        let golden = case["runs"][0]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "golden");
        let reason = golden.and_then(|g| g["reason"].as_str()).unwrap_or_default();
        assert!(reason.starts_with("identical"), "{}: {reason}", case["id"]);
    }

    let toml = p.read("pipeline/frameworks.toml");
    let changed = toml.replacen(
        "env = { AGENT_API = \"messages\", AGENT_STREAM = \"1\" }",
        &format!(
            "env = {{ AGENT_API = \"messages\", AGENT_STREAM = \"1\", AGENT_INSTRUCTIONS = {} }}",
            toml_string(CHANGED)
        ),
        1,
    );
    assert_ne!(changed, toml, "the langgraph profile moved: update this test");
    p.write("pipeline/frameworks.toml", changed);
    let out = run(&["run", "pipeline/frameworks.toml", "--filter", "langgraph-order"]);
    assert_eq!(out.code, 1, "{}", explain(&p, "a changed system prompt", &out));
    // the golden catches what LangGraph sent: its first model request differs
    let report = p.json("reports/frameworks/report.json");
    let golden =
        report["cases"][0]["runs"][0]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "golden");
    let reason = golden.and_then(|g| g["reason"].as_str()).unwrap_or_default();
    assert!(reason.contains("(turn 0, model_called): payload changed at /data/request_hash"), "{reason}");
    common::mark_ran("frameworks-pipeline");
}
