//! Token messages (`Traffic::messages`): a token counted once per distinct
//! destination GPU / node, as GRACE-MoE's dispatch sends it (§5.1).
//! Hand-worked cases, `None` without token routes, messages never above
//! pairs under any rule, and under one-copy placements, SGLang's static
//! map and vLLM's `p mod c` rule the simulator's counts equal a count made
//! here from the routes.

use super::common;
use common::close;

use crate::Workload;
use crate::judge::{
    CostModel, Messages, Replay, Rule, SglangVersion, Strategy, sglang_dispatch_map, simulate,
};
use crate::{LayerPlacement, LoadTrace, Plan, TokenTrace, Topology};
use ndarray::{Array2, Array3, array};
use proptest::prelude::*;
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

fn messages(work: &Workload, plan: &Plan, rule: Rule) -> Messages {
    run(work, plan, rule).traffic.messages.unwrap()
}

/// 2 nodes × 2 GPUs, 8 experts, expert `e` on GPU `e / 2` only.
fn one_copy_plan() -> Plan {
    let gpus = (0..4u32).map(|g| vec![2 * g, 2 * g + 1]).collect();
    Plan::new(
        Topology::new(2, 2).unwrap(),
        8,
        vec![LayerPlacement { layer: 0, gpus }],
        "hand",
    )
    .unwrap()
}

fn tokens(routes: Array2<u32>, ranks: Vec<u32>, experts: usize) -> Workload {
    let n = ranks.len();
    Workload::from_tokens(
        TokenTrace::new(experts, vec![0], vec![routes], ranks).unwrap(),
        n,
    )
    .unwrap()
}

#[test]
fn hand_worked_one_copy_tokens() {
    let plan = one_copy_plan();
    let bytes = 7168.0 * 2.0; // CostModel::default: hidden 7168, bf16
    // (source GPU 0, experts, cross-GPU messages, cross-node messages)
    let cases: [(u32, [u32; 2], f64, f64); 5] = [
        (0, [6, 7], 1.0, 1.0), // both on GPU 3 of the other node: one message
        (0, [4, 6], 2.0, 1.0), // GPUs 2 and 3, one remote node: 2 and 1
        (0, [0, 1], 0.0, 0.0), // both on the source GPU
        (0, [0, 2], 1.0, 0.0), // one at home, one on GPU 1 of the same node
        (3, [0, 7], 1.0, 1.0), // from GPU 3: one at home, one on GPU 0
    ];
    for rule in Rule::ALL {
        let (mut gpu_sum, mut node_sum) = (0.0, 0.0);
        for &(src, experts, gpu, node) in &cases {
            let work = tokens(
                Array2::from_shape_vec((1, 2), experts.to_vec()).unwrap(),
                vec![src],
                8,
            );
            let m = messages(&work, &plan, rule);
            assert_eq!(
                (m.cross_gpu, m.cross_node),
                (gpu, node),
                "{rule} {experts:?}"
            );
            assert_eq!(m.token_layers, 1.0);
            assert_eq!(m.cross_node_bytes, node * bytes);
            assert_eq!(m.cross_gpu_bytes, gpu * bytes);
            gpu_sum += gpu;
            node_sum += node;
        }
        // all five tokens in one workload (one batch): the sums, and the
        // per-token means
        let routes =
            Array2::from_shape_vec((5, 2), cases.iter().flat_map(|c| c.1).collect()).unwrap();
        let work = tokens(routes, cases.iter().map(|c| c.0).collect(), 8);
        let r = run(&work, &plan, rule);
        let m = r.traffic.messages.unwrap();
        assert_eq!((m.cross_gpu, m.cross_node), (gpu_sum, node_sum), "{rule}");
        assert_eq!(m.per_token_cross_node, node_sum / 5.0);
        assert_eq!(m.per_token_cross_gpu, gpu_sum / 5.0);
        assert_eq!(r.per_batch_traffic[0].messages, Some(m));
    }
}

#[test]
fn without_token_routes_messages_are_unknown() {
    let plan = one_copy_plan();
    let trace = LoadTrace::new(Array3::from_elem((2, 1, 8), 3.0), vec![0]).unwrap();
    let by_source = ndarray::Array4::from_elem((2, 1, 1, 8), 3.0);
    for work in [
        Workload::new(trace.clone()),
        Workload::new(trace).with_sources(by_source).unwrap(),
    ] {
        for rule in Rule::ALL {
            let r = run(&work, &plan, rule);
            assert_eq!(r.traffic.messages, None, "{rule}");
            assert!(r.per_batch_traffic.iter().all(|t| t.messages.is_none()));
        }
    }
}

#[test]
fn split_rules_count_expected_destinations() {
    // 2 × 2; experts 0 and 1 each on GPUs 2 and 3 (node 1), expert 2 on
    // GPU 0. Under `even` a pair picks either copy with 1/2.
    let plan = Plan::new(
        Topology::new(2, 2).unwrap(),
        3,
        vec![LayerPlacement {
            layer: 0,
            gpus: vec![vec![2], vec![], vec![0, 1], vec![0, 1]],
        }],
        "hand",
    )
    .unwrap();
    // one pair of expert 0: one GPU for sure (1/2 + 1/2), one node
    let m = messages(&tokens(array![[0, 2]], vec![0], 3), &plan, Rule::Even);
    assert_eq!((m.cross_gpu, m.cross_node), (1.0, 1.0));
    // experts 0 and 1: each of GPUs 2, 3 missed with 1/4, so 2 × 3/4
    let m = messages(&tokens(array![[0, 1]], vec![0], 3), &plan, Rule::Even);
    assert_eq!((m.cross_gpu, m.cross_node), (1.5, 1.0));
    // from GPU 2, local-first keeps both at home: nothing sent
    let m = messages(&tokens(array![[0, 1]], vec![2], 3), &plan, Rule::LocalFirst);
    assert_eq!((m.cross_gpu, m.cross_node), (0.0, 0.0));
    // from GPU 1, local-first spreads over node 1's copies as even does
    let m = messages(&tokens(array![[0, 1]], vec![1], 3), &plan, Rule::LocalFirst);
    assert_eq!((m.cross_gpu, m.cross_node), (1.5, 1.0));
}

/// A random case: up to 3 × 3 GPUs (one case in four a wide cluster past
/// 64 GPUs or 64 nodes, where token messages leave the one-word bitsets),
/// up to 9 experts, top-1..3, up to 2 layers, up to 40 tokens in batches of
/// up to 16; with `replicas`, extra copies anywhere.
fn random_case(seed: u64, replicas: bool) -> (Workload, Plan, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (nodes, gpn) = match rng.random_range(0..8) {
        0 => (2, 40),
        1 => (70, 1),
        _ => (rng.random_range(1..=3), rng.random_range(1..=3)),
    };
    let d = nodes * gpn;
    let e = rng.random_range(1..=9);
    let l = rng.random_range(1..=2);
    let k = rng.random_range(1..=3);
    let n = rng.random_range(1..=40);
    let layers = (0..l)
        .map(|li| {
            let mut gpus = vec![Vec::new(); d];
            for x in 0..e {
                gpus[rng.random_range(0..d)].push(x as u32);
            }
            if replicas {
                for _ in 0..rng.random_range(0..=2 * d) {
                    gpus[rng.random_range(0..d)].push(rng.random_range(0..e) as u32);
                }
            }
            LayerPlacement {
                layer: li as u32,
                gpus,
            }
        })
        .collect();
    let plan = Plan::new(Topology::new(nodes, gpn).unwrap(), e, layers, "random").unwrap();
    let routes = (0..l)
        .map(|_| Array2::from_shape_fn((n, k), |_| rng.random_range(0..e) as u32))
        .collect();
    let ranks = (0..n).map(|_| rng.random_range(0..d) as u32).collect();
    let t = TokenTrace::new(e, (0..l as u32).collect(), routes, ranks).unwrap();
    let bt = rng.random_range(1..=16);
    (Workload::from_tokens(t, bt).unwrap(), plan, bt)
}

/// Distinct destinations per (token, layer), counted from the routes with
/// `dest(layer, source, token index in its rank's batch, k, expert)` the
/// GPU serving the pair.
fn count(
    work: &Workload,
    plan: &Plan,
    batch_tokens: usize,
    dest: impl Fn(usize, usize, usize, usize, u32) -> usize,
) -> (f64, f64) {
    let t = work.tokens().unwrap();
    let gpn = plan.topology().gpus_per_node();
    let (mut gpu, mut node) = (0.0, 0.0);
    for l in 0..t.num_layers() {
        let routes = t.routes(l);
        let mut index = vec![0usize; plan.topology().num_gpus()];
        for (i, row) in routes.rows().into_iter().enumerate() {
            if i % batch_tokens == 0 {
                index.iter_mut().for_each(|x| *x = 0);
            }
            let s = t.source_rank()[i] as usize;
            let mut gpus: Vec<usize> = row
                .iter()
                .enumerate()
                .map(|(k, &e)| dest(l, s, index[s], k, e))
                .collect();
            index[s] += 1;
            gpus.sort_unstable();
            gpus.dedup();
            gpu += gpus.iter().filter(|&&g| g != s).count() as f64;
            let mut nodes: Vec<usize> = gpus.iter().map(|g| g / gpn).collect();
            nodes.dedup();
            node += nodes.iter().filter(|&&v| v != s / gpn).count() as f64;
        }
    }
    (gpu, node)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn messages_never_exceed_pairs(seed in any::<u64>()) {
        let (work, plan, _) = random_case(seed, true);
        let layers = work.trace().num_layers() as f64;
        let n = work.tokens().unwrap().num_tokens() as f64;
        for rule in Rule::ALL {
            let r = run(&work, &plan, rule);
            let t = &r.traffic;
            let m = t.messages.unwrap();
            let tol = 1e-9 * t.pairs.max(1.0);
            prop_assert_eq!(m.token_layers, n * layers);
            prop_assert!(m.cross_gpu >= -tol && m.cross_node >= -tol, "{} {:?}", rule, m);
            prop_assert!(m.cross_gpu <= t.pairs - t.local + tol, "{}: {:?} vs {:?}", rule, m, t);
            prop_assert!(m.cross_node <= t.cross_node + tol, "{}: {:?} vs {:?}", rule, m, t);
            prop_assert!(m.cross_node <= m.cross_gpu + tol, "{}: {:?}", rule, m);
            // a token reaches at most D − 1 other GPUs, N − 1 other nodes
            let topo = plan.topology();
            prop_assert!(m.cross_gpu <= m.token_layers * (topo.num_gpus() - 1) as f64 + tol);
            prop_assert!(m.cross_node <= m.token_layers * (topo.nodes() - 1) as f64 + tol);
            let summed = r.per_batch_traffic.iter().map(|b| b.messages.unwrap().cross_node).sum::<f64>();
            prop_assert!(close(summed, m.cross_node));
        }
    }

    #[test]
    fn one_copy_placements_match_a_count_from_the_routes(seed in any::<u64>()) {
        let (work, plan, bt) = random_case(seed, false);
        let host = |l: usize, e: u32| {
            plan.layers()[l].gpus.iter().position(|g| g.contains(&e)).unwrap()
        };
        let want = count(&work, &plan, bt, |l, _, _, _, e| host(l, e));
        for rule in Rule::ALL {
            let m = messages(&work, &plan, rule);
            // integer counts: exact
            prop_assert_eq!((m.cross_gpu, m.cross_node), want, "{}", rule);
        }
    }

    #[test]
    fn sglang_static_and_vllm_match_a_count_from_the_routes(seed in any::<u64>()) {
        let (work, plan, bt) = random_case(seed, true);
        let e_n = plan.num_experts();
        for v in [SglangVersion::Nearest, SglangVersion::SameGpu] {
            let map = sglang_dispatch_map(&plan, v).unwrap();
            let slot_gpu = |l: usize, slot: usize| {
                let mut left = slot;
                for (g, hosted) in plan.layers()[l].gpus.iter().enumerate() {
                    if left < hosted.len() {
                        return g;
                    }
                    left -= hosted.len();
                }
                unreachable!()
            };
            let want = count(&work, &plan, bt, |l, s, _, _, e| {
                slot_gpu(l, map[l][s * e_n + e as usize] as usize)
            });
            let m = messages(&work, &plan, Rule::SglangStatic(v));
            prop_assert_eq!((m.cross_gpu, m.cross_node), want);
        }
        // vLLM: the i-th token of rank s in its batch, pair k, goes to copy
        // (i · top_k + k) mod c of the expert's copies in slot order
        let top_k = work.tokens().unwrap().top_k();
        let vllm = |l: usize, i: usize, k: usize, e: u32| {
            let copies: Vec<usize> = plan.layers()[l]
                .gpus
                .iter()
                .enumerate()
                .flat_map(|(g, h)| h.iter().filter(|&&x| x == e).map(move |_| g))
                .collect();
            copies[(i * top_k + k) % copies.len()]
        };
        let want = count(&work, &plan, bt, |l, _, i, k, e| vllm(l, i, k, e));
        let m = messages(&work, &plan, Rule::Vllm);
        prop_assert_eq!((m.cross_gpu, m.cross_node), want);
        // and its pairs: local, inside a node, across nodes
        let gpn = plan.topology().gpus_per_node();
        let mut pairs = [0.0; 3];
        let t = work.tokens().unwrap();
        for l in 0..t.num_layers() {
            let mut index = vec![0usize; plan.topology().num_gpus()];
            for (i, row) in t.routes(l).rows().into_iter().enumerate() {
                if i % bt == 0 {
                    index.iter_mut().for_each(|x| *x = 0);
                }
                let s = t.source_rank()[i] as usize;
                for (k, &e) in row.iter().enumerate() {
                    let g = vllm(l, index[s], k, e);
                    pairs[if g == s { 0 } else if g / gpn == s / gpn { 1 } else { 2 }] += 1.0;
                }
                index[s] += 1;
            }
        }
        let r = run(&work, &plan, Rule::Vllm).traffic;
        prop_assert_eq!([r.local, r.intra_node, r.cross_node], pairs);
    }
}

/// The random cases really reach wide clusters (a quarter expected): the
/// property tests above check the paths past 64 GPUs or nodes only if so.
#[test]
fn wide_clusters_are_checked() {
    let wide = (0..200u64)
        .filter(|&seed| {
            let (work, plan, _) = random_case(seed, true);
            let topo = plan.topology();
            work.tokens().is_some() && (topo.num_gpus() > 64 || topo.nodes() > 64)
        })
        .count();
    assert!(wide >= 20, "only {wide} of 200 random cases are wide");
}
