//! Secrets out of everything stateval keeps. One scrubber for every stage that needs it
//! (docs/design.md §2: a helper two stages share moves down): `external` scrubs what an
//! agent sends before it is digested or recorded, and what a live model answers before
//! it is recorded, in `record` and in replay alike, so a digest taken while recording
//! reproduces when the run replays; the live upstream scrubs its errors before anyone
//! shows them; `grade::judge` scrubs a judge request before its key is taken; and
//! `stateval recording lint` names the [`SecretKind`] of every secret a recording line holds.
//!
//! A secret is replaced, not cut out: what a reviewer needs to read the text stays
//! (`ghp_[scrubbed]`, `postgres://app:[scrubbed]@db/orders`, `password=[scrubbed]`).
//! The replacement depends on the kind only, never on the secret, so two recordings of
//! one request digest alike whichever key was in it; and a replacement is never itself
//! a secret, so scrubbing twice is scrubbing once. The detectors, each with the reason
//! for its bounds, are in [`detectors`]; docs/security.md ("Secrets that never reach a
//! recording") lists them for users, with what none of them catches.
//!
//! A profile adds its own regexes (`scrub = ["acct-[0-9]{8}"]`); each of their matches
//! is replaced whole.

mod detectors;

use std::collections::BTreeSet;

use regex::Regex;
use serde_json::Value;

pub use detectors::is_secret_name;

/// What a secret is replaced with.
pub const REDACTED: &str = "[scrubbed]";

/// Passes over a text at most. One is nearly always enough; a second catches what a
/// replacement uncovered (a field whose value was a token, `password=ghp_…`). The bound
/// only guards against a profile pattern that keeps matching its own output.
const MAX_PASSES: usize = 4;

/// The kinds of secret stateval knows, as `recording lint` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretKind {
    /// A PEM private-key block.
    PrivateKey,
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`.
    GitHubToken,
    /// `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-`.
    SlackToken,
    /// `AIza…`.
    GoogleApiKey,
    /// `sk-…`, `sk-proj-…`, `sk-ant-…`.
    ModelApiKey,
    /// `AKIA…`, `ASIA…`.
    AwsAccessKeyId,
    /// `Bearer …`.
    BearerToken,
    /// `eyJ….….…`.
    Jwt,
    /// 40 base64 characters beside an access key id.
    AwsSecretAccessKey,
    /// `scheme://user:PASSWORD@host`.
    UrlPassword,
    /// The value of a `password`, `passwd`, `secret`, `*_secret`, `api_key`, … field.
    SecretField,
    /// A match of one of the profile's own `scrub` patterns.
    ProfilePattern,
}

impl SecretKind {
    /// The kind in a few words.
    pub fn name(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "PEM private key",
            SecretKind::GitHubToken => "GitHub token",
            SecretKind::SlackToken => "Slack token",
            SecretKind::GoogleApiKey => "Google API key",
            SecretKind::ModelApiKey => "OpenAI or Anthropic API key",
            SecretKind::AwsAccessKeyId => "AWS access key id",
            SecretKind::BearerToken => "bearer token",
            SecretKind::Jwt => "JWT",
            SecretKind::AwsSecretAccessKey => "AWS secret access key",
            SecretKind::UrlPassword => "password in a URL",
            SecretKind::SecretField => "password or secret field",
            SecretKind::ProfilePattern => "match of the profile's scrub patterns",
        }
    }
}

/// The built-in detectors plus a profile's patterns.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    extra: Vec<Regex>,
}

impl Scrubber {
    /// `patterns` were checked when the pipeline loaded.
    pub fn new(patterns: &[String]) -> Scrubber {
        Scrubber { extra: patterns.iter().filter_map(|p| Regex::new(p).ok()).collect() }
    }

    /// This scrubber, also replacing each of `secrets` wherever it appears as written:
    /// secrets no pattern knows, such as a case run's own credentials.
    pub fn with_literals<'s>(mut self, secrets: impl IntoIterator<Item = &'s str>) -> Scrubber {
        let literal = |s: &str| Regex::new(&regex::escape(s)).ok();
        self.extra.extend(secrets.into_iter().filter(|s| !s.is_empty()).filter_map(literal));
        self
    }

    /// Scrub every string in `value`, keys included, and replace the string value of
    /// every member with a secret's name ([`is_secret_name`]) whatever it looks like.
    /// The whole value is one text for the AWS rule: an access key id anywhere in it makes
    /// a 40-character base64 word anywhere in it a secret access key.
    pub fn value(&self, value: &mut Value) {
        let nearby = mentions_aws_key_id(value);
        self.walk(value, nearby);
    }

    /// The text with every secret replaced, or `None` when it holds none.
    pub fn text(&self, text: &str) -> Option<String> {
        self.scrub(text, detectors::has_aws_key_id(text), &mut Vec::new())
    }

    /// The kinds of secret in `text`: those [`Scrubber::text`] replaces.
    pub fn kinds(&self, text: &str) -> BTreeSet<SecretKind> {
        let mut found = Vec::new();
        self.scrub(text, detectors::has_aws_key_id(text), &mut found);
        found.into_iter().collect()
    }

    fn walk(&self, value: &mut Value, nearby: bool) {
        match value {
            Value::String(s) => {
                if let Some(clean) = self.scrub(s, nearby, &mut Vec::new()) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.walk(v, nearby)),
            Value::Object(map) => {
                let dirty: Vec<String> =
                    map.keys().filter(|k| self.scrub(k, nearby, &mut Vec::new()).is_some()).cloned().collect();
                for key in dirty {
                    if let Some(v) = map.remove(&key) {
                        map.insert(self.scrub(&key, nearby, &mut Vec::new()).unwrap_or(key), v);
                    }
                }
                for (key, v) in map.iter_mut() {
                    match v {
                        Value::String(s) if is_secret_name(key) && !s.is_empty() && s != REDACTED => {
                            *s = REDACTED.to_string();
                        }
                        _ => self.walk(v, nearby),
                    }
                }
            }
            _ => {}
        }
    }

    fn scrub(&self, text: &str, nearby: bool, found: &mut Vec<SecretKind>) -> Option<String> {
        let mut out: Option<String> = None;
        for _ in 0..MAX_PASSES {
            let current = out.as_deref().unwrap_or(text);
            let mut next = detectors::pass(current, nearby, found);
            for re in &self.extra {
                if let Some(clean) = detectors::replace(re, next.as_deref().unwrap_or(current), |_| true) {
                    found.push(SecretKind::ProfilePattern);
                    next = Some(clean);
                }
            }
            match next {
                Some(clean) => out = Some(clean),
                None => break,
            }
        }
        out
    }
}

/// Whether any string or member name in `value` holds an AWS access key id.
fn mentions_aws_key_id(value: &Value) -> bool {
    match value {
        Value::String(s) => detectors::has_aws_key_id(s),
        Value::Array(items) => items.iter().any(mentions_aws_key_id),
        Value::Object(map) => map.iter().any(|(k, v)| detectors::has_aws_key_id(k) || mentions_aws_key_id(v)),
        _ => false,
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
