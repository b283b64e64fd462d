//! `stateval doctor [PIPELINE] --case ID [--runs N]`: replay a case's external agent N
//! times and list the request fields that differ between replays — a date in the system
//! prompt, a uuid the agent makes up, a map iterated in hash order — with example
//! values and a `normalize` rule for the profile that would make them agree.
//!
//! Exit 0 when every replay asked exactly the same; 1 when fields vary (so a CI job can
//! keep an agent deterministic); 2 on invalid input.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

use super::{CliError, Exit};
use stateval::external::neutral;
use stateval::pipeline::OnDivergence;

#[derive(clap::Args)]
pub struct Args {
    /// Pipeline definition.
    #[arg(default_value = super::DEFAULT_PIPELINE)]
    pipeline: PathBuf,
    /// The case to replay (its agent must be `kind = "external"`).
    #[arg(long = "case", value_name = "ID")]
    case: String,
    /// Replays to compare.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// Values that differ only by one of these are made equal by a `regex` rule; anything
/// else is proposed as `drop`.
const VOLATILE: &[(&str, &str, &str)] = &[
    ("a uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    ("a timestamp", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", "<timestamp>"),
    ("a date", r"\d{4}-\d{2}-\d{2}", "<date>"),
    ("a time of day", r"\d{2}:\d{2}(:\d{2}(\.\d+)?)?", "<time>"),
    ("a hex id", r"[0-9a-fA-F]{16,}", "<hex>"),
    ("a number", r"\d+(\.\d+)?", "<n>"),
];

pub fn run(args: Args) -> Result<Exit, CliError> {
    if args.runs < 2 {
        return Err(CliError::invalid("--runs: at least 2 replays are needed to compare"));
    }
    let (mut plan, case) = super::external_case(
        &args.pipeline,
        &args.case,
        "its requests are stateval's own; doctor looks at external agents",
    )?;
    // every replay runs to its end, so every request is seen
    plan.pipeline.replay.on_divergence = OnDivergence::Warn;
    let recording = case.recordings.first().ok_or_else(|| CliError::invalid("the case has no recording"))?;
    let recording = recording.load().map_err(CliError::invalid)?;
    let mut replays: Vec<Vec<Value>> = Vec::new();
    for _ in 0..args.runs {
        plan.requests = Some(Mutex::new(Vec::new()));
        plan.replay(&case, 0, &recording, Box::new(Vec::<u8>::new()), None, &[]).map_err(CliError::from)?;
        replays.push(plan.requests.take().and_then(|m| m.into_inner().ok()).unwrap_or_default());
    }
    let calls = replays.iter().map(Vec::len).max().unwrap_or(0);
    super::out(format!("doctor: {} replays of {}, {calls} model call(s) each at most", args.runs, case.id));
    if replays.iter().any(|r| r.len() != calls) {
        let counts: Vec<String> = replays.iter().map(|r| r.len().to_string()).collect();
        super::out(format!("  the number of model calls varies between replays: {}", counts.join(", ")));
    }
    // pointer (indices generalised to *) → example values, one per replay where it differs
    let mut varying: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for position in 0..calls {
        let Some(first) = replays[0].get(position) else { continue };
        for other in replays.iter().skip(1).filter_map(|r| r.get(position)) {
            for pointer in neutral::differences(first, other, 50) {
                let examples = varying.entry(generalise(&pointer)).or_default();
                for value in [first.pointer(&pointer), other.pointer(&pointer)].into_iter().flatten() {
                    let text = value.to_string();
                    if !examples.contains(&text) && examples.len() < 4 {
                        examples.push(text);
                    }
                }
            }
        }
    }
    if varying.is_empty() && replays.iter().all(|r| r.len() == calls) {
        super::out("  every replay sent exactly the same requests: nothing to normalise");
        return Ok(Exit::Pass);
    }
    super::out("  fields that differ between replays (JSON Pointers into the neutral request):");
    let mut rules = Vec::new();
    for (pointer, examples) in &varying {
        let shown: Vec<String> = examples.iter().map(|e| shorten(e)).collect();
        super::out(format!("  {pointer}: {}", shown.join(" | ")));
        rules.extend(propose(pointer, examples));
    }
    super::out(format!("\nadd to [agents.{}] (and re-record or re-bless what changes):\nnormalize = [", case.agent));
    for rule in rules {
        super::out(format!("  {rule},"));
    }
    super::out("]");
    Ok(Exit::Fail)
}

/// `/messages/3/content` → `/messages/*/content`: a rule for every message alike.
fn generalise(pointer: &str) -> String {
    pointer.split('/').map(|seg| if seg.parse::<usize>().is_ok() { "*" } else { seg }).collect::<Vec<_>>().join("/")
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// `regex` rules, applied in order, when volatile patterns explain every difference
/// (a uuid, then a timestamp, …); else one `drop` rule.
fn propose(pointer: &str, examples: &[String]) -> Vec<String> {
    let strings: Vec<String> = examples
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if strings.len() == examples.len() && strings.len() >= 2 {
        let mut current = strings;
        let mut rules = Vec::new();
        for (what, pattern, replace) in VOLATILE {
            let Ok(re) = regex::Regex::new(pattern) else { continue };
            let next: Vec<String> = current.iter().map(|s| re.replace_all(s, *replace).into_owned()).collect();
            if next != current {
                rules.push(format!("{{ path = {pointer:?}, regex = '{pattern}', replace = {replace:?} }}  # {what}"));
                current = next;
            }
            if current.windows(2).all(|w| w[0] == w[1]) {
                return rules;
            }
        }
    }
    vec![format!("{{ path = {pointer:?}, drop = true }}")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_that_explains_every_difference_becomes_a_regex_rule() {
        let rules = propose("/system", &["\"Today is 2026-11-23.\"".into(), "\"Today is 2026-11-24.\"".into()]);
        assert_eq!(rules.len(), 1);
        assert!(rules[0].contains("replace = \"<date>\""), "{rules:?}");
        let both = [
            "\"at 2026-11-23T10:00:01Z id 9f0c1d2e-0000-4000-8000-000000000001\"".to_string(),
            "\"at 2026-11-23T10:00:07Z id 1a2b3c4d-0000-4000-8000-000000000002\"".to_string(),
        ];
        let rules = propose("/system", &both);
        assert_eq!(rules.len(), 2, "a uuid rule, then a timestamp rule: {rules:?}");
        let rules = propose("/params/seed", &["17".into(), "42".into()]);
        assert_eq!(rules, ["{ path = \"/params/seed\", drop = true }"]);
        assert_eq!(generalise("/messages/3/content"), "/messages/*/content");
    }
}
