//! Why a run differs from its golden: the cause, read from what actually differs.
//!
//! One edit to an input — a space appended to a tool description — moves the
//! manifest's digest in `run_started` and the request hash of every model call, in
//! every golden whose case uses that manifest. Each of those goldens fails, and each
//! failure reads alike. Classifying each diff by its cause lets reports show one
//! group per cause ([`super::churn`]) and lets `stateval golden accept --cause ID`
//! re-bless exactly that change.
//!
//! The rule: a difference is *derived* when it follows mechanically from an input
//! digest moving — the digest itself, a request hash (`model_called`, a
//! `replay_diverged` under `warn`), and token counts of the compiled context (the text
//! of a prompt or a tool description changed). Anything else is a difference in what
//! the run did, and makes the cause **behaviour**, whatever inputs changed too: a
//! fixture edit that also changed what the agent does is not swept in with the
//! harmless ones. When nothing but derived differences remain, the cause is the
//! inputs whose digests moved (named as files and profiles, from [`Sources`]), or
//! the digest definition itself when hashes moved with no input changed, or every
//! input digest moved at once.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::diff::{Class, Diff};
use crate::event::Event;

/// Where a run's inputs came from, to name them in a cause.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The case's agent profile (`treasury`).
    pub profile: &'a str,
    /// The pipeline file that defines the profile, as reports show it.
    pub pipeline: &'a str,
    /// The profile's tool manifest, as the pipeline names it.
    pub tools: Option<&'a str>,
    /// The run's recording file, as the case names it (`None`: inline in the case).
    pub recording: Option<&'a str>,
    /// The dataset file holding the case's line, as reports show it.
    pub dataset: &'a str,
}

/// What kind of cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// Input files or profiles changed; nothing the run did changed beyond that.
    Inputs,
    /// Hashes moved with no input changed, or every input digest at once: how stateval
    /// digests changed (an upgrade), not what went in.
    Digests,
    /// What the run did differs in substance.
    Behaviour,
    /// The golden does not verify (edited by hand, truncated).
    Unverified,
    /// There is no golden yet, and one is required (a new case).
    Missing,
}

impl CauseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Inputs => "inputs",
            CauseKind::Digests => "digests",
            CauseKind::Behaviour => "behaviour",
            CauseKind::Unverified => "unverified",
            CauseKind::Missing => "missing",
        }
    }
}

/// The cause of one run's golden difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub kind: CauseKind,
    /// Stable and shell-safe where the names are: `tools:fixtures/tools/treasury.json`,
    /// `profile:treasury`, `recording:…`, `case:datasets/…jsonl` (joined with `+` when
    /// several changed), `digests`, `behaviour`, `unverified`.
    pub id: String,
    /// One line for people: what changed.
    pub what: String,
}

/// The id of the behaviour cause.
pub const BEHAVIOUR: &str = "behaviour";
/// The id of the digest-definition cause.
pub const DIGESTS: &str = "digests";
/// The id of the cause for a golden that does not verify.
pub const UNVERIFIED: &str = "unverified";
/// The id of the cause for a required golden that does not exist.
pub const MISSING: &str = "missing";

impl Cause {
    pub fn behaviour() -> Cause {
        Cause {
            kind: CauseKind::Behaviour,
            id: BEHAVIOUR.into(),
            what: "behaviour: what the run did differs, beyond any input digest".into(),
        }
    }

    pub fn unverified() -> Cause {
        Cause {
            kind: CauseKind::Unverified,
            id: UNVERIFIED.into(),
            what: "the golden does not verify (edited by hand?)".into(),
        }
    }

    pub fn missing() -> Cause {
        Cause { kind: CauseKind::Missing, id: MISSING.into(), what: "no golden yet (new cases or runs)".into() }
    }

    fn digests(what: &str) -> Cause {
        Cause { kind: CauseKind::Digests, id: DIGESTS.into(), what: format!("the digest definition: {what}") }
    }

    /// Event hashes differ while every event compares equal: how events are hashed
    /// changed.
    pub fn chain_only() -> Cause {
        Cause::digests("event hashes moved while every event compares equal")
    }
}

/// The cause of `diff`, the diff of `golden` (its events) and a run of `sources`.
pub fn classify(diff: &Diff, golden: &[Event], sources: &Sources) -> Cause {
    let mut inputs: Vec<&str> = Vec::new();
    let (mut hashes_moved, mut tokens_moved) = (false, false);
    for d in &diff.differences {
        let derived = match d.class {
            Class::PayloadChanged => d.changes.iter().all(|c| match derived(d.kind, &c.path) {
                Some(Derived::Input(field)) => {
                    if !inputs.contains(&field) {
                        inputs.push(field);
                    }
                    true
                }
                Some(Derived::Hash) => {
                    hashes_moved = true;
                    true
                }
                Some(Derived::Tokens) => {
                    tokens_moved = true;
                    true
                }
                None => false,
            }),
            // a request hash moved under `on_divergence = "warn"`: one event more or less
            Class::EventAdded | Class::EventMissing => d.kind == "replay_diverged",
            _ => false,
        };
        if !derived {
            return Cause::behaviour();
        }
    }
    // token counts follow a changed text; with no input changed they are behaviour
    if inputs.is_empty() {
        return if hashes_moved && !tokens_moved {
            Cause::digests("request hashes moved with no input changed")
        } else {
            Cause::behaviour()
        };
    }
    let recorded = golden.first().map_or(0, |e| INPUTS.iter().filter(|f| !e.data.member(f).is_null()).count());
    if inputs.len() >= 3 && inputs.len() == recorded {
        return Cause::digests("every input digest moved at once");
    }
    inputs_cause(&inputs, sources)
}

/// The input digests of `run_started`, in the order causes name them.
const INPUTS: [&str; 4] = ["tools", "profile", "recording", "dataset_line"];

enum Derived {
    Input(&'static str),
    Hash,
    Tokens,
}

fn derived(kind: &str, path: &str) -> Option<Derived> {
    let field = path.strip_prefix("/data/")?;
    match kind {
        "run_started" => INPUTS.iter().find(|f| **f == field).map(|f| Derived::Input(f)),
        "model_called" if field == "request_hash" => Some(Derived::Hash),
        "replay_diverged" if field.ends_with("request_hash") => Some(Derived::Hash),
        "context_compiled" if field == "total" || field.starts_with("sections/") => Some(Derived::Tokens),
        _ => None,
    }
}

fn inputs_cause(changed: &[&str], s: &Sources) -> Cause {
    let mut ids = Vec::new();
    let mut whats = Vec::new();
    for field in INPUTS.iter().filter(|f| changed.contains(f)) {
        match (*field, s.recording) {
            ("tools", _) => {
                let tools = s.tools.unwrap_or("(none)");
                ids.push(format!("tools:{tools}"));
                whats.push(format!("tool manifest {tools}"));
            }
            ("profile", _) => {
                ids.push(format!("profile:{}", s.profile));
                whats.push(format!("profile {} in {} (system prompt, policy, settings)", s.profile, s.pipeline));
            }
            ("recording", Some(file)) => {
                ids.push(format!("recording:{file}"));
                whats.push(format!("recording {file}"));
            }
            // an inline recording is part of the case's line: the case cause names it
            ("recording", None) if changed.contains(&"dataset_line") => {}
            ("recording", None) => {
                ids.push(format!("case:{}", s.dataset));
                whats.push(format!("an inline recording in {}", s.dataset));
            }
            _ => {
                ids.push(format!("case:{}", s.dataset));
                whats.push(format!("case lines in {}", s.dataset));
            }
        }
    }
    ids.dedup();
    whats.dedup();
    Cause { kind: CauseKind::Inputs, id: ids.join("+"), what: format!("{} changed", whats.join(" and ")) }
}

/// The cause recorded in a failed `golden` check's `actual` value, if any.
pub fn of_check(actual: Option<&Value>) -> Option<Cause> {
    serde_json::from_value(actual?.get("cause")?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::writer::LogWriter;
    use crate::event::{Event, Kind};
    use serde_json::json;

    const SOURCES: Sources = Sources {
        profile: "treasury",
        pipeline: "pipeline/ci.toml",
        tools: Some("fixtures/tools/treasury.json"),
        recording: Some("fixtures/recordings/pay.jsonl"),
        dataset: "datasets/examples/treasury.jsonl",
    };

    fn started(digests: [&str; 4]) -> Value {
        json!({"case": "c", "tools": digests[0], "profile": digests[1], "recording": digests[2], "dataset_line": digests[3]})
    }

    /// A small run: started, a model call with `hash`, its context of `tokens`, a tool
    /// call of `tool`, completed.
    fn run(digests: [&str; 4], hash: &str, tokens: u64, tool: &str) -> Vec<Event> {
        let mut w = LogWriter::new(Vec::new());
        let mut out = vec![w.append(None, 0, Kind::RunStarted, started(digests)).unwrap()];
        out.push(w.append(Some(0), 0, Kind::TurnStarted, json!({"turn": 0, "input": "pay"})).unwrap());
        out.push(
            w.append(Some(0), 0, Kind::ContextCompiled, json!({"total": tokens, "sections": {"tools": tokens}}))
                .unwrap(),
        );
        out.push(w.append(Some(0), 10, Kind::ModelCalled, json!({"request_hash": hash})).unwrap());
        out.push(w.append(Some(0), 10, Kind::ToolExecuted, json!({"tool": tool, "call_id": "c1"})).unwrap());
        out.push(w.append(None, 10, Kind::RunCompleted, json!({"status": "completed"})).unwrap());
        out
    }

    const BASE: [&str; 4] = ["t1", "p1", "r1", "d1"];

    fn cause(golden: &[Event], actual: &[Event]) -> Cause {
        classify(&crate::golden::diff(golden, actual), golden, &SOURCES)
    }

    #[test]
    fn a_tool_manifest_edit_that_moves_only_digests_hashes_and_token_counts_names_the_manifest() {
        let golden = run(BASE, "h1", 300, "transfer");
        let actual = run(["t2", "p1", "r1", "d1"], "h2", 301, "transfer");
        let c = cause(&golden, &actual);
        assert_eq!((c.kind, c.id.as_str()), (CauseKind::Inputs, "tools:fixtures/tools/treasury.json"));
    }

    #[test]
    fn a_changed_tool_call_is_behaviour_even_when_the_manifest_changed_too() {
        let golden = run(BASE, "h1", 300, "transfer");
        let actual = run(["t2", "p1", "r1", "d1"], "h2", 300, "close_account");
        assert_eq!(cause(&golden, &actual), Cause::behaviour());
    }

    #[test]
    fn a_profile_and_a_recording_changed_together_name_both_in_a_fixed_order() {
        let golden = run(BASE, "h1", 300, "transfer");
        let c = cause(&golden, &run(["t1", "p2", "r2", "d1"], "h2", 300, "transfer"));
        assert_eq!(c.id, "profile:treasury+recording:fixtures/recordings/pay.jsonl");
        assert!(c.what.contains("pipeline/ci.toml"), "{}", c.what);
    }

    #[test]
    fn request_hashes_moving_with_no_input_changed_is_the_digest_definition() {
        let golden = run(BASE, "h1", 300, "transfer");
        assert_eq!(cause(&golden, &run(BASE, "h2", 300, "transfer")).id, DIGESTS);
        // and every input digest moving at once is too
        assert_eq!(cause(&golden, &run(["t2", "p2", "r2", "d2"], "h2", 300, "transfer")).id, DIGESTS);
    }

    #[test]
    fn token_counts_moving_with_no_input_changed_are_behaviour() {
        let golden = run(BASE, "h1", 300, "transfer");
        assert_eq!(cause(&golden, &run(BASE, "h1", 280, "transfer")).kind, CauseKind::Behaviour);
    }

    #[test]
    fn an_edited_case_line_with_an_inline_recording_is_one_case_cause() {
        let golden = run(BASE, "h1", 300, "transfer");
        let inline = Sources { recording: None, ..SOURCES };
        let actual = run(["t1", "p1", "r2", "d2"], "h2", 300, "transfer");
        let c = classify(&crate::golden::diff(&golden, &actual), &golden, &inline);
        assert_eq!(c.id, "case:datasets/examples/treasury.jsonl");
    }
}
