//! The built-in `handoff` tool: give a task to another agent profile.
//!
//! A handoff is a proposal like any call (policy decides first). Then: the target must
//! be one of the caller's `handoffs`; a target that is `privileged`, or holds a
//! `financial` or `privileged` tool, refuses a payload that carries untrusted (tainted)
//! content — the confused-deputy mitigation, flagged as `security_flagged` class
//! `confused_deputy`; and the target runs under its own policy, tools and approvals,
//! inheriting no authority from the caller but all of its taint (every untrusted source
//! the caller read, with the event that brought it), and may hand on to its own
//! targets. Its model calls come from the same recording, in order, and its events sit
//! in the same log after the `handoff` event.

use serde_json::{Value, json};

/// The handoff tool's name, defined with the pipeline's load checks, below this stage.
pub const TOOL: &str = crate::pipeline::reach::HANDOFF_TOOL;

/// The tool as offered to a model whose profile may hand off to `targets`.
pub fn description(targets: &[String]) -> Value {
    json!({"name": TOOL, "description": "Hand a task to another agent and get its answer.",
           "input_schema": {"type": "object", "required": ["to", "task"],
                            "properties": {"to": {"enum": targets}, "task": {"type": "string"}}}})
}
