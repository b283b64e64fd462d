//! The `stateval` binary: parse the command line, run it, map the outcome to an exit
//! code (0 pass · 1 a gate or check failed · 2 invalid input or usage · 3 internal).
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
