//! Properties of the scrubber over generated secrets of every kind, embedded in
//! generated ordinary text and JSON: the secret is gone, the replacement does not
//! depend on it, scrubbing twice is scrubbing once, a scrubbed line lints clean, and
//! ordinary text is never touched.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// One generated secret: the text placed in a document, and the part of it that must
/// not survive scrubbing.
#[derive(Debug, Clone)]
struct Secret {
    placed: String,
    hidden: String,
}

fn token(prefix: impl Strategy<Value = String>, body: &'static str) -> impl Strategy<Value = Secret> {
    (prefix, body).prop_map(|(p, b)| Secret { placed: format!("{p}{b}"), hidden: b })
}

fn github() -> impl Strategy<Value = Secret> {
    prop_oneof![
        token("gh[pousr]_", "[A-Za-z0-9]{36}"),
        token(Just("github_pat_".to_string()), "[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
    ]
}

fn slack() -> impl Strategy<Value = Secret> {
    token("xox[abpr]-", "[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}")
}

fn google() -> impl Strategy<Value = Secret> {
    token(Just("AIza".to_string()), "[A-Za-z0-9_-]{35}")
}

fn model_key() -> impl Strategy<Value = Secret> {
    token("sk-(proj-|ant-)?", "[A-Za-z0-9]{24,48}")
}

fn jwt() -> impl Strategy<Value = Secret> {
    token(Just("eyJ".to_string()), "[A-Za-z0-9_-]{10,30}\\.[A-Za-z0-9_-]{10,40}\\.[A-Za-z0-9_-]{10,40}")
}

/// An access key id and its secret key, apart in the same text; the secret mixes case
/// (as 40 random base64 characters all but always do).
fn aws_pair() -> impl Strategy<Value = Secret> {
    ("(AKIA|ASIA)[A-Z0-9]{16}", "[A-Z][a-z][A-Za-z0-9/+]{38}", "[a-z ]{1,20}")
        .prop_map(|(id, key, between)| Secret { placed: format!("{id} {between} {key}"), hidden: key })
}

fn pem() -> impl Strategy<Value = Secret> {
    ("(RSA |EC |OPENSSH |ENCRYPTED )?", prop::collection::vec("[A-Za-z0-9+/]{64}", 1..5)).prop_map(|(label, lines)| {
        let body = lines.join("\n");
        Secret {
            placed: format!("-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----"),
            hidden: lines[0].clone(),
        }
    })
}

fn url_password() -> impl Strategy<Value = Secret> {
    // the password starts with a letter or digit, as in `field`: one of punctuation alone
    // has no other of its shape to rotate to
    ("(postgres|https|redis|amqp)", "[a-z]{1,8}", "[A-Za-z0-9][A-Za-z0-9!$%*_~.-]{7,23}", "[a-z]{2,10}\\.[a-z]{2,5}")
        .prop_map(|(scheme, user, password, host)| Secret {
            placed: format!("{scheme}://{user}:{password}@{host}/db"),
            hidden: format!(":{password}@"),
        })
}

/// A secret under a secret's name, as free text: `name=value`, `name="value"` or a JSON
/// member written into text.
fn field() -> impl Strategy<Value = Secret> {
    let name = prop::sample::select(vec![
        "password",
        "Password",
        "passwd",
        "secret",
        "client_secret",
        "DB_PASSWORD",
        "aws_secret_access_key",
        "apiKey",
    ]);
    // a letter or digit first: a value of punctuation alone has no other secret "of the
    // same shape" for the replacement property to rotate to
    (name, "[A-Za-z0-9][A-Za-z0-9!%*._~-]{7,23}", 0..3usize).prop_map(|(name, value, form)| {
        let placed = match form {
            0 => format!("{name}={value}"),
            1 => format!("{name}=\"{value}\""),
            _ => format!("{{\"{name}\": \"{value}\"}}"),
        };
        Secret { hidden: value, placed }
    })
}

fn any_secret() -> impl Strategy<Value = Secret> {
    prop_oneof![github(), slack(), google(), model_key(), jwt(), aws_pair(), pem(), url_password(), field()]
}

/// Ordinary text: words (some of them secret-sounding), numbers, digests, ids, URLs
/// without credentials and image data, separated as prose separates them.
fn ordinary() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        prop::sample::select(vec![
            "the",
            "order",
            "ships",
            "tomorrow",
            "password",
            "policy",
            "secret",
            "ingredient",
            "token",
            "key",
            // "bearer" only with its noun: "bearer" and then a digest is a bearer token
            "bearer bonds",
            "sk",
            "risk-assessment-for-the-quarter",
            "ghp",
            "AIza",
            "xoxb",
            "AWS",
            "Password:",
            "Reset",
        ])
        .prop_map(str::to_string),
        "[0-9]{1,6}",
        "[0-9a-f]{40}",
        "[0-9a-f]{64}",
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "https://[a-z]{3,10}\\.example\\.com(:[0-9]{2,4})?/[a-z]{1,8}\\?page=[0-9]",
        "data:image/png;base64,[A-Za-z0-9+/]{40,120}={0,2}",
    ];
    let separator = prop::sample::select(vec![" ", ", ", ". ", "\n", " - ", "; ", " (", ") "]);
    prop::collection::vec((piece, separator), 0..12)
        .prop_map(|parts| parts.into_iter().map(|(p, s)| format!("{p}{s}")).collect())
}

/// The text with `secret` between `before` and `after`.
fn embed(before: &str, secret: &str, after: &str) -> String {
    format!("{before} {secret} {after}")
}

/// A request-like document carrying the text in a message and in a tool call's
/// arguments, both as JSON and as the string Chat sends.
fn document(text: &str, before: &str) -> Value {
    json!({"system": before, "messages": [{"role": "user", "content": text},
           {"role": "assistant", "tool_calls": [{"args": {"note": text}, "arguments": json!({"note": text}).to_string()}]}]})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_generated_secret_is_gone_from_text_and_from_json(
        secret in any_secret(), before in ordinary(), after in ordinary(),
    ) {
        let s = Scrubber::default();
        let text = embed(&before, &secret.placed, &after);
        let clean = s.text(&text).unwrap_or_else(|| text.clone());
        prop_assert!(!clean.contains(&secret.hidden), "{text:?} → {clean:?}");
        prop_assert!(!s.kinds(&text).is_empty());
        let mut doc = document(&text, &before);
        s.value(&mut doc);
        let line = doc.to_string();
        prop_assert!(!line.contains(&secret.hidden), "{line}");
        // a recording line written from a scrubbed document lints clean
        prop_assert!(s.kinds(&line).is_empty(), "{line}: {:?}", s.kinds(&line));
    }

    #[test]
    fn the_replacement_does_not_depend_on_the_secret(secret in any_secret(), before in ordinary(), after in ordinary()) {
        // another secret of the same shape in the same place scrubs to the same text, so
        // two recordings of one request digest alike whichever key it carried
        let s = Scrubber::default();
        let other = secret.placed.replacen(&secret.hidden, &rotated(&secret.hidden), 1);
        prop_assert_ne!(&other, &secret.placed);
        prop_assert_eq!(s.text(&embed(&before, &secret.placed, &after)), s.text(&embed(&before, &other, &after)));
    }

    #[test]
    fn scrubbing_twice_is_scrubbing_once(
        secrets in prop::collection::vec(any_secret(), 0..4), before in ordinary(), after in ordinary(),
    ) {
        let s = Scrubber::new(&["acct-[0-9]{8}".into()]);
        let placed: Vec<String> = secrets.into_iter().map(|x| x.placed).collect();
        let text = embed(&before, &placed.join(" "), &after);
        let once = s.text(&text).unwrap_or(text);
        prop_assert_eq!(s.text(&once), None, "{}", once);
        let mut doc = document(&once, &before);
        s.value(&mut doc);
        let twice = {
            let mut again = doc.clone();
            s.value(&mut again);
            again
        };
        prop_assert_eq!(doc, twice);
    }

    #[test]
    fn ordinary_text_and_json_are_left_exactly_as_they_are(text in ordinary(), other in ordinary()) {
        let s = Scrubber::default();
        prop_assert_eq!(s.text(&text), None, "{}", text);
        let mut doc = document(&text, &other);
        let before = doc.clone();
        s.value(&mut doc);
        prop_assert_eq!(doc, before);
    }
}

/// `text` with every letter and digit moved one along its own range (`a`→`b`, `Z`→`A`,
/// `9`→`0`): a different secret of the same shape.
fn rotated(text: &str) -> String {
    let next = |c: char, first: char, last: char| if c == last { first } else { char::from(c as u8 + 1) };
    text.chars()
        .map(|c| match c {
            'a'..='z' => next(c, 'a', 'z'),
            'A'..='Z' => next(c, 'A', 'Z'),
            '0'..='9' => next(c, '0', '9'),
            other => other,
        })
        .collect()
}
