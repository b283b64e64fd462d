//! The `stateval` binary: parse the command line, run it, map the outcome to an exit
//! code (0 pass · 1 a gate or check failed · 2 invalid input or usage · 3 internal ·
//! 130 interrupted, in any phase: src/interrupt.rs).
#![forbid(unsafe_code)]

mod cli;

use std::process::ExitCode;

/// jemalloc hands freed memory back to the system after a second (its decay times are
/// set where it is built, `.cargo/config.toml`); glibc's allocator kept what loading a
/// large plan freed for the whole run (docs/speed.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Hands the pages the allocator holds freed back to the system at once. Call it after
/// work that freed much on threads that have finished: jemalloc returns an arena's freed
/// pages only while a thread allocates from it, so what a plan's validation freed on its
/// parser threads stayed resident through the run (a 10,000-case run held 4-9 MB more at
/// its peak; docs/speed.md). A refusal only leaves the pages where they are.
fn release_freed_memory() {
    #[cfg(not(target_env = "msvc"))]
    let _ = jemalloc_purge::purge_every_arena();
}

fn main() -> ExitCode {
    cli::main()
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    #[test]
    fn jemalloc_accepts_the_purge() {
        // a control this jemalloc lacks is refused (ENOENT): the run would keep what its
        // plan freed without a word
        assert_eq!(jemalloc_purge::purge_every_arena(), Ok(()));
    }

    #[test]
    fn jemalloc_was_built_to_hand_freed_pages_back_and_not_to_ask_for_huge_pages() {
        // .cargo/config.toml compiles these in (docs/speed.md); huge pages partly used
        // counted whole in a long case's peak, so none are asked for
        let thp = jemalloc_purge::thp_mode().expect("opt.thp reads");
        // "default", or "not supported" where jemalloc has no THP
        assert_ne!(thp, "always", "{thp}");
        assert_eq!(jemalloc_purge::option_isize(c"opt.dirty_decay_ms"), Ok(1000));
        assert_eq!(jemalloc_purge::option_isize(c"opt.muzzy_decay_ms"), Ok(0));
        // one arena per CPU, not jemalloc's four (opt.narenas follows it, but so does the
        // default on a one-CPU machine: the compiled-in options say which it was)
        let conf = jemalloc_purge::compiled_conf().expect("config.malloc_conf reads");
        assert!(conf.split(',').any(|option| option == "narenas_ratio:1"), "{conf}");
    }
}
