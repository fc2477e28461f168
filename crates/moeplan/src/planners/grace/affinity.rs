//! Expert affinity per MoE layer (GRACE-MoE §3 and §4.1, the matrix `A` of
//! Eq. 1): `A[i][j]` counts the tokens whose top-k choice in that layer held
//! both experts `i` and `j`. Also the figures that say how concentrated an
//! affinity is — the share of its mass in the heaviest pairs, the utilisation
//! `U` of Eq. 1 for a grouping, a ceiling on `U` for equal groups and the `U`
//! of a random grouping — so that generated token traces can be compared with
//! recorded ones (ESFT) on the same scale.
//!
//! Cost: `affinity` is O(tokens · top_k²) time and O(E²) memory per layer;
//! the summaries are O(E² log E).

use ndarray::Array2;

use crate::data::trace::TokenTrace;
use crate::error::{Error, Result};

use crate::data::workload::MAX_AFFINITY_EXPERTS;

/// `A[i][j]`: tokens of MoE layer index `layer` (`0..tokens.num_layers()`)
/// that chose both `i` and `j` (`i ≠ j`); the diagonal is zero and the matrix
/// symmetric. A token that lists an expert twice counts once for it.
///
/// ```
/// use moeplan::TokenTrace;
/// use moeplan::planners::grace_affinity as affinity;
/// use ndarray::array;
/// // Two tokens, top-2: {0, 1} and {1, 2}.
/// let t = TokenTrace::new(3, vec![1], vec![array![[0, 1], [1, 2]]], vec![0, 0])?;
/// let a = affinity(&t, 0)?;
/// assert_eq!(a, array![[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]);
/// assert!(affinity(&t, 1).is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn affinity(tokens: &TokenTrace, layer: usize) -> Result<Array2<f64>> {
    if layer >= tokens.num_layers() {
        return Err(Error::Argument(format!(
            "affinity of layer index {layer}: the token trace has {} layers",
            tokens.num_layers()
        )));
    }
    let e = tokens.num_experts();
    if e > MAX_AFFINITY_EXPERTS {
        return Err(Error::Limit(format!(
            "an affinity matrix of {e} × {e} experts (at most {MAX_AFFINITY_EXPERTS})"
        )));
    }
    // Counted into a flat buffer of integers: exact for any token count, and
    // the inner loop stays free of ndarray's bounds bookkeeping.
    let mut counts = vec![0u64; e * e];
    let mut chosen: Vec<usize> = Vec::with_capacity(tokens.top_k());
    for row in tokens.routes(layer).rows() {
        chosen.clear();
        chosen.extend(row.iter().map(|&x| x as usize));
        chosen.sort_unstable();
        chosen.dedup();
        for (p, &i) in chosen.iter().enumerate() {
            for &j in chosen.iter().skip(p + 1) {
                // Ids are below `num_experts` (checked by `TokenTrace::new`);
                // `get_mut` keeps that a checked fact rather than a panic.
                if let Some(c) = counts.get_mut(i * e + j) {
                    *c += 1;
                }
            }
        }
    }
    // Only i < j was counted; mirror it.
    let mut a = Array2::<f64>::zeros((e, e));
    for i in 0..e {
        for j in i + 1..e {
            let v = counts.get(i * e + j).copied().unwrap_or(0) as f64;
            a[[i, j]] = v;
            a[[j, i]] = v;
        }
    }
    Ok(a)
}

/// The affinity of every layer of `tokens`, in layer order.
///
/// ```
/// use moeplan::TokenTrace;
/// use moeplan::planners::affinity_all;
/// use ndarray::array;
/// let t = TokenTrace::new(3, vec![1, 2], vec![array![[0, 1]], array![[2, 1]]], vec![0])?;
/// let a = affinity_all(&t)?;
/// assert_eq!((a.len(), a[0][[0, 1]], a[1][[1, 2]], a[1][[0, 1]]), (2, 1.0, 1.0, 0.0));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn affinity_all(tokens: &TokenTrace) -> Result<Vec<Array2<f64>>> {
    (0..tokens.num_layers())
        .map(|l| affinity(tokens, l))
        .collect()
}

/// Checks that `a` is a square, finite, non-negative matrix; symmetry is the
/// caller's business (the spectral clustering checks it itself).
fn check_square(a: &Array2<f64>, what: &str) -> Result<usize> {
    let (n, m) = a.dim();
    if n != m {
        return Err(Error::Argument(format!(
            "{what}: affinity is {n} × {m}, not square"
        )));
    }
    if let Some(v) = a.iter().find(|v| !v.is_finite() || **v < 0.0) {
        return Err(Error::Argument(format!(
            "{what}: affinity holds {v}; it must be finite and non-negative"
        )));
    }
    Ok(n)
}

/// Total affinity over pairs `i < j` (the denominator of Eq. 1).
#[cfg(test)]
pub(crate) fn total(a: &Array2<f64>) -> Result<f64> {
    let n = check_square(a, "total")?;
    Ok((0..n)
        .map(|i| (i + 1..n).map(|j| a[[i, j]]).sum::<f64>())
        .sum())
}

/// Affinity utilisation `U` of Eq. 1: the share of the total pair affinity
/// (`i < j`) that falls inside groups, for `labels[i]` the group of expert
/// `i`. Zero when the matrix has no affinity at all.
///
/// ```
/// use moeplan::planners::affinity_utilisation as utilisation;
/// use ndarray::array;
/// let a = array![[0.0, 3.0, 1.0], [3.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
/// assert_eq!(utilisation(&a, &[0, 0, 1])?, 0.75);
/// assert!(utilisation(&a, &[0, 0]).is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn utilisation(a: &Array2<f64>, labels: &[usize]) -> Result<f64> {
    let n = check_square(a, "utilisation")?;
    if labels.len() != n {
        return Err(Error::Argument(format!(
            "utilisation: {} labels for {n} experts",
            labels.len()
        )));
    }
    Ok(utilisation_of_checked(a, labels))
}

/// [`utilisation`] of a matrix already checked square, finite and
/// non-negative, with one label per row (spectral clustering judges each
/// of its groupings by it: the O(n²) check once, not per grouping). Pairs
/// are summed in the same order, so the value is the same to the bit.
pub(super) fn utilisation_of_checked(a: &Array2<f64>, labels: &[usize]) -> f64 {
    let (mut inside, mut all) = (0.0, 0.0);
    for ((i, li), row) in labels.iter().enumerate().zip(a.outer_iter()) {
        for (lj, &v) in labels.iter().zip(row.iter()).skip(i + 1) {
            all += v;
            if li == lj {
                inside += v;
            }
        }
    }
    if all > 0.0 { inside / all } else { 0.0 }
}

/// How concentrated one layer's affinity is, on scales that do not depend
/// on the token count.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg(test)]
pub(crate) struct AffinitySummary {
    /// Total affinity over pairs `i < j`.
    pub total: f64,
    /// Share of the total held by the heaviest 1 % of pairs (at least one
    /// pair): 0.01 for flat affinity, towards 1 when a few pairs dominate.
    pub top_1pct_share: f64,
    /// Ceiling on `U` for `groups` equal groups of `E = n / groups`
    /// (rounded up) experts: each expert keeps at most its `E − 1` strongest
    /// partners, so no equal grouping reaches more than half the sum of
    /// every expert's `E − 1` largest affinities over the total.
    pub equal_groups_bound: f64,
    /// Expected `U` of a uniformly random equal grouping, `(E − 1)/(n − 1)`:
    /// the floor a clustering should clear.
    pub random_utilisation: f64,
}

/// [`AffinitySummary`] of `a` for a grouping into `groups` groups.
#[cfg(test)]
pub(crate) fn summarize(a: &Array2<f64>, groups: usize) -> Result<AffinitySummary> {
    let n = check_square(a, "summary")?;
    if groups == 0 || groups > n {
        return Err(Error::Argument(format!(
            "summary: {groups} groups for {n} experts"
        )));
    }
    let mut pairs: Vec<f64> = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            pairs.push(a[[i, j]]);
        }
    }
    let total: f64 = pairs.iter().sum();
    crate::sort::sort_unstable_by(&mut pairs, |x, y| y.total_cmp(x));
    let top = pairs.len().div_ceil(100).max(1).min(pairs.len());
    let top_sum: f64 = pairs.iter().take(top).sum();
    let size = n.div_ceil(groups);
    let mut row: Vec<f64> = Vec::with_capacity(n);
    let mut bound = 0.0;
    for i in 0..n {
        row.clear();
        row.extend((0..n).filter(|&j| j != i).map(|j| a[[i, j]]));
        crate::sort::sort_unstable_by(&mut row, |x, y| y.total_cmp(x));
        bound += row.iter().take(size - 1).sum::<f64>();
    }
    let share = |x: f64| {
        if total > 0.0 {
            (x / total).min(1.0)
        } else {
            0.0
        }
    };
    Ok(AffinitySummary {
        total,
        top_1pct_share: share(top_sum),
        equal_groups_bound: share(bound / 2.0),
        random_utilisation: if n > 1 {
            (size - 1) as f64 / (n - 1) as f64
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn duplicate_choice_counts_once() {
        let t = TokenTrace::new(3, vec![0], vec![array![[1, 1, 2]]], vec![0]).unwrap();
        let a = affinity(&t, 0).unwrap();
        assert_eq!(a[[1, 2]], 1.0);
        assert_eq!(a[[1, 1]], 0.0);
        assert_eq!(total(&a).unwrap(), 1.0);
    }

    #[test]
    fn bound_is_above_any_equal_grouping() {
        // 6 experts, 3 groups of 2: try every pairing.
        let a = array![
            [0.0, 4.0, 1.0, 0.0, 2.0, 0.0],
            [4.0, 0.0, 3.0, 1.0, 0.0, 0.0],
            [1.0, 3.0, 0.0, 5.0, 0.0, 1.0],
            [0.0, 1.0, 5.0, 0.0, 2.0, 0.0],
            [2.0, 0.0, 0.0, 2.0, 0.0, 6.0],
            [0.0, 0.0, 1.0, 0.0, 6.0, 0.0],
        ];
        let s = summarize(&a, 3).unwrap();
        let mut best: f64 = 0.0;
        let pairings: [[usize; 6]; 3] =
            [[0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 0], [0, 1, 2, 1, 2, 0]];
        for p in pairings {
            best = best.max(utilisation(&a, &p).unwrap());
        }
        assert!(s.equal_groups_bound >= best - 1e-12);
        assert!(s.top_1pct_share > 0.0 && s.top_1pct_share <= 1.0);
    }

    #[test]
    fn rejects_bad_matrices() {
        assert!(total(&Array2::zeros((2, 3))).is_err());
        assert!(utilisation(&array![[0.0, -1.0], [-1.0, 0.0]], &[0, 1]).is_err());
        assert!(summarize(&array![[0.0, f64::NAN], [0.0, 0.0]], 1).is_err());
        assert!(summarize(&Array2::zeros((2, 2)), 3).is_err());
        assert_eq!(utilisation(&Array2::zeros((2, 2)), &[0, 0]).unwrap(), 0.0);
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn affinity_total_example() {
        let run = || {
            use super::total;
            use ndarray::array;
            assert_eq!(total(&array![[0.0, 2.0], [2.0, 0.0]])?, 2.0);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn affinity_summarize_example() {
        let run = || {
            use super::summarize;
            use ndarray::Array2;
            // Two planted pairs {0,1} and {2,3} hold all the affinity.
            let mut a = Array2::zeros((4, 4));
            for (i, j) in [(0, 1), (2, 3)] {
                a[[i, j]] = 5.0;
                a[[j, i]] = 5.0;
            }
            let s = summarize(&a, 2)?;
            assert_eq!((s.total, s.equal_groups_bound), (10.0, 1.0));
            assert!((s.random_utilisation - 1.0 / 3.0).abs() < 1e-12);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
