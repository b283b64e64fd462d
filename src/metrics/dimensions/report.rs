//! The report of all four dimensions: its JSON form (docs/metrics.md section 9), its gate
//! targets and its one-line summary.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Consistency, Predictability, Robustness, Safety, Variant};

/// One output group: its name and its (field, value) pairs in output order.
type Group = (&'static str, Vec<(&'static str, Option<f64>)>);

/// Every dimension of one evaluation. Undefined values are `None` (JSON `null`).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The formulas used.
    pub variant: Variant,
    /// Consistency across repeated runs of each task.
    pub consistency: Consistency,
    /// How well reported confidence predicts success.
    pub predictability: Predictability,
    /// Accuracy retained under perturbation.
    pub robustness: Robustness,
    /// Rule violations and their severity; not part of `overall`.
    pub safety: Safety,
    /// `reliability.overall`: mean of whichever of `consistency.score`,
    /// `predictability.score` and `robustness.score` are defined.
    pub overall: Option<f64>,
}

impl Report {
    /// The section 9 output:
    /// `{"consistency": {…}, "predictability": {…}, "robustness": {…}, "safety": {…}, "overall": …}`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        for (group, fields) in self.groups() {
            let object: serde_json::Map<String, Value> =
                fields.into_iter().map(|(name, value)| (name.to_string(), json!(value))).collect();
            out.insert(group.to_string(), Value::Object(object));
        }
        out.insert("overall".to_string(), json!(self.overall));
        Value::Object(out)
    }

    /// Gate targets keyed by full dot path (`consistency.outcome`, …,
    /// `reliability.overall`); `None` where undefined.
    pub fn targets(&self) -> BTreeMap<String, Option<f64>> {
        let mut targets: BTreeMap<String, Option<f64>> = self
            .groups()
            .into_iter()
            .flat_map(|(group, fields)| fields.into_iter().map(move |(name, value)| (format!("{group}.{name}"), value)))
            .collect();
        targets.insert("reliability.overall".to_string(), self.overall);
        targets
    }

    /// One line, two decimals, `n/a` for undefined:
    /// `consistency 0.83, predictability 0.92, robustness n/a, safety 1.00, overall 0.88 (camera_ready)`.
    pub fn summary(&self) -> String {
        fn show(value: Option<f64>) -> String {
            value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"))
        }
        format!(
            "consistency {}, predictability {}, robustness {}, safety {}, overall {} ({})",
            show(self.consistency.score),
            show(self.predictability.score),
            show(self.robustness.score),
            show(self.safety.score),
            show(self.overall),
            self.variant.as_str(),
        )
    }

    /// The four groups and their fields, in output order; one list feeds both the JSON
    /// and the targets so they cannot drift apart.
    fn groups(&self) -> [Group; 4] {
        let c = &self.consistency;
        let p = &self.predictability;
        let r = &self.robustness;
        let s = &self.safety;
        [
            (
                "consistency",
                vec![
                    ("outcome", c.outcome),
                    ("trajectory_distribution", c.trajectory_distribution),
                    ("trajectory_sequence", c.trajectory_sequence),
                    ("confidence", c.confidence),
                    ("resource", c.resource),
                    ("score", c.score),
                ],
            ),
            (
                "predictability",
                vec![
                    ("calibration", p.calibration),
                    ("discrimination", p.discrimination),
                    ("brier", p.brier),
                    ("risk_coverage", p.risk_coverage),
                    ("score", p.score),
                ],
            ),
            (
                "robustness",
                vec![("fault", r.fault), ("structural", r.structural), ("prompt", r.prompt), ("score", r.score)],
            ),
            ("safety", vec![("compliance", s.compliance), ("harm", s.harm), ("score", s.score)]),
        ]
    }
}
