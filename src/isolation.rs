//! Isolation of the code under test: every program stateval starts on a pipeline's
//! behalf — an external agent (and whatever it starts, `stateval mcp-stdio` included),
//! a custom grader — runs in a sandbox of its own.
//!
//! In stateval's threat model that code is the attacker of the verdict. Run as a plain
//! child with stateval's user id, it could read the signing key from its parent's
//! `/proc/PID/environ`, rewrite its own log or `cases.jsonl` before the manifest
//! anchors them, leave a daemon behind that swaps a grader for the next case, or write
//! through the project. No check stateval adds afterwards closes that: the child has to
//! be unable to do it. So, on Linux, each child runs under bubblewrap (`bwrap`, the
//! sandbox Flatpak is built on) in new user, PID, IPC and UTS namespaces:
//!
//! - **its own PID namespace** with its own `/proc`: stateval's process (its
//!   environment, its memory, its open files) is not there to be read, and when the
//!   child the case started exits or is killed, the kernel ends every process it left
//!   behind, `setsid` daemons included; `--die-with-parent` does the same when stateval
//!   itself dies, SIGKILL included;
//! - **the whole file system read-only**, with the store (logs, `cases.jsonl`,
//!   catalog, earlier runs) and the signing key's file replaced by empty ones, and one
//!   writable scratch directory of its own per start (`TMPDIR` names it), removed
//!   when the child ends. Other children's scratch directories are hidden too;
//! - **no capabilities**, not even in its own user namespace, so it cannot remount
//!   what it was given read-only;
//! - the network is shared: the replay endpoints on loopback are how an agent talks to
//!   stateval, and each case run's are addressed by a secret of its own.
//!
//! Why bubblewrap rather than our own `unshare` calls: setting up a user namespace's
//! id maps, a PID namespace's init (which must reap and must die with its child) and a
//! read-only root by pivot is a page of `unsafe` system calls with well-known pitfalls,
//! and this crate forbids `unsafe`. bubblewrap is small, audited, packaged by every
//! distribution (`apt-get install bubblewrap`), and needs no privilege where
//! unprivileged user namespaces are enabled.
//!
//! Where no sandbox can be had (macOS, Windows, a kernel without unprivileged user
//! namespaces, bubblewrap not installed), children run as plain processes, the run
//! says so on stderr and in its report, and it is not signed unless the pipeline says
//! `[isolation] sign_unisolated = true` (docs/security.md). `mode = "required"` makes
//! such a run an error instead; `mode = "off"` runs children unisolated on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The variable that names the bubblewrap program to use (default: `bwrap` on PATH).
pub const BWRAP_VARIABLE: &str = "STATEVAL_BWRAP";

/// Where a home directory keeps credentials by convention (SSH and GPG keys, cloud,
/// container and cluster logins, package registry tokens, git and GitHub CLI
/// credentials): each one that exists is hidden from every isolated child, a directory
/// as an empty one, a file as an empty file. A deny-list, and so incomplete: it is a
/// second line behind the rule that signing keys and secrets stay out of the job that
/// runs code under test (docs/evidence.md, "Signing apart from running").
pub const HOME_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/stateval",
];

/// `[isolation] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IsolationMode {
    /// Isolate where the platform can; elsewhere run children plainly, say so loudly,
    /// and sign nothing (unless `sign_unisolated`).
    #[default]
    Auto,
    /// A child that cannot be isolated is not started: the run is refused.
    Required,
    /// Run children as plain processes (an agent that must write into the project):
    /// the run says so and is not signed unless `sign_unisolated`.
    Off,
}

/// The pipeline's `[isolation]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IsolationConfig {
    #[serde(default)]
    pub mode: IsolationMode,
    /// Sign a run whose code under test ran without isolation. Off by default: such a
    /// run's verdict is only as good as the code under test let it be.
    #[serde(default)]
    pub sign_unisolated: bool,
}

/// The key of a run's extras (`suite.json`, `report.json`) that says its code under
/// test ran without isolation; absent when it ran isolated or no program was started.
pub const EXTRA: &str = "isolation";

/// What [`EXTRA`] holds: that the run was not isolated, why, whether it was signed,
/// and whether its pipeline lets it be signed at all (`[isolation] sign_unisolated`):
/// `stateval sign`, which runs where the pipeline is not, reads that here.
pub fn extra(why: &str, signed: bool, sign_unisolated: bool) -> serde_json::Value {
    serde_json::json!({"isolated": false, "why": why, "signed": signed, "sign_unisolated": sign_unisolated})
}

/// Why a run whose `suite.json` extras are `extras` may not be signed: its code under
/// test ran unisolated and its pipeline does not sign such runs. `None`: it may be.
pub fn refuses_signature(extras: &serde_json::Value) -> Option<String> {
    let isolation = extras.get(EXTRA)?;
    if isolation["sign_unisolated"].as_bool() == Some(true) {
        return None;
    }
    let why = isolation["why"].as_str().unwrap_or("no reason recorded");
    Some(format!(
        "the code under test ran WITHOUT ISOLATION ({why}), and its pipeline does not sign such runs \
         ([isolation] sign_unisolated = true would)"
    ))
}

/// The line a run prints, on stderr, when its code under test runs without isolation.
pub fn warning(why: &str, signing: Option<bool>) -> String {
    let signature = match signing {
        Some(true) => "; it is signed all the same ([isolation] sign_unisolated = true)",
        Some(false) => "; the run is not signed ([isolation] sign_unisolated = true would sign it)",
        None => "",
    };
    format!(
        "warning: the code under test runs WITHOUT ISOLATION ({why}): external agents and custom graders can \
         read this run's store and stateval's environment and leave processes behind, so its verdict is only as \
         good as they let it be{signature}"
    )
}

/// How the children of one run are started: the sandbox (if any) and what it hides.
#[derive(Debug)]
pub struct Confinement {
    config: IsolationConfig,
    /// Directories no child may see (the store).
    hidden_dirs: Vec<PathBuf>,
    /// Files no child may see (the signing key's file).
    hidden_files: Vec<PathBuf>,
    /// Why the first child that ran without isolation did (`None`: none did).
    unisolated: Mutex<Option<String>>,
}

/// A child's command, ready for its stdio, and its scratch directory (removed on drop).
pub struct Confined {
    pub command: Command,
    /// The directory `TMPDIR` names; `None` for a plain child (which keeps the
    /// parent's temporary directory).
    pub scratch: Option<Scratch>,
    /// Whether the command runs in the sandbox.
    pub isolated: bool,
}

/// A child's private writable directory, removed with everything in it on drop.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether bubblewrap can isolate a child here, probed once per process: the program,
/// or why not.
fn sandbox() -> &'static Result<PathBuf, String> {
    static PROBE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PROBE.get_or_init(probe)
}

/// Why no sandbox can be had on this machine, `None` when one can.
pub fn unavailable() -> Option<&'static str> {
    sandbox().as_ref().err().map(String::as_str)
}

#[cfg(target_os = "linux")]
fn probe() -> Result<PathBuf, String> {
    let program = match std::env::var_os(BWRAP_VARIABLE) {
        Some(path) => PathBuf::from(path),
        None => crate::child_env::resolve_program("bwrap", Path::new("."))
            .map_err(|_| "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap`".to_string())?,
    };
    // a real start, not `--version`: a kernel without unprivileged user namespaces
    // (or a container that forbids them) has bwrap and still cannot isolate
    let mut args = namespaces();
    args.extend(
        ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", ":"].map(String::from),
    );
    let output = Command::new(&program)
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot be started: {e}", program.display()))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "{} cannot create a sandbox here ({}): unprivileged user namespaces may be disabled \
             (sysctl kernel.unprivileged_userns_clone, or the container's seccomp policy)",
            program.display(),
            said.trim()
        ));
    }
    Ok(program)
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Result<PathBuf, String> {
    Err(format!("{} has no sandbox stateval can use (Linux namespaces through bubblewrap)", std::env::consts::OS))
}

/// The namespace and privilege flags every sandboxed start gets.
fn namespaces() -> Vec<String> {
    [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    .map(String::from)
    .to_vec()
}

impl Confinement {
    /// The confinement of a run whose store is `store`: it hides the store and the
    /// signing key's file (when `STATEVAL_SIGNING_KEY` names a file).
    pub fn new(config: IsolationConfig, store: &Path) -> Confinement {
        let mut hidden_files = Vec::new();
        if let Some(value) = std::env::var_os(crate::child_env::SIGNING_KEY_VAR) {
            let path = PathBuf::from(value);
            if path.is_file() {
                hidden_files.push(std::fs::canonicalize(&path).unwrap_or(path));
            }
        }
        // the store may not exist yet: its real path is taken at each start
        let store = std::path::absolute(store).unwrap_or_else(|_| store.to_path_buf());
        let mut hidden_dirs = vec![store];
        // the CI machine's own credentials in the home directory: the code under test
        // runs as the same user (root, on many CI machines), so it could read them
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()) {
            for rel in HOME_CREDENTIALS {
                let path = home.join(rel);
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => hidden_dirs.push(path),
                    Ok(_) => hidden_files.push(std::fs::canonicalize(&path).unwrap_or(path)),
                    Err(_) => {}
                }
            }
        }
        Confinement { config, hidden_dirs, hidden_files, unisolated: Mutex::new(None) }
    }

    /// A confinement that hides nothing of a run (a tool outside `run`, a unit test).
    pub fn standalone(config: IsolationConfig) -> Confinement {
        Confinement { config, hidden_dirs: Vec::new(), hidden_files: Vec::new(), unisolated: Mutex::new(None) }
    }

    pub fn config(&self) -> &IsolationConfig {
        &self.config
    }

    /// Why children of this run can not be isolated, `None` when they can (or the mode
    /// is `off`, which is asked for, not a failure: see [`Confinement::unisolated`]).
    pub fn why_not(&self) -> Option<String> {
        match self.config.mode {
            IsolationMode::Off => Some("[isolation] mode = \"off\"".to_string()),
            IsolationMode::Auto | IsolationMode::Required => unavailable().map(str::to_string),
        }
    }

    /// Note that part of this run's code under test ran without isolation elsewhere (a
    /// shard a merge takes over), unless a reason is noted already.
    pub fn note_unisolated(&self, why: String) {
        if let Ok(mut unisolated) = self.unisolated.lock() {
            unisolated.get_or_insert(why);
        }
    }

    /// Why a child of this run ran without isolation, if one did.
    pub fn unisolated(&self) -> Option<String> {
        self.unisolated.lock().ok().and_then(|u| u.clone())
    }

    /// The command that starts `program` with `args` in `cwd`: in the sandbox, with a
    /// scratch directory of its own, or plainly when the mode allows and no sandbox can
    /// be had. The caller adds the environment (plus `TMPDIR`: see
    /// [`Confined::scratch`]), stdio and process group. `Err`: `mode = "required"` and
    /// no sandbox, or the scratch directory could not be made.
    pub fn command(&self, program: &Path, args: &[String], cwd: &Path) -> Result<Confined, String> {
        // the sandbox starts in `cwd` by its absolute path, and a relative program with a
        // directory part is taken from there, as a plain child would take it
        let cwd = std::path::absolute(cwd).map_err(|e| format!("{}: {e}", cwd.display()))?;
        let program =
            if program.is_relative() && program.components().count() > 1 { cwd.join(program) } else { program.into() };
        let (cwd, program) = (cwd.as_path(), program.as_path());
        let sandboxed = match (self.config.mode, sandbox()) {
            (IsolationMode::Off, _) => None,
            (_, Ok(bwrap)) => Some(bwrap),
            (IsolationMode::Required, Err(why)) => {
                return Err(format!(
                    "[isolation] mode = \"required\", and the code under test cannot be isolated: {why}"
                ));
            }
            (IsolationMode::Auto, Err(_)) => None,
        };
        let Some(bwrap) = sandboxed else {
            if let Ok(mut unisolated) = self.unisolated.lock() {
                unisolated.get_or_insert_with(|| self.why_not().unwrap_or_default());
            }
            let mut command = Command::new(program);
            command.args(args).current_dir(cwd);
            return Ok(Confined { command, scratch: None, isolated: false });
        };
        let scratch = make_scratch().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
        let root = scratch_root();
        let mut argv = namespaces();
        let mut add = |items: &[&str]| argv.extend(items.iter().map(|s| s.to_string()));
        add(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        // the sandbox's /dev is a fresh one, which hides a project under the host's
        // `/dev/shm`: the child would not find its own code. Such a working directory is
        // shown there as everywhere else, read-only; what is hidden below is hidden after.
        // Only under `/dev/shm`, where files are plain files: a working directory of
        // `/dev` itself would bring the machine's devices and its whole `/dev/shm` back.
        if let Ok(real) = std::fs::canonicalize(cwd)
            && real.starts_with("/dev/shm")
            && real.is_dir()
        {
            let real = real.to_string_lossy();
            add(&["--ro-bind", &real, &real]);
        }
        for dir in self.hidden_dirs.iter().filter_map(|d| std::fs::canonicalize(d).ok()).filter(|d| d.is_dir()) {
            // empty, and read-only: a write there would vanish, but must fail as loudly
            // as one anywhere else
            let dir = dir.to_string_lossy();
            add(&["--tmpfs", &dir, "--remount-ro", &dir]);
        }
        for file in self.hidden_files.iter().filter(|f| f.exists()) {
            add(&["--ro-bind", "/dev/null", &file.to_string_lossy()]);
        }
        let (root, own) = (root.to_string_lossy(), scratch.path().to_string_lossy());
        add(&["--tmpfs", &root, "--bind", &own, &own, "--remount-ro", &root, "--chdir", &cwd.to_string_lossy(), "--"]);
        argv.push(program.to_string_lossy().into_owned());
        argv.extend(args.iter().cloned());
        let mut command = Command::new(bwrap);
        // bwrap itself starts in `cwd` too: a relative program path was resolved from it
        command.args(argv).current_dir(cwd);
        Ok(Confined { command, scratch: Some(scratch), isolated: true })
    }
}

static ROOT: OnceLock<PathBuf> = OnceLock::new();

/// The directory under which every child's scratch directory is made: one per
/// stateval process, hidden from every child but for the child's own.
fn scratch_root() -> PathBuf {
    ROOT.get_or_init(|| std::env::temp_dir().join(format!("stateval-scratch-{}", std::process::id()))).clone()
}

fn make_scratch() -> std::io::Result<Scratch> {
    use std::os::unix::fs::DirBuilderExt;
    let root = scratch_root();
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&root)?;
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dir = root.join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(Scratch(dir))
}

/// Remove this process's scratch root, once it is empty (each child's own directory is
/// removed when the child ends): at the end of every command. A root never made is
/// left as it is not.
pub fn remove_scratch_root() {
    if let Some(root) = ROOT.get() {
        let _ = std::fs::remove_dir(root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this machine has no sandbox, and a test needing one is skipped (said on
    /// stderr); under `STATEVAL_REQUIRE_SANDBOX` (CI) a missing sandbox fails instead.
    fn no_sandbox() -> bool {
        let Some(why) = unavailable() else { return false };
        assert!(std::env::var_os("STATEVAL_REQUIRE_SANDBOX").is_none(), "no sandbox: {why}");
        eprintln!("skipped: {why}");
        true
    }

    /// A fresh directory in the machine's `/dev/shm`, when there is a sandbox and such a
    /// directory can be made (else the test is skipped, as [`no_sandbox`] says).
    fn sandbox_and_shm_dir() -> Option<tempfile::TempDir> {
        if no_sandbox() {
            return None;
        }
        let dir = tempfile::tempdir_in("/dev/shm");
        if dir.is_err() {
            eprintln!("skipped: no writable /dev/shm");
        }
        dir.ok()
    }

    fn run(confinement: &Confinement, script: &str) -> (bool, String) {
        run_in(confinement, script, Path::new("/"))
    }

    /// `script` run by `sh` in `cwd` under `confinement`: whether it was isolated, and
    /// its stdout and stderr.
    fn run_in(confinement: &Confinement, script: &str, cwd: &Path) -> (bool, String) {
        let sh = PathBuf::from("/bin/sh");
        let confined = confinement.command(&sh, &["-c".into(), script.into()], cwd).unwrap();
        let mut command = confined.command;
        if let Some(scratch) = &confined.scratch {
            command.env("TMPDIR", scratch.path());
        }
        let out = command.output().unwrap();
        (confined.isolated, String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    }

    #[test]
    fn off_runs_plainly_and_says_why() {
        let c = Confinement::standalone(IsolationConfig { mode: IsolationMode::Off, sign_unisolated: false });
        let (isolated, out) = run(&c, "echo plain");
        assert!(!isolated);
        assert_eq!(out.trim(), "plain");
        assert_eq!(c.unisolated().as_deref(), Some("[isolation] mode = \"off\""));
    }

    #[test]
    fn a_project_under_dev_shm_is_seen_by_its_sandboxed_child_read_only_with_the_store_still_hidden() {
        let Some(dir) = sandbox_and_shm_dir() else { return };
        std::fs::write(dir.path().join("agent.txt"), "the agent's code").unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("secret"), "log").unwrap();
        let c = Confinement::new(IsolationConfig::default(), &store);
        let script = "cat agent.txt; echo; ls store | wc -l; (echo x > w) 2>/dev/null || echo ro";
        let (isolated, text) = run_in(&c, script, dir.path());
        assert!(isolated);
        // its own code readable, the store under it empty, nothing written
        assert_eq!(text.lines().collect::<Vec<_>>(), ["the agent's code", "0", "ro"], "{text}");
        assert!(!dir.path().join("w").exists());
    }

    /// An agent started in `/dev` itself keeps the sandbox's own `/dev`. Bound over it,
    /// the machine's `/dev` replaced the sandbox's device nodes with its own (mounted
    /// without devices, so even `/dev/null` refused a write); nor may the machine's
    /// `/dev/shm` (here a directory made there) come back.
    #[test]
    fn a_working_directory_of_dev_keeps_the_sandboxs_own_dev() {
        let Some(marker) = sandbox_and_shm_dir() else { return };
        let name = marker.path().file_name().unwrap().to_string_lossy().into_owned();
        let store = tempfile::tempdir().unwrap();
        let c = Confinement::new(IsolationConfig::default(), store.path());
        let script = format!("pwd; echo x > /dev/null && echo null; ls -d shm/{name} 2>/dev/null || echo hidden");
        let (isolated, text) = run_in(&c, &script, Path::new("/dev"));
        assert!(isolated);
        assert_eq!(text.lines().collect::<Vec<_>>(), ["/dev", "null", "hidden"], "{text}");
    }

    #[test]
    fn a_sandboxed_child_sees_its_own_processes_only_and_cannot_write_outside_its_scratch() {
        if no_sandbox() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("secret"), "log").unwrap();
        let c = Confinement::new(IsolationConfig::default(), &store);
        let script = format!(
            "ls /proc | grep -c '^[0-9]'; ls {store}; (echo x > {outside}/w) 2>/dev/null || echo ro; \
             echo y > \"$TMPDIR/w\" && echo scratch",
            store = store.display(),
            outside = dir.path().display()
        );
        let (isolated, out) = run(&c, &script);
        assert!(isolated);
        let lines: Vec<&str> = out.lines().collect();
        // bwrap's init, sh, and ls or grep: stateval's own process is not among them
        let pids: usize = lines[0].parse().unwrap();
        assert!(pids <= 4, "{out}");
        assert_eq!(&lines[1..], ["ro", "scratch"], "{out}");
        assert!(!dir.path().join("w").exists());
        assert_eq!(c.unisolated(), None);
    }
}
