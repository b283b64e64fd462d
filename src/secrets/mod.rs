//! Secrets out of everything stateval keeps, in one place for every stage that needs it
//! (docs/design.md §2: a helper two stages share moves down): request bodies are scrubbed
//! before they are written into a recording and before they are digested, in `record`
//! and in replay alike, so a digest taken while recording reproduces when the run
//! replays; judge requests before their key is taken; recording lines by `recording lint`.
//!
//! Built in: OpenAI-style keys (`sk-…`), AWS access key ids (`AKIA…`), bearer tokens and
//! JWTs; a profile adds its own regexes (`scrub = ["acct-[0-9]{8}"]`). Every match
//! becomes [`REDACTED`].

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// What a secret is replaced with.
pub const REDACTED: &str = "[scrubbed]";

static BUILT_IN: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // OpenAI and Anthropic keys: sk-…, sk-proj-…, sk-ant-…
        r"sk-[A-Za-z0-9_-]{16,}",
        // AWS access key ids
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        // bearer tokens in any header or text
        r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{12,}",
        // JWTs: three base64url segments, the first a JSON header
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

/// The built-in patterns plus a profile's.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    extra: Vec<Regex>,
}

impl Scrubber {
    /// `patterns` were checked when the pipeline loaded.
    pub fn new(patterns: &[String]) -> Scrubber {
        Scrubber { extra: patterns.iter().filter_map(|p| Regex::new(p).ok()).collect() }
    }

    /// Scrub every string in `value`, keys included.
    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(clean) = self.text(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                let dirty: Vec<String> = map.keys().filter(|k| self.text(k).is_some()).cloned().collect();
                for key in dirty {
                    if let Some(v) = map.remove(&key) {
                        map.insert(self.text(&key).unwrap_or(key), v);
                    }
                }
                map.values_mut().for_each(|v| self.value(v));
            }
            _ => {}
        }
    }

    /// The text with every secret replaced, or `None` when it holds none.
    pub fn text(&self, text: &str) -> Option<String> {
        let mut out: Option<String> = None;
        for re in BUILT_IN.iter().chain(&self.extra) {
            let current = out.as_deref().unwrap_or(text);
            if re.is_match(current) {
                out = Some(re.replace_all(current, REDACTED).into_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_tokens_and_jwts_are_scrubbed_and_ordinary_text_is_not() {
        let s = Scrubber::new(&["acct-[0-9]{8}".into()]);
        let mut v = json!({"system": "use sk-proj-abcdefghijklmnop1234 and AKIAABCDEFGHIJKLMNOP",
                           "h": "Bearer abc.def-ghi_jkl123", "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXNpZw",
                           "n": ["acct-12345678", "ask-me later", 7]});
        s.value(&mut v);
        assert_eq!(
            v,
            json!({"system": "use [scrubbed] and [scrubbed]", "h": "[scrubbed]", "jwt": "[scrubbed]",
                   "n": ["[scrubbed]", "ask-me later", 7]})
        );
        assert_eq!(s.text("nothing secret here"), None);
    }
}
