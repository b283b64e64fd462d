//! Text that tries to steer an agent from inside data: the injection phrase lists and
//! the search of every reading of a text for them, and the count of characters a reader
//! cannot see. The runtime's detectors scan untrusted tool results with them, and the
//! sandbox's poisoning checks scan tool descriptions, so both see one list.

use std::sync::{Arc, LazyLock};

use regex::Regex;
use regex_automata::meta;
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;

use super::two_way::TwoWay;
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

/// One built-in pattern, compiled for the text it meets ([`TwoWay`]: its ASCII form for
/// ASCII text). Both forms are compiled without a literal prefilter and with no capture
/// groups but the match: a search here only asks where the first match lies, and
/// compiling the fifteen patterns with everything was about 6.5 ms of each run's
/// start, most of it on the way to its first case (the ASCII forms alone take about a
/// fifth of that).
pub struct Builtin(TwoWay<meta::Regex>);

impl Builtin {
    fn new(source: &'static str) -> Builtin {
        Builtin(TwoWay::new(source, Self::compile(source, false), |source| Self::compile(source, true)))
    }

    /// Compile `source`, one of the constant patterns above (tested to compile both ways).
    fn compile(source: &str, unicode: bool) -> meta::Regex {
        meta::Regex::builder()
            .syntax(syntax::Config::new().unicode(unicode).utf8(unicode))
            .configure(
                meta::Config::new()
                    .auto_prefilter(false)
                    .which_captures(WhichCaptures::Implicit)
                    .onepass(false)
                    .backtrack(false)
                    .dfa(false),
            )
            .build(source)
            .unwrap_or_else(|e| panic!("built-in injection pattern {source:?}: {e}"))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &'static str {
        self.0.as_str()
    }

    /// The first (leftmost) match in `text`, as `regex::Regex::find` gives it.
    pub fn find<'t>(&self, text: &'t str) -> Option<&'t str> {
        self.0.on(text).find(text).map(|m| &text[m.range()])
    }
}

/// The default patterns: [`LITERAL_INJECTION_PATTERNS`] first (so a finding they make
/// reads as it always did), then [`BROADER_INJECTION_PATTERNS`]; compiled once for the
/// process: compiling them per run was a third of a large suite's time.
///
/// A pattern in both lists is compiled once, where it first appears: the search takes
/// the first pattern that finds anything, so a later copy could only find nothing new.
pub static DEFAULT_INJECTION: LazyLock<Vec<Builtin>> = LazyLock::new(|| {
    let mut seen = std::collections::HashSet::new();
    LITERAL_INJECTION_PATTERNS
        .iter()
        .chain(BROADER_INJECTION_PATTERNS)
        .filter(|p| seen.insert(**p))
        .map(|p| Builtin::new(p))
        .collect()
});

/// [`LITERAL_INJECTION_PATTERNS`], compiled once.
pub static LITERAL_INJECTION: LazyLock<Vec<Builtin>> =
    LazyLock::new(|| LITERAL_INJECTION_PATTERNS.iter().map(|p| Builtin::new(p)).collect());

/// The injection patterns in force: the literal list when `description-rules` is
/// switched off in a test build, the default list otherwise.
pub fn injection_patterns() -> &'static [Builtin] {
    if switches::off("description-rules") { &LITERAL_INJECTION } else { &DEFAULT_INJECTION }
}

/// The first instruction-like passage in `text` as written or in any of its readings:
/// the built-in patterns `builtin` first, then a profile's `own`, each pattern tried on
/// every reading before the next pattern.
pub fn find_injection(builtin: &[Builtin], own: &[Arc<Regex>], text: &str) -> Option<String> {
    let mut views = vec![text.to_string()];
    views.extend(normalize::views(text));
    let found = builtin.iter().find_map(|r| views.iter().find_map(|v| r.find(v)));
    found
        .or_else(|| own.iter().find_map(|r| views.iter().find_map(|v| r.find(v).map(|m| m.as_str()))))
        .map(str::to_string)
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
        let compiled: Vec<&str> = DEFAULT_INJECTION.iter().map(Builtin::as_str).collect();
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

    /// Words and separators the patterns are made of, and characters Unicode reads
    /// differently from ASCII: the Kelvin sign and long s (`(?i)` folds them to k and s),
    /// a no-break space (`\s`), an accented letter (`\w`, `\b`), a Cyrillic a.
    const WORDS: &[&str] = &[
        "ignore",
        "IGNORE",
        "all",
        "previous",
        "instructions",
        "disregard",
        "your",
        "rules",
        "new",
        "updated",
        "you are now",
        "a",
        "an",
        "in",
        "system prompt",
        "send",
        "transfer",
        "pay",
        "instead",
        "rather than",
        "from now on",
        "before",
        "answering",
        "call",
        "do not",
        "don't",
        "tell",
        "the user",
        "note",
        "to",
        "the assistant",
        "<",
        "/",
        ">",
        "important",
        "admin",
        ":",
        "forget",
        "policy",
        "policies",
        "ask",
        "remit",
        "wire",
        "email",
        "message",
        "for",
        "llm",
        "tasks",
        "bypass",
        "set aside",
        "\u{212a}",
        "\u{17f}",
        "\u{a0}",
        "\u{e9}",
        "\u{430}",
        "x",
        "99",
    ];

    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let word = proptest::sample::select(WORDS);
        let gap = proptest::sample::select(&[" ", " ", " ", "", "\n", "  ", "-", ".", "\t"][..]);
        proptest::collection::vec((word, gap), 0..24)
            .prop_map(|parts| parts.into_iter().flat_map(|(w, g)| [w, g]).collect())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Each built-in pattern finds what the `regex` crate finds with the pattern as
        /// written, on ASCII text (the ASCII compilation) and on any other (Unicode).
        #[test]
        fn a_builtin_pattern_finds_what_the_regex_crate_finds(text in text()) {
            static REFERENCE: LazyLock<Vec<(&Builtin, Regex)>> = LazyLock::new(|| {
                DEFAULT_INJECTION.iter().chain(LITERAL_INJECTION.iter()).map(|b| (b, Regex::new(b.as_str()).unwrap())).collect()
            });
            for (builtin, reference) in REFERENCE.iter() {
                proptest::prop_assert_eq!(
                    builtin.find(&text),
                    reference.find(&text).map(|m| m.as_str()),
                    "pattern {} on {:?}", builtin.as_str(), text
                );
            }
        }
    }

    #[test]
    fn unicode_folds_reach_the_patterns_through_the_unicode_compilation() {
        let pattern = &DEFAULT_INJECTION.iter().find(|p| p.as_str() == r"(?i)\bsystem prompt\b").unwrap();
        // long s folds to s only under Unicode: found, as the regex crate finds it
        assert_eq!(pattern.find("the \u{17f}ystem prompt"), Some("\u{17f}ystem prompt"));
        assert_eq!(pattern.find("the SYSTEM PROMPT"), Some("SYSTEM PROMPT"));
        // an accented letter is a word character under Unicode: no boundary before "system"
        assert_eq!(pattern.find("\u{e9}system prompt"), None);
        assert_eq!(pattern.find("esystem prompt"), None);
    }
}
