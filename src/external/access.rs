//! Which case run a request to the loopback server may reach.
//!
//! The agent under test is the attacker here. Several case runs share one server (one
//! per `stateval run`, cases in parallel with `--jobs`), and an agent that reached
//! another case run's endpoints could consume that case's recorded responses — failing
//! it while passing itself — or call its tools. So:
//!
//! - Every case run gets two secrets from the operating system's random source, fresh
//!   per run and never derived from anything a report or the store shows: its URL
//!   token (`/r/TOKEN/…`) and its API key (`OPENAI_API_KEY` and `ANTHROPIC_API_KEY`
//!   are `stateval-KEY`). The vendors' SDKs send the key on every request on their own
//!   (`Authorization: Bearer …`, `x-api-key`), so a request says which case run sent
//!   it as well as which it addresses.
//! - A request whose key is one case run's and whose URL is another's (in progress,
//!   ended, or never issued) is refused, and flagged in the log of the case run whose
//!   key it carried: the sender's own case, never the one it tried to reach.
//! - A request without a stateval key (a plain-HTTP tool call, an agent that sets its
//!   own key) is judged by its URL alone: a case run in progress is served, anything
//!   else is refused, saying whether the case run ended or never existed.
//!
//! Secrets are looked up by their blake3 digests, never compared themselves: how long
//! a lookup takes then says nothing about how much of a guessed token was right, and
//! blake3's `Hash` compares in constant time besides. (These digests are never
//! written anywhere, so they are not `canon` digests, which are evidence.)
//!
//! What this does not do: agents run as the same user as stateval and as each other,
//! so one agent that reads another's environment (`/proc/PID/environ`) holds both of
//! its secrets. The secrets stop derivation, guessing and mistakes; separating agents
//! that actively spy on each other takes separate users or containers.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::Sender;

use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};

use super::server::Msg;

/// Random bytes in a URL token and in an API key: 128 bits, beyond guessing for the
/// life of any run.
const SECRET_BYTES: usize = 16;

/// What the API keys stateval hands out start with; a key without it is not ours.
pub const KEY_PREFIX: &str = "stateval-";

/// A case run's secrets, drawn when it starts.
pub struct Credentials {
    /// The path segment after `/r/`.
    pub token: String,
    /// The agent's API key, [`KEY_PREFIX`] included.
    pub key: String,
}

impl Credentials {
    /// Fresh secrets from the operating system's random source.
    pub fn generate() -> Result<Credentials, getrandom::Error> {
        Ok(Credentials { token: random_hex()?, key: format!("{KEY_PREFIX}{}", random_hex()?) })
    }
}

fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The digest a secret is looked up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Secret(blake3::Hash);

impl Secret {
    fn of(secret: &str) -> Secret {
        Secret(blake3::hash(secret.as_bytes()))
    }
}

/// A case run in progress.
struct Live {
    sender: Sender<Msg>,
    key: Secret,
}

/// Every case run a server has issued secrets for.
#[derive(Default)]
pub struct Cases {
    /// In progress, by URL token.
    live: HashMap<Secret, Live>,
    /// API key → URL token, for the case runs in progress.
    keys: HashMap<Secret, Secret>,
    /// Case runs that ended, kept for the server's life so that a late request is told
    /// its case run ended rather than that it never existed.
    ended: HashSet<Secret>,
    ended_keys: HashSet<Secret>,
}

/// Why a request was refused: its status and JSON error, and, when its key named a
/// case run in progress, that case run, to be told (`Msg::CrossCase`).
pub struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub flag: Option<Flag>,
}

/// The case run whose key a refused request carried, and what its URL named.
pub struct Flag {
    pub sender: Sender<Msg>,
    pub addressed: &'static str,
}

impl Refusal {
    /// The JSON error body, in the `{"error": {…}}` shape both vendors' SDKs read.
    pub fn body(&self) -> Value {
        let kind = if self.status == StatusCode::FORBIDDEN { "permission_error" } else { "invalid_request_error" };
        json!({"error": {"message": self.message, "type": kind, "code": self.code}})
    }
}

/// What a URL token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addressed {
    Live,
    Ended,
    Unknown,
}

impl Addressed {
    fn describe(self) -> &'static str {
        match self {
            Addressed::Live => "another case run in progress",
            Addressed::Ended => "a case run that has ended",
            Addressed::Unknown => "no case run stateval started",
        }
    }
}

impl Cases {
    /// Route requests with `credentials` to `sender` until [`Cases::end`].
    pub fn begin(&mut self, credentials: &Credentials, sender: Sender<Msg>) {
        let (token, key) = (Secret::of(&credentials.token), Secret::of(&credentials.key));
        self.live.insert(token, Live { sender, key });
        self.keys.insert(key, token);
    }

    /// The case run of `token` ended: its requests are refused from now on.
    pub fn end(&mut self, token: &str) {
        let token = Secret::of(token);
        if let Some(live) = self.live.remove(&token) {
            self.keys.remove(&live.key);
            self.ended_keys.insert(live.key);
        }
        self.ended.insert(token);
    }

    /// The session that serves a request to `/r/TOKEN/…` with `headers`, or why not.
    pub fn admit(&self, token: &str, headers: &HeaderMap) -> Result<Sender<Msg>, Refusal> {
        let addressed = Secret::of(token);
        let what = if self.live.contains_key(&addressed) {
            Addressed::Live
        } else if self.ended.contains(&addressed) {
            Addressed::Ended
        } else {
            Addressed::Unknown
        };
        let keys: Vec<Secret> = stateval_keys(headers).map(Secret::of).collect();
        let ended_key = keys.iter().any(|k| self.ended_keys.contains(k));
        // the case runs in progress whose keys it carries: the first is the sender
        let senders: Vec<Secret> = keys.iter().filter_map(|k| self.keys.get(k).copied()).collect();
        if let Some(&own) = senders.first()
            && let Some(sender) = self.live.get(&own)
        {
            let alone = senders.iter().all(|s| *s == own) && !ended_key;
            if own == addressed && alone {
                return Ok(sender.sender.clone());
            }
            let tried = if own == addressed {
                "its own endpoints with another case run's key besides"
            } else {
                what.describe()
            };
            let message = format!(
                "stateval: this request carries the API key of one case run and addresses {tried}; \
                 a case run may reach only its own endpoints, with its own key"
            );
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                code: "stateval_cross_case",
                message,
                flag: Some(Flag { sender: sender.sender.clone(), addressed: tried }),
            });
        }
        if ended_key {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                code: "stateval_run_ended",
                message: "stateval: this request carries the API key of a case run that has ended".into(),
                flag: None,
            });
        }
        // no key of ours: the URL alone decides
        match (what, self.live.get(&addressed)) {
            (Addressed::Live, Some(live)) => Ok(live.sender.clone()),
            (Addressed::Ended, _) => Err(Refusal {
                status: StatusCode::GONE,
                code: "stateval_run_ended",
                message: "stateval: the case run of this URL has ended".into(),
                flag: None,
            }),
            _ => Err(Refusal {
                status: StatusCode::NOT_FOUND,
                code: "stateval_unknown_run",
                message: "stateval: no case run has this URL".into(),
                flag: None,
            }),
        }
    }
}

/// The API keys of ours a request carries (`Authorization: Bearer`, `x-api-key`).
/// A key that does not start with [`KEY_PREFIX`] is the agent's own business (a
/// profile may set its own), and says nothing about who sent the request.
fn stateval_keys(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    let bearer = headers.get_all(header::AUTHORIZATION).into_iter().filter_map(|v| {
        let v = v.to_str().ok()?;
        let (scheme, rest) = v.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    let api_key = headers.get_all("x-api-key").into_iter().filter_map(|v| v.to_str().ok().map(str::trim));
    bearer.chain(api_key).filter(|k| k.starts_with(KEY_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use std::sync::mpsc::{Receiver, channel};

    fn case(cases: &mut Cases) -> (Credentials, Receiver<Msg>) {
        let credentials = Credentials::generate().unwrap();
        let (tx, rx) = channel();
        cases.begin(&credentials, tx);
        (credentials, rx)
    }

    fn bearer(key: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {key}")).unwrap());
        headers
    }

    /// What the flag the case run of `rx` received says was addressed.
    fn flagged(rx: &Receiver<Msg>) -> Option<&'static str> {
        match rx.try_recv() {
            Ok(Msg::CrossCase { addressed, .. }) => Some(addressed),
            _ => None,
        }
    }

    fn tell(flag: Flag) {
        flag.sender
            .send(Msg::CrossCase { request: "POST /r/…/v1/chat/completions".into(), addressed: flag.addressed })
            .unwrap();
    }

    #[test]
    fn secrets_are_fresh_128_bit_hex_every_time() {
        let (a, b) = (Credentials::generate().unwrap(), Credentials::generate().unwrap());
        assert_eq!(a.token.len(), 32);
        assert!(a.token.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.token, b.token);
        assert_ne!(a.key, b.key);
        assert_ne!(a.key.trim_start_matches(KEY_PREFIX), a.token, "the key is not the URL token");
    }

    #[test]
    fn a_case_run_reaches_its_own_endpoints_with_its_key_or_with_none() {
        let mut cases = Cases::default();
        let (a, rx) = case(&mut cases);
        assert!(cases.admit(&a.token, &bearer(&a.key)).is_ok());
        assert!(cases.admit(&a.token, &HeaderMap::new()).is_ok());
        // a key of the agent's own (a profile's env) says nothing about the sender
        assert!(cases.admit(&a.token, &bearer("sk-theirs")).is_ok());
        assert!(flagged(&rx).is_none());
    }

    #[test]
    fn another_case_runs_url_with_ones_own_key_is_refused_and_flagged_in_the_senders_case() {
        let mut cases = Cases::default();
        let (a, rx_a) = case(&mut cases);
        let (b, rx_b) = case(&mut cases);
        let refusal = cases.admit(&b.token, &bearer(&a.key)).unwrap_err();
        assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        tell(refusal.flag.expect("a flag for the sender"));
        assert_eq!(flagged(&rx_a), Some("another case run in progress"));
        assert!(rx_b.try_recv().is_err(), "the case it tried to reach hears nothing");
        // the Anthropic SDK's header is read the same way
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", HeaderValue::from_str(&a.key).unwrap());
        assert!(cases.admit(&b.token, &headers).is_err());
    }

    #[test]
    fn a_url_of_an_ended_case_run_is_told_apart_from_one_that_never_existed() {
        let mut cases = Cases::default();
        let (a, _rx_a) = case(&mut cases);
        let (b, _rx_b) = case(&mut cases);
        cases.end(&b.token);
        let ended = cases.admit(&b.token, &HeaderMap::new()).unwrap_err();
        assert_eq!((ended.status, ended.code), (StatusCode::GONE, "stateval_run_ended"));
        let unknown = cases.admit("0123", &HeaderMap::new()).unwrap_err();
        assert_eq!((unknown.status, unknown.code), (StatusCode::NOT_FOUND, "stateval_unknown_run"));
        // with a live case run's key, both are that case run's doing
        let late = cases.admit(&b.token, &bearer(&a.key)).unwrap_err();
        assert_eq!(late.flag.map(|f| f.addressed), Some("a case run that has ended"));
        let made_up = cases.admit("0123", &bearer(&a.key)).unwrap_err();
        assert_eq!(made_up.flag.map(|f| f.addressed), Some("no case run stateval started"));
        // and an ended case run's own key reaches nothing
        let (c, _rx_c) = case(&mut cases);
        assert!(cases.admit(&c.token, &bearer(&b.key)).is_err());
    }

    #[test]
    fn two_keys_naming_different_case_runs_are_refused() {
        let mut cases = Cases::default();
        let (a, _rx_a) = case(&mut cases);
        let (b, _rx_b) = case(&mut cases);
        let mut headers = bearer(&a.key);
        headers.insert("x-api-key", HeaderValue::from_str(&b.key).unwrap());
        let refusal = cases.admit(&a.token, &headers).unwrap_err();
        assert_eq!(refusal.flag.map(|f| f.addressed), Some("its own endpoints with another case run's key besides"));
    }
}
