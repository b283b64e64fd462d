//! The team's own agent under test: any program, in any language, behind the same seam
//! as the built-in runtime (`agent::Agent`), writing the same event log.
//!
//! ```text
//! runner ──► ExternalAgent ── spawns ──► the agent's process (own process group)
//!               │   JSON Lines on stdin/stdout: start, turn ⇄ turn_result, end (protocol)
//!               ▼
//!          Session: the one writer of the run's log
//!               ▲   messages, one at a time
//!          Server (one per `stateval run`, 127.0.0.1, ephemeral port, /r/TOKEN/…; access)
//!            /v1/chat/completions · /v1/responses · /v1/messages · /v1/models  (wire)
//!            /mcp (streamable HTTP) · `stateval mcp-stdio` · /tools/{name}    (mcp)
//! ```
//!
//! Model calls are answered from the case's recording by position, whichever API the
//! agent speaks (recordings are dialect-neutral); tool calls go through the built-in
//! runtime's tool boundary (policy, approvals, taint, idempotency, faults, fixtures).
//! Nothing on the wire is random or reads a clock, so the same inputs give the same
//! log byte for byte, as with the built-in runtime. (The case run's URL token and API
//! key are random, and reach neither the wire's answers nor the log: `access`.)

pub mod access;
pub mod live;
pub mod mcp;
pub mod neutral;
pub mod process;
pub mod protocol;
pub mod server;
pub mod session;
pub mod upstream;
pub mod wire;

use crate::agent::{Agent, Recorder, RunInput, RunSummary};
use crate::event::writer::WriteError;
use crate::replay::ModelProvider;
pub use server::Server;
pub use session::{Launch, RecordMode};

/// An external agent, ready to run cases.
pub struct ExternalAgent<'a> {
    pub launch: Launch<'a>,
}

impl Agent for ExternalAgent<'_> {
    fn run(
        &self,
        input: &RunInput<'_>,
        provider: &mut dyn ModelProvider,
        rec: &mut Recorder,
    ) -> Result<RunSummary, WriteError> {
        session::Session::run(input, provider, rec, &self.launch)
    }
}
