//! Every assertion target, with what it means: the one list `stateval targets` prints
//! (for people, and for editors that complete `"target": …`) and `docs/design.md`
//! repeats. Tests hold it to the extractor roots and to the names each metric block
//! reports, so a target cannot be added without being described here.

/// Where a target's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Extracted from each run's event log; asserted per run.
    Log,
    /// Reported by a metric block of the case (the block must be present).
    Block(&'static str),
}

impl Source {
    /// `log`, or the block's dataset key.
    pub fn label(self) -> &'static str {
        match self {
            Source::Log => "log",
            Source::Block(key) => key,
        }
    }
}

/// One target: its spelling (`<n>`, `<tier>`, `<key>`, `<path>` are placeholders), where
/// it comes from, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub name: &'static str,
    pub source: Source,
    pub meaning: &'static str,
}

const fn log(name: &'static str, meaning: &'static str) -> Target {
    Target { name, source: Source::Log, meaning }
}

const fn block(key: &'static str, name: &'static str, meaning: &'static str) -> Target {
    Target { name, source: Source::Block(key), meaning }
}

/// Every target, extractor roots first, then each metric block's, in docs order.
pub const TARGETS: &[Target] = &[
    log("final_response", "the response of the last completed turn"),
    log("turns[<n>].input", "the user input of turn n (from 0)"),
    log("turns[<n>].response", "the final response of turn n"),
    log("tool_calls", "every executed call, in log order: [{name, args, result, is_error, fault, turn}]"),
    log("tool_calls[<n>].name", "the n-th executed call's tool name (also .args, .result, .is_error, .fault, .turn)"),
    log("tool_results[<n>]", "the n-th executed call's result"),
    log("tool_sequence", "the names of the executed calls, in order"),
    log("tools.proposed", "the names of the proposed calls, in order, executed or not (denied calls included)"),
    log("memory.<tier>.<key>", "the final value of a memory key (tiers: working, episodic, semantic, procedural)"),
    log("memory_at[<n>].<tier>.<key>", "the value of a memory key at the end of turn n"),
    log(
        "memory_lifecycle.<tier>.<key>",
        "a key's final value, source event and confidence, and the values it superseded",
    ),
    log(
        "policy.verdicts",
        "every policy decision: [{turn, call_id, tool, verdict, rule}], with tainted_by {seq, tool} when tainted",
    ),
    log("policy.denials", "how many proposals policy denied"),
    log("policy.escalations", "how many proposals policy escalated to an approval"),
    log("policy.verdict_at_turn[<n>]", "the strongest verdict of turn n (deny > escalate > allow), null without one"),
    log("context.max_total", "the largest compiled context, in tokens"),
    log("context.budget_exceeded", "1 when any compiled context was over its budget, else 0"),
    log("context.compilations", "how many times the context was compiled (once per model call)"),
    log("security.flags", "every security finding: [{class, severity, detail, turn}]"),
    log("security.flag_count", "how many security findings"),
    log("sandbox.<path>", "the final fixture state (the manifest's state changed by tool effects)"),
    log("usage.input_tokens", "input tokens summed over the model calls (also usage.output_tokens)"),
    log("usage.total_tokens", "input and output tokens together"),
    log("usage.model_calls", "how many model calls the run made"),
    log("status", "how the run ended: completed, failed, budget_exhausted, replay_exhausted, replay_diverged"),
    log("events.count", "how many events the log holds"),
    log("replay.divergences", "how many requests differed from the ones recorded"),
    log("approvals", "every approval: [{call_id, tool, route, approved, by, turn}] (routes: auto, human, deny)"),
    log("recovery.call_start_ms", "virtual time the first faulted call was proposed"),
    log("recovery.detected_ms", "virtual time that call timed out (absent when it did not)"),
    log("recovery.recovered_ms", "virtual time of the first later success: a tool result or a non-empty answer"),
    log("recovery.timeout_budget_ms", "the per-call timeout of the faulted call"),
    log("recovery.time_to_detection_ms", "detected − call start"),
    log("recovery.time_to_recovery_ms", "recovered − call start"),
    log("recovery.user_visible_hang_ms", "the earlier of the two times, else whichever exists, else the budget"),
    log("recovery.recovered", "1 when the run recovered, else 0"),
    log("recovery.clean_timeout", "1 when the timeout came within [start, start + budget], else 0"),
    log("recovery.detections", "how many calls timed out in the run"),
    log("recovery.fault_fired", "1 when any fault fired in the run, else 0"),
    block("trajectory", "trajectory.passed", "1 when the calls match the expected trace in its mode, else 0"),
    block("trajectory", "trajectory.mismatch_count", "how many expected calls (or extra calls) did not match"),
    block(
        "trajectory_axes",
        "trajectory.dependency_satisfaction",
        "percent of dependencies held (every consumer call has a producer call before it)",
    ),
    block(
        "trajectory_axes",
        "trajectory.order_satisfaction",
        "percent of order constraints held (no `second` call before the first `first` call)",
    ),
    block("golden_path", "golden_path.passed", "1 when no enabled waste count is above 0, else 0"),
    block("golden_path", "golden_path.penalty", "1 / (1 + 0.5 · the sum of the enabled waste counts)"),
    block("golden_path", "golden_path.extra_steps", "calls beyond the golden path's length"),
    block("golden_path", "golden_path.backtracks", "calls of a tool used earlier but not just before"),
    block("golden_path", "golden_path.repeated_tools", "calls of the same tool as the call just before"),
    block("golden_path", "golden_path.missing_steps", "golden calls missing from the longest common subsequence"),
    block("stability", "stability.score", "mean over runs of each run's weakest stability sub-score"),
    block("stability", "stability.weakest_score", "the lowest weakest sub-score of any run"),
    block("stability", "stability.variance", "population variance of the runs' weakest sub-scores"),
    block("stability", "stability.tool_sequence_similarity", "mean over run pairs of 2·LCS/(|a|+|b|) on tool names"),
    block(
        "stability",
        "stability.argument_consistency",
        "mean over run pairs of the share of aligned same-name calls with equal arguments",
    ),
    block("stability", "stability.early_divergence", "1 when most diverging run pairs differ at call 0 or 1"),
    block("stability", "stability.runs", "how many runs were compared"),
    block("reliability", "reliability.runs", "how many runs the case has"),
    block("reliability", "reliability.pass_at_k", "100 when any run passed, else 0"),
    block("reliability", "reliability.passhat_k", "100 when every run passed, else 0"),
    block("reliability", "reliability.decay_curve", "per k: floor(100 · (passes in the first k / k)^k)"),
    block("reliability", "reliability.variance_amplification", "100 · population std of the pass indicators / 0.5"),
    block("reliability", "reliability.graceful_degradation", "100 · Σ position · pass / Σ position"),
    block("reliability", "reliability.pass_at[<k>]", "unbiased pass@k for a k listed in the block's `k`"),
    block("reliability", "reliability.pass_hat[<k>]", "unbiased pass^k for a k listed in the block's `k`"),
    block("narrative", "narrative.divergence_score", "min(1, items / max(1, calls + claimed actions))"),
    block("narrative", "narrative.claimed_but_absent", "actions the final answer claims that no call did"),
    block("narrative", "narrative.present_but_unclaimed", "calls the final answer neither mentions nor claims"),
    block("narrative", "narrative.arg_mismatch", "arguments the answer names with a value the call did not use"),
    block(
        "narrative",
        "narrative.gate_passed",
        "1 when no mutating action is claimed but absent (and the score is in bounds)",
    ),
];

/// The targets as `stateval targets` prints them: one per line, name, source, meaning,
/// in columns.
pub fn render() -> String {
    let width = TARGETS.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let source_width = TARGETS.iter().map(|t| t.source.label().len()).max().unwrap_or(0);
    let mut out = String::new();
    for t in TARGETS {
        out.push_str(&format!("{:width$}  {:source_width$}  {}\n", t.name, t.source.label(), t.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dataset::blocks::BLOCK_KEYS;
    use crate::metrics::block::MetricBlock;

    #[test]
    fn every_extractor_root_is_described() {
        for root in crate::dataset::target::ROOTS {
            assert!(
                TARGETS.iter().any(|t| t.source == Source::Log && t.name.split(['.', '[']).next() == Some(*root)),
                "extractor root {root} has no described target"
            );
        }
    }

    #[test]
    fn every_target_a_metric_block_reports_is_described_under_that_block() {
        for key in BLOCK_KEYS.into_iter().filter(|k| *k != "recovery") {
            let shape = match key {
                "trajectory" | "golden_path" => json!({"calls": []}),
                _ => json!({}),
            };
            let block = MetricBlock::from_key(key, &shape).and_then(Result::ok);
            let Some(block) = block else { panic!("{key} parses its minimal shape") };
            for name in block.target_names() {
                assert!(
                    TARGETS.iter().any(|t| t.name == name && t.source == Source::Block(key)),
                    "{key} reports {name}, which is not described"
                );
            }
        }
    }

    #[test]
    fn every_described_target_of_a_log_root_parses_as_a_target() {
        for t in TARGETS.iter().filter(|t| t.source == Source::Log) {
            let spelled = t.name.replace("<n>", "0").replace("<tier>", "semantic").replace("<key>", "k");
            let spelled = spelled.replace("<path>", "ledger");
            assert_eq!(crate::dataset::target::check_target(&spelled), Ok(()), "{}", t.name);
        }
    }

    #[test]
    fn the_members_a_fixed_root_admits_are_the_ones_described_and_the_ones_extracted() {
        use crate::dataset::target::MEMBERS;
        for (root, members) in MEMBERS {
            let below = format!("{root}.");
            for t in TARGETS.iter().filter(|t| t.source == Source::Log && t.name.starts_with(&below)) {
                let member = t.name[below.len()..].split(['.', '[']).next().unwrap_or_default();
                assert!(members.contains(&member), "{} is not among {root}'s members", t.name);
            }
            for member in *members {
                let spelled = format!("{root}.{member}");
                let described = TARGETS.iter().any(|t| t.name.starts_with(&spelled) || t.meaning.contains(&spelled));
                assert!(described, "{spelled} is admitted but not described");
            }
            // what the extractor makes of a log has no member the check would refuse
            let Some(serde_json::Value::Object(value)) = crate::extract::root(root, &[]) else {
                panic!("{root} is an object even over an empty log")
            };
            for key in value.keys() {
                assert!(members.contains(&key.as_str()), "{root} extracts {key}, which a target may not name");
            }
        }
    }

    #[test]
    fn the_rendered_list_has_one_aligned_line_per_target() {
        let text = render();
        assert_eq!(text.lines().count(), TARGETS.len());
        let first = text.lines().next().unwrap_or_default();
        assert!(first.starts_with("final_response  "), "{first}");
        assert!(text.contains("  trajectory       1 when the calls match"), "{text}");
    }
}
