//! Replay invariants: tokens are conserved, uniform load is perfectly
//! balanced, metrics agree with a direct computation.

use crate::planners::{EplbConfig, contiguous, eplb};
use crate::{LayerPlacement, LoadTrace, Plan, Topology, evaluate, gpu_loads};
use ndarray::Array3;
use proptest::prelude::*;

fn check(gpus: Vec<Vec<u32>>, counts: Vec<f64>, expected_loads: Vec<f64>) {
    let e = counts.len();
    let d = gpus.len();
    let trace =
        LoadTrace::new(Array3::from_shape_vec((1, 1, e), counts).unwrap(), vec![0]).unwrap();
    let plan = Plan::new(
        Topology::new(1, d).unwrap(),
        e,
        vec![LayerPlacement { layer: 0, gpus }],
        "t",
    )
    .unwrap();
    assert_eq!(gpu_loads(&trace, &plan, 0, 0).unwrap(), expected_loads);
    let r = evaluate(&trace, &plan).unwrap();
    let max = expected_loads.iter().cloned().fold(0.0, f64::max);
    let mean = expected_loads.iter().sum::<f64>() / d as f64;
    assert!((r.balancedness - mean / max).abs() < 1e-12);
    assert!((r.imbalance_ratio - max / mean).abs() < 1e-12);
}

#[test]
fn even_split_over_copies() {
    check(vec![vec![0], vec![1]], vec![4.0, 2.0], vec![4.0, 2.0]);
    // expert 0 on both GPUs: its 4 tokens split 2 / 2
    check(vec![vec![0, 1], vec![0]], vec![4.0, 2.0], vec![4.0, 2.0]);
    check(vec![vec![0], vec![0, 1]], vec![4.0, 2.0], vec![2.0, 4.0]);
    // three copies, one GPU holding two of them (a same-GPU duplicate)
    check(vec![vec![0, 0], vec![0, 1]], vec![6.0, 1.0], vec![4.0, 3.0]);
    // a GPU with no slots
    check(vec![vec![0, 1], vec![]], vec![1.0, 1.0], vec![2.0, 0.0]);
}

#[test]
fn idle_layer_counts_as_balanced() {
    let trace = LoadTrace::new(Array3::zeros((1, 1, 4)), vec![0]).unwrap();
    let plan = contiguous(&trace, Topology::new(1, 2).unwrap()).unwrap();
    assert_eq!(evaluate(&trace, &plan).unwrap().balancedness, 1.0);
}

#[test]
fn uniform_trace_is_balanced_under_every_planner() {
    let trace = LoadTrace::new(Array3::from_elem((4, 3, 32), 11.0), vec![0, 1, 2]).unwrap();
    let topo = Topology::new(2, 4).unwrap();
    assert_eq!(
        evaluate(&trace, &contiguous(&trace, topo).unwrap())
            .unwrap()
            .balancedness,
        1.0
    );
    let p = eplb(
        &trace,
        topo,
        EplbConfig {
            redundant_experts: 0,
            groups: 1,
        },
    )
    .unwrap();
    assert_eq!(evaluate(&trace, &p).unwrap().balancedness, 1.0);
}

#[test]
fn holdout_evaluates_only_unseen_batches() {
    let mut c = Array3::from_elem((4, 1, 4), 1.0);
    c[[3, 0, 0]] = 100.0; // only the last batch is skewed
    let trace = LoadTrace::new(c, vec![0]).unwrap();
    let split = trace.holdout_split(0.25).unwrap();
    assert_eq!((split.plan.num_batches(), split.eval.num_batches()), (3, 1));
    let plan = contiguous(&split.plan, Topology::new(1, 4).unwrap()).unwrap();
    let seen = evaluate(&split.plan, &plan).unwrap().balancedness;
    let unseen = evaluate(&split.eval, &plan).unwrap().balancedness;
    assert_eq!(seen, 1.0);
    assert!(unseen < 0.3);
    assert!(trace.holdout_split(0.0).is_err());
    assert!(trace.holdout_split(1.0).is_err());
    assert!(
        trace
            .slice_batches(0..1)
            .unwrap()
            .holdout_split(0.5)
            .is_err()
    );
}

proptest! {
    #[test]
    fn tokens_are_conserved(
        counts in proptest::collection::vec(0u32..10_000, 16),
        extra in 0usize..3,
    ) {
        let trace = LoadTrace::new(
            Array3::from_shape_vec((1, 1, 16), counts.iter().map(|&c| c as f64).collect()).unwrap(),
            vec![0],
        ).unwrap();
        let plan = eplb(&trace, Topology::new(1, 4).unwrap(), EplbConfig { redundant_experts: 4 * extra, groups: 1 }).unwrap();
        let loads = gpu_loads(&trace, &plan, 0, 0).unwrap();
        let total: f64 = counts.iter().map(|&c| c as f64).sum();
        prop_assert!((loads.iter().sum::<f64>() - total).abs() < 1e-6);
        let r = evaluate(&trace, &plan).unwrap();
        prop_assert!(r.balancedness > 0.0 && r.balancedness <= 1.0);
        prop_assert!((r.balancedness * r.imbalance_ratio - 1.0).abs() < 1e-9);
    }
}
