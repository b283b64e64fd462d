//! The agent's process: spawned in its own process group, its whole tree killed on
//! timeout, on error, at the end of its run and when stateval is interrupted.
//!
//! Every live group is registered here, so [`kill_all`] (called on Ctrl-C and SIGTERM)
//! leaves no process behind. The agent answers on a pipe of its own, passed as file
//! descriptor [`PROTOCOL_FD`] (named in its environment), or on stdout: lines from both
//! and the exit arrive as messages on the run's channel (see `session`), from one
//! reader thread each, and the session decides which lines are protocol. Stderr, and
//! the stdout lines the session keeps as output, go to one file beside the log, line by
//! line and scrubbed of secrets, never hashed. Unix only, like the process groups.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use command_fds::{CommandFdExt, FdMapping};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::isolation::{Confinement, Scratch};
use crate::secrets::Scrubber;

/// The agent's protocol pipe, as a file descriptor in its process: the first one after
/// stdin, stdout and stderr, as shells and most runtimes expect.
pub const PROTOCOL_FD: i32 = 3;

/// The environment variable that names [`PROTOCOL_FD`] to the agent.
pub const PROTOCOL_FD_ENV: &str = "STATEVAL_PROTOCOL_FD";

/// How stdout lines the session keeps are marked in the output file, among stderr's.
pub const STDOUT_MARK: &str = "[stdout] ";

/// How long a killed agent's last stderr bytes may take to reach the file.
const KEEPER_WAIT_MS: u64 = 500;

/// A longer stderr line is kept in pieces of this many bytes: a progress bar that
/// redraws with `\r` and never ends its line must not grow without bound.
const MAX_KEPT_LINE: usize = 16 * 1024;

/// Process groups of agents still running.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Kill every agent process tree still running (Ctrl-C, SIGTERM, a failed run).
pub fn kill_all() {
    let groups: Vec<i32> = LIVE.lock().map(|mut g| std::mem::take(&mut *g).into_iter().collect()).unwrap_or_default();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// Where an agent's line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The protocol pipe, [`PROTOCOL_FD`].
    Fd,
    Stdout,
}

/// What the reader threads report.
#[derive(Debug)]
pub enum Output {
    /// One line, without its line end. A stdout line that is not UTF-8 arrives with
    /// its bad bytes replaced (it can only be output, never protocol).
    Line(Channel, String),
    /// The protocol pipe carried bytes that are not UTF-8, or could not be read.
    Unreadable(String),
    /// Stdout and the protocol pipe are both closed: the agent exited or closed them.
    Closed,
}

/// The file that keeps the agent's stderr and its stdout lines that are not protocol,
/// one whole line at a time (two threads write it), scrubbed of secrets.
#[derive(Clone)]
struct OutputFile {
    file: Arc<Mutex<File>>,
    scrubber: Arc<Scrubber>,
}

impl OutputFile {
    fn keep(&self, mark: &str, line: &str) {
        let clean = self.scrubber.text(line);
        let line = clean.as_deref().unwrap_or(line);
        if let Ok(mut file) = self.file.lock() {
            let _ = writeln!(file, "{mark}{line}");
        }
    }
}

/// A running agent.
pub struct AgentProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    pgid: i32,
    output: Option<OutputFile>,
    /// The thread keeping stderr: waited for (briefly) when the tree is killed, so the
    /// file holds the agent's last lines when the run's failure is explained from it.
    keeper: Option<std::thread::JoinHandle<()>>,
    /// The agent's scratch directory under isolation: removed after the tree is killed
    /// (fields drop after [`Drop::drop`] ran).
    _scratch: Option<Scratch>,
}

impl AgentProcess {
    /// Start `command` in `cwd` with exactly `env`, confined by `confinement` (with
    /// `TMPDIR` its scratch directory when isolated), in a new process group, with the
    /// write end of a fresh pipe as its [`PROTOCOL_FD`]. Lines of that pipe and of
    /// stdout go to `events` via `wrap`; stderr is kept in `stderr` (or dropped), which
    /// [`AgentProcess::keep_stdout`] adds to, both scrubbed by `scrubber`.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn<M: Send + 'static>(
        command: &[String],
        cwd: &Path,
        env: &[(String, String)],
        confinement: &Confinement,
        stderr: Option<&Path>,
        scrubber: &Scrubber,
        events: Sender<M>,
        wrap: fn(Output) -> M,
    ) -> std::io::Result<AgentProcess> {
        use std::os::unix::process::CommandExt;
        let (program, args) = command.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let output = match stderr {
            Some(path) => Some(OutputFile {
                file: Arc::new(Mutex::new(File::create(path)?)),
                scrubber: Arc::new(scrubber.clone()),
            }),
            None => None,
        };
        // both ends close on exec; the child gets the write end as fd 3 only, and ours
        // closes when `cmd` drops below, so the reader sees the end when the agent exits
        let (protocol, protocol_writer) = std::io::pipe()?;
        let confined = confinement.command(Path::new(program), args, cwd).map_err(std::io::Error::other)?;
        let (mut cmd, scratch) = (confined.command, confined.scratch);
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(scratch) = &scratch {
            cmd.env("TMPDIR", scratch.path());
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if output.is_some() { Stdio::piped() } else { Stdio::null() })
            .process_group(0)
            .fd_mappings(vec![FdMapping { parent_fd: protocol_writer.into(), child_fd: PROTOCOL_FD }])
            .map_err(std::io::Error::other)?;
        let spawned = cmd.spawn();
        drop(cmd);
        let mut child = spawned?;
        let pgid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        if let Ok(mut live) = LIVE.lock() {
            live.insert(pgid);
        }
        // started after an interrupted run's `kill_all` took the live groups: it goes too
        if crate::interrupt::interrupted() {
            drop(AgentProcess { child, stdin: None, pgid, output: None, keeper: None, _scratch: scratch }); // its drop kills the tree
            return Err(std::io::Error::other("the run was interrupted"));
        }
        let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        // the last of the two readers to reach its end reports `Closed`
        let open = Arc::new(AtomicUsize::new(2));
        let (stdout_events, stdout_open) = (events.clone(), open.clone());
        std::thread::spawn(move || read_lines(stdout, Channel::Stdout, &stdout_events, wrap, &stdout_open));
        std::thread::spawn(move || read_lines(protocol, Channel::Fd, &events, wrap, &open));
        let keeper = match (child.stderr.take(), output.clone()) {
            (Some(pipe), Some(output)) => Some(std::thread::spawn(move || keep_lines(pipe, &output))),
            _ => None,
        };
        let stdin = child.stdin.take();
        Ok(AgentProcess { child, stdin, pgid, output, keeper, _scratch: scratch })
    }

    /// Keep a stdout line that is not protocol in the output file, marked as stdout.
    pub fn keep_stdout(&self, line: &str) {
        if let Some(output) = &self.output {
            output.keep(STDOUT_MARK, line);
        }
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
        // stderr ends with the tree, unless something outside the group holds it
        if let Some(keeper) = self.keeper.take() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(KEEPER_WAIT_MS);
            while !keeper.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

/// Send each line of `pipe` (from `channel`) to `events`; at its end, `Closed` when it
/// is the last of the readers still `open`.
fn read_lines<R: Read, M>(pipe: R, channel: Channel, events: &Sender<M>, wrap: fn(Output) -> M, open: &AtomicUsize) {
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
                let message = match (std::str::from_utf8(&buf), channel) {
                    (Ok(text), _) => Output::Line(channel, text.to_string()),
                    (Err(_), Channel::Stdout) => Output::Line(channel, String::from_utf8_lossy(&buf).into_owned()),
                    (Err(e), Channel::Fd) => Output::Unreadable(format!("a line on the protocol fd is not UTF-8: {e}")),
                };
                if events.send(wrap(message)).is_err() {
                    return;
                }
            }
            Err(e) => {
                if channel == Channel::Fd {
                    let _ = events.send(wrap(Output::Unreadable(format!("the protocol fd could not be read: {e}"))));
                }
                break;
            }
        }
    }
    if open.fetch_sub(1, Ordering::SeqCst) == 1 {
        let _ = events.send(wrap(Output::Closed));
    }
}

/// Keep every line of `pipe` in `output` (a line longer than [`MAX_KEPT_LINE`] bytes in
/// pieces), until it closes.
fn keep_lines<R: Read>(pipe: R, output: &OutputFile) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let (taken, ended) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        line.extend_from_slice(&chunk[..taken]);
        reader.consume(taken);
        if ended || line.len() >= MAX_KEPT_LINE {
            keep_one(output, &mut line);
        }
    }
    if !line.is_empty() {
        keep_one(output, &mut line);
    }
}

fn keep_one(output: &OutputFile, line: &mut Vec<u8>) {
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    output.keep("", &String::from_utf8_lossy(line));
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(input: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let output = OutputFile {
            file: Arc::new(Mutex::new(File::create(&path).unwrap())),
            scrubber: Arc::new(Scrubber::default()),
        };
        keep_lines(input, &output);
        output.keep(STDOUT_MARK, "from stdout");
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn kept_output_is_whole_lines_scrubbed_and_a_line_without_end_is_cut_in_pieces() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        assert_eq!(
            kept(format!("one\r\nkey {token}\nlast, no newline").as_bytes()),
            "one\nkey ghp_[scrubbed]\nlast, no newline\n[stdout] from stdout\n"
        );
        // a progress bar that never ends its line: 40 KiB kept as 16 + 16 + 8 KiB lines
        let bar = "#".repeat(40 * 1024);
        let lines: Vec<usize> = kept(bar.as_bytes()).lines().map(str::len).collect();
        assert_eq!(lines, [MAX_KEPT_LINE, MAX_KEPT_LINE, 8 * 1024, "[stdout] from stdout".len()]);
    }
}
