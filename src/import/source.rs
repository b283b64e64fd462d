//! A foreign trace file as JSON documents that remember where they came from.
//!
//! A trace file is either one JSON document (pretty-printed or not) or JSONL, one
//! document per line (MCP stdio logs, the OTel collector's file exporter, logging
//! middleware). Every document is parsed strictly — a duplicate key is an error, not
//! "last one wins" — and any value in it can be turned back into `file:line:column`
//! through its JSON Pointer, so errors and warnings point at the byte that caused them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::diag::{InputError, line_col, locate, parse_json_strict};

/// One JSON document of the file.
#[derive(Debug, Clone)]
pub struct Doc {
    pub value: Value,
    /// Byte range of the document in the file.
    start: usize,
    end: usize,
}

/// The parsed file.
#[derive(Debug)]
pub struct Source<'a> {
    pub path: PathBuf,
    text: &'a str,
    pub docs: Vec<Doc>,
    /// One document per line.
    pub jsonl: bool,
}

/// A place in the file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub line: usize,
    pub column: usize,
}

impl<'a> Source<'a> {
    /// Parse `text` as one JSON document or as JSONL. A file is JSONL when its first
    /// non-empty line is a complete document and more lines follow; otherwise it is one
    /// document, and a parse error (truncation included) is reported where serde_json
    /// stopped.
    pub fn parse(path: &Path, text: &'a str) -> Result<Source<'a>, InputError> {
        let text = crate::diag::strip_bom(text);
        if text.trim().is_empty() {
            return Err(InputError::file(path, "the file is empty: there is no trace to import"));
        }
        let lines: Vec<(usize, &str)> = line_spans(text).filter(|(_, l)| !l.trim().is_empty()).collect();
        let first_is_whole = lines.len() > 1 && parse_json_strict(lines[0].1).is_ok();
        if !first_is_whole {
            let value = parse_json_strict(text).map_err(|(l, c, m)| InputError::new(path, l, c, m))?;
            let doc = Doc { value, start: 0, end: text.len() };
            return Ok(Source { path: path.to_path_buf(), text, docs: vec![doc], jsonl: false });
        }
        let mut docs = Vec::with_capacity(lines.len());
        for (start, line) in lines {
            let value = parse_json_strict(line).map_err(|(_, c, m)| {
                let (l, _) = line_col(text, start);
                InputError::new(path, l, c, format!("{m} (JSONL: one JSON document per line)"))
            })?;
            docs.push(Doc { value, start, end: start + line.len() });
        }
        Ok(Source { path: path.to_path_buf(), text, docs, jsonl: true })
    }

    /// Where the value at `pointer` in document `doc` starts.
    pub fn loc(&self, doc: usize, pointer: &str) -> Loc {
        let offset = match self.docs.get(doc) {
            Some(d) => d.start + locate(&self.text[d.start..d.end], pointer),
            None => 0,
        };
        let (line, column) = line_col(self.text, offset);
        Loc { line, column }
    }

    /// An error at the value `pointer` of document `doc`.
    pub fn error(&self, doc: usize, pointer: &str, message: impl Into<String>) -> InputError {
        let at = self.loc(doc, pointer);
        InputError::new(&self.path, at.line, at.column, message)
    }

    /// `file:line:column` of a value, for warnings.
    pub fn at(&self, doc: usize, pointer: &str) -> String {
        let at = self.loc(doc, pointer);
        format!("{}:{}:{}", self.path.display(), at.line, at.column)
    }

    /// Every document's top-level value, or, for a single document that is an array,
    /// its elements: the "list of records" every message-list format accepts. Each item
    /// comes with its document index and pointer.
    pub fn records(&self) -> Vec<(usize, String, &Value)> {
        if !self.jsonl
            && let Some(Value::Array(items)) = self.docs.first().map(|d| &d.value)
        {
            return items.iter().enumerate().map(|(i, v)| (0, format!("/{i}"), v)).collect();
        }
        self.docs.iter().enumerate().map(|(i, d)| (i, String::new(), &d.value)).collect()
    }

    /// The whole file, for content digests.
    pub fn text(&self) -> &str {
        self.text
    }
}

/// `(byte offset, line without its newline)` for every line of `text`.
fn line_spans(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = offset;
        offset += raw.len();
        (start, raw.trim_end_matches(['\n', '\r']))
    })
}

/// Escape a key for a JSON Pointer segment.
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pretty_document_is_one_doc_with_pointers_back_to_lines() {
        let text = "{\n  \"messages\": [\n    {\"role\": \"user\"},\n    {\"role\": \"bogus\"}\n  ]\n}\n";
        let s = Source::parse(Path::new("t.json"), text).unwrap();
        assert!(!s.jsonl);
        assert_eq!(s.loc(0, "/messages/1/role"), Loc { line: 4, column: 6 });
    }

    #[test]
    fn jsonl_is_one_doc_per_line_and_errors_name_the_line() {
        let text = "{\"a\": 1}\n\n{\"b\": 2}\n{\"c\": \n";
        let err = Source::parse(Path::new("t.jsonl"), text).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        let ok = Source::parse(Path::new("t.jsonl"), "{\"a\": 1}\n\n{\"b\": {\"c\": 2}}\n").unwrap();
        assert!(ok.jsonl);
        assert_eq!(ok.docs.len(), 2);
        assert_eq!(ok.loc(1, "/b/c"), Loc { line: 3, column: 8 });
    }

    #[test]
    fn truncated_json_is_an_error_at_the_end() {
        let text = "[\n  {\"role\": \"user\", \"content\": \"hi\"},\n  {\"role\": \"assis";
        let err = Source::parse(Path::new("t.json"), text).unwrap_err();
        assert_eq!(err.line, 3, "{err}");
        assert!(err.message.contains("EOF"), "{err}");
    }

    #[test]
    fn duplicate_keys_and_empty_files_are_errors() {
        assert!(Source::parse(Path::new("t.json"), "{\"a\": 1, \"a\": 2}").unwrap_err().message.contains("duplicate"));
        assert!(Source::parse(Path::new("t.json"), "  \n").unwrap_err().message.contains("empty"));
    }
}
