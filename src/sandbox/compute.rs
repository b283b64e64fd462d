//! Evaluating a computed result (the forms of `pipeline::computed`) against the
//! fixture state and a call's arguments. Pure: the same state and arguments give the
//! same value, and the state is the fold of the log, so a result computed here is the
//! one a replay, a golden or `show --at-turn` sees.

use serde_json::Value;

use crate::canon;
use crate::pipeline::computed::{self, Form, Token};

/// Why a template could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The state has nothing where the call points (a deleted file, an unknown
    /// account): an answer when the outcome declares `absent`, else a fixture error.
    Absent(String),
    /// The manifest is wrong (an argument the call did not pass, a malformed form).
    Fixture(String),
}

/// `template` with every form replaced by its value.
pub fn evaluate(template: &Value, args: &Value, state: &Value) -> Result<Value, Failure> {
    let form = computed::form(template).map_err(|m| Failure::Fixture(format!("{}: {}", m.at, m.message)))?;
    Ok(match form {
        None => match template {
            Value::Object(map) => Value::Object(
                map.iter().map(|(k, v)| Ok((k.clone(), evaluate(v, args, state)?))).collect::<Result<_, _>>()?,
            ),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| evaluate(v, args, state)).collect::<Result<_, _>>()?)
            }
            other => other.clone(),
        },
        Some(Form::Arg(pointer)) => argument(args, pointer)?.clone(),
        Some(Form::Literal(value)) => value.clone(),
        Some(Form::State(tokens)) => resolve(&tokens, args, state)?.clone(),
        Some(Form::Filter { place, conditions }) => {
            let wanted: Vec<(&String, Value)> =
                conditions.iter().map(|(k, v)| Ok((k, evaluate(v, args, state)?))).collect::<Result<_, _>>()?;
            let keeps = |item: &&Value| {
                wanted.iter().all(|(k, want)| item.get(k.as_str()).is_some_and(|v| canon::json_eq(v, want)))
            };
            let kept: Vec<Value> = match resolve(&place, args, state)? {
                Value::Array(items) => items.iter().filter(keeps).cloned().collect(),
                Value::Object(map) => map.values().filter(keeps).cloned().collect(),
                other => {
                    return Err(Failure::Fixture(format!(
                        "a $filter keeps items of a list or values of an object, not {other}"
                    )));
                }
            };
            Value::Array(kept)
        }
    })
}

/// The JSON Pointer a place names for this call (an effect's `path` spelt as tokens).
pub fn pointer(place: &Value, args: &Value) -> Result<String, Failure> {
    let tokens = computed::place(place).map_err(|m| Failure::Fixture(format!("{}: {}", m.at, m.message)))?;
    let mut out = String::new();
    for token in &tokens {
        out.push('/');
        out.push_str(&computed::escape(&token_text(token, args)?));
    }
    Ok(out)
}

fn argument<'a>(args: &'a Value, pointer: &str) -> Result<&'a Value, Failure> {
    args.pointer(pointer).ok_or_else(|| {
        Failure::Fixture(format!("{{\"$arg\": \"{pointer}\"}}: the call has no argument at {pointer:?}"))
    })
}

/// A token's text: a literal, or the argument it names (a string, or a whole number
/// as an index). An argument of another kind names no place: absent.
fn token_text(token: &Token<'_>, args: &Value) -> Result<String, Failure> {
    match token {
        Token::Literal(s) => Ok(s.clone()),
        Token::Arg(pointer) => match argument(args, pointer)? {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) if n.is_u64() => Ok(n.to_string()),
            other => Err(Failure::Absent(format!("the argument at {pointer} ({other}) names no place in the state"))),
        },
    }
}

fn resolve<'s>(tokens: &[Token<'_>], args: &Value, state: &'s Value) -> Result<&'s Value, Failure> {
    let mut here = state;
    let mut walked = String::new();
    for token in tokens {
        let text = token_text(token, args)?;
        walked.push('/');
        walked.push_str(&computed::escape(&text));
        here =
            computed::step(here, &text).ok_or_else(|| Failure::Absent(format!("the state has nothing at {walked}")))?;
    }
    Ok(here)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> Value {
        json!({"accounts": {"acc-1": {"balance": 10}, "a/b": {"balance": 1}},
               "todos": [{"id": 1, "owner": "ann", "done": false}, {"id": 2, "owner": "bo", "done": false},
                         {"id": 3, "owner": "ann", "done": true}]})
    }

    #[test]
    fn a_state_read_answers_what_the_state_holds_now() {
        let r = evaluate(&json!({"balance": {"$state": "/accounts/acc-1/balance"}, "n": 1}), &json!({}), &state());
        assert_eq!(r, Ok(json!({"balance": 10, "n": 1})));
    }

    #[test]
    fn an_argument_in_a_place_is_one_token_even_with_a_slash_in_it() {
        let t = json!({"$state": ["accounts", {"$arg": "/id"}, "balance"]});
        assert_eq!(evaluate(&t, &json!({"id": "a/b"}), &state()), Ok(json!(1)));
        assert_eq!(
            evaluate(&t, &json!({"id": "acc-9"}), &state()),
            Err(Failure::Absent("the state has nothing at /accounts/acc-9".into()))
        );
        assert!(matches!(evaluate(&t, &json!({}), &state()), Err(Failure::Fixture(_))));
        assert!(matches!(evaluate(&t, &json!({"id": true}), &state()), Err(Failure::Absent(_))));
    }

    #[test]
    fn a_filter_keeps_the_items_whose_members_equal_the_arguments() {
        let t = json!({"$filter": "/todos", "where": {"owner": {"$arg": "/who"}, "done": false}});
        assert_eq!(
            evaluate(&t, &json!({"who": "ann"}), &state()),
            Ok(json!([{"id": 1, "owner": "ann", "done": false}]))
        );
        // the values of an object, in key order; {} keeps them all
        let all = evaluate(&json!({"$filter": "/accounts", "where": {}}), &json!({}), &state());
        assert_eq!(all, Ok(json!([{"balance": 1}, {"balance": 10}])));
    }

    #[test]
    fn a_literal_is_kept_as_written_and_an_argument_is_substituted() {
        let t = json!({"$literal": {"$state": "/x"}});
        assert_eq!(evaluate(&t, &json!({}), &state()), Ok(json!({"$state": "/x"})));
        assert_eq!(
            evaluate(&json!(["sent", {"$arg": "/to"}]), &json!({"to": "bo"}), &state()),
            Ok(json!(["sent", "bo"]))
        );
    }

    #[test]
    fn an_effect_place_spelt_as_tokens_is_an_escaped_pointer() {
        assert_eq!(pointer(&json!(["files", {"$arg": "/id"}]), &json!({"id": "x/~y"})), Ok("/files/x~1~0y".into()));
    }
}
