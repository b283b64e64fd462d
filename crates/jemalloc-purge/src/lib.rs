//! jemalloc actions and readings without a safe call elsewhere. `tikv-jemalloc-ctl` writes every
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

/// The transparent-huge-page mode jemalloc was built or started with (`opt.thp`:
/// "default", "always" or "never"). `Err` holds the errno jemalloc answered.
pub fn thp_mode() -> Result<String, c_int> {
    static_string(c"opt.thp")
}

/// The options compiled into jemalloc (`config.malloc_conf`, what
/// `JEMALLOC_SYS_WITH_MALLOC_CONF` gave its build), empty for none. `Err` holds the
/// errno jemalloc answered.
pub fn compiled_conf() -> Result<String, c_int> {
    static_string(c"config.malloc_conf")
}

/// One of jemalloc's static strings, a `const char *` it owns. Only the controls named
/// by this crate's callers are read: a generic string reader would take any
/// pointer-sized number for a pointer.
fn static_string(control: &CStr) -> Result<String, c_int> {
    let mut value: *const std::ffi::c_char = std::ptr::null();
    let mut len = std::mem::size_of::<*const std::ffi::c_char>();
    // SAFETY: the name is a NUL-terminated string that outlives the call; both controls
    // read here are a `const char *`, and jemalloc writes at most `len` bytes (that one
    // pointer) into `value`
    let errno = unsafe {
        tikv_jemalloc_sys::mallctl(control.as_ptr(), (&raw mut value).cast(), &mut len, std::ptr::null_mut(), 0)
    };
    if errno != 0 {
        return Err(errno);
    }
    if value.is_null() {
        return Ok(String::new());
    }
    // SAFETY: jemalloc's strings are static and NUL-terminated
    Ok(unsafe { CStr::from_ptr(value) }.to_string_lossy().into_owned())
}

/// The value of a signed, pointer-sized option of jemalloc (`ssize_t`, such as
/// `opt.dirty_decay_ms`). `Err` holds the errno jemalloc answered: ENOENT for a name it
/// does not know, EINVAL for an option of another size.
pub fn option_isize(control: &CStr) -> Result<isize, c_int> {
    let mut value: isize = 0;
    let mut len = std::mem::size_of::<isize>();
    // SAFETY: the name is a NUL-terminated string that outlives the call; jemalloc
    // writes at most `len` bytes into `value`, and refuses an option of another size
    let errno = unsafe {
        tikv_jemalloc_sys::mallctl(control.as_ptr(), (&raw mut value).cast(), &mut len, std::ptr::null_mut(), 0)
    };
    if errno == 0 { Ok(value) } else { Err(errno) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn jemalloc_purges_and_refuses_an_unknown_control() {
        assert_eq!(super::purge_every_arena(), Ok(()));
        assert_eq!(super::act(c"arena.4096.purged"), Err(2), "an unknown control is ENOENT");
    }

    #[test]
    fn options_read_and_an_unknown_or_mis_sized_one_is_refused() {
        let thp = super::thp_mode().unwrap();
        assert!(["default", "always", "never"].contains(&thp.as_str()), "{thp}");
        let conf = super::compiled_conf().unwrap();
        assert!(conf.is_empty() || conf.contains(':'), "{conf}");
        assert!(super::option_isize(c"opt.dirty_decay_ms").unwrap() >= -1);
        assert_eq!(super::option_isize(c"opt.no_such_option"), Err(2), "ENOENT");
        assert_eq!(super::option_isize(c"opt.abort"), Err(22), "a bool is EINVAL");
    }
}
