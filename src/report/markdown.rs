//! The Markdown summary, sized for a pull-request comment: the verdict first, then the
//! gates, the failing cases with their first reason, a count of the passing ones, and
//! any suite extras that are flat objects of numbers (reliability cards and the like),
//! one two-column table each. Other extras are named and left to the JSON report.
//!
//! Escaping targets GitHub-flavoured Markdown inside table cells. Identifiers (case
//! ids, datasets, gate scopes, extra keys) are code spans, fenced with more backticks
//! than they contain. Free text (reasons) is backslash-escaped wherever it could start
//! markup (`*`, `_`, `[`, `<`, `&`, …), and line breaks become `<br>`. In both, `|` is
//! `\|`, which GFM tables unescape before inline parsing (even inside code spans).

use std::fmt::Write as _;
use std::io;

use serde_json::Value;

use crate::outcome::SuiteOutcome;
use crate::report::gate_detail;

/// `outcome` as a Markdown summary, in memory.
pub fn render(outcome: &SuiteOutcome) -> io::Result<String> {
    let mut bytes = Vec::new();
    write(outcome, &mut bytes)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes `outcome` as a Markdown summary, reading the cases once for the failing ones.
pub fn write(outcome: &SuiteOutcome, out: &mut dyn io::Write) -> io::Result<()> {
    // Parts are built in a `String` (`fmt::Write` into a `String` cannot fail, so those
    // results are ignored) and written out whole.
    let mut text = String::new();
    let (icon, verdict) = if outcome.passed { ("✅", "passed") } else { ("❌", "failed") };
    let failed_gates = outcome.gates.iter().filter(|g| !g.passed).count();
    let _ = writeln!(text, "## {icon} stateval {}: {verdict}\n", code(&outcome.pipeline));
    let _ = writeln!(
        text,
        "{} of {} cases passed · {} of {} gates failed · run {}\n",
        outcome.passed_cases(),
        outcome.cases.len(),
        failed_gates,
        outcome.gates.len(),
        code(&outcome.run_id)
    );

    if !outcome.gates.is_empty() {
        text.push_str("### Gates\n\n");
        text.push_str("| Gate | Result | Cases | Passed | Pass rate | Reason |\n");
        text.push_str("| --- | --- | ---: | ---: | ---: | --- |\n");
        for gate in &outcome.gates {
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {} | {} |",
                code(&gate.scope),
                if gate.passed { "✅ pass" } else { "❌ fail" },
                gate.cases,
                gate.passed_cases,
                rate(gate.passed_cases, gate.cases),
                self::text(gate_detail(gate))
            );
        }
        text.push('\n');
    }

    let failing = outcome.cases.len() - outcome.passed_cases();
    if failing > 0 {
        let _ = writeln!(text, "### Failing cases ({failing})\n");
        text.push_str("| Dataset | Case | First reason |\n");
        text.push_str("| --- | --- | --- |\n");
        out.write_all(text.as_bytes())?;
        text.clear();
        for case in outcome.cases.iter() {
            let case = case?;
            if case.passed {
                continue;
            }
            let reason = case.failure().unwrap_or_else(|| "case failed without a recorded reason".into());
            let row = format!("| {} | {} | {} |\n", code(&case.dataset), code(&case.id), self::text(&reason));
            out.write_all(row.as_bytes())?;
        }
        text.push('\n');
    }

    let passing = outcome.passed_cases();
    let _ = writeln!(text, "{passing} {} passed.", if passing == 1 { "case" } else { "cases" });

    render_extras(&mut text, &outcome.extras);
    out.write_all(text.as_bytes())
}

/// One table per extra that is an object whose values are all numbers; the names of
/// the rest, so nothing disappears silently. Keys are sorted here, not trusted to the
/// map, so the order holds even if serde_json's `preserve_order` is ever enabled.
fn render_extras(out: &mut String, extras: &serde_json::Map<String, Value>) {
    let mut names: Vec<&String> = extras.keys().collect();
    names.sort();
    let mut other = Vec::new();
    let mut heading = false;
    for name in names {
        let table = match extras.get(name) {
            // null is an undefined metric (docs/metrics.md §6), shown as n/a, never as 0
            Some(Value::Object(fields)) if fields.values().all(|v| v.is_number() || v.is_null()) => fields,
            _ => {
                other.push(code(name));
                continue;
            }
        };
        if !heading {
            out.push_str("\n### Extras\n");
            heading = true;
        }
        let _ = writeln!(out, "\n#### {}\n", code(name));
        out.push_str("| Metric | Value |\n| --- | ---: |\n");
        let mut keys: Vec<&String> = table.keys().collect();
        keys.sort();
        for key in keys {
            if let Some(value) = table.get(key) {
                let _ = writeln!(out, "| {} | {} |", code(key), crate::report::metric_value(value));
            }
        }
    }
    if !other.is_empty() {
        let _ = writeln!(out, "\nOther extras (see the JSON report): {}.", other.join(", "));
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
    fn extras_that_are_objects_of_numbers_become_tables_and_others_are_named() {
        let rendered = md(&fixture::suite());
        assert!(
            rendered.contains(
                "#### `reliability`\n\n| Metric | Value |\n| --- | ---: |\n\
             | `pass_at_1` | 0.333 |\n| `pass_hat_k` | 0.000 |\n| `runs` | 4 |\n\
             | `` tool\\|calls` `` | 12.500 |\n"
            ),
            "{rendered}"
        );
        assert!(rendered.ends_with("\nOther extras (see the JSON report): `notes`.\n"));
    }

    #[test]
    fn no_extras_means_no_extras_section() {
        let mut outcome = fixture::suite();
        outcome.extras.clear();
        let rendered = md(&outcome);
        assert!(!rendered.contains("Extras"), "{rendered}");
        assert!(rendered.ends_with("1 case passed.\n"), "{rendered}");
    }
}
