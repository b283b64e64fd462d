//! Agent profiles: what the built-in runtime needs to run a case as a given agent.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::fault::FaultDecl;
use super::sparse::Sparse;

use super::manifest::SafetyClass;

/// A policy verdict. The order is the precedence: deny beats escalate beats allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Escalate,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Escalate => "escalate",
            Verdict::Deny => "deny",
        }
    }
}

/// A condition a rule needs besides its tool / class match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleWhen {
    #[default]
    Always,
    /// An argument carries content that came from an untrusted tool's result.
    ArgsTainted,
    /// A sensitive argument's value is grounded in no trusted source
    /// (`agent::grounding`).
    ArgsUngrounded,
}

/// What a built-in floor does to a call it catches: the grounding floor (an
/// ungrounded sensitive argument, `ungrounded`) and the request floor (an effect no
/// user turn asked for, `unrequested`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ungrounded {
    /// Denied (rule `ungrounded-sensitive-call` or `unrequested-effect`).
    #[default]
    Deny,
    /// Escalated to approval: a value the user confirms there is grounded from then on.
    Escalate,
    /// Let through (grounding is still reported in `policy_decided`).
    Allow,
}

fn is_deny(u: &Ungrounded) -> bool {
    *u == Ungrounded::Deny
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    pub id: String,
    /// Tool name; `*` or absent matches every tool.
    pub tool: Option<String>,
    pub safety_class: Option<SafetyClass>,
    #[serde(default)]
    pub when: RuleWhen,
    pub verdict: Verdict,
    #[serde(default)]
    pub priority: i64,
    pub reason: Option<String>,
}

/// What happens to a tool the poisoning checks flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoisonedTools {
    /// Not offered to the model; a call to it is denied.
    #[default]
    Refuse,
    /// Offered and callable, but its effects are not applied.
    ReadOnly,
    /// Flagged only (to measure what the mitigation prevents).
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Route `auto`: the profile approves.
    Approve,
    /// Route `deny`: the profile refuses.
    Deny,
    /// Route `human`: a person decides; replay takes the decision recorded in the case's
    /// `approvals` (a case without one leaves the request unanswered, so denied).
    Human,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The effective budget for the whole request.
    pub budget_tokens: Option<u64>,
    /// Caps per section; history also gets at most what the others leave.
    pub system: Option<u64>,
    pub memory: Option<u64>,
    pub tools: Option<u64>,
    pub history: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    pub episodic_ttl_turns: Option<u32>,
}

/// The deterministic safety detectors of a profile (see `agent::detectors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyConfig {
    /// Look for emails, phone and card numbers in replies and outbound arguments.
    #[serde(default = "yes")]
    pub pii: bool,
    /// More PII regexes (account ids, national ids, …).
    #[serde(default)]
    pub pii_patterns: Vec<String>,
    /// Regexes of matches that are not exposure (your own domain, test cards).
    #[serde(default)]
    pub pii_allow: Vec<String>,
    /// Safety classes whose execution is a destructive operation.
    #[serde(default = "privileged")]
    pub destructive_classes: Vec<SafetyClass>,
    /// Regexes of tool names that are destructive whatever their class.
    #[serde(default)]
    pub destructive_tools: Vec<String>,
    /// Calls of one tool allowed in one turn; none: unlimited.
    pub max_calls_per_tool_per_turn: Option<u32>,
    /// More prompt-injection regexes, beside the defaults, for untrusted tool results.
    #[serde(default)]
    pub injection_patterns: Vec<String>,
}

/// Whether the boundary applies its decisions (policy rules, the taint and grounding
/// floors, approvals, poisoned-tool refusal) or only logs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Deny what the decision denies, ask approval for what it escalates.
    #[default]
    Enforce,
    /// Log each decision as it would have been (`would_deny`, `would_escalate`, same rule
    /// and reason) and let the call into the sandbox: what production without the
    /// boundary would have seen.
    Observe,
}

fn is_enforce(e: &Enforcement) -> bool {
    *e == Enforcement::Enforce
}

fn is_refuse(p: &PoisonedTools) -> bool {
    *p == PoisonedTools::Refuse
}

fn yes() -> bool {
    true
}

fn privileged() -> Vec<SafetyClass> {
    vec![SafetyClass::Privileged]
}

impl Default for SafetyConfig {
    fn default() -> Self {
        SafetyConfig {
            pii: true,
            pii_patterns: Vec::new(),
            pii_allow: Vec::new(),
            destructive_classes: privileged(),
            destructive_tools: Vec::new(),
            max_calls_per_tool_per_turn: None,
            injection_patterns: Vec::new(),
        }
    }
}

/// Token prices for the cost resource of the reliability card (any currency).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_1k_tokens: f64,
    pub output_per_1k_tokens: f64,
}

/// Model calls allowed within one user turn before the run fails: a loop guard, so a
/// recording that never stops calling tools cannot spin forever.
pub const DEFAULT_MAX_STEPS_PER_TURN: u32 = 32;

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS_PER_TURN
}

/// Virtual milliseconds a tool call may take before it times out, when the profile does
/// not say. 30 s is the order of the request timeouts real tool clients ship with, so
/// an injected hang costs about what it would cost a user in production; it is also a
/// round number, easy to spot in a log's virtual clock.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;

/// The longest `tool_timeout_ms` accepted: a day. Anything longer is a typo, and the
/// bound keeps a run's virtual clock far inside the integers an event log may hold.
pub const MAX_TOOL_TIMEOUT_MS: u64 = 86_400_000;

/// Which implementation runs a profile's cases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// The reference runtime (`runtime`).
    #[default]
    Builtin,
    /// The team's own program, spawned per case run and served replay endpoints
    /// (`external`).
    External,
}

impl AgentKind {
    fn is_builtin(&self) -> bool {
        *self == AgentKind::Builtin
    }
}

/// One rule applied to an external agent's dialect-neutral model request before its
/// digest is taken: values that legitimately change between runs (dates, ids the
/// agent makes up) are dropped or rewritten so they do not read as divergence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeRule {
    /// JSON Pointer into the request; a `*` segment matches every key or index.
    pub path: String,
    /// Remove the values there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop: bool,
    /// Replace matches of this regex in every string at or below the path …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// … with this text (default: empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<String>,
}

/// After `end`, how long an external agent has to exit when the profile does not say.
/// A replayed run has nothing left to do, but a Python interpreter with an SDK's HTTP
/// pools and threads took more than five seconds to shut down on a CI machine running
/// a dozen of them at once; the grace is a bound, not a wait, so a prompt agent pays
/// nothing for it, and a hung one costs fifteen seconds before it fails.
pub const DEFAULT_EXIT_GRACE_MS: u64 = 15_000;

/// Wall-clock limit of one external case run when the profile does not say: a minute
/// is far more than a replayed run needs (no model latency is real), and short enough
/// that a hung agent does not hold CI for long.
pub const DEFAULT_EXTERNAL_TIMEOUT_MS: u64 = 60_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    /// Built-in runtime or external program. (Absent and default fields are not
    /// serialised, so built-in profiles keep the digests they had before.)
    #[serde(default, skip_serializing_if = "AgentKind::is_builtin")]
    pub kind: AgentKind,
    /// External: the program and its arguments.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub command: Sparse<Vec<String>>,
    /// External: working directory, relative to the pipeline's base.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub cwd: Sparse<Option<String>>,
    /// External: variables set for the process over the inherited environment.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub env: Sparse<BTreeMap<String, String>>,
    /// External: variables of stateval's own environment the process gets although
    /// their names say they hold credentials (`GITHUB_TOKEN`); everything else of that
    /// kind, and always the signing key, is kept from it (`crate::child_env`).
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub env_passthrough: Sparse<Vec<String>>,
    /// External: how long the agent has to exit after `end`, in ms (a framework that
    /// flushes telemetry or closes pools at exit may need more than the default).
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub exit_grace_ms: Sparse<Option<u64>>,
    /// External: wall-clock limit of one case run, in ms.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub timeout_ms: Sparse<Option<u64>>,
    /// External: request normalisation before digests are compared.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub normalize: Sparse<Vec<NormalizeRule>>,
    /// External: more secret patterns (regexes) scrubbed from requests and recordings,
    /// beside the built-in ones (API keys, bearer tokens, JWTs).
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub scrub: Sparse<Vec<String>>,
    #[serde(default)]
    pub system: String,
    /// Path of the fixture tool manifest, relative to the pipeline's base.
    pub tools: Option<String>,
    #[serde(default)]
    pub context: Sparse<ContextConfig>,
    #[serde(default)]
    pub memory: MemoryConfig,
    #[serde(default = "default_max_steps")]
    pub max_steps_per_turn: u32,
    #[serde(default)]
    pub policy: Sparse<Vec<PolicyRule>>,
    /// Answers for escalated calls, by tool name or safety class; tool name wins.
    /// Anything escalated without an answer is denied.
    #[serde(default)]
    pub approvals: Sparse<BTreeMap<String, ApprovalAnswer>>,
    #[serde(default)]
    pub safety: Sparse<SafetyConfig>,
    /// Pin the tool manifest: its content digest must be this (`blake3:…`), so a
    /// manifest changed behind the suite's back refuses to run.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub tools_digest: Sparse<Option<String>>,
    /// Agent profiles this one may hand a task to (the built-in `handoff` tool).
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub handoffs: Sparse<Vec<String>>,
    /// A privileged agent never receives a handoff whose payload carries untrusted
    /// (tainted) content: the confused-deputy mitigation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged: bool,
    /// What happens to tools the poisoning checks flag.
    #[serde(default, skip_serializing_if = "is_refuse")]
    pub poisoned_tools: PoisonedTools,
    /// What the grounding floor does to a call whose sensitive argument is grounded in
    /// no trusted source: deny (default), escalate or allow.
    #[serde(default, skip_serializing_if = "is_deny")]
    pub ungrounded: Ungrounded,
    /// What the request floor does to a call of a tool whose `requested_by` words no
    /// user turn said (an effect the user never asked for): deny (default), escalate
    /// or allow.
    #[serde(default, skip_serializing_if = "is_deny")]
    pub unrequested: Ungrounded,
    /// `enforce` (default) or `observe`: whether the boundary's decisions stop calls or
    /// are only logged (docs/security.md, "Observe instead of enforce").
    #[serde(default, skip_serializing_if = "is_enforce")]
    pub enforcement: Enforcement,
    /// Values this agent trusts as its user's own (an allow-list of payees, accounts,
    /// addresses): they ground sensitive arguments, like the system prompt does.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub trusted_values: Sparse<Vec<String>>,
    #[serde(default)]
    pub price: Sparse<Option<Price>>,
    /// Per-call timeout in virtual ms; [`DEFAULT_TOOL_TIMEOUT_MS`] when absent. (Absent
    /// and default fields are not serialised, so profiles without faults keep the digest
    /// they had before faults existed.)
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub tool_timeout_ms: Sparse<Option<u64>>,
    /// Faults this profile injects, consulted before the manifest's own.
    #[serde(default, skip_serializing_if = "Sparse::is_default")]
    pub faults: Sparse<Vec<FaultDecl>>,
}

impl AgentProfile {
    /// The per-call timeout in force.
    pub fn timeout_ms(&self) -> u64 {
        self.tool_timeout_ms.unwrap_or(DEFAULT_TOOL_TIMEOUT_MS)
    }

    /// External agents: the wall-clock limit of one case run.
    pub fn external_timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_EXTERNAL_TIMEOUT_MS)
    }

    /// External agents: how long the agent has to exit after `end`.
    pub fn exit_grace_ms(&self) -> u64 {
        self.exit_grace_ms.unwrap_or(DEFAULT_EXIT_GRACE_MS)
    }

    pub fn validate(&self) -> Result<(), String> {
        self.validate_kind()?;
        let s = &self.safety;
        for (key, patterns) in [
            ("pii_patterns", &s.pii_patterns),
            ("pii_allow", &s.pii_allow),
            ("destructive_tools", &s.destructive_tools),
            ("injection_patterns", &s.injection_patterns),
        ] {
            for (i, p) in patterns.iter().enumerate() {
                // compiled into the cache the detectors take them from
                crate::text::patterns::compiled(p).map_err(|e| {
                    format!(
                        "safety.{key}[{i}]: invalid regex: {}",
                        e.to_string().lines().last().unwrap_or_default().trim()
                    )
                })?;
            }
        }
        for (i, p) in self.scrub.iter().enumerate() {
            regex::Regex::new(p).map_err(|e| {
                format!("scrub[{i}]: invalid regex: {}", e.to_string().lines().last().unwrap_or_default().trim())
            })?;
        }
        for (i, rule) in self.normalize.iter().enumerate() {
            if let Some(p) = &rule.regex {
                regex::Regex::new(p).map_err(|e| {
                    format!(
                        "normalize[{i}].regex: invalid regex: {}",
                        e.to_string().lines().last().unwrap_or_default().trim()
                    )
                })?;
            }
            if rule.drop == rule.regex.is_some() {
                return Err(format!("normalize[{i}]: give either drop = true or a regex (with replace)"));
            }
            if rule.replace.is_some() && rule.regex.is_none() {
                return Err(format!("normalize[{i}]: replace needs a regex"));
            }
        }
        let mut seen = BTreeSet::new();
        for (i, rule) in self.policy.iter().enumerate() {
            if !seen.insert(rule.id.as_str()) {
                return Err(format!("policy[{i}]: duplicate rule id \"{}\"", rule.id));
            }
        }
        Ok(())
    }
}

impl AgentProfile {
    /// Settings that belong to one kind of agent only are refused on the other, so a
    /// profile never carries a setting that silently does nothing.
    fn validate_kind(&self) -> Result<(), String> {
        match self.kind {
            AgentKind::Builtin => {
                let external = [
                    ("command", !self.command.is_empty()),
                    ("cwd", self.cwd.is_some()),
                    ("env", !self.env.is_empty()),
                    ("env_passthrough", !self.env_passthrough.is_empty()),
                    ("timeout_ms", self.timeout_ms.is_some()),
                    ("exit_grace_ms", self.exit_grace_ms.is_some()),
                    ("normalize", !self.normalize.is_empty()),
                    ("scrub", !self.scrub.is_empty()),
                ];
                if let Some((key, _)) = external.iter().find(|(_, set)| *set) {
                    return Err(format!("{key} is for external agents; add kind = \"external\" or remove it"));
                }
            }
            AgentKind::External => {
                if self.command.is_empty() || self.command[0].is_empty() {
                    return Err("kind = \"external\" needs command = [\"program\", \"arg\", …]".into());
                }
                crate::child_env::check_passthrough(&self.env_passthrough)?;
                if self.env.contains_key(crate::child_env::SIGNING_KEY_VAR) {
                    return Err(format!(
                        "env: {} never reaches the agent: only stateval signs a run",
                        crate::child_env::SIGNING_KEY_VAR
                    ));
                }
                let builtin = [
                    ("system", !self.system.is_empty()),
                    ("context", !self.context.is_default()),
                    ("memory", self.memory != MemoryConfig::default()),
                    ("max_steps_per_turn", self.max_steps_per_turn != DEFAULT_MAX_STEPS_PER_TURN),
                    ("handoffs", !self.handoffs.is_empty()),
                ];
                if let Some((key, _)) = builtin.iter().find(|(_, set)| *set) {
                    return Err(format!(
                        "{key} configures the built-in runtime; an external agent brings its own (remove it)"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_of_the_other_kind_of_agent_is_refused() {
        let err = profile("command = [\"python3\"]").validate().unwrap_err();
        assert!(err.contains("command is for external agents"), "{err}");
        let err = profile("kind = \"external\"").validate().unwrap_err();
        assert!(err.contains("needs command"), "{err}");
        let err = profile("kind = \"external\"\ncommand = [\"a\"]\nsystem = \"s\"").validate().unwrap_err();
        assert!(err.contains("system configures the built-in runtime"), "{err}");
        profile("kind = \"external\"\ncommand = [\"a\"]\ntimeout_ms = 5").validate().unwrap();
    }

    #[test]
    fn a_normalize_rule_drops_or_rewrites() {
        let err =
            profile("kind = \"external\"\ncommand = [\"a\"]\nnormalize = [{ path = \"/x\" }]").validate().unwrap_err();
        assert!(err.contains("either drop = true or a regex"), "{err}");
        let err = profile("kind = \"external\"\ncommand = [\"a\"]\nnormalize = [{ path = \"/x\", regex = \"(\" }]")
            .validate()
            .unwrap_err();
        assert!(err.contains("normalize[0].regex: invalid regex"), "{err}");
    }

    #[test]
    fn a_profile_of_defaults_is_small() {
        // the plan holds every profile for the whole run: a suite with a profile per case
        // pays this per case (it was 576 bytes before the rarely set parts were `Sparse`;
        // each rarely set setting added since, `enforcement` and `unrequested` the last, costs one word)
        assert!(std::mem::size_of::<AgentProfile>() <= 216, "{}", std::mem::size_of::<AgentProfile>());
    }

    fn profile(toml_text: &str) -> AgentProfile {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn the_timeout_defaults_to_thirty_seconds() {
        assert_eq!(profile("").timeout_ms(), 30_000);
        assert_eq!(profile("tool_timeout_ms = 5000").timeout_ms(), 5000);
    }

    #[test]
    fn a_profile_without_faults_serialises_as_it_did_before_faults_existed() {
        // the profile digest (run_started.profile) of existing suites must not move
        let value = serde_json::to_value(profile("system = \"s\"")).unwrap();
        assert!(value.get("faults").is_none() && value.get("tool_timeout_ms").is_none(), "{value}");
        let value = serde_json::to_value(profile("faults = [{ tool = \"a\", fault = \"slow:5\" }]")).unwrap();
        assert_eq!(value["faults"], serde_json::json!([{"tool": "a", "fault": "slow:5"}]));
    }
}
