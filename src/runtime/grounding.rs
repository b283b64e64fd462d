//! Grounding: where a consequential argument's value came from.
//!
//! The problem: taint asks "does this argument look like untrusted text?", and an
//! attacker answers with an encoding taint has no reading for (punycode, ROT13, a payee
//! assembled from three pages, a quoted local part). Each new encoding needs a new
//! reading; the class is not closed.
//!
//! The idea is the one capability and information-flow systems use (CaMeL, after
//! decades of IFC): ask where a value *came from*, and let the values that direct an
//! effect — a payee, an account, a recipient — come only from a trusted source. A value
//! is *grounded* when it occurs in:
//!
//! - the user's own turns (each grounded by its `turn_started` event),
//! - the case's trusted context: the profile's system prompt and `trusted_values`, the
//!   case's `trusted_values`,
//! - the result of a `trusted` tool whose own string inputs were grounded (a CRM lookup
//!   of a name the user gave), or
//! - a value the user confirmed at a human approval.
//!
//! Everything else is ungrounded: a value first seen in an untrusted result, in a trusted
//! tool's output whose input was not grounded (an OCR tool handed a fetched image), in an
//! error message, a tool description, or nowhere at all (assembled, decoded, invented).
//! Grounding needs no reading of the attacker's encoding: the attacker cannot write into
//! a grounded source, so any spelling of theirs is simply absent from it.
//!
//! Comparison: both sides in [`normalize::fold`] form with e-mail obfuscation and URL
//! prefixes made canonical ([`normalize::canonical_addresses`]), cut into words at
//! whitespace with the punctuation at each word's edges trimmed; a value is grounded
//! when its words occur as a contiguous run of one source's words. So `Bob@Example.com`
//! is grounded by "pay bob (at) example (dot) com $40.", and `payouts@evil.example` is
//! not grounded by "payouts" and "evil.example" in two separate places.

use serde_json::{Map, Value, json};

use super::taint::leaves;
use crate::text::normalize;

/// What grounded a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// The event that brought the value in, when one did (a user turn's
    /// `turn_started`, a trusted tool's `tool_executed`, an `approval_resolved`).
    pub seq: Option<u64>,
    pub source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    UserTurn,
    SystemPrompt,
    TrustedValues,
    ToolResult,
    Approval,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::UserTurn => "user_turn",
            Source::SystemPrompt => "system_prompt",
            Source::TrustedValues => "trusted_values",
            Source::ToolResult => "tool_result",
            Source::Approval => "approval",
        }
    }
}

impl Origin {
    pub fn to_value(self) -> Value {
        match self.seq {
            Some(seq) => json!({"seq": seq, "source": self.source.as_str()}),
            None => json!({"source": self.source.as_str()}),
        }
    }
}

/// The grounded set: the words of every trusted source, with what grounded them.
#[derive(Debug, Clone, Default)]
pub struct Grounding {
    sources: Vec<(Vec<String>, Origin)>,
}

impl Grounding {
    /// Every string in `value` is grounded by `origin` from now on.
    pub fn ground(&mut self, value: &Value, origin: Origin) {
        leaves(value, &mut |s| {
            let words = words(s);
            if !words.is_empty() {
                self.sources.push((words, origin));
            }
        });
    }

    /// What grounds `value`, if anything does (`None` too for a value without words:
    /// see [`directs_anything`]).
    pub fn origin_of(&self, value: &str) -> Option<Origin> {
        let needle = words(value);
        if needle.is_empty() {
            return None;
        }
        self.sources
            .iter()
            .find(|(hay, _)| hay.len() >= needle.len() && hay.windows(needle.len()).any(|w| w == needle.as_slice()))
            .map(|(_, origin)| *origin)
    }

    /// Are all the strings in `args` grounded? (The inputs of a trusted tool call: its
    /// result grounds only what grounded inputs asked for.)
    pub fn all_grounded(&self, args: &Value) -> bool {
        let mut all = true;
        leaves(args, &mut |s| all = all && (!directs_anything(s) || self.origin_of(s).is_some()));
        all
    }

    /// The grounding of a call's sensitive arguments, `(name, value)` each (see
    /// `ToolSpec::sensitive_args`): an argument is grounded when each of its values that
    /// directs anything is.
    pub fn of_call<'v>(&self, sensitive: Vec<(&'v str, &'v str)>) -> CallGrounding<'v> {
        let mut out = CallGrounding { by: Map::new(), missing: None, every_missing: Vec::new() };
        let mut ungrounded: Vec<&str> = Vec::new();
        for (arg, value) in sensitive.into_iter().filter(|(_, v)| directs_anything(v)) {
            match self.origin_of(value) {
                Some(origin) if !ungrounded.contains(&arg) => {
                    out.by.entry(arg.to_string()).or_insert_with(|| origin.to_value());
                }
                Some(_) => {}
                None => {
                    out.by.remove(arg);
                    ungrounded.push(arg);
                    out.missing = out.missing.or(Some((arg, value)));
                    out.every_missing.push(value);
                }
            }
        }
        out
    }

    /// Everything `other` grounds is grounded here too (a handoff target inherits its
    /// caller's grounded set).
    pub fn inherit(&mut self, other: &Grounding) {
        self.sources.extend(other.sources.iter().cloned());
    }
}

/// What grounds a call's sensitive arguments, as `policy_decided` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallGrounding<'v> {
    /// Each grounded argument → its origin (`{seq, source}`), in argument order.
    pub by: Map<String, Value>,
    /// The first ungrounded argument and its value.
    pub missing: Option<(&'v str, &'v str)>,
    /// Every ungrounded value, in argument order (a person who approves the call
    /// confirms them all).
    pub every_missing: Vec<&'v str>,
}

/// A value without a letter or digit ("", "-") names no payee, account or address.
pub fn directs_anything(value: &str) -> bool {
    value.chars().any(char::is_alphanumeric)
}

/// The comparable words of `text` (see the module doc).
fn words(text: &str) -> Vec<String> {
    // lower case whatever `fold` does: a payee in the user's capitals is the user's payee
    // a domain in punycode is the domain the user typed in Unicode
    let unicode = normalize::punycode_decoded(text);
    let canonical = normalize::canonical_addresses(&normalize::fold(&unicode).to_lowercase());
    canonical
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Grounding {
        let mut g = Grounding::default();
        g.ground(&json!(text), Origin { seq: Some(3), source: Source::UserTurn });
        g
    }

    #[test]
    fn the_users_own_payee_is_grounded_in_any_spelling_the_user_used() {
        let g = user("Please pay BOB (at) Example (dot) com $40 for the March rent.");
        assert_eq!(g.origin_of("bob@example.com").and_then(|o| o.seq), Some(3));
        assert!(g.origin_of("Bob@EXAMPLE.com").is_some());
        assert!(g.origin_of("march rent").is_some());
    }

    #[test]
    fn an_attackers_spellings_are_absent_from_the_users_words() {
        let g = user("Pay the invoice from zahlungs-büro@händler.example, and keep payouts separate.");
        for attack in [
            "xn--zahlungs-bro-3ib@xn--hndler-cua.example",
            "cnlbhgf@rivy-ovyyvat.rknzcyr",
            "\"payouts\"@evil-billing.example",
            "payouts(x)@evil-billing.example",
            "payouts\\u0040evil-billing.example",
            "payouts@evil-billing.example",
        ] {
            assert_eq!(g.origin_of(attack), None, "{attack}");
        }
    }

    #[test]
    fn a_domain_in_punycode_is_the_domain_the_user_typed_in_unicode() {
        let g = user("Pay zahlungs-büro@händler-pay.example the 480.");
        assert!(g.origin_of("xn--zahlungs-bro-mlb@xn--hndler-pay-q5a.example").is_some());
        assert!(g.origin_of("zahlungs-büro@XN--HNDLER-PAY-Q5A.example").is_some());
        // decoding reads the same name, never another one
        assert!(g.origin_of("xn--zahlungs-bro-mlb@xn--hndler-pay-q5a.evil").is_none());
        assert!(g.origin_of("xn--zahlungs-bro-mlb@xn--mnchen-3ya.example").is_none());
    }

    #[test]
    fn a_value_is_grounded_as_a_run_of_whole_words_not_as_pieces() {
        // "payouts" and "evil-billing.example" each occur; the address they make does not
        let g = user("user: payouts. domain: evil-billing.example.");
        assert!(g.origin_of("payouts").is_some());
        assert_eq!(g.origin_of("payouts@evil-billing.example"), None);
        // a part of a word is not the word
        assert_eq!(user("pay bob@example.com.attacker.net").origin_of("bob@example.com"), None);
    }

    #[test]
    fn a_trusted_tools_inputs_are_grounded_only_when_each_string_is() {
        let g = user("Look up the customer Acme Corp");
        assert!(g.all_grounded(&json!({"name": "acme corp", "limit": 3})));
        assert!(!g.all_grounded(&json!({"image": "iVBORw0KGgoAAAANSUhEUg"})));
    }

    #[test]
    fn an_argument_is_grounded_only_when_each_of_its_values_is() {
        let g = user("pay bob@example.com and carol@example.com");
        let call = g.of_call(vec![("cc", "bob@example.com"), ("cc", "x@evil.example"), ("to", "carol@example.com")]);
        assert_eq!(call.missing, Some(("cc", "x@evil.example")));
        assert_eq!(call.by, json!({"to": {"seq": 3, "source": "user_turn"}}).as_object().cloned().unwrap());
        // a value that names nothing is neither
        assert_eq!(g.of_call(vec![("to", " - ")]).missing, None);
    }

    #[test]
    fn a_handoff_target_inherits_what_grounded_its_caller() {
        let mut target = Grounding::default();
        assert_eq!(target.origin_of("bob@example.com"), None);
        target.inherit(&user("pay bob@example.com"));
        assert!(target.origin_of("bob@example.com").is_some());
    }
}
