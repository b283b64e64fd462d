//! The `stateval` binary: parse the command line, run it, map the outcome to an exit
//! code (0 pass · 1 a gate or check failed · 2 invalid input or usage · 3 internal).
#![deny(unsafe_code)]

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
/// its peak; docs/speed.md). A failure only leaves the pages where they are.
#[cfg(not(target_env = "msvc"))]
fn release_freed_memory() {
    let _ = purge_every_arena();
}

/// jemalloc's `arena.<i>.purge` with i = MALLCTL_ARENAS_ALL (4096): every arena's
/// unused dirty pages. 0 when it did, an errno otherwise.
#[cfg(not(target_env = "msvc"))]
fn purge_every_arena() -> std::ffi::c_int {
    act(c"arena.4096.purge")
}

/// Runs a jemalloc control that reads and writes no value (an action such as a purge).
#[cfg(not(target_env = "msvc"))]
#[allow(unsafe_code)]
fn act(control: &std::ffi::CStr) -> std::ffi::c_int {
    // SAFETY: the name is a NUL-terminated string that outlives the call; an action
    // takes no old or new value: null pointers and a zero new length say so.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            control.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }
}

#[cfg(target_env = "msvc")]
fn release_freed_memory() {}

fn main() -> ExitCode {
    cli::main()
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    #[test]
    fn jemalloc_accepts_the_purge_control() {
        // a misspelt control, or one this jemalloc lacks, is refused (ENOENT): the run
        // would keep what its plan freed without a word
        assert_eq!(super::purge_every_arena(), 0);
        assert_ne!(super::act(c"arena.4096.purged"), 0);
    }
}
