//! Relabelling a new plan onto the current one's GPUs (`judge::migration`):
//! a permutation that keeps nodes whole (same balance, same slots per GPU,
//! same experts per node), never more copies than the plan as numbered,
//! optimal against brute force on small cases; and on traces that do not
//! shift, a re-plan relabelled moves little.

use crate::data::plan::{LayerPlacement, Plan};
use crate::judge::migration::{MoveCost, migration, relabel};
use crate::planners::{EplbConfig, eplb};
use crate::synth::generator::{GenConfig, generate};
use crate::{LoadTrace, Topology, data::model, evaluate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const COST: MoveCost = MoveCost { intra: 1, inter: 5 };

/// A valid random plan: every expert once on a random GPU, then `extra`
/// copies on random GPUs.
fn random_plan(rng: &mut ChaCha8Rng, topo: Topology, experts: usize, layers: usize) -> Plan {
    let d = topo.num_gpus();
    let ls = (0..layers)
        .map(|l| {
            let mut gpus = vec![Vec::new(); d];
            for e in 0..experts as u32 {
                gpus[rng.random_range(0..d)].push(e);
            }
            for _ in 0..rng.random_range(0..=d) {
                let e = rng.random_range(0..experts as u32);
                gpus[rng.random_range(0..d)].push(e);
            }
            LayerPlacement {
                layer: l as u32,
                gpus,
            }
        })
        .collect();
    Plan::new(topo, experts, ls, "random").unwrap()
}

/// The weighted cost of moving from `a` to `b`.
fn cost(a: &Plan, b: &Plan) -> i64 {
    let m = migration(a, b).unwrap();
    m.copies_intra_node as i64 * COST.intra + m.copies_inter_node as i64 * COST.inter
}

/// Each node's GPU contents, as sorted multisets, per layer: what a
/// relabelling keeps.
fn node_contents(p: &Plan) -> Vec<Vec<Vec<Vec<u32>>>> {
    let gpn = p.topology().gpus_per_node();
    p.layers()
        .iter()
        .map(|l| {
            let mut nodes: Vec<Vec<Vec<u32>>> = l
                .gpus
                .chunks(gpn)
                .map(|node| {
                    let mut gs: Vec<Vec<u32>> = node
                        .iter()
                        .map(|g| {
                            let mut g = g.clone();
                            g.sort_unstable();
                            g
                        })
                        .collect();
                    gs.sort();
                    gs
                })
                .collect();
            nodes.sort();
            nodes
        })
        .collect()
}

/// All permutations of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// The cheapest relabelling of one layer by brute force: every node
/// permutation and every GPU permutation inside each node, slot counts kept.
fn brute_force_layer(cur: &Plan, next: &Plan, l: usize) -> i64 {
    let t = cur.topology();
    let (n, g) = (t.nodes(), t.gpus_per_node());
    let new = &next.layers()[l].gpus;
    let one = |gpus: Vec<Vec<u32>>| {
        let a = Plan::new(t, cur.num_experts(), vec![cur.layers()[l].clone()], "a").unwrap();
        let layer = LayerPlacement {
            layer: cur.layers()[l].layer,
            gpus,
        };
        cost(
            &a,
            &Plan::new(t, cur.num_experts(), vec![layer], "b").unwrap(),
        )
    };
    let gpu_perms = permutations(g);
    let mut best = i64::MAX;
    for nodes in permutations(n) {
        // every combination of one GPU permutation per node (odometer)
        let mut pick = vec![0usize; n];
        loop {
            let mut gpus = vec![Vec::new(); t.num_gpus()];
            let mut fits = true;
            for (a, &b) in nodes.iter().enumerate() {
                for (i, &j) in gpu_perms[pick[a]].iter().enumerate() {
                    let (h, to) = (a * g + i, b * g + j);
                    fits &= new[h].len() == new[to].len();
                    gpus[to] = new[h].clone();
                }
            }
            if fits {
                best = best.min(one(gpus));
            }
            let mut k = 0;
            loop {
                if k == n {
                    break;
                }
                pick[k] += 1;
                if pick[k] < gpu_perms.len() {
                    break;
                }
                pick[k] = 0;
                k += 1;
            }
            if k == n {
                break;
            }
        }
    }
    best
}

/// A relabelling is a permutation of the new plan that keeps nodes
/// whole: same node contents, same slots per GPU, same balance; never
/// costlier than the plan as numbered; as cheap as brute force. 300 random
/// cases; the brute force runs on those of at most 6 GPUs.
#[test]
fn relabelling_is_an_optimal_node_preserving_permutation() {
    let (mut cases, mut brute) = (0, 0);
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (nodes, gpn) = (rng.random_range(1..=3), rng.random_range(1..=3));
        let experts = rng.random_range(2..=7);
        let topo = Topology::new(nodes, gpn).unwrap();
        let cur = random_plan(&mut rng, topo, experts, 2);
        let next = random_plan(&mut rng, topo, experts, 2);
        let r = relabel(&cur, &next, COST).unwrap();
        assert_eq!(node_contents(&r), node_contents(&next), "seed {seed}");
        for (a, b) in r.layers().iter().zip(next.layers()) {
            let slots = |l: &LayerPlacement| l.gpus.iter().map(Vec::len).collect::<Vec<_>>();
            assert_eq!(slots(a), slots(b), "seed {seed}");
        }
        let counts = ndarray::Array3::from_shape_fn((3, 2, experts), |(b, l, e)| {
            1.0 + ((b * 7 + l * 3 + e * 5) % 11) as f64
        });
        let trace = LoadTrace::new(counts, vec![0, 1]).unwrap();
        let (x, y) = (
            evaluate(&trace, &r).unwrap(),
            evaluate(&trace, &next).unwrap(),
        );
        assert!(
            (x.balancedness - y.balancedness).abs() < 1e-12,
            "seed {seed}"
        );
        assert!(cost(&cur, &r) <= cost(&cur, &next), "seed {seed}");
        if nodes * gpn <= 6 {
            let one = |p: &Plan, l: usize| {
                Plan::new(topo, experts, vec![p.layers()[l].clone()], "x").unwrap()
            };
            let ours: i64 = (0..2).map(|l| cost(&one(&cur, l), &one(&r, l))).sum();
            let best: i64 = (0..2).map(|l| brute_force_layer(&cur, &next, l)).sum();
            assert_eq!(ours, best, "seed {seed}: {nodes} × {gpn}");
            brute += 1;
        }
        cases += 1;
    }
    eprintln!("{cases} cases, {brute} against brute force");
    assert_eq!(cases, 300);
    assert!(
        brute >= 150,
        "only {brute} cases were small enough for brute force"
    );
}

/// Re-planning on a trace that does not shift: EPLB planned on the first
/// and on the second half of a generated trace (the same distribution);
/// relabelled, fewer copies and fewer across nodes — and a plan that is
/// only renumbered moves nothing at all.
#[test]
fn relabelling_undoes_renumbering_and_trims_a_replan() {
    let mut c = GenConfig::new(model::preset("deepseek-v3").unwrap(), 16);
    c.seed = 3;
    let trace = generate(&c).unwrap();
    let topo = Topology::new(4, 8).unwrap();
    let cfg = EplbConfig {
        redundant_experts: 32,
        groups: 8,
    };
    let first = eplb(&trace.slice_batches(0..8).unwrap(), topo, cfg).unwrap();
    let second = eplb(&trace.slice_batches(8..16).unwrap(), topo, cfg).unwrap();
    let cost = MoveCost::for_hardware(crate::data::hardware::preset("h100-ib-ndr").unwrap());
    let relabelled = relabel(&first, &second, cost).unwrap();
    let (naive, ours) = (
        migration(&first, &second).unwrap(),
        migration(&first, &relabelled).unwrap(),
    );
    let slots: usize = second.layers().iter().map(|l| l.total_slots()).sum();
    eprintln!(
        "EPLB re-planned on the next 8 batches: {} of {slots} slots receive a copy as numbered ({} across nodes), {} relabelled ({} across nodes)",
        naive.copies(),
        naive.copies_inter_node,
        ours.copies(),
        ours.copies_inter_node
    );
    // Relabelling alone keeps most of the churn: EPLB's packing pairs
    // experts anew when loads move a little (docs/replan.md).
    assert!(ours.copies() <= naive.copies());
    assert!(ours.copies_inter_node < naive.copies_inter_node);
    // The same plan with its nodes rotated and each node's GPUs reversed
    // (a planner's numbering, issue #25 of deepseek-ai/EPLB): relabelled,
    // nothing moves.
    let gpn = topo.gpus_per_node();
    let shuffled = Plan::new(
        topo,
        first.num_experts(),
        first
            .layers()
            .iter()
            .map(|l| LayerPlacement {
                layer: l.layer,
                gpus: (0..topo.num_gpus())
                    .map(|g| {
                        let (n, i) = (g / gpn, g % gpn);
                        l.gpus[((n + 1) % topo.nodes()) * gpn + (gpn - 1 - i)].clone()
                    })
                    .collect(),
            })
            .collect(),
        "eplb",
    )
    .unwrap();
    assert!(migration(&first, &shuffled).unwrap().copies_inter_node > 1000);
    let back = relabel(&first, &shuffled, cost).unwrap();
    assert_eq!(migration(&first, &back).unwrap().copies(), 0);
    assert_eq!(
        evaluate(&trace, &relabelled).unwrap().balancedness,
        evaluate(&trace, &second).unwrap().balancedness
    );
}

/// Plans for another cluster, model or layer set are refused in one line.
#[test]
fn plans_that_do_not_match_are_refused() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let t = Topology::new(2, 2).unwrap();
    let a = random_plan(&mut rng, t, 4, 2);
    for (b, needle) in [
        (
            random_plan(&mut rng, Topology::new(1, 4).unwrap(), 4, 2),
            "node",
        ),
        (random_plan(&mut rng, t, 5, 2), "experts"),
        (random_plan(&mut rng, t, 4, 3), "layers"),
    ] {
        let e = relabel(&a, &b, COST).unwrap_err().to_string();
        assert!(e.contains(needle) && !e.contains('\n'), "{e}");
    }
}
