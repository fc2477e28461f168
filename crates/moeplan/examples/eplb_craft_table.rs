//! The first two tables of docs/results-eplb-craft.md: EPLB against its
//! own redundant-expert budget, and CRAFT against EPLB, on one real SGLang
//! DeepSeek-V3 dump, printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example eplb_craft_table -- ../shared/data/sglang-deepseek-v3/prefill_in4096.json
//! ```
//!
//! 1 node × 64 GPUs, 1 expert group, the even split over copies
//! (`evaluate`); the dump is one whole-run total, so every figure is
//! in-sample. Table 1: contiguous, then EPLB with 0, 64, 128, 192 and 256
//! redundant experts per layer (what `moeplan plan --algo eplb
//! --redundant-experts K` writes). Table 2: BASE (EPLB with none), CRAFT
//! at R = 1, 2, 4, 8, 16 (refined, and the paper's placement without the
//! refinement, `--no-refine`) and EPLB with one redundant expert per GPU
//! per layer; replica memory is the fullest GPU's replica slots at
//! DeepSeek-V3's expert size (its preset's FP8 weights).

use std::path::Path;
use std::process::ExitCode;

use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::contiguous;
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::{EvalReport, Plan, Topology, evaluate};

#[path = "common/text.rs"]
mod text;
use text::thousands;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("eplb_craft_table: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: eplb_craft_table DUMP.json (an SGLang DeepSeek-V3 dump)")?;
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let trace = read_trace(&bytes, &ReadOptions::default()).map_err(|e| format!("{path}: {e}"))?;
    let name = Path::new(&path)
        .file_name()
        .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
    let e = |x: moeplan::Error| x.to_string();
    let topo = Topology::new(1, 64).map_err(e)?;
    let d = topo.num_gpus();
    let judge = |p: &Plan| evaluate(&trace, p).map_err(e);
    let eplb_k = |k| {
        eplb(
            &trace,
            topo,
            EplbConfig {
                redundant_experts: k,
                groups: 1,
            },
        )
        .map_err(e)
    };

    println!("{name}, in-sample, 1 × 64 GPUs, 1 group, even split over copies:\n");
    println!(
        "| plan | redundant experts | balancedness | imbalance ratio | replicas | slots / GPU | same-GPU duplicates |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let row1 = |plan: &str, k: &str, r: &EvalReport| {
        println!(
            "| {plan} | {k} | {:.4} | {:.4} | {} | {} | {} |",
            r.balancedness,
            r.imbalance_ratio,
            thousands(r.replicas),
            r.slots_per_gpu_max,
            r.same_gpu_duplicates
        );
    };
    row1(
        "contiguous",
        "—",
        &judge(&contiguous(&trace, topo).map_err(e)?)?,
    );
    let base = judge(&eplb_k(0)?)?;
    row1("EPLB (BASE)", "0", &base);
    let mut eplb_one = None;
    for k in [d, 2 * d, 3 * d, 4 * d] {
        let r = judge(&eplb_k(k)?)?;
        row1("EPLB", &k.to_string(), &r);
        eplb_one.get_or_insert(r);
    }
    let eplb_one = eplb_one.ok_or("no EPLB plan")?;

    let expert_gib = preset("deepseek-v3").map_err(e)?.expert_bytes() as f64 / (1u64 << 30) as f64;
    let memory =
        |r: &EvalReport| format!("{:.2} GiB", r.replica_slots_fullest_gpu as f64 * expert_gib);
    let share = |b: f64| (b - base.balancedness) / (eplb_one.balancedness - base.balancedness);
    let refined = Craft::prepare(&trace, topo, &CraftOptions::default()).map_err(e)?;
    let paper = Craft::prepare(
        &trace,
        topo,
        &CraftOptions {
            refine: false,
            ..CraftOptions::default()
        },
    )
    .map_err(e)?;
    println!(
        "\n{name}, in-sample, 1 × 64 GPUs; share = the fraction of EPLB's gain over BASE (EPLB with {} replicas) that a plan reaches:\n",
        thousands(eplb_one.replicas)
    );
    println!(
        "| plan | replicas | replica memory / GPU | balancedness | share of EPLB's gain | paper's placement (`--no-refine`) | bound |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    println!(
        "| BASE | 0 | 0 | {:.4} | — | — | {:.4} |",
        base.balancedness, base.bound
    );
    for r in [1, 2, 4, 8, 16] {
        let budget = ReplicaBudget::ReplicasPerGpu(r);
        let a = judge(&refined.plan(budget).map_err(e)?.plan)?;
        let p = judge(&paper.plan(budget).map_err(e)?.plan)?;
        println!(
            "| CRAFT R = {r} | {} | {} | {:.4} | {:.0} % | {:.4} ({:.0} %) | {:.4} |",
            thousands(a.replicas),
            memory(&a),
            a.balancedness,
            100.0 * share(a.balancedness),
            p.balancedness,
            100.0 * share(p.balancedness),
            a.bound
        );
    }
    println!(
        "| EPLB, 1 per GPU per layer | {} | {} | {:.4} | 100 % | | {:.4} |",
        thousands(eplb_one.replicas),
        memory(&eplb_one),
        eplb_one.balancedness,
        eplb_one.bound
    );
    Ok(())
}
