//! The relabelling table of docs/replan.md: what moving from a served plan
//! to a fresh one copies, as numbered and relabelled onto the served
//! plan's GPUs, on the real SGLang DeepSeek-V3 dumps, printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example relabel_table -- ../shared/data/sglang-deepseek-v3
//! ```
//!
//! 8 × 8 GPUs. The served plan is made on `prefill_in4096.json`, the new
//! one on another dump (and on the same one again): EPLB with 64
//! redundant experts per layer and 8 groups (its hierarchical policy, as
//! `moeplan plan --redundant-experts 64 --groups 8`), and CRAFT at R = 8
//! (`--algo craft --replicas-per-gpu 8`). Copies, bytes and the pause are
//! `judge::migration`'s at DeepSeek-V3's expert size on `h100-ib-ndr`, as
//! `moeplan plan --from served.json` prints them.
//!
//! Then the incremental re-plans' tables: the served plan (EPLB, then
//! CRAFT R = 8, made on `prefill_in4096`) when the workload becomes
//! `decode_in1000out1000`, left as is, replaced by a fresh plan relabelled,
//! or adjusted within a copy budget
//! (`planners::shared::incremental`, as `moeplan plan --from served.json
//! --max-moved-experts N`). Balancedness is in-sample on the new workload
//! under `even`; the predicted MoE layer is the time model's on
//! `h100-ib-ndr` (its default assumptions, DeepSeek-V3), as
//! `moeplan eval --hardware h100-ib-ndr` prints it.

use std::path::Path;
use std::process::ExitCode;

use moeplan::data::hardware;
use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::judge::cost::Pricing;
use moeplan::judge::{CostModel, Rule, Served, judge};
use moeplan::judge::{Migration, MoveCost, migration, relabel};
use moeplan::planners::{Craft, CraftOptions, ReplicaBudget};
use moeplan::planners::{EplbConfig, eplb};
use moeplan::planners::{Goal, incremental};
use moeplan::{LoadTrace, Plan, Topology, Workload};

#[path = "common/text.rs"]
mod text;
use text::thousands;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relabel_table: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let folder = std::env::args()
        .nth(1)
        .ok_or("usage: relabel_table DATA/sglang-deepseek-v3")?;
    let e = |x: moeplan::Error| x.to_string();
    let read = |name: &str| -> Result<LoadTrace, String> {
        let path = Path::new(&folder).join(format!("{name}.json"));
        let bytes = std::fs::read(&path).map_err(|x| format!("{}: {x}", path.display()))?;
        read_trace(&bytes, &ReadOptions::default()).map_err(|x| format!("{}: {x}", path.display()))
    };
    let topo = Topology::new(8, 8).map_err(e)?;
    let h100 = hardware::preset("h100-ib-ndr").map_err(e)?;
    let pricing = Pricing::new(h100, preset("deepseek-v3").map_err(e)?);
    let expert_bytes = pricing.assumptions.expert_bytes(&pricing.model);
    let cost = MoveCost::for_hardware(h100);
    let eplb64 = |t: &LoadTrace| {
        eplb(
            t,
            topo,
            EplbConfig {
                redundant_experts: 64,
                groups: 8,
            },
        )
        .map_err(e)
    };
    let craft8 = |t: &LoadTrace| -> Result<Plan, String> {
        let c = Craft::prepare(t, topo, &CraftOptions::default()).map_err(e)?;
        Ok(c.plan(ReplicaBudget::ReplicasPerGpu(8)).map_err(e)?.plan)
    };
    let cell = |m: &Migration, of: Option<usize>| {
        let (intra, inter) = m.bytes(expert_bytes);
        let fewer = match of {
            Some(n) if n > 0 => format!(" (−{:.0} %)", 100.0 * (n - m.copies()) as f64 / n as f64),
            _ => String::new(),
        };
        format!(
            "{} copies{fewer}, {:.0} GB ({:.0} across nodes), {:.1} ms",
            thousands(m.copies()),
            (intra + inter) / 1e9,
            inter / 1e9,
            m.time_us(h100, expert_bytes) / 1e3
        )
    };
    println!(
        "Served: a plan made on prefill_in4096; next: a plan made on another dump. 8 × 8 GPUs, DeepSeek-V3's experts ({expert_bytes} bytes), pauses on {}:\n",
        h100.name
    );
    println!("| planner | next workload | as numbered | relabelled |");
    println!("| --- | --- | --- | --- |");
    let served_on = read("prefill_in4096")?;
    for (name, make) in [
        (
            "EPLB +64, 8 groups",
            &eplb64 as &dyn Fn(&LoadTrace) -> Result<Plan, String>,
        ),
        ("CRAFT R = 8", &craft8),
    ] {
        let served = make(&served_on)?;
        for next_on in [
            "prefill_in2000out100",
            "decode_in1000out1000",
            "prefill_in4096",
        ] {
            let next = make(&read(next_on)?)?;
            let naive = migration(&served, &next).map_err(e)?;
            let ours = migration(&served, &relabel(&served, &next, cost).map_err(e)?).map_err(e)?;
            let label = if next_on == "prefill_in4096" {
                format!("`{next_on}` (the same again)")
            } else {
                format!("`{next_on}`")
            };
            println!(
                "| {name} | {label} | {} | {} |",
                cell(&naive, None),
                cell(&ours, Some(naive.copies()))
            );
        }
    }
    // The incremental re-plans, on the move to the decode workload.
    let next_on = read("decode_in1000out1000")?;
    let work = Workload::new(next_on.clone());
    let model = CostModel::for_model(&pricing.model);
    // balancedness and predicted MoE layer (ms) of a plan on the new workload
    let judged = |p: &Plan| -> Result<(f64, f64), String> {
        let v = judge(
            &work,
            Served::Plan {
                plan: p,
                rule: Rule::Even,
            },
            &model,
            Some(&pricing),
            |_, _| {},
        )
        .map_err(e)?;
        let layer = v.predicted.ok_or("no prediction")?.moe_layer_us;
        Ok((v.report.balancedness, layer / 1e3))
    };
    let row = |what: &str, served: &Plan, p: &Plan| -> Result<String, String> {
        let (b, ms) = judged(p)?;
        let m = migration(served, p).map_err(e)?;
        let (intra, inter) = m.bytes(expert_bytes);
        let moved = if m.copies() == 0 {
            "— | —".to_string()
        } else {
            format!(
                "{:.1} / {:.1} GB | {:.1} ms",
                intra / 1e9,
                inter / 1e9,
                m.time_us(h100, expert_bytes) / 1e3
            )
        };
        Ok(format!(
            "| {what} | {b:.4} | {} | {moved} | {ms:.0} ms |",
            thousands(m.copies())
        ))
    };
    for (name, make, budgets) in [
        (
            "EPLB",
            &eplb64 as &dyn Fn(&LoadTrace) -> Result<Plan, String>,
            &[58, 290, 1160][..],
        ),
        ("CRAFT", &craft8, &[1160][..]),
    ] {
        let served = make(&served_on)?;
        let fresh = relabel(&served, &make(&next_on)?, cost).map_err(e)?;
        println!(
            "\n{name} served (made on prefill_in4096), the workload now decode_in1000out1000; 8 × 8, in-sample, `even`, {}:\n",
            h100.name
        );
        println!(
            "| re-plan | balancedness | copies | moved (inside / across nodes) | pause | predicted MoE layer |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        println!("{}", row("none (served as is)", &served, &served)?);
        println!(
            "{}",
            row(&format!("fresh {name}, relabelled"), &served, &fresh)?
        );
        for &n in budgets {
            let goal = Goal {
                max_moved_experts: Some(n),
                min_balancedness: None,
            };
            let adjusted = incremental(&served, next_on.summed().view(), goal).map_err(e)?;
            let what = format!("incremental, ≤ {} copies", thousands(n));
            println!("{}", row(&what, &served, &adjusted.plan)?);
        }
    }
    Ok(())
}
