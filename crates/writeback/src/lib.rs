//! Starting a file's writeback early. A log that is complete but not yet needed on disk
//! can have its pages sent to the device while the program goes on, so that the fsync
//! that later makes it durable finds them written or on their way, rather than starting
//! every log's writeback at once. This never makes anything durable by itself: the
//! file's metadata, and the device's cache, still wait for that fsync.

use std::fs::File;
use std::io;

/// Asks the kernel to start writing `file`'s dirty pages out, without waiting for them
/// (`sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`). Where there is no such call
/// (every system but Linux) it does nothing and says so with `Ok(false)`.
#[cfg(target_os = "linux")]
pub fn start(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor belongs to `file`, borrowed for the call and so open
    // throughout it; offset 0 and length 0 name the whole file, and the flag only starts
    // writeback, touching no memory of this process.
    let done = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if done == 0 { Ok(true) } else { Err(io::Error::last_os_error()) }
}

/// Asks the kernel to start writing `file`'s dirty pages out, without waiting for them.
/// This system has no such call: it does nothing and says so with `Ok(false)`.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &File) -> io::Result<bool> {
    Ok(false)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    // Whether the kernel then writes the pages early cannot be seen from here; what it
    // saves is measured by the run's rounds (docs/speed.md, 2026-12-07).
    #[test]
    fn a_file_just_written_is_accepted_on_linux_and_keeps_its_bytes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("writeback-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("log.jsonl");
        let mut file = std::fs::File::create(&path)?;
        file.write_all(b"{}\n")?;
        let started = super::start(&file)?;
        assert_eq!(started, cfg!(target_os = "linux"));
        file.sync_all()?;
        drop(file);
        assert_eq!(std::fs::read(&path)?, b"{}\n");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }

    #[test]
    fn a_file_open_for_reading_only_is_no_error() -> Result<(), Box<dyn std::error::Error>> {
        // sync_file_range needs no write access: a log reopened to be read may start too
        let file = std::fs::File::open(std::env::current_exe()?)?;
        super::start(&file)?;
        Ok(())
    }
}
