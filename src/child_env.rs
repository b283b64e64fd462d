//! The environment of every process stateval starts: the code under test and the
//! team's graders are untrusted, so no secret of stateval's reaches them.
//!
//! An external agent, a custom grader, `stateval mcp-stdio` (started by the agent) and
//! whatever they start in turn may be — in stateval's threat model *are* — the attacker
//! of the verdict. A signing key in their environment would let them sign a forged run
//! that passes `verify --pubkey`; a provider key would let them call a live model
//! behind the replay. So every child starts from an empty environment
//! ([`std::process::Command::env_clear`]) filled with [`inherited`]: the parent's
//! variables less those [`withheld`], plus the variables a profile or grader names in
//! `env_passthrough` — a deliberate, reviewed exception, never a default.
//!
//! What is withheld is a name rule, not a list of vendors: stateval's own signing key,
//! and every variable whose name says it holds a credential (`*_API_KEY`, `*_TOKEN`,
//! `*_SECRET`, `*_PASSWORD`, …). A rule by name over-withholds a harmless variable now
//! and then (`env_passthrough` brings it back); a list of vendors would under-withhold
//! the next vendor's key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The variable that names stateval's ed25519 signing key (`stateval keygen`).
pub const SIGNING_KEY_VAR: &str = "STATEVAL_SIGNING_KEY";

/// Name endings that say a variable holds a credential (compared upper-cased).
const CREDENTIAL_SUFFIXES: &[&str] = &[
    "_KEY",
    "_KEYS",
    "_TOKEN",
    "_TOKENS",
    "_SECRET",
    "_SECRETS",
    "_PASSWORD",
    "_PASSWD",
    "_PASS",
    "_CREDENTIAL",
    "_CREDENTIALS",
    "_PRIVATE_KEY_PATH",
    "_KEY_FILE",
    "_KEYFILE",
];

/// Whole names that hold credentials without saying so by their ending.
const CREDENTIAL_NAMES: &[&str] = &[
    SIGNING_KEY_VAR,
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AWS_SESSION_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AZURE_CLIENT_SECRET",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "NETRC",
    "PGPASSWORD",
    "MYSQL_PWD",
    "DATABASE_URL",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DOCKER_AUTH_CONFIG",
    "NPM_CONFIG__AUTH",
    "TWINE_PASSWORD",
    "CARGO_REGISTRY_TOKEN",
];

/// Whether `name` is kept from every child process (unless passed through by name).
pub fn withheld(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_NAMES.contains(&upper.as_str())
        || CREDENTIAL_SUFFIXES.iter().any(|s| upper.ends_with(s))
        // `AUTHORIZATION`, `GITHUB_AUTH`, `OPENAI_APIKEY`: said without an underscore
        || upper.ends_with("APIKEY")
        || upper.contains("AUTH_TOKEN")
}

/// This process's environment less what is [`withheld`], plus each variable of
/// `passthrough` that is set (a withheld one too: the profile asked for it by name).
/// The signing key is never passed through: nothing a child does needs to sign a run.
pub fn inherited(passthrough: &[String]) -> BTreeMap<String, String> {
    from(std::env::vars(), passthrough)
}

/// [`inherited`] over any list of variables (the tests give their own).
pub fn from(vars: impl IntoIterator<Item = (String, String)>, passthrough: &[String]) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(name, _)| name != SIGNING_KEY_VAR && (!withheld(name) || passthrough.iter().any(|p| p == name)))
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

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| (n.to_string(), format!("value of {n}"))).collect()
    }

    #[test]
    fn credentials_and_the_signing_key_are_withheld() {
        for name in [
            "STATEVAL_SIGNING_KEY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "SLACK_BOT_TOKEN",
            "DB_PASSWORD",
            "STRIPE_SECRET",
            "HF_TOKEN",
            "DATABASE_URL",
            "openai_apikey",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(withheld(name), "{name}");
        }
    }

    #[test]
    fn ordinary_variables_reach_children() {
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TZ",
            "OPENAI_BASE_URL",
            "STATEVAL_CASE",
            "KEYBOARD",
            "CI",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!withheld(name), "{name}");
        }
    }

    #[test]
    fn a_passthrough_brings_back_a_withheld_variable_but_never_the_signing_key() {
        let env = from(
            vars(&["PATH", "GITHUB_TOKEN", "OPENAI_API_KEY", SIGNING_KEY_VAR]),
            &["GITHUB_TOKEN".to_string(), SIGNING_KEY_VAR.to_string()],
        );
        assert_eq!(env.keys().map(String::as_str).collect::<Vec<_>>(), ["GITHUB_TOKEN", "PATH"]);
        assert!(check_passthrough(&[SIGNING_KEY_VAR.to_string()]).unwrap_err().contains("only stateval signs"));
        assert!(check_passthrough(&["A=B".to_string()]).is_err());
        assert!(check_passthrough(&["GITHUB_TOKEN".to_string()]).is_ok());
    }
}
