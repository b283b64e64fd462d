//! A case's metric blocks (`trajectory`, `golden_path`, `stability`, …), as data: the
//! dataset keys that hold them, and each block as written. What a block means — its
//! parameters, the runs it needs, the targets it reports, its grade — is the metrics
//! stage's (`metrics::block`); the loader asks it through a [`CheckBlock`] that whoever
//! loads a dataset passes in, so a bad block is still refused at its line and column.

use serde_json::Value;

/// Dataset keys that hold metric blocks, in the order reports list them.
pub const BLOCK_KEYS: [&str; 7] =
    ["trajectory", "trajectory_axes", "golden_path", "stability", "reliability", "recovery", "narrative"];

/// One metric block of a case, as the case writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Its dataset key, one of [`BLOCK_KEYS`].
    pub key: &'static str,
    pub spec: Value,
}

/// What the loader needs to know of a valid block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockFacts {
    /// Fewest recorded runs the case needs for the block (a load error below it).
    pub min_runs: usize,
    /// Every target the block gives a value for: what a case's `expect` may name under
    /// the block's root.
    pub targets: Vec<String>,
}

/// Why a block was refused: where (a JSON Pointer relative to the case, when the
/// problem has one) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    pub pointer: Option<String>,
    pub message: String,
}

/// Checks the block under a dataset key; `None` when the key holds no metric block.
pub type CheckBlock = fn(key: &str, spec: &Value) -> Option<Result<BlockFacts, BlockError>>;

/// Target roots the metric blocks expose, by block key.
pub fn block_root(key: &str) -> &'static str {
    match key {
        "trajectory" | "trajectory_axes" => "trajectory",
        "golden_path" => "golden_path",
        "stability" => "stability",
        "reliability" => "reliability",
        "recovery" => "recovery",
        _ => "narrative",
    }
}
