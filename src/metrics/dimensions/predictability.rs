//! Predictability: does the agent's reported confidence tell you when it will fail?
//!
//! Every (task, run) pair that carries a confidence is pooled (Rabanser et al. 2026,
//! definitions 3.5–3.6). Four views of the same pairs: calibration (does 0.8 mean
//! 80 %?), discrimination (do successes get higher confidence than failures?), the
//! Brier score (both at once, a proper scoring rule, and the dimension's score), and
//! risk-coverage (if you only accept the runs the agent is most sure of, how fast does
//! the error rate fall compared with a perfect and a random ranking?).

use super::stats::{mean, unit};
use super::{Task, usable_confidence};

/// Calibration uses 10 equal-width bins of this width.
const CALIBRATION_BINS: usize = 10;
/// Bin `i` opens at the IEEE double `i · 0.1` (so 0.3 < 3·0.1 = 0.30000000000000004
/// falls in bin 2), which is what the reference's `linspace` produced and what
/// reproduces the published values.
const BIN_WIDTH: f64 = 0.1;
/// The risk-coverage curve is sampled at coverages `j/99`, j = 0..=99.
const COVERAGE_POINTS: usize = 100;
/// The reference adds this to the E-AURC normaliser and treats a normaliser at or below
/// it as degenerate; kept so published values reproduce.
const RISK_COVERAGE_EPSILON: f64 = 1e-8;

/// `predictability.*`, over every run with a usable confidence; all `None` when no run
/// reported one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Predictability {
    /// 1 − ECE over 10 bins `[i/10, (i+1)/10)`, the last closed at 1.0, edges the
    /// doubles `i·0.1`; ECE = Σ (n_bin/N)·|accuracy_bin − mean confidence_bin|.
    pub calibration: Option<f64>,
    /// AUROC of confidence against success by Mann-Whitney, ties counted ½; `None` when
    /// only one class is present.
    pub discrimination: Option<f64>,
    /// 1 − mean((confidence − y)²), y = 1 for success.
    pub brier: Option<f64>,
    /// `1 − (AURC − AURC_opt)/(AURC_random − AURC_opt + 1e−8)` clipped to 0..=1, on 100
    /// coverage points with `n_j = max(1, floor(j·N/99))`, trapezoid areas, runs sorted
    /// by confidence descending (ties in input order), optimal = successes first,
    /// random = the overall error rate; 1.0 when `AURC_random − AURC_opt ≤ 1e−8`.
    pub risk_coverage: Option<f64>,
    /// The dimension's score: equal to `brier`.
    pub score: Option<f64>,
}

/// Scores the predictability dimension of `tasks`.
pub(super) fn score(tasks: &[Task]) -> Predictability {
    let pairs: Vec<(f64, bool)> =
        tasks.iter().flat_map(|t| &t.runs).filter_map(|r| usable_confidence(r).map(|c| (c, r.success))).collect();
    if pairs.is_empty() {
        return Predictability::default();
    }
    let brier = brier(&pairs).and_then(unit);
    Predictability {
        calibration: calibration(&pairs).and_then(unit),
        discrimination: discrimination(&pairs).and_then(unit),
        brier,
        risk_coverage: unit(risk_coverage(&pairs)),
        score: brier,
    }
}

fn outcome(success: bool) -> f64 {
    if success { 1.0 } else { 0.0 }
}

fn brier(pairs: &[(f64, bool)]) -> Option<f64> {
    let squares: Vec<f64> = pairs.iter().map(|&(c, y)| (c - outcome(y)).powi(2)).collect();
    mean(&squares).map(|m| 1.0 - m)
}

fn calibration(pairs: &[(f64, bool)]) -> Option<f64> {
    // Per bin: (count, Σ confidence, Σ successes).
    let mut bins = [(0usize, 0.0f64, 0.0f64); CALIBRATION_BINS];
    for &(c, y) in pairs {
        // The highest bin whose lower edge is ≤ c; 1.0 lands in the last bin.
        let bin = (0..CALIBRATION_BINS).rev().find(|&i| c >= i as f64 * BIN_WIDTH).unwrap_or(0);
        let slot = &mut bins[bin];
        slot.0 += 1;
        slot.1 += c;
        slot.2 += outcome(y);
    }
    let n = pairs.len() as f64;
    let ece: f64 = bins
        .iter()
        .filter(|b| b.0 > 0)
        .map(|&(count, conf, hits)| {
            let k = count as f64;
            (k / n) * (hits / k - conf / k).abs()
        })
        .sum();
    (n > 0.0).then_some(1.0 - ece)
}

/// AUROC as the Mann-Whitney statistic from mid-ranks: exact (half-integers) and
/// O(N log N) rather than comparing every success with every failure.
fn discrimination(pairs: &[(f64, bool)]) -> Option<f64> {
    let positives = pairs.iter().filter(|p| p.1).count();
    let negatives = pairs.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut sorted: Vec<(f64, bool)> = pairs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut positive_rank_sum = 0.0;
    let mut start = 0;
    while start < sorted.len() {
        let tied = sorted[start..].iter().take_while(|p| p.0 == sorted[start].0).count();
        // Ranks start+1 ..= start+tied share their mean.
        let mid_rank = (2 * start + tied + 1) as f64 / 2.0;
        let tied_positives = sorted[start..start + tied].iter().filter(|p| p.1).count();
        positive_rank_sum += mid_rank * tied_positives as f64;
        start += tied;
    }
    let (p, q) = (positives as f64, negatives as f64);
    Some((positive_rank_sum - p * (p + 1.0) / 2.0) / (p * q))
}

fn risk_coverage(pairs: &[(f64, bool)]) -> f64 {
    let n = pairs.len();
    let mut ranked: Vec<(f64, bool)> = pairs.to_vec();
    // Stable: equal confidences keep input order.
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut covered_successes = Vec::with_capacity(n + 1);
    covered_successes.push(0usize);
    for &(_, y) in &ranked {
        let so_far = covered_successes.last().copied().unwrap_or(0);
        covered_successes.push(so_far + usize::from(y));
    }
    let successes = covered_successes.last().copied().unwrap_or(0);

    let last = COVERAGE_POINTS - 1;
    let step = 1.0 / last as f64;
    let mut area = 0.0;
    let mut optimal_area = 0.0;
    let mut previous: Option<(f64, f64, f64)> = None;
    for j in 0..COVERAGE_POINTS {
        // The reference's linspace: j·(1/99), the last point exactly 1.
        let coverage = if j == last { 1.0 } else { j as f64 * step };
        // floor(j·N/99) exactly, in integers (u128: no overflow for any N).
        let exact = (j as u128 * n as u128 / last as u128) as usize;
        let covered = exact.clamp(1, n);
        let risk = 1.0 - covered_successes[covered] as f64 / covered as f64;
        let optimal_risk = 1.0 - covered.min(successes) as f64 / covered as f64;
        if let Some((c0, r0, o0)) = previous {
            let width = coverage - c0;
            area += width * (r0 + risk) / 2.0;
            optimal_area += width * (o0 + optimal_risk) / 2.0;
        }
        previous = Some((coverage, risk, optimal_risk));
    }
    let random_area = 1.0 - successes as f64 / n as f64;
    normalised_excess(area, optimal_area, random_area)
}

/// `1 − (AURC − AURC_opt)/(AURC_random − AURC_opt + ε)` clipped to 0..=1, or 1.0 when
/// a random ranking is already within ε of the optimal one (one class only: nothing
/// to rank).
fn normalised_excess(area: f64, optimal_area: f64, random_area: f64) -> f64 {
    let excess_max = random_area - optimal_area;
    if excess_max <= RISK_COVERAGE_EPSILON {
        return 1.0;
    }
    let excess = area - optimal_area;
    (1.0 - excess / (excess_max + RISK_COVERAGE_EPSILON)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::dimensions::RunSample;

    fn task(pairs: &[(f64, bool)]) -> Task {
        Task {
            id: "t".into(),
            runs: pairs
                .iter()
                .map(|&(c, success)| RunSample { success, confidence: Some(c), ..RunSample::default() })
                .collect(),
        }
    }

    fn close(actual: Option<f64>, expected: f64) -> bool {
        actual.is_some_and(|a| (a - expected).abs() < 1e-12)
    }

    #[test]
    fn confidence_point_three_falls_in_the_lower_bin() {
        // 0.3 < 3·0.1 = 0.30000000000000004: bin 2 with 0.25 → |½ − 0.275| = 0.225, 1 − 0.225 = 0.775
        // (separate bins would give 1 − (½·0.75 + ½·0.3) = 0.475)
        let p = score(&[task(&[(0.25, true), (0.3, false)])]);
        assert!(close(p.calibration, 0.775));
    }

    #[test]
    fn confidence_point_six_falls_in_the_lower_bin() {
        // 0.6 < 6·0.1 = 0.6000000000000001: bin 5 with 0.55 → |½ − 0.575| = 0.075, 1 − 0.075 = 0.925
        let p = score(&[task(&[(0.55, true), (0.6, false)])]);
        assert!(close(p.calibration, 0.925));
    }

    #[test]
    fn confidence_point_seven_falls_in_the_lower_bin() {
        // 0.7 < 7·0.1 = 0.7000000000000001: bin 6 with 0.65 → |½ − 0.675| = 0.175, 1 − 0.175 = 0.825
        let p = score(&[task(&[(0.65, true), (0.7, false)])]);
        assert!(close(p.calibration, 0.825));
    }

    #[test]
    fn confidence_point_four_opens_its_own_bin() {
        // 0.4 = 4·0.1 exactly: bin 4, apart from 0.35 → ½·|1 − 0.35| + ½·|0 − 0.4| = 0.525, 1 − 0.525 = 0.475
        let p = score(&[task(&[(0.35, true), (0.4, false)])]);
        assert!(close(p.calibration, 0.475));
    }

    #[test]
    fn confidence_one_falls_in_the_last_bin() {
        // 1.0 joins 0.95 in bin 9: |½ − 0.975| = 0.475, 1 − 0.475 = 0.525
        // (a bin of its own would give 1 − (½·1 + ½·0.05) = 0.475)
        let p = score(&[task(&[(1.0, false), (0.95, true)])]);
        assert!(close(p.calibration, 0.525));
    }

    #[test]
    fn ties_count_half_in_auroc() {
        // successes 0.8, 0.5 vs failures 0.5, 0.2: pairs 1 + 1 + ½ + 1 = 3.5 of 4 = 0.875
        let p = score(&[task(&[(0.8, true), (0.5, true), (0.5, false), (0.2, false)])]);
        assert!(close(p.discrimination, 0.875));
    }

    #[test]
    fn auroc_is_undefined_with_one_class_only() {
        let p = score(&[task(&[(0.8, true), (0.3, true)])]);
        assert_eq!(p.discrimination, None);
        // the other three are still defined: brier 1 − (0.04 + 0.49)/2 = 0.735
        assert!(close(p.brier, 0.735));
        assert!(p.calibration.is_some() && p.risk_coverage.is_some());
    }

    #[test]
    fn auroc_of_a_reversed_ranking_is_zero() {
        // every failure outranks every success: 0 of 4 pairs
        let p = score(&[task(&[(0.1, true), (0.2, true), (0.8, false), (0.9, false)])]);
        assert_eq!(p.discrimination, Some(0.0));
    }

    #[test]
    fn predictability_score_is_the_brier_score() {
        // (0.9 − 1)² + (0.4 − 0)² = 0.01 + 0.16; mean 0.085; 1 − 0.085 = 0.915
        let p = score(&[task(&[(0.9, true), (0.4, false)])]);
        assert!(close(p.brier, 0.915));
        assert_eq!(p.score, p.brier);
    }

    #[test]
    fn runs_without_confidence_are_left_out() {
        // only (0.9, success) is scored: brier 1 − 0.01 = 0.99
        let mut t = task(&[(0.9, true)]);
        t.runs.push(RunSample::default());
        assert!(close(score(&[t]).brier, 0.99));
    }

    #[test]
    fn no_confidence_anywhere_leaves_the_dimension_undefined() {
        let t = Task { id: "t".into(), runs: vec![RunSample::default(), RunSample::default()] };
        assert_eq!(score(&[t]), Predictability::default());
    }

    #[test]
    fn risk_coverage_divides_by_the_excess_plus_the_epsilon() {
        // ranked S, F, S (N = 3): n_j = 1 for j < 66, 2 for j < 99, 3 at j = 99
        // AURC = (0.25 + 32·0.5 + (0.5 + 1/3)/2)/99 = 16.6667/99; AURC_opt = (1/6)/99; random = 1/3
        // 1 − (16.5/99) / (1/3 − (1/6)/99 + 1e−8) = 0.4974619441
        let p = score(&[task(&[(0.9, true), (0.8, false), (0.7, true)])]);
        let with_epsilon = 1.0 - (16.5 / 99.0) / ((1.0 / 3.0 - (1.0 / 6.0) / 99.0) + 1e-8);
        let without = 1.0 - (16.5 / 99.0) / (1.0 / 3.0 - (1.0 / 6.0) / 99.0);
        assert!(close(p.risk_coverage, with_epsilon));
        assert!((p.risk_coverage.unwrap() - without).abs() > 1e-9);
    }

    #[test]
    fn risk_coverage_is_one_when_random_is_already_optimal() {
        // all successes: AURC_random = AURC_opt = 0, so the excess maximum is 0 ≤ 1e−8 → 1.0
        let all_pass = score(&[task(&[(0.2, true), (0.9, true)])]);
        assert_eq!(all_pass.risk_coverage, Some(1.0));
        // all failures: both areas are 1 → 1.0 again, however badly ranked
        let all_fail = score(&[task(&[(0.9, false), (0.8, false)])]);
        assert_eq!(all_fail.risk_coverage, Some(1.0));
    }

    #[test]
    fn a_random_ranking_within_the_epsilon_of_optimal_counts_as_degenerate() {
        // AURC_random − AURC_opt = 5e−9 ≤ 1e−8 → 1.0, although 1 − 0.1/(5e−9 + 1e−8) would clip to 0
        assert_eq!(normalised_excess(0.3, 0.2, 0.2 + 5e-9), 1.0);
        // just above the epsilon the formula applies: 1 − 0.1/(2e−8 + 1e−8) → clipped to 0
        assert_eq!(normalised_excess(0.3, 0.2, 0.2 + 2e-8), 0.0);
    }

    #[test]
    fn risk_coverage_of_a_perfect_ranking_is_one() {
        // successes first: AURC = AURC_opt, excess 0 → 1 − 0 = 1
        let p = score(&[task(&[(0.9, true), (0.6, true), (0.3, false)])]);
        assert!(close(p.risk_coverage, 1.0));
    }

    #[test]
    fn risk_coverage_of_an_inverted_ranking_is_clipped_to_zero() {
        // failure first (N = 2): AURC = (98 + 0.75)/99 exceeds AURC_random = 0.5 → clipped to 0
        let p = score(&[task(&[(0.9, false), (0.1, true)])]);
        assert_eq!(p.risk_coverage, Some(0.0));
    }

    #[test]
    fn risk_coverage_breaks_confidence_ties_by_input_order() {
        // equal confidences: input order F, S ranks like the inverted case (0.0);
        // S, F ranks like a perfect one (1.0)
        let fail_first = score(&[task(&[(0.5, false), (0.5, true)])]);
        let pass_first = score(&[task(&[(0.5, true), (0.5, false)])]);
        assert_eq!(fail_first.risk_coverage, Some(0.0));
        assert!(close(pass_first.risk_coverage, 1.0));
    }
}
