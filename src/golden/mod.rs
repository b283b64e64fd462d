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
//! the run's log is written as its golden instead ([`bless`]) — only when the run
//! completed on its own ([`complete`]): a crashed run's log is never an expectation.
//!
//! A golden is read like any log: it must verify. One edited by hand fails the case
//! with the verifier's finding, because a golden that no longer verifies cannot say
//! what was expected.

mod align;
pub mod bless;
pub mod cause;
pub mod churn;
pub mod complete;
pub mod diff;
pub mod normalize;
pub mod render;
pub mod stream;

use std::collections::{BTreeMap, BTreeSet};
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
/// How the reason of a `golden` check for a golden that does not exist begins.
pub const NO_GOLDEN: &str = "no golden";

/// Compare runs with their goldens, or write them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GoldenMode {
    #[default]
    Compare,
    /// `stateval run --bless`: every run's log becomes its golden.
    Bless,
}

#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// The golden is not the one the plan digested ([`Goldens::plan`]): edited, removed
    /// or created while the run went on.
    #[error(
        "golden {path}: changed while the run went on (it is not the golden the run was planned with); run again to plan with it"
    )]
    Changed { path: String },
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
    pub mode: GoldenMode,
    /// Goldens written in bless mode: created, updated, unchanged (workers share it).
    blessed: [AtomicUsize; 3],
    /// Goldens compared with and not found, as reports show them (workers share it).
    missing: Mutex<Vec<String>>,
    /// Goldens bless mode did not write because their run did not complete on its own,
    /// as reports show them.
    refused: Mutex<Vec<String>>,
    /// Each golden's digest as [`Goldens::plan`] found it (`None`: no golden), by
    /// [`planned_key`], sorted: a comparison uses only those bytes. `None`: not planned
    /// (a golden is taken as it is found).
    planned: Option<Vec<(u128, Option<crate::canon::Digest>)>>,
}

/// What [`Goldens::planned`] knows a golden by: 16 bytes of the digest of its path
/// under the goldens directory, not the path (about 60 bytes) for each of 10,000 runs.
fn planned_key(rel: &str) -> u128 {
    let digest = crate::canon::digest(crate::canon::Context::Content, rel.as_bytes());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest.0[..16]);
    u128::from_le_bytes(key)
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
            mode: GoldenMode::Compare,
            blessed: Default::default(),
            missing: Mutex::default(),
            refused: Mutex::default(),
            planned: None,
        }
    }

    /// Read and digest the golden of every run `(dataset, case, k)` the plan holds: a
    /// verdict depends on its golden as on its recording, so the goldens found enter the
    /// plan's digest (the returned one, over each golden's path and digest; `None` when
    /// there is none, so a suite that keeps none plans as before), and [`Goldens::check`]
    /// compares a run with exactly these bytes. A golden swapped while the run goes on
    /// (by the code under test, which runs with our user id) is an error, never a pass.
    pub fn plan<'a>(
        &mut self,
        runs: impl IntoIterator<Item = (&'a str, &'a str, usize)>,
    ) -> Option<crate::canon::Digest> {
        let rels: Vec<String> =
            runs.into_iter().map(|(dataset, case, k)| format!("{dataset}/{case}.{k}.jsonl")).collect();
        // each directory is listed once, and only the goldens it holds are opened: a
        // suite that keeps none costs a listing per dataset, not a probe per run
        let listed = self.listed(&rels);
        let found: Vec<usize> = (0..rels.len()).filter(|&i| listed(&rels[i])).collect();
        // the files are read on every core: a suite of 10,000 runs has as many goldens
        let read = crate::par::in_parallel(&found, |&i| {
            std::fs::read(self.dir.join(&rels[i]))
                .ok()
                .map(|bytes| crate::canon::digest(crate::canon::Context::Content, &bytes))
        });
        let mut digests = vec![None; rels.len()];
        for (i, digest) in found.into_iter().zip(read) {
            digests[i] = digest;
        }
        let mut all = crate::canon::Digester::new(crate::canon::Context::Content);
        let mut planned = Vec::with_capacity(rels.len());
        let mut any = false;
        for (rel, digest) in rels.iter().zip(digests) {
            if let Some(d) = digest {
                any = true;
                all.update(rel.as_bytes());
                all.update(&d.0);
            }
            planned.push((planned_key(rel), digest));
        }
        planned.sort_unstable_by_key(|(key, _)| *key);
        self.planned = Some(planned);
        any.then(|| all.finish())
    }

    /// Whether a golden may be at each of `rels` (paths under the goldens directory):
    /// false only for a file its directory's listing lacks. Each directory is listed
    /// once; one that cannot be listed for another reason than not existing says "may".
    fn listed(&self, rels: &[String]) -> impl Fn(&str) -> bool + Sync + use<> {
        let mut dirs: BTreeMap<PathBuf, Option<BTreeSet<std::ffi::OsString>>> = BTreeMap::new();
        for rel in rels {
            let path = self.dir.join(rel);
            let Some(dir) = path.parent() else { continue };
            if dirs.contains_key(dir) {
                continue;
            }
            let names = match std::fs::read_dir(dir) {
                Ok(entries) => entries.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>().ok(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(BTreeSet::new()),
                Err(_) => None,
            };
            dirs.insert(dir.to_path_buf(), names);
        }
        let root = self.dir.clone();
        move |rel: &str| {
            let path = root.join(rel);
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return true };
            match dirs.get(dir) {
                Some(Some(names)) => names.contains(name),
                _ => true,
            }
        }
    }

    /// Whether the plan found no golden at `rel`: then [`Goldens::check`] does not look
    /// for one, since the run is judged by the goldens it was planned with.
    fn planned_absent(&self, rel: &str) -> bool {
        let Some(planned) = &self.planned else { return false };
        let key = planned_key(rel);
        planned.binary_search_by_key(&key, |(k, _)| *k).is_ok_and(|at| planned[at].1.is_none())
    }

    /// Whether `found` (the golden at `rel`, or `None`: there is none) is the golden the
    /// plan digested; true when the goldens were not planned.
    fn as_planned(&self, rel: &str, found: Option<&[u8]>) -> bool {
        let Some(planned) = &self.planned else { return true };
        let key = planned_key(rel);
        let Ok(at) = planned.binary_search_by_key(&key, |(k, _)| *k) else { return false };
        planned[at].1 == found.map(|bytes| crate::canon::digest(crate::canon::Context::Content, bytes))
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

    /// Every golden bless mode refused to write so far (its run did not complete on its
    /// own), sorted.
    pub fn refused(&self) -> Vec<String> {
        let mut refused = self.refused.lock().map(|m| m.clone()).unwrap_or_default();
        refused.sort();
        refused
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
    /// log; `sources` name the run's inputs for the cause of a difference
    /// ([`cause`]); `incomplete` says why the run did not complete on its own
    /// ([`complete::why_incomplete`]), if it did not: such a run is never blessed, and
    /// a failed check of one records why, so no summary offers to accept it. An error is
    /// only ever a failure to write a golden.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        dataset: &str,
        case: &str,
        k: usize,
        events: &[Event],
        log: &str,
        sources: &cause::Sources,
        incomplete: Option<&str>,
    ) -> Result<Check, GoldenError> {
        let mut checked = self.compare_or_bless(dataset, case, k, events, log, sources, incomplete)?;
        if let (false, Some(why)) = (checked.passed, incomplete) {
            let mut actual = match checked.actual.take() {
                Some(serde_json::Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            };
            actual.insert(complete::KEY.to_string(), json!(why));
            checked.actual = Some(serde_json::Value::Object(actual));
        }
        Ok(checked)
    }

    #[allow(clippy::too_many_arguments)]
    fn compare_or_bless(
        &self,
        dataset: &str,
        case: &str,
        k: usize,
        events: &[Event],
        log: &str,
        sources: &cause::Sources,
        incomplete: Option<&str>,
    ) -> Result<Check, GoldenError> {
        let (path, shown) = self.path(dataset, case, k);
        let check = |passed: bool, reason: String| Check {
            name: CHECK.to_string(),
            passed,
            reason,
            expected: Some(json!(shown)),
            actual: None,
        };
        if let (GoldenMode::Bless, Some(why)) = (self.mode, incomplete) {
            if let Ok(mut refused) = self.refused.lock() {
                refused.push(shown.clone());
            }
            return Ok(check(
                false,
                format!(
                    "not blessed: the run did not complete on its own ({why}); a golden is taken only from a run \
                     that did: fix it, then bless again"
                ),
            ));
        }
        if self.mode == GoldenMode::Bless {
            let actual = normalize::normalize(events)?;
            let written = bless::write_atomic(&path, &actual.bytes)
                .map_err(|source| GoldenError::Write { path: shown.clone(), source })?;
            self.blessed[written as usize].fetch_add(1, Ordering::Relaxed);
            return Ok(check(true, format!("blessed ({})", written.as_str())));
        }
        let rel = format!("{dataset}/{case}.{k}.jsonl");
        // a golden the plan found none of is not looked for again: the plan's digest, and
        // so the run id, stands for "no golden", and the run is judged so
        let read = match self.planned_absent(&rel) {
            true => Err(std::io::ErrorKind::NotFound.into()),
            false => std::fs::read(&path),
        };
        let bytes = match read {
            Ok(bytes) if !self.as_planned(&rel, Some(&bytes)) => return Err(GoldenError::Changed { path: shown }),
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.as_planned(&rel, None) => {
                return Err(GoldenError::Changed { path: shown });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Ok(mut missing) = self.missing.lock() {
                    missing.push(shown.clone());
                }
                let reason = match self.required {
                    Required::No => return Ok(check(true, NO_GOLDEN.to_string())),
                    Required::ByPipeline => format!(
                        "{NO_GOLDEN}: {shown} does not exist and [goldens] required = true (`stateval run --bless` writes it)"
                    ),
                    Required::ByCi => format!(
                        "{NO_GOLDEN}: {shown} does not exist, and under CI (CI is set) every run needs one \
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
                let mut failed = check(
                    false,
                    format!(
                        "golden {shown} does not verify ({e}): was it edited by hand? `stateval run --bless` rewrites it from this run"
                    ),
                );
                failed.actual = Some(json!({"cause": cause::Cause::unverified()}));
                return Ok(failed);
            }
        };
        let d = diff::diff(&golden.events, &actual.events);
        let Some(first) = d.first_divergence() else {
            // Heads first: the bytes differ (so the heads do), yet the structural diff,
            // which looks past chain links, finds nothing (it times events by elapsed
            // time, signed, so equal elapsed times are equal timestamps). The log is
            // still not the golden's, and a verdict must not hide that.
            let head = |e: Option<&crate::event::Event>| e.map_or("none".to_string(), |e| e.hash.to_string());
            let mut failed = check(
                false,
                format!(
                    "head {} differs from the golden's {} ({shown}), though every event compares equal \
                     structurally: the bytes differ in chain links; \
                     `stateval diff {shown} {log}` and `--bless` if intended",
                    head(actual.events.last()),
                    head(golden.events.last()),
                ),
            );
            failed.actual = Some(json!({"cause": cause::Cause::chain_only()}));
            return Ok(failed);
        };
        let reason = format!(
            "differs from {shown} at {}; {} (`stateval diff {shown} {log}` shows them)",
            render::one_line(first),
            render::counts_line(&d),
        );
        let mut failed = check(false, reason);
        let cause = cause::classify(&d, &golden.events, sources);
        failed.actual = Some(json!({"first_divergence": first, "counts": d.counts(), "cause": cause}));
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
        let sources = cause::Sources {
            profile: "treasury",
            pipeline: "p.toml",
            tools: None,
            recording: None,
            dataset: "datasets/examples/treasury.jsonl",
        };
        goldens.check("examples/treasury", "pay", 0, &[], "log.jsonl", &sources, None).unwrap()
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

    /// The plan lists each goldens directory once and opens only the goldens it holds;
    /// a golden it found none of is not looked for while the run goes on: written after
    /// the plan, the run is still judged without one, as its plan (and run id) says.
    #[test]
    fn goldens_are_planned_from_a_listing_and_one_planned_absent_is_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut goldens = goldens("");
        goldens.dir = dir.path().to_path_buf();
        std::fs::create_dir_all(dir.path().join("examples/treasury")).unwrap();
        std::fs::write(dir.path().join("examples/treasury/kept.0.jsonl"), b"kept").unwrap();
        // a directory that cannot be listed as one (a file in its place) says "may be"
        std::fs::write(dir.path().join("flat"), b"").unwrap();
        let rels: Vec<String> =
            ["examples/treasury/kept.0.jsonl", "examples/treasury/pay.0.jsonl", "absent/x.0.jsonl", "flat/y.0.jsonl"]
                .map(String::from)
                .to_vec();
        let listed = goldens.listed(&rels);
        assert_eq!(rels.iter().map(|r| listed(r)).collect::<Vec<_>>(), [true, false, false, true]);
        let runs = [("examples/treasury", "kept", 0), ("examples/treasury", "pay", 0)];
        assert!(goldens.plan(runs).is_some(), "the golden found is in the plan's digest");
        assert!(!goldens.planned_absent("examples/treasury/kept.0.jsonl"));
        assert!(goldens.planned_absent("examples/treasury/pay.0.jsonl"));
        // written after the plan: not read, the run is judged as planned (no golden)
        std::fs::write(dir.path().join("examples/treasury/pay.0.jsonl"), b"late").unwrap();
        let check = missing_check(&goldens);
        assert!(check.passed && check.reason == NO_GOLDEN, "{}", check.reason);
    }
}
