//! The conversation the agent sends to the model, and the request digest.
//!
//! Each message keeps its canonical bytes from the moment it is added, so a request —
//! `{"memory":…,"messages":[…],"system":…,"tools":[…]}` in JCS key order — is assembled
//! by concatenation rather than re-canonicalised in full at every model call.
//!
//! Token counts are a deterministic approximation: ⌈characters / 4⌉ per text, the
//! common rule of thumb for English with BPE tokenisers. They are for budgets and
//! reports, not billing.

use serde_json::{Value, json};

use crate::canon::{self, CanonError, Context, Digest};

/// Characters per token in the approximation.
pub const CHARS_PER_TOKEN: usize = 4;

pub fn approx_tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(CHARS_PER_TOKEN) as u64
}

pub struct Message {
    canonical: Vec<u8>,
    pub tokens: u64,
}

#[derive(Default)]
pub struct Conversation {
    messages: Vec<Message>,
}

impl Conversation {
    pub fn push(&mut self, message: Value) -> Result<(), CanonError> {
        let canonical = canon::to_canonical(&message)?;
        // token estimate over the message text as sent
        let tokens = approx_tokens(std::str::from_utf8(&canonical).unwrap_or_default());
        self.messages.push(Message { canonical, tokens });
        Ok(())
    }

    pub fn user(&mut self, content: &str) -> Result<(), CanonError> {
        self.push(json!({"role": "user", "content": content}))
    }

    pub fn history_tokens(&self) -> u64 {
        self.messages.iter().map(|m| m.tokens).sum()
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Digest of the request built from the system prompt, tool list and memory
    /// (pre-canonicalised by the caller) and every message.
    pub fn request_digest(
        &self,
        system_canonical: &[u8],
        tools_canonical: &[u8],
        memory: &Value,
    ) -> Result<Digest, CanonError> {
        let mut buf = Vec::with_capacity(1024 + self.messages.iter().map(|m| m.canonical.len() + 1).sum::<usize>());
        buf.extend_from_slice(b"{\"memory\":");
        canon::write_canonical(&mut buf, memory)?;
        buf.extend_from_slice(b",\"messages\":[");
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(&m.canonical);
        }
        buf.extend_from_slice(b"],\"system\":");
        buf.extend_from_slice(system_canonical);
        buf.extend_from_slice(b",\"tools\":");
        buf.extend_from_slice(tools_canonical);
        buf.push(b'}');
        Ok(canon::digest(Context::Request, &buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assembled_request_is_exactly_its_canonical_form() {
        let mut c = Conversation::default();
        c.user("héllo").unwrap();
        c.push(json!({"role": "assistant", "content": "", "tool_calls": [{"name": "t", "args": {"b": 1, "a": 2}}]}))
            .unwrap();
        let system = canon::to_canonical(&json!("sys")).unwrap();
        let tools = canon::to_canonical(&json!([{"name": "t"}])).unwrap();
        let memory = json!({"semantic": {"k": 1}});
        let whole = json!({
            "system": "sys", "tools": [{"name": "t"}], "memory": memory,
            "messages": [{"role": "user", "content": "héllo"},
                         {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "args": {"a": 2, "b": 1}}]}]
        });
        assert_eq!(
            c.request_digest(&system, &tools, &memory).unwrap(),
            canon::canonical_digest(Context::Request, &whole).unwrap()
        );
    }

    #[test]
    fn tokens_are_a_quarter_of_characters_rounded_up() {
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("abcd"), 1);
        assert_eq!(approx_tokens("abcde"), 2);
        assert_eq!(approx_tokens("éééé"), 1);
    }
}
