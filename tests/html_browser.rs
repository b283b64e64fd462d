//! The HTML report in a real browser: `pipeline/failing.toml`'s report, opened from
//! `file://` by headless Chromium, shows the failing case, its first divergence and
//! its state at a turn, logs nothing to the console and makes no request.
//!
//! Needs Debian's `chromium`: set `STATEVAL_CHROMIUM=/usr/bin/chromium`. Without it the
//! test says why it is skipped and passes, unless `STATEVAL_REQUIRE_BROWSER` is set (CI
//! sets both), then it fails. No CDP client: the browser is driven through its own
//! flags — `--dump-dom` for the DOM after the page's script ran, `--screenshot` for
//! pictures, `--enable-logging=stderr` for console messages (the report writes none, so
//! any is an error: a script error, a policy violation) and `--log-net-log` for the
//! requests it made. Two canary pages prove both detectors see what they look for.
//!
//! Screenshots of the index and of one case are left in
//! `target/tmp/html-browser/` (CI keeps them as artifacts; they are never committed).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Project;
use serde_json::Value;

/// The flags every load uses: headless, no sandbox (containers), and none of the
/// browser's own background traffic.
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// A load that takes longer than this has hung.
const LOAD_TIMEOUT: Duration = Duration::from_secs(90);

/// The browser to use, or `None` (with the reason printed) when the test is skipped.
fn chromium() -> Option<PathBuf> {
    let required = std::env::var_os("STATEVAL_REQUIRE_BROWSER").is_some_and(|v| !v.is_empty());
    match std::env::var_os("STATEVAL_CHROMIUM").filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "STATEVAL_CHROMIUM={} is not a file", path.display());
            Some(path)
        }
        None if required => panic!(
            "STATEVAL_REQUIRE_BROWSER is set but STATEVAL_CHROMIUM is not: install Debian's chromium \
             (apt-get install -y chromium) and set STATEVAL_CHROMIUM=/usr/bin/chromium"
        ),
        None => {
            eprintln!(
                "skipped: the HTML report is tested in a real browser only when STATEVAL_CHROMIUM names \
                 Debian's chromium (STATEVAL_CHROMIUM=/usr/bin/chromium); set STATEVAL_REQUIRE_BROWSER=1 \
                 to make its absence a failure"
            );
            None
        }
    }
}

/// What one page load showed.
struct Load {
    /// `--dump-dom`'s output, when asked for.
    dom: String,
    /// Console messages the page produced (one per line of the browser's log).
    console: Vec<String>,
    /// URLs the page requested (the browser's own traffic left out).
    requests: Vec<String>,
}

struct Browser {
    bin: PathBuf,
    scratch: tempfile::TempDir,
    loads: usize,
}

impl Browser {
    fn new(bin: PathBuf) -> Self {
        let scratch = tempfile::Builder::new().prefix("stateval-chromium-").tempdir().expect("a scratch directory");
        Browser { bin, scratch, loads: 0 }
    }

    /// Load `url` once, in a fresh profile, with `action` (`--dump-dom`, or
    /// `--screenshot=…` and a window size).
    fn load(&mut self, url: &str, action: &[String]) -> Load {
        self.loads += 1;
        let dir = self.scratch.path().join(format!("load-{}", self.loads));
        let profile = dir.join("profile");
        let netlog = dir.join("netlog.json");
        std::fs::create_dir_all(&profile).expect("a profile directory");
        let mut child = Command::new(&self.bin)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--enable-logging=stderr")
            .arg("--v=0")
            .arg(format!("--log-net-log={}", netlog.display()))
            .args(action)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("stdout")).expect("stdout file"))
            .stderr(std::fs::File::create(dir.join("stderr")).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.bin.display()));
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for chromium") {
                break status;
            }
            if start.elapsed() > LOAD_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish loading {url} within {LOAD_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
        assert!(status.success(), "chromium failed on {url}: {status}\n{stderr}");
        Load {
            dom: std::fs::read_to_string(dir.join("stdout")).unwrap_or_default(),
            console: stderr.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect(),
            requests: page_requests(&netlog),
        }
    }

    fn dom(&mut self, url: &str) -> Load {
        self.load(url, &["--dump-dom".to_string()])
    }

    fn screenshot(&mut self, url: &str, out: &Path, height: u32) -> Load {
        let load = self.load(
            url,
            &[
                format!("--screenshot={}", out.display()),
                format!("--window-size=1280,{height}"),
                "--hide-scrollbars".into(),
            ],
        );
        let png = std::fs::read(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", out.display());
        assert!(png.len() > 10_000, "{} is nearly empty ({} bytes)", out.display(), png.len());
        load
    }
}

/// Requests a page made, from the browser's net log: its own traffic (updates, the
/// clock) has no initiating origin; a page's requests have one (`null` from `file://`).
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).unwrap_or_else(|e| panic!("{}: {e}", netlog.display()));
    let log: Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .unwrap_or_else(|e| panic!("{}: not a net log: {e}", netlog.display()));
    let mut urls: Vec<String> = log["events"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|e| {
            let params = &e["params"];
            let initiator = params["initiator"].as_str()?;
            (initiator != "not an origin").then(|| params["url"].as_str().unwrap_or("?").to_string())
        })
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

fn file_url(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = path.to_str().expect("a UTF-8 path");
    assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b)), "a plain path: {text}");
    format!("file://{text}")
}

/// Where the screenshots go: under the target directory, never in the repository.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-browser");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `pipeline/failing.toml` with goldens blessed, then one case's input edited, so its
/// report has a golden diff as well as replay and assertion failures.
fn failing_report(p: &Project) -> PathBuf {
    p.stateval(&["run", "pipeline/failing.toml", "--bless"]).expect_code(1);
    let dataset = "datasets/failing/mixed.jsonl";
    let line =
        p.edit_line(dataset, 3, r#""turns":["What is my balance?"]"#, r#""turns":["What is my balance today?"]"#);
    assert!(line.contains(r#""id":"wrong-expectation""#), "line 3 is wrong-expectation: {line}");
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    p.join("reports/failing/report.html")
}

#[test]
fn the_failing_pipelines_report_shows_its_failures_in_a_browser_offline_and_without_errors() {
    let Some(bin) = chromium() else { return };
    let mut browser = Browser::new(bin);
    let p = Project::new();
    let report = failing_report(&p);
    let url = file_url(&report);
    let shots = screenshots();

    let index = browser.screenshot(&url, &shots.join("index.png"), 1600);
    let case_url = format!("{url}#case/wrong-expectation");
    let case = browser.screenshot(&case_url, &shots.join("case.png"), 2600);

    // the index: the script ran (it shows the filters and counts the rows), the failing
    // case is listed before the passing one, with its first divergent event
    let page = browser.dom(&url);
    let dom = &page.dom;
    assert!(dom.contains("<nav id=\"filters\" aria-label=\"Filter cases\">"), "the script showed the filters");
    assert!(dom.contains("6 of 6 cases shown"), "the script counted the cases");
    let failing =
        dom.find("<tr data-case=\"case/wrong-expectation\" data-status=\"fail\"").expect("the failing case's row");
    let passing =
        dom.find("<tr data-case=\"case/passes-alongside\" data-status=\"pass\"").expect("the passing case's row");
    assert!(failing < passing, "failing cases come first");
    assert!(
        dom.contains("<a href=\"#case/wrong-expectation/run/0/seq/1\">run 0 · seq 1 · turn 0 · turn_started</a>"),
        "the index links the first divergent event"
    );

    // a deep link to the first divergent event: the case, the divergence highlighted
    // in its golden diff and its timeline, and the state after the turn
    let deep = browser.dom(&format!("{url}#case/wrong-expectation/run/0/seq/1"));
    let dom = &deep.dom;
    // the script focused the linked case (it alone is shown)
    let section =
        &dom[dom.find("<section class=\"case failed focused\" id=\"case/wrong-expectation\"").expect("the case")..];
    let section = &section[..section.find("</section>").expect("the case's end")];
    assert!(section.contains("<strong>First divergent event:</strong>"), "{section}");
    assert!(
        section.contains("payload changed at /data/input: \"What is my balance?\" → \"What is my balance today?\"")
    );
    assert!(section.contains("<tr class=\"first\">"), "the golden diff highlights it");
    assert!(section.contains("<li id=\"case/wrong-expectation/run/0/seq/1\" class=\"diff first\">"));
    assert!(dom.contains("<body class=\"focus\">"), "the other cases are hidden");
    assert!(section.contains("<strong>State after turn 0</strong>"), "the state at a turn");
    assert!(section.contains("<code>/sandbox/balance</code>: <code>1250</code>"), "with the sandbox it folded");
    assert!(section.contains("expected to contain \"$9,999\""), "each check with its reason");

    // a passing run is folded; a link into it opens it
    let folded = browser.dom(&format!("{url}#case/passes-alongside/run/0/seq/3"));
    assert!(folded.dom.contains("<details class=\"run\" id=\"case/passes-alongside/run/0\" open=\"\">"), "opened");

    for (what, load) in
        [("index", &index), ("case", &case), ("index DOM", &page), ("deep link", &deep), ("fold", &folded)]
    {
        assert!(load.console.is_empty(), "{what}: console messages: {:#?}", load.console);
        assert!(load.requests.is_empty(), "{what}: requests: {:#?}", load.requests);
    }
}

#[test]
fn the_console_and_request_detectors_see_a_page_that_logs_and_fetches() {
    // the checks above can fail: a page that does both is caught by both
    let Some(bin) = chromium() else { return };
    let mut browser = Browser::new(bin);
    let dir = tempfile::tempdir().expect("a temp dir");
    let canary = dir.path().join("canary.html");
    std::fs::write(
        &canary,
        "<!doctype html><html><body><img src=\"http://127.0.0.1:9/canary.png\">\
         <script>console.error(\"canary\"); undefinedFunction();</script></body></html>",
    )
    .expect("write the canary page");
    let load = browser.dom(&file_url(&canary));
    assert!(load.console.iter().any(|l| l.contains("\"canary\"")), "{:#?}", load.console);
    assert!(load.console.iter().any(|l| l.contains("undefinedFunction")), "{:#?}", load.console);
    assert_eq!(load.requests, ["http://127.0.0.1:9/canary.png"]);
}
