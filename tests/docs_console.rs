//! Every ```console block in README.md and docs/*.md is run, and what it shows is what
//! stateval prints (issue #51: docs/report.md's counts, docs/security.md's line numbers
//! and the README's virtual time had all gone stale unnoticed).
//!
//! A block is a reader's terminal: `$ COMMAND` lines (a `  # comment` after two spaces
//! is the doc's, not the shell's), each followed by what it printed. The commands of a
//! block run one after another in one bash, in a fresh checkout (pipelines, datasets,
//! fixtures, goldens and examples/graders, committed in a git repository) with this build's `stateval`
//! first on PATH. What a block shows of an output is held to it line by line, from the
//! output's first line (stdout, then stderr): `…` alone on a line stands for any number
//! of lines, `…` inside a line for any text, and lines after the last one shown are not
//! checked. A command shown without output must exit 0.
//!
//! The line before a block may say how to get there, in an HTML comment the reader does
//! not see: `<!-- console setup: COMMANDS -->` runs COMMANDS (which must succeed) first.
//! A block that cannot run here says so, with its reason:
//! `<!-- console: not run: REASON -->`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Project, copy_dir};
use regex::Regex;

/// One ```console block: where it is, its setup, and its commands with what each showed.
#[derive(Debug)]
struct Block {
    at: String,
    setup: Option<String>,
    not_run: Option<String>,
    steps: Vec<(String, Vec<String>)>,
}

fn docs() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![repo.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

fn blocks(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).expect("a doc");
    let name = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).expect("in the repository").display().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let comment = Regex::new(r"\s{2,}#\s.*$").expect("regex");
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```console" {
            i += 1;
            continue;
        }
        let before = if i > 0 { lines[i - 1].trim() } else { "" };
        let setup = before
            .strip_prefix("<!-- console setup:")
            .and_then(|s| s.strip_suffix("-->"))
            .map(|s| s.trim().to_string());
        let not_run = before
            .strip_prefix("<!-- console: not run:")
            .and_then(|s| s.strip_suffix("-->"))
            .map(|s| s.trim().to_string());
        let at = format!("{name}:{}", i + 1);
        let mut steps: Vec<(String, Vec<String>)> = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            let line = lines[i];
            if let Some(command) = line.strip_prefix("$ ") {
                steps.push((comment.replace(command, "").trim().to_string(), Vec::new()));
            } else {
                let step = steps.last_mut().unwrap_or_else(|| panic!("{at}: output before the first `$ ` command"));
                step.1.push(line.trim_end().to_string());
            }
            i += 1;
        }
        out.push(Block { at, setup, not_run, steps });
    }
    out
}

/// A fresh checkout with this build's `stateval` first on PATH; the PATH to use.
fn checkout() -> (Project, String) {
    let p = Project::full();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&repo.join("goldens"), &p.join("goldens"));
    // the graders pipeline's scripts, rubrics and judge recordings
    copy_dir(&repo.join("examples/graders"), &p.join("examples/graders"));
    // the AgentDojo run files docs/import.md imports
    copy_dir(&repo.join("tests/data/agentdojo-runs"), &p.join("tests/data/agentdojo-runs"));
    std::fs::create_dir_all(p.join(".bin")).expect(".bin");
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("stateval"), p.join(".bin/stateval")).expect("link");
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=docs", "-c", "user.email=docs@example.invalid", "-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(p.path())
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    };
    p.write(".gitignore", ".bin/\n.stateval/\nreports/\n");
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "checkout"]);
    let path = format!("{}:{}", p.join(".bin").display(), std::env::var("PATH").unwrap_or_default());
    (p, path)
}

/// Run `script` in bash in the checkout: (exit code, stdout, stderr).
fn bash(p: &Project, path: &str, script: &str) -> (i32, String, String) {
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(p.path())
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether `shown` (a block's lines of one output) is what `printed` holds, by the
/// rules in the module doc; else the first line that is not.
fn mismatch(shown: &[String], printed: &[&str]) -> Option<String> {
    let pattern = |line: &str| {
        let parts: Vec<String> = line.split('…').map(regex::escape).collect();
        Regex::new(&format!("^{}$", parts.join(".*"))).expect("a pattern")
    };
    fn go(shown: &[String], printed: &[&str], pattern: &dyn Fn(&str) -> Regex) -> Result<(), String> {
        let Some((first, rest)) = shown.split_first() else { return Ok(()) };
        if first == "…" {
            // any number of lines, then the rest
            let mut last = Err(String::new());
            for skip in 0..=printed.len() {
                last = go(rest, &printed[skip..], pattern);
                if last.is_ok() {
                    return last;
                }
            }
            return last;
        }
        match printed.split_first() {
            Some((line, more)) if pattern(first).is_match(line.trim_end()) => go(rest, more, pattern),
            Some((line, _)) => Err(format!("shown:   {first}\nprinted: {line}")),
            None => Err(format!("shown:   {first}\nprinted: (nothing more)")),
        }
    }
    go(shown, printed, &pattern).err()
}

#[test]
fn every_console_block_in_the_docs_prints_what_it_shows() {
    let all: Vec<Block> = docs().iter().flat_map(|d| blocks(d)).collect();
    assert!(all.len() >= 4, "the docs have {} console blocks: {all:?}", all.len());
    let mut failures = Vec::new();
    for block in &all {
        if let Some(reason) = &block.not_run {
            assert!(!reason.is_empty(), "{}: not run, with no reason", block.at);
            continue;
        }
        let (p, path) = checkout();
        if let Some(setup) = &block.setup {
            let (code, out, err) = bash(&p, &path, setup);
            assert_eq!(code, 0, "{}: the setup `{setup}` failed:\n{out}{err}", block.at);
        }
        for (command, shown) in &block.steps {
            let (code, out, err) = bash(&p, &path, command);
            let printed: Vec<&str> = out.lines().chain(err.lines()).collect();
            if shown.is_empty() {
                if code != 0 {
                    failures.push(format!("{}: `{command}` exited {code}:\n{out}{err}", block.at));
                }
            } else if let Some(why) = mismatch(shown, &printed) {
                failures.push(format!("{}: `{command}` did not print what the doc shows\n{why}", block.at));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_matching_rules_hold_text_to_what_was_printed() {
    let s = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert_eq!(mismatch(&s(&["a", "b"]), &["a", "b", "c"]), None, "lines after the last shown are not checked");
    assert!(mismatch(&s(&["b"]), &["a", "b"]).is_some(), "shown from the first line");
    assert_eq!(mismatch(&s(&["…", "b"]), &["a", "x", "b"]), None);
    assert_eq!(mismatch(&s(&["run r-…: ok"]), &["run r-0123: ok"]), None);
    assert!(mismatch(&s(&["run r-…: ok"]), &["run r-0123: failed"]).is_some());
    assert!(mismatch(&s(&["a", "…", "c"]), &["a", "b"]).is_some());
    assert!(mismatch(&s(&["120 blessed"]), &["119 blessed"]).is_some());
}
