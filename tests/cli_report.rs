//! `stateval report RUN_DIR` and `stateval show LOG --html`, end to end: reports
//! rendered again from a finished run are the run's own reports, byte for byte, even
//! from a run directory moved elsewhere; one log renders alone.

mod common;

use common::Project;

/// The failing pipeline, run once; returns its run directory (relative to the project).
fn failing_run(p: &Project) -> String {
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let ids = p.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    format!(".stateval/runs/{}", ids[0])
}

#[test]
fn reports_rendered_again_from_a_run_directory_are_the_runs_own_reports() {
    let p = Project::new();
    let run = failing_run(&p);
    let out = p.stateval(&[
        "report",
        &run,
        "--html",
        "again/report.html",
        "--markdown",
        "again/summary.md",
        "--json",
        "again/report.json",
        "--junit",
        "again/junit.xml",
    ]);
    out.expect_code(0);
    assert!(out.stdout.contains("report: again/report.html"), "{}", out.stdout);
    for (again, original) in [
        ("again/report.html", "reports/failing/report.html"),
        ("again/summary.md", "reports/failing/summary.md"),
        ("again/report.json", "reports/failing/report.json"),
        ("again/junit.xml", "reports/failing/junit.xml"),
    ] {
        assert!(p.read_bytes(again) == p.read_bytes(original), "{again} differs from {original}");
    }
    // the agents' system prompts are in both: the run's from its pipeline, the report's
    // from the project's pipeline/ (whose profile digest matches the run's)
    assert!(p.read("again/report.html").contains("<pre>You are a careful treasury assistant.</pre>"));
}

#[test]
fn a_system_prompt_edited_since_the_run_is_not_shown_as_the_runs() {
    let p = Project::new();
    let run = failing_run(&p);
    let html = p.read("reports/failing/report.html");
    let prompt = "You are a careful treasury assistant.";
    assert!(html.contains(&format!("<pre>{prompt}</pre>")), "the run's own report shows it");
    // a model call links to it
    assert!(html.contains("<a href=\"#case/wrong-expectation/run/0/system\">the system prompt</a>"));
    let edited = p.read("pipeline/failing.toml").replace(prompt, "You are a reckless treasury assistant.");
    p.write("pipeline/failing.toml", edited);
    p.stateval(&["report", &run, "--html", "later.html"]).expect_code(0);
    let later = p.read("later.html");
    assert!(!later.contains("reckless") && !later.contains(prompt), "neither the edited prompt nor a guess");
    assert!(later.contains("System prompt: not in the log, and the run's agent profile was not at hand"));
}

#[test]
fn a_run_directory_moved_elsewhere_still_renders_its_timelines() {
    let p = Project::new();
    let run = failing_run(&p);
    let elsewhere = tempfile::tempdir().expect("a temp dir");
    let moved = elsewhere.path().join("artifact");
    common::copy_dir(&p.join(&run), &moved);
    std::fs::remove_dir_all(p.join(".stateval")).expect("remove the store");
    let out = p.stateval(&["report", moved.to_str().expect("UTF-8"), "--html", "moved.html"]);
    out.expect_code(0);
    let html = p.read("moved.html");
    // logs are read from the moved directory: the replay miss's error event is there
    assert!(html.contains("id=\"case/replay-miss/run/0/seq/7\""), "the timeline was drawn");
    assert!(html.contains("<a href=\"#case/replay-miss/run/0/seq/7\">run 0 · seq 7 · turn 1 · error</a>"));
}

#[test]
fn a_directory_that_is_not_a_finished_run_is_refused_naming_what_is_missing() {
    let p = Project::new();
    std::fs::create_dir_all(p.join("not-a-run")).expect("mkdir");
    let out = p.stateval(&["report", "not-a-run", "--html", "x.html"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not-a-run/manifest.json: missing"), "{}", out.stderr);
    assert!(out.stderr.contains("refusing to render a report"), "{}", out.stderr);
    assert!(!p.exists("x.html"));
    // and a report needs a format
    p.stateval(&["report", "not-a-run"]).expect_code(2);
}

#[test]
fn one_log_renders_alone_as_an_html_page() {
    let p = Project::new();
    let run = failing_run(&p);
    let log = format!("{run}/wrong-expectation/0.jsonl");
    let out = p.stateval(&["show", &log, "--html", "one.html"]);
    out.expect_code(0);
    let html = p.read("one.html");
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("<h1>stateval log <code>"), "{html}");
    assert!(html.contains("id=\"case/wrong-expectation/run/0/seq/9\""));
    assert!(html.contains("<strong>State after turn 0</strong>"));
    // the page is one self-contained file: no external reference of any kind
    for needle in ["src=\"http", "href=\"http", "<link ", "@import"] {
        assert!(!html.contains(needle), "{needle}");
    }
    // the text timeline and the page are alternatives
    p.stateval(&["show", &log, "--html", "x.html", "--at-turn", "0"]).expect_code(2);
}

#[test]
fn two_identical_runs_of_a_long_case_write_byte_identical_html() {
    // 120 turns: the run is virtualised (its turns are JSON), with prompts and contexts
    let p = Project::empty();
    let spec = stateval::synth::SynthSpec { cases: 2, turns: 120, runs: 1, seed: 7 };
    let pipeline = stateval::synth::write_suite(p.path(), &spec).expect("write the synthetic suite");
    let text = std::fs::read_to_string(&pipeline).expect("read the pipeline");
    std::fs::write(&pipeline, text + "html = \"reports/report.html\"\n").expect("write the pipeline");
    p.stateval(&["run", "pipeline/synth.toml"]).expect_code(0);
    let first = p.read_bytes("reports/report.html");
    std::fs::remove_dir_all(p.join(".stateval")).expect("remove the store");
    p.stateval(&["run", "pipeline/synth.toml"]).expect_code(0);
    let html = String::from_utf8(first.clone()).expect("UTF-8");
    assert!(html.contains("<div class=\"vlist\" id=\"case/synth-00000/run/0/turns\">"), "virtualised");
    assert!(html.contains("<pre>You are a diligent back-office assistant.</pre>"));
    assert!(first == p.read_bytes("reports/report.html"), "the second run's report differs");
}
