//! How expert loads vary from batch to batch: statistics of any trace, so a
//! real dump and a generated one can be compared (and the generator
//! calibrated, see [`crate::synth::generator`]).
//!
//! Definitions, for batch `b`, layer `l` and expert `e` with count `c`:
//! - **share** `s[b,l,e] = c[b,l,e] / Σ_e c[b,l,e]`, the expert's share of
//!   the layer in that batch (a batch in which the layer received nothing is
//!   left out of that layer's series);
//! - **mean share** `m[l,e]` = mean of its shares over batches; its
//!   **relative load** is `m · E` (1.0 = an average expert);
//! - **CV** `= sd / m`, the sample standard deviation (`n − 1`) of the share
//!   series over its mean: the batch-to-batch coefficient of variation.
//!   Defined for every (layer, expert) with `m > 0`;
//! - **load-weighted CV**: `Σ load · CV / Σ load` over those (layer, expert)
//!   pairs, `load` = the pair's count summed over batches: what the tokens
//!   see, dominated by the hot experts;
//! - **median CV**: the unweighted median over the same pairs, cold experts
//!   as much as hot ones;
//! - **lag-1 autocorrelation**: the mean, over pairs with relative load at
//!   least [`AUTOCORRELATION_MIN_LOAD`], of the Pearson correlation of the
//!   share series with itself one batch later (`s[0..B−1]` against
//!   `s[1..B]`; series constant on either side are left out). Independent
//!   batches give about `−1 / B`, not 0 (the estimator's small-sample bias:
//!   −0.05 at 20 batches), so compare it with a trace of the same length.
//!
//! Cost: O(B · L · E) and one sort.

use serde::Serialize;

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

/// Lowest relative load (mean share × experts) whose share series enters
/// the lag-1 autocorrelation: below a tenth of the average expert, counts
/// are a handful of tokens and their correlation is noise.
pub const AUTOCORRELATION_MIN_LOAD: f64 = 0.1;

/// Upper edges of the relative-load bins of [`VariationStats::by_load`]
/// (the last bin is open).
pub(crate) const LOAD_BIN_EDGES: [f64; 7] = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0];

/// Batch-to-batch variation of a trace (definitions in the module's
/// docs, `studies/variation.rs`).
///
/// ```
/// use moeplan::{synth::generator, data::model, studies::VariationStats};
/// let cfg = generator::GenConfig::new(model::preset("olmoe")?, 20);
/// let v = VariationStats::of(&generator::generate(&cfg)?)?;
/// assert_eq!(v.batches, 20);
/// assert!(v.weighted_cv > 0.05 && v.weighted_cv < 0.5);
/// assert!(v.lag1_autocorrelation.abs() < 0.2);
/// // hot experts are steadier than cold ones
/// let cold = v.by_load.iter().find(|b| b.pairs > 0).unwrap();
/// let hot = v.by_load.iter().rev().find(|b| b.pairs > 0).unwrap();
/// assert!(hot.median_cv < cold.median_cv);
/// # Ok::<(), moeplan::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariationStats {
    /// Batches in the trace.
    pub batches: usize,
    /// (layer, expert) pairs with a non-zero mean share: those the CVs cover.
    pub pairs: usize,
    /// Load-weighted mean CV of the shares.
    pub weighted_cv: f64,
    /// Unweighted median CV.
    pub median_cv: f64,
    /// Mean lag-1 autocorrelation of the share series.
    pub lag1_autocorrelation: f64,
    /// Pairs that entered the autocorrelation.
    pub autocorrelation_pairs: usize,
    /// CV as a function of relative load, binned by `LOAD_BIN_EDGES`.
    pub by_load: Vec<LoadBin>,
}

/// The CV of the (layer, expert) pairs whose relative load falls in
/// `[lo, hi)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadBin {
    /// Lower edge, relative load (0 for the first bin).
    pub lo: f64,
    /// Upper edge (`f64::INFINITY` for the last bin).
    pub hi: f64,
    /// Pairs in the bin.
    pub pairs: usize,
    /// Their mean relative load (0 when the bin is empty).
    pub mean_load: f64,
    /// Median CV (0 when empty).
    pub median_cv: f64,
    /// Root mean square CV: `√(mean CV²)`, the variance a model fits (0
    /// when empty).
    pub rms_cv: f64,
}

/// One (layer, expert) pair's share series summarised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairVariation {
    /// Layer index (position in the trace, not the model's layer id).
    pub layer: usize,
    /// Expert.
    pub expert: usize,
    /// Mean share of the layer over batches.
    pub mean_share: f64,
    /// Count summed over batches.
    pub load: f64,
    /// Sample standard deviation of the share over its mean.
    pub cv: f64,
    /// Pearson lag-1 autocorrelation of the share series, `None` when a side
    /// is constant.
    pub lag1: Option<f64>,
}

impl VariationStats {
    /// Measures `trace`; it needs at least 3 batches (2 for a standard
    /// deviation, 3 for a lag-1 correlation of two pairs).
    pub fn of(trace: &LoadTrace) -> Result<VariationStats> {
        let pairs = pair_variation(trace)?;
        let e = trace.num_experts() as f64;
        let total: f64 = pairs.iter().map(|p| p.load).sum();
        let weighted_cv = if total > 0.0 {
            pairs.iter().map(|p| p.load * p.cv).sum::<f64>() / total
        } else {
            0.0
        };
        let mut cvs: Vec<f64> = pairs.iter().map(|p| p.cv).collect();
        let median_cv = median(&mut cvs);
        let lags: Vec<f64> = pairs
            .iter()
            .filter(|p| p.mean_share * e >= AUTOCORRELATION_MIN_LOAD)
            .filter_map(|p| p.lag1)
            .collect();
        let lag1_autocorrelation = if lags.is_empty() {
            0.0
        } else {
            lags.iter().sum::<f64>() / lags.len() as f64
        };
        let mut by_load = Vec::with_capacity(LOAD_BIN_EDGES.len() + 1);
        let mut lo = 0.0;
        for hi in LOAD_BIN_EDGES.iter().copied().chain([f64::INFINITY]) {
            let inside: Vec<&PairVariation> = pairs
                .iter()
                .filter(|p| (lo..hi).contains(&(p.mean_share * e)))
                .collect();
            let n = inside.len();
            let mut cv: Vec<f64> = inside.iter().map(|p| p.cv).collect();
            let (mean_load, rms_cv) = if n == 0 {
                (0.0, 0.0)
            } else {
                (
                    inside.iter().map(|p| p.mean_share * e).sum::<f64>() / n as f64,
                    (cv.iter().map(|x| x * x).sum::<f64>() / n as f64).sqrt(),
                )
            };
            by_load.push(LoadBin {
                lo,
                hi,
                pairs: n,
                mean_load,
                median_cv: median(&mut cv),
                rms_cv,
            });
            lo = hi;
        }
        Ok(VariationStats {
            batches: trace.num_batches(),
            pairs: pairs.len(),
            weighted_cv,
            median_cv,
            lag1_autocorrelation,
            autocorrelation_pairs: lags.len(),
            by_load,
        })
    }
}

/// Every (layer, expert) pair with a non-zero mean share, layer-major: the
/// per-pair figures behind [`VariationStats`].
///
/// ```
/// use moeplan::{LoadTrace, studies::pair_variation};
/// use ndarray::Array3;
/// // expert 0 alternates 1, 3, 1, 3 of 4: share 0.25, 0.75, …
/// let mut c = Array3::from_elem((4, 1, 2), 0.0);
/// for b in 0..4 {
///     let x = if b % 2 == 0 { 1.0 } else { 3.0 };
///     c[[b, 0, 0]] = x;
///     c[[b, 0, 1]] = 4.0 - x;
/// }
/// let p = pair_variation(&LoadTrace::new(c, vec![0])?)?;
/// assert_eq!(p.len(), 2);
/// assert!((p[0].mean_share - 0.5).abs() < 1e-12);
/// assert!((p[0].cv - (1.0f64 / 3.0).sqrt()).abs() < 1e-12); // sd √(1/12) over 0.5
/// assert!((p[0].lag1.unwrap() + 1.0).abs() < 1e-12);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn pair_variation(trace: &LoadTrace) -> Result<Vec<PairVariation>> {
    let (b, l, e) = trace.counts().dim();
    if b < 3 {
        return Err(Error::Argument(format!(
            "batch-to-batch variation needs at least 3 batches, the trace has {b}{}",
            if b == 1 {
                " (run totals, such as an SGLang expert-distribution dump, have no per-batch breakdown)"
            } else {
                ""
            }
        )));
    }
    let counts = trace.counts();
    let mut out = Vec::with_capacity(l * e);
    let mut shares = vec![Vec::with_capacity(b); e];
    let mut loads = vec![0.0; e];
    for li in 0..l {
        shares.iter_mut().for_each(Vec::clear);
        loads.iter_mut().for_each(|x| *x = 0.0);
        for bi in 0..b {
            let row = counts.slice(ndarray::s![bi, li, ..]);
            let total: f64 = row.sum();
            if total <= 0.0 {
                continue;
            }
            for (ei, &c) in row.iter().enumerate() {
                shares[ei].push(c / total);
                loads[ei] += c;
            }
        }
        for (ei, s) in shares.iter().enumerate() {
            let n = s.len();
            if n < 3 {
                continue;
            }
            let mean = s.iter().sum::<f64>() / n as f64;
            if mean <= 0.0 {
                continue;
            }
            let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            out.push(PairVariation {
                layer: li,
                expert: ei,
                mean_share: mean,
                load: loads[ei],
                cv: var.sqrt() / mean,
                lag1: pearson(&s[..n - 1], &s[1..]),
            });
        }
    }
    Ok(out)
}

/// Pearson correlation of two equally long series; `None` when either is
/// constant.
fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    let ma = a.iter().sum::<f64>() / n;
    let mb = b.iter().sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let (dx, dy) = (x - ma, y - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    // relative to the values' size: a series equal up to rounding is constant
    let tiny = 1e-24 * (ma * ma + mb * mb) * n;
    (saa > tiny && sbb > tiny).then(|| sab / (saa * sbb).sqrt())
}

/// Median (mean of the middle two for an even count); 0 for none.
fn median(x: &mut [f64]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    crate::sort::sort_by(x, f64::total_cmp);
    let n = x.len();
    if n % 2 == 1 {
        x[n / 2]
    } else {
        0.5 * (x[n / 2 - 1] + x[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;

    #[test]
    fn steady_trace_has_no_variation() {
        let t = LoadTrace::new(Array3::from_elem((5, 2, 4), 7.0), vec![0, 1]).unwrap();
        let v = VariationStats::of(&t).unwrap();
        assert_eq!((v.pairs, v.weighted_cv, v.median_cv), (8, 0.0, 0.0));
        // constant series have no correlation: none enters
        assert_eq!(v.autocorrelation_pairs, 0);
        assert_eq!(v.by_load[3].pairs + v.by_load[4].pairs, 8);
    }

    #[test]
    fn too_few_batches_is_an_error() {
        let t = LoadTrace::new(Array3::from_elem((2, 1, 4), 1.0), vec![0]).unwrap();
        assert!(VariationStats::of(&t).is_err());
    }

    #[test]
    fn weighting_follows_the_load() {
        // expert 0: 90 ± 10 of 100 (CV 0.1 / 0.9 …), expert 1: 10 ∓ 10
        let mut c = Array3::from_elem((4, 1, 2), 0.0);
        for b in 0..4 {
            let d = if b % 2 == 0 { 5.0 } else { -5.0 };
            c[[b, 0, 0]] = 90.0 + d;
            c[[b, 0, 1]] = 10.0 - d;
        }
        let p = pair_variation(&LoadTrace::new(c.clone(), vec![0]).unwrap()).unwrap();
        let v = VariationStats::of(&LoadTrace::new(c, vec![0]).unwrap()).unwrap();
        let want = (0.9 * p[0].cv + 0.1 * p[1].cv) / 1.0;
        assert!((v.weighted_cv - want).abs() < 1e-12);
        assert!((v.median_cv - 0.5 * (p[0].cv + p[1].cv)).abs() < 1e-12);
        assert!(p[1].cv > p[0].cv);
    }
}
