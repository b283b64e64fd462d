//! Reading logs from disk: every read verifies the chain.

use std::path::{Path, PathBuf};

use super::verify::{self, Verified, VerifyError};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{}: event seq {}: {}", .source.line, .source.seq, .source.reason)]
    Invalid { path: PathBuf, source: VerifyError },
}

/// Read and verify the log at `path`.
pub fn read_log(path: &Path) -> Result<Verified, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
    verify::verify_bytes(&bytes).map_err(|source| ReadError::Invalid { path: path.to_path_buf(), source })
}
