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

use ndarray::{ArrayView1, Axis};

use crate::trace::LoadTrace;

/// Per-batch bound curve of one layer: `curve[r]` for `r = 0..=r_max`,
/// averaged over batches.
///
/// ```
/// use moeplan::{bound::layer_bound_curve, LoadTrace};
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

/// The bound for one layer at exactly `r` replicas, averaged over batches.
pub fn layer_bound(trace: &LoadTrace, layer: usize, gpus: usize, r: usize) -> f64 {
    layer_bound_curve(trace, layer, gpus, r)[r]
}

#[derive(PartialEq)]
struct PerCopy {
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
        if top.copies < gpus {
            if let Some(mut t) = heap.pop() {
                t.copies += 1;
                t.load = row[t.expert] / t.copies as f64;
                heap.push(t);
            }
        }
    }
}
