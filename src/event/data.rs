//! An event's data as the log holds it: the canonical bytes of one JSON object.
//!
//! Events used to carry their data as a `serde_json::Value` tree. A tree costs a map
//! node of about 640 bytes per object whatever its size, and building and dropping
//! those maps was a fifth of a replayed run's time; an 11,000-turn case held 230 MB of
//! them for a 40 MB log. Here the data is the string the log line has between
//! `{"data":` and `,"hash":` — written once by the kind's writer (`payload::write`,
//! straight from typed fields), or cut from a verified line by the reader — and
//! nothing else.
//!
//! Readers take what they need from those bytes:
//! - `Event::view` reads a typed payload ([`super::payload`]) member by member from the
//!   bytes, each member kept as its canonical text: what extractors, detectors and
//!   graders use; [`Data::member`] reads one member of any kind;
//! - [`Data::tree`] parses the whole object each time it is asked, and keeps nothing:
//!   for the edges that show or transform arbitrary data (`show`, imports, custom
//!   graders, a golden diff's changed event).
//!
//! Because the bytes are canonical (RFC 8785), two datas are equal exactly when their
//! bytes are.

use std::fmt;

use serde_json::Value;

use super::payload::Json;
use crate::canon::{self, CanonError};

/// Only the text: a long run holds every event until it is graded (104,502 for an
/// 11,000-turn case), and a cell for a parsed tree was 16 bytes of each — 1.7 MB — for
/// trees that only `show`, imports and tests ever ask for.
#[derive(Clone, PartialEq, Eq)]
pub struct Data {
    text: Box<str>,
}

impl Data {
    /// Data from bytes already in canonical form: the canonical writer's output, or a
    /// verified line's data member. Bytes from anywhere else go through
    /// [`checked`](Self::checked) in debug builds.
    pub(crate) fn from_canonical(bytes: &[u8]) -> Data {
        // every event's bytes pass here once: the vectorised check, where the standard
        // library's was 2 % of a replayed run
        let text = match simdutf8::basic::from_utf8(bytes) {
            Ok(text) => text,
            // canonical bytes are written from Rust strings or cut from a line that
            // passed UTF-8 validation; anything else is a bug in the caller
            // (the standard check, only here, for where the bytes went wrong)
            Err(_) => unreachable!("canonical event data is UTF-8: {:?}", std::str::from_utf8(bytes).err()),
        };
        Data { text: text.into() }
    }

    /// [`from_canonical`](Self::from_canonical) for bytes a typed writer wrote member by
    /// member: debug builds check they are the canonical form of what they parse to.
    pub(crate) fn checked(bytes: &[u8]) -> Data {
        let data = Data::from_canonical(bytes);
        #[cfg(debug_assertions)]
        {
            let parsed: Value = serde_json::from_str(data.as_str()).expect("typed event data parses");
            debug_assert!(parsed.is_object(), "event data is an object: {}", data.as_str());
            let again = canon::to_canonical_string(&parsed).expect("typed event data canonicalises");
            debug_assert_eq!(again, data.as_str(), "typed event data is canonical");
        }
        data
    }

    /// Data of a JSON value, canonicalised.
    pub fn from_value(value: Value) -> Result<Data, CanonError> {
        let text = canon::to_canonical_string(&value)?;
        Ok(Data { text: text.into_boxed_str() })
    }

    /// The canonical JSON text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// Top-level member `name` of the data, read from the bytes without building a tree
    /// (absent, or data that is not an object, reads as null). For readers of one or
    /// two members of any kind; a reader of one kind reads its payload (`Event::view`).
    pub fn member(&self, name: &str) -> Json<'_> {
        Json::of(&self.text).member(name)
    }

    /// [`Data::member`] for a member that is usually the data's last ([`Json::last_member`]).
    pub fn last_member(&self, name: &str) -> Json<'_> {
        Json::of(&self.text).last_member(name)
    }

    /// The data as a JSON tree, parsed from the text on each call. For edges that
    /// handle arbitrary data (`show`, imports, a golden diff's changed members); readers
    /// of a kind read its payload ([`Event::view`](super::Event::view)) and readers of
    /// one member [`member`](Self::member), without building a tree.
    pub fn tree(&self) -> Value {
        match serde_json::from_str(&self.text) {
            Ok(value) => value,
            Err(e) => unreachable!("canonical event data parses: {e}"),
        }
    }
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_stays_small_beside_its_data() {
        // a long run holds every event until it is graded: 104,502 events for an
        // 11,000-turn case, whose fixed part should stay well under its data's bytes:
        // the text's pointer and length, and an event's fields without `prev`
        assert_eq!(std::mem::size_of::<Data>(), 16);
        assert!(std::mem::size_of::<super::super::Event>() <= 80, "{}", std::mem::size_of::<super::super::Event>());
    }

    #[test]
    fn data_keeps_canonical_bytes_and_parses_them_on_demand() {
        let data = Data::from_value(json!({"b": [1, 2.5], "a": "é\u{1}"})).unwrap();
        assert_eq!(data.as_str(), "{\"a\":\"é\\u0001\",\"b\":[1,2.5]}");
        let copy = Data::from_canonical(data.as_bytes());
        assert_eq!(copy, data);
        assert_eq!(copy.tree()["b"][1], json!(2.5));
        assert_eq!(copy.tree(), json!({"b": [1, 2.5], "a": "é\u{1}"}));
        assert_eq!(data.member("b").raw(), "[1,2.5]");
        assert!(data.member("missing").is_null());
        assert_eq!(data.member("a").as_str().as_deref(), Some("é\u{1}"));
        assert!(Data::from_value(json!([1])).unwrap().member("a").is_null());
        assert_ne!(Data::from_value(json!({"a": 1})).unwrap(), Data::from_value(json!({"a": 1.5})).unwrap());
    }
}
