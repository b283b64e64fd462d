//! The `contains` relation, shared by the `contains` matcher and trajectory `subset`
//! argument shapes: objects are key subsets (recursive), strings are substrings,
//! arrays are multisets, other scalars are equal (numbers by value).
//!
//! Array multisets and trajectory modes both need "is there a one-to-one assignment";
//! both use [`max_matching`], an augmenting-path bipartite matching, because a
//! first-fit scan false-fails when shapes overlap (`["a", "ab"]` in `["ab", "a"]`).

use serde_json::Value;

use crate::canon::json_eq;

/// Does `actual` contain `expected`?
pub fn contains(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            want.iter().all(|(k, w)| have.get(k).is_some_and(|h| contains(w, h)))
        }
        (Value::String(want), Value::String(have)) => have.contains(want.as_str()),
        (Value::Array(want), Value::Array(have)) => {
            if want.len() > have.len() {
                return false;
            }
            let matched = max_matching(want.len(), have.len(), |i, j| contains(&want[i], &have[j]));
            matched.iter().all(Option::is_some)
        }
        _ => json_eq(expected, actual),
    }
}

/// Maximum bipartite matching between `left` and `right` items, where `edge(i, j)` says
/// left `i` may take right `j`. Returns, for each left item, the right item it got.
/// Kuhn's algorithm: O(left · edges), ample for the sizes graded here.
pub fn max_matching(left: usize, right: usize, edge: impl Fn(usize, usize) -> bool) -> Vec<Option<usize>> {
    // Precompute the adjacency once; `edge` may be expensive (schema validation).
    let adjacency: Vec<Vec<usize>> = (0..left).map(|i| (0..right).filter(|&j| edge(i, j)).collect()).collect();
    let mut owner: Vec<Option<usize>> = vec![None; right];

    fn augment(i: usize, adjacency: &[Vec<usize>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for &j in &adjacency[i] {
            if seen[j] {
                continue;
            }
            seen[j] = true;
            if owner[j].is_none_or(|other| augment(other, adjacency, seen, owner)) {
                owner[j] = Some(i);
                return true;
            }
        }
        false
    }

    for i in 0..left {
        let mut seen = vec![false; right];
        augment(i, &adjacency, &mut seen, &mut owner);
    }
    let mut assignment = vec![None; left];
    for (j, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            assignment[*i] = Some(j);
        }
    }
    assignment
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_recursive_key_subsets() {
        assert!(contains(&json!({"a": {"b": 1}}), &json!({"a": {"b": 1, "c": 2}, "d": 3})));
        assert!(!contains(&json!({"a": {"b": 2}}), &json!({"a": {"b": 1}})));
        assert!(!contains(&json!({"x": 1}), &json!({})));
    }

    #[test]
    fn strings_are_substrings_and_scalars_are_equal() {
        assert!(contains(&json!("rust"), &json!("rust lang")));
        assert!(!contains(&json!("go"), &json!("rust")));
        assert!(contains(&json!(1), &json!(1.0)));
        assert!(!contains(&json!(1), &json!("1")));
    }

    #[test]
    fn arrays_are_multisets_matched_without_first_fit_errors() {
        // first-fit would give "a" to "ab" and leave "ab" nothing
        assert!(contains(&json!(["a", "ab"]), &json!(["ab", "a"])));
        assert!(!contains(&json!(["a", "a"]), &json!(["a", "b"])));
        assert!(contains(&json!([]), &json!([1])));
    }

    #[test]
    fn matching_finds_an_assignment_whenever_one_exists() {
        // left 0 fits both, left 1 only right 0
        let m = max_matching(2, 2, |i, j| i == 0 || j == 0);
        assert_eq!(m, vec![Some(1), Some(0)]);
    }
}
