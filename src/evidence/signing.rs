//! Signed roots: ed25519 over the run's root, so a forger who rewrites logs, manifest
//! and reports alike still fails `verify --pubkey` without the secret key.
//!
//! Keys are one-line text files (`stateval keygen`): `stateval-ed25519-secret:<hex>`
//! holds the 32-byte seed, `stateval-ed25519-public:<hex>` the verifying key. A run
//! signs when `STATEVAL_SIGNING_KEY` holds the secret line itself (as CI secrets are
//! passed) or the path of a file holding it. The signature goes beside the manifest in
//! `manifest.sig`; ed25519 signatures are deterministic, so signed runs stay
//! byte-identical.

use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::canon::Digest;

pub const SIGNATURE_FILE: &str = "manifest.sig";
/// The environment variable a run reads its signing key from.
pub const KEY_VARIABLE: &str = "STATEVAL_SIGNING_KEY";
const SECRET_PREFIX: &str = "stateval-ed25519-secret:";
const PUBLIC_PREFIX: &str = "stateval-ed25519-public:";
/// Signed bytes: this domain tag, then the root as text. The tag keeps a stateval
/// signature from being replayed as any other ed25519 message.
const DOMAIN: &[u8] = b"stateval run root v1\n";

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("{0}")]
    Key(String),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("the signature does not verify with {key}: the root or the signature was changed, or another key signed")]
    BadSignature { key: String },
}

/// A secret signing key.
pub struct SecretKey(SigningKey);

/// A public (verifying) key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

/// `manifest.sig`: who signed which root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureFile {
    pub algorithm: String,
    pub public_key: String,
    pub root: Digest,
    /// 64 bytes, hex.
    pub signature: String,
}

impl SecretKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<SecretKey, SigningError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| SigningError::Key(format!("no random source: {e}")))?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// The key named by `STATEVAL_SIGNING_KEY`, if it is set (an empty value is unset).
    pub fn from_env() -> Result<Option<SecretKey>, SigningError> {
        match std::env::var(KEY_VARIABLE) {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Self::from_setting(&v).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(SigningError::Key(format!("{KEY_VARIABLE} is not valid UTF-8")))
            }
        }
    }

    /// The key line itself, or the path of a file holding it.
    fn from_setting(value: &str) -> Result<SecretKey, SigningError> {
        let value = value.trim();
        if value.starts_with(SECRET_PREFIX) {
            return Self::parse(value).map_err(|reason| SigningError::Key(format!("{KEY_VARIABLE}: {reason}")));
        }
        let path = Path::new(value);
        let text = std::fs::read_to_string(path).map_err(|e| {
            SigningError::Key(format!(
                "{KEY_VARIABLE}: neither a key (\"{SECRET_PREFIX}…\") nor a readable key file: {}: {e}",
                path.display()
            ))
        })?;
        Self::parse(text.trim())
            .map_err(|reason| SigningError::Key(format!("{KEY_VARIABLE}: {}: {reason}", path.display())))
    }

    fn parse(line: &str) -> Result<SecretKey, String> {
        let hex = line.strip_prefix(SECRET_PREFIX).ok_or(format!("expected \"{SECRET_PREFIX}\" and 64 hex digits"))?;
        let seed: [u8; 32] = decode_hex(hex).ok_or(format!("expected \"{SECRET_PREFIX}\" and 64 hex digits"))?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    /// The key's text form, for the secret key file.
    pub fn to_line(&self) -> String {
        format!("{SECRET_PREFIX}{}", encode_hex(self.0.as_bytes()))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Sign a run's root.
    pub fn sign(&self, root: Digest) -> SignatureFile {
        let signature = self.0.sign(&message(root));
        SignatureFile {
            algorithm: "ed25519".into(),
            public_key: self.public().to_line(),
            root,
            signature: encode_hex(&signature.to_bytes()),
        }
    }
}

impl PublicKey {
    /// Read a public key file written by `stateval keygen`.
    pub fn read(path: &Path) -> Result<PublicKey, SigningError> {
        let text = std::fs::read_to_string(path).map_err(|source| SigningError::Io { path: path.into(), source })?;
        Self::parse(text.trim()).map_err(|reason| SigningError::Invalid { path: path.into(), reason })
    }

    pub fn parse(line: &str) -> Result<PublicKey, String> {
        let expected = || format!("expected \"{PUBLIC_PREFIX}\" and 64 hex digits");
        let hex = line.strip_prefix(PUBLIC_PREFIX).ok_or_else(expected)?;
        let bytes: [u8; 32] = decode_hex(hex).ok_or_else(expected)?;
        VerifyingKey::from_bytes(&bytes).map(PublicKey).map_err(|_| "not a valid ed25519 public key".to_string())
    }

    pub fn to_line(&self) -> String {
        format!("{PUBLIC_PREFIX}{}", encode_hex(self.0.as_bytes()))
    }
}

impl SignatureFile {
    pub fn write(&self, dir: &Path) -> Result<(), SigningError> {
        let value = serde_json::to_value(self).expect("a signature file is plain JSON");
        let mut bytes = crate::canon::to_canonical(&value).expect("a signature file holds no numbers");
        bytes.push(b'\n');
        let path = dir.join(SIGNATURE_FILE);
        crate::atomic::replace(&path, &bytes).map_err(|source| SigningError::Io { path, source })
    }

    /// `manifest.sig` in `dir`, or `None` when the run was not signed.
    pub fn read(dir: &Path) -> Result<Option<SignatureFile>, SigningError> {
        let path = dir.join(SIGNATURE_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(SigningError::Io { path, source }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SigningError::Invalid { path, reason: format!("not a stateval signature file: {e}") })
    }

    /// Check that `key` signed `root`. The key comes from the verifier, never from the
    /// file: a forger can write any key into the file.
    pub fn check(&self, key: &PublicKey, root: Digest) -> Result<(), SigningError> {
        let bad = || SigningError::BadSignature { key: key.to_line() };
        if self.algorithm != "ed25519" || self.root != root {
            return Err(bad());
        }
        let bytes: [u8; 64] = decode_hex(&self.signature).ok_or_else(bad)?;
        key.0.verify_strict(&message(root), &Signature::from_bytes(&bytes)).map_err(|_| bad())
    }
}

fn message(root: Digest) -> Vec<u8> {
    [DOMAIN, root.to_string().as_bytes()].concat()
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower-case hex of exactly `N` bytes.
fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let digits = hex.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{Context, digest};

    #[test]
    fn a_signed_root_verifies_with_its_public_key_only() {
        let key = SecretKey::generate().unwrap();
        let root = digest(Context::Manifest, b"m");
        let sig = key.sign(root);
        sig.check(&key.public(), root).unwrap();
        let other = SecretKey::generate().unwrap().public();
        assert!(matches!(sig.check(&other, root), Err(SigningError::BadSignature { .. })));
        let forged_root = digest(Context::Manifest, b"forged");
        assert!(sig.check(&key.public(), forged_root).is_err(), "a signature binds its root");
    }

    #[test]
    fn keys_round_trip_through_their_text_lines() {
        let key = SecretKey::generate().unwrap();
        let again = SecretKey::parse(&key.to_line()).unwrap();
        assert_eq!(again.public(), key.public());
        assert_eq!(PublicKey::parse(&key.public().to_line()).unwrap(), key.public());
        assert!(PublicKey::parse(&key.to_line()).is_err(), "a secret key is not a public key");
    }

    #[test]
    fn signing_is_deterministic() {
        let key = SecretKey::parse(&format!("{SECRET_PREFIX}{}", "07".repeat(32))).unwrap();
        let root = digest(Context::Manifest, b"m");
        assert_eq!(key.sign(root), key.sign(root));
    }
}
