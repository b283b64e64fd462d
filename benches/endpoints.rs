//! stateval's own cost per model call and per tool call through the external-agent
//! endpoints: HTTP serve, request read into the neutral form, digest, replay, events
//! canonicalised, hashed and written, response rendered.
//!
//! The agent is this bench binary itself, started again with `STATEVAL_BENCH_AGENT` set:
//! a minimal client on one keep-alive connection and raw HTTP/1.1, so what is measured is
//! stateval, not a client library. One case run makes `STEPS` model calls that each
//! propose one tool call (so `2 × STEPS` calls) plus the final answer; the run with no
//! calls measures the fixed cost (process start, protocol), and the difference divided
//! by the calls is the per-call cost.
//!
//! `cargo bench --bench endpoints`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use criterion::{BenchmarkId, Criterion, criterion_group};
use serde_json::{Value, json};
use stateval::runner::{Plan, Selection};

const STEPS: usize = 100;

/// A suite of one external case with `steps` tool-calling steps.
fn suite(dir: &std::path::Path, steps: usize) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the bench binary");
    let manifest = json!({"tools": [{"name": "lookup", "description": "Look a record up.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "default": {"result": {"found": true, "record": {"status": "ok", "owner": "ops"}}}}]});
    std::fs::write(dir.join("tools.json"), manifest.to_string()).unwrap();
    let mut responses: Vec<Value> = (0..steps)
        .map(|i| {
            json!({"response": {"content": "", "tool_calls": [{"id": format!("c{i}"), "name": "lookup",
                                                                    "args": {"q": format!("ledger-{i}")}}]},
                        "usage": {"input_tokens": 800, "output_tokens": 20}, "latency_ms": 300})
        })
        .collect();
    responses.push(json!({"response": {"content": "All records are fine."}}));
    let case = json!({"id": "bench", "agent": "bench", "turns": ["check the records"],
                      "recordings": [{"responses": responses}]});
    std::fs::write(dir.join("cases.jsonl"), format!("{case}\n")).unwrap();
    let pipeline = format!(
        "[pipeline]\nname = \"bench\"\ndatasets = [\"cases.jsonl\"]\n\n[agents.bench]\nkind = \"external\"\n\
         command = [{exe:?}]\ntools = \"tools.json\"\nenv = {{ STATEVAL_BENCH_AGENT = \"1\" }}\n"
    );
    let path = dir.join("bench.toml");
    std::fs::write(&path, pipeline).unwrap();
    path
}

fn endpoints(c: &mut Criterion) {
    let mut group = c.benchmark_group("endpoints");
    group.sample_size(20);
    for steps in [0, STEPS] {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = Plan::load(&suite(dir.path(), steps), &Selection::default()).expect("plan");
        let case = plan.case(0).expect("case");
        let recording = case.recordings[0].load().expect("recording");
        group.bench_with_input(BenchmarkId::new("case run, model+tool calls", 2 * steps), &steps, |b, _| {
            b.iter(|| {
                let run = plan.replay(&case, 0, &recording, Box::new(Vec::<u8>::new()), None, &[]).expect("run");
                assert_eq!(run.summary.status.as_str(), "completed", "{:?}", run.summary.error);
                std::hint::black_box(run.events.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, endpoints);

fn main() {
    if std::env::var_os("STATEVAL_BENCH_AGENT").is_some() {
        agent();
        return;
    }
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
}

// ---- the minimal agent ----------------------------------------------------------------

struct Client {
    stream: BufReader<TcpStream>,
    authority: String,
}

impl Client {
    fn request(&mut self, method: &str, path: &str, body: &str) -> Value {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.authority,
            body.len()
        );
        // one write per request: a head and a body sent apart meet Nagle's algorithm and
        // the peer's delayed ACK, and the bench would measure TCP's 40 ms, not stateval
        let stream = self.stream.get_mut();
        stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut buf = vec![0; length];
        self.stream.read_exact(&mut buf).unwrap();
        serde_json::from_slice(&buf).unwrap()
    }
}

fn agent() {
    let base = std::env::var("OPENAI_BASE_URL").unwrap();
    let tools = std::env::var("STATEVAL_TOOLS_URL").unwrap();
    let rest = base.strip_prefix("http://").unwrap();
    let (authority, prefix) = rest.split_once('/').unwrap();
    let tools_path = tools.split_once(authority).unwrap().1.to_string();
    let mut client = Client {
        stream: BufReader::new({
            let stream = TcpStream::connect(authority).unwrap();
            stream.set_nodelay(true).unwrap();
            stream
        }),
        authority: authority.to_string(),
    };
    let stdin = std::io::stdin();
    // answers on the protocol fd when stateval passes one (reopened through /dev/fd, in
    // safe code), on stdout otherwise
    let mut protocol: Box<dyn Write> = match std::env::var("STATEVAL_PROTOCOL_FD") {
        Ok(fd) => Box::new(std::fs::OpenOptions::new().write(true).open(format!("/dev/fd/{fd}")).unwrap()),
        Err(_) => Box::new(std::io::stdout()),
    };
    for line in stdin.lock().lines() {
        let msg: Value = serde_json::from_str(&line.unwrap()).unwrap();
        match msg["type"].as_str() {
            Some("end") => return,
            Some("turn") => {}
            _ => continue,
        }
        let mut messages = vec![json!({"role": "user", "content": msg["input"]})];
        let answer = loop {
            let body = json!({"model": "m", "messages": messages}).to_string();
            let reply = client.request("POST", &format!("/{prefix}/chat/completions"), &body);
            let message = reply["choices"][0]["message"].clone();
            let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
            messages.push(message.clone());
            if calls.is_empty() {
                break message["content"].as_str().unwrap_or_default().to_string();
            }
            for call in calls {
                let path = format!("{tools_path}/{}", call["function"]["name"].as_str().unwrap());
                let args = call["function"]["arguments"].as_str().unwrap();
                let result = client.request("POST", &path, args);
                messages
                    .push(json!({"role": "tool", "tool_call_id": call["id"], "content": result["result"].to_string()}));
            }
        };
        let out = json!({"type": "turn_result", "turn": msg["turn"], "output": answer});
        writeln!(protocol, "{out}").unwrap();
        protocol.flush().unwrap();
    }
}
