//! Robustness: how much accuracy survives a perturbation?
//!
//! Per kind (fault, structural, prompt), the ratio of the accuracy under the
//! perturbation to the accuracy without it, capped at 1 (Rabanser et al. 2026,
//! definitions 3.4–3.5: doing better under a fault is luck, not robustness).
//!
//! Pooling (docs/metrics.md §6): the perturbed accuracy pools every run of every
//! perturbed task of the kind; the baseline accuracy pools every run of every baseline
//! task. Perturbed tasks need not share ids with baseline tasks — a reworded prompt is
//! often a task of its own, and benchmark harnesses (HAL) publish the perturbed suite
//! under its own ids — so the ratio is the paper's whole-benchmark
//! `Acc_perturbed / Acc_baseline`, and a perturbed task's `of`, when given, is only a
//! label.

use super::stats::{mean_of_defined, unit};
use super::{PerturbationKind, Perturbed, RunSample, Task};

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

/// Scores the robustness dimension: `tasks` are the baseline, `perturbed` the variants.
pub(super) fn score(tasks: &[Task], perturbed: &Perturbed) -> Robustness {
    let ratio = |kind| ratio(tasks, perturbed, kind);
    let fault = ratio(PerturbationKind::Fault);
    let structural = ratio(PerturbationKind::Structural);
    let prompt = ratio(PerturbationKind::Prompt);
    Robustness { fault, structural, prompt, score: mean_of_defined(&[fault, structural, prompt]).and_then(unit) }
}

fn ratio(tasks: &[Task], perturbed: &Perturbed, kind: PerturbationKind) -> Option<f64> {
    let mut perturbed_tally = Tally::default();
    for task in perturbed.of_kind(kind) {
        perturbed_tally.add(&task.runs);
    }
    let mut baseline_tally = Tally::default();
    for task in tasks {
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
    fn add(&mut self, runs: &[RunSample]) {
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

    fn runs(verdicts: &[bool]) -> Vec<RunSample> {
        verdicts.iter().map(|&success| RunSample { success, ..RunSample::default() }).collect()
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
    fn the_baseline_pools_every_baseline_task_whatever_the_perturbations_name() {
        // baseline a TT + c FF = 2/4; a' (perturbs a only) TF = 1/2: ½ ÷ ½ = 1, not ½ ÷ 1
        let tasks = [task("a", &[T, T]), task("c", &[F, F])];
        let perturbed = Perturbed { prompt: vec![copy_of("a", &[T, F])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).prompt, Some(1.0));
    }

    #[test]
    fn perturbed_tasks_need_not_share_ids_with_the_baseline() {
        // HAL-style: baseline t1 TTTF (3/4), perturbed p1 TF + p2 TT (3/4) under other ids: 1
        let tasks = [task("t1", &[T, T, T, F])];
        let perturbed = Perturbed { fault: vec![copy_of("p1", &[T, F]), copy_of("", &[T, T])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).fault, Some(1.0));
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
        // 1/2 ÷ 0 has no value: every ratio is None, and so is the score
        let tasks = [task("a", &[F, F]), task("b", &[F])];
        let perturbed = Perturbed {
            fault: vec![copy_of("a", &[T, F])],
            prompt: vec![copy_of("b", &[T, F])],
            ..Perturbed::default()
        };
        assert_eq!(score(&tasks, &perturbed), Robustness::default());
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
    fn perturbed_tasks_without_runs_add_nothing_to_the_pool() {
        // a'' has no runs: only a' counts, 1/2 ÷ 1 = 0.5
        let tasks = [task("a", &[T])];
        let perturbed = Perturbed { fault: vec![copy_of("a", &[]), copy_of("a", &[T, F])], ..Perturbed::default() };
        assert_eq!(score(&tasks, &perturbed).fault, Some(0.5));
    }

    #[test]
    fn no_perturbations_leave_the_dimension_undefined() {
        let tasks = [task("a", &[T])];
        assert_eq!(score(&tasks, &Perturbed::default()), Robustness::default());
    }
}
