//! Regenerate the committed long-horizon suite (`datasets/long_horizon/suite.jsonl` and
//! its recordings) from `stateval::synth::long_horizon`:
//!
//! `cargo run --example long_horizon`   (from the repository root)

use std::fmt::Write as _;

use stateval::synth::{LONG_HORIZON_TURNS, long_horizon};

fn main() -> std::io::Result<()> {
    std::fs::create_dir_all("datasets/long_horizon")?;
    let mut dataset = String::new();
    for turns in LONG_HORIZON_TURNS {
        let (case, recording) = long_horizon(turns);
        let _ = writeln!(dataset, "{case}");
        std::fs::write(format!("fixtures/recordings/long-horizon-{turns}.jsonl"), recording)?;
    }
    std::fs::write("datasets/long_horizon/suite.jsonl", dataset)
}
