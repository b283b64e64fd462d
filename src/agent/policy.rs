//! Policy: priority-ordered rules over every proposal (tool calls and memory writes).
//!
//! Every rule that matches a call votes; the strongest verdict wins (deny beats
//! escalate beats allow), and among the rules with that verdict the highest `priority`
//! (then the earliest in the file) is the one reported. No matching rule: allow, by the
//! rule named `default`.
//!
//! Under every profile's rules lies one floor ([`taint_floor`]): a call of a
//! `financial` or `privileged` tool whose arguments carry untrusted content is denied
//! (rule [`TAINT_FLOOR_RULE`]), whatever the profile says — an agent that holds money
//! or authority is a deputy an attacker can confuse whether or not its profile thought
//! to write the rule, and whether or not it is marked `privileged`.
//!
//! Beside it lies the grounding floor ([`grounding_floor`]): a call whose sensitive
//! argument (a payee, an account, a recipient) is grounded in no trusted source is
//! denied — or escalated, or let through, as the profile's `ungrounded` says — by rule
//! [`GROUNDING_FLOOR_RULE`]. Taint explains where attacker text went; grounding is what
//! stops an encoding taint has no reading for (`agent::grounding`). When every
//! sensitive value of a call is grounded, taint alone denies nothing: the user's own
//! payee is the user's even when a fetched page also names it (the call still says it
//! carried untrusted content, and a profile rule `when = "args_tainted"` still acts).
//!
//! And the request floor ([`request_floor`]): a tool whose manifest says which words of
//! a user's request authorise it (`requested_by`; a `destructive` tool's verbs by
//! default) is denied, escalated or let through as the profile's `unrequested` says
//! when no user turn said any of them (rule [`REQUEST_FLOOR_RULE`]): arguments that
//! are all grounded do not make an effect the user asked for.

use crate::pipeline::{PolicyRule, RuleWhen, SafetyClass, Ungrounded, Verdict};

/// What policy knows about a proposal.
pub struct Proposal<'a> {
    pub tool: &'a str,
    pub class: SafetyClass,
    /// Some argument carries content from an untrusted tool result.
    pub args_tainted: bool,
    /// Some sensitive argument is grounded in no trusted source: its name and value.
    pub ungrounded: Option<(&'a str, &'a str)>,
    /// The tool needs a user's request to say one of these words, and none did.
    pub unrequested: Option<&'a [&'a str]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub rule: String,
    pub reason: String,
}

pub fn decide(rules: &[PolicyRule], p: &Proposal<'_>) -> Decision {
    let matching = rules.iter().enumerate().filter(|(_, r)| {
        r.tool.as_deref().is_none_or(|t| t == "*" || t == p.tool)
            && r.safety_class.is_none_or(|c| c == p.class)
            && match r.when {
                RuleWhen::Always => true,
                RuleWhen::ArgsTainted => p.args_tainted,
                RuleWhen::ArgsUngrounded => p.ungrounded.is_some(),
            }
    });
    // strongest verdict, then highest priority, then earliest in the file
    let winner =
        matching.max_by(|(i, a), (j, b)| a.verdict.cmp(&b.verdict).then(a.priority.cmp(&b.priority)).then(j.cmp(i)));
    match winner {
        Some((_, rule)) => Decision {
            verdict: rule.verdict,
            rule: rule.id.clone(),
            reason: rule.reason.clone().unwrap_or_else(|| describe(rule, p)),
        },
        None => Decision { verdict: Verdict::Allow, rule: "default".into(), reason: "no rule matched".into() },
    }
}

/// The rule id of the built-in floor.
pub const TAINT_FLOOR_RULE: &str = "tainted-sensitive-call";

/// The floor's denial of `p`, if it applies (see the module doc).
pub fn taint_floor(p: &Proposal<'_>) -> Option<Decision> {
    let sensitive = matches!(p.class, SafetyClass::Financial | SafetyClass::Privileged);
    (sensitive && p.args_tainted).then(|| Decision {
        verdict: Verdict::Deny,
        rule: TAINT_FLOOR_RULE.into(),
        reason: format!("arguments carry untrusted content and {} is a {} tool", p.tool, p.class.as_str()),
    })
}

/// The rule id of the grounding floor.
pub const GROUNDING_FLOOR_RULE: &str = "ungrounded-sensitive-call";

/// The grounding floor's decision on `p` under the profile's `ungrounded` setting, if
/// it has one (see the module doc).
pub fn grounding_floor(p: &Proposal<'_>, mode: Ungrounded) -> Option<Decision> {
    let (arg, value) = p.ungrounded?;
    let verdict = match mode {
        Ungrounded::Deny => Verdict::Deny,
        Ungrounded::Escalate => Verdict::Escalate,
        Ungrounded::Allow => return None,
    };
    Some(Decision {
        verdict,
        rule: GROUNDING_FLOOR_RULE.into(),
        reason: format!(
            "argument {arg} = {value:?} of {} is grounded in no trusted source (the user's turns, trusted values, the \
             system prompt, a trusted tool's result of grounded inputs)",
            p.tool
        ),
    })
}

/// The rule id of the request floor.
pub const REQUEST_FLOOR_RULE: &str = "unrequested-effect";

/// The request floor's decision on `p` under the profile's `unrequested` setting: a
/// call of a tool that only a user's request may set off, when no user turn asked for
/// it (see the module doc).
pub fn request_floor(p: &Proposal<'_>, mode: Ungrounded) -> Option<Decision> {
    let words = p.unrequested?;
    let verdict = match mode {
        Ungrounded::Deny => Verdict::Deny,
        Ungrounded::Escalate => Verdict::Escalate,
        Ungrounded::Allow => return None,
    };
    let quoted: Vec<String> = words.iter().take(6).map(|w| format!("{w:?}")).collect();
    Some(Decision {
        verdict,
        rule: REQUEST_FLOOR_RULE.into(),
        reason: format!(
            "no user turn asked for {}: its manifest needs the user's request to say {}{}",
            p.tool,
            quoted.join(" or "),
            if words.len() > 6 { " or another of its words" } else { "" }
        ),
    })
}

fn describe(rule: &PolicyRule, p: &Proposal<'_>) -> String {
    let mut why = vec![format!("tool {}", p.tool)];
    if rule.safety_class.is_some() {
        why.push(format!("safety class {}", p.class.as_str()));
    }
    if rule.when == RuleWhen::ArgsTainted {
        why.push("arguments carry untrusted content".into());
    }
    if rule.when == RuleWhen::ArgsUngrounded {
        why.push("a sensitive argument is grounded in no trusted source".into());
    }
    format!("{} ({})", rule.verdict.as_str(), why.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        id: &str,
        tool: Option<&str>,
        class: Option<SafetyClass>,
        when: RuleWhen,
        verdict: Verdict,
        priority: i64,
    ) -> PolicyRule {
        PolicyRule {
            id: id.into(),
            tool: tool.map(Into::into),
            safety_class: class,
            when,
            verdict,
            priority,
            reason: None,
        }
    }

    #[test]
    fn deny_beats_escalate_beats_allow_whatever_the_order() {
        let rules = vec![
            rule("allow-all", None, None, RuleWhen::Always, Verdict::Allow, 10),
            rule("escalate-fin", None, Some(SafetyClass::Financial), RuleWhen::Always, Verdict::Escalate, 0),
            rule("deny-tainted", Some("transfer"), None, RuleWhen::ArgsTainted, Verdict::Deny, -5),
        ];
        let p = |tainted| Proposal {
            tool: "transfer",
            class: SafetyClass::Financial,
            args_tainted: tainted,
            ungrounded: None,
            unrequested: None,
        };
        assert_eq!(decide(&rules, &p(false)).rule, "escalate-fin");
        assert_eq!(decide(&rules, &p(true)).verdict, Verdict::Deny);
        let read = Proposal {
            tool: "get_balance",
            class: SafetyClass::Read,
            args_tainted: false,
            ungrounded: None,
            unrequested: None,
        };
        assert_eq!(decide(&rules, &read).rule, "allow-all");
    }

    #[test]
    fn priority_then_file_order_picks_the_reported_rule() {
        let rules = vec![
            rule("first", None, None, RuleWhen::Always, Verdict::Deny, 0),
            rule("second", None, None, RuleWhen::Always, Verdict::Deny, 0),
            rule("urgent", None, None, RuleWhen::Always, Verdict::Deny, 5),
        ];
        let p =
            Proposal { tool: "x", class: SafetyClass::Read, args_tainted: false, ungrounded: None, unrequested: None };
        assert_eq!(decide(&rules, &p).rule, "urgent");
        assert_eq!(decide(&rules[..2], &p).rule, "first");
    }

    #[test]
    fn a_tainted_call_of_a_sensitive_tool_meets_the_floor_and_a_clean_or_read_one_does_not() {
        let p = |class, tainted| Proposal {
            tool: "transfer",
            class,
            args_tainted: tainted,
            ungrounded: None,
            unrequested: None,
        };
        assert_eq!(taint_floor(&p(SafetyClass::Financial, true)).map(|d| d.rule), Some(TAINT_FLOOR_RULE.into()));
        assert_eq!(taint_floor(&p(SafetyClass::Privileged, true)).map(|d| d.verdict), Some(Verdict::Deny));
        assert_eq!(taint_floor(&p(SafetyClass::Financial, false)), None);
        assert_eq!(taint_floor(&p(SafetyClass::Read, true)), None);
    }

    #[test]
    fn an_ungrounded_sensitive_argument_meets_the_grounding_floor_as_the_profile_says() {
        let p = |ungrounded| Proposal {
            tool: "transfer",
            class: SafetyClass::Financial,
            args_tainted: false,
            ungrounded,
            unrequested: None,
        };
        let attack = p(Some(("to", "payouts@evil-billing.example")));
        let denied = grounding_floor(&attack, Ungrounded::Deny);
        assert_eq!(denied.as_ref().map(|d| (d.verdict, d.rule.as_str())), Some((Verdict::Deny, GROUNDING_FLOOR_RULE)));
        assert!(denied.is_some_and(|d| d.reason.contains("to = \"payouts@evil-billing.example\"")));
        assert_eq!(grounding_floor(&attack, Ungrounded::Escalate).map(|d| d.verdict), Some(Verdict::Escalate));
        assert_eq!(grounding_floor(&attack, Ungrounded::Allow), None);
        assert_eq!(grounding_floor(&p(None), Ungrounded::Deny), None);
    }

    #[test]
    fn an_args_ungrounded_rule_matches_only_an_ungrounded_call() {
        let rules = vec![rule("ask", Some("send"), None, RuleWhen::ArgsUngrounded, Verdict::Escalate, 0)];
        let p = |ungrounded| Proposal {
            tool: "send",
            class: SafetyClass::Network,
            args_tainted: false,
            ungrounded,
            unrequested: None,
        };
        assert_eq!(decide(&rules, &p(Some(("to", "x@evil.example")))).rule, "ask");
        assert_eq!(decide(&rules, &p(None)).rule, "default");
    }

    #[test]
    fn no_matching_rule_allows_by_default() {
        let d = decide(
            &[],
            &Proposal { tool: "x", class: SafetyClass::Write, args_tainted: true, ungrounded: None, unrequested: None },
        );
        assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Allow, "default"));
    }
}
