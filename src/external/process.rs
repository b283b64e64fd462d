//! The agent's process: spawned in its own process group, its whole tree killed on
//! timeout, on error, at the end of its run and when stateval is interrupted.
//!
//! Every live group is registered here, so [`kill_all`] (called on Ctrl-C and SIGTERM)
//! leaves no process behind. Stdout lines and the exit arrive as messages on the run's
//! channel (see `session`), from one reader thread each; stderr is copied to a file
//! beside the log, never hashed.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::Sender;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Process groups of agents still running.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Kill every agent process tree still running (Ctrl-C, SIGTERM, a failed run).
pub fn kill_all() {
    let groups: Vec<i32> = LIVE.lock().map(|mut g| std::mem::take(&mut *g).into_iter().collect()).unwrap_or_default();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// What the reader threads report.
#[derive(Debug)]
pub enum Output {
    /// One line of stdout, without its line end.
    Line(String),
    /// Stdout is not UTF-8 or could not be read.
    Unreadable(String),
    /// Stdout closed: the agent exited or closed it.
    Closed,
}

/// A running agent.
pub struct AgentProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    pgid: i32,
}

/// How the program of a command was looked for, for a load error.
pub fn resolve_program(program: &str, cwd: &Path) -> Result<PathBuf, String> {
    let path = Path::new(program);
    if path.components().count() > 1 {
        let full = cwd.join(path);
        return if full.is_file() {
            Ok(full)
        } else {
            Err(format!("{program}: no such file (looked in {})", cwd.display()))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&search)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("{program}: command not found on PATH"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl AgentProcess {
    /// Start `command` in `cwd` with exactly `env`, in a new process group. Stdout
    /// lines go to `events` via `wrap`; stderr is appended to `stderr` (or dropped).
    pub fn spawn<M: Send + 'static>(
        command: &[String],
        cwd: &Path,
        env: &[(String, String)],
        stderr: Option<&Path>,
        events: Sender<M>,
        wrap: fn(Output) -> M,
    ) -> std::io::Result<AgentProcess> {
        use std::os::unix::process::CommandExt;
        let (program, args) = command.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if stderr.is_some() { Stdio::piped() } else { Stdio::null() })
            .process_group(0);
        let mut child = cmd.spawn()?;
        let pgid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        if let Ok(mut live) = LIVE.lock() {
            live.insert(pgid);
        }
        // started after an interrupted run's `kill_all` took the live groups: it goes too
        if crate::interrupt::interrupted() {
            drop(AgentProcess { child, stdin: None, pgid }); // its drop kills the tree
            return Err(std::io::Error::other("the run was interrupted"));
        }
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        std::thread::spawn(move || read_lines(stdout, &events, wrap));
        if let (Some(pipe), Some(path)) = (child.stderr.take(), stderr) {
            let mut file = std::fs::File::create(path)?;
            std::thread::spawn(move || {
                let mut pipe = pipe;
                let _ = std::io::copy(&mut pipe, &mut file);
            });
        }
        let stdin = child.stdin.take();
        Ok(AgentProcess { child, stdin, pgid })
    }

    /// Send one protocol line. A closed stdin (the agent exited) is reported by the
    /// stdout reader, so a failed write here is only returned.
    pub fn send(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| std::io::Error::other("stdin closed"))?;
        stdin.write_all(line.as_bytes())?;
        stdin.flush()
    }

    /// The exit status, if the process has exited.
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Kill the whole process group and reap the child.
    pub fn kill_tree(&mut self) {
        self.stdin = None;
        let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
        let _ = self.child.wait();
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.pgid);
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

fn read_lines<R: Read, M>(pipe: R, events: &Sender<M>, wrap: fn(Output) -> M) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {
                while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    buf.pop();
                }
                let message = match std::str::from_utf8(&buf) {
                    Ok(text) => Output::Line(text.to_string()),
                    Err(e) => Output::Unreadable(format!("stdout is not UTF-8: {e}")),
                };
                if events.send(wrap(message)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = events.send(wrap(Output::Unreadable(e.to_string())));
                break;
            }
        }
    }
    let _ = events.send(wrap(Output::Closed));
}
