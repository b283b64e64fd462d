//! Judge recordings: recorded answers of LLM judges, found by key, never asked live.
//!
//! A judge profile (`[judges.NAME]` in the pipeline) names one JSONL file. Each line is
//! one answer to one sample of one rendered judge request (`grade::judge`):
//!
//! ```json
//! {"request_hash":"blake3:…","sample":0,"request":{"format":"stateval-judge-v1",…},
//!  "response":{"content":"{\"score\":5,\"reason\":\"warm and clear\"}"},
//!  "usage":{"input_tokens":310,"output_tokens":18},"latency_ms":700}
//! ```
//!
//! Order does not matter: a line is found by its key, `request_hash` + `sample`. The
//! file is validated whole when the pipeline loads (every error names file:line:col):
//! the `request_hash` must be the digest of the `request` beside it (a hand edit of one
//! without the other is caught), keys are unique, and each answer must satisfy the
//! output schema of its own request. Only an index is kept (key → where the line is
//! and its digest); a line is read again when it is served and must still be the line
//! that was validated, so memory does not grow with the recording.
//!
//! A key that is not recorded is a miss: the case fails naming the key and the JSON
//! Pointers where the nearest recorded request differs (fewest differing pointers,
//! first line on a tie), which is almost always the one thing that changed.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ModelResponse, Usage};
use crate::canon::{self, Context, Digest};
use crate::diag::{InputError, line_col, locate, parse_json_strict};
use crate::grade::calls::{JudgeMiss, RecordedAnswer};
use crate::grade::judge::{self, JudgeKey};
use crate::schemas::JUDGE_RECORDING_SCHEMA;

/// How many differing pointers a miss names.
const POINTERS_SHOWN: usize = 10;

/// One line of a judge recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeLine {
    pub request_hash: Digest,
    pub sample: u32,
    pub request: Value,
    pub response: ModelResponse,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub latency_ms: u64,
}

impl JudgeLine {
    /// The line's key.
    pub fn key(&self) -> JudgeKey {
        JudgeKey { request_hash: self.request_hash, sample: self.sample }
    }
}

/// Where a validated line is.
#[derive(Debug, Clone)]
struct Entry {
    line: usize,
    offset: u64,
    len: usize,
    /// Digest of the line's bytes as validated.
    bytes: Digest,
}

/// A validated judge recording: an index from key to line.
#[derive(Debug)]
pub struct JudgeBook {
    path: PathBuf,
    display: String,
    index: BTreeMap<JudgeKey, Entry>,
    /// Digest of the file's bytes as validated (part of the run id).
    pub digest: Digest,
    /// `stateval record --judge`: a live judge answers what the book does not hold.
    filling: Option<Filling>,
}

/// Asks a live judge one sample of a rendered request (`stateval record --judge`).
pub type Ask = Box<dyn Fn(&Value, u32) -> Result<Asked, String> + Send + Sync>;

/// What a live judge answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub content: String,
    pub usage: Usage,
    pub latency_ms: u64,
}

/// A book being filled: the live judge, and what it answered in this process.
struct Filling {
    ask: Ask,
    /// Ask again for keys the book holds (`--force`).
    refresh: bool,
    /// Lines answered live, in the order asked.
    fresh: std::sync::Mutex<Vec<JudgeLine>>,
}

impl std::fmt::Debug for Filling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filling").field("refresh", &self.refresh).finish_non_exhaustive()
    }
}

impl JudgeBook {
    /// Read and validate a judge recording, keeping only its index.
    pub fn load(path: &Path, display: &str) -> Result<JudgeBook, InputError> {
        let shown = Path::new(display);
        let text = crate::diag::read_text(path, shown, "judge recording")?;
        let mut index = BTreeMap::new();
        let mut validators: BTreeMap<Vec<u8>, jsonschema::Validator> = BTreeMap::new();
        let mut offset = 0u64;
        for (i, raw) in text.split_inclusive('\n').enumerate() {
            let start = offset;
            offset += raw.len() as u64;
            let line = raw.strip_suffix('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).unwrap_or(raw);
            if line.trim().is_empty() {
                continue;
            }
            let at = |pointer: &str, message: String| {
                InputError::new(shown, i + 1, line_col(line, locate(line, pointer)).1, message)
            };
            let parsed = check_line(line).map_err(|(col, m)| InputError::new(shown, i + 1, col, m))?;
            let output = &parsed.request["output_schema"];
            let key = canon::to_canonical(output).map_err(|e| at("/request/output_schema", e.to_string()))?;
            if !validators.contains_key(&key) {
                let v = jsonschema::validator_for(output)
                    .map_err(|e| at("/request/output_schema", format!("malformed JSON Schema: {e}")))?;
                validators.insert(key.clone(), v);
            }
            judge::read_answer(&validators[&key], &parsed.response.content).map_err(|m| at("/response/content", m))?;
            let entry = Entry {
                line: i + 1,
                offset: start,
                len: line.len(),
                bytes: canon::digest(Context::Content, line.as_bytes()),
            };
            if let Some(first) = index.insert(parsed.key(), entry) {
                return Err(at("/sample", format!("duplicate key {} (first at line {})", parsed.key(), first.line)));
            }
        }
        Ok(JudgeBook {
            path: path.to_path_buf(),
            display: display.to_string(),
            index,
            digest: canon::digest(Context::Content, text.as_bytes()),
            filling: None,
        })
    }

    /// This book, with `ask` answering every key it does not hold (every key asked, with
    /// `refresh`) instead of a miss. Answers are kept in memory ([`JudgeBook::fresh`])
    /// until [`JudgeBook::merged`] writes them; the file is not touched here.
    pub fn filled_by(mut self, ask: Ask, refresh: bool) -> JudgeBook {
        self.filling = Some(Filling { ask, refresh, fresh: std::sync::Mutex::new(Vec::new()) });
        self
    }

    /// The lines a live judge answered so far, in the order asked.
    pub fn fresh(&self) -> Vec<JudgeLine> {
        self.filling.as_ref().and_then(|f| f.fresh.lock().ok().map(|l| l.clone())).unwrap_or_default()
    }

    /// The file as it would be with the fresh lines in it: every recorded line kept as it
    /// is (byte for byte) unless a fresh line has its key, then the fresh lines, each in
    /// canonical form. `(text, kept, replaced)`.
    pub fn merged(&self) -> Result<(String, usize, usize), String> {
        let fresh = self.fresh();
        let text = std::fs::read_to_string(&self.path).map_err(|e| format!("{}: {e}", self.display))?;
        let (mut out, mut kept, mut replaced) = (String::new(), 0, 0);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let parsed: JudgeLine = serde_json::from_str(line).map_err(|e| format!("{}: {e}", self.display))?;
            if fresh.iter().any(|f| f.key() == parsed.key()) {
                replaced += 1;
                continue;
            }
            out.push_str(line);
            out.push('\n');
            kept += 1;
        }
        for line in &fresh {
            out.push_str(&canonical_line(line).map_err(|e| e.to_string())?);
            out.push('\n');
        }
        Ok((out, kept, replaced))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Recorded answers.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn display(&self) -> &str {
        &self.display
    }

    /// The recorded answer for `key`. `request` is the rendered request that was asked,
    /// for naming what differs on a miss.
    pub fn answer(&self, key: &JudgeKey, request: &Value) -> Result<RecordedAnswer, JudgeMiss> {
        if let Some(filling) = &self.filling
            && (filling.refresh || !self.index.contains_key(key))
        {
            return self.ask(filling, key, request);
        }
        let Some(entry) = self.index.get(key) else {
            return Err(self.miss(key, request));
        };
        let changed = || JudgeMiss {
            kind: "changed",
            message: format!("{}:{} changed after the run was validated; run again", self.display, entry.line),
            pointers: Vec::new(),
        };
        let mut bytes = vec![0; entry.len];
        std::fs::File::open(&self.path)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(entry.offset))?;
                f.read_exact(&mut bytes)
            })
            .map_err(|_| changed())?;
        if canon::digest(Context::Content, &bytes) != entry.bytes {
            return Err(changed());
        }
        let line: JudgeLine = serde_json::from_slice(&bytes).map_err(|_| changed())?;
        Ok(RecordedAnswer {
            content: line.response.content,
            usage: serde_json::to_value(line.usage).unwrap_or(Value::Null),
            at: format!("{}:{}", self.display, entry.line),
        })
    }

    /// Ask the live judge for `key` (once per process: a key asked again, by another
    /// run with the same judged value, gets the same answer). The answer must be one the
    /// recording can hold — JSON satisfying the request's output schema — or nothing is
    /// kept; a secret in it is scrubbed.
    fn ask(&self, filling: &Filling, key: &JudgeKey, request: &Value) -> Result<RecordedAnswer, JudgeMiss> {
        let failed = |message: String| JudgeMiss { kind: "upstream", message, pointers: Vec::new() };
        let mut fresh = filling.fresh.lock().map_err(|_| failed("judge recording lock poisoned".into()))?;
        let served = |line: &JudgeLine| RecordedAnswer {
            content: line.response.content.clone(),
            usage: serde_json::to_value(line.usage).unwrap_or(Value::Null),
            at: format!("{} (asked live)", self.display),
        };
        if let Some(line) = fresh.iter().find(|l| l.key() == *key) {
            return Ok(served(line));
        }
        let asked = (filling.ask)(request, key.sample)
            .map_err(|e| failed(format!("asking the judge for {key}: {e}; nothing recorded")))?;
        let content = crate::secrets::Scrubber::default().text(&asked.content).unwrap_or(asked.content);
        let output = jsonschema::validator_for(&request["output_schema"])
            .map_err(|e| failed(format!("the request's output schema: {e}")))?;
        judge::read_answer(&output, &content)
            .map_err(|m| failed(format!("the judge's answer for {key} cannot be recorded: {m}")))?;
        let line = JudgeLine {
            request_hash: key.request_hash,
            sample: key.sample,
            request: request.clone(),
            response: ModelResponse { content, ..ModelResponse::default() },
            usage: asked.usage,
            latency_ms: asked.latency_ms,
        };
        let answer = served(&line);
        fresh.push(line);
        Ok(answer)
    }

    /// A miss, explained: the samples of this request that are recorded, or the nearest
    /// recorded request and where it differs.
    fn miss(&self, key: &JudgeKey, request: &Value) -> JudgeMiss {
        let head = format!("no recorded answer for key {key} in {}", self.display);
        let tail = "; replay never asks a judge live: record it with `stateval record --judge`";
        let samples: Vec<String> =
            self.index.keys().filter(|k| k.request_hash == key.request_hash).map(|k| k.sample.to_string()).collect();
        if !samples.is_empty() {
            return JudgeMiss {
                kind: "miss",
                message: format!("{head}: this request is recorded for sample(s) {} only{tail}", samples.join(", ")),
                pointers: Vec::new(),
            };
        }
        match self.nearest(request) {
            Some((line, pointers)) => JudgeMiss {
                kind: "miss",
                message: format!(
                    "{head}; the nearest recorded request ({}:{line}) differs at {}{tail}",
                    self.display,
                    pointers.join(", ")
                ),
                pointers,
            },
            None => {
                JudgeMiss { kind: "miss", message: format!("{head}, which has no answers{tail}"), pointers: Vec::new() }
            }
        }
    }

    /// The recorded request with the fewest differing pointers from `request` (first
    /// line on a tie): its line and the pointers, at most [`POINTERS_SHOWN`].
    fn nearest(&self, request: &Value) -> Option<(usize, Vec<String>)> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let mut best: Option<(usize, usize, Vec<String>)> = None;
        for (i, line) in text.lines().enumerate() {
            let Ok(parsed) = serde_json::from_str::<JudgeLine>(line) else { continue };
            let all = super::differences::differences(&parsed.request, request, usize::MAX);
            if best.as_ref().is_none_or(|(n, _, _)| all.len() < *n) {
                best = Some((all.len(), i + 1, all));
            }
        }
        best.map(|(_, line, mut pointers)| {
            pointers.truncate(POINTERS_SHOWN);
            (line, pointers)
        })
    }
}

/// One judge recording line in canonical form, with only the fields that have values.
pub fn canonical_line(line: &JudgeLine) -> Result<String, canon::CanonError> {
    let value = serde_json::json!({
        "request_hash": line.request_hash.to_string(),
        "sample": line.sample,
        "request": line.request,
        "response": {"content": line.response.content},
        "usage": {"input_tokens": line.usage.input_tokens, "output_tokens": line.usage.output_tokens},
        "latency_ms": line.latency_ms,
    });
    canon::to_canonical_string(&value)
}

/// Parse, schema-check and type one line; errors carry a 1-based column.
fn check_line(line: &str) -> Result<JudgeLine, (usize, String)> {
    let value = parse_json_strict(line).map_err(|(_, col, m)| (col, m))?;
    let col = |pointer: &str| line_col(line, locate(line, pointer)).1;
    if let Some(v) = JUDGE_RECORDING_SCHEMA.check(&value) {
        return Err((col(&v.pointer), v.message));
    }
    canon::check_ijson(&value).map_err(|e| (1, e.to_string()))?;
    let parsed: JudgeLine = serde_json::from_value(value).map_err(|e| (1, e.to_string()))?;
    let computed = judge::request_digest(&parsed.request).map_err(|e| (col("/request"), e.to_string()))?;
    if computed != parsed.request_hash {
        return Err((
            col("/request_hash"),
            format!(
                "request_hash does not match the request beside it (its digest is {computed}): one was edited without the other"
            ),
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::dataset::expect::judge::default_output_schema;
    use crate::grade::judge::render_request;
    use crate::pipeline::judges::JudgeProfile;

    fn request(value: &str) -> judge::JudgeRequest {
        let profile = JudgeProfile {
            recordings: "j.jsonl".into(),
            model: "m".into(),
            temperature: None,
            top_p: None,
            max_tokens: None,
            seed: None,
            upstream: None,
        };
        render_request(&profile, "Rate it.", "final_response", &json!(value), None, &default_output_schema()).unwrap()
    }

    fn line(r: &judge::JudgeRequest, sample: u32, content: &str) -> String {
        json!({"request_hash": r.hash.to_string(), "sample": sample, "request": r.value,
               "response": {"content": content}})
        .to_string()
    }

    fn book(lines: &[String]) -> (tempfile::TempDir, Result<JudgeBook, InputError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let loaded = JudgeBook::load(&path, "j.jsonl");
        (dir, loaded)
    }

    #[test]
    fn answers_are_found_by_request_digest_and_sample() {
        let r = request("Hello");
        let (_dir, b) = book(&[line(&r, 1, "{\"score\": 4}"), line(&r, 0, "{\"score\": 5}")]);
        let b = b.unwrap();
        assert_eq!(b.answer(&r.key(0), &r.value).unwrap().content, "{\"score\": 5}");
        assert_eq!(b.answer(&r.key(1), &r.value).unwrap().at, "j.jsonl:1");
    }

    #[test]
    fn a_miss_names_the_key_and_where_the_nearest_request_differs() {
        let (hello, bye) = (request("Hello"), request("Bye"));
        let (_dir, b) = book(&[line(&bye, 0, "{\"score\": 1}")]);
        let miss = b.unwrap().answer(&hello.key(0), &hello.value).unwrap_err();
        assert_eq!(miss.pointers, vec!["/value"]);
        assert!(
            miss.message.starts_with(&format!("no recorded answer for key {}#0 in j.jsonl; the nearest", hello.hash))
        );
        assert!(miss.message.contains("(j.jsonl:1) differs at /value"), "{}", miss.message);
    }

    #[test]
    fn a_miss_on_a_recorded_request_names_the_samples_it_has() {
        let r = request("Hello");
        let (_dir, b) = book(&[line(&r, 0, "{\"score\": 5}")]);
        let miss = b.unwrap().answer(&r.key(2), &r.value).unwrap_err();
        assert!(miss.message.contains("recorded for sample(s) 0 only"), "{}", miss.message);
    }

    #[test]
    fn a_hand_edited_request_a_duplicate_key_and_a_bad_answer_are_load_errors_at_their_column() {
        let r = request("Hello");
        let edited = line(&r, 0, "{\"score\": 5}").replace("Hello", "Hallo");
        let (_dir, b) = book(std::slice::from_ref(&edited));
        let e = b.unwrap_err();
        assert_eq!((e.line, e.column), (1, edited.find("\"request_hash\"").unwrap() + 1), "{e}");
        assert!(e.message.starts_with("request_hash does not match"), "{e}");

        let (_dir, b) = book(&[line(&r, 0, "{\"score\": 5}"), line(&r, 0, "{\"score\": 4}")]);
        let e = b.unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("duplicate key") && e.message.ends_with("(first at line 1)"), "{e}");

        let (_dir, b) = book(&[line(&r, 0, "five")]);
        let e = b.unwrap_err();
        assert!(e.message.contains("not JSON"), "{e}");
    }

    fn asking(answers: &'static [&'static str]) -> (Ask, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = asked.clone();
        let ask: Ask = Box::new(move |_request, _sample| {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Asked { content: answers[n % answers.len()].into(), usage: Usage::default(), latency_ms: 9 })
        });
        (ask, asked)
    }

    #[test]
    fn a_filled_book_asks_only_for_what_it_lacks_once_and_merges_it_after_what_it_holds() {
        let r = request("Hello");
        let (dir, b) = book(&[line(&r, 0, "{\"score\": 5}")]);
        let (ask, asked) = asking(&["{\"score\": 3, \"reason\": \"key sk-abcdefghijklmnopqrstuv\"}"]);
        let b = b.unwrap().filled_by(ask, false);
        assert_eq!(b.answer(&r.key(0), &r.value).unwrap().content, "{\"score\": 5}");
        let live = b.answer(&r.key(1), &r.value).unwrap();
        assert_eq!(live.content, "{\"score\": 3, \"reason\": \"key [scrubbed]\"}");
        assert_eq!(b.answer(&r.key(1), &r.value).unwrap(), live);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1, "sample 1 is asked once");
        let (text, kept, replaced) = b.merged().unwrap();
        assert_eq!((kept, replaced, text.lines().count()), (1, 0, 2));
        std::fs::write(dir.path().join("j.jsonl"), &text).unwrap();
        let again = JudgeBook::load(&dir.path().join("j.jsonl"), "j.jsonl").unwrap();
        assert_eq!(again.answer(&r.key(1), &r.value).unwrap().content, live.content);
    }

    #[test]
    fn a_refreshing_book_asks_again_and_a_bad_answer_is_kept_nowhere() {
        let r = request("Hello");
        let (_dir, b) = book(&[line(&r, 0, "{\"score\": 5}")]);
        let (ask, _) = asking(&["{\"score\": 2}"]);
        let b = b.unwrap().filled_by(ask, true);
        assert_eq!(b.answer(&r.key(0), &r.value).unwrap().content, "{\"score\": 2}");
        let (_, kept, replaced) = b.merged().unwrap();
        assert_eq!((kept, replaced), (0, 1), "the old line is replaced");

        let (_dir, b) = book(&[]);
        let (ask, _) = asking(&["```json {\"score\": 2}```"]);
        let b = b.unwrap().filled_by(ask, false);
        let miss = b.answer(&r.key(0), &r.value).unwrap_err();
        assert_eq!(miss.kind, "upstream");
        assert!(miss.message.contains("cannot be recorded"), "{}", miss.message);
        assert!(b.fresh().is_empty());
    }

    #[test]
    fn a_line_changed_after_validation_is_not_served() {
        let r = request("Hello");
        let (dir, b) = book(&[line(&r, 0, "{\"score\": 5}")]);
        let b = b.unwrap();
        std::fs::write(dir.path().join("j.jsonl"), line(&r, 0, "{\"score\": 1}") + "\n").unwrap();
        assert_eq!(b.answer(&r.key(0), &r.value).unwrap_err().kind, "changed");
    }
}
