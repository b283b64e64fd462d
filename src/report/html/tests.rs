use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::markup::Anchor;
use super::*;
use crate::event::writer::LogWriter;
use crate::outcome::{Check, GateOutcome};
use crate::report::fixture::{self, TRICKY_ID};

/// Logs held in memory: (case id, run) → events, golden path → events.
#[derive(Default)]
struct Memory {
    logs: BTreeMap<(String, usize), Vec<Event>>,
    goldens: BTreeMap<String, Vec<Event>>,
    prompts: Prompts,
}

impl Logs for Memory {
    fn events(&self, case: &CaseOutcome, run: &RunResult) -> Result<Vec<Event>, String> {
        self.logs.get(&(case.id.clone(), run.index)).cloned().ok_or_else(|| format!("no log for {}", case.id))
    }

    fn golden(&self, shown: &str) -> Result<Option<Vec<Event>>, String> {
        Ok(self.goldens.get(shown).cloned())
    }

    fn system_prompt(&self, agent: &str, profile: &str) -> Option<String> {
        self.prompts.get(agent).filter(|(digest, _)| digest == profile).map(|(_, text)| text.clone())
    }
}

/// What one turn of a treasury-like run writes.
struct Turn<'a> {
    input: &'a str,
    result: Value,
    answer: &'a str,
}

/// A run: the initial sandbox, then per turn a model call proposing `get_balance`, the
/// policy's verdict, the execution (with an effect), a memory write and the answer.
fn run_log(case: &str, turns: &[Turn], status: &str) -> Vec<Event> {
    let mut w = LogWriter::new(Vec::new());
    let mut events = Vec::new();
    let mut t = 0;
    let mut push = |w: &mut LogWriter<Vec<u8>>, turn: Option<u32>, t: u64, kind: Kind, data: Value| {
        events.push(w.append(turn, t, kind, data).unwrap_or_else(|e| panic!("{e}")));
    };
    push(
        &mut w,
        None,
        0,
        Kind::RunStarted,
        json!({"case": case, "run": 0, "agent": "treasury", "sandbox": {"balance": 1250}}),
    );
    for (n, turn) in turns.iter().enumerate() {
        let n32 = n as u32;
        let at = Some(n32);
        push(&mut w, at, t, Kind::TurnStarted, json!({"turn": n, "input": turn.input}));
        t += 400;
        let call = json!({"id": format!("c{n}"), "name": "get_balance", "args": {}});
        push(
            &mut w,
            at,
            t,
            Kind::ModelCalled,
            json!({"position": n * 2, "latency_ms": 400, "response": {"content": "", "tool_calls": [call]}, "usage": {"input_tokens": 300, "output_tokens": 12}}),
        );
        push(
            &mut w,
            at,
            t,
            Kind::PolicyDecided,
            json!({"call_id": format!("c{n}"), "tool": "get_balance", "verdict": "allow", "rule": null, "reason": "default allow"}),
        );
        t += 20;
        push(
            &mut w,
            at,
            t,
            Kind::ToolExecuted,
            json!({"call_id": format!("c{n}"), "tool": "get_balance", "args": {}, "result": turn.result, "is_error": false, "fault": null, "duration_ms": 20, "deduplicated": false, "effect": [{"op": "replace", "path": "/balance", "value": 1250 - n as i64}]}),
        );
        push(
            &mut w,
            at,
            t,
            Kind::MemoryWritten,
            json!({"tier": "semantic", "key": "last_balance", "value": turn.result.clone(), "confidence": 0.9}),
        );
        t += 300;
        push(
            &mut w,
            at,
            t,
            Kind::ModelCalled,
            json!({"position": n * 2 + 1, "latency_ms": 300, "response": {"content": turn.answer}, "usage": {"input_tokens": 340, "output_tokens": 9}}),
        );
        push(&mut w, at, t, Kind::TurnCompleted, json!({"turn": n, "response": turn.answer}));
    }
    push(&mut w, None, t, Kind::RunCompleted, json!({"status": status, "turns": turns.len(), "tokens": 661}));
    events
}

fn one_turn(case: &str, result: Value, answer: &str) -> Vec<Event> {
    run_log(case, &[Turn { input: "What is my balance?", result, answer }], "completed")
}

/// The reporters' fixture suite with a log for every run.
fn suite_and_logs() -> (SuiteOutcome, Memory) {
    let outcome = fixture::suite();
    let mut logs = Memory::default();
    for case in outcome.cases.to_vec().unwrap_or_default() {
        for run in &case.runs {
            let events = if case.id == "idempotent-transfer-replay" {
                replay_miss(&case.id)
            } else {
                one_turn(&case.id, json!({"balance": 1250}), "Your balance is $1,250.")
            };
            logs.logs.insert((case.id.clone(), run.index), events);
        }
    }
    (outcome, logs)
}

fn replay_miss(case: &str) -> Vec<Event> {
    let mut w = LogWriter::new(Vec::new());
    let mut push =
        |turn: Option<u32>, kind: Kind, data: Value| w.append(turn, 0, kind, data).unwrap_or_else(|e| panic!("{e}"));
    vec![
        push(None, Kind::RunStarted, json!({"case": case, "run": 0, "sandbox": {}})),
        push(Some(0), Kind::TurnStarted, json!({"turn": 0, "input": "Pay again"})),
        push(Some(0), Kind::Error, json!({"kind": "replay_miss", "message": "no recorded response at position 0"})),
        push(None, Kind::RunCompleted, json!({"status": "replay_exhausted", "turns": 1, "tokens": 0})),
    ]
}

fn page(outcome: &SuiteOutcome, logs: &Memory) -> String {
    render(outcome, logs).unwrap_or_else(|e| panic!("render failed: {e}"))
}

#[test]
fn the_same_outcome_and_logs_give_byte_identical_pages() {
    let (outcome, logs) = suite_and_logs();
    let first = page(&outcome, &logs);
    assert_eq!(first, page(&outcome, &logs));
    assert!(first.starts_with("<!doctype html>\n") && first.ends_with("</html>\n"));
}

#[test]
fn failing_cases_come_first_in_the_index_with_their_reason_and_first_divergent_event() {
    let (outcome, logs) = suite_and_logs();
    let html = page(&outcome, &logs);
    let index =
        &html[html.find("<section id=\"index\">").unwrap_or(0)..html.find("<section id=\"cases\"").unwrap_or(0)];
    let tricky = index.find(&markup::anchor_id(TRICKY_ID)).unwrap_or(usize::MAX);
    let miss = index.find("idempotent-transfer-replay").unwrap_or(usize::MAX);
    let passing = index.find("pays-trusted-payee").unwrap_or(usize::MAX);
    assert!(tricky < miss && miss < passing, "failing first, in dataset order");
    // the replay miss points at its error event, seq 2 of run 0, by deep link
    assert!(
        index.contains("<a href=\"#case/idempotent-transfer-replay/run/0/seq/2\">run 0 · seq 2 · turn 0 · error</a>"),
        "{index}"
    );
    assert!(html.contains("id=\"case/idempotent-transfer-replay/run/0/seq/2\""), "the link has a target");
    assert!(index.contains("run 0: replay miss: request 3 asked after the recording ended (event 7)"));
}

#[test]
fn gates_show_the_pass_rate_the_wilson_bound_and_min_cases() {
    let (outcome, logs) = suite_and_logs();
    let html = page(&outcome, &logs);
    // default: 1/3 → 33.3 %, Wilson 95 % lower bound of 1/3 is 6.1 %; security has min_cases 3
    assert!(
        html.contains(
            "<td class=\"num\">33.3 %</td><td class=\"num\">6.1 %</td><td class=\"num\"><span class=\"muted\">–</span></td>"
        ),
        "{html}"
    );
    assert!(html.contains("<td class=\"num\">0.0 %</td><td class=\"num\">0.0 %</td><td class=\"num\">3</td>"));
}

#[test]
fn a_gate_with_no_cases_says_what_it_measured_instead() {
    let (mut outcome, logs) = suite_and_logs();
    let card = |passed: bool, reason: &str| GateOutcome {
        scope: "reliability:treasury:pass_hat_k".into(),
        cases: 0,
        passed_cases: 0,
        pass_rate: 0.5,
        passed,
        reason: reason.into(),
        min_cases: None,
    };
    outcome.gates.push(card(false, "pass_hat_k = 0.500, below the minimum 0.700"));
    let mut second = card(true, "pass_at_k = 1.000, meets the minimum 0.900");
    second.scope = "reliability:treasury:pass_at_k".into();
    outcome.gates.push(second);
    outcome.gates.push(GateOutcome {
        scope: "billing".into(),
        cases: 0,
        passed_cases: 0,
        pass_rate: 0.0,
        passed: true,
        reason: "billing: 0/0 passed".into(),
        min_cases: None,
    });
    let html = page(&outcome, &logs);
    let gates = &html[html.find("<section id=\"gates\">").unwrap_or(0)..];
    let gates = &gates[..gates.find("</section>").unwrap_or(0)];
    let row = |scope: &str| {
        let at = gates.find(&format!("<code>{scope}</code>")).unwrap_or_else(|| panic!("{scope}: {gates}"));
        gates[at..].lines().next().unwrap_or_default().to_string()
    };
    // the card gate: no count, no rate, and why — it reads the agent's card, not cases
    let reliability = row("reliability:treasury:pass_hat_k");
    assert!(reliability.contains("pass_hat_k = 0.500, below the minimum 0.700"), "{reliability}");
    assert!(reliability.contains("Measured on agent treasury&#39;s reliability card, not on cases"), "{reliability}");
    assert!(!reliability.contains(">0<"), "no \"0 cases\": {reliability}");
    // explained once: the next card gate only points at it
    let next = row("reliability:treasury:pass_at_k");
    assert!(next.contains("A card metric, as above.") && !next.contains("Measured on agent"), "{next}");
    assert_eq!(gates.matches("Measured on agent").count(), 1, "{gates}");
    // a tag gate no case fell under
    let billing = row("billing");
    assert!(billing.contains("No case in this run carries the tag billing"), "{billing}");
    // a gate with cases is not explained away
    assert!(!row("security").contains("No case in this run"));
}

#[test]
fn hostile_strings_in_ids_reasons_and_payloads_are_text_never_markup() {
    let (mut outcome, mut logs) = suite_and_logs();
    let hostile = "</script><img src=x onerror=alert(1)><script>alert(2)</script>";
    let mut cases = outcome.cases.to_vec().unwrap_or_default();
    cases[1].runs[0].checks[0].reason = hostile.into();
    cases[1].tags.push(hostile.into());
    outcome.cases = cases.into();
    logs.logs.insert((TRICKY_ID.into(), 0), one_turn(TRICKY_ID, json!({"note": hostile}), hostile));
    let html = page(&outcome, &logs);
    assert_eq!(html.matches("<script").count(), 1, "only the page's own script");
    assert_eq!(html.matches("</script>").count(), 1);
    assert!(!html.contains("<img"), "no element from a payload");
    assert!(!html.contains("onerror=alert(1)>"), "not as an attribute either");
    assert!(html.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
    // the tricky id is escaped where shown and percent-encoded where it is an anchor
    assert!(html.contains("redirect &quot;attack&quot;: # TODO #1 | &lt;b&gt;&amp;co `x`"));
    assert!(!html.contains("id=\"case/redirect \""), "an id never holds a space or a quote");
}

#[test]
fn a_payload_over_the_limit_is_cut_in_place_with_its_byte_count_and_digest() {
    let (outcome, mut logs) = suite_and_logs();
    let big = "x".repeat(100_000);
    logs.logs.insert(("pays-trusted-payee".into(), 0), one_turn("pays-trusted-payee", json!({"dump": big}), "ok"));
    let html = page(&outcome, &logs);
    let canonical = crate::canon::to_canonical(&json!({"dump": "x".repeat(100_000)})).unwrap_or_default();
    let digest = crate::canon::digest(crate::canon::Context::Content, &canonical).to_string();
    assert!(html.contains(&format!("… cut: 100,011 bytes, {}", markup::short_digest(&digest))), "size and digest");
    assert!(html.contains(&format!("title=\"{digest}\"")), "the full digest is there to copy");
    assert!(html.len() < 100_000, "the 100 kB value is not in the page: {} bytes", html.len());
}

#[test]
fn the_state_after_each_turn_shows_the_change_from_the_turn_before() {
    let (outcome, mut logs) = suite_and_logs();
    let turns = [
        Turn { input: "balance?", result: json!(1250), answer: "1250" },
        Turn { input: "again?", result: json!(1249), answer: "1249" },
    ];
    logs.logs.insert(("pays-trusted-payee".into(), 0), run_log("pays-trusted-payee", &turns, "completed"));
    let html = page(&outcome, &logs);
    let case = &html[html.find("<section class=\"case passed\"").unwrap_or(0)..];
    assert!(case.contains("<strong>State before the first turn</strong>"));
    // turn 0 writes memory and the balance effect replaces 1250 with 1250 (no change)
    assert!(
        case.contains("<li class=\"add\"><code>/memory/semantic/last_balance</code>: <code>1250</code></li>"),
        "{case}"
    );
    // turn 1: the memory value and the sandbox balance both change
    let turn1 = &case[case.find("<strong>State after turn 1</strong>").unwrap_or(0)..];
    assert!(turn1.contains(
        "<li class=\"chg\"><code>/memory/semantic/last_balance</code>: <code>1250</code> → <code>1249</code></li>"
    ));
    assert!(
        turn1.contains("<li class=\"chg\"><code>/sandbox/balance</code>: <code>1250</code> → <code>1249</code></li>")
    );
}

#[test]
fn a_golden_diff_highlights_the_first_divergence_and_classifies_every_difference() {
    let (outcome, mut logs) = suite_and_logs();
    let mut cases = outcome.cases.to_vec().unwrap_or_default();
    let golden_path = "goldens/examples/treasury/pays-trusted-payee.0.jsonl";
    cases[0].passed = false;
    cases[0].runs[0].passed = false;
    cases[0].runs[0].checks.push(Check {
        name: crate::golden::CHECK.into(),
        passed: false,
        reason: "differs from the golden".into(),
        expected: Some(json!(golden_path)),
        actual: None,
    });
    let outcome = SuiteOutcome { cases: cases.into(), ..outcome };
    logs.goldens.insert(
        golden_path.into(),
        one_turn("pays-trusted-payee", json!({"balance": 1250}), "Your balance is $1,250."),
    );
    logs.logs.insert(
        ("pays-trusted-payee".into(), 0),
        one_turn("pays-trusted-payee", json!({"balance": 9}), "Your balance is $9."),
    );
    let html = page(&outcome, &logs);
    // the tool result (seq 4) is the first difference; the memory write and answers follow
    assert!(html.contains("<p class=\"callout\"><strong>First divergent event:</strong> <a href=\"#case/pays-trusted-payee/run/0/seq/4\">seq 4 · turn 0 · tool_executed</a>"), "{html}");
    assert!(html.contains(
        "<tr class=\"first\"><td class=\"cls \"><span class=\"b fail\">first divergence</span><br>payload changed</td>"
    ));
    assert!(html.contains("<code>/data/result/balance</code>: <code>1250</code> → <code>9</code>"));
    assert!(html.contains("<li id=\"case/pays-trusted-payee/run/0/seq/4\" class=\"diff first\">"));
    assert!(html.contains("4 differences (4 payload changed)"), "{html}");
}

#[test]
fn a_check_links_to_the_event_its_value_came_from() {
    let (outcome, mut logs) = suite_and_logs();
    let mut cases = outcome.cases.to_vec().unwrap_or_default();
    cases[1].runs[0].checks[0].name = "final_response".into();
    let outcome = SuiteOutcome { cases: cases.into(), ..outcome };
    logs.logs.insert((TRICKY_ID.into(), 0), one_turn(TRICKY_ID, json!(1), "hello"));
    let html = page(&outcome, &logs);
    let seq7 = Anchor::case(TRICKY_ID).seq(0, 7); // turn_completed
    assert!(html.contains(&format!("<td><a href=\"#{seq7}\">seq 7</a></td></tr>")), "{html}");
    assert!(html.contains("failing check reads this event: <code>final_response</code>"));
}

#[test]
fn a_long_run_folds_its_turns_except_the_first_divergence() {
    let (outcome, mut logs) = suite_and_logs();
    let turns: Vec<Turn> = (0..60).map(|_| Turn { input: "again", result: json!(1), answer: "ok" }).collect();
    let mut events = run_log(TRICKY_ID, &turns, "completed");
    assert!(events.len() > timeline::FOLD_EVENTS);
    // an error in turn 40 is the first divergence
    let mut w = LogWriter::new(Vec::new());
    let at = events.iter().position(|e| e.turn == Some(40)).unwrap_or(0);
    events.insert(at, events[at].clone());
    events[at].kind = Kind::Error;
    events[at].data = crate::event::Data::from_value(json!({"kind": "step_limit", "message": "too many steps"}))
        .unwrap_or_else(|e| panic!("{e}"));
    let events: Vec<Event> = events.iter().map(|e| w.append_data(e.turn, e.t, e.kind, e.data.clone())).collect();
    logs.logs.insert((TRICKY_ID.into(), 0), events);
    let html = page(&outcome, &logs);
    let a = Anchor::case(TRICKY_ID);
    // 60 turns: virtualised, the turns are data the script draws
    let turns = virtual_turns(&html, &a.run(0));
    let turn = |key: &str| turns.iter().find(|t| t[0] == key).unwrap_or_else(|| panic!("turn {key}"));
    assert_eq!(turn("40")[3], 1, "the first divergence's turn is open");
    assert_eq!(turn("39")[3], 0, "the others are folded");
    let html40 = turn("40")[4].as_str().unwrap_or_default();
    assert!(html40.starts_with(&format!("<details class=\"turn\" id=\"{}\" open>", a.turn(0, "40"))), "{html40}");
    assert!(html40.contains("first divergence"));
}

/// The JSON turns of a virtualised run (`[key, first seq, last seq, open, html]` each),
/// read back the way the page's script reads them.
fn virtual_turns(html: &str, run: &str) -> Vec<Value> {
    let open = format!("<div class=\"vlist\" id=\"{run}/turns\">");
    let list = &html[html.find(&open).unwrap_or_else(|| panic!("no virtual list {run}"))..];
    let start = list.find("<script type=\"application/json\">").unwrap_or(0) + 32;
    let json = &list[start..start + list[start..].find("</script>").unwrap_or(0)];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

#[test]
fn a_run_of_many_turns_is_virtualised_and_a_short_one_is_not() {
    let (outcome, mut logs) = suite_and_logs();
    let turns: Vec<Turn> = (0..1000).map(|n| Turn { input: "again", result: json!(n), answer: "ok" }).collect();
    logs.logs.insert(("pays-trusted-payee".into(), 0), run_log("pays-trusted-payee", &turns, "completed"));
    let html = page(&outcome, &logs);
    let a = Anchor::case("pays-trusted-payee");
    let items = virtual_turns(&html, &a.run(0));
    // every turn is embedded (pre, 1,000 turns, post), each with the seqs it holds
    assert_eq!(items.len(), 1002);
    assert_eq!(items[0][0], "pre");
    assert_eq!((items[1][0].as_str(), items[1][1].as_u64()), (Some("0"), Some(1)));
    assert_eq!(items[500][0], "499");
    let html_499 = items[500][4].as_str().unwrap_or_default();
    assert!(html_499.contains(&format!("<li id=\"{}\">", a.seq(0, items[500][1].as_u64().unwrap_or(0)))));
    // none of it is markup in the page: only the short runs' turns are
    let markup = html.replace(&serde_json::to_string(&items).unwrap_or_default(), "");
    assert!(!markup.contains(&format!("id=\"{}\"", a.turn(0, "499"))), "a long run's turns are not in the markup");
    let short = Anchor::case("idempotent-transfer-replay");
    assert!(
        html.contains(&format!("<details class=\"turn\" id=\"{}\" open>", short.turn(0, "0"))),
        "a short run's are"
    );
    assert!(!html.contains(&format!("id=\"{}/turns\"", short.run(0))));
    // without the script, the page says how to see a turn
    assert!(html.contains("This run's 1,002 turns are drawn by the page's script as they scroll into view"));
}

#[test]
fn nothing_in_a_virtualised_runs_data_can_close_its_block() {
    let (outcome, mut logs) = suite_and_logs();
    let hostile = "</script><script>alert(1)</script><!-- x";
    let turns: Vec<Turn> =
        (0..40).map(|_| Turn { input: hostile, result: json!({"note": hostile}), answer: hostile }).collect();
    logs.logs.insert(("pays-trusted-payee".into(), 0), run_log("pays-trusted-payee", &turns, "completed"));
    let html = page(&outcome, &logs);
    // the page's script and one data block, each closed once
    assert_eq!(html.matches("</script>").count(), 2);
    assert_eq!(html.matches("<script").count(), 2);
    let list = &html[html.find("<script type=\"application/json\">").unwrap_or(0)..];
    let data = &list[..list.find("</script>").unwrap_or(0)];
    assert!(data.len() > 10_000, "the 40 turns are in it");
    assert!(!data.contains("<!--") && !data.contains("</"), "nothing ends the block early");
    // and it reads back to the escaped markup an ordinary run would show
    let items = virtual_turns(&html, &Anchor::case("pays-trusted-payee").run(0));
    let turn0 = items[1][4].as_str().unwrap_or_default();
    assert!(turn0.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!-- x"), "{turn0}");
}

#[test]
fn a_run_over_the_event_limit_embeds_only_the_turns_that_matter() {
    let (outcome, mut logs) = suite_and_logs();
    let turns: Vec<Turn> = (0..3000).map(|_| Turn { input: "again", result: json!(1), answer: "ok" }).collect();
    let events = run_log("pays-trusted-payee", &turns, "completed");
    assert!(events.len() > timeline::MAX_RUN_EVENTS);
    let events_len = events.len();
    logs.logs.insert(("pays-trusted-payee".into(), 0), events);
    let html = page(&outcome, &logs);
    let last = events_len - 1;
    let items = virtual_turns(&html, &Anchor::case("pays-trusted-payee").run(0));
    let html_of =
        |key: &str| items.iter().find(|t| t[0] == key).and_then(|t| t[4].as_str()).unwrap_or_default().to_string();
    assert!(html_of("1500").contains("(not embedded)</span></summary><p class=\"muted\"><code>stateval show .stateval/runs/r1/case/0.jsonl --at-turn 1500</code>"));
    assert!(
        html_of("post").contains(&format!("id=\"case/pays-trusted-payee/run/0/seq/{last}\"")),
        "the end is embedded"
    );
    assert!(
        html_of("2999").contains(&format!("id=\"case/pays-trusted-payee/run/0/seq/{}\"", last - 1)),
        "so is the last turn"
    );
}

#[test]
fn cases_are_drawn_compact_once_the_detail_budget_is_spent() {
    let (outcome, logs) = suite_and_logs();
    let case = outcome.cases.to_vec().unwrap_or_default().remove(2);
    let first = index::first_divergence(&case, &logs);
    let compact = case::section(&case, &logs, case::Detail::Compact { first: first.as_ref() });
    assert!(compact.contains("Shown compact: the report's detail budget was spent"));
    assert!(!compact.contains("<h4>Timeline</h4>"));
    // the index's link to the first divergent event still lands on something
    let target = Anchor::case("idempotent-transfer-replay").seq(0, 2);
    assert!(
        compact.contains(&format!(
            "<p class=\"callout\" id=\"{target}\"><strong>First divergent event:</strong> seq 2 · turn 0 · error"
        )),
        "{compact}"
    );
    let full = case::section(&case, &logs, case::Detail::Full);
    assert!(full.contains("<h4>Timeline</h4>"));
}

#[test]
fn a_log_renders_alone_with_its_own_verdict() {
    let events = one_turn("incident-7", json!({"balance": 3}), "Your balance is $3.");
    let mut out = Vec::new();
    write_log("incident.jsonl", &events, &mut out).unwrap_or_else(|e| panic!("{e}"));
    let html = String::from_utf8(out).unwrap_or_default();
    assert!(html.contains("<h1>stateval log <code>incident.jsonl</code></h1>"));
    assert!(html.contains("id=\"case/incident-7/run/0/seq/4\""));
    assert!(html.contains("<strong>State after turn 0</strong>"));
    assert!(!html.contains("id=\"filters\""), "one log needs no filters");
}

#[test]
fn narrative_claims_are_listed_beside_the_events_that_show_them() {
    let (outcome, mut logs) = suite_and_logs();
    let mut cases = outcome.cases.to_vec().unwrap_or_default();
    cases[0].blocks = vec![Check {
        name: "narrative".into(),
        passed: false,
        reason: "gate failed".into(),
        expected: None,
        actual: None,
    }];
    let outcome = SuiteOutcome { cases: cases.into(), ..outcome };
    // the answer claims a transfer that never ran, and never mentions get_balance
    logs.logs.insert(
        ("pays-trusted-payee".into(), 0),
        one_turn("pays-trusted-payee", json!(1), "I sent the payment to Alice."),
    );
    let html = page(&outcome, &logs);
    let a = Anchor::case("pays-trusted-payee");
    assert!(html.contains("<h4>Narrative vs trace</h4>"));
    assert!(html.contains(&format!("<tr><td class=\"fail\">claimed but absent</td><td><code>send_payment</code> <span class=\"muted\">(no executed call matches)</span></td><td><a href=\"#{}\">seq 7</a></td></tr>", a.seq(0, 7))), "{html}");
    assert!(html.contains(&format!("<tr><td class=\"fail\">executed but not narrated</td><td><code>get_balance</code></td><td><a href=\"#{}\">seq 4</a></td></tr>", a.seq(0, 4))));
}

#[test]
fn a_passing_check_shows_its_matcher_and_value_folded_when_long() {
    let (mut outcome, logs) = suite_and_logs();
    let mut cases = outcome.cases.to_vec().unwrap_or_default();
    let long = "Your balance is $1,250. ".repeat(10);
    let at = cases.iter().position(|c| c.id == "pays-trusted-payee").unwrap_or(0);
    cases[at].runs[0].checks.push(Check {
        name: "final_response".into(),
        passed: true,
        reason: "contains \"$1,250\"".into(),
        expected: Some(json!({"contains": "$1,250"})),
        actual: Some(json!(long)),
    });
    outcome.cases = cases.into();
    let html = page(&outcome, &logs);
    let row = |target: &str, from: &str| {
        let section = &html[html.find(from).unwrap_or_else(|| panic!("{from}"))..];
        let at = section.find(&format!("<td><code>{target}</code></td>")).unwrap_or_else(|| panic!("{target}"));
        section[at..].lines().next().unwrap_or_default().to_string()
    };
    let full = "<section class=\"case passed\" id=\"case/pays-trusted-payee\"";
    // a short value is shown as it is, passing or not
    let denials = row("policy.denials", full);
    assert!(denials.contains("<code>{\"schema\":{\"minimum\":1}}</code></td><td><code>0</code>"), "{denials}");
    // a long one is folded, its start in the summary, the whole inside
    let answer = row("final_response", full);
    assert!(answer.contains("<td><code>{\"contains\":\"$1,250\"}</code></td>"), "{answer}");
    assert!(
        answer.contains(
            "<details class=\"value\"><summary><code>Your balance is $1,250. Your balance is $1,250. </code>…</summary>"
        ),
        "{answer}"
    );
    assert!(answer.contains(&format!("<code>{long}</code></details>")), "{answer}");
    // drawn compact (no log read), the values are still there
    let case = outcome.cases.to_vec().unwrap_or_default().remove(at);
    let compact = case::section(&case, &logs, case::Detail::Compact { first: None });
    assert!(compact.contains(&format!("<code>{long}</code></details>")), "{compact}");
}

/// A built-in run's model calls: turn 0 writes a memory and answers, turn 1's context
/// drops the oldest three messages. The conversation before seq 10 is five messages:
/// user (1), model (3), tool (4), model (7), user (9).
fn context_log(case: &str, run_started: Value, turn1_sent: u64) -> Vec<Event> {
    let mut w = LogWriter::new(Vec::new());
    let mut push =
        |turn: Option<u32>, kind: Kind, data: Value| w.append(turn, 0, kind, data).unwrap_or_else(|e| panic!("{e}"));
    let compiled = |messages: u64, dropped: u64| {
        json!({"budget": 400, "total": 120, "messages": messages, "dropped": dropped, "over_section_budget": [],
               "sections": {"system": 9, "tools": 40, "memory": 3, "history": 68}})
    };
    let call =
        json!({"id": "c0", "name": "memory_write", "args": {"tier": "semantic", "key": "name", "value": "Priya"}});
    let (t0, t1) = (Some(0), Some(1));
    let mut started = run_started;
    started["case"] = json!(case);
    vec![
        push(None, Kind::RunStarted, started),
        push(t0, Kind::TurnStarted, json!({"turn": 0, "input": "I'm Priya."})),
        push(t0, Kind::ContextCompiled, compiled(1, 0)),
        push(t0, Kind::ModelCalled, json!({"position": 0, "response": {"content": "", "tool_calls": [call]}})),
        push(t0, Kind::ToolProposed, json!({"call_id": "c0", "tool": "memory_write", "args": {}})),
        push(t0, Kind::MemoryWritten, json!({"tier": "semantic", "key": "name", "value": "Priya"})),
        push(t0, Kind::ContextCompiled, compiled(3, 0)),
        push(t0, Kind::ModelCalled, json!({"position": 1, "response": {"content": "Noted.", "tool_calls": []}})),
        push(t0, Kind::TurnCompleted, json!({"turn": 0, "response": "Noted."})),
        push(t1, Kind::TurnStarted, json!({"turn": 1, "input": "Who am I?"})),
        push(t1, Kind::ContextCompiled, compiled(turn1_sent, 3)),
        push(t1, Kind::ModelCalled, json!({"position": 2, "response": {"content": "Priya.", "tool_calls": []}})),
        push(t1, Kind::TurnCompleted, json!({"turn": 1, "response": "Priya."})),
        push(None, Kind::RunCompleted, json!({"status": "completed", "turns": 2, "tokens": 0})),
    ]
}

#[test]
fn each_model_call_shows_what_it_was_sent_by_reference_and_the_system_prompt_once() {
    let (outcome, mut logs) = suite_and_logs();
    let started = json!({"run": 0, "agent": "treasury", "profile": "blake3:p", "sandbox": {}});
    logs.logs.insert(("pays-trusted-payee".into(), 0), context_log("pays-trusted-payee", started, 2));
    logs.prompts.insert("treasury".into(), ("blake3:p".into(), "You are a careful <treasury> assistant.".into()));
    let html = page(&outcome, &logs);
    let a = Anchor::case("pays-trusted-payee");
    let row = |seq: u64| {
        let id = format!("<li id=\"{}\">", a.seq(0, seq));
        let at = html.find(&id).unwrap_or_else(|| panic!("seq {seq}"));
        html[at..].lines().next().unwrap_or_default().to_string()
    };
    let link = |seq: u64| format!("<a href=\"#{}\">seq {seq}</a>", a.seq(0, seq));
    // the prompt once, escaped, where every call links to
    assert_eq!(html.matches("You are a careful &lt;treasury&gt; assistant.").count(), 1);
    assert!(html.contains(&format!("<details class=\"sent\" id=\"{}/system\">", a.run(0))));
    let first = row(2);
    assert!(first.contains(&format!("<a href=\"#{}/system\">the system prompt</a>", a.run(0))), "{first}");
    assert!(first.contains(&format!("1 message, {}–{}", link(1), link(1))), "{first}");
    // the memory view is drawn when it changed, then referred to
    let second = row(6);
    assert!(second.contains("Priya") && second.contains("(1 user, 1 model, 1 tool)"), "{second}");
    let third = row(10);
    assert!(third.contains(&format!("memory as at {}", link(6))), "{third}");
    assert!(!third.contains("Priya"), "not repeated: {third}");
    // 5 messages so far, 3 dropped: the window is the model's answer and the new input
    assert!(third.contains(&format!("2 messages, {}–{}", link(7), link(9))), "{third}");
    assert!(third.contains("(1 user, 1 model, 0 tool)</span>; 3 older dropped to fit the budget"), "{third}");
}

#[test]
fn a_call_whose_message_count_the_log_cannot_account_for_says_so() {
    let (outcome, mut logs) = suite_and_logs();
    let started = json!({"run": 0, "agent": "treasury", "profile": "blake3:p", "sandbox": {}});
    // turn 1 claims 4 sent and 3 dropped: 7, but the log holds 5 messages before it
    logs.logs.insert(("pays-trusted-payee".into(), 0), context_log("pays-trusted-payee", started, 4));
    let html = page(&outcome, &logs);
    assert!(html.contains(
        "and 4 messages, 3 dropped <span class=\"muted\">(which ones this log cannot tell: it holds 5 before this call)"
    ));
}

#[test]
fn a_system_prompt_is_shown_only_for_the_profile_the_run_recorded() {
    let (outcome, mut logs) = suite_and_logs();
    let started = json!({"run": 0, "agent": "treasury", "profile": "blake3:old", "sandbox": {}});
    logs.logs.insert(("pays-trusted-payee".into(), 0), context_log("pays-trusted-payee", started, 2));
    logs.prompts.insert("treasury".into(), ("blake3:new".into(), "A prompt edited since the run.".into()));
    let html = page(&outcome, &logs);
    assert!(!html.contains("A prompt edited since the run."));
    assert!(html.contains("System prompt: not in the log, and the run's agent profile was not at hand"));
    assert!(!html.contains("<a href=\"#case/pays-trusted-payee/run/0/system\">"), "no link to a prompt not drawn");
    // an imported trace carries its own
    let imported = json!({"run": 0, "agent": "imported", "system": ["Part one.", "Part two."], "sandbox": {}});
    logs.logs.insert(("pays-trusted-payee".into(), 0), context_log("pays-trusted-payee", imported, 2));
    let html = page(&outcome, &logs);
    assert!(html.contains("<pre>Part one.\n\nPart two.</pre>"));
}

/// Values whose canonical text is not what `serde_json` prints for their tree: floats
/// ECMAScript spells otherwise, keys UTF-16 orders otherwise, escapes, and the plain
/// cases the viewer reads without a tree.
fn awkward_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(0),
        json!(-42),
        json!(9007199254740991u64),
        json!(2.5),
        json!(1e21),
        json!(1.5e-7),
        json!(0.000001),
        json!(-1e300),
        json!("plain"),
        json!("quote \" backslash \\ newline \n bell \u{7} del \u{7f} é"),
        json!([]),
        json!({}),
        json!([1, 2.5e30, "x", {"b": null}]),
        json!({"\u{e000}": 1, "\u{10000}": 2, "a\"b": [0.1], "z": {"y": 1e-9}}),
    ]
}

#[test]
fn members_read_from_the_bytes_show_exactly_as_their_trees_did() {
    use super::markup::esc;
    use super::markup::{plain, present, shown, shown_json};
    use crate::event::payload;
    let mut writer = LogWriter::new(Vec::new());
    for value in awkward_values() {
        let data = json!({"call_id": "c", "result": value, "args": [value, value]});
        // cloned: a tree parsed from the canonical bytes, as a log read from disk has
        let e = writer.append(Some(0), 0, Kind::ToolExecuted, data).unwrap().clone();
        let read: payload::ToolExecuted = e.view();
        let tree = e.get("result");
        assert_eq!(plain(read.result), tree.to_string(), "{value}");
        for limit in [0, 3, 4096] {
            let (typed, old) = (shown_json(read.result, limit), shown(&tree, limit));
            assert_eq!((typed.text, typed.cut), (old.text, old.cut), "{value} at {limit}");
        }
        let listed: Vec<String> = read.args.items().iter().map(|item| plain(*item).into_owned()).collect();
        let expected: Vec<String> = e.get("args").as_array().unwrap().iter().map(Value::to_string).collect();
        assert_eq!(listed, expected, "{value}");
        assert!(read.result.items().len() == tree.as_array().map_or(0, Vec::len), "{value}");
        // null is there; an absent member is not
        assert!(present(read.result) && !present(read.fault), "{value}");
        // an object's members listed by name, as `context_compiled.sections` are
        let compiled =
            writer.append(Some(0), 0, Kind::ContextCompiled, json!({"total": 1, "sections": value})).unwrap();
        let compiled = compiled.clone();
        let old = compiled.get("sections").as_object().map(|m| {
            let listed: Vec<String> = m.iter().map(|(k, v)| format!("{} {v}", esc(k))).collect();
            format!(" · {}", listed.join(", "))
        });
        let (anchor, marks) = (Anchor::case("c"), timeline::Marks::default());
        let ctx = timeline::Context {
            anchor: &anchor,
            k: 0,
            span: 1,
            drift: Default::default(),
            marks: &marks,
            sent: Default::default(),
        };
        assert_eq!(event::what(&compiled, &ctx), format!("1 tokens{}", old.unwrap_or_default()), "{value}");
    }
}
