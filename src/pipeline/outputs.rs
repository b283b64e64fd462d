//! Where a pipeline writes: reports, goldens and the store stay inside its base.
//!
//! A pipeline file is configuration that travels (copied from another repository,
//! changed in a pull request), and every run deletes and replaces the files it names
//! for writing. So a path a pipeline writes to that leads outside its base directory,
//! absolute or climbing out with `..`, is a load error at its key: nothing outside the
//! project is ever written or deleted because a file said so. A user who wants output
//! elsewhere types it on the command line (`stateval run --out DIR`, `stateval report
//! RUN_DIR --junit OUT`), where it is their own choice, made in the open.
//!
//! The check is lexical (`a/../b` is `b`), and then on the files: a symbolic link
//! committed to the project (`reports -> ~/.ssh`) would lead a write outside as surely
//! as `..` does, so every part of an output path that exists must resolve inside the
//! base ([`leads_outside`]); a link within the project is the project's own business.
//! A report path that exists must be a regular file ([`not_a_file`]): a FIFO, a device
//! or a directory there is never replaced.

use std::path::{Component, Path, PathBuf};

/// Every key of a pipeline that names a path it writes to, as a JSON Pointer into the
/// pipeline: the store, the goldens directory (both spellings) and each report.
pub const OUTPUT_KEYS: [&str; 8] = [
    "/pipeline/store",
    "/pipeline/goldens",
    "/goldens/dir",
    "/report/json",
    "/report/junit",
    "/report/tap",
    "/report/markdown",
    "/report/html",
];

/// Does `rel`, resolved against a base directory, stay inside it? Absolute paths never
/// do; relative ones do unless their `..` climb above where they start.
pub fn stays_inside(rel: &str) -> bool {
    let mut depth = 0usize;
    for component in Path::new(rel).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => return false,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::Normal(_) => depth += 1,
        }
    }
    true
}

/// The first part of `base/rel` that exists and resolves (through a symbolic link, its
/// own or a parent's) outside `base`: that part and where it leads. `rel` is one that
/// [`stays_inside`]. A part that exists but cannot be resolved (a link to nothing) leads
/// nowhere the run may write, and is returned with an empty target.
pub fn leads_outside(base: &Path, rel: &str) -> Option<(PathBuf, PathBuf)> {
    let root = base.canonicalize().ok()?;
    let mut parts: Vec<Component<'_>> = Vec::new();
    for component in Path::new(rel).components() {
        match component {
            Component::Normal(_) => parts.push(component),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let mut at = base.to_path_buf();
    for part in parts {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_err() {
            // nothing further exists: what the run creates there is inside
            return None;
        }
        match at.canonicalize() {
            Ok(real) if real.starts_with(&root) => {}
            Ok(real) => return Some((at, real)),
            Err(_) => return Some((at, PathBuf::new())),
        }
    }
    None
}

/// What the file at `path` is when it exists and is not a regular file (a link is
/// followed: [`leads_outside`] has checked where it leads); `None` when it is one or
/// does not exist.
pub fn not_a_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path).ok()?.file_type();
    Some(match () {
        _ if kind.is_file() => return None,
        _ if kind.is_dir() => "a directory",
        _ if kind.is_fifo() => "a FIFO",
        _ if kind.is_char_device() || kind.is_block_device() => "a device",
        _ if kind.is_socket() => "a socket",
        _ => "not a regular file",
    })
}

/// Why `value` at `key` (`report.junit`) is refused, for a load error at that key.
pub fn outside_message(key: &str, value: &str) -> String {
    let elsewhere = if key == "pipeline.store" {
        "; `stateval run --out DIR` puts one run's store elsewhere"
    } else if key.starts_with("report.") {
        "; `stateval report RUN_DIR --junit OUT` (or --json, --tap, --markdown, --html) writes one anywhere"
    } else {
        ""
    };
    let how = if Path::new(value).is_absolute() { "is absolute" } else { "climbs out of the project with .." };
    format!(
        "{key}: {value:?} {how}: the files a pipeline writes (reports, goldens, the store) stay inside its base \
         directory{elsewhere}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_stays_inside_unless_it_is_absolute_or_climbs_above_its_start() {
        for inside in ["reports/junit.xml", "./goldens", "a/../b", "a/b/../../c", ".stateval", "."] {
            assert!(stays_inside(inside), "{inside}");
        }
        for outside in ["../outside.xml", "/tmp/junit.xml", "reports/../../x", "a/../../b", ".."] {
            assert!(!stays_inside(outside), "{outside}");
        }
    }

    #[test]
    fn a_link_out_of_the_base_is_found_at_any_depth_and_one_within_it_is_not() -> std::io::Result<()> {
        let (project, outside) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let base = project.path();
        std::fs::create_dir_all(base.join("out/inner"))?;
        std::os::unix::fs::symlink(outside.path(), base.join("reports"))?;
        std::os::unix::fs::symlink(base.join("out"), base.join("within"))?;
        std::os::unix::fs::symlink(outside.path().join("gone"), base.join("out/dangling"))?;
        let found = leads_outside(base, "reports/authorized_keys");
        assert_eq!(found, Some((base.join("reports"), outside.path().canonicalize()?)));
        assert_eq!(leads_outside(base, "x/../reports/a.xml").map(|f| f.0), Some(base.join("reports")));
        assert_eq!(leads_outside(base, "out/dangling").map(|f| f.1), Some(PathBuf::new()));
        for fine in ["within/inner/junit.xml", "out/new/dir/junit.xml", "reports-not/x", "."] {
            assert_eq!(leads_outside(base, fine), None, "{fine}");
        }
        Ok(())
    }

    #[test]
    fn a_fifo_or_a_directory_is_not_a_file_and_a_missing_path_is_no_objection() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let fifo = dir.path().join("junit.xml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status()?;
        assert!(made.success());
        assert_eq!(not_a_file(&fifo), Some("a FIFO"));
        assert_eq!(not_a_file(dir.path()), Some("a directory"));
        assert_eq!(not_a_file(Path::new("/dev/null")), Some("a device"));
        assert_eq!(not_a_file(&dir.path().join("none.xml")), None);
        std::fs::write(dir.path().join("r.xml"), "x")?;
        assert_eq!(not_a_file(&dir.path().join("r.xml")), None);
        Ok(())
    }

    #[test]
    fn every_report_file_is_an_output_key() {
        for key in crate::pipeline::reports::FILE_KEYS {
            assert!(OUTPUT_KEYS.contains(&format!("/report/{key}").as_str()), "{key}");
        }
    }
}
