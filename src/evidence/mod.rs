//! Evidence that holds: a run's logs anchored by a manifest, its root, and an optional
//! signature.
//!
//! The hash chain of each log ([`crate::event::verify`]) shows that no event inside a
//! log was edited, dropped, swapped or inserted without re-chaining everything after
//! it. It cannot show that the *end* of a log is where the run left it (a cut at a line
//! boundary leaves a valid prefix), nor that the log is the one the run wrote (a forger
//! who edits an event and recomputes every later hash makes a valid chain). The
//! [`manifest`] closes both: written when a run finishes, it lists every log's head
//! hash and event count with the plan's digest and the stateval version, and its own
//! digest — the run's **root** — is printed in every report. An archived CI report
//! therefore pins every log of its run: `stateval verify RUN_DIR --root ROOT` fails on
//! a lost tail, a re-chained log, a missing or extra log, or a rewritten manifest.
//!
//! The manifest also lists every file a verdict is read from (`cases.jsonl`,
//! `suite.json`, `verdicts.jsonl`, `units.jsonl`, a shard's `shard.json`) and the
//! run's verdict itself, so the root covers what the run decided, not only the
//! evidence; [`verdicts`] checks those files against the manifest and against each
//! other and the logs.
//!
//! A forger who can rewrite the logs, the manifest *and* every archived report is
//! stopped only by a [`signing`] key they do not hold: with `STATEVAL_SIGNING_KEY` set,
//! the root is signed with ed25519, and `verify --pubkey` checks it. Because a
//! consistent forgery is easy for anyone who can write the run directory, a command
//! that signs takes over an earlier run or a shard only when the same key signed it
//! ([`trust`]).

pub mod check;
pub mod manifest;
pub mod signing;
pub mod trust;
pub mod verdicts;

pub use check::{CheckOptions, Finding, LogCheck, RunCheck, check_log, check_run};
pub use manifest::{FileEntry, LogEntry, ManifestError, RunManifest, VERDICT_FILES};
pub use signing::{PublicKey, SecretKey, SignatureFile, SigningError};
pub use trust::Trust;
