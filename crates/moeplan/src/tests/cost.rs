//! The cost model (`judge::cost`): each term against a hand-computed case,
//! monotone where physics says so, and checked against what others
//! measured — moeplan-cuda's H100 rank times, CRAFT §5.3's KV-cache loss,
//! DeepEP's kernel tables (docs/cost.md has the table).

use super::common;

use std::borrow::Cow;

use crate::data::hardware::{self, Efficiency, Gpu, Hardware, Link};
use crate::data::model::{self, ModelPreset};
use crate::judge::cost::{self, Assumptions, Phase, Prediction, Pricing};
use crate::judge::{CostModel, Rule, Served, Verdict, judge};
use crate::planners::{self, EplbConfig, ReplicaBudget};
use crate::studies::cost_checks as checks;
use crate::synth::generator::{GenConfig, generate};
use crate::{LoadTrace, Plan, Topology, Workload};
use ndarray::Array3;

fn priced(trace: &LoadTrace, plan: &Plan, rule: Rule, pricing: &Pricing) -> Verdict {
    let work = Workload::new(trace.clone());
    let cost = CostModel::for_model(&pricing.model);
    judge(
        &work,
        Served::Plan { plan, rule },
        &cost,
        Some(pricing),
        |_, _| {},
    )
    .unwrap()
}

fn prediction(trace: &LoadTrace, plan: &Plan, pricing: &Pricing) -> Prediction {
    priced(trace, plan, Rule::Even, pricing).predicted.unwrap()
}

/// A model whose numbers are easy by hand: one expert is 3 × 128 × 64 =
/// 24,576 BF16 weights = 49,152 bytes and 49,152 FLOPs per row; top-1;
/// 1 M non-routed parameters; 1,000 KV bytes per token over 2 KV heads.
const TOY: ModelPreset = ModelPreset {
    name: "toy",
    display: "toy",
    total_layers: 1,
    first_moe_layer: 0,
    experts: 2,
    top_k: 1,
    groups: 1,
    hidden: 128,
    moe_intermediate: 64,
    bytes_per_weight: 2,
    non_routed_params_m: 1,
    kv_bytes_per_token: 1000,
    kv_heads: 2,
};

/// Weight read 1 µs (49,152 B at 49.152 GB/s), one row 1 µs (49,152 FLOPs
/// at 0.049152 TFLOPS), `p = 1` (read and GEMMs add), inside a node
/// 1 GB/s + 2 µs, across nodes 0.5 GB/s + 10 µs, every efficiency 1.
fn toy_hardware() -> Hardware {
    Hardware {
        name: Cow::Borrowed("toy"),
        about: Cow::Borrowed("by hand"),
        gpu: Gpu {
            bf16_tflops: 0.049152,
            fp8_tflops: 0.0,
            hbm_gb_per_s: 49.152,
            memory_gib: 1.0,
        },
        intra_node: Link {
            gb_per_s: 1.0,
            latency_us: 2.0,
            shared_by_node: false,
        },
        inter_node: Link {
            gb_per_s: 0.5,
            latency_us: 10.0,
            shared_by_node: false,
        },
        efficiency: Efficiency {
            gemm: 1.0,
            hbm: 1.0,
            intra_node: 1.0,
            inter_node: 1.0,
            roofline_p: 1.0,
        },
        kernels: None,
        calibration: None,
    }
}

fn toy_pricing() -> Pricing {
    Pricing {
        hardware: toy_hardware(),
        model: TOY,
        assumptions: Assumptions {
            dispatch_fp8: false,
            memory_fraction: 1.0,
            ..Assumptions::default()
        },
    }
}

/// Expert 0 (30 rows) on GPU 0 of node 0, expert 1 (10 rows) on GPU 0 of
/// node 1; tokens arrive evenly, so each GPU sends half of each expert.
fn toy_case() -> (LoadTrace, Plan) {
    let trace = LoadTrace::new(
        Array3::from_shape_vec((1, 1, 2), vec![30.0, 10.0]).unwrap(),
        vec![0],
    )
    .unwrap();
    let plan = planners::contiguous(&trace, Topology::new(2, 1).unwrap()).unwrap();
    (trace, plan)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn each_term_against_a_hand_computed_case() {
    let (trace, plan) = toy_case();
    let p = toy_pricing();
    let t = priced(&trace, &plan, Rule::Even, &p).replay.time.unwrap();
    // Compute: GPU 0 reads its expert (1 µs) and runs 30 rows (30 µs).
    assert!(close(t.compute_us, 31.0), "{}", t.compute_us);
    // Dispatch: GPU 0 receives 15 pairs and sends 5, all across nodes; 15
    // BF16 messages of 128 × 2 bytes at 500 B/µs = 7.68 µs, + 10 µs.
    assert!(
        close(t.dispatch_us, 15.0 * 256.0 / 500.0 + 10.0),
        "{}",
        t.dispatch_us
    );
    assert!(close(t.combine_us, t.dispatch_us));
    assert!(close(t.moe_layer_us, 31.0 + 2.0 * 17.68));
    // FP8 dispatch: 128 bytes + one f32 scale per 128 elements.
    let mut fp8 = toy_pricing();
    fp8.assumptions.dispatch_fp8 = true;
    let t8 = priced(&trace, &plan, Rule::Even, &fp8).replay.time.unwrap();
    assert!(
        close(t8.dispatch_us, 15.0 * 132.0 / 500.0 + 10.0),
        "{}",
        t8.dispatch_us
    );
    assert!(close(t8.combine_us, t.combine_us));
    // The roofline (large p): the larger of 1 µs and 30 µs.
    let mut roof = toy_pricing();
    roof.hardware.efficiency.roofline_p = 64.0;
    let tr = priced(&trace, &plan, Rule::Even, &roof)
        .replay
        .time
        .unwrap();
    assert!((tr.compute_us - 30.0).abs() < 0.01, "{}", tr.compute_us);
    // One node of two GPUs: the same pairs over the 1 GB/s link + 2 µs.
    let one = planners::contiguous(&trace, Topology::new(1, 2).unwrap()).unwrap();
    let t1 = priced(&trace, &one, Rule::Even, &p).replay.time.unwrap();
    assert!(
        close(t1.dispatch_us, 15.0 * 256.0 / 1000.0 + 2.0),
        "{}",
        t1.dispatch_us
    );
    // A node's shared NIC, 2 × 2 GPUs, one expert each (30, 10, 10, 10
    // rows): per GPU the busiest cross side is GPU 0's 15 pairs in (7.68 µs
    // + 10); shared, node 0 takes in 15 + 5 = 20 pairs through one port
    // (10.24 µs + 10).
    let mut shared = toy_pricing();
    shared.hardware.inter_node.shared_by_node = true;
    let four = LoadTrace::new(
        Array3::from_shape_vec((1, 1, 4), vec![30.0, 10.0, 10.0, 10.0]).unwrap(),
        vec![0],
    )
    .unwrap();
    let plan4 = planners::contiguous(&four, Topology::new(2, 2).unwrap()).unwrap();
    let own = priced(&four, &plan4, Rule::Even, &p).replay.time.unwrap();
    let nic = priced(&four, &plan4, Rule::Even, &shared)
        .replay
        .time
        .unwrap();
    assert!(
        close(own.dispatch_us, 15.0 * 256.0 / 500.0 + 10.0),
        "{}",
        own.dispatch_us
    );
    assert!(
        close(nic.dispatch_us, 20.0 * 256.0 / 500.0 + 10.0),
        "{}",
        nic.dispatch_us
    );
}

/// A kernel fit on the toy case: each GPU with rows pays the grouped
/// GEMM's fixed time once, dispatch and combine their own fixed times in
/// place of the links' latency, and the achieved bandwidth replaces the
/// link's sustained one where it is given (0 keeps the link's).
#[test]
fn kernel_fit_terms_by_hand() {
    use crate::data::hardware::{CommKernel, Kernels};
    let (trace, plan) = toy_case();
    let mut p = toy_pricing();
    let fit = CommKernel {
        dispatch_fixed_us: 11.0,
        combine_fixed_us: 13.0,
        intra_gb_per_s: 0.0,
        inter_gb_per_s: 0.25,
    };
    p.hardware.kernels = Some(Kernels {
        moe_fixed_us: 7.0,
        normal: fit,
        low_latency: CommKernel {
            dispatch_fixed_us: 3.0,
            combine_fixed_us: 5.0,
            ..fit
        },
    });
    p.hardware.check().unwrap();
    let t = priced(&trace, &plan, Rule::Even, &p).replay.time.unwrap();
    // 31 µs as without the fit, + 7 on the busiest GPU.
    assert!(close(t.compute_us, 31.0 + 7.0), "{}", t.compute_us);
    // 15 BF16 messages of 256 bytes at 250 B/µs, + 11 or 13.
    assert!(
        close(t.dispatch_us, 15.0 * 256.0 / 250.0 + 11.0),
        "{}",
        t.dispatch_us
    );
    assert!(
        close(t.combine_us, 15.0 * 256.0 / 250.0 + 13.0),
        "{}",
        t.combine_us
    );
    // Inside one node: the link's 1 GB/s (the fit gives 0 there).
    let one = planners::contiguous(&trace, Topology::new(1, 2).unwrap()).unwrap();
    let t1 = priced(&trace, &one, Rule::Even, &p).replay.time.unwrap();
    assert!(
        close(t1.dispatch_us, 15.0 * 256.0 / 1000.0 + 11.0),
        "{}",
        t1.dispatch_us
    );
    // The low-latency kernel's own fixed times (every remote pair a message).
    let mut ll = p.clone();
    ll.assumptions.kernel = crate::judge::cost::Kernel::LowLatency;
    let tl = priced(&trace, &plan, Rule::Even, &ll).replay.time.unwrap();
    assert!(
        close(tl.dispatch_us, 15.0 * 256.0 / 250.0 + 3.0),
        "{}",
        tl.dispatch_us
    );
    assert!(
        close(tl.combine_us, 15.0 * 256.0 / 250.0 + 5.0),
        "{}",
        tl.combine_us
    );
    // A negative fixed time is refused.
    let mut bad = p.hardware.clone();
    if let Some(k) = bad.kernels.as_mut() {
        k.normal.combine_fixed_us = -1.0;
    }
    let e = bad.check().unwrap_err().to_string();
    assert!(e.contains("kernels.normal"), "{e}");
}

#[test]
fn memory_and_throughput_by_hand() {
    let (trace, plan) = toy_case();
    let p = toy_pricing();
    let pred = prediction(&trace, &plan, &p);
    // Weights: 1 M dense BF16 parameters over the 1-GPU node (2 MB) + one
    // expert slot (49,152 B); KV: 1 GiB − that; per token 1,000 B over
    // min(TP 1, 2 heads) = 1; two nodes hold a cache each.
    let weights = 2e6 + 49_152.0;
    assert!(close(pred.weights_gib_per_gpu * cost::GIB, weights));
    let kv = cost::GIB - weights;
    assert!(close(pred.kv_cache_gib_per_gpu * cost::GIB, kv));
    assert!(close(pred.max_concurrent_tokens, 2.0 * kv / 1000.0));
    assert_eq!(
        pred.max_concurrent_requests,
        (2.0 * kv / 1000.0 / 4096.0).floor()
    );
    // Dense: 2 × 1 M FLOPs per token × 40 tokens over 2 GPUs at 49,152
    // FLOPs/µs = 813.8 µs, above the 2 MB weight read at 49,152 B/µs.
    let dense: f64 = 2e6 * 40.0 / 2.0 / 49_152.0;
    assert!(
        close(pred.dense_us, dense.max(2e6 / 49_152.0)),
        "{}",
        pred.dense_us
    );
    // The step: the MoE layer (1 of the model's 1 layers) + dense; 40
    // tokens served.
    assert!(
        close(pred.step_ms * 1e3, 66.36 + pred.dense_us),
        "{}",
        pred.step_ms
    );
    assert!(close(pred.tokens_per_s, 40.0 / (pred.step_ms / 1e3)));
    // Decode with a cache of a few requests: the step serves that many
    // tokens and its rows scale by the same share.
    let mut dec = toy_pricing();
    dec.assumptions.phase = Phase::Decode;
    dec.assumptions.context_tokens = (2.0 * kv / 1000.0 / 10.0).ceil() as usize; // 9.x requests fit
    let d = priced(&trace, &plan, Rule::Even, &dec);
    let pd = d.predicted.unwrap();
    assert_eq!(pd.max_concurrent_requests, 9.0);
    assert!(close(pd.served_tokens_per_step, 9.0));
    let share = 9.0 / 40.0;
    let td = d.replay.time.unwrap();
    assert!(
        close(td.compute_us, 1.0 + 30.0 * share),
        "{}",
        td.compute_us
    );
}

/// More bandwidth or TFLOPS never slows a step; more rows never speed it
/// up — over generated traces, plans and every preset.
#[test]
fn monotone_in_bandwidth_tflops_and_rows() {
    let m = model::preset("olmoe").unwrap();
    let mut checked = 0;
    for seed in 0..3u64 {
        let mut cfg = GenConfig::new(m, 2);
        cfg.seed = seed;
        let trace = generate(&cfg).unwrap();
        let doubled =
            LoadTrace::new(trace.counts().mapv(|x| x * 2.0), trace.layer_ids().to_vec()).unwrap();
        for topo in [Topology::new(1, 8).unwrap(), Topology::new(2, 4).unwrap()] {
            let plan = planners::eplb(
                &trace,
                topo,
                EplbConfig {
                    redundant_experts: 8,
                    groups: 1,
                },
            )
            .unwrap();
            for h in hardware::PRESETS {
                let base = Pricing::new(h, m);
                let t0 = priced(&trace, &plan, Rule::Even, &base)
                    .replay
                    .time
                    .unwrap();
                let faster = |f: &dyn Fn(&mut Hardware)| {
                    let mut p = base.clone();
                    f(&mut p.hardware);
                    priced(&trace, &plan, Rule::Even, &p).replay.time.unwrap()
                };
                let hbm = faster(&|h| h.gpu.hbm_gb_per_s *= 2.0);
                let tf = faster(&|h| {
                    h.gpu.bf16_tflops *= 2.0;
                    h.gpu.fp8_tflops *= 2.0;
                });
                // A preset with kernel times prices inside a node with its
                // kernels' achieved bandwidth: doubled with the links.
                let links = faster(&|h| {
                    h.intra_node.gb_per_s *= 2.0;
                    h.inter_node.gb_per_s *= 2.0;
                    if let Some(k) = h.kernels.as_mut() {
                        for c in [&mut k.normal, &mut k.low_latency] {
                            c.intra_gb_per_s *= 2.0;
                            c.inter_gb_per_s *= 2.0;
                        }
                    }
                });
                assert!(
                    hbm.compute_us < t0.compute_us,
                    "{}: {} vs {}",
                    h.name,
                    hbm.compute_us,
                    t0.compute_us
                );
                assert!(tf.compute_us < t0.compute_us);
                assert!(links.dispatch_us <= t0.dispatch_us && links.combine_us <= t0.combine_us);
                assert!(links.moe_layer_us < t0.moe_layer_us || t0.dispatch_us == 0.0);
                let more = priced(&doubled, &plan, Rule::Even, &base)
                    .replay
                    .time
                    .unwrap();
                assert!(more.compute_us > t0.compute_us);
                assert!(more.dispatch_us >= t0.dispatch_us && more.combine_us >= t0.combine_us);
                checked += 1;
            }
        }
    }
    eprintln!("monotone: {checked} (trace, cluster, hardware) cases checked");
    assert_eq!(checked, 3 * 2 * hardware::PRESETS.len());
}

/// A plan with more copies on its fullest GPU never shows more KV cache:
/// EPLB at 0..=3 redundant slots per GPU and CRAFT at R = 0..=6, on two
/// models and clusters, ordered by their fullest GPU.
#[test]
fn more_copies_never_more_kv_cache() {
    let mut checked = 0;
    for (name, topo) in [
        ("deepseek-v3", Topology::new(4, 8).unwrap()),
        ("qwen3-30b-a3b", Topology::new(1, 8).unwrap()),
    ] {
        let m = model::preset(name).unwrap();
        let trace = generate(&GenConfig::new(m, 2)).unwrap();
        let mut plans: Vec<Plan> = (0..=3)
            .map(|k| {
                planners::eplb(
                    &trace,
                    topo,
                    EplbConfig {
                        redundant_experts: k * topo.num_gpus(),
                        groups: 1,
                    },
                )
                .unwrap()
            })
            .collect();
        plans.extend(
            (0..=6)
                .map(|r| planners::craft(&trace, topo, ReplicaBudget::ReplicasPerGpu(r)).unwrap()),
        );
        let h = hardware::preset("h100-ib-ndr").unwrap();
        let a = Assumptions::default();
        let mut rows: Vec<(usize, f64)> = plans
            .iter()
            .map(|p| {
                (
                    p.summary().slots_per_gpu_max,
                    cost::memory(p, 0, h, m, &a).kv_cache,
                )
            })
            .collect();
        rows.sort_by_key(|x| x.0);
        for w in rows.windows(2) {
            assert!(
                w[1].1 <= w[0].1,
                "{name}: {} slots leave {} > {} slots' {}",
                w[1].0,
                w[1].1,
                w[0].0,
                w[0].1
            );
            checked += 1;
        }
        assert!(
            rows.last().unwrap().1 < rows[0].1,
            "{name}: more copies must cost some cache"
        );
    }
    eprintln!("kv monotone: {checked} ordered pairs checked");
    assert_eq!(checked, 2 * 10);
}

/// The `predicted` JSON keys, as docs/cost.md documents them: a renamed or
/// added key fails here until the docs say so.
#[test]
fn predicted_keys_are_stable_and_documented() {
    const KEYS: &[&str] = &[
        "hardware",
        "model",
        "moe_layer_us",
        "compute_us",
        "dispatch_us",
        "combine_us",
        "copy_exposed_us",
        "dense_us",
        "attention_us",
        "step_ms",
        "moe_layers",
        "tokens_per_step",
        "served_tokens_per_step",
        "tokens_per_s",
        "weights_gib_per_gpu",
        "kv_cache_gib_per_gpu",
        "max_concurrent_tokens",
        "max_concurrent_requests",
        "speedup",
        "speedup_over",
        "assumptions",
        "notes",
        "error_band",
    ];
    let (trace, plan) = toy_case();
    let mut pred = prediction(&trace, &plan, &toy_pricing());
    pred.speedup = Some(1.0);
    pred.speedup_over = Some("BASE".into());
    let v = serde_json::to_value(&pred).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = KEYS.to_vec();
    want.sort_unstable();
    assert_eq!(keys, want);
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cost.md"))
        .unwrap();
    for k in KEYS {
        assert!(
            docs.contains(&format!("`{k}`")),
            "docs/cost.md does not document `{k}`"
        );
    }
    let a = v["assumptions"].as_object().unwrap();
    for k in a.keys() {
        assert!(
            docs.contains(&format!("`{k}`")),
            "docs/cost.md does not document assumption `{k}`"
        );
    }
}

/// docs/cost.md's presets table is hand-written (the GPU and link names,
/// the sources), so its figures are held here: one row per preset, in
/// order, with the preset's TFLOPS, HBM bandwidth and memory as the code
/// has them, and its links' GB/s named in the link cells.
#[test]
fn the_docs_presets_table_is_the_presets() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cost.md"))
        .unwrap();
    let rows: Vec<Vec<&str>> = docs
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .filter(|c: &Vec<&str>| c.len() == 8)
        .collect();
    let names: Vec<String> = rows.iter().map(|c| c[0].trim_matches('`').into()).collect();
    let presets: Vec<String> = hardware::PRESETS
        .iter()
        .map(|h| h.name.to_string())
        .collect();
    assert_eq!(
        names, presets,
        "docs/cost.md's presets table lists other presets"
    );
    // 1979 → "1,979", 989.5 → "989.5", 0 → "—"
    let figure = |x: f64| {
        if x == 0.0 {
            return "—".to_string();
        }
        let whole = x.trunc() as u64;
        let mut int = String::new();
        for (i, c) in whole.to_string().chars().enumerate() {
            if i > 0 && (whole.to_string().len() - i) % 3 == 0 {
                int.push(',');
            }
            int.push(c);
        }
        let frac = format!("{:.1}", x.fract());
        if x.fract() == 0.0 {
            int
        } else {
            format!("{int}{}", &frac[1..])
        }
    };
    let gbps = |x: f64| format!("{} GB/s", figure(x));
    let mut checked = 0;
    for (cells, h) in rows.iter().zip(hardware::PRESETS) {
        let g = &h.gpu;
        let want = [
            format!("{} / {}", figure(g.bf16_tflops), figure(g.fp8_tflops)),
            figure(g.hbm_gb_per_s),
            figure(g.memory_gib),
        ];
        assert_eq!(cells[2..5], want, "docs/cost.md's row for {}", h.name);
        // links given per port or in bits are named so; the rest in GB/s
        for (cell, link) in [(cells[5], &h.intra_node), (cells[6], &h.inter_node)] {
            let bits = format!("{} Gb", figure(link.gb_per_s * 8.0));
            let ethernet = format!("{} GbE", figure(link.gb_per_s * 8.0));
            assert!(
                cell.contains(&gbps(link.gb_per_s))
                    || cell.contains(&bits)
                    || cell.contains(&ethernet),
                "docs/cost.md's row for {}: {cell:?} does not say {}",
                h.name,
                gbps(link.gb_per_s)
            );
        }
        checked += 1;
    }
    assert_eq!(checked, hardware::PRESETS.len());
}

/// Every preset passes its own check and round-trips through the custom
/// reader; broken files are refused with the field named.
#[test]
fn presets_check_and_custom_files_are_refused_when_wrong() {
    for h in hardware::PRESETS {
        h.check().unwrap();
        let text = serde_json::to_vec(h).unwrap();
        assert_eq!(&crate::formats::hardware::read_hardware(&text).unwrap(), h);
    }
    let good = serde_json::to_value(hardware::preset("h100-ib-ndr").unwrap()).unwrap();
    let bad = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        crate::formats::hardware::read_hardware(&serde_json::to_vec(&v).unwrap())
            .unwrap_err()
            .to_string()
    };
    assert!(bad(&|v| v["gpu"]["hbm_gb_per_s"] = (-1.0).into()).contains("gpu.hbm_gb_per_s"));
    assert!(bad(&|v| v["efficiency"]["gemm"] = 0.0.into()).contains("efficiency.gemm"));
    assert!(bad(&|v| v["gpu"]["tflops"] = 1.0.into()).contains("unknown field"));
    assert!(
        bad(&|v| {
            v.as_object_mut().unwrap().remove("inter_node");
        })
        .contains("inter_node")
    );
    assert!(
        crate::formats::hardware::read_hardware(&vec![b' '; 70_000])
            .unwrap_err()
            .to_string()
            .contains("limit")
    );
}

/// moeplan-cuda's H100 rank times (docs/cuda.md, table (c)): the real
/// `prefill_in4096.json` summed load, 16,384 tokens × top-8 per layer,
/// 1 × 64 GPUs, vLLM dispatch, BF16 DeepSeek-V3 experts; each layer's
/// slowest rank, measured against the model's compute term. Held out: the
/// `h100-ib-ndr` preset is fitted on AIConfigurator's FP8 DeepGEMM tables
/// (issue 47), and moeplan-cuda's BF16 grouped GEMM is another kernel.
/// Median within 10 % (the aim when these were measured, which the
/// datasheet preset met row by row; the token metric misses CRAFT's time
/// by 17 %), every row within 15 % (the fitted preset predicts the
/// unreplicated plans' busiest ranks 7–14 % slow).
#[test]
fn h100_rank_times_within_10_percent() {
    let Some(trace) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    let rows = checks::h100_rank_times(&trace).unwrap();
    assert_eq!(rows.len(), checks::H100_RANK_MS.len());
    let mut gaps = Vec::new();
    for (name, layer, p) in rows {
        eprintln!(
            "{name:<10} layer {layer:>2}: predicted {:.3} ms, measured {:.3} ms ({:+.1} %)",
            p.ours,
            p.theirs,
            p.gap() * 100.0
        );
        assert!(
            p.gap().abs() <= 0.15,
            "{name} layer {layer}: {:.3} vs {:.3}",
            p.ours,
            p.theirs
        );
        gaps.push(p.gap().abs());
    }
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    eprintln!(
        "median gap {:.1} %, largest {:.1} %",
        median * 100.0,
        gaps[gaps.len() - 1] * 100.0
    );
    assert!(median <= 0.10, "median gap {:.1} %", median * 100.0);
}

/// CRAFT §5.3: EPLB with one replica per MoE layer per GPU shrinks the KV
/// cache by 19 % (DeepSeek-R1, 8 × 8 A100-80GB), 75 % (Kimi-K2, 6 nodes)
/// and 24 % (Kimi-K2, 12 nodes). Assumed as CRAFT ran: BF16 weights,
/// attention TP over a node, all-to-all over point-to-point sends with a
/// 4,096-token BF16 buffer per peer each way; the memory fraction (0.6725:
/// ~28 GB for activations, graphs and the rest) is fitted to the K × 6 row,
/// the other two are checked: within 3 points.
#[test]
fn craft_kv_cache_loss_within_3_points() {
    let rows = checks::craft_kv_loss().unwrap();
    assert_eq!(rows.len(), checks::CRAFT_KV_LOSS.len());
    for ((name, nodes, _), p) in checks::CRAFT_KV_LOSS.iter().zip(rows) {
        eprintln!(
            "{name} on {nodes} × 8: EPLB shrinks the KV cache by {:.1} % (paper {} %)",
            p.ours, p.theirs
        );
        assert!(
            (p.ours - p.theirs).abs() <= 3.0,
            "{name} {nodes}: {:.1} vs {}",
            p.ours,
            p.theirs
        );
    }
}

/// DeepEP's published kernel tables (deepseek-ai/DeepEP docs/legacy.md,
/// H800 + CX7 400 Gb/s): uniform top-8 routing over 256 experts, FP8
/// dispatch, BF16 combine, on the `h800-ib-ndr` preset (its datasheet with
/// the H100's fitted kernel times, so these rows are held out). Low-latency
/// kernels (128 tokens per GPU, EP 8–256): latency within 25 % of every
/// row. Normal kernels (4,096 tokens per GPU): the bottleneck link's
/// bandwidth within 25 % — across nodes the model's answer is its
/// sustained link bandwidth less fixed times, so there the check holds the
/// efficiencies, not more.
#[test]
fn deepep_tables_within_25_percent() {
    let tables = [
        ("low-latency", "µs", checks::deepep_low_latency().unwrap()),
        ("normal", "GB/s", checks::deepep_normal().unwrap()),
    ];
    assert_eq!(tables[0].2.len(), checks::DEEPEP_LOW_LATENCY.len());
    assert_eq!(tables[1].2.len(), checks::DEEPEP_NORMAL.len());
    for (kernels, unit, rows) in tables {
        for (ep, d, c) in rows {
            eprintln!(
                "{kernels} EP {ep:>3}: dispatch {:.0} {unit} vs {} ({:+.1} %), combine {:.0} vs {} ({:+.1} %)",
                d.ours,
                d.theirs,
                d.gap() * 100.0,
                c.ours,
                c.theirs,
                c.gap() * 100.0
            );
            assert!(
                d.gap().abs() <= 0.25 && c.gap().abs() <= 0.25,
                "{kernels} EP {ep}"
            );
        }
    }
}

/// Two-batch overlap never predicts a slower layer than none, on every
/// plan, kernel and preset tried, and hides some of the all-to-all where
/// the batch is large (the H100's prefill on 2 × 8); its compute,
/// dispatch and combine terms are the same work either way.
#[test]
fn two_batch_overlap_is_never_slower() {
    use crate::judge::cost::{Kernel, Overlap};
    let trace = generate(&GenConfig::new(model::preset("deepseek-v3").unwrap(), 3)).unwrap();
    let topology = Topology::new(2, 8).unwrap();
    let plans = [
        planners::contiguous(&trace, topology).unwrap(),
        planners::eplb(
            &trace,
            topology,
            EplbConfig {
                redundant_experts: 32,
                groups: 8,
            },
        )
        .unwrap(),
    ];
    let (mut checked, mut hidden) = (0, 0);
    for hw in ["h100-ib-ndr", "b200-ib-ndr", "4090-pcie4-25gbe"] {
        for kernel in [Kernel::Normal, Kernel::LowLatency] {
            for plan in &plans {
                let pricing = |overlap| Pricing {
                    hardware: hardware::preset(hw).unwrap().clone(),
                    model: *model::preset("deepseek-v3").unwrap(),
                    assumptions: Assumptions {
                        kernel,
                        overlap,
                        ..Assumptions::default()
                    },
                };
                let none = prediction(&trace, plan, &pricing(Overlap::None));
                let tbo = prediction(&trace, plan, &pricing(Overlap::Tbo));
                assert!(
                    tbo.moe_layer_us <= none.moe_layer_us * (1.0 + 1e-12),
                    "{hw} {kernel:?}: tbo {} µs > none {} µs",
                    tbo.moe_layer_us,
                    none.moe_layer_us
                );
                assert!(tbo.step_ms <= none.step_ms * (1.0 + 1e-12));
                assert_eq!(
                    (tbo.compute_us, tbo.dispatch_us, tbo.combine_us),
                    (none.compute_us, none.dispatch_us, none.combine_us)
                );
                assert!(
                    (none.moe_layer_us - none.compute_us - none.dispatch_us - none.combine_us)
                        .abs()
                        < 1e-9 * none.moe_layer_us
                );
                if tbo.moe_layer_us < 0.95 * none.moe_layer_us {
                    hidden += 1;
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 12);
    assert!(
        hidden >= 4,
        "two-batch overlap hid time in only {hidden} of 12 cases"
    );
}

/// Decode with attention: on a fixed plan, predicted tokens/s rises as the
/// context falls from 32,768 to 512 (more requests fit, each reads less
/// cache) and then flattens (the batch, not the cache, caps the requests;
/// the KV reads no longer dominate the step).
#[test]
fn decode_throughput_rises_then_flattens_as_context_falls() {
    use crate::judge::cost::Phase;
    let m = model::preset("deepseek-v3").unwrap();
    // Decode steps of 512 running requests: the cache caps them above a
    // few thousand tokens of context, the batch below (with the generated
    // default's 4,096 the cache would cap them down to 1,024).
    let trace = generate(&GenConfig {
        tokens_per_batch: 512,
        ..GenConfig::new(m, 2)
    })
    .unwrap();
    let topology = Topology::new(2, 8).unwrap();
    let plan = planners::contiguous(&trace, topology).unwrap();
    let contexts = [32_768usize, 16_384, 8_192, 4_096, 2_048, 1_024, 512];
    let t: Vec<(f64, f64, f64)> = contexts
        .iter()
        .map(|&context| {
            let p = prediction(
                &trace,
                &plan,
                &Pricing {
                    hardware: hardware::preset("h200-ib-ndr").unwrap().clone(),
                    model: *m,
                    assumptions: Assumptions {
                        phase: Phase::Decode,
                        context_tokens: context,
                        ..Assumptions::default()
                    },
                },
            );
            (p.tokens_per_s, p.attention_us, p.step_ms)
        })
        .collect();
    let tput: Vec<f64> = t.iter().map(|x| x.0).collect();
    eprintln!(
        "context → (tokens/s, attention µs, step ms): {:?}",
        contexts.iter().zip(&t).collect::<Vec<_>>()
    );
    // Rises (never falls) as the context shrinks …
    assert!(tput.windows(2).all(|w| w[1] >= w[0] * 0.999), "{t:?}");
    assert!(tput[3] > 2.0 * tput[0], "{t:?}");
    // … and flattens: the last halving gains far less than the first.
    let gain = |i: usize| tput[i + 1] / tput[i] - 1.0;
    assert!(gain(5) < 0.25 * gain(0), "{t:?}");
    // Attention's reads are in every step, and shrink with the context
    // once the batch caps the requests.
    assert!(t.iter().all(|x| x.1 > 0.0), "{t:?}");
    assert!(t[6].1 < t[4].1, "{t:?}");
}
