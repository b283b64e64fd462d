//! The `stateval` binary: parse the command line, run it, map the outcome to an exit
//! code (0 pass · 1 a gate or check failed · 2 invalid input or usage · 3 internal).
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

/// jemalloc hands freed memory back to the system after a few seconds; glibc's
/// allocator kept what loading a large plan freed for the whole run (README, Speed).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    #[cfg(not(target_env = "msvc"))]
    return_freed_memory_sooner();
    cli::main()
}

/// jemalloc keeps freed pages for 10 s by default before handing them back; the plan
/// load of a large suite frees faster than that (each batch of dataset lines parsed in
/// full, then dropped), and a 10,000-case run peaked there. One second instead, and
/// pages handed back at once rather than kept as "muzzy": measured in README, Speed.
/// Set before any thread starts, so every arena the run creates takes them; a key the
/// allocator refuses leaves its default (memory, never output, depends on it).
#[cfg(not(target_env = "msvc"))]
fn return_freed_memory_sooner() {
    use tikv_jemalloc_ctl::{Access, AsName};
    let settings: [(&[u8], isize); 4] = [
        (b"arenas.dirty_decay_ms\0", 1000),
        (b"arenas.muzzy_decay_ms\0", 0),
        (b"arena.0.dirty_decay_ms\0", 1000),
        (b"arena.0.muzzy_decay_ms\0", 0),
    ];
    for (key, ms) in settings {
        let _ = key.name().write(ms);
    }
}
