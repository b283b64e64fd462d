//! Command-line interface: clap definitions and one file per subcommand.

mod catalog;
mod diff;
mod doctor;
mod golden;
mod import;
mod import_agentdojo;
mod keygen;
mod mcp_stdio;
mod merge;
mod metric;
mod plan;
mod reconstruct;
mod record;
mod recording;
mod reindex;
mod report;
mod run;
mod schema;
mod show;
mod sign;
mod targets;
mod validate;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything passed.
    Pass = 0,
    /// A gate or a check failed.
    Fail = 1,
    /// Invalid input or usage.
    Invalid = 2,
    /// A bug or an environment failure (disk, store).
    Internal = 3,
    /// Interrupted (Ctrl-C, SIGTERM).
    Interrupted = 130,
}

/// An error already phrased for the user, with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

impl CliError {
    pub fn invalid(message: impl Into<String>) -> Self {
        CliError { exit: Exit::Invalid, message: message.into() }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        CliError { exit: Exit::Internal, message: message.into() }
    }
}

impl From<stateval::runner::RunnerError> for CliError {
    fn from(e: stateval::runner::RunnerError) -> Self {
        use stateval::runner::RunnerError as E;
        let exit = match &e {
            E::Input(_) | E::Refused(_) => Exit::Invalid,
            E::Interrupted(_) => Exit::Interrupted,
            _ => Exit::Internal,
        };
        CliError { exit, message: e.to_string() }
    }
}

impl From<stateval::interrupt::Interrupted> for CliError {
    fn from(e: stateval::interrupt::Interrupted) -> Self {
        CliError::from(stateval::runner::RunnerError::from(e))
    }
}

impl From<stateval::runner::ReplayError> for CliError {
    fn from(e: stateval::runner::ReplayError) -> Self {
        use stateval::runner::ReplayError as E;
        let exit = match &e {
            E::Input(_) => Exit::Invalid,
            E::Log(_) => Exit::Internal,
        };
        CliError { exit, message: e.to_string() }
    }
}

/// Deterministic evaluation of stateful LLM agents: replay recorded runs into a
/// hash-chained event log, grade what the agent observably did, gate CI per tag.
#[derive(Parser)]
#[command(name = "stateval", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a pipeline: replay every case, grade it, apply the gates, write reports.
    Run(run::Args),
    /// Validate every input once and list the units of work (case × recorded run) with
    /// their unit ids, for sharded runs.
    Plan(plan::Args),
    /// Put shard runs back together: checked union, then gates and reports once over
    /// the whole (byte-identical to one unsharded run).
    Merge(merge::Args),
    /// Validate pipelines, datasets, recordings, tool manifests and event logs.
    Validate(validate::Args),
    /// Verify a run or event logs: each chain, each log against the run's manifest, the
    /// manifest against an archived root and signature; names the first bad event.
    Verify(verify::Args),
    /// Write an ed25519 key pair for signing run manifests (`STATEVAL_SIGNING_KEY`).
    Keygen(keygen::Args),
    /// Sign a finished run apart from running it: only once it verifies against the
    /// root its run printed (`--root`), with `STATEVAL_SIGNING_KEY`.
    Sign(sign::Args),
    /// Compare two event logs: the first divergent event and every difference, classified.
    Diff(diff::Args),
    /// Print the JSON Schema of an input format (case, recording, judge-recording, tools, pipeline, event).
    Schema(schema::Args),
    /// List every assertion target (`"target": …` in a case) with what it means.
    Targets(targets::Args),
    /// Rebuild the run catalog from the log files alone.
    Reindex(reindex::Args),
    /// Grade one metric over JSON input (docs/metrics.md §9), without running anything.
    Metric(metric::Args),
    /// Import a foreign trace (OpenAI, Anthropic, OTel GenAI, MCP, envelope) as an event log.
    Import(import::Args),
    /// Turn a trace into a dataset case, recording, fixtures and golden; replay it once.
    Reconstruct(reconstruct::Args),
    /// Show an event log as a timeline, and the state folded at a turn (or as an HTML page).
    Show(show::Args),
    /// Check recordings: secrets, responses no run uses, stale request digests.
    Recording(recording::Args),
    /// Accept the last run's golden changes one cause at a time (`accept --cause ID`,
    /// or `review` on a terminal).
    Golden(golden::Args),
    /// Replay a case's external agent several times; list request fields that vary.
    Doctor(doctor::Args),
    /// Record a case (its external agent or the built-in runtime) against the live model API into its recordings.
    Record(record::Args),
    /// Render reports again from a finished run's directory (`--html OUT`: one offline page).
    Report(report::Args),
    /// Serve the current case run's fixture tools over MCP on stdin/stdout (spawned by
    /// an external agent under `stateval run`).
    McpStdio(mcp_stdio::Args),
}

/// The plan of `pipeline` narrowed to case `id`, and that case, whose agent must be
/// external (`record`, `doctor`); `why` says what the command needs it for.
fn external_case(
    pipeline: &std::path::Path,
    id: &str,
    why: &str,
) -> Result<(stateval::runner::Plan, stateval::dataset::Case), CliError> {
    let (plan, case) = one_case(pipeline, id)?;
    if plan.pipeline.agents[&case.agent].kind != stateval::pipeline::AgentKind::External {
        return Err(CliError::invalid(format!(
            "case {:?} runs agent {:?}, a built-in profile: {why}",
            case.id, case.agent
        )));
    }
    Ok((plan, case))
}

/// The plan of `pipeline` narrowed to case `id`, and that case.
fn one_case(
    pipeline: &std::path::Path,
    id: &str,
) -> Result<(stateval::runner::Plan, stateval::dataset::Case), CliError> {
    use stateval::runner::{Plan, Selection};
    let filter = glob::Pattern::new(&glob::Pattern::escape(id)).map_err(|e| CliError::invalid(e.to_string()))?;
    let plan = Plan::load(pipeline, &Selection { filter: Some(filter), tags: Vec::new() })?;
    if plan.cases.is_empty() {
        return Err(CliError::invalid(format!("no case {id:?} in {}", pipeline.display())));
    }
    let case = plan.case(0)?;
    Ok((plan, case))
}

/// The pipeline `stateval run` uses when none is given.
pub const DEFAULT_PIPELINE: &str = "pipeline/ci.toml";

/// How a command typed where stateval runs names the pipeline at `path` (as
/// [`find_pipeline`] returned it): nothing for the default, which every command finds from
/// anywhere in its project, else the path, quoted for a shell where it needs to be.
pub fn pipeline_word(path: &std::path::Path) -> Option<String> {
    let text = path.to_string_lossy();
    let mut rest: &str = &text;
    while let Some(up) = rest.strip_prefix("../") {
        rest = up;
    }
    (rest != DEFAULT_PIPELINE).then(|| stateval::golden::churn::shell_word(&text))
}

/// The pipeline file `given` names: as given when it is there (or absolute), else the
/// first directory above this one that holds it, as git and cargo find their project
/// from a subdirectory — `stateval run` in `datasets/` runs `../pipeline/ci.toml`, and
/// says so on stderr. The path stays relative, so what the run shows does not change.
/// Not found anywhere, it is returned as given, for the error that names it.
pub fn find_pipeline(given: &std::path::Path) -> std::path::PathBuf {
    if given.is_absolute() || given.exists() {
        return given.to_path_buf();
    }
    let Ok(here) = std::env::current_dir() else { return given.to_path_buf() };
    let mut up = std::path::PathBuf::new();
    for dir in here.ancestors().skip(1) {
        up.push("..");
        if dir.join(given).is_file() {
            let found = up.join(given);
            err(format_args!(
                "stateval: no {} here; using {} (the project at {})",
                given.display(),
                found.display(),
                dir.display()
            ));
            return found;
        }
    }
    given.to_path_buf()
}

pub fn main() -> ExitCode {
    // first: a signal from here on is an exit 130, never a death by the signal
    if let Err(e) = stateval::interrupt::install() {
        err(format_args!("error: cannot handle SIGINT and SIGTERM: {e}"));
        return ExitCode::from(Exit::Internal as u8);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { Exit::Invalid as u8 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Keygen(args) => keygen::run(args),
        Command::Sign(args) => sign::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Schema(args) => schema::run(args),
        Command::Targets(args) => targets::run(args),
        Command::Reindex(args) => reindex::run(args),
        Command::Metric(args) => metric::run(args),
        Command::Import(args) => import::run(args),
        Command::Reconstruct(args) => reconstruct::run(args),
        Command::Show(args) => show::run(args),
        Command::Report(args) => report::run(args),
        Command::McpStdio(args) => mcp_stdio::run(args),
        Command::Record(args) => record::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Recording(args) => recording::run(args),
        Command::Golden(args) => golden::run(args),
    };
    // every isolated child removed its own scratch directory as it ended; the empty
    // directory that held them goes with the process
    stateval::isolation::remove_scratch_root();
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(e) => {
            // one line per error; text an error quotes from an input steers no terminal
            for line in e.message.lines() {
                err(format_args!("error: {}", stateval::diag::visible(line)));
            }
            // whatever failed after a signal failed because of it (an agent it killed)
            let exit = if stateval::interrupt::interrupted() { Exit::Interrupted } else { e.exit };
            ExitCode::from(exit as u8)
        }
    }
}

/// Print one line on stdout. A closed pipe (`stateval run | head -1`) loses the line
/// and nothing else: the command goes on to the exit code it would have had (a failed
/// gate is still 1). Lines go through here or [`err`]; the few writers of stdout that
/// stream (the run summary, an imported log, `metric --batch`) drop EPIPE the same way.
pub fn out(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Print one line on stderr; a closed stderr loses it (`eprintln!` would panic).
pub fn err(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Opens the store at `layout.root` for a command. What the user can fix is exit 2
/// naming `setting` (`pipeline.store`, `--store`): a file where the store directory
/// should be, a directory that cannot be created, a store another run holds.
pub fn open_store(layout: &stateval::store::Layout, setting: &str) -> Result<stateval::store::SledStore, CliError> {
    use stateval::store::{SledStore, StoreError};
    let root = &layout.root;
    if root.exists() && !root.is_dir() {
        return Err(CliError::invalid(format!("{setting}: {} is a file, not a directory", root.display())));
    }
    std::fs::create_dir_all(root)
        .map_err(|e| CliError::invalid(format!("{setting}: cannot create {}: {e}", root.display())))?;
    let locked = |e: StoreError| match e {
        StoreError::Locked { .. } => CliError::invalid(format!(
            "{setting}: {} is in use by another stateval run; wait for it to finish, or give this run another store",
            root.display()
        )),
        e => CliError::internal(e.to_string()),
    };
    match SledStore::open(&layout.catalog()) {
        // The catalog is an index of the run files, and sled rewrites its small config
        // file in place as it opens: a process killed in that moment leaves one sled
        // will not read again. Rather than refuse every command from then on, the
        // catalog is set aside (kept, for a bug report) and rebuilt from the runs on disk.
        Err(StoreError::Sled(e @ sled::Error::Corruption { .. })) => {
            let aside = set_aside(&layout.catalog()).map_err(|io| {
                CliError::internal(format!(
                    "{setting}: the catalog is unreadable ({e}) and could not be set aside: {io}"
                ))
            })?;
            err(format_args!(
                "warning: {setting}: the catalog could not be read ({e}); set aside as {} and rebuilt from the runs on disk",
                aside.display()
            ));
            let store = SledStore::open(&layout.catalog()).map_err(locked)?;
            stateval::store::reindex(&store, layout, false).map_err(|e| CliError::internal(e.to_string()))?;
            Ok(store)
        }
        opened => opened.map_err(locked),
    }
}

/// Move `dir` to the first free `<dir>.unreadable-N` beside it.
fn set_aside(dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    for n in 1.. {
        let aside = dir.with_file_name(format!(
            "{}.unreadable-{n}",
            dir.file_name().map(|f| f.to_string_lossy()).unwrap_or_default()
        ));
        if !aside.exists() {
            std::fs::rename(dir, &aside)?;
            return Ok(aside);
        }
    }
    unreachable!("a free name")
}

#[cfg(test)]
mod tests {
    use super::pipeline_word;
    use std::path::Path;

    #[test]
    fn a_command_names_the_pipeline_unless_it_is_the_default_found_from_anywhere() {
        assert_eq!(pipeline_word(Path::new("pipeline/ci.toml")), None);
        assert_eq!(pipeline_word(Path::new("../../pipeline/ci.toml")), None);
        assert_eq!(
            pipeline_word(Path::new("examples/record/record.toml")).as_deref(),
            Some("examples/record/record.toml")
        );
        assert_eq!(pipeline_word(Path::new("../pipeline/agents.toml")).as_deref(), Some("../pipeline/agents.toml"));
        assert_eq!(pipeline_word(Path::new("my pipes/ci.toml")).as_deref(), Some("'my pipes/ci.toml'"));
    }
}
