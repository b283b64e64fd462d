//! The page around the report: head, inline style and script, and the policy that
//! keeps the page offline.
//!
//! Everything is inline so the file opens from `file://` anywhere, as a CI artifact or
//! an email attachment. The Content-Security-Policy allows exactly the one inline
//! style and the one inline script, by their SHA-256 hashes, and nothing else: no
//! request of any kind (`default-src 'none'`), no other script, no inline event
//! handler. A payload that somehow escaped [`super::markup::esc`] could still not run
//! or phone home.

use std::fmt::Write as _;

use base64::Engine as _;
use sha2::Digest as _;

use super::markup::esc;

/// The report's stylesheet, without the generated bar classes.
const CSS: &str = include_str!("report.css");
/// The report's only script: filters and deep links (reading never needs it).
const JS: &str = include_str!("report.js");

/// Steps of the virtual-time bars: offsets and widths are whole percents, drawn with
/// classes (`o37 w5`) because the policy forbids inline `style` attributes.
const BAR_STEPS: u32 = 100;

/// The stylesheet as written into the page: [`CSS`] plus one class per bar offset and
/// width.
pub fn stylesheet() -> String {
    let mut css = String::with_capacity(CSS.len() + 4096);
    css.push_str(CSS);
    for i in 0..=BAR_STEPS {
        let _ = writeln!(css, ".o{i}{{margin-left:{i}%}}.w{i}{{width:{i}%}}");
    }
    css
}

/// `'sha256-…'` of an inline element's exact text, as CSP hashes it.
fn csp_hash(text: &str) -> String {
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// The page's policy: its own style and script by hash, nothing else.
pub fn policy(style: &str, script: &str) -> String {
    format!(
        "default-src 'none'; style-src {}; script-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(style),
        csp_hash(script)
    )
}

/// Everything up to and including `<body>`.
pub fn head(title: &str) -> String {
    let style = stylesheet();
    let mut out = String::with_capacity(style.len() + 1024);
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(out, "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">", policy(&style, JS));
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<meta name=\"generator\" content=\"stateval {}\">", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(out, "<title>{}</title>", esc(title));
    let _ = write!(out, "<style>{style}</style>\n</head>\n<body>\n");
    out
}

/// The script and the end of the page.
pub fn tail() -> String {
    format!("<script>{JS}</script>\n</body>\n</html>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_the_pages_own_style_and_script_and_no_requests() {
        let page = format!("{}{}", head("t"), tail());
        let policy = policy(&stylesheet(), JS);
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        assert!(page.contains(&format!("content=\"{policy}\"")));
        // exactly one style and one script, each the text that was hashed
        assert_eq!(page.matches("<style>").count(), 1);
        assert_eq!(page.matches("<script>").count(), 1);
        assert!(page.contains(&format!("<style>{}</style>", stylesheet())));
        assert!(page.contains(&format!("<script>{JS}</script>")));
    }

    #[test]
    fn a_csp_hash_is_the_base64_sha256_of_the_text() {
        // echo -n "alert(1)" | openssl dgst -sha256 -binary | base64
        assert_eq!(csp_hash("alert(1)"), "'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI='");
    }

    #[test]
    fn the_assets_hold_nothing_that_could_load_from_elsewhere() {
        for needle in ["http:", "https:", "url(", "@import", "fetch(", "XMLHttpRequest", "blob:", "eval("] {
            assert!(!CSS.contains(needle) && !JS.contains(needle), "{needle}");
        }
        // the script cannot close its own element early
        assert!(!JS.contains("</"));
    }
}
