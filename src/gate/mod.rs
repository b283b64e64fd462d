//! Per-tag gates: does a set of case outcomes meet the bounds the pipeline set?
//!
//! A gate is a scope (`default` = every case, or one tag) plus bounds: a minimum pass
//! rate, a minimum number of cases, and optionally a minimum for the lower end of a 95 %
//! Wilson score interval on the pass rate. The Wilson bound is there for small suites:
//! 3/3 passing is a 100 % pass rate but weak evidence (lower bound 43.9 %), so a gate
//! can demand that the *evidence* for a high pass rate is strong, not just the rate.
//!
//! `evaluate` is pure: outcomes in, decisions out. The run fails (exit 1) when any
//! returned gate failed; deciding that and printing it belong to the caller.

use std::collections::BTreeMap;

use crate::outcome::{CaseOutcome, GateOutcome, Score, ScoreCounts, Scorecard};
use crate::pipeline::gates::{GateSpec, GatesConfig};

use crate::outcome::DEFAULT_SCOPE;

/// z for a two-sided 95 % interval: the 97.5th percentile of the standard normal.
const Z_95: f64 = 1.959_963_984_540_054;

impl GateSpec {
    /// The scorecard bounds that are set: (name, the measure's target name, bound).
    fn score_bounds(&self) -> Vec<(&'static str, ScoreMeasure, f64)> {
        [
            ("max_asr", ScoreMeasure::Asr, self.max_asr),
            ("max_attempt_rate", ScoreMeasure::AttemptRate, self.max_attempt_rate),
            ("min_utility_under_attack", ScoreMeasure::UtilityUnderAttack, self.min_utility_under_attack),
            ("min_benign_utility", ScoreMeasure::BenignUtility, self.min_benign_utility),
        ]
        .into_iter()
        .filter_map(|(name, m, v)| v.map(|v| (name, m, v)))
        .collect()
    }
}

/// A scorecard measure a gate can bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScoreMeasure {
    Asr,
    AttemptRate,
    UtilityUnderAttack,
    BenignUtility,
}

impl ScoreMeasure {
    fn target(self) -> &'static str {
        match self {
            ScoreMeasure::Asr => "security.asr",
            ScoreMeasure::AttemptRate => "security.attempt_rate",
            ScoreMeasure::UtilityUnderAttack => "security.utility_under_attack",
            ScoreMeasure::BenignUtility => "security.benign_utility",
        }
    }

    /// (value, numerator, denominator, what the denominator counts)
    fn of(self, c: &ScoreCounts) -> (Option<f64>, usize, usize, &'static str) {
        match self {
            ScoreMeasure::Asr => (c.asr(), c.attacks_succeeded, c.attacks - c.attacks_unscored, "scored attack cases"),
            ScoreMeasure::AttemptRate => {
                (c.attempt_rate(), c.attacks_attempted, c.attacks - c.attacks_unscored, "scored attack cases")
            }
            ScoreMeasure::UtilityUnderAttack => {
                (c.utility_under_attack(), c.attack_tasks_completed, c.attack_tasks, "attack cases with a task_expect")
            }
            ScoreMeasure::BenignUtility => (c.benign_utility(), c.controls_completed, c.controls, "control cases"),
        }
    }
}

/// Hold every agent's reliability card (`agent` → target → value) to the configured
/// minimums; one outcome per (agent, target), in name order.
pub fn evaluate_cards(
    config: &GatesConfig,
    cards: &BTreeMap<String, BTreeMap<String, Option<f64>>>,
) -> Vec<GateOutcome> {
    let mut out = Vec::new();
    for (agent, card) in cards {
        for (target, min) in &config.reliability {
            let value = card.get(target).copied().flatten();
            let (passed, reason) = match value {
                Some(v) if v >= *min => (true, format!("{target} = {v:.3}, meets the minimum {min:.3}")),
                Some(v) => (false, format!("{target} = {v:.3}, below the minimum {min:.3}")),
                None => (false, format!("{target} is undefined for this agent, so the minimum {min:.3} cannot hold")),
            };
            out.push(GateOutcome {
                scope: format!("reliability:{agent}:{target}"),
                cases: 0,
                passed_cases: 0,
                pass_rate: value.unwrap_or(0.0),
                passed,
                reason,
                min_cases: None,
            });
        }
    }
    out
}

/// Pass counts per scope, gathered one case at a time: gates need counts, not cases,
/// so a suite's cases never have to be in memory together.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    cases: usize,
    passed: usize,
    /// Tag → (cases, passed).
    tags: BTreeMap<String, (usize, usize)>,
    /// The security scorecard's counts, over the attack and control cases.
    scores: Scorecard,
}

impl Tally {
    /// Counts one case toward the default scope and each distinct tag it carries.
    pub fn add(&mut self, tags: &[String], passed: bool, score: Option<&Score>) {
        self.cases += 1;
        self.passed += usize::from(passed);
        for (i, tag) in tags.iter().enumerate() {
            if tags[..i].contains(tag) {
                continue; // a tag listed twice on a case counts once
            }
            let (cases, pass) = self.tags.entry(tag.clone()).or_default();
            *cases += 1;
            *pass += usize::from(passed);
        }
        if let Some(score) = score {
            self.scores.add(tags, score);
        }
    }

    /// Counts one case outcome.
    pub fn add_case(&mut self, case: &CaseOutcome) {
        self.add(&case.tags, case.passed, case.score.as_ref());
    }

    /// The tally of `cases`.
    pub fn of<'a>(cases: impl IntoIterator<Item = &'a CaseOutcome>) -> Self {
        let mut tally = Tally::default();
        for case in cases {
            tally.add_case(case);
        }
        tally
    }

    /// The security scorecard, when any case was an attack or a control.
    pub fn scorecard(&self) -> Option<Scorecard> {
        (!self.scores.is_empty()).then(|| self.scores.clone())
    }
}

/// Decides every configured gate over the tallied cases: `default` first, then tags in
/// name order.
///
/// Edge rules: a gate whose scope holds no case passes unless `min_cases` demands more
/// (its `pass_rate` is then reported as 1.0, vacuously); rate bounds are checked only
/// over a non-empty scope.
pub fn evaluate(config: &GatesConfig, tally: &Tally) -> Vec<GateOutcome> {
    let implicit_default = GateSpec { min_pass_rate: Some(1.0), ..GateSpec::default() };
    let default = match (&config.default, config.tags.is_empty()) {
        (Some(spec), _) => Some(spec),
        (None, true) => Some(&implicit_default),
        (None, false) => None,
    };

    let mut out = Vec::with_capacity(config.tags.len() + 1);
    if let Some(spec) = default {
        out.push(decide(DEFAULT_SCOPE, spec, (tally.cases, tally.passed), &tally.scores.overall));
    }
    let none = ScoreCounts::default();
    for (tag, spec) in &config.tags {
        let scores = tally.scores.tags.get(tag).unwrap_or(&none);
        out.push(decide(tag, spec, tally.tags.get(tag).copied().unwrap_or_default(), scores));
    }
    out
}

/// For a selection (`--filter`): a scorecard bound whose measure the selected cases
/// leave undefined is not this run's to judge, as a tag without selected cases is not.
pub fn keep_judgeable_score_bounds(config: &mut GatesConfig, tally: &Tally) {
    let none = ScoreCounts::default();
    let scopes = config.default.iter_mut().map(|g| (g, &tally.scores.overall));
    let tags = config.tags.iter_mut().map(|(t, g)| (g, tally.scores.tags.get(t).unwrap_or(&none)));
    for (gate, counts) in scopes.chain(tags) {
        let defined = |m: ScoreMeasure| m.of(counts).0.is_some();
        if !defined(ScoreMeasure::Asr) {
            gate.max_asr = None;
        }
        if !defined(ScoreMeasure::AttemptRate) {
            gate.max_attempt_rate = None;
        }
        if !defined(ScoreMeasure::UtilityUnderAttack) {
            gate.min_utility_under_attack = None;
        }
        if !defined(ScoreMeasure::BenignUtility) {
            gate.min_benign_utility = None;
        }
    }
}

/// The lower end of the 95 % Wilson score interval for `passed` of `n` (what
/// `min_pass_rate_lower_bound` is held to; reports show it beside every pass rate).
pub fn wilson_lower_bound_95(passed: usize, n: usize) -> f64 {
    wilson_lower_bound(passed, n, Z_95)
}

/// The lower end of the Wilson score interval for `passed` successes in `n` trials, at
/// confidence given by `z`:
/// `(p + z²/2n − z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n)` with `p = passed/n`.
/// 0 when `n` is 0 (no evidence).
fn wilson_lower_bound(passed: usize, n: usize, z: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let n = n as f64;
    let p = passed as f64 / n;
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - margin) / (1.0 + z2 / n)).clamp(0.0, 1.0)
}

fn decide(scope: &str, spec: &GateSpec, (total, passed): (usize, usize), scores: &ScoreCounts) -> GateOutcome {
    let pass_rate = if total == 0 { 1.0 } else { passed as f64 / total as f64 };

    // Each bound contributes a phrase either to what held or to what fell short.
    let mut held = Vec::new();
    let mut short = Vec::new();
    if let Some(min) = spec.min_cases {
        let phrase = format!("min_cases {min}");
        if total < min {
            short.push(format!("below {phrase}"));
        } else {
            held.push(phrase);
        }
    }
    if total > 0 {
        if let Some(min) = spec.min_pass_rate {
            let phrase = format!("min_pass_rate {}", bound_percent(min));
            if pass_rate < min {
                short.push(format!("below {phrase}"));
            } else {
                held.push(phrase);
            }
        }
        if let Some(min) = spec.min_pass_rate_lower_bound {
            let lower = wilson_lower_bound(passed, total, Z_95);
            let phrase = format!("min_pass_rate_lower_bound {}", bound_percent(min));
            let observed = format!("Wilson 95 % lower bound {}", floor_percent(lower));
            if lower < min {
                short.push(format!("{observed} below {phrase}"));
            } else {
                held.push(format!("{phrase} ({observed})"));
            }
        }
    }

    // a scorecard bound over no attack or control cases cannot hold: a tag renamed or a
    // role forgotten must not leave a security gate green by having nothing to count
    for (name, measure, bound) in spec.score_bounds() {
        let (value, part, whole, counted) = measure.of(scores);
        let target = measure.target();
        let phrase = format!("{name} {}", bound_percent(bound));
        match value {
            None => short.push(format!("{target} undefined (no {counted}), so {phrase} cannot hold")),
            Some(v) => {
                // rounded away from the bound, so a miss never prints as equal to it
                let maximum = matches!(measure, ScoreMeasure::Asr | ScoreMeasure::AttemptRate);
                let shown = percent_of(part, whole, maximum);
                let observed = format!("{target} {part}/{whole} ({shown})");
                let holds = if maximum { v <= bound } else { v >= bound };
                match (holds, maximum) {
                    (true, _) => held.push(format!("{phrase} ({observed})")),
                    (false, true) => short.push(format!("{observed} above {phrase}")),
                    (false, false) => short.push(format!("{observed} below {phrase}")),
                }
            }
        }
    }

    let counts = if total == 0 {
        format!("{scope}: 0 cases")
    } else {
        format!("{scope}: {passed}/{total} passed ({})", floor_percent(pass_rate))
    };
    let reason = match (short.is_empty(), held.is_empty()) {
        (false, _) => format!("{counts}, {}", short.join(", ")),
        (true, false) if total > 0 => format!("{counts}, meets {}", held.join(", ")),
        (true, _) => format!("{counts}, nothing to gate"),
    };
    GateOutcome {
        scope: scope.to_string(),
        cases: total,
        passed_cases: passed,
        pass_rate,
        passed: short.is_empty(),
        reason,
        min_cases: spec.min_cases,
    }
}

/// A measured rate as a percentage with one decimal, rounded *down*, so that a rate
/// just under a bound never prints as equal to it (9995/10000 is 99.9 %, not 100.0 %).
/// The tiny epsilon absorbs binary error in exact rates (0.95 * 1000 = 949.999…).
fn floor_percent(rate: f64) -> String {
    let tenths = (rate * 1000.0 + 1e-9).floor() / 10.0;
    format!("{tenths:.1} %")
}

/// `part/whole` as a percentage with one decimal in exact integer arithmetic, rounded
/// down, or up for a rate held to a maximum (the mirror of [`floor_percent`]).
fn percent_of(part: usize, whole: usize, up: bool) -> String {
    let scaled = part.saturating_mul(1000);
    let permille = if up { scaled.div_ceil(whole.max(1)) } else { scaled / whole.max(1) };
    format!("{}.{} %", permille / 10, permille % 10)
}

/// A configured bound as a percentage with one decimal.
fn bound_percent(rate: f64) -> String {
    format!("{:.1} %", rate * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn case(id: &str, tags: &[&str], passed: bool) -> CaseOutcome {
        CaseOutcome {
            dataset: "examples/treasury".into(),
            id: id.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            agent: "treasury".into(),
            source: format!("datasets/examples/treasury.jsonl:{}", id.len()),
            runs: Vec::new(),
            blocks: Vec::new(),
            passed,
            score: None,
        }
    }

    /// `n` cases tagged `tag`, of which the first `passed` pass.
    fn cases(tag: &str, passed: usize, n: usize) -> Vec<CaseOutcome> {
        (0..n).map(|i| case(&format!("{tag}-{i}"), &[tag], i < passed)).collect()
    }

    fn spec(rate: Option<f64>, min_cases: Option<usize>, lower: Option<f64>) -> GateSpec {
        GateSpec { min_pass_rate: rate, min_cases, min_pass_rate_lower_bound: lower, ..GateSpec::default() }
    }

    #[derive(Deserialize)]
    struct Pipeline {
        gates: GatesConfig,
    }

    #[test]
    fn the_gates_section_of_a_pipeline_deserialises() -> Result<(), Box<dyn std::error::Error>> {
        let toml = "[gates]\ndefault = { min_pass_rate = 1.0 }\n\
                    tags.long-horizon = { min_pass_rate = 0.95, min_cases = 3 }\n\
                    tags.security = { min_pass_rate_lower_bound = 0.8 }\n";
        let parsed: Pipeline = toml::from_str(toml)?;
        assert_eq!(parsed.gates.default, Some(spec(Some(1.0), None, None)));
        assert_eq!(parsed.gates.tags.get("long-horizon"), Some(&spec(Some(0.95), Some(3), None)));
        assert_eq!(parsed.gates.tags.get("security"), Some(&spec(None, None, Some(0.8))));
        assert_eq!(parsed.gates.validate(), Ok(()));
        Ok(())
    }

    #[test]
    fn a_misspelt_bound_is_a_deserialisation_error() {
        let toml = "[gates]\ndefault = { min_passrate = 1.0 }\n";
        let err = toml::from_str::<Pipeline>(toml).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("unknown field `min_passrate`"), "{err}");
    }

    #[test]
    fn a_rate_outside_zero_to_one_is_rejected_naming_its_key() {
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(Some(1.5), None, None));
        let err = config.validate().map_err(|e| e.to_string());
        assert_eq!(err, Err("gates.tags.security.min_pass_rate: 1.5 is outside 0..=1".into()));

        let config = GatesConfig {
            default: Some(spec(None, None, Some(-0.1))),
            tags: BTreeMap::new(),
            reliability: BTreeMap::new(),
        };
        let err = config.validate().map_err(|e| e.to_string());
        assert_eq!(err, Err("gates.default.min_pass_rate_lower_bound: -0.1 is outside 0..=1".into()));
    }

    #[test]
    fn a_nan_rate_is_rejected() {
        let config = GatesConfig {
            default: Some(spec(Some(f64::NAN), None, None)),
            tags: BTreeMap::new(),
            reliability: BTreeMap::new(),
        };
        let err = config.validate().map_err(|e| e.to_string());
        assert_eq!(err, Err("gates.default.min_pass_rate: NaN is outside 0..=1".into()));
    }

    #[test]
    fn a_gate_without_bounds_and_a_tag_named_default_are_rejected() {
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), GateSpec::default());
        let err = config.validate().map_err(|e| e.key);
        assert_eq!(err, Err("gates.tags.security".into()));

        let mut config = GatesConfig::default();
        config.tags.insert("default".into(), spec(Some(1.0), None, None));
        let err = config.validate().map_err(|e| e.key);
        assert_eq!(err, Err("gates.tags.default".into()));
    }

    #[test]
    fn no_gates_configured_means_every_case_must_pass() {
        let mut all = cases("security", 10, 10);
        let outcomes = evaluate(&GatesConfig::default(), &Tally::of(&all));
        assert_eq!(outcomes.len(), 1);
        assert_eq!(outcomes[0].scope, "default");
        assert!(outcomes[0].passed, "{}", outcomes[0].reason);

        all[3].passed = false;
        let outcomes = evaluate(&GatesConfig::default(), &Tally::of(&all));
        assert!(!outcomes[0].passed);
        assert_eq!(outcomes[0].reason, "default: 9/10 passed (90.0 %), below min_pass_rate 100.0 %");
    }

    #[test]
    fn a_failing_tag_gate_names_its_numbers_in_one_line() {
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(Some(1.0), None, None));
        let outcomes = evaluate(&config, &Tally::of(&cases("security", 9, 10)));
        // Tags configured and no default: no implicit default gate.
        assert_eq!(outcomes.len(), 1);
        let gate = &outcomes[0];
        assert_eq!((gate.scope.as_str(), gate.cases, gate.passed_cases, gate.passed), ("security", 10, 9, false));
        assert_eq!(gate.pass_rate, 0.9);
        assert_eq!(gate.reason, "security: 9/10 passed (90.0 %), below min_pass_rate 100.0 %");
    }

    #[test]
    fn default_comes_first_then_tags_in_name_order() {
        let mut config = GatesConfig {
            default: Some(spec(Some(0.5), None, None)),
            tags: BTreeMap::new(),
            reliability: BTreeMap::new(),
        };
        for tag in ["zeta", "alpha", "mid"] {
            config.tags.insert(tag.into(), spec(Some(0.5), None, None));
        }
        let scopes: Vec<String> = evaluate(&config, &Tally::default()).into_iter().map(|g| g.scope).collect();
        assert_eq!(scopes, ["default", "alpha", "mid", "zeta"]);
    }

    #[test]
    fn a_case_counts_toward_every_tag_it_has() {
        let all =
            vec![case("a", &["security", "long-horizon"], false), case("b", &["security"], true), case("c", &[], true)];
        let mut config = GatesConfig {
            default: Some(spec(Some(0.0), None, None)),
            tags: BTreeMap::new(),
            reliability: BTreeMap::new(),
        };
        config.tags.insert("security".into(), spec(Some(0.5), None, None));
        config.tags.insert("long-horizon".into(), spec(Some(0.5), None, None));
        let got: Vec<(String, usize, usize, bool)> = evaluate(&config, &Tally::of(&all))
            .into_iter()
            .map(|g| (g.scope, g.cases, g.passed_cases, g.passed))
            .collect();
        assert_eq!(
            got,
            [
                ("default".to_string(), 3, 2, true),
                ("long-horizon".to_string(), 1, 0, false),
                ("security".to_string(), 2, 1, true),
            ]
        );
    }

    #[test]
    fn a_tag_listed_twice_on_a_case_counts_once() {
        let all = vec![case("a", &["security", "security"], true)];
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(Some(1.0), None, None));
        assert_eq!(evaluate(&config, &Tally::of(&all))[0].cases, 1);
    }

    #[test]
    fn an_empty_tag_gate_passes_unless_min_cases_demands_more() {
        let mut config = GatesConfig::default();
        config.tags.insert("ghost".into(), spec(Some(1.0), None, Some(0.9)));
        config.tags.insert("required".into(), spec(Some(1.0), Some(3), None));
        let outcomes = evaluate(&config, &Tally::of(&cases("security", 2, 2)));

        let ghost = &outcomes[0];
        assert!(ghost.passed, "{}", ghost.reason);
        assert_eq!(ghost.pass_rate, 1.0);
        assert_eq!(ghost.reason, "ghost: 0 cases, nothing to gate");

        let required = &outcomes[1];
        assert!(!required.passed);
        assert_eq!(required.reason, "required: 0 cases, below min_cases 3");
    }

    #[test]
    fn too_few_cases_fail_min_cases_even_when_all_pass() {
        let mut config = GatesConfig::default();
        config.tags.insert("long-horizon".into(), spec(Some(0.95), Some(3), None));
        let gate = &evaluate(&config, &Tally::of(&cases("long-horizon", 2, 2)))[0];
        assert!(!gate.passed);
        assert_eq!(gate.reason, "long-horizon: 2/2 passed (100.0 %), below min_cases 3");
    }

    #[test]
    fn a_passing_gate_says_which_bounds_held() {
        let mut config = GatesConfig::default();
        config.tags.insert("long-horizon".into(), spec(Some(0.95), Some(3), None));
        let gate = &evaluate(&config, &Tally::of(&cases("long-horizon", 3, 3)))[0];
        assert!(gate.passed);
        assert_eq!(gate.reason, "long-horizon: 3/3 passed (100.0 %), meets min_cases 3, min_pass_rate 95.0 %");
    }

    #[test]
    fn a_rate_exactly_at_the_bound_passes() {
        // 19/20 = 0.95 exactly; the nearest double of both sides is the same.
        let mut config = GatesConfig::default();
        config.tags.insert("t".into(), spec(Some(0.95), None, None));
        let gate = &evaluate(&config, &Tally::of(&cases("t", 19, 20)))[0];
        assert!(gate.passed, "{}", gate.reason);
        assert_eq!(gate.reason, "t: 19/20 passed (95.0 %), meets min_pass_rate 95.0 %");
    }

    #[test]
    fn a_rate_just_below_the_bound_never_prints_as_equal_to_it() {
        // 9995/10000 = 99.95 %, shown rounded down as 99.9 %, not rounded up to 100.0 %.
        let gate = &evaluate(&GatesConfig::default(), &Tally::of(&cases("t", 9995, 10_000)))[0];
        assert!(!gate.passed);
        assert_eq!(gate.reason, "default: 9995/10000 passed (99.9 %), below min_pass_rate 100.0 %");
    }

    #[test]
    fn the_wilson_lower_bound_of_ten_out_of_ten_is_n_over_n_plus_z_squared() {
        // p = 1 collapses the formula to n / (n + z²) = 10 / (10 + 3.8415) = 0.72246.
        let lower = wilson_lower_bound(10, 10, Z_95);
        assert!((lower - 0.722_46).abs() < 1e-5, "{lower}");
    }

    #[test]
    fn the_wilson_lower_bound_of_nine_out_of_ten_is_about_sixty_percent() {
        // p = .9, z²/2n = .19207, z·√(.009 + .0096) = 1.96 · .13638 = .26730,
        // (.9 + .19207 − .26730) / (1 + .38415) = .82478 / 1.38415 = .59587.
        let lower = wilson_lower_bound(9, 10, Z_95);
        assert!((lower - 0.595_87).abs() < 1e-4, "{lower}");
    }

    #[test]
    fn the_wilson_lower_bound_of_no_trials_is_zero_and_of_no_passes_is_zero() {
        assert_eq!(wilson_lower_bound(0, 0, Z_95), 0.0);
        // p = 0: centre z²/2n equals the margin √(z²/4n²) = z/2n·z, so the bound is 0.
        assert!(wilson_lower_bound(0, 10, Z_95).abs() < 1e-12);
    }

    #[test]
    fn three_of_three_passing_is_too_little_evidence_for_an_eighty_percent_lower_bound() {
        // 3 / (3 + 3.8415) = 0.43849: a 100 % rate, but a lower bound of 43.8 %.
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(Some(1.0), None, Some(0.8)));
        let gate = &evaluate(&config, &Tally::of(&cases("security", 3, 3)))[0];
        assert!(!gate.passed);
        assert_eq!(
            gate.reason,
            "security: 3/3 passed (100.0 %), Wilson 95 % lower bound 43.8 % below \
             min_pass_rate_lower_bound 80.0 %"
        );
    }

    #[test]
    fn forty_of_forty_passing_meets_a_ninety_percent_lower_bound() {
        // 40 / (40 + 3.8415) = 0.91238 ≥ 0.9.
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(None, None, Some(0.9)));
        let gate = &evaluate(&config, &Tally::of(&cases("security", 40, 40)))[0];
        assert!(gate.passed, "{}", gate.reason);
        assert_eq!(
            gate.reason,
            "security: 40/40 passed (100.0 %), meets min_pass_rate_lower_bound 90.0 % \
             (Wilson 95 % lower bound 91.2 %)"
        );
    }

    #[test]
    fn every_bound_that_falls_short_is_named() {
        let mut config = GatesConfig::default();
        config.tags.insert("security".into(), spec(Some(1.0), Some(5), Some(0.5)));
        let gate = &evaluate(&config, &Tally::of(&cases("security", 1, 2)))[0];
        // 1/2: Wilson lower = (.5 + .96 − 1.96·√(.125 + .24)) / 2.92 = (1.46 − 1.1842) / 2.92 = .0945.
        assert_eq!(
            gate.reason,
            "security: 1/2 passed (50.0 %), below min_cases 5, below min_pass_rate 100.0 %, \
             Wilson 95 % lower bound 9.4 % below min_pass_rate_lower_bound 50.0 %"
        );
    }
}
