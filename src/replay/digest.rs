//! The model-request digest: what replay compares with a recording's `request_hash`.
//!
//! A request document is a JSON object — the built-in runtime's
//! `{"memory","messages","system","tools"}`, or an external agent's dialect-neutral
//! `{"messages","params","system","tools"}`. Its digest is built from its members:
//!
//! ```text
//! member(v)  = blake3 derive_key("stateval request member v2", canonical JSON of v)
//! digest(D)  = blake3 derive_key("stateval request v2",
//!                  for each member (k, v) of D in JCS key order:
//!                      canonical JSON string of k ‖ member(v))
//! ```
//!
//! The key's canonical string ends at its closing quote and a member digest is 32
//! bytes, so the framing is unambiguous. Hashing each member apart is what lets the
//! built-in runtime digest a long conversation in linear time: the `messages` member is
//! one running hash fed each message once, and a new memory view costs a hash of the
//! memory alone instead of the whole history behind it (`runtime::context`).
//!
//! Recordings made before this definition carry the digest of the whole canonical
//! document (`stateval request v1`, [`legacy`]). Replay still accepts one when the
//! request recorded beside it digests, under the old definition, to its hash and,
//! under this one, to what the agent asks now ([`equivalent`]).

use serde_json::Value;

use crate::canon::{self, CanonError, Context, Digest, Digester};

/// The digest of a request document's member value, from its canonical bytes.
pub fn member(canonical: &[u8]) -> Digest {
    canon::digest(Context::RequestMember, canonical)
}

/// A request digest built member by member; members must come in JCS key order.
pub struct Members(Digester);

impl Members {
    pub fn new() -> Self {
        Members(Digester::new(Context::ModelRequest))
    }

    /// Add member `key`, framed as its canonical JSON string, with its value's digest.
    pub fn add(&mut self, key: &str, value: &Digest) -> &mut Self {
        // a key that needs no escape is its own canonical string between quotes: the
        // usual member is framed on the stack (a buffer per member was a tenth of a
        // built-in run's request digests)
        let plain = key.len() <= 30 && key.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
        if plain {
            let mut framed = [0u8; 32 + 32];
            let n = key.len() + 2;
            framed[0] = b'"';
            framed[1..n - 1].copy_from_slice(key.as_bytes());
            framed[n - 1] = b'"';
            framed[n..n + 32].copy_from_slice(&value.0);
            self.0.update(&framed[..n + 32]);
        } else {
            let mut framed = Vec::with_capacity(key.len() + 2 + 32);
            canon::write_canonical_str(&mut framed, key);
            framed.extend_from_slice(&value.0);
            self.0.update(&framed);
        }
        self
    }

    pub fn finish(&self) -> Digest {
        self.0.finish()
    }

    /// Back to no members, in place: a caller that digests request after request keeps
    /// one rather than copying a fresh hasher's 1.9 KB each time.
    pub fn reset(&mut self) -> &mut Self {
        self.0.reset();
        self
    }
}

impl Default for Members {
    fn default() -> Self {
        Members::new()
    }
}

/// The digest of a whole request document (an object).
pub fn of(request: &Value) -> Result<Digest, CanonError> {
    let Value::Object(map) = request else {
        return Err(CanonError::Serialize("a model request is a JSON object".into()));
    };
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    let mut digest = Members::new();
    let mut bytes = Vec::new();
    for (key, value) in members {
        bytes.clear();
        canon::write_canonical(&mut bytes, value)?;
        digest.add(key, &member(&bytes));
    }
    Ok(digest.finish())
}

/// The definition recordings made before the member-wise one carry: the digest of the
/// whole canonical document.
pub fn legacy(request: &Value) -> Result<Digest, CanonError> {
    canon::canonical_digest(Context::Request, request)
}

/// Whether a response recorded for `recorded` (a document and the hash stored beside
/// it) was recorded for the request whose digest is `actual`, although its hash is not
/// `actual`: it was recorded under the earlier definition, its document still digests
/// to that hash under it (it was not edited), and the same document digests to
/// `actual` under today's.
pub fn equivalent(recorded: &Value, recorded_hash: &Digest, actual: &Digest) -> bool {
    legacy(recorded).is_ok_and(|h| h == *recorded_hash) && of(recorded).is_ok_and(|h| h == *actual)
}

/// Whether the stored request `recorded`, unedited since it was recorded (it still digests
/// to `recorded_hash`, under today's definition or the earlier one), digests to `actual`
/// once normalised again under today's rules: `renormalize` normalises a copy the way the
/// agent's own requests are and gives its digest (`None` when it has none).
pub fn renormalized(
    recorded: &Value,
    recorded_hash: &Digest,
    actual: &Digest,
    renormalize: &dyn Fn(&Value) -> Option<Digest>,
) -> bool {
    let unedited =
        of(recorded).is_ok_and(|h| h == *recorded_hash) || legacy(recorded).is_ok_and(|h| h == *recorded_hash);
    unedited && renormalize(recorded).is_some_and(|h| h == *actual)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_is_member_wise_and_independent_of_key_order() {
        let a = json!({"system": "s", "messages": [{"role": "user", "content": "hi"}], "tools": []});
        let b = json!({"tools": [], "messages": [{"content": "hi", "role": "user"}], "system": "s"});
        assert_eq!(of(&a).unwrap(), of(&b).unwrap());
        // by hand, from the definition
        let mut by_hand = Members::new();
        by_hand
            .add("messages", &member(br#"[{"content":"hi","role":"user"}]"#))
            .add("system", &member(br#""s""#))
            .add("tools", &member(b"[]"));
        assert_eq!(of(&a).unwrap(), by_hand.finish());
        // and it is not the earlier definition
        assert_ne!(of(&a).unwrap(), legacy(&a).unwrap());
    }

    #[test]
    fn moving_a_value_between_members_changes_the_digest() {
        let one = json!({"a": "xy", "b": ""});
        let other = json!({"a": "x", "b": "y"});
        assert_ne!(of(&one).unwrap(), of(&other).unwrap());
        assert_ne!(of(&json!({"a": 1})).unwrap(), of(&json!({"b": 1})).unwrap());
        assert_ne!(of(&json!({})).unwrap(), of(&json!({"a": null})).unwrap());
    }

    /// A member's key framed on the stack (a plain key) or in a buffer (one that needs
    /// an escape, or a long one) is the key's canonical string either way.
    #[test]
    fn every_key_is_framed_as_its_canonical_string() {
        let value = member(b"[]");
        let long = "k".repeat(31);
        for key in ["", "messages", "a\"b", "back\\slash", "tab\t", "é", "\u{7f}", &long, &long[..30]] {
            let mut framed = Vec::new();
            canon::write_canonical_str(&mut framed, key);
            framed.extend_from_slice(&value.0);
            let mut by_definition = Digester::new(Context::ModelRequest);
            by_definition.update(&framed);
            let mut members = Members::new();
            members.add(key, &value);
            assert_eq!(members.finish(), by_definition.finish(), "{key:?}");
        }
    }

    #[test]
    fn only_an_object_has_a_request_digest() {
        assert!(of(&json!([1])).is_err());
        assert!(of(&json!({"n": 1u64 << 60})).is_err());
    }

    #[test]
    fn an_old_recording_is_recognised_only_when_its_document_is_unedited_and_the_same() {
        let request = json!({"system": "s", "messages": [], "tools": []});
        let old = legacy(&request).unwrap();
        let now = of(&request).unwrap();
        assert!(equivalent(&request, &old, &now));
        // the agent asks something else now
        let other = of(&json!({"system": "t", "messages": [], "tools": []})).unwrap();
        assert!(!equivalent(&request, &old, &other));
        // the document was edited after it was recorded
        let edited = json!({"system": "t", "messages": [], "tools": []});
        assert!(!equivalent(&edited, &old, &of(&edited).unwrap()));
        // a hash under today's definition is compared directly, never through this
        assert!(!equivalent(&request, &now, &now));
    }

    #[test]
    fn a_request_recorded_before_a_rule_matches_under_it_only_when_unedited() {
        // the rule today: any date in the system prompt becomes <date>
        let rule = |doc: &Value| {
            let mut doc = doc.clone();
            let system = doc["system"].as_str().unwrap_or_default().replace("2026-11-27", "<date>");
            doc["system"] = Value::from(system);
            of(&doc).ok()
        };
        let recorded = json!({"system": "Today is 2026-11-27.", "messages": []});
        let asked = of(&json!({"system": "Today is <date>.", "messages": []})).unwrap();
        let hash = of(&recorded).unwrap();
        assert!(renormalized(&recorded, &hash, &asked, &rule));
        // recorded under the earlier digest definition: recognised the same way
        assert!(renormalized(&recorded, &legacy(&recorded).unwrap(), &asked, &rule));
        // the stored document was edited after it was recorded: its hash no longer vouches
        let edited = json!({"system": "Today is 2026-11-27!", "messages": []});
        assert!(!renormalized(
            &edited,
            &hash,
            &of(&json!({"system": "Today is <date>!", "messages": []})).unwrap(),
            &rule
        ));
        // without the rule, nothing matches
        assert!(!renormalized(&recorded, &hash, &asked, &|d: &Value| of(d).ok()));
        // the agent asks something else
        let other = of(&json!({"system": "Today is <date>. Be brief.", "messages": []})).unwrap();
        assert!(!renormalized(&recorded, &hash, &other, &rule));
    }
}
