//! The fixture tool manifest (`fixtures/tools/*.json`): its data model, read and
//! checked with located errors. How a call is answered from it is the sandbox's.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::computed;
use super::fault::{self, FaultDecl};
use crate::canon::{self, Context, Digest};
use crate::diag::{InputError, line_col, locate, parse_json_strict};
use crate::schemas::TOOLS_SCHEMA;

/// Consequence class of a tool, from its manifest. A property of the tool, so it
/// lives with the manifest; policy rules in a pipeline name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyClass {
    Read,
    Write,
    Network,
    Financial,
    Privileged,
}

impl SafetyClass {
    pub fn as_str(self) -> &'static str {
        match self {
            SafetyClass::Read => "read",
            SafetyClass::Write => "write",
            SafetyClass::Network => "network",
            SafetyClass::Financial => "financial",
            SafetyClass::Privileged => "privileged",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    #[default]
    Trusted,
    /// Results may carry attacker-controlled content (fetched pages, inbound mail).
    Untrusted,
}

/// What a call returns and does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scripted {
    /// The answer; its forms (`{"$state": …}`, `{"$filter": …}`, `{"$arg": …}`, see
    /// [`super::computed`]) are computed from the state after the call's effect.
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub is_error: bool,
    /// RFC 6902 patch on the fixture state; `{"$arg": "/ptr"}` values are substituted,
    /// and a `path` or `from` may be a list of tokens (`["files", {"$arg": "/id"}]`).
    pub effect: Option<Vec<Value>>,
    /// What the call answers, with no effect, when its target is not in the state: a
    /// state read in `result` finds nothing, or `effect` does not apply (a `remove` of
    /// a deleted file, a `test` that fails). Without it, that is a fixture error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent: Option<Absent>,
    /// The call fails before it reaches the tool (an MCP JSON-RPC `error` response);
    /// excludes `result`, `is_error` and `effect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_error: Option<ProtocolError>,
    /// `result` holds a form, set by [`Manifest::compile`]: a result without one is
    /// returned as written, never walked.
    #[serde(skip)]
    pub computed: bool,
    /// The canonical text of a `result` that is not computed, written once by
    /// [`Manifest::compile`] rather than at every call that answers with it.
    #[serde(skip)]
    pub result_text: Option<Arc<str>>,
}

/// The answer to a call whose target is absent from the state (see [`Scripted::absent`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Absent {
    /// A template like [`Scripted::result`], computed from the unchanged state.
    #[serde(default)]
    pub result: Value,
    /// Default `true`: a missing target is the tool's error.
    #[serde(default = "yes")]
    pub is_error: bool,
}

fn yes() -> bool {
    true
}

/// A protocol error: the JSON-RPC 2.0 `error` object an MCP server answers a
/// `tools/call` with when the call never reached the tool (an unknown tool, invalid
/// parameters, the server failing). Not the tool's answer: a tool that ran and failed
/// answers with a result and `is_error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ProtocolError {
    /// The JSON-RPC error object, as a call's result shows it.
    pub fn to_value(&self) -> Value {
        let mut v = serde_json::json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            v["data"] = data.clone();
        }
        v
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyedResponse {
    pub args: Value,
    /// Conditions on the state the call is made in: RFC 6902 `test` operations
    /// (`{"op": "test", "path": "/ptr", "value": V}`), each holding when the state has
    /// a value at `path` equal to `V` canonically. The response answers only a call
    /// made where all hold; the first response whose arguments and conditions match
    /// answers, else the tool's `default`. So one call can answer differently in the
    /// states a case makes it in (a payment whose new transaction id depends on the
    /// ones before it), each answer recorded with the state it was given in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Vec<Guard>>,
    #[serde(flatten)]
    pub outcome: Scripted,
}

/// One condition of [`KeyedResponse::when`]: an RFC 6902 `test` operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// Always `"test"` (the schema refuses anything else).
    pub op: String,
    /// A JSON Pointer into the fixture state.
    pub path: String,
    pub value: Value,
}

impl Guard {
    /// Does `state` hold `value` at `path` (canonically: key order and number spelling
    /// never matter)? Nothing there: no.
    pub fn holds(&self, state: &Value) -> bool {
        state.pointer(&self.path).is_some_and(|found| canon::json_eq(found, &self.value))
    }
}

impl KeyedResponse {
    /// Do all of `when` hold in `state` (no conditions: yes)?
    pub fn holds(&self, state: &Value) -> bool {
        self.when.as_ref().is_none_or(|guards| guards.iter().all(|g| g.holds(state)))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Option<Value>,
    pub safety_class: Option<SafetyClass>,
    #[serde(default)]
    pub trust: Trust,
    #[serde(default)]
    pub idempotent: bool,
    /// The arguments that direct the call's effect (payee, account, recipient): each
    /// string and number in them must be grounded in a trusted source
    /// (`agent::grounding`). Absent: every argument of a `financial`, `privileged` or
    /// `destructive` tool (its numbers except amounts: [`is_amount`]), none of another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<Vec<String>>,
    /// The call deletes, closes, cancels or revokes something (MCP's
    /// `destructiveHint`): its targets are sensitive by default, and a user's request
    /// must ask for it ([`ToolSpec::requested_by`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub destructive: bool,
    /// Words or phrases of a user's request that authorise a call ("delete", "book a
    /// room"). Absent: [`DESTRUCTIVE_VERBS`] for a destructive tool, none required of
    /// another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<Vec<String>>,
    /// Result members that are the system's own records (ids, the payees of the user's
    /// own payments, a channel list): JSON Pointers with `*` for any one token. They
    /// ground and carry no taint, whatever `trust` says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_fields: Vec<String>,
    /// Result members an outsider can write (message bodies, subjects, file contents):
    /// untrusted whatever `trust` says, and over `trusted_fields` where both match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_fields: Vec<String>,
    /// Result members written by whoever another member of the same record names: the
    /// written member's pattern → its author's (`{"/*/body": "/*/sender"}`: a message's
    /// body is its sender's words; `{"/shared_with": "/owner"}`: a file's sharing is its
    /// owner's act). The author is matched, never grounded: where the user's own words
    /// (a turn, or the case's or profile's trusted values) name a record's author, the written
    /// member speaks for the user like those words (`agent::grounding`). Mark only an
    /// author the system stamps (Slack's sender, the mailbox a mail came from, a
    /// drive's owner), never a name the writer chose for themselves.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub authored_by: BTreeMap<String, String>,
    #[serde(default)]
    pub responses: Vec<KeyedResponse>,
    pub default: Option<Scripted>,
    /// `input_schema`, compiled once by [`Manifest::compile`].
    #[serde(skip)]
    pub validator: Option<Arc<jsonschema::Validator>>,
    /// Canonical bytes of each keyed response's `args` → the indices of the responses
    /// with those arguments, in manifest order, built by [`Manifest::compile`]: a call
    /// finds its answers in one look-up however many responses a tool lists. (A key
    /// that is not I-JSON cannot be canonicalised and is left out; the manifest schema
    /// already refuses those.)
    #[serde(skip)]
    pub by_args: Arc<std::collections::HashMap<Vec<u8>, Vec<usize>>>,
}

impl ToolSpec {
    pub fn safety_class(&self) -> SafetyClass {
        self.safety_class.unwrap_or(SafetyClass::Read)
    }

    /// Does a call of this tool act for the user where an attacker would want it to:
    /// move money, send data out, or destroy something?
    pub fn consequential(&self) -> bool {
        self.destructive || matches!(self.safety_class(), SafetyClass::Financial | SafetyClass::Privileged)
    }

    /// Does any call of this tool have sensitive arguments (see `sensitive`)?
    pub fn has_sensitive(&self) -> bool {
        match &self.sensitive {
            Some(names) => !names.is_empty() || self.consequential(),
            None => self.consequential(),
        }
    }

    /// The words of a user's request that authorise a call of this tool, if it needs
    /// any (see `requested_by`).
    pub fn requested_by(&self) -> Option<Vec<&str>> {
        match &self.requested_by {
            Some(words) => Some(words.iter().map(String::as_str).collect()),
            None if self.destructive => Some(DESTRUCTIVE_VERBS.to_vec()),
            None => None,
        }
    }

    /// The sensitive values of a call, `(argument, value)` for each string among them
    /// and each number (inside an array or object too), in argument-name order. Without
    /// a `sensitive` list, a consequential tool's every argument is, except the numbers
    /// of amounts ([`is_amount`]). The idempotency key names the operation, not its
    /// target, and is never sensitive.
    pub fn sensitive_args<'v>(&self, args: &'v Value) -> Vec<(&'v str, Cow<'v, str>)> {
        let mut out = Vec::new();
        if !self.has_sensitive() {
            return out;
        }
        let Some(map) = args.as_object() else { return out };
        for (name, value) in map {
            let (chosen, numbers) = match &self.sensitive {
                Some(names) => (names.iter().any(|n| n == name), true),
                None => (name != "idempotency_key", !is_amount(name)),
            };
            if chosen {
                scalars(value, numbers, &mut |s| out.push((name.as_str(), s)));
            }
        }
        out
    }

    /// The free text of a consequential call that is not itself sensitive (a message
    /// body, a subject, a note): what it points its reader to is checked like a
    /// recipient (`agent::grounding`).
    pub fn free_text<'v>(&self, args: &'v Value) -> Vec<(&'v str, &'v str)> {
        let mut out = Vec::new();
        let Some(names) = self.sensitive.as_ref().filter(|_| self.consequential()) else { return out };
        let Some(map) = args.as_object() else { return out };
        for (name, value) in map.iter().filter(|(n, _)| !names.contains(n) && *n != "idempotency_key") {
            scalars(value, false, &mut |s| {
                if let Cow::Borrowed(s) = s {
                    out.push((name.as_str(), s));
                }
            });
        }
        out
    }

    /// Is the result member at `path` untrusted, by `trust` and the field lists?
    pub fn untrusted_at(&self, path: &[&str]) -> bool {
        let matches = |patterns: &[String]| patterns.iter().any(|p| pattern_covers(p, path));
        if matches(&self.untrusted_fields) {
            return true;
        }
        if matches(&self.trusted_fields) {
            return false;
        }
        self.trust == Trust::Untrusted
    }

    /// Does trust differ between members of the result?
    pub fn trust_by_field(&self) -> bool {
        !self.trusted_fields.is_empty() || !self.untrusted_fields.is_empty() || !self.authored_by.is_empty()
    }

    /// The members of `result` whose author `named` accepts (see `authored_by`): each
    /// written member's path and value, in the manifest's and the result's order.
    pub fn authored<'v>(
        &self,
        result: &'v Value,
        named: &mut impl FnMut(&str) -> bool,
    ) -> Vec<(Vec<String>, &'v Value)> {
        let mut out = Vec::new();
        for (member, author) in &self.authored_by {
            let (Some((record, written)), Some((_, by))) = (split_last_token(member), split_last_token(author)) else {
                continue;
            };
            let mut path = Vec::new();
            records_at(result, &record, &mut path, &mut |path, record| {
                let stamp = match record.get(&by) {
                    Some(Value::String(s)) => Cow::Borrowed(s.as_str()),
                    Some(Value::Number(n)) => Cow::Owned(n.to_string()),
                    _ => return,
                };
                if let Some(value) = record.get(&written)
                    && named(&stamp)
                {
                    let mut at = path.to_vec();
                    at.push(written.clone());
                    out.push((at, value));
                }
            });
        }
        out
    }
}

/// A pattern's tokens before its last, and its last (unescaped); `None` for the root.
fn split_last_token(pattern: &str) -> Option<(Vec<String>, String)> {
    let mut tokens = pattern_tokens(pattern);
    let last = tokens.pop()?;
    Some((tokens, last))
}

/// Each object in `value` at `pattern` (`*` for any one member or item), with its path.
fn records_at<'v>(
    value: &'v Value,
    pattern: &[String],
    path: &mut Vec<String>,
    f: &mut impl FnMut(&[String], &'v serde_json::Map<String, Value>),
) {
    let Some((token, rest)) = pattern.split_first() else {
        if let Value::Object(map) = value {
            f(path, map);
        }
        return;
    };
    let mut visit = |key: String, child: &'v Value| {
        path.push(key);
        records_at(child, rest, path, f);
        path.pop();
    };
    match value {
        Value::Array(items) if token == "*" => items.iter().enumerate().for_each(|(i, v)| visit(i.to_string(), v)),
        Value::Array(items) => {
            if let Some(v) = token.parse::<usize>().ok().and_then(|i| items.get(i)) {
                visit(token.clone(), v)
            }
        }
        Value::Object(map) if token == "*" => map.iter().for_each(|(k, v)| visit(k.clone(), v)),
        Value::Object(map) => {
            if let Some(v) = map.get(token) {
                visit(token.clone(), v)
            }
        }
        _ => {}
    }
}

/// Is `authored_by`'s pair a written member and its author in one record: the same
/// tokens before the last, and a named last token each?
fn check_authored(member: &str, author: &str) -> Result<(), String> {
    let (Some((record, written)), Some((author_record, by))) = (split_last_token(member), split_last_token(author))
    else {
        return Err("authored_by names a member and its author inside a record, not the whole result".into());
    };
    if record != author_record {
        return Err(format!(
            "authored_by: \"{member}\" and its author \"{author}\" must be members of one record (the same pointer up to \
             the last token)"
        ));
    }
    if written == "*" || by == "*" || written == by {
        return Err(format!(
            "authored_by: \"{member}\" → \"{author}\" must name two different members, neither by `*`"
        ));
    }
    Ok(())
}

/// What a destructive tool's call needs a user's request to say, when its manifest does
/// not say otherwise.
pub const DESTRUCTIVE_VERBS: [&str; 12] = [
    "delete",
    "remove",
    "erase",
    "cancel",
    "revoke",
    "close",
    "drop",
    "purge",
    "wipe",
    "clear",
    "discard",
    "unsubscribe",
];

/// Is an argument of this name an amount (a number that says how much, not where)?
/// An account, card, routing or phone number, an id, directs an effect; `amount`,
/// `price`, `total`, `fee`, a count of days, does not. Read from the name alone: a name
/// is written by the tool's author, not by whoever calls it.
pub fn is_amount(name: &str) -> bool {
    const AMOUNT_WORDS: [&str; 18] = [
        "amount", "price", "total", "sum", "fee", "cost", "quantity", "qty", "count", "days", "hours", "minutes",
        "duration", "rate", "percent", "tip", "limit", "nights",
    ];
    // words of the name: `amount_usd`, `amount-usd`, `totalAmount` (never parts of a
    // word: "account" is not "count")
    let mut words: Vec<String> = vec![String::new()];
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && previous_lower) {
            words.push(String::new());
        }
        if c.is_ascii_alphanumeric() {
            words.last_mut().expect("one word at least").push(c.to_ascii_lowercase());
        }
        previous_lower = c.is_ascii_lowercase();
    }
    words.iter().any(|w| AMOUNT_WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod amount_tests {
    use super::is_amount;

    #[test]
    fn an_amount_is_told_from_an_identifying_number_by_the_words_of_its_name() {
        for amount in ["amount", "amount_usd", "totalAmount", "price-eur", "nights", "tip"] {
            assert!(is_amount(amount), "{amount}");
        }
        for id in ["account", "account_number", "routing", "card", "phone", "iban", "id", "recipient", "discounted"] {
            assert!(!is_amount(id), "{id}");
        }
    }
}

/// Does the pattern (a JSON Pointer, `*` for any token) cover the member at `path`: is
/// it that member or one it lies inside?
fn pattern_covers(pattern: &str, path: &[&str]) -> bool {
    let tokens = pattern_tokens(pattern);
    tokens.len() <= path.len() && tokens.iter().zip(path).all(|(t, p)| t == "*" || t == p)
}

/// A pattern's tokens, unescaped (`~1` is `/`, `~0` is `~`).
fn pattern_tokens(pattern: &str) -> Vec<String> {
    pattern.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
}

/// Every string leaf of `value`, and each number as JSON writes it when `numbers`.
pub(crate) fn scalars<'v>(value: &'v Value, numbers: bool, f: &mut impl FnMut(Cow<'v, str>)) {
    match value {
        Value::String(s) => f(Cow::Borrowed(s)),
        Value::Number(n) if numbers => f(Cow::Owned(n.to_string())),
        Value::Array(items) => items.iter().for_each(|v| scalars(v, numbers, f)),
        Value::Object(map) => map.values().for_each(|v| scalars(v, numbers, f)),
        _ => {}
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub description: Option<String>,
    #[serde(default)]
    pub state: Value,
    /// The server that answers this manifest's tools, for faults that target a server.
    pub server: Option<String>,
    pub tools: Vec<ToolSpec>,
    /// Faults injected into calls to these tools (see [`super::fault`], and
    /// `sandbox::fault` for what they do).
    #[serde(default)]
    pub faults: Vec<FaultDecl>,
    #[serde(skip)]
    pub digest: Option<Digest>,
    /// The file it was read from, as messages show it (`fixtures/tools/bank.json`).
    #[serde(skip)]
    pub source: Option<String>,
}

/// What a manifest is validated for: a run, or only a plan's digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Run,
    Digests,
}

impl Manifest {
    pub fn empty() -> Manifest {
        Manifest {
            description: None,
            state: Value::Object(Default::default()),
            server: None,
            tools: Vec::new(),
            faults: Vec::new(),
            digest: None,
            source: None,
        }
    }

    pub fn load(path: &Path, display: &str) -> Result<Manifest, InputError> {
        Self::load_file(path, display).map(|(manifest, _)| manifest)
    }

    /// [`Manifest::load`], with the digest of the file's bytes, which
    /// [`Manifest::reload`] checks.
    pub fn load_file(path: &Path, display: &str) -> Result<(Manifest, Digest), InputError> {
        let text = Self::read(path, display)?;
        Ok((Self::validate(&text, display)?, Self::bytes_digest(text.as_bytes())))
    }

    /// What [`Manifest::load_file`] gives a plan, which keeps only the digests: the
    /// content digest (`None` for no tools) and the digest of the file's bytes. The
    /// manifest is validated in full, its input schemas compiled, but the answers are not
    /// indexed for calls: [`Manifest::reload`] does that when a case runs.
    pub fn digests_of_file(path: &Path, display: &str) -> Result<(Option<Digest>, Digest), InputError> {
        let text = Self::read(path, display)?;
        let manifest = Self::validate_for(&text, display, Use::Digests)?;
        Ok((manifest.digest, Self::bytes_digest(text.as_bytes())))
    }

    /// The digest of a manifest file's bytes, as [`Manifest::load_file`] gives it.
    pub fn bytes_digest(bytes: &[u8]) -> Digest {
        canon::digest(Context::Content, bytes)
    }

    /// Read again a manifest that [`Manifest::load_file`] validated, whose content digest
    /// was then `digest` and whose bytes had the digest `bytes` (a runner reads each
    /// case's manifest when the case runs, so memory does not grow with the suite).
    /// Bytes that are still those are typed straight from the text — validation is a
    /// function of the bytes alone, so it would only say again what it said — and the
    /// content digest is `digest` without canonicalising the file again. Any other
    /// bytes are validated in full, and the caller compares the digest as for a file
    /// it never saw.
    pub fn reload(path: &Path, display: &str, digest: Option<Digest>, bytes: Digest) -> Result<Manifest, InputError> {
        let text = Self::read(path, display)?;
        if Self::bytes_digest(text.as_bytes()) == bytes
            && let Ok(mut manifest) = serde_json::from_str::<Manifest>(crate::diag::strip_bom(&text))
        {
            if manifest.state.is_null() {
                manifest.state = Value::Object(Default::default());
            }
            if manifest.compile().is_ok() {
                manifest.digest = digest;
                manifest.source = Some(display.to_string());
                return Ok(manifest);
            }
        }
        Self::validate(&text, display)
    }

    fn read(path: &Path, display: &str) -> Result<String, InputError> {
        crate::diag::read_text(path, Path::new(display), "tool manifest")
    }

    /// Parse, check, compile and digest the text of a manifest read from `display`.
    fn validate(text: &str, display: &str) -> Result<Manifest, InputError> {
        Self::validate_for(text, display, Use::Run)
    }

    /// [`Manifest::validate`], for a run or only for its digests.
    fn validate_for(text: &str, display: &str, used: Use) -> Result<Manifest, InputError> {
        let shown = Path::new(display);
        let text = crate::diag::strip_bom(text);
        let value = parse_json_strict(text).map_err(|(l, c, m)| InputError::new(shown, l, c, m))?;
        let at = |pointer: &str, message: String| {
            let (l, c) = line_col(text, locate(text, pointer));
            InputError::new(shown, l, c, message)
        };
        // before the schema, whose "does not match" would hide what is wrong with a fault
        if let Some((pointer, message)) = value.get("faults").and_then(fault::check_spellings) {
            return Err(at(&format!("/faults{pointer}"), message));
        }
        if let Some(v) = TOOLS_SCHEMA.check(&value) {
            return Err(at(&v.pointer, v.message));
        }
        canon::check_ijson(&value).map_err(|e| InputError::file(shown, e.to_string()))?;
        // typed from the tree by reference: the tree is still wanted (error places, the
        // digest), and a copy of it to consume was most of the typing's cost
        let mut manifest = Manifest::deserialize(&value).map_err(|e| InputError::file(shown, e.to_string()))?;
        if manifest.state.is_null() {
            manifest.state = Value::Object(Default::default());
        }
        let written = written_places(&manifest.tools);
        for (i, tool) in manifest.tools.iter().enumerate() {
            if manifest.tools[..i].iter().any(|t| t.name == tool.name) {
                return Err(at(&format!("/tools/{i}/name"), format!("duplicate tool name \"{}\"", tool.name)));
            }
            for (member, author) in &tool.authored_by {
                check_authored(member, author).map_err(|m| {
                    at(&format!("/tools/{i}/authored_by/{}", member.replace('~', "~0").replace('/', "~1")), m)
                })?;
            }
            if let Some(schema) = &tool.input_schema
                && let Err(e) = jsonschema::meta::validate(schema)
            {
                return Err(at(&format!("/tools/{i}/input_schema"), format!("malformed JSON Schema: {e}")));
            }
            // the place is spelt out only for a protocol error (once per response, the
            // strings were much of a large manifest's checking)
            let protocol = tool
                .responses
                .iter()
                .enumerate()
                .map(|(j, r)| (Some(j), &r.outcome))
                .chain(tool.default.iter().map(|d| (None, d)));
            for (j, outcome) in protocol {
                if outcome.protocol_error.is_some() {
                    let at_outcome = match j {
                        Some(j) => format!("/tools/{i}/responses/{j}"),
                        None => format!("/tools/{i}/default"),
                    };
                    let raw = value.pointer(&at_outcome);
                    if let Some(key) = ["result", "is_error", "effect", "absent"]
                        .into_iter()
                        .find(|k| raw.and_then(|o| o.get(k)).is_some())
                    {
                        return Err(at(
                            &format!("{at_outcome}/{key}"),
                            format!(
                                "a response with a protocol_error never reaches the tool, so it has no {key} (its result \
                                 is the error object)"
                            ),
                        ));
                    }
                }
            }
            for (j, response) in tool.responses.iter().enumerate() {
                for (k, guard) in response.when.iter().flatten().enumerate() {
                    check_guard(guard, &manifest.state, &written).map_err(|message| {
                        at(
                            &format!("/tools/{i}/responses/{j}/when/{k}/path"),
                            format!("tool \"{}\": {message}", tool.name),
                        )
                    })?;
                }
            }
            let outcomes = tool
                .responses
                .iter()
                .enumerate()
                .map(|(j, r)| (format!("/tools/{i}/responses/{j}"), &r.outcome))
                .chain(tool.default.iter().map(|d| (format!("/tools/{i}/default"), d)));
            for (place, outcome) in outcomes {
                if let Some(effect) = &outcome.effect {
                    check_patch(effect).map_err(|m| at(&format!("{place}/effect"), m))?;
                }
                let declared = outcome.absent.is_some();
                let templates = std::iter::once(("result", &outcome.result))
                    .chain(outcome.absent.as_ref().map(|a| ("absent/result", &a.result)));
                for (member, template) in templates {
                    computed::check(template, &manifest.state, declared).map_err(|(within, message)| {
                        at(&format!("{place}/{member}{within}"), format!("tool \"{}\": {message}", tool.name))
                    })?;
                }
            }
        }
        fault::check_targets(&manifest.faults, &manifest.tools, manifest.server.as_deref())
            .map_err(|e| at(&format!("/faults/{}/{}", e.index, e.field), e.message))?;
        manifest.compile_schemas().map_err(|(i, m)| at(&format!("/tools/{i}/input_schema"), m))?;
        if used == Use::Run {
            manifest.index();
        }
        manifest.digest = Some(
            canon::canonical_digest(Context::Content, &value).map_err(|e| InputError::file(shown, e.to_string()))?,
        );
        manifest.source = Some(display.to_string());
        Ok(manifest)
    }

    /// Compile every tool's input schema; an error names the tool's index.
    pub fn compile(&mut self) -> Result<(), (usize, String)> {
        self.compile_schemas()?;
        self.index();
        Ok(())
    }

    /// Each tool's input schema compiled: the part of [`Manifest::compile`] that can
    /// refuse the manifest (by the index of the tool whose schema does not compile).
    fn compile_schemas(&mut self) -> Result<(), (usize, String)> {
        for (i, tool) in self.tools.iter_mut().enumerate() {
            if let Some(schema) = &tool.input_schema {
                tool.validator = Some(validator(schema).map_err(|e| (i, format!("malformed JSON Schema: {e}")))?);
            }
        }
        Ok(())
    }

    /// What a run looks answers up by: each fixed result's canonical text, and the
    /// keyed responses by their arguments' canonical text. Never refuses.
    fn index(&mut self) {
        for tool in &mut self.tools {
            for outcome in tool.responses.iter_mut().map(|r| &mut r.outcome).chain(tool.default.as_mut()) {
                outcome.computed = computed::is_computed(&outcome.result);
                outcome.result_text = match outcome.computed {
                    true => None,
                    false => canon::to_canonical_string(&outcome.result).ok().map(Arc::from),
                };
            }
            let mut by_args = std::collections::HashMap::<_, Vec<usize>>::new();
            for (j, response) in tool.responses.iter().enumerate() {
                if let Ok(key) = canon::to_canonical(&response.args) {
                    by_args.entry(key).or_default().push(j);
                }
            }
            tool.by_args = Arc::new(by_args);
        }
    }

    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}

impl ToolSpec {
    /// The keyed response that answers a call with `args` made in `state`: the first
    /// whose `args` equal them canonically (key order and number spelling never
    /// matter) and whose `when` conditions hold in `state`, if any.
    pub fn response_for(&self, args: &Value, state: &Value) -> Option<&KeyedResponse> {
        self.response_index_for(args, state).map(|i| &self.responses[i])
    }

    /// The index in `responses` of [`ToolSpec::response_for`]'s answer (messages name
    /// the response by it).
    pub fn response_index_for(&self, args: &Value, state: &Value) -> Option<usize> {
        let slow = || self.responses.iter().position(|r| canon::json_eq(&r.args, args) && r.holds(state));
        if self.by_args.is_empty() {
            // a manifest built in code, not compiled: no index to use
            return slow();
        }
        match canon::to_canonical(args) {
            Ok(key) => self.by_args.get(&key)?.iter().copied().find(|&j| self.responses[j].holds(state)),
            // not I-JSON (a huge integer): no fixture could have been keyed by it
            // canonically, so compare the slow way
            Err(_) => slow(),
        }
    }
}

/// Compiled input schemas by the schema's JSON text, shared by every manifest the
/// process reads: a suite repeats a tool's schema across its manifests, and each case
/// reads its manifest again, so most compilations were of a schema compiled before.
/// A validator is a function of its schema alone. The key is the serialised tree, not
/// the canonical form, so schemas that differ only in how a number is spelt (which a
/// validation message may quote) keep their own validators. Bounded: past
/// [`VALIDATOR_CACHE`] distinct schemas it starts again.
static VALIDATORS: LazyLock<Mutex<HashMap<Vec<u8>, Arc<jsonschema::Validator>>>> = LazyLock::new(Default::default);

/// Distinct compiled schemas kept at once.
const VALIDATOR_CACHE: usize = 1024;

/// The compiled validator of `schema`, from [`VALIDATORS`] when it was compiled before.
fn validator(schema: &Value) -> Result<Arc<jsonschema::Validator>, jsonschema::ValidationError<'static>> {
    let key = serde_json::to_vec(schema).ok();
    if let Some(key) = &key
        && let Some(found) = VALIDATORS.lock().ok().and_then(|cache| cache.get(key).cloned())
    {
        return Ok(found);
    }
    let compiled = Arc::new(jsonschema::validator_for(schema)?);
    if let (Some(key), Ok(mut cache)) = (key, VALIDATORS.lock()) {
        if cache.len() >= VALIDATOR_CACHE {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
    }
    Ok(compiled)
}

/// The places the manifest's effects may write a value at (an `add`, `replace`,
/// `copy` or `move` target), as tokens; `None` is a token the call fills (an argument)
/// or one that moves as a list grows (`-`, an index). What lies under one may come to
/// exist however the initial state looks.
fn written_places(tools: &[ToolSpec]) -> Vec<Vec<Option<String>>> {
    let mut out = Vec::new();
    let outcomes = tools.iter().flat_map(|t| t.responses.iter().map(|r| &r.outcome).chain(t.default.iter()));
    for op in outcomes.flat_map(|o| o.effect.iter().flatten()) {
        if !matches!(op.get("op").and_then(Value::as_str), Some("add" | "replace" | "copy" | "move")) {
            continue;
        }
        let Some(Ok(tokens)) = op.get("path").map(computed::place) else { continue };
        let index = |s: &str| s == "-" || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
        out.push(
            tokens
                .into_iter()
                .map(|t| match t {
                    computed::Token::Literal(s) if !index(&s) => Some(s),
                    _ => None,
                })
                .collect(),
        );
    }
    out
}

/// A response's condition must be able to hold: its path resolves against the initial
/// state, or lies under a place an effect of the manifest writes (a transaction that a
/// payment adds). Anything else is a mistake the manifest would never show, as a
/// response that can never answer.
fn check_guard(guard: &Guard, state: &Value, written: &[Vec<Option<String>>]) -> Result<(), String> {
    if state.pointer(&guard.path).is_some() {
        return Ok(());
    }
    let path = Value::String(guard.path.clone());
    let tokens = match computed::place(&path) {
        Ok(tokens) => tokens,
        Err(m) => return Err(m.message),
    };
    let tokens: Vec<&str> = tokens
        .iter()
        .map(|t| match t {
            computed::Token::Literal(s) => s.as_str(),
            computed::Token::Arg(_) => "",
        })
        .collect();
    let under = |place: &Vec<Option<String>>| {
        place.len() <= tokens.len() && place.iter().zip(&tokens).all(|(w, t)| w.as_deref().is_none_or(|w| w == *t))
    };
    if written.iter().any(under) {
        return Ok(());
    }
    let mut here = state;
    let mut found = 0;
    while let Some(next) = tokens.get(found).and_then(|t| computed::step(here, t)) {
        here = next;
        found += 1;
    }
    Err(format!(
        "the condition {{\"op\": \"test\", \"path\": {}}} cannot resolve against the manifest's initial state \
         (nothing at {}), and no effect of the manifest writes there: the response could never answer",
        Value::String(guard.path.clone()),
        computed::pointer_of(tokens[..=found.min(tokens.len() - 1)].iter().copied())
    ))
}

/// Is `effect` a JSON Patch, once its places spelt as tokens are pointers?
fn check_patch(effect: &[Value]) -> Result<(), String> {
    let mut ops = effect.to_vec();
    for (i, op) in ops.iter_mut().enumerate() {
        for member in ["path", "from"] {
            if let Some(place @ Value::Array(_)) = op.get_mut(member) {
                computed::place(place).map_err(|m| format!("effect {i}: {member}{}: {}", m.at, m.message))?;
                *place = Value::String("/".into());
            }
        }
    }
    serde_json::from_value::<json_patch::Patch>(Value::Array(ops))
        .map(|_| ())
        .map_err(|e| format!("effect is not an RFC 6902 JSON Patch: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOOLS: &str =
        r#""tools": [{"name": "get_status", "description": "d"}, {"name": "page", "description": "d"}]"#;

    #[test]
    fn a_keyed_response_is_found_by_canonical_arguments_and_the_first_of_equals_wins() {
        let responses: Vec<String> = (0..2000)
            .map(|i| format!(r#"{{"args": {{"n": {i}, "k": "v"}}, "result": {i}}}"#))
            .chain([r#"{"args": {"k": "v", "n": 7.0}, "result": "second"}"#.to_string()])
            .collect();
        let text =
            format!(r#"{{"tools": [{{"name": "t", "description": "d", "responses": [{}]}}]}}"#, responses.join(","));
        let m = load(&text).unwrap();
        let tool = m.tool("t").unwrap();
        let state = serde_json::json!({});
        assert_eq!(tool.response_for(&serde_json::json!({"k": "v", "n": 1999}), &state).unwrap().outcome.result, 1999);
        // key order and number spelling never matter; the first equal response wins
        assert_eq!(tool.response_for(&serde_json::json!({"n": 7.0, "k": "v"}), &state).unwrap().outcome.result, 7);
        assert!(tool.response_for(&serde_json::json!({"n": 2000, "k": "v"}), &state).is_none());
    }

    fn load(text: &str) -> Result<Manifest, InputError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ops.json");
        std::fs::write(&path, text).unwrap();
        Manifest::load(&path, "fixtures/tools/ops.json")
    }

    #[test]
    fn a_request_list_that_names_no_word_and_a_field_that_is_no_pointer_are_refused_where_written() {
        // an empty list would deny every call of the tool, whatever the user asked
        let e = load("{\"tools\": [{\"name\": \"delete_file\", \"description\": \"d\",\n \"requested_by\": []}]}")
            .unwrap_err();
        assert_eq!((e.line, e.path.display().to_string()), (2, "fixtures/tools/ops.json".into()), "{e}");
        assert!(e.message.contains("requested_by"), "{e}");
        let e = load("{\"tools\": [{\"name\": \"inbox\", \"description\": \"d\",\n \"trusted_fields\": [\"*/id\"]}]}")
            .unwrap_err();
        assert!(e.line == 2 && e.message.contains("trusted_fields"), "{e}");
        let m = load("{\"tools\": [{\"name\": \"inbox\", \"description\": \"d\", \"trusted_fields\": [\"/*/id\"], \"destructive\": true}]}")
            .unwrap();
        let tool = &m.tools[0];
        assert!(
            !tool.untrusted_at(&["3", "id"]) && tool.untrusted_at(&["3", "body"]) == (tool.trust == Trust::Untrusted)
        );
        assert_eq!(tool.requested_by().map(|w| w.len()), Some(DESTRUCTIVE_VERBS.len()));
    }

    #[test]
    fn authored_members_are_found_by_their_named_author() {
        let m = load(
            "{\"tools\": [{\"name\": \"inbox\", \"description\": \"d\", \"authored_by\": {\"/*/body\": \"/*/sender\"}},\n\
             {\"name\": \"file\", \"description\": \"d\", \"authored_by\": {\"/shared_with\": \"/owner\"}}]}",
        )
        .unwrap();
        let inbox = json!([{"sender": "Bob", "body": "hi"}, {"sender": "Eve", "body": "x"}, {"body": "no sender"}, {"sender": 7, "body": "n"}]);
        let mut asked = Vec::new();
        let found = m.tools[0].authored(&inbox, &mut |a| {
            asked.push(a.to_string());
            a == "Bob" || a == "7"
        });
        assert_eq!(asked, ["Bob", "Eve", "7"]);
        let paths: Vec<String> = found.iter().map(|(p, v)| format!("/{}={v}", p.join("/"))).collect();
        assert_eq!(paths, ["/0/body=\"hi\"", "/3/body=\"n\""]);
        let file = json!({"owner": "me@x.example", "shared_with": {"a@x.example": "rw"}, "content": "c"});
        let found = m.tools[1].authored(&file, &mut |a| a == "me@x.example");
        assert_eq!(found, vec![(vec!["shared_with".to_string()], &file["shared_with"])]);
        assert!(m.tools[1].trust_by_field());
    }

    #[test]
    fn an_author_outside_its_members_record_is_a_load_error() {
        for (pair, says) in [
            ("\"/*/body\": \"/sender\"", "must be members of one record"),
            ("\"/body\": \"/body\"", "must name two different members"),
            ("\"/*/body\": \"/*/*\"", "must name two different members"),
        ] {
            let err = load(&format!(
                "{{\"tools\": [{{\"name\": \"inbox\", \"description\": \"d\",\n \"authored_by\": {{{pair}}}}}]}}"
            ))
            .unwrap_err();
            assert!(err.line == 2 && err.message.contains(says), "{pair}: {err}");
        }
    }

    #[test]
    fn faults_and_a_server_load_with_the_manifest() {
        let m = load(&format!(
            "{{\"server\": \"api\", {TOOLS},\n \"faults\": [{{\"tool\": \"get_status\", \"fault\": \"recover-after:2\"}}, {{\"server\": \"api\", \"fault\": \"slow:10\"}}]}}"
        ))
        .unwrap();
        assert_eq!(m.server.as_deref(), Some("api"));
        let spelled: Vec<String> = m.faults.iter().map(|f| f.fault.to_string()).collect();
        assert_eq!(spelled, ["recover-after:2", "slow:10"]);
    }

    #[test]
    fn a_misspelt_fault_is_a_load_error_at_its_value() {
        let err = load(&format!("{{{TOOLS},\n \"faults\": [\n  {{\"tool\": \"page\", \"fault\": \"hangs\"}}]}}"))
            .unwrap_err();
        // line 3, at the "fault" member of the declaration
        assert_eq!((err.line, err.column), (3, 20), "{err}");
        assert_eq!(
            err.to_string(),
            "fixtures/tools/ops.json:3:20: unknown fault \"hangs\" (did you mean \"hang\"?): expected hang, wedged, slow:<ms>, recover-after:<n> or error"
        );
    }

    #[test]
    fn slow_without_a_number_is_a_load_error() {
        let err =
            load(&format!("{{{TOOLS}, \"faults\": [{{\"tool\": \"page\", \"fault\": \"slow:\"}}]}}")).unwrap_err();
        assert!(err.message.contains("the delay in milliseconds must be a whole number"), "{err}");
    }

    #[test]
    fn a_fault_naming_a_tool_the_manifest_does_not_have_is_a_load_error_at_the_name() {
        let err =
            load(&format!("{{{TOOLS},\n\"faults\": [{{\"tool\": \"get_stats\", \"fault\": \"hang\"}}]}}")).unwrap_err();
        assert_eq!((err.line, err.column), (2, 13), "{err}");
        assert_eq!(
            err.message,
            "fault names tool \"get_stats\", which the manifest does not have (did you mean \"get_status\"?)"
        );
        let err =
            load(&format!("{{{TOOLS}, \"faults\": [{{\"server\": \"api\", \"fault\": \"hang\"}}]}}")).unwrap_err();
        assert_eq!(err.message, "fault names server \"api\", but it declares no \"server\"");
    }

    #[test]
    fn a_fault_without_a_target_or_with_an_unknown_key_is_a_load_error() {
        let err = load(&format!("{{{TOOLS}, \"faults\": [{{\"fault\": \"hang\"}}]}}")).unwrap_err();
        assert!(err.message.contains("a tool, a server, or both"), "{err}");
        let err = load(&format!("{{{TOOLS}, \"faults\": [{{\"tool\": \"page\", \"fault\": \"hang\", \"tol\": 1}}]}}"))
            .unwrap_err();
        assert!(err.message.contains("unknown field \"tol\""), "{err}");
    }

    /// Everything a manifest holds once loaded, compiled parts included, as comparable
    /// text (a compiled validator is compared by what it says of the schema's own text).
    fn loaded(m: &Manifest) -> String {
        let compiled: Vec<_> = m
            .tools
            .iter()
            .map(|t| {
                let mut keys: Vec<_> =
                    t.by_args.iter().map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.clone())).collect();
                keys.sort();
                let schema = t.input_schema.clone().unwrap_or_default();
                (keys, t.validator.as_ref().map(|v| v.is_valid(&schema)))
            })
            .collect();
        format!("{}\n{compiled:?}\n{:?} {:?}", serde_json::to_value(m).unwrap(), m.digest, m.source)
    }

    /// The repository's own tool manifests, in name order.
    fn shipped_manifests() -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tools"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        assert!(files.len() >= 5, "{files:?}");
        files
    }

    #[test]
    fn a_manifest_read_again_by_its_bytes_is_the_one_validated() {
        for path in shipped_manifests() {
            let (validated, bytes) = Manifest::load_file(&path, "m.json").unwrap();
            let again = Manifest::reload(&path, "m.json", validated.digest, bytes).unwrap();
            assert_eq!(loaded(&again), loaded(&validated), "{}", path.display());
        }
    }

    #[test]
    fn a_plan_has_the_digests_of_the_manifest_a_run_loads_and_its_refusals() {
        for path in shipped_manifests() {
            let (loaded, bytes) = Manifest::load_file(&path, "m.json").unwrap();
            assert!(loaded.tools.iter().all(|t| t.responses.is_empty() || !t.by_args.is_empty()), "indexed for a run");
            assert_eq!(
                Manifest::digests_of_file(&path, "m.json").unwrap(),
                (loaded.digest, bytes),
                "{}",
                path.display()
            );
        }
        // a schema that does not compile is refused for the plan as for the run, at its place
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let text = r#"{"tools": [{"name": "a", "description": "d"},
 {"name": "b", "description": "d", "input_schema": {"type": "object", "properties": {"x": {"pattern": "(?<"}}}}]}"#;
        std::fs::write(&path, text).unwrap();
        let run = Manifest::load_file(&path, "m.json").unwrap_err().to_string();
        let plan = Manifest::digests_of_file(&path, "m.json").unwrap_err().to_string();
        assert_eq!(plan, run);
        assert!(plan.contains("m.json:2:") && plan.contains("malformed JSON Schema"), "{plan}");
    }

    #[test]
    fn a_manifest_whose_bytes_changed_is_validated_in_full_when_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let first = format!("{{{TOOLS}}}");
        std::fs::write(&path, &first).unwrap();
        let (validated, bytes) = Manifest::load_file(&path, "m.json").unwrap();
        // other bytes: the digest is worked out again, not taken from the caller
        let edited = format!("{{{TOOLS}, \"server\": \"s\"}}");
        std::fs::write(&path, &edited).unwrap();
        let again = Manifest::reload(&path, "m.json", validated.digest, bytes).unwrap();
        assert_ne!(again.digest, validated.digest);
        assert_eq!(again.server.as_deref(), Some("s"));
        // other bytes that do not validate: the validation's error, at its place
        std::fs::write(&path, format!("{{{TOOLS}, \"tools\": []}}")).unwrap();
        let err = Manifest::reload(&path, "m.json", validated.digest, bytes).unwrap_err().to_string();
        assert!(err.contains("duplicate key"), "{err}");
    }

    #[test]
    fn a_state_read_that_cannot_resolve_against_the_initial_state_is_a_load_error_naming_the_tool() {
        let text = r#"{"state": {"accounts": {"acc-1": {"balance": 10}}},
 "tools": [{"name": "get_balance", "description": "d",
   "default": {"result": {"balance": {"$state": "/acounts/acc-1/balance"}}}}]}"#;
        let err = load(text).unwrap_err();
        // line 3, at the "$state" member
        assert_eq!((err.line, err.column), (3, 39), "{err}");
        assert_eq!(
            err.to_string(),
            "fixtures/tools/ops.json:3:39: tool \"get_balance\": {\"$state\": \"/acounts/acc-1/balance\"} cannot \
             resolve against the manifest's initial state: nothing at /acounts"
        );
        // the same read at a place that exists, or one an argument names past it, loads
        assert!(load(&text.replace("/acounts/acc-1", "/accounts/acc-1")).is_ok());
        let by_arg = text.replace(r#""/acounts/acc-1/balance""#, r#"["accounts", {"$arg": "/id"}, "balance"]"#);
        assert!(load(&by_arg).unwrap().tools[0].default.as_ref().unwrap().computed);
        // a form spelt wrongly is refused at its member
        let err = load(&text.replace(r#""$state": "/acounts/acc-1/balance""#, r#""$state": "/accounts", "x": 1"#))
            .unwrap_err();
        assert!(err.message.starts_with("tool \"get_balance\": a {\"$state\": …} form has no member \"x\""), "{err}");
    }
}
