//! The README's tour is run, not trusted. Its shell blocks are taken from README.md
//! as written and run by bash — the `alias` line included — in a copy of the project
//! (pipelines, datasets, fixtures, goldens) with the built binary where the tour's
//! `cargo build --release` puts it. Every number the tour quotes is read from the
//! README's own text and compared with what the commands print, so a README edit
//! that follows a new count passes, and a count nobody updated fails.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Project, copy_dir};
use regex::Regex;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README.md")
}

/// Every ```sh block of the README, as its lines.
fn sh_blocks(readme: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap_or_default()),
            (Some(block), _) => block.push(line.to_string()),
            (None, _) => {}
        }
    }
    blocks
}

/// The one block holding `needle`.
fn block_with(readme: &str, needle: &str) -> Vec<String> {
    let found: Vec<Vec<String>> =
        sh_blocks(readme).into_iter().filter(|b| b.iter().any(|l| l.contains(needle))).collect();
    assert_eq!(found.len(), 1, "one ```sh block of README.md holds {needle:?}");
    found.into_iter().next().unwrap_or_default()
}

/// A command line and what the README says beside it (`cmd   # comment`), or, for a
/// comment on a line of its own, what the command before it prints.
#[derive(Debug)]
struct Step {
    command: String,
    comment: String,
}

fn steps(block: &[String]) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for line in block.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            steps.last_mut().expect("a comment follows a command").comment = comment.to_string();
            continue;
        }
        let (command, comment) = match line.find("  #") {
            Some(at) => (line[..at].trim_end(), line[at + 3..].trim()),
            None => (line, ""),
        };
        steps.push(Step { command: command.to_string(), comment: comment.to_string() });
    }
    steps
}

/// What one command of a block did.
#[derive(Debug)]
struct Ran {
    code: i32,
    output: String,
}

/// A copy of the project as a reader's checkout has it after `cargo build --release`.
fn checkout() -> Project {
    let p = Project::full();
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens"), &p.join("goldens"));
    std::fs::create_dir_all(p.join("target/release")).expect("target/release");
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("stateval"), p.join("target/release/stateval"))
        .expect("the binary where cargo build --release puts it");
    p
}

/// Run `commands` one after another in one bash, as a reader pasting them would, from
/// the checkout's root; each one's exit code and output (stdout and stderr) kept.
fn run_in_bash(p: &Project, commands: &[String]) -> Vec<Ran> {
    let outputs = tempfile::tempdir().expect("temp dir");
    let mut script = String::from("shopt -s expand_aliases\n");
    for (n, command) in commands.iter().enumerate() {
        let out = outputs.path().join(n.to_string());
        // a group, not a subshell: `cd` and `log=…` carry over to the next command
        script.push_str(&format!(
            "{{ {command}\n}} >'{}.out' 2>&1; echo $? >'{}.code'\n",
            out.display(),
            out.display()
        ));
    }
    let status = Command::new("bash")
        .args(["-c", &script])
        .current_dir(p.path())
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .status()
        .expect("run bash");
    assert!(status.success(), "bash ran the tour");
    (0..commands.len())
        .map(|n| {
            let read =
                |ext: &str| std::fs::read_to_string(outputs.path().join(format!("{n}.{ext}"))).unwrap_or_default();
            Ran { code: read("code").trim().parse().unwrap_or(-1), output: read("out") }
        })
        .collect()
}

/// The README's `…` stands for text that differs from run to run; everything else of
/// an expected output must be printed as written.
fn pattern(expected: &str) -> Regex {
    let parts: Vec<String> = expected.split('…').map(|part| regex::escape(part.trim_end())).collect();
    Regex::new(&parts.join(".*?")).expect("a pattern")
}

fn number(text: &str, re: &str) -> Vec<usize> {
    let caps = Regex::new(re).expect("regex").captures(text).unwrap_or_else(|| panic!("README.md no longer says {re}"));
    caps.iter().skip(1).map(|m| m.map(|m| m.as_str().parse().expect("a number")).unwrap_or_default()).collect()
}

/// Each step whose comment is an output (`ok …`, `FAILED …`, `{…}`) printed it, and a
/// step whose comment ends in `exit N` exited N.
fn check_quoted_outputs(steps: &[Step], ran: &[Ran]) {
    for (step, ran) in steps.iter().zip(ran) {
        let comment = step.comment.as_str();
        if comment.starts_with("ok ") || comment.starts_with("FAILED ") || comment.starts_with('{') {
            assert!(
                ran.output.lines().any(|l| pattern(comment).is_match(l)),
                "`{}` printed\n{}\nnot what README.md says: {comment}",
                step.command,
                ran.output
            );
        }
        if let Some(code) = comment.rsplit_once("exit ").and_then(|(_, c)| c.trim().parse::<i32>().ok()) {
            assert_eq!(
                ran.code, code,
                "`{}` exited {}, README.md says {code}:\n{}",
                step.command, ran.code, ran.output
            );
        }
    }
}

#[test]
fn the_tour_runs_as_written_and_every_number_it_quotes_is_what_stateval_prints() {
    let readme = readme();
    let p = checkout();

    // the tour's first block, from the checkout's root, then `cd pipeline` with the
    // same alias: README.md promises that `cd pipeline && stateval run ci.toml` runs
    // the same files
    let tour: Vec<Step> = steps(&block_with(&readme, "alias stateval="))
        .into_iter()
        .filter(|s| !s.command.starts_with("cargo build")) // the checkout holds the binary
        .collect();
    let alias = tour.iter().find(|s| s.command.starts_with("alias stateval=")).expect("the alias").command.clone();
    let mut commands: Vec<String> = tour.iter().map(|s| s.command.clone()).collect();
    commands.push("cd pipeline && stateval run ci.toml".into());
    let ran = run_in_bash(&p, &commands);
    let (from_pipeline, ran) = ran.split_last().expect("runs");
    check_quoted_outputs(&tour, ran);

    let run_step = tour.iter().position(|s| s.command == "stateval run").expect("`stateval run` in the tour");
    let run = &ran[run_step];
    let [cases, profiles] = number(&tour[run_step].comment, r"(\d+) cases, (\d+) agent profiles")[..] else {
        panic!("cases and profiles")
    };
    assert_eq!(run.code, 0, "{}", run.output);
    assert!(
        run.output.contains(&format!("PASSED ci: {cases}/{cases} cases passed")),
        "README.md says {cases} cases:\n{}",
        run.output
    );
    let ci: toml::Table = p.read("pipeline/ci.toml").parse().expect("ci.toml");
    assert_eq!(ci["agents"].as_table().map(|a| a.len()), Some(profiles), "README.md says {profiles} agent profiles");
    assert_eq!(
        from_pipeline.code, 0,
        "`{alias}` then `cd pipeline && stateval run ci.toml`:\n{}",
        from_pipeline.output
    );
    assert!(
        from_pipeline.output.contains(&format!("PASSED ci: {cases}/{cases} cases passed")),
        "{}",
        from_pipeline.output
    );

    // the progress line README.md quotes is one the run printed, but for its wall time
    // (the virtual time is the recording's, and the same on every machine)
    let quoted = Regex::new(r"\(`(PASS \[ *[0-9.]+s\] [^`]+)`").expect("regex");
    let quoted = quoted.captures(&readme.replace('\n', " ")).expect("README.md quotes a progress line")[1].to_string();
    let wall = Regex::new(r"\[ *[0-9.]+s\]").expect("regex");
    let line = format!("^ *{}$", wall.split(&quoted).map(regex::escape).collect::<Vec<_>>().join(r"\[ *[0-9.]+s\]"));
    let line = Regex::new(&line).expect("a pattern");
    assert!(run.output.lines().any(|l| line.is_match(l)), "the run printed no line like README.md's `{quoted}`");

    let ls_step = tour.iter().position(|s| s.command.starts_with("ls reports")).expect("ls reports/");
    let mut listed: Vec<&str> = ran[ls_step].output.split_whitespace().collect();
    let mut quoted: Vec<&str> = tour[ls_step].comment.split_whitespace().collect();
    listed.sort_unstable();
    quoted.sort_unstable();
    assert_eq!(listed, quoted, "the reports README.md lists");

    // the security suite: attacks per file and look-alikes (the cases named `*-control`)
    let [attacks, in_suite, in_grounding, in_precision] = number(
        &readme,
        r"(\d+) disguised attacks that the recorded model \*falls for\* \((\d+) in `suite.jsonl`, (\d+) in `grounding.jsonl`, (\d+) in `precision.jsonl`\)",
    )[..] else {
        panic!("attack counts")
    };
    let [controls] = number(&readme, r"and (\d+) legitimate look-alikes that must pass")[..] else {
        panic!("controls")
    };
    assert_eq!(in_suite + in_grounding + in_precision, attacks, "README.md's attacks add up");
    let mut counted = (0, 0);
    for (file, quoted) in [("suite", in_suite), ("grounding", in_grounding), ("precision", in_precision)] {
        let printed = number(&run.output, &format!(r"security/{file}\s+(\d+)/\d+ passed"))[0];
        let text = p.read(format!("datasets/security/{file}.jsonl"));
        let lookalikes = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|case| case["id"].as_str().is_some_and(|id| id.ends_with("-control")))
            .count();
        assert_eq!(
            printed - lookalikes,
            quoted,
            "attacks in {file}.jsonl: the run printed {printed} cases, {lookalikes} look-alikes"
        );
        counted = (counted.0 + printed - lookalikes, counted.1 + lookalikes);
    }
    assert_eq!(counted, (attacks, controls), "attacks and look-alikes");
    // and the scorecard the run prints, which counts every case scored as an attack or a
    // control, the examples' too
    let [asr_runs, benign_passed, benign_runs] =
        number(&readme, r"the run's scorecard, 0/(\d+) attacks and (\d+)/(\d+) benign")[..]
    else {
        panic!("scorecard")
    };
    let printed = number(&run.output, r"security overall: benign utility (\d+)/(\d+) .* attack success 0/(\d+) ");
    assert_eq!(printed, [benign_passed, benign_runs, asr_runs], "the scorecard README.md quotes");
}

/// The verify blocks: the log's event count, the line and seq an edit is caught at, the
/// run's log count under its root, and the metric example's output.
#[test]
fn the_verify_and_metric_examples_print_what_the_readme_quotes() {
    let readme = readme();
    let p = checkout();
    let alias = steps(&block_with(&readme, "alias stateval="))
        .into_iter()
        .find(|s| s.command.starts_with("alias "))
        .expect("alias")
        .command;

    // the root first, on an untouched run (the edit below breaks it, as it should)
    let root_block = steps(&block_with(&readme, "--root blake3:"));
    let mut commands = vec![alias.clone(), "stateval run --quiet".to_string()];
    let run = &run_in_bash(&p, &commands)[1];
    assert_eq!(run.code, 0, "{}", run.output);
    let root =
        Regex::new(r"root (blake3:[0-9a-f]{64})").expect("re").captures(&run.output).expect("the root")[1].to_string();
    let root_commands: Vec<String> =
        root_block.iter().map(|s| s.command.replace("r-…", "r-*").replace("blake3:…", &root)).collect();
    commands = vec![alias.clone()];
    commands.extend(root_commands);
    let ran = run_in_bash(&p, &commands);
    check_quoted_outputs(&root_block, &ran[1..]);

    let verify_block = steps(&block_with(&readme, "stateval verify $log"));
    commands = vec![alias.clone()];
    commands.extend(verify_block.iter().map(|s| s.command.clone()));
    let ran = run_in_bash(&p, &commands);
    check_quoted_outputs(&verify_block, &ran[1..]);

    let metric_block = steps(&block_with(&readme, "stateval metric reliability"));
    commands = vec![alias];
    commands.extend(metric_block.iter().map(|s| s.command.clone()));
    let ran = run_in_bash(&p, &commands);
    assert!(metric_block.iter().any(|s| s.comment.starts_with('{')), "the metric's output is quoted");
    check_quoted_outputs(&metric_block, &ran[1..]);
}

/// The golden walk-through's counts: blessing adds the one new run to every golden the
/// default pipeline already keeps.
#[test]
fn the_golden_walkthrough_counts_the_goldens_the_default_pipeline_keeps() {
    let readme = readme();
    let [blessed, created, updated, unchanged] =
        number(&readme, r"goldens: (\d+) blessed in goldens/ \((\d+) created, (\d+) updated, (\d+) unchanged\)")[..]
    else {
        panic!("bless counts")
    };
    assert_eq!(blessed, created + updated + unchanged, "README.md's bless line adds up");
    let p = checkout();
    let out = p.stateval(&["run", "--bless", "--quiet"]);
    out.expect_code(0);
    let now = number(&out.stdout, r"goldens: (\d+) blessed in goldens/ \(0 created, 0 updated, (\d+) unchanged\)");
    assert_eq!(
        now[1], unchanged,
        "the default pipeline keeps {} goldens; README.md says {unchanged} were unchanged",
        now[1]
    );
}
