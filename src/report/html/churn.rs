//! The golden groups at the top of the page: failed goldens by cause, each with how
//! many cases, links to the first of them and the command that accepts exactly that
//! change (docs/report.md). A section of its own, before the gates, so a page of
//! hundreds of alike golden failures opens on the one reason behind them.

use std::fmt::Write as _;

use super::markup::{Anchor, esc, plural};
use crate::golden::churn::{Churn, Incomplete, explains};

/// The section, or nothing when no golden differed.
pub fn section(extras: &serde_json::Map<String, serde_json::Value>) -> String {
    let Some(churn) = Churn::from_extras(extras) else { return String::new() };
    if churn.groups.is_empty() {
        // only runs that did not complete: no cause to accept, only what to fix
        return match &churn.incomplete {
            Some(incomplete) => format!(
                "<section id=\"golden-groups\">\n<h2>Runs that did not complete</h2>\n{}</section>\n",
                incomplete_note(incomplete)
            ),
            None => String::new(),
        };
    }
    let n = churn.groups.len();
    let mut out = format!(
        "<section id=\"golden-groups\">\n<h2>Goldens differ for {n} cause{}</h2>\n<table>\n<thead><tr>\
         <th scope=\"col\">Cause</th><th scope=\"col\" class=\"num\">Cases</th><th scope=\"col\" class=\"num\">Runs</th>\
         <th scope=\"col\">What changed</th><th scope=\"col\">First cases</th><th scope=\"col\">Accept with</th></tr></thead>\n<tbody>\n",
        plural(n)
    );
    for g in &churn.groups {
        let class = if explains(g.kind) { "warn" } else { "fail" };
        let links: Vec<String> = g
            .first
            .iter()
            .map(|id| format!("<a href=\"#{}\"><code>{}</code></a>", esc(Anchor::case(id).id()), esc(id)))
            .collect();
        let more = g.cases.saturating_sub(g.first.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        let _ = writeln!(
            out,
            "<tr><th scope=\"row\"><span class=\"b {class}\">{}</span> <code>{}</code></th><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td><td>{}{more}</td><td><code>{}</code></td></tr>",
            g.kind.as_str(),
            esc(&g.id),
            g.cases,
            g.runs,
            esc(&g.what),
            links.join(", "),
            esc(&g.accept),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    if !churn.gates_only_goldens.is_empty() {
        let gates: Vec<String> = churn.gates_only_goldens.iter().map(|g| format!("<code>{}</code>", esc(g))).collect();
        let _ = writeln!(out, "<p>Gates failing only because of these golden changes: {}.</p>", gates.join(", "));
    }
    if let Some(incomplete) = &churn.incomplete {
        out.push_str(&incomplete_note(incomplete));
    }
    out.push_str("<p class=\"muted\"><code>stateval golden review</code> goes through the causes on a terminal.</p>\n</section>\n");
    out
}

/// The runs whose golden differs but which did not complete on their own: in no
/// group, with no command, since their golden would bless the breakage.
fn incomplete_note(incomplete: &Incomplete) -> String {
    let runs: Vec<String> = incomplete
        .first
        .iter()
        .map(|r| {
            format!(
                "<a href=\"#{}\"><code>{}</code></a> (run {}): {}",
                esc(Anchor::case(&r.case).id()),
                esc(&r.case),
                r.k,
                esc(&r.why)
            )
        })
        .collect();
    let more = incomplete.runs.saturating_sub(incomplete.first.len());
    let more = if more > 0 { format!("; and {more} more") } else { String::new() };
    format!(
        "<p><span class=\"b fail\">not accepted</span> {} run{} that did not complete on their own; fix them before accepting \
         goldens (no golden is taken from them): {}{more}</p>\n",
        incomplete.runs,
        plural(incomplete.runs),
        runs.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_links_its_first_cases_and_shows_its_accept_command_and_no_groups_means_no_section() {
        let outcome = crate::report::fixture::churned();
        let html = section(&outcome.extras);
        assert!(html.starts_with("<section id=\"golden-groups\">\n<h2>Goldens differ for 1 cause</h2>"), "{html}");
        assert!(html.contains("<a href=\"#case/churned-one\"><code>churned-one</code></a>"), "{html}");
        assert!(
            html.contains("<code>stateval golden accept --cause tools:fixtures/tools/treasury.json</code>"),
            "{html}"
        );
        assert!(html.contains("Gates failing only because of these golden changes: <code>smoke</code>."), "{html}");
        assert_eq!(section(&crate::report::fixture::suite().extras), "");
    }
}
