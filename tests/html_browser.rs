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

/// Issue #51: a case that fails only on a metric block (no event to point at) is linked
/// to its blocks from the index, and the link focuses it; the security scorecard shows
/// overall, the gated tags and any tag where something went wrong, the rest folded.
#[test]
fn metric_block_failures_are_linked_from_the_index_and_the_scorecard_folds_the_tags_nobody_gates() {
    let Some(bin) = chromium() else { return };
    let mut browser = Browser::new(bin);
    // every failing dataset, the metric blocks' among them
    let p = Project::full();
    p.stateval(&["run", "pipeline/failing.toml"]).expect_code(1);
    let url = file_url(&p.join("reports/failing/report.html"));
    let page = browser.dom(&url);
    let dom = &page.dom;
    for (case, block, more) in [
        ("looping-agent", "golden_path", " <span class=\"muted\">(+1 more)</span>"),
        ("narrative-claims-absent-transfer", "narrative", ""),
    ] {
        let start = dom.find(&format!("<tr data-case=\"case/{case}\" data-status=\"fail\"")).expect("the case's row");
        let row = &dom[start..start + dom[start..].find("</tr>").expect("the row's end")];
        let link =
            format!("<a href=\"#case/{case}/blocks\">metric block <code>{block}</code>, across runs</a>{more}</td>");
        assert!(row.contains(&link), "{row}");
    }
    let deep = browser.dom(&format!("{url}#case/looping-agent/blocks"));
    let dom = &deep.dom;
    let section =
        &dom[dom.find("<section class=\"case failed focused\" id=\"case/looping-agent\"").expect("focused")..];
    let section = &section[..section.find("</section>").expect("the case's end")];
    assert!(section.contains("<h4 id=\"case/looping-agent/blocks\">Metric blocks, across runs</h4>"), "{section}");
    assert!(section.contains("golden_path.passed = 0, below the bound 1"), "{section}");

    // the default pipeline's scorecard
    let p = Project::full();
    p.stateval(&["run"]).expect_code(0);
    let url = file_url(&p.join("reports/report.html"));
    let index = browser.screenshot(&url, &screenshots().join("scorecard.png"), 1600);
    let page = browser.dom(&url);
    let dom = &page.dom;
    let card = &dom[dom.find("<section id=\"scorecard\">").expect("the scorecard")..];
    let card = &card[..card.find("</section>").expect("its end")];
    let (shown, folded) = card.split_once("<details class=\"more-tags\">").expect("folded tags");
    let scopes = |html: &str| -> Vec<String> {
        html.split("<tr><th scope=\"row\"><code>")
            .skip(1)
            .map(|r| r[..r.find("</code>").unwrap_or(0)].to_string())
            .collect()
    };
    assert_eq!(scopes(shown), ["overall", "memory", "security"], "overall and the tags pipeline/ci.toml gates");
    let folded_scopes = scopes(folded);
    assert!(
        folded_scopes.len() > 20 && folded_scopes.contains(&"needs-grounding-floor".to_string()),
        "{folded_scopes:?}"
    );
    assert!(folded.starts_with(&format!("<summary>{} more tags: no gate names them", folded_scopes.len())), "{folded}");
    for (what, load) in [("index", &index), ("index DOM", &page), ("deep link", &deep)] {
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

/// Just enough of the DevTools protocol to run a script in a page and read its result:
/// an HTTP request for the page's socket, then a WebSocket (RFC 6455: masked text frames
/// out, unmasked frames in) carrying `Runtime.evaluate`. The flags alone cannot do
/// this: `--dump-dom` reads the page at its load event, and `--virtual-time-budget`,
/// which waits longer, stops the page's clocks, so nothing could be timed.
mod devtools {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use serde_json::{Value, json};

    /// A response that takes longer than this means the page hung.
    const TIMEOUT: Duration = Duration::from_secs(120);

    pub struct Page {
        stream: TcpStream,
        next_id: u64,
    }

    /// `GET path` on the browser's debugging port: the response body, or `None` while
    /// the port is not answering yet.
    pub fn get(port: u16, path: &str) -> Option<String> {
        // HTTP/1.1, as the browser answers nothing else, and it keeps the connection
        // open: the body is read by its length
        let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(TIMEOUT)).ok()?;
        write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").ok()?;
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).ok()?;
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().ok()?;
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        String::from_utf8(body).ok()
    }

    impl Page {
        /// Open the page's socket (`ws://127.0.0.1:PORT/devtools/page/ID`).
        pub fn connect(url: &str) -> Page {
            let rest = url.strip_prefix("ws://").expect("a ws:// URL");
            let (host, path) = rest.split_once('/').expect("a path");
            let mut stream = TcpStream::connect(host).expect("connect to the page");
            stream.set_read_timeout(Some(TIMEOUT)).expect("a read timeout");
            write!(
                stream,
                "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Key: c3RhdGV2YWwgdGVzdCBrZXk=\r\nSec-WebSocket-Version: 13\r\n\r\n"
            )
            .expect("send the upgrade");
            let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
            let mut status = String::new();
            reader.read_line(&mut status).expect("read the status line");
            assert!(status.contains(" 101 "), "the page refused the socket: {status}");
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).expect("read a header");
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            assert!(reader.buffer().is_empty(), "no frame arrives before a request");
            Page { stream, next_id: 1 }
        }

        fn send(&mut self, text: &str) {
            let payload = text.as_bytes();
            let mask = [0x5a, 0x17, 0xc3, 0x88];
            let mut frame = vec![0x81];
            match payload.len() {
                n if n < 126 => frame.push(0x80 | n as u8),
                n if n < 65_536 => {
                    frame.push(0x80 | 126);
                    frame.extend_from_slice(&(n as u16).to_be_bytes());
                }
                n => {
                    frame.push(0x80 | 127);
                    frame.extend_from_slice(&(n as u64).to_be_bytes());
                }
            }
            frame.extend_from_slice(&mask);
            frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            self.stream.write_all(&frame).expect("send a frame");
        }

        fn read_exact(&mut self, n: usize) -> Vec<u8> {
            let mut buf = vec![0; n];
            self.stream.read_exact(&mut buf).expect("read from the page's socket");
            buf
        }

        /// The next text message (continuation frames joined; pings ignored).
        fn receive(&mut self) -> String {
            let mut message = Vec::new();
            loop {
                let head = self.read_exact(2);
                let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0f);
                let len = match head[1] & 0x7f {
                    126 => u16::from_be_bytes(self.read_exact(2).try_into().unwrap_or_default()) as usize,
                    127 => u64::from_be_bytes(self.read_exact(8).try_into().unwrap_or_default()) as usize,
                    n => n as usize,
                };
                let payload = self.read_exact(len);
                match opcode {
                    0 | 1 => message.extend_from_slice(&payload),
                    8 => panic!("the page closed its socket"),
                    _ => continue,
                }
                if fin {
                    return String::from_utf8(message).expect("a UTF-8 message");
                }
            }
        }

        /// Wait until the page's document is the file it was opened on, loaded (a
        /// script sent earlier may run in the blank page before it, and be lost).
        pub fn wait_loaded(&mut self) {
            let start = std::time::Instant::now();
            while self.try_evaluate("location.protocol === 'file:' && document.readyState === 'complete'")
                != Ok(json!(true))
            {
                assert!(start.elapsed() < TIMEOUT, "the page did not load within {TIMEOUT:?}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        /// Evaluate `expression` (a promise is awaited) and return its value.
        pub fn evaluate(&mut self, expression: &str) -> Value {
            self.try_evaluate(expression).unwrap_or_else(|e| panic!("{e:#}"))
        }

        fn try_evaluate(&mut self, expression: &str) -> Result<Value, Value> {
            let id = self.next_id;
            self.next_id += 1;
            let request = json!({"id": id, "method": "Runtime.evaluate",
                                 "params": {"expression": expression, "awaitPromise": true, "returnByValue": true}});
            self.send(&request.to_string());
            loop {
                let message: Value = serde_json::from_str(&self.receive()).expect("a JSON message");
                if message["id"] != json!(id) {
                    continue;
                }
                let result = &message["result"];
                if !message["error"].is_null() {
                    return Err(message["error"].clone());
                }
                if !result["exceptionDetails"].is_null() {
                    return Err(result["exceptionDetails"].clone());
                }
                return Ok(result["result"]["value"].clone());
            }
        }
    }
}

/// Opens `url` in a headless browser with a debugging port, and returns the page once
/// its socket is known. The browser is killed when the guard is dropped.
struct Debugged {
    child: std::process::Child,
    _profile: tempfile::TempDir,
    stderr: PathBuf,
}

impl Drop for Debugged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn debugged(bin: &Path, url: &str) -> (Debugged, devtools::Page) {
    let profile = tempfile::Builder::new().prefix("stateval-chromium-").tempdir().expect("a profile directory");
    let stderr = profile.path().join("stderr");
    let child = Command::new(bin)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().join("profile").display()))
        .arg("--remote-debugging-port=0")
        .arg("--window-size=1280,900")
        .arg("--enable-logging=stderr")
        .arg("--v=0")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let guard = Debugged { child, _profile: profile, stderr };
    let port_file = guard._profile.path().join("profile/DevToolsActivePort");
    let start = Instant::now();
    let port: u16 = loop {
        let text = std::fs::read_to_string(&port_file).unwrap_or_default();
        if let Some(port) = text.lines().next().and_then(|l| l.trim().parse().ok()) {
            break port;
        }
        assert!(start.elapsed() < LOAD_TIMEOUT, "chromium wrote no DevToolsActivePort within {LOAD_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let socket = loop {
        let targets: Value =
            devtools::get(port, "/json/list").and_then(|b| serde_json::from_str(&b).ok()).unwrap_or(Value::Null);
        let page = targets
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["type"] == "page" && t["url"].as_str().is_some_and(|u| u.starts_with("file://")));
        if let Some(socket) = page.and_then(|p| p["webSocketDebuggerUrl"].as_str()) {
            break socket.to_string();
        }
        assert!(start.elapsed() < LOAD_TIMEOUT, "the page did not open within {LOAD_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut page = devtools::Page::connect(&socket);
    page.wait_loaded();
    (guard, page)
}

/// Waits for the load event, then reads the page's own timings, scrolls a virtualised
/// run from top to bottom 800 px a frame, and records each frame's interval, how many
/// turns were in the DOM, and which turn was under the viewport's centre.
const SCROLL_PROBE: &str = r#"(async () => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r(performance.now())));
  if (document.readyState !== "complete") await new Promise((r) => addEventListener("load", r));
  await frame(); await frame();
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByType("paint").find((p) => p.name === "first-contentful-paint");
  // the run's virtual list; without one (virtualisation switched off), the run itself
  const list = document.querySelector(".vlist") || document.querySelector("details.run");
  const run = list.closest("details.run");
  const top = list.getBoundingClientRect().top + scrollY;
  scrollTo(0, top);
  await frame(); await frame();
  const height = list.getBoundingClientRect().height;
  const intervals = [];
  const seen = new Set();
  let most = 0;
  let prev = await frame();
  while (scrollY + innerHeight < top + height && intervals.length < 2000) {
    scrollBy(0, 800);
    const now = await frame();
    intervals.push(now - prev);
    prev = now;
    most = Math.max(most, list.querySelectorAll("details.turn").length);
    const under = document.elementFromPoint(640, 450);
    const turn = under && under.closest(".vi");
    if (turn) seen.add(Number(turn.dataset.i));
  }
  const sorted = intervals.slice().sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return {
    runOpen: run.open,
    focused: document.body.classList.contains("focus"),
    domContentLoaded: nav.domContentLoadedEventEnd,
    load: nav.loadEventEnd,
    firstPaint: paint ? paint.startTime : null,
    listHeight: height,
    steps: intervals.length,
    medianFrame: at(0.5),
    p95Frame: at(0.95),
    worstFrame: sorted[sorted.length - 1],
    mostTurnsInDom: most,
    turnsSeen: seen.size,
    lastSeen: Math.max(...seen),
    lastDrawn: Number((list.querySelector(".vi:last-child") || { dataset: { i: -1 } }).dataset.i),
    turns: list.querySelector("script")
      ? JSON.parse(list.querySelector("script").textContent).length
      : list.querySelectorAll("details.turn").length,
    elements: document.getElementsByTagName("*").length,
  };
})()"#;

#[test]
fn a_thousand_turn_run_loads_and_scrolls_with_only_the_turns_in_view_in_the_dom() {
    let Some(bin) = chromium() else { return };
    let p = Project::empty();
    let spec = stateval::synth::SynthSpec { cases: 1, turns: 1000, runs: 1, seed: 7 };
    let pipeline = stateval::synth::write_suite(p.path(), &spec).expect("write the synthetic suite");
    let mut text = std::fs::read_to_string(&pipeline).expect("read the pipeline");
    text.push_str("html = \"reports/report.html\"\n");
    std::fs::write(&pipeline, text).expect("write the pipeline");
    p.stateval(&["run", "pipeline/synth.toml"]).expect_code(0);
    let report = p.join("reports/report.html");
    let bytes = std::fs::metadata(&report).expect("the report").len();

    // a link to the run opens it (a passing run is folded) and shows its case alone
    let url = format!("{}#case/synth-00000/run/0", file_url(&report));
    let (browser, mut page) = debugged(&bin, &url);
    let m = page.evaluate(SCROLL_PROBE);
    drop(page);
    let stderr = std::fs::read_to_string(&browser.stderr).unwrap_or_default();
    drop(browser);
    let number = |key: &str| m[key].as_f64().unwrap_or_else(|| panic!("{key} in {m:#}"));
    eprintln!(
        "1,000-turn run, {bytes} bytes: DOMContentLoaded {:.0} ms, load {:.0} ms, first paint {:.0} ms; \
         {} scroll steps of 800 px over {:.0} px: frame median {:.1} ms, p95 {:.1} ms, worst {:.1} ms; \
         at most {} turns in the DOM, {} elements at the end",
        number("domContentLoaded"),
        number("load"),
        number("firstPaint"),
        number("steps"),
        number("listHeight"),
        number("medianFrame"),
        number("p95Frame"),
        number("worstFrame"),
        number("mostTurnsInDom"),
        number("elements"),
    );
    assert_eq!((m["runOpen"].as_bool(), m["focused"].as_bool()), (Some(true), Some(true)), "{m:#}");
    assert_eq!(number("turns"), 1002.0, "before the first turn, 1,000 turns, after the last: {m:#}");
    // only the turns near the viewport are in the DOM (a 900 px window and 800 px
    // drawn beyond each edge hold ~80 folded turns), never the whole run
    assert!(number("mostTurnsInDom") < 150.0, "{m:#}");
    assert!(number("elements") < 5_000.0, "{m:#}");
    // the whole run was scrolled through: 1,002 folded turns, ~30 px each
    assert!(number("listHeight") > 20_000.0, "{m:#}");
    assert_eq!(number("lastDrawn"), 1001.0, "the last turn is drawn when reached: {m:#}");
    assert!(number("lastSeen") >= 990.0, "and was scrolled past: {m:#}");
    assert!(number("turnsSeen") > 20.0, "{m:#}");
    // generous bounds for a shared 2-core machine; the figures are printed above
    assert!(number("load") < 15_000.0, "{m:#}");
    assert!(number("medianFrame") < 200.0, "{m:#}");
    assert!(number("p95Frame") < 1_000.0, "{m:#}");
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
}
