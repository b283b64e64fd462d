//! The data of the runtime's most frequent events, built once as the `Value` tree that
//! extractors, detectors and graders read, and written as canonical bytes straight from
//! the typed fields (`canon::ObjectWriter`) instead of by walking that tree: most of the
//! writer's work was that walk. Each `write` gives the bytes of `canon` over its `value`
//! or `false`, and the event is then written from the tree, so an error reads as before
//! (tests below, and every debug build through `Unhashed::encode_written`, check it).

use serde_json::{Value, json};

use super::recorder::object;
use crate::canon::{Digest, ObjectWriter};
use crate::dataset::recording::Usage;

/// `model_called`.
pub(crate) struct ModelCalled<'a> {
    pub hash: Digest,
    pub position: usize,
    pub content: &'a str,
    /// (id, name, args) of each tool call, in order.
    pub calls: &'a [(String, String, Value)],
    pub confidence: Option<f64>,
    pub usage: Usage,
    pub latency_ms: u64,
}

impl ModelCalled<'_> {
    pub fn value(&self) -> Value {
        let tool_calls = Value::Array(
            self.calls
                .iter()
                .map(|(id, name, args)| {
                    object([("id", id.as_str().into()), ("name", name.as_str().into()), ("args", args.clone())])
                })
                .collect(),
        );
        let mut response = object([("content", self.content.into()), ("tool_calls", tool_calls)]);
        if let Some(c) = self.confidence {
            response["confidence"] = json!(c);
        }
        object([
            ("request_hash", self.hash.text().into()),
            ("position", json!(self.position)),
            ("response", response),
            ("usage", json!({"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens})),
            ("latency_ms", json!(self.latency_ms)),
        ])
    }

    #[cfg(test)]
    #[must_use]
    pub fn write(&self, out: &mut Vec<u8>) -> bool {
        self.write_noting_calls(out, &mut None)
    }

    /// [`write`](Self::write), noting where in `out` the `tool_calls` array lies once
    /// the whole data is written: the assistant message the runtime keeps carries the
    /// same canonical bytes.
    #[must_use]
    pub fn write_noting_calls(&self, out: &mut Vec<u8>, calls_at: &mut Option<std::ops::Range<usize>>) -> bool {
        let mut o = ObjectWriter::new(out);
        let mut ok = o.uint("latency_ms", self.latency_ms);
        ok &= o.uint("position", self.position as u64);
        o.digest("request_hash", &self.hash);
        let mut response = ObjectWriter::new(o.member("response"));
        if let Some(c) = self.confidence {
            ok &= response.float("confidence", c);
        }
        response.str("content", self.content);
        let out = response.member("tool_calls");
        let start = out.len();
        out.push(b'[');
        for (i, (id, name, args)) in self.calls.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let mut call = ObjectWriter::new(out);
            ok &= call.value("args", args);
            call.str("id", id);
            call.str("name", name);
            call.finish();
        }
        out.push(b']');
        let calls = start..out.len();
        response.finish();
        let mut usage = ObjectWriter::new(o.member("usage"));
        ok &= usage.uint("input_tokens", self.usage.input_tokens);
        ok &= usage.uint("output_tokens", self.usage.output_tokens);
        usage.finish();
        o.finish();
        *calls_at = ok.then_some(calls);
        ok
    }
}

/// `context_compiled`.
pub(crate) struct ContextCompiled<'a> {
    pub budget: Option<u64>,
    pub total: u64,
    pub system: u64,
    pub memory: u64,
    pub history: u64,
    pub tools: u64,
    pub messages: usize,
    pub dropped: usize,
    pub over: &'a [&'a str],
}

impl ContextCompiled<'_> {
    pub fn value(&self) -> Value {
        json!({"budget": self.budget, "total": self.total,
               "sections": {"system": self.system, "memory": self.memory, "history": self.history, "tools": self.tools},
               "messages": self.messages, "dropped": self.dropped,
               "over_section_budget": self.over})
    }

    #[must_use]
    pub fn write(&self, out: &mut Vec<u8>) -> bool {
        let mut o = ObjectWriter::new(out);
        let mut ok = match self.budget {
            Some(budget) => o.uint("budget", budget),
            None => {
                o.null("budget");
                true
            }
        };
        ok &= o.uint("dropped", self.dropped as u64);
        ok &= o.uint("messages", self.messages as u64);
        let out = o.member("over_section_budget");
        out.push(b'[');
        for (i, name) in self.over.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            crate::canon::write_canonical_str(out, name);
        }
        out.push(b']');
        let mut sections = ObjectWriter::new(o.member("sections"));
        ok &= sections.uint("history", self.history);
        ok &= sections.uint("memory", self.memory);
        ok &= sections.uint("system", self.system);
        ok &= sections.uint("tools", self.tools);
        sections.finish();
        ok &= o.uint("total", self.total);
        o.finish();
        ok
    }
}

/// `tool_executed` of a call that ran as the fixture answered: no injected fault, no
/// idempotency key, no protocol error (the others add members and are written from
/// their tree).
pub(crate) struct ToolExecuted<'a> {
    pub call_id: &'a str,
    pub tool: &'a str,
    pub args: &'a Value,
    pub result: &'a Value,
    pub is_error: bool,
    pub duration_ms: u64,
}

impl ToolExecuted<'_> {
    /// The tree, taking the effect (which the caller no longer needs).
    pub fn value(self, effect: Option<Value>) -> Value {
        object([
            ("call_id", self.call_id.into()),
            ("tool", self.tool.into()),
            ("args", self.args.clone()),
            ("result", self.result.clone()),
            ("is_error", self.is_error.into()),
            ("fault", Value::Null),
            ("duration_ms", json!(self.duration_ms)),
            ("deduplicated", false.into()),
            ("effect", effect.unwrap_or(Value::Null)),
        ])
    }

    #[must_use]
    pub fn write(&self, out: &mut Vec<u8>, effect: Option<&Value>) -> bool {
        let mut o = ObjectWriter::new(out);
        let mut ok = o.value("args", self.args);
        o.str("call_id", self.call_id);
        o.bool("deduplicated", false);
        ok &= o.uint("duration_ms", self.duration_ms);
        match effect {
            Some(effect) => ok &= o.value("effect", effect),
            None => o.null("effect"),
        }
        o.null("fault");
        o.bool("is_error", self.is_error);
        ok &= o.value("result", self.result);
        o.str("tool", self.tool);
        o.finish();
        ok
    }
}

/// `tool_proposed`.
pub(crate) fn tool_proposed_value(call_id: &str, tool: &str, args: &Value) -> Value {
    object([("call_id", call_id.into()), ("tool", tool.into()), ("args", args.clone())])
}

#[must_use]
pub(crate) fn write_tool_proposed(out: &mut Vec<u8>, call_id: &str, tool: &str, args: &Value) -> bool {
    let mut o = ObjectWriter::new(out);
    let ok = o.value("args", args);
    o.str("call_id", call_id);
    o.str("tool", tool);
    o.finish();
    ok
}

/// `policy_decided` of a call whose arguments carry no taint from an earlier event (one
/// that does adds `tainted_by`, and is written from its tree).
pub(crate) struct PolicyDecided<'a> {
    pub call_id: &'a str,
    pub tool: &'a str,
    pub verdict: &'a str,
    pub rule: &'a str,
    pub reason: &'a str,
    pub args_tainted: bool,
}

impl PolicyDecided<'_> {
    pub fn value(&self) -> Value {
        json!({"call_id": self.call_id, "tool": self.tool, "verdict": self.verdict,
               "rule": self.rule, "reason": self.reason, "args_tainted": self.args_tainted})
    }

    pub fn write(&self, out: &mut Vec<u8>) -> bool {
        let mut o = ObjectWriter::new(out);
        o.bool("args_tainted", self.args_tainted);
        o.str("call_id", self.call_id);
        o.str("reason", self.reason);
        o.str("rule", self.rule);
        o.str("tool", self.tool);
        o.str("verdict", self.verdict);
        o.finish();
        true
    }
}

/// `turn_started`: the turn and the user's message.
pub(crate) fn turn_started_value(turn: u32, input: &str) -> Value {
    json!({"turn": turn, "input": input})
}

pub(crate) fn write_turn_started(out: &mut Vec<u8>, turn: u32, input: &str) -> bool {
    let mut o = ObjectWriter::new(out);
    o.str("input", input);
    let ok = o.uint("turn", u64::from(turn));
    o.finish();
    ok
}

/// `turn_completed`: the turn and the answer.
pub(crate) fn turn_completed_value(turn: u32, response: &str) -> Value {
    json!({"turn": turn, "response": response})
}

pub(crate) fn write_turn_completed(out: &mut Vec<u8>, turn: u32, response: &str) -> bool {
    let mut o = ObjectWriter::new(out);
    o.str("response", response);
    let ok = o.uint("turn", u64::from(turn));
    o.finish();
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::to_canonical;
    use proptest::prelude::*;

    /// The typed bytes are those of the tree, or the tree has no canonical form either.
    fn agree(value: &Value, typed: Option<Vec<u8>>) -> Result<(), TestCaseError> {
        match (to_canonical(value), typed) {
            (Ok(of_value), Some(typed)) => {
                prop_assert_eq!(String::from_utf8(typed).unwrap(), String::from_utf8(of_value).unwrap())
            }
            (Err(_), None) => {}
            (of_value, typed) => prop_assert!(false, "value: {:?}, typed: {:?}", of_value, typed),
        }
        Ok(())
    }

    fn written(write: impl FnOnce(&mut Vec<u8>) -> bool) -> Option<Vec<u8>> {
        let mut out = b"prefix".to_vec();
        let ok = write(&mut out);
        ok.then(|| out.split_off(6))
    }

    fn json_leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
            "[\u{0}-\u{1f}\"\\\\a-z\u{e9}\u{e000}\u{1f600}]{0,8}".prop_map(Value::String),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        json_leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\u{e000}\u{1f600}~/]{0,5}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn text() -> impl Strategy<Value = String> {
        "[\u{0}-\u{1f}\"\\\\ a-z\u{7f}\u{e9}\u{2028}\u{e000}\u{1f600}]{0,24}"
    }

    /// Counts mostly in range, now and then past 2^53−1.
    fn count() -> impl Strategy<Value = u64> {
        prop_oneof![8 => 0u64..100_000, 1 => 9_007_199_254_740_990u64..9_007_199_254_740_994, 1 => any::<u64>()]
    }

    proptest! {
        #[test]
        fn model_called_writes_the_bytes_of_its_value(
            hash in any::<[u8; 32]>(),
            position in prop_oneof![0usize..1000, Just(usize::MAX)],
            content in text(),
            calls in proptest::collection::vec((text(), text(), json_value()), 0..3),
            confidence in proptest::option::of(prop_oneof![0.0f64..=1.0, any::<f64>(), Just(1e17), Just(-0.0)]),
            (input_tokens, output_tokens, latency_ms) in (count(), count(), count()),
        ) {
            let event = ModelCalled {
                hash: Digest(hash),
                position,
                content: &content,
                calls: &calls,
                confidence,
                usage: Usage { input_tokens, output_tokens },
                latency_ms,
            };
            agree(&event.value(), written(|out| event.write(out)))?;
            // where it says the calls lie is the canonical text of the calls
            let (mut out, mut at) = (Vec::new(), None);
            if event.write_noting_calls(&mut out, &mut at) {
                let at = at.expect("a range when written");
                let expected = crate::canon::to_canonical(&event.value()["response"]["tool_calls"]).unwrap();
                prop_assert_eq!(&out[at], &expected[..]);
            } else {
                prop_assert!(at.is_none());
            }
        }

        #[test]
        fn context_compiled_writes_the_bytes_of_its_value(
            budget in proptest::option::of(count()),
            (total, system, memory, history, tools) in (count(), count(), count(), count(), count()),
            (messages, dropped) in (0usize..500, 0usize..500),
            over in proptest::sample::subsequence(vec!["system", "memory", "tools"], 0..=3),
        ) {
            let event = ContextCompiled { budget, total, system, memory, history, tools, messages, dropped, over: &over };
            agree(&event.value(), written(|out| event.write(out)))?;
        }

        #[test]
        fn tool_executed_writes_the_bytes_of_its_value(
            (call_id, tool) in (text(), text()),
            (args, result) in (json_value(), json_value()),
            effect in proptest::option::of(json_value()),
            is_error in any::<bool>(),
            duration_ms in count(),
        ) {
            let event = ToolExecuted { call_id: &call_id, tool: &tool, args: &args, result: &result, is_error, duration_ms };
            let typed = written(|out| event.write(out, effect.as_ref()));
            agree(&event.value(effect.clone()), typed)?;
        }

        #[test]
        fn policy_decided_writes_the_bytes_of_its_value(
            (call_id, tool, rule, reason) in (text(), text(), text(), text()),
            verdict in proptest::sample::select(vec!["allow", "deny", "escalate"]),
            args_tainted in any::<bool>(),
        ) {
            let event = PolicyDecided { call_id: &call_id, tool: &tool, verdict, rule: &rule, reason: &reason, args_tainted };
            agree(&event.value(), written(|out| event.write(out)))?;
        }

        #[test]
        fn turn_events_write_the_bytes_of_their_values(turn in any::<u32>(), text in text()) {
            agree(&turn_started_value(turn, &text), written(|out| write_turn_started(out, turn, &text)))?;
            agree(&turn_completed_value(turn, &text), written(|out| write_turn_completed(out, turn, &text)))?;
        }

        #[test]
        fn tool_proposed_writes_the_bytes_of_its_value(
            (call_id, tool) in (text(), text()),
            args in json_value(),
        ) {
            agree(&tool_proposed_value(&call_id, &tool, &args), written(|out| write_tool_proposed(out, &call_id, &tool, &args)))?;
        }
    }
}
