//! The agent seam: what every agent plugs into, the built-in runtime ([`crate::runtime`])
//! and the team's own program ([`crate::external`]) alike. An [`Agent`] reads a
//! [`RunInput`], asks the model provider and records every transition through the
//! [`Recorder`]; each tool call it proposes passes the one tool boundary
//! ([`boundary::ToolBoundary`]: policy, taint, grounding, idempotency, the fixture
//! sandbox). Both agents stand on this seam beside each other; neither imports the other.

pub mod boundary;
pub mod detectors;
pub mod grounding;
pub mod idempotency;
pub mod policy;
pub mod recorder;
pub mod taint;

use std::collections::BTreeMap;

use crate::canon::Digest;
use crate::dataset::Case;
use crate::dataset::recording::Recording;
use crate::event::writer::WriteError;
use crate::pipeline::manifest::Manifest;
use crate::pipeline::{AgentProfile, OnDivergence};
use crate::replay::ModelProvider;
pub use recorder::Recorder;

/// Everything one run of one case needs. Borrowed: the runner owns the inputs.
pub struct RunInput<'a> {
    pub case: &'a Case,
    pub run_index: usize,
    pub agent: &'a str,
    pub profile: &'a AgentProfile,
    pub profile_digest: Digest,
    pub manifest: &'a Manifest,
    pub recording: &'a Recording,
    pub on_divergence: OnDivergence,
    /// The other agent profiles of the pipeline, for handoffs: name → profile, manifest.
    pub peers: BTreeMap<&'a str, (&'a AgentProfile, &'a Manifest)>,
}

/// How a run ended (`run_completed.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Completed,
    Failed,
    BudgetExhausted,
    ReplayExhausted,
    ReplayDiverged,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::BudgetExhausted => "budget_exhausted",
            RunStatus::ReplayExhausted => "replay_exhausted",
            RunStatus::ReplayDiverged => "replay_diverged",
        }
    }
}

/// What the runner needs besides the events.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub status: RunStatus,
    /// Why the run itself failed (replay miss, divergence under `fail`, step limit).
    pub error: Option<String>,
    pub warnings: Vec<String>,
    /// An external agent's run: stateval's answer to the last request it refused
    /// (scrubbed), to explain a failure the agent reports only as its exit.
    pub refused: Option<String>,
}

/// End a run's log as every agent does: the `error` that stopped it, if one did and it is
/// not written yet (`kind`, `message`), in the turn it happened in; then `run_completed`
/// outside any turn, with the case's turn count and the tokens the run used.
pub fn close_run(
    rec: &mut Recorder,
    error: Option<(&str, &str)>,
    status: RunStatus,
    turns: usize,
    tokens: u64,
) -> Result<(), WriteError> {
    use crate::event::payload::{Out, write};
    if let Some((kind, message)) = error {
        rec.emit(&write::Error {
            kind: kind.into(),
            message: message.into(),
            code: Out::Absent,
            at: Out::Absent,
            source: Out::Absent,
        })?;
    }
    rec.set_turn(None);
    rec.emit(&write::RunCompleted { status: status.as_str().into(), turns: turns.into(), tokens: tokens.into() })?;
    Ok(())
}

/// The seam every agent implementation plugs into: it reads the case, asks the
/// provider, and records every transition. Graders never see anything else.
pub trait Agent {
    fn run(
        &self,
        input: &RunInput<'_>,
        provider: &mut dyn ModelProvider,
        rec: &mut Recorder,
    ) -> Result<RunSummary, WriteError>;
}
