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
//!
//! How a declaration is spelled and checked (`Fault`, `FaultDecl`) is the pipeline's
//! data model (`pipeline::fault`); this module holds what a declared fault does.

use crate::pipeline::fault::{Fault, FaultDecl};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(tool: Option<&str>, server: Option<&str>, fault: &str) -> FaultDecl {
        FaultDecl { tool: tool.map(Into::into), server: server.map(Into::into), fault: fault.parse().unwrap() }
    }

    fn kinds(injector: &mut Injector, tool: &str, calls: usize) -> Vec<Option<(&'static str, u64)>> {
        (0..calls).map(|_| injector.inject(tool, Some("api")).map(|i| (i.kind.as_str(), i.duration_ms))).collect()
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
}
