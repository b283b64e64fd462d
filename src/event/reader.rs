//! Reading logs from disk: every read verifies the chain.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use super::Event;
use super::verify::{self, Envelope, StreamError, Summary, Verified, VerifyError};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{}: event seq {}: {}", .source.line, .source.seq, .source.reason)]
    Invalid { path: PathBuf, source: VerifyError },
}

/// Read and verify the log at `path`, keeping its events.
pub fn read_log(path: &Path) -> Result<Verified, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
    verify::verify_bytes(&bytes).map_err(|source| ReadError::Invalid { path: path.to_path_buf(), source })
}

/// Verify the log at `path` as a stream: `visit` sees each event as it verifies and
/// memory stays that of one line, whatever the log's size.
pub fn stream_log(path: &Path, visit: impl FnMut(&Event, &[u8])) -> Result<Summary, ReadError> {
    verify::verify_stream(open(path)?, visit).map_err(|e| read_error(path, e))
}

/// [`stream_log`] for a log a killed run may have left: a torn last line is not an
/// error, and its length in bytes is returned beside the summary of the whole lines.
pub fn stream_log_whole_lines(path: &Path, visit: impl FnMut(&Event, &[u8])) -> Result<(Summary, u64), ReadError> {
    verify::verify_stream_whole_lines(open(path)?, visit).map_err(|e| read_error(path, e))
}

/// [`stream_log`] for a reader that needs no event's data: the same verdict, without
/// parsing any (see [`verify::Chain::push_envelope`]).
pub fn stream_envelopes(path: &Path, visit: impl FnMut(&Envelope, &[u8])) -> Result<Summary, ReadError> {
    verify::verify_envelopes(open(path)?, visit).map_err(|e| read_error(path, e))
}

/// [`stream_log_whole_lines`] without the events' data.
pub fn stream_envelopes_whole_lines(
    path: &Path,
    visit: impl FnMut(&Envelope, &[u8]),
) -> Result<(Summary, u64), ReadError> {
    verify::verify_envelopes_whole_lines(open(path)?, visit).map_err(|e| read_error(path, e))
}

/// A buffered reader sized to the log, up to 256 KiB: a run directory holds thousands of
/// small logs, and a fresh 256 KiB buffer for each is a fresh zeroed mapping each.
fn open(path: &Path) -> Result<BufReader<File>, ReadError> {
    let io = |source| ReadError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let capacity = usize::try_from(len + 1).unwrap_or(usize::MAX).clamp(8 * 1024, 256 * 1024);
    Ok(BufReader::with_capacity(capacity, file))
}

fn read_error(path: &Path, e: StreamError) -> ReadError {
    match e {
        StreamError::Io(source) => ReadError::Io { path: path.to_path_buf(), source },
        StreamError::Invalid(source) => ReadError::Invalid { path: path.to_path_buf(), source },
    }
}
