//! jemalloc actions without a safe call elsewhere. `tikv-jemalloc-ctl` writes every
//! control through a value pointer, and jemalloc answers EPERM when an action such as
//! `arena.<i>.purge` gets one; these call `mallctl` with no value at all. The FFI lives
//! in this crate so that stateval's own crates can forbid `unsafe` code.
#![cfg(not(target_env = "msvc"))]

use std::ffi::{CStr, c_int};

/// Hands every arena's unused dirty pages back to the system at once
/// (`arena.<MALLCTL_ARENAS_ALL>.purge`). `Err` holds the errno jemalloc answered.
pub fn purge_every_arena() -> Result<(), c_int> {
    act(c"arena.4096.purge")
}

/// Runs a jemalloc control without reading or writing a value (for an action, the only
/// way jemalloc accepts it). `Err` holds the errno jemalloc answered, ENOENT for a name
/// it does not know.
pub fn act(control: &CStr) -> Result<(), c_int> {
    // SAFETY: the name is a NUL-terminated string that outlives the call; an action
    // takes no old or new value, and null pointers with a zero new length say so.
    let errno = unsafe {
        tikv_jemalloc_sys::mallctl(
            control.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if errno == 0 { Ok(()) } else { Err(errno) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn jemalloc_purges_and_refuses_an_unknown_control() {
        assert_eq!(super::purge_every_arena(), Ok(()));
        assert_eq!(super::act(c"arena.4096.purged"), Err(2), "an unknown control is ENOENT");
    }
}
