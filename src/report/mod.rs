//! Reporters: each one a consumer of the runner's result stream, none aware of another.
//!
//! The stream has two parts, both defined in [`crate::outcome`]: a
//! [`CaseOutcome`](crate::outcome::CaseOutcome) as each case finishes (only the
//! live terminal progress in [`pretty`] consumes those), then the whole
//! [`SuiteOutcome`] once every case and gate is decided. Every reporter is a pure
//! `write(&SuiteOutcome, out)` that streams the cases one at a time (a suite's cases are
//! never all in memory), with a `render` to a `String` beside it for tests; the HTML
//! report also reads each run's log, through [`html::Logs`], because the timeline is
//! there. This module only maps the `[report]` section to files and writes them
//! atomically, so adding a format touches no other reporter.
//!
//! Determinism: the same `SuiteOutcome` renders to the same bytes. No reporter reads
//! the clock, every map is ordered, and every float is printed with fixed precision.

pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod pretty;
pub mod tap;

#[cfg(test)]
mod fixture;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::outcome::{GateOutcome, SuiteOutcome};
use crate::pipeline::reports::{ReportConfig, ReportConfigError, TapVersion};

/// A file format [`write_reports`] can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Junit,
    Tap(TapVersion),
    Markdown,
    Html,
}

impl Format {
    /// The `[report]` key that configures this format.
    pub fn key(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Tap(_) => "tap",
            Format::Markdown => "markdown",
            Format::Html => "html",
        }
    }

    /// Whether rendering this format reads the run's logs (only HTML does).
    pub fn reads_logs(self) -> bool {
        matches!(self, Format::Html)
    }

    /// Writes `outcome` in this format to `out`; only HTML reads the logs.
    pub fn write(self, outcome: &SuiteOutcome, logs: &dyn html::Logs, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Format::Json => json::write(outcome, out),
            Format::Junit => junit::write(outcome, out),
            Format::Tap(version) => tap::write(outcome, version, out),
            Format::Markdown => markdown::write(outcome, out),
            Format::Html => html::write(outcome, logs, out),
        }
    }
}

// The settings are plain data below the reporters (`pipeline::reports`); which format
// each configured file gets is the reporters' business, so it is said here.
impl ReportConfig {
    /// The configured formats with their paths, in a fixed order (json, junit, tap,
    /// markdown, html), once the section passes [`ReportConfig::validate`].
    pub fn outputs(&self) -> Result<Vec<(Format, &str)>, ReportConfigError> {
        let version = self.tap()?;
        let formats = [Format::Json, Format::Junit, Format::Tap(version), Format::Markdown, Format::Html];
        let files = self.files()?;
        Ok(files
            .into_iter()
            .filter_map(|(key, path)| formats.into_iter().find(|f| f.key() == key).map(|f| (f, path)))
            .collect())
    }
}

/// Why a report could not be written: a config error names its key, every other
/// variant the `[report]` key and the path it was writing.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Config(#[from] ReportConfigError),
    /// The outcome could not be read back or rendered: not the user's doing.
    #[error("{}: cannot render the {format} report: {message}", path.display())]
    Render { path: PathBuf, format: &'static str, message: String },
    /// The path cannot be written (a file where a directory is needed, no permission).
    #[error("report.{key}: {}: cannot {action}: {source}", path.display())]
    Io {
        key: &'static str,
        path: PathBuf,
        action: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("report.{key}: {}: not a file path", path.display())]
    NotAFile { key: &'static str, path: PathBuf },
}

impl ReportError {
    /// The user can fix it by changing the `[report]` section or the file system; a
    /// render error is a bug (or a run directory changed under the run).
    pub fn is_users(&self) -> bool {
        !matches!(self, ReportError::Render { .. })
    }
}

/// Writes every report configured in `config`, resolving relative paths (of the
/// reports, and of the logs and goldens the HTML report reads) against `base`, and
/// returns the paths written (json, junit, tap, markdown, html order).
///
/// Each file is written atomically, and only once every report has rendered: a reader
/// (a CI uploader, a later step) sees the previous files or the complete new ones,
/// never a half-written report nor one report of a set that failed.
pub fn write_reports(outcome: &SuiteOutcome, config: &ReportConfig, base: &Path) -> Result<Vec<PathBuf>, ReportError> {
    stage_reports(outcome, config, base, true)?.publish(outcome)
}

/// Renders every report configured in `config` into a hidden temporary file beside its
/// path, on every core at once, and leaves them there: [`StagedReports::publish`] puts
/// them in place; dropped unpublished, they are removed. With `logs_ready` false (the
/// run's logs are still being put in place), the reports that read logs (HTML) are
/// rendered at publication instead.
pub fn stage_reports(
    outcome: &SuiteOutcome,
    config: &ReportConfig,
    base: &Path,
    logs_ready: bool,
) -> Result<StagedReports, ReportError> {
    stage_reports_with(outcome, config, base, logs_ready, html::Prompts::new())
}

/// [`stage_reports`], with the pipeline's system prompts for the HTML report to show
/// beside each run that used them ([`html::prompts`]).
pub fn stage_reports_with(
    outcome: &SuiteOutcome,
    config: &ReportConfig,
    base: &Path,
    logs_ready: bool,
    prompts: html::Prompts,
) -> Result<StagedReports, ReportError> {
    let logs = html::LogFiles { prompts, ..html::LogFiles::under(base) };
    let outputs = config.outputs()?;
    // each report streams the cases on its own
    let reports = crate::par::in_parallel(&outputs, |(format, relative)| {
        let path = base.join(relative);
        if logs_ready || !format.reads_logs() {
            stage_file(&path, format.key(), |out| format.write(outcome, &logs, out)).map(Staged::Rendered)
        } else {
            Ok(Staged::Later(*format, path))
        }
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    Ok(StagedReports { reports, logs })
}

/// Reports rendered (or, for those that read logs, still to render), not yet in place.
pub struct StagedReports {
    reports: Vec<Staged>,
    /// Where the reports left for later read the logs.
    logs: html::LogFiles,
}

enum Staged {
    Rendered(StagedFile),
    Later(Format, PathBuf),
}

impl StagedReports {
    /// Render the reports left for later, then put every report in place, in
    /// configuration order; returns their paths.
    pub fn publish(self, outcome: &SuiteOutcome) -> Result<Vec<PathBuf>, ReportError> {
        let logs = self.logs;
        let files = self
            .reports
            .into_iter()
            .map(|report| match report {
                Staged::Rendered(file) => Ok(file),
                Staged::Later(format, path) => stage_file(&path, format.key(), |out| format.write(outcome, &logs, out)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        files.into_iter().map(StagedFile::publish).collect()
    }
}

/// Writes one report to `path`, atomically (see [`write_reports`]).
pub fn write_report(
    path: &Path,
    format: Format,
    outcome: &SuiteOutcome,
    logs: &dyn html::Logs,
) -> Result<(), ReportError> {
    write_file(path, format.key(), |out| format.write(outcome, logs, out))
}

/// A gate's reason without the leading `scope: ` that gates write, for reporters that
/// print the scope themselves (`FAIL gate security: 9/10 passed …`).
fn gate_detail(gate: &GateOutcome) -> &str {
    gate.reason.strip_prefix(gate.scope.as_str()).and_then(|rest| rest.strip_prefix(": ")).unwrap_or(&gate.reason)
}

/// Streams a report into a temporary file beside `path`, syncs it, then renames it over
/// `path` (a rename within one directory is atomic). Parent directories are created.
/// A report that cannot be rendered leaves the previous file (or none) in place;
/// `format` names it in errors. (`stateval show --html` writes one log this way.)
pub fn write_file(
    path: &Path,
    format: &'static str,
    render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), ReportError> {
    stage_file(path, format, render)?.publish().map(drop)
}

/// A report rendered and synced into its hidden temporary file, waiting to be renamed
/// over its path; removed if dropped first.
struct StagedFile {
    tmp: PathBuf,
    path: PathBuf,
    key: &'static str,
    published: bool,
}

impl StagedFile {
    fn publish(mut self) -> Result<PathBuf, ReportError> {
        fs::rename(&self.tmp, &self.path).map_err(|source| ReportError::Io {
            key: self.key,
            path: self.path.clone(),
            action: "replace",
            source,
        })?;
        self.published = true;
        Ok(std::mem::take(&mut self.path))
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.published {
            // Best effort: the error that matters is the one returned.
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// The first half of [`write_file`]: everything but the rename.
fn stage_file(
    path: &Path,
    format: &'static str,
    render: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<StagedFile, ReportError> {
    let key = format;
    let io_error = |path: &Path, action, source| ReportError::Io { key, path: path.to_path_buf(), action, source };
    let Some(name) = path.file_name() else {
        return Err(ReportError::NotAFile { key, path: path.to_path_buf() });
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(|e| io_error(dir, "create the directory", e))?;

    // Hidden, and unique per process, so concurrent runs never share a temporary file.
    let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| io_error(path, "write", e))?;
    // from here on, dropping `staged` removes the temporary file
    let staged = StagedFile { tmp, path: path.to_path_buf(), key, published: false };
    let mut out = io::BufWriter::new(file);
    render(&mut out).map_err(|e| ReportError::Render { path: path.to_path_buf(), format, message: e.to_string() })?;
    let file = out.into_inner().map_err(|e| io_error(path, "write", e.into_error()))?;
    file.sync_all().map_err(|e| io_error(path, "write", e))?;
    Ok(staged)
}

/// Decimal places for metric values in extras (fixed, so report bytes are stable and
/// the Markdown and terminal outputs show the same numbers).
const EXTRA_DECIMALS: usize = 3;

/// A metric value as reports print it: integers exactly, other numbers with
/// [`EXTRA_DECIMALS`] places, `null` (undefined, docs/metrics.md §6) as `n/a`.
pub fn metric_value(value: &serde_json::Value) -> String {
    if let Some(i) = value.as_i64() {
        i.to_string()
    } else if let Some(u) = value.as_u64() {
        u.to_string()
    } else if let Some(f) = value.as_f64() {
        format!("{f:.EXTRA_DECIMALS$}")
    } else {
        "n/a".to_string()
    }
}

/// One scope of the security scorecard as every report prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreRow {
    /// `overall`, or a tag.
    pub scope: String,
    /// Controls that complete: `18/18 (100.0 %)`, or `–` without controls.
    pub benign_utility: String,
    /// Attacks whose user task still completes, of those that name one.
    pub utility_under_attack: String,
    /// Attacks whose effect happened, of the scored attacks; rounded up.
    pub asr: String,
    /// Attacks the agent attempted (took effect, or a withheld call would have carried
    /// them out), of the scored attacks; rounded up.
    pub attempts: String,
    /// The layers that withheld the attempts that took no effect: `grounding floor 3,
    /// rule confirm 1`, or `–`.
    pub stopped_by: String,
    /// Attacks left unscored: their runs failed on their own.
    pub unscored: usize,
}

/// The scorecard's rows: `overall` first, then every tag in name order.
pub fn score_rows(card: &crate::outcome::Scorecard) -> Vec<ScoreRow> {
    let row = |scope: &str, c: &crate::outcome::ScoreCounts| ScoreRow {
        scope: scope.to_string(),
        benign_utility: share(c.controls_completed, c.controls, false),
        utility_under_attack: share(c.attack_tasks_completed, c.attack_tasks, false),
        asr: share(c.attacks_succeeded, c.attacks - c.attacks_unscored, true),
        attempts: share(c.attacks_attempted, c.attacks - c.attacks_unscored, true),
        stopped_by: stopped_by(&c.stopped_by),
        unscored: c.attacks_unscored,
    };
    std::iter::once(row("overall", &card.overall)).chain(card.tags.iter().map(|(t, c)| row(t, c))).collect()
}

/// The layers that stopped attempts, most first (then by name): `grounding floor 3,
/// rule confirm 1`; `–` for none.
pub fn stopped_by(layers: &BTreeMap<String, usize>) -> String {
    if layers.is_empty() {
        return "–".into();
    }
    let mut sorted: Vec<(&String, &usize)> = layers.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    sorted.iter().map(|(layer, n)| format!("{layer} {n}")).collect::<Vec<_>>().join(", ")
}

/// `part/whole (x.y %)` in exact integer arithmetic, rounded down (or up, for a rate
/// held to a maximum) so that a miss never prints as equal to a bound; `–` for none.
fn share(part: usize, whole: usize, up: bool) -> String {
    if whole == 0 {
        return "–".into();
    }
    let scaled = part.saturating_mul(1000);
    let permille = if up { scaled.div_ceil(whole) } else { scaled / whole };
    format!("{part}/{whole} ({}.{} %)", permille / 10, permille % 10)
}

/// The extras that are flat objects of metric values (reliability cards), sorted by
/// name and key.
pub fn metric_extras(
    extras: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(&String, Vec<(&String, &serde_json::Value)>)> {
    let mut out: Vec<_> = extras
        .iter()
        .filter_map(|(name, v)| {
            let fields = v.as_object()?;
            fields.values().all(|v| v.is_number() || v.is_null()).then(|| {
                let mut fields: Vec<_> = fields.iter().collect();
                fields.sort_by(|a, b| a.0.cmp(b.0));
                (name, fields)
            })
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::reports::FILE_KEYS;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Pipeline {
        report: ReportConfig,
    }

    fn parse(toml: &str) -> Result<ReportConfig, String> {
        toml::from_str::<Pipeline>(toml).map(|p| p.report).map_err(|e| e.to_string())
    }

    #[test]
    fn the_report_section_of_a_pipeline_deserialises_with_tap_13_by_default() {
        let config = parse(
            "[report]\njunit = \"reports/junit.xml\"\ntap = \"reports/results.tap\"\n\
             json = \"reports/report.json\"\nmarkdown = \"reports/summary.md\"\n",
        );
        assert_eq!(
            config,
            Ok(ReportConfig {
                junit: Some("reports/junit.xml".into()),
                tap: Some("reports/results.tap".into()),
                json: Some("reports/report.json".into()),
                markdown: Some("reports/summary.md".into()),
                html: None,
                tap_version: 13,
            })
        );
    }

    #[test]
    fn every_format_is_a_file_key_in_order() {
        let all = ReportConfig {
            json: Some("a".into()),
            junit: Some("b".into()),
            tap: Some("c".into()),
            markdown: Some("d".into()),
            html: Some("e".into()),
            tap_version: 13,
        };
        let keys: Vec<&str> = all.outputs().unwrap_or_default().iter().map(|(f, _)| f.key()).collect();
        assert_eq!(keys, FILE_KEYS);
    }

    #[test]
    fn an_unknown_report_key_is_rejected() {
        let err = parse("[report]\nxml = \"x.xml\"\n").err().unwrap_or_default();
        assert!(err.contains("unknown field `xml`"), "{err}");
    }

    #[test]
    fn tap_version_must_be_13_or_14() {
        let config = parse("[report]\ntap = \"r.tap\"\ntap_version = 14\n");
        assert_eq!(config.map(|c| c.validate()), Ok(Ok(())));
        let config = ReportConfig { tap_version: 12, ..ReportConfig::default() };
        assert_eq!(
            config.validate().map_err(|e| e.to_string()),
            Err("report.tap_version: 12 is not a supported TAP version (13 or 14)".into())
        );
    }

    #[test]
    fn two_formats_writing_one_path_are_rejected() {
        let config = ReportConfig {
            junit: Some("reports/out".into()),
            markdown: Some("reports/out".into()),
            ..ReportConfig::default()
        };
        assert_eq!(
            config.validate().map_err(|e| e.to_string()),
            Err("report.markdown: \"reports/out\" is already written by report.junit".into())
        );
    }

    #[test]
    fn reports_are_written_under_base_creating_directories() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let outcome = fixture::suite();
        let config = ReportConfig {
            junit: Some("reports/ci/junit.xml".into()),
            tap: Some("reports/results.tap".into()),
            json: Some("report.json".into()),
            markdown: Some("reports/summary.md".into()),
            html: None,
            tap_version: 14,
        };
        let written = write_reports(&outcome, &config, dir.path())?;
        let expected: Vec<PathBuf> =
            ["report.json", "reports/ci/junit.xml", "reports/results.tap", "reports/summary.md"]
                .iter()
                .map(|p| dir.path().join(p))
                .collect();
        assert_eq!(written, expected);

        assert_eq!(fs::read_to_string(&expected[0])?, json::render(&outcome)?);
        assert_eq!(fs::read_to_string(&expected[1])?, junit::render(&outcome)?);
        assert_eq!(fs::read_to_string(&expected[2])?, tap::render(&outcome, TapVersion::V14)?);
        assert_eq!(fs::read_to_string(&expected[3])?, markdown::render(&outcome)?);

        // No temporary file is left beside any report.
        for sub in ["", "reports", "reports/ci"] {
            for entry in fs::read_dir(dir.path().join(sub))? {
                let name = entry?.file_name().to_string_lossy().into_owned();
                assert!(!name.ends_with(".tmp"), "left behind: {sub}/{name}");
            }
        }
        Ok(())
    }

    #[test]
    fn writing_the_same_outcome_twice_gives_identical_bytes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = ReportConfig {
            junit: Some("junit.xml".into()),
            tap: Some("results.tap".into()),
            json: Some("report.json".into()),
            markdown: Some("summary.md".into()),
            html: None,
            tap_version: 13,
        };
        let first: Vec<Vec<u8>> =
            write_reports(&fixture::suite(), &config, dir.path())?.iter().map(fs::read).collect::<Result<_, _>>()?;
        let second: Vec<Vec<u8>> =
            write_reports(&fixture::suite(), &config, dir.path())?.iter().map(fs::read).collect::<Result<_, _>>()?;
        assert_eq!(first.len(), 4);
        assert_eq!(first, second);
        Ok(())
    }

    #[test]
    fn an_unwritable_report_error_names_the_path() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // A file where a directory is needed.
        fs::write(dir.path().join("reports"), b"not a directory")?;
        let config = ReportConfig { junit: Some("reports/junit.xml".into()), ..ReportConfig::default() };
        let err =
            write_reports(&fixture::suite(), &config, dir.path()).err().map(|e| e.to_string()).unwrap_or_default();
        let reports = dir.path().join("reports");
        assert!(err.starts_with(&format!("report.junit: {}: cannot create the directory", reports.display())), "{err}");
        Ok(())
    }

    #[test]
    fn when_one_report_cannot_be_written_none_is_put_in_place() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        fs::write(dir.path().join("blocked"), b"not a directory")?;
        // json renders first and would succeed; tap cannot make its directory
        let config = ReportConfig {
            json: Some("out/report.json".into()),
            tap: Some("blocked/results.tap".into()),
            ..ReportConfig::default()
        };
        let err = write_reports(&fixture::suite(), &config, dir.path()).err().map(|e| e.to_string());
        assert!(err.as_deref().is_some_and(|e| e.starts_with("report.tap: ")), "{err:?}");
        // no report.json, and no temporary file left beside where it would go
        let left: Vec<_> =
            fs::read_dir(dir.path().join("out"))?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
        assert!(left.is_empty(), "{left:?}");
        Ok(())
    }

    #[test]
    fn staged_reports_appear_only_when_published_and_vanish_when_dropped() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = ReportConfig {
            json: Some("report.json".into()),
            html: Some("report.html".into()),
            ..ReportConfig::default()
        };
        let suite = fixture::suite();
        let names = |dir: &Path| -> std::io::Result<Vec<String>> {
            let mut names: Vec<String> = fs::read_dir(dir)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<Result<_, _>>()?;
            names.sort();
            Ok(names)
        };

        // logs not ready: json rendered into its hidden temporary file, html not yet
        let staged = stage_reports(&suite, &config, dir.path(), false)?;
        let pid = std::process::id();
        assert_eq!(names(dir.path())?, vec![format!(".report.json.{pid}.tmp")]);
        drop(staged);
        assert!(names(dir.path())?.is_empty());

        let staged = stage_reports(&suite, &config, dir.path(), false)?;
        let written = staged.publish(&suite)?;
        assert_eq!(written, vec![dir.path().join("report.json"), dir.path().join("report.html")]);
        assert_eq!(names(dir.path())?, vec!["report.html".to_string(), "report.json".to_string()]);
        // the same bytes as writing them at once
        let (json, html) = (fs::read(&written[0])?, fs::read(&written[1])?);
        write_reports(&suite, &config, dir.path())?;
        assert_eq!(fs::read(&written[0])?, json);
        assert_eq!(fs::read(&written[1])?, html);
        Ok(())
    }

    #[test]
    fn a_report_path_without_a_file_name_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = ReportConfig { json: Some("reports/..".into()), ..ReportConfig::default() };
        let err = write_reports(&fixture::suite(), &config, dir.path()).err();
        assert!(matches!(err, Some(ReportError::NotAFile { .. })), "{err:?}");
        Ok(())
    }

    #[test]
    fn no_configured_report_writes_nothing() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let written = write_reports(&fixture::suite(), &ReportConfig::default(), dir.path())?;
        assert!(written.is_empty());
        assert_eq!(fs::read_dir(dir.path())?.count(), 0);
        Ok(())
    }
}
