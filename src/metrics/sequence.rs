//! Sequence comparisons shared by stability (tool-sequence similarity) and the golden path
//! (missing steps): the longest common subsequence.

/// Length of the longest common subsequence of `a` (length `a_len`) and `b` (length
/// `b_len`) where `same(i, j)` says `a[i]` and `b[j]` correspond. Two rows of dynamic
/// programming: O(a·b) time, O(b) memory, so a 10,000-call trace stays cheap in memory.
pub fn lcs_len_by(a_len: usize, b_len: usize, same: impl Fn(usize, usize) -> bool) -> usize {
    let mut previous = vec![0usize; b_len + 1];
    let mut current = vec![0usize; b_len + 1];
    for i in 0..a_len {
        for j in 0..b_len {
            current[j + 1] = if same(i, j) { previous[j] + 1 } else { previous[j + 1].max(current[j]) };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b_len]
}

/// [`lcs_len_by`] over two slices compared with `==`.
pub fn lcs_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_counts_the_longest_common_subsequence() {
        // search open summarize vs search summarize: "search summarize" = 2
        assert_eq!(lcs_len(&["search", "open", "summarize"], &["search", "summarize"]), 2);
        // ABCBDAB vs BDCABA: the textbook answer is 4 (BCBA)
        assert_eq!(lcs_len(&b"ABCBDAB"[..], &b"BDCABA"[..]), 4);
        assert_eq!(lcs_len::<u8>(&[], &[1]), 0);
    }
}
