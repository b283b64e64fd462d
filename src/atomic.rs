//! Files replaced whole or not at all: written to a temporary file beside the target,
//! fsync'd, then renamed over it, so a reader — or a process killed half-way — sees
//! the old file or the whole new one, never part of either. Manifests, plans, goldens,
//! imported logs and recordings go through here; reports stream through
//! `report::write_file`, which names the step that failed.

use std::fs::{self, OpenOptions};
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

use crate::canon::{Digest, Digesting};

/// Make `path` hold exactly `bytes`. Parent directories are created.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_checked(path, bytes, |_| Ok(()))
}

/// [`replace`], after `check` has read the written temporary file: a refusal leaves
/// `path` as it was and no temporary file behind.
pub fn replace_checked(path: &Path, bytes: &[u8], check: impl FnOnce(&Path) -> Result<(), String>) -> io::Result<()> {
    replace_streamed(path, |file| file.write_all(bytes), check)
}

/// [`replace`] with what `write` writes, streamed to the file rather than held whole.
pub fn replace_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    replace_streamed(
        path,
        |file| {
            let mut out = io::BufWriter::with_capacity(64 * 1024, file);
            write(&mut out)?;
            out.flush()
        },
        |_| Ok(()),
    )
}

/// A file [`replace_unsynced`] put in place, its bytes and its name not yet on disk.
#[must_use = "the file is durable only once synced"]
pub struct Unsynced {
    file: fs::File,
    dir: PathBuf,
}

impl Unsynced {
    /// Make the file's bytes, then its directory entry, durable.
    pub fn sync(self) -> io::Result<()> {
        self.file.sync_all()?;
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// [`replace`], with the two fsyncs left to the caller ([`Unsynced::sync`]): a process
/// killed at any point still finds the old file or the whole new one (the rename is
/// atomic whatever reaches the disk), but until the sync a power loss may leave the new
/// file empty. For a file that must be in place before work begins and durable only by
/// the time that work is: a run's `run.json`, whose two fsyncs held back every case.
pub fn replace_unsynced(path: &Path, bytes: &[u8]) -> io::Result<Unsynced> {
    let dir = parent_dir(path);
    fs::create_dir_all(dir)?;
    let tmp = temp_path(path);
    let result = create_temp(&tmp)
        .and_then(|mut file| file.write_all(bytes).map(|()| file))
        .and_then(|file| fs::rename(&tmp, path).map(|()| file));
    match result {
        Ok(file) => Ok(Unsynced { file, dir: dir.to_path_buf() }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// A file written beside its target under a temporary name, not yet in place: its bytes
/// can be synced with other files' ([`Unplaced::temp`]), and [`Unplaced::place`] renames
/// it over the target and syncs the directory. Dropped unplaced, the temporary file goes.
///
/// It keeps the file it wrote open, with the length and digest of what it wrote: a
/// temporary name is found by anything that lists the directory, so what is put in place
/// is first checked to be that file, holding those bytes, never what stands under the
/// name by then.
#[must_use = "a staged file is removed unless placed"]
pub struct Unplaced {
    tmp: PathBuf,
    path: PathBuf,
    file: fs::File,
    written: (u64, Digest),
    placed: bool,
}

/// Write `bytes` beside `path` under a temporary name (parent directories created),
/// neither synced nor in place (see [`Unplaced`]).
pub fn stage(path: &Path, bytes: &[u8]) -> io::Result<Unplaced> {
    stage_with(path, |file| file.write_all(bytes))
}

/// [`stage`] with what `write` writes, streamed to the file rather than held whole.
pub fn stage_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<Unplaced> {
    let dir = parent_dir(path);
    fs::create_dir_all(dir)?;
    let tmp = temp_path(path);
    let file = create_temp(&tmp)?;
    let mut out = io::BufWriter::with_capacity(64 * 1024, Digesting::new(&file));
    let written = write(&mut out).and_then(|()| out.into_inner().map_err(io::IntoInnerError::into_error));
    match written {
        Ok(digesting) => {
            let (_, bytes, digest) = digesting.finish();
            Ok(Unplaced { tmp, path: path.to_path_buf(), file, written: (bytes, digest), placed: false })
        }
        // a failure leaves nothing behind
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

impl Unplaced {
    /// The temporary file, to be synced before [`Unplaced::place`].
    pub fn temp(&self) -> &Path {
        &self.tmp
    }

    /// Make the file's bytes durable, under its temporary name.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    /// Rename the file over its target and make the name durable. Its bytes must have
    /// been synced first ([`Unplaced::sync`], or the caller syncs [`Unplaced::temp`] with
    /// other files): a file renamed unsynced may be empty after a power loss.
    ///
    /// Refused, with [`io::ErrorKind::InvalidData`] and the target left as it was, when
    /// the temporary name no longer stands for the file written, or that file no longer
    /// holds what was written to it. Another file renamed over the temporary name after
    /// that check, before the rename, is found at the target once it is there: it is
    /// removed and the same error returned, so what the target is left holding is never
    /// a file the caller did not write.
    pub fn place(self) -> io::Result<()> {
        self.check()?;
        self.rename_checked()
    }

    /// [`Unplaced::place`] after its check: the rename, and the name's file confirmed to
    /// be the one written.
    fn rename_checked(mut self) -> io::Result<()> {
        fs::rename(&self.tmp, &self.path)?;
        self.placed = true;
        if !self.names_held(&self.path)? {
            let _ = fs::remove_file(&self.path);
            return Err(changed());
        }
        let dir = parent_dir(&self.path);
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Does `name` stand for the file this value wrote (the same inode, not a link)?
    fn names_held(&self, name: &Path) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let (held, named) = (self.file.metadata()?, fs::symlink_metadata(name)?);
        Ok((held.dev(), held.ino()) == (named.dev(), named.ino()))
    }

    /// The temporary name still names the file written, which holds what was written;
    /// [`io::ErrorKind::InvalidData`] if not.
    pub fn check(&self) -> io::Result<()> {
        if !self.names_held(&self.tmp)? {
            return Err(changed());
        }
        let mut read = &self.file;
        read.seek(io::SeekFrom::Start(0))?;
        let mut digesting = Digesting::new(io::sink());
        io::copy(&mut read, &mut digesting)?;
        let (_, bytes, digest) = digesting.finish();
        if (bytes, digest) != self.written {
            return Err(changed());
        }
        Ok(())
    }
}

/// What [`Unplaced::place`] refuses a file with.
fn changed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "changed since it was written")
}

impl Drop for Unplaced {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

fn replace_streamed(
    path: &Path,
    write: impl FnOnce(&mut fs::File) -> io::Result<()>,
    check: impl FnOnce(&Path) -> Result<(), String>,
) -> io::Result<()> {
    let dir = parent_dir(path);
    fs::create_dir_all(dir)?;
    let tmp = temp_path(path);
    let result = write_synced(&tmp, write)
        .and_then(|()| check(&tmp).map_err(io::Error::other))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // the rename is durable once the directory entry is; not every platform can open a
    // directory to sync it, and the file is complete either way
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_synced(tmp: &Path, write: impl FnOnce(&mut fs::File) -> io::Result<()>) -> io::Result<()> {
    let mut file = create_temp(tmp)?;
    write(&mut file)?;
    file.sync_all()
}

fn create_temp(tmp: &Path) -> io::Result<fs::File> {
    // a temporary file left by a killed process of the same id is ours to replace
    // readable too: a staged file is read back through it before it is put in place
    let create = || OpenOptions::new().read(true).write(true).create_new(true).open(tmp);
    match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            fs::remove_file(tmp)?;
            create()
        }
        other => other,
    }
}

/// The directory `path` is in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// `dir/.name.<pid>.tmp`: hidden, beside the target, one per process.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_is_created_with_its_directories_then_replaced_and_no_temporary_file_remains() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/file.json");
        replace(&path, b"one").unwrap();
        replace(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(names_in(&dir.path().join("a/b")), ["file.json"]);
    }

    /// Staged, the target is as it was and only the temporary file holds the bytes;
    /// placed, the target holds them and nothing else is left; dropped unplaced,
    /// nothing of it is left.
    #[test]
    fn a_staged_file_is_in_place_only_once_placed_and_gone_if_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs/r-1/suite.json");
        replace(&path, b"old").unwrap();
        let staged = stage(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read(staged.temp()).unwrap(), b"new");
        staged.sync().unwrap();
        staged.place().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(names_in(&dir.path().join("runs/r-1")), ["suite.json"]);
        let dropped = stage(&path, b"never").unwrap();
        assert_eq!(names_in(&dir.path().join("runs/r-1")).len(), 2);
        drop(dropped);
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(names_in(&dir.path().join("runs/r-1")), ["suite.json"]);
        // a streamed write that fails leaves no temporary file either
        let failed = stage_with(&path, |out| {
            out.write_all(b"part")?;
            Err(io::Error::other("the writer gave up"))
        });
        assert!(failed.is_err());
        assert_eq!(names_in(&dir.path().join("runs/r-1")), ["suite.json"]);
    }

    /// What is put in place is the file staged, holding what was written to it: one
    /// rewritten under its temporary name, or another file renamed over that name, is
    /// refused and the target keeps its old bytes.
    #[test]
    fn a_staged_file_changed_under_its_temporary_name_is_not_placed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        replace(&path, b"old").unwrap();
        type Tamper = fn(&Path);
        let tamper: [(&str, Tamper); 3] = [
            ("rewritten in place", |tmp| fs::write(tmp, b"forged").unwrap()),
            ("same length, other bytes", |tmp| fs::write(tmp, b"wen").unwrap()),
            ("another file renamed over it", |tmp| {
                let other = tmp.with_extension("other");
                fs::write(&other, b"new").unwrap();
                fs::rename(&other, tmp).unwrap();
            }),
        ];
        for (how, tamper) in tamper {
            let staged = stage(&path, b"new").unwrap();
            tamper(staged.temp());
            let refused = staged.place().expect_err(how);
            assert_eq!(refused.kind(), io::ErrorKind::InvalidData, "{how}");
            assert_eq!(fs::read(&path).unwrap(), b"old", "{how}");
            assert_eq!(names_in(dir.path()), ["manifest.json"], "{how}: the temporary file is removed");
        }
        // untouched, it is placed
        stage(&path, b"new").unwrap().place().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
    }

    /// The window between the check and the rename: another file renamed over the
    /// temporary name there is renamed into place, found there and removed, and the
    /// placing refused. The target never stays holding it.
    #[test]
    fn a_file_swapped_in_after_the_check_is_not_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        let staged = stage(&path, b"ours").unwrap();
        staged.check().expect("untouched so far");
        let forged = dir.path().join("forged");
        fs::write(&forged, b"theirs").unwrap();
        fs::rename(&forged, staged.temp()).unwrap();
        let refused = staged.rename_checked().expect_err("the swapped file is not ours");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidData);
        assert!(!path.exists(), "the swapped file does not stand under the target's name");
        assert!(names_in(dir.path()).is_empty(), "{:?}", names_in(dir.path()));
    }

    /// Unsynced, the file is already in place whole (a reader or a killed process never
    /// sees a temporary file or part of it); synced, nothing changes but the disk.
    #[test]
    fn an_unsynced_replace_is_in_place_whole_before_its_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs/r-1/run.json");
        replace(&path, b"old").unwrap();
        let unsynced = replace_unsynced(&path, b"{\"passed\":null}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"passed\":null}");
        assert_eq!(names_in(&dir.path().join("runs/r-1")), ["run.json"]);
        unsynced.sync().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"passed\":null}");
        // a temporary file a killed process of the same id left is replaced
        fs::write(temp_path(&path), b"torn").unwrap();
        replace_unsynced(&path, b"new").unwrap().sync().unwrap();
        assert_eq!(
            (fs::read(&path).unwrap(), names_in(&dir.path().join("runs/r-1"))),
            (b"new".to_vec(), vec!["run.json".to_string()])
        );
    }

    #[test]
    fn a_refused_check_leaves_the_old_file_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file.jsonl");
        replace(&path, b"old\n").unwrap();
        let err = replace_checked(&path, b"new\n", |tmp| {
            assert_eq!(fs::read(tmp).unwrap(), b"new\n", "the check reads what was written");
            Err("not valid".into())
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "not valid");
        assert_eq!(fs::read(&path).unwrap(), b"old\n");
        assert_eq!(names_in(dir.path()), ["file.jsonl"]);
    }

    #[test]
    fn a_streamed_write_replaces_whole_or_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        replace_with(&path, |out| (0..1000).try_for_each(|i| write!(out, "{i},"))).unwrap();
        assert_eq!(fs::read(&path).unwrap().len(), (0..1000).map(|i: u32| i.to_string().len() + 1).sum::<usize>());
        // a writer that fails half-way: the first file stays, no temporary file is left
        let err = replace_with(&path, |out| {
            out.write_all(b"half")?;
            Err(io::Error::other("the disk is full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "the disk is full");
        assert!(fs::read(&path).unwrap().starts_with(b"0,1,2,"));
        assert_eq!(names_in(dir.path()), ["m.json"]);
    }

    #[test]
    fn a_temporary_file_left_by_a_killed_write_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("case.0.jsonl");
        fs::write(temp_path(&path), b"half a fi").unwrap();
        replace(&path, b"whole\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"whole\n");
        assert_eq!(names_in(dir.path()), ["case.0.jsonl"]);
    }
}
