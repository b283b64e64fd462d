//! Sequence alignment for golden diffs: which events of two logs correspond.
//!
//! Myers' O((N+M)·D) greedy algorithm ("An O(ND) Difference Algorithm and Its
//! Variations", 1986) finds a shortest edit script: the longest common subsequence of
//! keys is kept, everything else is a deletion or an insertion. So one inserted event
//! is one insertion, not a shift that makes every later event "changed".
//!
//! Our own implementation rather than a crate's, for two properties a CI report needs:
//! the result is deterministic (no wall-clock deadline that makes a slow machine
//! align differently), and effort is bounded by [`MAX_EDITS`] rather than by time.
//! Beyond the bound the caller gets `None` and decides what a coarser alignment is.
//! Common prefix and suffix are stripped first, so the usual case (a few edits in a
//! long log) costs one linear pass plus Myers over the short middle.

/// An edit step over indices of the two sequences, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditStep {
    /// `a[i]` and `b[j]` correspond.
    Keep(usize, usize),
    /// `a[i]` has no counterpart in `b`.
    Delete(usize),
    /// `b[j]` has no counterpart in `a`.
    Insert(usize),
}

/// Edits Myers may spend on one middle section before giving up. The trace kept for
/// backtracking holds (D+1)² indices, so this bounds that memory at ~8 MiB and time at
/// O((N+M)·MAX_EDITS), whatever the input.
pub const MAX_EDITS: usize = 1000;

/// A shortest edit script turning `a` into `b`, or `None` when it needs more than
/// `max_edits` insertions and deletions.
pub fn align<T: PartialEq>(a: &[T], b: &[T], max_edits: usize) -> Option<Vec<EditStep>> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a_mid, b_mid) = (&a[prefix..], &b[prefix..]);
    let suffix = a_mid.iter().rev().zip(b_mid.iter().rev()).take_while(|(x, y)| x == y).count();
    let (a_mid, b_mid) = (&a_mid[..a_mid.len() - suffix], &b_mid[..b_mid.len() - suffix]);

    let mut steps = Vec::with_capacity(a.len().max(b.len()) + 8);
    steps.extend((0..prefix).map(|i| EditStep::Keep(i, i)));
    for step in myers(a_mid, b_mid, max_edits)? {
        steps.push(match step {
            EditStep::Keep(i, j) => EditStep::Keep(i + prefix, j + prefix),
            EditStep::Delete(i) => EditStep::Delete(i + prefix),
            EditStep::Insert(j) => EditStep::Insert(j + prefix),
        });
    }
    let (a_end, b_end) = (prefix + a_mid.len(), prefix + b_mid.len());
    steps.extend((0..suffix).map(|s| EditStep::Keep(a_end + s, b_end + s)));
    Some(steps)
}

/// The greedy forward pass, keeping each round's furthest-reaching x per diagonal
/// (diagonal k = x − y) for the backtrack.
fn myers<T: PartialEq>(a: &[T], b: &[T], max_edits: usize) -> Option<Vec<EditStep>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let limit = (a.len() + b.len()).min(max_edits) as isize;
    // v[k + offset] = furthest x on diagonal k; k ranges over −limit−1 ..= limit+1
    let offset = limit + 1;
    let mut v = vec![0isize; (2 * limit + 3) as usize];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let at = |k: isize| (k + offset) as usize;
    for d in 0..=limit {
        let mut done = false;
        for k in (-d..=d).step_by(2) {
            let mut x =
                if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) { v[at(k + 1)] } else { v[at(k - 1)] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[at(k)] = x;
            if x >= n && y >= m {
                done = true;
            }
        }
        // round d's diagonals, −d ..= d
        trace.push(v[at(-d)..=at(d)].to_vec());
        if done {
            return Some(backtrack(&trace, n, m));
        }
    }
    None
}

fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<EditStep> {
    let mut steps = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len() as isize).rev() {
        let k = x - y;
        let (prev_x, prev_y) = if d == 0 {
            (0, 0)
        } else {
            let prev = &trace[(d - 1) as usize];
            // round d−1 covers diagonals −(d−1) ..= d−1 at indices 0 ..
            let get = |k: isize| prev[(k + d - 1) as usize];
            let prev_k = if k == -d || (k != d && get(k - 1) < get(k + 1)) { k + 1 } else { k - 1 };
            let px = get(prev_k);
            (px, px - prev_k)
        };
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            steps.push(EditStep::Keep(x as usize, y as usize));
        }
        if d > 0 {
            if x == prev_x {
                y -= 1;
                steps.push(EditStep::Insert(y as usize));
            } else {
                x -= 1;
                steps.push(EditStep::Delete(x as usize));
            }
        }
    }
    steps.reverse();
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(a: &str, b: &str) -> String {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        align(&a, &b, MAX_EDITS)
            .unwrap()
            .into_iter()
            .map(|s| match s {
                EditStep::Keep(i, _) => a[i].to_string(),
                EditStep::Delete(i) => format!("-{}", a[i]),
                EditStep::Insert(j) => format!("+{}", b[j]),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn edits(steps: &[EditStep]) -> usize {
        steps.iter().filter(|s| !matches!(s, EditStep::Keep(..))).count()
    }

    #[test]
    fn identical_sequences_are_kept_whole() {
        assert_eq!(script("abc", "abc"), "a b c");
        assert_eq!(script("", ""), "");
    }

    #[test]
    fn one_inserted_element_is_one_insertion_and_the_rest_is_kept() {
        assert_eq!(script("abcd", "abXcd"), "a b +X c d");
        assert_eq!(script("abcd", "acd"), "a -b c d");
    }

    #[test]
    fn the_script_is_minimal_on_the_paper_example() {
        // Myers 1986, fig. 1: ABCABBA → CBABAC needs 5 edits (LCS of length 4)
        let (a, b): (Vec<char>, Vec<char>) = ("ABCABBA".chars().collect(), "CBABAC".chars().collect());
        assert_eq!(edits(&align(&a, &b, MAX_EDITS).unwrap()), 5);
    }

    #[test]
    fn an_alignment_past_the_edit_bound_is_refused() {
        let a: Vec<u32> = (0..50).collect();
        let b: Vec<u32> = (100..150).collect();
        assert!(align(&a, &b, 99).is_none());
        assert_eq!(edits(&align(&a, &b, 100).unwrap()), 100);
    }

    /// Length of a longest common subsequence, by the textbook table.
    fn lcs(a: &[u8], b: &[u8]) -> usize {
        let mut t = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in 0..a.len() {
            for j in 0..b.len() {
                t[i + 1][j + 1] = if a[i] == b[j] { t[i][j] + 1 } else { t[i][j + 1].max(t[i + 1][j]) };
            }
        }
        t[a.len()][b.len()]
    }

    proptest::proptest! {
        #[test]
        fn every_script_is_as_short_as_the_longest_common_subsequence_allows(
            a in proptest::collection::vec(0u8..4, 0..40),
            b in proptest::collection::vec(0u8..4, 0..40),
        ) {
            let steps = align(&a, &b, MAX_EDITS).unwrap();
            proptest::prop_assert_eq!(edits(&steps), a.len() + b.len() - 2 * lcs(&a, &b));
        }


        #[test]
        fn every_script_replays_b_from_a(a in proptest::collection::vec(0u8..4, 0..40),
                                         b in proptest::collection::vec(0u8..4, 0..40)) {
            let steps = align(&a, &b, MAX_EDITS).unwrap();
            let (mut i, mut j) = (0, 0);
            for s in &steps {
                match *s {
                    EditStep::Keep(x, y) => { proptest::prop_assert!(x == i && y == j && a[x] == b[y]); i += 1; j += 1; }
                    EditStep::Delete(x) => { proptest::prop_assert_eq!(x, i); i += 1; }
                    EditStep::Insert(y) => { proptest::prop_assert_eq!(y, j); j += 1; }
                }
            }
            proptest::prop_assert_eq!((i, j), (a.len(), b.len()));
        }
    }
}
