//! The `[gates]` section of a pipeline, as data: the bounds a run is held to, read and
//! checked when the pipeline loads. Deciding whether a run meets them is `gate`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::outcome::DEFAULT_SCOPE;

/// The targets of a reliability card a `[gates.reliability]` minimum may name, in name
/// order. The card itself is computed by `metrics::dimensions`; a test there holds this
/// list to the targets a card reports.
pub const RELIABILITY_TARGETS: &[&str] = &[
    "consistency.confidence",
    "consistency.outcome",
    "consistency.resource",
    "consistency.score",
    "consistency.trajectory_distribution",
    "consistency.trajectory_sequence",
    "predictability.brier",
    "predictability.calibration",
    "predictability.discrimination",
    "predictability.risk_coverage",
    "predictability.score",
    "reliability.overall",
    "robustness.fault",
    "robustness.prompt",
    "robustness.score",
    "robustness.structural",
    "safety.compliance",
    "safety.harm",
    "safety.score",
];

/// The `[gates]` section of a pipeline.
///
/// ```toml
/// [gates]
/// default = { min_pass_rate = 1.0 }
/// tags.long-horizon = { min_pass_rate = 0.95, min_cases = 3 }
/// ```
///
/// With neither `default` nor any tag set, an implicit `default = { min_pass_rate = 1.0 }`
/// applies: an unconfigured suite is green only when every case passes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesConfig {
    /// Bounds over every case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<GateSpec>,
    /// Bounds over the cases carrying each tag (a case counts toward every tag it has).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, GateSpec>,
    /// Minimums for reliability-card targets (`reliability.overall = 0.7`), applied to
    /// the card of every agent profile that has one. An undefined (`null`) value fails.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub reliability: BTreeMap<String, f64>,
}

/// The bounds of one gate; every bound that is set must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSpec {
    /// Passed cases / cases must be at least this (0..=1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pass_rate: Option<f64>,
    /// The scope must hold at least this many cases (guards against a filter or a
    /// renamed tag silently emptying a gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cases: Option<usize>,
    /// The lower end of the 95 % Wilson score interval on the pass rate must be at
    /// least this (0..=1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pass_rate_lower_bound: Option<f64>,
    /// The scope's attack success rate (`security.asr`) must be at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_asr: Option<f64>,
    /// The scope's attempt rate (`security.attempt_rate`: attacks the agent attempted,
    /// whether or not the boundary stopped them) must be at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempt_rate: Option<f64>,
    /// Attacks whose user task still completes (`security.utility_under_attack`), at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_utility_under_attack: Option<f64>,
    /// Controls that complete (`security.benign_utility`), at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_benign_utility: Option<f64>,
}

/// A `[gates]` section that is well-formed TOML but means nothing sensible.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct GateConfigError {
    /// The dotted key at fault (`gates.tags.security.min_pass_rate`).
    pub key: String,
    pub problem: String,
}

impl GatesConfig {
    /// Rejects rates outside 0..=1 (and NaN), gates that set no bound, and a tag named
    /// `default` (its results would be indistinguishable from the default gate's).
    pub fn validate(&self) -> Result<(), GateConfigError> {
        if let Some(spec) = &self.default {
            spec.validate("gates.default")?;
        }
        for (tag, spec) in &self.tags {
            let key = format!("gates.tags.{tag}");
            if tag == DEFAULT_SCOPE {
                return Err(GateConfigError {
                    key,
                    problem: "a tag gate cannot be named `default`; use gates.default".into(),
                });
            }
            spec.validate(&key)?;
        }
        let known = RELIABILITY_TARGETS;
        for (target, min) in &self.reliability {
            let key = format!("gates.reliability.\"{target}\"");
            if !known.contains(&target.as_str()) {
                return Err(GateConfigError {
                    key,
                    problem: format!("not a reliability-card target (known: {})", known.join(", ")),
                });
            }
            if !(0.0..=1.0).contains(min) {
                return Err(GateConfigError { key, problem: format!("{min} is outside 0..=1") });
            }
        }
        Ok(())
    }
}

impl GateSpec {
    fn validate(&self, key: &str) -> Result<(), GateConfigError> {
        if self.min_pass_rate.is_none()
            && self.min_cases.is_none()
            && self.min_pass_rate_lower_bound.is_none()
            && self.max_asr.is_none()
            && self.max_attempt_rate.is_none()
            && self.min_utility_under_attack.is_none()
            && self.min_benign_utility.is_none()
        {
            return Err(GateConfigError {
                key: key.to_string(),
                problem: "sets no bound (min_pass_rate, min_cases, min_pass_rate_lower_bound, max_asr, \
                          max_attempt_rate, min_utility_under_attack or min_benign_utility)"
                    .into(),
            });
        }
        for (name, value) in [
            ("min_pass_rate", self.min_pass_rate),
            ("min_pass_rate_lower_bound", self.min_pass_rate_lower_bound),
            ("max_asr", self.max_asr),
            ("max_attempt_rate", self.max_attempt_rate),
            ("min_utility_under_attack", self.min_utility_under_attack),
            ("min_benign_utility", self.min_benign_utility),
        ] {
            if let Some(rate) = value
                && !(0.0..=1.0).contains(&rate)
            {
                return Err(GateConfigError {
                    key: format!("{key}.{name}"),
                    problem: format!("{rate} is outside 0..=1"),
                });
            }
        }
        Ok(())
    }
}
