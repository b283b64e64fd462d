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
use stateval::pipeline::OnDivergence;
use stateval::replay::differences::differences;

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
/// else is proposed as `drop`. Tried in order, so a longer form (a timestamp, a written
/// date) is replaced before the numbers inside it are.
const VOLATILE: &[(&str, &str, &str)] = &[
    ("a uuid", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    // ISO 8601 extended ("2026-11-27T10:00:01.5+01:00", a space for the T, a comma
    // for the point) and basic ("20261127T100001Z")
    (
        "a timestamp",
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?|\b\d{8}T\d{4}(\d{2}([.,]\d+)?)?(Z|[+-]\d{2}(\d{2})?)?\b",
        "<timestamp>",
    ),
    ("a date", r"\d{4}-\d{2}-\d{2}|\b\d{4}-W\d{2}(-\d)?\b", "<date>"),
    // "Friday, November 27, 2026", "Nov 27th 2026", "27 November 2026", "Fri 27 Nov 2026"
    (
        "a written date",
        r"(?:(?:Mon|Tue|Tues|Wed|Wednes|Thu|Thurs|Fri|Sat|Satur|Sun)(?:day)?\.?,?\s+)?(?:(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?\s+\d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?),?\s+\d{4}",
        "<date>",
    ),
    // "27-Nov-2026" (logs, Oracle), "27/Nov/2026" (web server logs)
    ("a written date", r"\b\d{1,2}[-/](?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[-/]\d{2,4}\b", "<date>"),
    // "27/11/2026", "11/27/2026", "27.11.2026", "2026/11/27"
    ("a numeric date", r"\b\d{1,2}[/.]\d{1,2}[/.]\d{4}\b|\b\d{4}/\d{1,2}/\d{1,2}\b", "<date>"),
    ("a weekday", r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b", "<weekday>"),
    (
        "a temporary path",
        r"/(?:tmp|var/tmp|var/folders|private/var/folders|dev/shm)/[A-Za-z0-9._/-]+|[A-Za-z]:\\Users\\[^\\\s]+\\AppData\\Local\\Temp\\[A-Za-z0-9._\\-]+",
        "<tmp>",
    ),
    ("a local port", r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1?\]):\d+", "<local>"),
    // "port 8080", "port=51234", "PORT: 4000"
    ("a port", r"\b((?i:port)\s*[:=#]?\s*)\d{2,5}\b", "${1}<port>"),
    // "pid 4242", "PID: 4242", "process 4242"
    ("a process id", r"\b((?i:pid|process)\s*[:=#]?\s*)\d+\b", "${1}<pid>"),
    (
        "a time of day",
        r"\d{1,2}:\d{2}(:\d{2}([.,]\d+)?)?(\s?[AaPp]\.?[Mm]\.?)?|\b\d{1,2}\s?[AaPp]\.?[Mm]\b\.?",
        "<time>",
    ),
    // "req_01JD4ZQ3X8", "chatcmpl-AbC123xyz", "run-7f3a9c2e": a short word, then a
    // token with a digit in it
    ("an id", r"\b[A-Za-z]{2,12}[_-](?:[A-Za-z0-9]*\d[A-Za-z0-9]{4,}|[A-Za-z0-9]{4,}\d[A-Za-z0-9]*)\b", "<id>"),
    ("a hex id", r"[0-9a-fA-F]{16,}", "<hex>"),
    ("a number", r"\d+(\.\d+)?", "<n>"),
];

/// How much unchanged text is shown on each side of what varies.
const CONTEXT_CHARS: usize = 30;

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
            for pointer in differences(first, other, 50) {
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
        super::out(format!("  {pointer}:"));
        for shown in around_the_difference(examples) {
            super::out(format!("      {shown}"));
        }
        rules.extend(propose(pointer, examples));
    }
    super::out(format!(
        "\nadd to [agents.{}] (recordings made before still replay; `stateval recording lint --fix` rewrites \
         their digests, and goldens that change need a re-bless):",
        case.agent
    ));
    super::out(render(&rules));
    Ok(Exit::Fail)
}

/// A proposed `normalize` rule: the inline table, and what it stands for.
struct Proposal {
    rule: String,
    what: Option<&'static str>,
}

/// The `normalize = [...]` array as a pipeline takes it, one rule a line, each comment
/// after its comma (so the text pastes into a pipeline as it is).
fn render(rules: &[Proposal]) -> String {
    let mut out = String::from("normalize = [\n");
    for p in rules {
        out.push_str(&format!("  {},", p.rule));
        if let Some(what) = p.what {
            out.push_str(&format!("  # {what}"));
        }
        out.push('\n');
    }
    out.push(']');
    out
}

/// A TOML basic string of `text`.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// Each example with what all of them share at the start and the end cut down to
/// [`CONTEXT_CHARS`] on each side: the part that varies is shown whole, however long
/// the value (a system prompt of thousands of characters with a date in it).
fn around_the_difference(examples: &[String]) -> Vec<String> {
    let chars: Vec<Vec<char>> = examples.iter().map(|e| e.chars().collect()).collect();
    let shortest = chars.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = (0..shortest).take_while(|&i| chars.iter().all(|c| c[i] == chars[0][i])).count();
    let suffix = (0..shortest - prefix)
        .take_while(|&i| chars.iter().all(|c| c[c.len() - 1 - i] == chars[0][chars[0].len() - 1 - i]))
        .count();
    chars
        .iter()
        .map(|c| {
            let start = prefix.saturating_sub(CONTEXT_CHARS);
            let end = (c.len() - suffix + CONTEXT_CHARS).min(c.len());
            let mut shown = String::new();
            if start > 0 {
                shown.push('…');
            }
            shown.extend(&c[start..end]);
            if end < c.len() {
                shown.push('…');
            }
            shown
        })
        .collect()
}

/// `/messages/3/content` → `/messages/*/content`: a rule for every message alike.
fn generalise(pointer: &str) -> String {
    pointer.split('/').map(|seg| if seg.parse::<usize>().is_ok() { "*" } else { seg }).collect::<Vec<_>>().join("/")
}

/// `regex` rules, applied in order, when volatile patterns explain every difference
/// (a uuid, then a timestamp, …); else one `drop` rule.
fn propose(pointer: &str, examples: &[String]) -> Vec<Proposal> {
    let path = toml_string(pointer);
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
                // a TOML literal string holds a regex as written (none of these has a `'`)
                let rule = format!("{{ path = {path}, regex = '{pattern}', replace = {} }}", toml_string(replace));
                rules.push(Proposal { rule, what: Some(what) });
                current = next;
            }
            if current.windows(2).all(|w| w[0] == w[1]) {
                return rules;
            }
        }
    }
    vec![Proposal { rule: format!("{{ path = {path}, drop = true }}"), what: None }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(pointer: &str, examples: &[&str]) -> Vec<String> {
        let examples: Vec<String> = examples.iter().map(|e| Value::from(*e).to_string()).collect();
        propose(pointer, &examples).into_iter().map(|p| p.rule).collect()
    }

    #[test]
    fn a_date_that_explains_every_difference_becomes_a_regex_rule() {
        let r = rules("/system", &["Today is 2026-11-23.", "Today is 2026-11-24."]);
        assert_eq!(r.len(), 1);
        assert!(r[0].contains("replace = \"<date>\""), "{r:?}");
        let r = rules(
            "/system",
            &[
                "at 2026-11-23T10:00:01Z id 9f0c1d2e-0000-4000-8000-000000000001",
                "at 2026-11-23T10:00:07Z id 1a2b3c4d-0000-4000-8000-000000000002",
            ],
        );
        assert_eq!(r.len(), 2, "a uuid rule, then a timestamp rule: {r:?}");
        let seeds = propose("/params/seed", &["17".into(), "42".into()]);
        assert_eq!(
            seeds.iter().map(|p| p.rule.as_str()).collect::<Vec<_>>(),
            ["{ path = \"/params/seed\", drop = true }"]
        );
        assert_eq!(generalise("/messages/3/content"), "/messages/*/content");
    }

    #[test]
    fn dates_written_for_people_are_found_as_dates() {
        for (a, b) in [
            ("Today is Friday, November 27, 2026.", "Today is Saturday, November 28, 2026."),
            ("Today is 27 November 2026.", "Today is 28 November 2026."),
            ("as of Nov 27th 2026", "as of Nov 28th 2026"),
            ("on 27/11/2026", "on 28/11/2026"),
        ] {
            let r = rules("/system", &[a, b]);
            assert_eq!(r.len(), 1, "{a} | {b}: {r:?}");
            assert!(r[0].contains("replace = \"<date>\""), "{a}: {r:?}");
        }
        let r = rules(
            "/system",
            &["workdir /tmp/tmpa1b2c3 on 127.0.0.1:40123", "workdir /tmp/tmpz9y8x7 on 127.0.0.1:51234"],
        );
        assert!(r.iter().any(|r| r.contains("<tmp>")) && r.iter().any(|r| r.contains("<local>")), "{r:?}");
    }

    /// Each form is found as what it is, and the proposed rules alone make the two
    /// values agree (no `drop` of the whole field).
    #[test]
    fn every_kind_of_volatile_value_is_found_as_what_it_is() {
        for (what, a, b, placeholder) in [
            (
                "ISO 8601, offset",
                "at 2026-11-27T10:00:01.123+01:00 go",
                "at 2026-11-28T11:30:59.001+01:00 go",
                "<timestamp>",
            ),
            ("ISO 8601, UTC", "2026-11-27T10:00:01Z", "2026-11-27T10:00:07Z", "<timestamp>"),
            ("ISO 8601, space and comma", "2026-11-27 10:00:01,5", "2026-11-27 10:00:02,25", "<timestamp>"),
            ("ISO 8601, basic", "stamp 20261127T100001Z", "stamp 20261128T090000Z", "<timestamp>"),
            ("ISO 8601, date", "on 2026-11-27", "on 2026-11-28", "<date>"),
            ("ISO 8601, week", "week 2026-W48", "week 2026-W49", "<date>"),
            ("US written", "Friday, November 27, 2026", "Saturday, November 28, 2026", "<date>"),
            ("British written", "the 27th of November 2026", "the 1st of December 2026", "<date>"),
            ("abbreviated", "Nov. 27, 2026", "Dec. 1, 2026", "<date>"),
            ("log date", "27-Nov-2026", "28-Nov-2026", "<date>"),
            ("year first, slashes", "2026/11/27", "2026/11/28", "<date>"),
            ("day first, dots", "27.11.2026", "28.11.2026", "<date>"),
            ("weekday", "It is Friday.", "It is Saturday.", "<weekday>"),
            ("clock", "at 10:42:07", "at 11:03:59", "<time>"),
            ("12-hour", "at 3pm", "at 11 a.m.", "<time>"),
            ("12-hour with minutes", "at 3:15 PM", "at 10:05 AM", "<time>"),
            ("uuid", "run 9f0c1d2e-0000-4000-8000-000000000001", "run 1a2b3c4d-0000-4000-8000-000000000002", "<uuid>"),
            ("prefixed id", "request req_01JD4ZQ3X8 sent", "request req_9F2KD81QPL sent", "<id>"),
            ("completion id", "chatcmpl-AbC123xyz", "chatcmpl-Zz9yX8wv7", "<id>"),
            ("hex id", "trace 4bf92f3577b34da6a3ce929d0e0e4736", "trace 00f067aa0ba902b7a3ce929d0e0e4736", "<hex>"),
            ("temporary path", "/tmp/tmpa1b2c3/out.txt", "/tmp/tmpz9y8x7/out.txt", "<tmp>"),
            ("macOS temporary path", "/var/folders/xy/abc123/T/run", "/var/folders/qr/def456/T/run", "<tmp>"),
            (
                "Windows temporary path",
                r"C:\Users\ada\AppData\Local\Temp\tmp1234.txt",
                r"C:\Users\ada\AppData\Local\Temp\tmp9876.txt",
                "<tmp>",
            ),
            ("loopback address", "http://127.0.0.1:40123/v1", "http://127.0.0.1:51234/v1", "<local>"),
            ("localhost", "localhost:3000", "localhost:3001", "<local>"),
            ("port", "listening on port 40123", "listening on port 51234", "<port>"),
            ("pid", "worker pid 4242 ready", "worker pid 5151 ready", "<pid>"),
            ("PID:", "PID: 4242", "PID: 17", "<pid>"),
        ] {
            let r = rules("/system", &[a, b]);
            assert!(r.iter().all(|r| !r.contains("drop")), "{what}: {r:?}");
            assert!(r.iter().any(|r| r.contains(placeholder)), "{what}: expected {placeholder} in {r:?}");
        }
        // the label stays: only the number is replaced
        let r = propose("/system", &[Value::from("pid 1").to_string(), Value::from("pid 2").to_string()]);
        let rule: toml::Table = toml::from_str(&format!("r = {}", r[0].rule)).unwrap();
        let re = regex::Regex::new(rule["r"]["regex"].as_str().unwrap()).unwrap();
        assert_eq!(re.replace_all("worker PID: 77", rule["r"]["replace"].as_str().unwrap()), "worker PID: <pid>");
    }

    #[test]
    fn the_proposed_rules_paste_into_a_pipeline_as_they_are() {
        let mut proposals = propose(
            "/system",
            &[
                Value::from("Friday, November 27, 2026 id 9f0c1d2e-0000-4000-8000-000000000001").to_string(),
                Value::from("Saturday, November 28, 2026 id 1a2b3c4d-0000-4000-8000-000000000002").to_string(),
            ],
        );
        proposals.extend(propose("/odd \"key\"\\x", &["1".into(), "2".into()]));
        let text = render(&proposals);
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("not TOML: {e}\n{text}"));
        let parsed: Vec<stateval::pipeline::NormalizeRule> =
            table["normalize"].clone().try_into().unwrap_or_else(|e| panic!("not normalize rules: {e}\n{text}"));
        assert_eq!(parsed.len(), 3, "{text}");
        assert_eq!(parsed[2].path, "/odd \"key\"\\x");
        // and the rules make the two requests agree
        let compiled = stateval::external::neutral::Rule::compile(&parsed[..2]).expect("the regexes compile");
        let mut a = serde_json::json!({"system": "Friday, November 27, 2026 id 9f0c1d2e-0000-4000-8000-000000000001"});
        let mut b =
            serde_json::json!({"system": "Saturday, November 28, 2026 id 1a2b3c4d-0000-4000-8000-000000000002"});
        stateval::external::neutral::normalize(&mut a, &compiled);
        stateval::external::neutral::normalize(&mut b, &compiled);
        assert_eq!(a, b);
    }

    #[test]
    fn the_varying_part_of_a_long_value_is_shown_whole() {
        let long = "x".repeat(500);
        let examples =
            [format!("{long} Friday, November 27, 2026 {long}"), format!("{long} Saturday, November 28, 2026 {long}")];
        let shown = around_the_difference(&examples);
        assert!(
            shown[0].contains("Friday, November 27, 2026") && shown[1].contains("Saturday, November 28, 2026"),
            "{shown:?}"
        );
        assert!(shown.iter().all(|s| s.starts_with('…') && s.ends_with('…') && s.chars().count() < 120), "{shown:?}");
    }
}
