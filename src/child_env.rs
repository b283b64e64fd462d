//! The environment of every process stateval starts: the code under test and the
//! team's graders are untrusted, so no secret of stateval's reaches them.
//!
//! An external agent, a custom grader, `stateval mcp-stdio` (started by the agent) and
//! whatever they start in turn may be — in stateval's threat model *are* — the attacker
//! of the verdict. A signing key in their environment would let them sign a forged run
//! that passes `verify --pubkey`; a CI token, a webhook URL or a database password
//! would let them reach past the run. So every child starts from an empty environment
//! ([`std::process::Command::env_clear`]) filled from an allow-list ([`inherited`]):
//! the few variables a process needs to start and behave as it does on the machine
//! ([`STARTUP`], the `LC_*` locale), plus the variables a profile or grader names in
//! `env_passthrough` — a deliberate, reviewed exception, never a default — plus what
//! the profile sets itself in `env`.
//!
//! An allow-list, not a deny-list: the credentials a CI machine holds have names no
//! rule foresees (`CI_JOB_JWT`, `SLACK_WEBHOOK_URL`, `SENTRY_DSN`, `REDIS_URL` with its
//! password, `PASSWORD`), and a rule by name under-withholds the next one. What a
//! child needs beyond the list, its profile names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The variable that names stateval's ed25519 signing key (`stateval keygen`).
pub const SIGNING_KEY_VAR: &str = "STATEVAL_SIGNING_KEY";

/// What a process needs to start and to behave as it does on this machine: where its
/// programs are, whose home it is, its locale and terminal. (`TMPDIR` is the child's
/// own scratch directory under isolation, `TZ` is UTC for an agent: both are set by
/// the caller over these.)
pub const STARTUP: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"];

/// Whether `name` reaches a child without being named: one of [`STARTUP`] or a locale
/// variable (`LC_ALL`, `LC_CTYPE`, …).
pub fn allowed(name: &str) -> bool {
    STARTUP.contains(&name) || name.starts_with("LC_")
}

/// This process's variables that are [`allowed`], plus each variable of `passthrough`
/// that is set. The signing key is never passed through: nothing a child does needs to
/// sign a run.
pub fn inherited(passthrough: &[String]) -> BTreeMap<String, String> {
    from(std::env::vars(), passthrough)
}

/// [`inherited`] over any list of variables (the tests give their own).
pub fn from(vars: impl IntoIterator<Item = (String, String)>, passthrough: &[String]) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(name, _)| name != SIGNING_KEY_VAR && (allowed(name) || passthrough.iter().any(|p| p == name)))
        .collect()
}

/// A name `env_passthrough` may hold: never the signing key, never empty or with `=`.
pub fn check_passthrough(names: &[String]) -> Result<(), String> {
    for name in names {
        if name == SIGNING_KEY_VAR {
            return Err(format!(
                "env_passthrough: {SIGNING_KEY_VAR} never reaches a child process: only stateval signs a run"
            ));
        }
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(format!("env_passthrough: {name:?} is not a variable name"));
        }
    }
    Ok(())
}

/// Where a child's `program` is: a path with a directory part is taken relative to
/// `cwd`, a bare name is the first executable of that name on `PATH`. The error says
/// where it looked, for a load error that names the profile.
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

/// File extensions of the scripts an interpreter is given (`python3 graders/tone.py`).
/// Only such arguments are checked: any other may be a flag, a module name, or a path
/// the program is about to create.
const SCRIPT_EXTENSIONS: &[&str] = &["py", "js", "mjs", "cjs", "ts", "rb", "sh", "bash", "pl", "php", "lua", "r", "jl"];

/// The first argument of `command` (after the program) that names a script, relative
/// to `cwd`, which does not exist: its index and the error, with a did-you-mean among
/// the files beside where it was looked for. A mistyped script path otherwise fails
/// every case at run time, each with the interpreter's own "can't open file".
pub fn missing_script(command: &[String], cwd: &Path) -> Option<(usize, String)> {
    command.iter().enumerate().skip(1).find_map(|(i, arg)| {
        let path = Path::new(arg);
        let script = !arg.starts_with('-')
            && !arg.contains("://")
            && path.extension().and_then(|e| e.to_str()).is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e));
        if !script || cwd.join(path).is_file() {
            return None;
        }
        let dir = cwd.join(path.parent().unwrap_or(Path::new("")));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let hint = crate::diag::did_you_mean(&name, names.iter().map(String::as_str))
            .map(|close| {
                let beside = path.parent().filter(|p| !p.as_os_str().is_empty());
                format!(
                    " (did you mean \"{}\"?)",
                    beside.map_or(close.to_string(), |p| p.join(close).display().to_string())
                )
            })
            .unwrap_or_default();
        Some((i, format!("script \"{arg}\" does not exist{hint}")))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_script_argument_is_named_with_the_file_it_meant_and_other_arguments_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("graders")).unwrap();
        std::fs::write(dir.path().join("graders/tone.py"), "").unwrap();
        let cmd = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(
            missing_script(&cmd(&["python3", "-u", "graders/tnoe.py"]), dir.path()),
            Some((2, "script \"graders/tnoe.py\" does not exist (did you mean \"graders/tone.py\"?)".into()))
        );
        assert_eq!(missing_script(&cmd(&["python3", "graders/tone.py"]), dir.path()), None);
        // a module, a flag, a URL, an output file: not scripts
        assert_eq!(
            missing_script(&cmd(&["python3", "-m", "graders.tone", "--out=x.py", "out/report.json"]), dir.path()),
            None
        );
    }

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| (n.to_string(), format!("value of {n}"))).collect()
    }

    /// What an outside tester found still reaching agents and graders when the
    /// environment was a deny-list by name: none of it does now.
    const CREDENTIALS: &[&str] = &[
        "STATEVAL_SIGNING_KEY",
        "OPENAI_API_KEY",
        "OPENAI_API_KEY_2",
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "GITHUB_PAT",
        "CI_JOB_JWT",
        "CI_JOB_TOKEN",
        "SLACK_WEBHOOK_URL",
        "SENTRY_DSN",
        "REDIS_URL",
        "DATABASE_URL",
        "PASSWORD",
        "NPM_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "KUBECONFIG",
        "DOCKER_CONFIG",
        "SSH_AUTH_SOCK",
        "VAULT_ADDR",
        "AZURE_CLIENT_SECRET",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "HF_TOKEN",
    ];

    #[test]
    fn only_what_a_process_needs_to_start_reaches_a_child() {
        let mut names: Vec<&str> = CREDENTIALS.to_vec();
        names.extend(["PATH", "HOME", "LANG", "LC_ALL", "TERM", "CI", "KEYBOARD", "PYTHONPATH"]);
        let env = from(vars(&names), &[]);
        assert_eq!(env.keys().map(String::as_str).collect::<Vec<_>>(), ["HOME", "LANG", "LC_ALL", "PATH", "TERM"]);
    }

    #[test]
    fn a_passthrough_brings_a_variable_by_name_but_never_the_signing_key() {
        let env = from(
            vars(&["PATH", "GITHUB_TOKEN", "OPENAI_API_KEY", "PYTHONPATH", SIGNING_KEY_VAR]),
            &["GITHUB_TOKEN".to_string(), "PYTHONPATH".to_string(), SIGNING_KEY_VAR.to_string()],
        );
        assert_eq!(env.keys().map(String::as_str).collect::<Vec<_>>(), ["GITHUB_TOKEN", "PATH", "PYTHONPATH"]);
        assert!(check_passthrough(&[SIGNING_KEY_VAR.to_string()]).unwrap_err().contains("only stateval signs"));
        assert!(check_passthrough(&["A=B".to_string()]).is_err());
        assert!(check_passthrough(&["GITHUB_TOKEN".to_string()]).is_ok());
    }
}
