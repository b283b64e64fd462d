//! Writing goldens: atomically, so a reader (a concurrent `stateval run`, an editor, a
//! killed bless) sees the old golden or the new one, never half of one.
//!
//! The bytes go to a temporary file in the golden's own directory (a rename is atomic
//! only within one file system), are fsync'd, and the file is renamed over the golden.
//! A golden whose bytes are already right is left alone, so blessing twice touches
//! nothing and `git status` stays clean.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What [`write_atomic`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The golden did not exist.
    Created = 0,
    /// The golden existed with other bytes.
    Updated,
    /// The golden already held these bytes.
    Unchanged,
}

impl Written {
    pub fn as_str(self) -> &'static str {
        match self {
            Written::Created => "created",
            Written::Updated => "updated",
            Written::Unchanged => "unchanged",
        }
    }
}

/// Make `path` hold exactly `bytes`, atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<Written> {
    let existing = match fs::read(path) {
        Ok(old) if old == bytes => return Ok(Written::Unchanged),
        Ok(_) => Written::Updated,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Written::Created,
        Err(e) => return Err(e),
    };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = temp_path(path);
    let result = write_then_rename(&tmp, path, bytes);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // the rename is durable once the directory entry is; directories cannot be opened
    // for syncing everywhere (Windows), and the golden is already complete either way
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(existing)
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    // a temporary file left by a killed bless of this same golden is ours to replace
    let mut file = match OpenOptions::new().write(true).create_new(true).open(tmp) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(tmp)?;
            OpenOptions::new().write(true).create_new(true).open(tmp)?
        }
        other => other?,
    };
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(tmp, path)
}

/// `dir/.name.jsonl.<pid>.tmp`: hidden, beside the golden, one per process.
fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_golden_is_created_then_updated_then_left_alone_and_no_temporary_file_remains() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("examples/treasury/case.0.jsonl");
        assert_eq!(write_atomic(&path, b"one\n").unwrap(), Written::Created);
        assert_eq!(write_atomic(&path, b"two\n").unwrap(), Written::Updated);
        assert_eq!(write_atomic(&path, b"two\n").unwrap(), Written::Unchanged);
        assert_eq!(fs::read(&path).unwrap(), b"two\n");
        let names: Vec<String> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["case.0.jsonl"]);
    }

    #[test]
    fn a_temporary_file_left_by_a_killed_bless_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("case.0.jsonl");
        fs::write(temp_path(&path), b"half a gol").unwrap();
        assert_eq!(write_atomic(&path, b"whole\n").unwrap(), Written::Created);
        assert_eq!(fs::read(&path).unwrap(), b"whole\n");
        assert!(!temp_path(&path).exists());
    }
}
