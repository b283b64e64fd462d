//! Golden traces (DESIGN.md §8): a run's log, kept as the expected behaviour of a case.
//!
//! `goldens/<dataset>/<case>.<k>.jsonl` is run k's log in golden form ([`normalize`]).
//! `stateval run` compares every run with its golden and adds one check, named
//! `golden`, to the run: identical passes; a difference fails the case with the first
//! divergent event in its reason ([`diff`], [`render`]); a missing golden passes as
//! "no golden" unless the pipeline sets `[goldens] required = true`. With `--bless`
//! the run's log is written as its golden instead ([`bless`]).
//!
//! A golden is read like any log: it must verify. One edited by hand fails the case
//! with the verifier's finding, because a golden that no longer verifies cannot say
//! what was expected.

mod align;
pub mod diff;
pub mod normalize;
pub mod render;

pub use diff::{Class, Diff, Difference, diff};
