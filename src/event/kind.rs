//! Event kinds (docs/design.md §3). The `data` fields of each kind are the contract that
//! extractors and folds read; they are documented on each variant. Imported logs
//! (`import::writer`) add `source` (the original ids) and `absent` (JSON Pointers of
//! fields the source did not capture, which are null) to the events they write.

use std::fmt;
use std::str::FromStr;

macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// What happened. Serialised in snake_case.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind { $($(#[$doc])* $variant,)* }

        impl Kind {
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];
            pub fn as_str(self) -> &'static str {
                match self { $(Kind::$variant => $name,)* }
            }
        }

        impl FromStr for Kind {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok(Kind::$variant),)*
                    other => Err(format!("unknown event kind \"{other}\"")),
                }
            }
        }
    };
}

kinds! {
    /// `case`, `run` (index k), `agent`, `dataset_line`, `profile`, `tools`, `recording`
    /// (content digests), `sandbox` (the initial fixture state), `dataset`; `runtime`
    /// (`external`) for a run of the team's own agent program. A log `stateval import`
    /// wrote has `imported` {format, reads, file, digest}, `system` (the system prompt,
    /// a string or its parts) and `declared_tools` instead of the profile and recording.
    RunStarted = "run_started",
    /// `turn`, `input` (the user message).
    TurnStarted = "turn_started",
    /// `budget`, `total`, `sections` {system, memory, history, tools}, `messages` (in the
    /// window), `dropped`, `over_section_budget` (sections over their own budget).
    ContextCompiled = "context_compiled",
    /// `request_hash`, `position`, `response` {content, tool_calls[{id,name,args}],
    /// confidence?}, `usage` {input_tokens, output_tokens}, `latency_ms`; `api` (the wire
    /// dialect) for a call an external agent made.
    ModelCalled = "model_called",
    /// `call_id`, `tool`, `args`.
    ToolProposed = "tool_proposed",
    /// `call_id`, `tool`, `verdict` (allow | deny | escalate, or would_deny |
    /// would_escalate under `enforcement = "observe"`, where the call goes on), `rule`, `reason`,
    /// `args_tainted`; `tainted_by` (the event whose untrusted content reached the
    /// arguments), and for a call with sensitive arguments `grounded`/`ungrounded`.
    PolicyDecided = "policy_decided",
    /// `call_id`, `route`.
    ApprovalRequested = "approval_requested",
    /// `call_id`, `approved`, `by`.
    ApprovalResolved = "approval_resolved",
    /// A call the boundary withheld (denied, escalated and not approved, or a poisoned
    /// tool's effect under `poisoned_tools = "read_only"`) that would have changed the
    /// fixture state: `call_id`, `tool`, `rule` (the policy decision's, `poisoned-tool`),
    /// `by` (`policy`, `approval:<by>` for an approval that did not come, `read_only`), `effect`
    /// (the JSON Patch it would have applied, computed on a throwaway copy of the
    /// state); `idempotency_key` when the call was keyed and would have succeeded. Never
    /// applied by the sandbox fold; the security scorecard's attempts read it.
    ToolWithheld = "tool_withheld",
    /// `call_id`, `tool`, `args`, `result`, `is_error`, `fault` (null, or `timeout`,
    /// `slow`, `error` when an injected fault fired), `duration_ms` (virtual), `deduplicated`,
    /// `effect` (JSON Patch applied to the fixture state, or null). A faulted call also
    /// carries `injected` (the declaration, as spelled: `wedged`, `recover-after:2`) and
    /// `timeout_ms` (the per-call timeout in force); a keyed call `idempotency_key` and
    /// `first_execution`; a tool's protocol error `error_kind`. `source` is `agent` for a
    /// result an external agent produced itself (no sandbox ran it; an imported log's
    /// `source` holds the original ids instead).
    ToolExecuted = "tool_executed",
    /// `tier`, `key`, `value`, `confidence`, `supersedes`, `source` (seq).
    MemoryWritten = "memory_written",
    /// `tier`, `key`, `value` (what expired), `source` (seq of the write).
    MemoryExpired = "memory_expired",
    /// `tier`, `key`, `value` (null when absent), `source`.
    MemoryRead = "memory_read",
    /// `call_id`, `from`, `to`, `allowed`, `payload_hash`, `taint`, and for a refusal
    /// `tainted_by` and `reason`.
    Handoff = "handoff",
    /// `class`, `severity`, `source` (seq), `tool`, `detail`.
    SecurityFlagged = "security_flagged",
    /// `position`, `recorded_request_hash`, `actual_request_hash`.
    ReplayDiverged = "replay_diverged",
    /// `kind`, `message`. `stateval import` writes `kind: "import_warning"` with `code`
    /// and `at` (file:line:column) for what it imported but not fully.
    Error = "error",
    /// `turn`, `response`.
    TurnCompleted = "turn_completed",
    /// A custom grader was run (written after the run, before `run_completed`):
    /// `target`, `command`, `input_digest` (of the canonical stdin), and either
    /// `output_digest` (of the canonical verdict), `pass`, `score?`, `reason?`, or
    /// `error` (timeout | exit | signal | not_started | bad_output) and `message`.
    GraderCalled = "grader_called",
    /// One sample of a recorded judge: `target`, `judge` (profile), `request_hash`,
    /// `sample`, and either `answer` (the judge's JSON) and `usage`, or `error`
    /// (miss | changed | bad_answer) and `pointers` (where the nearest recorded request
    /// differs, for a miss).
    JudgeCalled = "judge_called",
    /// A judge's votes reduced: `target`, `judge`, `request_hash`, `votes`, `reduce`
    /// (majority | mean), `value` (null: no majority), `passed`.
    JudgeVerdict = "judge_verdict",
    /// `status` (completed | failed | budget_exhausted | replay_exhausted |
    /// replay_diverged, or imported for a log written by `stateval import`), `turns`,
    /// `tokens`.
    RunCompleted = "run_completed",
}

impl Kind {
    /// Written by grading (custom graders, judges), not by the agent. Extractors read
    /// what the agent did, so they pass over these.
    pub fn is_grading(self) -> bool {
        matches!(self, Kind::GraderCalled | Kind::JudgeCalled | Kind::JudgeVerdict)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for k in Kind::ALL {
            assert_eq!(k.as_str().parse::<Kind>().unwrap(), *k);
        }
        assert_eq!(Kind::ALL.len(), 22);
        assert!("tool_exec".parse::<Kind>().is_err());
    }

    #[test]
    fn the_event_schema_lists_every_kind() {
        let schema: serde_json::Value = serde_json::from_str(include_str!("../../schemas/event.json")).unwrap();
        let listed: Vec<&str> =
            schema["properties"]["kind"]["enum"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
        let ours: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed, ours);
    }
}
