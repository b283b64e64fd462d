//! The JSON report: the `SuiteOutcome` itself, pretty-printed.
//!
//! It is the one lossless report (every check, expected and actual value, log head and
//! extra), so it parses back into an equal `SuiteOutcome`; tools downstream of CI read
//! this rather than scraping the others. Keys come out in struct order and extras in
//! key order (serde_json's map is a `BTreeMap`), so bytes are stable.

use std::io::{self, Write};

use crate::outcome::SuiteOutcome;

/// `outcome` as pretty JSON with a trailing newline, in memory.
pub fn render(outcome: &SuiteOutcome) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as pretty JSON, cases streamed one at a time.
pub fn write(outcome: &SuiteOutcome, out: &mut dyn Write) -> io::Result<()> {
    // through a buffer of a type serde_json is compiled for: straight into `out`, each
    // token of the pretty printer was a call through `dyn Write` (1 % of a 220-case
    // run's instructions); here it is a copy into the buffer
    let mut buffered = io::BufWriter::with_capacity(64 << 10, out);
    serde_json::to_writer_pretty(&mut buffered, outcome)?;
    buffered.write_all(b"\n")?;
    buffered.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn the_json_report_parses_back_into_an_equal_outcome() -> Result<(), Box<dyn std::error::Error>> {
        let outcome = fixture::suite();
        let text = render(&outcome)?;
        let back: SuiteOutcome = serde_json::from_str(&text)?;
        assert_eq!(back, outcome);
        // Non-trivial floats survive exactly (float_roundtrip).
        assert_eq!(back.gates[0].pass_rate, 1.0 / 3.0);
        Ok(())
    }

    #[test]
    fn the_json_report_is_pinned() -> io::Result<()> {
        insta::assert_snapshot!("json", render(&fixture::suite())?);
        Ok(())
    }
}
