//! GRACE-MoE's routing as dispatch rules (`grace-weighted`: Algorithm 3,
//! `grace-topology`: Algorithm 4, weights from Eq. 3's predicted loads):
//! hand-computed weights and loads, the locality tiers of Algorithm 4 on
//! random placements, conservation, and the even split they reduce to when
//! every GPU's predicted load is the same. (`Optimal` never being beaten by
//! them is `src/tests/sim.rs`'s proptest, which runs every rule of `Rule::ALL`.)

use super::common;
use common::close;

use crate::Workload;
use crate::judge::{CostModel, Replay, Rule, Strategy, Traffic, predicted_loads, simulate};
use crate::{LayerPlacement, LoadTrace, Plan, Topology};
use ndarray::{Array3, Array4, Axis};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn run(work: &Workload, plan: &Plan, rule: Rule) -> Replay {
    simulate(
        work,
        &Strategy::fixed(plan.clone(), rule),
        &CostModel::default(),
    )
    .unwrap()
}

fn one_layer(topo: Topology, e: usize, gpus: Vec<Vec<u32>>) -> Plan {
    Plan::new(topo, e, vec![LayerPlacement { layer: 0, gpus }], "by-hand").unwrap()
}

#[test]
fn names_parse_back() {
    for rule in Rule::ALL {
        assert_eq!(Rule::from_name(rule.name()).unwrap(), rule);
    }
    let mut names: Vec<&str> = Rule::ALL.iter().map(Rule::name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), Rule::ALL.len(), "names are unique");
    assert!(Rule::from_name("grace").is_err());
}

/// 1 node × 2 GPUs: GPU 0 hosts experts 0 and 1, GPU 1 experts 0 and 2.
/// Over the whole workload the experts carry 6, 4 and 1 (batch 0: 2, 4, 0;
/// batch 1: 4, 0, 1), so Eq. 3 predicts 6/2 + 4 = 7 on GPU 0 and 6/2 + 1 = 4
/// on GPU 1; expert 0's copies get weights 1/7 and 1/4, i.e. 4/11 and 7/11
/// of its pairs. Batch 0: loads 2·4/11 + 4 = 52/11 and 2·7/11 = 14/11, mean
/// 3, balancedness 33/52. Batch 1: 4·4/11 = 16/11 and 4·7/11 + 1 = 39/11,
/// mean 5/2, balancedness 55/78. (A per-batch prediction would weigh batch 0
/// by 5 and 1 instead: the prediction is the workload's, not the batch's.)
#[test]
fn grace_weighted_on_the_hand_case() {
    let topo = Topology::new(1, 2).unwrap();
    let plan = one_layer(topo, 3, vec![vec![0, 1], vec![0, 2]]);
    assert_eq!(
        predicted_loads(&plan.layers()[0], &[6.0, 4.0, 1.0]).unwrap(),
        vec![7.0, 4.0]
    );
    let mut c = Array3::zeros((2, 1, 3));
    for (e, (a, b)) in [(2.0, 4.0), (4.0, 0.0), (0.0, 1.0)].into_iter().enumerate() {
        c[[0, 0, e]] = a;
        c[[1, 0, e]] = b;
    }
    let work = Workload::new(LoadTrace::new(c, vec![0]).unwrap());
    let r = run(&work, &plan, Rule::GraceWeighted);
    assert!(close(r.per_batch[0], 33.0 / 52.0), "{}", r.per_batch[0]);
    assert!(close(r.per_batch[1], 55.0 / 78.0), "{}", r.per_batch[1]);
    // One node, each GPU its own copy of expert 0: the tiers send every
    // pair of expert 0 home, which under even arrival is the even split.
    let topo_rule = run(&work, &plan, Rule::GraceTopology);
    let even = run(&work, &plan, Rule::Even);
    for (a, b) in topo_rule.per_batch.iter().zip(&even.per_batch) {
        assert!(close(*a, *b));
    }
}

/// 2 nodes × 3 GPUs (GPUs 0–2 on node 0, 3–5 on node 1), one batch, counts
/// per source:
///
/// | source | expert | pairs | grace-topology sends them to |
/// | --- | --- | --- | --- |
/// | 2 | 0 | 5 | node 0's copies (GPUs 0, 1), weighted: intra |
/// | 5 | 0 | 5 | no copy on node 1: all copies (GPUs 0, 1), weighted: cross |
/// | 1 | 1 | 3 | node 0's copy (GPU 2): intra |
/// | 4 | 1 | 3 | node 1's copy (GPU 3): intra |
/// | 0 | 2 | 2 | its own copy: local |
/// | 2 | 2 | 2 | node 0's copy (GPU 0): intra |
/// | 0 | 3 | 5 | no copy on node 0: all copies (GPUs 3, 5), weighted: cross |
/// | 3 | 3 | 5 | its own copy: local |
///
/// Expert loads 10, 6, 4, 10 over copies on GPUs {0, 1}, {2, 3}, {0, 4},
/// {3, 5}: predicted loads 5 + 2 = 7, 5, 3, 3 + 5 = 8, 2, 5. Expert 0's
/// copies weigh 1/7 : 1/5, i.e. 5/12 and 7/12; expert 3's 1/8 : 1/5, i.e.
/// 5/13 and 8/13; expert 1's 1/3 : 1/8, i.e. 8/11 and 3/11; expert 2's
/// 1/7 : 1/2, i.e. 2/9 and 7/9.
fn tiers_case() -> (Plan, Workload) {
    let topo = Topology::new(2, 3).unwrap();
    let plan = one_layer(
        topo,
        4,
        vec![vec![0, 2], vec![0], vec![1], vec![1, 3], vec![2], vec![3]],
    );
    let mut by_source = Array4::zeros((1, 1, 6, 4));
    for (s, e, n) in [
        (2, 0, 5.0),
        (5, 0, 5.0),
        (1, 1, 3.0),
        (4, 1, 3.0),
        (0, 2, 2.0),
        (2, 2, 2.0),
        (0, 3, 5.0),
        (3, 3, 5.0),
    ] {
        by_source[[0, 0, s, e]] = n;
    }
    let trace = LoadTrace::new(by_source.sum_axis(Axis(2)), vec![0]).unwrap();
    let work = Workload::new(trace).with_sources(by_source).unwrap();
    (plan, work)
}

#[test]
fn grace_topology_on_the_hand_case() {
    let (plan, work) = tiers_case();
    assert_eq!(
        predicted_loads(&plan.layers()[0], &[10.0, 6.0, 4.0, 10.0]).unwrap(),
        vec![7.0, 5.0, 3.0, 8.0, 2.0, 5.0]
    );
    let r = run(&work, &plan, Rule::GraceTopology);
    // Loads: GPU 0 2·5·5/12 + 2 + 2 = 49/6, GPU 1 2·5·7/12 = 35/6, GPU 2 3,
    // GPU 3 3 + 5·5/13 + 5 = 129/13, GPU 4 0, GPU 5 5·8/13 = 40/13; mean 5.
    assert!(
        close(r.balancedness, 5.0 / (129.0 / 13.0)),
        "{}",
        r.balancedness
    );
    let t = r.traffic;
    assert!(close(t.local, 7.0) && close(t.intra_node, 13.0) && close(t.cross_node, 10.0));
    // GPU 0 receives 25/12 + 25/12 + 2; source 2 sends 5 + 2.
    assert!(close(t.max_ingress, 37.0 / 6.0), "{}", t.max_ingress);
    assert!(close(t.max_egress, 7.0), "{}", t.max_egress);
}

#[test]
fn grace_weighted_on_the_tiers_case() {
    let (plan, work) = tiers_case();
    let r = run(&work, &plan, Rule::GraceWeighted);
    // Loads: GPU 0 10·5/12 + 4·2/9 = 91/18, GPU 1 10·7/12 = 35/6, GPU 2
    // 6·8/11, GPU 3 6·3/11 + 10·5/13, GPU 4 4·7/9, GPU 5 10·8/13 = 80/13
    // (the busiest); mean 5. The even split's busiest is GPU 3 with 8.
    assert!(close(r.balancedness, 13.0 / 16.0), "{}", r.balancedness);
    assert!(close(run(&work, &plan, Rule::Even).balancedness, 5.0 / 8.0));
    let t = r.traffic;
    // Local: source 0's expert 2 on GPU 0 (2 · 2/9), source 3's expert 3 on
    // GPU 3 (5 · 5/13). Cross: source 5's expert 0 (5), source 1's and
    // source 4's expert 1 off their node (3·3/11 + 3·8/11), sources 0's and
    // 2's expert 2 on GPU 4 (2 · 2·7/9), source 0's expert 3 (5).
    assert!(close(t.local, 4.0 / 9.0 + 25.0 / 13.0), "{}", t.local);
    assert!(close(t.cross_node, 13.0 + 28.0 / 9.0), "{}", t.cross_node);
    assert!(close(t.local + t.intra_node + t.cross_node, 30.0));
}

/// An expert with no load at all leaves a GPU with predicted load 0; its
/// weight is the limit of 1 / load, and every figure stays finite.
#[test]
fn zero_predicted_load_is_guarded() {
    let topo = Topology::new(2, 1).unwrap();
    // Expert 0 (never chosen) alone on GPU 0 and beside expert 1 on GPU 1.
    let plan = one_layer(topo, 2, vec![vec![0], vec![0, 1]]);
    assert_eq!(
        predicted_loads(&plan.layers()[0], &[0.0, 5.0]).unwrap(),
        vec![0.0, 5.0]
    );
    let c = Array3::from_shape_vec((1, 1, 2), vec![0.0, 5.0]).unwrap();
    let work = Workload::new(LoadTrace::new(c, vec![0]).unwrap());
    for rule in [Rule::GraceWeighted, Rule::GraceTopology] {
        let r = run(&work, &plan, rule);
        assert!(close(r.balancedness, 0.5), "{rule}: {}", r.balancedness);
        let t = r.traffic;
        for x in [
            t.local,
            t.intra_node,
            t.cross_node,
            t.max_ingress,
            t.max_egress,
        ] {
            assert!(x.is_finite(), "{rule}: {t:?}");
        }
        assert!(close(t.local + t.cross_node, 5.0), "{rule}: {t:?}");
    }
}

#[test]
fn predicted_loads_refuses_experts_it_has_no_load_for() {
    let layer = LayerPlacement {
        layer: 3,
        gpus: vec![vec![0], vec![2]],
    };
    assert!(predicted_loads(&layer, &[1.0, 1.0]).is_err());
}

/// A random instance: placement, per-source counts.
struct Case {
    plan: Plan,
    by_source: Array4<f64>,
}

/// The simulator tests' random instance (`common::random_sourced_case`).
fn random_case(seed: u64) -> Case {
    let c = common::random_sourced_case(seed);
    Case {
        plan: c.plan,
        by_source: c.by_source,
    }
}

fn trace_of(by_source: &Array4<f64>) -> LoadTrace {
    let l = by_source.dim().1;
    LoadTrace::new(by_source.sum_axis(Axis(2)), (0..l as u32).collect()).unwrap()
}

/// What Algorithm 4's tiers imply per batch, independently of the
/// simulator: pairs whose source GPU hosts the expert are served there;
/// pairs whose source node hosts none cross nodes; the rest stay in the node.
fn tier_traffic(plan: &Plan, by_source: &Array4<f64>, b: usize) -> (f64, f64, f64) {
    let gpn = plan.topology().gpus_per_node();
    let (_, l_n, s_n, e_n) = by_source.dim();
    let (mut local, mut intra, mut cross) = (0.0, 0.0, 0.0);
    for l in 0..l_n {
        let gpus = &plan.layers()[l].gpus;
        for s in 0..s_n {
            for e in 0..e_n {
                let n = by_source[[b, l, s, e]];
                let hosts = |g: usize| gpus[g].contains(&(e as u32));
                if hosts(s) {
                    local += n;
                } else if (s / gpn * gpn..(s / gpn + 1) * gpn).any(hosts) {
                    intra += n;
                } else {
                    cross += n;
                }
            }
        }
    }
    (local, intra, cross)
}

/// The case's counts with every one of the `D` GPUs sending `1 / D` of
/// each expert: what even arrival assumes, written out.
fn spread_evenly(c: &Case) -> Array4<f64> {
    let trace = trace_of(&c.by_source);
    let d = c.plan.topology().num_gpus();
    let (b_n, l_n, e_n) = trace.counts().dim();
    Array4::from_shape_fn((b_n, l_n, d, e_n), |(b, l, _, e)| {
        trace.counts()[[b, l, e]] / d as f64
    })
}

fn conserves(t: &Traffic) -> bool {
    close(t.local + t.intra_node + t.cross_node, t.pairs)
        && t.local >= -1e-9
        && t.intra_node >= -1e-9
        && t.cross_node >= -1e-9
}

/// Placements on which every GPU's predicted load is the same: `D` GPUs,
/// `E = D · m` experts of `c` copies each dealt `m · c` to a GPU (a GPU may
/// hold two copies of one expert), and counts whose total over the batches
/// is the same for every expert of a layer.
fn level_case(seed: u64) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = rng.random_range(1..=3);
    let gpn = rng.random_range(1..=3);
    let d = nodes * gpn;
    let m = rng.random_range(1..=2);
    let copies = rng.random_range(1..=3);
    let e = d * m;
    let l_n = rng.random_range(1..=2);
    let b_n = rng.random_range(1..=3);
    let layers = (0..l_n)
        .map(|li| {
            let mut slots: Vec<u32> = (0..e as u32)
                .flat_map(|x| std::iter::repeat_n(x, copies))
                .collect();
            slots.shuffle(&mut rng);
            LayerPlacement {
                layer: li as u32,
                gpus: slots.chunks(m * copies).map(<[u32]>::to_vec).collect(),
            }
        })
        .collect();
    let plan = Plan::new(Topology::new(nodes, gpn).unwrap(), e, layers, "level").unwrap();
    let s_n = rng.random_range(1..=d);
    let mut by_source = Array4::from_shape_fn((b_n, l_n, s_n, e), |_| {
        if rng.random_bool(0.3) {
            0.0
        } else {
            rng.random_range(0..20) as f64
        }
    });
    for l in 0..l_n {
        let totals: Vec<f64> = (0..e)
            .map(|x| by_source.slice(ndarray::s![.., l, .., x]).sum())
            .collect();
        let top = totals.iter().copied().fold(1.0, f64::max);
        for (x, t) in totals.iter().enumerate() {
            let s = rng.random_range(0..s_n);
            by_source[[b_n - 1, l, s, x]] += top - t;
        }
    }
    Case { plan, by_source }
}

fn same_report(a: &Replay, b: &Replay) -> Result<(), String> {
    let pairs = |x: &[f64], y: &[f64]| x.iter().zip(y).all(|(p, q)| close(*p, *q));
    if !pairs(&a.per_batch, &b.per_batch)
        || !pairs(&a.per_batch_imbalance_ratio, &b.per_batch_imbalance_ratio)
        || !pairs(&a.per_layer, &b.per_layer)
    {
        return Err(format!("balance {:?} vs {:?}", a.per_batch, b.per_batch));
    }
    for (x, y) in a.per_batch_traffic.iter().zip(&b.per_batch_traffic) {
        let fields = |t: &Traffic| {
            [
                t.pairs,
                t.local,
                t.intra_node,
                t.cross_node,
                t.max_ingress,
                t.max_egress,
            ]
        };
        if !fields(x).iter().zip(fields(y)).all(|(p, q)| close(*p, q)) {
            return Err(format!("traffic {x:?} vs {y:?}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Algorithm 4 never sends a pair off its GPU when the GPU hosts the
    /// expert, nor off its node when the node does; and it never moves
    /// more pairs across nodes, nor keeps fewer home, than Algorithm 3.
    #[test]
    fn grace_topology_keeps_pairs_in_the_nearest_tier(seed in any::<u64>()) {
        let c = random_case(seed);
        let trace = trace_of(&c.by_source);
        let spread = spread_evenly(&c);
        let cases = [
            (Workload::new(trace.clone()).with_sources(c.by_source.clone()).unwrap(), &c.by_source),
            (Workload::new(trace.clone()), &spread),
        ];
        for (work, sources) in &cases {
            let r = run(work, &c.plan, Rule::GraceTopology);
            let w = run(work, &c.plan, Rule::GraceWeighted);
            for (b, (t, tw)) in r.per_batch_traffic.iter().zip(&w.per_batch_traffic).enumerate() {
                let (local, intra, cross) = tier_traffic(&c.plan, sources, b);
                prop_assert!(
                    close(t.local, local) && close(t.intra_node, intra) && close(t.cross_node, cross),
                    "{} batch {b}: {t:?} vs tiers {local} {intra} {cross}", work.sources()
                );
                prop_assert!(conserves(t) && conserves(tw), "{t:?} {tw:?}");
                prop_assert!(t.local >= tw.local - 1e-9 && t.cross_node <= tw.cross_node + 1e-9);
            }
            prop_assert!(close(r.traffic.pairs, trace.counts().sum()));
            prop_assert!(close(w.traffic.pairs, trace.counts().sum()));
            // Same tiers as local-first: only the split within a tier differs.
            let lf = run(work, &c.plan, Rule::LocalFirst);
            prop_assert!(close(lf.traffic.cross_node, r.traffic.cross_node));
            prop_assert!(close(lf.traffic.local, r.traffic.local));
        }
    }

    /// Equal predicted loads make every weight equal: `grace-weighted` is
    /// the even split and `grace-topology` is `local-first`, figure for
    /// figure, with and without recorded sources.
    #[test]
    fn level_predictions_give_the_even_split(seed in any::<u64>()) {
        let c = level_case(seed);
        let trace = trace_of(&c.by_source);
        for l in 0..trace.num_layers() {
            let totals: Vec<f64> = trace.counts().sum_axis(Axis(0)).row(l).to_vec();
            let p = predicted_loads(&c.plan.layers()[l], &totals).unwrap();
            prop_assert!(p.iter().all(|x| close(*x, p[0])), "not level: {p:?}");
        }
        let works = [
            Workload::new(trace.clone()),
            Workload::new(trace).with_sources(c.by_source.clone()).unwrap(),
        ];
        for work in &works {
            for (grace, plain) in [(Rule::GraceWeighted, Rule::Even), (Rule::GraceTopology, Rule::LocalFirst)] {
                let a = run(work, &c.plan, grace);
                let b = run(work, &c.plan, plain);
                if let Err(why) = same_report(&a, &b) {
                    prop_assert!(false, "{grace} vs {plain} ({}): {why}", work.sources());
                }
            }
        }
    }
}

/// Real token routes (ESFT, DeepSeek-V2-Lite, sequences dealt to the 4
/// ranks of 2 × 2 GPUs) on an EPLB plan: both GRACE rules conserve pairs
/// and stay below `Optimal`, and Algorithm 4 keeps more pairs home and
/// sends fewer across nodes than Algorithm 3 (per (source, expert) it can
/// only do so, so the totals must agree).
#[test]
fn esft_routes_under_grace_rules() {
    let Some(tokens) = common::esft_tokens("esft-deepseek-v2-lite/intent") else {
        return;
    };
    let tokens = tokens.with_sequences_on_ranks(4).unwrap();
    let work = Workload::from_tokens(tokens, 2048).unwrap();
    let topo = Topology::new(2, 2).unwrap();
    let cfg = crate::planners::EplbConfig {
        redundant_experts: 16,
        groups: 1,
    };
    let plan = crate::planners::eplb(work.trace(), topo, cfg).unwrap();
    let optimal = run(&work, &plan, Rule::Optimal).balancedness;
    let mut got = Vec::new();
    for rule in [
        Rule::Even,
        Rule::LocalFirst,
        Rule::GraceWeighted,
        Rule::GraceTopology,
    ] {
        let r = run(&work, &plan, rule);
        let t = r.traffic;
        assert!(conserves(&t), "{rule}: {t:?}");
        assert!(r.balancedness <= optimal + 1e-9, "{rule} beats optimal");
        println!(
            "{rule}: balancedness {:.4} (optimal {optimal:.4}), local {:.1}%, intra {:.1}%, cross {:.1}%",
            r.balancedness,
            100.0 * t.local / t.pairs,
            100.0 * t.intra_node / t.pairs,
            100.0 * t.cross_node / t.pairs
        );
        got.push(t);
    }
    let (weighted, topology) = (got[2], got[3]);
    assert!(topology.local >= weighted.local && topology.cross_node <= weighted.cross_node);
}

/// GRACE's router knows only what it profiled. A plan
/// made through the registry on batches 0..4 records their loads, and
/// judged on held-out batches its routing weights are the same whatever
/// those batches hold: batches 4 and 5 score the same whether batch 6 (a
/// batch that piles onto one expert) is judged with them or not. A plan
/// without its profile falls back to the judged batches' loads — and
/// then batch 6 does move them, which is what the profile prevents.
#[test]
fn held_out_routing_weights_come_from_the_planning_batches() {
    use crate::judge::{PREDICTED_FROM_PROFILE, PREDICTED_IN_SAMPLE};
    use crate::planners::{self, Settings};
    let mut cfg =
        crate::synth::generator::GenConfig::new(crate::data::model::preset("olmoe").unwrap(), 7);
    cfg.seed = 4;
    let mut trace = crate::synth::generator::generate(&cfg).unwrap();
    // batch 6: every layer's tokens moved onto expert 3
    let (_, l_n, e_n) = trace.counts().dim();
    let mut counts = trace.counts().clone();
    for l in 0..l_n {
        let total: f64 = (0..e_n).map(|e| counts[[6, l, e]]).sum();
        for e in 0..e_n {
            counts[[6, l, e]] = if e == 3 { total } else { 0.0 };
        }
    }
    trace = LoadTrace::new(counts, trace.layer_ids().to_vec()).unwrap();
    let topo = Topology::new(2, 4).unwrap();
    let planning = Workload::new(trace.slice_batches(0..4).unwrap());
    let settings = Settings::new()
        .with("redundant_experts", crate::planners::Value::Count(16))
        .unwrap();
    let plan = planners::plan(planners::find("eplb").unwrap(), &planning, topo, &settings)
        .unwrap()
        .plan;
    let profile = plan
        .profile()
        .expect("the registry records the profile")
        .to_owned();
    assert_eq!(profile, planning.trace().counts().sum_axis(Axis(0)));
    let short = Workload::new(trace.slice_batches(4..6).unwrap());
    let long = Workload::new(trace.slice_batches(4..7).unwrap());
    let mut checked = 0;
    for rule in [Rule::GraceWeighted, Rule::GraceTopology] {
        let (a, b) = (run(&short, &plan, rule), run(&long, &plan, rule));
        assert_eq!(a.predictions.as_deref(), Some(PREDICTED_FROM_PROFILE));
        for i in 0..2 {
            assert_eq!(
                a.per_batch[i],
                b.per_batch[i],
                "{}: batch {}",
                rule.name(),
                4 + i
            );
            checked += 1;
        }
        // without the profile, the judged batches leak into the weights
        let bare = plan.clone().with_profile(None).unwrap();
        let (a, b) = (run(&short, &bare, rule), run(&long, &bare, rule));
        assert_eq!(a.predictions.as_deref(), Some(PREDICTED_IN_SAMPLE));
        assert!(
            (0..2).any(|i| a.per_batch[i] != b.per_batch[i]),
            "{}: batch 6 should move the in-sample weights",
            rule.name()
        );
    }
    assert_eq!(checked, 4);
    assert!(run(&short, &plan, Rule::Even).predictions.is_none());
}
