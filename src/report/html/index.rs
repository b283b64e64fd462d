//! The top of the report: the verdict, the gates, the reliability cards, and the index
//! of cases — failing first, each with its one-line reason and a link to its first
//! divergent event — with the filters the script switches on.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Logs;
use super::analysis::{self, Pointer};
use super::markup::{Anchor, esc, percent, plural};
use crate::outcome::{CaseOutcome, GateOutcome, SuiteOutcome};
use crate::report::gate_detail;

/// The verdict line and the run it belongs to.
pub fn header(outcome: &SuiteOutcome) -> String {
    let (class, verdict) = if outcome.passed { ("pass", "passed") } else { ("fail", "failed") };
    let total = outcome.cases.len();
    let passed = outcome.passed_cases();
    let failed_gates = outcome.gates.iter().filter(|g| !g.passed).count();
    format!(
        "<header>\n<h1><span class=\"b {class}\">{}</span> stateval <code>{}</code>: {verdict}</h1>\n\
         <p class=\"muted\">{passed} of {total} case{} passed · {failed_gates} of {} gate{} failed · run <code>{}</code>{}{}{}</p>\n\
         </header>\n",
        verdict.to_uppercase(),
        esc(&outcome.pipeline),
        plural(total),
        outcome.gates.len(),
        plural(outcome.gates.len()),
        esc(&outcome.run_id),
        outcome.root.as_deref().map(|r| format!(" · root <code>{}</code>", esc(r))).unwrap_or_default(),
        outcome.signature.as_deref().map(|s| format!(" · <code>{}</code>", esc(s))).unwrap_or_default(),
        outcome
            .unisolated()
            .map(|why| format!(" · <strong>the code under test ran without isolation</strong>: {}", esc(why)))
            .unwrap_or_default(),
    )
}

/// The filters (hidden until the script shows them: without it they would do nothing).
pub fn filters(tags: &BTreeSet<String>, cases: usize) -> String {
    let mut out = String::from(
        "<nav id=\"filters\" aria-label=\"Filter cases\" hidden>\n\
         <label for=\"q\">Search<input id=\"q\" type=\"search\" placeholder=\"case id, dataset or reason\" autocomplete=\"off\"></label>\n\
         <label for=\"status\">Status<select id=\"status\"><option value=\"\">any</option><option value=\"fail\">failing</option>\
         <option value=\"pass\">passing</option></select></label>\n\
         <label for=\"tag\">Tag<select id=\"tag\"><option value=\"\">any</option>",
    );
    for tag in tags {
        let _ = write!(out, "<option>{}</option>", esc(tag));
    }
    let _ = write!(out, "</select></label>\n<span id=\"shown\" aria-live=\"polite\">{cases} cases</span>\n</nav>\n");
    out
}

/// One row per gate: scope, verdict, counts, pass rate, the 95 % Wilson lower bound
/// (how strong the evidence for that rate is), `min_cases` and the reason.
pub fn gates(gates: &[GateOutcome]) -> String {
    let mut out = String::from("<section id=\"gates\">\n<h2>Gates</h2>\n");
    if gates.is_empty() {
        out.push_str("<p class=\"muted\">No gate was recorded for this run.</p>\n</section>\n");
        return out;
    }
    out.push_str(
        "<table>\n<thead><tr><th scope=\"col\">Gate</th><th scope=\"col\">Result</th><th scope=\"col\" class=\"num\">Cases</th>\
         <th scope=\"col\" class=\"num\">Passed</th><th scope=\"col\" class=\"num\">Pass rate</th>\
         <th scope=\"col\" class=\"num\"><abbr title=\"lower end of the 95 % Wilson score interval on the pass rate\">Wilson 95 % low</abbr></th>\
         <th scope=\"col\" class=\"num\">min_cases</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
    );
    // a suite gates many card metrics: the explanation that they count no cases once
    let mut card_explained = false;
    for g in gates {
        let (class, result) = if g.passed { ("pass", "pass") } else { ("fail", "fail") };
        let dash = || "<span class=\"muted\">–</span>".to_string();
        let (cases, passed, rate, wilson) = if g.cases == 0 {
            (dash(), dash(), dash(), dash())
        } else {
            (
                g.cases.to_string(),
                g.passed_cases.to_string(),
                percent(g.pass_rate),
                percent(crate::gate::wilson_lower_bound_95(g.passed_cases, g.cases)),
            )
        };
        let card = g.scope.starts_with("reliability:");
        let why = match (g.cases, card, card_explained) {
            (0, true, true) => "<br><span class=\"muted\">A card metric, as above.</span>".to_string(),
            (0, _, _) => format!("<br><span class=\"muted\">{}</span>", esc(&no_cases(&g.scope))),
            _ => String::new(),
        };
        card_explained |= g.cases == 0 && card;
        let _ = writeln!(
            out,
            "<tr><th scope=\"row\"><code>{}</code></th><td><span class=\"b {class}\">{result}</span></td>\
             <td class=\"num\">{cases}</td><td class=\"num\">{passed}</td><td class=\"num\">{rate}</td><td class=\"num\">{wilson}</td>\
             <td class=\"num\">{}</td><td>{}{why}</td></tr>",
            esc(&g.scope),
            g.min_cases.map_or_else(dash, |n| n.to_string()),
            esc(gate_detail(g)),
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

/// The security scorecard. A suite's cases carry many tags (a threat, a channel, the
/// mitigation each needs), and a row for each buried the few a reader looks for. Shown
/// in the table: `overall`, the tags a gate names (the ones the pipeline holds to a
/// bound), and every tag where something went wrong (an attack succeeded, a control did
/// not complete, an attack went unscored). The others, where nothing did, are folded
/// below it under their count, each still there to read.
pub fn scorecard(card: &crate::outcome::Scorecard, gates: &[GateOutcome]) -> String {
    let head = "<table>\n<thead><tr><th scope=\"col\">Scope</th>\
         <th scope=\"col\" class=\"num\">Benign utility</th><th scope=\"col\" class=\"num\">Utility under attack</th>\
         <th scope=\"col\" class=\"num\">Attack success</th><th scope=\"col\" class=\"num\">Attempted</th>\
         <th scope=\"col\">Stopped by</th><th scope=\"col\" class=\"num\">Unscored</th></tr></thead>\n<tbody>\n";
    let mut out = format!(
        "<section id=\"scorecard\">\n<h2>Security scorecard</h2>\n<p class=\"muted\">Benign utility: controls that complete. \
         Utility under attack: attacks whose user task still completes. Attack success: attacks whose effect happened, \
         of those whose runs completed. Attempted: attacks the agent attempted, whether the boundary stopped them or not; \
         stopped by: the layer that withheld each attempt that took no effect.</p>\n{head}"
    );
    let gated: BTreeSet<&str> = gates.iter().map(|g| g.scope.as_str()).collect();
    let draw = |out: &mut String, row: &crate::report::ScoreRow| {
        let _ = writeln!(
            out,
            "<tr><th scope=\"row\"><code>{}</code></th><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&row.scope),
            esc(&row.benign_utility),
            esc(&row.utility_under_attack),
            esc(&row.asr),
            esc(&row.attempts),
            esc(&row.stopped_by),
            row.unscored
        );
    };
    let rows = crate::report::score_rows(card);
    let mut folded = Vec::new();
    for (row, counts) in rows.iter().zip(std::iter::once(&card.overall).chain(card.tags.values())) {
        let wrong = counts.attacks_succeeded > 0
            || counts.controls_completed < counts.controls
            || counts.attack_tasks_completed < counts.attack_tasks
            || counts.attacks_unscored > 0;
        if row.scope == "overall" || wrong || gated.contains(row.scope.as_str()) {
            draw(&mut out, row);
        } else {
            folded.push(row);
        }
    }
    out.push_str("</tbody>\n</table>\n");
    if !folded.is_empty() {
        let _ = write!(
            out,
            "<details class=\"more-tags\"><summary>{} more tag{}: no gate names {}, and nothing went wrong in {}</summary>\n{head}",
            folded.len(),
            plural(folded.len()),
            if folded.len() == 1 { "it" } else { "them" },
            if folded.len() == 1 { "it" } else { "any" },
        );
        for row in folded {
            draw(&mut out, row);
        }
        out.push_str("</tbody>\n</table>\n</details>\n");
    }
    out.push_str("</section>\n");
    out
}

/// Why a gate counted no cases, from its scope: what it measured instead, or why no
/// case fell under it. A gate shown as "0 cases" with no word of why reads as broken.
pub fn no_cases(scope: &str) -> String {
    let mut parts = scope.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("reliability"), Some(agent), Some(target)) => format!(
            "Measured on agent {agent}'s reliability card, not on cases: {target} is computed from all of the agent's \
             runs together (the card is under Reliability cards below), so there is no per-case count or pass rate."
        ),
        (Some("default"), None, None) => "No case was decided in this run, so there is no pass rate to bound.".into(),
        (Some(tag), None, None) => format!(
            "No case in this run carries the tag {tag} (none in the datasets, or all filtered out), so there is no \
             pass rate to bound; only min_cases can fail it."
        ),
        _ => "This gate measures something other than cases, so it counts none.".into(),
    }
}

/// The benchmark's cases the suite does not run: counted, each named in a fold.
pub fn not_run(not_run: &serde_json::Value) -> String {
    let n = |k: &str| not_run[k].as_u64().unwrap_or(0);
    let cases = not_run["cases"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = format!(
        "<section id=\"not-run\">\n<p><strong>Not run:</strong> {} attacks and {} controls of the benchmark are not \
         in this suite, so the scorecard's rates are of the rest (<code>{}</code> names each).</p>\n<details><summary>\
         {} cases not run, and why</summary>\n<ul>\n",
        n("attacks"),
        n("controls"),
        esc(not_run["file"].as_str().unwrap_or_default()),
        cases.len()
    );
    for case in cases {
        let _ = writeln!(
            out,
            "<li><code>{}</code>: {}</li>",
            esc(case["id"].as_str().unwrap_or_default()),
            esc(case["reason"].as_str().unwrap_or_default())
        );
    }
    out.push_str("</ul>\n</details>\n</section>\n");
    out
}

/// Reliability cards and other flat extras, each folded (they are reference, not news).
pub fn extras(extras: &serde_json::Map<String, serde_json::Value>) -> String {
    let cards = crate::report::metric_extras(extras);
    if cards.is_empty() {
        return String::new();
    }
    let mut out = String::from("<section id=\"cards\">\n<h2>Reliability cards</h2>\n");
    for (name, fields) in cards {
        let _ = write!(
            out,
            "<details><summary><code>{}</code> ({} value{})</summary>\n<table><thead><tr><th scope=\"col\">Metric</th>\
             <th scope=\"col\" class=\"num\">Value</th></tr></thead><tbody>\n",
            esc(name),
            fields.len(),
            plural(fields.len())
        );
        for (key, value) in fields {
            let _ = writeln!(
                out,
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
                esc(key),
                crate::report::metric_value(value)
            );
        }
        out.push_str("</tbody></table>\n</details>\n");
    }
    out.push_str("</section>\n");
    out
}

/// The index's opening: a heading with the counts and the table head.
pub fn open(total: usize, failing: usize) -> String {
    format!(
        "<section id=\"index\">\n<h2>Cases</h2>\n<p class=\"muted\">{failing} failing, {} passing; failing cases first, \
         in dataset order. A case's first divergent event is where to start reading it.</p>\n\
         <table>\n<thead><tr><th scope=\"col\">Result</th><th scope=\"col\">Case</th><th scope=\"col\">Tags</th>\
         <th scope=\"col\">Why it failed</th><th scope=\"col\">First divergent event</th></tr></thead>\n<tbody>\n",
        total - failing
    )
}

pub fn close() -> &'static str {
    "</tbody>\n</table>\n</section>\n"
}

/// The first divergent event of a failing case: that of its first failing run.
pub fn first_divergence(case: &CaseOutcome, logs: &dyn Logs) -> Option<(usize, Pointer)> {
    case.runs
        .iter()
        .filter(|r| !r.passed)
        .find_map(|run| analysis::analyse(case, run, logs).first.map(|p| (run.index, p)))
}

/// Does `reason` already say `what` (or what follows its label: `replay_miss: …`,
/// `differs from the golden: …`)?
fn said_by(reason: &str, what: &str) -> bool {
    let told = what.split_once(": ").map_or(what, |(_, rest)| rest);
    !what.is_empty() && (reason.contains(what) || (!told.is_empty() && reason.contains(told)))
}

/// One index row. The `data-*` attributes are what the filters read.
pub fn row(case: &CaseOutcome, pointer: Option<&(usize, Pointer)>) -> String {
    let anchor = Anchor::case(&case.id);
    let (class, status, label) = if case.passed { ("pass", "pass", "PASS") } else { ("fail", "fail", "FAIL") };
    let reason = case.failure().unwrap_or_default();
    let search = format!("{} {} {}", case.id, case.dataset, reason).to_lowercase();
    let tags_json = serde_json::to_string(&case.tags).unwrap_or_else(|_| "[]".into());
    let tags: Vec<String> = case.tags.iter().map(|t| format!("<code>{}</code>", esc(t))).collect();
    let more = case.failures().len().saturating_sub(1);
    let reason_html = match (reason.is_empty(), more) {
        (true, _) => "<span class=\"muted\">–</span>".to_string(),
        (false, 0) => esc(&reason).into_owned(),
        (false, n) => format!("{} <span class=\"muted\">(+{n} more)</span>", esc(&reason)),
    };
    let divergence = match pointer {
        Some((k, p)) => format!(
            "<a href=\"#{}\">run {k} · seq {}{} · {}</a>{}",
            anchor.seq(*k, p.seq),
            p.seq,
            p.turn.map(|t| format!(" · turn {t}")).unwrap_or_default(),
            esc(&p.kind),
            // the reason beside it already says what happened there: only the place
            if said_by(&reason, &p.what) {
                String::new()
            } else {
                format!("<br><span class=\"muted\">{}</span>", esc(&super::markup::cut(&p.what, 240).text))
            }
        ),
        // a case that failed only across its runs (a metric block: a trajectory, a
        // stability bound) has no event to start from: its blocks are where to look
        None => match &case.blocks.iter().filter(|b| !b.passed).collect::<Vec<_>>()[..] {
            [] => "<span class=\"muted\">–</span>".to_string(),
            [first, rest @ ..] => format!(
                "<a href=\"#{}\">metric block <code>{}</code>, across runs</a>{}",
                anchor.blocks(),
                esc(&first.name),
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(" <span class=\"muted\">(+{} more)</span>", rest.len())
                }
            ),
        },
    };
    format!(
        "<tr data-case=\"{id}\" data-status=\"{status}\" data-tags=\"{}\" data-search=\"{}\"><td><span class=\"b {class}\">{label}</span></td>\
         <td class=\"id\"><a href=\"#{id}\"><code>{}</code></a><br><span class=\"muted\">{}</span></td><td class=\"tags\">{}</td><td>{reason_html}</td><td>{divergence}</td></tr>\n",
        esc(&tags_json),
        esc(&search),
        esc(&case.id),
        esc(&case.dataset),
        tags.join(" "),
        id = anchor.id(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cases_not_run_are_counted_and_each_named_escaped() {
        let case = |id: &str, role: &str| serde_json::json!({"id": id, "tags": ["bench"], "role": role, "reason": "no <ground truth> & no check"});
        let extra = serde_json::json!({"file": "not-run.jsonl", "attacks": 1, "controls": 1,
                                       "cases": [case("a-1", "attack"), case("c-1", "control")]});
        let html = not_run(&extra);
        assert!(html.contains("1 attacks and 1 controls of the benchmark"), "{html}");
        assert!(html.contains("<li><code>a-1</code>: no &lt;ground truth&gt; &amp; no check</li>"), "{html}");
        assert!(html.contains("2 cases not run"), "{html}");
    }

    fn failing(error: &str) -> CaseOutcome {
        serde_json::from_value(
            serde_json::json!({"dataset": "d", "id": "c", "tags": [], "agent": "a", "source": "d.jsonl:1",
            "runs": [{"index": 0, "log": "l", "events": 3, "status": "replay_exhausted", "checks": [], "error": error,
                      "passed": false}], "passed": false}),
        )
        .expect("a case outcome")
    }

    fn counts(controls: (usize, usize), attacks: (usize, usize, usize)) -> crate::outcome::ScoreCounts {
        serde_json::from_value(serde_json::json!({
            "controls": controls.0, "controls_completed": controls.1, "attacks": attacks.0,
            "attacks_succeeded": attacks.1, "attacks_unscored": attacks.2, "attack_tasks": 0, "attack_tasks_completed": 0
        }))
        .expect("score counts")
    }

    /// The rows of the table shown, and of the folded one, by scope.
    fn scorecard_rows(html: &str) -> (Vec<String>, Vec<String>) {
        let scopes = |part: &str| -> Vec<String> {
            part.split("<tr><th scope=\"row\"><code>")
                .skip(1)
                .map(|r| r.split("</code>").next().unwrap_or_default().to_string())
                .collect()
        };
        match html.split_once("<details class=\"more-tags\">") {
            Some((shown, folded)) => (scopes(shown), scopes(folded)),
            None => (scopes(html), Vec::new()),
        }
    }

    #[test]
    fn the_scorecard_shows_overall_the_gated_tags_and_what_went_wrong_and_folds_the_rest() {
        let mut card = crate::outcome::Scorecard { overall: counts((4, 3), (6, 1, 0)), ..Default::default() };
        card.tags.insert("security".into(), counts((4, 3), (6, 1, 0)));
        card.tags.insert("needs-decoding".into(), counts((0, 0), (2, 0, 0)));
        card.tags.insert("encoding".into(), counts((0, 0), (2, 1, 0)));
        card.tags.insert("negative-control".into(), counts((4, 3), (0, 0, 0)));
        card.tags.insert("unscored-here".into(), counts((0, 0), (1, 0, 1)));
        card.tags.insert("taint".into(), counts((1, 1), (2, 0, 0)));
        let gate = |scope: &str| -> GateOutcome {
            serde_json::from_value(serde_json::json!({"scope": scope, "cases": 1, "passed_cases": 1, "pass_rate": 1.0,
                                                      "passed": true, "reason": "ok"}))
            .expect("a gate")
        };
        let html = scorecard(&card, &[gate("default"), gate("taint")]);
        let (shown, folded) = scorecard_rows(&html);
        assert_eq!(shown, ["overall", "encoding", "negative-control", "security", "taint", "unscored-here"], "{html}");
        assert_eq!(folded, ["needs-decoding"], "{html}");
        assert!(
            html.contains("<summary>1 more tag: no gate names it, and nothing went wrong in it</summary>"),
            "{html}"
        );

        // nothing to fold: no <details>
        let html = scorecard(&card, &[gate("needs-decoding"), gate("taint")]);
        assert_eq!(scorecard_rows(&html).1, Vec::<String>::new());
        assert!(!html.contains("<details"), "{html}");
    }

    #[test]
    fn a_case_failing_only_on_metric_blocks_links_its_blocks_in_the_index() {
        let mut case: CaseOutcome = serde_json::from_value(serde_json::json!({
            "dataset": "d", "id": "loop", "tags": [], "agent": "a", "source": "d.jsonl:1",
            "runs": [{"index": 0, "log": "l", "events": 3, "status": "completed", "checks": [], "passed": true}],
            "blocks": [{"name": "trajectory", "passed": true, "reason": "ok"},
                       {"name": "golden_path", "passed": false, "reason": "golden_path.passed = 0, below the bound 1"},
                       {"name": "stability", "passed": false, "reason": "stability.weakest_score = 0.2"}],
            "passed": false}))
        .expect("a case outcome");
        let html = row(&case, None);
        assert!(
            html.contains(
                "<a href=\"#case/loop/blocks\">metric block <code>golden_path</code>, across runs</a> \
                 <span class=\"muted\">(+1 more)</span></td></tr>"
            ),
            "{html}"
        );
        case.blocks.retain(|b| b.passed);
        assert!(row(&case, None).ends_with("<td><span class=\"muted\">–</span></td></tr>\n"));
    }

    #[test]
    fn the_index_names_the_first_divergent_event_without_repeating_the_reason_beside_it() {
        let pointer = |what: &str| (0, Pointer { seq: 4, turn: Some(0), kind: "error".into(), what: what.into() });
        // the event says what the reason says: only its place is shown
        let said = row(
            &failing("no recorded response at position 1"),
            Some(&pointer("replay_miss: no recorded response at position 1")),
        );
        assert!(said.contains("run 0 · seq 4 · turn 0 · error</a></td>"), "{said}");
        // it says more: shown
        let more = row(&failing("the run failed"), Some(&pointer("replay_diverged at position 2")));
        assert!(more.contains("<span class=\"muted\">replay_diverged at position 2</span>"), "{more}");
    }
}
