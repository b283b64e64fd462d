//! `stateval keygen`: an ed25519 key pair for signing run manifests.

use std::io::Write;
use std::path::PathBuf;

use super::{CliError, Exit};
use stateval::evidence::SecretKey;

#[derive(clap::Args)]
pub struct Args {
    /// Path prefix: writes `PREFIX.key` (secret, readable by you alone) and
    /// `PREFIX.pub` (for `verify --pubkey`).
    #[arg(short, long, default_value = "stateval-signing")]
    out: PathBuf,
    /// Replace existing key files.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> Result<Exit, CliError> {
    let with = |ext: &str| {
        let mut name = args.out.clone().into_os_string();
        name.push(ext);
        PathBuf::from(name)
    };
    let (secret_path, public_path) = (with(".key"), with(".pub"));
    for path in [&secret_path, &public_path] {
        if path.exists() && !args.force {
            return Err(CliError::invalid(format!("{} exists; pass --force to replace it", path.display())));
        }
    }
    if let Some(dir) = secret_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::invalid(format!("{}: {e}", dir.display())))?;
    }
    let key = SecretKey::generate().map_err(|e| CliError::internal(e.to_string()))?;
    write_secret(&secret_path, &format!("{}\n", key.to_line()))?;
    std::fs::write(&public_path, format!("{}\n", key.public().to_line()))
        .map_err(|e| CliError::invalid(format!("{}: {e}", public_path.display())))?;
    super::out(format!("wrote {} (secret) and {}", secret_path.display(), public_path.display()));
    super::out(format!(
        "sign a finished run with STATEVAL_SIGNING_KEY={} stateval sign RUN_DIR --root ROOT, in a step \
         that runs none of the project's code (or the key line itself); check it with stateval verify \
         RUN_DIR --pubkey {}",
        secret_path.display(),
        public_path.display()
    ));
    Ok(Exit::Pass)
}

/// The secret key file is created readable by its owner alone.
fn write_secret(path: &std::path::Path, text: &str) -> Result<(), CliError> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| CliError::invalid(format!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)
}
