//! Libra's execution-time model (`planners::libra::time_model`): tiny cases
//! computed by hand, agreement with the simulator's balance figures, and
//! monotonicity in the link and the GPU's speed.

use super::common;

use crate::Workload;
use crate::judge::{CostModel, Placement, Rule, Strategy, simulate};
use crate::planners::libra::time_model::{TimeModel, time};
use crate::planners::libra::{LibraOptions, LibraSchedule, Predictor, libra_schedule};
use crate::synth::token_generator::{TokenGenConfig, generate_tokens};
use crate::{LayerPlacement, LoadTrace, Plan, Topology, data::model, planners, synth::generator};
use ndarray::Array3;

/// One pair = 1 s, one expert copy = 1 s at 1 GB/s, no rebalancer time:
/// every figure below is a count.
fn unit_model(link_gb_per_s: f64) -> TimeModel {
    TimeModel {
        flops_per_pair: 1e12,
        expert_bytes: 1_000_000_000,
        tflops: 1.0,
        link_gb_per_s,
        rebalance_seconds: 0.0,
    }
}

fn layer(l: u32, gpus: &[&[u32]]) -> LayerPlacement {
    LayerPlacement {
        layer: l,
        gpus: gpus.iter().map(|g| g.to_vec()).collect(),
    }
}

/// One batch, 2 layers, 2 GPUs, 4 experts (GPU 0 holds 0 and 1, GPU 1
/// holds 2 and 3). Layer 0: 2 pairs per expert; layer 1: 8 pairs to
/// expert 2, which the schedule copies onto GPU 0 for layer 1 (and, with
/// `first_copy`, expert 0 onto GPU 1 for layer 0).
fn tiny(first_copy: bool) -> (Workload, Plan, LibraSchedule) {
    let mut c = Array3::zeros((1, 2, 4));
    for e in 0..4 {
        c[[0, 0, e]] = 2.0;
    }
    c[[0, 1, 2]] = 8.0;
    let trace = LoadTrace::new(c, vec![0, 1]).unwrap();
    let topo = Topology::new(1, 2).unwrap();
    let base = Plan::new(
        topo,
        4,
        vec![layer(0, &[&[0, 1], &[2, 3]]), layer(1, &[&[0, 1], &[2, 3]])],
        "hand",
    )
    .unwrap();
    let l0: &[&[u32]] = if first_copy {
        &[&[0, 1], &[2, 3, 0]]
    } else {
        &[&[0, 1], &[2, 3]]
    };
    let next = Plan::new(
        topo,
        4,
        vec![layer(0, l0), layer(1, &[&[0, 1, 2], &[2, 3]])],
        "hand",
    )
    .unwrap();
    let schedule = LibraSchedule {
        placement: Placement::Schedule(vec![(0..1, next)]),
        rule: Rule::Libra {
            tolerance_percent: 0,
            start: crate::judge::RemoteStart::Even,
        },
        copies: vec![1 + usize::from(first_copy)],
        predictor: ("oracle", "upper bound"),
    };
    (Workload::new(trace), base, schedule)
}

/// Layer 0 (even arrival, 1 pair per (GPU, expert)): each GPU serves its 2
/// local pairs and the other GPU's 2 remote ones, 4 s. Layer 1: both GPUs
/// hold expert 2, so each serves its own 4 pairs locally, 4 s; its copy
/// (1 expert received by GPU 0, sent by GPU 1) takes 1 s under layer 0's
/// 4 s and hides. The static base: 4 s, then all 8 pairs on GPU 1, 8 s.
#[test]
fn copy_that_hides_is_free() {
    let (work, base, s) = tiny(false);
    let r = time(&work, &base, &s, &unit_model(1.0)).unwrap();
    let l1 = r.layers[1];
    assert_eq!(
        (l1.copies, l1.copy_seconds, l1.window_seconds),
        (1, 1.0, 4.0)
    );
    assert!(l1.hidden);
    assert_eq!(l1.exposed_seconds, 0.0);
    assert_eq!(
        (r.layers[0].compute_seconds, l1.compute_seconds),
        (4.0, 4.0)
    );
    assert_eq!(r.per_batch_seconds, vec![8.0]);
    assert_eq!(r.static_per_batch_seconds, vec![12.0]);
    assert_eq!((r.hidden, r.unhidden, r.first_layer_seconds), (1, 0, 0.0));
}

/// At 0.1 GB/s the copy takes 10 s against layer 0's 4 s: 6 s exposed,
/// charged exactly, and the layer is counted unhidden.
#[test]
fn copy_that_does_not_hide_is_charged_its_excess() {
    let (work, base, s) = tiny(false);
    let r = time(&work, &base, &s, &unit_model(0.1)).unwrap();
    let l1 = r.layers[1];
    assert!(!l1.hidden);
    assert!((l1.copy_seconds - 10.0).abs() < 1e-12);
    assert!((l1.exposed_seconds - 6.0).abs() < 1e-12);
    assert!((r.per_batch_seconds[0] - 14.0).abs() < 1e-12);
    assert!((r.per_batch_exposed_seconds[0] - 6.0).abs() < 1e-12);
    assert_eq!((r.hidden, r.unhidden), (0, 1));
}

/// The first layer's copy has no window: charged in full, counted apart
/// from the hidden / unhidden layers.
#[test]
fn first_layer_copy_is_charged_in_full() {
    let (work, base, s) = tiny(true);
    let r = time(&work, &base, &s, &unit_model(1.0)).unwrap();
    let l0 = r.layers[0];
    assert_eq!((l0.copies, l0.window_seconds), (1, 0.0));
    assert!(!l0.hidden);
    assert_eq!(l0.exposed_seconds, 1.0);
    assert_eq!(r.first_layer_seconds, 1.0);
    // Layer 0: 8 pairs in all over 2 GPUs; GPU 1 serves expert 0's pair
    // from its own tokens, so GPU 0 has 2 local + 1 remote (expert 1 from
    // GPU 1) = 3 and GPU 1 has 3 local + 2 remote (experts 2, 3 from GPU
    // 0) = 5; expert 0 is replicated, but GPU 1's remote pairs are of
    // experts 2 and 3, held once: nothing moves.
    assert_eq!(l0.max_load, 5.0);
    assert_eq!(l0.compute_seconds, 5.0);
    assert_eq!((r.hidden, r.unhidden), (1, 0));
    assert_eq!(r.per_batch_seconds, vec![1.0 + 5.0 + 4.0]);
}

/// A rebalancer slower than a GPU's local stage delays its remote stage.
#[test]
fn slow_rebalancer_delays_the_remote_stage() {
    let (work, base, s) = tiny(false);
    let model = TimeModel {
        rebalance_seconds: 3.0,
        ..unit_model(1.0)
    };
    let r = time(&work, &base, &s, &model).unwrap();
    // Layer 0: local 2 s, then the remote 2 s from 3 s on: 5 s. Layer 1:
    // no remote pairs, 4 s, its copy under a 5 s window.
    assert_eq!(r.layers[0].compute_seconds, 5.0);
    assert!(r.layers[0].rebalance_exposed);
    assert_eq!(r.layers[1].window_seconds, 5.0);
    assert_eq!(r.rebalance_exposed, 1);
    assert_eq!(r.per_batch_seconds, vec![9.0]);
}

#[test]
fn bad_inputs_are_errors() {
    let (work, base, s) = tiny(false);
    for bad in [
        TimeModel {
            tflops: 0.0,
            ..unit_model(1.0)
        },
        TimeModel {
            rebalance_seconds: f64::NAN,
            ..unit_model(1.0)
        },
        unit_model(-1.0),
    ] {
        assert!(bad.validate().is_err());
        assert!(time(&work, &base, &s, &bad).is_err());
    }
    let mut wrong_rule = s.clone();
    wrong_rule.rule = Rule::Even;
    assert!(time(&work, &base, &wrong_rule, &unit_model(1.0)).is_err());
    // A schedule built on another base: GPU 0's slots do not start with
    // this one's.
    let other = Plan::new(
        base.topology(),
        4,
        vec![layer(0, &[&[1, 0], &[2, 3]]), layer(1, &[&[1, 0], &[2, 3]])],
        "other",
    )
    .unwrap();
    assert!(time(&work, &other, &s, &unit_model(1.0)).is_err());
}

/// A generated OLMoE trace on 8 GPUs, Libra with the previous-batch
/// predictor on a contiguous base.
fn generated(n: usize) -> (Workload, Plan, LibraSchedule) {
    let trace = generator::generate(&generator::GenConfig::new(
        model::preset("olmoe").unwrap(),
        6,
    ))
    .unwrap();
    let base = planners::contiguous(&trace, Topology::new(1, 8).unwrap()).unwrap();
    let work = Workload::new(trace);
    let opts = LibraOptions {
        extra_per_gpu: n,
        ..LibraOptions::default()
    };
    let s = libra_schedule(&work, &base, &Predictor::PreviousBatch, &opts).unwrap();
    (work, base, s)
}

/// Each layer costs `max(compute, next copy)` in effect, so a faster link
/// or a faster GPU never makes a batch slower; a faster link never hides
/// fewer copies.
#[test]
fn monotone_in_bandwidth_and_speed() {
    let (work, base, s) = generated(8);
    let preset = model::preset("olmoe").unwrap();
    let mut last: Option<crate::planners::libra::time_model::TimeReport> = None;
    for gbps in [1.0, 5.0, 25.0, 50.0, 450.0, 5000.0] {
        let m = TimeModel {
            link_gb_per_s: gbps,
            ..TimeModel::for_model(preset)
        };
        let r = time(&work, &base, &s, &m).unwrap();
        if let Some(p) = &last {
            assert!(r.hidden >= p.hidden, "{gbps} GB/s hides fewer");
            for (a, b) in r.per_batch_seconds.iter().zip(&p.per_batch_seconds) {
                assert!(*a <= *b * (1.0 + 1e-12), "{gbps} GB/s is slower");
            }
        }
        last = Some(r);
    }
    let mut last: Option<f64> = None;
    for tflops in [50.0, 200.0, 600.0, 2000.0] {
        let m = TimeModel {
            tflops,
            link_gb_per_s: 50.0,
            ..TimeModel::for_model(preset)
        };
        let total = time(&work, &base, &s, &m).unwrap().total_seconds;
        if let Some(p) = last {
            assert!(total <= p * (1.0 + 1e-12), "{tflops} TFLOPS is slower");
        }
        last = Some(total);
    }
    // A slow enough link hides nothing past the first layers; a fast
    // enough one hides everything.
    let slow = TimeModel {
        link_gb_per_s: 1e-3,
        ..TimeModel::for_model(preset)
    };
    let r = time(&work, &base, &s, &slow).unwrap();
    let copied_layers = r
        .layers
        .iter()
        .filter(|l| l.layer > 0 && l.copies > 0)
        .count();
    assert_eq!(r.unhidden, copied_layers);
    assert!(copied_layers > 0);
    let fast = TimeModel {
        link_gb_per_s: 1e9,
        ..TimeModel::for_model(preset)
    };
    assert_eq!(time(&work, &base, &s, &fast).unwrap().unhidden, 0);
}

/// With no copies and no rebalancer time, Libra is its base under `even`
/// (a base without replicas and even arrival leave nothing to rebalance).
#[test]
fn no_copies_is_the_static_plan() {
    let (work, base, s) = generated(0);
    let m = TimeModel {
        rebalance_seconds: 0.0,
        ..TimeModel::for_model(model::preset("olmoe").unwrap())
    };
    let r = time(&work, &base, &s, &m).unwrap();
    assert_eq!(r.hidden, r.layers.iter().filter(|l| l.layer > 0).count());
    for (a, b) in r.per_batch_seconds.iter().zip(&r.static_per_batch_seconds) {
        assert!(common::close(*a, *b), "{a} vs {b}");
    }
}

/// The loads the model times are the simulator's: per batch, the mean
/// over layers of max / mean equals `simulate`'s imbalance ratio, for
/// Libra under its rule and for the base under `even` — on counts (even
/// arrival) and on token routes (recorded sources).
#[test]
fn loads_agree_with_the_simulator() {
    let (work, base, s) = generated(4);
    check_against_simulator(&work, &base, &s);
    let preset = model::preset("qwen3-30b-a3b").unwrap();
    let mut cfg = TokenGenConfig::new(preset, 4096);
    cfg.ranks = 8;
    let tokens = generate_tokens(&cfg).unwrap();
    let work = Workload::from_tokens(tokens, 1024).unwrap();
    let base = planners::contiguous(work.trace(), Topology::new(2, 4).unwrap()).unwrap();
    let s = libra_schedule(&work, &base, &Predictor::Oracle, &LibraOptions::default()).unwrap();
    check_against_simulator(&work, &base, &s);
}

fn check_against_simulator(work: &Workload, base: &Plan, s: &LibraSchedule) {
    let r = time(work, base, s, &TimeModel::default()).unwrap();
    let cost = CostModel::default();
    let libra = simulate(work, &s.strategy(), &cost).unwrap();
    let fixed = simulate(work, &Strategy::fixed(base.clone(), Rule::Even), &cost).unwrap();
    let l_n = work.trace().num_layers() as f64;
    for b in 0..work.trace().num_batches() {
        let rows = r.layers.iter().filter(|x| x.batch == b);
        let (ir, ir_static) = rows.fold((0.0, 0.0), |(a, c), x| {
            (
                a + x.max_load / x.mean_load,
                c + x.static_max_load / x.mean_load,
            )
        });
        assert!(
            common::close(ir / l_n, libra.per_batch_imbalance_ratio[b]),
            "batch {b}: {} vs {}",
            ir / l_n,
            libra.per_batch_imbalance_ratio[b]
        );
        assert!(common::close(
            ir_static / l_n,
            fixed.per_batch_imbalance_ratio[b]
        ));
    }
}
