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

/// Load-time check: the target parses and starts with a known root.
pub fn check_target(target: &str) -> Result<(), String> {
    let segments = parse(target)?;
    let Some(Segment::Key(root)) = segments.first() else {
        return Err(format!("malformed target \"{target}\""));
    };
    if ROOTS.contains(&root.as_str()) {
        return check_tier(root, &segments[1..]);
    }
    let hint = crate::diag::did_you_mean(root, ROOTS.iter().copied())
        .map(|s| format!(" (did you mean \"{s}\"?)"))
        .unwrap_or_default();
    Err(format!("unknown target \"{root}\"{hint}"))
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
