//! The run manifest: every log's head and event count, the plan's digest and the
//! stateval version, written as one canonical JSON line (`manifest.json`). Its digest
//! (blake3 under the manifest context) is the run's root.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canon::{self, Context, Digest};

/// The file a finished run's manifest is written to, in the run directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Names the manifest's format; a later format gets a new name.
pub const FORMAT: &str = "stateval-manifest/1";

/// One log of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogEntry {
    /// Relative to the run directory: `<case>/<k>.jsonl`.
    pub path: String,
    /// Hash of the last event; `None` for an empty log (which never verifies as a run).
    pub head: Option<Digest>,
    pub events: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunManifest {
    pub format: String,
    pub run_id: String,
    /// Digest over everything that decides the run's logs (the run id is its prefix).
    pub plan: Digest,
    pub stateval: String,
    /// In dataset order, each case's runs in order.
    pub logs: Vec<LogEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

impl RunManifest {
    pub fn new(run_id: &str, plan: Digest, logs: Vec<LogEntry>) -> Self {
        RunManifest {
            format: FORMAT.to_string(),
            run_id: run_id.to_string(),
            plan,
            stateval: env!("CARGO_PKG_VERSION").to_string(),
            logs,
        }
    }

    /// The manifest's canonical bytes (RFC 8785), as written and as hashed: written
    /// straight from the fields, keys in canonical order, so a manifest of 10,000 logs
    /// is never a `Value` tree (the test below holds it to the generic encoder).
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160 + self.logs.len() * 140);
        self.write_canonical(&mut out).expect("a Vec takes every write");
        out
    }

    /// [`RunManifest::canonical`], written to `out` a log at a time.
    fn write_canonical(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut piece = Vec::with_capacity(256);
        let text = |piece: &mut Vec<u8>, key: &[u8], value: &str| {
            piece.extend_from_slice(key);
            canon::write_canonical_str(piece, value);
        };
        text(&mut piece, b"{\"format\":", &self.format);
        piece.extend_from_slice(b",\"logs\":[");
        for (i, log) in self.logs.iter().enumerate() {
            if i > 0 {
                piece.push(b',');
            }
            assert!(log.events < 1 << 53, "a manifest holds no unsafe integers");
            piece.extend_from_slice(b"{\"events\":");
            piece.extend_from_slice(itoa::Buffer::new().format(log.events).as_bytes());
            match &log.head {
                Some(head) => text(&mut piece, b",\"head\":", &head.to_string()),
                None => piece.extend_from_slice(b",\"head\":null"),
            }
            text(&mut piece, b",\"path\":", &log.path);
            piece.push(b'}');
            out.write_all(&piece)?;
            piece.clear();
        }
        text(&mut piece, b"],\"plan\":", &self.plan.to_string());
        text(&mut piece, b",\"run_id\":", &self.run_id);
        text(&mut piece, b",\"stateval\":", &self.stateval);
        piece.push(b'}');
        out.write_all(&piece)
    }

    /// The run's root: the digest of the manifest's canonical bytes.
    pub fn root(&self) -> Digest {
        let mut digester = Hashing(canon::Digester::new(Context::Manifest));
        self.write_canonical(&mut digester).expect("hashing takes every write");
        digester.0.finish()
    }

    /// Write `manifest.json` into `dir` atomically (a temporary file renamed), so a
    /// killed run leaves either no manifest or a whole one. The bytes are streamed to
    /// the file and the hasher together: for 10,000 logs, never a megabyte and a half
    /// held at the end of a run.
    pub fn write(&self, dir: &Path) -> Result<Digest, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let mut root = None;
        crate::atomic::replace_with(&path, |file| {
            let mut both = Tee { file, hashing: Hashing(canon::Digester::new(Context::Manifest)) };
            self.write_canonical(&mut both)?;
            root = Some(both.hashing.0.finish());
            both.file.write_all(b"\n")
        })
        .map_err(|source| ManifestError::Io { path: path.clone(), source })?;
        Ok(root.expect("the manifest was written"))
    }

    /// Read `manifest.json` from a run directory. The file must be exactly the
    /// canonical form of what it holds, so its root is well defined.
    pub fn read(dir: &Path) -> Result<RunManifest, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = std::fs::read(&path).map_err(|source| ManifestError::Io { path: path.clone(), source })?;
        let invalid = |reason: String| ManifestError::Invalid { path: path.clone(), reason };
        let manifest: RunManifest =
            serde_json::from_slice(&bytes).map_err(|e| invalid(format!("not a stateval run manifest: {e}")))?;
        if manifest.format != FORMAT {
            return Err(invalid(format!("format \"{}\" is not \"{FORMAT}\"", manifest.format)));
        }
        let mut expected = manifest.canonical();
        expected.push(b'\n');
        if expected != bytes {
            return Err(invalid("not in canonical form (the manifest was edited by hand or by another tool)".into()));
        }
        Ok(manifest)
    }
}

/// A writer that hashes what it is given.
struct Hashing(canon::Digester);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes to a file and to the hasher alike.
struct Tee<'a> {
    file: &'a mut dyn std::io::Write,
    hashing: Hashing,
}

impl std::io::Write for Tee<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write_all(bytes)?;
        self.hashing.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunManifest {
        let head = canon::digest(Context::Event, b"x");
        RunManifest::new(
            "r-0123",
            canon::digest(Context::Content, b"plan"),
            vec![LogEntry { path: "case-a/0.jsonl".into(), head: Some(head), events: 12 }],
        )
    }

    #[test]
    fn the_canonical_bytes_are_the_generic_encoders_of_the_same_fields() {
        let head = canon::digest(Context::Event, b"y");
        let mut manifest = sample();
        manifest.logs.push(LogEntry { path: "kein-\u{e9}t\u{e9} \"q\"\\\u{1}/1.jsonl".into(), head: None, events: 0 });
        manifest.logs.push(LogEntry { path: "z/10.jsonl".into(), head: Some(head), events: (1 << 53) - 1 });
        for m in [sample(), manifest, RunManifest::new("r-\u{2028}", canon::digest(Context::Content, b""), vec![])] {
            let generic = canon::to_canonical(&serde_json::to_value(&m).unwrap()).unwrap();
            assert_eq!(String::from_utf8(m.canonical()).unwrap(), String::from_utf8(generic).unwrap());
        }
    }

    #[test]
    fn a_written_manifest_reads_back_with_the_same_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = sample().write(dir.path()).unwrap();
        let read = RunManifest::read(dir.path()).unwrap();
        assert_eq!((read.root(), read), (root, sample()));
        // streamed to the file and the hasher: the digest of the bytes written, whole
        let mut bytes = std::fs::read(dir.path().join(MANIFEST_FILE)).unwrap();
        assert_eq!(bytes.pop(), Some(b'\n'));
        assert_eq!((bytes.clone(), canon::digest(Context::Manifest, &bytes)), (sample().canonical(), root));
    }

    #[test]
    fn any_change_to_a_listed_log_changes_the_root() {
        let mut other = sample();
        other.logs[0].events = 11; // a lost tail
        assert_ne!(other.root(), sample().root());
    }

    #[test]
    fn a_reformatted_manifest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        sample().write(dir.path()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let pretty = serde_json::to_vec_pretty(&sample()).unwrap();
        std::fs::write(&path, pretty).unwrap();
        let err = RunManifest::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("canonical form"), "{err}");
    }
}
