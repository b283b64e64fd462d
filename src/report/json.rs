//! The JSON report: the `SuiteOutcome` itself, pretty-printed.
//!
//! It is the one lossless report (every check, expected and actual value, log head and
//! extra), so it parses back into an equal `SuiteOutcome`; tools downstream of CI read
//! this rather than scraping the others. Keys come out in struct order and extras in
//! key order (serde_json's map is a `BTreeMap`), so bytes are stable.

use crate::runner::outcome::SuiteOutcome;

/// `outcome` as pretty JSON with a trailing newline.
pub fn render(outcome: &SuiteOutcome) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(outcome)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn the_json_report_parses_back_into_an_equal_outcome() -> Result<(), serde_json::Error> {
        let outcome = fixture::suite();
        let text = render(&outcome)?;
        let back: SuiteOutcome = serde_json::from_str(&text)?;
        assert_eq!(back, outcome);
        // Non-trivial floats survive exactly (float_roundtrip).
        assert_eq!(back.gates[0].pass_rate, 1.0 / 3.0);
        Ok(())
    }

    #[test]
    fn the_json_report_is_pinned() -> Result<(), serde_json::Error> {
        insta::assert_snapshot!("json", render(&fixture::suite())?);
        Ok(())
    }
}
