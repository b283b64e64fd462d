//! Sequence comparisons shared by stability (tool-sequence similarity) and the golden path
//! (missing steps): the longest common subsequence.
//!
//! Design choice: the LCS length is computed **bit-parallel** ([`BitLcs`], after Allison &
//! Dix 1986 and Hyyrö 2004): one row of the classic table is a bit vector over the second
//! sequence, and a whole row is advanced with a handful of word operations, so two
//! 20,000-call traces cost 20,000 × 313 word steps instead of 400 million cell updates.
//! The answer is the same number as the textbook dynamic programme ([`lcs_len_by`], kept as
//! the reference the property tests compare against).

use std::collections::HashMap;

/// Length of the longest common subsequence of `a` (length `a_len`) and `b` (length
/// `b_len`) where `same(i, j)` says `a[i]` and `b[j]` correspond. The textbook dynamic
/// programme, O(a·b) time and O(b) memory: the reference [`BitLcs`] is checked against.
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

/// LCS length of two slices compared with `==`, bit-parallel. Elements are interned to
/// symbols first, so any hashable element type works.
pub fn lcs_len<T: Eq + std::hash::Hash>(a: &[T], b: &[T]) -> usize {
    let mut ids: HashMap<&T, u32> = HashMap::new();
    let mut b_ids = Vec::with_capacity(b.len());
    for x in b {
        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        b_ids.push(*ids.entry(x).or_insert(next));
    }
    let mut a_ids = Vec::with_capacity(a.len());
    for x in a {
        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        a_ids.push(*ids.entry(x).or_insert(next));
    }
    let lcs = BitLcs::new(b_ids.len(), ids.len(), b_ids.iter().enumerate().map(|(j, s)| (*s, j)));
    lcs.len_against(&a_ids).0
}

/// The second sequence of an LCS, prepared once: for each symbol, the bit set of the
/// positions of `b` it corresponds to. [`BitLcs::len_against`] then takes any first
/// sequence of symbols, so one `b` is compared with many `a`s (stability across runs)
/// without rebuilding its masks.
#[derive(Debug, Clone)]
pub struct BitLcs {
    b_len: usize,
    words: usize,
    /// For each symbol id, the index of its mask in `masks` (`u32::MAX`: no position).
    slot: Vec<u32>,
    /// Masks of `words` words each, back to back.
    masks: Vec<u64>,
    /// The same masks indexed by symbol id directly (`words` words per symbol, zeros for
    /// a symbol without a position, then one all-zero row for any symbol out of range),
    /// kept when that table is small: the row loops then load a mask without a branch.
    dense: Vec<u64>,
}

/// Largest by-symbol mask table (in words, 32 KB) [`BitLcs::new`] keeps beside the masks.
const DENSE_WORDS: usize = 4096;

impl BitLcs {
    /// `b` has `b_len` positions; `pairs` lists every (symbol, position) correspondence
    /// (a position may correspond to several symbols, a symbol to several positions);
    /// symbols are below `symbols`.
    pub fn new(b_len: usize, symbols: usize, pairs: impl IntoIterator<Item = (u32, usize)>) -> Self {
        let words = b_len.div_ceil(64);
        let mut slot = vec![u32::MAX; symbols];
        let mut masks: Vec<u64> = Vec::new();
        for (symbol, position) in pairs {
            let Some(s) = slot.get_mut(symbol as usize) else { continue };
            if *s == u32::MAX {
                *s = u32::try_from(masks.len() / words.max(1)).unwrap_or(u32::MAX);
                masks.resize(masks.len() + words, 0);
            }
            let at = *s as usize * words + position / 64;
            if let Some(word) = masks.get_mut(at) {
                *word |= 1u64 << (position % 64);
            }
        }
        let mut dense = Vec::new();
        if words > 0 && symbols.saturating_add(1).saturating_mul(words) <= DENSE_WORDS {
            // one more all-zero row, the mask of every symbol at or past `symbols`
            dense = vec![0u64; (symbols + 1) * words];
            for (symbol, s) in slot.iter().enumerate() {
                if *s != u32::MAX {
                    let from = *s as usize * words;
                    dense[symbol * words..(symbol + 1) * words].copy_from_slice(&masks[from..from + words]);
                }
            }
        }
        BitLcs { b_len, words, slot, masks, dense }
    }

    /// LCS length of `a` (symbol ids) against the prepared `b`, and the work done: the
    /// number of word steps (rows with a match × words), the unit the scaling tests count.
    pub fn len_against(&self, a: &[u32]) -> (usize, u64) {
        if self.b_len == 0 || a.is_empty() {
            return (0, 0);
        }
        // Up to 8 words (b of 512 positions) the row lives in registers, unrolled.
        match self.words {
            1 => return self.len_against_fixed::<1>(a),
            2 => return self.len_against_fixed::<2>(a),
            3 => return self.len_against_fixed::<3>(a),
            4 => return self.len_against_fixed::<4>(a),
            5 => return self.len_against_fixed::<5>(a),
            6 => return self.len_against_fixed::<6>(a),
            7 => return self.len_against_fixed::<7>(a),
            8 => return self.len_against_fixed::<8>(a),
            _ => {}
        }
        // V starts all ones; a zero bit at j means "the LCS grew at column j".
        let mut v = vec![u64::MAX; self.words];
        let mut steps = 0u64;
        for symbol in a {
            let Some(&s) = self.slot.get(*symbol as usize) else { continue };
            if s == u32::MAX {
                continue; // no match in b: the row equals the previous one
            }
            let mask = &self.masks[s as usize * self.words..(s as usize + 1) * self.words];
            advance(&mut v, mask);
            steps += self.words as u64;
        }
        (self.zeros(&v), steps)
    }

    /// [`BitLcs::len_against`] for `W` words, the row kept in an array.
    fn len_against_fixed<const W: usize>(&self, a: &[u32]) -> (usize, u64) {
        if let Some(table) = self.dense_table::<W>() {
            let matched = a.iter().filter(|s| self.slot.get(**s as usize).is_some_and(|m| *m != u32::MAX));
            let steps = matched.count() as u64 * W as u64;
            return (self.zeros(&dense_row(table, a)), steps);
        }
        let mut v = [u64::MAX; W];
        let mut steps = 0u64;
        for symbol in a {
            let Some(&s) = self.slot.get(*symbol as usize) else { continue };
            if s == u32::MAX {
                continue;
            }
            let Some(mask) = self.masks.get(s as usize * W..).and_then(|m| m.first_chunk::<W>()) else { continue };
            advance(&mut v, mask);
            steps += W as u64;
        }
        (self.zeros(&v), steps)
    }

    /// [`BitLcs::len_against`] of two first sequences at once (lengths only). Their rows
    /// are independent, so advancing both in one loop lets the processor overlap the two
    /// carry chains; stability across runs compares each run with every later one. With
    /// the by-symbol table the two rows are advanced one after the other instead: each
    /// then fits in registers, which measured no slower.
    pub fn len_against_two(&self, a: &[u32], b: &[u32]) -> (usize, usize) {
        match self.words {
            1 => self.two_fixed::<1>(a, b),
            2 => self.two_fixed::<2>(a, b),
            3 => self.two_fixed::<3>(a, b),
            4 => self.two_fixed::<4>(a, b),
            5 => self.two_fixed::<5>(a, b),
            6 => self.two_fixed::<6>(a, b),
            7 => self.two_fixed::<7>(a, b),
            8 => self.two_fixed::<8>(a, b),
            _ => (self.len_against(a).0, self.len_against(b).0),
        }
    }

    /// [`BitLcs::len_against_two`] for `W` words. A symbol without a mask advances the
    /// row by the all-zero mask, which leaves it as it was.
    fn two_fixed<const W: usize>(&self, a: &[u32], b: &[u32]) -> (usize, usize) {
        if self.b_len == 0 {
            return (0, 0);
        }
        let none = [0u64; W];
        if let Some(table) = self.dense_table::<W>() {
            return (self.zeros(&dense_row(table, a)), self.zeros(&dense_row(table, b)));
        }
        let mask = |symbol: u32| -> &[u64; W] {
            match self.slot.get(symbol as usize) {
                Some(&s) if s != u32::MAX => self.masks.get(s as usize * W..).and_then(|m| m.first_chunk::<W>()),
                _ => None,
            }
            .unwrap_or(&none)
        };
        let (mut va, mut vb) = ([u64::MAX; W], [u64::MAX; W]);
        let common = a.len().min(b.len());
        for (x, y) in a[..common].iter().zip(&b[..common]) {
            advance(&mut va, mask(*x));
            advance(&mut vb, mask(*y));
        }
        for x in &a[common..] {
            advance(&mut va, mask(*x));
        }
        for y in &b[common..] {
            advance(&mut vb, mask(*y));
        }
        (self.zeros(&va), self.zeros(&vb))
    }

    /// The by-symbol mask table as rows of `W` words, when it was kept (the last row is
    /// all zeros).
    fn dense_table<const W: usize>(&self) -> Option<&[[u64; W]]> {
        if self.words != W || self.dense.is_empty() {
            return None;
        }
        Some(self.dense.as_chunks::<W>().0)
    }

    /// Zero bits of the final row over b's positions: the LCS length.
    fn zeros(&self, v: &[u64]) -> usize {
        let full = self.b_len / 64;
        let mut zeros: usize = v[..full].iter().map(|w| w.count_zeros() as usize).sum();
        let rest = self.b_len % 64;
        if rest > 0 {
            let low = v[full] | !((1u64 << rest) - 1);
            zeros += low.count_zeros() as usize;
        }
        zeros
    }
}

/// The final LCS row of `a` against a by-symbol mask table whose last row is all zeros: a
/// symbol past the table takes that row (a clamp, not a branch), leaving the row as it was.
fn dense_row<const W: usize>(table: &[[u64; W]], a: &[u32]) -> [u64; W] {
    let mut v = [u64::MAX; W];
    let last = table.len().saturating_sub(1);
    for symbol in a {
        if let Some(mask) = table.get((*symbol as usize).min(last)) {
            advance_fixed(&mut v, mask);
        }
    }
    v
}

/// [`advance`] for a row of `W` words held in an array: the word loop has a constant
/// trip count, so it is unrolled and the row stays in registers.
#[inline(always)]
fn advance_fixed<const W: usize>(v: &mut [u64; W], mask: &[u64; W]) {
    let mut carry = false;
    for k in 0..W {
        let (word, m) = (v[k], mask[k]);
        let u = word & m;
        let (sum, c1) = word.overflowing_add(u);
        let (sum, c2) = sum.overflowing_add(u64::from(carry));
        carry = c1 | c2;
        // u's bits are a subset of word's, so word ^ u is word & !m with one operation less
        v[k] = sum | (word ^ u);
    }
}

/// One row of the LCS table: V' = (V + (V & M)) | (V & !M), the addition carrying
/// across words.
#[inline(always)]
fn advance(v: &mut [u64], mask: &[u64]) {
    let mut carry = 0u64;
    for (word, m) in v.iter_mut().zip(mask) {
        let u = *word & m;
        let (sum, c1) = word.overflowing_add(u);
        let (sum, c2) = sum.overflowing_add(carry);
        carry = u64::from(c1 | c2);
        *word = sum | (*word & !m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lcs_counts_the_longest_common_subsequence() {
        // search open summarize vs search summarize: "search summarize" = 2
        assert_eq!(lcs_len(&["search", "open", "summarize"], &["search", "summarize"]), 2);
        // ABCBDAB vs BDCABA: the textbook answer is 4 (BCBA)
        assert_eq!(lcs_len(&b"ABCBDAB"[..], &b"BDCABA"[..]), 4);
        assert_eq!(lcs_len::<u8>(&[], &[1]), 0);
    }

    #[test]
    fn carries_cross_word_boundaries() {
        let a: Vec<u8> = (0..300).map(|i| (i % 3) as u8).collect();
        let b: Vec<u8> = (0..200).map(|i| (i % 2) as u8).collect();
        assert_eq!(lcs_len(&a, &b), lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j]));
    }

    #[test]
    fn every_row_width_agrees_with_the_textbook_table() {
        // b of 1..=700 positions: one to eight words in registers, then the general row
        let a: Vec<u8> = (0..640u32).map(|i| ((i * 7 + i / 5) % 5) as u8).collect();
        for len in [1, 63, 64, 65, 128, 200, 300, 448, 511, 512, 513, 700] {
            let b: Vec<u8> = (0..len as u32).map(|i| ((i * 3 + i / 7) % 5) as u8).collect();
            assert_eq!(lcs_len(&a, &b), lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j]), "b of {len}");
        }
    }

    proptest! {
        #[test]
        fn the_bit_parallel_lcs_equals_the_textbook_table(
            a in proptest::collection::vec(0u8..4, 0..200),
            b in proptest::collection::vec(0u8..4, 0..200),
        ) {
            prop_assert_eq!(lcs_len(&a, &b), lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j]));
        }

        #[test]
        fn a_position_may_answer_to_several_symbols(
            a in proptest::collection::vec(0u32..5, 0..150),
            b in proptest::collection::vec((0u32..5, 0u32..5), 0..150),
        ) {
            // position j of b corresponds to both of its symbols (a name and its bare name)
            let pairs = b.iter().enumerate().flat_map(|(j, (x, y))| [(*x, j), (*y, j)]);
            let lcs = BitLcs::new(b.len(), 5, pairs);
            let reference = lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j].0 || a[i] == b[j].1);
            prop_assert_eq!(lcs.len_against(&a).0, reference);
        }

        #[test]
        fn the_by_symbol_table_agrees_with_the_slot_masks(
            a in proptest::collection::vec(0u32..9, 0..300),
            c in proptest::collection::vec(0u32..9, 0..300),
            b in proptest::collection::vec(0u32..6, 0..520),
        ) {
            // 6 symbols keep the by-symbol table; 5,000 are too many for it, so the same
            // masks are read through their slots. Symbols 6..9 are past both: no mask.
            let pairs = || b.iter().enumerate().map(|(j, s)| (*s, j));
            let dense = BitLcs::new(b.len(), 6, pairs());
            let sparse = BitLcs::new(b.len(), 5_000, pairs());
            prop_assert!(b.is_empty() || !dense.dense.is_empty());
            prop_assert!(sparse.dense.is_empty());
            prop_assert_eq!(dense.len_against(&a), sparse.len_against(&a));
            prop_assert_eq!(dense.len_against_two(&a, &c), sparse.len_against_two(&a, &c));
            prop_assert_eq!(dense.len_against(&a).0, lcs_len_by(a.len(), b.len(), |i, j| a[i] == b[j]));
        }

        #[test]
        fn two_sequences_at_once_get_the_lengths_each_gets_alone(
            a in proptest::collection::vec(0u32..6, 0..300),
            c in proptest::collection::vec(0u32..6, 0..300),
            b in proptest::collection::vec(0u32..5, 0..600),
        ) {
            // symbol 5 never occurs in b: it has no mask
            let lcs = BitLcs::new(b.len(), 6, b.iter().enumerate().map(|(j, s)| (*s, j)));
            prop_assert_eq!(lcs.len_against_two(&a, &c), (lcs.len_against(&a).0, lcs.len_against(&c).0));
        }
    }
}
