//! An upper bound on the balancedness any plan can reach — what none of the
//! papers shows, so a user knows how much better than a given plan is
//! possible at all.
//!
//! Under even split, a GPU holding a copy of expert `e` (with `c_e` copies)
//! receives at least `w_e / c_e` tokens, and the busiest GPU at least the
//! mean `W / D`. So for any plan whose layer holds `E + r` slots,
//!
//! ```text
//! balancedness ≤ (W / D) / max(W / D, min over c of max_e w_e / c_e)
//! ```
//!
//! where `c` ranges over copy vectors with `c_e ≥ 1`, `Σ c_e ≤ E + r` and
//! `c_e ≤ D` (copies beyond `D` share a GPU and lower nothing further).
//! Replicating the expert with the highest load per copy, one copy at a time,
//! attains that inner minimum. The bound is taken per batch (each batch may
//! pick its own `c`, so it also bounds a plan that is fixed for all batches)
//! and averaged like balancedness itself: over batches, then layers.
//!
//! Cost: O(B · (E + r log E)) per layer and replica count `r`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use ndarray::{ArrayView1, Axis};

use crate::data::cache::PerLayer;
use crate::data::trace::LoadTrace;

/// Per-batch bound curve of one layer: `curve[r]` for `r = 0..=r_max`,
/// averaged over batches.
///
/// ```
/// use moeplan::{judge::layer_bound_curve, LoadTrace};
/// use ndarray::Array3;
/// // one hot expert with 3× the load of each of the other 3, on 2 GPUs
/// let t = LoadTrace::new(Array3::from_shape_vec((1, 1, 4), vec![3., 1., 1., 1.]).unwrap(), vec![0])?;
/// let curve = layer_bound_curve(&t, 0, 2, 2);
/// assert_eq!(curve, vec![1.0, 1.0, 1.0]); // mean 3 = hot expert 3: no bound below 1
/// let curve = layer_bound_curve(&t, 0, 4, 1);
/// assert_eq!(curve, vec![0.5, 1.0]); // 4 GPUs: mean 1.5, hot 3 → 0.5; one copy more → 1.5
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn layer_bound_curve(trace: &LoadTrace, layer: usize, gpus: usize, r_max: usize) -> Vec<f64> {
    let mut curve = vec![0.0; r_max + 1];
    let counts = trace.counts().index_axis(Axis(1), layer);
    let mut heap = BinaryHeap::new();
    for row in counts.outer_iter() {
        batch_curve(row, gpus, &mut heap, |r, v| curve[r] += v, r_max);
    }
    let b = trace.num_batches() as f64;
    curve.iter_mut().for_each(|x| *x /= b);
    curve
}

/// The bound for one layer at exactly `r` replicas, averaged over batches
/// (read from the curve kept with the trace for `r ≤ gpus`).
pub(crate) fn layer_bound(trace: &LoadTrace, layer: usize, gpus: usize, r: usize) -> f64 {
    if r <= gpus && layer < trace.num_layers() {
        return kept_curve(trace, layer, gpus)[r];
    }
    layer_bound_curve(trace, layer, gpus, r)[r]
}

/// Layer curves kept with a trace ([`LoadTrace::memo`]), per GPU count
/// and layer: every plan judged on a cluster reads the same ones (the
/// page judges three static plans and CRAFT measures them again at every
/// cluster change). At most four GPU counts.
type Kept = PerLayer<usize, Vec<f64>, 4>;

/// [`layer_bound_curve`] with `r_max = gpus`, kept with the trace: the
/// curve at `r` does not depend on how far it goes (each batch's copies
/// are added one at a time), so every bound up to `gpus` replicas reads it.
pub(crate) fn kept_curve(trace: &LoadTrace, layer: usize, gpus: usize) -> Arc<Vec<f64>> {
    let kept = trace.memo::<Kept>("judge::bound");
    if let Some(c) = kept.get(&gpus, layer) {
        return c;
    }
    let curve = Arc::new(layer_bound_curve(trace, layer, gpus, gpus));
    kept.put(&gpus, trace.num_layers(), layer, Arc::clone(&curve));
    curve
}

/// The bound under a per-batch schedule (Libra's): every batch is bounded
/// with the replica count its own plan has in each layer (the base's
/// copies plus those the schedule made for that batch), per layer averaged
/// over batches; a static placement gets [`layer_bound`]'s figures. The
/// even-split argument needs only that some copy of `e` carries `w_e / c_e`
/// or more, so it holds for any split over the copies, Libra's
/// rebalancing included. Errors where the placement does not cover the
/// trace's batches and layers, as [`crate::judge::simulate`] does.
pub(crate) fn per_batch_bound(
    trace: &LoadTrace,
    placement: &crate::judge::Placement,
) -> crate::Result<Vec<f64>> {
    let (b_n, l_n) = (trace.num_batches(), trace.num_layers());
    let mut sum = vec![0.0; l_n];
    let mut heap = BinaryHeap::new();
    for (range, plan) in crate::judge::segments(placement, b_n)? {
        plan.check_matches(trace)?;
        let d = plan.topology().num_gpus();
        let replicas = replicas_per_layer(plan);
        for b in range {
            for (l, &r) in replicas.iter().enumerate() {
                sum[l] += batch_bound(trace, (b, l), d, r, &mut heap);
            }
        }
    }
    Ok(sum.iter().map(|&s| s / b_n.max(1) as f64).collect())
}

/// Each layer's slots beyond one per expert (the plan's summary would
/// also count same-GPU duplicates, for every plan of a schedule).
pub(crate) fn replicas_per_layer(plan: &crate::data::plan::Plan) -> Vec<usize> {
    plan.layers()
        .iter()
        .map(|lp| lp.total_slots().saturating_sub(plan.num_experts()))
        .collect()
}

/// Batch `b`, layer index `l`'s bound with `replicas` copies beyond one
/// per expert on `gpus` GPUs: a term of [`per_batch_bound`] (`heap` is
/// scratch).
pub(crate) fn batch_bound(
    trace: &LoadTrace,
    (b, l): (usize, usize),
    gpus: usize,
    replicas: usize,
    heap: &mut BinaryHeap<PerCopy>,
) -> f64 {
    let row = trace.counts().slice(ndarray::s![b, l, ..]);
    let mut at_r = 1.0;
    batch_curve(
        row,
        gpus,
        heap,
        |x, v| {
            if x == replicas {
                at_r = v
            }
        },
        replicas,
    );
    at_r
}

#[derive(PartialEq)]
pub(crate) struct PerCopy {
    load: f64,
    expert: usize,
    copies: usize,
}

impl Eq for PerCopy {}
impl PartialOrd for PerCopy {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PerCopy {
    fn cmp(&self, other: &Self) -> Ordering {
        self.load
            .total_cmp(&other.load)
            .then(other.expert.cmp(&self.expert))
    }
}

/// Feeds `emit(r, bound)` for `r = 0..=r_max` for one batch row.
fn batch_curve(
    row: ArrayView1<'_, f64>,
    gpus: usize,
    heap: &mut BinaryHeap<PerCopy>,
    mut emit: impl FnMut(usize, f64),
    r_max: usize,
) {
    let total: f64 = row.sum();
    let mean = total / gpus as f64;
    if total <= 0.0 {
        (0..=r_max).for_each(|r| emit(r, 1.0));
        return;
    }
    // Only experts above the mean ever get another copy before the bound
    // reaches 1, so the heap holds just those (usually a handful).
    heap.clear();
    heap.extend(
        row.iter()
            .enumerate()
            .filter(|&(_, &w)| w > mean)
            .map(|(e, &w)| PerCopy {
                load: w,
                expert: e,
                copies: 1,
            }),
    );
    for r in 0..=r_max {
        let Some(top) = heap.peek() else {
            // every expert at or below the mean: perfect balance is possible
            (r..=r_max).for_each(|x| emit(x, 1.0));
            return;
        };
        let max = top.load;
        if max <= mean {
            (r..=r_max).for_each(|x| emit(x, 1.0));
            return;
        }
        emit(r, mean / max);
        // One more copy for the expert with the highest load per copy; an
        // expert already on every GPU cannot come down further, and neither
        // can the bound.
        // Re-keyed where it stands (one sift, not a pop and a push): the
        // order is total (ties by expert), so the same top follows.
        if top.copies < gpus {
            if let Some(mut t) = heap.peek_mut() {
                t.copies += 1;
                t.load = row[t.expert] / t.copies as f64;
            }
        }
    }
}

/// Packing-aware bound of one layer with `r` replicas (`E + r` slots in
/// all), averaged over batches like [`layer_bound`], which it never
/// exceeds beyond its bisection's rounding (a relative 1e-9). See [`packing_peak`] for what it adds.
pub(crate) fn layer_packing_bound(trace: &LoadTrace, layer: usize, gpus: usize, r: usize) -> f64 {
    let counts = trace.counts().index_axis(Axis(1), layer);
    let slots = trace.num_experts() + r;
    let mut sum = 0.0;
    let mut row_buf = Vec::new();
    for row in counts.outer_iter() {
        row_buf.clear();
        row_buf.extend(row.iter().copied());
        sum += packing_balancedness(&row_buf, gpus, slots);
    }
    sum / trace.num_batches().max(1) as f64
}

/// Upper bound on the balancedness of one load vector placed on `gpus`
/// GPUs with `slots` slots in all (mean / `packing_peak`).
pub(crate) fn packing_balancedness(loads: &[f64], gpus: usize, slots: usize) -> f64 {
    let total: f64 = loads.iter().sum();
    if total <= 0.0 || gpus == 0 {
        return 1.0;
    }
    let mean = total / gpus as f64;
    (mean / packing_peak(loads, gpus, slots).max(mean)).min(1.0)
}

/// A lower bound on the busiest GPU's load of any plan of one load vector
/// on `gpus` GPUs with `slots` slots in all (copies split evenly, no GPU
/// with two copies of an expert): the smallest `T` for which some copy
/// counts `c` (`1 ≤ c_e ≤ D`, `Σ c_e ≤ slots`) pass
///
/// - every per-copy load `w_e / c_e ≤ T` (the bound of [`layer_bound`]);
/// - for `k = 1, 2, 3`: at most `k · D` copies weigh more than `T / (k + 1)`
///   — otherwise, by pigeonhole, some GPU holds `k + 1` of them and carries
///   more than `T` (with `k = 1`: the `D + 1` heaviest copies, two of which
///   share a GPU).
///
/// Whether such counts exist is decided on a relaxation (the fewest slots
/// that bring the heavy copies down, counted fractionally), so a `T` that
/// fails is certainly below the optimum; the bisection returns the largest
/// `T` seen to fail, or the mean or per-copy bound where larger.
/// O(40 · 3 · E log E) when packing binds, O(E) otherwise.
pub(crate) fn packing_peak(loads: &[f64], gpus: usize, slots: usize) -> f64 {
    let total: f64 = loads.iter().sum();
    let d = gpus.max(1);
    let mean = total / d as f64;
    if total <= 0.0 {
        return 0.0;
    }
    let mut heavy = Vec::new();
    // Most layers pass at the mean: packing does not bind, no bisection.
    let mut lo = mean;
    if feasible(loads, d, slots, lo, 3, &mut heavy) {
        return lo;
    }
    let mut hi = loads.iter().copied().fold(mean, f64::max).max(total / 2.0);
    if !feasible(loads, d, slots, hi, 3, &mut heavy) {
        hi = total;
    }
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if feasible(loads, d, slots, mid, 3, &mut heavy) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo <= 1e-9 * hi {
            break;
        }
    }
    lo
}

/// Whether copy counts exist that pass the conditions of [`packing_peak`]
/// at `t` (the first `ks` pigeonhole conditions), on a relaxation: `false`
/// proves no plan peaks at or below `t`.
fn feasible(
    loads: &[f64],
    d: usize,
    slots: usize,
    t: f64,
    ks: usize,
    heavy: &mut Vec<(f64, f64)>,
) -> bool {
    if t <= 0.0 {
        return false;
    }
    // fewest copies with per-copy load ≤ t; rounding errs towards fewer
    let need = |w: f64, cap: f64| ((w / cap) * (1.0 - 1e-12)).ceil().max(1.0);
    let mut base = 0.0;
    for &w in loads {
        let m = need(w, t);
        if m > d as f64 {
            return false;
        }
        base += m;
    }
    if base > slots as f64 + 1e-9 {
        return false;
    }
    for k in 1..=ks {
        let kd = (k * d) as f64;
        if kd >= slots as f64 {
            break; // at most `slots` copies in all: nothing to count
        }
        let tau = t / (k + 1) as f64;
        let mut count = 0.0;
        heavy.clear();
        for &w in loads {
            let m = need(w, t);
            if w / m > tau * (1.0 + 1e-12) {
                count += m;
                // bringing this expert's copies under tau: n copies in all
                let n = need(w, tau);
                let ratio = if n <= d as f64 {
                    (n - m) / m
                } else {
                    f64::INFINITY
                };
                heavy.push((ratio, m));
            }
        }
        let mut excess = count - kd;
        if excess <= 0.0 {
            continue;
        }
        // cheapest slots per heavy copy removed first (fractional knapsack:
        // never more than the integer optimum, so a failure is a proof)
        crate::sort::sort_by(heavy, |a, b| a.0.total_cmp(&b.0));
        let mut extra = 0.0;
        for &(ratio, m) in heavy.iter() {
            if excess <= 0.0 || !ratio.is_finite() {
                break;
            }
            let take = m.min(excess);
            extra += take * ratio;
            excess -= take;
        }
        if excess > 1e-9 || base + extra > slots as f64 + 1e-9 {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::model;
    use crate::synth::generator::{GenConfig, generate};

    /// The kept curve's bounds are the ones computed to exactly `r`, for
    /// every layer and `r ≤ D` at several GPU counts (more than are kept),
    /// and a second read is the kept curve itself.
    #[test]
    fn kept_curves_are_the_bounds_computed_to_r() {
        let trace = generate(&GenConfig::new(model::preset("olmoe").unwrap(), 3)).unwrap();
        let mut checked = 0;
        for d in [4, 8, 16, 32, 8, 64] {
            for l in 0..trace.num_layers() {
                for r in 0..=d {
                    let direct = layer_bound_curve(&trace, l, d, r)[r];
                    assert_eq!(layer_bound(&trace, l, d, r).to_bits(), direct.to_bits());
                    checked += 1;
                }
                assert!(Arc::ptr_eq(
                    &kept_curve(&trace, l, d),
                    &kept_curve(&trace, l, d)
                ));
            }
        }
        assert_eq!(checked, 16 * (5 + 9 + 17 + 33 + 9 + 65));
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn per_batch_bound() -> Result<(), Box<dyn std::error::Error>> {
        use crate::judge::Placement;
        use crate::judge::bound::{layer_bound, per_batch_bound};
        use crate::{LayerPlacement, LoadTrace, Plan, Topology, planners::contiguous};
        use ndarray::Array3;
        // batch 0: one hot expert; batch 1: the same, with a copy of it planned
        let t = LoadTrace::new(
            Array3::from_shape_vec((2, 1, 4), vec![6., 1., 1., 0., 6., 1., 1., 0.])?,
            vec![0],
        )?;
        let base = contiguous(&t, Topology::new(1, 2)?)?;
        let copy = Plan::new(
            Topology::new(1, 2)?,
            4,
            vec![LayerPlacement {
                layer: 0,
                gpus: vec![vec![0, 1], vec![2, 3, 0]],
            }],
            "x",
        )?;
        let b = per_batch_bound(&t, &Placement::Schedule(vec![(0..1, base), (1..2, copy)]))?;
        // batch 0 at 0 replicas: 4 / 6; batch 1 at 1 replica: 4 / 4
        assert!((b[0] - (4.0 / 6.0 + 1.0) / 2.0).abs() < 1e-12);
        assert!(b[0] > layer_bound(&t, 0, 2, 0));
        Ok(())
    }
    #[test]
    fn layer_packing_bound() -> Result<(), Box<dyn std::error::Error>> {
        use crate::LoadTrace;
        use crate::judge::bound::{layer_bound, layer_packing_bound};
        use ndarray::Array3;
        // 3 equal experts, 4 slots on 2 GPUs: a, b | a, c balances perfectly
        let t = LoadTrace::new(
            Array3::from_shape_vec((1, 1, 3), vec![1., 1., 1.]).unwrap(),
            vec![0],
        )?;
        assert_eq!(layer_packing_bound(&t, 0, 2, 1), 1.0);
        // 5 experts of load 1 on 4 GPUs, no replica: one GPU holds two → 1.25 / 2
        let t = LoadTrace::new(Array3::from_elem((1, 1, 5), 1.0), vec![0])?;
        assert_eq!(layer_bound(&t, 0, 4, 0), 1.0);
        assert!((layer_packing_bound(&t, 0, 4, 0) - 0.625).abs() < 1e-6);
        Ok(())
    }
    #[test]
    fn packing_peak() {
        use crate::judge::bound::packing_peak;
        // 5 equal experts on 4 GPUs, 5 slots: two copies of 1 share a GPU
        assert!((packing_peak(&[1.0; 5], 4, 5) - 2.0).abs() < 1e-6);
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn bound_packing_balancedness_example() {
        use super::packing_balancedness;
        // FlashLB's example (8 devices × 2 slots): the optimum is 0.922
        let w = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
        assert!(packing_balancedness(&w, 8, 16) >= 0.922);
    }
}
