//! tools/same-output/compare.py, the before/after proof that a change alters no log,
//! golden or report (issue #37), kept working as the CLI moves: run with this build
//! against itself on the two quickest pipelines, it must say identical for every class
//! it compares, and it must catch one flipped report byte and one changed input byte.
//! The tool's own `--self-test` covers the rest with a release binary (its README).

use std::path::Path;
use std::process::Command;

/// `compare.py BIN BIN --only graders failing EXTRA…`: (exit code, stdout).
fn compare(extra: &[&str]) -> Option<(i32, String)> {
    let python_ok = Command::new("python3").args(["-c", "import tomllib"]).output().is_ok_and(|o| o.status.success());
    if !python_ok {
        // CI installs its Python and asks every suite that needs one to run
        assert!(
            std::env::var_os("STATEVAL_REQUIRE_SDK").is_none(),
            "STATEVAL_REQUIRE_SDK is set and there is no python3 with tomllib (3.11+) on PATH for compare.py"
        );
        eprintln!("skipped: no python3 with tomllib (3.11+) on PATH, which tools/same-output/compare.py needs");
        return None;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = env!("CARGO_BIN_EXE_stateval");
    // the tool keeps its scratch trees when something differs: here they go with `work`
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch directory");
    let out = Command::new("python3")
        .arg(repo.join("tools/same-output/compare.py"))
        .args([bin, bin, "--only", "graders", "failing", "--work"])
        .arg(work.path())
        .args(extra)
        .output()
        .expect("run compare.py");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(out.stderr.is_empty(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    Some((out.status.code().expect("exited"), stdout))
}

/// The status word of the line for `scenario` and `class` (`identical`, `DIFFERENT`, …).
fn status<'a>(stdout: &'a str, scenario: &str, class: &str) -> &'a str {
    let line = stdout
        .lines()
        .find(|l| l.split("  ").map(str::trim).filter(|f| !f.is_empty()).take(2).eq([scenario, class]))
        .unwrap_or_else(|| panic!("no line for {scenario} / {class}:\n{stdout}"));
    let rest = line.split_once(class).expect("the class").1.trim_start();
    if rest.starts_with("NOT COMPARED") { "NOT COMPARED" } else { rest.split(' ').next().unwrap_or_default() }
}

#[test]
fn one_build_against_itself_is_identical_in_every_class_and_the_rest_is_not_compared() {
    let Some((code, stdout)) = compare(&[]) else { return };
    // 1, not 0: the pipelines left out by --only are NOT COMPARED, never passed
    assert_eq!(code, 1, "{stdout}");
    for scenario in ["graders", "graders --bless", "failing"] {
        for class in ["run output", "event logs", "run files", "reports", "verify", "report re-render", "rest of tree"]
        {
            assert_eq!(status(&stdout, scenario, class), "identical", "{scenario} / {class}:\n{stdout}");
        }
    }
    assert_eq!(status(&stdout, "graders", "show"), "identical", "{stdout}");
    assert_eq!(status(&stdout, "graders --bless", "goldens"), "identical", "{stdout}");
    assert_eq!(status(&stdout, "agents", "*"), "NOT COMPARED", "{stdout}");
    assert!(stdout.contains("0 DIFFERENT"), "{stdout}");
}

#[test]
fn a_flipped_report_byte_and_a_changed_recording_byte_are_different() {
    let Some((code, stdout)) = compare(&["--tamper-output"]) else { return };
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(status(&stdout, "graders", "reports"), "DIFFERENT", "{stdout}");
    assert_eq!(status(&stdout, "graders", "event logs"), "identical", "{stdout}");
    // a recording that datasets/failing replays, one byte changed in the after tree
    let Some((code, stdout)) = compare(&["--tamper-fixture"]) else { return };
    assert_eq!(code, 1, "{stdout}");
    for class in ["event logs", "reports", "run output"] {
        assert_eq!(status(&stdout, "failing", class), "DIFFERENT", "{class}:\n{stdout}");
    }
}

/// `pipeline/frameworks.toml` through compare.py, where the frameworks are installed
/// (`.ci/run`): run and bless alike, every class identical. Its LangGraph agent warns on
/// stderr with its script's absolute path, each side's own tree; the tool masks that
/// path (and says so) rather than calling the two runs different.
#[test]
fn the_frameworks_pipeline_is_compared_where_the_frameworks_are_installed() {
    let Some(frameworks) = std::env::var_os("STATEVAL_FRAMEWORKS_PYTHON") else {
        assert!(
            std::env::var_os("STATEVAL_REQUIRE_SDK").is_none(),
            "STATEVAL_REQUIRE_SDK is set but STATEVAL_FRAMEWORKS_PYTHON is not"
        );
        eprintln!("skipped: STATEVAL_FRAMEWORKS_PYTHON is not set (.ci/run installs the frameworks)");
        return;
    };
    let node_modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agents/node_modules");
    if !node_modules.is_dir() {
        assert!(std::env::var_os("STATEVAL_REQUIRE_SDK").is_none(), "examples/agents/node_modules is not installed");
        eprintln!("skipped: examples/agents/node_modules is not installed (npm ci there)");
        return;
    }
    let frameworks = frameworks.to_string_lossy().into_owned();
    let Some((code, stdout)) = compare(&["--only", "frameworks", "--frameworks-python", &frameworks]) else { return };
    // 1: the pipelines left out are NOT COMPARED
    assert_eq!(code, 1, "{stdout}");
    for scenario in ["frameworks", "frameworks --bless"] {
        for class in ["run output", "event logs", "run files", "reports", "verify", "report re-render", "goldens"] {
            assert_eq!(status(&stdout, scenario, class), "identical", "{scenario} / {class}:\n{stdout}");
        }
    }
    assert!(stdout.contains("0 DIFFERENT"), "{stdout}");
}
