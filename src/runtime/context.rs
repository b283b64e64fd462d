//! The conversation the agent sends to the model, and the request digest.
//!
//! Each message keeps its canonical bytes from the moment it is added (all of them in one
//! comma-separated buffer), so a request —
//! `{"memory":…,"messages":[…],"system":…,"tools":[…]}` in JCS key order — is assembled
//! by concatenation rather than re-canonicalised in full at every model call.
//!
//! The request digest is that document's member-wise digest (`replay::digest`, the
//! same definition as an externally recorded request's): each of `memory`, `messages`,
//! `system` and `tools` is digested apart and the four digests are combined. System and
//! tools are digested once per run, the memory once per view, and `messages` is a
//! running hash: its state after `[` and the messages sent so far is kept, and the next
//! call feeds only the messages added since, then `]` to a copy. So a model call costs
//! the messages added since the last one, whatever the memory did in between, and a
//! long conversation is digested in time linear in its length. Only a window start not
//! sent lately (a context budget dropping its oldest unit) costs a pass over the window
//! it starts.
//!
//! Token counts are a deterministic approximation: ⌈characters / 4⌉ per text, the
//! common rule of thumb for English with BPE tokenisers. They are for budgets and
//! reports, not billing.
//!
//! The compiler fits four sections into the effective budget: system, memory and tools
//! are sent whole (each may have its own cap; exceeding it is recorded, never hidden);
//! history gets what remains and loses its **oldest** messages first. Messages are
//! dropped in *units*: an assistant message that called tools together with every tool
//! result answering it, so the model never sees a result without its call or a call
//! without its result. The current user message is always kept.

use serde_json::Value;

use crate::canon::{self, CanonError, Context, Digest, Digester};
use crate::replay::digest::Members;

/// Characters per token in the approximation.
pub const CHARS_PER_TOKEN: usize = 4;

pub fn approx_tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(CHARS_PER_TOKEN) as u64
}

pub struct Message {
    /// Where this message's canonical bytes start in [`Conversation::joined`].
    offset: usize,
    pub tokens: u64,
    /// Index of the first message of this message's unit (see the module doc).
    unit_start: usize,
}

/// What the compiler kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First history message sent.
    pub start: usize,
    /// Tokens of the messages sent.
    pub tokens: u64,
}

#[derive(Default)]
pub struct Conversation {
    messages: Vec<Message>,
    /// Every message's canonical bytes, comma-separated, in one buffer: the messages
    /// from any start on are one slice, hashed without being copied. Message offsets
    /// count from the conversation's first byte; `joined` holds the bytes from `base` on.
    joined: Vec<u8>,
    /// Bytes let go of: those already hashed, when nothing can ask for them again
    /// ([`Conversation::hashing_once`]).
    base: usize,
    /// Whether every window starts at the first message and no request is compiled, so
    /// the bytes of messages hashed once are never read again.
    once: bool,
    /// The sum of the messages' tokens.
    total_tokens: u64,
    /// The running hashes of the `messages` sent lately, one per window start (see the
    /// module doc); at most [`RUNNING`], the one asked for least lately replaced first.
    running: Vec<Running>,
    /// Digests asked for so far ([`Running::used`]).
    asked: u64,
    /// The request digest's hasher, reset for each request.
    request: Members,
}

/// How many window starts' running hashes a conversation keeps.
const RUNNING: usize = 2;

/// The `messages` member's hash state after `[` and messages `start..end`.
struct Running {
    start: usize,
    end: usize,
    /// When it was last asked for (the conversation's count of digests): the one asked
    /// for least lately makes room for a new start.
    used: u64,
    digester: Digester,
}

impl Conversation {
    /// A conversation whose requests always send it whole (no context budget, no history
    /// cap) and are never compiled (replay): its running hash from the first message is
    /// all a request digest needs, so the bytes it has hashed are let go of. A long run
    /// then holds the messages' offsets and token counts, not their text a second time
    /// beside its events. Asking for a later window start, or for the messages as sent,
    /// is then an error.
    pub fn hashing_once() -> Conversation {
        Conversation { once: true, ..Conversation::default() }
    }

    pub fn push(&mut self, message: Value) -> Result<(), CanonError> {
        let tool = message.get("role").and_then(Value::as_str) == Some("tool");
        self.push_with(tool, |joined| canon::write_canonical(joined, &message))
    }

    /// Add a message whose canonical bytes `write` appends to the joined buffer (no copy
    /// per message); on an error the buffer is left as it was. `tool`: a tool result.
    fn push_with(
        &mut self,
        tool: bool,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), CanonError>,
    ) -> Result<(), CanonError> {
        let before = self.joined.len();
        if !self.messages.is_empty() {
            self.joined.push(b',');
        }
        let at = self.joined.len();
        if let Err(e) = write(&mut self.joined) {
            self.joined.truncate(before);
            return Err(e);
        }
        let offset = self.base + at;
        // token estimate over the message text as sent
        let tokens = simdutf8::basic::from_utf8(&self.joined[at..]).map_or(0, approx_tokens);
        // a tool result belongs to the unit of the assistant message that called it
        let index = self.messages.len();
        let unit_start = match tool {
            true => self.messages.last().map_or(index, |m| m.unit_start),
            false => index,
        };
        self.messages.push(Message { offset, tokens, unit_start });
        self.total_tokens += tokens;
        Ok(())
    }

    /// The newest whole units that fit in `budget` tokens (all of them when `None`);
    /// the last unit (the current exchange) is kept even when it alone is too big.
    pub fn window(&self, budget: Option<u64>) -> Window {
        let total = self.history_tokens();
        let Some(budget) = budget.filter(|b| *b < total) else {
            return Window { start: 0, tokens: total };
        };
        let mut start = self.messages.len();
        let mut tokens = 0u64;
        while start > 0 {
            let unit_start = self.messages[start - 1].unit_start;
            let unit: u64 = self.messages[unit_start..start].iter().map(|m| m.tokens).sum();
            let first_unit = start == self.messages.len();
            if !first_unit && tokens + unit > budget {
                break;
            }
            tokens += unit;
            start = unit_start;
        }
        Window { start, tokens }
    }

    /// `{"role": "user", "content": content}`, written in its canonical form directly.
    pub fn user(&mut self, content: &str) -> Result<(), CanonError> {
        self.push_with(false, |joined| {
            joined.extend_from_slice(b"{\"content\":");
            canon::write_canonical_str(joined, content);
            joined.extend_from_slice(b",\"role\":\"user\"}");
            Ok(())
        })
    }

    /// `{"role": "assistant", "content": content}`, with `"tool_calls": tool_calls` when
    /// given (their canonical text, as the `model_called` event holds it), written in
    /// its canonical form directly.
    pub fn assistant(&mut self, content: &str, tool_calls: Option<&[u8]>) -> Result<(), CanonError> {
        self.push_with(false, |joined| {
            joined.extend_from_slice(b"{\"content\":");
            canon::write_canonical_str(joined, content);
            joined.extend_from_slice(b",\"role\":\"assistant\"");
            if let Some(calls) = tool_calls {
                joined.extend_from_slice(b",\"tool_calls\":");
                joined.extend_from_slice(calls);
            }
            joined.push(b'}');
            Ok(())
        })
    }

    /// `{"role": "tool", "call_id": call_id, "content": content}`, written in its
    /// canonical form directly.
    pub fn tool_result(&mut self, call_id: &str, content: &Value) -> Result<(), CanonError> {
        self.push_with(true, |joined| {
            joined.extend_from_slice(b"{\"call_id\":");
            canon::write_canonical_str(joined, call_id);
            joined.extend_from_slice(b",\"content\":");
            canon::write_canonical(joined, content)?;
            joined.extend_from_slice(b",\"role\":\"tool\"}");
            Ok(())
        })
    }

    /// [`Conversation::tool_result`] with the content given as its canonical text (as
    /// the `tool_executed` event wrote it).
    pub fn tool_result_written(&mut self, call_id: &str, canonical: &str) -> Result<(), CanonError> {
        self.push_with(true, |joined| {
            joined.extend_from_slice(b"{\"call_id\":");
            canon::write_canonical_str(joined, call_id);
            joined.extend_from_slice(b",\"content\":");
            joined.extend_from_slice(canonical.as_bytes());
            joined.extend_from_slice(b",\"role\":\"tool\"}");
            Ok(())
        })
    }

    pub fn history_tokens(&self) -> u64 {
        self.total_tokens
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages from `start` on, as sent (read back from their canonical bytes):
    /// the `messages` of the request document [`Conversation::request_digest`] digests.
    pub fn messages_from(&self, start: usize) -> Result<Value, serde_json::Error> {
        let Some(first) = self.messages.get(start) else {
            return Ok(Value::Array(Vec::new()));
        };
        let Some(from) = first.offset.checked_sub(self.base) else {
            return Err(serde::de::Error::custom("the messages were hashed once and let go of"));
        };
        let mut text = Vec::with_capacity(self.joined.len() - from + 2);
        text.push(b'[');
        text.extend_from_slice(&self.joined[from..]);
        text.push(b']');
        serde_json::from_slice(&text)
    }

    /// The member digest of the `messages` sent from `start` on: the running hash for
    /// that start, fed the messages added since it was last asked.
    pub fn messages_digest(&mut self, start: usize) -> Digest {
        let start = start.min(self.messages.len());
        // hashed once, only the start at the first message can be asked for
        assert!(!self.once || start == 0, "a conversation hashed once is digested from its first message");
        // each running hash stays where it is (one is a couple of kilobytes of hasher
        // state, and moving it at every call was a tenth of the digest's time)
        self.asked += 1;
        let at = match self.running.iter().position(|r| r.start == start) {
            Some(at) => at,
            None => {
                let mut digester = Digester::new(Context::RequestMember);
                digester.update(b"[");
                let fresh = Running { start, end: start, used: 0, digester };
                if self.running.len() < RUNNING {
                    self.running.push(fresh);
                    self.running.len() - 1
                } else {
                    let (oldest, _) = self.running.iter().enumerate().min_by_key(|(_, r)| r.used).expect("RUNNING > 0");
                    self.running[oldest] = fresh;
                    oldest
                }
            }
        };
        let running = &mut self.running[at];
        running.used = self.asked;
        // The messages added since go to the hasher straight from the joined buffer, with
        // the comma before them when they follow messages already fed.
        if let Some(first_new) = self.messages.get(running.end) {
            let from = if running.end > running.start { first_new.offset - 1 } else { first_new.offset };
            running.digester.update(&self.joined[from - self.base..]);
        }
        running.end = self.messages.len();
        if self.once {
            self.base += self.joined.len();
            self.joined.clear();
        }
        let mut whole = running.digester.clone();
        whole.update(b"]");
        whole.finish()
    }

    /// Digest of the request built from the member digests of the system prompt, tool
    /// list and memory view and the messages from `start` on.
    pub fn request_digest(&mut self, system: &Digest, tools: &Digest, memory: &Digest, start: usize) -> Digest {
        let messages = self.messages_digest(start);
        let request = self.request.reset();
        request.add("memory", memory).add("messages", &messages).add("system", system).add("tools", tools);
        request.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::digest;
    use serde_json::json;

    /// The conversation's digest of a request with these system, tools and memory values
    /// and the messages from `start` on.
    fn asked(c: &mut Conversation, system: &Value, tools: &Value, memory: &Value, start: usize) -> Digest {
        let member = |v: &Value| digest::member(&canon::to_canonical(v).unwrap());
        c.request_digest(&member(system), &member(tools), &member(memory), start)
    }

    #[test]
    fn the_assembled_request_is_exactly_its_canonical_form() {
        let mut c = Conversation::default();
        c.user("héllo").unwrap();
        c.push(json!({"role": "assistant", "content": "", "tool_calls": [{"name": "t", "args": {"b": 1, "a": 2}}]}))
            .unwrap();
        let (system, tools) = (json!("sys"), json!([{"name": "t"}]));
        let memory = json!({"semantic": {"k": 1}});
        let whole = json!({
            "system": "sys", "tools": [{"name": "t"}], "memory": memory,
            "messages": [{"role": "user", "content": "héllo"},
                         {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "args": {"a": 2, "b": 1}}]}]
        });
        assert_eq!(asked(&mut c, &system, &tools, &memory, 0), digest::of(&whole).unwrap());
        // asked again (its request hasher reused): the same document, the same digest
        assert_eq!(asked(&mut c, &system, &tools, &memory, 0), digest::of(&whole).unwrap());
        // what a live provider is given is that very document, from any window start
        assert_eq!(c.messages_from(0).unwrap(), whole["messages"]);
        assert_eq!(c.messages_from(1).unwrap(), json!([whole["messages"][1]]));
        assert_eq!(c.messages_from(2).unwrap(), json!([]));
    }

    #[test]
    fn user_and_tool_messages_written_directly_are_those_objects_canonicalised() {
        let mut direct = Conversation::default();
        let mut built = Conversation::default();
        let result = json!({"z": [1, 2.5, "é\u{1}"], "a": {"y": null}});
        direct.user("héllo \"x\"\n").unwrap();
        built.push(json!({"role": "user", "content": "héllo \"x\"\n"})).unwrap();
        let calls =
            canon::to_canonical_string(&json!([{"name": "t", "id": "c-1", "args": {"b": 1, "a": [2]}}])).unwrap();
        direct.assistant("", Some(calls.as_bytes())).unwrap();
        built
            .push(json!({"role": "assistant", "content": "", "tool_calls": [{"name": "t", "id": "c-1", "args": {"b": 1, "a": [2]}}]}))
            .unwrap();
        direct.tool_result("c-1", &result).unwrap();
        built.push(json!({"role": "tool", "call_id": "c-1", "content": result})).unwrap();
        assert_eq!(direct.joined, built.joined);
        assert_eq!(direct.history_tokens(), built.history_tokens());
        // a result given as the canonical text its event holds is the same message
        let mut written = Conversation::default();
        written.user("héllo \"x\"\n").unwrap();
        written.assistant("", Some(calls.as_bytes())).unwrap();
        written.tool_result_written("c-1", &canon::to_canonical_string(&result).unwrap()).unwrap();
        assert_eq!(written.joined, built.joined);
        assert_eq!(written.history_tokens(), built.history_tokens());
        assert_eq!(written.window(Some(1)), built.window(Some(1)));
        // the tool result joins its call's unit in both
        assert_eq!(direct.window(Some(1)), built.window(Some(1)));
        assert_eq!(direct.window(Some(1)).start, 1);
        direct.assistant("done", None).unwrap();
        built.push(json!({"role": "assistant", "content": "done"})).unwrap();
        assert_eq!(direct.joined, built.joined);
        // no canonical form: the conversation is left as it was
        assert!(direct.tool_result("c-2", &json!({"n": 1u64 << 60})).is_err());
        assert_eq!(direct.joined, built.joined);
        assert_eq!(direct.len(), 4);
    }

    #[test]
    fn a_message_that_cannot_be_canonicalised_leaves_the_conversation_as_it_was() {
        let (system, tools, memory) = (json!("sys"), json!([]), json!({}));
        let mut c = Conversation::default();
        c.user("first").unwrap();
        let before = asked(&mut c, &system, &tools, &memory, 0);
        let tokens = c.history_tokens();
        // an integer outside ±(2^53−1) has no canonical form
        assert!(c.push(json!({"role": "tool", "content": {"n": 1u64 << 60}})).is_err());
        assert_eq!((c.len(), c.history_tokens()), (1, tokens));
        assert_eq!(asked(&mut c, &system, &tools, &memory, 0), before);
        c.user("second").unwrap();
        let whole = json!({"system": "sys", "tools": [], "memory": {},
                           "messages": [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]});
        assert_eq!(asked(&mut c, &system, &tools, &memory, 0), digest::of(&whole).unwrap());
        assert_eq!(c.messages_from(0).unwrap(), whole["messages"]);
    }

    #[test]
    fn every_request_digest_equals_the_digest_of_the_whole_request_as_the_history_grows() {
        let (system, tools) = (json!("sys"), json!([{"name": "t"}]));
        let mut c = Conversation::default();
        let mut sent: Vec<Value> = Vec::new();
        for i in 0..40usize {
            let message = json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "x".repeat(i * 37)});
            c.push(message.clone()).unwrap();
            sent.push(message);
            // memory changes now and then; the window start moves now and then
            let memory = json!({"semantic": {"k": i / 7}});
            let start = (i / 13) * 3;
            let whole = json!({"system": "sys", "tools": [{"name": "t"}], "memory": memory,
                               "messages": sent[start.min(sent.len())..]});
            let expected = digest::of(&whole).unwrap();
            assert_eq!(asked(&mut c, &system, &tools, &memory, start), expected, "after message {i}");
            // asking twice without a new message gives the same digest
            assert_eq!(asked(&mut c, &system, &tools, &memory, start), expected);
        }
    }

    #[test]
    fn the_messages_hash_runs_on_whatever_the_memory_and_window_do() {
        let (system, tools) = (json!("sys"), json!([]));
        let mut c = Conversation::default();
        let mut sent: Vec<Value> = Vec::new();
        for i in 0..60usize {
            let message = json!({"role": "user", "content": format!("m{i}")});
            c.push(message.clone()).unwrap();
            sent.push(message);
            // a note comes and goes, and new views pass by now and then
            let memory = match i % 10 {
                0..=4 => json!({}),
                5..=7 => json!({"episodic": {"note": i / 10}}),
                _ => json!({"episodic": {"other": i}}),
            };
            let whole = json!({"system": "sys", "tools": [], "memory": memory, "messages": sent});
            assert_eq!(asked(&mut c, &system, &tools, &memory, 0), digest::of(&whole).unwrap(), "after message {i}");
            // one running hash, fed each message once, serves every memory view
            assert_eq!((c.running.len(), c.running[0].end), (1, i + 1));
            // now and then a window start of its own
            if i % 9 == 0 {
                let start = i / 2;
                let window = json!({"system": "sys", "tools": [], "memory": memory, "messages": sent[start..]});
                assert_eq!(asked(&mut c, &system, &tools, &memory, start), digest::of(&window).unwrap());
                assert!(c.running.len() <= RUNNING);
                // the hash from message 0 goes on where it left off, without the other
                c.running.retain(|r| r.start == 0);
            }
        }
    }

    #[test]
    fn a_conversation_hashed_once_digests_as_one_that_keeps_its_text_and_lets_the_text_go() {
        let (system, tools, memory) = (json!("sys"), json!([]), json!({}));
        let (mut kept, mut once) = (Conversation::default(), Conversation::hashing_once());
        for i in 0..40usize {
            // calls answered by tool results, now and then two messages between requests
            for c in [&mut kept, &mut once] {
                match i % 3 {
                    0 => c.user(&format!("question {i} \u{e9}\"")).unwrap(),
                    1 => c
                        .assistant("", Some(format!(r#"[{{"args":{{"n":{i}}},"id":"c{i}","name":"t"}}]"#).as_bytes()))
                        .unwrap(),
                    _ => c.tool_result(&format!("c{i}"), &json!({"rows": [i, "x"]})).unwrap(),
                }
                if i % 5 == 0 {
                    c.assistant(&format!("answer {i}"), None).unwrap();
                }
            }
            assert_eq!(kept.window(None), once.window(None));
            assert_eq!(
                asked(&mut once, &system, &tools, &memory, 0),
                asked(&mut kept, &system, &tools, &memory, 0),
                "after message {i}"
            );
            // what was hashed is let go of; the kept conversation still has it all
            assert!(once.joined.is_empty(), "after message {i}");
            assert_eq!(once.base + once.joined.len(), kept.joined.len());
        }
        assert_eq!(kept.messages_from(0).unwrap().as_array().map(Vec::len), Some(once.len()));
        assert!(once.messages_from(0).is_err(), "the text is no longer there to read back");
    }

    fn conversation(messages: &[Value]) -> Conversation {
        let mut c = Conversation::default();
        for m in messages {
            c.push(m.clone()).unwrap();
        }
        c
    }

    #[test]
    fn the_oldest_history_goes_first_and_the_current_exchange_always_stays() {
        let c = conversation(&[
            json!({"role": "user", "content": "a".repeat(400)}),
            json!({"role": "assistant", "content": "b".repeat(400)}),
            json!({"role": "user", "content": "c".repeat(40)}),
        ]);
        let all = c.history_tokens();
        assert_eq!(c.window(None), Window { start: 0, tokens: all });
        assert_eq!(c.window(Some(all)).start, 0, "a fitting history is sent whole");
        let last = c.messages[2].tokens;
        assert_eq!(c.window(Some(last + 10)), Window { start: 2, tokens: last });
        // even a budget smaller than the current message keeps it
        assert_eq!(c.window(Some(1)).start, 2);
    }

    #[test]
    fn a_tool_round_trip_is_dropped_or_kept_whole() {
        let c = conversation(&[
            json!({"role": "user", "content": "q"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"name": "t"}, {"name": "u"}]}),
            json!({"role": "tool", "call_id": "1", "content": "x".repeat(200)}),
            json!({"role": "tool", "call_id": "2", "content": "y"}),
            json!({"role": "assistant", "content": "done"}),
        ]);
        let tail = c.messages[4].tokens;
        let unit: u64 = c.messages[1..4].iter().map(|m| m.tokens).sum();
        // room for the last message and part of the round trip: the round trip goes whole
        assert_eq!(c.window(Some(tail + unit - 1)).start, 4);
        assert_eq!(c.window(Some(tail + unit)).start, 1);
        // never a result without its call
        for budget in 0..c.history_tokens() + 5 {
            assert!(![2, 3].contains(&c.window(Some(budget)).start), "budget {budget}");
        }
    }

    #[test]
    fn tokens_are_a_quarter_of_characters_rounded_up() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
        assert_eq!(approx_tokens("éééé"), 1);
    }
}
