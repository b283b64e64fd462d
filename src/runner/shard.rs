//! Units of work and shards: how one suite is split over a CI matrix or a Kubernetes
//! Indexed Job, and put back together by `stateval merge`.
//!
//! A *unit* is one recorded run of one case. Its id is a digest over everything that
//! decides its log — the case's dataset line (and the files its graders read), the
//! recording, the agent profile, the tool manifest, the judges and agent programs, and
//! the stateval version — so the same id always means the same work, whichever machine
//! ran it. A *shard* holds whole cases (every recorded run of a case stays together, as
//! a case's verdict spans its runs), chosen by a digest of the case id (`hash`: a case
//! keeps its shard when others are added) or round-robin (`slice`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Plan;
use crate::canon::{self, Context, Digest};
use crate::dataset::CaseRef;

/// The file a run directory lists its units in, one JSON object per line.
pub const UNITS_FILE: &str = "units.jsonl";
/// What a shard run writes beside its logs: which plan and which part of it.
pub const SHARD_FILE: &str = "shard.json";
const PLAN_FORMAT: &str = "stateval-plan/1";

/// How cases are dealt to shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// By a digest of the case id: stable when cases are added or removed.
    Hash,
    /// Round-robin over the cases in dataset order.
    Slice,
}

/// Shard `index` of `total` (1-based, as `--shard hash:2/4` is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub strategy: Strategy,
    pub index: usize,
    pub total: usize,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let strategy = match self.strategy {
            Strategy::Hash => "hash",
            Strategy::Slice => "slice",
        };
        write!(f, "{strategy}:{}/{}", self.index, self.total)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `hash:I/N` or `slice:I/N`, I in 1..=N.
    fn from_str(text: &str) -> Result<Shard, String> {
        let expected = || format!("\"{text}\": expected hash:I/N or slice:I/N with 1 ≤ I ≤ N (e.g. hash:1/4)");
        let (strategy, rest) = text.split_once(':').ok_or_else(expected)?;
        let strategy = match strategy {
            "hash" => Strategy::Hash,
            "slice" => Strategy::Slice,
            _ => return Err(expected()),
        };
        let (index, total) = parse_fraction(rest).ok_or_else(expected)?;
        Shard::new(strategy, index, total).ok_or_else(expected)
    }
}

fn parse_fraction(text: &str) -> Option<(usize, usize)> {
    let (i, n) = text.trim().split_once('/')?;
    Some((i.trim().parse().ok()?, n.trim().parse().ok()?))
}

impl Shard {
    pub fn new(strategy: Strategy, index: usize, total: usize) -> Option<Shard> {
        (total >= 1 && (1..=total).contains(&index)).then_some(Shard { strategy, index, total })
    }

    /// Does this shard run the case at `position` (in dataset order) with this id?
    pub fn keeps(&self, position: usize, id: &str) -> bool {
        let slot = match self.strategy {
            Strategy::Slice => position % self.total,
            Strategy::Hash => {
                let d = canon::digest(Context::Content, id.as_bytes());
                let word = u64::from_le_bytes(d.0[..8].try_into().unwrap_or_default());
                (word % self.total as u64) as usize
            }
        };
        slot + 1 == self.index
    }

    /// The shard a CI engine's environment names, and a line saying how it was read.
    /// `strategy` is the one asked for (`--shard-from-env` uses `hash`).
    pub fn from_env(strategy: Strategy, env: &dyn Fn(&str) -> Option<String>) -> Result<(Shard, String), String> {
        let number = |name: &str| -> Result<Option<usize>, String> {
            env(name)
                .map(|v| v.trim().parse::<usize>().map_err(|_| format!("{name}={v:?} is not a whole number")))
                .transpose()
        };
        let make = |index: usize, total: usize, how: String| {
            Shard::new(strategy, index, total)
                .map(|s| (s, format!("shard {s} from {how}")))
                .ok_or_else(|| format!("{how} does not name a shard: expected an index within 1..={total}"))
        };
        if let Some(value) = env("STATEVAL_SHARD") {
            let (i, n) = parse_fraction(&value).ok_or(format!("STATEVAL_SHARD={value:?}: expected I/N (1-based)"))?;
            return make(i, n, format!("STATEVAL_SHARD={value}"));
        }
        // Each engine names a shard with a pair; one half of a pair alone is a job set up
        // wrongly (a lost matrix variable, a Job without its total), and running the
        // whole suite, or guessing, would hide that.
        let pair = |index: &str, total: &str, engine: &str| -> Result<Option<(usize, usize)>, String> {
            match (number(index)?, number(total)?) {
                (Some(i), Some(n)) => Ok(Some((i, n))),
                (None, None) => Ok(None),
                (Some(_), None) => Err(format!("--shard-from-env: {index} is set ({engine}) but {total} is not")),
                (None, Some(_)) => Err(format!("--shard-from-env: {total} is set ({engine}) but {index} is not")),
            }
        };
        if let Some((i, n)) = pair("CI_NODE_INDEX", "CI_NODE_TOTAL", "GitLab `parallel:`")? {
            return make(i, n, format!("GitLab CI_NODE_INDEX={i} CI_NODE_TOTAL={n} (1-based)"));
        }
        if let Some((i, n)) = pair("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", "Buildkite parallelism")? {
            return make(
                i + 1,
                n,
                format!("Buildkite BUILDKITE_PARALLEL_JOB={i} BUILDKITE_PARALLEL_JOB_COUNT={n} (0-based)"),
            );
        }
        if let Some((i, n)) =
            pair("JOB_COMPLETION_INDEX", "STATEVAL_SHARD_TOTAL", "a Kubernetes Indexed Job and the Job's completions")?
        {
            return make(i + 1, n, format!("Kubernetes JOB_COMPLETION_INDEX={i} STATEVAL_SHARD_TOTAL={n} (0-based)"));
        }
        Err("--shard-from-env: none of STATEVAL_SHARD (GitHub Actions matrix), CI_NODE_INDEX/CI_NODE_TOTAL \
             (GitLab), BUILDKITE_PARALLEL_JOB/_COUNT (Buildkite) or JOB_COMPLETION_INDEX with \
             STATEVAL_SHARD_TOTAL (Kubernetes) is set"
            .into())
    }
}

/// One unit of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unit {
    pub unit: Digest,
    pub dataset: String,
    pub case: String,
    pub k: usize,
}

/// A unit a run wrote: where its log is and what the log's head was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitRecord {
    pub unit: Digest,
    pub case: String,
    pub k: usize,
    pub head: Option<Digest>,
    pub events: u64,
    /// The recording file the unit replayed (none for an inline recording): a merge
    /// that finds these bytes on disk takes their content digest from here instead of
    /// validating the file once more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingFile>,
}

/// A recording file as a run validated it: the digest of its bytes and its content
/// digest (the one a unit id covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingFile {
    pub bytes: Digest,
    pub content: Digest,
}

/// `plan.json`: every unit of a pipeline, validated once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub format: String,
    pub pipeline: String,
    /// The plan's digest; shard runs and merges must agree on it.
    pub plan: Digest,
    pub run_id: String,
    pub stateval: String,
    pub cases: usize,
    pub units: Vec<Unit>,
}

impl PlanFile {
    pub fn of(plan: &Plan) -> PlanFile {
        let mut units = Vec::new();
        for case in &plan.cases {
            for k in 0..case.recordings.len() {
                units.push(Unit {
                    unit: unit_id(plan, case, k),
                    dataset: case.file.dataset.clone(),
                    case: case.id.clone(),
                    k,
                });
            }
        }
        PlanFile {
            format: PLAN_FORMAT.into(),
            pipeline: plan.pipeline.pipeline.name.clone(),
            plan: plan.digest,
            run_id: plan.run_id.clone(),
            stateval: env!("CARGO_PKG_VERSION").into(),
            cases: plan.cases.len(),
            units,
        }
    }

    /// What changed between this plan file and `plan`, one line a case (the first
    /// [`CHANGES_SHOWN`], then how many more), or the one line that says no case did.
    pub fn changes(&self, plan: &Plan) -> Vec<String> {
        let earlier = self.units.iter().map(|u| ((u.dataset.as_str(), u.case.as_str()), u.unit));
        let now = PlanFile::of(plan);
        let now = now.units.iter().map(|u| ((u.dataset.as_str(), u.case.as_str()), u.unit));
        describe_changes(earlier, now, true)
    }

    pub fn read(path: &Path) -> Result<PlanFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let plan: PlanFile =
            serde_json::from_str(&text).map_err(|e| format!("{}: not a stateval plan: {e}", path.display()))?;
        if plan.format != PLAN_FORMAT {
            return Err(format!("{}: format \"{}\" is not \"{PLAN_FORMAT}\"", path.display(), plan.format));
        }
        Ok(plan)
    }
}

/// What a shard run records beside its logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    pub plan: Digest,
    pub run_id: String,
    pub stateval: String,
    pub shard: Shard,
    pub cases: usize,
}

/// The id of the `k`th recorded run of `case` in `plan`.
pub fn unit_id(plan: &Plan, case: &CaseRef, k: usize) -> Digest {
    let mut d = canon::Digester::new(Context::Content);
    d.update(env!("CARGO_PKG_VERSION").as_bytes());
    d.update(&case.inputs.0);
    if let Some(recording) = case.recordings.get(k) {
        d.update(&recording.digest.0);
    }
    d.update(case.agent.as_bytes());
    if let Some(planned) = plan.agents.get(&case.agent) {
        d.update(&planned.profile.0);
        if let Some(m) = planned.manifest {
            d.update(&m.0);
        }
    }
    d.update(&plan.graders.0);
    d.finish()
}

/// How many changed cases a plan mismatch names before it says how many more.
pub const CHANGES_SHOWN: usize = 5;

/// The cases whose units differ between an earlier plan (`earlier`: (dataset, case) →
/// unit ids) and the plan now, one line each: `case c (dataset d): added | removed |
/// changed`; with `whole` false, `earlier` covers only some cases (a shard's), so cases
/// it lacks are not "added". When no case differs, the one line says what else decides a
/// plan.
pub fn describe_changes<'a>(
    earlier: impl Iterator<Item = ((&'a str, &'a str), Digest)>,
    now: impl Iterator<Item = ((&'a str, &'a str), Digest)>,
    whole: bool,
) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let group = |units: &mut dyn Iterator<Item = ((&'a str, &'a str), Digest)>| {
        let mut by_case: BTreeMap<(&'a str, &'a str), BTreeSet<Digest>> = BTreeMap::new();
        for (case, unit) in units {
            by_case.entry(case).or_default().insert(unit);
        }
        by_case
    };
    let (mut earlier, mut now) = (earlier, now);
    let (before, after) = (group(&mut earlier), group(&mut now));
    let mut lines = Vec::new();
    for (case, units) in &before {
        match after.get(case) {
            None => lines.push(format!("case {} ({}): removed since", case.1, case.0)),
            Some(now) if now != units => lines.push(format!(
                "case {} ({}): changed (its dataset line, recordings, profile or tools)",
                case.1, case.0
            )),
            Some(_) => {}
        }
    }
    if whole {
        for case in after.keys().filter(|c| !before.contains_key(*c)) {
            lines.push(format!("case {} ({}): added since", case.1, case.0));
        }
    }
    if lines.is_empty() {
        return vec![
            "no case changed: the pipeline file or a setting that decides the whole run did (its gates, goldens, \
             judges or replay settings, or the stateval version)"
                .into(),
        ];
    }
    let more = lines.len().saturating_sub(CHANGES_SHOWN);
    lines.truncate(CHANGES_SHOWN);
    if more > 0 {
        lines.push(format!("and {more} more case(s)"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_written_one_based_and_refuse_an_index_outside() {
        assert_eq!("hash:1/4".parse::<Shard>(), Ok(Shard { strategy: Strategy::Hash, index: 1, total: 4 }));
        assert_eq!("slice:4/4".parse::<Shard>().map(|s| s.to_string()), Ok("slice:4/4".into()));
        for bad in ["hash:0/4", "hash:5/4", "hash:1/0", "mod:1/2", "hash:1", "hash:a/b"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn every_case_lands_in_exactly_one_shard_either_way() {
        for strategy in [Strategy::Hash, Strategy::Slice] {
            for position in 0..200 {
                let id = format!("case-{position}");
                let owners = (1..=4).filter(|&i| Shard { strategy, index: i, total: 4 }.keeps(position, &id)).count();
                assert_eq!(owners, 1, "{strategy:?} {id}");
            }
        }
    }

    #[test]
    fn a_hash_shard_keeps_its_cases_when_others_are_added() {
        let shard = Shard { strategy: Strategy::Hash, index: 2, total: 3 };
        // the position changes when cases are inserted before it; the shard does not
        assert_eq!(shard.keeps(5, "transfer-idempotent"), shard.keeps(500, "transfer-idempotent"));
    }

    #[test]
    fn each_engine_environment_maps_to_a_one_based_shard() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let shard = |pairs| Shard::from_env(Strategy::Hash, &env(pairs)).map(|(s, _)| (s.index, s.total));
        assert_eq!(shard(&[("STATEVAL_SHARD", "3/4")]), Ok((3, 4)));
        assert_eq!(shard(&[("CI_NODE_INDEX", "1"), ("CI_NODE_TOTAL", "4")]), Ok((1, 4)));
        assert_eq!(shard(&[("BUILDKITE_PARALLEL_JOB", "0"), ("BUILDKITE_PARALLEL_JOB_COUNT", "4")]), Ok((1, 4)));
        assert_eq!(shard(&[("JOB_COMPLETION_INDEX", "3"), ("STATEVAL_SHARD_TOTAL", "4")]), Ok((4, 4)));
        assert!(shard(&[("JOB_COMPLETION_INDEX", "3")]).unwrap_err().contains("STATEVAL_SHARD_TOTAL"));
        // half of a pair is named, never mistaken for "no engine at all"
        for (set, missing) in [
            ("CI_NODE_INDEX", "CI_NODE_TOTAL"),
            ("CI_NODE_TOTAL", "CI_NODE_INDEX"),
            ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT"),
            ("BUILDKITE_PARALLEL_JOB_COUNT", "BUILDKITE_PARALLEL_JOB"),
            ("STATEVAL_SHARD_TOTAL", "JOB_COMPLETION_INDEX"),
        ] {
            let err =
                Shard::from_env(Strategy::Hash, &|name: &str| (name == set).then(|| "2".to_string())).unwrap_err();
            assert!(err.contains(&format!("{set} is set")) && err.contains(&format!("but {missing} is not")), "{err}");
        }
        assert!(shard(&[("CI_NODE_INDEX", "0"), ("CI_NODE_TOTAL", "4")]).is_err(), "GitLab counts from 1");
        assert!(shard(&[]).is_err());
    }
}
