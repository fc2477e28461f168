//! GRACE-MoE's and Libra's replica selection: the simulator's fractional
//! model realised in whole rows. Hand-worked cases, the largest-remainder
//! rule, and agreement with the core's simulator within that rounding on
//! generated routings. No device needed.

use moeplan::judge::Rule;
use moeplan::judge::balance_of;
use moeplan::judge::{
    CostModel, DEFAULT_TOLERANCE_PERCENT, Rebalancer, RouteShares, Strategy, simulate,
};
use moeplan::{LayerPlacement, LoadTrace, Plan, Topology};
use moeplan_cuda::bench::{PlanAlgo, make_plans};
use moeplan_cuda::dispatch::dispatch_cpu;
use moeplan_cuda::routing::{Routing, source_rank};
use moeplan_cuda::select::{
    self, LayerSlots, Selector, largest_remainder, select_cpu, workload_loads,
};

mod common;

type R = Result<(), Box<dyn std::error::Error>>;

const LIBRA: Rule = select::libra(DEFAULT_TOLERANCE_PERCENT);

/// One node of three GPUs; expert 0 on GPUs 0 and 1.
fn three_gpus() -> Result<(LayerSlots, Plan), moeplan_cuda::Error> {
    let gpus = vec![vec![0, 1], vec![2, 0], vec![3]];
    let slots = LayerSlots::new(&gpus, 4, 3)?;
    let plan = slots.to_plan()?;
    Ok((slots, plan))
}

/// `per_rank[r]` tokens (top-1) from each rank, in rank order.
fn top1(per_rank: &[Vec<u32>]) -> Result<Routing, moeplan_cuda::Error> {
    let ids: Vec<u32> = per_rank.iter().flatten().copied().collect();
    let n = ids.len();
    Routing::new(n, 1, ids, vec![1.0; n])
}

#[test]
fn grace_weighted_realises_its_weights_in_whole_rows() -> R {
    let (slots, _) = three_gpus()?;
    // predicted loads 8, 4, 2: expert 0's copies weigh 1/8 and 1/4, so a
    // third of each rank's rows go to GPU 0 (slot 0), two thirds to GPU 1
    // (slot 3)
    let loads = [6.0, 5.0, 1.0, 2.0];
    let sel = Selector::single_layer(Rule::GraceWeighted, &slots, &loads)?;
    // one row per rank: shares 1/3 and 2/3 round to the larger
    let r = top1(&[vec![0], vec![0], vec![0]])?;
    assert_eq!(select_cpu(&r, &slots, &sel)?, [3, 3, 3]);
    // two rows per rank: 2/3 and 4/3 → 1 and 1, in token order
    let r = top1(&[vec![0, 0], vec![0, 0], vec![0, 0]])?;
    assert_eq!(select_cpu(&r, &slots, &sel)?, [0, 3, 0, 3, 0, 3]);
    // three per rank: exactly 1 and 2; other experts have one copy
    let r = top1(&[vec![0, 1, 0, 0], vec![3, 0, 0, 0], vec![0, 0, 2, 0]])?;
    assert_eq!(
        select_cpu(&r, &slots, &sel)?,
        [0, 1, 3, 3, 4, 0, 3, 3, 0, 3, 2, 3]
    );
    Ok(())
}

#[test]
fn grace_topology_keeps_rows_on_their_own_gpu() -> R {
    let (slots, _) = three_gpus()?;
    let sel = Selector::single_layer(Rule::GraceTopology, &slots, &[6.0, 5.0, 1.0, 2.0])?;
    // ranks 0 and 1 hold expert 0: all their rows stay; rank 2 has no copy
    // on its GPU and its node is all three GPUs: weighted as above
    let r = top1(&[vec![0, 0, 0], vec![0, 0, 0], vec![0, 0, 0]])?;
    assert_eq!(select_cpu(&r, &slots, &sel)?, [0, 0, 0, 3, 3, 3, 0, 3, 3]);
    // on two nodes (GPUs 0 | 1, 2): rank 2's node holds the copy on GPU 1 only
    let two = LayerSlots::new(&[vec![0, 1], vec![2, 0], vec![3], vec![0]], 4, 2)?;
    let sel = Selector::single_layer(Rule::GraceTopology, &two, &[6.0, 5.0, 1.0, 2.0])?;
    let r = top1(&[vec![0, 0], vec![0, 0], vec![0, 0], vec![0, 0]])?;
    // GPU 2 (node 1) sends to the copy on its node, GPU 3 (slot 5)
    assert_eq!(select_cpu(&r, &two, &sel)?, [0, 0, 3, 3, 5, 5, 5, 5]);
    Ok(())
}

#[test]
fn libra_moves_remote_rows_to_the_idle_copy() -> R {
    let (slots, _) = three_gpus()?;
    let sel = Selector::single_layer(LIBRA, &slots, &[])?;
    // rank 0: expert 1, its own; rank 1: expert 3, on GPU 2; rank 2:
    // expert 0, remote, starting split evenly over its two copies (GPUs 0
    // and 1): loads 13.5, 4.5, 9. Algorithm 2 moves GPU 0's 4.5 to GPU 1,
    // up to the mean 9: all 9 rows end on GPU 1.
    let r = top1(&[vec![1; 9], vec![3; 9], vec![0; 9]])?;
    let phys = select_cpu(&r, &slots, &sel)?;
    let mut want = vec![1u32; 9];
    want.extend([4; 9]);
    want.extend([3; 9]);
    assert_eq!(phys, want);
    // ε = 100 %: 13.5 ≤ 2 × 9, nothing moves from the even start: the
    // rows stay split over slot 0 (GPU 0) and slot 3 (GPU 1)
    let lazy = Selector::single_layer(select::parse_rule("libra:100")?, &slots, &[])?;
    let phys = select_cpu(&r, &slots, &lazy)?;
    assert_eq!(&phys[18..], &[0, 0, 0, 0, 0, 3, 3, 3, 3]);
    Ok(())
}

#[test]
fn selectors_refuse_what_does_not_fit() -> R {
    let (slots, plan) = three_gpus()?;
    let r = top1(&[vec![0], vec![0], vec![0]])?;
    // GRACE's rules need loads for every layer, covering every expert
    assert!(Selector::for_plan(Rule::GraceWeighted, &plan, &[]).is_err());
    assert!(Selector::single_layer(Rule::GraceWeighted, &slots, &[1.0; 3]).is_err());
    // a selector made for another placement
    let other = LayerSlots::new(&[vec![0, 1], vec![2], vec![3, 0]], 4, 3)?;
    for rule in [Rule::GraceTopology, LIBRA] {
        let sel = Selector::single_layer(rule, &other, &[1.0; 4])?;
        assert!(select_cpu(&r, &slots, &sel).is_err(), "{rule}");
    }
    assert!(select::parse_rule("libra:1001").is_err());
    assert!(select::parse_rule("grace").is_err());
    Ok(())
}

#[test]
fn largest_remainder_sums_and_stays_within_one() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let m = 1 + (next() % 9) as usize;
        let n = next() % 1000;
        let w: Vec<f64> = (0..m).map(|_| (next() % 1000) as f64 + 1.0).collect();
        let sum: f64 = w.iter().sum();
        let shares: Vec<f64> = w.iter().map(|x| n as f64 * x / sum).collect();
        let rows = largest_remainder(&shares, n);
        assert_eq!(rows.iter().sum::<u64>(), n, "{shares:?}");
        for (q, x) in rows.iter().zip(&shares) {
            assert!(
                (*q as f64 - x).abs() < 1.0 + 1e-9,
                "{q} for {x} in {shares:?}"
            );
        }
    }
    // shares that do not add up still give n rows
    assert_eq!(largest_remainder(&[0.0, 0.0, 0.0], 7), [3, 2, 2]);
    assert_eq!(largest_remainder(&[f64::NAN, 9.0], 4), [0, 4]);
    assert!(largest_remainder(&[], 0).is_empty());
}

/// Where one (source, expert)'s pairs go: (GPU, pairs).
type Split = Vec<(usize, f64)>;

/// The simulator's model of one layer's batch: per (source, expert), the
/// (GPU, pairs) it sends, from the core's public tables.
fn model_split(
    rule: Rule,
    layer: &LayerPlacement,
    topology: Topology,
    num_experts: usize,
    routing: &Routing,
) -> Result<Vec<Split>, Box<dyn std::error::Error>> {
    let d = topology.num_gpus();
    let mut n = vec![0.0f64; d * num_experts];
    for (i, &e) in routing.ids.iter().enumerate() {
        n[source_rank(i / routing.top_k, routing.tokens, d) * num_experts + e as usize] += 1.0;
    }
    let mut split = vec![Vec::new(); d * num_experts];
    match rule {
        Rule::Libra {
            tolerance_percent, ..
        } => {
            let mut rb = Rebalancer::new(layer, num_experts)?;
            rb.solve(&n, f64::from(tolerance_percent) / 100.0)?;
            for (gi, out) in split.iter_mut().enumerate() {
                rb.route_one(gi / num_experts, gi % num_experts, n[gi], |g, x| {
                    out.push((g, x))
                });
            }
        }
        _ => {
            // one batch: the workload's loads are this routing's counts
            let loads: Vec<f64> = routing
                .expert_counts(num_experts)
                .iter()
                .map(|&c| c as f64)
                .collect();
            let t = RouteShares::new(rule, layer, topology, &loads)?;
            for (gi, out) in split.iter_mut().enumerate() {
                let (s, e) = (gi / num_experts, gi % num_experts);
                out.extend(t.shares(s, e).map(|(g, f)| (g as usize, n[gi] * f)));
            }
        }
    }
    Ok(split)
}

/// Runs `tokens` generated tokens per layer of `plan` through the crate's
/// selection and through the simulator (one batch of token routes) and
/// checks: the simulator's balancedness and pair traffic are those of the
/// model split (to 1e-12); every (source, expert, GPU) of the crate's rows
/// is within one row per listed copy of the model; and so every GPU's rows
/// and the traffic are within the summed rounding.
fn agree_within_rounding(trace: &LoadTrace, plan: &Plan, tokens: usize, what: &str) -> R {
    let topo = plan.topology();
    let (d, gpn, e_n) = (topo.num_gpus(), topo.gpus_per_node(), plan.num_experts());
    let top_k = trace.top_k().ok_or("trace without top-k")?;
    let layers: Vec<usize> = (0..trace.num_layers()).collect();
    let (routings, work) = common::one_batch(trace, &layers, tokens, d, 5)?;
    // what GRACE's rules weigh by: the workload's (this batch's) loads
    let loads = workload_loads(work.trace());
    for rule in [
        Rule::GraceWeighted,
        Rule::GraceTopology,
        LIBRA,
        select::libra(0),
    ] {
        let at = format!("{what}, {rule}");
        let rep = simulate(
            &work,
            &Strategy::fixed(plan.clone(), rule),
            &CostModel::default(),
        )?;
        let sels = Selector::for_plan(rule, plan, &loads)?;
        // model traffic, crate traffic, rounding bound: [local, intra, cross]
        let (mut model_t, mut crate_t, mut slack) = ([0.0f64; 3], [0u64; 3], 0usize);
        let tier = |s: usize, g: usize| {
            if s == g {
                0
            } else if s / gpn == g / gpn {
                1
            } else {
                2
            }
        };
        for (l, r) in routings.iter().enumerate() {
            let lp = &plan.layers()[l];
            let slots = LayerSlots::from_plan(plan, l)?;
            let phys = select_cpu(r, &slots, &sels[l])?;
            let split = model_split(rule, lp, topo, e_n, r)?;
            let mut model = vec![0.0f64; d];
            for (gi, entries) in split.iter().enumerate() {
                for &(g, x) in entries {
                    model[g] += x;
                    model_t[tier(gi / e_n, g)] += x;
                }
                slack += entries.len() / 2;
            }
            let (bal, ir) = balance_of(&model);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
            assert!(
                close(rep.per_layer[l], bal),
                "{at}, layer {l}: {} vs {bal}",
                rep.per_layer[l]
            );
            assert!(
                close(rep.per_layer_imbalance_ratio[l], ir),
                "{at}, layer {l}"
            );
            // the crate's rows per (source, expert, GPU)
            let mut got = vec![vec![0u64; d]; d * e_n];
            for (i, &s) in phys.iter().enumerate() {
                let src = source_rank(i / top_k, tokens, d);
                let g = slots.slot_gpu[s as usize] as usize;
                got[src * e_n + r.ids[i] as usize][g] += 1;
                crate_t[tier(src, g)] += 1;
            }
            for (gi, entries) in split.iter().enumerate() {
                for (g, &rows) in got[gi].iter().enumerate() {
                    let listed = entries.iter().filter(|&&(h, _)| h == g).count();
                    let want: f64 = entries.iter().filter(|&&(h, _)| h == g).map(|p| p.1).sum();
                    assert!(
                        (rows as f64 - want).abs() < listed.max(1) as f64 - 1e-9
                            || rows as f64 == want,
                        "{at}, layer {l}, source {} expert {} GPU {g}: {rows} rows for {want}; model {entries:?}, got {:?}",
                        gi / e_n,
                        gi % e_n,
                        got[gi]
                    );
                }
            }
            // a GPU is off by less than one row per copy it has in a group
            // split two ways or more
            let mut gpu_slack = vec![0usize; d];
            for entries in split.iter().filter(|e| e.len() > 1) {
                for &(g, _) in entries {
                    gpu_slack[g] += 1;
                }
            }
            let rows = dispatch_cpu(&phys, slots.num_slots())?.rows_per_gpu(&slots);
            for g in 0..d {
                let off = (rows[g] as f64 - model[g]).abs();
                assert!(
                    off < gpu_slack[g] as f64 + 1e-6,
                    "{at}, layer {l}, GPU {g}: {} rows for {}, slack {}",
                    rows[g],
                    model[g],
                    gpu_slack[g]
                );
            }
        }
        let t = &rep.traffic;
        let sim_t = [t.local, t.intra_node, t.cross_node];
        for i in 0..3 {
            assert!(
                (sim_t[i] - model_t[i]).abs() <= 1e-9 * model_t[i].max(1.0),
                "{at}: simulator traffic {sim_t:?}, model {model_t:?}"
            );
            assert!(
                (crate_t[i] as f64 - model_t[i]).abs() <= slack as f64 + 1e-6,
                "{at}: crate traffic {crate_t:?}, model {model_t:?}, slack {slack}"
            );
        }
        assert_eq!(
            crate_t.iter().sum::<u64>() as usize,
            tokens * top_k * layers.len()
        );
    }
    Ok(())
}

#[test]
fn grace_and_libra_selection_is_the_simulators_model_in_whole_rows() -> R {
    let olmoe = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("olmoe")?,
        2,
    ))?;
    let algos: Vec<PlanAlgo> = ["contiguous", "eplb:16", "craft:2"]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    for (nodes, gpn) in [(1, 8), (2, 4)] {
        let plans = make_plans(&olmoe, Topology::new(nodes, gpn)?, &algos, 1)?;
        for (label, plan) in &plans {
            for tokens in [1000, 37] {
                let what = format!("olmoe {nodes}×{gpn} {label} {tokens} tokens");
                agree_within_rounding(&olmoe, plan, tokens, &what)?;
            }
        }
    }
    Ok(())
}
