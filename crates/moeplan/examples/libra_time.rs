//! Libra's execution-time model's verdict: does the copy
//! of the next layer's experts hide under the current layer's compute, for
//! DeepSeek-V3 and Qwen3-235B shapes, at NVLink 4, PCIe 5 and InfiniBand
//! NDR bandwidths and several prefill batch sizes?
//!
//! Data: generated count traces (`generator`, the presets `deepseek-v3`
//! and `qwen3-235b-a22b`, 8 batches, seed 7) on 1 node × 8 GPUs (the
//! Libra paper's 8 H200), even arrival (counts carry no sources). Libra:
//! the paper's N = 8, α = 0.5, ε = 5 %, on a contiguous base, predictor
//! previous-batch (batch 0 predicted uniform); the static plan is the same
//! contiguous base under the `even` rule. Times from
//! `planners::time_model` (MoE expert compute only; see its module
//! comment for what is and is not timed).
//!
//! Run with `cargo run --release -p moeplan --example libra_time`; prints
//! Markdown.

use std::process::ExitCode;

use moeplan::data::Workload;
use moeplan::data::model::{ModelPreset, preset};
use moeplan::planners::{
    IB_NDR_GB_PER_S, LibraOptions, NVLINK4_GB_PER_S, PCIE5_GB_PER_S, Predictor, TimeModel,
    libra_schedule, libra_time as time,
};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{Topology, planners};

const BATCHES: usize = 8;
const TOKENS: [usize; 4] = [2048, 8192, 32_768, 131_072];
const LINKS: [(&str, f64); 3] = [
    ("NVLink 4", NVLINK4_GB_PER_S),
    ("PCIe 5 x16", PCIE5_GB_PER_S),
    ("IB NDR", IB_NDR_GB_PER_S),
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("libra_time: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Tokens per batch above which N received copies hide under a perfectly
/// balanced layer: `N · bytes / bw ≤ tokens · k / D · flops / F`.
fn break_even(p: &ModelPreset, m: &TimeModel, n: usize, d: usize) -> f64 {
    m.copy_seconds(n) * d as f64 / (p.top_k as f64 * m.pair_seconds())
}

fn run() -> moeplan::Result<()> {
    let topo = Topology::new(1, 8)?;
    let opts = LibraOptions::default();
    let m0 = TimeModel::default();
    println!(
        "Generated traces (seed 7, {BATCHES} batches), 1 × 8 GPUs, Libra N = {}, α = {}, ε = {} % on a contiguous base, predictor previous-batch; static = contiguous under `even`. Compute at {} TFLOPS per GPU; the CPU rebalancer charged {} µs per layer.\n",
        opts.extra_per_gpu,
        opts.local_fraction,
        opts.tolerance_percent,
        m0.tflops,
        m0.rebalance_seconds * 1e6
    );
    println!(
        "| model | tokens / batch | link (GB/s) | expert compute / layer | busiest GPU's copies / layer (max of received, sent) | copy / layer | layers 1.. hidden | exposed copy share of Libra's time | Libra / static time | break-even tokens (balanced, N received) |"
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for name in ["deepseek-v3", "qwen3-235b-a22b"] {
        let p = preset(name)?;
        for tokens in TOKENS {
            let trace = generate(&GenConfig {
                tokens_per_batch: tokens,
                ..GenConfig::new(p, BATCHES)
            })?;
            let base = planners::contiguous(&trace, topo)?;
            let work = Workload::new(trace);
            let s = libra_schedule(&work, &base, &Predictor::PreviousBatch, &opts)?;
            for (link, gbps) in LINKS {
                let m = TimeModel {
                    link_gb_per_s: gbps,
                    ..TimeModel::for_model(p)
                };
                let r = time(&work, &base, &s, &m)?;
                let n = r.layers.len().max(1) as f64;
                let compute = r.layers.iter().map(|l| l.compute_seconds).sum::<f64>() / n;
                let copy = r.layers.iter().map(|l| l.copy_seconds).sum::<f64>() / n;
                let busiest = r.layers.iter().map(|l| l.copies as f64).sum::<f64>() / n;
                let exposed: f64 = r.per_batch_exposed_seconds.iter().sum();
                println!(
                    "| {} | {tokens} | {link} ({gbps:.0}) | {:.0} µs | {busiest:.1} | {:.0} µs | {} / {} ({:.0} %) | {:.1} % | {:.3} | {:.0} |",
                    p.display,
                    compute * 1e6,
                    copy * 1e6,
                    r.hidden,
                    r.hidden + r.unhidden,
                    100.0 * r.hidden as f64 / (r.hidden + r.unhidden).max(1) as f64,
                    100.0 * exposed / r.total_seconds,
                    r.total_seconds / r.static_total_seconds,
                    break_even(p, &m, opts.extra_per_gpu, topo.num_gpus()),
                );
            }
        }
    }
    Ok(())
}
