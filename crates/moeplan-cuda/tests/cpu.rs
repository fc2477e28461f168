//! The CPU references — the specification the GPU kernels are checked
//! against — on hand-worked cases and generated ones. No device needed.

use moeplan::judge::{CostModel, Strategy, sglang_dispatch_map, simulate};
use moeplan::judge::{Rule, SglangVersion};
use moeplan::{LayerPlacement, LoadTrace, Plan, Topology};
use moeplan_cuda::bench::{PlanAlgo, balancedness, even_split_loads, make_plans, median};
use moeplan_cuda::check::{case_load, case_placement, cases};
use moeplan_cuda::combine::combine_cpu;
use moeplan_cuda::dispatch::{dispatch_cpu, gather_cpu};
use moeplan_cuda::expert::{
    ExpertShape, WeightPool, bf16_to_f32, experts_cpu, f32_to_bf16, fill_uniform, seeds, silu,
};
use moeplan_cuda::routing::{self, Routing, rank_first_token, source_rank};
use moeplan_cuda::select::{self, LayerSlots, Selector, select_cpu};

mod common;

type R = Result<(), Box<dyn std::error::Error>>;

const RULES: [Rule; 3] = [
    Rule::Vllm,
    Rule::SglangStatic(SglangVersion::Nearest),
    Rule::SglangStatic(SglangVersion::SameGpu),
];

/// A layer with replicas (and a same-GPU duplicate) and a generated routing.
fn sample(rule: Rule) -> Result<(LayerSlots, Routing, Vec<u32>), moeplan_cuda::Error> {
    let slots = LayerSlots::new(&case_placement(32, 8, 12, false), 32, 4)?;
    let r = routing::generate(&case_load(32), 777, 6, 9)?;
    let phys = select_cpu(
        &r,
        &slots,
        &Selector::single_layer(rule, &slots, &case_load(32))?,
    )?;
    Ok((slots, r, phys))
}

#[test]
fn selection_picks_a_copy_of_the_routed_expert() -> R {
    for rule in select::gpu_rules() {
        let (slots, r, phys) = sample(rule)?;
        for (i, &s) in phys.iter().enumerate() {
            assert_eq!(slots.slot_expert[s as usize], r.ids[i], "{rule}, row {i}");
        }
    }
    Ok(())
}

#[test]
fn dispatch_conserves_tokens() -> R {
    for rule in select::gpu_rules() {
        let (slots, r, phys) = sample(rule)?;
        let d = dispatch_cpu(&phys, slots.num_slots())?;
        assert_eq!(d.counts.iter().sum::<u32>() as usize, r.rows());
        assert_eq!(*d.offsets.last().ok_or("no offsets")? as usize, r.rows());
        assert_eq!(
            d.rows_per_gpu(&slots).iter().sum::<u32>() as usize,
            r.rows()
        );
        // every expert's rows, summed over its copies, are its routed count
        let routed = r.expert_counts(slots.num_experts);
        for (e, &want) in routed.iter().enumerate() {
            let got: u32 = slots.copies(e).iter().map(|&s| d.counts[s as usize]).sum();
            assert_eq!(got as u64, want, "expert {e}");
        }
    }
    Ok(())
}

#[test]
fn permutation_is_a_stable_bijection() -> R {
    let (slots, _, phys) = sample(Rule::Vllm)?;
    let d = dispatch_cpu(&phys, slots.num_slots())?;
    let n = phys.len();
    let mut seen = vec![false; n];
    for &i in &d.perm {
        assert!(!seen[i as usize], "row {i} placed twice");
        seen[i as usize] = true;
    }
    assert!(seen.iter().all(|&x| x));
    for (row, &i) in d.perm.iter().enumerate() {
        assert_eq!(d.dest[i as usize] as usize, row);
    }
    // grouped by (gpu, slot), tokens ascending inside a slot
    for w in d.perm.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        assert!((phys[a], a) < (phys[b], b));
    }
    let gpu_of = |row: usize| slots.slot_gpu[phys[d.perm[row] as usize] as usize];
    for g in 0..slots.num_gpus() {
        for row in d.gpu_rows(&slots, g) {
            assert_eq!(gpu_of(row) as usize, g);
        }
    }
    Ok(())
}

#[test]
fn combine_inverts_dispatch_on_an_identity_expert() -> R {
    let (slots, r, phys) = sample(Rule::SglangStatic(SglangVersion::Nearest))?;
    let h = 24;
    let x = fill_uniform(0, r.tokens * h, seeds::X, 1.0);
    let d = dispatch_cpu(&phys, slots.num_slots())?;
    let xp = gather_cpu(&x, h, r.top_k, &d.perm);
    // dyadic gate weights summing to exactly one: the result is exact
    let mut w = vec![0f32; r.rows()];
    for t in 0..r.tokens {
        for k in 0..r.top_k {
            w[t * r.top_k + k] = if k + 1 < r.top_k {
                0.5f32.powi(k as i32 + 1)
            } else {
                0.5f32.powi(k as i32)
            };
        }
    }
    let back = combine_cpu(&xp, h, &d.dest, &w, r.top_k);
    let want: Vec<f32> = x.iter().map(|&v| bf16_to_f32(v)).collect();
    assert_eq!(back, want);
    // with the generated weights (summing to one up to rounding)
    let back = combine_cpu(&xp, h, &d.dest, &r.weights, r.top_k);
    for (a, b) in back.iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
    Ok(())
}

#[test]
fn vllm_uses_the_position_in_the_source_rank() -> R {
    // GPU 0 hosts experts 0 and 1, GPU 1 two copies of 0: copies(0) = [0, 2, 3].
    let slots = LayerSlots::new(&[vec![0, 1], vec![0, 0]], 2, 2)?;
    assert_eq!(slots.copies(0), &[0, 2, 3]);
    // 3 tokens on 2 ranks: rank 0 has tokens 0, 1; rank 1 token 2.
    let r = Routing::new(3, 1, vec![0, 0, 0], vec![1.0; 3])?;
    // token 2 is position 0 of rank 1 → copy 0, not global position 2 → copy 2
    assert_eq!(select_cpu(&r, &slots, &Selector::Vllm)?, [0, 2, 0]);
    // top-2: p = local_token · 2 + k
    let r = Routing::new(4, 2, vec![0, 1, 1, 0, 0, 1, 1, 0], vec![0.5; 8])?;
    // rank 0: t0 p0 e0 → 0; t0 p1 e1 → 1; t1 p2 e1 → 1; t1 p3 e0 → copy 0 (3 mod 3) → 0
    // rank 1: t2 p0 e0 → 0; p1 e1 → 1; t3 p2 e1 → 1; p3 e0 → 0
    assert_eq!(
        select_cpu(&r, &slots, &Selector::Vllm)?,
        [0, 1, 1, 0, 0, 1, 1, 0]
    );
    let r = Routing::new(2, 3, vec![0, 1, 0, 0, 1, 0], vec![0.3; 6])?;
    // one token per rank; rank 0: p0 e0 → 0, p2 e0 → copy 2 → 3; rank 1 the same
    assert_eq!(select_cpu(&r, &slots, &Selector::Vllm)?, [0, 1, 3, 0, 1, 3]);
    Ok(())
}

/// The SGLang table of a single layer (`D × E`, row-major).
fn table(rule: Rule, slots: &LayerSlots) -> Result<Vec<u32>, moeplan_cuda::Error> {
    match Selector::single_layer(rule, slots, &[])? {
        Selector::Table(t) => Ok(t),
        _ => Err(moeplan_cuda::Error::Argument("not a table rule".into())),
    }
}

#[test]
fn sglang_static_prefers_own_gpu_then_node_then_spreads() -> R {
    // 2 nodes × 2 GPUs. Expert 0: slots 0 (GPU 0) and 3, 4 (both GPU 2);
    // expert 1: slot 1 (GPU 0) and slot 2 (GPU 1).
    let slots = LayerSlots::new(&[vec![0, 1], vec![1], vec![0, 0], vec![]], 2, 2)?;
    let t = table(Rule::SglangStatic(SglangVersion::Nearest), &slots)?;
    let e = |r: usize, x: usize| t[r * 2 + x];
    assert_eq!(e(0, 0), 0); // own GPU
    assert_eq!(e(1, 0), 0); // same node (GPU 0)
    assert_eq!(e(2, 0), 3); // own GPU, first of its two copies
    assert_eq!(e(3, 0), 3); // same node, first such
    assert_eq!(e(0, 1), 1);
    assert_eq!(e(1, 1), 2);
    // node 1 has no copy of expert 1: ranks 2 and 3 spread over both copies
    let mut spread = [e(2, 1), e(3, 1)];
    spread.sort_unstable();
    assert_eq!(spread, [1, 2]);
    // The older rule knows no node: ranks 1 and 3 draw two distinct copies
    // of expert 0 (a sample of 2 of its 3).
    let t = table(Rule::SglangStatic(SglangVersion::SameGpu), &slots)?;
    let e = |r: usize, x: usize| t[r * 2 + x];
    assert_eq!([e(0, 0), e(2, 0), e(0, 1), e(1, 1)], [0, 3, 1, 2]);
    assert_ne!(e(1, 0), e(3, 0));
    assert!([e(1, 0), e(3, 0)].iter().all(|c| [0, 3, 4].contains(c)));
    Ok(())
}

#[test]
fn sglang_static_spreads_evenly() -> R {
    // 8 nodes × 1 GPU. Expert 0 on GPUs 0 and 1 only: the 6 other ranks
    // spread over its 2 copies, 3 each. Expert 1 on GPUs 0..=3: the 4 other
    // ranks get one copy each.
    let mut gpus: Vec<Vec<u32>> = vec![vec![]; 8];
    gpus[0] = vec![0, 1];
    gpus[1] = vec![0, 1];
    gpus[2] = vec![1];
    gpus[3] = vec![1];
    let slots = LayerSlots::new(&gpus, 2, 1)?;
    for rule in [
        Rule::SglangStatic(SglangVersion::Nearest),
        Rule::SglangStatic(SglangVersion::SameGpu),
    ] {
        let t = table(rule, &slots)?;
        let mut per_copy = std::collections::BTreeMap::new();
        for r in 2..8 {
            *per_copy.entry(t[r * 2]).or_insert(0) += 1;
        }
        assert_eq!(per_copy.values().copied().collect::<Vec<_>>(), [3, 3]);
        let mut per_copy = std::collections::BTreeMap::new();
        for r in 4..8 {
            *per_copy.entry(t[r * 2 + 1]).or_insert(0) += 1;
        }
        assert_eq!(per_copy.values().copied().collect::<Vec<_>>(), [1, 1, 1, 1]);
    }
    // 5 ranks over 2 copies: 2 or 3 each
    let mut gpus = vec![vec![]; 7];
    gpus[0] = vec![0];
    gpus[1] = vec![0];
    let slots = LayerSlots::new(&gpus, 1, 1)?;
    let t = table(Rule::SglangStatic(SglangVersion::Nearest), &slots)?;
    let on0 = (2..7).filter(|&r| t[r] == 0).count();
    assert!(on0 == 2 || on0 == 3, "{on0}");
    Ok(())
}

#[test]
fn sglang_tables_are_the_cores_map() -> R {
    let trace = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("deepseek-v2-lite")?,
        2,
    ))?;
    let plans = make_plans(
        &trace,
        Topology::new(2, 4)?,
        &["eplb:8".parse()?, "craft:2".parse()?],
        1,
    )?;
    for (label, plan) in &plans {
        for (rule, version) in [
            (
                Rule::SglangStatic(SglangVersion::Nearest),
                moeplan::judge::SglangVersion::Nearest,
            ),
            (
                Rule::SglangStatic(SglangVersion::SameGpu),
                moeplan::judge::SglangVersion::SameGpu,
            ),
        ] {
            let want = sglang_dispatch_map(plan, version)?;
            let got = Selector::for_plan(rule, plan, &[])?;
            assert_eq!(got.len(), want.len());
            for (l, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g,
                    &Selector::Table(w.clone()),
                    "{label} {rule} layer index {l}"
                );
            }
            // one layer alone: the same table as in the whole plan
            let last = plan.layers().len() - 1;
            assert_eq!(Selector::from_plan(rule, plan, last, &[])?, got[last]);
        }
        assert!(Selector::from_plan(Rule::Vllm, plan, 99, &[]).is_err());
    }
    Ok(())
}

/// Runs `tokens` generated tokens per layer (bench's routing) of `layers`
/// (indices into `trace`) through the crate's CPU dispatch and through the
/// core's simulator — the same tokens as a one-batch `TokenTrace`, token
/// `t` from rank `⌊t·D/n⌋` — and asserts that both agree exactly: each
/// layer's balancedness and imbalance ratio (the per-GPU row counts'
/// mean / max and max / mean), the batch's, and the pair counts: total,
/// local, intra-node, cross-node, and the busiest GPU's ingress and egress
/// summed over layers. The simulator reports no per-GPU loads, so they are
/// compared through these.
fn agree_with_simulator(
    trace: &LoadTrace,
    layers: &[usize],
    plan: &Plan,
    tokens: usize,
    what: &str,
) -> R {
    let topo = plan.topology();
    let (d, gpn) = (topo.num_gpus(), topo.gpus_per_node());
    let top_k = trace.top_k().ok_or("trace without top-k")?;
    let (routings, work) = common::one_batch(trace, layers, tokens, d, 11)?;
    assert_eq!(work.trace().num_batches(), 1);
    for rule in RULES {
        let at = format!("{what}, {rule}");
        let rep = simulate(
            &work,
            &Strategy::fixed(plan.clone(), rule),
            &CostModel::default(),
        )?;
        assert_eq!(rep.sources, "token routes", "{at}");
        let selectors = Selector::for_plan(rule, plan, &[])?;
        let (mut local, mut intra, mut cross) = (0u64, 0u64, 0u64);
        let (mut max_in, mut max_out) = (0u64, 0u64);
        let mut batch_bal = 0.0;
        for (l, r) in routings.iter().enumerate() {
            let slots = LayerSlots::from_plan(plan, l)?;
            let phys = select_cpu(r, &slots, &selectors[l])?;
            let index = dispatch_cpu(&phys, slots.num_slots())?;
            let rows: Vec<f64> = index
                .rows_per_gpu(&slots)
                .iter()
                .map(|&x| x as f64)
                .collect();
            let (bal, ir) = moeplan::judge::balance_of(&rows);
            assert_eq!(rep.per_layer[l], bal, "{at}, layer index {l}: {rows:?}");
            assert_eq!(
                rep.per_layer_imbalance_ratio[l], ir,
                "{at}, layer index {l}"
            );
            batch_bal += bal;
            let (mut ingress, mut egress) = (vec![0u64; d], vec![0u64; d]);
            for (i, &s) in phys.iter().enumerate() {
                let src = source_rank(i / top_k, tokens, d);
                let g = slots.slot_gpu[s as usize] as usize;
                if g == src {
                    local += 1;
                    continue;
                }
                ingress[g] += 1;
                egress[src] += 1;
                if g / gpn == src / gpn {
                    intra += 1;
                } else {
                    cross += 1;
                }
            }
            max_in += ingress.iter().max().copied().unwrap_or(0);
            max_out += egress.iter().max().copied().unwrap_or(0);
        }
        assert_eq!(rep.per_batch[0], batch_bal / layers.len() as f64, "{at}");
        let t = &rep.traffic;
        assert_eq!(t.pairs, (tokens * top_k * layers.len()) as f64, "{at}");
        assert_eq!(
            [t.local, t.intra_node, t.cross_node],
            [local as f64, intra as f64, cross as f64],
            "{at}"
        );
        assert_eq!(
            [t.max_ingress, t.max_egress],
            [max_in as f64, max_out as f64],
            "{at}"
        );
        if topo.nodes() == 1 {
            assert_eq!(cross, 0, "{at}");
        }
    }
    Ok(())
}

#[test]
fn cpu_dispatch_is_the_simulators_model() -> R {
    let olmoe = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("olmoe")?,
        4,
    ))?;
    let algos: Vec<PlanAlgo> = ["contiguous", "eplb:8", "eplb:16", "craft:2"]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let all: Vec<usize> = (0..olmoe.num_layers()).collect();
    for (nodes, gpn) in [(1, 8), (2, 4)] {
        let plans = make_plans(&olmoe, Topology::new(nodes, gpn)?, &algos, 1)?;
        assert!(plans[1].1.summary().replicas > 0 && plans[3].1.summary().replicas > 0);
        for (label, plan) in &plans {
            for tokens in [1000, 333, 5] {
                let what = format!("olmoe {nodes}×{gpn} {label} {tokens} tokens");
                agree_with_simulator(&olmoe, &all, plan, tokens, &what)?;
            }
        }
    }
    // A model with a dense first layer (SGLang's map walks it too), top-6.
    let lite = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("deepseek-v2-lite")?,
        2,
    ))?;
    assert_eq!(lite.layer_ids()[0], 1);
    let all: Vec<usize> = (0..lite.num_layers()).collect();
    let plans = make_plans(&lite, Topology::new(2, 4)?, &["eplb:16".parse()?], 1)?;
    let (label, plan) = &plans[0];
    agree_with_simulator(
        &lite,
        &all,
        plan,
        777,
        &format!("deepseek-v2-lite 2×4 {label}"),
    )?;
    // Three of its layers as a plan: the layers between are walked as dense.
    let pick = [2usize, 8, 19];
    let part = Plan::new(
        plan.topology(),
        plan.num_experts(),
        pick.iter()
            .map(|&l| plan.layers()[l].clone())
            .collect::<Vec<LayerPlacement>>(),
        "eplb-part",
    )?;
    agree_with_simulator(
        &lite,
        &pick,
        &part,
        512,
        "deepseek-v2-lite 2×4 three layers",
    )?;
    Ok(())
}

#[test]
fn source_ranks_are_consecutive_blocks() {
    for n in [1usize, 2, 3, 7, 64, 1000, 4099] {
        for ranks in [1usize, 2, 3, 8, 64] {
            for r in 0..ranks {
                for t in rank_first_token(r, n, ranks)..rank_first_token(r + 1, n, ranks) {
                    assert_eq!(source_rank(t, n, ranks), r, "n {n} ranks {ranks} t {t}");
                }
            }
            assert_eq!(rank_first_token(ranks, n, ranks), n);
        }
    }
}

#[test]
fn routing_is_distinct_normalised_and_follows_the_load() -> R {
    let load = [100.0, 0.0, 50.0, 25.0, 25.0, 0.0, 10.0, 10.0];
    let r = routing::generate(&load, 20_000, 3, 4)?;
    for t in 0..r.tokens {
        let ids = &r.ids[t * 3..t * 3 + 3];
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        assert!(ids.iter().all(|&e| e != 1 && e != 5));
        let s: f32 = r.weights[t * 3..t * 3 + 3].iter().sum();
        assert!((s - 1.0).abs() < 1e-5);
    }
    let c = r.expert_counts(8);
    assert!(c[0] > c[2] && c[2] > c[3] && c[3] > c[6]);
    assert_eq!(r, routing::generate(&load, 20_000, 3, 4)?);
    assert_ne!(r, routing::generate(&load, 20_000, 3, 5)?);
    // fewer loaded experts than top-k: a floor makes it possible
    let r = routing::generate(&[1.0, 0.0, 0.0], 10, 2, 1)?;
    assert!(r.ids.chunks(2).all(|p| p[0] != p[1]));
    assert!(routing::generate(&[1.0, 2.0], 10, 3, 1).is_err());
    Ok(())
}

/// A naive triple loop, written independently of `expert.rs`.
fn naive_ffn(x: &[u16], w13: &[u16], w2: &[u16], h: usize, i: usize) -> Vec<u16> {
    let rows = x.len() / h;
    let mut out = vec![0u16; rows * h];
    for r in 0..rows {
        let mut y = vec![0u16; 2 * i];
        for (j, yj) in y.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for c in 0..h {
                acc += bf16_to_f32(x[r * h + c]) * bf16_to_f32(w13[j * h + c]);
            }
            *yj = f32_to_bf16(acc);
        }
        let mut act = vec![0u16; i];
        for (j, a) in act.iter_mut().enumerate() {
            let g = bf16_to_f32(y[j]);
            let u = bf16_to_f32(y[i + j]);
            *a = f32_to_bf16(g / (1.0 + (-g).exp()) * u);
        }
        for c in 0..h {
            let mut acc = 0.0f32;
            for j in 0..i {
                acc += bf16_to_f32(act[j]) * bf16_to_f32(w2[c * i + j]);
            }
            out[r * h + c] = f32_to_bf16(acc);
        }
    }
    out
}

#[test]
fn expert_compute_matches_a_naive_loop() -> R {
    let shape = ExpertShape::new(64, 32)?;
    let pool = WeightPool::generate(shape, 5);
    let (slots, r, phys) = sample(Rule::Vllm)?;
    let d = dispatch_cpu(&phys, slots.num_slots())?;
    let x = fill_uniform(0, r.tokens * shape.hidden, seeds::X, 1.0);
    let xp = gather_cpu(&x, shape.hidden, r.top_k, &d.perm);
    let got = experts_cpu(&xp, &d, &slots, &pool)?;
    let h = shape.hidden;
    for s in 0..slots.num_slots() {
        let (a, b) = (d.offsets[s] as usize, d.offsets[s + 1] as usize);
        let p = slots.slot_expert[s] as usize % 5;
        let want = naive_ffn(&xp[a * h..b * h], pool.w13(p), pool.w2(p), h, shape.inter);
        assert_eq!(&got[a * h..b * h], &want[..], "slot {s}");
    }
    // the values are not degenerate
    let rms = (got.iter().map(|&v| bf16_to_f32(v).powi(2)).sum::<f32>() / got.len() as f32).sqrt();
    assert!(rms > 0.01 && rms < 10.0, "rms {rms}");
    Ok(())
}

#[test]
fn bf16_rounding_and_hash_are_as_specified() {
    assert_eq!(f32_to_bf16(1.0), 0x3f80);
    assert_eq!(f32_to_bf16(-2.0), 0xc000);
    assert_eq!(bf16_to_f32(f32_to_bf16(f32::INFINITY)), f32::INFINITY);
    assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    // ties to even, both directions
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
    let v = fill_uniform(0, 10_000, 3, 0.5);
    let f: Vec<f32> = v.iter().map(|&x| bf16_to_f32(x)).collect();
    assert!(f.iter().all(|&x| (-0.5..=0.5).contains(&x)));
    let mean = f.iter().sum::<f32>() / f.len() as f32;
    assert!(mean.abs() < 0.02);
    assert_eq!(fill_uniform(5000, 10, 3, 0.5), v[5000..5010]);
    assert!((silu(0.0)).abs() < 1e-12 && (silu(10.0) - 10.0).abs() < 1e-3);
}

#[test]
fn check_cases_are_valid_layers() -> R {
    for c in cases()? {
        let p = case_placement(
            c.experts,
            c.nodes * c.gpus_per_node,
            c.replicas,
            c.empty_gpu,
        );
        let s = LayerSlots::new(&p, c.experts, c.gpus_per_node)?;
        assert_eq!(s.num_slots(), c.experts + c.replicas);
        if c.empty_gpu {
            assert!(s.gpu_slots(s.num_gpus() - 1).is_empty());
        }
    }
    // case A holds a same-GPU duplicate: expert 7 (j = 1) lands on GPU 3, its home
    let p = case_placement(16, 4, 6, false);
    assert!(p.iter().any(|g| {
        let mut v = g.clone();
        v.sort_unstable();
        v.windows(2).any(|w| w[0] == w[1])
    }));
    Ok(())
}

#[test]
fn plans_and_predictions() -> R {
    let trace = moeplan::synth::generator::generate(&moeplan::synth::generator::GenConfig::new(
        moeplan::data::model::preset("olmoe")?,
        4,
    ))?;
    let algos: Vec<PlanAlgo> = ["contiguous", "base", "eplb:8", "craft:2", "craft:auto"]
        .iter()
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let topo = moeplan::Topology::new(2, 4)?;
    let plans = make_plans(&trace, topo, &algos, 1)?;
    assert_eq!(plans.len(), 5);
    assert!("craft:x".parse::<PlanAlgo>().is_err() && "nope".parse::<PlanAlgo>().is_err());
    let r = routing::generate(&routing::layer_load(&trace, 0, None)?, 4096, 8, 1)?;
    let counts = r.expert_counts(64);
    let mut bals = Vec::new();
    for (_, plan) in &plans {
        let slots = LayerSlots::from_plan(plan, 0)?;
        let even = balancedness(&even_split_loads(&slots, &counts));
        let d = dispatch_cpu(&select_cpu(&r, &slots, &Selector::Vllm)?, slots.num_slots())?;
        let rows: Vec<f64> = d.rows_per_gpu(&slots).iter().map(|&x| x as f64).collect();
        let int = balancedness(&rows);
        assert!((0.0..=1.0).contains(&even) && (0.0..=1.0).contains(&int));
        // without replicas the integer dispatch equals the even split
        if slots.num_slots() == 64 {
            assert!((even - int).abs() < 1e-12);
        }
        bals.push(even);
    }
    assert!(
        bals[2] > bals[0],
        "EPLB beats contiguous on this batch: {bals:?}"
    );
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    Ok(())
}

#[test]
fn bench_reports_read_well() {
    let r = moeplan_cuda::bench::LayerResult {
        prediction: moeplan_cuda::bench::Prediction {
            layer: 3,
            plan: "eplb:8".into(),
            predicted_trace: 0.9,
            predicted_batch: 0.8,
            predicted_dispatch: 0.75,
            rows_per_rank: vec![10, 20],
            slots_per_rank: vec![3, 2],
            select_on_host: false,
            host_select_ms: 0.5,
            predicted_rank_ms: vec![0.25, 0.75],
        },
        rank_ms: vec![0.5, 1.0],
        measured: 0.75,
        layer_ms: 1.0,
        slowest: 1,
        select_ms: 0.01,
        index_ms: 0.02,
        gather_ms: 0.03,
        combine_ms: 0.04,
    };
    let t = r.to_text();
    assert!(
        t.contains("integer dispatch 0.7500 (max/mean 1.333)"),
        "{t}"
    );
    assert!(t.contains("slots per rank: min 2 · max 3"), "{t}");
    assert!(t.contains("layer time 1.0000 ms (slowest rank 1)"), "{t}");
    assert!(!t.contains("on the host"), "{t}");
    let mut host = r.clone();
    host.prediction.select_on_host = true;
    let t = host.to_text();
    assert!(
        t.contains("select 0.0100 ms (made on the host in 0.500 ms"),
        "{t}"
    );
    let j = r.to_json();
    assert_eq!(j["slots_per_rank"][0], 3);
    assert_eq!(j["measured_max_over_mean"], 1.0 / 0.75);
    assert_eq!(j["predicted_integer_dispatch"], 0.75);
    assert_eq!(j["select_on_host"], false);
    assert_eq!(j["predicted_layer_ms"], 0.75);
    assert!(
        t.contains("predicted layer time on h100-ib-ndr: 0.7500 ms"),
        "{t}"
    );
}
