//! The files a verdict depends on besides the cases, as the plan digested them.
//!
//! The code under test (an external agent, a custom grader) runs with stateval's user
//! id, so it can write every file of the project while the run goes on. A grader script,
//! a judge's rubric or an agent's script digested into the plan and then swapped before
//! it was used (and restored after) would give a verdict the plan's digest does not
//! stand for: a failing case passing under a signed manifest with the honest run's plan.
//! So each is checked against its planned digest at the moment it is used — before each
//! grader run and each agent start, when a judge reads its rubric — and a changed one is
//! an input error naming it, as a tool manifest edited during the run is
//! ([`super::Plan::manifest`]). Goldens are planned the same way, by
//! [`crate::golden::Goldens::plan`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::canon::{self, Context, Digest};
use crate::diag::InputError;
use crate::pipeline::{AgentKind, Pipeline};

/// Each file's digest when the plan was validated (`None`: no file could be read there
/// then), by path.
#[derive(Debug, Default)]
pub struct Inputs(BTreeMap<PathBuf, Option<Digest>>);

impl Inputs {
    pub fn new(files: BTreeMap<PathBuf, Option<Digest>>) -> Self {
        Inputs(files)
    }

    /// Add `path` with the digest it has now; returns that digest.
    pub fn add(&mut self, path: PathBuf) -> Option<Digest> {
        *self.0.entry(path).or_insert_with_key(|path| read_digest(path))
    }

    /// The bytes of `path` as planned (`shown` names it in the error): read again, and
    /// refused unless they are the ones digested (`None`: absent, as planned). A file
    /// the plan did not read is refused too: nothing unplanned is used.
    pub fn read(&self, path: &Path, shown: &str) -> Result<Option<Vec<u8>>, InputError> {
        let bytes = std::fs::read(path).ok();
        let found = bytes.as_deref().map(|b| canon::digest(Context::Content, b));
        self.compare(path, shown, found)?;
        Ok(bytes)
    }

    /// The bytes of every file an external profile's command names (the program when it is
    /// a path, and script arguments such as `agent.py`): a changed agent is a new run, not
    /// a rerun that overwrites the last one. Programs found on PATH (`python3`) are the
    /// machine's, not the project's, and are left out so run ids agree across machines.
    ///
    /// Each file read is added, so that an agent starts only with its files as digested
    /// here.
    pub fn programs_digest(&mut self, pipeline: &Pipeline) -> Option<Digest> {
        if pipeline.agents.values().all(|p| p.kind != AgentKind::External) {
            return None;
        }
        let mut digester = canon::Digester::new(Context::Content);
        for (name, profile) in pipeline.agents.iter().filter(|(_, p)| p.kind == AgentKind::External) {
            let cwd = pipeline.resolve(profile.cwd.as_deref().unwrap_or("."));
            for (path, arg) in command_files(&profile.command, &cwd) {
                if let Some(digest) = self.add(path) {
                    digester.update(name.as_bytes());
                    digester.update(arg.as_bytes());
                    digester.update(&digest.0);
                }
            }
        }
        Some(digester.finish())
    }

    /// `path` still has its planned digest (or, planned absent, is still absent).
    pub fn check(&self, path: &Path, shown: &str) -> Result<(), InputError> {
        self.compare(path, shown, read_digest(path))
    }

    fn compare(&self, path: &Path, shown: &str, found: Option<Digest>) -> Result<(), InputError> {
        let Some(planned) = self.0.get(path) else {
            return Err(InputError::file(Path::new(shown), "was not read when the run was planned"));
        };
        if *planned == found {
            return Ok(());
        }
        let hex = |d: &Option<Digest>| d.map_or_else(|| "absent".to_string(), |d| d.to_string());
        Err(InputError::file(
            Path::new(shown),
            format!(
                "changed while the run went on (planned as {}, now {}); run again to plan with it",
                hex(planned),
                hex(&found)
            ),
        ))
    }
}

fn read_digest(path: &Path) -> Option<Digest> {
    std::fs::read(path).ok().map(|bytes| canon::digest(Context::Content, &bytes))
}

/// The files a command names, resolved from `cwd`: every argument after the program
/// (a script such as `grader.py`; an argument that names no file is planned absent and
/// stays harmless) and the program when it is a path. A program found on PATH
/// (`python3`) is the machine's, not the project's.
pub fn command_files<'a>(command: &'a [String], cwd: &'a Path) -> impl Iterator<Item = (PathBuf, &'a str)> + 'a {
    command
        .iter()
        .enumerate()
        .filter(|(i, arg)| *i > 0 || Path::new(arg).components().count() > 1)
        .map(move |(_, arg)| (cwd.join(arg), arg.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_swapped_after_it_was_planned_is_refused_naming_it_and_restored_is_taken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (script, missing) = (dir.path().join("grader.py"), dir.path().join("later.py"));
        std::fs::write(&script, "print('fail')").expect("write");
        let mut inputs = Inputs::default();
        assert!(inputs.add(script.clone()).is_some());
        assert!(inputs.add(missing.clone()).is_none());
        assert_eq!(inputs.read(&script, "grader.py").expect("as planned").as_deref(), Some(&b"print('fail')"[..]));

        std::fs::write(&script, "print('pass')").expect("swap");
        let err = inputs.check(&script, "grader.py").expect_err("swapped").to_string();
        assert!(err.starts_with("grader.py:1:1: changed while the run went on (planned as blake3:"), "{err}");
        // a file absent when planned may not appear, and one never planned is not used
        std::fs::write(&missing, "x").expect("write");
        assert!(inputs.check(&missing, "later.py").expect_err("appeared").to_string().contains("now blake3:"));
        let other = dir.path().join("other.py");
        assert!(inputs.check(&other, "other.py").is_err());

        std::fs::write(&script, "print('fail')").expect("restore");
        assert!(inputs.check(&script, "grader.py").is_ok());
    }
}
