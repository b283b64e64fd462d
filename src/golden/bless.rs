//! Writing goldens: atomically, so a reader (a concurrent `stateval run`, an editor, a
//! killed bless) sees the old golden or the new one, never half of one.
//!
//! The bytes go to a temporary file in the golden's own directory (a rename is atomic
//! only within one file system), are fsync'd, and the file is renamed over the golden.
//! A golden whose bytes are already right is left alone, so blessing twice touches
//! nothing and `git status` stays clean.

use std::fs;
use std::io;
use std::path::Path;

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
    crate::atomic::replace(path, bytes)?;
    Ok(existing)
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
}
