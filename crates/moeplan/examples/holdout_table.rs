//! The held-out table of docs/results-eplb-craft.md: plans made on the
//! first 75 % of a trace's batches and judged on the last 25 %, printed as
//! Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example holdout_table -- ../shared/data
//! ```
//!
//! Traces: **generated** DeepSeek-V3 (1 × 64, and 8 × 8 with its 8 expert
//! groups, where EPLB uses its hierarchical policy) and Kimi-K2 (8 × 8, one
//! group), 256 batches of 4,096 tokens, seed 7 (what `moeplan sweep
//! --preset P --batches 256 --seed 7 --holdout 0.25` plans); **real**
//! HarMoEny Qwen1.5-MoE per-batch counts (`harmoeny-qwen1.5-moe`, one
//! dataset at a time, 20 batches) on 1 × 4. The even split over copies
//! (`evaluate`). Columns: BASE (EPLB's placement without replicas), EPLB
//! with one redundant expert per GPU per layer (its replicas), CRAFT at
//! R = 4 and 8 with the share of EPLB's gain over BASE it reaches, and the
//! R that CRAFT's automatic budget (the curve's knee) picks.

use std::path::Path;
use std::process::ExitCode;

use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::CraftOptions;
use moeplan::studies::sweep;
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Topology};

#[path = "common/text.rs"]
mod text;
use text::thousands;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("holdout_table: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let data = std::env::args()
        .nth(1)
        .ok_or("usage: holdout_table DATA (the shared data folder)")?;
    let e = |x: moeplan::Error| x.to_string();
    println!("| trace | cluster | BASE | EPLB (replicas) | CRAFT R = 4 | CRAFT R = 8 | auto R |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    let generated = |name: &str| -> Result<LoadTrace, String> {
        generate(&GenConfig::new(preset(name).map_err(e)?, 256)).map_err(e)
    };
    let v3 = generated("deepseek-v3")?;
    row(
        "generated trace: DeepSeek-V3, 256 batches, seed 7",
        &v3,
        (1, 64, 1),
    )?;
    row(
        "generated trace: DeepSeek-V3, 256 batches, seed 7",
        &v3,
        (8, 8, 8),
    )?;
    drop(v3);
    let kimi = generated("kimi-k2")?;
    row(
        "generated trace: Kimi-K2, 256 batches, seed 7",
        &kimi,
        (8, 8, 1),
    )?;
    drop(kimi);
    let csv = Path::new(&data).join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv");
    let bytes = std::fs::read(&csv).map_err(|x| format!("cannot read {}: {x}", csv.display()))?;
    for dataset in ["wikitext", "bookcorpus", "random"] {
        let options = ReadOptions {
            dataset: Some(dataset.into()),
            ..ReadOptions::default()
        };
        let trace = read_trace(&bytes, &options).map_err(e)?;
        let label = format!(
            "real HarMoEny Qwen1.5-MoE {dataset}, {} batches",
            trace.num_batches()
        );
        row(&label, &trace, (1, 4, 1))?;
    }
    Ok(())
}

/// One row: `trace` split 75 / 25, planned on `(nodes, GPUs per node,
/// groups)`.
fn row(
    label: &str,
    trace: &LoadTrace,
    (n, g, groups): (usize, usize, usize),
) -> Result<(), String> {
    let e = |x: moeplan::Error| x.to_string();
    let split = trace.holdout_split(0.25).map_err(e)?;
    let topology = Topology::new(n, g).map_err(e)?;
    let s = sweep(
        &split.plan,
        &split.eval,
        topology,
        groups,
        &CraftOptions::default(),
    )
    .map_err(e)?;
    let find = |method: &str, r: f64| {
        s.rows
            .iter()
            .find(|x| x.method == method && (r < 0.0 || x.replicas_per_gpu == r))
            .ok_or_else(|| format!("{label}: no {method} row at R = {r}"))
    };
    let base = find("base", -1.0)?;
    let eplb = find("eplb", -1.0)?;
    let share = |b: f64| 100.0 * (b - base.balancedness) / (eplb.balancedness - base.balancedness);
    let craft = |r: f64| -> Result<String, String> {
        let c = find("craft", r)?;
        Ok(format!(
            "{:.4} ({:.0} %)",
            c.balancedness,
            share(c.balancedness)
        ))
    };
    let cluster = if groups > 1 {
        format!("{n} × {g}, {groups} groups")
    } else {
        format!("{n} × {g}")
    };
    println!(
        "| {label} | {cluster} | {:.4} | {:.4} ({}) | {} | {} | {} |",
        base.balancedness,
        eplb.balancedness,
        thousands(eplb.replicas),
        craft(4.0)?,
        craft(8.0)?,
        s.auto_replicas_per_gpu
    );
    Ok(())
}
