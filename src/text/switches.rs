//! Test-only switches that turn one mitigation off, to prove it load-bearing.
//!
//! The security suite's tests (`tests/security_switches.rs`) run the suite with one
//! mitigation off and check that exactly the cases that depend on it fail. The switch
//! is the environment variable [`VARIABLE`], a comma-separated list of [`NAMES`], and
//! it is honoured only by debug builds (`cfg!(debug_assertions)`, which is how
//! `cargo test` builds the binary): a release binary ignores it, so nobody can switch a
//! mitigation off in a shipped build by setting an environment variable. A switch that
//! is on in a debug build prints nothing and changes the logs; docs/security.md says so.

use std::sync::LazyLock;

/// The environment variable a debug build reads.
pub const VARIABLE: &str = "STATEVAL_TEST_MITIGATIONS_OFF";

/// Every mitigation that can be switched off, with what switching it off does.
pub const NAMES: &[(&str, &str)] = &[
    (
        "normalisation",
        "compare raw text: no NFKC, case folding, ignorable removal, confusable mapping or canonical addresses",
    ),
    ("decoding", "read only the plain text: no percent, entity, base64, hex, tag or bidi readings"),
    ("taint-splitting", "do not match an address split across arguments"),
    ("cross-agent-taint", "a handoff target starts untainted and only a privileged one refuses tainted payloads"),
    ("taint-floor", "no built-in denial of tainted arguments to financial or privileged tools"),
    ("description-rules", "scan descriptions with the literal phrase list only"),
    ("keyless-dedup", "a keyless retry of a keyed operation, or a keyed retry of a keyless one, is a new operation"),
    ("grounding-floor", "no built-in denial (or escalation) of a call whose sensitive argument is ungrounded"),
    ("request-floor", "no built-in denial (or escalation) of an effect no user turn asked for"),
];

static OFF: LazyLock<Vec<String>> = LazyLock::new(|| {
    if !cfg!(debug_assertions) {
        return Vec::new();
    }
    std::env::var(VARIABLE)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
});

/// Is the mitigation `name` (one of [`NAMES`]) switched off?
pub fn off(name: &str) -> bool {
    debug_assert!(NAMES.iter().any(|(n, _)| *n == name), "unknown mitigation switch {name}");
    OFF.iter().any(|o| o == name)
}
