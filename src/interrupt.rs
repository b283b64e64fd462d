//! Interrupts (SIGINT, SIGTERM) as a flag that a run consults at each phase boundary.
//!
//! The problem (issue #32): a run handled signals only while its cases ran. A signal
//! while it loaded killed the process outright; one while it synced logs, wrote its
//! manifest or put its reports in place was not seen at all, and the run went on to
//! exit 0 or 1, its reports claiming a verdict the user had cancelled.
//!
//! The design: [`install`], first thing in `main`, makes SIGINT and SIGTERM set one
//! process-wide flag (signal-hook's `flag` API: safe code, nothing but an atomic store
//! in the handler). Until a command calls [`defer`], a signal still ends the process at
//! once, with exit 130: commands that write nothing worth finishing (`show`, `verify`)
//! stop as they always did. A command that writes a run (`run`, `merge`) defers, and
//! calls [`boundary`] between its phases ([`Phase`]): a signal seen there ends the run
//! with [`Interrupted`] (exit 130), before the next phase writes anything.
//!
//! Tests need a signal at a moment they choose, not after a sleep that a slow machine
//! overshoots: with `STATEVAL_TEST_PAUSE_AT=PHASE` in the environment of a debug build,
//! [`boundary`] at that phase writes `stateval: paused at PHASE` on stderr and waits
//! for a signal. Tests of what the code under test can do to a run while it goes on
//! (edit a file the run wrote, swap an input) need the run to go on after them: with
//! `STATEVAL_TEST_HOLD_AT=PHASE:FILE`, [`boundary`] at that phase writes `stateval: held
//! at PHASE` and waits until FILE exists, then carries on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

/// The environment variable naming the phase at which [`boundary`] waits for a signal.
pub const PAUSE_VARIABLE: &str = "STATEVAL_TEST_PAUSE_AT";

/// The environment variable naming the phase at which [`boundary`] waits for a file,
/// `PHASE:FILE`, then goes on.
pub const HOLD_VARIABLE: &str = "STATEVAL_TEST_HOLD_AT";

/// The exit status of an interrupted process (128 + SIGINT, as shells report it).
pub const EXIT_STATUS: u8 = 130;

/// How often a paused [`boundary`] looks at the flag: a test waits at most this long
/// after its signal (a signal handler may only store to the flag, not wake anyone).
const PAUSE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Set by the signal handlers.
static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// While set, a signal ends the process at once with [`EXIT_STATUS`] ([`defer`] clears it).
static IMMEDIATE: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(true)));

/// A signal was seen: the work stopped at a boundary in this phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted at {0}")]
pub struct Interrupted(pub Phase);

/// The phases of a run, in order. A [`boundary`] in a phase is a point where the run can
/// stop before it does more of that phase's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The pipeline file is read.
    Loading,
    /// Datasets, recordings, manifests and judges are validated into a plan.
    Validation,
    /// Cases run (the boundary is between two cases).
    Cases,
    /// Every case is decided; the verdict files are read back for the indexes and the
    /// manifest.
    Decided,
    /// The run's logs are fsync'd.
    Fsync,
    /// The manifest, `suite.json` and `run.json` are written.
    Manifest,
    /// The report files are put in place.
    Reports,
    /// The reports are in place; the summary is printed.
    Summary,
}

impl Phase {
    /// Every phase, in run order.
    pub const ALL: [Phase; 8] = [
        Phase::Loading,
        Phase::Validation,
        Phase::Cases,
        Phase::Decided,
        Phase::Fsync,
        Phase::Manifest,
        Phase::Reports,
        Phase::Summary,
    ];

    /// The name [`PAUSE_VARIABLE`] takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Validation => "validation",
            Phase::Cases => "cases",
            Phase::Decided => "decided",
            Phase::Fsync => "fsync",
            Phase::Manifest => "manifest",
            Phase::Reports => "reports",
            Phase::Summary => "summary",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Route SIGINT and SIGTERM to the flag, for the whole process. Call it once, first:
/// a signal before it kills the process by the signal.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM] {
        // actions run in the order registered: until `defer`, the exit comes first
        signal_hook::flag::register_conditional_shutdown(signal, i32::from(EXIT_STATUS), IMMEDIATE.clone())?;
        signal_hook::flag::register(signal, INTERRUPTED.clone())?;
    }
    Ok(())
}

/// From now on a signal only sets the flag: the caller stops at its next [`boundary`]
/// (or wherever it reads [`interrupted`]) and cleans up.
pub fn defer() {
    IMMEDIATE.store(false, Ordering::SeqCst);
}

/// Whether SIGINT or SIGTERM arrived since [`install`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// A point in `phase` where the run can stop: an error once a signal arrived. With
/// [`PAUSE_VARIABLE`] set to this phase, it first says so on stderr and waits for the
/// signal.
pub fn boundary(phase: Phase) -> Result<(), Interrupted> {
    // read only by debug builds (what `cargo test` builds), like the mitigation
    // switches: a release binary cannot be made to hang through its environment
    if cfg!(debug_assertions) && std::env::var_os(PAUSE_VARIABLE).is_some_and(|v| v == phase.as_str()) {
        pause(phase);
    }
    if cfg!(debug_assertions)
        && let Some(held) = std::env::var(HOLD_VARIABLE).ok()
        && let Some((at, file)) = held.split_once(':')
        && at == phase.as_str()
    {
        hold(phase, std::path::Path::new(file));
    }
    check(phase)
}

/// [`boundary`] without the test knob: for places passed many times (a tick of the
/// case loop), where the knob pauses at one chosen moment instead.
pub fn check(phase: Phase) -> Result<(), Interrupted> {
    if interrupted() { Err(Interrupted(phase)) } else { Ok(()) }
}

/// Say where the run waits, then wait until `file` exists (or a signal comes).
fn hold(phase: Phase, file: &std::path::Path) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "stateval: held at {phase}");
    while !file.exists() && !interrupted() {
        std::thread::sleep(PAUSE_POLL);
    }
}

/// Say where the run waits, then wait for a signal.
fn pause(phase: Phase) {
    use std::io::Write;
    // a closed stderr only loses the marker
    let _ = writeln!(std::io::stderr().lock(), "stateval: paused at {phase}");
    while !interrupted() {
        std::thread::sleep(PAUSE_POLL);
    }
}
