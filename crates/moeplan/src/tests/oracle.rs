//! The joint search against the exact oracle.

use std::time::Duration;

use crate::judge::bound::{layer_bound, packing_balancedness};
use crate::planners::craft::{Craft, CraftOptions, ReplicaBudget};
use crate::planners::shared::joint::{JointOptions, joint_layer, repair};
use crate::planners::shared::oracle::optimal_layer_within;
use crate::planners::shared::order::replication_order;
use crate::planners::shared::placement::peak_load;
use crate::planners::shared::placement::{capacity_aware_placement, refine_placement};
use crate::planners::{EplbConfig, eplb};
use crate::{LoadTrace, Topology};
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
    assert!((peak_load(&w, &eplb_gpus) - 232.0).abs() < 1e-9);
    // hand-checked: 600 on 4 devices, 560 on 3 each beside a 10, 120 on 3
    // and 2, 20 beside a 600 copy: the busiest carry 560 / 3 + 10
    let hand = 560.0 / 3.0 + 10.0;
    // The solver proves it in 20–60 s on a quiet machine (debug build,
    // microlp optimised); under load the proof may not finish: then only
    // the hand-checked optimum is used below.
    match optimal_layer_within(&w, &[2; 8], Duration::from_secs(100)) {
        Ok(best) => assert!((best.max_load - hand).abs() < 1e-6, "{}", best.max_load),
        Err(crate::Error::Limit(m)) => eprintln!("oracle not proven in time: {m}"),
        Err(e) => panic!("{e}"),
    }
    // Every start reaches the optimum (from CRAFT's own plan alone the
    // search ended at 202, 2.7 % off; it now also starts from EPLB's
    // placement and the relaxation's counts).
    for start in [None, Some(eplb_gpus.as_slice())] {
        let gpus = joint_layer(&w, &[2; 8], start, JointOptions::default()).unwrap();
        let p = peak_load(&w, &gpus);
        assert!((p - hand).abs() < 1e-9, "{p}");
    }
    for r in [craft_repaired(&w, 8, 1), repaired_eplb(&w, 8, 8)] {
        let p = peak_load(&w, &r);
        assert!((p - hand).abs() < 1e-9, "{p}");
    }
}

/// CRAFT's plan of one layer at `r` replicas per GPU on `d` GPUs, with
/// `--repair`.
fn craft_repaired(w: &[f64], d: usize, r: usize) -> Vec<Vec<u32>> {
    let trace = one_layer(w);
    let options = CraftOptions {
        repair: true,
        ..CraftOptions::default()
    };
    let craft = Craft::prepare(&trace, Topology::new(1, d).unwrap(), &options).unwrap();
    let planned = craft.plan(ReplicaBudget::ReplicasPerGpu(r)).unwrap();
    planned.plan.layers()[0].gpus.clone()
}

/// EPLB's plan of one layer with `redundant` extra slots, with `--repair`.
fn repaired_eplb(w: &[f64], d: usize, redundant: usize) -> Vec<Vec<u32>> {
    let trace = one_layer(w);
    let config = EplbConfig {
        redundant_experts: redundant,
        groups: 1,
    };
    let plan = eplb(&trace, Topology::new(1, d).unwrap(), config).unwrap();
    let fixed = repair(&plan, trace.summed().view()).unwrap();
    fixed.layers()[0].gpus.clone()
}

fn one_layer(w: &[f64]) -> LoadTrace {
    LoadTrace::new(
        Array3::from_shape_vec((1, 1, w.len()), w.to_vec()).unwrap(),
        vec![0],
    )
    .unwrap()
}

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// A small layer: experts' loads (skewed like real routing, or Zipf as
/// real routing often is), GPUs, replicas per GPU (every expert fits once,
/// no GPU needs two copies of one).
fn small_layer() -> impl Strategy<Value = (Vec<f64>, usize, usize)> {
    let random = (
        proptest::collection::vec(0.0f64..7.0, 2..=12),
        1usize..=4,
        0usize..=3,
    )
        .prop_map(|(v, d, r)| {
            let w: Vec<f64> = v.into_iter().map(|x| (x.exp() * 10.0).round()).collect();
            let r = r.min((w.len() * d - w.len()) / d);
            (w, d, r)
        });
    // FlashLB-like: 8 experts in 16 slots (4 GPUs × 4), Zipf-skewed
    let zipf = (0.5f64..2.0, any::<bool>()).prop_map(|(a, reversed)| {
        let mut w: Vec<f64> = (1..=8)
            .map(|i| (1000.0 / f64::from(i).powf(a)).round())
            .collect();
        if reversed {
            w.reverse();
        }
        (w, 4, 2)
    });
    prop_oneof![3 => random, 1 => zipf]
}

/// The joint search, and CRAFT and EPLB with `--repair`, within 2 % of the
/// exact optimum wherever the oracle proves it; the optimum never beaten by
/// a plan of ours (joint, CRAFT's counts-then-placement, EPLB without
/// same-GPU copies) and never above the packing-aware bound.
///
/// A layer the solver cannot prove within 5 s asserts nothing about the 2 %,
/// so the cases proven are counted and the test fails unless at least half
/// of them were (a loaded machine once skipped every case and passed).
#[test]
fn repair_within_two_percent_of_the_oracle() {
    const CASES: u32 = 32;
    let proven = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&small_layer(), |(w, d, r)| {
        let trace = one_layer(&w);
        let craft = craft_repaired(&w, d, r);
        let cap: Vec<usize> = craft.iter().map(Vec::len).collect();
        let best = match optimal_layer_within(&w, &cap, Duration::from_secs(5)) {
            Ok(b) => b,
            Err(crate::Error::Limit(m)) => {
                eprintln!(
                    "not proven within 5 s ({} experts on {d} GPUs, {cap:?} slots): {m}",
                    w.len()
                );
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        proven.set(proven.get() + 1);
        let within = |name: &str, gpus: &[Vec<u32>]| -> Result<(), TestCaseError> {
            let mine = peak_load(&w, gpus);
            prop_assert!(
                best.max_load <= mine * (1.0 + 1e-9),
                "{name} {mine} beats the optimum {}",
                best.max_load
            );
            prop_assert!(
                best.max_load / mine >= 0.98,
                "{name} {mine} vs optimum {} on {w:?}, {cap:?}",
                best.max_load
            );
            Ok(())
        };
        within("CRAFT --repair", &craft)?;
        within(
            "joint",
            &joint_layer(&w, &cap, None, JointOptions::default()).unwrap(),
        )?;
        let slots: usize = cap.iter().sum();
        let uniform = cap.iter().all(|&c| c == cap[0]);
        // (a layer the repair left with two copies of an expert on one GPU
        // is outside the oracle's model: that GPU takes two shares)
        if uniform {
            let fixed = repaired_eplb(&w, d, slots - w.len());
            if !fixed
                .iter()
                .any(|g| (1..g.len()).any(|i| g[..i].contains(&g[i])))
            {
                within("EPLB --repair", &fixed)?;
            }
        }
        // CRAFT's counts (highest load per copy) then its placement
        let order = replication_order(&w, slots - w.len(), d);
        let mut copies = vec![1u32; w.len()];
        order.iter().for_each(|&x| copies[x as usize] += 1);
        let mut craft = capacity_aware_placement(&w, &copies, &cap).unwrap();
        refine_placement(&w, &copies, &mut craft);
        prop_assert!(best.max_load <= peak_load(&w, &craft) * (1.0 + 1e-9));
        // EPLB, where it puts no two copies of an expert on one GPU
        if uniform {
            let config = EplbConfig {
                redundant_experts: slots - w.len(),
                groups: 1,
            };
            let plan = eplb(&trace, Topology::new(1, d).unwrap(), config).unwrap();
            if plan.summary().same_gpu_duplicates == 0 {
                prop_assert!(best.max_load <= peak_load(&w, &plan.layers()[0].gpus) * (1.0 + 1e-9));
            }
        }
        // the packing-aware bound is a true bound, and never looser than the old
        let mean = w.iter().sum::<f64>() / d as f64;
        let bound = packing_balancedness(&w, d, slots);
        prop_assert!(
            best.balancedness <= bound + 1e-9,
            "optimum {} above bound {bound}",
            best.balancedness
        );
        let old = layer_bound(&trace, 0, d, slots - w.len());
        prop_assert!(bound <= old + 1e-6);
        prop_assert!(mean / best.max_load.max(1e-300) <= 1.0 + 1e-9);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let proven = proven.get();
    eprintln!("the oracle proved {proven} of {CASES} cases");
    assert!(
        2 * proven >= CASES,
        "the oracle proved only {proven} of {CASES} layers: too few to check the 2 % claim"
    );
}

/// A Zipf-like layer met in review (issue 48): three experts at 5,000
/// pairs, one at 1,040, four small, on 4 GPUs with CRAFT's R = 2 (its plan
/// keeps 3 slots per GPU on this one layer). CRAFT with `--repair` must
/// reach the exact optimum within 2 % on it and on layers one load away (a
/// load halved or doubled): the property test's random shapes never drew
/// it. It reaches 0.9698, which the oracle proves optimal on those slots
/// (the review took 0.9958 for the optimum; no placement under the even
/// split reaches it). The oracle works within its node budget, no clock;
/// every case must be proven.
#[test]
fn repair_reaches_the_optimum_on_the_zipf_layer_and_its_neighbours() {
    let layer: [f64; 8] = [5000.0, 5000.0, 79.0, 264.0, 38.0, 49.0, 5000.0, 1040.0];
    let mut layers = vec![layer.to_vec()];
    // The warm expert halved or doubled (the neighbours whose optimum moves
    // most): each solve takes about 5 s of a debug build; all 16 one-load
    // neighbours matched the optimum exactly when this was written
    // (2026-11-28).
    for f in [0.5f64, 2.0] {
        let mut w = layer.to_vec();
        w[7] = (w[7] * f).round();
        layers.push(w);
    }
    let mut checked = 0;
    for w in &layers {
        let craft = craft_repaired(w, 4, 2);
        let cap: Vec<usize> = craft.iter().map(Vec::len).collect();
        let best = crate::planners::shared::oracle::optimal_layer(w, &cap)
            .unwrap_or_else(|e| panic!("{w:?} on {cap:?}: {e}"));
        let mine = peak_load(w, &craft);
        let mean = w.iter().sum::<f64>() / 4.0;
        eprintln!(
            "{w:?} {cap:?}: CRAFT --repair {:.4}, optimum {:.4}",
            mean / mine,
            best.balancedness
        );
        assert!(
            best.max_load <= mine * (1.0 + 1e-9),
            "{w:?}: {mine} beats the optimum"
        );
        assert!(
            best.max_load / mine >= 0.98,
            "{w:?} on {cap:?}: CRAFT --repair peaks at {mine}, the optimum at {}",
            best.max_load
        );
        checked += 1;
    }
    assert_eq!(checked, 3, "every layer checked");
}
