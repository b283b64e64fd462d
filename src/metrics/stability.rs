//! Stability: does the agent behave the same way within a session and across runs
//! (docs/metrics.md §1)?
//!
//! Within a session, four sub-scores read one trace: how many different tools it reached
//! for, how even its answers' lengths are, how often it repeated an identical call, and
//! how many tokens each useful call cost. The idea follows mcptest-core's stability
//! metrics; the sub-score formulas, the "trivially stable" rule and the floors are the
//! contract's. Across runs, each run's weakest sub-score is aggregated and the runs' tool
//! sequences are compared pairwise (LCS similarity, argument agreement, where they first
//! diverge).
//!
//! Design choice: every score is the *weakest* view, so one bad dimension cannot hide
//! behind three good ones; `drift_flags` names which one it was.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::gate::{BlockOutcome, Bound, CaseBlock, flag, float, parse_block_assertions};
use super::sequence::BitLcs;
use super::trace::{MetricTrace, TracedCall};
use super::{MetricError, expect_object, pointer_join, reject_unknown_keys, type_name};

/// Tokens one distinct call may cost before `cost_per_progress` drops below 1: about one
/// tool round-trip with a short reasoning step at today's context sizes (mcptest-core's
/// `TARGET_TOKENS_PER_CALL`).
pub const TARGET_TOKENS_PER_CALL: f64 = 2000.0;

/// Floor each sub-score is held to by default, for drift flags and the default gate.
pub const DEFAULT_FLOOR: f64 = 0.5;

/// Sub-score names, in the fixed order of reports and drift flags.
pub const SUB_SCORES: [&str; 4] = ["tool_usage_stability", "response_consistency", "redundancy", "cost_per_progress"];

/// Runs a `stability` block needs: one run has nothing to be stable against.
pub const MIN_RUNS: usize = 2;

/// Divergence at or before this index counts as "early" (the first or second call).
const EARLY_DIVERGENCE_INDEX: usize = 1;

/// Within-session stability of one trace. Every score is in 0..=1, higher is better.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StabilityReport {
    /// `clamp(1 − (distinct_tool_names − 1)/(calls − 1))`; 1.0 with fewer than 2 calls.
    pub tool_usage_stability: f64,
    /// `1 − min(1, cv)`, cv = population std / mean of assistant-turn lengths in Unicode
    /// scalar values; 1.0 with fewer than 2 assistant turns or a mean of 0.
    pub response_consistency: f64,
    /// `distinct_calls / calls`, a call keyed on (name, server, canonical args); 1.0 with
    /// no calls.
    pub redundancy: f64,
    /// `2000 / max(2000, tokens / distinct_calls)`; 1.0 when tokens = 0; 0.0 when
    /// tokens > 0 and there are no calls.
    pub cost_per_progress: f64,
    /// The minimum of the four.
    pub weakest_score: f64,
}

/// The floor each sub-score is compared with by [`drift_flags`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Floors {
    pub tool_usage_stability: f64,
    pub response_consistency: f64,
    pub redundancy: f64,
    pub cost_per_progress: f64,
}

impl Default for Floors {
    fn default() -> Self {
        Floors {
            tool_usage_stability: DEFAULT_FLOOR,
            response_consistency: DEFAULT_FLOOR,
            redundancy: DEFAULT_FLOOR,
            cost_per_progress: DEFAULT_FLOOR,
        }
    }
}

impl Floors {
    /// Read `{"tool_usage_stability": 0.3, …}`: missing names keep the default 0.5; a
    /// floor must be a number in 0..=1.
    pub fn from_value(value: &Value, pointer: &str) -> Result<Self, MetricError> {
        let object = expect_object(value, pointer)?;
        reject_unknown_keys(object, pointer, &SUB_SCORES)?;
        let mut floors = Floors::default();
        for (key, v) in object {
            let at = pointer_join(pointer, key);
            let floor = v.as_f64().ok_or_else(|| MetricError::WrongType {
                pointer: at.clone(),
                expected: "a number in 0..=1",
                found: type_name(v),
            })?;
            if !(0.0..=1.0).contains(&floor) {
                return Err(MetricError::OutOfRange {
                    pointer: at,
                    message: format!("a floor must be in 0..=1, got {floor}"),
                });
            }
            *floors.slot(key) = floor;
        }
        Ok(floors)
    }

    fn slot(&mut self, name: &str) -> &mut f64 {
        match name {
            "tool_usage_stability" => &mut self.tool_usage_stability,
            "response_consistency" => &mut self.response_consistency,
            "redundancy" => &mut self.redundancy,
            _ => &mut self.cost_per_progress,
        }
    }

    fn as_array(&self) -> [f64; 4] {
        [self.tool_usage_stability, self.response_consistency, self.redundancy, self.cost_per_progress]
    }
}

impl StabilityReport {
    /// All four sub-scores at 1.0: nothing to measure.
    pub const PERFECT: StabilityReport = StabilityReport {
        tool_usage_stability: 1.0,
        response_consistency: 1.0,
        redundancy: 1.0,
        cost_per_progress: 1.0,
        weakest_score: 1.0,
    };

    fn as_array(&self) -> [f64; 4] {
        [self.tool_usage_stability, self.response_consistency, self.redundancy, self.cost_per_progress]
    }

    /// `tool-usage 0.50, response-consistency 0.94, redundancy 1.00, cost-per-progress 1.00`.
    pub fn summary(&self) -> String {
        format!(
            "tool-usage {:.2}, response-consistency {:.2}, redundancy {:.2}, cost-per-progress {:.2}",
            self.tool_usage_stability, self.response_consistency, self.redundancy, self.cost_per_progress
        )
    }

    /// `stability.<sub-score>` and `stability.weakest_score`.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        let mut targets: BTreeMap<String, Value> = SUB_SCORES
            .iter()
            .zip(self.as_array())
            .map(|(name, score)| (format!("stability.{name}"), float(score)))
            .collect();
        targets.insert("stability.weakest_score".into(), float(self.weakest_score));
        targets
    }
}

/// Score one trace envelope (see [`MetricTrace::read`] for what is accepted).
pub fn score_stability(envelope: &Value) -> StabilityReport {
    score_trace(&MetricTrace::read(envelope))
}

/// Score one already-read trace.
pub fn score_trace(trace: &MetricTrace) -> StabilityReport {
    let keys: Vec<CallKey<'_>> = trace.tool_calls.iter().map(call_key).collect();
    score_calls(&keys, &trace.assistant_turns, trace.total_tokens)
}

/// A call as stability tells calls apart: its name, server and canonical args.
pub(crate) type CallKey<'a> = (&'a str, Option<&'a str>, &'a str);

/// [`score_trace`] of a trace given as its calls' keys, in order, the texts of its
/// assistant turns that have any, and its total tokens (for a reader that borrows them
/// from its input rather than building a [`MetricTrace`]).
pub(crate) fn score_calls<T: AsRef<str>>(calls: &[CallKey<'_>], turns: &[T], total_tokens: f64) -> StabilityReport {
    // A trace with at most one call and one answer has no progression to measure.
    if calls.len() <= 1 && turns.len() <= 1 {
        return StabilityReport::PERFECT;
    }
    let distinct_calls = distinct(calls.iter());
    let scores = [
        tool_usage_stability(calls),
        response_consistency(turns),
        redundancy(calls.len(), distinct_calls),
        cost_per_progress(total_tokens, distinct_calls),
    ];
    StabilityReport {
        tool_usage_stability: scores[0],
        response_consistency: scores[1],
        redundancy: scores[2],
        cost_per_progress: scores[3],
        weakest_score: scores.into_iter().fold(1.0, f64::min),
    }
}

fn call_key(call: &TracedCall) -> CallKey<'_> {
    (call.name.as_str(), call.server.as_deref(), call.canonical_args())
}

/// How many different items `items` yields.
fn distinct<T: std::hash::Hash + Eq>(items: impl ExactSizeIterator<Item = T>) -> usize {
    let mut seen = HashSet::with_capacity_and_hasher(items.len(), foldhash::fast::FixedState::default());
    seen.extend(items);
    seen.len()
}

fn tool_usage_stability(calls: &[CallKey<'_>]) -> f64 {
    if calls.len() < 2 {
        return 1.0;
    }
    let distinct_names = distinct(calls.iter().map(|c| c.0));
    (1.0 - (distinct_names as f64 - 1.0) / (calls.len() as f64 - 1.0)).clamp(0.0, 1.0)
}

fn response_consistency<T: AsRef<str>>(turns: &[T]) -> f64 {
    if turns.len() < 2 {
        return 1.0;
    }
    let lengths: Vec<f64> = turns.iter().map(|t| t.as_ref().chars().count() as f64).collect();
    let mean = lengths.iter().sum::<f64>() / lengths.len() as f64;
    if mean == 0.0 {
        return 1.0;
    }
    let cv = population_variance(&lengths).sqrt() / mean;
    1.0 - cv.min(1.0)
}

fn redundancy(calls: usize, distinct_calls: usize) -> f64 {
    if calls == 0 { 1.0 } else { distinct_calls as f64 / calls as f64 }
}

fn cost_per_progress(tokens: f64, distinct_calls: usize) -> f64 {
    if tokens <= 0.0 {
        return 1.0;
    }
    if distinct_calls == 0 {
        return 0.0;
    }
    TARGET_TOKENS_PER_CALL / TARGET_TOKENS_PER_CALL.max(tokens / distinct_calls as f64)
}

/// Sub-score names strictly below their floor, in the fixed order of [`SUB_SCORES`].
pub fn drift_flags(report: &StabilityReport, floors: &Floors) -> Vec<&'static str> {
    SUB_SCORES
        .iter()
        .zip(report.as_array().into_iter().zip(floors.as_array()))
        .filter(|(_, (score, floor))| score < floor)
        .map(|(name, _)| *name)
        .collect()
}

fn population_variance(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64
}

/// Stability across a case's runs (the `stability` block).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StabilityAcrossReport {
    /// Mean of each run's `weakest_score`; 1 with fewer than 2 runs.
    pub score: f64,
    /// Minimum of each run's `weakest_score`; 1 with fewer than 2 runs.
    pub weakest_score: f64,
    /// Population variance of each run's `weakest_score`; 0 with fewer than 2 runs.
    pub variance: f64,
    /// Mean over run pairs of `2·LCS(a,b)/(|a|+|b|)` on tool-name sequences; two empty
    /// sequences score 1; 1 with fewer than 2 runs.
    pub tool_sequence_similarity: f64,
    /// Mean over run pairs of (aligned positions — below the shorter length, names agree —
    /// whose canonical args are equal) / (aligned positions); a pair with none aligned
    /// scores 1; 1 with fewer than 2 runs.
    pub argument_consistency: f64,
    /// A strict majority of the pairs that diverge first differ at index 0 or 1 (a strict
    /// prefix diverges at the shorter length; identical sequences do not diverge).
    /// False when no pair diverges or with fewer than 2 runs.
    pub early_divergence: bool,
    /// Number of runs compared.
    pub runs: usize,
}

impl StabilityAcrossReport {
    /// One line: `score 0.83, weakest 0.50, variance 0.0200, …`.
    pub fn summary(&self) -> String {
        format!(
            "score {:.2}, weakest {:.2}, variance {:.4}, sequence similarity {:.2}, argument consistency {:.2}, early divergence {} ({} runs)",
            self.score,
            self.weakest_score,
            self.variance,
            self.tool_sequence_similarity,
            self.argument_consistency,
            if self.early_divergence { "yes" } else { "no" },
            self.runs
        )
    }

    /// The `stability.*` targets of the block.
    pub fn targets(&self) -> BTreeMap<String, Value> {
        BTreeMap::from([
            ("stability.score".into(), float(self.score)),
            ("stability.weakest_score".into(), float(self.weakest_score)),
            ("stability.variance".into(), float(self.variance)),
            ("stability.tool_sequence_similarity".into(), float(self.tool_sequence_similarity)),
            ("stability.argument_consistency".into(), float(self.argument_consistency)),
            ("stability.early_divergence".into(), flag(self.early_divergence)),
            ("stability.runs".into(), Value::from(self.runs)),
        ])
    }
}

impl StabilityAcrossReport {
    /// The report of runs that cannot disagree (fewer than two): every score at its best.
    fn agreeing(runs: usize) -> Self {
        StabilityAcrossReport {
            score: 1.0,
            weakest_score: 1.0,
            variance: 0.0,
            tool_sequence_similarity: 1.0,
            argument_consistency: 1.0,
            early_divergence: false,
            runs,
        }
    }
}

/// Stability across runs of one case.
pub fn score_across(runs: &[MetricTrace]) -> StabilityAcrossReport {
    if runs.len() < 2 {
        return StabilityAcrossReport::agreeing(runs.len());
    }
    let weakest: Vec<f64> = runs.iter().map(|r| score_trace(r).weakest_score).collect();
    // Intern tool names so pairwise comparisons compare integers, not strings.
    let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
    let sequences: Vec<Vec<u32>> = runs
        .iter()
        .map(|r| {
            r.tool_calls
                .iter()
                .map(|c| {
                    let next = ids.len() as u32;
                    *ids.entry(c.name.as_str()).or_insert(next)
                })
                .collect()
        })
        .collect();

    // Intern canonical args too: a pair of runs then compares integers, not strings.
    let mut arg_ids: HashMap<&str, u32> = HashMap::new();
    let arguments: Vec<Vec<u32>> = runs
        .iter()
        .map(|r| {
            r.tool_calls
                .iter()
                .map(|c| {
                    let next = arg_ids.len() as u32;
                    *arg_ids.entry(c.canonical_args()).or_insert(next)
                })
                .collect()
        })
        .collect();

    let rows = pair_rows(&sequences, &arguments, ids.len());
    let (mut similarity, mut consistency, mut pairs) = (0.0, 0.0, 0usize);
    let (mut diverging, mut early) = (0usize, 0usize);
    // The sums run over the pairs in their documented order (i, then j > i) whichever
    // thread compared them, so the floats are the same bits on every machine.
    for pair in rows.iter().flatten() {
        pairs += 1;
        similarity += pair.similarity;
        consistency += pair.consistency;
        if let Some(at) = pair.divergence {
            diverging += 1;
            early += usize::from(at <= EARLY_DIVERGENCE_INDEX);
        }
    }
    let mean = weakest.iter().sum::<f64>() / weakest.len() as f64;
    StabilityAcrossReport {
        score: mean,
        weakest_score: weakest.iter().copied().fold(1.0, f64::min),
        variance: population_variance(&weakest),
        tool_sequence_similarity: similarity / pairs as f64,
        argument_consistency: consistency / pairs as f64,
        early_divergence: 2 * early > diverging,
        runs: runs.len(),
    }
}

/// What one pair of runs contributes to the across-runs report.
struct PairTerms {
    similarity: f64,
    consistency: f64,
    divergence: Option<usize>,
}

/// Word steps of LCS work above which the pairs are shared among threads: below it
/// (every ordinary case) a thread costs more than it saves.
const PARALLEL_WORK: usize = 4_000_000;

/// For each run i, the terms of its pairs with every later run j, in order. Rows are
/// shared round-robin among up to [`std::thread::available_parallelism`] threads when the
/// work is large (500 runs × 500 calls: 125,000 LCS of 500 × 8 words); each row is
/// computed the same way wherever it runs.
fn pair_rows(sequences: &[Vec<u32>], arguments: &[Vec<u32>], symbols: usize) -> Vec<Vec<PairTerms>> {
    let n = sequences.len();
    let row = |i: usize| -> Vec<PairTerms> {
        // LCS is symmetric: run i's masks are built once and every later run is read
        // against them.
        let a = &sequences[i];
        let masks = BitLcs::new(a.len(), symbols, a.iter().enumerate().map(|(p, s)| (*s, p)));
        // later runs two at a time (see BitLcs::len_against_two)
        let mut lcs = Vec::with_capacity(n - i - 1);
        for two in sequences[i + 1..].chunks(2) {
            match two {
                [b, c] => {
                    let (x, y) = masks.len_against_two(b, c);
                    lcs.extend([x, y]);
                }
                [b] => lcs.push(masks.len_against(b).0),
                _ => {}
            }
        }
        (i + 1..n)
            .zip(lcs)
            .map(|(j, lcs)| {
                let b = &sequences[j];
                PairTerms {
                    similarity: if a.is_empty() && b.is_empty() {
                        1.0
                    } else {
                        2.0 * lcs as f64 / (a.len() + b.len()) as f64
                    },
                    consistency: argument_agreement(a, b, &arguments[i], &arguments[j]),
                    divergence: first_divergence(a, b),
                }
            })
            .collect()
    };
    let calls: usize = sequences.iter().map(Vec::len).sum();
    let mean_words = calls.div_ceil(n.max(1)).div_ceil(64);
    let work = n.saturating_mul(n) / 2 * calls.div_ceil(n.max(1)) * mean_words;
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(n / 2);
    if work < PARALLEL_WORK || threads < 2 {
        return (0..n).map(row).collect();
    }
    let mut rows: Vec<Vec<PairTerms>> = (0..n).map(|_| Vec::new()).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let row = &row;
                scope.spawn(move || (t..n).step_by(threads).map(|i| (i, row(i))).collect::<Vec<_>>())
            })
            .collect();
        for worker in workers {
            // a worker's panic is the computation's own, raised here as the serial path would
            let done = worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (i, terms) in done {
                rows[i] = terms;
            }
        }
    });
    rows
}

/// Over aligned positions whose names (interned in `names_*`) agree, the share whose
/// canonical args (interned in `args_*`) agree too.
fn argument_agreement(names_a: &[u32], names_b: &[u32], args_a: &[u32], args_b: &[u32]) -> f64 {
    let (mut aligned, mut agreeing) = (0usize, 0usize);
    // Counted without a branch: names agree at about one position in the number of
    // tools, a branch the processor cannot predict (this loop runs once per pair of runs).
    for ((x, y), (p, q)) in names_a.iter().zip(names_b).zip(args_a.iter().zip(args_b)) {
        let same = x == y;
        aligned += usize::from(same);
        agreeing += usize::from(same & (p == q));
    }
    if aligned == 0 { 1.0 } else { agreeing as f64 / aligned as f64 }
}

fn first_divergence(a: &[u32], b: &[u32]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(at) => Some(at),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

/// The dataset `stability` block: `{}` or `{"expect": [{"target": "stability.…", "matcher": …}]}`.
///
/// Input per run: a trace envelope (`tool_calls`, `conversation.turns`,
/// `conversation.tokens.total`). Needs at least [`MIN_RUNS`] runs. Default gate
/// `stability.weakest_score ≥ 0.5`; an `expect` list replaces it and is graded by the
/// runner (an LLM matcher in it is a load error).
#[derive(Debug, Clone, PartialEq)]
pub struct StabilityBlock {
    pub expect: Vec<Value>,
}

const STABILITY_KEYS: &[&str] = &["expect"];

/// Targets a `stability` block's `expect` may name.
pub fn across_target_names() -> Vec<String> {
    StabilityAcrossReport::agreeing(0).targets().into_keys().collect()
}

impl CaseBlock for StabilityBlock {
    const KEY: &'static str = "stability";

    fn from_block(block: &Value) -> Result<Self, MetricError> {
        let object = expect_object(block, "")?;
        reject_unknown_keys(object, "", STABILITY_KEYS)?;
        let expect = match object.get("expect") {
            None => Vec::new(),
            Some(list) => parse_block_assertions(list, "/expect", Self::KEY, &across_target_names())?,
        };
        Ok(StabilityBlock { expect })
    }

    fn min_runs(&self) -> usize {
        MIN_RUNS
    }

    fn evaluate(&self, runs: &[Value]) -> Result<BlockOutcome, MetricError> {
        let traces: Vec<MetricTrace> = runs.iter().map(MetricTrace::read).collect();
        let report = score_across(&traces);
        let gates: &[(&str, Bound)] =
            if self.expect.is_empty() { &[("stability.weakest_score", Bound::AtLeast(DEFAULT_FLOOR))] } else { &[] };
        let mut outcome = BlockOutcome::across(Self::KEY, report.targets(), gates, self.expect.clone());
        // On failure, name the weakest run and what drifted in it, so the message says where to look.
        if !outcome.failures.is_empty()
            && let Some((run, weakest)) = traces
                .iter()
                .map(score_trace)
                .enumerate()
                .min_by(|a, b| a.1.weakest_score.total_cmp(&b.1.weakest_score))
        {
            let flags = drift_flags(&weakest, &Floors::default()).join(", ");
            for failure in &mut outcome.failures {
                failure.detail = Some(format!("weakest run {run}: {}; drifting: {flags}", weakest.summary()));
            }
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> Value {
        json!({"name": name, "args": args})
    }

    fn envelope(calls: Vec<Value>, turns: &[&str], tokens: u64) -> Value {
        let turns: Vec<Value> = turns.iter().map(|t| json!({"role": "assistant", "content": t})).collect();
        json!({"tool_calls": calls, "conversation": {"tokens": {"total": tokens}, "turns": turns}})
    }

    #[test]
    fn an_empty_trace_is_trivially_stable() {
        assert_eq!(score_stability(&json!({})), StabilityReport::PERFECT);
    }

    #[test]
    fn one_call_and_one_turn_are_trivially_stable_even_when_expensive() {
        // 90000 tokens on one call would otherwise give 2000/90000
        let r = score_stability(&envelope(vec![call("a", json!({}))], &["hi"], 90_000));
        assert_eq!(r, StabilityReport::PERFECT);
    }

    #[test]
    fn a_single_prompt_that_loops_is_scored() {
        // one turn, three identical calls: redundancy 1/3
        let r = score_stability(&envelope(vec![call("a", json!({})); 3], &["done"], 0));
        assert!((r.redundancy - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn using_many_different_tools_lowers_tool_usage_stability() {
        // 4 calls, 2 names: 1 - (2-1)/(4-1) = 2/3
        let calls = vec![call("a", json!(1)), call("a", json!(2)), call("b", json!(3)), call("b", json!(4))];
        assert!((score_stability(&envelope(calls, &[], 0)).tool_usage_stability - 2.0 / 3.0).abs() < 1e-12);
        // 3 calls, 3 names: 1 - 2/2 = 0
        let calls = vec![call("a", json!(1)), call("b", json!(2)), call("c", json!(3))];
        assert_eq!(score_stability(&envelope(calls, &[], 0)).tool_usage_stability, 0.0);
    }

    #[test]
    fn uneven_answer_lengths_lower_response_consistency() {
        // lengths 30, 10: mean 20, population std 10, cv 0.5 -> 0.5
        let r = score_stability(&envelope(vec![], &[&"x".repeat(30), &"x".repeat(10)], 0));
        assert_eq!(r.response_consistency, 0.5);
        // lengths 1, 9: mean 5, std 4, cv 0.8 -> 0.2
        let r = score_stability(&envelope(vec![], &["x", "xxxxxxxxx"], 0));
        assert!((r.response_consistency - 0.2).abs() < 1e-12);
    }

    #[test]
    fn answer_length_counts_unicode_scalar_values_not_bytes() {
        // "éé" is 2 scalars (4 bytes) and "ab" is 2: cv 0 -> 1.0
        assert_eq!(score_stability(&envelope(vec![], &["éé", "ab"], 0)).response_consistency, 1.0);
    }

    #[test]
    fn a_coefficient_of_variation_above_one_floors_consistency_at_zero() {
        // lengths 1,1,1,1,20: mean 4.8, std 7.6, cv 1.58 -> 0
        let r = score_stability(&envelope(vec![], &["a", "a", "a", "a", &"a".repeat(20)], 0));
        assert_eq!(r.response_consistency, 0.0);
    }

    #[test]
    fn looping_the_same_call_scores_low_on_redundancy() {
        // 4 identical calls: 1 distinct / 4 = 0.25
        let r = score_stability(&envelope(vec![call("search", json!({"q": "a"})); 4], &[], 0));
        assert_eq!(r.redundancy, 0.25);
    }

    #[test]
    fn redundancy_keys_on_server_and_canonical_args() {
        // {a,b} == {b,a}; another server is another call: 2 distinct of 3
        let calls = vec![
            json!({"name": "s", "args": {"a": 1, "b": 2}}),
            json!({"name": "s", "args": {"b": 2, "a": 1}}),
            json!({"name": "s", "server": "x", "args": {"a": 1, "b": 2}}),
        ];
        assert!((score_stability(&envelope(calls, &[], 0)).redundancy - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn tokens_per_distinct_call_above_the_target_lower_cost_per_progress() {
        // 12000 tokens / 3 distinct = 4000 -> 2000/4000 = 0.5
        let calls = vec![call("a", json!(1)), call("a", json!(1)), call("b", json!(2)), call("b", json!(3))];
        assert_eq!(score_stability(&envelope(calls, &[], 12_000)).cost_per_progress, 0.5);
        // 3000 tokens / 2 distinct = 1500 <= 2000 -> 1.0
        let calls = vec![call("a", json!(1)), call("b", json!(2))];
        assert_eq!(score_stability(&envelope(calls, &[], 3000)).cost_per_progress, 1.0);
    }

    #[test]
    fn tokens_spent_without_any_call_cost_everything_and_no_tokens_cost_nothing() {
        // two answers, no calls, 500 tokens -> 0.0; with 0 tokens -> 1.0
        assert_eq!(score_stability(&envelope(vec![], &["a", "b"], 500)).cost_per_progress, 0.0);
        assert_eq!(score_stability(&envelope(vec![], &["a", "b"], 0)).cost_per_progress, 1.0);
    }

    #[test]
    fn the_weakest_score_is_the_minimum_and_the_summary_has_two_decimals() {
        let calls = vec![
            call("search", json!({"q": "a"})),
            call("search", json!({"q": "a"})),
            call("fetch", json!({"id": 1})),
            call("fetch", json!({"id": 2})),
        ];
        let r = score_stability(&envelope(calls, &[&"x".repeat(30), &"x".repeat(10)], 12_000));
        assert_eq!(r.weakest_score, 0.5);
        assert_eq!(r.summary(), "tool-usage 0.67, response-consistency 0.50, redundancy 0.75, cost-per-progress 0.50");
    }

    #[test]
    fn drift_flags_fire_only_strictly_below_the_floor() {
        let r = StabilityReport {
            tool_usage_stability: 0.5,
            response_consistency: 0.49,
            redundancy: 1.0,
            cost_per_progress: 0.0,
            weakest_score: 0.0,
        };
        // 0.5 is not below 0.5; 0.49 and 0.0 are
        assert_eq!(drift_flags(&r, &Floors::default()), ["response_consistency", "cost_per_progress"]);
        let zero =
            Floors { tool_usage_stability: 0.0, response_consistency: 0.0, redundancy: 0.0, cost_per_progress: 0.0 };
        assert!(drift_flags(&r, &zero).is_empty());
        let one =
            Floors { tool_usage_stability: 1.0, response_consistency: 1.0, redundancy: 1.0, cost_per_progress: 1.0 };
        assert_eq!(drift_flags(&r, &one), ["tool_usage_stability", "response_consistency", "cost_per_progress"]);
    }

    #[test]
    fn floors_outside_zero_to_one_or_with_unknown_names_are_errors() {
        assert!(Floors::from_value(&json!({"redundancy": 1.5}), "/floors").is_err());
        assert!(Floors::from_value(&json!({"redundnacy": 0.5}), "/floors").is_err());
        assert_eq!(Floors::from_value(&json!({"redundancy": 0.2}), "").unwrap().redundancy, 0.2);
    }

    fn names(names: &[&str]) -> MetricTrace {
        MetricTrace::read(&json!({"tool_calls": names}))
    }

    #[test]
    fn fewer_than_two_runs_are_stable_by_definition() {
        let r = score_across(&[names(&["a", "b", "c"])]);
        assert_eq!((r.score, r.weakest_score, r.variance, r.early_divergence), (1.0, 1.0, 0.0, false));
    }

    #[test]
    fn across_runs_score_is_the_mean_and_weakest_the_minimum_of_each_runs_weakest() {
        // run weakest scores 1.0 (empty) and 0.25 (4 identical calls): mean 0.625, min 0.25, var 0.140625
        let looping =
            MetricTrace::read(&json!({"tool_calls": [{"name": "a"}, {"name": "a"}, {"name": "a"}, {"name": "a"}]}));
        let r = score_across(&[MetricTrace::default(), looping]);
        assert_eq!((r.score, r.weakest_score, r.variance), (0.625, 0.25, 0.140625));
    }

    #[test]
    fn tool_sequence_similarity_is_twice_the_lcs_over_the_total_length() {
        // a b c vs a c: LCS 2 -> 2*2/5 = 0.8
        assert_eq!(score_across(&[names(&["a", "b", "c"]), names(&["a", "c"])]).tool_sequence_similarity, 0.8);
        // two empty sequences -> 1
        assert_eq!(score_across(&[names(&[]), names(&[])]).tool_sequence_similarity, 1.0);
    }

    #[test]
    fn argument_consistency_compares_aligned_positions_with_the_same_name() {
        // positions 0 (a/a, args equal), 1 (b/b, args differ), 2 (c/d, not aligned): 1/2
        let x = MetricTrace::read(
            &json!({"tool_calls": [{"name": "a", "args": {"k": 1}}, {"name": "b", "args": {"k": 1}}, {"name": "c"}]}),
        );
        let y = MetricTrace::read(
            &json!({"tool_calls": [{"name": "a", "args": {"k": 1.0}}, {"name": "b", "args": {"k": 2}}, {"name": "d"}]}),
        );
        assert_eq!(score_across(&[x, y]).argument_consistency, 0.5);
        // no aligned position -> 1
        assert_eq!(score_across(&[names(&["a"]), names(&["b"])]).argument_consistency, 1.0);
    }

    #[test]
    fn early_divergence_needs_a_strict_majority_of_diverging_pairs_to_differ_at_zero_or_one() {
        // a b c / a x c / a b c: pairs (0,1) diverge at 1, (0,2) identical, (1,2) at 1 -> 2 of 2 early
        assert!(
            score_across(&[names(&["a", "b", "c"]), names(&["a", "x", "c"]), names(&["a", "b", "c"])]).early_divergence
        );
        // a b c d / a b c x: diverge at 3 -> 0 of 1 early
        assert!(!score_across(&[names(&["a", "b", "c", "d"]), names(&["a", "b", "c", "x"])]).early_divergence);
        // a / a b: a strict prefix diverges at the shorter length 1 -> early
        assert!(score_across(&[names(&["a"]), names(&["a", "b"])]).early_divergence);
        // identical runs never diverge -> 0
        assert!(!score_across(&[names(&["a"]), names(&["a"])]).early_divergence);
        // pairs early, late: 1 of 2 is not a strict majority
        let runs = [names(&["a", "b", "c", "d"]), names(&["x", "b", "c", "d"]), names(&["x", "b", "c", "y"])];
        // (0,1) at 0, (0,2) at 0, (1,2) at 3 -> 2 of 3 early: majority
        assert!(score_across(&runs).early_divergence);
        let runs =
            [names(&["a", "b", "c", "d"]), names(&["a", "b", "c", "x"]), names(&["a", "b", "c", "y"]), names(&["q"])];
        // 3 late pairs (at 3), 3 early pairs (with q, at 0) -> 3 of 6 is not a majority
        assert!(!score_across(&runs).early_divergence);
    }

    #[test]
    fn the_block_gates_the_weakest_run_at_one_half_by_default() {
        let block = StabilityBlock::from_block(&json!({})).unwrap();
        assert_eq!(block.min_runs(), 2);
        let looping = json!({"tool_calls": [{"name": "a"}, {"name": "a"}, {"name": "a"}, {"name": "a"}]});
        // run 1 weakest 0.25 < 0.5
        let outcome = block.evaluate(&[json!({}), looping]).unwrap();
        assert!(!outcome.passed);
        assert_eq!(
            outcome.messages(),
            ["stability.weakest_score = 0.25, below the bound 0.5 (weakest run 1: tool-usage 1.00, \
              response-consistency 1.00, redundancy 0.25, cost-per-progress 1.00; drifting: redundancy)"]
        );
        assert!(block.evaluate(&[json!({}), json!({})]).unwrap().passed);
    }

    #[test]
    fn an_expect_list_replaces_the_default_gate_and_rejects_llm_matchers() {
        let block = StabilityBlock::from_block(
            &json!({"expect": [{"target": "stability.score", "matcher": {"schema": {"minimum": 0.1}}}]}),
        )
        .unwrap();
        let looping = json!({"tool_calls": [{"name": "a"}, {"name": "a"}, {"name": "a"}, {"name": "a"}]});
        let outcome = block.evaluate(&[json!({}), looping]).unwrap();
        assert!(outcome.passed && outcome.assertions.len() == 1);
        let err = StabilityBlock::from_block(
            &json!({"expect": [{"target": "stability.score", "matcher": {"llm": "stable?"}}]}),
        )
        .unwrap_err();
        assert!(matches!(err, MetricError::LlmMatcher { .. }));
        assert!(StabilityBlock::from_block(&json!({"floor": 1})).is_err());
    }
}
