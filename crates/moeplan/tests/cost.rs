//! The cost model (`judge::cost`): each term against a hand-computed case,
//! monotone where physics says so, and checked against what others
//! measured (moeplan-cuda's H100 rank times, CRAFT §5.3's KV-cache loss,
//! DeepEP's kernel tables).

mod common;

use moeplan::data::{hardware, model};
use moeplan::judge::cost::{Assumptions, Pricing};
use moeplan::judge::{CostModel, Rule, Served, judge};
use moeplan::planners::{self, EplbConfig, ReplicaBudget};
use moeplan::{LoadTrace, Plan, Topology, Workload};
use ndarray::Array3;

fn priced(
    trace: &LoadTrace,
    plan: &Plan,
    rule: Rule,
    pricing: &Pricing,
) -> moeplan::judge::Verdict {
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

/// moeplan-cuda's H100 rank times (docs/cuda.md, table (c)): the real
/// `prefill_in4096.json` summed load, 16,384 tokens × top-8, 1 × 64 GPUs,
/// vLLM dispatch, BF16 DeepSeek-V3 experts; the layer's slowest rank.
#[test]
fn explore_h100() {
    let Some(trace) = common::read_shared_trace("sglang-deepseek-v3/prefill_in4096.json") else {
        return;
    };
    // Each layer scaled to 131,072 rows, as the bench drew them.
    let mut c = trace.counts().to_owned();
    for l in 0..trace.num_layers() {
        let s: f64 = c.slice(ndarray::s![0, l, ..]).sum();
        c.slice_mut(ndarray::s![0, l, ..])
            .mapv_inplace(|x| x * 131072.0 / s);
    }
    let scaled = LoadTrace::new(c, trace.layer_ids().to_vec()).unwrap();
    let topo = Topology::new(1, 64).unwrap();
    let mut pricing = Pricing::new(
        hardware::preset("h100-ib-ndr").unwrap(),
        model::preset("deepseek-v3").unwrap(),
    );
    pricing.assumptions.bytes_per_weight = Some(2);
    let plans = [
        ("contiguous", planners::contiguous(&trace, topo).unwrap()),
        ("base", planners::base(&trace, topo, 1).unwrap()),
        (
            "eplb64",
            planners::eplb(
                &trace,
                topo,
                EplbConfig {
                    redundant_experts: 64,
                    groups: 1,
                },
            )
            .unwrap(),
        ),
        (
            "craft8",
            planners::craft(&trace, topo, ReplicaBudget::ReplicasPerGpu(8)).unwrap(),
        ),
        (
            "craft16",
            planners::craft(&trace, topo, ReplicaBudget::ReplicasPerGpu(16)).unwrap(),
        ),
    ];
    for (name, plan) in &plans {
        let v = priced(&scaled, plan, Rule::Vllm, &pricing);
        let t = v.sim.time.unwrap();
        let ids = scaled.layer_ids();
        let at = |id: u32| ids.iter().position(|&x| x == id).unwrap();
        eprintln!(
            "{name}: compute l3 {:.3} l30 {:.3} l60 {:.3} ms; layer {:.3}",
            t.per_layer_compute_us[at(3)] / 1e3,
            t.per_layer_compute_us[at(30)] / 1e3,
            t.per_layer_compute_us[at(60)] / 1e3,
            t.moe_layer_us / 1e3
        );
    }
}
