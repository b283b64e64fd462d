//! Target paths: `memory_at[3].semantic.user.email`, `tool_calls[0].args.to`.
//!
//! The grammar of what an assertion names: the roots the extractors compute, and how a
//! path below a root is spelled. A dataset checks every target against it when it
//! loads; `extract` computes each root's value and walks the path into it.
//!
//! Memory keys may themselves contain dots (`user.email`), so walking an object takes
//! the longest run of the remaining segments that is a key of that object.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Memory tiers, from most to least volatile: the runtime's memory has these (it takes
/// them from here, below it), and a memory target names one.
pub const MEMORY_TIERS: [&str; 4] = ["working", "episodic", "semantic", "procedural"];

/// Root names an assertion may target.
pub const ROOTS: &[&str] = &[
    "final_response",
    "turns",
    "tool_calls",
    "tool_results",
    "tool_sequence",
    "tools",
    "memory",
    "memory_at",
    "policy",
    "context",
    "security",
    "sandbox",
    "usage",
    "status",
    "events",
    "replay",
    "recovery",
    "approvals",
    "memory_lifecycle",
];

/// The roots whose value is an object of fixed members, with those members: a target
/// below one of these roots names one of them. (The others hold memory keys, fixture
/// state, turns and calls: what is below them is the run's.)
pub const MEMBERS: &[(&str, &[&str])] = &[
    ("tools", &["proposed"]),
    ("policy", &["verdicts", "denials", "escalations", "verdict_at_turn"]),
    ("context", &["max_total", "budget_exceeded", "compilations"]),
    ("security", &["flags", "flag_count"]),
    ("usage", &["input_tokens", "output_tokens", "total_tokens", "model_calls"]),
    ("events", &["count"]),
    ("replay", &["divergences"]),
    (
        "recovery",
        &[
            "call_start_ms",
            "detected_ms",
            "recovered_ms",
            "timeout_budget_ms",
            "time_to_detection_ms",
            "time_to_recovery_ms",
            "user_visible_hang_ms",
            "recovered",
            "clean_timeout",
            "detections",
            "fault_fired",
        ],
    ),
];

/// Load-time check: the target parses and starts with a known root, and below a root of
/// fixed members names one of them.
pub fn check_target(target: &str) -> Result<(), String> {
    let segments = parse(target)?;
    let Some(Segment::Key(root)) = segments.first() else {
        return Err(format!("malformed target \"{target}\""));
    };
    if ROOTS.contains(&root.as_str()) {
        check_member(root, &segments[1..])?;
        return check_tier(root, &segments[1..]);
    }
    let hint = crate::diag::did_you_mean(root, ROOTS.iter().copied())
        .map(|s| format!(" (did you mean \"{s}\"?)"))
        .unwrap_or_default();
    Err(format!("unknown target \"{root}\"{hint}"))
}

/// A member of a root of fixed members (`policy.denials`): a misspelt one has no value
/// in any run, so its assertion could only fail, and only once the suite had run.
fn check_member(root: &str, rest: &[Segment]) -> Result<(), String> {
    let Some((_, members)) = MEMBERS.iter().find(|(r, _)| *r == root) else { return Ok(()) };
    let member = match rest.first() {
        None => return Ok(()),
        Some(Segment::Key(member)) => member,
        Some(Segment::Index(n)) => {
            return Err(format!(
                "{root} is an object, not a list: [{n}] names nothing in it; its members: {}",
                members.join(", ")
            ));
        }
    };
    if members.contains(&member.as_str()) {
        return Ok(());
    }
    let hint = crate::diag::did_you_mean(member, members.iter().copied())
        .map(|s| format!(" (did you mean \"{s}\"?)"))
        .unwrap_or_default();
    Err(format!("unknown target \"{root}.{member}\"{hint}; the members of {root}: {}", members.join(", ")))
}

/// A memory root's tier (`memory.semantic.…`, `memory_at[3].episodic.…`) is one the
/// memory has: a misspelt tier holds no key, so a `not contains` over it would pass
/// while testing nothing.
fn check_tier(root: &str, rest: &[Segment]) -> Result<(), String> {
    let tier = match (root, rest) {
        ("memory" | "memory_lifecycle", [Segment::Key(tier), ..]) => tier,
        ("memory_at", [Segment::Index(_), Segment::Key(tier), ..]) => tier,
        _ => return Ok(()),
    };
    let tiers = MEMORY_TIERS;
    if tiers.contains(&tier.as_str()) {
        return Ok(());
    }
    let hint = crate::diag::did_you_mean(tier, tiers).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
    Err(format!("unknown memory tier \"{tier}\" in {root}{hint}; the tiers: {}", tiers.join(", ")))
}

/// Split a target into segments; an error says what is malformed.
pub fn parse(target: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    for part in target.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() && (out.is_empty() || rest.is_empty()) {
            return Err(format!("malformed target \"{target}\": empty segment"));
        }
        if !key.is_empty() {
            out.push(Segment::Key(key.to_string()));
        }
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(|| format!("malformed target \"{target}\": missing ']'"))?;
            let index = rest[1..close]
                .parse::<usize>()
                .map_err(|_| format!("malformed target \"{target}\": index \"{}\" is not a number", &rest[1..close]))?;
            out.push(Segment::Index(index));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!("malformed target \"{target}\": unexpected \"{rest}\""));
            }
        }
    }
    Ok(out)
}

/// Walk `segments` into `value`.
pub fn walk<'v>(mut value: &'v Value, segments: &[Segment]) -> Option<&'v Value> {
    let mut i = 0;
    while i < segments.len() {
        match (&segments[i], value) {
            (Segment::Index(n), Value::Array(items)) => {
                value = items.get(*n)?;
                i += 1;
            }
            (Segment::Key(_), Value::Object(map)) => {
                // longest run of keys first: "user.email" before "user"
                let run = segments[i..].iter().take_while(|s| matches!(s, Segment::Key(_))).count();
                let (taken, next) = (1..=run).rev().find_map(|n| {
                    let key = segments[i..i + n]
                        .iter()
                        .map(|s| match s {
                            Segment::Key(k) => k.as_str(),
                            Segment::Index(_) => "",
                        })
                        .collect::<Vec<_>>()
                        .join(".");
                    map.get(&key).map(|v| (n, v))
                })?;
                value = next;
                i += taken;
            }
            _ => return None,
        }
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_memory_tier_is_refused_at_load_with_the_tier_it_meant() {
        assert_eq!(
            check_target("memory.semantik.x").unwrap_err(),
            "unknown memory tier \"semantik\" in memory (did you mean \"semantic\"?); the tiers: working, episodic, semantic, procedural"
        );
        assert!(check_target("memory_at[2].episodc.k").unwrap_err().contains("(did you mean \"episodic\"?)"));
        assert!(check_target("memory_lifecycle.nope.k").is_err());
        assert!(check_target("memory.semantic.user.email").is_ok() && check_target("memory_at[0].working").is_ok());
    }
    #[test]
    fn a_misspelt_member_of_a_fixed_root_is_refused_at_load_with_the_member_it_meant() {
        assert_eq!(
            check_target("policy.denial").unwrap_err(),
            "unknown target \"policy.denial\" (did you mean \"denials\"?); the members of policy: \
             verdicts, denials, escalations, verdict_at_turn"
        );
        assert!(check_target("usage.tokens").unwrap_err().starts_with("unknown target \"usage.tokens\""));
        assert!(check_target("events[0]").unwrap_err().contains("events is an object, not a list"));
        for ok in [
            "policy",
            "policy.verdicts[0].tool",
            "policy.verdict_at_turn[2]",
            "usage.output_tokens",
            "sandbox.anything",
        ] {
            assert_eq!(check_target(ok), Ok(()), "{ok}");
        }
    }

    use serde_json::json;

    #[test]
    fn targets_parse_into_keys_and_indices() {
        assert_eq!(
            parse("memory_at[3].semantic.user").unwrap(),
            vec![
                Segment::Key("memory_at".into()),
                Segment::Index(3),
                Segment::Key("semantic".into()),
                Segment::Key("user".into())
            ]
        );
        assert!(parse("a..b").is_err());
        assert!(parse("a[x]").is_err());
        assert!(parse("a[1").is_err());
    }

    #[test]
    fn dotted_keys_resolve_by_longest_match() {
        let v = json!({"semantic": {"user.email": "a@x", "user": {"name": "n"}}});
        let get = |t: &str| walk(&v, &parse(t).unwrap()).cloned();
        assert_eq!(get("semantic.user.email"), Some(json!("a@x")));
        assert_eq!(get("semantic.user.name"), Some(json!("n")));
        assert_eq!(get("semantic.nope"), None);
    }
}
