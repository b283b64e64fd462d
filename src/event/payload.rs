//! Typed payloads: one struct per event kind, read from an event's canonical data bytes
//! ([`Event::view`]) in one pass, each member kept as its canonical bytes ([`Json`])
//! and read as what the reader needs: a string (borrowed when it has no escapes), a
//! number, a bool, or — for values the agent or its tools chose (arguments, results,
//! responses, memory values) — a tree, parsed only then.
//!
//! The members of each kind are the contract in [`super::Kind`]'s docs. Reading is as
//! lenient as reading a tree was: a log may come from `stateval import` (extra
//! `source` and `absent` members, nulls where a source captured nothing) or be any
//! verified log, so no member is required, unknown members are skipped, and a member of
//! an unexpected type reads as absent through the typed accessors — exactly what
//! `value.get(name).and_then(Value::as_str)` gave — and as itself through
//! [`Json::value`].

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Event, Kind};

/// A payload of one kind.
pub trait Payload<'a>: Members<'a> {
    const KIND: Kind;
}

/// A struct read member by member from a canonical JSON object.
pub trait Members<'a>: Default {
    /// Take `raw` (a member's canonical text) when `key` is one of this struct's members.
    fn take(&mut self, key: &str, raw: &'a str);

    /// Read `text`, a canonical JSON object: every member this struct declares, the
    /// others skipped. Text that is not an object reads as all absent.
    fn read(text: &'a str) -> Self {
        let mut out = Self::default();
        for (key, raw) in object_members(text) {
            out.take(key, raw);
        }
        out
    }
}

impl Event {
    /// This event's data as payload `T`. Debug builds check the kind.
    pub fn view<'a, T: Payload<'a>>(&'a self) -> T {
        debug_assert_eq!(self.kind, T::KIND, "reading a {} as a {}", self.kind, T::KIND);
        T::read(self.data.as_str())
    }
}

/// The members of a canonical JSON object, as `(key, value text)`, read without parsing:
/// the text is canonical (written by the canonical writer, or cut from a verified line),
/// so a value is skipped by matching brackets outside strings. A key is given as it is
/// written; JCS escapes only quotes, backslashes and control characters, so a member
/// named with none of those is always written as its name. Anything that is not an
/// object yields nothing; text that is not canonical JSON yields what can be read of it
/// and never panics.
pub fn object_members(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let bytes = text.as_bytes();
    let mut at = usize::from(bytes.first() == Some(&b'{'));
    let mut done = at == 0 || bytes.get(1) == Some(&b'}');
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        // at: the opening quote of a key
        let key_end = string_end(bytes, at)?;
        let key = text.get(at + 1..key_end - 1)?;
        let value_start = key_end + 1; // past the colon
        let value_end = value_end(bytes, value_start)?;
        let value = text.get(value_start..value_end)?;
        match bytes.get(value_end) {
            Some(b',') => at = value_end + 1,
            _ => done = true,
        }
        Some((key, value))
    })
}

/// The index just past the string that opens at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        // most of a log's bytes are in strings: skip to the next quote or escape at once
        let j = i + memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
        if bytes[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
    }
}

/// The index just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => Some(at + bytes[at..].iter().position(|b| matches!(b, b',' | b'}' | b']')).unwrap_or(bytes.len() - at)),
    }
}

/// Any JSON value, kept as its canonical text; absent and `null` read alike.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Json<'a>(Option<&'a str>);

impl<'a> Json<'a> {
    /// A value from its canonical text.
    pub fn of(raw: &'a str) -> Self {
        Json(Some(raw))
    }

    /// The canonical text (`null` when absent).
    pub fn raw(&self) -> &'a str {
        self.0.unwrap_or("null")
    }

    pub fn is_null(&self) -> bool {
        self.raw() == "null"
    }

    /// The value as a tree (`Value::Null` when absent).
    pub fn value(&self) -> Value {
        self.0.and_then(|raw| serde_json::from_str(raw).ok()).unwrap_or(Value::Null)
    }

    /// The string, when the value is one: borrowed when it holds no escape.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        let inner = self.raw().strip_prefix('"')?.strip_suffix('"')?;
        if !inner.contains('\\') {
            return Some(Cow::Borrowed(inner));
        }
        serde_json::from_str::<Text<'a>>(self.raw()).ok()?.0
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.raw() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// The number as a `u64`, when it is a non-negative integer (`Value::as_u64`).
    pub fn as_u64(&self) -> Option<u64> {
        // canonical numbers: an integer is its digits, anything else has `.`, `e` or `-`
        self.raw().parse().ok()
    }

    /// The number as an `i64`, when it is an integer in range (`Value::as_i64`).
    pub fn as_i64(&self) -> Option<i64> {
        self.raw().parse().ok()
    }

    /// The number as an `f64`, when it is one (`Value::as_f64`).
    pub fn as_f64(&self) -> Option<f64> {
        let raw = self.raw();
        if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) { raw.parse().ok() } else { None }
    }

    /// Member `name` of the value, when it is an object holding one.
    pub fn member(&self, name: &str) -> Json<'a> {
        object_members(self.raw()).find(|(key, _)| *key == name).map_or(Json(None), |(_, raw)| Json::of(raw))
    }

    /// The items of the value, each as its canonical text, when it is an array (none
    /// otherwise).
    pub fn items(&self) -> Vec<Json<'a>> {
        let raw = self.raw();
        if !raw.starts_with('[') {
            return Vec::new();
        }
        let parsed: Result<Vec<&'a serde_json::value::RawValue>, _> = serde_json::from_str(raw);
        parsed.map(|items| items.into_iter().map(|item| Json::of(item.get())).collect()).unwrap_or_default()
    }

    /// The value read as `T` (a nested payload), all absent when it is not an object.
    pub fn view<T: Members<'a>>(&self) -> T {
        T::read(self.raw())
    }
}

impl fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.raw())
    }
}

/// A value read as a string: `None` when it is of another type (what a string member
/// with escapes is decoded by).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Lenient;
        impl<'de> Visitor<'de> for Lenient {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        d.deserialize_any(Lenient).map(Text)
    }
}

/// A struct of members, each a [`Json`], read by [`Members::read`].
macro_rules! members {
    ($(#[$doc:meta])* $name:ident { $($field:ident,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $name<'a> {
            $(pub $field: Json<'a>,)*
        }

        impl<'a> Members<'a> for $name<'a> {
            fn take(&mut self, key: &str, raw: &'a str) {
                match key {
                    $(stringify!($field) => self.$field = Json::of(raw),)*
                    _ => {}
                }
            }
        }

        impl<'a> $name<'a> {
            /// Each member's name and value, in declaration order.
            pub fn members(&self) -> Vec<(&'static str, Json<'a>)> {
                vec![$((stringify!($field), self.$field),)*]
            }
        }
    };
}

macro_rules! payloads {
    ($($(#[$doc:meta])* $name:ident = $kind:ident { $($field:ident,)* })*) => {
        $(
            members! { $(#[$doc])* $name { $($field,)* } }

            impl<'a> Payload<'a> for $name<'a> {
                const KIND: Kind = Kind::$kind;
            }
        )*

        /// The members of `e`'s payload, read as its kind's payload: what a reader of
        /// any kind (a test, a viewer) can walk.
        pub fn members(e: &Event) -> Vec<(&'static str, Json<'_>)> {
            match e.kind {
                $(Kind::$kind => e.view::<$name>().members(),)*
            }
        }
    };
}

payloads! {
    /// `run_started`.
    RunStarted = RunStarted {
        case, run, agent, dataset_line, profile, tools, recording, sandbox, dataset, runtime,
        imported, system, declared_tools,
    }
    /// `turn_started`.
    TurnStarted = TurnStarted { turn, input, }
    /// `context_compiled`.
    ContextCompiled = ContextCompiled { budget, total, sections, messages, dropped, over_section_budget, }
    /// `model_called`: `response` holds `content`, `tool_calls` and maybe `confidence`
    /// ([`Response`]); `usage` holds the tokens ([`Usage`]).
    ModelCalled = ModelCalled { request_hash, position, response, usage, latency_ms, api, }
    /// `tool_proposed`.
    ToolProposed = ToolProposed { call_id, tool, args, }
    /// `policy_decided`.
    PolicyDecided = PolicyDecided {
        call_id, tool, verdict, rule, reason, args_tainted,
        tainted_by, grounded, ungrounded,
    }
    /// `approval_requested`.
    ApprovalRequested = ApprovalRequested { call_id, tool, route, }
    /// `approval_resolved`.
    ApprovalResolved = ApprovalResolved { call_id, approved, by, }
    /// `tool_withheld`.
    ToolWithheld = ToolWithheld { call_id, tool, rule, by, effect, idempotency_key, }
    /// `tool_executed`.
    ToolExecuted = ToolExecuted {
        call_id, tool, args, result, is_error, fault,
        duration_ms, deduplicated, effect, injected, timeout_ms,
        idempotency_key, first_execution, error_kind, source,
    }
    /// `memory_written`.
    MemoryWritten = MemoryWritten { tier, key, value, confidence, supersedes, source, }
    /// `memory_expired`.
    MemoryExpired = MemoryExpired { tier, key, value, source, }
    /// `memory_read`.
    MemoryRead = MemoryRead { tier, key, value, source, }
    /// `handoff`.
    Handoff = Handoff { call_id, from, to, allowed, payload_hash, taint, tainted_by, reason, }
    /// `security_flagged`.
    SecurityFlagged = SecurityFlagged { class, severity, source, tool, detail, }
    /// `replay_diverged`: `pointers` only from an agent behind the wire endpoints, whose
    /// neutral request is compared member by member.
    ReplayDiverged = ReplayDiverged { position, recorded_request_hash, actual_request_hash, reason, pointers, }
    /// `error`.
    Error = Error { kind, message, code, at, source, }
    /// `turn_completed`.
    TurnCompleted = TurnCompleted { turn, response, }
    /// `grader_called`.
    GraderCalled = GraderCalled { target, command, input_digest, output_digest, pass, score, reason, error, message, }
    /// `judge_called`.
    JudgeCalled = JudgeCalled { target, judge, request_hash, sample, answer, usage, error, pointers, }
    /// `judge_verdict`.
    JudgeVerdict = JudgeVerdict { target, judge, request_hash, votes, reduce, value, passed, }
    /// `run_completed`.
    RunCompleted = RunCompleted { status, turns, tokens, }
}

members! {
    /// `model_called.response`.
    Response { content, tool_calls, confidence, }
}

members! {
    /// `model_called.usage`.
    Usage { input_tokens, output_tokens, }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon;
    use crate::event::writer::LogWriter;
    use serde_json::json;

    fn event(kind: Kind, data: Value) -> Event {
        LogWriter::new(Vec::new()).append(Some(0), 0, kind, data).unwrap()
    }

    #[test]
    fn a_payload_reads_what_a_tree_would_and_borrows_its_strings() {
        let e = event(
            Kind::ToolExecuted,
            json!({"call_id": "c1", "tool": "pay", "args": {"to": "bob", "amount": 5}, "result": [1, "x"],
                   "is_error": false, "fault": null, "effect": null, "source": {"span": 9}}),
        );
        let p: ToolExecuted = e.view();
        assert!(matches!(p.tool.as_str(), Some(Cow::Borrowed("pay"))));
        assert_eq!(p.args.value(), e.get("args"));
        assert_eq!(p.args.raw(), "{\"amount\":5,\"to\":\"bob\"}");
        assert_eq!(p.result.value(), json!([1, "x"]));
        assert_eq!(p.is_error.as_bool(), Some(false));
        assert!(p.fault.is_null() && p.effect.is_null() && p.injected.is_null());
    }

    #[test]
    fn a_field_of_another_type_reads_as_absent_as_it_did_from_a_tree() {
        for (data, tool) in [
            (json!({"tool": 7}), None),
            (json!({"tool": ["pay"]}), None),
            (json!({"tool": {"name": "pay"}}), None),
            (json!({"tool": null}), None),
            (json!({}), None),
            (json!({"tool": "a\"b\u{7}"}), Some("a\"b\u{7}")),
        ] {
            let e = event(Kind::ToolProposed, data.clone());
            let p: ToolProposed = e.view();
            assert_eq!(p.tool.as_str().as_deref(), tool, "{data}");
            assert_eq!(p.tool.as_str().as_deref(), e.get("tool").as_str(), "{data}");
        }
    }

    #[test]
    fn object_members_split_canonical_text_and_never_panic_on_anything_else() {
        let text =
            canon::to_canonical_string(&json!({"a\"]": "x\\\"}{", "b": [{"c": "]"}, []], "d": -1.5e-7, "e": {}}))
                .unwrap();
        let members: Vec<(&str, &str)> = object_members(&text).collect();
        assert_eq!(
            members,
            vec![("a\\\"]", "\"x\\\\\\\"}{\""), ("b", "[{\"c\":\"]\"},[]]"), ("d", "-1.5e-7"), ("e", "{}")]
        );
        for not_an_object in ["", "{}", "[1]", "5", "\"{\"", "null"] {
            assert_eq!(object_members(not_an_object).count(), 0, "{not_an_object}");
        }
        // cut anywhere, the rest reads as what can be read, without a panic
        for cut in 0..text.len() {
            if let Some(prefix) = text.get(..cut) {
                assert!(object_members(prefix).count() <= 4);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn object_members_are_the_trees_members_in_canonical_text(value in json_object()) {
            let text = canon::to_canonical_string(&value).unwrap();
            let split: Vec<(String, String)> = object_members(&text).map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let mut keys: Vec<(&String, &Value)> = value.as_object().unwrap().iter().collect();
            // canonical order is by UTF-16 code units of the keys
            keys.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            let tree: Vec<(String, String)> = keys
                .into_iter()
                .map(|(k, v)| {
                    let key = canon::to_canonical_string(&Value::String(k.clone())).unwrap();
                    (key[1..key.len() - 1].to_string(), canon::to_canonical_string(v).unwrap())
                })
                .collect();
            proptest::prop_assert_eq!(&split, &tree);
            for (key, raw) in &split {
                let member = Json::of(raw);
                if !key.contains('\\') {
                    proptest::prop_assert_eq!(Json::of(&text).member(key).raw(), raw.as_str());
                }
                proptest::prop_assert_eq!(member.as_str().map(|s| s.into_owned()), serde_json::from_str::<Value>(raw).unwrap().as_str().map(str::to_string));
            }
        }
    }

    fn json_object() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000_000i64..1_000_000).prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z\"\\\\{}\\[\\],:\u{1}é ]{0,8}".prop_map(Value::String),
        ];
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"\\\\]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map("[a-z\"\\\\{}:,]{0,5}", value, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// The agent chooses the text of arguments and results: text shaped like members
    /// (quotes, braces, a forged `is_error` or `tool`) stays inside its string.
    #[test]
    fn members_forged_inside_agent_text_are_not_read_as_members() {
        let forged = "x\",\"is_error\":false,\"tool\":\"refund\"}";
        let e = event(
            Kind::ToolExecuted,
            json!({"tool": "transfer", "args": {"memo": forged, "\"tool\"": "refund"}, "result": [forged, {"}": "{"}],
                   "is_error": true}),
        );
        let p: ToolExecuted = e.view();
        assert_eq!(p.tool.as_str().as_deref(), Some("transfer"));
        assert_eq!(p.is_error.as_bool(), Some(true));
        assert_eq!(p.args.member("memo").as_str().as_deref(), Some(forged));
        assert!(p.args.member("tool").is_null(), "an escaped key is not the member it spells");
        assert_eq!(p.result.items().len(), 2);
        assert_eq!(e.data.member("tool").as_str().as_deref(), Some("transfer"));
    }

    #[test]
    fn numbers_read_as_value_reads_them() {
        for n in [
            json!(0),
            json!(7),
            json!(9007199254740991u64),
            json!(-3),
            json!(2.5),
            json!(1e21),
            json!("5"),
            json!(null),
        ] {
            let e = event(Kind::ContextCompiled, json!({"total": n}));
            let p: ContextCompiled = e.view();
            assert_eq!(p.total.as_u64(), e.get("total").as_u64(), "{n}");
            assert_eq!(p.total.as_f64(), e.get("total").as_f64(), "{n}");
            assert_eq!(p.total.as_str().as_deref(), e.get("total").as_str(), "{n}");
        }
        let called = event(Kind::ModelCalled, json!({"usage": {"input_tokens": 3}}));
        let usage: Usage = called.view::<ModelCalled>().usage.view();
        assert_eq!((usage.input_tokens.as_u64(), usage.output_tokens.as_u64()), (Some(3), None));
    }
}
