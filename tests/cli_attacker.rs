//! The code under test attacks its own verdict, and isolation stops it (docs/security.md,
//! "What the agent under test can do to the verdict").
//!
//! Each test runs a real agent (tests/agents/attacker.py, or a custom grader script)
//! that tries what an outside tester found working when agents ran as plain children
//! of stateval with its user id: reading the signing key from its parent's
//! `/proc/PID/environ`, writing into the store and the project, leaving a `setsid`
//! daemon behind to edit files after its case, outliving a SIGKILL of stateval,
//! reading CI credentials from its environment. Each runs twice: once with
//! `[isolation] mode = "off"`, where the attack must *work* (so the test can tell a
//! stopped attack from one that was never tried), and once isolated, where it must not.

mod common;

use std::path::Path;

use common::{Outcome, Project};
use serde_json::{Value, json};

/// Isolation is what these tests test: with no sandbox here they are skipped, unless
/// `STATEVAL_REQUIRE_SANDBOX` says the machine must have one (CI installs bubblewrap).
fn sandbox() -> bool {
    if let Some(why) = stateval::isolation::unavailable() {
        assert!(std::env::var_os("STATEVAL_REQUIRE_SANDBOX").is_none(), "no sandbox here: {why}");
        eprintln!("skipped: {why}");
        return false;
    }
    let python = std::process::Command::new("python3").arg("-c").arg("import json").output();
    if !python.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no python3 on PATH (the attacker agent needs it)");
        return false;
    }
    true
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Isolation {
    Off,
    On,
}

/// A project whose one case runs the attacker agent with the profile variables `env`
/// (TOML inline-table members).
fn project(isolation: Isolation, env: &str) -> Project {
    let p = Project::empty();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    p.write("agents/attacker.py", std::fs::read(repo.join("tests/agents/attacker.py")).unwrap());
    p.write("fixtures/tools/none.json", r#"{"tools": []}"#);
    let isolation = match isolation {
        Isolation::Off => "[isolation]\nmode = \"off\"\n",
        Isolation::On => "",
    };
    p.write(
        "pipeline/atk.toml",
        format!(
            "[pipeline]\nname = \"atk\"\ndatasets = [\"datasets/atk.jsonl\"]\n\n\
             [agents.atk]\nkind = \"external\"\ncommand = [\"python3\", \"agents/attacker.py\"]\n\
             tools = \"fixtures/tools/none.json\"\ntimeout_ms = 20000\nenv = {{ {env} }}\n\n\
             [goldens]\nrequired = false\n\n[report]\njson = \"reports/report.json\"\njunit = \"reports/junit.xml\"\n\
             tap = \"reports/report.tap\"\nmarkdown = \"reports/summary.md\"\nhtml = \"reports/report.html\"\n\n{isolation}"
        ),
    );
    let case = json!({"id": "atk", "agent": "atk", "turns": ["go"],
                      "recordings": [{"responses": [{"response": {"content": "unused"}}]}]});
    p.write("datasets/atk.jsonl", format!("{case}\n"));
    p
}

/// `stateval run` of the project with `vars` added to stateval's own environment.
fn run(p: &Project, vars: &[(&str, &str)]) -> Outcome {
    let mut cmd = p.cmd();
    cmd.args(["run", "pipeline/atk.toml"]);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("run stateval");
    Outcome {
        code: output.status.code().expect("stateval exited normally"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// What the attacker answered (its turn 0 output, a JSON object).
fn answer(p: &Project) -> Value {
    let log = p.log_files().into_iter().find(|f| f.contains("/atk/0.jsonl")).expect("a log");
    let events = common::events_of(&p.read_bytes(&log));
    let done = events.iter().find(|e| e["kind"] == "turn_completed").expect("the agent answered turn 0");
    serde_json::from_str(done["data"]["response"].as_str().unwrap()).unwrap()
}

fn abs(p: &Project, rel: &str) -> String {
    p.join(rel).to_string_lossy().into_owned()
}

/// Kill whatever an unisolated attacker left behind.
fn reap(marker: &str) {
    for pid in common::processes_with_arg(marker) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

#[test]
fn the_agent_cannot_read_the_signing_key_from_its_parent_nor_from_its_file() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let p = project(isolation, "");
        p.stateval(&["keygen", "-o", "keys/ci"]).expect_code(0);
        let key = abs(&p, "keys/ci.key");
        let pipeline = p
            .read("pipeline/atk.toml")
            .replace("env = {  }", &format!("env = {{ ATTACKS = \"key\", KEY_GUESS = {key:?} }}"));
        p.write("pipeline/atk.toml", pipeline);
        let out = run(&p, &[("STATEVAL_SIGNING_KEY", &key)]);
        out.expect_code(0);
        let got = &answer(&p)["key"];
        let signed = p.files_under(".stateval/runs").iter().any(|f| f.ends_with("manifest.sig"));
        match isolation {
            Isolation::Off => {
                // the attack works on a plain child: its parent's environment names the
                // key's file, and the file is one open() away; such a run is not signed
                assert!(got["environ_with_key"].as_u64().unwrap() >= 1, "{got}");
                assert_eq!(got["key_file"], "secret", "{got}");
                assert!(!signed, "an unisolated run is not signed");
                assert!(out.stderr.contains("WITHOUT ISOLATION"), "{}", out.stderr);
                // and every report says so
                let report = p.json("reports/report.json");
                assert_eq!(report["extras"]["isolation"]["isolated"], false, "{report}");
                assert_eq!(report["extras"]["isolation"]["signed"], false, "{report}");
                assert_eq!(report["signature"], "unsigned", "{report}");
                assert!(out.stdout.contains("the code under test ran WITHOUT ISOLATION"), "{}", out.stdout);
                assert!(p.read("reports/junit.xml").contains(r#"name="isolation" value="none: "#));
                assert!(p.read("reports/report.tap").contains("# the code under test ran WITHOUT ISOLATION"));
                for file in ["reports/summary.md", "reports/report.html"] {
                    assert!(p.read(file).contains("the code under test ran without isolation"), "{file}");
                }
            }
            Isolation::On => {
                assert_eq!(got["environ_with_key"], 0, "{got}");
                // hidden behind /dev/null, on a mount that opens no device: unreadable
                let read = got["key_file"].as_str().unwrap_or_default();
                assert!(read.is_empty() || read.starts_with("error: "), "{got}");
                // its own PID namespace: bubblewrap's init, the agent, nothing of ours
                assert!(got["processes_seen"].as_u64().unwrap() <= 3, "{got}");
                assert!(signed, "an isolated run is signed");
                let run_dir = format!(".stateval/runs/{}", p.run_ids()[0]);
                p.stateval(&["verify", &run_dir, "--pubkey", "keys/ci.pub"]).expect_code(0);
                assert!(!out.stderr.contains("WITHOUT ISOLATION"), "{}", out.stderr);
                for file in ["reports/report.json", "reports/junit.xml", "reports/report.tap", "reports/summary.md"] {
                    assert!(!p.read(file).to_lowercase().contains("isolation"), "{file} says nothing of isolation");
                }
            }
        }
    }
    common::mark_ran("attacker");
}

#[test]
fn the_agent_can_write_nothing_but_its_scratch_directory() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let p = project(isolation, "");
        p.write("goldens/atk/atk.0.jsonl", "");
        std::fs::create_dir_all(p.join(".stateval")).unwrap();
        let targets = [abs(&p, "datasets/atk.jsonl"), abs(&p, "goldens/atk/atk.0.jsonl"), abs(&p, ".stateval/planted")];
        let env = format!(
            "ATTACKS = \"write,store\", WRITE_PATHS = {:?}, STORE_GUESS = {:?}",
            targets.join(":"),
            abs(&p, ".stateval")
        );
        let pipeline = p.read("pipeline/atk.toml").replace("env = {  }", &format!("env = {{ {env} }}"));
        p.write("pipeline/atk.toml", pipeline);
        let dataset = p.read("datasets/atk.jsonl");
        run(&p, &[]);
        let got = answer(&p);
        for target in &targets {
            let said = got["write"][target].as_str().unwrap_or_default();
            match isolation {
                Isolation::Off => assert_eq!(said, "written", "{target}: {got}"),
                Isolation::On => assert_eq!(said, "error: Read-only file system", "{target}: {got}"),
            }
        }
        match isolation {
            Isolation::Off => {
                assert!(p.read("datasets/atk.jsonl").contains("the agent was here"));
                assert!(got["store"].as_array().is_some_and(|s| s.iter().any(|f| f == "runs")), "{got}");
            }
            Isolation::On => {
                assert_eq!(p.read("datasets/atk.jsonl"), dataset, "the dataset is untouched");
                assert!(!p.exists(".stateval/planted"));
                assert_eq!(got["store"], json!([]), "the store is hidden: {got}");
            }
        }
    }
}

#[test]
fn a_daemon_the_agent_starts_in_a_new_session_ends_with_its_case() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let marker = common::marker_seconds();
        let p = project(isolation, &format!("ATTACKS = \"daemon\", MARKER = \"{marker}\""));
        run(&p, &[]).expect_code(0);
        assert_eq!(answer(&p)["daemon"], "started");
        // unisolated, a `setsid` escapes its process group and outlives the run
        outlives_only_unisolated(isolation, &marker, "its case");
    }
}

/// Unisolated, the process carrying `marker` is still there (then killed); isolated, it
/// is gone within five seconds of what it should not outlive.
fn outlives_only_unisolated(isolation: Isolation, marker: &str, what: &str) {
    match isolation {
        Isolation::Off => {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let left = common::processes_with_arg(marker);
            reap(marker);
            assert!(!left.is_empty(), "unisolated, `sleep {marker}` was expected to outlive {what}");
        }
        Isolation::On => assert!(common::gone_within_5s(marker), "`sleep {marker}` outlived {what}"),
    }
}

#[test]
fn the_agent_dies_with_stateval_even_when_stateval_is_killed() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let marker = common::marker_seconds();
        let p = project(isolation, &format!("ATTACKS = \"hold\", MARKER = \"{marker}\""));
        let mut child = common::start_until_marker(&p, &["run", "pipeline/atk.toml"], &marker);
        child.kill().unwrap(); // SIGKILL: no handler of stateval's runs
        child.wait().unwrap();
        outlives_only_unisolated(isolation, &marker, "a SIGKILL of stateval");
    }
}

/// The variables an outside tester saw reach agents and graders when the environment
/// was a deny-list by name.
const CREDENTIALS: [&str; 12] = [
    "CI_JOB_JWT",
    "GITHUB_PAT",
    "SLACK_WEBHOOK_URL",
    "SENTRY_DSN",
    "REDIS_URL",
    "PASSWORD",
    "OPENAI_API_KEY_2",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "NPM_CONFIG_REGISTRY_AUTH",
    "KUBECONFIG",
    "VAULT_ADDR",
    "DOCKER_HOST",
];

#[test]
fn no_credential_of_the_ci_machine_reaches_the_agent_unless_its_profile_names_it() {
    if !sandbox() {
        return;
    }
    let names = CREDENTIALS.join(":");
    let vars: Vec<(&str, &str)> = CREDENTIALS.iter().map(|n| (*n, "s3cr3t-value")).collect();
    let p = project(Isolation::On, &format!("ATTACKS = \"env\", CREDENTIALS = \"{names}\""));
    run(&p, &vars).expect_code(0);
    assert_eq!(answer(&p)["env"], json!([]), "no credential reached the agent");
    // the channel works: what the profile names does reach it
    let pipeline = p
        .read("pipeline/atk.toml")
        .replace("timeout_ms = 20000\n", "timeout_ms = 20000\nenv_passthrough = [\"SENTRY_DSN\", \"CI_JOB_JWT\"]\n");
    p.write("pipeline/atk.toml", pipeline);
    std::fs::remove_dir_all(p.join(".stateval")).unwrap();
    run(&p, &vars).expect_code(0);
    assert_eq!(answer(&p)["env"], json!(["CI_JOB_JWT", "SENTRY_DSN"]));
}

/// A custom grader is code under test too (it comes with the pull request): it runs in
/// the same sandbox as an agent.
#[test]
fn a_custom_grader_is_isolated_like_an_agent() {
    if !sandbox() {
        return;
    }
    const GRADER: &str = r#"import json, os, sys
sys.stdin.read()
seen = 0
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            if b"STATEVAL_SIGNING_KEY=" in open(f"/proc/{pid}/environ", "rb").read():
                seen += 1
        except OSError:
            pass
try:
    open("datasets/atk.jsonl", "a").write("\n")
    wrote = "written"
except OSError as e:
    wrote = e.strerror
print(json.dumps({"pass": True, "reason": json.dumps({"environ_with_key": seen, "wrote": wrote})}))
"#;
    for isolation in [Isolation::Off, Isolation::On] {
        let p = project(isolation, "");
        p.write("graders/peek.py", GRADER);
        let case = json!({"id": "atk", "agent": "atk", "turns": ["go"],
                          "recordings": [{"responses": [{"response": {"content": "unused"}}]}],
                          "expect": [{"target": "final_response",
                                      "matcher": {"custom": {"command": ["python3", "graders/peek.py"]}}}]});
        p.write("datasets/atk.jsonl", format!("{case}\n"));
        p.stateval(&["keygen", "-o", "keys/ci"]).expect_code(0);
        let out = run(&p, &[("STATEVAL_SIGNING_KEY", &abs(&p, "keys/ci.key"))]);
        out.expect_code(0);
        let log = p.log_files().into_iter().find(|f| f.contains("/atk/0.jsonl")).expect("a log");
        let events = common::events_of(&p.read_bytes(&log));
        let called = events.iter().find(|e| e["kind"] == "grader_called").expect("the grader ran");
        let said: Value = serde_json::from_str(called["data"]["reason"].as_str().unwrap()).unwrap();
        match isolation {
            Isolation::Off => {
                assert!(said["environ_with_key"].as_u64().unwrap() >= 1, "{said}");
                assert_eq!(said["wrote"], "written");
            }
            Isolation::On => {
                assert_eq!(said["environ_with_key"], 0, "{said}");
                assert_eq!(said["wrote"], "Read-only file system");
            }
        }
    }
}

/// `mode = "required"` refuses a run it cannot isolate rather than run it plainly;
/// here that is a machine where bubblewrap cannot be found.
#[test]
fn required_isolation_refuses_a_run_that_cannot_be_isolated() {
    if !sandbox() {
        return;
    }
    let p = project(Isolation::On, "");
    let pipeline = p.read("pipeline/atk.toml") + "[isolation]\nmode = \"required\"\n";
    p.write("pipeline/atk.toml", pipeline);
    let out = run(&p, &[(stateval::isolation::BWRAP_VARIABLE, "/nonexistent/bwrap")]);
    out.expect_code(2);
    assert!(out.stderr.contains("mode = \"required\""), "{}", out.stderr);
    assert!(p.log_files().is_empty(), "nothing ran");
    // and isolated where it can be
    run(&p, &[]).expect_code(0);
}

/// A shard whose agents ran unisolated makes the merged run unisolated too: the merge
/// says so in its reports, as the shard did.
#[test]
fn a_merge_of_an_unisolated_shard_says_the_run_was_unisolated() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let p = project(isolation, "");
        let second = p.read("datasets/atk.jsonl").replace("\"atk\",\"recordings\"", "\"atk2\",\"recordings\"");
        let second = second.replacen("\"id\":\"atk\"", "\"id\":\"atk2\"", 1);
        p.write("datasets/atk.jsonl", p.read("datasets/atk.jsonl") + &second);
        for i in 1..=2 {
            p.stateval(&[
                "run",
                "pipeline/atk.toml",
                "--shard",
                &format!("slice:{i}/2"),
                "--out",
                &format!("shards/{i}"),
            ])
            .expect_code(0);
        }
        p.stateval(&["merge", "shards/1", "shards/2", "--pipeline", "pipeline/atk.toml"]).expect_code(0);
        let report = p.json("reports/report.json");
        assert_eq!(report["cases"].as_array().map(Vec::len), Some(2), "{report}");
        let why = report["extras"]["isolation"]["why"].as_str();
        match isolation {
            Isolation::Off => assert!(why.is_some_and(|w| w.starts_with("shard ")), "{report}"),
            Isolation::On => assert_eq!(why, None, "{report}"),
        }
    }
}

/// The CI machine's own credentials in the home directory (an SSH key, a `.netrc`, a
/// cloud login): the agent runs as the same user, and isolated it finds them empty.
#[test]
fn the_agent_cannot_read_the_machines_credentials_in_the_home_directory() {
    if !sandbox() {
        return;
    }
    for isolation in [Isolation::Off, Isolation::On] {
        let p = project(isolation, "");
        p.write("home/.ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----");
        p.write("home/.netrc", "machine example.org login ci password hunter2");
        p.write("home/.aws/credentials", "aws_secret_access_key = abc");
        let targets = [abs(&p, "home/.ssh/id_ed25519"), abs(&p, "home/.netrc"), abs(&p, "home/.aws/credentials")];
        let env = format!("ATTACKS = \"read\", READ_PATHS = {:?}", targets.join(":"));
        let pipeline = p.read("pipeline/atk.toml").replace("env = {  }", &format!("env = {{ {env} }}"));
        p.write("pipeline/atk.toml", pipeline);
        run(&p, &[("HOME", &abs(&p, "home"))]).expect_code(0);
        let got = answer(&p);
        for target in &targets {
            let read = got["read"][target].as_str().unwrap_or_default();
            match isolation {
                Isolation::Off => assert!(!read.is_empty() && !read.starts_with("error"), "{target}: {got}"),
                Isolation::On => assert!(read.is_empty() || read.starts_with("error: "), "{target}: {got}"),
            }
        }
    }
}

/// Signing apart from running must not sign what the run itself would not have: a run
/// whose code under test ran unisolated is refused by `stateval sign` unless its
/// pipeline signs unisolated runs.
#[test]
fn stateval_sign_refuses_an_unisolated_run_its_pipeline_would_not_sign() {
    if !sandbox() {
        return;
    }
    for allowed in [false, true] {
        let p = project(Isolation::Off, "");
        if allowed {
            let pipeline = p.read("pipeline/atk.toml") + "sign_unisolated = true\n";
            p.write("pipeline/atk.toml", pipeline);
        }
        p.stateval(&["keygen", "-o", "keys/ci"]).expect_code(0);
        let out = run(&p, &[]);
        out.expect_code(0);
        let root = out.stdout.lines().find_map(|l| l.strip_prefix("root ")).and_then(|l| l.split(' ').next());
        let root = root.expect("the run printed its root").to_string();
        let mut sign = p.cmd();
        sign.args(["sign", ".stateval", "--root", &root]).env("STATEVAL_SIGNING_KEY", abs(&p, "keys/ci.key"));
        let signed = sign.output().expect("run stateval sign");
        let stderr = String::from_utf8_lossy(&signed.stderr);
        if allowed {
            assert_eq!(signed.status.code(), Some(0), "{stderr}");
        } else {
            assert_eq!(signed.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains("WITHOUT ISOLATION"), "{stderr}");
            assert!(!p.files_under(".stateval/runs").iter().any(|f| f.ends_with("manifest.sig")), "nothing signed");
        }
    }
}
