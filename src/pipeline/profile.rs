//! Agent profiles: what the built-in runtime needs to run a case as a given agent.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Consequence class of a tool, from its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyClass {
    Read,
    Write,
    Network,
    Financial,
    Privileged,
}

impl SafetyClass {
    pub fn as_str(self) -> &'static str {
        match self {
            SafetyClass::Read => "read",
            SafetyClass::Write => "write",
            SafetyClass::Network => "network",
            SafetyClass::Financial => "financial",
            SafetyClass::Privileged => "privileged",
        }
    }
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    Approve,
    Deny,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    pub budget_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    pub episodic_ttl_turns: Option<u32>,
}

/// Model calls allowed within one user turn before the run fails: a loop guard, so a
/// recording that never stops calling tools cannot spin forever.
pub const DEFAULT_MAX_STEPS_PER_TURN: u32 = 32;

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS_PER_TURN
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProfile {
    #[serde(default)]
    pub system: String,
    /// Path of the fixture tool manifest, relative to the pipeline's base.
    pub tools: Option<String>,
    #[serde(default)]
    pub context: ContextConfig,
    #[serde(default)]
    pub memory: MemoryConfig,
    #[serde(default = "default_max_steps")]
    pub max_steps_per_turn: u32,
    #[serde(default)]
    pub policy: Vec<PolicyRule>,
    /// Answers for escalated calls, by tool name or safety class; tool name wins.
    /// Anything escalated without an answer is denied.
    #[serde(default)]
    pub approvals: BTreeMap<String, ApprovalAnswer>,
}

impl AgentProfile {
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for (i, rule) in self.policy.iter().enumerate() {
            if !seen.insert(rule.id.as_str()) {
                return Err(format!("policy[{i}]: duplicate rule id \"{}\"", rule.id));
            }
        }
        Ok(())
    }
}
