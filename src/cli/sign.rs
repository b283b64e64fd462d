//! `stateval sign RUN_DIR --root ROOT`: sign a finished run apart from running it.
//!
//! The key that signs a run must never be where the code under test runs: the agent
//! (or a pull request's code in CI) runs with stateval's user id and could read it. So
//! CI runs `stateval run` (or `merge`) without `STATEVAL_SIGNING_KEY`, keeps the root its
//! output printed, and signs in a step of its own that runs no project code — this
//! command. It signs only what it has checked: the run must verify completely against
//! the root that step printed, exactly as `stateval verify RUN_DIR --root ROOT` checks
//! it (every log, every verdict file against the manifest, the files against each other
//! and the logs, the manifest against the root), so a run rewritten between the two
//! steps is refused rather than signed.
//!
//! RUN_DIR may also be a store (`.stateval`, a merge's `--out`): the run under
//! `RUN_DIR/runs/` whose manifest hashes to ROOT is signed (the root names one run).
//!
//! A run whose code under test ran unisolated (its `suite.json`, under the same root,
//! says so) is signed only when its pipeline said `[isolation] sign_unisolated = true`,
//! as `stateval run` would have signed it.
//!
//! Exit 0 when `manifest.sig` was written; 2, naming why, when no key is set, the run
//! does not verify, ROOT is not its manifest's root, or the run ran unisolated and its
//! pipeline does not sign such runs.

use std::path::{Path, PathBuf};

use super::{CliError, Exit};
use stateval::canon::Digest;
use stateval::evidence::manifest::{MANIFEST_FILE, RunManifest};
use stateval::evidence::signing::{KEY_VARIABLE, SIGNATURE_FILE};
use stateval::evidence::{CheckOptions, SecretKey, check_run};

#[derive(clap::Args)]
pub struct Args {
    /// The finished run's directory (`<store>/runs/<run-id>`), or a store holding it.
    #[arg(value_name = "RUN_DIR")]
    run_dir: PathBuf,
    /// The root the run's own step printed (its summary's last line, `root blake3:…`):
    /// the run must verify against it.
    #[arg(long, value_name = "DIGEST", value_parser = parse_root)]
    root: Digest,
}

fn parse_root(text: &str) -> Result<Digest, String> {
    text.trim().parse().map_err(|e| format!("{e} (the root as a run's summary prints it)"))
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let key = SecretKey::from_env().map_err(|e| CliError::invalid(e.to_string()))?.ok_or_else(|| {
        CliError::invalid(format!(
            "{KEY_VARIABLE} is not set: nothing to sign with (the key line itself, or the path of the file \
             `stateval keygen` wrote)"
        ))
    })?;
    let dir = run_dir(&args.run_dir, args.root)?;
    // exactly what `stateval verify RUN_DIR --root ROOT` checks
    let check = check_run(&dir, &CheckOptions { root: Some(args.root), ..CheckOptions::default() });
    if !check.passed() {
        let findings: Vec<String> = check.findings.iter().map(|f| format!("  {f}")).collect();
        return Err(CliError::invalid(format!(
            "{}: does not verify against --root {}; not signed:\n{}",
            dir.display(),
            args.root,
            findings.join("\n")
        )));
    }
    // a run the pipeline would not have signed itself is not signed here either: this
    // step cannot tell a sandbox that was missing from one that was there
    let suite = dir.join(stateval::outcome::SUITE_FILE);
    let extras = std::fs::read(&suite)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .map(|v| v["extras"].clone())
        .unwrap_or_default();
    if let Some(why) = stateval::isolation::refuses_signature(&extras) {
        return Err(CliError::invalid(format!("{}: {why}; not signed", dir.display())));
    }
    let signature = key.sign(args.root);
    signature.write(&dir).map_err(|e| CliError::internal(e.to_string()))?;
    super::out(format!("signed {}: root {} by {} ({SIGNATURE_FILE})", dir.display(), args.root, signature.public_key));
    Ok(Exit::Pass)
}

/// `dir` when it is a run directory (it has a manifest); else the one run under
/// `dir/runs/` whose manifest hashes to `root`.
fn run_dir(dir: &Path, root: Digest) -> Result<PathBuf, CliError> {
    if dir.join(MANIFEST_FILE).is_file() {
        return Ok(dir.to_path_buf());
    }
    let runs = dir.join("runs");
    let entries = std::fs::read_dir(&runs).map_err(|e| {
        CliError::invalid(format!(
            "{}: not a finished run (no {MANIFEST_FILE}) nor a store ({}: {e})",
            dir.display(),
            runs.display()
        ))
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        // `.deleting-*`: an earlier run being deleted beside a rerun of its id, or left
        // so by a kill; it holds that run's manifest, root and all, and is no run to sign
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|run| RunManifest::read(run).is_ok_and(|m| m.root() == root))
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CliError::invalid(format!(
            "{}: no run here has root {root}: the run was rewritten since that root was printed, or the root \
             is another run's",
            runs.display()
        ))),
        many => Err(CliError::invalid(format!(
            "{}: {} runs have root {root} ({}); name the run directory",
            runs.display(),
            many.len(),
            many.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))),
    }
}
