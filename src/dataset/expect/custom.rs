//! Custom grader specs: `{"custom": {"command": ["python3", "graders/tone.py"],
//! "timeout_ms": 5000}}`, as a case writes them. What the program is given and how its
//! answer is read is `grade::custom`'s; running it is the runner's.

use serde_json::Value;

/// Wall-clock limit of one grader call when the matcher does not say. Graders are small
/// scripts over one value; ten seconds is generous and still short enough that a hung
/// grader does not hold CI.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The longest `timeout_ms` accepted: ten minutes. Longer is a typo, not a grader.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// A compiled `custom` matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomSpec {
    /// The program and its arguments; a relative program path resolves from the
    /// pipeline's base directory (the grader's working directory), a bare name from PATH.
    pub command: Vec<String>,
    pub timeout_ms: u64,
    /// Variables of stateval's environment the grader gets although their names say
    /// they hold credentials; every other credential, and always the signing key, is
    /// kept from it ([`crate::child_env`]).
    pub env_passthrough: Vec<String>,
}

impl CustomSpec {
    /// Parse the matcher's argument; errors are (pointer below `/custom`, message).
    pub fn parse(arg: &Value) -> Result<CustomSpec, (String, String)> {
        let Some(obj) = arg.as_object() else {
            return Err((
                String::new(),
                "custom takes {\"command\": [...], \"timeout_ms\"?: n, \"env_passthrough\"?: [...]}".into(),
            ));
        };
        const KEYS: [&str; 3] = ["command", "timeout_ms", "env_passthrough"];
        if let Some(key) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            let hint =
                crate::diag::did_you_mean(key, KEYS).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err((format!("/{key}"), format!("unknown field \"{key}\"{hint}")));
        }
        let command: Vec<String> = match obj.get("command").and_then(Value::as_array) {
            Some(items) if !items.is_empty() => items
                .iter()
                .map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| ("/command".to_string(), "command items are non-empty strings".to_string()))?,
            _ => {
                return Err((
                    "/command".into(),
                    "custom needs command = [\"program\", \"arg\", ...] (a non-empty array)".into(),
                ));
            }
        };
        let timeout_ms = match obj.get("timeout_ms") {
            None => DEFAULT_TIMEOUT_MS,
            Some(v) => v.as_u64().filter(|t| (1..=MAX_TIMEOUT_MS).contains(t)).ok_or_else(|| {
                ("/timeout_ms".to_string(), format!("timeout_ms is an integer from 1 to {MAX_TIMEOUT_MS}"))
            })?,
        };
        let env_passthrough: Vec<String> = match obj.get("env_passthrough") {
            None => Vec::new(),
            Some(Value::Array(items)) => {
                items.iter().map(|v| v.as_str().map(str::to_string)).collect::<Option<_>>().ok_or_else(|| {
                    ("/env_passthrough".to_string(), "env_passthrough lists variable names".to_string())
                })?
            }
            Some(_) => return Err(("/env_passthrough".into(), "env_passthrough lists variable names".into())),
        };
        crate::child_env::check_passthrough(&env_passthrough).map_err(|e| ("/env_passthrough".to_string(), e))?;
        Ok(CustomSpec { command, timeout_ms, env_passthrough })
    }

    pub fn describe(&self) -> String {
        format!("custom {}", self.command.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_needs_a_command_and_a_bounded_timeout() {
        let s = CustomSpec::parse(&json!({"command": ["python3", "g.py"]})).unwrap();
        assert_eq!(s.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(CustomSpec::parse(&json!({"command": []})).unwrap_err().0, "/command");
        assert_eq!(CustomSpec::parse(&json!({"command": ["a"], "timeout_ms": 0})).unwrap_err().0, "/timeout_ms");
        let (at, message) = CustomSpec::parse(&json!({"command": ["a"], "timout_ms": 5})).unwrap_err();
        assert_eq!(
            (at.as_str(), message.as_str()),
            ("/timout_ms", "unknown field \"timout_ms\" (did you mean \"timeout_ms\"?)")
        );
    }
}
