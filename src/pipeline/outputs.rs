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
//! The check is lexical (`a/../b` is `b`); a symbolic link inside the project is the
//! project's own business.

use std::path::{Component, Path};

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
    fn every_report_file_is_an_output_key() {
        for key in crate::pipeline::reports::FILE_KEYS {
            assert!(OUTPUT_KEYS.contains(&format!("/report/{key}").as_str()), "{key}");
        }
    }
}
