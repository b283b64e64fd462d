//! Text that tries to steer an agent from inside data: the injection phrase lists and
//! the search of every reading of a text for them, and the count of characters a reader
//! cannot see. The runtime's detectors scan untrusted tool results with them, and the
//! sandbox's poisoning checks scan tool descriptions, so both see one list.

use std::sync::LazyLock;

use regex::Regex;

use super::{normalize, switches};

/// The literal phrase list the detectors started with: what the `description-rules`
/// switch falls back to (see [`super::switches`]).
pub const LITERAL_INJECTION_PATTERNS: &[&str] = &[
    r"(?i)ignore (all |any )?(previous|prior|above|earlier) (instructions|directions|messages)",
    r"(?i)disregard (all |any )?(previous|prior|your) (instructions|rules|guidelines)",
    r"(?i)(new|updated|real) instructions\s*:",
    r"(?i)you are now (a|an|in) ",
    r"(?i)\bsystem prompt\b",
    r"(?i)(send|transfer|pay|forward) .{0,40}\binstead\b",
];

/// More text that tries to steer the agent from inside data, matched against the folded
/// readings of the text ([`normalize::views`]), so homoglyphs, soft hyphens and
/// encodings do not hide it. Beyond the literal list: override phrasings (a verb of
/// setting aside, then whose instructions), redirects (pay or send *instead*, *rather
/// than*, *from now on*), orders hung on the agent's own work ("before answering …
/// transfer"), secrecy ("do not tell the user") and notes addressed to the model.
pub const BROADER_INJECTION_PATTERNS: &[&str] = &[
    r"(?i)\b(ignore|disregard|forget|override|bypass|set aside|drop)\b.{0,30}\b(previous|prior|above|earlier|preceding|all|any|your|the|system|original|existing|other)\b.{0,20}\b(instructions?|directions?|directives?|messages?|rules|guidelines|guidance|prompts?|polic(y|ies)|constraints|orders)\b",
    r"(?i)(new|updated|real|revised|actual|true|correct) (instructions|directives|orders|task)\s*:",
    r"(?i)you are now (a|an|in) ",
    r"(?i)\bsystem prompt\b",
    r"(?i)\b(send|transfer|pay|forward|route|wire|remit|redirect)\b.{0,60}\b(instead|rather than|from now on|going forward)\b",
    r"(?i)\b(before|prior to|after) (answering|responding|replying|using|calling|running|any)\b.{0,60}\b(call|send|transfer|pay|forward|invoke|run|email|wire)\b",
    r"(?i)\b(do not|don't|never) (tell|inform|mention|reveal|notify|alert|show)\b.{0,30}\b(user|human|customer|operator|anyone)\b",
    r"(?i)\b(note|message|instructions?|reminder)s? (to|for) (the )?(assistant|ai|model|agent|llm)\b",
    r"(?i)<\s*/?\s*(important|system|instructions?|admin)\s*>",
];

/// The default patterns: [`LITERAL_INJECTION_PATTERNS`] first (so a finding they make
/// reads as it always did), then [`BROADER_INJECTION_PATTERNS`]; compiled once for the
/// process: compiling them per run was a third of a large suite's time.
///
/// A pattern in both lists is compiled once, where it first appears: the search takes
/// the first pattern that finds anything, so a later copy could only find nothing new
/// (compiling all fifteen was about 6.5 ms of a run's start; two were copies).
pub static DEFAULT_INJECTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    let mut seen = std::collections::HashSet::new();
    LITERAL_INJECTION_PATTERNS
        .iter()
        .chain(BROADER_INJECTION_PATTERNS)
        .filter(|p| seen.insert(**p))
        .map(|p| Regex::new(p).expect("default injection pattern"))
        .collect()
});

/// [`LITERAL_INJECTION_PATTERNS`], compiled once.
pub static LITERAL_INJECTION: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    LITERAL_INJECTION_PATTERNS.iter().map(|p| Regex::new(p).expect("literal injection pattern")).collect()
});

/// The injection patterns in force: the literal list when `description-rules` is
/// switched off in a test build, the default list otherwise.
pub fn injection_patterns() -> &'static [Regex] {
    if switches::off("description-rules") { &LITERAL_INJECTION } else { &DEFAULT_INJECTION }
}

/// The first instruction-like passage in `text` as written or in any of its readings.
pub fn find_injection<'r>(patterns: impl IntoIterator<Item = &'r Regex>, text: &str) -> Option<String> {
    let mut views = vec![text.to_string()];
    views.extend(normalize::views(text));
    patterns.into_iter().find_map(|r| views.iter().find_map(|v| r.find(v).map(|m| m.as_str().to_string())))
}

/// Invisible characters: zero-width and bidirectional controls, soft hyphens, tag
/// characters and the other default ignorables ([`normalize::is_ignorable`]) —
/// invisible to a reader, visible to a model. Variation selectors and the zero-width
/// joiner, which emoji need, are not counted.
pub fn hidden_characters(text: &str) -> usize {
    text.chars().filter(|c| normalize::is_ignorable(*c) && !matches!(*c as u32, 0x200D | 0xFE00..=0xFE0F)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_patterns_are_every_listed_pattern_once_in_the_order_first_listed() {
        let compiled: Vec<&str> = DEFAULT_INJECTION.iter().map(Regex::as_str).collect();
        let mut expected: Vec<&str> = Vec::new();
        for p in LITERAL_INJECTION_PATTERNS.iter().chain(BROADER_INJECTION_PATTERNS) {
            if !expected.contains(p) {
                expected.push(p);
            }
        }
        assert_eq!(compiled, expected);
        // the lists do share patterns, so there was something to leave out
        assert!(compiled.len() < LITERAL_INJECTION_PATTERNS.len() + BROADER_INJECTION_PATTERNS.len());
    }
}
