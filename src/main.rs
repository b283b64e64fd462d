//! The `stateval` binary: parse the command line, run it, map the outcome to an exit
//! code (0 pass · 1 a gate or check failed · 2 invalid input or usage · 3 internal).
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

/// jemalloc hands freed memory back to the system after a second (its decay times are
/// set where it is built, `.cargo/config.toml`); glibc's allocator kept what loading a
/// large plan freed for the whole run (docs/speed.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    cli::main()
}
