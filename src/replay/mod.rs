//! The replay provider: recorded model responses served by position.
//!
//! Replay never reaches anything live. The n-th model call of a run gets the n-th
//! recorded response. When a response carries the `request_hash` of the request it was
//! recorded for (or a turn/step), and the request the agent actually compiled differs,
//! the provider reports a divergence; what a divergence does (fail or warn) is the
//! pipeline's decision, not the provider's. A call past the end is a replay miss.
//!
//! Judge calls are model calls too, served by key rather than by position from their
//! own recordings ([`judge`]).

pub mod differences;
pub mod digest;
pub mod judge;
use std::borrow::Cow;

use crate::canon::Digest;
use crate::dataset::recording::RecordedLines;
/// Recordings are data the dataset names; their model lives in `dataset::recording`.
use crate::dataset::recording::{ModelResponse, RecordedResponse, Recording, Usage};

/// Normalises a copy of a recorded request document under the agent's rules of today
/// and gives its digest ([`ModelProvider::complete_renormalized`]).
pub type Renormalize<'f> = &'f dyn Fn(&serde_json::Value) -> Option<Digest>;

/// What the agent asks for: where in the run it is and the digest of what it compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    pub turn: u32,
    pub step: u32,
    pub hash: Digest,
    /// The document `hash` is the digest of (the built-in runtime's
    /// `{"memory","messages","system","tools"}`), given only to a provider that asks
    /// for it ([`ModelProvider::wants_compiled`]): replay needs the digest alone, and
    /// building the document costs a pass over the conversation.
    pub compiled: Option<serde_json::Value>,
}

/// The recorded request does not match the actual one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    pub position: usize,
    pub recorded_hash: Option<Digest>,
    pub actual_hash: Digest,
    pub reason: String,
}

/// A request after the recording ran out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "replay miss: model call at position {position} (turn {turn}, step {step}) but the recording ends after {recorded} response(s)"
)]
pub struct ReplayMiss {
    pub position: usize,
    pub turn: u32,
    pub step: u32,
    pub recorded: usize,
}

/// A served response.
#[derive(Debug)]
pub struct Replayed<'a> {
    pub position: usize,
    /// Borrowed from a recording held whole, or moved out of a file read line by line
    /// (the caller then takes it without a copy).
    pub recorded: Cow<'a, RecordedResponse>,
    pub divergence: Option<Divergence>,
    /// The recorded request matched only once normalised again under today's rules
    /// ([`ModelProvider::complete_renormalized`]): the recording predates a rule.
    pub renormalized: bool,
}

/// Why a provider gave no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Replay: the recording ran out.
    #[error(transparent)]
    Miss(#[from] ReplayMiss),
    /// Record: the live model did not answer whole (the message is scrubbed).
    #[error("{0}")]
    Live(String),
    /// Replay: a line of a recording file, validated for this run and read again
    /// unchanged, did not parse when its turn came (never expected; the run fails).
    #[error("{0}")]
    Unreadable(String),
}

/// How the runtime asks for model output: the replay provider, or — while `stateval
/// record` records a built-in case — the live model (`external::live`).
pub trait ModelProvider {
    fn complete(&mut self, request: &ModelRequest) -> Result<Replayed<'_>, ProviderError>;

    /// [`ModelProvider::complete`], where a recorded request that is not the one asked may
    /// still match once normalised again under the agent's rules today: `renormalize`
    /// normalises a copy of a recorded request document and gives its digest
    /// ([`digest::renormalized`]). Providers that serve no recorded documents ignore it.
    fn complete_renormalized(
        &mut self,
        request: &ModelRequest,
        renormalize: Renormalize<'_>,
    ) -> Result<Replayed<'_>, ProviderError> {
        let _ = renormalize;
        self.complete(request)
    }

    /// Whether `complete` needs [`ModelRequest::compiled`].
    fn wants_compiled(&self) -> bool {
        false
    }

    /// Whether `complete` waits on something outside the process (a live model): then
    /// every turn's lines are written as it ends, not held for a later boundary.
    fn waits(&self) -> bool {
        false
    }
}

pub struct ReplayProvider<'r> {
    responses: Responses<'r>,
    position: usize,
}

/// The responses a provider serves: a recording's, borrowed (it may be replayed again),
/// or a recording file's lines, each parsed when it is asked for.
enum Responses<'r> {
    Borrowed(&'r [RecordedResponse]),
    Lines(Box<Reading>),
}

/// A recording file's lines being served: those not yet read.
struct Reading {
    lines: RecordedLines,
}

impl<'r> ReplayProvider<'r> {
    pub fn new(recording: &'r Recording) -> Self {
        ReplayProvider { responses: Responses::Borrowed(&recording.responses), position: 0 }
    }

    /// A provider over a recording file's lines ([`Recording::reread`]): a long run
    /// holds the file's text and the response being served, never the whole recording
    /// parsed.
    ///
    /// [`Recording::reread`]: crate::dataset::recording::Recording::reread
    pub fn lines(lines: RecordedLines) -> ReplayProvider<'static> {
        ReplayProvider { responses: Responses::Lines(Box::new(Reading { lines })), position: 0 }
    }

    pub fn position(&self) -> usize {
        self.position
    }

    /// How many responses the recording holds.
    pub fn recorded(&self) -> usize {
        match &self.responses {
            Responses::Borrowed(r) => r.len(),
            // every response served so far, and those still to be read
            Responses::Lines(reading) => self.position + reading.lines.len(),
        }
    }
}

impl ModelProvider for ReplayProvider<'_> {
    fn complete(&mut self, request: &ModelRequest) -> Result<Replayed<'_>, ProviderError> {
        self.serve(request, None)
    }

    fn complete_renormalized(
        &mut self,
        request: &ModelRequest,
        renormalize: Renormalize<'_>,
    ) -> Result<Replayed<'_>, ProviderError> {
        self.serve(request, Some(renormalize))
    }
}

impl ReplayProvider<'_> {
    fn serve(
        &mut self,
        request: &ModelRequest,
        renormalize: Option<Renormalize<'_>>,
    ) -> Result<Replayed<'_>, ProviderError> {
        let position = self.position;
        let recorded_count = self.recorded();
        let recorded: Option<Cow<'_, RecordedResponse>> = match &mut self.responses {
            Responses::Borrowed(r) => r.get(position).map(Cow::Borrowed),
            Responses::Lines(reading) => {
                reading.lines.next().transpose().map_err(ProviderError::Unreadable)?.map(Cow::Owned)
            }
        };
        let recorded = recorded.ok_or(ReplayMiss {
            position,
            turn: request.turn,
            step: request.step,
            recorded: recorded_count,
        })?;
        self.position += 1;
        let mut reasons = Vec::new();
        let mut renormalized = false;
        // a response recorded under the earlier digest definition, for this very request,
        // is not a divergence; nor is one recorded before a normalize rule the agent has now
        if let Some(hash) = recorded.request_hash
            && hash != request.hash
            && !recorded.request.as_ref().is_some_and(|r| digest::equivalent(r, &hash, &request.hash))
        {
            renormalized = recorded
                .request
                .as_ref()
                .zip(renormalize)
                .is_some_and(|(r, f)| digest::renormalized(r, &hash, &request.hash, f));
            if !renormalized {
                reasons.push(format!("request hash {} differs from the recorded {hash}", request.hash));
            }
        }
        if recorded.turn.is_some_and(|t| t != request.turn) || recorded.step.is_some_and(|s| s != request.step) {
            reasons.push(format!(
                "recorded for turn {} step {}, requested at turn {} step {}",
                opt(recorded.turn),
                opt(recorded.step),
                request.turn,
                request.step
            ));
        }
        let divergence = (!reasons.is_empty()).then(|| Divergence {
            position,
            recorded_hash: recorded.request_hash,
            actual_hash: request.hash,
            reason: reasons.join("; "),
        });
        Ok(Replayed { position, recorded, divergence, renormalized })
    }
}

fn opt(v: Option<u32>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{Context, digest};

    fn rec(hashes: &[Option<Digest>]) -> Recording {
        let responses = hashes
            .iter()
            .map(|h| RecordedResponse {
                turn: None,
                step: None,
                request_hash: *h,
                request: None,
                response: ModelResponse::default(),
                usage: Usage::default(),
                latency_ms: 0,
            })
            .collect();
        Recording { responses, digest: digest(Context::Content, b""), source: "test".into() }
    }

    #[test]
    fn responses_are_served_by_position_and_a_miss_names_it() {
        let r = rec(&[None, None]);
        let mut p = ReplayProvider::new(&r);
        let req = ModelRequest { turn: 0, step: 0, hash: digest(Context::Request, b"x"), compiled: None };
        assert_eq!(p.complete(&req).unwrap().position, 0);
        assert_eq!(p.complete(&req).unwrap().position, 1);
        let ProviderError::Miss(miss) = p.complete(&req).unwrap_err() else { panic!("not a miss") };
        assert_eq!(miss.position, 2);
        assert!(miss.to_string().contains("position 2"));
    }

    /// A line that does not parse when its turn comes (the file's bytes were vouched
    /// for, here by passing their own digest) fails the call, naming the file and line;
    /// it is never skipped for the next response.
    #[test]
    fn a_line_that_does_not_parse_when_served_is_refused_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let text =
            "{\"response\":{\"content\":\"a\"}}\n\n{\"response\":{\"content\":\n{\"response\":{\"content\":\"c\"}}\n";
        std::fs::write(&path, text).unwrap();
        let bytes = Recording::bytes_digest(text.as_bytes());
        let (_, lines) = Recording::reread(&path, "r.jsonl", digest(Context::Content, b""), bytes).unwrap();
        let mut read = ReplayProvider::lines(lines);
        let req = ModelRequest { turn: 0, step: 0, hash: digest(Context::Request, b"x"), compiled: None };
        assert_eq!(read.complete(&req).unwrap().recorded.response.content, "a");
        let Err(ProviderError::Unreadable(message)) = read.complete(&req).map(|_| ()) else {
            panic!("the broken line was served or skipped")
        };
        assert!(message.starts_with("r.jsonl:3: changed since validation:"), "{message}");
        assert_eq!(read.position(), 1, "nothing was served for it");
    }

    #[test]
    fn a_provider_over_a_files_lines_serves_what_a_borrowing_one_serves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let lines: String = (0..4)
            .map(|i| format!("{{\"turn\":{i},\"step\":0,\"response\":{{\"content\":\"answer {i}\"}}}}\n\n"))
            .collect();
        std::fs::write(&path, lines).unwrap();
        let (whole, bytes) = Recording::load_file(&path, "r.jsonl").unwrap();
        let (_, lines) = Recording::reread(&path, "r.jsonl", whole.digest, bytes).unwrap();
        let mut borrowed = ReplayProvider::new(&whole);
        let mut read = ReplayProvider::lines(lines);
        assert_eq!(read.recorded(), 4);
        for turn in 0..4u32 {
            // the second asks at the wrong turn: both see the same divergence
            let asked = if turn == 1 { 7 } else { turn };
            let req = ModelRequest { turn: asked, step: 0, hash: digest(Context::Request, b"x"), compiled: None };
            let (a, b) = (borrowed.complete(&req).unwrap(), read.complete(&req).unwrap());
            assert_eq!((a.position, a.recorded), (b.position, b.recorded));
            assert_eq!(a.divergence.map(|d| d.reason), b.divergence.map(|d| d.reason));
            assert_eq!((read.position(), read.recorded()), (turn as usize + 1, 4));
        }
        let req = ModelRequest { turn: 4, step: 0, hash: digest(Context::Request, b"x"), compiled: None };
        let (ProviderError::Miss(a), ProviderError::Miss(b)) =
            (borrowed.complete(&req).unwrap_err(), read.complete(&req).unwrap_err())
        else {
            panic!("misses")
        };
        assert_eq!((a.position, a.recorded), (b.position, b.recorded));
    }

    #[test]
    fn a_different_request_hash_is_a_divergence() {
        let recorded = digest(Context::Request, b"recorded");
        let r = rec(&[Some(recorded), Some(recorded)]);
        let mut p = ReplayProvider::new(&r);
        let same = ModelRequest { turn: 0, step: 0, hash: recorded, compiled: None };
        assert!(p.complete(&same).unwrap().divergence.is_none());
        let other = ModelRequest { turn: 0, step: 1, hash: digest(Context::Request, b"other"), compiled: None };
        let d = p.complete(&other).unwrap().divergence.unwrap();
        assert_eq!((d.position, d.recorded_hash), (1, Some(recorded)));
    }

    #[test]
    fn a_response_recorded_under_the_earlier_digest_for_the_same_request_is_no_divergence() {
        let asked = serde_json::json!({"memory": {}, "messages": [], "system": "s", "tools": []});
        let edited = serde_json::json!({"memory": {}, "messages": [], "system": "t", "tools": []});
        let old = self::digest::legacy(&asked).unwrap();
        let mut r = rec(&[Some(old), Some(old), Some(old)]);
        r.responses[0].request = Some(asked.clone());
        // the document beside the hash was edited: its hash no longer vouches for it
        r.responses[1].request = Some(edited.clone());
        // no document beside the hash: nothing to recognise it by
        let request = ModelRequest { turn: 0, step: 0, hash: self::digest::of(&asked).unwrap(), compiled: None };
        let mut p = ReplayProvider::new(&r);
        assert!(p.complete(&request).unwrap().divergence.is_none());
        assert!(p.complete(&request).unwrap().divergence.is_some());
        assert!(p.complete(&request).unwrap().divergence.is_some());
    }
}
