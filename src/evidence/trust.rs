//! Taking a run over: what an earlier run or a shard must show before `run --reuse`,
//! `merge` or `golden accept` takes its verdicts as its own, and how a report names who
//! signed the run it shows.
//!
//! A run directory that verifies against its own manifest proves only that it is
//! consistent: whoever can write the directory can write a consistent forgery (edit a
//! verdict, re-chain the logs, recompute the manifest), and the agent under test runs
//! with stateval's user id. Only a signature by a key the forger does not hold tells a
//! run stateval signed from one planted beside it. So a command that signs its result
//! takes over only runs signed by that same key — anything less would turn a keyless
//! forgery into a signed verdict. A command that signs nothing may take over unsigned
//! runs, since its result is no more trusted than they are, and it says so.

use std::path::Path;

use super::signing::{KEY_VARIABLE, PublicKey, SIGNATURE_FILE, SecretKey, SignatureFile};
use crate::canon::Digest;

/// What a report says of a run without a signature.
pub const UNSIGNED: &str = "unsigned";

/// What an earlier run must carry to be taken over.
#[derive(Debug, Clone)]
pub enum Trust {
    /// A signature of its root by this key: the key the taking command signs with.
    SignedBy(PublicKey),
    /// Nothing: the taking command signs nothing either.
    Unsigned,
}

impl Trust {
    /// The trust of a command that signs with `signer` (`STATEVAL_SIGNING_KEY`), if any.
    pub fn of_signer(signer: Option<&SecretKey>) -> Trust {
        match signer {
            Some(key) => Trust::SignedBy(key.public()),
            None => Trust::Unsigned,
        }
    }

    /// Does the run in `dir`, whose manifest hashes to `root`, carry what this trust
    /// asks for? The error says why not, without naming `dir` (the caller does).
    pub fn check(&self, dir: &Path, root: Digest) -> Result<(), String> {
        let Trust::SignedBy(key) = self else { return Ok(()) };
        let ours = key.to_line();
        match SignatureFile::read(dir).map_err(|e| e.to_string())? {
            None => Err(format!(
                "not signed (no {SIGNATURE_FILE}), and a result signed with {KEY_VARIABLE} ({ours}) takes over \
                 only runs signed by that key: an unsigned run could have been written by anyone"
            )),
            Some(sig) if sig.check(key, root).is_ok() => Ok(()),
            Some(sig) => Err(format!(
                "its {SIGNATURE_FILE} is not a signature of its root by {KEY_VARIABLE}'s key ({ours}; the file names \
                 {}): a result signed with that key takes over only runs it signed",
                sig.public_key
            )),
        }
    }

    /// The line a taking command prints when it takes over unsigned runs.
    pub fn notice(&self, command: &str, what: &str) -> Option<String> {
        match self {
            Trust::SignedBy(_) => None,
            Trust::Unsigned => Some(format!(
                "{command}: taking over unsigned {what}: no {KEY_VARIABLE}, so this run is not signed either"
            )),
        }
    }
}

/// How a report names the signature of a run it was rendered from: `unsigned`, `signed
/// by <public key line>` when `manifest.sig` verifies with the key it names (whoever
/// holds that key signed this root; who that is only a key of the reader's own can
/// tell), or that the file does not verify. An error: the file cannot be read.
pub fn describe(dir: &Path, root: Digest) -> Result<String, String> {
    match SignatureFile::read(dir).map_err(|e| e.to_string())? {
        None => Ok(UNSIGNED.to_string()),
        Some(sig) => {
            let named = PublicKey::parse(&sig.public_key).ok();
            match named.filter(|key| sig.check(key, root).is_ok()) {
                Some(_) => Ok(signed_by(&sig.public_key)),
                None => Ok(format!(
                    "invalid signature: {SIGNATURE_FILE} does not verify with the key it names ({})",
                    sig.public_key
                )),
            }
        }
    }
}

/// `signed by <public key line>`: what a signed run's own reports say.
pub fn signed_by(public_key: &str) -> String {
    format!("signed by {public_key}")
}

/// `verified with <public key line>`: a report rendered with the reader's own key.
pub fn verified_with(key: &PublicKey) -> String {
    format!("verified with {}", key.to_line())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{Context, digest};

    #[test]
    fn a_signing_command_trusts_only_its_own_signature() {
        let dir = tempfile::tempdir().unwrap();
        let root = digest(Context::Manifest, b"m");
        let ours = SecretKey::generate().unwrap();
        let trust = Trust::of_signer(Some(&ours));
        let unsigned = trust.check(dir.path(), root).unwrap_err();
        assert!(unsigned.contains("not signed"), "{unsigned}");
        assert!(Trust::Unsigned.check(dir.path(), root).is_ok(), "a command that signs nothing asks for nothing");

        SecretKey::generate().unwrap().sign(root).write(dir.path()).unwrap();
        let foreign = trust.check(dir.path(), root).unwrap_err();
        assert!(foreign.contains("is not a signature of its root"), "{foreign}");

        ours.sign(root).write(dir.path()).unwrap();
        trust.check(dir.path(), root).unwrap();
        let other_root = digest(Context::Manifest, b"forged");
        assert!(trust.check(dir.path(), other_root).is_err(), "the signature binds the root");
    }

    #[test]
    fn a_report_names_the_signer_or_says_unsigned_or_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let root = digest(Context::Manifest, b"m");
        assert_eq!(describe(dir.path(), root).unwrap(), "unsigned");
        let key = SecretKey::generate().unwrap();
        key.sign(root).write(dir.path()).unwrap();
        assert_eq!(describe(dir.path(), root).unwrap(), format!("signed by {}", key.public().to_line()));
        let other_root = digest(Context::Manifest, b"forged");
        assert!(describe(dir.path(), other_root).unwrap().starts_with("invalid signature"));
    }
}
