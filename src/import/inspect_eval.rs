//! Inspect AI `.eval` logs: the zip archive Inspect writes by default, read directly.
//!
//! The archive holds `header.json` (the eval's spec and results; while an eval is
//! still running, `_journal/start.json` holds the spec), one `samples/ID_epoch_N.json`
//! per sample — the same sample object a JSON log holds in `samples[]` — and summaries
//! and reductions, which are not read. Each member is parsed strictly on its own, so an
//! error names the archive, the member and the line and column in it:
//! `run.eval!samples/3_epoch_1.json:12:5: …`. The rest is [`super::inspect`]'s.
//!
//! Members are read through the `zip` crate with deflate (and stored) members only: the
//! compression Inspect writes. A member larger than [`MAX_MEMBER`] is refused rather
//! than inflated into memory.

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::diag::{InputError, parse_json_strict};

/// The largest member inflated, in bytes: a sample of a long agent run is a few MiB; a
/// member claiming more is more likely damage (or a zip bomb) than a log.
pub const MAX_MEMBER: u64 = 256 << 20;

/// Where a zip archive starts: the local file header's signature.
pub const ZIP_MAGIC: &[u8] = b"PK\x03\x04";

/// Does `bytes` look like a zip archive?
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(ZIP_MAGIC)
}

/// An opened `.eval` log: the model of its eval and its samples in archive order.
pub struct Archive {
    pub model: Value,
    pub samples: Vec<Member>,
}

/// One `samples/*.json` member: its name, text and parsed value.
pub struct Member {
    pub name: String,
    pub text: String,
    pub value: Value,
}

/// The path errors in member `name` of the archive at `path` are reported under.
pub fn member_path(path: &Path, name: &str) -> PathBuf {
    PathBuf::from(format!("{}!{name}", path.display()))
}

/// Open the archive `bytes` (read from `path`) and parse its header and samples.
pub fn open(path: &Path, bytes: &[u8]) -> Result<Archive, InputError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| InputError::file(path, format!("cannot read the zip archive: {e}")))?;
    let names: Vec<String> = zip
        .file_names()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| InputError::file(path, format!("cannot read the zip archive's member names: {e}")))?
        .into_iter()
        .map(|n| n.into_owned())
        .collect();
    let Some(header) = ["header.json", "_journal/start.json"].into_iter().find(|h| names.iter().any(|n| n == h)) else {
        let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
        return Err(InputError::file(
            path,
            format!(
                "a zip archive without header.json or _journal/start.json is not an Inspect AI .eval log (its \
                 members: {}{})",
                shown.join(", "),
                if names.len() > shown.len() { ", …" } else { "" }
            ),
        ));
    };
    let header = parse(path, header, &read(&mut zip, path, header)?)?;
    let model = header.pointer("/eval/model").cloned().unwrap_or(Value::Null);
    let mut samples = Vec::new();
    for name in names.iter().filter(|n| n.starts_with("samples/") && n.ends_with(".json")) {
        let text = read(&mut zip, path, name)?;
        let value = parse(path, name, &text)?;
        if !value.is_object() {
            return Err(InputError::file(&member_path(path, name), "an Inspect AI sample is a JSON object"));
        }
        samples.push(Member { name: name.clone(), text, value });
    }
    if samples.is_empty() {
        return Err(InputError::file(
            path,
            "this Inspect AI .eval log has no samples/*.json members (a header-only log, or one written without \
             its samples): there is no conversation in it",
        ));
    }
    Ok(Archive { model, samples })
}

/// The text of member `name`, refused when it is too large or not UTF-8.
fn read(zip: &mut zip::ZipArchive<Cursor<&[u8]>>, path: &Path, name: &str) -> Result<String, InputError> {
    let at = member_path(path, name);
    let member = zip.by_name(name).map_err(|e| InputError::file(&at, format!("cannot read the member: {e}")))?;
    if member.size() > MAX_MEMBER {
        return Err(InputError::file(
            &at,
            format!("the member inflates to {} bytes, more than the {MAX_MEMBER} read", member.size()),
        ));
    }
    let mut bytes = Vec::new();
    member
        .take(MAX_MEMBER + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::file(&at, format!("cannot inflate the member: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        InputError::file(
            &at,
            format!("the member is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })
}

fn parse(path: &Path, name: &str, text: &str) -> Result<Value, InputError> {
    parse_json_strict(crate::diag::strip_bom(text))
        .map_err(|(line, column, message)| InputError::new(&member_path(path, name), line, column, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A zip of `members`, deflated.
    pub(crate) fn archive(members: &[(&str, &str)]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, text) in members {
            zip.start_file(*name, options).unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn samples_are_read_in_archive_order_and_a_bad_member_is_named_with_its_line() {
        let bytes = archive(&[
            ("header.json", r#"{"version": 2, "status": "success", "eval": {"model": "openai/gpt-4o"}}"#),
            ("samples/2_epoch_1.json", r#"{"id": 2, "epoch": 1, "messages": []}"#),
            ("samples/1_epoch_1.json", r#"{"id": 1, "epoch": 1, "messages": []}"#),
            ("summaries.json", "[]"),
        ]);
        assert!(is_zip(&bytes));
        let log = open(Path::new("run.eval"), &bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(log.model, "openai/gpt-4o");
        assert_eq!(
            log.samples.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["samples/2_epoch_1.json", "samples/1_epoch_1.json"]
        );
        let broken = archive(&[
            ("header.json", r#"{"eval": {}}"#),
            ("samples/1_epoch_1.json", "{\"id\": 1,\n  \"messages\": [}\n"),
        ]);
        let err = open(Path::new("run.eval"), &broken).err().expect("a syntax error");
        assert_eq!(err.path, Path::new("run.eval!samples/1_epoch_1.json"));
        assert_eq!(err.line, 2, "{err}");
        let none = archive(&[("header.json", r#"{"eval": {}}"#)]);
        assert!(open(Path::new("run.eval"), &none).err().unwrap().message.contains("no samples"));
        let other = archive(&[("README.md", "hi")]);
        assert!(open(Path::new("x.zip"), &other).err().unwrap().message.contains("not an Inspect AI .eval log"));
    }
}
