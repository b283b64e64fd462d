//! Maximum bipartite matching by Hopcroft–Karp, O(E·√V), for the order-free trajectory
//! modes (docs/metrics.md §3).
//!
//! Design choice: the graph is given as adjacency lists (left vertex → right vertices, in
//! ascending order), built by the caller from a name index so that only calls of the
//! right name are ever compared. Each phase finds a maximal set of shortest augmenting
//! paths (breadth-first layering, then depth-first search along the layers with an
//! explicit stack, so a 20,000-call trace cannot overflow the thread's stack). Vertices
//! are always tried in index order, so the matching is the same on every run.

const UNSEEN: usize = usize::MAX;

/// A maximum matching of `adjacency` (left vertex `i` may take any right vertex in
/// `adjacency[i]`, each below `right`): for each left vertex its right vertex, and the
/// work done — edges examined, the unit the scaling tests count.
pub fn max_matching(adjacency: &[Vec<usize>], right: usize) -> (Vec<Option<usize>>, u64) {
    let left = adjacency.len();
    let mut of_left: Vec<Option<usize>> = vec![None; left];
    let mut of_right: Vec<Option<usize>> = vec![None; right];
    let mut dist = vec![UNSEEN; left];
    let mut next_edge = vec![0usize; left];
    let mut queue = Vec::with_capacity(left);
    let mut work = 0u64;
    loop {
        // Layer the graph from every free left vertex; `limit` is the length of the
        // shortest augmenting path (in left vertices), UNSEEN when there is none.
        queue.clear();
        for (i, d) in dist.iter_mut().enumerate() {
            *d = if of_left[i].is_none() { 0 } else { UNSEEN };
            if *d == 0 {
                queue.push(i);
            }
        }
        let mut limit = UNSEEN;
        let mut head = 0;
        while let Some(&u) = queue.get(head) {
            head += 1;
            if dist[u] >= limit {
                continue;
            }
            for &v in &adjacency[u] {
                work += 1;
                match of_right.get(v).copied().flatten() {
                    None => limit = limit.min(dist[u] + 1),
                    Some(w) if dist[w] == UNSEEN => {
                        dist[w] = dist[u] + 1;
                        queue.push(w);
                    }
                    Some(_) => {}
                }
            }
        }
        if limit == UNSEEN {
            break;
        }
        next_edge.iter_mut().for_each(|e| *e = 0);
        let mut stack: Vec<usize> = Vec::new();
        let mut chosen: Vec<usize> = Vec::new();
        for start in 0..left {
            if of_left[start].is_some() || dist[start] != 0 {
                continue;
            }
            stack.clear();
            chosen.clear();
            stack.push(start);
            while let Some(&u) = stack.last() {
                let Some(&v) = adjacency[u].get(next_edge[u]) else {
                    // a dead end: no shortest path goes through u in this phase
                    dist[u] = UNSEEN;
                    stack.pop();
                    chosen.pop();
                    continue;
                };
                next_edge[u] += 1;
                work += 1;
                match of_right.get(v).copied().flatten() {
                    None if dist[u] + 1 == limit => {
                        chosen.push(v);
                        for (&l, &r) in stack.iter().zip(&chosen) {
                            of_left[l] = Some(r);
                            of_right[r] = Some(l);
                        }
                        break;
                    }
                    Some(w) if dist[w] != UNSEEN && dist[w] == dist[u] + 1 => {
                        chosen.push(v);
                        stack.push(w);
                    }
                    _ => {}
                }
            }
        }
    }
    (of_left, work)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The textbook augmenting-path matching, one search per left vertex: the size
    /// Hopcroft–Karp must reach.
    fn simple_size(adjacency: &[Vec<usize>], right: usize) -> usize {
        fn augment(i: usize, adjacency: &[Vec<usize>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
            for &j in &adjacency[i] {
                if !seen[j] {
                    seen[j] = true;
                    if owner[j].is_none_or(|o| augment(o, adjacency, seen, owner)) {
                        owner[j] = Some(i);
                        return true;
                    }
                }
            }
            false
        }
        let mut owner = vec![None; right];
        (0..adjacency.len()).filter(|&i| augment(i, adjacency, &mut vec![false; right], &mut owner)).count()
    }

    #[test]
    fn first_fit_traps_are_escaped() {
        // left 0 can take 0 or 1, left 1 only 0: first fit gives 0 to left 0 and strands left 1
        let (m, _) = max_matching(&[vec![0, 1], vec![0]], 2);
        assert_eq!(m, [Some(1), Some(0)]);
    }

    #[test]
    fn a_long_chain_of_augmentations_does_not_overflow_the_stack() {
        // left i takes i or i+1; matching left i to i+1 first forces one path through all
        let n = 50_000;
        let adjacency: Vec<Vec<usize>> = (0..n).map(|i| if i + 1 < n { vec![i + 1, i] } else { vec![i] }).collect();
        let (m, _) = max_matching(&adjacency, n);
        assert_eq!(m.iter().flatten().count(), n);
    }

    proptest! {
        #[test]
        fn the_matching_is_valid_and_maximum(
            adjacency in proptest::collection::vec(proptest::collection::btree_set(0usize..12, 0..5), 0..12),
        ) {
            let adjacency: Vec<Vec<usize>> = adjacency.into_iter().map(|s| s.into_iter().collect()).collect();
            let (m, _) = max_matching(&adjacency, 12);
            let mut used = [false; 12];
            for (i, j) in m.iter().enumerate() {
                if let Some(j) = j {
                    prop_assert!(adjacency[i].contains(j));
                    prop_assert!(!used[*j]);
                    used[*j] = true;
                }
            }
            prop_assert_eq!(m.iter().flatten().count(), simple_size(&adjacency, 12));
        }
    }
}
