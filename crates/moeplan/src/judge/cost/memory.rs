//! What a plan leaves of each GPU's memory for the KV cache: weights,
//! replicas and activations against the card's HBM ([`memory`]).

use super::*;

/// Memory of one plan on `hardware`: weights on the fullest GPU and the KV
/// cache left, `extra_slots` more expert slots per GPU (a per-batch
/// planner's buffers) over all the plan's layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Memory {
    /// Weights on the fullest GPU, bytes.
    pub weights: f64,
    /// Per-peer all-to-all buffers, bytes.
    pub buffers: f64,
    /// KV cache per GPU, bytes (not negative).
    pub kv_cache: f64,
    /// Tokens of KV the cluster holds.
    pub tokens: f64,
    /// Requests at the context length.
    pub requests: f64,
}

/// The memory a plan leaves for the KV cache.
pub(crate) fn memory(
    plan: &Plan,
    extra_slots: usize,
    hardware: &Hardware,
    model: &ModelPreset,
    assumptions: &Assumptions,
) -> Memory {
    let topology = plan.topology();
    let d = topology.num_gpus() as f64;
    let tp = assumptions.attention_tp(topology) as f64;
    let bpw = assumptions.bytes_per_weight(model) as f64;
    let expert_bytes = assumptions.expert_bytes(model);
    // The fullest GPU's slots over all layers (`PlanSummary::
    // slots_per_gpu_max`, without the rest of the summary: a front end
    // prices on every budget change).
    let mut per_gpu = vec![0usize; topology.num_gpus()];
    for layer in plan.layers() {
        for (n, slots) in per_gpu.iter_mut().zip(&layer.gpus) {
            *n += slots.len();
        }
    }
    let fullest = per_gpu.into_iter().max().unwrap_or(0);
    // The plan's layers stand for the model's MoE layers.
    let plan_layers = plan.layers().len().max(1) as f64;
    let scale = model.moe_layers() as f64 / plan_layers;
    let slots = (fullest + extra_slots) as f64 * scale;
    let dense = model.non_routed_params_m as f64 * 1e6 * bpw / tp;
    let weights = dense + slots * expert_bytes;
    let buffers = 2.0
        * assumptions.peer_buffer_tokens as f64
        * model.hidden as f64
        * 2.0
        * (d - 1.0).max(0.0);
    let usable = hardware.gpu.memory_gib * GIB * assumptions.memory_fraction;
    let kv_cache = (usable - weights - buffers).max(0.0);
    // MLA keeps its latent whole on every attention rank; GQA splits its
    // heads over at most `kv_heads` ranks.
    let split = (model.kv_heads.max(1) as f64).min(tp);
    let per_token = model.kv_bytes_per_token as f64 / split;
    let tokens = (d / tp).floor().max(1.0) * kv_cache / per_token;
    Memory {
        weights,
        buffers,
        kv_cache,
        tokens,
        requests: (tokens / assumptions.context_tokens as f64).floor(),
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn memory_memory_example() {
        let run = || {
            use moeplan::data::{hardware, model};
            use moeplan::judge::cost::{Assumptions, memory};
            use moeplan::{Topology, planners, synth::generator};
            let m = model::preset("deepseek-v3")?;
            let trace = generator::generate(&generator::GenConfig::new(m, 2))?;
            let topo = Topology::new(8, 8)?;
            let base = planners::eplb(
                &trace,
                topo,
                planners::EplbConfig {
                    redundant_experts: 0,
                    groups: 1,
                },
            )?;
            let more = planners::eplb(
                &trace,
                topo,
                planners::EplbConfig {
                    redundant_experts: 64,
                    groups: 1,
                },
            )?;
            let h = hardware::preset("h100-ib-ndr")?;
            let a = Assumptions::default();
            assert!(memory(&more, 0, h, m, &a).kv_cache < memory(&base, 0, h, m, &a).kv_cache);
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
