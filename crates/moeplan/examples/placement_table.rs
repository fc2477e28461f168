//! The tables of docs/results-eplb-craft.md's "Placement to the optimum":
//! placement against the exact optimum, printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example placement_table -- ../shared/data/sglang-deepseek-v3
//! ```
//!
//! 1. vllm-ascend's published FlashLB example (one layer, loads 600, 560,
//!    120, 120, 20, 10, 10, 10 on 8 devices × 2 slots): the busiest device
//!    under EPLB (moeplan's port), FlashLB (their figure, not recomputed),
//!    CRAFT before and after the joint search, EPLB + repair, and the exact
//!    optimum (the MILP oracle).
//! 2. Every `*.json` SGLang DeepSeek-V3 dump in the folder on 1 × 64 GPUs
//!    (in-sample: each dump is one whole-run total): CRAFT at R = 1, 2, 4,
//!    8, 16 before (swaps only) and after (swaps + joint search), with the
//!    old and the packing-aware bound for the replica counts CRAFT chose;
//!    then EPLB (one redundant expert per GPU per layer) and EPLB + repair
//!    at EPLB's memory, with both bounds for EPLB's counts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::optimal_layer;
use moeplan::planners::peak_load;
use moeplan::planners::replication_order;
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::planners::{JointOptions, joint_layer, repair};
use moeplan::planners::{capacity_aware_placement, refine_placement};
use moeplan::{LoadTrace, Topology, evaluate};
use ndarray::Array3;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    flashlb()?;
    let Some(folder) = std::env::args().nth(1) else {
        println!("\n(no data folder given: the real-data table is skipped)");
        return Ok(());
    };
    real(Path::new(&folder))
}

fn flashlb() -> Result<(), String> {
    let e = |x: moeplan::Error| x.to_string();
    let w = vec![600.0, 560.0, 120.0, 120.0, 20.0, 10.0, 10.0, 10.0];
    let mean = w.iter().sum::<f64>() / 8.0;
    let trace = LoadTrace::new(
        Array3::from_shape_vec((1, 1, 8), w.clone()).map_err(|x| x.to_string())?,
        vec![0],
    )
    .map_err(e)?;
    let topo = Topology::new(1, 8).map_err(e)?;
    let config = EplbConfig {
        redundant_experts: 8,
        groups: 1,
    };
    let eplb_plan = eplb(&trace, topo, config).map_err(e)?;
    let eplb_gpus = &eplb_plan.layers()[0].gpus;
    let repaired = repair(&eplb_plan, trace.summed().view()).map_err(e)?;
    // CRAFT before the joint search: copies to the highest load per copy,
    // greedy placement, swaps
    let order = replication_order(&w, 8, 8);
    let mut copies = vec![1u32; 8];
    order.iter().for_each(|&x| copies[x as usize] += 1);
    let mut before = capacity_aware_placement(&w, &copies, &[2; 8]).map_err(e)?;
    refine_placement(&w, &copies, &mut before);
    let craft = Craft::prepare(&trace, topo, &CraftOptions::default()).map_err(e)?;
    let after = craft
        .plan(ReplicaBudget::ReplicasPerGpu(1))
        .map_err(e)?
        .plan;
    let craft_repaired = repair(&after, trace.summed().view()).map_err(e)?;
    let joint = joint_layer(&w, &[2; 8], None, JointOptions::default()).map_err(e)?;
    let best = optimal_layer(&w, &[2; 8]).map_err(e)?;
    println!("### FlashLB's example (8 devices × 2 slots)\n");
    println!("| plan | busiest device | balancedness |");
    println!("| --- | ---: | ---: |");
    let row = |name: &str, p: f64| println!("| {name} | {p:.1} | {:.3} |", mean / p);
    row(
        "EPLB (moeplan's port; vllm-ascend report 232)",
        peak_load(&w, eplb_gpus),
    );
    row("FlashLB (vllm-ascend's figure)", 205.0);
    row(
        "CRAFT before (counts first, then swaps)",
        peak_load(&w, &before),
    );
    row(
        "CRAFT now (`--replicas-per-gpu 1`)",
        peak_load(&w, &after.layers()[0].gpus),
    );
    row(
        "CRAFT + `--repair`",
        peak_load(&w, &craft_repaired.layers()[0].gpus),
    );
    row(
        "EPLB + `--repair`",
        peak_load(&w, &repaired.layers()[0].gpus),
    );
    row("joint search alone", peak_load(&w, &joint));
    row("exact optimum (MILP oracle)", best.max_load);
    Ok(())
}

fn real(folder: &Path) -> Result<(), String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(|x| format!("cannot list {}: {x}", folder.display()))?
        .filter_map(|x| x.ok().map(|x| x.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let e = |x: moeplan::Error| x.to_string();
    let topo = Topology::new(1, 64).map_err(e)?;
    println!("\n### CRAFT before and after, on 1 × 64 GPUs (in-sample)\n");
    println!(
        "| dump | R | CRAFT before (swaps) | CRAFT after (joint) | old bound | packing-aware bound |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut eplb_rows = Vec::new();
    for path in &files {
        let bytes =
            std::fs::read(path).map_err(|x| format!("cannot read {}: {x}", path.display()))?;
        let trace = read_trace(&bytes, &ReadOptions::default())
            .map_err(|x| format!("{}: {x}", path.display()))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let before = Craft::prepare(
            &trace,
            topo,
            &CraftOptions {
                joint: false,
                ..Default::default()
            },
        )
        .map_err(e)?;
        let after = Craft::prepare(&trace, topo, &CraftOptions::default()).map_err(e)?;
        for r in [1, 2, 4, 8, 16] {
            let b = evaluate(
                &trace,
                &before
                    .plan(ReplicaBudget::ReplicasPerGpu(r))
                    .map_err(e)?
                    .plan,
            )
            .map_err(e)?;
            let after_plan = after
                .plan(ReplicaBudget::ReplicasPerGpu(r))
                .map_err(e)?
                .plan;
            let mut a = evaluate(&trace, &after_plan).map_err(e)?;
            a.add_packing_bound(&trace, &after_plan).map_err(e)?;
            println!(
                "| {stem} | {r} | {:.4} | {:.4} | {:.4} | {:.4} |",
                b.balancedness,
                a.balancedness,
                a.bound,
                a.packing_bound.unwrap_or(f64::NAN)
            );
        }
        let config = EplbConfig {
            redundant_experts: 64,
            groups: 1,
        };
        let plan = eplb(&trace, topo, config).map_err(e)?;
        let fixed = repair(&plan, trace.summed().view()).map_err(e)?;
        let mut p = evaluate(&trace, &plan).map_err(e)?;
        p.add_packing_bound(&trace, &plan).map_err(e)?;
        let f = evaluate(&trace, &fixed).map_err(e)?;
        eplb_rows.push(format!(
            "| {stem} | {:.4} | {:.4} | {:.4} | {:.4} |",
            p.balancedness,
            f.balancedness,
            p.bound,
            p.packing_bound.unwrap_or(f64::NAN)
        ));
    }
    println!("\n### EPLB + repair at EPLB's memory (+64 per layer), 1 × 64 GPUs\n");
    println!("| dump | EPLB | EPLB + `--repair` | old bound | packing-aware bound |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    eplb_rows.iter().for_each(|r| println!("{r}"));
    Ok(())
}
