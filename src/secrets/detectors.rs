//! The built-in detectors: one named pattern per kind of secret, each with why its
//! bounds are what they are. A detector's `secret` group is the part replaced; what
//! surrounds it in the match (a token's prefix, a URL's user, a field's name) stays, so
//! a reviewer still sees what was there. Without a `secret` group the whole match goes.
//!
//! Word boundaries are ASCII ones (`(?-u:\b)`): a token is ASCII, and a Unicode boundary
//! would keep the set off its fast path for any text with an accent or an emoji in it.
//! Every prefix sits at a word start, so the same letters inside a longer word or a
//! base64 blob (`…xAIza…` in an image's data) are not taken for a token.
//!
//! The order matters only where two detectors could see the same characters: a PEM
//! block goes first (its base64 body would otherwise look like other things), the four
//! detectors stateval has always had keep their relative order and their whole-match
//! replacement (so requests recorded before the others existed still digest alike; only
//! `sk-` gained a word start, see [`MODEL_API_KEY`]),
//! and the field rules come last, so `password=ghp_…` reads `password=[scrubbed]`.

use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

use super::{REDACTED, SecretKind};

/// When a match of a detector's pattern is a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    /// Always.
    Always,
    /// Only when an AWS access key id is in the same text (see [`AWS_SECRET_ACCESS_KEY`]).
    AwsKeyIdNearby,
    /// Only when the `name` group is a secret's name ([`is_secret_name`]).
    SecretName,
}

struct Detector {
    kind: SecretKind,
    pattern: &'static str,
    when: When,
}

/// `-----BEGIN … PRIVATE KEY-----` to its `-----END … PRIVATE KEY-----` (RSA, EC, DSA,
/// OPENSSH, ENCRYPTED or none): the body goes, the armour lines stay. A block cut short
/// (an error message keeps only its first bytes) is scrubbed to the end of the text.
/// The label is at most 24 characters ("ENCRYPTED " and the like), so prose that merely
/// says "private key" between dashes is not a block.
const PEM_PRIVATE_KEY: &str =
    r"-----BEGIN [A-Z0-9 ]{0,24}PRIVATE KEY-----(?P<secret>(?s:.*?))(?:-----END [A-Z0-9 ]{0,24}PRIVATE KEY-----|\z)";

/// GitHub's prefixed tokens: `ghp_` (personal), `gho_` (OAuth), `ghu_` (user-to-server),
/// `ghs_` (server-to-server), `ghr_` (refresh), then 36 base62 characters. 30 is the
/// floor, so a token pasted a few characters short is still caught while an identifier
/// such as `ghs_config` is not.
const GITHUB_TOKEN: &str = r"(?-u:\b)gh[pousr]_(?P<secret>[A-Za-z0-9]{30,})";

/// GitHub's fine-grained tokens: `github_pat_`, 22 characters, `_`, 59 characters.
/// 22 is the first part's length, the least a real one has.
const GITHUB_FINE_GRAINED_TOKEN: &str = r"(?-u:\b)github_pat_(?P<secret>[A-Za-z0-9_]{22,})";

/// Slack tokens: `xoxb-` (bot), `xoxp-` (user), `xoxa-` (app) and `xoxr-` (refresh), then
/// dash-separated numbers and base62. Real ones run past 40 characters; 10 keeps
/// `xoxb-` used as a word in prose out.
const SLACK_TOKEN: &str = r"(?-u:\b)xox[abpr]-(?P<secret>[0-9A-Za-z-]{10,})";

/// Google API keys: `AIza` and 35 base64url characters (39 in all, always); longer runs
/// are taken whole rather than leaving a tail.
const GOOGLE_API_KEY: &str = r"(?-u:\b)AIza(?P<secret>[0-9A-Za-z_-]{35,})";

/// OpenAI and Anthropic keys: `sk-…`, `sk-proj-…`, `sk-ant-…`, at least 16 characters
/// after the dash (real ones have 40 or more). The word boundary keeps the ends of
/// ordinary hyphenated words (`risk-assessment-for-the-quarter`) out.
const MODEL_API_KEY: &str = r"(?-u:\b)sk-[A-Za-z0-9_-]{16,}";

/// AWS access key ids: `AKIA` (long-term) or `ASIA` (temporary), then 16 upper-case
/// base32 characters, a word on its own.
const AWS_ACCESS_KEY_ID: &str = r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)";

/// `Bearer` and a token of at least 12 characters (shorter is a word, not a token).
const BEARER_TOKEN: &str = r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{12,}";

/// JWTs: three base64url segments, the first a JSON header (`eyJ` is `{"` encoded).
const JWT: &str = r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}";

/// AWS secret access keys: exactly 40 base64 characters (`A–Z a–z 0–9 / +`) standing
/// alone. On its own that shape is too common to scrub, so it counts only beside an
/// access key id in the same text (a key pair pasted together), and only when it mixes
/// upper and lower case — a sha1 digest is 40 hex digits of one case. Under a secret's
/// name (`aws_secret_access_key=…`) the field rules catch it anywhere.
const AWS_SECRET_ACCESS_KEY: &str = r"(?P<secret>[A-Za-z0-9/+]{40,})";

/// The length of an AWS secret access key.
const AWS_SECRET_LEN: usize = 40;

/// A password in a URL's user information: `scheme://user:PASSWORD@host`. The user
/// cannot hold `:` `/` `@` (RFC 3986 has them percent-encoded), the password cannot
/// hold `/` `@` or a quote, so `http://host:8080/path` and the JSON around a URL are
/// never taken for one.
const URL_PASSWORD: &str = r#"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@"'\\<>\[\]]*:(?P<secret>[^\s/?#@"'\\<>]+)@"#;

/// `name=value` with a secret's name (`{NAME}`, see [`SECRET_NAME_ENDINGS`]), in a
/// query string, a command line, a config line: the value runs to whitespace, `&`, `;`,
/// `,`, a quote or `=`. A value may not start with `=`, so comparisons (`password ==
/// null`) are not assignments. Only a secret's name matches at all, so an ordinary
/// `note=…` never swallows the `password=…` after it.
const SECRET_ASSIGNMENT: &str = r#"(?P<name>{NAME})[ \t]*=[ \t]*(?P<secret>[^\s&;,'"<>\\=]+)"#;

/// `"name": "value"` (JSON, also escaped inside another JSON string: `\"name\":
/// \"value\"`) and `name="value"`, with a secret's name (`{NAME}`); the value ends at
/// its first unescaped quote. A name must be followed by its quote before a `:`, so
/// prose such as `my secret: "…"` is not a field.
const SECRET_QUOTED_FIELD: &str =
    r#"(?P<name>{NAME})(?:\\?["'][ \t]*:|[ \t]*=)[ \t]*\\?"(?P<secret>(?:[^"\\]|\\[^"])+)\\?""#;

/// Applied in this order, each to what the ones before left. A detector whose match can
/// hold another's comes before it: a bearer token can be any token, a JWT's segments can
/// start like a prefixed key (`.sk-…`, `.ghp_…`); taken the other way round, the inner
/// match went first and left the rest of the outer one (a JWT's header and claims) in
/// the text.
const DETECTORS: [Detector; 13] = [
    Detector { kind: SecretKind::PrivateKey, pattern: PEM_PRIVATE_KEY, when: When::Always },
    Detector { kind: SecretKind::BearerToken, pattern: BEARER_TOKEN, when: When::Always },
    Detector { kind: SecretKind::Jwt, pattern: JWT, when: When::Always },
    Detector { kind: SecretKind::GitHubToken, pattern: GITHUB_TOKEN, when: When::Always },
    Detector { kind: SecretKind::GitHubToken, pattern: GITHUB_FINE_GRAINED_TOKEN, when: When::Always },
    Detector { kind: SecretKind::SlackToken, pattern: SLACK_TOKEN, when: When::Always },
    Detector { kind: SecretKind::GoogleApiKey, pattern: GOOGLE_API_KEY, when: When::Always },
    Detector { kind: SecretKind::ModelApiKey, pattern: MODEL_API_KEY, when: When::Always },
    Detector { kind: SecretKind::AwsAccessKeyId, pattern: AWS_ACCESS_KEY_ID, when: When::Always },
    Detector { kind: SecretKind::AwsSecretAccessKey, pattern: AWS_SECRET_ACCESS_KEY, when: When::AwsKeyIdNearby },
    Detector { kind: SecretKind::UrlPassword, pattern: URL_PASSWORD, when: When::Always },
    Detector { kind: SecretKind::SecretField, pattern: SECRET_ASSIGNMENT, when: When::SecretName },
    Detector { kind: SecretKind::SecretField, pattern: SECRET_QUOTED_FIELD, when: When::SecretName },
];

/// Every pattern compiled, in [`DETECTORS`] order, and as one set: most text holds no
/// secret, and one pass of the set says so.
static COMPILED: LazyLock<(RegexSet, Vec<Regex>)> = LazyLock::new(|| {
    let name = secret_name_pattern();
    let patterns: Vec<String> = DETECTORS.iter().map(|d| d.pattern.replace("{NAME}", &name)).collect();
    // built-in patterns: one that did not compile is a bug, and scrubbing nothing silently
    // would be worse than stopping
    let set = RegexSet::new(&patterns).expect("built-in secret patterns compile");
    let each = patterns.iter().map(|p| Regex::new(p).expect("built-in secret pattern compiles")).collect();
    (set, each)
});

static AWS_KEY_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(AWS_ACCESS_KEY_ID).expect("built-in secret pattern compiles"));

/// Whether `text` holds an AWS access key id, which makes a 40-character base64 word
/// beside it a secret access key.
pub(super) fn has_aws_key_id(text: &str) -> bool {
    AWS_KEY_ID.is_match(text)
}

/// The endings of member and parameter names whose value is a secret whatever it looks
/// like, word by word, in any case, the words joined by nothing, `_`, `-` or `.`:
/// `password`, `DB_PASSWORD`, `userPassword`, `passwd`, `client_secret`,
/// `aws_secret_access_key`, `secretKey`, `private_key`, `api_key`, `access_token`, ….
/// Endings, not substrings: `password_policy` and `secretary` are not secrets.
const SECRET_NAME_ENDINGS: [&[&str]; 11] = [
    &["password"],
    &["passwd"],
    &["passphrase"],
    &["secret"],
    &["secret", "key"],
    &["secret", "access", "key"],
    &["private", "key"],
    &["api", "key"],
    &["access", "token"],
    &["refresh", "token"],
    &["auth", "token"],
];

/// Whether a member or parameter called `name` holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let folded: String = name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    SECRET_NAME_ENDINGS.iter().any(|words| folded.ends_with(&words.concat()))
}

/// [`SECRET_NAME_ENDINGS`] as the `{NAME}` of a pattern: a name in free text, ending in
/// one of them (the same names [`is_secret_name`] accepts, which checks each match again).
fn secret_name_pattern() -> String {
    let endings: Vec<String> = SECRET_NAME_ENDINGS.iter().map(|words| words.join("[_.-]?")).collect();
    format!("(?i:[A-Za-z0-9_.-]*?(?:{}))", endings.join("|"))
}

/// One pass of every built-in detector over `text`: the text with what they found
/// replaced (`None` when nothing was), and the kinds found added to `found`.
pub(super) fn pass(text: &str, aws_key_id_nearby: bool, found: &mut Vec<SecretKind>) -> Option<String> {
    let (set, each) = &*COMPILED;
    let hits = set.matches(text);
    if !hits.matched_any() {
        return None;
    }
    let mut out: Option<String> = None;
    for (i, (detector, regex)) in DETECTORS.iter().zip(each).enumerate() {
        if !hits.matched(i) || (detector.when == When::AwsKeyIdNearby && !aws_key_id_nearby) {
            continue;
        }
        let current = out.as_deref().unwrap_or(text);
        if let Some(clean) = replace(regex, current, |caps| counts(detector.when, caps)) {
            found.push(detector.kind);
            out = Some(clean);
        }
    }
    out
}

/// Whether a match is a secret, beyond matching.
fn counts(when: When, caps: &Captures) -> bool {
    match when {
        When::Always => true,
        When::SecretName => caps.name("name").is_some_and(|n| is_secret_name(n.as_str())),
        When::AwsKeyIdNearby => caps.name("secret").is_some_and(|s| {
            let s = s.as_str();
            s.len() == AWS_SECRET_LEN
                && s.bytes().any(|b| b.is_ascii_uppercase())
                && s.bytes().any(|b| b.is_ascii_lowercase())
        }),
    }
}

/// `text` with the `secret` group (the whole match without one) of every match that
/// `counts` replaced by [`REDACTED`]; `None` when none was. A secret that is already
/// [`REDACTED`] is left alone, which makes scrubbing idempotent.
pub(super) fn replace(regex: &Regex, text: &str, counts: impl Fn(&Captures) -> bool) -> Option<String> {
    let mut changed = false;
    let out = regex.replace_all(text, |caps: &Captures| {
        let whole = caps.get(0).map_or("", |m| m.as_str());
        let start = caps.get(0).map_or(0, |m| m.start());
        let secret = caps.name("secret").or_else(|| caps.get(0));
        match secret {
            Some(s) if !s.as_str().is_empty() && s.as_str() != REDACTED && counts(caps) => {
                changed = true;
                let (from, to) = (s.start() - start, s.end() - start);
                format!("{}{REDACTED}{}", &whole[..from], &whole[to..])
            }
            _ => whole.to_string(),
        }
    });
    if changed { Some(out.into_owned()) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_pattern_compiles_and_the_set_agrees_with_the_list() {
        let (set, each) = &*COMPILED;
        assert_eq!((set.len(), each.len()), (DETECTORS.len(), DETECTORS.len()));
    }

    #[test]
    fn secret_names_are_matched_by_their_ending_in_any_case_or_spelling() {
        for name in [
            "password",
            "PASSWORD",
            "db_password",
            "userPassword",
            "passwd",
            "secret",
            "client_secret",
            "clientSecret",
            "AWS_SECRET_ACCESS_KEY",
            "secret-key",
            "private_key",
            "api_key",
            "access_token",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["password_policy", "secretary", "max_tokens", "token_count", "name", "key", "pwd"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
