//! `stateval record` against a fake upstream on 127.0.0.1 (nothing here reaches the
//! network): each vendor dialect — OpenAI Chat, Responses, Anthropic Messages — whole
//! and streamed, then `stateval run` replays green and byte-identically; the key set in
//! the environment reaches no file; an interrupted stream writes nothing; and
//! `stateval record --judge` fills judge recordings that `run` then serves; a built-in
//! runtime case records through either vendor and replays with every request digest
//! matching; secrets in what an agent sends are recorded scrubbed and replay with
//! another secret in their place, an upstream error that echoes a key is printed
//! scrubbed, and `recording lint` names each kind of secret by line.
//! (Chat without streaming, `-o`, `--force` and the cut-short whole answer are in
//! `cli_external.rs`.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use common::Project;
use serde_json::{Value, json};

const OPENAI_KEY: &str = "sk-test-openai-key-0123456789abcdef";
const ANTHROPIC_KEY: &str = "sk-ant-test-key-0123456789abcdefgh";

/// One scripted answer of the fake upstream.
enum Answer {
    /// A whole JSON body.
    Json(Value),
    /// A server-sent event stream; `Some(n)`: the connection closes after `n` bytes of it.
    Stream(String, Option<usize>),
    /// An error: this HTTP status with this JSON body.
    Status(u16, Value),
}

/// What the fake upstream received: the request path, its headers (lower-cased names)
/// and its JSON body.
#[derive(Debug)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A fake upstream on 127.0.0.1 answering each connection with the next of `answers`;
/// joined, it hands back what it received. Base URL: `http://127.0.0.1:PORT/v1`.
fn fake_upstream(answers: Vec<Answer>) -> (String, std::thread::JoinHandle<Vec<Seen>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for answer in answers {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim_end().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.trim_end().split_once(':') {
                    headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
                }
            }
            let length: usize =
                headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            seen.push(Seen { path, headers, body: serde_json::from_slice(&body).unwrap() });
            let mut stream = reader.into_inner();
            let bytes = match answer {
                Answer::Json(v) => {
                    let text = v.to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    )
                }
                Answer::Status(status, v) => {
                    let text = v.to_string();
                    format!(
                        "HTTP/1.1 {status} Oops\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                        text.len()
                    )
                }
                Answer::Stream(text, cut) => {
                    let text = cut.map_or(text.as_str(), |n| &text[..n]);
                    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{text}")
                }
            };
            let _ = stream.write_all(bytes.as_bytes());
        }
        seen
    });
    (url, handle)
}

/// The whole answer, and the streamed one, of each dialect saying `text`.
fn answer(api: &str, text: &str, streamed: bool) -> Answer {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    match (api, streamed) {
        ("chat", false) => Answer::Json(json!({"id": "chatcmpl-up", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3}})),
        ("chat", true) => {
            let (head, tail) = text.split_at(text.len() / 2);
            let chunk = |delta: Value| {
                format!("data: {}\n\n", json!({"id": "chatcmpl-up", "choices": [{"index": 0, "delta": delta}]}))
            };
            Answer::Stream(
                chunk(json!({"role": "assistant", "content": head}))
                    + &chunk(json!({"content": tail}))
                    + &format!(
                        "data: {}\n\n",
                        json!({"id": "chatcmpl-up", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3}})
                    )
                    + "data: [DONE]\n\n",
                None,
            )
        }
        ("responses", false) => Answer::Json(json!({"id": "resp_up", "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
            "usage": {"input_tokens": 11, "output_tokens": 3}})),
        ("responses", true) => {
            let whole = json!({"id": "resp_up", "object": "response", "status": "completed",
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
                "usage": {"input_tokens": 11, "output_tokens": 3}});
            Answer::Stream(
                event("response.output_text.delta", json!({"type": "response.output_text.delta", "delta": text}))
                    + &event("response.completed", json!({"type": "response.completed", "response": whole})),
                None,
            )
        }
        ("messages", false) => Answer::Json(json!({"id": "msg_up", "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 11, "output_tokens": 3}})),
        _ => Answer::Stream(
            event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_up", "usage": {"input_tokens": 11}}}),
            ) + &event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ) + &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ) + &event("content_block_stop", json!({"type": "content_block_stop", "index": 0}))
                + &event("message_delta", json!({"type": "message_delta", "usage": {"output_tokens": 3}}))
                + &event("message_stop", json!({"type": "message_stop"})),
            None,
        ),
    }
}

fn python() -> bool {
    let ok =
        std::process::Command::new("python3").arg("-c").arg("import json").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no python3 on PATH (the standard-library test agent needs it)");
    }
    ok
}

/// A project with one external case `rec`, whose agent speaks `api` (streamed or not),
/// asserting that the final response is `expected`.
fn agent_project(api: &str, streamed: bool, expected: &str) -> Project {
    let p = Project::empty();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    p.write("agents/dialect_agent.py", std::fs::read(repo.join("tests/agents/dialect_agent.py")).unwrap());
    let stream = if streamed { "1" } else { "0" };
    p.write(
        "pipeline/rec.toml",
        format!(
            "[pipeline]\nname = \"rec\"\ndatasets = [\"datasets/rec.jsonl\"]\n\n\
             [agents.dialect]\nkind = \"external\"\ncommand = [\"python3\", \"agents/dialect_agent.py\"]\n\
             timeout_ms = 20000\nenv = {{ DIALECT_API = \"{api}\", DIALECT_STREAM = \"{stream}\" }}\n\n\
             [gates]\ndefault = {{ min_pass_rate = 1.0 }}\n"
        ),
    );
    let case = json!({"id": "rec", "agent": "dialect", "turns": ["Say hello."],
                      "recordings": ["fixtures/recordings/rec.jsonl"],
                      "expect": [{"target": "final_response", "matcher": {"exact": expected}}]});
    p.write("datasets/rec.jsonl", format!("{case}\n"));
    p
}

/// `stateval ARGS` in `p` with both vendors' keys in the environment.
fn with_keys(p: &Project, args: &[&str]) -> common::Outcome {
    with_openai_key(p, OPENAI_KEY, args)
}

/// [`with_keys`] with `openai` as the OpenAI key.
fn with_openai_key(p: &Project, openai: &str, args: &[&str]) -> common::Outcome {
    let output =
        p.cmd().env("OPENAI_API_KEY", openai).env("ANTHROPIC_API_KEY", ANTHROPIC_KEY).args(args).output().unwrap();
    common::Outcome {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// No file under the project holds either key.
fn assert_no_key_written(p: &Project) {
    for file in p.files_under(".") {
        let text = String::from_utf8_lossy(&p.read_bytes(&file)).into_owned();
        assert!(!text.contains(OPENAI_KEY) && !text.contains(ANTHROPIC_KEY), "a key reached {file}");
    }
}

#[test]
fn each_dialect_whole_or_streamed_records_then_replays_green_byte_identically_without_the_key() {
    if !python() {
        return;
    }
    for api in ["chat", "responses", "messages"] {
        for streamed in [false, true] {
            let what = format!("{api}, streamed: {streamed}");
            let text = "Hello from the upstream.";
            let p = agent_project(api, streamed, text);
            let (url, upstream) = fake_upstream(vec![answer(api, text, streamed)]);
            with_keys(&p, &["record", "pipeline/rec.toml", "--case", "rec", "--upstream-url", &url]).expect_code(0);
            let seen = upstream.join().unwrap();
            assert_eq!(seen.len(), 1, "{what}");
            let (path, auth) = match api {
                "chat" => ("/v1/chat/completions", seen[0].header("authorization").map(str::to_string)),
                "responses" => ("/v1/responses", seen[0].header("authorization").map(str::to_string)),
                _ => ("/v1/v1/messages", seen[0].header("x-api-key").map(str::to_string)),
            };
            assert_eq!(seen[0].path, path, "{what}");
            let key = if api == "messages" { ANTHROPIC_KEY.to_string() } else { format!("Bearer {OPENAI_KEY}") };
            assert_eq!(auth.as_deref(), Some(key.as_str()), "{what}");
            // the upstream is asked to stream exactly when the agent asked
            assert_eq!(seen[0].body.get("stream") == Some(&json!(true)), streamed, "{what}");

            let lines: Vec<Value> =
                p.read("fixtures/recordings/rec.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
            assert_eq!(lines.len(), 1, "{what}");
            assert_eq!(lines[0]["response"]["content"], text, "{what}");
            assert_eq!(lines[0]["usage"], json!({"input_tokens": 11, "output_tokens": 3}), "{what}");

            p.stateval(&["run", "pipeline/rec.toml"]).expect_code(0);
            let log = p.log_files()[0].clone();
            let bytes = p.read_bytes(&log);
            assert!(!String::from_utf8_lossy(&bytes).contains("replay_diverged"), "{what}");
            p.stateval(&["run", "pipeline/rec.toml"]).expect_code(0);
            assert_eq!(p.read_bytes(&log), bytes, "{what}: a second run wrote a different log");
            assert_no_key_written(&p);
        }
    }
}

#[test]
fn an_interrupted_stream_writes_nothing_in_any_dialect() {
    if !python() {
        return;
    }
    for (api, end) in
        [("chat", "data: [DONE]"), ("responses", "event: response.completed"), ("messages", "event: message_stop")]
    {
        let p = agent_project(api, true, "never");
        let Answer::Stream(text, _) = answer(api, "Hello from the upstream.", true) else { unreachable!() };
        let cut = text.find(end).unwrap();
        let (url, upstream) = fake_upstream(vec![Answer::Stream(text, Some(cut))]);
        let out = with_keys(&p, &["record", "pipeline/rec.toml", "--case", "rec", "--upstream-url", &url]);
        out.expect_code(1);
        assert!(
            out.stderr.contains("did not complete") && out.stderr.contains("nothing written"),
            "{api}: {}",
            out.stderr
        );
        upstream.join().unwrap();
        assert!(!p.exists("fixtures/recordings/rec.jsonl"), "{api}: a placeholder or a partial recording was left");
    }
}

// ---- stateval record --judge ---------------------------------------------------------

const REPLY: &str = "Sorry for the wait! Your order ships tomorrow.";

/// A built-in agent's case judged by two profiles: `tone` asks OpenAI, `care` asks
/// Anthropic; neither judge recording exists yet.
fn judge_project() -> Project {
    let p = Project::empty();
    p.write(
        "pipeline/judged.toml",
        "[pipeline]\nname = \"judged\"\ndatasets = [\"datasets/judged.jsonl\"]\n\n\
         [agents.support]\nsystem = \"You are a help-desk agent.\"\n\n\
         [judges.tone]\nrecordings = \"judges/tone.jsonl\"\nmodel = \"gpt-judge\"\ntemperature = 0.7\n\n\
         [judges.care]\nrecordings = \"judges/care.jsonl\"\nmodel = \"claude-judge\"\nmax_tokens = 100\nupstream = \"anthropic\"\n\n\
         [gates]\ndefault = { min_pass_rate = 1.0 }\n",
    );
    p.write("rubrics/tone.md", "# Tone\n\nScore the reply from 1 (rude) to 5 (warm).\n");
    let judge = |profile: &str, samples: u32| {
        json!({"target": "final_response", "matcher": {"judge": {"rubric": "rubrics/tone.md", "profile": profile,
               "samples": samples, "reduce": "mean", "pass": {"schema": {"minimum": 4}}}}})
    };
    let case = json!({"id": "judged", "agent": "support", "turns": ["Where is my order?"],
                      "recordings": [{"responses": [{"response": {"content": REPLY}}]}],
                      "expect": [judge("tone", 2), judge("care", 1)]});
    p.write("datasets/judged.jsonl", format!("{case}\n"));
    p
}

fn chat_vote(score: u32) -> Answer {
    Answer::Json(json!({"id": "chatcmpl-j", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": format!("{{\"score\": {score}, \"reason\": \"warm\"}}")}}], "usage": {"prompt_tokens": 90, "completion_tokens": 9}}))
}

#[test]
fn record_judge_asks_each_missing_sample_once_and_run_then_serves_every_vote() {
    let p = judge_project();
    // run before recording: a miss, never a live call
    p.stateval(&["run", "pipeline/judged.toml"]).expect_code(2);

    let messages =
        Answer::Json(json!({"id": "msg_j", "type": "message", "content": [{"type": "text", "text": "{\"score\": 4}"}],
        "usage": {"input_tokens": 80, "output_tokens": 5}}));
    let (url, upstream) = fake_upstream(vec![chat_vote(5), chat_vote(4), messages]);
    let out = with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--upstream-url", &url]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("recorded 2 judge answer(s) into judges/tone.jsonl (0 kept, 0 replaced)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("recorded 1 judge answer(s) into judges/care.jsonl"), "{}", out.stdout);
    let seen = upstream.join().unwrap();
    assert_eq!(
        seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        ["/v1/chat/completions", "/v1/chat/completions", "/v1/v1/messages"]
    );
    // what the judge is asked: the profile's model and parameters, the rubric and the reply
    assert_eq!((&seen[0].body["model"], &seen[0].body["temperature"]), (&json!("gpt-judge"), &json!(0.7)));
    assert_eq!(seen[0].body["response_format"], json!({"type": "json_object"}));
    assert!(seen[0].body["messages"][0]["content"].as_str().unwrap().starts_with("# Tone"));
    assert!(seen[0].body["messages"][1]["content"].as_str().unwrap().contains(REPLY));
    assert_eq!(seen[0].header("authorization"), Some(format!("Bearer {OPENAI_KEY}").as_str()));
    assert_eq!((&seen[2].body["model"], &seen[2].body["max_tokens"]), (&json!("claude-judge"), &json!(100)));
    assert!(seen[2].body["system"].as_str().unwrap().starts_with("# Tone"));
    assert_eq!(seen[2].header("x-api-key"), Some(ANTHROPIC_KEY));

    let tone: Vec<Value> = p.read("judges/tone.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(tone.iter().map(|l| l["sample"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(tone[1]["response"]["content"], "{\"score\": 4, \"reason\": \"warm\"}");
    assert_eq!(tone[0]["usage"], json!({"input_tokens": 90, "output_tokens": 9}));

    // run serves every vote from the recordings, green, twice byte for byte
    p.stateval(&["run", "pipeline/judged.toml"]).expect_code(0);
    let log = p.log_files()[0].clone();
    let bytes = p.read_bytes(&log);
    let events = common::events_of(&bytes);
    let called: Vec<&Value> = events.iter().filter(|e| e["kind"] == "judge_called").collect();
    assert_eq!(called.len(), 3);
    assert!(called.iter().all(|e| e["data"].get("error").is_none()), "{called:?}");
    p.stateval(&["run", "pipeline/judged.toml"]).expect_code(0);
    assert_eq!(p.read_bytes(&log), bytes);
    assert_no_key_written(&p);

    // a second record asks nothing (the upstream is gone: a call would fail)
    let out = with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--upstream-url", "http://127.0.0.1:9/v1"]);
    out.expect_code(0);
    assert!(out.stdout.contains("judges/tone.jsonl: every judge sample asked is recorded already"), "{}", out.stdout);

    // --force asks again; here the care judge asks Anthropic, which `--upstream openai`
    // refuses, so nothing at all is written
    let before = (p.read_bytes("judges/tone.jsonl"), p.read_bytes("judges/care.jsonl"));
    let (url, upstream) = fake_upstream(vec![chat_vote(3), chat_vote(3)]);
    let force = ["record", "pipeline/judged.toml", "--judge", "--force", "--upstream", "openai", "--upstream-url"];
    let out = with_keys(&p, &[&force[..], &[url.as_str()]].concat());
    out.expect_code(1);
    assert!(
        out.stderr.contains("restricted to the other vendor") && out.stderr.contains("no judge answer written"),
        "{}",
        out.stderr
    );
    assert_eq!(upstream.join().unwrap().len(), 2, "both tone samples were asked again");
    assert_eq!((p.read_bytes("judges/tone.jsonl"), p.read_bytes("judges/care.jsonl")), before);
    // and without the restriction, --force replaces the answers it asked again
    let (url, upstream) = fake_upstream(vec![
        chat_vote(3),
        chat_vote(3),
        Answer::Json(json!({"id": "m",
        "content": [{"type": "text", "text": "{\"score\": 2}"}], "usage": {"input_tokens": 1, "output_tokens": 1}})),
    ]);
    let out = with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--force", "--upstream-url", &url]);
    out.expect_code(0);
    assert!(
        out.stdout.contains("recorded 2 judge answer(s) into judges/tone.jsonl (0 kept, 2 replaced)"),
        "{}",
        out.stdout
    );
    upstream.join().unwrap();
    p.stateval(&["run", "pipeline/judged.toml"]).expect_code(1);
}

#[test]
fn a_judge_answer_that_a_recording_cannot_hold_writes_nothing() {
    let p = judge_project();
    let prose = Answer::Json(json!({"id": "c", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": "I'd say about a 5."}}]}));
    let (url, upstream) = fake_upstream(vec![prose]);
    let out = with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--case", "judged", "--upstream-url", &url]);
    out.expect_code(1);
    assert!(out.stderr.contains("cannot be recorded: the answer is not JSON"), "{}", out.stderr);
    upstream.join().unwrap();
    assert!(!p.exists("judges/tone.jsonl") && !p.exists("judges/care.jsonl"), "a placeholder was left");
}

// ---- the README's walk-through ---------------------------------------------------------

#[test]
fn the_record_replay_judge_walk_through_in_examples_runs_as_the_readme_says() {
    if !python() {
        return;
    }
    let p = Project::empty();
    common::copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/record"), &p.join("examples/record"));
    let mut upstream = std::process::Command::new("python3")
        .args(["examples/record/fake_upstream.py", "0"])
        .current_dir(p.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(upstream.stdout.take().unwrap()).read_line(&mut url).unwrap();
    let url = url.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let steps: [&[&str]; 4] = [
        &["record", "examples/record/record.toml", "--case", "where-is-my-order", "--upstream-url", &url],
        &["record", "examples/record/record.toml", "--judge", "--upstream-url", &url],
        &["run", "examples/record/record.toml"],
        &["run", "examples/record/record.toml"],
    ];
    let outcomes: Vec<common::Outcome> = steps.iter().map(|args| with_keys(&p, args)).collect();
    let _ = upstream.kill();
    let _ = upstream.wait();
    for (args, out) in steps.iter().zip(&outcomes) {
        assert_eq!(out.code, 0, "stateval {}\n{}\n{}", args.join(" "), out.stdout, out.stderr);
    }
    assert!(outcomes[0].stdout.contains("recorded run 0 of where-is-my-order"), "{}", outcomes[0].stdout);
    assert!(outcomes[1].stdout.contains("recorded 3 judge answer(s) into judges/tone.jsonl"), "{}", outcomes[1].stdout);
    assert!(outcomes[2].stdout.contains("1/1 cases passed"), "{}", outcomes[2].stdout);
    assert_eq!(outcomes[2].stdout, outcomes[3].stdout, "the same run twice says the same");
    assert_no_key_written(&p);
}

#[test]
fn recording_lint_names_judge_votes_no_run_asks_for_and_a_secret_in_a_judge_recording() {
    let p = judge_project();
    let care = |score: u32| {
        Answer::Json(json!({"id": "m", "content": [{"type": "text", "text": format!("{{\"score\": {score}}}")}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}))
    };
    let (url, upstream) = fake_upstream(vec![chat_vote(5), chat_vote(4), care(4)]);
    with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--upstream-url", &url]).expect_code(0);
    upstream.join().unwrap();
    let lint = ["recording", "lint", "--pipeline", "pipeline/judged.toml"];
    let out = p.stateval(&lint);
    out.expect_code(0);
    assert!(out.stdout.contains("2 file(s), 0 finding(s)"), "{}", out.stdout);

    // a changed rubric: every vote recorded so far is for a request no run makes any more
    p.write("rubrics/tone.md", "# Tone\n\nScore the reply from 1 (curt) to 5 (warm).\n");
    let (url, upstream) = fake_upstream(vec![chat_vote(5), chat_vote(5), care(5)]);
    with_keys(&p, &["record", "pipeline/judged.toml", "--judge", "--upstream-url", &url]).expect_code(0);
    upstream.join().unwrap();
    // and a secret pasted into a reason by hand (the reason is not part of the key)
    p.write(
        "judges/tone.jsonl",
        p.read("judges/tone.jsonl").replacen("\\\"warm\\\"", "\\\"sk-abcdefghijklmnopqrstuvwx\\\"", 1),
    );
    p.stateval(&["run", "pipeline/judged.toml"]).expect_code(0);
    let out = p.stateval(&lint);
    out.expect_code(1);
    for expected in [
        "judges/tone.jsonl:1: holds a secret",
        "judges/tone.jsonl:1: no run asks for this vote",
        "judges/tone.jsonl:2: no run asks for this vote",
        "judges/care.jsonl:1: no run asks for this vote",
        "2 file(s), 4 finding(s)",
    ] {
        assert!(out.stdout.contains(expected), "missing {expected:?} in\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("judges/tone.jsonl:3:"), "{}", out.stdout);
}

// ---- stateval record of a built-in runtime case --------------------------------------

/// A built-in agent's two-turn case `orders`: the first turn looks order 1042 up through
/// the fixture tool `get_order`, then answers; the second thanks it. Divergence fails.
fn builtin_project() -> Project {
    builtin_project_asking("Where is order 1042?")
}

/// [`builtin_project`] with `question` as the first turn.
fn builtin_project_asking(question: &str) -> Project {
    let p = Project::empty();
    p.write(
        "pipeline/orders.toml",
        "[pipeline]\nname = \"orders\"\ndatasets = [\"datasets/orders.jsonl\"]\n\n\
         [replay]\non_divergence = \"fail\"\nunused = \"fail\"\n\n\
         [agents.desk]\nsystem = \"You answer order questions.\"\ntools = \"tools.json\"\n\n\
         [gates]\ndefault = { min_pass_rate = 1.0 }\n",
    );
    p.write(
        "tools.json",
        r#"{"state": {}, "tools": [{"name": "get_order", "description": "Look an order up by its number.",
            "safety_class": "read", "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
            "responses": [{"args": {"order": "1042"}, "result": {"order": "1042", "ships": "tomorrow"}}]}]}"#,
    );
    let case = json!({"id": "orders", "agent": "desk", "turns": [question, "Thanks!"],
                      "recordings": ["fixtures/recordings/orders.jsonl"],
                      "expect": [{"target": "tool_calls[0].name", "matcher": {"exact": "get_order"}},
                                 {"target": "final_response", "matcher": {"exact": "You're welcome."}}]});
    p.write("datasets/orders.jsonl", format!("{case}\n"));
    p
}

/// The three answers of the built-in case in `api` ("chat" or "messages"): a tool call,
/// an answer that leaks the key (as a careless gateway might), a plain answer.
fn builtin_answers(api: &str) -> Vec<Answer> {
    let leak = format!("Order 1042 ships tomorrow. (debug {OPENAI_KEY})");
    if api == "chat" {
        let text = |t: &str| {
            Answer::Json(json!({"id": "chatcmpl-up", "choices": [{"index": 0, "message": {"role": "assistant",
                "content": t}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 40, "completion_tokens": 9}}))
        };
        vec![
            Answer::Json(
                json!({"id": "chatcmpl-up", "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_up1", "type": "function",
                                "function": {"name": "get_order", "arguments": "{\"order\":\"1042\"}"}}]},
                "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 30, "completion_tokens": 7}}),
            ),
            text(&leak),
            text("You're welcome."),
        ]
    } else {
        let text = |t: &str| {
            Answer::Json(json!({"id": "msg_up", "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": t}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 40, "output_tokens": 9}}))
        };
        vec![
            Answer::Json(json!({"id": "msg_up", "type": "message", "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_up1", "name": "get_order", "input": {"order": "1042"}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 30, "output_tokens": 7}})),
            text(&leak),
            text("You're welcome."),
        ]
    }
}

#[test]
fn a_builtin_case_records_through_either_vendor_then_replays_green_with_every_digest_matching() {
    for api in ["chat", "messages"] {
        let p = builtin_project();
        let (url, upstream) = fake_upstream(builtin_answers(api));
        let mut args = vec!["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url];
        if api == "messages" {
            args.extend(["--upstream", "anthropic"]);
        }
        let out = with_keys(&p, &args);
        out.expect_code(0);
        assert!(out.stdout.contains("(3 model call(s))"), "{api}: {}", out.stdout);
        let seen = upstream.join().unwrap();
        assert_eq!(seen.len(), 3, "{api}");

        // what the runtime compiled went upstream in the vendor's own shape
        if api == "chat" {
            assert_eq!(seen[0].path, "/v1/chat/completions");
            assert_eq!(seen[0].header("authorization"), Some(format!("Bearer {OPENAI_KEY}").as_str()));
            assert_eq!(seen[0].body["model"], "gpt-4o-mini");
            assert_eq!(
                seen[0].body["messages"],
                json!([{"role": "system", "content": "You answer order questions."},
                       {"role": "user", "content": "Where is order 1042?"}])
            );
            let names: Vec<&str> = seen[0].body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(names[0], "get_order", "{names:?}");
            assert_eq!(seen[0].body["tools"][0]["function"]["parameters"]["required"], json!(["order"]));
            assert_eq!(
                seen[1].body["messages"][3],
                json!({"role": "tool", "tool_call_id": "call_up1", "content": "{\"order\":\"1042\",\"ships\":\"tomorrow\"}"})
            );
        } else {
            assert_eq!(seen[0].path, "/v1/v1/messages");
            assert_eq!(seen[0].header("x-api-key"), Some(ANTHROPIC_KEY));
            assert_eq!(seen[0].body["model"], "claude-3-5-haiku-latest");
            assert_eq!(seen[0].body["system"], "You answer order questions.");
            assert!(seen[0].body["max_tokens"].as_u64().is_some());
            assert_eq!(seen[0].body["tools"][0]["input_schema"]["required"], json!(["order"]));
            assert_eq!(
                seen[1].body["messages"][2],
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_up1",
                       "content": "{\"order\":\"1042\",\"ships\":\"tomorrow\"}"}]})
            );
        }
        // the second turn is sent the answer as scrubbed, as replay will rebuild it
        let sent = seen[2].body.to_string();
        assert!(sent.contains("ships tomorrow. (debug [scrubbed])") && !sent.contains(OPENAI_KEY), "{api}: {sent}");

        let lines: Vec<Value> =
            p.read("fixtures/recordings/orders.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3, "{api}");
        let at: Vec<(u64, u64)> =
            lines.iter().map(|l| (l["turn"].as_u64().unwrap(), l["step"].as_u64().unwrap())).collect();
        assert_eq!(at, [(0, 0), (0, 1), (1, 0)], "{api}");
        assert_eq!(lines[0]["response"]["tool_calls"][0]["name"], "get_order", "{api}");
        assert_eq!(lines[1]["response"]["content"], "Order 1042 ships tomorrow. (debug [scrubbed])", "{api}");
        assert_eq!(lines[1]["usage"], json!({"input_tokens": 40, "output_tokens": 9}), "{api}");
        // each line keeps the document its digest covers, as the runtime compiled it
        assert_eq!(lines[0]["request"]["system"], "You answer order questions.", "{api}");
        assert_eq!(lines[2]["request"]["messages"].as_array().map(Vec::len), Some(5), "{api}");

        p.stateval(&["run", "pipeline/orders.toml"]).expect_code(0);
        let log = p.log_files()[0].clone();
        let bytes = p.read_bytes(&log);
        let events = common::events_of(&bytes);
        assert!(!events.iter().any(|e| e["kind"] == "replay_diverged"), "{api}");
        // every request the replayed runtime compiled is the one recorded for it
        let replayed: Vec<&Value> =
            events.iter().filter(|e| e["kind"] == "model_called").map(|e| &e["data"]["request_hash"]).collect();
        let recorded: Vec<&Value> = lines.iter().map(|l| &l["request_hash"]).collect();
        assert_eq!(replayed, recorded, "{api}");
        p.stateval(&["run", "pipeline/orders.toml"]).expect_code(0);
        assert_eq!(p.read_bytes(&log), bytes, "{api}: a second run wrote a different log");
        assert_no_key_written(&p);
    }
}

#[test]
fn a_builtin_case_whose_upstream_fails_writes_nothing_and_an_existing_recording_is_kept() {
    let p = builtin_project();
    // the second model call fails: nothing of the first is written either
    let mut answers = builtin_answers("chat");
    answers.truncate(1);
    answers.push(Answer::Status(500, json!({"error": {"message": "overloaded"}})));
    let (url, upstream) = fake_upstream(answers);
    let out = with_keys(&p, &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url]);
    out.expect_code(1);
    assert!(
        out.stderr.contains("answered HTTP 500")
            && out.stderr.contains("overloaded")
            && out.stderr.contains("nothing written"),
        "{}",
        out.stderr
    );
    assert_eq!(upstream.join().unwrap().len(), 2);
    assert!(!p.exists("fixtures/recordings/orders.jsonl"), "a placeholder or a partial recording was left");

    // an existing recording is kept, and the upstream is not asked, without --force
    p.write("fixtures/recordings/orders.jsonl", "{\"response\":{\"content\":\"old\"}}\n");
    let out = with_keys(
        &p,
        &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", "http://127.0.0.1:1/v1"],
    );
    out.expect_code(2);
    assert!(out.stderr.contains("pass --force"), "{}", out.stderr);
    assert_eq!(p.read("fixtures/recordings/orders.jsonl"), "{\"response\":{\"content\":\"old\"}}\n");
    let (url, upstream) = fake_upstream(builtin_answers("chat"));
    with_keys(&p, &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url, "--force"])
        .expect_code(0);
    upstream.join().unwrap();
    assert_eq!(p.read("fixtures/recordings/orders.jsonl").lines().count(), 3);
    p.stateval(&["run", "pipeline/orders.toml"]).expect_code(0);
}

#[test]
fn runs_k_records_k_builtin_runs_and_model_names_the_model() {
    let p = builtin_project();
    let mut answers = builtin_answers("chat");
    answers.extend(builtin_answers("chat"));
    let (url, upstream) = fake_upstream(answers);
    let args = [
        "record",
        "pipeline/orders.toml",
        "--case",
        "orders",
        "--upstream-url",
        &url,
        "--runs",
        "2",
        "-o",
        "out/orders.jsonl",
        "--model",
        "gpt-test-1",
    ];
    with_keys(&p, &args).expect_code(0);
    let seen = upstream.join().unwrap();
    assert_eq!(seen.len(), 6);
    assert!(seen.iter().all(|s| s.body["model"] == "gpt-test-1"));
    for k in 0..2 {
        assert_eq!(p.read(format!("out/orders.{k}.jsonl")).lines().count(), 3, "run {k}");
    }
    // the two runs asked the same things (only the observed latencies may differ)
    let hashes = |k: usize| -> Vec<Value> {
        p.read(format!("out/orders.{k}.jsonl"))
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["request_hash"].clone())
            .collect()
    };
    assert_eq!(hashes(0), hashes(1));
}

#[test]
fn a_secret_in_what_a_builtin_case_sends_is_scrubbed_from_the_recording_and_replay_still_matches() {
    const AWS: &str = "AKIAABCDEFGHIJKLMNOP";
    let github = github_token();
    let question = format!(
        "Where is order 1042? My access key is {AWS}, my token {github}, the shop's database \
         postgres://shop:{DB_PASSWORD}@db.internal/orders."
    );
    let p = builtin_project_asking(&question);
    let (url, upstream) = fake_upstream(builtin_answers("chat"));
    with_keys(&p, &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url]).expect_code(0);
    // the model is asked what the case says (the case's own input is not stateval's secret)
    assert!(upstream.join().unwrap()[0].body.to_string().contains(AWS));
    let text = p.read("fixtures/recordings/orders.jsonl");
    for secret in [AWS, github.as_str(), DB_PASSWORD] {
        assert!(!text.contains(secret), "{secret} reached the recording:\n{text}");
    }
    assert!(
        text.contains(
            "My access key is [scrubbed], my token ghp_[scrubbed], the shop's database \
                       postgres://shop:[scrubbed]@db.internal/orders."
        ),
        "{text}"
    );
    // the digest is the runtime's, over what it sent, so replay still matches it
    p.stateval(&["run", "pipeline/orders.toml"]).expect_code(0);
    let log = p.log_files()[0].clone();
    assert!(!String::from_utf8_lossy(&p.read_bytes(&log)).contains("replay_diverged"));
    // and what was written lints clean of secrets
    let out = p.stateval(&["recording", "lint", "--pipeline", "pipeline/orders.toml"]);
    assert!(!out.stdout.contains("holds a secret"), "{}", out.stdout);
}

#[test]
fn an_external_agents_secret_bearing_request_records_scrubbed_and_replays_with_another_secret_in_its_place() {
    if !python() {
        return;
    }
    let text = "Hello from the upstream.";
    let p = agent_project("chat", false, text);
    let turn = |token: &str| {
        let case = json!({"id": "rec", "agent": "dialect", "turns": [format!("Say hello. My token is {token}, \
                          the database postgres://shop:{DB_PASSWORD}@db.internal/orders.")],
                          "recordings": ["fixtures/recordings/rec.jsonl"],
                          "expect": [{"target": "final_response", "matcher": {"exact": text}}]});
        p.write("datasets/rec.jsonl", format!("{case}\n"));
    };
    let github = github_token();
    turn(&github);
    let (url, upstream) = fake_upstream(vec![answer("chat", text, false)]);
    with_keys(&p, &["record", "pipeline/rec.toml", "--case", "rec", "--upstream-url", &url]).expect_code(0);
    upstream.join().unwrap();
    let recording = p.read("fixtures/recordings/rec.jsonl");
    assert!(!recording.contains(&github) && !recording.contains(DB_PASSWORD), "{recording}");
    assert!(
        recording.contains("My token is ghp_[scrubbed], the database postgres://shop:[scrubbed]@db.internal/orders."),
        "{recording}"
    );
    // replay scrubs what the agent sends the same way, so its digest matches what was
    // recorded, and goes on matching when the case carries another secret of the kind
    let diverged = |p: &Project| {
        let log = p.log_files()[0].clone();
        let events = common::events_of(&p.read_bytes(&log));
        events.iter().filter(|e| e["kind"] == "replay_diverged").count()
    };
    p.stateval(&["run", "pipeline/rec.toml"]).expect_code(0);
    assert_eq!(diverged(&p), 0);
    let _ = std::fs::remove_dir_all(p.join(".stateval"));
    turn(&github.replace("Zq8", "Kp4"));
    p.stateval(&["run", "pipeline/rec.toml"]).expect_code(0);
    assert_eq!(diverged(&p), 0);
    assert_no_key_written(&p);
}

/// A GitHub token of the real shape, built from parts so that no whole token sits in
/// the source (none of these is real).
fn github_token() -> String {
    format!("ghp_{}", "Zq8Rt2Lm5Vx1".repeat(3))
}

const DB_PASSWORD: &str = "Tr0ub4dor-and-3";

/// An upstream refusal that echoes what it was sent, as careless gateways do: a key
/// of no known shape (stateval's own), a GitHub token, a password in a URL.
fn echoing_refusal(key: &str) -> Answer {
    Answer::Status(
        401,
        json!({"error": {"message": format!(
            "invalid key {key} (token {} for postgres://shop:{DB_PASSWORD}@db.internal/orders)", github_token()
        )}}),
    )
}

/// A key shaped like no known kind: only knowing it is stateval's own scrubs it.
const PLAIN_KEY: &str = "team-gateway-key-7f3a9c2e51";

/// What `record` printed and every file it left, none of which may hold what the
/// upstream echoed.
fn assert_echo_kept_out(p: &Project, out: &common::Outcome) {
    let github = github_token();
    for secret in [PLAIN_KEY, github.as_str(), DB_PASSWORD] {
        assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret), "{secret} printed:\n{}", out.stderr);
        for file in p.files_under(".") {
            let text = String::from_utf8_lossy(&p.read_bytes(&file)).into_owned();
            assert!(!text.contains(secret), "{secret} reached {file}");
        }
    }
}

#[test]
fn an_upstream_error_that_echoes_a_key_is_printed_scrubbed_and_written_nowhere() {
    // a built-in case, whose model call fails
    let p = builtin_project();
    let (url, upstream) = fake_upstream(vec![echoing_refusal(PLAIN_KEY)]);
    let out =
        with_openai_key(&p, PLAIN_KEY, &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url]);
    out.expect_code(1);
    upstream.join().unwrap();
    // the message still says what happened, and where
    assert!(
        out.stderr.contains("answered HTTP 401")
            && out
                .stderr
                .contains("invalid key [scrubbed] (token ghp_[scrubbed] for postgres://shop:[scrubbed]@db.internal"),
        "{}",
        out.stderr
    );
    assert_echo_kept_out(&p, &out);

    // and a judge asked by `record --judge`
    let p = judge_project();
    let (url, upstream) = fake_upstream(vec![echoing_refusal(PLAIN_KEY)]);
    let out = with_openai_key(&p, PLAIN_KEY, &["record", "pipeline/judged.toml", "--judge", "--upstream-url", &url]);
    out.expect_code(1);
    upstream.join().unwrap();
    assert!(out.stderr.contains("answered HTTP 401") && out.stderr.contains("ghp_[scrubbed]"), "{}", out.stderr);
    assert_echo_kept_out(&p, &out);
    // and an external agent's call, whose agent is handed the error too
    if !python() {
        return;
    }
    let p = agent_project("chat", false, "unused");
    let (url, upstream) = fake_upstream(vec![echoing_refusal(PLAIN_KEY)]);
    let out = with_openai_key(&p, PLAIN_KEY, &["record", "pipeline/rec.toml", "--case", "rec", "--upstream-url", &url]);
    out.expect_code(1);
    upstream.join().unwrap();
    assert!(out.stderr.contains("answered HTTP 401") && out.stderr.contains("ghp_[scrubbed]"), "{}", out.stderr);
    assert_echo_kept_out(&p, &out);
}

#[test]
fn recording_lint_names_each_kind_of_secret_by_line() {
    let p = builtin_project();
    let pem = format!(
        "-----BEGIN EC {}-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oOmTbH5GzRyw\n-----END EC {}-----",
        "PRIVATE KEY", "PRIVATE KEY"
    );
    let contents = [
        ("nothing secret: sha1 3f786850e387550fdab836ed7e6dc881de23001b".to_string(), None),
        (format!("token {}", github_token()), Some("GitHub token")),
        (
            format!("slack {}", format_args!("xoxb-{}-{}", "123456789012", "AbCdEfGhIjKlMnOpQrStUvWx")),
            Some("Slack token"),
        ),
        (format!("maps {}", format_args!("AIza{}", "Sy1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7")), Some("Google API key")),
        (format!("key {pem}"), Some("PEM private key")),
        ("pair AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(), Some("AWS secret access key")),
        (format!("db postgres://shop:{DB_PASSWORD}@db.internal/orders"), Some("password in a URL")),
        ("login?user=ada&password=hunter2".into(), Some("password or secret field")),
        ("use sk-proj-abcdefghijklmnop1234".into(), Some("OpenAI or Anthropic API key")),
    ];
    let text: String = contents.iter().map(|(c, _)| format!("{}\n", json!({"response": {"content": c}}))).collect();
    p.write("fixtures/recordings/orders.jsonl", text);
    let out = p.stateval(&["recording", "lint", "--pipeline", "pipeline/orders.toml"]);
    out.expect_code(1);
    for (n, (content, kind)) in contents.iter().enumerate() {
        let line = format!("fixtures/recordings/orders.jsonl:{}: holds a secret", n + 1);
        match kind {
            Some(kind) => {
                assert!(out.stdout.contains(&format!("{line}: {kind}\n")), "{content}: no {kind}\n{}", out.stdout)
            }
            None => assert!(!out.stdout.contains(&line), "{content}\n{}", out.stdout),
        }
    }
    // the pair's id is a secret of its own kind, on the same line
    assert!(out.stdout.contains("orders.jsonl:6: holds a secret: AWS access key id\n"), "{}", out.stdout);
}

/// Recordings made before request digests were taken member by member carry the digest
/// of the whole document: they replay while the document beside the hash is kept and
/// unedited, and diverge when it is not.
#[test]
fn a_recording_with_the_earlier_request_digest_replays_only_while_its_unedited_request_is_beside_it() {
    use stateval::replay::digest;
    let p = builtin_project();
    let (url, upstream) = fake_upstream(builtin_answers("chat"));
    with_keys(&p, &["record", "pipeline/orders.toml", "--case", "orders", "--upstream-url", &url]).expect_code(0);
    upstream.join().unwrap();
    let recorded: Vec<Value> =
        p.read("fixtures/recordings/orders.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let rewrite = |edit: &dyn Fn(usize, &mut Value)| {
        let mut text = String::new();
        for (i, line) in recorded.iter().enumerate() {
            let mut line = line.clone();
            line["request_hash"] = json!(digest::legacy(&line["request"]).unwrap().to_string());
            edit(i, &mut line);
            text.push_str(&format!("{line}\n"));
        }
        p.write("fixtures/recordings/orders.jsonl", text);
        // each variant is a run of its own (another recording, another run id)
        let _ = std::fs::remove_dir_all(p.join(".stateval"));
    };
    let diverged = |p: &Project| {
        let log = p.log_files()[0].clone();
        common::events_of(&p.read_bytes(&log)).into_iter().filter(|e| e["kind"] == "replay_diverged").count()
    };

    // every line under the earlier definition: green, and the log holds today's digests
    rewrite(&|_, _| {});
    p.stateval(&["run", "pipeline/orders.toml"]).expect_code(0);
    assert_eq!(diverged(&p), 0);
    let log = p.log_files()[0].clone();
    let hashes: Vec<Value> = common::events_of(&p.read_bytes(&log))
        .into_iter()
        .filter(|e| e["kind"] == "model_called")
        .map(|e| e["data"]["request_hash"].clone())
        .collect();
    let today: Vec<Value> = recorded.iter().map(|l| json!(digest::of(&l["request"]).unwrap().to_string())).collect();
    assert_eq!(hashes, today);
    assert_eq!(recorded.iter().map(|l| l["request_hash"].clone()).collect::<Vec<_>>(), today);

    // the second line's document edited after its hash was taken: that call diverges
    rewrite(&|i, line| {
        if i == 1 {
            line["request"]["system"] = json!("You answer every question.");
        }
    });
    p.stateval(&["run", "pipeline/orders.toml"]).expect_code(1);
    assert_eq!(diverged(&p), 1);

    // the second line without its document: nothing vouches for the old hash
    rewrite(&|i, line| {
        if i == 1 {
            line.as_object_mut().unwrap().remove("request");
        }
    });
    p.stateval(&["run", "pipeline/orders.toml"]).expect_code(1);
    assert_eq!(diverged(&p), 1);
}
