//! Sharded runs end to end: the commands of each scale-out example (GitHub Actions,
//! GitLab, a Kubernetes Indexed Job) run as separate processes, in separate copies of
//! the project, with the environment each engine sets; the merge's reports are
//! byte-identical to one unsharded run, and the sign step, given the root the merge
//! printed and nothing else of it, signs the merged run. And every refusal of `merge`,
//! unit named.

mod common;

use std::path::Path;

use common::{CI_REPORTS, Project, copy_dir};

const SHARDS: usize = 4;

/// Every variable `--shard-from-env` reads: cleared, so the machine running the tests
/// (a CI job of one of these engines) cannot choose the shard instead of the test.
const ENGINE_VARS: [&str; 7] = [
    "STATEVAL_SHARD",
    "CI_NODE_INDEX",
    "CI_NODE_TOTAL",
    "BUILDKITE_PARALLEL_JOB",
    "BUILDKITE_PARALLEL_JOB_COUNT",
    "JOB_COMPLETION_INDEX",
    "STATEVAL_SHARD_TOTAL",
];

/// The `stateval …` commands of an example file, in order: each sits on one line and
/// runs to its end (or to the closing quote of a container command). A step that uses
/// the stateval GitHub Action becomes the command the action runs: its own script,
/// `action/run.sh`, with the step's inputs.
fn commands(example: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("examples/scale-out").join(example)).expect("read the example");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    let mut commands = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        if l.contains("uses:") && l.contains("/stateval@") {
            let with =
                lines.get(n + 1).and_then(|w| w.trim().strip_prefix("with:")).expect("the action's `with:` line");
            commands.push(action_command(with));
        } else if let Some(at) =
            ["stateval plan", "stateval run", "stateval merge", "stateval sign"].iter().find_map(|c| l.find(c))
        {
            commands.push(l[at..].trim_end().trim_end_matches(']').trim_end_matches('"').to_string());
        }
    }
    commands
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command line the action runs for a step's `with: { k: v, … }` (one flow mapping
/// on one line): `action/run.sh` with each input as its INPUT_* variable. The matrix
/// index is read from `MATRIX_SHARD`, which the test sets per job. `INPUT_COMMAND`
/// always leads (the action's default is `run`), so [`is`] sorts the line.
fn action_command(with: &str) -> String {
    let body = with.trim().strip_prefix('{').and_then(|b| b.strip_suffix('}')).expect("a flow mapping");
    let mut vars = vec![format!("INPUT_COMMAND=\"run\"")];
    for pair in body.split(',') {
        let (key, value) = pair.split_once(':').expect("key: value");
        let value = value.trim().trim_matches('"').replace("${{ matrix.shard }}", "$MATRIX_SHARD");
        match key.trim() {
            "command" => vars[0] = format!("INPUT_COMMAND=\"{value}\""),
            "version" => {} // installing is the engine's part; the test's binary is on PATH
            key => vars.push(format!("INPUT_{}=\"{value}\"", key.to_uppercase().replace('-', "_"))),
        }
    }
    format!("{} bash '{}'", vars.join(" "), repo().join("action/run.sh").display())
}

/// Is `line` the example's `stateval <command>`, literal or through the action?
fn is(line: &str, command: &str) -> bool {
    line.starts_with(&format!("stateval {command}")) || line.starts_with(&format!("INPUT_COMMAND=\"{command}\""))
}

/// Run a command line of an example through `sh`, as the engine would, with the built
/// binary first on `PATH`.
fn sh(p: &Project, line: &str, env: &[(String, String)]) -> common::Outcome {
    let bin = assert_cmd::cargo::cargo_bin("stateval");
    let path = format!("{}:{}", bin.parent().expect("bin dir").display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", line]).current_dir(p.path()).env("PATH", path).env("NO_COLOR", "1").env_remove("CI");
    for var in ENGINE_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run sh");
    common::Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// One engine: its example, the environment of shard `i` (1-based), where a shard's
/// output is in its job and where the merge job finds it.
struct Engine {
    example: &'static str,
    env: fn(usize) -> Vec<(String, String)>,
    output: fn(usize) -> (String, String),
}

fn unsharded_reports() -> Vec<Vec<u8>> {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    CI_REPORTS.iter().map(|r| p.read_bytes(r)).collect()
}

fn run_engine(engine: &Engine, expected: &[Vec<u8>]) {
    let lines = commands(engine.example);
    let plan_lines: Vec<&String> = lines.iter().filter(|l| is(l, "plan")).collect();
    let shard_lines: Vec<&String> = lines.iter().filter(|l| is(l, "run")).collect();
    let merge_lines: Vec<&String> = lines.iter().filter(|l| is(l, "merge")).collect();
    let sign_lines: Vec<&String> = lines.iter().filter(|l| is(l, "sign")).collect();
    assert!(
        !shard_lines.is_empty() && !merge_lines.is_empty() && !sign_lines.is_empty(),
        "{}: {lines:?}",
        engine.example
    );

    // where the plan is written (`-o FILE`; the action's default is plan.json), and
    // where each job's download of it puts it
    let plan_file = plan_lines
        .iter()
        .find_map(|l| l.split_whitespace().skip_while(|w| *w != "-o").nth(1))
        .unwrap_or("plan.json")
        .to_string();
    let planner = Project::new();
    for line in &plan_lines {
        sh(&planner, line, &[]).expect_code(0);
    }
    let merger = Project::new();
    for i in 1..=SHARDS {
        let job = Project::new(); // a fresh checkout per job
        if !plan_lines.is_empty() {
            job.write(&plan_file, planner.read_bytes(&plan_file));
        }
        for line in &shard_lines {
            let out = sh(&job, line, &(engine.env)(i));
            out.expect_code(0);
            assert!(out.stdout.contains(&format!("shard hash:{i}/{SHARDS} from ")), "{}", out.stdout);
        }
        let (from, to) = (engine.output)(i);
        copy_dir(&job.join(from), &merger.join(to));
    }
    if !plan_lines.is_empty() {
        merger.write(&plan_file, planner.read_bytes(&plan_file));
    }
    // the merge job has no key (the action refuses one); GitHub's step outputs go to
    // the file GITHUB_OUTPUT names
    let outputs = merger.join("github-output");
    for line in &merge_lines {
        let out = sh(&merger, line, &env(&[("GITHUB_OUTPUT", outputs.display().to_string())]));
        out.expect_code(0);
        assert!(out.stdout.contains("merge: taking over unsigned shards"), "{}", out.stdout);
    }
    for (report, bytes) in CI_REPORTS.iter().zip(expected) {
        assert!(merger.read_bytes(report) == *bytes, "{}: {report} differs from the unsharded run's", engine.example);
    }
    sign_merged(engine, &merger, &sign_lines);
}

/// The example's sign step, with a key, where its engine runs it: GitHub and GitLab in
/// a job of their own that receives the merged store and the root the merge job
/// output (a step output, a dotenv file), Kubernetes on the shared volume. Exactly one
/// run ends up signed, and it verifies with the public key.
fn sign_merged(engine: &Engine, merger: &Project, sign_lines: &[&String]) {
    let keys = Project::empty();
    sh(&keys, "stateval keygen -o ci", &[]).expect_code(0);
    let mut vars = env(&[("STATEVAL_SIGNING_KEY", keys.join("ci.key").display().to_string())]);
    let output = |file: &str, name: &str| {
        let text = merger.read(file);
        let line = text.lines().rev().find_map(|l| l.strip_prefix(&format!("{name}=")));
        line.unwrap_or_else(|| panic!("{}: no {name} in {file}: {text}", engine.example)).to_string()
    };
    let mut lines: Vec<String> = sign_lines.iter().map(|l| l.to_string()).collect();
    // a job of its own (None: the merge's own volume)
    let job = match engine.example {
        "github-actions.yml" => {
            let root = output("github-output", "root");
            lines = lines.iter().map(|l| l.replace("${{ needs.merge.outputs.root }}", &root)).collect();
            Some(Project::empty())
        }
        "gitlab-ci.yml" => {
            vars.extend(env(&[("STATEVAL_ROOT", output("root.env", "STATEVAL_ROOT"))]));
            Some(Project::empty())
        }
        _ => None,
    };
    if let Some(job) = &job {
        // the artifact the job downloads: the merged store, and nothing of the project
        copy_dir(&merger.join(".stateval"), &job.join(".stateval"));
    }
    let signer = job.as_ref().unwrap_or(merger);
    for line in &lines {
        let out = sh(signer, line, &vars);
        out.expect_code(0);
        assert!(out.stdout.starts_with("signed "), "{}: {}", engine.example, out.stdout);
    }
    let signed: Vec<std::path::PathBuf> =
        common::files_in(signer.path()).into_iter().filter(|p| p.ends_with("manifest.sig")).collect();
    assert_eq!(signed.len(), 1, "{}: {signed:?}", engine.example);
    let run = signed[0].parent().expect("the run directory");
    let pubkey = keys.join("ci.pub");
    let verified = sh(signer, &format!("stateval verify '{}' --pubkey '{}'", run.display(), pubkey.display()), &[]);
    verified.expect_code(0);
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn every_scale_out_example_merges_to_the_reports_of_one_unsharded_run() {
    let expected = unsharded_reports();
    let engines = [
        Engine {
            example: "github-actions.yml",
            env: |i| env(&[("MATRIX_SHARD", i.to_string())]),
            // the action's defaults: `out`, and `shards` with the artifacts' names
            output: |i| ("stateval-out".into(), format!("stateval-shards/stateval-shard-{i}-of-{SHARDS}")),
        },
        Engine {
            example: "gitlab-ci.yml",
            env: |i| env(&[("CI_NODE_INDEX", i.to_string()), ("CI_NODE_TOTAL", SHARDS.to_string())]),
            output: |i| (format!("shard-out/{i}"), format!("shard-out/{i}")),
        },
        Engine {
            example: "kubernetes.yaml",
            env: |i| {
                env(&[("JOB_COMPLETION_INDEX", (i - 1).to_string()), ("STATEVAL_SHARD_TOTAL", SHARDS.to_string())])
            },
            output: |i| (format!("shards/{}", i - 1), format!("shards/{}", i - 1)),
        },
    ];
    for engine in &engines {
        run_engine(engine, &expected);
    }
}

/// A project with the four `slice` shards run into `shards/1..4`.
fn sharded() -> Project {
    let p = Project::new();
    for i in 1..=SHARDS {
        p.stateval(&["run", "--shard", &format!("slice:{i}/{SHARDS}"), "--out", &format!("shards/{i}")]).expect_code(0);
    }
    p
}

fn shard_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend((1..=SHARDS).map(|i| format!("shards/{i}")));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn merge(p: &Project, args: &[String]) -> common::Outcome {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    p.stateval(&args)
}

/// The one run directory under a shard output.
fn run_dir_of(p: &Project, shard: usize) -> String {
    let runs = p.join(format!("shards/{shard}/runs"));
    let name = std::fs::read_dir(&runs).expect("runs").next().expect("a run").expect("entry").file_name();
    format!("shards/{shard}/runs/{}", name.to_string_lossy())
}

#[test]
fn a_retried_shard_is_deduplicated_and_a_missing_one_is_refused_naming_the_shard() {
    let p = sharded();
    // shard 2 uploaded twice (a retried pod): identical heads, merged once
    let mut args = shard_args(&[]);
    args.push("shards/2".into());
    merge(&p, &args).expect_code(0);

    let out = merge(&p, &args[..args.len() - 2]); // shards 1..3 only
    out.expect_code(2);
    assert!(
        out.stderr.contains("error: shard slice:4/4 is missing: 3 of 4 shard outputs were given"),
        "{}",
        out.stderr
    );
    let out = merge(&p, &["merge".to_string(), "shards/2".to_string()]);
    out.expect_code(2);
    assert!(out.stderr.contains("error: shards slice:1/4, slice:3/4, slice:4/4 are missing"), "{}", out.stderr);
}

/// A refused merge leaves the run merged before it (the same plan's run id) exactly as it
/// was, and nothing else under `runs/`.
#[test]
fn a_refused_merge_leaves_the_run_merged_before_it_whole() {
    let p = sharded();
    let args = shard_args(&[]);
    merge(&p, &args).expect_code(0);
    let runs = p.run_ids();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let before = p.snapshot(".stateval/runs");

    merge(&p, &args[..args.len() - 1]).expect_code(2); // shard 4 missing
    assert_eq!(p.run_ids(), runs, "a refused merge left a directory behind");
    let after = p.snapshot(".stateval/runs");
    assert!(common::differing(&before, &after).is_empty(), "{:?}", common::differing(&before, &after));
    p.stateval(&["verify", &format!(".stateval/runs/{}", runs[0])]).expect_code(0);

    // merged again, the run is the same
    merge(&p, &args).expect_code(0);
    assert_eq!(p.run_ids(), runs);
    assert!(common::differing(&before, &p.snapshot(".stateval/runs")).is_empty());
}

/// Reports that cannot be written fail the merge (exit 2, naming the report), but the
/// merged run is finished all the same, as a single run's is: it verifies, and its
/// reports can be rendered again once the path is mended.
#[test]
fn a_merge_whose_reports_cannot_be_written_still_finishes_its_run() {
    let p = sharded();
    p.write("reports", "not a directory");
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains("./reports: cannot create the directory: "), "{}", out.stderr);
    let runs = p.run_ids();
    assert_eq!(runs.len(), 1, "{runs:?}");
    p.stateval(&["verify", &format!(".stateval/runs/{}", runs[0])]).expect_code(0);
}

#[test]
fn a_shard_of_another_plan_or_one_that_does_not_verify_is_refused() {
    let p = sharded();
    // the inputs change after the shards ran
    p.stateval(&["plan", "-o", "before.json"]).expect_code(0);
    let ci = p.read("pipeline/ci.toml");
    p.write("pipeline/ci.toml", format!("{ci}\n# edited\n"));
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains("error: shards/1/runs/"), "names the shard's directory: {}", out.stderr);
    assert!(out.stderr.contains(": shard slice:1/4 ran against plan blake3:"), "{}", out.stderr);
    assert!(out.stderr.contains("no case changed: the pipeline file"), "{}", out.stderr);
    let out = merge(&p, &shard_args(&["--plan", "before.json"]));
    out.expect_code(2);
    assert!(out.stderr.contains("the inputs changed since `stateval plan`"), "{}", out.stderr);
    p.write("pipeline/ci.toml", ci);

    // a case edited after the plan: the mismatch names it and its dataset
    let dataset = "datasets/examples/treasury.jsonl";
    let text = p.read(dataset);
    let first = text.lines().next().expect("a case").to_string();
    let id = serde_json::from_str::<serde_json::Value>(&first).expect("case")["id"].as_str().expect("id").to_string();
    p.write(dataset, text.replacen(&first, &first.replacen("\"tags\":[", "\"tags\":[\"edited\",", 1), 1));
    let out = p.stateval(&["run", "--plan", "before.json"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains(&format!("error:   case {id} (examples/treasury): changed (its dataset line")),
        "{}",
        out.stderr
    );
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("case {id} (examples/treasury): changed")), "{}", out.stderr);
    p.write(dataset, text);

    // a log changed after the shard ran
    let dir = run_dir_of(&p, 3);
    let log = stateval::evidence::check::logs_in(&p.join(&dir)).remove(0);
    let text = std::fs::read_to_string(&log).expect("read").replacen("\"turn\":0", "\"turn\":1", 1);
    std::fs::write(&log, text).expect("write");
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains(&format!("{dir}: does not verify: ")), "{}", out.stderr);
}

/// A merge takes the recordings its shards validated on the digests of their bytes; a
/// recording edited after the shards ran has other bytes, so it is validated again and
/// the merge refuses.
#[test]
fn a_recording_edited_after_the_shards_ran_is_validated_again_and_refused() {
    let p = sharded();
    let units = p.read(format!("{}/units.jsonl", run_dir_of(&p, 1)));
    assert!(units.lines().all(|l| l.contains("\"recording\":{\"bytes\":\"blake3:")), "{units}");

    let path = "fixtures/recordings/balance-check.jsonl";
    let text = p.read(path);
    p.write(path, text.replacen("$1,250", "$1,260", 1));
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains("ran against plan blake3:"), "{}", out.stderr);

    p.write(path, text.replacen("\"latency_ms\"", "\"latncy_ms\"", 1));
    let out = merge(&p, &shard_args(&[]));
    out.expect_code(2);
    assert!(out.stderr.contains("balance-check.jsonl:1:"), "{}", out.stderr);
    assert!(out.stderr.contains("did you mean \"latency_ms\""), "{}", out.stderr);

    p.write(path, text);
    merge(&p, &shard_args(&[])).expect_code(0);
}

#[test]
fn one_unit_with_two_different_heads_is_refused() {
    use stateval::evidence::RunManifest;
    use stateval::runner::shard::UnitRecord;
    let p = sharded();
    // a copy of shard 1 whose first log differs (re-chained, with its own manifest and
    // units agreeing): it verifies alone, but the same unit now has two results
    copy_dir(&p.join("shards/1"), &p.join("shards/1b"));
    let dir = p.join(run_dir_of(&p, 1).replace("shards/1/", "shards/1b/"));
    let log = stateval::evidence::check::logs_in(&dir).remove(0);
    let mut writer = stateval::event::writer::LogWriter::new(Vec::new());
    for line in std::fs::read_to_string(&log).expect("read").lines() {
        let e = stateval::event::verify::parse_line(line.as_bytes()).expect("parse");
        let data = if e.seq == 1 { serde_json::json!({"changed": true}) } else { e.data.tree() };
        writer.append(e.turn, e.t, e.kind, data).expect("append");
    }
    let (bytes, head) = writer.finish().expect("finish");
    std::fs::write(&log, bytes).expect("write");
    let rel = log.strip_prefix(&dir).expect("in the run").to_string_lossy().into_owned();
    let mut manifest = RunManifest::read(&dir).expect("manifest");
    manifest.logs.iter_mut().filter(|l| l.path == rel).for_each(|l| l.head = head);
    manifest.write(&dir).expect("rewrite");
    let units_path = dir.join("units.jsonl");
    let units: Vec<String> = std::fs::read_to_string(&units_path)
        .expect("units")
        .lines()
        .map(|l| {
            let mut u: UnitRecord = serde_json::from_str(l).expect("unit");
            if format!("{}/{}.jsonl", u.case, u.k) == rel {
                u.head = head;
            }
            serde_json::to_string(&u).expect("json")
        })
        .collect();
    std::fs::write(&units_path, units.join("\n") + "\n").expect("write units");
    // the case outcome names the log's head too, and the manifest lists both files
    let cases_path = dir.join("cases.jsonl");
    let cases: Vec<String> = std::fs::read_to_string(&cases_path)
        .expect("cases")
        .lines()
        .map(|l| {
            let mut case: serde_json::Value = serde_json::from_str(l).expect("case");
            let id = case["id"].as_str().expect("id").to_string();
            for run in case["runs"].as_array_mut().expect("runs") {
                if format!("{id}/{}.jsonl", run["index"]) == rel {
                    run["head"] = serde_json::json!(head.map(|h| h.to_string()));
                }
            }
            case.to_string()
        })
        .collect();
    std::fs::write(&cases_path, cases.join("\n") + "\n").expect("write cases");
    for file in &mut manifest.files {
        *file = stateval::evidence::FileEntry::of(&dir, &file.path).expect("entry");
    }
    manifest.write(&dir).expect("rewrite");
    let alone = stateval::evidence::check_run(&dir, &Default::default());
    assert!(alone.passed(), "the forged shard verifies alone: {:?}", alone.findings);

    let mut args = shard_args(&[]);
    args.push("shards/1b".into());
    let out = merge(&p, &args);
    out.expect_code(2);
    assert!(out.stderr.contains("with different log heads"), "{}", out.stderr);
}

#[test]
fn shard_flags_are_checked_before_anything_runs() {
    let p = Project::new();
    for (flag, why) in [("hash:0/4", "1 ≤ I ≤ N"), ("mod:1/2", "hash:I/N or slice:I/N"), ("hash:5/4", "1 ≤ I ≤ N")]
    {
        let out = p.stateval(&["run", "--shard", flag]);
        out.expect_code(2);
        assert!(out.stderr.contains(why), "{flag}: {}", out.stderr);
    }
    let from_env = |pairs: &[(&str, &str)]| {
        let mut cmd = p.cmd();
        cmd.args(["run", "--shard-from-env"]);
        for var in ENGINE_VARS {
            cmd.env_remove(var);
        }
        cmd.envs(pairs.iter().copied()).output().expect("run")
    };
    let out = from_env(&[]);
    assert_eq!(out.status.code(), Some(2));
    let out = from_env(&[("JOB_COMPLETION_INDEX", "1")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("STATEVAL_SHARD_TOTAL"));
    // half of an engine's pair: named, exit 2, before anything runs
    for (set, missing) in
        [("CI_NODE_INDEX", "CI_NODE_TOTAL"), ("BUILDKITE_PARALLEL_JOB_COUNT", "BUILDKITE_PARALLEL_JOB")]
    {
        let out = from_env(&[(set, "2")]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{set} is set")) && stderr.contains(&format!("but {missing} is not")),
            "{stderr}"
        );
    }
    assert!(p.run_ids().is_empty(), "nothing ran");
}

#[test]
fn reuse_skips_unchanged_units_and_gives_the_reports_of_a_fresh_run() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    // one case changes (its line, hence its unit ids); the others do not
    let dataset = "datasets/examples/treasury.jsonl";
    let text = p.read(dataset);
    let first = text.lines().next().expect("a case").to_string();
    let edited = first.replacen("\"tags\":[", "\"tags\":[\"edited\",", 1);
    assert_ne!(first, edited, "the first case has tags");
    p.write(dataset, text.replacen(&first, &edited, 1));
    // the earlier store set aside, so the new one holds only the run that reuses it
    std::fs::rename(p.join(".stateval"), p.join("earlier")).expect("set the earlier store aside");

    let out = p.stateval(&["run", "--reuse", "earlier"]);
    out.expect_code(0);
    let cases = p.json("reports/report.json")["cases"].as_array().map(Vec::len).unwrap_or_default();
    assert!(out.stdout.contains(&format!("reused {} of {cases} cases from earlier", cases - 1)), "{}", out.stdout);
    let reused: Vec<Vec<u8>> = CI_REPORTS.iter().map(|r| p.read_bytes(r)).collect();
    // the same inputs, replayed from scratch
    let fresh = Project::new();
    fresh.write(dataset, p.read(dataset));
    fresh.stateval(&["run"]).expect_code(0);
    for (report, bytes) in CI_REPORTS.iter().zip(&reused) {
        assert!(fresh.read_bytes(report) == *bytes, "{report} differs from a fresh run's");
    }
    // reused logs are copied whole and catalogued as the fresh run catalogues its own
    assert_eq!(catalog_logs(&p, ".stateval"), catalog_logs(&fresh, ".stateval"));
    for log in fresh.log_files() {
        assert!(p.read_bytes(&log) == fresh.read_bytes(&log), "{log} differs from the fresh run's");
    }
}

#[test]
fn reuse_right_after_an_identical_run_takes_every_case_over_and_says_why_it_replays_one() {
    let p = Project::new();
    p.stateval(&["run"]).expect_code(0);
    let before: Vec<Vec<u8>> = CI_REPORTS.iter().map(|r| p.read_bytes(r)).collect();
    let cases = p.json("reports/report.json")["cases"].as_array().map(Vec::len).unwrap_or_default();
    // the same inputs, the same store: the run it replaces is the one it reuses
    let out = p.stateval(&["run", "--reuse", ".stateval"]);
    out.expect_code(0);
    assert!(out.stdout.contains(&format!("reused {cases} of {cases} cases from .stateval\n")), "{}", out.stdout);
    for (report, bytes) in CI_REPORTS.iter().zip(&before) {
        assert!(p.read_bytes(report) == *bytes, "{report} differs from the run it reused");
    }
    let runs = std::fs::read_dir(p.join(".stateval/runs")).expect("runs");
    let names: Vec<String> = runs.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 1, "the earlier run set aside is gone: {names:?}");
    let run_dir = format!(".stateval/runs/{}", names[0]);
    p.stateval(&["verify", &run_dir]).expect_code(0);

    // while another process holds the store, nothing in it is touched — not the earlier
    // run, not a directory a killed reuse left aside — and the run is refused
    p.write(format!(".stateval/runs/.reusing-{}/left-by-a-kill", names[0]), "x");
    let before_held = p.snapshot(".stateval/runs");
    let held = stateval::store::SledStore::open(&p.join(".stateval/catalog")).expect("hold the catalog");
    let refused = p.stateval(&["run", "--reuse", ".stateval"]);
    refused.expect_code(2);
    assert!(refused.stderr.contains("is in use by another stateval run"), "{}", refused.stderr);
    drop(held);
    assert!(p.snapshot(".stateval/runs") == before_held, "the store's runs stayed as they were");
    std::fs::remove_dir_all(p.join(format!(".stateval/runs/.reusing-{}", names[0]))).expect("tidy");

    // one case edited: it is replayed, and the summary says why, naming it
    let dataset = "datasets/examples/treasury.jsonl";
    let text = p.read(dataset);
    let first = text.lines().next().expect("a case").to_string();
    let id = serde_json::from_str::<serde_json::Value>(&first).expect("a case")["id"].as_str().expect("id").to_string();
    p.write(dataset, text.replacen(&first, &first.replacen("\"tags\":[", "\"tags\":[\"edited\",", 1), 1));
    let out = p.stateval(&["run", "--reuse", ".stateval"]);
    out.expect_code(0);
    assert!(out.stdout.contains(&format!("reused {} of {cases} cases", cases - 1)), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "  replayed 1 case: no earlier run has its units (its inputs changed, or it never ran): {id}\n"
        )),
        "{}",
        out.stdout
    );
}

/// A catalogued log without its run id: case, run, head, events, complete, turn offsets.
type CataloguedLog = (String, usize, Option<String>, u64, bool, Vec<u64>);

/// Every log record of the catalog in `store`, by case and run.
fn catalog_logs(p: &Project, store: &str) -> Vec<CataloguedLog> {
    use stateval::store::{Layout, SledStore, Store};
    let catalog = SledStore::open(&Layout::new(&p.join(store)).catalog()).expect("open the catalog");
    let runs = catalog.runs().expect("runs");
    assert_eq!(runs.len(), 1, "{runs:?}");
    let mut logs: Vec<_> = catalog
        .logs(&runs[0].run_id)
        .expect("logs")
        .into_iter()
        .map(|r| (r.case, r.k, r.head, r.events, r.complete, r.turn_offsets))
        .collect();
    logs.sort();
    logs
}

#[test]
fn a_merge_catalogues_every_log_as_one_unsharded_run_does_turn_offsets_included() {
    let p = sharded();
    merge(&p, &shard_args(&["--out", "merged"])).expect_code(0);
    p.stateval(&["run"]).expect_code(0);
    let merged = catalog_logs(&p, "merged");
    assert_eq!(merged.len(), 17, "every log of the core suite");
    assert!(merged.iter().all(|l| !l.5.is_empty()), "every log has turns to index: {merged:?}");
    assert_eq!(merged, catalog_logs(&p, ".stateval"));
}
