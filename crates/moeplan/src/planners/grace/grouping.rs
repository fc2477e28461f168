//! Controlled non-uniform and hierarchical grouping of experts by affinity
//! (GRACE-MoE §4.1, Eq. 1; appendix A.2, Algorithms 1–2).
//!
//! Spectral clustering of a layer's affinity matrix gives groups whose sizes
//! follow the affinity alone ("fully non-uniform"). [`controlled_grouping`]
//! (Algorithm 2) bounds the sizes to `[max(1, E − δ), E + δ]` with
//! `E = ⌊Ne / D⌋` and `δ = max(1, round(E · r))` (half away from zero): an
//! over-full cluster keeps its members with the most affinity to the rest
//! of it, each expert pushed out joins the group with room that gains the
//! most [`intra_score`] (Algorithm 1), and groups below the minimum take the
//! experts with the weakest affinity to their own group from groups above
//! it. [`utilisation`] and [`size_deviation`] are Eq. 1's `U(r)` and `S(r)`;
//! [`knee`] picks `r` on the `(S, U)` curve. [`hierarchical_grouping`]
//! groups over nodes first, then within each node over its GPUs.
//!
//! **All experts are placed when `D ∤ Ne`.** `D · (E + δ) ≥ D · (E + 1) >
//! Ne`, so the groups with room always hold every expert pushed out, and
//! `D · max(1, E − δ) ≤ D · E ≤ Ne`, so the minimum can always be met;
//! the `Ne mod D` experts beyond `D · E` simply sit in groups above `E`.
//! With fewer experts than groups (`E = 0`) the minimum is 0, not the
//! paper's 1, which could not be met.
//!
//! **Where a pushed-out expert goes.** Algorithm 2 line 14 reads
//! `argmax_d IntraScore(A, L_d ∪ {e})`: the score of the whole resulting
//! group, which sends every expert to whichever group is already densest,
//! whatever its tie to `e`. The sum of the groups' scores — what `U`
//! measures — grows by `IntraScore(L_d ∪ {e}) − IntraScore(L_d)`, so that
//! gain (`e`'s affinity to the group, both directions) is what is maximised
//! here; ties go to the smaller group, then the lower index.
//!
//! **Capacity over nodes** (the GPU's expert slots). A GPU holds at most
//! `E + δ` primary experts at the largest ratio tried (the global `E`, `δ`
//! of `D = N · G` groups; `2E` at [`RATIOS`]' `r = 1`), a node `G` times
//! that. Node groups are spectral clusters with no bound but that one —
//! fully non-uniform, §4.1 — and, the slots being the same at every ratio,
//! one node grouping serves the whole `(S, U)` curve: `r` shapes only the
//! groups within a node, as the paper's "controlled within each node"
//! says. A cluster larger than its node keeps its best-tied members by
//! Algorithm 2's rule and the rest go to the node with room they are most
//! tied to; a node with fewer than `G` experts takes the weakest-tied ones
//! of other nodes, so every GPU holds at least one. Within a node of `m`
//! experts, Algorithm 2 runs as printed with `Ne = m`, `D = G`, its maximum
//! capped at the slots — always feasible, as `m ≤ G ·` slots.
//!
//! Complexity, `n` experts, `k` groups: Algorithm 2 is O(n² + n · k) — the
//! trimming sorts each cluster by its row sums, every move of an expert
//! updates one column of an `n × k` table of affinities to groups; the
//! curve and the knee are O(P) over `P` ratios; [`hierarchical_grouping`]
//! adds one clustering per node (the caller's).

use ndarray::Array2;
use serde::Serialize;

use crate::data::topology::Topology;
use crate::error::{Error, Result};

const NAME: &str = "grace";

/// The non-uniformity ratios the `(S, U)` curve tries, ascending.
pub(crate) const RATIOS: [f64; 8] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0];

/// Algorithm 1: `Σ_{i∈S} Σ_{j∈S} A[i][j]` (both orders, so each pair
/// twice in a symmetric matrix). Ids outside `a` count nothing.
#[cfg(test)]
pub(crate) fn intra_score(a: &Array2<f64>, experts: &[usize]) -> f64 {
    experts
        .iter()
        .map(|&i| experts.iter().filter_map(|&j| a.get((i, j))).sum::<f64>())
        .sum()
}

/// Algorithm 2's size bounds for `experts` in `groups` groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct SizeBounds {
    /// `E = ⌊Ne / D⌋`.
    pub ideal: usize,
    /// `δ = max(1, round(E · r))`.
    pub delta: usize,
    /// `max(1, E − δ)` (0 when `E = 0`).
    pub min: usize,
    /// `E + δ`: also a GPU's primary slots.
    pub max: usize,
}

/// Algorithm 2 lines 2–3 for `experts` experts, `groups` groups and ratio
/// `ratio` (finite, non-negative).
pub(crate) fn size_bounds(experts: usize, groups: usize, ratio: f64) -> Result<SizeBounds> {
    if groups == 0 {
        return Err(Error::planner(NAME, "zero groups"));
    }
    if !ratio.is_finite() || ratio < 0.0 {
        return Err(Error::planner(
            NAME,
            format!("non-uniformity ratio {ratio} must be finite and non-negative"),
        ));
    }
    let ideal = experts / groups;
    // Capped at Ne: a larger δ allows nothing more.
    let delta = ((ideal as f64 * ratio).round().min(experts as f64) as usize).max(1);
    let min = if ideal == 0 {
        0
    } else {
        ideal.saturating_sub(delta).max(1)
    };
    Ok(SizeBounds {
        ideal,
        delta,
        min,
        max: ideal + delta,
    })
}

#[cfg(test)]
fn check_affinity(a: &Array2<f64>) -> Result<usize> {
    let (n, m) = a.dim();
    if n != m {
        return Err(Error::planner(
            NAME,
            format!("affinity is {n} × {m}, not square"),
        ));
    }
    // The plain scan first: the indexed one only to name a bad entry.
    if a.iter().any(|v| !v.is_finite() || *v < 0.0) {
        if let Some(((i, j), v)) = a.indexed_iter().find(|(_, v)| !v.is_finite() || **v < 0.0) {
            return Err(Error::planner(
                NAME,
                format!("affinity {v} at ({i}, {j}): must be finite and non-negative"),
            ));
        }
    }
    Ok(n)
}

/// Algorithm 2 with explicit bounds: `labels[e]` (`0..k`) is expert `e`'s
/// initial cluster; returns `k` groups (ascending expert ids), each of
/// `min..=max` experts. Needs `k · min ≤ n ≤ k · max`.
#[cfg(test)]
pub(crate) fn bounded_grouping(
    a: &Array2<f64>,
    labels: &[usize],
    k: usize,
    min: usize,
    max: usize,
) -> Result<Vec<Vec<usize>>> {
    let n = check_affinity(a)?;
    bounded_unchecked(&symmetrised(a), n, labels, k, min, max)
}

/// `sym[j · n + e] = A[e][j] + A[j][e]`: e's tie to j both ways, row by
/// row, so Algorithm 2's sums run over contiguous memory. Each pair is
/// added once (`0 + A[i][j] + A[j][i]`, the same bits in either order) and
/// written to both places.
pub(super) fn symmetrised(a: &Array2<f64>) -> Vec<f64> {
    let n = a.nrows().min(a.ncols());
    let mut sym = vec![0.0; n * n];
    for i in 0..n {
        for j in i..n {
            let (Some(&x), Some(&y)) = (a.get((i, j)), a.get((j, i))) else {
                continue;
            };
            let v = 0.0 + x + y;
            if let Some(s) = sym.get_mut(i * n + j) {
                *s = v;
            }
            if let Some(s) = sym.get_mut(j * n + i) {
                *s = v;
            }
        }
    }
    sym
}

/// [`bounded_grouping`] of the `n × n` [`symmetrised`] `sym` of a square,
/// finite, non-negative matrix (a sub-matrix of a checked one): every other
/// check, not the O(n²) scan of values. Reads only `sym`: `sym[i · n + j]`
/// is `A[i][j] + A[j][i]` to the bit, the sum line 8 ranks by.
fn bounded_unchecked(
    sym: &[f64],
    n: usize,
    labels: &[usize],
    k: usize,
    min: usize,
    max: usize,
) -> Result<Vec<Vec<usize>>> {
    if sym.len() != n * n {
        return Err(Error::planner(
            NAME,
            format!("{} affinities for {n} experts", sym.len()),
        ));
    }
    if labels.len() != n {
        return Err(Error::planner(
            NAME,
            format!("{} cluster labels for {n} experts", labels.len()),
        ));
    }
    if let Some(&bad) = labels.iter().find(|&&l| l >= k) {
        return Err(Error::planner(
            NAME,
            format!("cluster label {bad} is not below {k}"),
        ));
    }
    if k == 0 || min > max || k.saturating_mul(min) > n || k.saturating_mul(max) < n {
        return Err(Error::planner(
            NAME,
            format!("{n} experts cannot make {k} groups of {min} to {max}"),
        ));
    }
    let mut clusters: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (e, &l) in labels.iter().enumerate() {
        clusters[l].push(e);
    }
    // Lines 6–12: over-full clusters keep their best-tied `max`.
    let mut groups = Vec::with_capacity(k);
    let mut omega = Vec::new();
    for c in clusters {
        if c.len() > max {
            let mut scored: Vec<(f64, usize)> = c
                .iter()
                .map(|&i| {
                    let row = sym.get(i * n..(i + 1) * n).unwrap_or(&[]);
                    let tie: f64 = c.iter().filter_map(|&j| row.get(j)).sum();
                    (tie, i)
                })
                .collect();
            crate::sort::sort_by(&mut scored, |x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
            let (keep, rest) = scored.split_at(max);
            groups.push(keep.iter().map(|&(_, i)| i).collect::<Vec<_>>());
            omega.extend(rest.iter().map(|&(_, i)| i));
        } else {
            groups.push(c);
        }
    }
    let tie = |x: usize| sym.get(x * n..(x + 1) * n).unwrap_or(&[]);
    // pull[g · n + e]: e's affinity to the members of group g, both
    // directions (IntraScore's gain when e joins g). Kept current as
    // experts move.
    let mut pull = vec![0.0; k * n];
    // Adds (or takes) x's ties to every expert but x itself to group g's
    // row: the entries before x and after it, so the loops have no branch.
    let add = |pull: &mut [f64], g: usize, x: usize, sign: f64| {
        let row = tie(x);
        if let Some(p) = pull.get_mut(g * n..(g + 1) * n) {
            let (p_lo, p_hi) = p.split_at_mut(x.min(n));
            let (w_lo, w_hi) = row.split_at(x.min(row.len()));
            let (p_hi, w_hi) = (
                p_hi.get_mut(1..).unwrap_or(&mut []),
                w_hi.get(1..).unwrap_or(&[]),
            );
            if sign > 0.0 {
                p_lo.iter_mut().zip(w_lo).for_each(|(p, &w)| *p += w);
                p_hi.iter_mut().zip(w_hi).for_each(|(p, &w)| *p += w);
            } else {
                p_lo.iter_mut().zip(w_lo).for_each(|(p, &w)| *p -= w);
                p_hi.iter_mut().zip(w_hi).for_each(|(p, &w)| *p -= w);
            }
        }
    };
    for (g, members) in groups.iter().enumerate() {
        for &j in members {
            add(&mut pull, g, j, 1.0);
        }
    }
    let at = |pull: &[f64], e: usize, g: usize| pull.get(g * n + e).copied().unwrap_or(0.0);
    // Lines 13–16: each pushed-out expert to the group with room it gains most.
    for &e in &omega {
        let best = (0..k)
            .filter(|&g| groups[g].len() < max)
            .max_by(|&g, &h| {
                at(&pull, e, g)
                    .total_cmp(&at(&pull, e, h))
                    .then(groups[h].len().cmp(&groups[g].len()))
                    .then(h.cmp(&g))
            })
            .ok_or_else(|| Error::planner(NAME, "no group with room (unreachable)"))?;
        groups[best].push(e);
        add(&mut pull, best, e, 1.0);
    }
    // Lines 17–21: needy groups take the weakest-tied experts of groups
    // above the minimum, one at a time so each choice sees the last move.
    let mut group_of = vec![0usize; n];
    for (g, members) in groups.iter().enumerate() {
        for &e in members {
            group_of[e] = g;
        }
    }
    while groups.iter().any(|g| g.len() < min) {
        let x = (0..n)
            .filter(|&e| groups[group_of[e]].len() > min)
            .min_by(|&x, &y| {
                at(&pull, x, group_of[x])
                    .total_cmp(&at(&pull, y, group_of[y]))
                    .then(groups[group_of[y]].len().cmp(&groups[group_of[x]].len()))
                    .then(x.cmp(&y))
            })
            .ok_or_else(|| Error::planner(NAME, "no group above the minimum (unreachable)"))?;
        let to = (0..k)
            .filter(|&g| groups[g].len() < min)
            .max_by(|&g, &h| {
                at(&pull, x, g)
                    .total_cmp(&at(&pull, x, h))
                    .then(groups[h].len().cmp(&groups[g].len()))
                    .then(h.cmp(&g))
            })
            .ok_or_else(|| Error::planner(NAME, "no needy group (unreachable)"))?;
        let from = group_of[x];
        groups[from].retain(|&e| e != x);
        groups[to].push(x);
        group_of[x] = to;
        add(&mut pull, from, x, -1.0);
        add(&mut pull, to, x, 1.0);
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    Ok(groups)
}

/// Algorithm 2: `d` groups of `[max(1, E − δ), E + δ]` experts from the
/// initial clustering `labels` (`0..d`, e.g. spectral clustering's).
#[cfg(test)]
pub(crate) fn controlled_grouping(
    a: &Array2<f64>,
    labels: &[usize],
    d: usize,
    ratio: f64,
) -> Result<Vec<Vec<usize>>> {
    let b = size_bounds(a.nrows(), d, ratio)?;
    bounded_grouping(a, labels, d, b.min, b.max)
}

/// Eq. 1's `U`: the share of the affinity `Σ_{i<j} A[i][j]` inside groups
/// (0 when there is no affinity at all).
///
/// ```
/// use moeplan::planners::grouping_utilisation as utilisation;
/// use ndarray::array;
/// let a = array![[0., 3., 1.], [3., 0., 0.], [1., 0., 0.]];
/// assert_eq!(utilisation(&a, &[vec![0, 1], vec![2]]), 0.75);
/// ```
pub fn utilisation(a: &Array2<f64>, groups: &[Vec<usize>]) -> f64 {
    utilisation_of_total(a, groups, pair_total(a))
}

/// `Σ_{i<j} A[i][j]`, row by row: Eq. 1's denominator, the same for every
/// grouping of one matrix.
pub(super) fn pair_total(a: &Array2<f64>) -> f64 {
    let n = a.nrows().min(a.ncols());
    let mut total = 0.0;
    for (i, row) in a.outer_iter().enumerate() {
        for &v in row.iter().take(n).skip(i + 1) {
            total += v;
        }
    }
    total
}

/// [`utilisation`] with the denominator [`pair_total`] known: O(Σ |group|²)
/// instead of O(n²). The pairs inside groups are summed in the same order
/// as a row-by-row scan would (ascending `i`, then `j`), so the value is
/// the same to the bit.
pub(super) fn utilisation_of_total(a: &Array2<f64>, groups: &[Vec<usize>], total: f64) -> f64 {
    let n = a.nrows().min(a.ncols());
    let mut group_of = vec![usize::MAX; n];
    for (g, members) in groups.iter().enumerate() {
        for &e in members {
            if let Some(x) = group_of.get_mut(e) {
                *x = g;
            }
        }
    }
    // Each group's members that it really holds (a later group wins an
    // expert listed twice), ascending and once each.
    let mut sorted: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    for (e, &g) in group_of.iter().enumerate() {
        if let Some(s) = sorted.get_mut(g) {
            s.push(e);
        }
    }
    let mut inside = 0.0;
    for (i, (row, &gi)) in a.outer_iter().zip(&group_of).enumerate() {
        let Some(members) = sorted.get(gi) else {
            continue;
        };
        for &j in members.iter().filter(|&&j| j > i) {
            inside += row.get(j).copied().unwrap_or(0.0);
        }
    }
    if total > 0.0 { inside / total } else { 0.0 }
}

/// Eq. 1's `S`: `√(mean_d (|C_d| − E)²)` with the exact `E = Ne / D` (so a
/// split as even as `D ∤ Ne` allows scores least).
pub(crate) fn size_deviation(groups: &[Vec<usize>]) -> f64 {
    let d = groups.len();
    if d == 0 {
        return 0.0;
    }
    let e = groups.iter().map(Vec::len).sum::<usize>() as f64 / d as f64;
    (groups
        .iter()
        .map(|g| (g.len() as f64 - e).powi(2))
        .sum::<f64>()
        / d as f64)
        .sqrt()
}

/// One point of the `(S(r), U(r))` curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioPoint {
    /// The non-uniformity ratio `r`.
    pub ratio: f64,
    /// Its `δ` (GPU level).
    pub delta: usize,
    /// `S(r)`: deviation of the GPU groups' sizes.
    pub size_deviation: f64,
    /// `U(r)`: share of the affinity inside GPU groups.
    pub utilisation: f64,
}

/// The knee of the `(S, U)` curve, as an index into `points` (in ascending
/// `r`): Kneedle (Satopää et al., 2011) — scale `S` and `U` each to
/// `[0, 1]` over the curve and take the point farthest above the diagonal,
/// `U' − S'`, where one more unit of size deviation stops buying affinity.
/// Ties (and points repeated because several `r` round to one `δ`) go to
/// the smallest `r`; a curve whose `U` does not move (no affinity to win)
/// gives the first point. `None` for no points.
pub(crate) fn knee(points: &[RatioPoint]) -> Option<usize> {
    points.first()?;
    let span = |f: fn(&RatioPoint) -> f64| {
        let lo = points.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = points.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        (lo, hi - lo)
    };
    let (s_lo, s_span) = span(|p| p.size_deviation);
    let (u_lo, u_span) = span(|p| p.utilisation);
    if u_span <= 1e-12 || !u_span.is_finite() || !s_span.is_finite() {
        return Some(0);
    }
    let score = |p: &RatioPoint| {
        let x = if s_span > 1e-12 {
            (p.size_deviation - s_lo) / s_span
        } else {
            0.0
        };
        (p.utilisation - u_lo) / u_span - x
    };
    let mut best = (0, f64::NEG_INFINITY);
    for (i, p) in points.iter().enumerate() {
        let s = score(p);
        if s > best.1 + 1e-12 {
            best = (i, s);
        }
    }
    Some(best.0)
}

/// Clusters a node's experts over its GPUs: called with the node's experts
/// (global ids), their affinity sub-matrix and `G`; returns labels `0..G`.
#[cfg(test)]
pub(crate) type Clusterer<'a> = dyn FnMut(&[usize], &Array2<f64>, usize) -> Result<Vec<usize>> + 'a;

/// Hierarchical grouping for `topology` (`N` nodes × `G` GPUs): the experts
/// are split over nodes by `node_labels` (`0..N`, fully non-uniform spectral
/// clusters; ignored when `N = 1`) within each node's capacity, then each
/// node's experts over its GPUs by `cluster` (called with the node's
/// experts, their affinity sub-matrix and `G`; returns labels `0..G`) and
/// Algorithm 2 (see the module's "Capacity over nodes"). Returns `D` groups,
/// GPU ids node-major as in [`Topology`]. Needs at least one expert per GPU.
#[cfg(test)]
pub(crate) fn hierarchical_grouping(
    a: &Array2<f64>,
    topology: Topology,
    ratio: f64,
    node_labels: &[usize],
    cluster: &mut Clusterer<'_>,
) -> Result<Vec<Vec<usize>>> {
    let n = check_affinity(a)?;
    let sym = LazySym::new(a);
    let cap = gpu_capacity(n, topology, widest_ratio(ratio))?;
    let nodes = node_grouping(sym.get(), n, topology, cap, node_labels)?;
    let mut by_matrix =
        |members: &[usize], _: &[f64], g: usize| cluster(members, &gather(a, members), g);
    within_nodes(
        &sym,
        n,
        topology,
        ratio,
        cap,
        &nodes,
        &mut by_matrix,
        &mut std::collections::HashMap::new(),
    )
}

/// `a` restricted to `members` (rows and columns), by direct indexing:
/// ndarray's `select` twice costs several times more.
pub(super) fn gather(a: &Array2<f64>, members: &[usize]) -> Array2<f64> {
    let m = members.len();
    let mut values = Vec::with_capacity(m * m);
    for &i in members {
        for &j in members {
            values.push(a.get((i, j)).copied().unwrap_or(0.0));
        }
    }
    Array2::from_shape_vec((m, m), values).unwrap_or_else(|_| Array2::zeros((m, m)))
}

/// The rows and columns `members` of the `n × n` row-major `sym`.
fn gather_flat(sym: &[f64], n: usize, members: &[usize]) -> Vec<f64> {
    let mut values = Vec::with_capacity(members.len() * members.len());
    for &i in members {
        let row = sym.get(i * n..(i + 1) * n).unwrap_or(&[]);
        values.extend(members.iter().map(|&j| row.get(j).copied().unwrap_or(0.0)));
    }
    values
}

/// The largest ratio GRACE tries when asked for `ratio`: [`RATIOS`]' last
/// or `ratio`, whichever is larger. A GPU's slots are those of this ratio.
pub(crate) fn widest_ratio(ratio: f64) -> f64 {
    RATIOS.iter().copied().fold(ratio, f64::max)
}

/// The most primary experts a GPU holds at `ratio` (`E + δ`), after
/// checking that each of the `n` experts' GPUs can get one.
pub(super) fn gpu_capacity(n: usize, topology: Topology, ratio: f64) -> Result<usize> {
    let d = topology.num_gpus();
    if n < d {
        return Err(Error::planner(
            NAME,
            format!("{n} experts cannot give each of {d} GPUs one"),
        ));
    }
    Ok(size_bounds(n, d, ratio)?.max)
}

/// The first level of [`hierarchical_grouping`]: the experts of each node,
/// each node holding `G` to `G · cap` of them; `sym` is [`symmetrised`] of
/// the checked `n × n` affinity; `cap` is a GPU's slots. The same for
/// every ratio tried with those slots.
pub(super) fn node_grouping(
    sym: &[f64],
    n: usize,
    topology: Topology,
    cap: usize,
    node_labels: &[usize],
) -> Result<Vec<Vec<usize>>> {
    let (nodes, g) = (topology.nodes(), topology.gpus_per_node());
    if nodes == 1 {
        Ok(vec![(0..n).collect::<Vec<_>>()])
    } else {
        bounded_unchecked(sym, n, node_labels, nodes, g, g.saturating_mul(cap))
    }
}

/// Clusters a node's experts over its GPUs inside [`within_nodes`]: called
/// with the node's experts, their [`symmetrised`] affinity (row-major,
/// `m × m`) and `G`; returns labels `0..G`.
pub(super) type NodeClusterer<'a> = dyn FnMut(&[usize], &[f64], usize) -> Result<Vec<usize>> + 'a;

/// Where [`within_nodes`] keeps a node's GPU groups (local indices) by its
/// members, `G` and Algorithm 2's bounds: ratios with the same bounds, and
/// later clusters, share them.
pub(super) trait NodeMemo {
    /// The groups kept for this node, if any.
    fn get(
        &mut self,
        members: &[usize],
        g: usize,
        min: usize,
        max: usize,
    ) -> Option<Vec<Vec<usize>>>;
    /// Keeps `groups` for this node.
    fn put(&mut self, members: &[usize], g: usize, min: usize, max: usize, groups: &[Vec<usize>]);
}

/// A node's members, `G`, and Algorithm 2's minimum and maximum.
pub(super) type NodeKey = (Vec<usize>, usize, usize, usize);

impl NodeMemo for std::collections::HashMap<NodeKey, Vec<Vec<usize>>> {
    fn get(
        &mut self,
        members: &[usize],
        g: usize,
        min: usize,
        max: usize,
    ) -> Option<Vec<Vec<usize>>> {
        std::collections::HashMap::get(self, &(members.to_vec(), g, min, max)).cloned()
    }
    fn put(&mut self, members: &[usize], g: usize, min: usize, max: usize, groups: &[Vec<usize>]) {
        self.insert((members.to_vec(), g, min, max), groups.to_vec());
    }
}

/// [`symmetrised`] of a checked matrix, made on first use: a cluster whose
/// groupings are all kept needs none of it (O(n²) per layer otherwise).
pub(super) struct LazySym<'a> {
    a: &'a Array2<f64>,
    sym: std::cell::OnceCell<Vec<f64>>,
}

impl<'a> LazySym<'a> {
    pub(super) fn new(a: &'a Array2<f64>) -> Self {
        LazySym {
            a,
            sym: std::cell::OnceCell::new(),
        }
    }

    pub(super) fn get(&self) -> &[f64] {
        self.sym.get_or_init(|| symmetrised(self.a))
    }
}

/// The second level of [`hierarchical_grouping`]: each node's experts
/// over its GPUs; `sym` as for [`node_grouping`], read only for a node
/// whose groups `memo` does not hold.
#[allow(clippy::too_many_arguments)]
pub(super) fn within_nodes(
    sym: &LazySym<'_>,
    n: usize,
    topology: Topology,
    ratio: f64,
    cap: usize,
    node_groups: &[Vec<usize>],
    cluster: &mut NodeClusterer<'_>,
    memo: &mut dyn NodeMemo,
) -> Result<Vec<Vec<usize>>> {
    let g = topology.gpus_per_node();
    let mut out = Vec::with_capacity(topology.num_gpus());
    for members in node_groups {
        let m = members.len();
        let local = size_bounds(m, g, ratio)?;
        let (min, max) = (local.min, local.max.min(cap));
        let groups = match memo.get(members, g, min, max) {
            Some(groups) => groups,
            None => {
                let sub = gather_flat(sym.get(), n, members);
                let labels = if g == 1 {
                    vec![0; m]
                } else if m == g {
                    (0..m).collect()
                } else {
                    cluster(members, &sub, g)?
                };
                let groups = bounded_unchecked(&sub, m, &labels, g, min, max)?;
                memo.put(members, g, min, max, &groups);
                groups
            }
        };
        out.extend(groups.into_iter().map(|grp| {
            grp.into_iter()
                .filter_map(|i| members.get(i).copied())
                .collect::<Vec<_>>()
        }));
    }
    Ok(out)
}

/// The fallback without affinity: experts heaviest first, each to the
/// lightest group with room, `⌊n / d⌋` or `⌈n / d⌉` experts each (only
/// `n mod d` groups take the larger size). `loads` per expert.
///
/// ```
/// use moeplan::planners::load_grouping;
/// let g = load_grouping(&[5.0, 1.0, 4.0, 2.0, 3.0], 2);
/// assert_eq!(g, vec![vec![0, 1, 3], vec![2, 4]]);
/// ```
pub fn load_grouping(loads: &[f64], d: usize) -> Vec<Vec<usize>> {
    let n = loads.len();
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); d];
    if d == 0 {
        return groups;
    }
    let (base, mut larger) = (n / d, n % d);
    let mut order: Vec<usize> = (0..n).collect();
    crate::sort::sort_by(&mut order, |&x, &y| {
        loads[y].total_cmp(&loads[x]).then(x.cmp(&y))
    });
    let mut weight = vec![0.0f64; d];
    for e in order {
        let room = |g: usize, groups: &[Vec<usize>]| {
            groups[g].len() < base || (groups[g].len() == base && larger > 0)
        };
        let Some(best) = (0..d)
            .filter(|&g| room(g, &groups))
            .min_by(|&g, &h| weight[g].total_cmp(&weight[h]).then(g.cmp(&h)))
        else {
            break;
        };
        if groups[best].len() == base {
            larger -= 1;
        }
        groups[best].push(e);
        weight[best] += loads[e];
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn grouping_size_bounds_example() {
        let run = || {
            use super::size_bounds;
            let b = size_bounds(64, 8, 0.25)?;
            assert_eq!((b.ideal, b.delta, b.min, b.max), (8, 2, 6, 10));
            let b = size_bounds(66, 8, 0.0)?; // 66 / 8: E = 8, δ = 1
            assert_eq!((b.min, b.max), (7, 9));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn grouping_size_deviation_example() {
        use super::size_deviation;
        assert_eq!(size_deviation(&[vec![0, 1, 2], vec![3]]), 1.0);
    }

    #[test]
    fn grouping_knee_example() {
        use super::{RatioPoint, knee};
        let p = |ratio, s, u| RatioPoint {
            ratio,
            delta: 1,
            size_deviation: s,
            utilisation: u,
        };
        let curve = [
            p(0.0, 0.0, 0.2),
            p(0.1, 1.0, 0.7),
            p(0.2, 2.0, 0.8),
            p(0.5, 4.0, 0.82),
        ];
        assert_eq!(knee(&curve), Some(1));
    }

    #[test]
    fn grouping_widest_ratio_example() {
        use super::widest_ratio;
        assert_eq!(widest_ratio(0.2), 1.0);
        assert_eq!(widest_ratio(1.5), 1.5);
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn grouping_intra_score_example() {
        use super::intra_score;
        use ndarray::array;
        let a = array![[0., 3., 1.], [3., 0., 2.], [1., 2., 0.]];
        assert_eq!(intra_score(&a, &[0, 1]), 6.0);
        assert_eq!(intra_score(&a, &[0, 1, 2]), 12.0);
    }

    #[test]
    fn grouping_bounded_grouping_example() {
        let run = || {
            use super::bounded_grouping;
            use ndarray::Array2;
            let a = Array2::from_elem((6, 6), 1.0);
            let g = bounded_grouping(&a, &[0, 0, 0, 0, 0, 1], 2, 2, 4)?;
            assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 2]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn grouping_controlled_grouping_example() {
        let run = || {
            use super::controlled_grouping;
            use ndarray::Array2;
            let a = Array2::from_elem((8, 8), 1.0);
            // one cluster of 7 and one of 1; E = 4, δ = 1: sizes within [3, 5]
            let g = controlled_grouping(&a, &[0, 0, 0, 0, 0, 0, 0, 1], 2, 0.0)?;
            assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![5, 3]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn grouping_hierarchical_grouping_example() {
        let run = || {
            use super::hierarchical_grouping;
            use moeplan::Topology;
            use ndarray::Array2;
            let a = Array2::from_elem((8, 8), 1.0);
            let mut by_position = |members: &[usize], _: &Array2<f64>, g: usize| {
                Ok((0..members.len()).map(|i| i * g / members.len()).collect())
            };
            let groups = hierarchical_grouping(
                &a,
                Topology::new(2, 2)?,
                0.0,
                &[0, 0, 0, 0, 1, 1, 1, 1],
                &mut by_position,
            )?;
            assert_eq!(groups, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
