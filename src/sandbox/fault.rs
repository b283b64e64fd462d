//! Fault injection (docs/metrics.md §4): declared faults that make fixture tool calls hang,
//! slow down or fail — in virtual time, so nothing ever sleeps.
//!
//! A declaration names a tool, a server, or both, and one fault:
//!
//! | spelling | effect on a matching call |
//! |---|---|
//! | `hang` | never answers: the call times out after the profile's `tool_timeout_ms` |
//! | `wedged` | the same effect as `hang`; the name records a different intent (stuck, not slow) |
//! | `slow:<ms>` | answers normally after `<ms>`; a timeout instead when `<ms>` exceeds the timeout |
//! | `recover-after:<n>` | the first `n` matching calls hang, later ones run normally |
//! | `error` | answers at once with an error result |
//!
//! Declarations come from the tool manifest and from the agent profile (so a suite can
//! inject faults per profile without editing the manifest). For each call every matching
//! declaration counts the call (per run, per declaration — that is what `recover-after`
//! counts), and the first one that fires decides the effect: the profile's declarations
//! are consulted before the manifest's, so a suite overrides a fixture's default.
//! Faults touch fixture tool calls only; the runtime's built-in memory tools are never
//! served by the manifest's server and cannot be named here.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::manifest::ToolSpec;
use crate::diag::did_you_mean;

/// One fault, as spelled in a manifest or a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Fault {
    Hang,
    Wedged,
    Slow { ms: u64 },
    RecoverAfter { calls: u64 },
    Error,
}

/// Fault names, for messages and suggestions; the ones that take a number end in `:`.
const SPELLINGS: [&str; 5] = ["hang", "wedged", "slow:", "recover-after:", "error"];
const GRAMMAR: &str = "hang, wedged, slow:<ms>, recover-after:<n> or error";

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let number = |tail: &str, what: &str, example: &str| {
            // digits only: `u64::from_str` would also take "+5"
            if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("fault \"{s}\": {what} must be a whole number, as in \"{example}\""));
            }
            tail.parse::<u64>().map_err(|_| format!("fault \"{s}\": {what} is too large"))
        };
        match s {
            "hang" => Ok(Fault::Hang),
            "wedged" => Ok(Fault::Wedged),
            "error" => Ok(Fault::Error),
            _ => {
                if let Some(tail) = s.strip_prefix("slow:") {
                    return number(tail, "the delay in milliseconds", "slow:250").map(|ms| Fault::Slow { ms });
                }
                if let Some(tail) = s.strip_prefix("recover-after:") {
                    return number(tail, "the number of calls that hang", "recover-after:2")
                        .map(|calls| Fault::RecoverAfter { calls });
                }
                if s == "slow" || s == "recover-after" {
                    return Err(format!("fault \"{s}\" needs a number: \"{s}:<n>\" (expected {GRAMMAR})"));
                }
                let head = s.split(':').next().unwrap_or(s);
                let hint = did_you_mean(head, SPELLINGS.map(|w| w.trim_end_matches(':')))
                    .map(|w| match s.split_once(':') {
                        Some((_, tail)) if SPELLINGS.contains(&format!("{w}:").as_str()) => format!("{w}:{tail}"),
                        _ if SPELLINGS.contains(&format!("{w}:").as_str()) => format!("{w}:<n>"),
                        _ => w.to_string(),
                    })
                    .map(|w| format!(" (did you mean \"{w}\"?)"))
                    .unwrap_or_default();
                Err(format!("unknown fault \"{s}\"{hint}: expected {GRAMMAR}"))
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Hang => f.write_str("hang"),
            Fault::Wedged => f.write_str("wedged"),
            Fault::Slow { ms } => write!(f, "slow:{ms}"),
            Fault::RecoverAfter { calls } => write!(f, "recover-after:{calls}"),
            Fault::Error => f.write_str("error"),
        }
    }
}

impl TryFrom<String> for Fault {
    type Error = String;
    fn try_from(s: String) -> Result<Fault, String> {
        s.parse()
    }
}

impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.to_string()
    }
}

/// `{"tool"?, "server"?, "fault"}`: a fault and the calls it targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultDecl {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub fault: Fault,
}

/// What `tool_executed.fault` records for an injected fault (null when none fired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The call got no answer within the timeout: `hang`, `wedged`, a `recover-after`
    /// call still inside its count, or a `slow` delay longer than the timeout.
    Timeout,
    /// The call answered normally, late.
    Slow,
    /// The call answered at once with an error.
    Error,
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Timeout => "timeout",
            FaultKind::Slow => "slow",
            FaultKind::Error => "error",
        }
    }
}

/// A fault that fired on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    pub kind: FaultKind,
    /// The declaration that fired, as spelled (`recover-after:2`): the log keeps the
    /// intent (`wedged` vs `hang`) as well as the effect.
    pub declared: Fault,
    /// Virtual milliseconds the call took.
    pub duration_ms: u64,
    /// The per-call timeout in force.
    pub timeout_ms: u64,
}

/// The fault declarations of one run, with their per-declaration call counts.
///
/// The counts are a fold over the run's log (the `tool_executed` events of the tools
/// each declaration matches); they are kept here so a call costs O(declarations).
#[derive(Debug, Clone, Default)]
pub struct Injector {
    /// The profile's declarations first, then the manifest's.
    declarations: Vec<FaultDecl>,
    /// Matching calls seen so far, by declaration.
    counts: Vec<u64>,
    timeout_ms: u64,
}

impl Injector {
    /// `profile` declarations are consulted before `manifest` ones.
    pub fn new(profile: &[FaultDecl], manifest: &[FaultDecl], timeout_ms: u64) -> Self {
        let declarations: Vec<FaultDecl> = profile.iter().chain(manifest).cloned().collect();
        Injector { counts: vec![0; declarations.len()], declarations, timeout_ms }
    }

    /// Count a call to `tool` (a tool of the manifest, served by `server`) against every
    /// declaration it matches, and return the fault of the first one that fires.
    pub fn inject(&mut self, tool: &str, server: Option<&str>) -> Option<Injection> {
        let mut fired = None;
        for (decl, count) in self.declarations.iter().zip(self.counts.iter_mut()) {
            let matches = decl.tool.as_deref().is_none_or(|t| t == tool)
                && decl.server.as_deref().is_none_or(|s| Some(s) == server);
            if !matches {
                continue;
            }
            *count += 1;
            if fired.is_none() {
                fired = effect(decl.fault, *count, self.timeout_ms);
            }
        }
        fired.map(|(kind, duration_ms, declared)| Injection {
            kind,
            declared,
            duration_ms,
            timeout_ms: self.timeout_ms,
        })
    }
}

/// The effect of `fault` on the `nth` (1-based) call it matched; `None` when it lets the
/// call through.
fn effect(fault: Fault, nth: u64, timeout_ms: u64) -> Option<(FaultKind, u64, Fault)> {
    let timeout = Some((FaultKind::Timeout, timeout_ms, fault));
    match fault {
        Fault::Hang | Fault::Wedged => timeout,
        Fault::RecoverAfter { calls } => (nth <= calls).then_some((FaultKind::Timeout, timeout_ms, fault)),
        // a delay equal to the timeout still answers: the deadline is inclusive
        Fault::Slow { ms } if ms > timeout_ms => timeout,
        Fault::Slow { ms } => Some((FaultKind::Slow, ms, fault)),
        Fault::Error => Some((FaultKind::Error, 0, fault)),
    }
}

/// Check a raw `faults` array before it is typed, so that a misspelt fault gets a message
/// a person can act on (the schema alone would only say "does not match"). Returns the
/// JSON Pointer (relative to the array) of the first problem and what it is. Shapes the
/// schema rejects anyway (a number where an object goes) are left to the schema.
pub fn check_spellings(faults: &Value) -> Option<(String, String)> {
    for (i, decl) in faults.as_array()?.iter().enumerate() {
        let Some(object) = decl.as_object() else { continue };
        if let Some(Value::String(spelling)) = object.get("fault")
            && let Err(message) = spelling.parse::<Fault>()
        {
            return Some((format!("/{i}/fault"), message));
        }
        if !object.contains_key("tool") && !object.contains_key("server") {
            return Some((
                format!("/{i}"),
                "a fault targets a tool, a server, or both: add \"tool\" or \"server\"".into(),
            ));
        }
    }
    None
}

/// A declaration that names something the manifest does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError {
    /// Index of the declaration.
    pub index: usize,
    /// `"tool"` or `"server"`.
    pub field: &'static str,
    /// The name as written.
    pub name: String,
    pub message: String,
}

/// Check that every declaration can fire against a manifest: a named tool is one of its
/// tools, a named server is its server. A declaration that can never fire is a typo, not
/// a passing fault case.
pub fn check_targets(declarations: &[FaultDecl], tools: &[ToolSpec], server: Option<&str>) -> Result<(), TargetError> {
    for (i, decl) in declarations.iter().enumerate() {
        if let Some(tool) = &decl.tool
            && !tools.iter().any(|t| &t.name == tool)
        {
            let hint = did_you_mean(tool, tools.iter().map(|t| t.name.as_str()))
                .map(|s| format!(" (did you mean \"{s}\"?)"))
                .unwrap_or_default();
            return Err(TargetError {
                index: i,
                field: "tool",
                name: tool.clone(),
                message: format!("fault names tool \"{tool}\", which the manifest does not have{hint}"),
            });
        }
        if let Some(wanted) = &decl.server
            && server != Some(wanted.as_str())
        {
            let actual = match server {
                Some(s) => format!("its tools are served by \"{s}\""),
                None => "it declares no \"server\"".to_string(),
            };
            return Err(TargetError {
                index: i,
                field: "server",
                name: wanted.clone(),
                message: format!("fault names server \"{wanted}\", but {actual}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(tool: Option<&str>, server: Option<&str>, fault: &str) -> FaultDecl {
        FaultDecl { tool: tool.map(Into::into), server: server.map(Into::into), fault: fault.parse().unwrap() }
    }

    fn kinds(injector: &mut Injector, tool: &str, calls: usize) -> Vec<Option<(&'static str, u64)>> {
        (0..calls).map(|_| injector.inject(tool, Some("api")).map(|i| (i.kind.as_str(), i.duration_ms))).collect()
    }

    #[test]
    fn every_spelling_round_trips_through_its_text() {
        for s in ["hang", "wedged", "slow:0", "slow:250", "recover-after:2", "error"] {
            assert_eq!(s.parse::<Fault>().unwrap().to_string(), s);
        }
        assert_eq!("slow:250".parse::<Fault>(), Ok(Fault::Slow { ms: 250 }));
    }

    #[test]
    fn misspelt_faults_say_what_is_wrong_and_suggest_the_closest_spelling() {
        let err = |s: &str| s.parse::<Fault>().unwrap_err();
        assert_eq!(
            err("wedge"),
            "unknown fault \"wedge\" (did you mean \"wedged\"?): expected hang, wedged, slow:<ms>, recover-after:<n> or error"
        );
        assert!(err("recover_after:2").contains("(did you mean \"recover-after:2\"?)"), "{}", err("recover_after:2"));
        assert!(err("slw").contains("(did you mean \"slow:<n>\"?)"), "{}", err("slw"));
        assert_eq!(
            err("slow"),
            "fault \"slow\" needs a number: \"slow:<n>\" (expected hang, wedged, slow:<ms>, recover-after:<n> or error)"
        );
        assert_eq!(
            err("slow:"),
            "fault \"slow:\": the delay in milliseconds must be a whole number, as in \"slow:250\""
        );
        assert!(err("slow:fast").contains("must be a whole number"));
        // u64::from_str alone would accept these
        assert!(err("slow:+5").contains("must be a whole number"));
        assert!(err("recover-after:-1").contains("must be a whole number"));
        assert!(err("slow:99999999999999999999").ends_with("is too large"));
        assert!(err("Hang").contains("did you mean \"hang\""));
        // too far from every spelling for a guess
        assert_eq!(
            err("explode"),
            "unknown fault \"explode\": expected hang, wedged, slow:<ms>, recover-after:<n> or error"
        );
    }

    #[test]
    fn a_hang_times_out_every_call_after_the_timeout() {
        let mut injector = Injector::new(&[decl(Some("status"), None, "hang")], &[], 5000);
        assert_eq!(kinds(&mut injector, "status", 2), [Some(("timeout", 5000)), Some(("timeout", 5000))]);
        // another tool is untouched
        assert_eq!(injector.inject("cached", Some("api")), None);
    }

    #[test]
    fn wedged_has_the_effect_of_hang_but_keeps_its_own_name() {
        let mut injector = Injector::new(&[decl(Some("status"), None, "wedged")], &[], 5000);
        let injection = injector.inject("status", None).unwrap();
        assert_eq!((injection.kind, injection.duration_ms), (FaultKind::Timeout, 5000));
        assert_eq!(injection.declared.to_string(), "wedged");
    }

    #[test]
    fn slow_delays_the_answer_and_becomes_a_timeout_only_past_the_deadline() {
        // 1200 <= 5000: slow; 5000 <= 5000: still slow (inclusive deadline); 5001 > 5000: timeout
        for (ms, expected) in [(1200, ("slow", 1200)), (5000, ("slow", 5000)), (5001, ("timeout", 5000))] {
            let mut injector = Injector::new(&[decl(Some("m"), None, &format!("slow:{ms}"))], &[], 5000);
            assert_eq!(kinds(&mut injector, "m", 1), [Some(expected)], "slow:{ms}");
        }
    }

    #[test]
    fn error_answers_at_once() {
        let mut injector = Injector::new(&[decl(Some("page"), None, "error")], &[], 5000);
        assert_eq!(kinds(&mut injector, "page", 1), [Some(("error", 0))]);
    }

    #[test]
    fn recover_after_two_hangs_the_first_two_matching_calls_then_lets_calls_through() {
        let mut injector = Injector::new(&[decl(Some("deploys"), None, "recover-after:2")], &[], 5000);
        // calls to other tools are not counted
        assert_eq!(injector.inject("status", Some("api")), None);
        assert_eq!(kinds(&mut injector, "deploys", 4), [Some(("timeout", 5000)), Some(("timeout", 5000)), None, None]);
    }

    #[test]
    fn recover_after_counts_per_declaration_and_every_matching_declaration_counts_the_call() {
        // the hang fires first for `a`, yet the server-wide recover-after:1 still counts
        // that call: the first call to `b` is its second matching call, so it runs
        let profile = [decl(Some("a"), None, "hang")];
        let manifest = [decl(None, Some("api"), "recover-after:1")];
        let mut injector = Injector::new(&profile, &manifest, 100);
        let a = injector.inject("a", Some("api")).unwrap();
        assert_eq!(a.declared, Fault::Hang);
        assert_eq!(injector.inject("b", Some("api")), None);
    }

    #[test]
    fn the_profiles_declarations_win_over_the_manifests() {
        let mut injector = Injector::new(&[decl(Some("a"), None, "error")], &[decl(Some("a"), None, "hang")], 100);
        assert_eq!(injector.inject("a", None).unwrap().kind, FaultKind::Error);
    }

    #[test]
    fn a_server_fault_touches_only_calls_to_that_server_and_both_must_match_when_both_are_named() {
        let mut injector = Injector::new(&[decl(None, Some("api"), "error")], &[], 100);
        assert!(injector.inject("a", Some("api")).is_some());
        assert!(injector.inject("a", Some("other")).is_none());
        assert!(injector.inject("a", None).is_none());
        let mut both = Injector::new(&[decl(Some("a"), Some("api"), "error")], &[], 100);
        assert!(both.inject("a", Some("api")).is_some());
        assert!(both.inject("b", Some("api")).is_none());
    }

    #[test]
    fn injection_is_deterministic_for_the_same_calls() {
        let declarations = [decl(Some("a"), None, "recover-after:1"), decl(None, Some("api"), "slow:10")];
        let run = || {
            let mut injector = Injector::new(&declarations, &[], 50);
            ["a", "b", "a", "a"].map(|t| injector.inject(t, Some("api")))
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn spelling_checks_point_at_the_bad_declaration() {
        assert_eq!(check_spellings(&json!([{"tool": "a", "fault": "hang"}])), None);
        let (pointer, message) =
            check_spellings(&json!([{"tool": "a", "fault": "hang"}, {"tool": "b", "fault": "slow"}])).unwrap();
        assert_eq!(pointer, "/1/fault");
        assert!(message.contains("needs a number"), "{message}");
        let (pointer, message) = check_spellings(&json!([{"fault": "hang"}])).unwrap();
        assert_eq!((pointer.as_str(), message.contains("a tool, a server, or both")), ("/0", true));
        // not an array, not an object: the schema's to report
        assert_eq!(check_spellings(&json!("hang")), None);
        assert_eq!(check_spellings(&json!([3])), None);
    }

    #[test]
    fn a_declaration_that_could_never_fire_is_refused() {
        let tools: Vec<ToolSpec> = serde_json::from_value(json!([{"name": "get_status", "description": "d"}])).unwrap();
        assert_eq!(check_targets(&[decl(Some("get_status"), Some("api"), "hang")], &tools, Some("api")), Ok(()));
        let ok = decl(Some("get_status"), None, "hang");
        let e = check_targets(&[ok, decl(Some("get_stats"), None, "hang")], &tools, None).unwrap_err();
        assert_eq!((e.index, e.field, e.name.as_str()), (1, "tool", "get_stats"));
        assert_eq!(
            e.message,
            "fault names tool \"get_stats\", which the manifest does not have (did you mean \"get_status\"?)"
        );
        let e = check_targets(&[decl(None, Some("apii"), "hang")], &tools, Some("api")).unwrap_err();
        assert_eq!((e.index, e.field), (0, "server"));
        assert_eq!(e.message, "fault names server \"apii\", but its tools are served by \"api\"");
        let e = check_targets(&[decl(None, Some("api"), "hang")], &tools, None).unwrap_err();
        assert!(e.message.ends_with("it declares no \"server\""), "{}", e.message);
    }
}
