//! Computed results: the forms a fixture result may use to answer from the fixture
//! state and the call's arguments instead of from a recorded value, so a read after a
//! write sees the write (`get_balance` after a transfer, `list_files` after a delete).
//!
//! A form is a JSON object whose member names it:
//!
//! | form | value |
//! |---|---|
//! | `{"$arg": "/ptr"}` | the call's argument at that pointer |
//! | `{"$state": PLACE}` | the fixture state at `PLACE` |
//! | `{"$filter": PLACE, "where": {"member": V, …}}` | the items of the list at `PLACE` (or the values of the object there, in key order) whose members equal each `V` canonically |
//! | `{"$literal": V}` | `V` as written, forms and all |
//!
//! A `PLACE` is a JSON Pointer (`"/accounts/acc-1/balance"`) or a list of reference
//! tokens, each a string, an index or `{"$arg": "/ptr"}` (`["files", {"$arg":
//! "/file_id"}]`): an argument is one token whatever it holds, so a `/` in it is never
//! a step. Any other value of a result, and any value inside a form's `where`, is
//! itself a template.
//!
//! Where the line is: a manifest is data, not a program. Reads, reads at a place an
//! argument names, and filters by equality are data; sorting, arithmetic, substring
//! search and paging are not, and a manifest that needs them keeps the answer in the
//! state (the writes' effects maintain it) or records it per arguments, and per state
//! where one call answers differently as the state changes (a response's `when`, RFC
//! 6902 `test` operations: `manifest::KeyedResponse::when`).
//!
//! The forms are parsed and checked against a manifest's initial state here, beside the
//! manifest; evaluating them against a call is the sandbox's (`sandbox::compute`).

use serde_json::{Map, Value};

pub const ARG: &str = "$arg";
pub const STATE: &str = "$state";
pub const FILTER: &str = "$filter";
pub const WHERE: &str = "where";
pub const LITERAL: &str = "$literal";

/// One reference token of a place.
#[derive(Debug, Clone, PartialEq)]
pub enum Token<'t> {
    Literal(String),
    /// The call's argument at this pointer.
    Arg(&'t str),
}

/// One form, parsed from the object that spells it.
#[derive(Debug, Clone, PartialEq)]
pub enum Form<'t> {
    Arg(&'t str),
    State(Vec<Token<'t>>),
    Filter { place: Vec<Token<'t>>, conditions: &'t Map<String, Value> },
    Literal(&'t Value),
}

/// A form spelt wrongly: where inside it (a JSON Pointer relative to the form) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub at: String,
    pub message: String,
}

fn malformed(at: &str, message: impl Into<String>) -> Malformed {
    Malformed { at: at.to_string(), message: message.into() }
}

/// Does `value` hold a form anywhere? (A result without one is returned as written,
/// and never walked again.)
pub fn is_computed(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.keys().any(|k| matches!(k.as_str(), ARG | STATE | FILTER | LITERAL)) || map.values().any(is_computed)
        }
        Value::Array(items) => items.iter().any(is_computed),
        _ => false,
    }
}

/// The form `value` spells, `None` for ordinary JSON.
pub fn form(value: &Value) -> Result<Option<Form<'_>>, Malformed> {
    let Value::Object(map) = value else { return Ok(None) };
    let named: Vec<&str> =
        map.keys().map(String::as_str).filter(|k| matches!(*k, ARG | STATE | FILTER | LITERAL)).collect();
    let name = match named.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        [first, second, ..] => {
            return Err(malformed("", format!("an object names one form, not both {first:?} and {second:?}")));
        }
    };
    let allowed: &[&str] = if name == FILTER { &[FILTER, WHERE] } else { &[name] };
    if let Some(extra) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(malformed(
            &format!("/{}", escape(extra)),
            format!(
                "a {{{name:?}: …}} form has no member {extra:?} (a result that needs it spells the form as {{\"$literal\": …}})"
            ),
        ));
    }
    let at = format!("/{}", escape(name));
    let inner = &map[name];
    Ok(Some(match name {
        ARG => Form::Arg(arg_pointer(inner).ok_or_else(|| malformed(&at, "$arg takes a JSON Pointer string"))?),
        STATE => Form::State(place(inner).map_err(|m| malformed(&format!("{at}{}", m.at), m.message))?),
        FILTER => {
            let place = place(inner).map_err(|m| malformed(&format!("{at}{}", m.at), m.message))?;
            let conditions = match map.get(WHERE) {
                Some(Value::Object(conditions)) => conditions,
                Some(_) => return Err(malformed("/where", "where takes an object: {member: value, …}")),
                None => {
                    return Err(malformed("", "a $filter needs a where ({} keeps every item)"));
                }
            };
            Form::Filter { place, conditions }
        }
        _ => Form::Literal(inner),
    }))
}

fn arg_pointer(value: &Value) -> Option<&str> {
    value.as_str().filter(|p| p.is_empty() || p.starts_with('/'))
}

/// The tokens of a place: a JSON Pointer string, or a list of tokens.
pub fn place(value: &Value) -> Result<Vec<Token<'_>>, Malformed> {
    match value {
        Value::String(pointer) if pointer.is_empty() => Ok(Vec::new()),
        Value::String(pointer) if pointer.starts_with('/') => {
            Ok(pointer[1..].split('/').map(|t| Token::Literal(t.replace("~1", "/").replace("~0", "~"))).collect())
        }
        Value::String(_) => Err(malformed("", "a place is a JSON Pointer (it starts with \"/\") or a list of tokens")),
        Value::Array(tokens) => tokens
            .iter()
            .enumerate()
            .map(|(i, t)| match t {
                Value::String(s) => Ok(Token::Literal(s.clone())),
                Value::Number(n) if n.is_u64() => Ok(Token::Literal(n.to_string())),
                Value::Object(map) if map.len() == 1 && map.contains_key(ARG) => arg_pointer(&map[ARG])
                    .map(Token::Arg)
                    .ok_or_else(|| malformed(&format!("/{i}/$arg"), "$arg takes a JSON Pointer string")),
                _ => Err(malformed(&format!("/{i}"), "a token is a string, an index or {\"$arg\": \"/ptr\"}")),
            })
            .collect(),
        _ => Err(malformed("", "a place is a JSON Pointer (it starts with \"/\") or a list of tokens")),
    }
}

/// `token` escaped for a JSON Pointer.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The JSON Pointer of literal tokens.
pub fn pointer_of<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    tokens.into_iter().map(|t| format!("/{}", escape(t))).collect()
}

/// The child of `value` at one reference token (an array by its index, RFC 6901).
pub fn step<'v>(value: &'v Value, token: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => map.get(token),
        Value::Array(items) => {
            let canonical = !token.is_empty()
                && token.bytes().all(|b| b.is_ascii_digit())
                && (token == "0" || !token.starts_with('0'));
            canonical.then(|| token.parse::<usize>().ok()).flatten().and_then(|i| items.get(i))
        }
        _ => None,
    }
}

/// Check every form in `template` against the manifest's initial `state`: each is
/// spelt right, and each place resolves as far as it is known before a call — its
/// tokens up to the first argument. A wholly literal place must resolve, except its
/// last token where the outcome declares `absent` (what may come and go). `Err` is
/// the place (a JSON Pointer relative to `template`) and the reason.
pub fn check(template: &Value, state: &Value, absent_declared: bool) -> Result<(), (String, String)> {
    let mut at = String::new();
    check_at(template, state, absent_declared, &mut at)
}

fn check_at(value: &Value, state: &Value, absent: bool, at: &mut String) -> Result<(), (String, String)> {
    let form = form(value).map_err(|m| (format!("{at}{}", m.at), m.message))?;
    let (tokens, member, conditions) = match form {
        None => {
            let len = at.len();
            match value {
                Value::Object(map) => {
                    for (k, v) in map {
                        at.push('/');
                        at.push_str(&escape(k));
                        check_at(v, state, absent, at)?;
                        at.truncate(len);
                    }
                }
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        at.push_str(&format!("/{i}"));
                        check_at(v, state, absent, at)?;
                        at.truncate(len);
                    }
                }
                _ => {}
            }
            return Ok(());
        }
        Some(Form::Arg(_) | Form::Literal(_)) => return Ok(()),
        Some(Form::State(tokens)) => (tokens, STATE, None),
        Some(Form::Filter { place, conditions }) => (place, FILTER, Some(conditions)),
    };
    let known: Vec<&str> = tokens
        .iter()
        .map_while(|t| match t {
            Token::Literal(s) => Some(s.as_str()),
            Token::Arg(_) => None,
        })
        .collect();
    let whole = known.len() == tokens.len();
    let needed = if whole && absent && !known.is_empty() { known.len() - 1 } else { known.len() };
    let mut here = state;
    for (i, token) in known[..needed].iter().enumerate() {
        here = step(here, token).ok_or_else(|| {
            (
                format!("{at}/{}", escape(member)),
                format!(
                    "{{{member:?}: {}}} cannot resolve against the manifest's initial state: nothing at {}",
                    spell(value.get(member)),
                    pointer_of(known[..=i].iter().copied())
                ),
            )
        })?;
    }
    if member == FILTER && whole && needed == known.len() && !(here.is_array() || here.is_object()) {
        return Err((
            format!("{at}/{}", escape(member)),
            format!(
                "a $filter keeps items of a list or values of an object, but the initial state holds {} at {}",
                crate::diag::kind_of(here),
                pointer_of(known.iter().copied())
            ),
        ));
    }
    if let Some(conditions) = conditions {
        let len = at.len();
        for (k, v) in conditions {
            at.push_str(&format!("/{WHERE}/{}", escape(k)));
            check_at(v, state, absent, at)?;
            at.truncate(len);
        }
    }
    Ok(())
}

fn spell(value: Option<&Value>) -> String {
    value.map(Value::to_string).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_place_is_a_pointer_or_tokens_and_an_argument_is_one_token() {
        assert_eq!(place(&json!("/a~1b/0")).unwrap(), [Token::Literal("a/b".into()), Token::Literal("0".into())]);
        assert_eq!(
            place(&json!(["files", {"$arg": "/id"}, 2])).unwrap(),
            [Token::Literal("files".into()), Token::Arg("/id"), Token::Literal("2".into())]
        );
        assert_eq!(place(&json!("files")).unwrap_err().at, "");
        assert_eq!(place(&json!(["a", true])).unwrap_err().at, "/1");
    }

    #[test]
    fn ordinary_json_is_not_a_form_and_a_form_with_a_stray_member_is_refused() {
        assert_eq!(form(&json!({"balance": 3})).unwrap(), None);
        assert!(!is_computed(&json!({"a": [1, {"b": "$state"}]})));
        assert!(is_computed(&json!({"a": [1, {"b": {"$state": "/x"}}]})));
        assert_eq!(form(&json!({"$state": "/x", "note": 1})).unwrap_err().at, "/note");
        assert_eq!(
            form(&json!({"$filter": "/x"})).unwrap_err().message,
            "a $filter needs a where ({} keeps every item)"
        );
        assert!(form(&json!({"$state": "/x", "$arg": "/y"})).is_err());
    }

    #[test]
    fn a_place_is_checked_up_to_its_first_argument_against_the_initial_state() {
        let state = json!({"accounts": {"acc-1": {"balance": 10}}, "files": []});
        assert_eq!(check(&json!({"b": {"$state": "/accounts/acc-1/balance"}}), &state, false), Ok(()));
        assert_eq!(check(&json!({"$state": ["accounts", {"$arg": "/id"}, "balance"]}), &state, false), Ok(()));
        let (at, message) =
            check(&json!({"b": [{"$state": ["acounts", {"$arg": "/id"}]}]}), &state, false).unwrap_err();
        assert_eq!(at, "/b/0/$state");
        assert_eq!(
            message,
            "{\"$state\": [\"acounts\",{\"$arg\":\"/id\"}]} cannot resolve against the manifest's initial state: \
             nothing at /acounts"
        );
        // a record that may come and go, where the outcome says what its absence answers
        assert!(check(&json!({"$state": "/accounts/acc-2"}), &state, false).is_err());
        assert_eq!(check(&json!({"$state": "/accounts/acc-2"}), &state, true), Ok(()));
        let (_, message) =
            check(&json!({"$filter": "/accounts/acc-1/balance", "where": {}}), &state, false).unwrap_err();
        assert!(message.contains("holds a number at /accounts/acc-1/balance"), "{message}");
        // a condition's value is a template too
        let (at, _) =
            check(&json!({"$filter": "/files", "where": {"owner": {"$state": "/nobody"}}}), &state, false).unwrap_err();
        assert_eq!(at, "/where/owner/$state");
    }
}
