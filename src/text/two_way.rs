//! A built-in pattern compiled for the text it meets.
//!
//! Unicode changes what `\s`, `\S`, `\w`, `\b`, `.` and `(?i)` say only of characters
//! outside ASCII (`\s` also takes the no-break space, `\w` every script's letters,
//! `(?i)k` the Kelvin sign), so on a text that is all ASCII a pattern's ASCII form
//! (compiled under `(?-u)`) finds and captures exactly what the pattern as written does.
//! The ASCII form is the cheap one to compile (Unicode's word class alone is hundreds
//! of ranges); the pattern as written is compiled only when a text outside ASCII comes.
//! Each pattern kept this way has a property test against the pattern as written.

use std::sync::OnceLock;

/// A pattern (`source`) with its ASCII form compiled, and the pattern itself compiled by
/// `unicode` at the first text outside ASCII.
pub struct TwoWay<R> {
    source: &'static str,
    ascii: R,
    unicode: fn(&'static str) -> R,
    compiled: OnceLock<R>,
}

impl<R> TwoWay<R> {
    pub fn new(source: &'static str, ascii: R, unicode: fn(&'static str) -> R) -> TwoWay<R> {
        TwoWay { source, ascii, unicode, compiled: OnceLock::new() }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &'static str {
        self.source
    }

    /// The compilation that reads `text` as the pattern as written does.
    pub fn on(&self, text: &str) -> &R {
        if text.is_ascii() { &self.ascii } else { self.compiled.get_or_init(|| (self.unicode)(self.source)) }
    }

    /// The ASCII form, whatever the text (for tests that show the choice matters).
    #[cfg(test)]
    pub fn ascii(&self) -> &R {
        &self.ascii
    }
}
