//! Issue 13: the joint search against the exact oracle.

use std::time::Duration;

use moeplan::bound::{layer_bound, packing_balancedness};
use moeplan::planners::craft::benefit::replication_order;
use moeplan::planners::placement::joint::{JointOptions, joint_layer};
use moeplan::planners::placement::oracle::{optimal_layer_within, peak};
use moeplan::planners::placement::{capacity_aware_placement, refine_placement};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::{LoadTrace, Topology};
use ndarray::Array3;

const FLASHLB: [f64; 8] = [600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];

/// vllm-ascend's FlashLB example: EPLB peaks at 232 (their figure, and
/// moeplan's port gives it), FlashLB at 205, the optimum at 560 / 3 + 10.
#[test]
fn flashlb_example() {
    let w = FLASHLB.to_vec();
    let trace = LoadTrace::new(
        Array3::from_shape_vec((1, 1, 8), w.clone()).unwrap(),
        vec![0],
    )
    .unwrap();
    let config = EplbConfig {
        redundant_experts: 8,
        groups: 1,
    };
    let plan = eplb(&trace, Topology::new(1, 8).unwrap(), config).unwrap();
    let eplb_gpus = plan.layers()[0].gpus.clone();
    assert!((peak(&w, &eplb_gpus) - 232.0).abs() < 1e-9);
    // hand-checked: 600 on 4 devices, 560 on 3 each beside a 10, 120 on 3
    // and 2, 20 beside a 600 copy: the busiest carry 560 / 3 + 10
    let hand = 560.0 / 3.0 + 10.0;
    // The solver proves it in 20–60 s on a quiet machine (debug build,
    // microlp optimised); under load the proof may not finish: then only
    // the hand-checked optimum is used below.
    match optimal_layer_within(&w, &[2; 8], Duration::from_secs(100)) {
        Ok(best) => assert!((best.max_load - hand).abs() < 1e-6, "{}", best.max_load),
        Err(moeplan::Error::Limit(m)) => eprintln!("oracle not proven in time: {m}"),
        Err(e) => panic!("{e}"),
    }
    for start in [None, Some(eplb_gpus.as_slice())] {
        let gpus = joint_layer(&w, &[2; 8], start, JointOptions::default()).unwrap();
        let p = peak(&w, &gpus);
        assert!(p <= 205.0, "{p}");
        assert!(p >= hand - 1e-9);
    }
}

use proptest::prelude::*;

/// A small layer: experts' loads (skewed like real routing), GPUs, slots
/// per GPU (every expert fits once, no GPU needs two copies of one).
fn small_layer() -> impl Strategy<Value = (Vec<f64>, usize, usize)> {
    (
        proptest::collection::vec(0.0f64..7.0, 2..=12),
        1usize..=4,
        0usize..=3,
    )
        .prop_map(|(v, d, extra)| {
            let w: Vec<f64> = v.into_iter().map(|x| (x.exp() * 10.0).round()).collect();
            let lo = w.len().div_ceil(d);
            let s = (lo + extra).min(w.len());
            (w, d, s)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 16, ..ProptestConfig::default() })]

    /// The joint search within 2 % of the exact optimum; the optimum never
    /// beaten by a plan of ours (joint, CRAFT's counts-then-placement, EPLB
    /// without same-GPU copies) and never above the packing-aware bound.
    /// Layers the solver cannot prove within 5 s are skipped (a few per
    /// run: symmetric GPUs make branch and bound slow).
    #[test]
    fn joint_within_two_percent_of_the_oracle((w, d, s) in small_layer()) {
        let cap = vec![s; d];
        let best = match optimal_layer_within(&w, &cap, Duration::from_secs(5)) {
            Ok(b) => b,
            Err(moeplan::Error::Limit(m)) => {
                eprintln!("SKIP (oracle not proven within 5 s, {} experts on {d} × {s}): {m}", w.len());
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        let gpus = joint_layer(&w, &cap, None, JointOptions::default()).unwrap();
        let mine = peak(&w, &gpus);
        prop_assert!(best.max_load <= mine * (1.0 + 1e-9));
        prop_assert!(best.max_load / mine >= 0.98, "joint {mine} vs optimum {}", best.max_load);
        // CRAFT's counts (highest load per copy) then its placement
        let order = replication_order(&w, d * s - w.len(), d);
        let mut copies = vec![1u32; w.len()];
        order.iter().for_each(|&x| copies[x as usize] += 1);
        let mut craft = capacity_aware_placement(&w, &copies, &cap).unwrap();
        refine_placement(&w, &copies, &mut craft);
        prop_assert!(best.max_load <= peak(&w, &craft) * (1.0 + 1e-9));
        // EPLB, where it puts no two copies of an expert on one GPU
        let trace = LoadTrace::new(Array3::from_shape_vec((1, 1, w.len()), w.clone()).unwrap(), vec![0]).unwrap();
        let config = EplbConfig { redundant_experts: d * s - w.len(), groups: 1 };
        let plan = eplb(&trace, Topology::new(1, d).unwrap(), config).unwrap();
        if plan.summary().same_gpu_duplicates == 0 {
            prop_assert!(best.max_load <= peak(&w, &plan.layers()[0].gpus) * (1.0 + 1e-9));
        }
        // the packing-aware bound is a true bound, and never looser than the old
        let mean = w.iter().sum::<f64>() / d as f64;
        let bound = packing_balancedness(&w, d, d * s);
        prop_assert!(best.balancedness <= bound + 1e-9, "optimum {} above bound {bound}", best.balancedness);
        let old = layer_bound(&trace, 0, d, d * s - w.len());
        prop_assert!(bound <= old + 1e-6);
        prop_assert!(mean / best.max_load.max(1e-300) <= 1.0 + 1e-9);
    }
}
