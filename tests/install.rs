//! The ways stateval is installed stay true to the build: the wheel's metadata and its
//! `python -m stateval` shim, the Dockerfile's binary, the GitHub Action, and the
//! scale-out examples that use them instead of building from source. Docker cannot run
//! here, so the Dockerfile is checked against Cargo's `[[bin]]` rather than built; the
//! wheel itself is built, installed and run by `.ci/run`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn cargo_toml() -> toml::Table {
    read("Cargo.toml").parse().expect("Cargo.toml parses")
}

/// The name of the one `[[bin]]` Cargo builds.
fn bin_name() -> String {
    let bins = cargo_toml()["bin"].as_array().expect("[[bin]]").clone();
    assert_eq!(bins.len(), 1, "one binary: {bins:?}");
    bins[0]["name"].as_str().expect("bin name").to_string()
}

#[test]
fn the_dockerfile_builds_and_copies_the_binary_cargo_names_and_runs_it_as_a_non_root_user() {
    let docker = read("Dockerfile");
    let bin = bin_name();
    let instructions: Vec<&str> =
        docker.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let froms: Vec<&&str> = instructions.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(froms.len(), 2, "a build stage and a runtime stage: {froms:?}");
    assert!(froms[0].starts_with("FROM rust:") && froms[0].ends_with(" AS build"), "{}", froms[0]);
    assert!(froms[1].contains("-slim") || froms[1].contains("distroless"), "a small runtime base: {}", froms[1]);
    assert!(
        docker.contains(&format!("cargo build --release --locked --bin {bin}"))
            && docker.contains(&format!("cp target/release/{bin} /{bin}")),
        "the build stage builds and takes out `{bin}`"
    );
    let runtime = &instructions[instructions.iter().position(|l| l == froms[1]).expect("runtime stage")..];
    let copies: Vec<&&str> = runtime.iter().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(copies, [&format!("COPY --from=build /{bin} /usr/local/bin/{bin}").as_str()], "the binary only");
    assert!(runtime.iter().any(|l| l.starts_with("USER ") && !l.contains("root")), "a non-root user");
    assert!(runtime.contains(&format!("ENTRYPOINT [\"{bin}\"]").as_str()), "ENTRYPOINT [\"{bin}\"]");
    let ignore = read(".dockerignore");
    for kept_out in ["target/", ".stateval/", "reports/"] {
        assert!(ignore.lines().any(|l| l.trim() == kept_out), ".dockerignore keeps out {kept_out}");
    }
}

#[test]
fn the_wheel_takes_its_version_from_cargo_and_ships_the_binary_with_a_pinned_maturin() {
    let py: toml::Table = read("pyproject.toml").parse().expect("pyproject.toml parses");
    let requires = py["build-system"]["requires"].as_array().expect("requires");
    let maturin = requires.iter().filter_map(|r| r.as_str()).find(|r| r.starts_with("maturin")).expect("maturin");
    let pin = maturin.strip_prefix("maturin==").unwrap_or_else(|| panic!("maturin pinned exactly: {maturin}"));
    assert!(pin.split('.').count() == 3, "{maturin}");
    assert_eq!(py["build-system"]["build-backend"].as_str(), Some("maturin"));
    let project = py["project"].as_table().expect("[project]");
    assert_eq!(project["name"].as_str(), Some(cargo_toml()["package"]["name"].as_str().expect("package name")));
    // no version of its own: maturin reads Cargo.toml's, so the two cannot disagree
    assert!(!project.contains_key("version"), "pyproject.toml must not pin a version of its own");
    assert!(project["dynamic"].as_array().is_some_and(|d| d.iter().any(|v| v.as_str() == Some("version"))));
    assert_eq!(py["tool"]["maturin"]["bindings"].as_str(), Some("bin"));
    // stripped: a wheel of 141 MB for a 24 MB binary is what a newcomer downloads first
    // (.ci/run checks the binary in the built wheel has no symbol table)
    assert_eq!(py["tool"]["maturin"]["strip"].as_bool(), Some(true), "[tool.maturin] strip = true");
    // CI builds the wheel with that same maturin
    let ci = read(".ci/run");
    assert!(ci.contains(&format!("maturin=={pin}")), ".ci/run installs maturin=={pin}");
}

/// `python -m stateval` runs the binary an install put beside it (here: `pip install
/// --target`'s layout, DIR/stateval and DIR/bin/stateval), passing its exit code on; with
/// no binary it says so and exits 2.
#[test]
fn python_dash_m_stateval_runs_the_installed_binary_or_says_it_is_missing_with_exit_2() {
    let python = std::env::var("STATEVAL_SDK_PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = tempfile::tempdir().expect("temp dir");
    common::copy_dir(&repo().join("python/stateval"), &dir.path().join("stateval"));
    let run = |args: &[&str]| {
        let out = Command::new(&python)
            .args(["-m", "stateval"])
            .args(args)
            .env("PYTHONPATH", dir.path())
            .env("PYTHONNOUSERSITE", "1")
            .output()
            .unwrap_or_else(|e| panic!("run {python}: {e} (set STATEVAL_SDK_PYTHON to a Python 3)"));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = run(&["--version"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with("error: the stateval binary is not installed beside this Python package"), "{stderr}");
    assert!(stderr.contains(&dir.path().join("bin").display().to_string()), "names where it looked: {stderr}");

    let bin: PathBuf = assert_cmd::cargo::cargo_bin("stateval");
    std::fs::create_dir(dir.path().join("bin")).expect("bin/");
    std::fs::copy(&bin, dir.path().join("bin/stateval")).expect("copy the binary");
    let (code, stdout, stderr) = run(&["--version"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), format!("stateval {}", env!("CARGO_PKG_VERSION")));
    let (code, _, _) = run(&["run", "no/such/pipeline.toml"]);
    assert_eq!(code, Some(2), "the binary's exit code is passed on");
}

/// The scale-out examples install stateval (the action, the image), never build it, and
/// every shard run and merge is checked against a plan. `tests/cli_shard.rs` runs them.
#[test]
fn every_scale_out_example_installs_instead_of_building_and_passes_a_plan() {
    let dir = repo().join("examples/scale-out");
    let mut examples: Vec<PathBuf> = common::files_in(&dir);
    examples.sort();
    assert_eq!(examples.len(), 3, "{examples:?}");
    for path in &examples {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("read");
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        for (n, line) in code.iter().enumerate() {
            for build in ["cargo install", "cargo build", "cargo run"] {
                assert!(!line.contains(build), "{name}: `{line}` builds stateval");
            }
            if line.contains("stateval run") {
                assert!(line.contains("--shard-from-env") && line.contains("--plan "), "{name}: `{line}`");
            }
            if line.contains("stateval merge") {
                assert!(line.contains("--plan "), "{name}: `{line}`");
            }
            if line.contains("stateval plan") {
                assert!(line.contains("-o "), "{name}: `{line}`");
            }
            if line.contains("/stateval@") {
                let with = code.get(n + 1).map(|w| w.trim()).unwrap_or_default();
                assert!(
                    with.starts_with("with: {") && with.contains("version: \""),
                    "{name}: the action pins a version: {with}"
                );
            }
        }
        let runs = code.iter().filter(|l| l.contains("stateval run") || l.contains("command: run")).count();
        let merges = code.iter().filter(|l| l.contains("stateval merge") || l.contains("command: merge")).count();
        let plans = code.iter().filter(|l| l.contains("stateval plan") || l.contains("command: plan")).count();
        assert!(
            runs == 1 && merges == 1 && plans == 1,
            "{name}: a plan, a shard and a merge job ({plans}, {runs}, {merges})"
        );
        // the key only in the sign job, which comes last: no job that runs the project's
        // code (the shards) or takes it over (the merge) has it
        let signs = code.iter().filter(|l| l.contains("stateval sign") || l.contains("command: sign")).count();
        assert_eq!(signs, 1, "{name}: a sign job of its own");
        let sign_job = code.iter().position(|l| l.trim_start() == "sign:" || l.contains("name: stateval-sign"));
        let sign_job = sign_job.unwrap_or_else(|| panic!("{name}: no sign job"));
        let keyed = code.iter().position(|l| l.contains("STATEVAL_SIGNING_KEY") || l.contains("secretKeyRef"));
        assert!(keyed.is_none_or(|k| k > sign_job), "{name}: the signing key appears before the sign job");
    }
    // GitHub: the action's shard run and merge pass the plan too
    let action_run = read("action/run.sh");
    let shard_line = action_run.lines().find(|l| l.contains("stateval run") && l.contains("--shard-from-env"));
    assert!(shard_line.is_some_and(|l| l.contains("--plan \"$plan\"")), "action/run.sh's shard run passes --plan");
    assert!(action_run.lines().any(|l| l.contains("stateval merge") && l.contains("--plan \"$plan\"")));
    // Kubernetes: the merged reports are written to the volume, not the pod's own disk
    let k8s = read("examples/scale-out/kubernetes.yaml");
    let merge_job = &k8s[k8s.find("name: stateval-merge").expect("the merge Job")..];
    assert!(merge_job.contains("mountPath: /work/reports"), "the merge Job keeps reports/ on a volume");
}

/// The action keeps the signing key out of every command but `sign`: a run (or a merge)
/// given STATEVAL_SIGNING_KEY is refused before stateval starts, and `sign` needs the
/// root of the step it signs for.
#[test]
fn the_action_refuses_the_signing_key_outside_its_sign_command() {
    let script = repo().join("action/run.sh");
    let action = |command: &str, key: bool| {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(&script).env("INPUT_COMMAND", command).env_remove("INPUT_ROOT").env_remove("GITHUB_OUTPUT");
        if key {
            cmd.env("STATEVAL_SIGNING_KEY", "stateval-ed25519-secret:00");
        } else {
            cmd.env_remove("STATEVAL_SIGNING_KEY");
        }
        let out = cmd.output().expect("run bash");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for command in ["run", "merge"] {
        let (code, stderr) = action(command, true);
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(stderr.contains("keep the key out of every step that runs the project's code"), "{stderr}");
    }
    let (code, stderr) = action("sign", true);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("the sign command needs the root input"), "{stderr}");
}

/// The action's inputs cover what the examples pass, and its steps run the script the
/// end-to-end test runs (`action/run.sh`), installing from the wheel.
#[test]
fn the_action_is_composite_installs_the_wheel_and_runs_the_tested_script() {
    let action = read("action.yml");
    assert!(action.contains("using: composite"));
    for input in ["version:", "command:", "pipeline:", "shard:", "plan:", "out:"] {
        assert!(action.contains(&format!("\n  {input}")), "input {input}");
    }
    assert!(action.contains("bash \"$GITHUB_ACTION_PATH/action/run.sh\""));
    assert!(action.contains("bash \"$GITHUB_ACTION_PATH/action/install.sh\""));
    assert!(action.contains("actions/upload-artifact@v4"));
    let install = read("action/install.sh");
    assert!(install.contains("pip\" install") && !install.contains("cargo"), "installs the wheel, builds nothing");
}
