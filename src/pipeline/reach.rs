//! The tools a profile can reach, and the rule that configuration names only those.
//!
//! A policy rule, an approval, a destructive-tool detector or a case's `allowed_tools`
//! that names a tool the agent can never call is a mitigation silently off: a rule for
//! `"transfr"` validates, never matches, and the suite stays green. So every tool such
//! configuration names must be one the profile can reach — a tool of its manifest, or
//! one of the built-in runtime's own (memory for every built-in profile, `handoff` for
//! one that hands off) — and anything else is a load error at the name, with the
//! closest real name suggested.
//!
//! Only the names are read here, once per manifest file: a manifest that does not load
//! is left for the plan to report with its own location.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::Pipeline;
use super::manifest::SafetyClass;
use super::profile::{AgentKind, AgentProfile};
use crate::diag::{InputError, did_you_mean};

/// The built-in runtime's memory tools, offered to every built-in profile (the one
/// definition: `runtime::memory` takes its names from here).
pub const MEMORY_TOOLS: [&str; 2] = ["memory_write", "memory_read"];

/// The built-in runtime's handoff tool, offered to a profile with `handoffs` (the one
/// definition: `runtime::handoff` takes it from here).
pub const HANDOFF_TOOL: &str = "handoff";

/// Every safety class, as approvals and policy rules spell it.
pub const SAFETY_CLASSES: [SafetyClass; 5] =
    [SafetyClass::Read, SafetyClass::Write, SafetyClass::Network, SafetyClass::Financial, SafetyClass::Privileged];

/// The tool names of every manifest a pipeline's profiles name, by the path as written.
#[derive(Debug, Clone, Default)]
pub struct ToolNames {
    /// `None`: the manifest could not be read as JSON with a `tools` list.
    by_manifest: BTreeMap<String, Option<Arc<[String]>>>,
}

/// What a profile can call.
#[derive(Debug)]
pub struct Reach<'a> {
    pub tools: Vec<&'a str>,
    /// The profile names a tool manifest.
    pub has_manifest: bool,
}

impl ToolNames {
    /// Read the tool names of each manifest `agents` name (each file once), resolving
    /// paths with `resolve`.
    pub fn read<'a>(
        agents: impl IntoIterator<Item = &'a AgentProfile>,
        resolve: impl Fn(&str) -> std::path::PathBuf,
    ) -> ToolNames {
        let mut by_manifest = BTreeMap::new();
        for rel in agents.into_iter().filter_map(|a| a.tools.as_deref()) {
            if !by_manifest.contains_key(rel) {
                by_manifest.insert(rel.to_string(), names_in(&resolve(rel)));
            }
        }
        ToolNames { by_manifest }
    }

    /// The tools `profile` can reach, or `None` when its manifest could not be read.
    pub fn reach<'a>(&'a self, profile: &AgentProfile) -> Option<Reach<'a>> {
        let mut tools: Vec<&str> = match profile.tools.as_deref() {
            Some(rel) => self.by_manifest.get(rel)?.as_ref()?.iter().map(String::as_str).collect(),
            None => Vec::new(),
        };
        if profile.kind == AgentKind::Builtin {
            tools.extend(MEMORY_TOOLS);
            if !profile.handoffs.is_empty() {
                tools.push(HANDOFF_TOOL);
            }
        }
        Some(Reach { tools, has_manifest: profile.tools.is_some() })
    }
}

impl Reach<'_> {
    pub fn has(&self, tool: &str) -> bool {
        self.tools.contains(&tool)
    }

    /// `, which no manifest the profile can reach has (did you mean "x"?)`: why `name`
    /// names nothing, after the subject of the sentence.
    pub fn names_nothing(&self, name: &str) -> String {
        format!(", which no manifest the profile can reach has{}", self.hint(name))
    }

    /// Why an approval keyed `key` (a tool name or a safety class) would answer nothing,
    /// if it would.
    pub fn approval_names_nothing(&self, key: &str) -> Option<String> {
        if is_safety_class(key) || self.has(key) {
            return None;
        }
        let classes = SAFETY_CLASSES.map(SafetyClass::as_str);
        let hint = did_you_mean(key, self.tools.iter().copied().chain(classes))
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_default();
        Some(format!(
            "an approval names \"{key}\", which is neither a safety class ({}) nor a tool the profile can reach{hint}",
            classes.join(", ")
        ))
    }

    /// ` (did you mean "x"?)` when a reachable tool is close to `name`, and a note when
    /// the profile names no manifest at all.
    pub fn hint(&self, name: &str) -> String {
        let close = did_you_mean(name, self.tools.iter().copied())
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_default();
        let manifest = if self.has_manifest { "" } else { "; the profile names no tools manifest" };
        format!("{close}{manifest}")
    }
}

impl Pipeline {
    /// Every tool a profile's policy rules, approvals and destructive-tool detectors
    /// name is one the profile can reach (see the module doc); each that is not is a
    /// load error at the name.
    pub(super) fn tool_name_errors(&self, names: &ToolNames) -> Vec<InputError> {
        let mut errors = Vec::new();
        for (agent, profile) in &self.agents {
            let Some(reach) = names.reach(profile) else { continue };
            for (i, rule) in profile.policy.iter().enumerate() {
                let Some(tool) = rule.tool.as_deref().filter(|t| *t != "*" && !reach.has(t)) else { continue };
                let message = format!("policy rule \"{}\" names tool \"{tool}\"{}", rule.id, reach.names_nothing(tool));
                errors.push(self.error_at(&format!("/agents/{agent}/policy/{i}/tool"), tool, message));
            }
            for key in profile.approvals.keys() {
                if let Some(message) = reach.approval_names_nothing(key) {
                    errors.push(self.error_at(&format!("/agents/{agent}/approvals/{key}"), "", message));
                }
            }
            for (i, pattern) in profile.safety.destructive_tools.iter().enumerate() {
                // compiled when the profile was validated
                let Ok(regex) = regex::Regex::new(pattern) else { continue };
                if reach.tools.iter().any(|t| regex.is_match(t)) {
                    continue;
                }
                let message = format!(
                    "the destructive-tool detector's pattern \"{pattern}\" matches no tool the profile can reach{}",
                    reach.hint(pattern)
                );
                errors.push(self.error_at(&format!("/agents/{agent}/safety/destructive_tools/{i}"), pattern, message));
            }
        }
        errors
    }
}

/// The `name` of each entry of a manifest's `tools`, or `None` when the file is not
/// JSON of that shape.
fn names_in(path: &Path) -> Option<Arc<[String]>> {
    // only the names are read: the rest of each entry (descriptions, schemas, fixture
    // responses) is skipped over, not built (a file that is not of this shape, or has a
    // key twice, gets its error from the manifest's own validation)
    #[derive(serde::Deserialize)]
    struct Manifest {
        tools: Vec<Named>,
    }
    #[derive(serde::Deserialize)]
    struct Named {
        name: String,
    }
    let text = std::fs::read_to_string(path).ok()?;
    let manifest: Manifest = serde_json::from_str(crate::diag::strip_bom(&text)).ok()?;
    Some(manifest.tools.into_iter().map(|t| t.name).collect())
}

/// Is `key` a safety class (`financial`) rather than a tool name?
pub fn is_safety_class(key: &str) -> bool {
    SAFETY_CLASSES.iter().any(|c| c.as_str() == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str) -> AgentProfile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_builtin_profile_reaches_its_manifest_memory_and_handoff_only_when_it_hands_off() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bank.json"), r#"{"tools": [{"name": "transfer", "description": "d"}]}"#)
            .unwrap();
        let agents = [profile("tools = \"bank.json\""), profile("handoffs = [\"x\"]")];
        let names = ToolNames::read(&agents, |rel| dir.path().join(rel));
        let bank = names.reach(&agents[0]).unwrap();
        assert_eq!(bank.tools, ["transfer", "memory_write", "memory_read"]);
        assert_eq!(
            bank.names_nothing("transfr"),
            ", which no manifest the profile can reach has (did you mean \"transfer\"?)"
        );
        let bare = names.reach(&agents[1]).unwrap();
        assert_eq!(bare.tools, ["memory_write", "memory_read", "handoff"]);
        assert!(bare.names_nothing("transfer").ends_with("; the profile names no tools manifest"));
    }

    #[test]
    fn a_manifest_that_cannot_be_read_leaves_the_profile_unchecked() {
        let agents = [profile("tools = \"missing.json\"")];
        let names = ToolNames::read(&agents, |rel| Path::new("/nonexistent").join(rel));
        assert!(names.reach(&agents[0]).is_none());
    }

    /// `Pipeline::load` of a pipeline whose profile `bank` reads a manifest of
    /// `transfer` and `close_account`, with `profile` appended to it.
    fn load(profile: &str) -> Result<Pipeline, InputError> {
        let dir = tempfile::tempdir().unwrap();
        let tools =
            r#"{"tools": [{"name": "transfer", "description": "d"}, {"name": "close_account", "description": "d"}]}"#;
        std::fs::write(dir.path().join("bank.json"), tools).unwrap();
        let path = dir.path().join("p.toml");
        let text = format!(
            "[pipeline]\nname = \"p\"\ndatasets = [\"d\"]\n\n[agents.bank]\ntools = \"bank.json\"\n{profile}\n"
        );
        std::fs::write(&path, text).unwrap();
        Pipeline::load(&path)
    }

    #[test]
    fn what_a_profile_names_must_be_a_tool_it_can_reach() {
        // any tool, no tool, a class, the runtime's own tools: all fine
        let fine = [
            r#"policy = [{ id = "a", tool = "*", verdict = "deny" }, { id = "b", safety_class = "write", verdict = "allow" }]"#,
            r#"policy = [{ id = "m", tool = "memory_write", verdict = "deny" }]"#,
            r#"approvals = { financial = "approve", close_account = "human" }"#,
            r#"safety = { destructive_tools = ["^close_"] }"#,
        ];
        for profile in fine {
            assert!(load(profile).is_ok(), "{profile}: {:?}", load(profile).err());
        }
        let err = load(r#"policy = [{ id = "t", tool = "transfr", verdict = "deny" }]"#).unwrap_err();
        // line 7, at the quoted name
        assert_eq!((err.line, err.column), (7, 30), "{err}");
        assert_eq!(
            err.message,
            "agents.bank.policy[0].tool: policy rule \"t\" names tool \"transfr\", which no manifest the profile can \
             reach has (did you mean \"transfer\"?)"
        );
        let err = load(r#"approvals = { transfr = "approve" }"#).unwrap_err();
        assert_eq!((err.line, err.column), (7, 15), "{err}");
        assert!(err.message.starts_with("agents.bank.approvals.transfr: an approval names \"transfr\""), "{err}");
        let err = load(r#"safety = { destructive_tools = ["^delete_"] }"#).unwrap_err();
        assert!(err.message.starts_with("agents.bank.safety.destructive_tools[0]: "), "{err}");
        // handoff is a tool only of a profile that hands off
        let err = load(r#"policy = [{ id = "h", tool = "handoff", verdict = "deny" }]"#).unwrap_err();
        assert!(err.message.contains("names tool \"handoff\""), "{err}");
        assert!(
            load("handoffs = [\"bank\"]\npolicy = [{ id = \"h\", tool = \"handoff\", verdict = \"deny\" }]").is_ok()
        );
    }

    #[test]
    fn every_safety_class_is_listed() {
        for key in ["read", "write", "network", "financial", "privileged"] {
            assert!(is_safety_class(key), "{key}");
        }
        assert!(!is_safety_class("transfer"));
    }
}
