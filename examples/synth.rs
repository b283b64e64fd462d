//! Write a deterministic synthetic suite for benchmarks:
//!
//! `cargo run --release --example synth -- DIR [--cases N] [--turns T] [--runs K] [--seed S]`
//!
//! then `stateval run DIR/pipeline/synth.toml`.

use std::path::PathBuf;

use stateval::synth::{SynthSpec, write_suite};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut dir: Option<PathBuf> = None;
    let mut spec = SynthSpec::default();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> usize {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--cases" => spec.cases = number("--cases"),
            "--turns" => spec.turns = number("--turns"),
            "--runs" => spec.runs = number("--runs"),
            "--seed" => spec.seed = number("--seed") as u64,
            other if dir.is_none() && !other.starts_with("--") => dir = Some(PathBuf::from(other)),
            other => {
                eprintln!("unexpected argument {other}");
                std::process::exit(2)
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: synth DIR [--cases N] [--turns T] [--runs K] [--seed S]");
        std::process::exit(2)
    };
    match write_suite(&dir, &spec) {
        Ok(pipeline) => println!("{}", pipeline.display()),
        Err(e) => {
            eprintln!("{}: {e}", dir.display());
            std::process::exit(3)
        }
    }
}
