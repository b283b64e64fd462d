//! Robustness: how much accuracy survives a perturbation?
//!
//! Per kind (fault, structural, prompt), the ratio of the accuracy under the
//! perturbation to the accuracy without it, capped at 1 (Rabanser et al. 2026,
//! definitions 3.4–3.5: doing better under a fault is luck, not robustness).
//!
//! Pooling, decided here because docs/metrics.md only says "pooled over all runs": the
//! perturbed accuracy pools every run of every perturbed task of the kind; the
//! baseline accuracy pools every run of the set of tasks those perturbed tasks name
//! with `of`. A task named twice (two fault variants of one task) contributes its
//! baseline runs once. A perturbed task with no runs, or one whose `of` names no task,
//! takes part in neither pool. With one perturbed copy of every task this is the
//! paper's whole-benchmark `Acc_perturbed / Acc_baseline`.

use std::collections::BTreeSet;

use super::stats::{mean_of_defined, unit};
use super::{PerturbationKind, Perturbed, Run, Task};

/// `robustness.*`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Robustness {
    /// `min(Acc_perturbed / Acc_baseline, 1)` for injected faults; `None` without fault
    /// runs, without baseline runs, or when the baseline accuracy is 0 (no ratio exists).
    pub fault: Option<f64>,
    /// The same ratio for structural perturbations.
    pub structural: Option<f64>,
    /// The same ratio for reworded prompts.
    pub prompt: Option<f64>,
    /// Mean of the defined ratios; `None` when none is.
    pub score: Option<f64>,
}

/// Scores the robustness dimension: `tasks` are the baselines `perturbed` refers to.
pub(super) fn score(tasks: &[Task], perturbed: &Perturbed) -> Robustness {
    let ratio = |kind| ratio(tasks, perturbed, kind);
    let fault = ratio(PerturbationKind::Fault);
    let structural = ratio(PerturbationKind::Structural);
    let prompt = ratio(PerturbationKind::Prompt);
    Robustness { fault, structural, prompt, score: mean_of_defined(&[fault, structural, prompt]).and_then(unit) }
}

fn ratio(tasks: &[Task], perturbed: &Perturbed, kind: PerturbationKind) -> Option<f64> {
    let known: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).filter(|id| !id.is_empty()).collect();
    let mut named = BTreeSet::new();
    let mut perturbed_tally = Tally::default();
    for task in perturbed.of_kind(kind) {
        if task.runs.is_empty() || !known.contains(task.of.as_str()) {
            continue;
        }
        named.insert(task.of.as_str());
        perturbed_tally.add(&task.runs);
    }
    let mut baseline_tally = Tally::default();
    for task in tasks.iter().filter(|t| named.contains(t.id.as_str())) {
        baseline_tally.add(&task.runs);
    }
    let baseline = baseline_tally.accuracy()?;
    let under_perturbation = perturbed_tally.accuracy()?;
    if baseline <= 0.0 {
        return None;
    }
    unit((under_perturbation / baseline).min(1.0))
}

#[derive(Default)]
struct Tally {
    runs: usize,
    successes: usize,
}

impl Tally {
    fn add(&mut self, runs: &[Run]) {
        self.runs += runs.len();
        self.successes += runs.iter().filter(|r| r.success).count();
    }

    fn accuracy(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.successes as f64 / self.runs as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::dimensions::PerturbedTask;

    fn runs(verdicts: &[bool]) -> Vec<Run> {
        verdicts.iter().map(|&success| Run { success, ..Run::default() }).collect()
    }

    fn task(id: &str, verdicts: &[bool]) -> Task {
        Task { id: id.into(), runs: runs(verdicts) }
    }

    fn copy_of(of: &str, verdicts: &[bool]) -> PerturbedTask {
        PerturbedTask { of: of.into(), runs: runs(verdicts) }
    }

    const T: bool = true;
    const F: bool = false;

    #[test]
    fn accuracies_are_pooled_over_runs_not_averaged_over_tasks() {
        // baseline a TTTT + b FT: 5/6; perturbed a' TTFF + b' T: 3/5; 0.6 / (5/6) = 0.72
        // (averaging accuracies per task instead: (½ + 1)/2 ÷ (1 + ½)/2 = 1)
        let tasks = [task("a", &[T, T, T, T]), task("b", &[F, T])];
        let perturbed =
            Perturbed { fault: vec![copy_of("a", &[T, T, F, F]), copy_of("b", &[T])], ..Perturbed::default() };
        let r = score(&tasks, &perturbed);
        assert!((r.fault.unwrap() - 0.72).abs() < 1e-12);
        assert_eq!(r.structural, None);
        assert_eq!(r.score, r.fault);
    }

    #[test]
    fn the_baseline_is_only_the_tasks_the_perturbations_name() {
        // a' perturbs a (TT, 1.0) only; c (FF) is not named: 1/2 ÷ 1 = 0.5, not 1/2 ÷ 1/2 = 1
        let tasks = [task("a", &[T, T]), task("c", &[F, F])];
        let perturbed = Perturbed { prompt: vec![copy_of("a", &[T, F])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).prompt, Some(0.5));
    }

    #[test]
    fn a_task_named_twice_counts_its_baseline_runs_once() {
        // baseline {a: TF, b: TT} = 3/4 whoever names a; perturbed a' T, a'' F, b' T = 2/3
        // 2/3 ÷ 3/4 = 8/9 (counting a twice would give 2/3 ÷ 4/6 = 1)
        let tasks = [task("a", &[T, F]), task("b", &[T, T])];
        let perturbed = Perturbed {
            structural: vec![copy_of("a", &[T]), copy_of("a", &[F]), copy_of("b", &[T])],
            ..Perturbed::default()
        };
        let r = score(&tasks, &perturbed).structural.unwrap();
        assert!((r - 8.0 / 9.0).abs() < 1e-12);
    }

    #[test]
    fn doing_better_under_perturbation_is_capped_at_one() {
        // 1 ÷ ½ = 2 → min(2, 1) = 1
        let tasks = [task("a", &[T, F])];
        let perturbed = Perturbed { fault: vec![copy_of("a", &[T, T])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).fault, Some(1.0));
    }

    #[test]
    fn a_zero_baseline_accuracy_leaves_the_ratio_undefined() {
        // 1/2 ÷ 0 has no value: None, and the score ignores it: mean of prompt alone = 0.5
        let tasks = [task("a", &[F, F]), task("b", &[T, T])];
        let perturbed = Perturbed {
            fault: vec![copy_of("a", &[T, F])],
            prompt: vec![copy_of("b", &[T, F])],
            ..Perturbed::default()
        };
        let r = score(&tasks, &perturbed);
        assert_eq!(r.fault, None);
        assert_eq!(r.prompt, Some(0.5));
        assert_eq!(r.score, Some(0.5));
    }

    #[test]
    fn a_perturbed_accuracy_of_zero_is_a_defined_zero() {
        // 0 ÷ 1 = 0
        let tasks = [task("a", &[T])];
        let perturbed = Perturbed { fault: vec![copy_of("a", &[F, F])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).fault, Some(0.0));
    }

    #[test]
    fn the_score_is_the_mean_of_the_defined_ratios() {
        // fault 1/2 ÷ 1 = 0.5, structural 1 ÷ 1 = 1, prompt none: (0.5 + 1)/2 = 0.75
        let tasks = [task("a", &[T, T])];
        let perturbed = Perturbed {
            fault: vec![copy_of("a", &[T, F])],
            structural: vec![copy_of("a", &[T])],
            ..Perturbed::default()
        };
        assert_eq!(score(&tasks, &perturbed).score, Some(0.75));
    }

    #[test]
    fn perturbations_of_unknown_or_run_less_tasks_are_left_out() {
        // x' names no task and a'' has no runs: only a' counts, 1/2 ÷ 1 = 0.5
        let tasks = [task("a", &[T])];
        let perturbed = Perturbed {
            fault: vec![copy_of("x", &[F, F, F]), copy_of("a", &[]), copy_of("a", &[T, F])],
            ..Perturbed::default()
        };
        assert_eq!(score(&tasks, &perturbed).fault, Some(0.5));
    }

    #[test]
    fn no_perturbations_leave_the_dimension_undefined() {
        let tasks = [task("a", &[T])];
        assert_eq!(score(&tasks, &Perturbed::default()), Robustness::default());
    }
}
