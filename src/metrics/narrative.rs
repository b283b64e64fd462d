//! Narrative-vs-trace divergence: does the final answer describe what the agent actually
//! did (docs/metrics.md §5, §7)?
//!
//! Agents narrate. "I created the issue" with no `create_issue` call is the failure users
//! remember, and a model judge is the wrong tool to catch it in CI: it is neither
//! deterministic nor free. This module compares words with tool tokens, no model: a
//! *claimed action* is a mutating verb plus the next content word ("created … issue" →
//! `create_issue`), a call is *mentioned* when its distinctive name tokens appear in the
//! text, and three kinds of divergence are listed: calls the narrative never accounts for,
//! arguments it misstates, and actions it claims that never happened.
//!
//! Design choice: one normalisation (verb forms to their base, other words singularised)
//! is applied to text words, tool tokens, argument keys and claimed nouns alike, so
//! matching is symmetric. Narration is graded here but never decides a security verdict
//! (§7): the gate only reads this report, it is not fed back into anything observable.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::gate::{BlockOutcome, Bound, CaseBlock, flag, float, optional_number, optional_strings, run_outcome};
use super::trace::{MetricTrace, TracedCall, bare_name};
use super::{MetricError, expect_object, reject_unknown_keys};

/// Verbs whose claim asserts a change in the world (docs/metrics.md §5, in its order).
pub const MUTATING_VERBS: [&str; 22] = [
    "create", "update", "delete", "remove", "send", "write", "post", "insert", "set", "put", "patch", "publish",
    "destroy", "drop", "add", "edit", "upload", "merge", "close", "cancel", "approve", "revoke",
];

/// Irregular past forms of mutating verbs that no suffix rule reaches.
const IRREGULAR: [(&str, &str); 3] = [("sent", "send"), ("wrote", "write"), ("written", "write")];

/// Read verbs too generic to show that a call was narrated ("I searched" says little).
pub const GENERIC_READ_VERBS: [&str; 11] =
    ["get", "list", "fetch", "read", "search", "find", "query", "lookup", "check", "show", "view"];

/// Words skipped when looking for a claimed noun: articles, possessives, demonstratives,
/// prepositions and particles (numbers are skipped by [`is_stopword`]).
const STOPWORDS: [&str; 31] = [
    "a", "an", "the", // articles
    "my", "your", "his", "her", "its", "our", "their", "mine", "yours", "hers", "ours", "theirs", "this", "that",
    "these", "those", // demonstratives
    "to", "from", "for", "with", "in", "on", "at", "of", "by", "into", "as", "about",
];

/// A tool token shorter than this is too generic to require in the text (`id`, `v2`).
const MIN_MENTION_TOKEN_CHARS: usize = 3;

/// Words a claimed action's noun is looked for after its verb.
const CLAIM_WINDOW: usize = 3;

fn is_mutating_verb(word: &str) -> bool {
    MUTATING_VERBS.contains(&word)
}

/// Articles, possessives, demonstratives, prepositions/particles and numbers.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word) || word.chars().all(char::is_numeric)
}

/// The base of a mutating verb form (`created`, `sets`, `dropped`, `setting`, `sent`), if `word` is one.
pub fn verb_base(word: &str) -> Option<&'static str> {
    let known = |stem: &str| MUTATING_VERBS.iter().copied().find(|v| *v == stem);
    if let Some(v) = known(word) {
        return Some(v);
    }
    if let Some((_, base)) = IRREGULAR.iter().find(|(form, _)| *form == word) {
        return known(base);
    }
    let undouble = |stem: &str| {
        let mut chars = stem.chars().rev();
        match (chars.next(), chars.next()) {
            (Some(a), Some(b)) if a == b => Some(stem[..stem.len() - a.len_utf8()].to_string()),
            _ => None,
        }
    };
    for suffix in ["ing", "ed", "es", "s", "d"] {
        let Some(stem) = word.strip_suffix(suffix) else {
            continue;
        };
        let mut candidates = vec![stem.to_string()];
        if suffix == "ing" {
            candidates.push(format!("{stem}e")); // creating → create
        }
        if matches!(suffix, "ing" | "ed") {
            candidates.extend(undouble(stem)); // dropped → drop, setting → set
        }
        if let Some(v) = candidates.iter().find_map(|c| known(c)) {
            return Some(v);
        }
    }
    None
}

/// A non-verb word made singular: -ies → -y (words longer than 4); -sses, -shes, -ches,
/// -xes, -zes drop "es"; otherwise a final -s is dropped unless the word ends in ss, us or
/// is, or has 3 letters or fewer.
pub fn singularise(word: &str) -> String {
    let letters = word.chars().count();
    if letters > 4 && word.ends_with("ies") {
        return format!("{}y", &word[..word.len() - 3]);
    }
    if ["sses", "shes", "ches", "xes", "zes"].iter().any(|s| word.ends_with(s)) {
        return word[..word.len() - 2].to_string();
    }
    if word.ends_with('s') && letters > 3 && !["ss", "us", "is"].iter().any(|s| word.ends_with(s)) {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// The one normalisation: a mutating verb form to its base, any other word singularised.
pub fn normalise(word: &str) -> String {
    verb_base(word).map_or_else(|| singularise(word), str::to_string)
}

/// A text's words: lowercased, split on non-alphanumerics, each paired with its normal form.
fn text_words(text: &str) -> Vec<(String, String)> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| (w.to_string(), normalise(w)))
        .collect()
}

/// Tokens of a tool name or argument key: split on `_`, `-`, `.` and camelCase
/// boundaries, lowercased, normalised.
pub fn name_tokens(name: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    for part in name.split(['_', '-', '.']) {
        let chars: Vec<char> = part.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            // fooBar | HTTPRequest (split before the R) | v2Beta
            let boundary = c.is_uppercase()
                && previous.is_some_and(|p| {
                    p.is_lowercase() || p.is_numeric() || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
                });
            if boundary && !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            tokens.push(current);
        }
    }
    tokens.iter().map(|t| normalise(t)).collect()
}

/// Does `needle` occur as a contiguous run of whole words in `haystack`?
/// "Does this run of words occur in the text?", answered from an index of where each
/// word occurs, and remembered: 20,000 calls asking about the same key read the text once.
struct WordRuns<'t> {
    words: &'t [String],
    at: HashMap<&'t str, Vec<usize>>,
    answers: HashMap<Vec<String>, bool>,
}

impl<'t> WordRuns<'t> {
    fn new(words: &'t [String]) -> Self {
        let mut at: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, w) in words.iter().enumerate() {
            at.entry(w.as_str()).or_default().push(i);
        }
        WordRuns { words, at, answers: Default::default() }
    }

    /// `needle` occurs as consecutive words; an empty needle never does.
    fn contains(&mut self, needle: Vec<String>) -> bool {
        let Some(first) = needle.first() else { return false };
        if let Some(known) = self.answers.get(&needle) {
            return *known;
        }
        let found = self.at.get(first.as_str()).is_some_and(|starts| {
            starts.iter().any(|&s| self.words.get(s..s + needle.len()).is_some_and(|w| w == needle.as_slice()))
        });
        self.answers.insert(needle, found);
        found
    }
}

/// One divergence between the narrative and the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NarrativeItem {
    /// A recorded call neither mentioned nor matched by a claimed action.
    PresentButUnclaimed { call_index: usize, tool: String, mutating: bool },
    /// A mentioned call's top-level scalar argument whose key is in the text but whose value is not.
    ArgMismatch { call_index: usize, tool: String, key: String, value: Value, mutating: bool },
    /// A claimed action that no recorded call matches.
    ClaimedButAbsent { action: String, word_index: usize, mutating: bool },
}

/// Which tools count as mutating, and the optional divergence bound.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NarrativeOptions {
    /// Always mutating (unless also read-only).
    pub mutating_tools: Vec<String>,
    /// Never mutating; wins over `mutating_tools`.
    pub readonly_tools: Vec<String>,
    /// Also fail when `divergence_score` is above this.
    pub max_divergence_score: Option<f64>,
}

impl NarrativeOptions {
    fn names(list: &[String], name: &str) -> bool {
        list.iter().any(|n| n == name || n == bare_name(name))
    }

    /// `readonly_tools` names it → no; `mutating_tools` names it → yes; else one of its
    /// tokens is a mutating verb.
    pub fn is_mutating(&self, name: &str, tokens: &[String]) -> bool {
        if Self::names(&self.readonly_tools, name) {
            return false;
        }
        Self::names(&self.mutating_tools, name) || tokens.iter().any(|t| is_mutating_verb(t))
    }
}

/// Divergence between a narrative and the recorded calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NarrativeReport {
    /// `min(1, items / max(1, calls + claimed actions))`.
    pub divergence_score: f64,
    /// Claimed actions no call matches.
    pub claimed_but_absent: usize,
    /// Calls neither mentioned nor claimed.
    pub present_but_unclaimed: usize,
    /// Misstated arguments of mentioned calls.
    pub arg_mismatch: usize,
    /// No claimed-but-absent mutating action, and the score within `max_divergence_score`.
    pub gate_passed: bool,
    /// present-but-unclaimed (trace order), then arg mismatches, then claimed-but-absent (text order).
    pub items: Vec<NarrativeItem>,
}

impl NarrativeReport {
    /// `divergence 0.33: 1 claimed but absent, 0 unclaimed, 0 arg mismatches; gate failed`.
    pub fn summary(&self) -> String {
        format!(
            "divergence {:.2}: {} claimed but absent, {} unclaimed, {} arg mismatches; gate {}",
            self.divergence_score,
            self.claimed_but_absent,
            self.present_but_unclaimed,
            self.arg_mismatch,
            if self.gate_passed { "passed" } else { "failed" }
        )
    }

    /// `narrative.*`.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("narrative.divergence_score".into(), float(self.divergence_score)),
            ("narrative.claimed_but_absent".into(), Value::from(self.claimed_but_absent)),
            ("narrative.present_but_unclaimed".into(), Value::from(self.present_but_unclaimed)),
            ("narrative.arg_mismatch".into(), Value::from(self.arg_mismatch)),
            ("narrative.gate_passed".into(), flag(self.gate_passed)),
        ])
    }
}

struct Claim {
    verb: String,
    noun: String,
    word_index: usize,
}

/// Compare `narrative` (the final assistant message) with the recorded `calls`.
pub fn score_narrative(narrative: &str, calls: &[TracedCall], options: &NarrativeOptions) -> NarrativeReport {
    let words = text_words(narrative);
    let normal: Vec<String> = words.iter().map(|(_, n)| n.clone()).collect();
    let vocabulary: HashSet<&str> = normal.iter().map(String::as_str).collect();

    // a claim repeated ("sent the payment … the payment was sent") is one claim, kept
    // where it is first seen, as the peer does: repeating a claim is not a second action
    let mut claims: Vec<Claim> = Vec::new();
    let mut claimed: HashSet<(&str, &str)> = HashSet::new();
    for (i, (_, verb)) in words.iter().enumerate().filter(|(_, (_, n))| is_mutating_verb(n)) {
        let window = words.iter().skip(i + 1).take(CLAIM_WINDOW);
        let Some((_, noun)) = window.into_iter().find(|(raw, norm)| !is_stopword(raw) && !is_stopword(norm)) else {
            continue;
        };
        if claimed.insert((verb.as_str(), noun.as_str())) {
            claims.push(Claim { verb: verb.clone(), noun: noun.clone(), word_index: i });
        }
    }

    let call_tokens: Vec<Vec<String>> = calls.iter().map(|c| name_tokens(c.bare_name())).collect();
    // A claim matches a call whose name tokens hold both its verb and its noun: look the
    // call's token pairs up among the claims rather than every claim against every call.
    let mut claims_met: HashSet<(&str, &str)> = HashSet::new();
    let call_meets_a_claim: Vec<bool> = call_tokens
        .iter()
        .map(|tokens| {
            let mut met = false;
            for verb in tokens {
                for noun in tokens {
                    if let Some(pair) = claimed.get(&(verb.as_str(), noun.as_str())) {
                        claims_met.insert(*pair);
                        met = true;
                    }
                }
            }
            met
        })
        .collect();
    let mut runs = WordRuns::new(&normal);
    let mentioned: Vec<bool> = call_tokens
        .iter()
        .map(|tokens| {
            tokens
                .iter()
                .filter(|t| t.chars().count() >= MIN_MENTION_TOKEN_CHARS && !GENERIC_READ_VERBS.contains(&t.as_str()))
                .all(|t| vocabulary.contains(t.as_str()))
        })
        .collect();

    let mut items = Vec::new();
    for (k, (call, (tokens, is_mentioned))) in calls.iter().zip(call_tokens.iter().zip(&mentioned)).enumerate() {
        if !is_mentioned && !call_meets_a_claim[k] {
            items.push(NarrativeItem::PresentButUnclaimed {
                call_index: call.index,
                tool: call.name.clone(),
                mutating: options.is_mutating(&call.name, tokens),
            });
        }
    }
    for (call, (tokens, is_mentioned)) in calls.iter().zip(call_tokens.iter().zip(&mentioned)) {
        let Some(args) = call.args.as_object().filter(|_| *is_mentioned) else {
            continue;
        };
        for (key, value) in args {
            let value_text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => continue, // objects, arrays and null are not top-level scalars
            };
            let value_words: Vec<String> = text_words(&value_text).into_iter().map(|(_, n)| n).collect();
            if runs.contains(name_tokens(key)) && !value_words.is_empty() && !runs.contains(value_words) {
                items.push(NarrativeItem::ArgMismatch {
                    call_index: call.index,
                    tool: call.name.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    mutating: options.is_mutating(&call.name, tokens),
                });
            }
        }
    }
    let mut absent_mutating = false;
    for claim in &claims {
        if !claims_met.contains(&(claim.verb.as_str(), claim.noun.as_str())) {
            let action = format!("{}_{}", claim.verb, claim.noun);
            let mutating = options.is_mutating(&action, std::slice::from_ref(&claim.verb));
            absent_mutating |= mutating;
            items.push(NarrativeItem::ClaimedButAbsent { action, word_index: claim.word_index, mutating });
        }
    }

    let count = |f: fn(&NarrativeItem) -> bool| items.iter().filter(|i| f(i)).count();
    let divergence_score = (items.len() as f64 / (calls.len() + claims.len()).max(1) as f64).min(1.0);
    let within_bound = options.max_divergence_score.is_none_or(|max| divergence_score <= max);
    NarrativeReport {
        divergence_score,
        claimed_but_absent: count(|i| matches!(i, NarrativeItem::ClaimedButAbsent { .. })),
        present_but_unclaimed: count(|i| matches!(i, NarrativeItem::PresentButUnclaimed { .. })),
        arg_mismatch: count(|i| matches!(i, NarrativeItem::ArgMismatch { .. })),
        gate_passed: !absent_mutating && within_bound,
        items,
    }
}

pub(crate) const NARRATIVE_KEYS: &[&str] = &["mutating_tools", "readonly_tools", "max_divergence_score"];

impl NarrativeOptions {
    /// Read the options from `object` (other keys allowed when `strict` is false, for the
    /// CLI whose input also carries the trace).
    pub fn parse(value: &Value, pointer: &str, strict: bool) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        if strict {
            reject_unknown_keys(object, pointer, NARRATIVE_KEYS)?;
        }
        let max_divergence_score = optional_number(object, "max_divergence_score", pointer)?;
        if let Some(max) = max_divergence_score
            && !(0.0..=1.0).contains(&max)
        {
            return Err(MetricError::OutOfRange {
                pointer: format!("{pointer}/max_divergence_score"),
                message: format!("a divergence bound must be in 0..=1, got {max}"),
            });
        }
        Ok(NarrativeOptions {
            mutating_tools: optional_strings(object, "mutating_tools", pointer)?,
            readonly_tools: optional_strings(object, "readonly_tools", pointer)?,
            max_divergence_score,
        })
    }
}

/// The final answer of a run: `narrative` or `final_response` when the envelope carries
/// one, else the last assistant turn with text, else empty.
pub fn final_answer(envelope: &Value, trace: &MetricTrace) -> String {
    ["narrative", "final_response"]
        .iter()
        .find_map(|k| envelope.get(k).and_then(Value::as_str))
        .or_else(|| trace.final_answer())
        .unwrap_or_default()
        .to_string()
}

/// The `narrative` block: `{"mutating_tools"?, "readonly_tools"?, "max_divergence_score"?}`.
///
/// Input per run: a trace envelope; the final answer is read by [`final_answer`] and the
/// calls from `tool_calls`. Gate: `narrative.gate_passed ≥ 1` in every run.
pub type NarrativeBlock = NarrativeOptions;

impl CaseBlock for NarrativeOptions {
    const KEY: &'static str = "narrative";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        NarrativeOptions::parse(block, "", true)
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let outcomes = runs
            .iter()
            .enumerate()
            .map(|(run, envelope)| {
                let trace = MetricTrace::read(envelope);
                let report = score_narrative(&final_answer(envelope, &trace), &trace.tool_calls, self);
                run_outcome(
                    run,
                    report.targets(),
                    &[("narrative.gate_passed", Bound::AtLeast(1.0))],
                    Some(&report.summary()),
                )
            })
            .collect();
        Ok(BlockOutcome::per_run(Self::KEY, outcomes))
    }
}

#[cfg(test)]
mod tests;
