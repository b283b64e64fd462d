//! Where two JSON documents differ, as JSON Pointers in document order: what a
//! diverged replay, a judge's drifted request and `stateval doctor` name. Values
//! compare as `canon::json_eq` does, so key order and `1` vs `1.0` are no difference.

use serde_json::Value;

use crate::canon;

/// JSON Pointers where `a` and `b` first differ, in document order, at most `limit`.
pub fn differences(a: &Value, b: &Value, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    diff(a, b, &mut String::new(), &mut out, limit);
    out
}

fn diff(a: &Value, b: &Value, at: &mut String, out: &mut Vec<String>, limit: usize) {
    if out.len() >= limit || canon::json_eq(a, b) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => diff(p, q, at, out, limit),
                    _ if out.len() < limit => out.push(at.clone()),
                    _ => {}
                }
                at.truncate(len);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => diff(p, q, at, out, limit),
                    _ if out.len() < limit => out.push(at.clone()),
                    _ => {}
                }
                at.truncate(len);
            }
        }
        _ => out.push(if at.is_empty() { "/".into() } else { at.clone() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_json_pointers_in_document_order() {
        let a = json!({"messages": [{"content": "a"}, {"content": "b"}], "system": "s"});
        let b = json!({"messages": [{"content": "a"}, {"content": "c"}, {"content": "d"}], "system": "t"});
        assert_eq!(differences(&a, &b, 10), vec!["/messages/1/content", "/messages/2", "/system"]);
        assert_eq!(differences(&a, &b, 1), vec!["/messages/1/content"]);
        assert!(differences(&json!({"n": 1}), &json!({"n": 1.0}), 10).is_empty());
    }
}
