//! Consistency: does the agent do the same thing when given the same task again?
//!
//! Five per-task measures, each averaged over the tasks where it is defined
//! (Rabanser et al. 2026, definitions 3.1–3.3): whether the verdict repeats
//! (outcome), whether successful runs use the same tools in the same proportions
//! (trajectory distribution) and in the same order (trajectory sequence), whether the
//! reported confidence is stable, and whether cost, time and effort are stable
//! (resource). Trajectories are compared among successful runs only, as in the paper:
//! two different failures are not an inconsistency of the kind that matters.

use std::collections::BTreeMap;

use super::stats::{mean, mean_of_defined, sample_cv, sample_variance, unit};
use super::{RunSample, Task, Variant, usable_confidence};

/// Added to the Bernoulli variance in the pre-print outcome formula so that p̂ ∈ {0, 1}
/// divides 0 by a positive number (the reference's constant).
const PREPRINT_VARIANCE_EPSILON: f64 = 1e-8;

/// Weights of outcome, trajectory and resource in `consistency.score`: equal thirds
/// (docs/metrics.md), renormalised over the parts that are defined.
const W_OUTCOME: f64 = 1.0 / 3.0;
const W_TRAJECTORY: f64 = 1.0 / 3.0;
const W_RESOURCE: f64 = 1.0 / 3.0;

/// `consistency.*`. Each field is the mean over the tasks where it is defined, `None`
/// when no task qualifies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consistency {
    /// Per task with K ≥ 2 runs: camera_ready `(2p̂−1)²`; preprint
    /// `clip(1 − s²/(p̂(1−p̂) + 1e−8), 0, 1)` with s² the K−1 sample variance of the
    /// 0/1 verdicts. Tasks with fewer than two runs are skipped.
    pub outcome: Option<f64>,
    /// Per task with ≥ 2 successful non-empty runs: 1 − mean over run pairs of the
    /// Jensen-Shannon divergence (base 2; camera_ready) or distance (√ of the natural-log
    /// divergence; preprint) between the runs' tool-name frequencies.
    pub trajectory_distribution: Option<f64>,
    /// Same runs: mean over pairs of `1 − lev(a, b)/max(|a|, |b|)`, Levenshtein over
    /// whole tool names.
    pub trajectory_sequence: Option<f64>,
    /// Per task `exp(−CV)` of the reported confidences (sample std); tasks with < 2
    /// confidences or a mean ≤ 0 are skipped. Reported, not part of `score`.
    pub confidence: Option<f64>,
    /// Per task, over all its runs: the sample CV of each resource (cost, time, model
    /// calls, actions, errors, latency; values ≤ 0 dropped except for errors; a CV needs
    /// two values and a positive mean), then `exp(−mean CV)`.
    pub resource: Option<f64>,
    /// ⅓ outcome + ⅓ mean(trajectory_distribution, trajectory_sequence) + ⅓ resource,
    /// weights renormalised over the defined parts; `None` when none is.
    pub score: Option<f64>,
}

/// Scores the consistency dimension of `tasks`.
pub(super) fn score(tasks: &[Task], variant: Variant) -> Consistency {
    let mut outcome = Vec::new();
    let mut distribution = Vec::new();
    let mut sequence = Vec::new();
    let mut confidence = Vec::new();
    let mut resource = Vec::new();
    for task in tasks {
        outcome.extend(task_outcome(&task.runs, variant));
        if let Some((d, s)) = task_trajectory(&task.runs, variant) {
            distribution.push(d);
            sequence.push(s);
        }
        confidence.extend(task_confidence(&task.runs));
        resource.extend(task_resource(&task.runs));
    }
    let outcome = mean(&outcome).and_then(unit);
    let trajectory_distribution = mean(&distribution).and_then(unit);
    let trajectory_sequence = mean(&sequence).and_then(unit);
    let resource = mean(&resource).and_then(unit);
    let trajectory = mean_of_defined(&[trajectory_distribution, trajectory_sequence]);
    let score = weighted_score(&[(W_OUTCOME, outcome), (W_TRAJECTORY, trajectory), (W_RESOURCE, resource)]);
    Consistency {
        outcome,
        trajectory_distribution,
        trajectory_sequence,
        confidence: mean(&confidence).and_then(unit),
        resource,
        score,
    }
}

/// Weighted mean over the defined parts, the weights renormalised to sum to 1.
fn weighted_score(parts: &[(f64, Option<f64>)]) -> Option<f64> {
    let (weight, total) = parts
        .iter()
        .filter_map(|&(w, value)| value.map(|v| (w, w * v)))
        .fold((0.0, 0.0), |(ws, ts), (w, t)| (ws + w, ts + t));
    if weight > 0.0 { unit(total / weight) } else { None }
}

fn task_outcome(runs: &[RunSample], variant: Variant) -> Option<f64> {
    if runs.len() < 2 {
        return None;
    }
    let verdicts: Vec<f64> = runs.iter().map(|r| if r.success { 1.0 } else { 0.0 }).collect();
    let p = mean(&verdicts)?;
    match variant {
        Variant::CameraReady => Some((2.0 * p - 1.0).powi(2)),
        Variant::Preprint => {
            let s2 = sample_variance(&verdicts)?;
            let ratio = s2 / (p * (1.0 - p) + PREPRINT_VARIANCE_EPSILON);
            Some((1.0 - ratio).clamp(0.0, 1.0))
        }
    }
}

/// (distribution, sequence) consistency of the successful, non-empty trajectories;
/// `None` below two of them.
fn task_trajectory(runs: &[RunSample], variant: Variant) -> Option<(f64, f64)> {
    let trajectories: Vec<&[String]> =
        runs.iter().filter(|r| r.success && !r.actions.is_empty()).map(|r| r.actions.as_slice()).collect();
    if trajectories.len() < 2 {
        return None;
    }
    // Intern tool names (ids in order of first appearance): comparisons become integer
    // compares and the frequency vectors share one index space and summation order.
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let sequences: Vec<Vec<usize>> = trajectories
        .iter()
        .map(|t| {
            t.iter()
                .map(|name| {
                    let next = names.len();
                    *names.entry(name.as_str()).or_insert(next)
                })
                .collect()
        })
        .collect();
    let frequencies: Vec<Vec<f64>> = sequences
        .iter()
        .map(|s| {
            let mut counts = vec![0.0; names.len()];
            for &i in s {
                counts[i] += 1.0;
            }
            let len = s.len() as f64;
            counts.into_iter().map(|c| c / len).collect()
        })
        .collect();

    let mut divergences = Vec::new();
    let mut similarities = Vec::new();
    for i in 0..sequences.len() {
        for j in i + 1..sequences.len() {
            let nats = js_divergence_nats(&frequencies[i], &frequencies[j]);
            divergences.push(match variant {
                Variant::CameraReady => nats / std::f64::consts::LN_2,
                Variant::Preprint => nats.sqrt(),
            });
            let (a, b) = (&sequences[i], &sequences[j]);
            let longest = a.len().max(b.len()) as f64;
            similarities.push(1.0 - levenshtein(a, b) as f64 / longest);
        }
    }
    Some((1.0 - mean(&divergences)?, mean(&similarities)?))
}

/// Jensen-Shannon divergence in nats between two distributions over one index space,
/// with `0·ln 0 = 0`. Rounding can leave a hair below 0; it is clamped so the √ of the
/// pre-print distance stays real.
fn js_divergence_nats(p: &[f64], q: &[f64]) -> f64 {
    let mut sum = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        let m = (a + b) / 2.0;
        if a > 0.0 {
            sum += a * (a / m).ln();
        }
        if b > 0.0 {
            sum += b * (b / m).ln();
        }
    }
    (sum / 2.0).max(0.0)
}

/// Edit distance (insert, delete, substitute, each 1) over whole symbols, in one row:
/// `row[j]` is the distance between the prefix read so far of the longer sequence and
/// the first `j` symbols of the shorter one.
fn levenshtein(a: &[usize], b: &[usize]) -> usize {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let mut row: Vec<usize> = (0..=short.len()).collect();
    for (i, x) in long.iter().enumerate() {
        // `diagonal` is the row above, one column left; `left` the cell just written.
        let mut diagonal = i;
        let mut left = i + 1;
        for (cell, y) in row[1..].iter_mut().zip(short) {
            let above = *cell;
            let best = (diagonal + usize::from(x != y)).min(above + 1).min(left + 1);
            diagonal = above;
            *cell = best;
            left = best;
        }
        row[0] = i + 1;
    }
    row[short.len()]
}

fn task_confidence(runs: &[RunSample]) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(usable_confidence).collect();
    sample_cv(&values).map(|cv| (-cv).exp())
}

fn task_resource(runs: &[RunSample]) -> Option<f64> {
    fn positive(values: impl Iterator<Item = f64>) -> Vec<f64> {
        values.filter(|v| v.is_finite() && *v > 0.0).collect()
    }
    let channels = [
        positive(runs.iter().map(|r| r.cost)),
        positive(runs.iter().map(|r| r.time)),
        positive(runs.iter().map(|r| r.model_calls as f64)),
        positive(runs.iter().map(|r| r.actions.len() as f64)),
        // Errors keep their zeros: "no errors this time, three the next" is variation.
        runs.iter().map(|r| r.errors as f64).collect(),
        positive(runs.iter().map(|r| r.latency)),
    ];
    let cvs: Vec<f64> = channels.iter().filter_map(|c| sample_cv(c)).collect();
    mean(&cvs).map(|cv| (-cv).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(success: bool) -> RunSample {
        RunSample { success, ..RunSample::default() }
    }

    fn acting(success: bool, actions: &[&str]) -> RunSample {
        RunSample { success, actions: actions.iter().map(|a| a.to_string()).collect(), ..RunSample::default() }
    }

    fn task(runs: Vec<RunSample>) -> Task {
        Task { id: String::new(), runs }
    }

    fn close(actual: Option<f64>, expected: f64) -> bool {
        actual.is_some_and(|a| (a - expected).abs() < 1e-12)
    }

    #[test]
    fn camera_ready_outcome_is_the_squared_distance_from_a_coin_flip() {
        // p̂ = 3/4: (2·0.75 − 1)² = 0.25
        let tasks = [task(vec![run(true), run(true), run(true), run(false)])];
        assert!(close(score(&tasks, Variant::CameraReady).outcome, 0.25));
    }

    #[test]
    fn preprint_outcome_clips_any_disagreement_to_zero() {
        // p̂ = 3/4, s² = 4/3·3/16 = 0.25 > p̂(1−p̂) = 0.1875: 1 − 1.33 → clipped to 0
        let tasks = [task(vec![run(true), run(true), run(true), run(false)])];
        assert_eq!(score(&tasks, Variant::Preprint).outcome, Some(0.0));
    }

    #[test]
    fn preprint_outcome_is_one_for_unanimous_tasks() {
        // p̂ = 0 and p̂ = 1 give s² = 0: 1 − 0/(0 + 1e−8) = 1 for both tasks
        let tasks = [task(vec![run(true), run(true)]), task(vec![run(false), run(false)])];
        assert_eq!(score(&tasks, Variant::Preprint).outcome, Some(1.0));
    }

    #[test]
    fn tasks_with_fewer_than_two_runs_are_skipped_for_outcome() {
        // the one-run task would add 1.0: (1 + 0)/2 = 0.5; skipped, only (2·0.5 − 1)² = 0 remains
        let tasks = [task(vec![run(true)]), task(vec![run(true), run(false)])];
        assert_eq!(score(&tasks, Variant::CameraReady).outcome, Some(0.0));
    }

    #[test]
    fn no_task_with_two_runs_leaves_outcome_undefined() {
        let tasks = [task(vec![run(true)]), task(vec![])];
        assert_eq!(score(&tasks, Variant::CameraReady).outcome, None);
    }

    #[test]
    fn trajectories_need_two_successful_non_empty_runs() {
        // task 1: successes [a,b], [a,b] and the empty success is ignored → 1.0;
        // task 2 has one success: skipped. Counting it would pull the mean below 1.
        let tasks = [
            task(vec![acting(true, &["a", "b"]), acting(true, &[]), acting(true, &["a", "b"]), acting(false, &["c"])]),
            task(vec![acting(true, &["a"]), acting(false, &["z", "z"])]),
        ];
        let c = score(&tasks, Variant::CameraReady);
        assert_eq!(c.trajectory_distribution, Some(1.0));
        assert_eq!(c.trajectory_sequence, Some(1.0));
    }

    #[test]
    fn failed_runs_never_enter_trajectory_consistency() {
        let tasks = [task(vec![acting(false, &["a"]), acting(false, &["b"])])];
        let c = score(&tasks, Variant::CameraReady);
        assert_eq!(c.trajectory_distribution, None);
        assert_eq!(c.trajectory_sequence, None);
    }

    #[test]
    fn trajectory_distribution_is_js_divergence_in_bits_or_distance_in_nats() {
        // [a,a] vs [a,b]: p = (1, 0), q = (½, ½), m = (¾, ¼)
        // JSD = ½·ln(4/3) + ½(½·ln(2/3) + ½·ln 2) = 0.2157615543388357 nats
        let jsd: f64 = 0.5 * (4.0f64 / 3.0).ln() + 0.5 * (0.5 * (2.0f64 / 3.0).ln() + 0.5 * 2f64.ln());
        let tasks = [task(vec![acting(true, &["a", "a"]), acting(true, &["a", "b"])])];
        // camera_ready: 1 − 0.2158/ln 2 = 0.6887
        let camera = score(&tasks, Variant::CameraReady).trajectory_distribution;
        assert!(close(camera, 1.0 - jsd / std::f64::consts::LN_2));
        // preprint: 1 − √0.2158 = 0.5355
        let preprint = score(&tasks, Variant::Preprint).trajectory_distribution;
        assert!(close(preprint, 1.0 - jsd.sqrt()));
    }

    #[test]
    fn disjoint_tool_sets_diverge_completely() {
        // [a] vs [b]: JSD = ln 2 nats = 1 bit, so camera_ready gives 1 − 1 = 0
        let tasks = [task(vec![acting(true, &["a"]), acting(true, &["b"])])];
        let c = score(&tasks, Variant::CameraReady);
        assert!(close(c.trajectory_distribution, 0.0));
        // lev([a], [b]) = 1: 1 − 1/1 = 0
        assert_eq!(c.trajectory_sequence, Some(0.0));
    }

    #[test]
    fn sequence_consistency_sees_order_that_distribution_ignores() {
        // [a,b,c] vs [c,b,a]: same frequencies (distribution 1.0); lev = 2: 1 − 2/3 = 1/3
        let tasks = [task(vec![acting(true, &["a", "b", "c"]), acting(true, &["c", "b", "a"])])];
        let c = score(&tasks, Variant::CameraReady);
        assert_eq!(c.trajectory_distribution, Some(1.0));
        assert!(close(c.trajectory_sequence, 1.0 / 3.0));
    }

    #[test]
    fn levenshtein_compares_whole_tool_names() {
        // "search" vs "search_v2" are different symbols: one substitution, not three inserts
        assert_eq!(levenshtein(&[0, 1], &[0, 2]), 1);
        // kitten → sitting: 3 edits
        assert_eq!(levenshtein(&[1, 2, 3, 3, 4, 5], &[6, 2, 3, 3, 2, 5, 7]), 3);
        assert_eq!(levenshtein(&[], &[1, 2]), 2);
    }

    /// The textbook full-table edit distance, to check the one-row version against.
    fn levenshtein_table(a: &[usize], b: &[usize]) -> usize {
        let mut d = vec![vec![0; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        d[0] = (0..=b.len()).collect();
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let substitute = d[i - 1][j - 1] + usize::from(a[i - 1] != b[j - 1]);
                d[i][j] = substitute.min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            }
        }
        d[a.len()][b.len()]
    }

    proptest::proptest! {
        #[test]
        fn one_row_levenshtein_agrees_with_the_full_table(
            a in proptest::collection::vec(0usize..4, 0..12),
            b in proptest::collection::vec(0usize..4, 0..12),
        ) {
            proptest::prop_assert_eq!(levenshtein(&a, &b), levenshtein_table(&a, &b));
        }
    }

    #[test]
    fn confidence_consistency_is_exp_of_minus_the_sample_cv() {
        // [0.4, 0.8]: mean 0.6, s = √0.08 = 0.2828, cv = 0.4714, exp(−cv) = 0.6241
        let runs =
            vec![RunSample { confidence: Some(0.4), ..run(true) }, RunSample { confidence: Some(0.8), ..run(false) }];
        let expected = (-(0.08f64.sqrt() / 0.6)).exp();
        assert!(close(score(&[task(runs)], Variant::CameraReady).confidence, expected));
    }

    #[test]
    fn confidence_consistency_skips_a_zero_mean_and_single_values() {
        let zero =
            vec![RunSample { confidence: Some(0.0), ..run(true) }, RunSample { confidence: Some(0.0), ..run(true) }];
        let single = vec![RunSample { confidence: Some(0.7), ..run(true) }, run(true)];
        let c = score(&[task(zero), task(single)], Variant::CameraReady);
        assert_eq!(c.confidence, None);
    }

    #[test]
    fn resource_consistency_averages_the_cvs_of_the_resources_present() {
        // cost [1, 3]: cv = √2/2 = 0.7071; time [2, 2]: cv = 0; mean cv 0.3536, exp(−0.3536) = 0.7022
        let runs =
            vec![RunSample { cost: 1.0, time: 2.0, ..run(true) }, RunSample { cost: 3.0, time: 2.0, ..run(true) }];
        let expected = (-(2f64.sqrt() / 2.0) / 2.0).exp();
        assert!(close(score(&[task(runs)], Variant::CameraReady).resource, expected));
    }

    #[test]
    fn resource_values_of_zero_are_dropped_but_zero_errors_count() {
        // cost [0, 5, 5]: the 0 is dropped, cv of [5, 5] = 0;
        // errors [0, 0, 3]: mean 1, s = √3, cv = 1.732; mean cv 0.866, exp(−0.866) = 0.4206
        let runs =
            vec![run(true), RunSample { cost: 5.0, ..run(true) }, RunSample { cost: 5.0, errors: 3, ..run(true) }];
        let expected = (-(3f64.sqrt() / 2.0)).exp();
        assert!(close(score(&[task(runs)], Variant::CameraReady).resource, expected));
    }

    #[test]
    fn consistency_score_renormalises_weights_over_the_defined_parts() {
        // outcome (2·½ − 1)² = 0; no trajectory; resource exp(−√2/2) = 0.4931 (cost [1, 3])
        // renormalised: (0 + 0.4931)/2 = 0.2465, not (0 + 0 + 0.4931)/3 = 0.1644
        let runs = vec![RunSample { cost: 1.0, ..run(true) }, RunSample { cost: 3.0, ..run(false) }];
        let c = score(&[task(runs)], Variant::CameraReady);
        assert_eq!(c.trajectory_distribution, None);
        assert!(close(c.score, (-(2f64.sqrt() / 2.0)).exp() / 2.0));
    }

    #[test]
    fn consistency_score_averages_the_two_trajectory_measures_as_one_part() {
        // outcome 1; trajectory mean(1.0, 1/3) = 2/3; no resource except actions [3, 3]: cv 0 → 1
        // (1 + 2/3 + 1)/3 = 8/9
        let tasks = [task(vec![acting(true, &["a", "b", "c"]), acting(true, &["c", "b", "a"])])];
        assert!(close(score(&tasks, Variant::CameraReady).score, 8.0 / 9.0));
    }

    #[test]
    fn nothing_to_score_leaves_the_whole_dimension_undefined() {
        assert_eq!(score(&[], Variant::CameraReady), Consistency::default());
    }
}
