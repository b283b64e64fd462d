//! The repository stands alone: its README, docs, JSON Schemas, `--help` texts and
//! source comments point at documents it contains, and those documents describe every
//! assertion target there is.

mod common;

use std::path::{Path, PathBuf};

use common::{Project, files_in};

/// Names of documents that live outside the repository, which nothing may send a
/// reader to.
const OUTSIDE: [&str; 4] = ["METRICS.md", "DESIGN.md", "STYLE.md", "../shared"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn texts_under(dir: &Path, extensions: &[&str]) -> Vec<(PathBuf, String)> {
    files_in(dir)
        .into_iter()
        .filter(|p| p.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

#[test]
fn no_readme_doc_schema_or_source_comment_points_outside_the_repository() {
    let root = repo();
    let mut texts = vec![(root.join("README.md"), std::fs::read_to_string(root.join("README.md")).unwrap_or_default())];
    texts.extend(texts_under(&root.join("docs"), &["md"]));
    texts.extend(texts_under(&root.join("schemas"), &["json"]));
    texts.extend(texts_under(&root.join("src"), &["rs"]));
    texts.extend(texts_under(&root.join("pipeline"), &["toml"]));
    assert!(texts.len() > 50, "found only {} files", texts.len());
    let mut found = Vec::new();
    for (path, text) in &texts {
        for (n, line) in text.lines().enumerate() {
            if OUTSIDE.iter().any(|o| line.contains(o)) {
                found.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "references to documents outside the repository:\n{}", found.join("\n"));
}

#[test]
fn no_help_text_points_outside_the_repository() {
    let p = Project::empty();
    let top = p.stateval(&["--help"]);
    top.expect_code(0);
    let commands: Vec<String> = top
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10 && commands.contains(&"metric".to_string()), "{commands:?}");
    let mut texts = vec![top.stdout.clone()];
    for command in &commands {
        let out = p.stateval(&[command, "--help"]);
        out.expect_code(0);
        texts.push(out.stdout);
    }
    for text in &texts {
        for o in OUTSIDE {
            assert!(!text.contains(o), "a --help text names {o}:\n{text}");
        }
    }
    assert!(texts.iter().any(|t| t.contains("docs/metrics.md")), "metric --help points at docs/metrics.md");
}

#[test]
fn the_docs_describe_every_assertion_target() {
    let root = repo();
    let docs: String = ["docs/design.md", "docs/metrics.md"]
        .iter()
        .map(|d| std::fs::read_to_string(root.join(d)).unwrap_or_else(|e| panic!("{d}: {e}")))
        .collect();
    let missing: Vec<&str> = stateval::extract::targets::TARGETS
        .iter()
        .map(|t| t.name)
        .filter(|name| !docs.contains(&format!("`{name}`")) && !docs.contains(&format!("`{name}` ")))
        .collect();
    assert!(missing.is_empty(), "targets the docs do not name: {missing:?}");
}

#[test]
fn every_doc_a_document_links_to_exists() {
    let root = repo();
    let mut texts = vec![(root.clone(), std::fs::read_to_string(root.join("README.md")).unwrap_or_default())];
    for (path, text) in texts_under(&root.join("docs"), &["md"]) {
        texts.push((path.parent().map(Path::to_path_buf).unwrap_or_default(), text));
    }
    for (dir, text) in &texts {
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            if link.starts_with("http") || link.starts_with('#') {
                continue;
            }
            let target = dir.join(link.split('#').next().unwrap_or(link));
            assert!(target.exists(), "a link to {link} from {} leads nowhere", dir.display());
        }
        for named in ["docs/design.md", "docs/metrics.md", "docs/agents.md", "docs/import.md"] {
            if text.contains(named) {
                assert!(root.join(named).is_file(), "{named} is named but missing");
            }
        }
    }
}

/// A newcomer writing a case reads the README's dataset reference: it names every key a
/// case may have, as the case schema lists them.
#[test]
fn the_readme_names_every_key_of_a_case() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("schemas/case.json")).expect("the case schema"))
            .expect("JSON");
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let table = readme.split("**Every key of a case**").nth(1).expect("the README's table of case keys");
    let table = &table[..table.find("\n\n`recordings`").unwrap_or(table.len())];
    let keys = schema["properties"].as_object().expect("properties");
    let missing: Vec<&String> = keys.keys().filter(|k| !table.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "the README's case keys leave out {missing:?}");
}
