//! The Markdown summary, sized for a pull-request comment: the verdict first, then the
//! failing cases with their reasons (what a reviewer acts on), the gates, and the
//! reliability cards folded in `<details>` (reference, not news). Extras that are not
//! flat objects of numbers are named and left to the JSON report.
//!
//! Size: a comment has a hard limit (GitHub's is 65,536 characters), so the summary
//! never exceeds [`LIMIT`] bytes at any suite size. Gates and cards get fixed shares
//! ([`GATES_BUDGET`], [`CARDS_BUDGET`]), failing cases whatever is left, and whatever
//! does not fit is counted (`… and 1,200 more failing cases`) rather than cut mid-row.
//! Each case shows at most [`MAX_REASONS`] reasons of at most [`REASON_CHARS`]
//! characters, and identifiers are cut at [`ID_CHARS`].
//!
//! Escaping targets GitHub-flavoured Markdown inside table cells. Identifiers (case
//! ids, datasets, gate scopes, extra keys) are code spans, fenced with more backticks
//! than they contain. Free text (reasons) is backslash-escaped wherever it could start
//! markup (`*`, `_`, `[`, `<`, `&`, …), and line breaks become `<br>`. In both, `|` is
//! `\|`, which GFM tables unescape before inline parsing (even inside code spans).

use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use crate::golden::churn::{self, Churn};
use crate::outcome::{CaseOutcome, GateOutcome, SuiteOutcome};
use crate::report::gate_detail;

/// The most bytes a summary has: under 60 KB, so it fits a GitHub comment (65,536
/// characters) with room for whatever a CI step adds around it.
pub const LIMIT: usize = 60_000;
/// Bytes the gates table may take; failing gates are kept first when it is exceeded.
pub const GATES_BUDGET: usize = 16_000;
/// Bytes the reliability cards may take.
pub const CARDS_BUDGET: usize = 12_000;
/// Bytes the golden groups may take.
pub const GROUPS_BUDGET: usize = 8_000;
/// Reasons shown per failing case (the rest are counted).
pub const MAX_REASONS: usize = 3;
/// Characters of one reason.
pub const REASON_CHARS: usize = 300;
/// Characters of one line of an agent's output or of stateval's refusal.
pub const DIAGNOSIS_LINE_CHARS: usize = 200;
/// Characters of one identifier (case id, dataset, gate scope).
pub const ID_CHARS: usize = 120;
/// Room kept for the line that counts the failing cases left out.
const MORE_LINE: usize = 200;

/// `outcome` as a Markdown summary, in memory.
pub fn render(outcome: &SuiteOutcome) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as a Markdown summary of at most [`LIMIT`] bytes, reading the cases
/// once for the failing ones.
pub fn write(outcome: &SuiteOutcome, out: &mut dyn io::Write) -> io::Result<()> {
    // Parts are built in `String`s (`fmt::Write` into a `String` cannot fail, so those
    // results are ignored); the gates and cards first, so the failing cases know how
    // much room is left.
    let mut head = String::new();
    let (icon, verdict) = if outcome.passed { ("✅", "passed") } else { ("❌", "failed") };
    let failed_gates = outcome.gates.iter().filter(|g| !g.passed).count();
    let _ = writeln!(head, "## {icon} stateval {}: {verdict}\n", code(&outcome.pipeline));
    let _ = writeln!(
        head,
        "{} of {} cases passed · {} of {} gates failed · run {}{}{}{}\n",
        outcome.passed_cases(),
        outcome.cases.len(),
        failed_gates,
        outcome.gates.len(),
        code(&outcome.run_id),
        outcome.root.as_deref().map(|r| format!(" · root {}", code(r))).unwrap_or_default(),
        outcome.signature.as_deref().map(|s| format!(" · {}", code(s))).unwrap_or_default(),
        outcome
            .unisolated()
            .map(|why| format!(" · **the code under test ran without isolation**: {}", code(why)))
            .unwrap_or_default()
    );
    // runs that did not complete come after the failing cases, never with an accept
    let mut tail = String::new();
    if let Some(churn) = Churn::from_extras(&outcome.extras) {
        if !churn.groups.is_empty() {
            head.push_str(&golden_groups(&churn));
        }
        if let Some(incomplete) = &churn.incomplete {
            let _ = writeln!(
                tail,
                "### Runs that did not complete

{}
",
                text(&clip(&incomplete.summary(), 4 * REASON_CHARS))
            );
        }
    }
    tail.push_str(&gates(&outcome.gates));
    if let Some(card) = &outcome.scorecard {
        tail.push_str(&scorecard(card));
    }
    if let Some(not_run) = outcome.extras.get(crate::outcome::NOT_RUN) {
        tail.push_str(&not_run_section(not_run));
    }
    tail.push_str(&render_extras(&outcome.extras));

    out.write_all(head.as_bytes())?;
    let mut room = LIMIT.saturating_sub(head.len() + tail.len() + MORE_LINE);
    let failing = outcome.cases.len() - outcome.passed_cases();
    if failing > 0 {
        let heading = format!("### Failing cases ({failing})\n\n| Dataset | Case | Reasons |\n| --- | --- | --- |\n");
        room = room.saturating_sub(heading.len());
        out.write_all(heading.as_bytes())?;
        let mut shown = 0;
        for case in outcome.cases.iter() {
            let case = case?;
            if case.passed {
                continue;
            }
            let row = failing_row(&case);
            if row.len() > room {
                break;
            }
            room -= row.len();
            out.write_all(row.as_bytes())?;
            shown += 1;
        }
        if shown < failing {
            let left = failing - shown;
            let line = format!(
                "\n… and {left} more failing case{} (the JSON and HTML reports list them all).\n",
                if left == 1 { "" } else { "s" }
            );
            out.write_all(line.as_bytes())?;
        }
        out.write_all(b"\n")?;
    }
    out.write_all(tail.as_bytes())
}

/// One failing case: its dataset, id, and its first [`MAX_REASONS`] reasons.
fn failing_row(case: &CaseOutcome) -> String {
    let reasons = case.failures();
    let mut cells: Vec<String> = reasons.iter().take(MAX_REASONS).map(|r| text(&clip(r, REASON_CHARS))).collect();
    if reasons.len() > MAX_REASONS {
        cells.push(format!("(+{} more)", reasons.len() - MAX_REASONS));
    }
    if cells.is_empty() {
        cells.push("case failed without a recorded reason".into());
    }
    // an external agent's failed runs, folded: its last output lines, stateval's refusal
    for run in &case.runs {
        if let Some(diagnosis) = &run.diagnosis {
            let lines: Vec<String> = diagnosis.lines().iter().map(|l| text(&clip(l, DIAGNOSIS_LINE_CHARS))).collect();
            cells.push(format!(
                "<details><summary>run {}: the agent's output</summary>{}</details>",
                run.index,
                lines.join("<br>")
            ));
        }
    }
    format!(
        "| {} | {} | {} |\n",
        code(&clip(&case.dataset, ID_CHARS)),
        code(&clip(&case.id, ID_CHARS)),
        cells.join("<br>")
    )
}

/// The gates table, within [`GATES_BUDGET`]: every gate in order when they fit, else
/// the failing ones first and the rest counted.
fn gates(gates: &[GateOutcome]) -> String {
    if gates.is_empty() {
        return String::new();
    }
    let mut out = String::from("### Gates\n\n");
    out.push_str("| Gate | Result | Cases | Passed | Pass rate | Reason |\n");
    out.push_str("| --- | --- | ---: | ---: | ---: | --- |\n");
    let rows: Vec<(bool, String)> = gates.iter().map(|g| (g.passed, gate_row(g))).collect();
    let all: usize = rows.iter().map(|(_, r)| r.len()).sum();
    let mut left_out = 0;
    if out.len() + all <= GATES_BUDGET {
        rows.iter().for_each(|(_, r)| out.push_str(r));
    } else {
        let failing_first = rows.iter().filter(|(p, _)| !p).chain(rows.iter().filter(|(p, _)| *p));
        for (_, row) in failing_first {
            if out.len() + row.len() + MORE_LINE > GATES_BUDGET {
                left_out += 1;
                continue;
            }
            out.push_str(row);
        }
    }
    if left_out > 0 {
        let _ = writeln!(out, "\n… and {left_out} more gates (the JSON report lists them all).");
    }
    out.push('\n');
    out
}

/// Rows of the security scorecard the Markdown summary shows; the JSON report has all.
const SCORE_ROWS: usize = 30;

/// The security scorecard: benign utility, utility under attack and attack success,
/// overall and per tag.
fn scorecard(card: &crate::outcome::Scorecard) -> String {
    let rows = crate::report::score_rows(card);
    let mut out = String::from(
        "### Security scorecard\n\n| Scope | Benign utility | Utility under attack | Attack success | Attempted | \
         Stopped by | Unscored |\n| --- | ---: | ---: | ---: | ---: | --- | ---: |\n",
    );
    for row in rows.iter().take(SCORE_ROWS) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            code(&clip(&row.scope, ID_CHARS)),
            row.benign_utility,
            row.utility_under_attack,
            row.asr,
            row.attempts,
            text(&row.stopped_by),
            row.unscored
        );
    }
    if rows.len() > SCORE_ROWS {
        let _ = writeln!(out, "\n… and {} more tags (the JSON report lists them all).", rows.len() - SCORE_ROWS);
    }
    out.push('\n');
    out
}

/// The benchmark's cases the suite does not run: counted, and the first named.
fn not_run_section(not_run: &Value) -> String {
    let n = |k: &str| not_run[k].as_u64().unwrap_or(0);
    let mut out = format!(
        "**Not run:** {} attacks and {} controls of the benchmark are not in this suite, so the rates above are of \
         the rest; {} names each, and why.\n\n",
        n("attacks"),
        n("controls"),
        code(not_run["file"].as_str().unwrap_or_default())
    );
    let cases = not_run["cases"].as_array().map(Vec::as_slice).unwrap_or_default();
    for case in cases.iter().take(SCORE_ROWS) {
        let _ = writeln!(
            out,
            "- {}: {}",
            code(&clip(case["id"].as_str().unwrap_or_default(), ID_CHARS)),
            text(&clip(case["reason"].as_str().unwrap_or_default(), REASON_CHARS))
        );
    }
    if cases.len() > SCORE_ROWS {
        let _ = writeln!(out, "- … and {} more (the JSON report lists them all)", cases.len() - SCORE_ROWS);
    }
    out.push('\n');
    out
}

fn gate_row(gate: &GateOutcome) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} |\n",
        code(&clip(&gate.scope, ID_CHARS)),
        if gate.passed { "✅ pass" } else { "❌ fail" },
        gate.cases,
        gate.passed_cases,
        rate(gate.passed_cases, gate.cases),
        text(&clip(gate_detail(gate), REASON_CHARS))
    )
}

/// The golden groups: a table of causes within [`GROUPS_BUDGET`], each with its size,
/// first cases and the command that accepts it; the gates that fail only because of
/// them.
fn golden_groups(churn: &Churn) -> String {
    let mut out = format!(
        "### Goldens differ for {} cause{}\n\n| Cause | Cases | What changed | First cases | Accept with |\n| --- | ---: | --- | --- | --- |\n",
        churn.groups.len(),
        if churn.groups.len() == 1 { "" } else { "s" }
    );
    let mut left_out = 0;
    for g in &churn.groups {
        let row = format!(
            "| {} | {} | {} | {} | {} |\n",
            code(&clip(&g.id, ID_CHARS)),
            g.size(),
            text(&clip(&g.what, REASON_CHARS)),
            text(&clip(&g.names(), REASON_CHARS)),
            code(&clip(&g.accept, REASON_CHARS))
        );
        if out.len() + row.len() + MORE_LINE > GROUPS_BUDGET {
            left_out += 1;
            continue;
        }
        out.push_str(&row);
    }
    if left_out > 0 {
        let _ = writeln!(out, "\n… and {left_out} more causes (the JSON report lists them all).");
    }
    if !churn.gates_only_goldens.is_empty() {
        let gates: Vec<String> = churn.gates_only_goldens.iter().map(|g| code(&clip(g, ID_CHARS))).collect();
        let _ = writeln!(out, "\nGates failing only because of these golden changes: {}.", gates.join(", "));
    }
    out.push_str("\n`stateval golden review` goes through the causes on a terminal.\n\n");
    out
}

/// Cards (extras that are objects whose values are all numbers) folded in one
/// `<details>`, one table each, within [`CARDS_BUDGET`]; the names of the other extras,
/// so nothing disappears silently. Keys are sorted here, not trusted to the map, so
/// the order holds even if serde_json's `preserve_order` is ever enabled.
fn render_extras(extras: &serde_json::Map<String, Value>) -> String {
    let mut out = String::new();
    let mut names: Vec<&String> = extras.keys().collect();
    names.sort();
    let mut other = Vec::new();
    let mut cards = Vec::new();
    for name in names {
        match extras.get(name) {
            // null is an undefined metric (docs/metrics.md §6), shown as n/a, never as 0
            Some(Value::Object(fields)) if fields.values().all(|v| v.is_number() || v.is_null()) => {
                let mut card = format!("#### {}\n\n| Metric | Value |\n| --- | ---: |\n", code(&clip(name, ID_CHARS)));
                let mut keys: Vec<&String> = fields.keys().collect();
                keys.sort();
                for key in keys {
                    if let Some(value) = fields.get(key) {
                        let _ = writeln!(
                            card,
                            "| {} | {} |",
                            code(&clip(key, ID_CHARS)),
                            crate::report::metric_value(value)
                        );
                    }
                }
                cards.push(card);
            }
            // shown at the top, on their own; the cases not run beside the scorecard
            _ if name == churn::EXTRA || name == crate::outcome::NOT_RUN => {}
            _ => other.push(code(&clip(name, ID_CHARS))),
        }
    }
    if !cards.is_empty() {
        let _ = write!(out, "<details>\n<summary>Reliability cards ({})</summary>\n", cards.len());
        let (mut used, mut left_out) = (0, 0);
        for card in &cards {
            if used + card.len() + MORE_LINE > CARDS_BUDGET {
                left_out += 1;
                continue;
            }
            used += card.len();
            out.push('\n');
            out.push_str(card);
        }
        if left_out > 0 {
            let _ = writeln!(out, "\n… and {left_out} more cards (the JSON report lists them all).");
        }
        out.push_str("\n</details>\n");
    }
    if !other.is_empty() {
        let shown: Vec<String> = other.iter().take(20).cloned().collect();
        let more = if other.len() > 20 { format!(" and {} more", other.len() - 20) } else { String::new() };
        let _ = writeln!(out, "\nOther extras (see the JSON report): {}{more}.", shown.join(", "));
    }
    out
}

/// `raw` cut to `chars` characters, with `…` when it was.
fn clip(raw: &str, chars: usize) -> String {
    match raw.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &raw[..at]),
        None => raw.to_string(),
    }
}

/// A pass rate from counts, rounded down to 0.1 % (exact integer arithmetic, so a
/// rate just under 100 % never shows as 100.0 %); `–` for an empty gate.
fn rate(passed: usize, cases: usize) -> String {
    if cases == 0 {
        return "–".into();
    }
    let permille = passed.saturating_mul(1000) / cases;
    format!("{}.{} %", permille / 10, permille % 10)
}

/// An identifier as a code span that survives any content: the fence is one backtick
/// longer than the longest run inside, padded when the content touches a backtick or
/// a space, line breaks become spaces (as code spans would render them anyway).
fn code(raw: &str) -> String {
    let content: String = raw
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect::<String>()
        .replace('|', "\\|");
    if content.is_empty() {
        return String::new();
    }
    let mut longest = 0;
    let mut run = 0;
    for c in content.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = content.starts_with(['`', ' ']) || content.ends_with(['`', ' ']);
    let space = if pad { " " } else { "" };
    format!("{fence}{space}{content}{space}{fence}")
}

/// Free text for a table cell: markup characters backslash-escaped, line breaks as
/// `<br>`, other control characters dropped.
fn text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push_str("<br>");
                }
            }
            '\n' => out.push_str("<br>"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '&' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn md(outcome: &SuiteOutcome) -> String {
        render(outcome).unwrap_or_else(|e| panic!("render failed: {e}"))
    }

    #[test]
    fn the_markdown_summary_is_pinned() {
        insta::assert_snapshot!("markdown", md(&fixture::suite()));
    }

    #[test]
    fn the_summary_opens_with_the_verdict() {
        let mut outcome = fixture::suite();
        assert!(md(&outcome).starts_with("## ❌ stateval `ci`: failed\n"));
        outcome.passed = true;
        assert!(md(&outcome).starts_with("## ✅ stateval `ci`: passed\n"));
    }

    #[test]
    fn every_table_row_has_as_many_cells_as_its_header() {
        // Count unescaped pipes: a `|` leaking from a case id or reason adds a cell.
        let rendered = md(&fixture::suite());
        let mut expected = None;
        for line in rendered.lines() {
            if !line.starts_with('|') {
                expected = None;
                continue;
            }
            let mut pipes = 0;
            let mut escaped = false;
            for c in line.chars() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '|') => pipes += 1,
                    _ => escaped = false,
                }
            }
            let want = *expected.get_or_insert(pipes);
            assert_eq!(pipes, want, "{line}");
        }
    }

    #[test]
    fn a_code_span_fence_outgrows_the_backticks_inside() {
        assert_eq!(code("plain"), "`plain`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("``x"), "``` ``x ```");
        assert_eq!(code("a|b"), "`a\\|b`");
        assert_eq!(code("two\nlines"), "`two lines`");
    }

    #[test]
    fn free_text_escapes_markup_and_keeps_line_breaks_visible() {
        assert_eq!(text("a|b"), "a\\|b");
        assert_eq!(text("`x` *y* <b>&amp;"), "\\`x\\` \\*y\\* \\<b\\>\\&amp;");
        assert_eq!(text("one\ntwo\r\nthree"), "one<br>two<br>three");
        assert_eq!(text("esc\u{1b}[0m"), "esc\\[0m");
    }

    #[test]
    fn rates_round_down_from_counts() {
        assert_eq!(rate(1, 3), "33.3 %");
        assert_eq!(rate(2, 3), "66.6 %");
        assert_eq!(rate(9995, 10_000), "99.9 %");
        assert_eq!(rate(0, 0), "–");
    }

    #[test]
    fn cards_fold_into_details_as_tables_and_other_extras_are_named() {
        let rendered = md(&fixture::suite());
        assert!(
            rendered.contains(
                "<details>\n<summary>Reliability cards (1)</summary>\n\n#### `reliability`\n\n| Metric | Value |\n\
                 | --- | ---: |\n| `pass_at_1` | 0.333 |\n| `pass_hat_k` | 0.000 |\n| `runs` | 4 |\n\
                 | `` tool\\|calls` `` | 12.500 |\n\n</details>\n"
            ),
            "{rendered}"
        );
        assert!(rendered.ends_with("\nOther extras (see the JSON report): `notes`.\n"));
    }

    #[test]
    fn no_extras_means_no_cards() {
        let mut outcome = fixture::suite();
        outcome.extras.clear();
        let rendered = md(&outcome);
        assert!(!rendered.contains("<details>") && !rendered.contains("Other extras"), "{rendered}");
    }

    #[test]
    fn golden_groups_come_before_the_failing_cases_with_their_accept_command() {
        let rendered = md(&fixture::churned());
        let groups = rendered.find("### Goldens differ for 1 cause").expect("a groups section");
        assert!(groups < rendered.find("### Failing cases").expect("failing cases"), "{rendered}");
        assert!(rendered.contains(
            "| `tools:fixtures/tools/treasury.json` | 2 cases (2 runs) | tool manifest fixtures/tools/treasury.json changed \
             | churned-one, churned-two | `stateval golden accept --cause tools:fixtures/tools/treasury.json` |"
        ));
        assert!(rendered.contains("Gates failing only because of these golden changes: `smoke`."), "{rendered}");
        // the groups are not named again among the other extras
        assert!(!rendered.contains("`golden_groups`"), "{rendered}");
    }

    #[test]
    fn failing_cases_come_before_the_gates_with_all_their_reasons() {
        let rendered = md(&fixture::suite());
        let failing = rendered.find("### Failing cases (2)").unwrap_or(usize::MAX);
        assert!(failing < rendered.find("### Gates").unwrap_or(0), "{rendered}");
        // the tricky case fails two checks, in two runs: both reasons, one cell
        assert!(rendered.contains("\\| \\<deny\\> \\& 'allow'<br>run 1: memory.semantic.payee: value"), "{rendered}");
    }

    /// `n` failing cases with long ids and `reasons` long reasons each.
    fn big_suite(n: usize, reasons: usize, gates: usize) -> SuiteOutcome {
        let mut outcome = fixture::suite();
        let template = outcome.cases.to_vec().unwrap_or_default().remove(1);
        let cases: Vec<CaseOutcome> = (0..n)
            .map(|i| {
                let mut case = template.clone();
                case.id = format!("case-{i:06}-{}", "x".repeat(300));
                case.runs[0].checks = (0..reasons)
                    .map(|r| crate::outcome::Check {
                        name: format!("check{r}"),
                        passed: false,
                        reason: "why ".repeat(200),
                        expected: None,
                        actual: None,
                    })
                    .collect();
                case
            })
            .collect();
        outcome.cases = cases.into();
        let gate = outcome.gates[2].clone();
        outcome.gates = (0..gates).map(|i| GateOutcome { scope: format!("tag-{i}"), ..gate.clone() }).collect();
        outcome
    }

    #[test]
    fn the_summary_stays_under_the_limit_at_any_suite_size() {
        for (cases, reasons, gates) in [(0, 0, 0), (10, 1, 3), (5_000, 12, 2_000)] {
            let rendered = md(&big_suite(cases, reasons, gates));
            assert!(rendered.len() <= LIMIT, "{cases} cases: {} bytes", rendered.len());
        }
        let rendered = md(&big_suite(5_000, 12, 2_000));
        // every row whole; what did not fit is counted
        assert!(rendered.contains("more failing cases (the JSON and HTML reports list them all)."), "{rendered}");
        assert!(rendered.contains("more gates (the JSON report lists them all)."));
        assert!(rendered.contains("(+10 more)"), "at most three reasons a case (12 + 1 in run 1)");
        assert!(rendered.contains("<details>"), "the cards still come last");
    }
}
