//! stateval: deterministic, event-sourced evaluation of stateful LLM agents.
//!
//! Datasets flow through a replay provider and fixture sandboxes into an append-only,
//! canonical, hash-chained event log; pure extractors and graders judge the log; gates
//! and reporters turn verdicts into CI results. See docs/design.md for the map.
#![forbid(unsafe_code)]

/// The agent seam: the `Agent` trait, its run's input and summary, the recorder, and the
/// tool boundary (policy, approvals, taint, grounding, idempotency) every agent's calls pass.
pub mod agent;
/// Files replaced whole or not at all.
pub mod atomic;
/// Canonical bytes (RFC 8785), the I-JSON guard and blake3 digests.
pub mod canon;
/// The environment of every process stateval starts: no stateval secret in any child.
pub mod child_env;
/// The `contains` relation (object subset, substring, multiset) the matchers and
/// trajectory arguments share.
pub mod containment;
/// JSONL datasets: case model, loading and validation; targets, matchers and metric
/// blocks as a case writes them.
pub mod dataset;
/// Input diagnostics: strict JSON, schema checks, file:line:column errors.
pub mod diag;
/// The event log: envelope, kinds, writer, reader, verification, folds.
pub mod event;
/// Run manifests, roots and signatures: what anchors a run's logs.
pub mod evidence;
/// The team's own agent under test: process protocol, replay endpoints, MCP and HTTP tools.
pub mod external;
/// Extractors: pure functions from a run's events to target values.
pub mod extract;
/// Per-tag gates over case verdicts.
pub mod gate;
/// Golden traces: normalisation, structural diff and first divergence, bless.
pub mod golden;
/// Assertion grading: compiled matchers applied to extracted values, custom graders, judges.
pub mod grade;
/// Foreign traces (OpenAI, Anthropic, OTel GenAI, MCP, envelope) → event logs and incident cases.
pub mod import;
/// SIGINT and SIGTERM as a flag a run reads at each phase boundary (exit 130).
pub mod interrupt;
/// The sandbox every program stateval starts on a pipeline's behalf runs in.
pub mod isolation;
/// Metrics of docs/metrics.md: pure functions over JSON values, dataset blocks, `stateval metric`.
pub mod metrics;
/// What a run decided: checks, runs, cases, gates, the suite; the runner produces
/// them, gates and reporters read them.
pub mod outcome;
/// Work spread over every core, results in input order.
pub mod par;
/// Pipeline definitions (TOML), agent profiles, and each stage's settings as data
/// (gates, reports, judges, tool manifests, faults).
pub mod pipeline;
/// The replay provider: recorded model responses, divergence and miss detection.
pub mod replay;
/// Reporters: pretty, JSON, JUnit, TAP, Markdown.
pub mod report;
/// The runner: cases × recorded runs → logs → verdicts.
pub mod runner;
/// The built-in agent loop: context, memory tools, handoffs.
pub mod runtime;
/// Fixture tool sandboxes: calls answered from a manifest, injected faults.
pub mod sandbox;
/// The JSON Schemas of inputs and logs.
pub mod schemas;
/// Secrets out of requests, recordings, judge requests and upstream errors; the kinds
/// `recording lint` names.
pub mod secrets;
/// The run catalog (sled) behind the `Store` trait.
pub mod store;
/// Deterministic synthetic suites for benchmarks and stress tests.
pub mod synth;
/// Text as security comparisons see it: folding and normalisation, injection phrases,
/// hidden characters, mitigation switches.
pub mod text;
