//! Skew-driven replication (GRACE-MoE §4.2, Eq. 2) and the predicted loads
//! after it (§4.3, Eq. 3).
//!
//! After grouping, group `i` (GPU `i`) carries `W_i`, the summed counts of
//! its experts. The skew `ρ = W_max / W̄` sets the copies of each hot expert,
//! `n = min(max(1, ⌊ρ⌋), n_gpu − 1)` ([`replica_count`]). The hot experts
//! are the heaviest group's, ranked by load (descending, ties by id), taken
//! until their cumulative load exceeds `W_max · n / (1 + n)`
//! ([`hot_experts`]). Read that way the paper's "those whose cumulative load
//! exceeds …" is the shortest prefix of the ranking that carries more than
//! the share `n / (1 + n)` of the group's load — the share that, split
//! over `n + 1` copies, leaves the home GPU about `1 / (1 + n)` of it; the
//! other reading (the experts after the prefix) would replicate the cold
//! ones. Each hot expert is copied once onto each of the `n` GPUs with the
//! least load before replication (ties: lower id), never the heaviest GPU
//! and never a GPU already holding that expert, so no GPU holds two copies
//! of one expert. A layer with no load, or a single GPU, gets no replicas.
//!
//! **Eq. 3.** [`predicted_loads`]: the hot experts' load `W_r` split
//! evenly over their `n + 1` copies, `W_p = W_r / (n + 1)`; the heaviest GPU
//! keeps `W_max − W_r + W_p`, each target gains `W_p`. The paper prints
//! `W_p = W_max / (n + 1)`, but calls it "this load" (`W_r`) "evenly split",
//! and only `W_r / (n + 1)` keeps the tokens' total; that is the reading
//! taken.
//!
//! Complexity: O(n_e log n_e + D log D) per layer for `n_e` experts on `D`
//! GPUs.

use serde::Serialize;

/// Eq. 2: copies of each hot expert for skew `ρ` on `gpus` GPUs (0 for a
/// single GPU).
pub(crate) fn replica_count(skew: f64, gpus: usize) -> usize {
    if gpus <= 1 {
        return 0;
    }
    // `as` saturates an infinite skew; a NaN one (no load) is max(1, ·) = 1.
    (skew.floor().max(1.0) as usize).min(gpus - 1)
}

/// The hot experts of `group` for `n` copies: by load descending (ties by
/// id), the shortest prefix whose cumulative load exceeds
/// `W · n / (1 + n)`, `W` the group's load. Empty when `n = 0` or the group
/// carries nothing. Ids outside `loads` carry nothing.
pub(crate) fn hot_experts(group: &[usize], loads: &[f64], n: usize) -> Vec<usize> {
    let load = |e: usize| loads.get(e).copied().unwrap_or(0.0);
    let total: f64 = group.iter().map(|&e| load(e)).sum();
    if n == 0 || total <= 0.0 {
        return Vec::new();
    }
    let threshold = total * n as f64 / (1 + n) as f64;
    let mut ranked = group.to_vec();
    crate::sort::sort_by(&mut ranked, |&x, &y| {
        load(y).total_cmp(&load(x)).then(x.cmp(&y))
    });
    let mut cum = 0.0;
    let mut hot = Vec::new();
    for e in ranked {
        hot.push(e);
        cum += load(e);
        if cum > threshold {
            break;
        }
    }
    hot
}

/// Eq. 3: each GPU's load once the hot experts' load `replicated` (`W_r`,
/// all on GPU `heaviest`) is split evenly over their copies on `heaviest`
/// and `targets`.
///
/// ```
/// use moeplan::planners::grace_predicted_loads as predicted_loads;
/// // W_r = 6 over 1 + 2 copies: W_p = 2
/// assert_eq!(
///     predicted_loads(&[10.0, 2.0, 3.0, 1.0], 0, 6.0, &[3, 1]),
///     vec![6.0, 4.0, 3.0, 3.0]
/// );
/// ```
pub fn predicted_loads(
    group_loads: &[f64],
    heaviest: usize,
    replicated: f64,
    targets: &[usize],
) -> Vec<f64> {
    let mut out = group_loads.to_vec();
    let per_copy = replicated / (targets.len() + 1) as f64;
    if let Some(w) = out.get_mut(heaviest) {
        *w += per_copy - replicated;
    }
    for &t in targets {
        if let Some(w) = out.get_mut(t) {
            *w += per_copy;
        }
    }
    out
}

/// One layer's replication decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replication {
    /// `W_i`: each GPU's load from its group (summed counts).
    pub group_loads: Vec<f64>,
    /// `ρ = W_max / W̄` (0 when the layer carries no load).
    pub skew: f64,
    /// `n` of Eq. 2: the copies each hot expert gets (0: none).
    pub replicas: usize,
    /// The heaviest GPU (lowest id among equals).
    pub heaviest: usize,
    /// Its hot experts, hottest first.
    pub hot: Vec<usize>,
    /// The GPUs that receive a copy of every hot expert, least loaded first.
    pub targets: Vec<usize>,
    /// Eq. 3's loads after replication.
    pub predicted: Vec<f64>,
}

impl Replication {
    /// Replicas this adds to the layer (`|hot| · |targets|`).
    pub fn added(&self) -> usize {
        self.hot.len() * self.targets.len()
    }

    /// The layer's slots per GPU: `groups[g]` followed, on each target, by
    /// the hot experts' copies.
    pub(crate) fn apply(&self, groups: &[Vec<usize>]) -> Vec<Vec<u32>> {
        let mut gpus: Vec<Vec<u32>> = groups
            .iter()
            .map(|g| g.iter().map(|&e| e as u32).collect())
            .collect();
        for &t in &self.targets {
            if let Some(slots) = gpus.get_mut(t) {
                for &e in &self.hot {
                    if !slots.contains(&(e as u32)) {
                        slots.push(e as u32);
                    }
                }
            }
        }
        gpus
    }
}

/// §4.2 for one layer: `groups[g]` the experts of GPU `g`, `loads` per
/// expert (summed over batches).
pub(crate) fn replicate(groups: &[Vec<usize>], loads: &[f64]) -> Replication {
    let load = |e: usize| loads.get(e).copied().unwrap_or(0.0);
    let group_loads: Vec<f64> = groups
        .iter()
        .map(|g| g.iter().map(|&e| load(e)).sum())
        .collect();
    let d = groups.len();
    let total: f64 = group_loads.iter().sum();
    let heaviest = (0..d)
        .max_by(|&x, &y| group_loads[x].total_cmp(&group_loads[y]).then(y.cmp(&x)))
        .unwrap_or(0);
    let w_max = group_loads.get(heaviest).copied().unwrap_or(0.0);
    let none = |skew| Replication {
        predicted: group_loads.clone(),
        group_loads: group_loads.clone(),
        skew,
        replicas: 0,
        heaviest,
        hot: Vec::new(),
        targets: Vec::new(),
    };
    if total <= 0.0 || !total.is_finite() {
        return none(0.0);
    }
    let skew = w_max / (total / d as f64);
    let n = replica_count(skew, d);
    let home = groups.get(heaviest).map_or(&[][..], Vec::as_slice);
    let hot = hot_experts(home, loads, n);
    if hot.is_empty() {
        return none(skew);
    }
    let mut order: Vec<usize> = (0..d)
        .filter(|&g| g != heaviest && !hot.iter().any(|e| groups[g].contains(e)))
        .collect();
    crate::sort::sort_by(&mut order, |&x, &y| {
        group_loads[x].total_cmp(&group_loads[y]).then(x.cmp(&y))
    });
    order.truncate(n);
    let replicated: f64 = hot.iter().map(|&e| load(e)).sum();
    Replication {
        predicted: predicted_loads(&group_loads, heaviest, replicated, &order),
        group_loads,
        skew,
        replicas: n,
        heaviest,
        hot,
        targets: order,
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn replication_replica_count_example() {
        use super::replica_count;
        assert_eq!(replica_count(1.4, 8), 1); // max(1, ⌊1.4⌋)
        assert_eq!(replica_count(3.7, 8), 3);
        assert_eq!(replica_count(3.7, 3), 2); // at most n_gpu − 1
        assert_eq!(replica_count(5.0, 1), 0);
    }

    #[test]
    fn replication_hot_experts_example() {
        use super::hot_experts;
        let loads = [1.0, 6.0, 3.0, 0.0];
        // W = 10, n = 1: past 5 after expert 1 alone
        assert_eq!(hot_experts(&[0, 1, 2], &loads, 1), vec![1]);
        // n = 2: past 6.67 needs experts 1 and 2 (9)
        assert_eq!(hot_experts(&[0, 1, 2], &loads, 2), vec![1, 2]);
    }

    #[test]
    fn replication_apply_example() {
        use super::replicate;
        let groups = vec![vec![0, 1], vec![2], vec![3]];
        let r = replicate(&groups, &[8.0, 1.0, 1.0, 1.0]);
        assert_eq!(r.apply(&groups), vec![vec![0, 1], vec![2, 0], vec![3, 0]]);
    }

    #[test]
    fn replication_replicate_example() {
        use super::replicate;
        // W = [9, 2, 1]: ρ = 9 / 4 = 2.25, n = min(max(1, 2), 2) = 2;
        // hot: 7 alone exceeds 9 · 2/3 = 6
        let r = replicate(&[vec![0, 1], vec![2], vec![3]], &[7.0, 2.0, 2.0, 1.0]);
        assert_eq!(
            (r.replicas, r.heaviest, r.hot.clone(), r.targets.clone()),
            (2, 0, vec![0], vec![2, 1])
        );
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {

    #[test]
    fn replication_added_example() {
        use super::replicate;
        let r = replicate(&[vec![0, 1], vec![2], vec![3]], &[8.0, 1.0, 1.0, 1.0]);
        assert_eq!(
            (r.hot.clone(), r.targets.clone(), r.added()),
            (vec![0], vec![1, 2], 2)
        );
    }
}
