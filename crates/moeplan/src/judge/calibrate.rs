//! Calibration: a hardware preset's efficiencies and kernel times fitted
//! to measured kernel timings (issue 47), so that the cost model
//! ([`super::cost`]) holds across the range it was measured on, and says
//! how far (its residuals, [`Calibration`]).
//!
//! What is fitted, each from its own measurements:
//! - **expert compute** (one GPU's grouped GEMMs for one layer): the
//!   memory and GEMM efficiencies, the blend exponent `p` and the fixed
//!   time per call — `fixed + c · (w^p + g^p)^(1/p)` for `c` copies of
//!   `r / c` rows each, as [`super::cost`] prices a GPU. Searched on a
//!   grid refined three times around its best point (the fixed time is
//!   solved in closed form at each point), minimising the squared
//!   relative error;
//! - **each all-to-all kernel** (DeepEP normal, low-latency): one fixed
//!   time for dispatch, one for combine and the bandwidth achieved inside
//!   a node — `fixed + bytes / bandwidth` on the bytes the cost model
//!   counts for the same setting ([`uniform_rank_bytes`]) — by weighted
//!   linear least squares; measurements across nodes then fit the
//!   bandwidth between nodes (one-dimensional search), with the fixed
//!   times kept.
//!
//! A front end turns its measurements (AIConfigurator's tables,
//! moeplan-cuda's bench) into [`Measurement`]s; this file knows no file
//! format. Cost: O(grid · n) for the compute fit (about 10⁴ grid points),
//! O(n) per kernel.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::data::hardware::{Calibration, CommKernel, Hardware, Kernels};
use crate::error::{Error, Result};

use super::cost::Kernel;

/// Dispatch or combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommPhase {
    /// Tokens to their experts' GPUs (FP8 with DeepEP).
    Dispatch,
    /// Expert outputs back (BF16).
    Combine,
}

/// One measured kernel time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Measurement {
    /// One GPU's expert computation for one layer.
    Compute {
        /// Bytes of one expert's weights (`3 · hidden · intermediate`
        /// weights at their precision).
        expert_bytes: f64,
        /// FLOPs of one row through one expert (`2 · 3 · hidden ·
        /// intermediate`).
        flops_per_row: f64,
        /// Tensor peak for the weights' precision, TFLOPS.
        peak_tflops: f64,
        /// Copies (experts) on the GPU that received rows.
        copies: f64,
        /// Rows the GPU computed in all (split evenly over the copies).
        rows: f64,
        /// Measured, µs.
        us: f64,
    },
    /// One dispatch or combine of one kernel kind.
    Comm {
        /// Normal or low-latency.
        kernel: Kernel,
        /// Dispatch or combine.
        phase: CommPhase,
        /// The busiest GPU's bytes inside its node, as the cost model
        /// counts them ([`uniform_rank_bytes`]).
        intra_bytes: f64,
        /// The busiest GPU's bytes to other nodes.
        inter_bytes: f64,
        /// Measured, µs.
        us: f64,
    },
}

impl Measurement {
    fn us(&self) -> f64 {
        match self {
            Measurement::Compute { us, .. } | Measurement::Comm { us, .. } => *us,
        }
    }

    fn check(&self) -> Result<()> {
        let values: &[f64] = match self {
            Measurement::Compute {
                expert_bytes,
                flops_per_row,
                peak_tflops,
                copies,
                rows,
                us,
            } => &[
                *expert_bytes,
                *flops_per_row,
                *peak_tflops,
                *copies,
                *rows,
                *us,
            ],
            Measurement::Comm {
                intra_bytes,
                inter_bytes,
                us,
                ..
            } => &[*intra_bytes, *inter_bytes, *us],
        };
        if values.iter().all(|x| x.is_finite() && *x >= 0.0) && self.us() > 0.0 {
            Ok(())
        } else {
            Err(Error::Argument(format!(
                "a measurement must have finite, non-negative figures and a positive time: {self:?}"
            )))
        }
    }
}

/// The bytes the cost model counts for the busiest GPU's dispatch (pass
/// the dispatch message's bytes) or combine under uniform routing: each
/// of `ep` GPUs (`gpus_per_node` to a node) sends `tokens_per_rank`
/// tokens, each to `top_k` experts spread evenly over the GPUs. Remote
/// pairs are those to other GPUs; the normal kernels send a token once per
/// destination GPU inside a node and once per destination node (the
/// expected share of distinct destinations among `top_k` independent
/// pairs, as the model takes it without token routes), the low-latency
/// kernels every pair. Returns `(inside the node, to other nodes)`.
///
/// ```
/// use moeplan::judge::uniform_rank_bytes;
/// use moeplan::judge::cost::Kernel;
/// // one node of 8: 7/8 of 8 pairs per token leave the GPU, each a message
/// let (intra, inter) = uniform_rank_bytes(Kernel::LowLatency, 100.0, 8, 8, 8, 1.0);
/// assert!((intra - 700.0).abs() < 1e-9 && inter == 0.0);
/// ```
pub fn uniform_rank_bytes(
    kernel: Kernel,
    tokens_per_rank: f64,
    top_k: usize,
    ep: usize,
    gpus_per_node: usize,
    bytes_per_message: f64,
) -> (f64, f64) {
    let ep = ep.max(1);
    let gpn = gpus_per_node.clamp(1, ep);
    let nodes = ep.div_ceil(gpn);
    let k = top_k.max(1) as f64;
    let pairs = tokens_per_rank * k;
    let intra_pairs = pairs * (gpn - 1) as f64 / ep as f64;
    let inter_pairs = pairs * (ep - gpn) as f64 / ep as f64;
    let distinct = |n: usize| -> f64 {
        // Distinct destinations per pair among `k` pairs on `n` even parts.
        let n = n as f64;
        (n * (1.0 - (1.0 - 1.0 / n).powf(k)) / k).min(1.0)
    };
    let (msg_gpu, msg_node) = match kernel {
        Kernel::LowLatency => (1.0, 1.0),
        Kernel::Normal => (distinct(ep), distinct(nodes)),
    };
    (
        intra_pairs * msg_gpu * bytes_per_message,
        inter_pairs * msg_node * bytes_per_message,
    )
}

/// How well the fit holds on one group of measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    /// The group: `compute`, `normal dispatch`, …
    pub group: String,
    /// Measurements in it.
    pub rows: usize,
    /// Median |predicted − measured| / measured, percent.
    pub median_error_pct: f64,
    /// Largest, percent.
    pub worst_error_pct: f64,
    /// Median signed error (predicted − measured) / measured, percent:
    /// below 0 the model is fast.
    pub median_bias_pct: f64,
}

/// A calibrated preset and its residuals per group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fitted {
    /// `base` with the fitted efficiencies, kernels and calibration.
    pub hardware: Hardware,
    /// Per group, then all together (last).
    pub residuals: Vec<Residuals>,
}

/// `hardware`'s prediction for one measurement, µs.
///
/// ```
/// use moeplan::judge::{predict_us, Measurement};
/// let h = moeplan::data::hardware::preset("h100-ib-ndr")?;
/// let m = Measurement::Compute { expert_bytes: 44e6, flops_per_row: 88e6, peak_tflops: 1979.0, copies: 1.0, rows: 0.0, us: 1.0 };
/// assert_eq!(predict_us(h, &m), 0.0); // no rows: no work
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn predict_us(hardware: &Hardware, m: &Measurement) -> f64 {
    let e = hardware.efficiency;
    match *m {
        Measurement::Compute { .. } => {
            let fixed = hardware.kernels.map_or(0.0, |k| k.moe_fixed_us);
            compute_us(
                [e.hbm, e.gemm, e.roofline_p, fixed],
                hardware.gpu.hbm_gb_per_s,
                m,
            )
        }
        Measurement::Comm {
            kernel,
            phase,
            intra_bytes,
            inter_bytes,
            ..
        } => {
            let fit = hardware.kernels.map(|k| match kernel {
                Kernel::Normal => k.normal,
                Kernel::LowLatency => k.low_latency,
            });
            let bw = |achieved: Option<f64>, link: f64| match achieved {
                Some(x) if x > 0.0 => x * 1e3,
                _ => link * 1e3,
            };
            let intra = bw(
                fit.map(|f| f.intra_gb_per_s),
                hardware.intra_node.gb_per_s * e.intra_node,
            );
            let inter = bw(
                fit.map(|f| f.inter_gb_per_s),
                hardware.inter_node.gb_per_s * e.inter_node,
            );
            let fixed = match (fit, phase) {
                (Some(f), CommPhase::Dispatch) => f.dispatch_fixed_us,
                (Some(f), CommPhase::Combine) => f.combine_fixed_us,
                (None, _) if kernel == Kernel::LowLatency => super::cost::LOW_LATENCY_OVERHEAD_US,
                (None, _) => {
                    let mut l = 0.0f64;
                    if intra_bytes > 0.0 {
                        l = l.max(hardware.intra_node.latency_us);
                    }
                    if inter_bytes > 0.0 {
                        l = l.max(hardware.inter_node.latency_us);
                    }
                    l
                }
            };
            (intra_bytes / intra).max(inter_bytes / inter) + fixed
        }
    }
}

/// `fixed + c · blend(w, (r / c) · g)` for a compute measurement, as the
/// cost model prices a GPU (0 for an all-to-all one).
fn compute_us([hbm, gemm, p, fixed]: [f64; 4], hbm_gb_per_s: f64, m: &Measurement) -> f64 {
    let Measurement::Compute {
        expert_bytes,
        flops_per_row,
        peak_tflops,
        copies,
        rows,
        ..
    } = *m
    else {
        return 0.0;
    };
    if rows <= 0.0 || copies <= 0.0 {
        return 0.0;
    }
    let w = expert_bytes / (hbm_gb_per_s * 1e3 * hbm);
    let g = rows / copies * flops_per_row / (peak_tflops * 1e6 * gemm);
    fixed + copies * (w.powf(p) + g.powf(p)).powf(1.0 / p)
}

/// Fits `base`'s efficiencies (memory, GEMM, `p`) and kernel times to
/// `measured`, keeping its peaks and links; `source` says what was
/// measured. Groups without measurements keep `base`'s figures (a kernel
/// without any: the link's bandwidth and latency, as before).
///
/// Errors when there is nothing to fit or a measurement is not a number.
pub fn calibrate(base: &Hardware, measured: &[Measurement], source: &str) -> Result<Fitted> {
    if measured.is_empty() {
        return Err(Error::Argument("calibrate: no measurements to fit".into()));
    }
    for m in measured {
        m.check()?;
    }
    let mut hw = base.clone();
    let compute: Vec<&Measurement> = measured
        .iter()
        .filter(|m| matches!(m, Measurement::Compute { .. }))
        .collect();
    let mut kernels = base.kernels.unwrap_or(Kernels {
        moe_fixed_us: 0.0,
        normal: CommKernel {
            dispatch_fixed_us: base.intra_node.latency_us,
            combine_fixed_us: base.intra_node.latency_us,
            intra_gb_per_s: 0.0,
            inter_gb_per_s: 0.0,
        },
        low_latency: CommKernel {
            dispatch_fixed_us: super::cost::LOW_LATENCY_OVERHEAD_US,
            combine_fixed_us: super::cost::LOW_LATENCY_OVERHEAD_US,
            intra_gb_per_s: 0.0,
            inter_gb_per_s: 0.0,
        },
    });
    if !compute.is_empty() {
        let [hbm, gemm, p, fixed] = fit_compute(base, &compute);
        hw.efficiency.hbm = hbm;
        hw.efficiency.gemm = gemm;
        hw.efficiency.roofline_p = p;
        kernels.moe_fixed_us = fixed;
    }
    for kernel in [Kernel::Normal, Kernel::LowLatency] {
        let rows: Vec<(CommPhase, f64, f64, f64)> = measured
            .iter()
            .filter_map(|m| match *m {
                Measurement::Comm {
                    kernel: k,
                    phase,
                    intra_bytes,
                    inter_bytes,
                    us,
                } if k == kernel => Some((phase, intra_bytes, inter_bytes, us)),
                _ => None,
            })
            .collect();
        let slot = match kernel {
            Kernel::Normal => &mut kernels.normal,
            Kernel::LowLatency => &mut kernels.low_latency,
        };
        fit_comm(base, &rows, slot);
    }
    hw.kernels = Some(kernels);
    hw.check()?;
    let residuals = residuals_checked(&hw, measured)?;
    let total = residuals
        .last()
        .cloned()
        .ok_or_else(|| Error::Argument("calibrate: no measurements to fit".into()))?;
    hw.calibration = Some(Calibration {
        source: Cow::Owned(source.to_string()),
        rows: u32::try_from(measured.len()).unwrap_or(u32::MAX),
        median_error_pct: total.median_error_pct,
        worst_error_pct: total.worst_error_pct,
    });
    Ok(Fitted {
        hardware: hw,
        residuals,
    })
}

/// How far `hardware` is from `measured`, per group of kernels, then all
/// together (last): the check of a preset not fitted to them, or the
/// residuals of one that was.
///
/// ```
/// use moeplan::judge::{residuals, Measurement, CommPhase};
/// use moeplan::judge::cost::Kernel;
/// // the H100 without its kernel fit: the links' figures alone
/// let mut h = moeplan::data::hardware::preset("h100-ib-ndr")?.clone();
/// h.kernels = None;
/// let m = Measurement::Comm { kernel: Kernel::Normal, phase: CommPhase::Dispatch, intra_bytes: 3.6e6, inter_bytes: 0.0, us: 13.0 };
/// // 3.6 MB at 0.8 × 450 GB/s is 10 µs, + 3 µs of NVLink latency
/// assert!(residuals(&h, &[m])?.last().unwrap().worst_error_pct < 0.1);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn residuals(hardware: &Hardware, measured: &[Measurement]) -> Result<Vec<Residuals>> {
    for m in measured {
        m.check()?;
    }
    residuals_checked(hardware, measured)
}

/// [`residuals`] of measurements already checked.
fn residuals_checked(hardware: &Hardware, measured: &[Measurement]) -> Result<Vec<Residuals>> {
    let group = |m: &Measurement| -> &'static str {
        match m {
            Measurement::Compute { .. } => "expert compute",
            Measurement::Comm {
                kernel: Kernel::Normal,
                phase: CommPhase::Dispatch,
                ..
            } => "normal dispatch",
            Measurement::Comm {
                kernel: Kernel::Normal,
                ..
            } => "normal combine",
            Measurement::Comm {
                phase: CommPhase::Dispatch,
                ..
            } => "low-latency dispatch",
            Measurement::Comm { .. } => "low-latency combine",
        }
    };
    let error = |m: &Measurement| predict_us(hardware, m) / m.us() - 1.0;
    let mut out = Vec::new();
    for name in [
        "expert compute",
        "normal dispatch",
        "normal combine",
        "low-latency dispatch",
        "low-latency combine",
    ] {
        let errors: Vec<f64> = measured
            .iter()
            .filter(|m| group(m) == name)
            .map(error)
            .collect();
        out.extend(residuals_of(name, &errors));
    }
    let all: Vec<f64> = measured.iter().map(error).collect();
    match residuals_of("all", &all) {
        Some(r) => out.push(r),
        None => return Err(Error::Argument("no measurements".into())),
    }
    Ok(out)
}

fn residuals_of(group: &str, errors: &[f64]) -> Option<Residuals> {
    if errors.is_empty() {
        return None;
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    let round = |x: f64| (x * 1000.0).round() / 10.0;
    Some(Residuals {
        group: group.to_string(),
        rows: errors.len(),
        median_error_pct: round(median(abs.clone())),
        worst_error_pct: round(abs.iter().copied().fold(0.0, f64::max)),
        median_bias_pct: round(median(errors.to_vec())),
    })
}

/// The compute fit: `[hbm, gemm, p, fixed]` minimising Σ (pred / y − 1)².
fn fit_compute(base: &Hardware, rows: &[&Measurement]) -> [f64; 4] {
    let hbm_bw = base.gpu.hbm_gb_per_s;
    // Per row: the variable part at the grid point.
    let variable =
        |hbm: f64, gemm: f64, p: f64, m: &Measurement| compute_us([hbm, gemm, p, 0.0], hbm_bw, m);
    // At fixed efficiencies the best fixed time is linear least squares on
    // relative errors: minimise Σ ((f + v_i) / y_i − 1)².
    let score = |hbm: f64, gemm: f64, p: f64| -> (f64, f64) {
        let (mut num, mut den) = (0.0, 0.0);
        let vs: Vec<(f64, f64)> = rows
            .iter()
            .map(|m| (m.us(), variable(hbm, gemm, p, m)))
            .collect();
        for &(y, v) in &vs {
            num += (1.0 - v / y) / y;
            den += 1.0 / (y * y);
        }
        let fixed = if den > 0.0 { (num / den).max(0.0) } else { 0.0 };
        let err: f64 = vs
            .iter()
            .map(|&(y, v)| ((fixed + v) / y - 1.0).powi(2))
            .sum();
        (err, fixed)
    };
    let e = base.efficiency;
    let mut best = (f64::INFINITY, [e.hbm, e.gemm, e.roofline_p, 0.0]);
    // The grid: efficiencies in (0, 1], p in [1, 6]; each refinement
    // searches ±1 step of the last round around its best, four times finer.
    let (mut center, mut step) = ([0.55, 0.55, 3.5], [0.1, 0.1, 0.5]);
    let mut span = [4i32, 4, 5];
    for _ in 0..4 {
        for i in -span[0]..=span[0] {
            let hbm = center[0] + f64::from(i) * step[0];
            if !(hbm > 0.0 && hbm <= 1.0) {
                continue;
            }
            for j in -span[1]..=span[1] {
                let gemm = center[1] + f64::from(j) * step[1];
                if !(gemm > 0.0 && gemm <= 1.0) {
                    continue;
                }
                for k in -span[2]..=span[2] {
                    let p = center[2] + f64::from(k) * step[2];
                    if !(1.0..=6.0).contains(&p) {
                        continue;
                    }
                    let (err, fixed) = score(hbm, gemm, p);
                    if err < best.0 {
                        best = (err, [hbm, gemm, p, fixed]);
                    }
                }
            }
        }
        center = [best.1[0], best.1[1], best.1[2]];
        step = step.map(|s| s / 4.0);
        span = [4, 4, 4];
    }
    let round = |x: f64, to: f64| (x / to).round() * to;
    let [hbm, gemm, p, fixed] = best.1;
    [
        round(hbm, 1e-3).clamp(1e-3, 1.0),
        round(gemm, 1e-3).clamp(1e-3, 1.0),
        round(p, 1e-3).clamp(1.0, 64.0),
        round(fixed, 1e-2),
    ]
}

/// One kernel's fit: dispatch and combine fixed times and the bandwidth
/// inside a node from single-node rows; then the bandwidth between nodes
/// from the rest. Rows: (phase, intra bytes, inter bytes, µs).
fn fit_comm(base: &Hardware, rows: &[(CommPhase, f64, f64, f64)], out: &mut CommKernel) {
    let single: Vec<_> = rows.iter().filter(|r| r.2 == 0.0).collect();
    if !single.is_empty() {
        // Weighted least squares (weights 1 / y²) on
        // y = a · [dispatch] + b · [combine] + s · bytes, s = 1 / bandwidth.
        let mut ata = [[0.0f64; 3]; 3];
        let mut aty = [0.0f64; 3];
        for &&(phase, bytes, _, y) in &single {
            let x = match phase {
                CommPhase::Dispatch => [1.0, 0.0, bytes],
                CommPhase::Combine => [0.0, 1.0, bytes],
            };
            let w = 1.0 / (y * y);
            for i in 0..3 {
                aty[i] += w * x[i] * y;
                for j in 0..3 {
                    ata[i][j] += w * x[i] * x[j];
                }
            }
        }
        // A phase without rows keeps its fixed time (the system would be
        // singular without it).
        for (i, fixed) in [out.dispatch_fixed_us, out.combine_fixed_us]
            .into_iter()
            .enumerate()
        {
            if ata[i][i] == 0.0 {
                ata[i][i] = 1.0;
                aty[i] = fixed;
            }
        }
        if let Some([a, b, s]) = solve3(ata, aty)
            && s > 0.0
        {
            out.dispatch_fixed_us = (a.max(0.0) * 100.0).round() / 100.0;
            out.combine_fixed_us = (b.max(0.0) * 100.0).round() / 100.0;
            // bytes / µs → GB/s
            out.intra_gb_per_s = ((1.0 / s) / 1e3 * 100.0).round() / 100.0;
        }
    }
    let multi: Vec<_> = rows.iter().filter(|r| r.2 > 0.0).collect();
    if !multi.is_empty() {
        let intra = if out.intra_gb_per_s > 0.0 {
            out.intra_gb_per_s
        } else {
            base.intra_node.gb_per_s * base.efficiency.intra_node
        };
        let err = |inter: f64| -> f64 {
            multi
                .iter()
                .map(|&&(phase, ib, xb, y)| {
                    let fixed = match phase {
                        CommPhase::Dispatch => out.dispatch_fixed_us,
                        CommPhase::Combine => out.combine_fixed_us,
                    };
                    let pred = (ib / (intra * 1e3)).max(xb / (inter * 1e3)) + fixed;
                    (pred / y - 1.0).powi(2)
                })
                .sum()
        };
        // Log-spaced search from 0.1 GB/s to 10 TB/s, refined.
        let (mut lo, mut hi) = (0.1f64.ln(), 1e4f64.ln());
        let mut best = (f64::INFINITY, 1.0);
        for _ in 0..4 {
            let step = (hi - lo) / 40.0;
            for i in 0..=40 {
                let x = (lo + step * f64::from(i)).exp();
                let e = err(x);
                if e < best.0 {
                    best = (e, x);
                }
            }
            lo = best.1.ln() - 2.0 * step;
            hi = best.1.ln() + 2.0 * step;
        }
        out.inter_gb_per_s = (best.1 * 100.0).round() / 100.0;
    }
}

/// Solves a 3 × 3 system by Gaussian elimination with partial pivoting;
/// `None` when it is singular (e.g. only dispatch rows: no combine term).
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col], b[col]);
        for row in col + 1..3 {
            let f = a[row][col] / pivot_row[col];
            for (x, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[row] -= f * pivot_b;
        }
    }
    let mut x = [0.0; 3];
    for i in (0..3).rev() {
        let s: f64 = (i + 1..3).map(|k| a[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / a[i][i];
    }
    Some(x)
}
