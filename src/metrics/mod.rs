//! Metrics: deterministic, model-free scores over recorded traces (docs/metrics.md §1–5, 7, 9).
//!
//! Every function here is pure over `serde_json::Value`: the same input gives the same
//! number on every machine, and nothing reads a file, a clock or a model. Recorded data
//! is read leniently ([`trace`]: a missing field is read conservatively, never as an
//! error); an *expectation* (a mode, an args shape, a JSON Schema, a gate bound) is read
//! strictly, and a malformed one is a [`MetricError`] naming where it is.
//!
//! Layout: one module per metric family, each with a report struct whose fields document
//! their formula, a one-line `summary()`, its gate `targets()`, and the dataset block type
//! that grades a case's runs ([`gate::CaseBlock`]). [`block::MetricBlock`] dispatches a
//! case's blocks by key; [`cli::run`] is `stateval metric NAME` over one JSON document.
//!
//! Section 6 (agent reliability dimensions) lives in its own module, added beside these.

pub mod axes;
pub mod block;
pub mod cli;
pub mod dimensions;
pub mod gate;
pub mod golden_path;
pub mod matching;
pub mod narrative;
pub mod recovery;
pub mod reliability;
pub mod sequence;
pub mod stability;
pub mod trace;
pub mod trajectory;
pub mod typed;

/// A malformed input document or expectation. Every variant names where the problem is
/// as a JSON Pointer into the document it was read from (`""` is the document itself,
/// shown as `/`). Block parsers report pointers relative to the block; the runner adds
/// the block's own place with [`MetricError::under`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// `stateval metric NAME` with a name nobody implements.
    #[error("unknown metric \"{name}\"; known metrics: {}", known.join(", "))]
    UnknownMetric { name: String, known: Vec<&'static str> },
    /// A key the block or input shape does not define (a typo must not pass silently).
    #[error("{}: unknown key \"{key}\"{}; allowed keys: {}", show(pointer), suggest(key, allowed), allowed.join(", "))]
    UnknownKey { pointer: String, key: String, allowed: &'static [&'static str] },
    /// A required field is absent.
    #[error("{}: missing required field \"{field}\"", show(pointer))]
    Missing { pointer: String, field: &'static str },
    /// A value of the wrong JSON type.
    #[error("{}: expected {expected}, found {found}", show(pointer))]
    WrongType { pointer: String, expected: &'static str, found: String },
    /// A trajectory mode outside docs/metrics.md §3.
    #[error(
        "{}: unknown mode \"{mode}\"; known modes: strict (alias exact_sequence), subsequence, unordered, superset, subset",
        show(pointer)
    )]
    UnknownMode { pointer: String, mode: String },
    /// An args shape outside `"any"`, `"ignore"`, `{"exact"}`, `{"subset"}`, `{"schema"}`.
    #[error(
        "{}: unknown args shape \"{shape}\"; known shapes: \"any\", \"ignore\", {{\"exact\": v}}, {{\"subset\": v}}, {{\"schema\": doc}}",
        show(pointer)
    )]
    UnknownArgsShape { pointer: String, shape: String },
    /// A JSON Schema that does not compile (bad keyword value, bad regex, unresolvable `$ref`).
    #[error("{}: invalid JSON Schema: {reason}", show(pointer))]
    InvalidSchema { pointer: String, reason: String },
    /// A number outside what the metric accepts (a confidence level other than 90/95/99,
    /// a half-width of 0, k larger than n, …).
    #[error("{}: {message}", show(pointer))]
    OutOfRange { pointer: String, message: String },
    /// An ordering constraint from a tool to itself (`order: [{first: a, second: a}]`):
    /// it holds of every trace, so it checks nothing (docs/metrics.md §3).
    #[error("{}: a constraint from \"{tool}\" to itself checks nothing; name two different tools", show(pointer))]
    SelfConstraint { pointer: String, tool: String },
    /// An LLM matcher where only deterministic matchers may gate (docs/metrics.md §1, §7).
    #[error(
        "{}: the {block} block may not use an LLM matcher (\"{matcher}\"); its verdict must come from recorded data",
        show(pointer)
    )]
    LlmMatcher { pointer: String, block: &'static str, matcher: String },
    /// A block `expect` target outside the block's own targets.
    #[error("{}: unknown target \"{target}\" for the {block} block; known targets: {}", show(pointer), known.join(", "))]
    UnknownTarget { pointer: String, block: &'static str, target: String, known: Vec<String> },
    /// The agent-reliability input (docs/metrics.md §6) is malformed; the message carries its pointer.
    #[error("{0}")]
    Dimensions(String),
}

impl MetricError {
    /// The same error with `prefix` (a JSON Pointer) put before its place, so an error
    /// found inside a block reads from the dataset line: `/trajectory` + `/calls/2/args`.
    pub fn under(mut self, prefix: &str) -> Self {
        if let Some(pointer) = self.pointer_mut() {
            pointer.insert_str(0, prefix);
        }
        self
    }

    /// The JSON Pointer of the offending value, when there is one.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            MetricError::UnknownMetric { .. } | MetricError::Dimensions(_) => None,
            MetricError::UnknownKey { pointer, .. }
            | MetricError::Missing { pointer, .. }
            | MetricError::WrongType { pointer, .. }
            | MetricError::UnknownMode { pointer, .. }
            | MetricError::UnknownArgsShape { pointer, .. }
            | MetricError::InvalidSchema { pointer, .. }
            | MetricError::OutOfRange { pointer, .. }
            | MetricError::SelfConstraint { pointer, .. }
            | MetricError::LlmMatcher { pointer, .. }
            | MetricError::UnknownTarget { pointer, .. } => Some(pointer),
        }
    }

    fn pointer_mut(&mut self) -> Option<&mut String> {
        match self {
            MetricError::UnknownMetric { .. } | MetricError::Dimensions(_) => None,
            MetricError::UnknownKey { pointer, .. }
            | MetricError::Missing { pointer, .. }
            | MetricError::WrongType { pointer, .. }
            | MetricError::UnknownMode { pointer, .. }
            | MetricError::UnknownArgsShape { pointer, .. }
            | MetricError::InvalidSchema { pointer, .. }
            | MetricError::OutOfRange { pointer, .. }
            | MetricError::SelfConstraint { pointer, .. }
            | MetricError::LlmMatcher { pointer, .. }
            | MetricError::UnknownTarget { pointer, .. } => Some(pointer),
        }
    }
}

/// A pointer as people read it: the document itself is `/`.
fn show(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

/// ` (did you mean "x"?)` when an allowed key is close to the typo (one rule for every
/// input stateval reads: [`crate::diag::did_you_mean`]).
fn suggest(key: &str, allowed: &[&str]) -> String {
    crate::diag::did_you_mean(key, allowed.iter().copied())
        .map(|candidate| format!(" (did you mean \"{candidate}\"?)"))
        .unwrap_or_default()
}

/// `pointer` extended by one reference token, escaped per RFC 6901 (`~` → `~0`, `/` → `~1`).
pub fn pointer_join(pointer: &str, token: impl std::fmt::Display) -> String {
    let token = token.to_string().replace('~', "~0").replace('/', "~1");
    format!("{pointer}/{token}")
}

/// A short name for a JSON value's type, for [`MetricError::WrongType`].
pub fn type_name(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Refuse keys of `object` outside `allowed` (pointer names the object).
pub(crate) fn reject_unknown_keys(
    object: &serde_json::Map<String, serde_json::Value>,
    pointer: &str,
    allowed: &'static [&'static str],
) -> Result<(), MetricError> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(MetricError::UnknownKey { pointer: pointer.to_string(), key: key.clone(), allowed }),
        None => Ok(()),
    }
}

/// `value` as an object, or a [`MetricError::WrongType`] at `pointer`.
pub(crate) fn expect_object<'a>(
    value: &'a serde_json::Value,
    pointer: &str,
) -> Result<&'a serde_json::Map<String, serde_json::Value>, MetricError> {
    value.as_object().ok_or_else(|| MetricError::WrongType {
        pointer: pointer.to_string(),
        expected: "an object",
        found: type_name(value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_args_shape_names_its_place_and_the_known_shapes() {
        let err = MetricError::UnknownArgsShape { pointer: "/calls/2/args".into(), shape: "exactt".into() }
            .under("/expected");
        let text = err.to_string();
        assert!(text.starts_with("/expected/calls/2/args: unknown args shape \"exactt\""), "{text}");
        assert_eq!(err.pointer(), Some("/expected/calls/2/args"));
    }

    #[test]
    fn a_typo_in_a_key_suggests_the_nearest_allowed_key() {
        let err = MetricError::UnknownKey { pointer: String::new(), key: "mdoe".into(), allowed: &["mode", "calls"] };
        assert_eq!(err.to_string(), "/: unknown key \"mdoe\" (did you mean \"mode\"?); allowed keys: mode, calls");
    }

    #[test]
    fn pointer_tokens_are_escaped_per_rfc_6901() {
        // "a/b" -> "a~1b", "m~n" -> "m~0n"
        assert_eq!(pointer_join(&pointer_join("", "a/b"), "m~n"), "/a~1b/m~0n");
    }
}
