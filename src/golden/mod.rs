//! Golden traces (docs/design.md §8): a run's log, kept as the expected behaviour of a case.
//!
//! `goldens/<dataset>/<case>.<k>.jsonl` is run k's log in golden form ([`normalize`]).
//! `stateval run` compares every run with its golden and adds one check, named
//! `golden`, to the run: identical passes; a difference fails the case with the first
//! divergent event in its reason ([`diff`], [`render`]). A missing golden fails the
//! case when goldens are required — `[goldens] required = true`, or under CI when the
//! pipeline does not say (as a snapshot test's missing snapshot fails in CI) — and
//! otherwise passes as "no golden", every one listed in [`Goldens::missing`] for the
//! summary; `[goldens] required = false` is a suite that keeps none. With `--bless`
//! the run's log is written as its golden instead ([`bless`]).
//!
//! A golden is read like any log: it must verify. One edited by hand fails the case
//! with the verifier's finding, because a golden that no longer verifies cannot say
//! what was expected.

mod align;
pub mod bless;
pub mod diff;
pub mod normalize;
pub mod render;
pub mod stream;

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::event::Event;
use crate::event::verify::verify_bytes;
use crate::event::writer::WriteError;
use crate::outcome::Check;
use crate::pipeline::Pipeline;
pub use bless::Written;
pub use diff::{Class, Diff, Difference, diff};

/// The name of the check a golden comparison adds to every run.
pub const CHECK: &str = crate::outcome::GOLDEN_CHECK;

/// Compare runs with their goldens, or write them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Compare,
    /// `stateval run --bless`: every run's log becomes its golden.
    Bless,
}

#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("writing golden {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("normalising the log for its golden: {0}")]
    Normalize(#[from] WriteError),
}

/// Whether a run without a golden fails its case, and who said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Required {
    /// It passes as "no golden": `[goldens] required = false`, or unset outside CI.
    No,
    /// `[goldens] required = true`.
    ByPipeline,
    /// Under CI (`CI` set), the pipeline not saying.
    ByCi,
}

/// A pipeline's goldens.
#[derive(Debug)]
pub struct Goldens {
    /// The goldens directory, resolved.
    pub dir: PathBuf,
    /// The directory as reports show it (relative to the pipeline's base).
    pub shown: String,
    pub required: Required,
    /// `[goldens] required` as the pipeline gave it.
    configured: Option<bool>,
    pub mode: Mode,
    /// Goldens written in bless mode: created, updated, unchanged (workers share it).
    blessed: [AtomicUsize; 3],
    /// Goldens compared with and not found, as reports show them (workers share it).
    missing: Mutex<Vec<String>>,
}

impl Goldens {
    pub fn from_pipeline(pipeline: &Pipeline) -> Goldens {
        let dir = pipeline.goldens_dir();
        let shown = pipeline.display(&dir);
        let configured = pipeline.goldens.required;
        Goldens {
            dir,
            shown,
            required: if configured == Some(true) { Required::ByPipeline } else { Required::No },
            configured,
            mode: Mode::Compare,
            blessed: Default::default(),
            missing: Mutex::default(),
        }
    }

    /// The run is under CI: a missing golden fails its case unless the pipeline says
    /// `[goldens] required = false`. (The caller reads the environment; this module
    /// does not.)
    pub fn under_ci(&mut self) {
        if self.configured.is_none() {
            self.required = Required::ByCi;
        }
    }

    /// Did the pipeline say the suite keeps no goldens (`[goldens] required = false`)?
    pub fn none_kept(&self) -> bool {
        self.configured == Some(false)
    }

    /// Every golden a comparison looked for and did not find so far, sorted.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = self.missing.lock().map(|m| m.clone()).unwrap_or_default();
        missing.sort();
        missing
    }

    /// How many goldens bless mode created, updated and left unchanged so far.
    pub fn blessed(&self) -> [(Written, usize); 3] {
        let n = |w: Written| self.blessed[w as usize].load(Ordering::Relaxed);
        [Written::Created, Written::Updated, Written::Unchanged].map(|w| (w, n(w)))
    }

    /// Path of run `k`'s golden, and how reports show it.
    pub fn path(&self, dataset: &str, case: &str, k: usize) -> (PathBuf, String) {
        let rel = format!("{dataset}/{case}.{k}.jsonl");
        (self.dir.join(&rel), format!("{}/{rel}", self.shown.trim_end_matches('/')))
    }

    /// The `golden` check of run `k` of a case: compare its events with the golden, or
    /// (in bless mode) write them as the golden. `log` is how reports show the run's
    /// log. An error is only ever a failure to write a golden.
    pub fn check(
        &self,
        dataset: &str,
        case: &str,
        k: usize,
        events: &[Event],
        log: &str,
    ) -> Result<Check, GoldenError> {
        let (path, shown) = self.path(dataset, case, k);
        let check = |passed: bool, reason: String| Check {
            name: CHECK.to_string(),
            passed,
            reason,
            expected: Some(json!(shown)),
            actual: None,
        };
        if self.mode == Mode::Bless {
            let actual = normalize::normalize(events)?;
            let written = bless::write_atomic(&path, &actual.bytes)
                .map_err(|source| GoldenError::Write { path: shown.clone(), source })?;
            self.blessed[written as usize].fetch_add(1, Ordering::Relaxed);
            return Ok(check(true, format!("blessed ({})", written.as_str())));
        }
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Ok(mut missing) = self.missing.lock() {
                    missing.push(shown.clone());
                }
                let reason = match self.required {
                    Required::No => return Ok(check(true, "no golden".to_string())),
                    Required::ByPipeline => format!(
                        "no golden: {shown} does not exist and [goldens] required = true (`stateval run --bless` writes it)"
                    ),
                    Required::ByCi => format!(
                        "no golden: {shown} does not exist, and under CI (CI is set) every run needs one \
                         (`stateval run --bless` writes it; a suite that keeps none says [goldens] required = false)"
                    ),
                };
                return Ok(check(false, reason));
            }
            Err(e) => return Ok(check(false, format!("cannot read golden {shown}: {e}"))),
        };
        let actual = normalize::normalize(events)?;
        if bytes == actual.bytes {
            return Ok(check(true, format!("identical to the golden ({} events)", actual.events.len())));
        }
        let golden = match verify_bytes(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return Ok(check(
                    false,
                    format!(
                        "golden {shown} does not verify ({e}): was it edited by hand? `stateval run --bless` rewrites it from this run"
                    ),
                ));
            }
        };
        let d = diff::diff(&golden.events, &actual.events);
        let Some(first) = d.first_divergence() else {
            // Heads first: the bytes differ (so the heads do), yet the structural diff,
            // which looks past chain links and absolute times, finds nothing. The log is
            // still not the golden's, and a verdict must not hide that.
            let head = |e: Option<&crate::event::Event>| e.map_or("none".to_string(), |e| e.hash.to_string());
            return Ok(check(
                false,
                format!(
                    "head {} differs from the golden's {} ({shown}), though every event compares equal \
                     structurally: the bytes differ in chain links or absolute times; \
                     `stateval diff {shown} {log}` and `--bless` if intended",
                    head(actual.events.last()),
                    head(golden.events.last()),
                ),
            ));
        };
        let reason = format!(
            "differs from {shown} at {}; {} (`stateval diff {shown} {log}` shows them)",
            render::one_line(first),
            render::counts_line(&d),
        );
        let mut failed = check(false, reason);
        failed.actual = Some(json!({"first_divergence": first, "counts": d.counts()}));
        Ok(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goldens(required: &str) -> Goldens {
        let text = format!("[pipeline]\nname = \"p\"\ndatasets = [\"d\"]\n{required}");
        let mut pipeline = Pipeline::parse(std::path::Path::new("p.toml"), &text).unwrap();
        // a base where no golden can exist
        pipeline.base = PathBuf::from("/nonexistent/stateval-golden-test");
        Goldens::from_pipeline(&pipeline)
    }

    fn missing_check(goldens: &Goldens) -> Check {
        goldens.check("examples/treasury", "pay", 0, &[], "log.jsonl").unwrap()
    }

    #[test]
    fn a_missing_golden_fails_under_ci_unless_the_pipeline_keeps_none_and_is_listed_either_way() {
        // unset: passes outside CI, fails under it
        let mut unset = goldens("");
        assert!(missing_check(&unset).passed);
        unset.under_ci();
        let failed = missing_check(&unset);
        assert!(!failed.passed && failed.reason.contains("under CI (CI is set)"), "{}", failed.reason);
        assert_eq!(unset.missing(), ["goldens/examples/treasury/pay.0.jsonl"; 2]);
        // false: a suite that keeps none passes under CI too
        let mut none = goldens("[goldens]\nrequired = false\n");
        none.under_ci();
        assert!(missing_check(&none).passed && none.none_kept());
        // true: fails everywhere, saying why
        let required = goldens("[goldens]\nrequired = true\n");
        assert!(missing_check(&required).reason.contains("[goldens] required = true"));
    }
}
