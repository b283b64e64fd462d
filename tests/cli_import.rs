//! `stateval import`, `reconstruct` and `show` end to end, on the real traces of
//! `fixtures/traces/` (one per format): import → verify → reconstruct into a copy of the
//! project → `stateval run` the reconstructed case on a pipeline of the test's own →
//! the original tool sequence comes back. Then every class of bad input gets its error
//! (with its place) or its warning event, and `show` folds state at a turn.

mod common;

use common::{Project, events_of, parse_located_error};
use serde_json::{Value, json};

/// Every fixture trace: file, the format `auto` must find, its tool sequence.
const TRACES: [(&str, &str, &[&str]); 7] = [
    ("openai_chat.json", "openai", &["get_ticket", "search_docs", "send_email", "update_ticket"]),
    (
        "openai_responses.json",
        "openai-responses",
        &["search_trains", "hold_seat", "search_trains", "hold_seat", "confirm_booking"],
    ),
    ("anthropic.json", "anthropic", &["service_status", "query_logs", "restart_service", "service_status"]),
    ("otel_attributes.json", "otel", &["get_invoice", "pay_invoice", "schedule_payment"]),
    ("otel_events.jsonl", "otel", &["lookup_order", "cancel_order", "create_return"]),
    ("mcp.jsonl", "mcp", &["read_config", "set_config", "deploy", "rollback"]),
    ("envelope.json", "envelope", &["search", "fetch_doc", "open_ticket"]),
];

/// Events of one kind.
fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn tool_sequence(events: &[Value]) -> Vec<String> {
    of_kind(events, "tool_executed").iter().map(|e| e["data"]["tool"].as_str().unwrap().to_string()).collect()
}

fn warning_codes(events: &[Value]) -> Vec<String> {
    of_kind(events, "error")
        .iter()
        .filter(|e| e["data"]["kind"] == "import_warning")
        .map(|e| e["data"]["code"].as_str().unwrap().to_string())
        .collect()
}

/// Import `rel` (auto-detected) into `out`, which must verify; its events.
fn import(project: &Project, rel: &str, out: &str) -> Vec<Value> {
    project.stateval(&["import", rel, "-o", out]).expect_code(0);
    project.stateval(&["verify", out]).expect_code(0);
    events_of(&project.read_bytes(out))
}

/// Write `text` as a trace and import it with `--from format`.
fn import_text(project: &Project, name: &str, format: &str, text: &str) -> common::Outcome {
    project.write(name, text);
    project.stateval(&["import", "--from", format, name, "-o", "out.jsonl"])
}

#[track_caller]
fn expect_error_at(outcome: &common::Outcome, file: &str, line: usize, needle: &str) -> (usize, String) {
    outcome.expect_code(2);
    let first = outcome.stderr.lines().next().unwrap_or_default();
    let (path, l, c, message) = parse_located_error(first);
    assert_eq!(path, file, "{first}");
    assert_eq!(l, line, "{first}");
    assert!(message.contains(needle), "expected {needle:?} in {first}");
    (c, message)
}

#[test]
fn every_fixture_trace_imports_verifies_reconstructs_and_replays_its_tool_sequence() {
    let project = Project::new();
    for (file, format, sequence) in TRACES {
        let id = file.split('.').next().unwrap().replace('_', "-");
        let log = format!("imported/{id}.jsonl");
        let events = import(&project, &format!("fixtures/traces/{file}"), &log);
        assert_eq!(events[0]["data"]["imported"]["format"], format, "{file}: auto-detected format");
        assert_eq!(tool_sequence(&events), sequence, "{file}: one tool_executed per call, in emitted order");
        let errors: Vec<&Value> = of_kind(&events, "tool_executed")
            .into_iter()
            .filter(|e| e["data"]["is_error"] == true || e["data"]["result"].to_string().contains("error"))
            .collect();
        assert!(!errors.is_empty(), "{file}: the incident has a failed tool call");

        let out = project.stateval(&["reconstruct", &log, "--as", &id]);
        out.expect_code(0);
        assert!(out.stdout.contains("reproduces the trace's"), "{file}:\n{}", out.stdout);
        // the golden is where `stateval run` looks, and the incident's own pipeline passes it
        let golden = format!("goldens/incidents/{id}/{id}.0.jsonl");
        project.stateval(&["verify", &golden]).expect_code(0);
        let own = project.stateval(&["run", &format!("pipeline/incidents/{id}.toml"), "--jobs", "1"]);
        own.expect_code(0);
        assert!(!project.read(&golden).is_empty(), "{file}: golden");

        // the reconstructed case, run by `stateval run` on a pipeline of this test's own
        let pipeline = format!("pipeline/replay-{id}.toml");
        project.write(
            &pipeline,
            format!(
                "[pipeline]\nname = \"replay-{id}\"\ndatasets = [\"datasets/incidents/{id}.jsonl\"]\nstore = \".stateval-{id}\"\n\
                 goldens = \"goldens-of-this-test\"\n\
                 [agents.incident]\nsystem = \"replay\"\ntools = \"fixtures/tools/incidents/{id}.json\"\n\
                 [gates]\ndefault = {{ min_pass_rate = 1.0 }}\n"
            ),
        );
        project.stateval(&["run", &pipeline, "--jobs", "1"]).expect_code(0);
        let logs: Vec<String> = project
            .files_under(&format!(".stateval-{id}/runs"))
            .into_iter()
            .filter(|p| p.ends_with("/0.jsonl"))
            .collect();
        assert_eq!(logs.len(), 1, "{file}: {logs:?}");
        let replayed = events_of(&project.read_bytes(&logs[0]));
        assert_eq!(tool_sequence(&replayed), sequence, "{file}: the replay gives back the tool sequence");
    }
}

#[test]
fn a_reconstructed_incident_validates_and_runs_with_its_own_pipeline() {
    let project = Project::new();
    project.stateval(&["reconstruct", "fixtures/traces/anthropic.json", "--as", "checkout"]).expect_code(0);
    for rel in [
        "datasets/incidents/checkout.jsonl",
        "fixtures/recordings/incidents/checkout.jsonl",
        "fixtures/tools/incidents/checkout.json",
        "goldens/incidents/checkout/checkout.0.jsonl",
        "pipeline/incidents/checkout.toml",
    ] {
        assert!(project.exists(rel), "{rel} was written");
    }
    project.stateval(&["validate", "pipeline/incidents/checkout.toml"]).expect_code(0);
    project.stateval(&["verify", "goldens/incidents/checkout/checkout.0.jsonl"]).expect_code(0);
    let case = project.json("datasets/incidents/checkout.jsonl");
    assert_eq!(case["tags"], json!(["incident"]));
    assert_eq!(case["agent"], "incident");
    assert_eq!(case["recordings"], json!(["fixtures/recordings/incidents/checkout.jsonl"]));
    assert_eq!(case["turns"].as_array().unwrap().len(), 3);
    // one recording line per model call, in order, with turn/step
    let recording: Vec<Value> = project
        .read("fixtures/recordings/incidents/checkout.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let positions: Vec<(u64, u64)> =
        recording.iter().map(|l| (l["turn"].as_u64().unwrap(), l["step"].as_u64().unwrap())).collect();
    assert_eq!(positions, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
    // fixture responses keyed by the recorded args, is_error kept
    let manifest = project.json("fixtures/tools/incidents/checkout.json");
    let restart = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "restart_service").unwrap();
    assert_eq!(restart["responses"][0]["args"], json!({"service": "fraud-scorer"}));
    assert_eq!(restart["responses"][0]["is_error"], true);
    let status = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "service_status").unwrap();
    assert_eq!(status["responses"].as_array().unwrap().len(), 2, "two distinct argument sets, two responses");
    let run = project.stateval(&["run", "pipeline/incidents/checkout.toml"]);
    run.expect_code(0);
    // a second reconstruct under the same id refuses to overwrite without --force
    let again = project.stateval(&["reconstruct", "fixtures/traces/anthropic.json", "--as", "checkout"]);
    again.expect_code(2);
    assert!(again.stderr.contains("already exists") && again.stderr.contains("--force"), "{}", again.stderr);
    project.stateval(&["reconstruct", "fixtures/traces/anthropic.json", "--as", "checkout", "--force"]).expect_code(0);
}

#[test]
fn replaying_under_todays_profile_reproduces_or_names_the_first_divergent_event() {
    let project = Project::new();
    // the support profile's own manifest and policy allow every call of the incident
    let same =
        project.stateval(&["reconstruct", "fixtures/traces/openai_chat.json", "--as", "t-2041", "--agent", "support"]);
    same.expect_code(0);
    assert!(same.stdout.contains("agent \"support\" reproduces"), "{}", same.stdout);
    let manifest = project.json("fixtures/tools/incidents/t-2041.json");
    let email = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "send_email").unwrap();
    assert_eq!(email["safety_class"], "network", "the profile's own tool spec is kept");
    assert!(email["input_schema"].is_object());
    assert!(project.read("pipeline/incidents/t-2041.toml").contains("writes-allowed"), "the profile's policy is kept");

    // a profile that now denies email diverges at that call, in turn 1
    project.write(
        "pipeline/strict.toml",
        "[pipeline]\nname = \"strict\"\ndatasets = [\"datasets/examples/*.jsonl\"]\n\
         [agents.strict]\nsystem = \"Strict.\"\ntools = \"fixtures/tools/support.json\"\n\
         policy = [{ id = \"no-email\", tool = \"send_email\", verdict = \"deny\" }]\n",
    );
    let out = project.stateval(&[
        "reconstruct",
        "fixtures/traces/openai_chat.json",
        "--as",
        "t-2041-strict",
        "--agent",
        "strict",
        "--pipeline",
        "pipeline/strict.toml",
    ]);
    out.expect_code(1);
    assert!(out.stdout.contains("diverges from the trace"), "{}", out.stdout);
    assert!(out.stdout.contains("tool_executed send_email): tool call missing"), "{}", out.stdout);
    assert!(out.stdout.contains("trace:  seq 9 (turn 1, tool_executed): send_email"), "{}", out.stdout);
    assert!(out.stdout.contains("(turn 1, policy_decided): send_email denied by rule \"no-email\""), "{}", out.stdout);
    // and the case fails in CI for the same reason
    let run = project.stateval(&["run", "pipeline/incidents/t-2041-strict.toml"]);
    run.expect_code(1);

    let unknown =
        project.stateval(&["reconstruct", "fixtures/traces/openai_chat.json", "--as", "x", "--agent", "nobody"]);
    unknown.expect_code(2);
    assert!(unknown.stderr.contains("defines no such profile"), "{}", unknown.stderr);
    let bad_id = project.stateval(&["reconstruct", "fixtures/traces/openai_chat.json", "--as", "../escape"]);
    bad_id.expect_code(2);
}

#[test]
fn imports_keep_provenance_parse_string_arguments_and_mark_what_was_not_captured() {
    let project = Project::new();
    let anthropic = import(&project, "fixtures/traces/anthropic.json", "a.jsonl");
    let first = of_kind(&anthropic, "tool_executed")[0];
    assert_eq!(first["data"]["call_id"], "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(first["data"]["source"]["call_id"], "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(of_kind(&anthropic, "model_called")[0]["data"]["source"]["message_id"], "msg_01XFDUDYJgAACzvnptvVoYEL");

    let openai = import(&project, "fixtures/traces/openai_chat.json", "o.jsonl");
    let call = of_kind(&openai, "tool_executed")[0];
    assert_eq!(call["data"]["args"], json!({"id": "T-2041"}), "arguments sent as a JSON string are parsed");
    assert_eq!(call["data"]["args_raw"], "{\"id\":\"T-2041\"}", "and the raw text is kept");
    // Chat Completions has no error flag on tool messages: absent, not false
    assert_eq!(call["data"]["is_error"], Value::Null);
    assert!(call["data"]["absent"].as_array().unwrap().contains(&json!("/is_error")));

    let mcp = import(&project, "fixtures/traces/mcp.jsonl", "m.jsonl");
    let turn = of_kind(&mcp, "turn_started")[0];
    assert_eq!(turn["data"]["input"], Value::Null, "MCP has no user message: absent, never \"\"");
    assert_eq!(turn["data"]["absent"], json!(["/input"]));
    let model = of_kind(&mcp, "model_called")[0];
    assert_eq!(model["data"]["response"]["content"], Value::Null);
    let kinds: Vec<&Value> = of_kind(&mcp, "tool_executed").iter().map(|e| &e["data"]["error_kind"]).collect();
    assert_eq!(kinds, [&Value::Null, &json!("tool"), &Value::Null, &json!("protocol")], "tool vs protocol errors");
    assert_eq!(warning_codes(&mcp), ["conversation_absent", "turn_unanswered"]);

    let otel = import(&project, "fixtures/traces/otel_attributes.json", "t.jsonl");
    let pay = of_kind(&otel, "tool_executed")[1];
    assert_eq!(pay["data"]["source"]["error_type"], "PaymentLimitError");
    assert_eq!(pay["data"]["duration_ms"], 240);
    assert!(otel[0]["data"]["imported"]["reads"].as_str().unwrap().contains("v1.37"));
    let events = import(&project, "fixtures/traces/otel_events.jsonl", "e.jsonl");
    assert!(events[0]["data"]["imported"]["reads"].as_str().unwrap().contains("v1.28–v1.36"));

    // stdout and -o give the same bytes, and a second import is byte-identical
    let stdout = project.stateval(&["import", "fixtures/traces/openai_chat.json"]);
    stdout.expect_code(0);
    assert_eq!(stdout.stdout.as_bytes(), project.read_bytes("o.jsonl"));
    assert!(stdout.stderr.contains("4 tool calls"), "{}", stdout.stderr);
}

#[test]
fn truncated_json_is_an_error_at_the_end_of_what_was_read() {
    let project = Project::new();
    let full = project.read("fixtures/traces/anthropic.json");
    let mut half = full.len() / 2;
    while !full.is_char_boundary(half) {
        half -= 1;
    }
    let cut = &full[..half];
    let lines = cut.matches('\n').count() + 1;
    let out = import_text(&project, "cut.json", "anthropic", cut);
    expect_error_at(&out, "cut.json", lines, "EOF while parsing");

    // JSONL: the complete lines parse; the cut one is named
    let mcp = project.read("fixtures/traces/mcp.jsonl");
    let cut = &mcp[..mcp.len() - 20];
    let out = import_text(&project, "cut.jsonl", "mcp", cut);
    expect_error_at(&out, "cut.jsonl", 14, "EOF while parsing");
    // and auto gives the same error before it tries to detect anything
    let auto = project.stateval(&["import", "cut.jsonl"]);
    expect_error_at(&auto, "cut.jsonl", 14, "EOF while parsing");
}

#[test]
fn an_unknown_role_is_an_error_at_the_role_in_every_format() {
    let project = Project::new();
    let chat = "[\n{\"role\": \"user\", \"content\": \"hi\"},\n{\"role\": \"assistent\", \"content\": \"hello\"}\n]\n";
    let (column, message) = expect_error_at(&import_text(&project, "c.json", "openai", chat), "c.json", 3, "assistent");
    assert_eq!(column, 2);
    assert!(message.contains("did you mean \"assistant\""), "{message}");

    let anthropic = "[{\"role\": \"system\", \"content\": \"be brief\"}]";
    let (_, message) = expect_error_at(&import_text(&project, "a.json", "anthropic", anthropic), "a.json", 1, "system");
    assert!(message.contains("top-level \"system\""), "{message}");

    let responses = "[{\"type\": \"message\", \"role\": \"robot\", \"content\": \"x\"}]";
    expect_error_at(
        &import_text(&project, "r.json", "openai-responses", responses),
        "r.json",
        1,
        "unknown role \"robot\"",
    );

    let envelope = "{\"conversation\": {\"turns\": [\n{\"role\": \"customer\", \"content\": \"x\"}]}}";
    expect_error_at(&import_text(&project, "e.json", "envelope", envelope), "e.json", 2, "unknown role \"customer\"");

    let messages = r#"[{\"role\":\"human\",\"parts\":[{\"type\":\"text\",\"content\":\"x\"}]}]"#;
    let otel = format!(
        "{{\"resourceSpans\": [{{\"scopeSpans\": [{{\"spans\": [\n{{\"spanId\": \"a1\", \"attributes\": [\
         {{\"key\": \"gen_ai.operation.name\", \"value\": {{\"stringValue\": \"chat\"}}}},\n\
         {{\"key\": \"gen_ai.input.messages\", \"value\": {{\"stringValue\": \"{messages}\"}}}}]}}]}}]}}]}}"
    );
    expect_error_at(&import_text(&project, "o.json", "otel", &otel), "o.json", 3, "unknown role \"human\"");
}

#[test]
fn a_tool_result_without_its_call_is_an_error_naming_the_id() {
    let project = Project::new();
    let chat = "[{\"role\": \"user\", \"content\": \"x\"},\n{\"role\": \"tool\", \"tool_call_id\": \"call_gone\", \"content\": \"r\"}]";
    expect_error_at(
        &import_text(&project, "c.json", "openai", chat),
        "c.json",
        2,
        "\"call_gone\" has no tool call before it",
    );

    let anthropic = "[{\"role\": \"user\", \"content\": [\n{\"type\": \"tool_result\", \"tool_use_id\": \"toolu_gone\", \"content\": \"r\"}]}]";
    expect_error_at(
        &import_text(&project, "a.json", "anthropic", anthropic),
        "a.json",
        2,
        "\"toolu_gone\" has no tool call",
    );

    let responses = "[{\"role\": \"user\", \"content\": \"x\"},\n{\"type\": \"function_call_output\", \"call_id\": \"call_gone\", \"output\": \"r\"}]";
    expect_error_at(
        &import_text(&project, "r.json", "openai-responses", responses),
        "r.json",
        2,
        "has no tool call before it",
    );

    let mcp = "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": \"f\"}}\n\
               {\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"content\": []}}\n\
               {\"jsonrpc\": \"2.0\", \"id\": 7, \"result\": {\"content\": []}}\n";
    expect_error_at(
        &import_text(&project, "m.jsonl", "mcp", mcp),
        "m.jsonl",
        3,
        "response id 7 has no request before it",
    );
}

#[test]
fn duplicate_ids_are_errors_naming_where_the_first_one_was() {
    let project = Project::new();
    let call = "{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}";
    let chat = format!(
        "[{{\"role\": \"user\", \"content\": \"x\"}},\n{{\"role\": \"assistant\", \"tool_calls\": [{call}]}},\n\
         {{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"r\"}},\n{{\"role\": \"assistant\", \"tool_calls\": [{call}]}}]"
    );
    let (_, message) = expect_error_at(
        &import_text(&project, "c.json", "openai", &chat),
        "c.json",
        4,
        "duplicate tool call id \"call_1\"",
    );
    assert!(message.contains("first used at c.json:2:"), "{message}");

    let result = "[{\"role\": \"user\", \"content\": \"x\"},\n{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": \"t1\", \"name\": \"f\", \"input\": {}}]},\n\
                  {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": \"a\"},\n{\"type\": \"tool_result\", \"tool_use_id\": \"t1\", \"content\": \"b\"}]}]";
    expect_error_at(
        &import_text(&project, "a.json", "anthropic", result),
        "a.json",
        4,
        "duplicate result for tool call \"t1\"",
    );

    let mcp = "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", \"params\": {\"name\": \"f\"}}\n\
               {\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", \"params\": {\"name\": \"g\"}}\n";
    expect_error_at(&import_text(&project, "m.jsonl", "mcp", mcp), "m.jsonl", 2, "duplicate JSON-RPC request id 3");

    let items = "[{\"role\": \"user\", \"content\": \"x\"},\n{\"type\": \"function_call\", \"id\": \"fc_1\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": \"{}\"},\n\
                 {\"type\": \"function_call\", \"id\": \"fc_1\", \"call_id\": \"c2\", \"name\": \"f\", \"arguments\": \"{}\"}]";
    expect_error_at(
        &import_text(&project, "r.json", "openai-responses", items),
        "r.json",
        3,
        "duplicate item id \"fc_1\"",
    );

    let keys = "{\"messages\": [], \"messages\": []}";
    expect_error_at(&import_text(&project, "k.json", "anthropic", keys), "k.json", 1, "duplicate key \"messages\"");
}

#[test]
fn what_can_be_kept_but_not_fully_is_an_import_warning_event_never_a_silent_drop() {
    let project = Project::new();
    // a call whose result the trace never captured, with arguments that are not JSON,
    // an image part, and a turn that ends on the call
    let chat = "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"what is this?\"}, {\"type\": \"image_url\", \"image_url\": {\"url\": \"https://x.example/a.png\"}}]},\n\
                {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"lookup\", \"arguments\": \"{\\\"q\\\": \"}}]}]";
    let out = import_text(&project, "w.json", "openai", chat);
    out.expect_code(0);
    assert!(out.stderr.contains("warning: w.json:2:"), "warnings name their place:\n{}", out.stderr);
    project.stateval(&["verify", "out.jsonl"]).expect_code(0);
    let events = events_of(&project.read_bytes("out.jsonl"));
    assert_eq!(warning_codes(&events), ["unsupported_part", "arguments_unparsed", "result_missing", "turn_unanswered"]);
    let call = of_kind(&events, "tool_executed")[0];
    assert_eq!(call["data"]["args"], "{\"q\": ", "unparsed arguments keep the raw text");
    assert!(call["data"]["args_error"].as_str().unwrap().contains("EOF"));
    assert_eq!(call["data"]["result"], Value::Null);
    assert!(call["data"]["absent"].as_array().unwrap().contains(&json!("/result")));
    // reconstruct cannot replay arguments that are not an object, and says which event
    let rec = project.stateval(&["reconstruct", "out.jsonl", "--as", "w"]);
    rec.expect_code(2);
    assert!(rec.stderr.contains("event seq") && rec.stderr.contains("not a JSON object"), "{}", rec.stderr);
}

#[test]
fn auto_detection_refuses_ambiguous_or_unknown_content_and_lists_the_formats() {
    let project = Project::new();
    project.write(
        "plain.json",
        "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\"}]",
    );
    let out = project.stateval(&["import", "plain.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("ambiguous"), "{}", out.stderr);
    assert!(out.stderr.contains("openai, openai-responses, anthropic, otel, mcp, envelope"), "{}", out.stderr);
    // told which, it imports
    project.stateval(&["import", "--from", "anthropic", "plain.json", "-o", "p.jsonl"]).expect_code(0);

    project.write("other.json", "{\"hello\": \"world\"}");
    let out = project.stateval(&["import", "other.json"]);
    out.expect_code(2);
    // a judgment of the whole file, placed at its start as other whole-file errors are
    assert!(out.stderr.starts_with("error: other.json:1:1: unknown format"), "{}", out.stderr);

    // a JSON trace whose first line is broken reads as log lines (the framing of a log
    // with a JSON payload after a prefix); the error says it is not JSON, and where
    let trace = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traces/anthropic.json"))
        .expect("the trace");
    assert!(trace.starts_with("{\n"), "the fixture opens with a line of its own");
    project.write("broken.json", format!("z{}", &trace[1..]));
    let out = project.stateval(&["import", "broken.json"]);
    out.expect_code(2);
    let (path, line, column, message) = parse_located_error(out.stderr.lines().next().unwrap_or(""));
    assert_eq!((path.as_str(), line, column), ("broken.json", 1, 1), "{}", out.stderr);
    assert!(message.starts_with("not a JSON document (expected value)"), "{message}");
    assert!(message.contains("read as log lines with a JSON payload each: unknown format"), "{message}");
    let out = project.stateval(&["import", "--from", "langchain", "other.json"]);
    out.expect_code(2);
    assert!(out.stderr.contains("unknown format \"langchain\""), "{}", out.stderr);
}

/// Run the CI pipeline and return the log of `case`.
fn run_log(project: &Project, case: &str) -> String {
    project.stateval(&["run", "--jobs", "1"]).expect_code(0);
    project.log_files().into_iter().find(|p| p.contains(&format!("/{case}/"))).expect("the case's log")
}

#[test]
fn show_prints_a_timeline_and_the_state_folded_at_a_turn() {
    let project = Project::new();
    let log = run_log(&project, "remember-default-payee");
    let out = project.stateval(&["show", &log]);
    out.expect_code(0);
    assert!(out.stdout.contains("memory_written"), "{}", out.stdout);
    assert!(out.stdout.contains("semantic.default_payee = \"bob@example.com\""), "{}", out.stdout);
    assert!(out.stdout.contains("run_completed"), "{}", out.stdout);

    let at0 = project.stateval(&["show", &log, "--at-turn", "0"]);
    at0.expect_code(0);
    assert!(at0.stdout.contains("state at the end of turn 0:"), "{}", at0.stdout);
    assert!(at0.stdout.contains("  semantic.default_payee = \"bob@example.com\""), "{}", at0.stdout);
    assert!(!at0.stdout.contains("alice@example.com"), "turn 1 is not shown at turn 0:\n{}", at0.stdout);
    let at1 = project.stateval(&["show", &log, "--at-turn", "1"]);
    assert!(at1.stdout.contains("  semantic.default_payee = \"alice@example.com\""), "{}", at1.stdout);
    assert!(at1.stdout.contains("supersedes \"bob@example.com\""), "{}", at1.stdout);

    // the sandbox fold: the ledger is empty after turn 0 and holds the transfer after turn 1
    let pay = project.log_files().into_iter().find(|p| p.contains("/pay-known-payee/")).unwrap();
    let at0 = project.stateval(&["show", &pay, "--at-turn", "0"]);
    assert!(at0.stdout.contains("\"ledger\": []"), "{}", at0.stdout);
    let at1 = project.stateval(&["show", &pay, "--at-turn", "1"]);
    assert!(at1.stdout.contains("\"to\": \"alice@example.com\""), "{}", at1.stdout);
    assert!(at1.stdout.contains("escalate"), "the policy verdict is in the timeline:\n{}", at1.stdout);

    let beyond = project.stateval(&["show", &log, "--at-turn", "9"]);
    beyond.expect_code(2);
    assert!(beyond.stderr.contains("has turns 0 to 2"), "{}", beyond.stderr);
}

#[test]
fn show_refuses_a_log_that_does_not_verify_and_names_the_seq() {
    let project = Project::new();
    import(&project, "fixtures/traces/anthropic.json", "a.jsonl");
    let shown = project.stateval(&["show", "a.jsonl", "--at-turn", "1"]);
    shown.expect_code(0);
    assert!(shown.stdout.contains("restart_service  tool-err"), "{}", shown.stdout);
    project.edit_line("a.jsonl", 6, "Checkout is degraded", "Checkout is healthy");
    let out = project.stateval(&["show", "a.jsonl"]);
    out.expect_code(2);
    assert!(out.stderr.contains("does not verify") && out.stderr.contains("event seq 5"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "nothing of a tampered log is shown:\n{}", out.stdout);
    let rec = project.stateval(&["reconstruct", "a.jsonl", "--as", "tampered"]);
    rec.expect_code(2);
    assert!(rec.stderr.contains("event seq 5"), "{}", rec.stderr);
}

/// A trace with an integer past ±(2^53−1) where the log needs it exactly is refused (it
/// cannot be written as a canonical event) at the response it came from — in a stream,
/// at the line the response's chunks start — not at the file's first byte.
#[test]
fn a_value_the_log_cannot_hold_is_refused_at_the_response_it_came_from() {
    let project = Project::empty();
    project.write(
        "big.json",
        "{\n  \"id\": \"c1\",\n  \"object\": \"chat.completion\",\n  \"model\": \"gpt-4o\",\n  \"choices\": [\n    {\n      \
         \"index\": 0,\n      \"message\": {\"role\": \"assistant\", \"content\": \"hi\"},\n      \"finish_reason\": \
         \"stop\"\n    }\n  ],\n  \"usage\": {\"prompt_tokens\": 9007199254740993, \"completion_tokens\": 1}\n}\n",
    );
    // two streamed completions; the second one's usage holds the value
    let chunk = |id: &str, rest: &str| {
        format!("{{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",{rest}}}\n")
    };
    let completion = |id: &str, tokens: &str| {
        chunk(id, r#""choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]"#)
            + &chunk(id, r#""choices":[{"index":0,"delta":{},"finish_reason":"stop"}]"#)
            + &chunk(id, &format!(r#""choices":[],"usage":{{"prompt_tokens":{tokens},"completion_tokens":1}}"#))
    };
    project.write("big.jsonl", String::from("\n") + &completion("c1", "5") + &completion("c2", "9007199254740993"));
    for (file, line) in [("big.json", 8), ("big.jsonl", 5)] {
        let out = project.stateval(&["import", file]);
        out.expect_code(2);
        let (path, at, _, message) = parse_located_error(out.stderr.lines().next().unwrap_or(""));
        assert_eq!((path.as_str(), at), (file, line), "{}", out.stderr);
        assert!(message.starts_with("the trace cannot be written as a log: "), "{message}");
        assert!(message.contains("integer 9007199254740993 at /usage/input_tokens"), "{message}");
    }
}

/// A warning quotes the trace (a block's type here), and a trace from production may
/// hold an escape sequence: it is shown spelt out, never sent to the terminal.
#[test]
fn a_warning_quoting_an_escape_sequence_shows_it_spelt_out() {
    let project = Project::empty();
    project.write(
        "esc.json",
        r#"{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image\u001b[2K","source":{}},{"type":"text","text":"ok"}],"stop_reason":"end_turn"}]}"#,
    );
    let out = project.stateval(&["import", "esc.json"]);
    out.expect_code(0);
    assert!(out.stderr.contains(r#"a "image\u{1b}[2K" content block is not imported"#), "{}", out.stderr);
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
}
