//! The time model against what others measured: the published and
//! measured figures it is checked against, and the model's answer to each,
//! made once here for the tests that hold the gaps (`src/tests/cost.rs`) and
//! the table that shows them (docs/cost.md, the `cost_table` example).
//!
//! - [`h100_rank_times`]: moeplan-cuda's slowest-rank times on one H100
//!   (docs/cuda.md (c)) against the compute term;
//! - [`craft_kv_loss`]: CRAFT §5.3's KV-cache loss of EPLB's replicas
//!   against the memory model;
//! - [`deepep_low_latency`], [`deepep_normal`]: DeepEP's kernel tables
//!   against dispatch and combine.
//!
//! Cost: a handful of plans and replays of one batch each.

use ndarray::{Array3, s};

use crate::data::Workload;
use crate::data::hardware::{self, Hardware};
use crate::data::model::{self, ModelPreset};
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};
use crate::judge::cost::{self, Assumptions, Kernel, Pricing};
use crate::judge::{CostModel, Rule, Served, Strategy, judge, simulate};
use crate::planners::{self, EplbConfig, ReplicaBudget};
use crate::synth::generator::{GenConfig, generate};

/// moeplan-cuda's slowest-rank layer times on one H100 80GB HBM3
/// (docs/cuda.md table (c), 2026-11-26): `(plan, model layer, ms)` on the
/// real `prefill_in4096.json`, 1 × 64 GPUs, vLLM dispatch, BF16 experts.
/// Plans: BASE, EPLB +64, CRAFT at R = 8 and 16, contiguous.
pub(crate) const H100_RANK_MS: [(&str, u32, f64); 11] = [
    ("base", 3, 0.489),
    ("base", 30, 0.489),
    ("eplb", 3, 0.367),
    ("eplb", 30, 0.377),
    ("eplb", 60, 0.383),
    ("craft8", 3, 0.425),
    ("craft8", 30, 0.385),
    ("craft8", 60, 0.439),
    ("craft16", 60, 0.382),
    ("contiguous", 3, 0.685),
    ("contiguous", 30, 0.693),
];

/// CRAFT (seed 000) §5.3: EPLB with one replica per MoE layer per GPU
/// shrinks the KV cache by 19 % (DeepSeek-R1 on 8 × 8 A100-80GB), 75 %
/// (Kimi-K2, 6 nodes) and 24 % (Kimi-K2, 12 nodes): `(model, nodes, %)`.
pub(crate) const CRAFT_KV_LOSS: [(&str, usize, f64); 3] = [
    ("deepseek-v3", 8, 19.0),
    ("kimi-k2", 6, 75.0),
    ("kimi-k2", 12, 24.0),
];

/// The `CRAFT_KV_LOSS` row the memory fraction is fitted to (K × 6).
pub const CRAFT_KV_FITTED: usize = 1;

/// What CRAFT ran, for the memory row: BF16 weights, a 4,096-token BF16
/// buffer per peer each way, and the share of memory left for weights and
/// cache fitted to [`CRAFT_KV_FITTED`] (0.6725: ~28 GB for activations,
/// graphs and the rest).
pub fn craft_assumptions() -> Assumptions {
    Assumptions {
        bytes_per_weight: Some(2),
        peer_buffer_tokens: 4096,
        memory_fraction: 0.6725,
        ..Assumptions::default()
    }
}

/// DeepEP's low-latency kernels (deepseek-ai/DeepEP docs/legacy.md, H800 +
/// CX7 400 Gb/s, 128 tokens × top-8 per GPU, FP8 dispatch, BF16 combine):
/// `(EP, dispatch µs, combine µs)`.
pub(crate) const DEEPEP_LOW_LATENCY: [(usize, f64, f64); 6] = [
    (8, 77.0, 114.0),
    (16, 118.0, 195.0),
    (32, 155.0, 273.0),
    (64, 173.0, 314.0),
    (128, 192.0, 369.0),
    (256, 194.0, 360.0),
];

/// The same page's normal kernels, 4,096 tokens × top-8 per GPU: `(EP,
/// dispatch GB/s, combine GB/s)` of the bottleneck link.
pub(crate) const DEEPEP_NORMAL: [(usize, f64, f64); 4] = [
    (8, 153.0, 158.0),
    (16, 43.0, 43.0),
    (32, 58.0, 57.0),
    (64, 51.0, 50.0),
];

/// One published or measured figure beside the model's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// Theirs.
    pub theirs: f64,
    /// The model's.
    pub ours: f64,
}

impl Pair {
    /// `ours / theirs − 1`.
    pub fn gap(&self) -> f64 {
        self.ours / self.theirs - 1.0
    }
}

/// `H100_RANK_MS` in order, each `(plan, layer, measured and predicted
/// ms)`: the model's compute term of that layer on `h100-ib-ndr` with BF16
/// experts, each layer of `trace` (the real `prefill_in4096.json`) scaled
/// to the 131,072 rows the bench drew, plans made on `trace` for 1 × 64.
pub fn h100_rank_times(trace: &LoadTrace) -> Result<Vec<(&'static str, u32, Pair)>> {
    let mut c = trace.counts().to_owned();
    for l in 0..trace.num_layers() {
        let sum: f64 = c.slice(s![0, l, ..]).sum();
        if sum > 0.0 {
            c.slice_mut(s![0, l, ..])
                .mapv_inplace(|x| x * 131_072.0 / sum);
        }
    }
    let scaled = LoadTrace::new(c, trace.layer_ids().to_vec())?;
    let topo = Topology::new(1, 64)?;
    let mut pricing = Pricing::new(
        hardware::preset("h100-ib-ndr")?,
        model::preset("deepseek-v3")?,
    );
    pricing.assumptions.bytes_per_weight = Some(2);
    let craft = |r| planners::craft(trace, topo, ReplicaBudget::ReplicasPerGpu(r));
    let eplb = EplbConfig {
        redundant_experts: 64,
        groups: 1,
    };
    let plans = [
        ("base", planners::base(trace, topo, 1)?),
        ("eplb", planners::eplb(trace, topo, eplb)?),
        ("craft8", craft(8)?),
        ("craft16", craft(16)?),
        ("contiguous", planners::contiguous(trace, topo)?),
    ];
    let work = Workload::new(scaled);
    let cost = CostModel::for_model(&pricing.model);
    let mut per_layer = Vec::new();
    for (name, plan) in &plans {
        let served = Served::Plan {
            plan,
            rule: Rule::Vllm,
        };
        let v = judge(&work, served, &cost, Some(&pricing), |_, _| {})?;
        let t = v
            .replay
            .time
            .ok_or_else(|| Error::Argument("no time".into()))?;
        per_layer.push((*name, t.per_layer_compute_us));
    }
    let ids = work.trace().layer_ids();
    H100_RANK_MS
        .iter()
        .map(|&(name, layer, ms)| {
            let at = ids.iter().position(|&x| x == layer);
            let us = per_layer.iter().find(|(n, _)| *n == name);
            match (at, us) {
                (Some(at), Some((_, t))) => Ok((
                    name,
                    layer,
                    Pair {
                        theirs: ms,
                        ours: t[at] / 1e3,
                    },
                )),
                _ => Err(Error::Argument(format!(
                    "the trace has no layer {layer} (DeepSeek-V3's MoE layers 3..60)"
                ))),
            }
        })
        .collect()
}

/// `CRAFT_KV_LOSS` in order: the percent of the KV cache EPLB with one
/// replica per layer per GPU loses against BASE on `a100-80g-efa` under
/// [`craft_assumptions`], on a generated trace of each model.
pub fn craft_kv_loss() -> Result<Vec<Pair>> {
    let a = craft_assumptions();
    let h = hardware::preset("a100-80g-efa")?;
    CRAFT_KV_LOSS
        .iter()
        .map(|&(name, nodes, paper)| {
            let m = model::preset(name)?;
            let trace = generate(&GenConfig::new(m, 1))?;
            let topo = Topology::new(nodes, 8)?;
            let base = planners::base(&trace, topo, 1)?;
            let eplb = EplbConfig {
                redundant_experts: topo.num_gpus(),
                groups: 1,
            };
            let eplb = planners::eplb(&trace, topo, eplb)?;
            let kv = |p: &Plan| cost::memory(p, 0, h, m, &a).kv_cache;
            Ok(Pair {
                theirs: paper,
                ours: 100.0 * (1.0 - kv(&eplb) / kv(&base)),
            })
        })
        .collect()
}

/// `DEEPEP_LOW_LATENCY` in order: `(EP, dispatch, combine)` in µs on
/// `h800-ib-ndr`, uniform top-8 routing over DeepSeek-V3's 256 experts.
///
/// ```
/// use moeplan::studies::deepep_low_latency;
/// let rows = deepep_low_latency()?;
/// assert!(rows.iter().all(|(_, d, c)| d.ours > 0.0 && c.ours > 0.0));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn deepep_low_latency() -> Result<Vec<(usize, Pair, Pair)>> {
    DEEPEP_LOW_LATENCY
        .iter()
        .map(|&(ep, d, c)| {
            let (od, oc) = deepep(ep, 128.0, Kernel::LowLatency)?;
            Ok((
                ep,
                Pair {
                    theirs: d,
                    ours: od,
                },
                Pair {
                    theirs: c,
                    ours: oc,
                },
            ))
        })
        .collect()
}

/// `DEEPEP_NORMAL` in order: `(EP, dispatch, combine)` as GB/s of the
/// bottleneck link (NVLink at EP 8, the NIC above): the link's sustained
/// bandwidth less its latency's share, which is what the model's answer
/// comes to there — so this checks the efficiencies, not more.
///
/// ```
/// use moeplan::studies::deepep_normal;
/// let rows = deepep_normal()?;
/// assert!(rows.iter().all(|(_, d, _)| d.ours > 0.0));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn deepep_normal() -> Result<Vec<(usize, Pair, Pair)>> {
    let h = h800()?;
    DEEPEP_NORMAL
        .iter()
        .map(|&(ep, d, c)| {
            let (td, tc) = deepep(ep, 4096.0, Kernel::Normal)?;
            let (link, eff) = if ep == 8 {
                (&h.intra_node, h.efficiency.intra_node)
            } else {
                (&h.inter_node, h.efficiency.inter_node)
            };
            let bw = |t: f64| link.gb_per_s * eff * (t - link.latency_us) / t;
            Ok((
                ep,
                Pair {
                    theirs: d,
                    ours: bw(td),
                },
                Pair {
                    theirs: c,
                    ours: bw(tc),
                },
            ))
        })
        .collect()
}

fn h800() -> Result<&'static Hardware> {
    hardware::preset("h800-ib-ndr")
}

/// Dispatch and combine µs of `tokens` per GPU, uniform top-8 over 256
/// experts, EP `ep` (8 GPUs a node), the kernels alone: no memory cap
/// (DeepSeek-V3 does not fit on one node of 80 GB GPUs; DeepEP's EP 8 row
/// runs the kernels only).
fn deepep(ep: usize, tokens: f64, kernel: Kernel) -> Result<(f64, f64)> {
    let m: &ModelPreset = model::preset("deepseek-v3")?;
    let counts = Array3::from_elem((1, 1, 256), tokens * ep as f64 * 8.0 / 256.0);
    let trace = LoadTrace::new(counts, vec![3])?;
    let topo = Topology::new((ep / 8).max(1), ep.min(8))?;
    let plan = planners::contiguous(&trace, topo)?;
    let mut p = Pricing::new(h800()?, m);
    p.assumptions.kernel = kernel;
    let cost = CostModel {
        time: Some(p.time_cost()),
        ..CostModel::for_model(m)
    };
    let t = simulate(
        &Workload::new(trace),
        &Strategy::fixed(plan, Rule::Even),
        &cost,
    )?
    .time
    .ok_or_else(|| Error::Argument("no time".into()))?;
    Ok((t.dispatch_us, t.combine_us))
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn cost_checks_h100_rank_times_example() {
        let run = || {
            use super::{H100_RANK_MS, h100_rank_times};
            use moeplan::{data::model, synth::generator};
            let t =
                generator::generate(&generator::GenConfig::new(model::preset("deepseek-v3")?, 1))?;
            let rows = h100_rank_times(&t)?;
            assert_eq!(rows.len(), H100_RANK_MS.len());
            assert!(rows.iter().all(|(.., p)| p.ours > 0.0));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }

    #[test]
    fn cost_checks_craft_kv_loss_example() {
        let run = || {
            use super::{CRAFT_KV_LOSS, craft_kv_loss};
            let rows = craft_kv_loss()?;
            assert!(rows.iter().zip(CRAFT_KV_LOSS).all(|(r, c)| r.theirs == c.2));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
