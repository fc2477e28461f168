//! CRAFT's Step 2 — the replication factor — and the curve behind it
//! (CRAFT paper, §4.2 Step 2; Figures 5 and 9 plot the curve).
//!
//! [`knee`] picks the `R` at the knee of the predicted balancedness against
//! `log2 R` (Kneedle, Satopää et al., 2011; why not the paper's literal
//! "gain per replica": see [`Craft::auto_replicas_per_gpu`](super::Craft::auto_replicas_per_gpu)).
//! [`budget_bound`] is the best mean bound any plan can reach for each
//! total replica count, through the same knapsack as Algorithm 2.
//!
//! Complexity: the knee O(P) for `P` curve points; the bound O(L · (L · D)
//! · D) for `L` layers on `D` GPUs (every per-layer count `0..=D`, every
//! total up to `L · D`), once per preparation.

use crate::planners::registry::CurvePoint;
use crate::planners::shared::knapsack::Knapsack;

/// The Kneedle knee of a curve over `log2 R` (see
/// [`Craft::auto_replicas_per_gpu`](super::Craft::auto_replicas_per_gpu)).
pub(super) fn knee(curve: &[CurvePoint], base: f64) -> usize {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        return 0;
    };
    let y_max = curve
        .iter()
        .map(|p| p.predicted_balancedness)
        .fold(f64::MIN, f64::max);
    let y_min = first.predicted_balancedness.min(base);
    if y_max - base < 0.005 {
        return 0;
    }
    let x = |p: &CurvePoint| (p.replicas_per_gpu as f64).log2();
    let x_span = (x(last) - x(first)).max(f64::MIN_POSITIVE);
    let y_span = (y_max - y_min).max(f64::MIN_POSITIVE);
    curve
        .iter()
        .map(|p| {
            let xn = (x(p) - x(first)) / x_span;
            let yn = (p.predicted_balancedness - y_min) / y_span;
            (p.replicas_per_gpu, yn - xn)
        })
        .fold(
            (first.replicas_per_gpu, f64::NEG_INFINITY),
            |best, (r, d)| {
                if d > best.1 + 1e-12 { (r, d) } else { best }
            },
        )
        .0
}

/// Best mean bound for every total replica count, through the same
/// knapsack with every per-layer count `0..=D` allowed.
pub(super) fn budget_bound(curves: &[Vec<f64>], max_total: usize) -> Vec<f64> {
    let choices: Vec<Vec<(usize, f64)>> = curves
        .iter()
        .map(|c| c.iter().enumerate().map(|(r, &v)| (r, v)).collect())
        .collect();
    let dp = Knapsack::solve(&choices, max_total);
    let l = curves.len().max(1) as f64;
    let mut best = f64::NEG_INFINITY;
    dp.last_row()
        .iter()
        .map(|&v| {
            best = best.max(v);
            best / l
        })
        .collect()
}
