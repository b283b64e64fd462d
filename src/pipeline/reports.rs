//! `[report]`: which report files a run writes, relative to the pipeline's base, and
//! the TAP version to declare. Plain settings and their checks; the reporters that
//! honour them are `report`'s.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The `[report]` section of a pipeline: which report files to write, relative to the
/// pipeline's base directory.
///
/// ```toml
/// [report]
/// junit = "reports/junit.xml"
/// tap = "reports/results.tap"
/// tap_version = 14
/// html = "reports/report.html"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
    /// One offline HTML page: gates, cases, timelines, state and golden diffs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    /// 13 (the default: what most harnesses read) or 14.
    #[serde(default = "default_tap_version")]
    pub tap_version: u8,
}

fn default_tap_version() -> u8 {
    13
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            junit: None,
            tap: None,
            json: None,
            markdown: None,
            html: None,
            tap_version: default_tap_version(),
        }
    }
}

/// A `[report]` section that parses but cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct ReportConfigError {
    /// The dotted key at fault (`report.tap_version`).
    pub key: String,
    pub problem: String,
}

/// Every `[report]` key that names a file, in [`ReportConfig::files`] order (each a
/// path the pipeline writes, so one that must stay inside its base: see
/// `pipeline::outputs`).
pub const FILE_KEYS: [&str; 5] = ["json", "junit", "tap", "markdown", "html"];

/// The TAP version to declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapVersion {
    V13,
    V14,
}

impl TapVersion {
    pub fn number(self) -> u8 {
        match self {
            TapVersion::V13 => 13,
            TapVersion::V14 => 14,
        }
    }
}

impl TryFrom<u8> for TapVersion {
    type Error = String;

    fn try_from(number: u8) -> Result<Self, Self::Error> {
        match number {
            13 => Ok(TapVersion::V13),
            14 => Ok(TapVersion::V14),
            other => Err(format!("{other} is not a supported TAP version (13 or 14)")),
        }
    }
}

impl ReportConfig {
    /// Checks `tap_version`, and that no two formats write the same path (the second
    /// would silently replace the first).
    pub fn validate(&self) -> Result<(), ReportConfigError> {
        self.files().map(|_| ())
    }

    /// The TAP version `tap_version` names.
    pub fn tap(&self) -> Result<TapVersion, ReportConfigError> {
        TapVersion::try_from(self.tap_version)
            .map_err(|problem| ReportConfigError { key: "report.tap_version".into(), problem })
    }

    /// The configured report files as (key, path), in [`FILE_KEYS`] order.
    pub fn files(&self) -> Result<Vec<(&'static str, &str)>, ReportConfigError> {
        self.tap()?;
        let candidates = [
            ("json", &self.json),
            ("junit", &self.junit),
            ("tap", &self.tap),
            ("markdown", &self.markdown),
            ("html", &self.html),
        ];
        let mut files: Vec<(&'static str, &str)> = Vec::new();
        for (key, path) in candidates {
            let Some(path) = path.as_deref() else {
                continue;
            };
            if path.is_empty() {
                return Err(ReportConfigError { key: format!("report.{key}"), problem: "the path is empty".into() });
            }
            if let Some((earlier, _)) = files.iter().find(|(_, p)| Path::new(p) == Path::new(path)) {
                return Err(ReportConfigError {
                    key: format!("report.{key}"),
                    problem: format!("{path:?} is already written by report.{earlier}"),
                });
            }
            files.push((key, path));
        }
        Ok(files)
    }
}
