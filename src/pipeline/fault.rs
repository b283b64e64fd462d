//! Fault declarations (docs/metrics.md §4), as a manifest or a pipeline spells them:
//! `{"tool"?, "server"?, "fault"}` with one of `hang`, `wedged`, `slow:<ms>`,
//! `recover-after:<n>`, `error`. Parsing, spelling help and the check that a
//! declaration can fire live here, beside the manifest; what a fault does to a call is
//! the sandbox's (`sandbox::fault`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::manifest::ToolSpec;
use crate::diag::did_you_mean;

/// One fault, as spelled in a manifest or a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Fault {
    Hang,
    Wedged,
    Slow { ms: u64 },
    RecoverAfter { calls: u64 },
    Error,
}

/// Fault names, for messages and suggestions; the ones that take a number end in `:`.
const SPELLINGS: [&str; 5] = ["hang", "wedged", "slow:", "recover-after:", "error"];
const GRAMMAR: &str = "hang, wedged, slow:<ms>, recover-after:<n> or error";

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let number = |tail: &str, what: &str, example: &str| {
            // digits only: `u64::from_str` would also take "+5"
            if tail.is_empty() || !tail.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("fault \"{s}\": {what} must be a whole number, as in \"{example}\""));
            }
            tail.parse::<u64>().map_err(|_| format!("fault \"{s}\": {what} is too large"))
        };
        match s {
            "hang" => Ok(Fault::Hang),
            "wedged" => Ok(Fault::Wedged),
            "error" => Ok(Fault::Error),
            _ => {
                if let Some(tail) = s.strip_prefix("slow:") {
                    return number(tail, "the delay in milliseconds", "slow:250").map(|ms| Fault::Slow { ms });
                }
                if let Some(tail) = s.strip_prefix("recover-after:") {
                    return number(tail, "the number of calls that hang", "recover-after:2")
                        .map(|calls| Fault::RecoverAfter { calls });
                }
                if s == "slow" || s == "recover-after" {
                    return Err(format!("fault \"{s}\" needs a number: \"{s}:<n>\" (expected {GRAMMAR})"));
                }
                let head = s.split(':').next().unwrap_or(s);
                let hint = did_you_mean(head, SPELLINGS.map(|w| w.trim_end_matches(':')))
                    .map(|w| match s.split_once(':') {
                        Some((_, tail)) if SPELLINGS.contains(&format!("{w}:").as_str()) => format!("{w}:{tail}"),
                        _ if SPELLINGS.contains(&format!("{w}:").as_str()) => format!("{w}:<n>"),
                        _ => w.to_string(),
                    })
                    .map(|w| format!(" (did you mean \"{w}\"?)"))
                    .unwrap_or_default();
                Err(format!("unknown fault \"{s}\"{hint}: expected {GRAMMAR}"))
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Hang => f.write_str("hang"),
            Fault::Wedged => f.write_str("wedged"),
            Fault::Slow { ms } => write!(f, "slow:{ms}"),
            Fault::RecoverAfter { calls } => write!(f, "recover-after:{calls}"),
            Fault::Error => f.write_str("error"),
        }
    }
}

impl TryFrom<String> for Fault {
    type Error = String;
    fn try_from(s: String) -> Result<Fault, String> {
        s.parse()
    }
}

impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.to_string()
    }
}

/// `{"tool"?, "server"?, "fault"}`: a fault and the calls it targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultDecl {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub fault: Fault,
}

/// Check a raw `faults` array before it is typed, so that a misspelt fault gets a message
/// a person can act on (the schema alone would only say "does not match"). Returns the
/// JSON Pointer (relative to the array) of the first problem and what it is. Shapes the
/// schema rejects anyway (a number where an object goes) are left to the schema.
pub fn check_spellings(faults: &Value) -> Option<(String, String)> {
    for (i, decl) in faults.as_array()?.iter().enumerate() {
        let Some(object) = decl.as_object() else { continue };
        if let Some(Value::String(spelling)) = object.get("fault")
            && let Err(message) = spelling.parse::<Fault>()
        {
            return Some((format!("/{i}/fault"), message));
        }
        if !object.contains_key("tool") && !object.contains_key("server") {
            return Some((
                format!("/{i}"),
                "a fault targets a tool, a server, or both: add \"tool\" or \"server\"".into(),
            ));
        }
    }
    None
}

/// A declaration that names something the manifest does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError {
    /// Index of the declaration.
    pub index: usize,
    /// `"tool"` or `"server"`.
    pub field: &'static str,
    /// The name as written.
    pub name: String,
    pub message: String,
}

/// Check that every declaration can fire against a manifest: a named tool is one of its
/// tools, a named server is its server. A declaration that can never fire is a typo, not
/// a passing fault case.
pub fn check_targets(declarations: &[FaultDecl], tools: &[ToolSpec], server: Option<&str>) -> Result<(), TargetError> {
    for (i, decl) in declarations.iter().enumerate() {
        if let Some(tool) = &decl.tool
            && !tools.iter().any(|t| &t.name == tool)
        {
            let hint = did_you_mean(tool, tools.iter().map(|t| t.name.as_str()))
                .map(|s| format!(" (did you mean \"{s}\"?)"))
                .unwrap_or_default();
            return Err(TargetError {
                index: i,
                field: "tool",
                name: tool.clone(),
                message: format!("fault names tool \"{tool}\", which the manifest does not have{hint}"),
            });
        }
        if let Some(wanted) = &decl.server
            && server != Some(wanted.as_str())
        {
            let actual = match server {
                Some(s) => format!("its tools are served by \"{s}\""),
                None => "it declares no \"server\"".to_string(),
            };
            return Err(TargetError {
                index: i,
                field: "server",
                name: wanted.clone(),
                message: format!("fault names server \"{wanted}\", but {actual}"),
            });
        }
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(tool: Option<&str>, server: Option<&str>, fault: &str) -> FaultDecl {
        FaultDecl { tool: tool.map(Into::into), server: server.map(Into::into), fault: fault.parse().unwrap() }
    }

    #[test]
    fn every_spelling_round_trips_through_its_text() {
        for s in ["hang", "wedged", "slow:0", "slow:250", "recover-after:2", "error"] {
            assert_eq!(s.parse::<Fault>().unwrap().to_string(), s);
        }
        assert_eq!("slow:250".parse::<Fault>(), Ok(Fault::Slow { ms: 250 }));
    }

    #[test]
    fn misspelt_faults_say_what_is_wrong_and_suggest_the_closest_spelling() {
        let err = |s: &str| s.parse::<Fault>().unwrap_err();
        assert_eq!(
            err("wedge"),
            "unknown fault \"wedge\" (did you mean \"wedged\"?): expected hang, wedged, slow:<ms>, recover-after:<n> or error"
        );
        assert!(err("recover_after:2").contains("(did you mean \"recover-after:2\"?)"), "{}", err("recover_after:2"));
        assert!(err("slw").contains("(did you mean \"slow:<n>\"?)"), "{}", err("slw"));
        assert_eq!(
            err("slow"),
            "fault \"slow\" needs a number: \"slow:<n>\" (expected hang, wedged, slow:<ms>, recover-after:<n> or error)"
        );
        assert_eq!(
            err("slow:"),
            "fault \"slow:\": the delay in milliseconds must be a whole number, as in \"slow:250\""
        );
        assert!(err("slow:fast").contains("must be a whole number"));
        // u64::from_str alone would accept these
        assert!(err("slow:+5").contains("must be a whole number"));
        assert!(err("recover-after:-1").contains("must be a whole number"));
        assert!(err("slow:99999999999999999999").ends_with("is too large"));
        assert!(err("Hang").contains("did you mean \"hang\""));
        // too far from every spelling for a guess
        assert_eq!(
            err("explode"),
            "unknown fault \"explode\": expected hang, wedged, slow:<ms>, recover-after:<n> or error"
        );
    }

    #[test]
    fn spelling_checks_point_at_the_bad_declaration() {
        assert_eq!(check_spellings(&json!([{"tool": "a", "fault": "hang"}])), None);
        let (pointer, message) =
            check_spellings(&json!([{"tool": "a", "fault": "hang"}, {"tool": "b", "fault": "slow"}])).unwrap();
        assert_eq!(pointer, "/1/fault");
        assert!(message.contains("needs a number"), "{message}");
        let (pointer, message) = check_spellings(&json!([{"fault": "hang"}])).unwrap();
        assert_eq!((pointer.as_str(), message.contains("a tool, a server, or both")), ("/0", true));
        // not an array, not an object: the schema's to report
        assert_eq!(check_spellings(&json!("hang")), None);
        assert_eq!(check_spellings(&json!([3])), None);
    }

    #[test]
    fn a_declaration_that_could_never_fire_is_refused() {
        let tools: Vec<ToolSpec> = serde_json::from_value(json!([{"name": "get_status", "description": "d"}])).unwrap();
        assert_eq!(check_targets(&[decl(Some("get_status"), Some("api"), "hang")], &tools, Some("api")), Ok(()));
        let ok = decl(Some("get_status"), None, "hang");
        let e = check_targets(&[ok, decl(Some("get_stats"), None, "hang")], &tools, None).unwrap_err();
        assert_eq!((e.index, e.field, e.name.as_str()), (1, "tool", "get_stats"));
        assert_eq!(
            e.message,
            "fault names tool \"get_stats\", which the manifest does not have (did you mean \"get_status\"?)"
        );
        let e = check_targets(&[decl(None, Some("apii"), "hang")], &tools, Some("api")).unwrap_err();
        assert_eq!((e.index, e.field), (0, "server"));
        assert_eq!(e.message, "fault names server \"apii\", but its tools are served by \"api\"");
        let e = check_targets(&[decl(None, Some("api"), "hang")], &tools, None).unwrap_err();
        assert!(e.message.ends_with("it declares no \"server\""), "{}", e.message);
    }
}
