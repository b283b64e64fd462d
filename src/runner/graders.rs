//! The runner's side of custom graders and judges: the I/O behind `grade::calls`.
//!
//! A custom grader runs in the pipeline's base directory, isolated like an external
//! agent ([`crate::isolation`]: the file system read-only but for a scratch directory
//! of its own, no view of the store or the key, no process outliving it), in its own
//! process group, with the canonical input on stdin (then closed) and a wall-clock deadline; past it,
//! the whole group is killed. Stdout and stderr are read on their own threads so a
//! chatty grader cannot block on a full pipe. Every live group is registered, so an
//! interrupted run ([`kill_all`]) leaves no grader behind. Judges are served from the
//! plan's validated judge recordings; rubrics are read when a judge first needs them,
//! and a rubric or grader script is used only as the plan digested it ([`super::inputs`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;

use super::inputs::Inputs;
use crate::dataset::expect::custom::CustomSpec;
use crate::diag::InputError;
use crate::grade::calls::{Backend, JudgeMiss, RecordedAnswer};
use crate::grade::custom::{Exit, Finished, MAX_STDOUT_BYTES, STDERR_TAIL_CHARS};
use crate::grade::judge::JudgeKey;
use crate::isolation::{Confinement, Scratch};
use crate::pipeline::Pipeline;
use crate::pipeline::judges::JudgeProfile;
use crate::replay::judge::JudgeBook;

/// Process groups of graders still running.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Kill every grader process tree still running (an interrupted run).
pub fn kill_all() {
    let groups: Vec<i32> = LIVE.lock().map(|mut g| std::mem::take(&mut *g).into_iter().collect()).unwrap_or_default();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Custom graders and judges for one run, over the plan's pipeline and judge recordings.
pub struct RunGraders<'p> {
    pipeline: &'p Pipeline,
    confinement: &'p Confinement,
    judges: &'p BTreeMap<String, Arc<JudgeBook>>,
    /// The grader scripts and rubrics as the plan digested them.
    inputs: &'p Inputs,
    /// Rubric texts read so far in this run, by path.
    rubrics: BTreeMap<String, String>,
    /// A grader script or rubric that is not what the plan digested: the run is an
    /// input error (the caller takes it once grading is done).
    pub changed: Option<InputError>,
}

impl<'p> RunGraders<'p> {
    pub fn new(
        pipeline: &'p Pipeline,
        confinement: &'p Confinement,
        judges: &'p BTreeMap<String, Arc<JudgeBook>>,
        inputs: &'p Inputs,
    ) -> Self {
        RunGraders { pipeline, confinement, judges, inputs, rubrics: BTreeMap::new(), changed: None }
    }
}

impl Backend for RunGraders<'_> {
    fn run(&mut self, spec: &CustomSpec, stdin: &[u8]) -> Finished {
        // the script about to run is the one planned (checked as late as can be)
        for (path, _) in super::inputs::command_files(&spec.command, &self.pipeline.base) {
            if let Err(e) = self.inputs.check(&path, &self.pipeline.display(&path)) {
                let why = e.to_string();
                self.changed.get_or_insert(e);
                return Finished { exit: Exit::NotStarted(why), stdout: Vec::new(), stderr: Vec::new() };
            }
        }
        let env = crate::child_env::inherited(&spec.env_passthrough);
        let limit = Duration::from_millis(spec.timeout_ms);
        run_command(&spec.command, &self.pipeline.base, &env, stdin, limit, self.confinement)
    }

    fn rubric(&mut self, path: &str) -> Result<String, String> {
        if let Some(text) = self.rubrics.get(path) {
            return Ok(text.clone());
        }
        let full = self.pipeline.resolve(path);
        let shown = self.pipeline.display(&full);
        let bytes = match self.inputs.read(&full, &shown) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(format!("cannot read rubric {shown}: no such file")),
            Err(e) => {
                let why = format!("cannot read rubric: {e}");
                self.changed.get_or_insert(e);
                return Err(why);
            }
        };
        let text = String::from_utf8(bytes).map_err(|e| format!("cannot read rubric {shown}: {e}"))?;
        self.rubrics.insert(path.to_string(), text.clone());
        Ok(text)
    }

    fn judge_profile(&self, name: &str) -> Option<JudgeProfile> {
        self.pipeline.judges.get(name).cloned()
    }

    fn judge_answer(&mut self, profile: &str, key: &JudgeKey, request: &Value) -> Result<RecordedAnswer, JudgeMiss> {
        let book = self.judges.get(profile).ok_or_else(|| JudgeMiss {
            kind: "miss",
            message: format!("judge profile \"{profile}\" has no recording loaded"),
            pointers: Vec::new(),
        })?;
        book.answer(key, request)
    }
}

/// Run `command` in `cwd` with exactly the environment `env` (see
/// [`crate::child_env::inherited`]) and `stdin`, for at most `limit`, confined by
/// `confinement`. A relative program path resolves from `cwd`, a bare name from PATH.
pub fn run_command(
    command: &[String],
    cwd: &Path,
    env: &std::collections::BTreeMap<String, String>,
    stdin: &[u8],
    limit: Duration,
    confinement: &Confinement,
) -> Finished {
    let not_started = |why: String| Finished { exit: Exit::NotStarted(why), stdout: Vec::new(), stderr: Vec::new() };
    let Some((program, args)) = command.split_first() else {
        return not_started("empty command".into());
    };
    let program = match crate::child_env::resolve_program(program, cwd) {
        Ok(p) => p,
        Err(e) => return not_started(e),
    };
    let confined = match confinement.command(&program, args, cwd) {
        Ok(confined) => confined,
        Err(e) => return not_started(e),
    };
    let mut child = match spawn(confined.command, env, confined.scratch.as_ref()) {
        Ok(child) => child,
        Err(e) => return not_started(e.to_string()),
    };
    let Ok(pgid) = i32::try_from(child.id()) else {
        let _ = child.kill();
        return not_started("process id out of range".into());
    };
    if let Ok(mut live) = LIVE.lock() {
        live.insert(pgid);
    }
    // started after an interrupted run's `kill_all` took the live groups: it goes too
    if crate::interrupt::interrupted() {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        let _ = child.wait();
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&pgid);
        }
        return not_started("the run was interrupted".into());
    }
    // stdin on its own thread: a grader that never reads it must not block us
    let writer = child.stdin.take().map(|mut pipe| {
        let bytes = stdin.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let stdout = child.stdout.take().map(|pipe| std::thread::spawn(move || read_capped(pipe, MAX_STDOUT_BYTES)));
    let stderr = child.stderr.take().map(|pipe| std::thread::spawn(move || read_tail(pipe, STDERR_TAIL_CHARS * 4)));

    let deadline = Instant::now() + limit;
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => break exit_of(status),
            Ok(None) if Instant::now() >= deadline => break Exit::TimedOut,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Exit::NotStarted(e.to_string()),
        }
    };
    // the group goes either way: a timed-out grader, or children left holding its pipes
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    let _ = child.wait();
    if let Ok(mut live) = LIVE.lock() {
        live.remove(&pgid);
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    let stdout = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    Finished { exit, stdout, stderr }
}

fn spawn(
    mut command: Command,
    env: &std::collections::BTreeMap<String, String>,
    scratch: Option<&Scratch>,
) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    command.env_clear().envs(env);
    if let Some(scratch) = scratch {
        command.env("TMPDIR", scratch.path());
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).spawn()
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    }
}

/// Read a pipe to its end, keeping the first `cap` bytes.
fn read_capped(mut pipe: impl Read, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf) {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&buf[..n.min(room)]);
    }
    out
}

/// Read a pipe to its end, keeping the last `keep` bytes.
fn read_tail(mut pipe: impl Read, keep: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > keep * 2 {
            out.drain(..out.len() - keep);
        }
    }
    if out.len() > keep {
        out.drain(..out.len() - keep);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Confinement {
        Confinement::standalone(crate::isolation::IsolationConfig::default())
    }

    fn sh(script: &str, stdin: &str, limit_ms: u64) -> Finished {
        let command = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        run_command(
            &command,
            Path::new("."),
            &crate::child_env::inherited(&[]),
            stdin.as_bytes(),
            Duration::from_millis(limit_ms),
            &plain(),
        )
    }

    #[test]
    fn a_grader_reads_its_stdin_to_the_end_and_its_output_is_kept() {
        let f = sh("cat; echo oops >&2; exit 3", "{\"x\":1}\n", 5000);
        assert_eq!((f.exit, f.stdout, f.stderr), (Exit::Code(3), b"{\"x\":1}\n".to_vec(), b"oops\n".to_vec()));
    }

    #[test]
    fn a_grader_past_its_deadline_is_killed_with_its_children() {
        let started = Instant::now();
        // the background sleep holds stdout open: only killing the group ends the read
        let f = sh("sleep 30 & sleep 30", "", 200);
        assert_eq!(f.exit, Exit::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let f = run_command(
            &["no/such/grader.py".to_string()],
            Path::new("."),
            &Default::default(),
            b"",
            Duration::from_secs(1),
            &plain(),
        );
        assert!(matches!(f.exit, Exit::NotStarted(ref why) if why.contains("no such file")), "{:?}", f.exit);
    }

    #[test]
    fn only_the_tail_of_a_long_stream_is_kept() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(read_tail(&data[..], 1000), data[data.len() - 1000..].to_vec());
        assert_eq!(read_capped(&data[..], 10), data[..10].to_vec());
    }
}
