//! Reading logs from disk: every read verifies the chain.

use std::path::{Path, PathBuf};

use super::Event;
use super::verify::{self, StreamError, Summary, Verified, VerifyError};

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
    let file = std::fs::File::open(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
    let reader = std::io::BufReader::with_capacity(256 * 1024, file);
    verify::verify_stream(reader, visit).map_err(|e| read_error(path, e))
}

/// [`stream_log`] for a log a killed run may have left: a torn last line is not an
/// error, and its length in bytes is returned beside the summary of the whole lines.
pub fn stream_log_whole_lines(path: &Path, visit: impl FnMut(&Event, &[u8])) -> Result<(Summary, u64), ReadError> {
    let file = std::fs::File::open(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
    let reader = std::io::BufReader::with_capacity(256 * 1024, file);
    verify::verify_stream_whole_lines(reader, visit).map_err(|e| read_error(path, e))
}

fn read_error(path: &Path, e: StreamError) -> ReadError {
    match e {
        StreamError::Io(source) => ReadError::Io { path: path.to_path_buf(), source },
        StreamError::Invalid(source) => ReadError::Invalid { path: path.to_path_buf(), source },
    }
}
