//! Calibration (issue 47): the fit recovers the figures that made its
//! measurements, its residuals say how far it holds, and the bytes it
//! fits bandwidths on are the bytes the judge charges.

use crate::data::hardware::{self, CommKernel, Hardware, Kernels};
use crate::data::model;
use crate::judge::calibrate::{CommPhase, Measurement, calibrate, predict_us, uniform_rank_bytes};
use crate::judge::cost::{Assumptions, Kernel, Pricing};
use crate::judge::{CostModel, Rule, Served, judge};
use crate::{LoadTrace, Topology, Workload, planners};
use ndarray::Array3;

/// A made-up GPU's true figures: what the measurements below come from.
fn truth() -> Hardware {
    let mut h = hardware::preset("h100-ib-ndr").unwrap().clone();
    h.efficiency.hbm = 0.62;
    h.efficiency.gemm = 0.55;
    h.efficiency.roofline_p = 2.15;
    h.kernels = Some(Kernels {
        moe_fixed_us: 28.0,
        normal: CommKernel {
            dispatch_fixed_us: 24.0,
            combine_fixed_us: 44.0,
            intra_gb_per_s: 290.0,
            inter_gb_per_s: 38.0,
        },
        low_latency: CommKernel {
            dispatch_fixed_us: 11.0,
            combine_fixed_us: 12.0,
            intra_gb_per_s: 260.0,
            inter_gb_per_s: 0.0,
        },
    });
    h
}

/// DeepSeek-V3's expert shape in FP8, as AIConfigurator's tables run it:
/// every EP size and per-rank batch of the tables' grid.
fn measurements(h: &Hardware) -> Vec<Measurement> {
    let m = model::preset("deepseek-v3").unwrap();
    let expert_bytes = m.expert_params() as f64;
    let flops_per_row = 2.0 * m.expert_params() as f64;
    let mut out = Vec::new();
    for ep in [4usize, 8, 16, 32, 64, 128, 256] {
        for b in [1.0f64, 8.0, 32.0, 128.0, 512.0, 4096.0] {
            let local = (256 / ep) as f64;
            let rows = b * 8.0;
            let copies = local.min(rows);
            let mut x = Measurement::Compute {
                expert_bytes,
                flops_per_row,
                peak_tflops: 1979.0,
                copies,
                rows,
                us: 1.0,
            };
            let us = predict_us(h, &x);
            if let Measurement::Compute { us: u, .. } = &mut x {
                *u = us;
            }
            out.push(x);
        }
    }
    for kernel in [Kernel::Normal, Kernel::LowLatency] {
        for nodes in [1usize, 2, 4] {
            for t in [8.0f64, 128.0, 1024.0, 8192.0] {
                for (phase, bytes) in [(CommPhase::Dispatch, 7392.0), (CommPhase::Combine, 14336.0)]
                {
                    let (intra_bytes, inter_bytes) =
                        uniform_rank_bytes(kernel, t, 8, 8 * nodes, 8, bytes);
                    let mut x = Measurement::Comm {
                        kernel,
                        phase,
                        intra_bytes,
                        inter_bytes,
                        us: 1.0,
                    };
                    let us = predict_us(h, &x);
                    if let Measurement::Comm { us: u, .. } = &mut x {
                        *u = us;
                    }
                    out.push(x);
                }
            }
        }
    }
    out
}

#[test]
fn the_fit_recovers_the_figures_that_made_the_measurements() {
    let truth = truth();
    let measured = measurements(&truth);
    // Start from the shipped H100 preset: every figure must move to the truth.
    let base = hardware::preset("h100-ib-ndr").unwrap();
    let fitted = calibrate(base, &measured, "made by the test").unwrap();
    let h = &fitted.hardware;
    let close = |a: f64, b: f64, tol: f64| (a / b - 1.0).abs() <= tol;
    let (e, t) = (h.efficiency, truth.efficiency);
    assert!(close(e.hbm, t.hbm, 0.02), "hbm {} vs {}", e.hbm, t.hbm);
    assert!(close(e.gemm, t.gemm, 0.03), "gemm {} vs {}", e.gemm, t.gemm);
    assert!(
        close(e.roofline_p, t.roofline_p, 0.03),
        "p {} vs {}",
        e.roofline_p,
        t.roofline_p
    );
    let (k, tk) = (h.kernels.unwrap(), truth.kernels.unwrap());
    assert!(close(k.moe_fixed_us, tk.moe_fixed_us, 0.05), "{k:?}");
    for (got, want) in [(k.normal, tk.normal), (k.low_latency, tk.low_latency)] {
        assert!(
            close(got.dispatch_fixed_us, want.dispatch_fixed_us, 0.02),
            "{got:?}"
        );
        assert!(
            close(got.combine_fixed_us, want.combine_fixed_us, 0.02),
            "{got:?}"
        );
        assert!(
            close(got.intra_gb_per_s, want.intra_gb_per_s, 0.01),
            "{got:?}"
        );
    }
    assert!(close(k.normal.inter_gb_per_s, 38.0, 0.02), "{:?}", k.normal);
    // Exact measurements: every residual is (near) zero, and the
    // calibration record says so.
    let all = fitted.residuals.last().unwrap();
    assert_eq!(all.group, "all");
    assert_eq!(all.rows, measured.len());
    assert!(all.worst_error_pct < 2.0, "{:?}", fitted.residuals);
    let c = h.calibration.as_ref().unwrap();
    assert_eq!(
        (c.rows as usize, c.worst_error_pct),
        (measured.len(), all.worst_error_pct)
    );
    // The shipped preset, not fitted, misses them by far more.
    let before: f64 = measured
        .iter()
        .map(|m| {
            let us = match m {
                Measurement::Compute { us, .. } | Measurement::Comm { us, .. } => *us,
            };
            (predict_us(base, m) / us - 1.0).abs()
        })
        .fold(0.0, f64::max);
    assert!(before > 0.3, "the H100 preset already within {before}");
}

#[test]
fn noisy_measurements_give_residuals_of_their_noise() {
    // ±10 % multiplicative noise (a fixed pattern): the fit's residuals
    // are of that size, not zero, and not far above.
    let mut measured = measurements(&truth());
    for (i, m) in measured.iter_mut().enumerate() {
        let f = 1.0 + 0.1 * [1.0, -1.0, 0.5, -0.5, 0.0][i % 5];
        match m {
            Measurement::Compute { us, .. } | Measurement::Comm { us, .. } => *us *= f,
        }
    }
    let fitted = calibrate(hardware::preset("h100-ib-ndr").unwrap(), &measured, "noisy").unwrap();
    let all = fitted.residuals.last().unwrap();
    assert!(
        all.median_error_pct > 2.0 && all.median_error_pct < 12.0,
        "{all:?}"
    );
    assert!(
        all.worst_error_pct >= 9.0 && all.worst_error_pct < 25.0,
        "{all:?}"
    );
}

#[test]
fn bad_measurements_are_refused() {
    let base = hardware::preset("h100-ib-ndr").unwrap();
    assert!(calibrate(base, &[], "none").is_err());
    let bad = Measurement::Comm {
        kernel: Kernel::Normal,
        phase: CommPhase::Dispatch,
        intra_bytes: f64::NAN,
        inter_bytes: 0.0,
        us: 10.0,
    };
    assert!(calibrate(base, &[bad], "nan").is_err());
    let zero = Measurement::Comm {
        kernel: Kernel::Normal,
        phase: CommPhase::Dispatch,
        intra_bytes: 1e6,
        inter_bytes: 0.0,
        us: 0.0,
    };
    assert!(calibrate(base, &[zero], "zero time").is_err());
}

/// The bytes the fit uses for a uniform setting are the bytes the judge
/// charges for it: a fitted bandwidth means the same in both. Checked on
/// even counts (every expert the same rows) on 1, 2 and 4 nodes of 8, both
/// kernels: the judge's dispatch and combine equal `predict_us` of
/// [`uniform_rank_bytes`] on the same hardware.
#[test]
fn uniform_bytes_are_the_judges() {
    let m = model::preset("deepseek-v3").unwrap();
    let mut h = truth();
    // Room for the weights and the cache: no step is capped.
    h.gpu.memory_gib = 1e4;
    let mut checked = 0;
    for kernel in [Kernel::Normal, Kernel::LowLatency] {
        for nodes in [1usize, 2, 4] {
            let ep = 8 * nodes;
            let t = 64.0; // tokens per rank
            let per_expert = t * ep as f64 * m.top_k as f64 / m.experts as f64;
            let counts = Array3::from_elem((1, 1, m.experts), per_expert);
            let trace = LoadTrace::new(counts, vec![0]).unwrap();
            let topology = Topology::new(nodes, 8).unwrap();
            let plan = planners::contiguous(&trace, topology).unwrap();
            let pricing = Pricing {
                hardware: h.clone(),
                model: *m,
                assumptions: Assumptions {
                    kernel,
                    memory_fraction: 1.0,
                    ..Assumptions::default()
                },
            };
            let work = Workload::new(trace);
            let v = judge(
                &work,
                Served::Plan {
                    plan: &plan,
                    rule: Rule::Even,
                },
                &CostModel::for_model(&pricing.model),
                Some(&pricing),
                |_, _| {},
            )
            .unwrap();
            let time = v.replay.time.unwrap();
            let hidden = m.hidden as f64;
            for (phase, bytes, judged) in [
                (
                    CommPhase::Dispatch,
                    hidden + 4.0 * (hidden / 128.0).ceil(),
                    time.dispatch_us,
                ),
                (CommPhase::Combine, 2.0 * hidden, time.combine_us),
            ] {
                let (intra_bytes, inter_bytes) =
                    uniform_rank_bytes(kernel, t, m.top_k, ep, 8, bytes);
                let ours = predict_us(
                    &h,
                    &Measurement::Comm {
                        kernel,
                        phase,
                        intra_bytes,
                        inter_bytes,
                        us: 1.0,
                    },
                );
                assert!(
                    (ours / judged - 1.0).abs() < 1e-6,
                    "{kernel:?} {nodes} node(s) {phase:?}: calibration {ours} µs, judge {judged} µs"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 12);
}
