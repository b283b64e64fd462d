//! Evidence that holds, end to end: every report carries the run's root; `verify`
//! catches every mutation of a run's logs (the chain, the manifest, an archived root,
//! a signature); no kill at any moment leaves a torn log or a stale green report.

mod common;

use std::path::{Path, PathBuf};

use common::{Project, lines_of};
use stateval::canon::Digest;
use stateval::event::verify::parse_line;
use stateval::event::writer::LogWriter;
use stateval::evidence::{CheckOptions, LogEntry, RunManifest, check_run};

/// A project after a green run of the core suites; the run directory (relative) and
/// the root its reports printed.
fn green_run() -> (Project, String, String) {
    let p = Project::new();
    let out = p.stateval(&["run"]);
    out.expect_code(0);
    let root = p.json("reports/report.json")["root"].as_str().expect("report.json has a root").to_string();
    assert!(
        out.stdout.contains(&format!("\nroot {root} (unsigned)\n")),
        "the terminal prints the root: {}",
        out.stdout
    );
    let runs: Vec<String> = p.run_ids();
    assert_eq!(runs.len(), 1, "{runs:?}");
    (p, format!(".stateval/runs/{}", runs[0]), root)
}

#[test]
fn every_report_prints_the_root_that_verify_recomputes_from_the_manifest() {
    let (p, run_dir, root) = green_run();
    let junit = p.read("reports/junit.xml");
    let doc = roxmltree::Document::parse(&junit).expect("JUnit parses");
    let roots: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("property") && n.attribute("name") == Some("root"))
        .filter_map(|n| n.attribute("value"))
        .collect();
    assert!(!roots.is_empty() && roots.iter().all(|r| *r == root), "every JUnit suite carries the root: {roots:?}");
    assert!(p.read("reports/results.tap").contains(&format!("root {root}\n")), "TAP comment");
    assert!(p.read("reports/summary.md").contains(&format!("root `{root}`")), "summary.md");
    assert!(p.read("reports/report.html").contains(&root), "HTML report");

    let out = p.stateval(&["verify", &run_dir, "--root", &root]);
    out.expect_code(0);
    assert!(out.stdout.starts_with(&format!("ok {run_dir}: 17 logs, ")), "{}", out.stdout);
    assert!(out.stdout.contains(&format!(", root {root} (root matches --root)")), "{}", out.stdout);

    let other = "blake3:".to_string() + &"0".repeat(64);
    let out = p.stateval(&["verify", &run_dir, "--root", &other]);
    out.expect_code(1);
    assert!(out.stderr.contains("manifest.json: its root is "), "{}", out.stderr);
    p.stateval(&["verify", &run_dir, "--root", "not-a-digest"]).expect_code(2);
}

/// One way to tamper with a run, applied to the log at `log` (bytes) of `dir`.
#[derive(Debug, Clone, Copy)]
enum Mutation {
    FlipByte {
        at: usize,
    },
    DropLine {
        line: usize,
    },
    SwapLines {
        line: usize,
    },
    CopyLine {
        line: usize,
    },
    /// Cut at the end of a line, keeping `lines` whole lines.
    CutAtLine {
        lines: usize,
    },
    /// Cut inside the last kept line.
    CutInLine {
        at: usize,
    },
    /// Append an event after `run_completed`, chained correctly.
    Forge,
    /// Edit an event's data and re-chain every later event.
    Rechain {
        line: usize,
    },
    /// The same, and rewrite the manifest to the forged head.
    RechainAndManifest {
        line: usize,
    },
    /// Remove the log.
    Delete,
    /// Add a log the run never wrote.
    AddLog,
}

fn rechained(log: &[u8], edit_line: usize) -> Vec<u8> {
    let mut w = LogWriter::new(Vec::new());
    for (i, line) in lines_of(log).iter().enumerate() {
        let e = parse_line(&line[..line.len() - 1]).expect("a line of a real log parses");
        let mut data = e.data.tree();
        if i == edit_line {
            data = serde_json::json!({"forged": true, "was": data});
        }
        w.append(e.turn, e.t, e.kind, data).expect("re-chain");
    }
    w.finish().expect("in memory").0
}

/// Apply `m` to `log` inside `dir`; returns what a check must name (the log's path).
fn apply(dir: &Path, log: &Path, m: Mutation) -> PathBuf {
    let bytes = std::fs::read(log).expect("read the log");
    let lines = lines_of(&bytes);
    let n = lines.len();
    let write = |b: Vec<u8>| std::fs::write(log, b).expect("write the log");
    match m {
        Mutation::FlipByte { at } => {
            let mut b = bytes.clone();
            let at = at % b.len();
            b[at] ^= 0x20;
            write(b);
        }
        Mutation::DropLine { line } => {
            let mut l = lines.clone();
            l.remove(line % n);
            write(l.concat());
        }
        Mutation::SwapLines { line } => {
            let mut l = lines.clone();
            let i = line % (n - 1);
            l.swap(i, i + 1);
            write(l.concat());
        }
        Mutation::CopyLine { line } => {
            let mut l = lines.clone();
            let i = line % n;
            l.insert(i, lines[(i + 1) % n].clone());
            write(l.concat());
        }
        Mutation::CutAtLine { lines: keep } => write(lines[..keep % n].concat()),
        Mutation::CutInLine { at } => {
            let at = 1 + at % (bytes.len() - 1);
            let at = if bytes[at - 1] == b'\n' { at - 1 } else { at };
            write(bytes[..at].to_vec());
        }
        Mutation::Forge => {
            let mut w = LogWriter::new(Vec::new());
            for line in &lines {
                let e = parse_line(&line[..line.len() - 1]).expect("parses");
                w.append_data(e.turn, e.t, e.kind, e.data);
            }
            w.append(None, 1, stateval::event::Kind::ToolExecuted, serde_json::json!({"name": "transfer"}))
                .expect("forge");
            write(w.finish().expect("in memory").0);
        }
        Mutation::Rechain { line } => write(rechained(&bytes, line % n)),
        Mutation::RechainAndManifest { line } => {
            let forged = rechained(&bytes, line % n);
            let head: Digest =
                parse_line(&lines_of(&forged)[n - 1][..]).map(|e| e.hash).unwrap_or_else(|e| panic!("{e}"));
            write(forged);
            let mut manifest = RunManifest::read(dir).expect("the manifest reads");
            let rel = log.strip_prefix(dir).expect("inside the run").to_string_lossy().replace('\\', "/");
            let entry: &mut LogEntry = manifest.logs.iter_mut().find(|e| e.path == rel).expect("listed");
            entry.head = Some(head);
            // a consistent forger rewrites the case outcome's head too (else `verify`
            // finds the outcome and the log disagree) and the verdict files' digests
            let cases_path = dir.join("cases.jsonl");
            let cases: Vec<String> = std::fs::read_to_string(&cases_path)
                .expect("cases")
                .lines()
                .map(|l| {
                    let mut case: serde_json::Value = serde_json::from_str(l).expect("a case outcome");
                    let id = case["id"].as_str().expect("id").to_string();
                    for run in case["runs"].as_array_mut().expect("runs") {
                        if format!("{id}/{}.jsonl", run["index"]) == rel {
                            run["head"] = serde_json::json!(head.to_string());
                        }
                    }
                    case.to_string()
                })
                .collect();
            std::fs::write(&cases_path, cases.join("\n") + "\n").expect("rewrite cases");
            for file in &mut manifest.files {
                *file = stateval::evidence::FileEntry::of(dir, &file.path).expect("entry");
            }
            manifest.write(dir).expect("rewrite the manifest");
        }
        Mutation::Delete => std::fs::remove_file(log).expect("delete"),
        Mutation::AddLog => {
            let extra = log.parent().expect("case dir").join("7.jsonl");
            std::fs::write(&extra, &bytes).expect("add a log");
            return extra;
        }
    }
    log.to_path_buf()
}

#[test]
fn every_mutation_of_a_run_is_caught_by_the_chain_the_manifest_or_the_root() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let (p, run_dir, root) = green_run();
    let dir = p.join(&run_dir);
    let root: Digest = root.parse().expect("a digest");
    let logs: Vec<PathBuf> = stateval::evidence::check::logs_in(&dir);
    let pristine: Vec<(PathBuf, Vec<u8>)> = logs
        .iter()
        .chain([&dir.join("manifest.json"), &dir.join("cases.jsonl")])
        .map(|f| (f.clone(), std::fs::read(f).expect("read")))
        .collect();
    let with_root = CheckOptions { root: Some(root), ..CheckOptions::default() };
    assert!(check_run(&dir, &with_root).passed(), "the untouched run verifies");

    let mutation = prop_oneof![
        any::<usize>().prop_map(|at| Mutation::FlipByte { at }),
        any::<usize>().prop_map(|line| Mutation::DropLine { line }),
        any::<usize>().prop_map(|line| Mutation::SwapLines { line }),
        any::<usize>().prop_map(|line| Mutation::CopyLine { line }),
        any::<usize>().prop_map(|lines| Mutation::CutAtLine { lines }),
        any::<usize>().prop_map(|at| Mutation::CutInLine { at }),
        Just(Mutation::Forge),
        any::<usize>().prop_map(|line| Mutation::Rechain { line }),
        any::<usize>().prop_map(|line| Mutation::RechainAndManifest { line }),
        Just(Mutation::Delete),
        Just(Mutation::AddLog),
    ];
    let mut runner = TestRunner::new(Config { cases: 300, failure_persistence: None, ..Config::default() });
    runner
        .run(&(0..logs.len(), mutation), |(which, m)| {
            let named = apply(&dir, &logs[which], m);
            let check = check_run(&dir, &with_root);
            let without_root = check_run(&dir, &CheckOptions::default());
            // restore before asserting, so one failure does not cascade
            for (path, bytes) in &pristine {
                std::fs::write(path, bytes).expect("restore");
            }
            if matches!(m, Mutation::AddLog) {
                std::fs::remove_file(&named).expect("remove the added log");
            }
            prop_assert!(!check.passed(), "{m:?} on {} was not caught", named.display());
            let first = &check.findings[0];
            if let Mutation::RechainAndManifest { .. } = m {
                // the logs and manifest agree: only the archived root can tell
                prop_assert!(first.subject.ends_with("manifest.json"), "{m:?}: {first}");
                prop_assert!(first.problem.contains("the archived report's is"), "{m:?}: {first}");
                // documented: without a root or a key, a consistent forgery verifies —
                // unless it changed what the case outcome derives from the log (its
                // run_completed status), which `verify` checks against cases.jsonl
                let only_outcome = without_root
                    .findings
                    .iter()
                    .all(|f| f.subject.ends_with("cases.jsonl") && f.problem.contains("but its log ends with status"));
                prop_assert!(only_outcome, "{m:?}: {:?}", without_root.findings);
            } else {
                prop_assert!(!without_root.passed(), "{m:?}: caught without the root too");
                prop_assert_eq!(&first.subject, &named, "{:?}: the first finding names the log: {}", m, first);
            }
            Ok(())
        })
        .expect("every mutation is caught");
}

#[test]
fn a_rechained_log_with_its_manifest_rewritten_fails_only_against_the_archived_root_or_the_signature() {
    let p = Project::new();
    let keygen = p.stateval(&["keygen", "-o", "keys/ci"]);
    keygen.expect_code(0);
    assert!(p.read("keys/ci.key").starts_with("stateval-ed25519-secret:"));
    let mut cmd = p.cmd();
    cmd.args(["run"]).env("STATEVAL_SIGNING_KEY", p.join("keys/ci.key"));
    let out = cmd.output().expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = p.run_ids();
    let run_dir = format!(".stateval/runs/{}", runs[0]);
    let root = p.json("reports/report.json")["root"].as_str().expect("root").to_string();
    let signature = p.read_bytes(format!("{run_dir}/manifest.sig"));

    let ok = p.stateval(&["verify", &run_dir, "--root", &root, "--pubkey", "keys/ci.pub"]);
    ok.expect_code(0);
    assert!(ok.stdout.contains("signature by stateval-ed25519-public:"), "{}", ok.stdout);

    // a forger rewrites one log and the manifest to match
    let dir = p.join(&run_dir);
    let log = stateval::evidence::check::logs_in(&dir).remove(3);
    apply(&dir, &log, Mutation::RechainAndManifest { line: 4 });
    p.stateval(&["verify", &run_dir]).expect_code(0);
    let by_root = p.stateval(&["verify", &run_dir, "--root", &root]);
    by_root.expect_code(1);
    assert!(by_root.stderr.contains("the manifest was rewritten"), "{}", by_root.stderr);
    let by_key = p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]);
    by_key.expect_code(1);
    assert!(by_key.stderr.contains("manifest.sig: the signature does not verify"), "{}", by_key.stderr);

    // another key's signature is no signature; an unsigned run is refused under --pubkey
    p.stateval(&["keygen", "-o", "keys/other"]).expect_code(0);
    p.stateval(&["verify", &run_dir, "--pubkey", "keys/other.pub"]).expect_code(1);
    let again = p.cmd().args(["run"]).env("STATEVAL_SIGNING_KEY", p.join("keys/ci.key")).output().expect("rerun");
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(p.read_bytes(format!("{run_dir}/manifest.sig")), signature, "signing is deterministic");
    p.stateval(&["run"]).expect_code(0);
    let unsigned = p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]);
    unsigned.expect_code(1);
    assert!(unsigned.stderr.contains("this run was not signed"), "{}", unsigned.stderr);
}

#[test]
fn a_bad_signing_key_is_refused_before_anything_runs() {
    let p = Project::new();
    let out = p.cmd().args(["run"]).env("STATEVAL_SIGNING_KEY", "keys/none.key").output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("STATEVAL_SIGNING_KEY: neither a key"), "{stderr}");
    assert!(p.run_ids().is_empty(), "nothing ran");
    p.stateval(&["keygen", "-o", "k"]).expect_code(0);
    let again = p.stateval(&["keygen", "-o", "k"]);
    again.expect_code(2);
    assert!(again.stderr.contains("k.key exists; pass --force"), "{}", again.stderr);
}

/// Reports that name a root must name a run that finished and verifies against it.
fn assert_no_stale_report(p: &Project, round: usize) {
    let Some(root) = p.exists("reports/report.json").then(|| p.json("reports/report.json")["root"].clone()) else {
        for report in ["reports/junit.xml", "reports/results.tap", "reports/summary.md", "reports/report.html"] {
            assert!(!p.exists(report), "round {round}: {report} outlived report.json");
        }
        return;
    };
    let root = root.as_str().expect("root").to_string();
    let finished: Vec<String> = p
        .run_ids()
        .into_iter()
        .filter(|id| !id.starts_with('.') && p.exists(format!(".stateval/runs/{id}/manifest.json")))
        .collect();
    let anchored =
        finished.iter().any(|id| p.stateval(&["verify", &format!(".stateval/runs/{id}"), "--root", &root]).code == 0);
    assert!(anchored, "round {round}: a report names root {root}, which no finished run on disk has");
}

/// sled rewrites its catalog's small config file as it opens, and a process killed in
/// that moment leaves a torn one that sled then refuses for good ("Read corrupted data":
/// the kill test below met it once in CI). The catalog is an index of the run files:
/// every command that opens it sets an unreadable one aside and rebuilds it, and says so.
#[test]
fn a_catalog_sled_cannot_read_is_set_aside_and_rebuilt_from_the_runs() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let run = p.run_ids().into_iter().find(|id| !id.starts_with('.')).expect("a run");
    // the config as a kill in the middle of its rewrite leaves it: its first line only
    let torn = |p: &Project| std::fs::write(p.path().join(".stateval/catalog/conf"), "segment_size: 524288\n").unwrap();
    torn(&p);
    let reindex = p.stateval(&["reindex"]);
    assert_eq!(reindex.code, 0, "{}", reindex.stderr);
    assert!(reindex.stderr.contains("the catalog could not be read"), "{}", reindex.stderr);
    assert!(reindex.stderr.contains("catalog.unreadable-1"), "{}", reindex.stderr);
    assert!(reindex.stdout.contains("1 runs"), "{}", reindex.stdout);
    assert!(p.exists(".stateval/catalog.unreadable-1/conf"), "the unreadable catalog is kept");
    // a run meets it too, rebuilds, and goes on; the earlier run is still verified
    torn(&p);
    let again = p.stateval(&["run"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stderr.contains("catalog.unreadable-2"), "{}", again.stderr);
    p.stateval(&["verify", &format!(".stateval/runs/{run}")]).expect_code(0);
    // and the rebuilt catalog opens cleanly next time
    let quiet = p.stateval(&["reindex"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("could not be read"), "{}", quiet.stderr);
}

#[test]
fn no_kill_at_any_moment_leaves_a_torn_log_or_a_stale_report() {
    use std::os::unix::process::ExitStatusExt;
    let p = Project::new();
    let started = std::time::Instant::now();
    p.stateval(&["run"]).expect_code(0);
    // moments spread over one whole run, from loading to writing reports
    let whole = started.elapsed();
    let signals =
        [nix::sys::signal::Signal::SIGKILL, nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGINT];
    // the first moments, before the datasets are even read: held there (the pipeline
    // file just parsed) and killed, the green run's reports must already be gone
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("stateval"))
        .current_dir(p.path())
        .args(["run", "--jobs", "2"])
        .env("NO_COLOR", "1")
        .env_remove("CI")
        .env("STATEVAL_TEST_PAUSE_AT", "loading")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn a run");
    let mut marker = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(first.stderr.take().expect("piped")), &mut marker)
        .expect("read stderr");
    assert_eq!(marker.trim_end(), "stateval: paused at loading");
    first.kill().expect("SIGKILL");
    first.wait().expect("reap");
    for report in common::CI_REPORTS {
        assert!(!p.exists(report), "{report} outlived a run killed as it loaded");
    }
    let mut interrupted = 0;
    for round in 0..12usize {
        let delay = whole.mul_f64(((round * 7) % 12) as f64 / 14.0);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("stateval"))
            .current_dir(p.path())
            .args(["run", "--jobs", "2"])
            .env("NO_COLOR", "1")
            .env_remove("CI")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a run");
        std::thread::sleep(delay);
        let signal = signals[round % signals.len()];
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal);
        let status = child.wait().expect("reap");
        let how = (status.code(), status.signal());
        interrupted += usize::from(how != (Some(0), None));
        assert!(
            matches!(how, (Some(0), None) | (Some(130), None) | (None, Some(_))),
            "round {round}: {signal}: the run ended {status}"
        );
        assert_no_stale_report(&p, round);
        // a torn tail is cut (a warning), never a failure; everything left is a valid prefix
        let reindex = p.stateval(&["reindex"]);
        assert_eq!(reindex.code, 0, "round {round}: {}", reindex.stderr);
        for id in p.run_ids().into_iter().filter(|id| !id.starts_with('.')) {
            p.stateval(&["verify", "--allow-incomplete", &format!(".stateval/runs/{id}")]).expect_code(0);
        }
    }
    assert!(
        interrupted >= 4,
        "rounds must catch the run before it finished: {interrupted} of 12 (a run takes {whole:?})"
    );
    // and a rerun after all that is clean
    p.stateval(&["run"]).expect_code(0);
    let runs: Vec<String> = p.run_ids().into_iter().filter(|id| !id.starts_with('.')).collect();
    let root = p.json("reports/report.json")["root"].as_str().expect("root").to_string();
    p.stateval(&["verify", &format!(".stateval/runs/{}", runs[0]), "--root", &root]).expect_code(0);
}

#[test]
fn reindex_cuts_a_torn_tail_and_names_tampered_logs_and_repair_moves_them_aside() {
    let (p, run_dir, _) = green_run();
    let dir = p.join(&run_dir);
    let logs = stateval::evidence::check::logs_in(&dir);

    // a torn tail, as a kill in mid-write leaves it in an unfinished run
    std::fs::remove_file(dir.join("manifest.json")).expect("unfinish the run");
    let whole = std::fs::read(&logs[0]).expect("read");
    let torn = [&whole[..], b"{\"data\":{\"par"].concat();
    std::fs::write(&logs[0], &torn).expect("tear");
    let out = p.stateval(&["reindex"]);
    out.expect_code(0);
    assert!(out.stderr.contains("a torn last line (13 bytes) was cut off"), "{}", out.stderr);
    assert_eq!(std::fs::read(&logs[0]).expect("read"), whole, "exactly the torn bytes were cut");

    // a finished run with a re-chained log
    p.stateval(&["run"]).expect_code(0);
    apply(&dir, &logs[2], Mutation::Rechain { line: 3 });
    let out = p.stateval(&["reindex"]);
    out.expect_code(1);
    let rel = logs[2].strip_prefix(p.join(".stateval")).expect("in the store").to_string_lossy().into_owned();
    assert!(out.stderr.contains(&format!("FAILED {rel}: head ")), "{}", out.stderr);
    let out = p.stateval(&["reindex", "--repair"]);
    out.expect_code(1);
    assert!(p.exists(format!(".stateval/quarantine/{}", rel.trim_start_matches("runs/"))), "{}", out.stderr);
    assert!(!logs[2].exists(), "moved, not copied");
}

#[test]
fn verify_allow_incomplete_leaves_out_the_torn_last_line_of_a_killed_run_and_names_it() {
    let (p, run_dir, _) = green_run();
    let dir = p.join(&run_dir);
    let logs = stateval::evidence::check::logs_in(&dir);
    std::fs::remove_file(dir.join("manifest.json")).expect("unfinish the run");
    let log = &logs[0];
    let rel = log.strip_prefix(p.path()).expect("in the project").to_string_lossy().into_owned();
    let whole = std::fs::read(log).expect("read");
    // what a kill leaves: whole lines up to a turn, then part of the next write
    let lines: Vec<&[u8]> = whole.split_inclusive(|&b| b == b'\n').collect();
    let kept = lines.len() - 1;
    let torn = [lines[..kept].concat(), b"{\"data\":{\"par".to_vec()].concat();
    std::fs::write(log, &torn).expect("tear");

    let out = p.stateval(&["verify", &rel]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!("FAILED {rel}:{}: event seq {kept}: truncated line", kept + 1)),
        "without --allow-incomplete a torn line fails: {}",
        out.stderr
    );
    let out = p.stateval(&["verify", "--allow-incomplete", &rel]);
    out.expect_code(0);
    assert!(
        out.stdout.starts_with(&format!("ok {rel}: {kept} events, head "))
            && out.stdout.contains("(incomplete: no run_completed; a torn last line of 13 bytes left out"),
        "{}",
        out.stdout
    );
    let out = p.stateval(&["verify", "--allow-incomplete", &run_dir]);
    out.expect_code(0);
    assert!(out.stdout.contains("1 torn last line(s) left out"), "{}", out.stdout);

    // bytes after run_completed are no torn write: nothing follows the end of a run
    std::fs::write(log, [&whole[..], b"{\"data\":{\"par"].concat()).expect("append");
    let out = p.stateval(&["verify", "--allow-incomplete", &rel]);
    out.expect_code(1);
    assert!(out.stderr.contains("bytes after run_completed"), "{}", out.stderr);
}
