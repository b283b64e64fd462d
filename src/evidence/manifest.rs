//! The run manifest: every log's head and event count, every file a verdict is read
//! from (its size and digest), the run's verdict, the plan's digest and the stateval
//! version, written as one canonical JSON line (`manifest.json`). Its digest (blake3
//! under the manifest context) is the run's root, so the root — and a signature over
//! it — covers what the run decided, not only the evidence it decided from.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canon::{self, Context, Digest};

/// The file a finished run's manifest is written to, in the run directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Names the manifest's format; a later format gets a new name.
pub const FORMAT: &str = "stateval-manifest/2";

/// The files of a run directory that verdicts are read from (`report`, `merge`,
/// `--reuse`): a run lists each of them it wrote, and `verify` refuses one it does not
/// list. `run.json` is the catalog's record, rebuilt by `reindex`, and read by nothing
/// that renders a verdict.
pub const VERDICT_FILES: [&str; 5] = ["cases.jsonl", "suite.json", "verdicts.jsonl", "units.jsonl", "shard.json"];

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

/// One file a verdict is read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// A name of [`VERDICT_FILES`], in the run directory.
    pub path: String,
    pub bytes: u64,
    /// blake3 under the content context, over the file's bytes.
    pub digest: Digest,
}

impl FileEntry {
    /// The entry of `dir/name` as it is on disk now (streamed: a large `cases.jsonl` is
    /// never held whole).
    pub fn of(dir: &Path, name: &str) -> std::io::Result<FileEntry> {
        let path = dir.join(name);
        let mut file = std::fs::File::open(&path)?;
        let mut digester = canon::Digester::new(Context::Content);
        let mut buf = vec![0u8; 64 << 10];
        let mut bytes = 0u64;
        loop {
            let n = std::io::Read::read(&mut file, &mut buf)?;
            if n == 0 {
                break;
            }
            digester.update(&buf[..n]);
            bytes += n as u64;
        }
        Ok(FileEntry { path: name.to_string(), bytes, digest: digester.finish() })
    }
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
    /// The verdict files the run wrote, in [`VERDICT_FILES`] order.
    pub files: Vec<FileEntry>,
    /// The run's verdict: every gate passed (a shard, which has no gates: every case
    /// passed).
    pub passed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

impl RunManifest {
    pub fn new(run_id: &str, plan: Digest, logs: Vec<LogEntry>, files: Vec<FileEntry>, passed: bool) -> Self {
        RunManifest {
            format: FORMAT.to_string(),
            run_id: run_id.to_string(),
            plan,
            stateval: env!("CARGO_PKG_VERSION").to_string(),
            logs,
            files,
            passed,
        }
    }

    /// The entry of a verdict file, when the run listed it.
    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.path == name)
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
        // keys in RFC 8785 order: files, format, logs, passed, plan, run_id, stateval
        piece.extend_from_slice(b"{\"files\":[");
        for (i, file) in self.files.iter().enumerate() {
            if i > 0 {
                piece.push(b',');
            }
            assert!(file.bytes < 1 << 53, "a manifest holds no unsafe integers");
            piece.extend_from_slice(b"{\"bytes\":");
            piece.extend_from_slice(itoa::Buffer::new().format(file.bytes).as_bytes());
            text(&mut piece, b",\"digest\":", &file.digest.to_string());
            text(&mut piece, b",\"path\":", &file.path);
            piece.push(b'}');
        }
        text(&mut piece, b"],\"format\":", &self.format);
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
        piece.extend_from_slice(if self.passed { b"],\"passed\":true" } else { b"],\"passed\":false" });
        text(&mut piece, b",\"plan\":", &self.plan.to_string());
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
        let (file, root) = self.stage(dir)?;
        let io = |source| ManifestError::Io { path: dir.join(MANIFEST_FILE), source };
        file.sync().map_err(io)?;
        file.place().map_err(io)?;
        Ok(root)
    }

    /// [`RunManifest::write`] up to the rename: `manifest.json`'s bytes under a temporary
    /// name beside it, not yet synced nor in place, and the run's root. A run syncs them
    /// while its logs are synced, and puts the file in place once they are.
    pub fn stage(&self, dir: &Path) -> Result<(crate::atomic::Unplaced, Digest), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let mut root = None;
        let file = crate::atomic::stage_with(&path, |file| {
            let mut both = Tee { file, hashing: Hashing(canon::Digester::new(Context::Manifest)) };
            self.write_canonical(&mut both)?;
            root = Some(both.hashing.0.finish());
            both.file.write_all(b"\n")
        })
        .map_err(|source| ManifestError::Io { path, source })?;
        Ok((file, root.expect("the manifest was written")))
    }

    /// Read `manifest.json` from a run directory. The file must be exactly the
    /// canonical form of what it holds, so its root is well defined.
    pub fn read(dir: &Path) -> Result<RunManifest, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = std::fs::read(&path).map_err(|source| ManifestError::Io { path: path.clone(), source })?;
        let invalid = |reason: String| ManifestError::Invalid { path: path.clone(), reason };
        // an earlier format is named as such, before its missing fields are
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && let Some(format) = map.get("format").and_then(serde_json::Value::as_str)
            && format != FORMAT
        {
            return Err(invalid(format!(
                "format \"{format}\" is not \"{FORMAT}\": written by an earlier stateval, whose manifest did not \
                 cover the run's verdict files; run the pipeline again with this version"
            )));
        }
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
            vec![FileEntry { path: "cases.jsonl".into(), bytes: 40, digest: canon::digest(Context::Content, b"c") }],
            false,
        )
    }

    #[test]
    fn the_canonical_bytes_are_the_generic_encoders_of_the_same_fields() {
        let head = canon::digest(Context::Event, b"y");
        let mut manifest = sample();
        manifest.logs.push(LogEntry { path: "kein-\u{e9}t\u{e9} \"q\"\\\u{1}/1.jsonl".into(), head: None, events: 0 });
        manifest.logs.push(LogEntry { path: "z/10.jsonl".into(), head: Some(head), events: (1 << 53) - 1 });
        manifest.files.push(FileEntry { path: "suite \"\u{e9}\"".into(), bytes: (1 << 53) - 1, digest: head });
        manifest.passed = true;
        let empty = RunManifest::new("r-\u{2028}", canon::digest(Context::Content, b""), vec![], vec![], true);
        for m in [sample(), manifest, empty] {
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
    fn any_change_to_a_verdict_file_or_the_verdict_changes_the_root() {
        let mut edited = sample();
        edited.files[0].digest = canon::digest(Context::Content, b"every case passed");
        let mut flipped = sample();
        flipped.passed = true;
        let mut dropped = sample();
        dropped.files.clear();
        for other in [edited, flipped, dropped] {
            assert_ne!(other.root(), sample().root());
        }
    }

    #[test]
    fn a_file_entry_is_the_digest_of_the_bytes_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("cases.jsonl"), &bytes).unwrap();
        let entry = FileEntry::of(dir.path(), "cases.jsonl").unwrap();
        assert_eq!((entry.bytes, entry.digest), (200_000, canon::digest(Context::Content, &bytes)));
    }

    #[test]
    fn a_manifest_of_the_earlier_format_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let old = r#"{"format":"stateval-manifest/1","logs":[],"plan":"x","run_id":"r","stateval":"0.1.0"}"#;
        std::fs::write(dir.path().join(MANIFEST_FILE), format!("{old}\n")).unwrap();
        let err = RunManifest::read(dir.path()).unwrap_err().to_string();
        assert!(err.contains("stateval-manifest/1") && err.contains("earlier stateval"), "{err}");
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
