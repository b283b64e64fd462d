//! The runner: every case × recorded run → an event log → checks → a case verdict.
//!
//! Four rooms, one idea each:
//!
//! - `plan`: [`Plan::load`] reads and validates every input before anything runs (the
//!   one place a pipeline is validated for a run), keeping a small reference per case;
//! - `execute`: [`execute`] runs cases with bounded concurrency (each case read again,
//!   its runs in order, on one worker) and writes outcomes to the run's `cases.jsonl`
//!   in dataset order, so every report is byte-stable however the workers interleaved
//!   and no suite is ever held in memory whole;
//! - `case`: one case's runs replayed ([`Plan::replay`]), graded as each finishes, and
//!   its verdicts recorded in the store;
//! - `conclude`: once every case is decided, the indexes, gates and cards, and the
//!   manifest that marks the run finished ([`Concluding`]).
//!
//! Their public names are re-exported here, each at this one address. Beside them:
//! shards and their merge, reuse of earlier runs' units, custom graders and judges,
//! reliability cards.

pub mod attempt;
pub mod cards;
mod churn;
pub mod graders;
pub mod inputs;
pub mod merge;
pub mod reuse;
pub mod shard;
pub mod syncer;

mod case;
mod conclude;
mod execute;
mod plan;
mod start;
#[cfg(test)]
mod tests;

pub use case::{ReplayError, ReplayedRun, log_assertions};
use conclude::verdict;
pub use conclude::{Concluding, retract};
pub(crate) use conclude::{Decided, conclude_staged, record_verdicts};
pub use execute::{Options, Progress, execute, execute_staged};
pub use plan::{Plan, PlannedAgent, Replayable, Selection};
pub(crate) use start::start_run;

use std::path::{Path, PathBuf};

use crate::diag::InputError;
use crate::event::writer::WriteError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Input(Vec<InputError>),
    #[error("writing {path}: {source}")]
    Log { path: PathBuf, source: WriteError },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A signal, seen at the end of this phase (exit 130).
    #[error(
        "interrupted at {0}: the run has no verdict; the logs written so far verify \
         (`stateval verify --allow-incomplete`) up to their last complete turn"
    )]
    Interrupted(crate::interrupt::Phase),
    #[error("internal error: {0}")]
    Internal(String),
    /// A file the run wrote is no longer what it wrote: something else edited it while
    /// the run went on (exit 3, and no manifest).
    #[error("{} changed during the run: it is not what the run wrote there; the run has no verdict", .0.display())]
    Changed(PathBuf),
    /// A merge or shard request that cannot be honoured as given (exit 2).
    #[error("{0}")]
    Refused(String),
}

impl From<crate::interrupt::Interrupted> for RunnerError {
    fn from(e: crate::interrupt::Interrupted) -> Self {
        RunnerError::Interrupted(e.0)
    }
}

/// An I/O error on `path`, naming it.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::File { path: path.to_path_buf(), source }
}
