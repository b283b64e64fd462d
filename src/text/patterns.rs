//! Regexes of the configuration, compiled once for the process.
//!
//! A profile's safety patterns are compiled when the pipeline loads (to refuse one that
//! does not compile, at its place) and again by every run's detectors; a suite of many
//! profiles or many runs compiled the same few patterns over and over, and a regex costs
//! far more to compile than to search. Compiled ones are shared (`Arc`), not cloned: a
//! clone of a `Regex` starts without a search cache of its own, so every run that
//! cloned them built its caches again. A regex is a function of its pattern alone.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

/// Compiled patterns by their text.
static COMPILED: LazyLock<Mutex<HashMap<String, Arc<Regex>>>> = LazyLock::new(Default::default);

/// Distinct patterns kept at once: past this many the cache starts again, so a
/// configuration of all-different patterns costs compile time, not memory.
const CAPACITY: usize = 1024;

/// `pattern` compiled, from the cache when it was compiled before; an error is
/// `Regex::new`'s own (and is compiled again next time, never kept).
pub fn compiled(pattern: &str) -> Result<Arc<Regex>, regex::Error> {
    if let Some(found) = COMPILED.lock().ok().and_then(|cache| cache.get(pattern).cloned()) {
        return Ok(found);
    }
    let regex = Arc::new(Regex::new(pattern)?);
    if let Ok(mut cache) = COMPILED.lock() {
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(pattern.to_string(), regex.clone());
    }
    Ok(regex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_compiled_twice_is_one_regex_and_a_bad_one_is_regexs_own_error() {
        let first = compiled(r"ACC-[0-9]{6}\b").unwrap();
        let again = compiled(r"ACC-[0-9]{6}\b").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(again.is_match("ACC-123456 was charged"));
        let other = compiled(r"ACC-[0-9]{7}\b").unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        // built at run time: a literal bad pattern is refused by clippy before it runs
        let unclosed = ["(", "unclosed"].concat();
        let bad = compiled(&unclosed).unwrap_err().to_string();
        assert_eq!(bad, Regex::new(&unclosed).unwrap_err().to_string());
    }
}
