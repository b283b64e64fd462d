//! Reliability reporting over a case's repeated runs (docs/metrics.md §2).
//!
//! A single pass says little about an agent that passes 60 % of the time. These numbers
//! describe the pass/fail sequence of one case's N runs: did it ever pass (pass@k), did it
//! always pass (pass^k, the τ-bench view), how fast "k out of k" decays, how spread the
//! outcomes are, and whether failures come early or late. The unbiased estimators are
//! Chen et al. 2021 (pass@k) and τ-bench (pass^k); the power analysis is the normal
//! approximation at p = ½ (the worst case), so a suite author can ask "how many runs do I
//! need for ±5 %?" before paying for them.
//!
//! Design choice: percents are integers computed exactly where the arithmetic allows
//! (integer numerators, exact square roots), so a published value like 385 or 67 cannot
//! drift by one through a floating-point rounding.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::gate::{BlockOutcome, CaseBlock, float, parse_block_assertions};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Standard deviation of a 0/1 outcome at p = ½, the largest it can be; the variance
/// amplification is measured against it so an even split reads 100.
const MAX_INDICATOR_STD: f64 = 0.5;

/// p(1 − p) at p = ½: the worst-case Bernoulli variance used by the power analysis.
const WORST_CASE_VARIANCE: f64 = 0.25;

/// Reliability of one case's ordered run outcomes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReliabilityReport {
    /// N, the number of runs.
    pub runs: usize,
    /// 100 when any run passed, else 0 (0 for no runs).
    pub pass_at_k: u32,
    /// 100 when every run passed, else 0 (100 for no runs: nothing failed).
    pub passhat_k: u32,
    /// Entry k (1..=N) = `floor(100 · (c_k/k)^k)`, c_k = passes among the first k runs.
    pub decay_curve: Vec<u32>,
    /// `round(100 · popstd(indicators) / 0.5)`, half away from zero; 0 for no runs.
    pub variance_amplification: u32,
    /// `round(100 · Σ i·pass_i / Σ i)` over positions 1..=N, half away from zero: late
    /// failures cost more than early ones. 100 for no runs.
    pub graceful_degradation: u32,
}

impl ReliabilityReport {
    /// `4 runs: pass@k 100, pass^k 0, decay [100, 100, 100, 31], variance 87, graceful 60`.
    pub fn summary(&self) -> String {
        format!(
            "{} runs: pass@k {}, pass^k {}, decay {:?}, variance {}, graceful {}",
            self.runs,
            self.pass_at_k,
            self.passhat_k,
            self.decay_curve,
            self.variance_amplification,
            self.graceful_degradation
        )
    }

    /// The `reliability.*` targets.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("reliability.runs".into(), Value::from(self.runs)),
            ("reliability.pass_at_k".into(), Value::from(self.pass_at_k)),
            ("reliability.passhat_k".into(), Value::from(self.passhat_k)),
            ("reliability.decay_curve".into(), Value::from(self.decay_curve.clone())),
            ("reliability.variance_amplification".into(), Value::from(self.variance_amplification)),
            ("reliability.graceful_degradation".into(), Value::from(self.graceful_degradation)),
        ])
    }
}

/// Report on one case's ordered outcomes (`true` = the run passed).
pub fn score_outcomes(outcomes: &[bool]) -> ReliabilityReport {
    let n = outcomes.len();
    let passes = outcomes.iter().filter(|p| **p).count();
    let mut running = 0usize;
    let decay_curve = outcomes
        .iter()
        .enumerate()
        .map(|(i, passed)| {
            running += usize::from(*passed);
            decay_entry(running, i + 1)
        })
        .collect();
    let weighted: usize = outcomes.iter().enumerate().filter(|(_, p)| **p).map(|(i, _)| i + 1).sum();
    let total_weight = n * (n + 1) / 2;
    ReliabilityReport {
        runs: n,
        pass_at_k: if passes > 0 { 100 } else { 0 },
        passhat_k: if passes == n { 100 } else { 0 },
        decay_curve,
        variance_amplification: variance_amplification(passes, n),
        graceful_degradation: if n == 0 { 100 } else { round_ratio(100 * weighted, total_weight) },
    }
}

/// `floor(100 · (c/k)^k)`, exactly in integers while 100·k^k fits in 128 bits (k ≤ 25),
/// else in floating point (by then the value is 0 or 100 unless c is within a hair of k).
/// Every run passed (100) and five or more failures (0) need neither: see
/// [`exact_decay_entry`].
fn decay_entry(c: usize, k: usize) -> u32 {
    // Runs 1..=64 (every case of an ordinary batch) come from a table of the answers
    // [`exact_decay_entry`] gives, built once: 128-bit powers and divisions, and past
    // 25 runs `powf`, cost more than the rest.
    static SMALL: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    if (1..=TABLE_RUNS).contains(&k) && c <= k {
        let table = SMALL
            .get_or_init(|| (1..=TABLE_RUNS).flat_map(|k| (0..=k).map(move |c| exact_decay_entry(c, k))).collect());
        return table[k * (k - 1) / 2 + k - 1 + c];
    }
    exact_decay_entry(c, k)
}

/// Runs up to which [`decay_entry`] looks its answers up.
const TABLE_RUNS: usize = 64;

/// [`decay_entry`] computed, not looked up. The two answers that need no arithmetic come
/// first, as they are exact: every run passed (100), and five or more failures, since
/// (c/k)^k = (1 − d/k)^k ≤ e^(−d) for d = k − c failures and 100·e^(−5) ≈ 0.67 floors to
/// 0. (A 128-bit power and division cost more than the rest of a 50-run line.)
fn exact_decay_entry(c: usize, k: usize) -> u32 {
    if c == k {
        return 100;
    }
    if k.saturating_sub(c) >= 5 {
        return 0;
    }
    let exact = u32::try_from(k).ok().and_then(|k32| {
        let num = (c as u128).checked_pow(k32)?.checked_mul(100)?;
        let den = (k as u128).checked_pow(k32)?;
        u32::try_from(num / den).ok()
    });
    exact.unwrap_or_else(|| (100.0 * (c as f64 / k as f64).powf(k as f64)).floor() as u32)
}

/// `round(num / den)` half away from zero for non-negative integers; `den` > 0.
fn round_ratio(num: usize, den: usize) -> u32 {
    u32::try_from((2 * num + den) / (2 * den)).unwrap_or(u32::MAX)
}

/// `round(100 · sqrt(p(1−p)) / 0.5)` = `round(200 · sqrt(c(n−c)) / n)`: exact when
/// c(n−c) is a perfect square (the only case where a tie at .5 can occur).
fn variance_amplification(passes: usize, n: usize) -> u32 {
    if n == 0 {
        return 0;
    }
    let product = passes * (n - passes);
    let root = product.isqrt();
    if root * root == product {
        return round_ratio(200 * root, n);
    }
    let p = passes as f64 / n as f64;
    (100.0 * (p * (1.0 - p)).sqrt() / MAX_INDICATOR_STD).round() as u32
}

/// Chen et al. (2021) unbiased pass@k for one case with n runs and c passes:
/// `1 − C(n−c,k)/C(n,k)`, computed as `1 − Π_{i=n−c+1}^{n}(1 − k/i)`; 1.0 when n−c < k.
/// Callers guarantee 1 ≤ k ≤ n and c ≤ n.
pub fn pass_at(n: u64, c: u64, k: u64) -> f64 {
    if n - c < k {
        return 1.0;
    }
    1.0 - (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product::<f64>()
}

/// τ-bench pass^k for one case: `C(c,k)/C(n,k)` = `Π_{i=0}^{k−1} (c−i)/(n−i)`; 0 when c < k.
/// Callers guarantee 1 ≤ k ≤ n and c ≤ n.
pub fn pass_hat(n: u64, c: u64, k: u64) -> f64 {
    if c < k {
        return 0.0;
    }
    (0..k).map(|i| (c - i) as f64 / (n - i) as f64).product()
}

/// Most runs one case may report to the estimators: far beyond any real suite, and it
/// bounds the O(c) product of [`pass_at`].
pub const MAX_RUNS_PER_CASE: u64 = 1_000_000;

/// One case for the suite-level estimators: n runs, c passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskCounts {
    pub n: u64,
    pub c: u64,
}

/// Suite-level estimator: the mean over cases with n ≥ k of `estimator(n, c, k)`;
/// `None` when no case has k runs (a case with fewer runs cannot estimate k of them).
pub fn suite_mean(tasks: &[TaskCounts], k: u64, estimator: fn(u64, u64, u64) -> f64) -> Option<f64> {
    let values: Vec<f64> = tasks.iter().filter(|t| t.n >= k && k >= 1).map(|t| estimator(t.n, t.c, k)).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A confidence level the power analysis supports, with its two-sided z value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    Ninety,
    NinetyFive,
    NinetyNine,
}

impl Confidence {
    /// 90, 95 or 99 (percent); anything else is an error at `pointer`.
    pub fn from_percent(percent: f64, pointer: &str) -> Result<Self, MetricError> {
        match percent {
            90.0 => Ok(Confidence::Ninety),
            95.0 => Ok(Confidence::NinetyFive),
            99.0 => Ok(Confidence::NinetyNine),
            p => Err(MetricError::OutOfRange {
                pointer: pointer.to_string(),
                message: format!("confidence must be 90, 95 or 99 (percent), got {p}"),
            }),
        }
    }

    /// z in thousandths (1.645, 1.96, 2.576), so the arithmetic below can stay integral.
    fn z_milli(self) -> u64 {
        match self {
            Confidence::Ninety => 1645,
            Confidence::NinetyFive => 1960,
            Confidence::NinetyNine => 2576,
        }
    }

    /// The two-sided standard-normal quantile.
    pub fn z(self) -> f64 {
        self.z_milli() as f64 / 1000.0
    }
}

/// Runs needed for a ±`half_width_percent` interval: `ceil((z/hw)² · 0.25)`, hw as a
/// fraction. (5, 95 %) → 385. A half-width must be in (0, 100].
pub fn recommend_runs(half_width_percent: f64, confidence: Confidence) -> Result<u64, MetricError> {
    if !(half_width_percent > 0.0 && half_width_percent <= 100.0) {
        return Err(MetricError::OutOfRange {
            pointer: "/half_width_percent".into(),
            message: format!("a half-width must be above 0 and at most 100 (percent), got {half_width_percent}"),
        });
    }
    let z = confidence.z_milli();
    // With hw = p/100 and z = m/1000: (z/hw)²/4 = m²/(400·p²), exact for integral p.
    if half_width_percent.fract() == 0.0 {
        let p = half_width_percent as u64;
        let den = 400 * p * p;
        return Ok((z * z).div_ceil(den));
    }
    let hw = half_width_percent / 100.0;
    // Shave the last ulps so a value that is mathematically integral is not pushed up.
    Ok(((confidence.z() / hw).powi(2) * WORST_CASE_VARIANCE - 1e-9).ceil() as u64)
}

/// Half-width of the interval that `runs` runs give, in whole percent, unclamped:
/// `round(100 · z · sqrt(0.25/runs))`. (100, 95 %) → 10; (1, 99 %) → 129.
pub fn confidence_band(runs: u64, confidence: Confidence) -> Result<u64, MetricError> {
    if runs == 0 {
        return Err(MetricError::OutOfRange {
            pointer: "/runs".into(),
            message: "a confidence band needs at least 1 run".into(),
        });
    }
    // 100 · z · sqrt(0.25/runs) = z_milli / (20 · sqrt(runs)); exact when runs is a square.
    let z = confidence.z_milli();
    let root = runs.isqrt();
    if root * root == runs {
        return Ok((2 * z + 20 * root) / (40 * root));
    }
    Ok((100.0 * confidence.z() * (WORST_CASE_VARIANCE / runs as f64).sqrt()).round() as u64)
}

/// Wilson score interval for `passes` of `n` at `confidence`, as fractions (lower, upper).
/// For gates such as `min_pass_rate_lower_bound`; (0, 1) when n = 0.
pub fn wilson_interval(passes: u64, n: u64, confidence: Confidence) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n_f) = (confidence.z(), n as f64);
    let p = passes.min(n) as f64 / n_f;
    let denom = 1.0 + z * z / n_f;
    let centre = (p + z * z / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z * z / (4.0 * n_f * n_f)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The dataset `reliability` block: `{}`, or `{"k": [1, 3], "expect": [...]}`.
///
/// Input per run: an object with the run's verdict, `{"passed": true}` (any other fields,
/// such as a whole trace envelope, are ignored); a run without a boolean `passed` is read
/// as failed. Targets: the [`ReliabilityReport`] ones, plus `reliability.pass_at[k]` and
/// `reliability.pass_hat[k]` for each k in `k` (default: none), which needs ≥ max(k) runs.
/// The block reports and gates nothing by default (reliability *reporting*); an `expect`
/// list gates its targets through the runner's assertion grammar.
#[derive(Debug, Clone, PartialEq)]
pub struct ReliabilityBlock {
    pub k: Vec<u64>,
    pub expect: Vec<Value>,
}

const RELIABILITY_KEYS: &[&str] = &["k", "expect"];

impl ReliabilityBlock {
    pub fn target_names(k: &[u64]) -> Vec<String> {
        let mut names: Vec<String> = score_outcomes(&[]).targets().into_keys().collect();
        for k in k {
            names.push(format!("reliability.pass_at[{k}]"));
            names.push(format!("reliability.pass_hat[{k}]"));
        }
        names
    }

    /// Targets from outcomes already decided (the runner's per-run case verdicts).
    pub fn evaluate_outcomes(&self, outcomes: &[bool]) -> BlockOutcome {
        let report = score_outcomes(outcomes);
        let mut targets = report.targets();
        let counts = [TaskCounts { n: outcomes.len() as u64, c: outcomes.iter().filter(|p| **p).count() as u64 }];
        for k in &self.k {
            let at = suite_mean(&counts, *k, pass_at).map_or(Value::Null, float);
            let hat = suite_mean(&counts, *k, pass_hat).map_or(Value::Null, float);
            targets.insert(format!("reliability.pass_at[{k}]"), at);
            targets.insert(format!("reliability.pass_hat[{k}]"), hat);
        }
        BlockOutcome::across(Self::KEY, targets, &[], self.expect.clone())
    }
}

impl CaseBlock for ReliabilityBlock {
    const KEY: &'static str = "reliability";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        let object = expect_object(block, "")?;
        reject_unknown_keys(object, "", RELIABILITY_KEYS)?;
        let k = match object.get("k") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_u64().filter(|k| *k >= 1).ok_or_else(|| MetricError::WrongType {
                        pointer: pointer_join("/k", i),
                        expected: "a positive integer",
                        found: type_name(v),
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(MetricError::WrongType {
                    pointer: "/k".into(),
                    expected: "an array of positive integers",
                    found: type_name(v),
                });
            }
        };
        let expect = match object.get("expect") {
            None => Vec::new(),
            Some(list) => parse_block_assertions(list, "/expect", Self::KEY, &Self::target_names(&k))?,
        };
        Ok(ReliabilityBlock { k, expect })
    }

    /// The largest k asked for (a case cannot estimate k of fewer runs); at least 1.
    fn min_runs(&self) -> usize {
        self.k.iter().copied().max().map_or(1, |k| usize::try_from(k).unwrap_or(usize::MAX))
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let outcomes: Vec<bool> =
            runs.iter().map(|r| r.get("passed").and_then(Value::as_bool).unwrap_or(false)).collect();
        Ok(self.evaluate_outcomes(&outcomes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: bool = true;
    const F: bool = false;

    #[test]
    fn the_decay_curve_raises_the_running_pass_rate_to_the_kth_power() {
        // k=1..3: (k/k)^k = 100; k=4: (3/4)^4 = 0.316 -> 31
        assert_eq!(score_outcomes(&[T, T, T, F]).decay_curve, [100, 100, 100, 31]);
        // (0/1), (1/2)^2 = 25, (2/3)^3 = 29.6 -> 29
        assert_eq!(score_outcomes(&[F, T, T]).decay_curve, [0, 25, 29]);
    }

    #[test]
    fn the_table_of_small_decay_entries_holds_the_computed_answers() {
        for k in 1..=40usize {
            for c in 0..=k {
                assert_eq!(decay_entry(c, k), exact_decay_entry(c, k), "c={c} k={k}");
            }
        }
    }

    #[test]
    fn the_shortcuts_past_twenty_five_runs_agree_with_powf_everywhere() {
        for k in 26..400usize {
            for c in 0..=k {
                let reference = (100.0 * (c as f64 / k as f64).powf(k as f64)).floor() as u32;
                assert_eq!(decay_entry(c, k), reference, "c={c} k={k}");
            }
        }
    }

    #[test]
    fn decay_entries_that_land_on_an_integer_are_not_floored_below_it() {
        // (1/2)^2 = 25 and (2/4)^4 = 6.25 exactly; (3/5)^5 = 7.776 -> 7
        assert_eq!(decay_entry(1, 2), 25);
        assert_eq!(decay_entry(2, 4), 6);
        assert_eq!(decay_entry(3, 5), 7);
        assert_eq!(decay_entry(6, 10), 0); // (0.6)^10 = 0.006 -> 0
        assert_eq!(decay_entry(9, 10), 34); // 0.9^10 = 0.3487 -> 34
        assert_eq!(decay_entry(49, 50), 36); // 0.98^50 = 0.364 -> 36, via floats
    }

    #[test]
    fn failing_late_degrades_less_gracefully_than_failing_early() {
        // F,T,T,T: (2+3+4)/10 = 90; T,T,T,F: (1+2+3)/10 = 60
        assert_eq!(score_outcomes(&[F, T, T, T]).graceful_degradation, 90);
        assert_eq!(score_outcomes(&[T, T, T, F]).graceful_degradation, 60);
    }

    #[test]
    fn graceful_degradation_rounds_half_away_from_zero_rather_than_flooring() {
        // T,F,T: (1+3)/6 = 66.67 -> 67 (a floor would give 66)
        assert_eq!(score_outcomes(&[T, F, T]).graceful_degradation, 67);
        // T,F,F: 1/6 = 16.67 -> 17
        assert_eq!(score_outcomes(&[T, F, F]).graceful_degradation, 17);
        // T then 14 F: 1/120 = 0.83 -> 1
        assert_eq!(score_outcomes(&[T, F, F, F, F, F, F, F, F, F, F, F, F, F, F]).graceful_degradation, 1);
    }

    #[test]
    fn an_even_split_amplifies_variance_to_one_hundred() {
        // std of T,F,T,F = 0.5 -> 0.5/0.5 = 100; all equal -> 0
        assert_eq!(score_outcomes(&[T, F, T, F]).variance_amplification, 100);
        assert_eq!(score_outcomes(&[T, T, T, T]).variance_amplification, 0);
        assert_eq!(score_outcomes(&[F, F, F, F]).variance_amplification, 0);
        // 1 of 4: sqrt(3/16) = 0.433 -> 86.6 -> 87
        assert_eq!(score_outcomes(&[T, F, F, F]).variance_amplification, 87);
        // 2 of 10: sqrt(0.16) = 0.4 -> 80 exactly
        assert_eq!(score_outcomes(&[T, T, F, F, F, F, F, F, F, F]).variance_amplification, 80);
    }

    #[test]
    fn pass_at_k_is_any_and_pass_hat_k_is_every() {
        let r = score_outcomes(&[F, T]);
        assert_eq!((r.runs, r.pass_at_k, r.passhat_k), (2, 100, 0));
        let r = score_outcomes(&[T, T]);
        assert_eq!((r.pass_at_k, r.passhat_k), (100, 100));
    }

    #[test]
    fn no_runs_report_the_documented_empty_values() {
        let r = score_outcomes(&[]);
        assert_eq!(
            (r.runs, r.pass_at_k, r.passhat_k, r.variance_amplification, r.graceful_degradation),
            (0, 0, 100, 0, 100)
        );
        assert!(r.decay_curve.is_empty());
    }

    #[test]
    fn the_unbiased_pass_at_k_matches_the_binomial_formula() {
        // n=5, c=3, k=2: 1 - C(2,2)/C(5,2) = 1 - 1/10 = 0.9
        assert!((pass_at(5, 3, 2) - 0.9).abs() < 1e-12);
        // n=5, c=2, k=1: 1 - C(3,1)/C(5,1) = 0.4
        assert!((pass_at(5, 2, 1) - 0.4).abs() < 1e-12);
        // n-c = 1 < k = 2 -> 1.0; c = 0 -> 0
        assert_eq!(pass_at(5, 4, 2), 1.0);
        assert_eq!(pass_at(5, 0, 3), 0.0);
    }

    #[test]
    fn pass_hat_k_is_the_chance_that_k_draws_all_pass() {
        // n=5, c=3, k=2: C(3,2)/C(5,2) = 3/10
        assert!((pass_hat(5, 3, 2) - 0.3).abs() < 1e-12);
        // c < k -> 0; c = n -> 1
        assert_eq!(pass_hat(5, 1, 2), 0.0);
        assert_eq!(pass_hat(4, 4, 4), 1.0);
    }

    #[test]
    fn suite_estimators_average_cases_with_enough_runs_and_are_undefined_without_any() {
        // k=2: case (5,3) 0.9 and (2,1) 1 - C(1,2)/C(2,2) = 1.0 (n-c < k); (1,1) skipped -> mean 0.95
        let tasks = [TaskCounts { n: 5, c: 3 }, TaskCounts { n: 2, c: 1 }, TaskCounts { n: 1, c: 1 }];
        assert!((suite_mean(&tasks, 2, pass_at).unwrap() - 0.95).abs() < 1e-12);
        assert_eq!(suite_mean(&tasks, 6, pass_at), None);
    }

    #[test]
    fn five_percent_at_ninety_five_percent_needs_385_runs() {
        // ceil((1.96/0.05)^2 * 0.25) = ceil(384.16) = 385
        assert_eq!(recommend_runs(5.0, Confidence::NinetyFive).unwrap(), 385);
        // (1.96/0.98)^2 * 0.25 = 1 exactly: a float ceil could say 2
        assert_eq!(recommend_runs(98.0, Confidence::NinetyFive).unwrap(), 1);
        // 2.5 %: (1.96/0.025)^2/4 = 1536.64 -> 1537
        assert_eq!(recommend_runs(2.5, Confidence::NinetyFive).unwrap(), 1537);
        // 10 % at 90 %: (1.645/0.1)^2/4 = 67.65 -> 68; at 99 %: (2.576/0.1)^2/4 = 165.9 -> 166
        assert_eq!(recommend_runs(10.0, Confidence::Ninety).unwrap(), 68);
        assert_eq!(recommend_runs(10.0, Confidence::NinetyNine).unwrap(), 166);
    }

    #[test]
    fn a_half_width_of_zero_or_above_one_hundred_and_odd_confidences_are_errors() {
        assert!(recommend_runs(0.0, Confidence::NinetyFive).is_err());
        assert!(recommend_runs(100.5, Confidence::NinetyFive).is_err());
        assert!(recommend_runs(f64::NAN, Confidence::NinetyFive).is_err());
        assert!(Confidence::from_percent(80.0, "/confidence_percent").is_err());
        assert!(confidence_band(0, Confidence::NinetyFive).is_err());
    }

    #[test]
    fn a_hundred_runs_give_a_ten_percent_band_and_one_run_is_not_clamped() {
        // 1.96 * sqrt(0.25/100) = 0.098 -> 10; 2.576 * 0.5 = 1.288 -> 129
        assert_eq!(confidence_band(100, Confidence::NinetyFive).unwrap(), 10);
        assert_eq!(confidence_band(1, Confidence::NinetyNine).unwrap(), 129);
        // 16 runs at 95 %: 1.96 * 0.125 = 0.245 -> 24.5 -> 25 (half away from zero)
        assert_eq!(confidence_band(16, Confidence::NinetyFive).unwrap(), 25);
        // 2 runs at 90 %: 1.645 * sqrt(0.125) = 0.5816 -> 58
        assert_eq!(confidence_band(2, Confidence::Ninety).unwrap(), 58);
    }

    #[test]
    fn the_wilson_interval_brackets_the_observed_rate() {
        // 8 of 10 at 95 %: the textbook interval is about (0.490, 0.943)
        let (lo, hi) = wilson_interval(8, 10, Confidence::NinetyFive);
        assert!((lo - 0.4902).abs() < 1e-3 && (hi - 0.9433).abs() < 1e-3, "{lo} {hi}");
        assert_eq!(wilson_interval(0, 0, Confidence::NinetyFive), (0.0, 1.0));
    }

    #[test]
    fn the_block_reads_each_runs_verdict_and_needs_as_many_runs_as_its_largest_k() {
        let block = ReliabilityBlock::from_block(&json!({"k": [1, 3]})).unwrap();
        assert_eq!(block.min_runs(), 3);
        let outcome = block.evaluate(&[json!({"passed": true}), json!({"passed": false}), json!({})]).unwrap();
        // 1 of 3: pass_at[1] = 1/3, pass_hat[3] = 0
        assert!((outcome.targets["reliability.pass_at[1]"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(outcome.targets["reliability.pass_hat[3]"], json!(0.0));
        assert_eq!(outcome.targets["reliability.graceful_degradation"], json!(17));
        assert!(outcome.passed);
        assert!(ReliabilityBlock::from_block(&json!({"k": [0]})).is_err());
        assert!(ReliabilityBlock::from_block(&json!({"kk": [1]})).is_err());
    }
}
