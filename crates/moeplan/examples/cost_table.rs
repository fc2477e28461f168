//! The three results tables of docs/cost.md, printed as Markdown: CRAFT
//! planning for balance (`--objective mean`) against planning for time
//! (`--objective time`); the cost model against what others measured; and
//! each paper's claim against what the model predicts.
//!
//! ```text
//! cargo run --release -p moeplan --features parallel --example cost_table -- ../shared/data
//! ```
//!
//! Data (the shared data folder, its README): the real SGLang DeepSeek-V3
//! dump `sglang-deepseek-v3/prefill_in4096.json` (one whole-run batch,
//! in-sample), HarMoEny's Qwen1.5-MoE per-batch counts
//! `harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv` (the last 25 % of
//! its batches held out), ESFT's DeepSeek-V2-Lite token routes
//! `esft-deepseek-v2-lite/{intent,summary}` (25 % held out, 1,024-token
//! batches dealt evenly), and moeplan's seeded generator (Kimi-K2, 4
//! batches, seed 7; DeepSeek-V3 and Kimi-K2, 1 batch, for the memory row).
//!
//! Setup: every plan is made and judged as `moeplan compare` makes and
//! judges it (the planner registry with the command's settings, the
//! trace's model else DeepSeek-V3 for the cost, `judge::judge` on the
//! judged batches, BASE the speedups' baseline); the commands are listed
//! under each table in docs/cost.md. Table 1 and 3's "memory row's
//! assumptions" are CRAFT's (BF16 weights, a 4,096-token buffer per peer,
//! memory fraction 0.6725), with decode batches holding 2,048 tokens of
//! context. Table 2 is `moeplan::studies::cost_checks`: the published and
//! measured figures (cited there) beside the model's, the same rows
//! `crates/moeplan/src/tests/cost.rs` holds within their gaps.

use std::path::Path;
use std::process::ExitCode;

use moeplan::data::hardware;
use moeplan::data::model;
use moeplan::formats::dataset::{self, Dataset, Sources, Split};
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::judge::cost::{self, Assumptions, LOW_LATENCY_OVERHEAD_US, Phase, Pricing};
use moeplan::judge::{CostModel, Rule, Served, Verdict, judge};
use moeplan::planners::{self, Settings};
use moeplan::studies::{self as checks, Pair};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Plan, Topology};

#[path = "common/mod.rs"]
mod common;
#[path = "common/text.rs"]
mod text;
use text::thousands;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cost_table: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn err(x: moeplan::Error) -> String {
    x.to_string()
}

fn run() -> Result<(), String> {
    let data = std::env::args()
        .nth(1)
        .ok_or("usage: cost_table DATA (the shared data folder)")?;
    let data = Path::new(&data);
    let v3 = read_file(&data.join("sglang-deepseek-v3/prefill_in4096.json"))?;
    let harmoeny = read_file(&data.join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv"))?;
    // CRAFT's serving (the memory row's assumptions), decode at 2,048.
    let craft_ran = Assumptions {
        phase: Phase::Decode,
        context_tokens: 2048,
        ..checks::craft_assumptions()
    };
    let a100 = Bench::new(&v3, (8, 8), None, Rule::Even, "a100-80g-efa", craft_ran)?;
    let h200 = Bench::new(
        &harmoeny,
        (1, 8),
        Some(0.25),
        Rule::Even,
        "h200-ib-ndr",
        Assumptions::default(),
    )?;
    objectives_table(&a100, &h200)?;
    measured_table(&v3.trace)?;
    claims_table(data, &a100, &h200, craft_ran)
}

/// Table 1: CRAFT's objectives, at a fixed R and at its automatic one.
fn objectives_table(a100: &Bench, h200: &Bench) -> Result<(), String> {
    println!(
        "CRAFT planning for balance against planning for time, predicted tokens/s (`moeplan compare`):\n"
    );
    println!("| data | setup | CRAFT, `--objective mean` | CRAFT, `--objective time` |");
    println!("| --- | --- | --- | --- |");
    let craft = |b: &Bench, objective: &str, r: Option<&str>| {
        let mut set = vec![("objective", objective)];
        set.extend(r.map(|r| ("replicas_per_gpu", r)));
        b.run("craft", &set)
    };

    // Real DeepSeek-V3 on 8 × 8 A100s, decode.
    let (mean8, mean_auto) = (craft(a100, "mean", Some("8"))?, craft(a100, "mean", None)?);
    let (time8, time_auto) = (craft(a100, "time", Some("8"))?, craft(a100, "time", None)?);
    let eplb = a100.run("eplb", &[])?;
    let knee = if mean_auto.budget == mean8.budget && tps(&mean_auto) == tps(&mean8) {
        "the same".to_string()
    } else {
        tps(&mean_auto)
    };
    println!(
        "| real `sglang-deepseek-v3/prefill_in4096.json`, in-sample (one whole-run batch) | {}, `{}`, the memory row's assumptions, decode, context {} | {}: {} tokens/s; auto (knee) {}: {knee} | {}: {}; auto **{}: {}** ({:.3}× EPLB's {}, where the mean objective's knee gives {:.3}×) |",
        shape(a100.topology),
        a100.hardware,
        thousands(a100.pricing.assumptions.context_tokens),
        mean8.budget_label(),
        tps(&mean8),
        mean_auto.budget_label(),
        time8.budget_label(),
        tps(&time8),
        time_auto.budget_label(),
        tps(&time_auto),
        time_auto.tokens_per_s() / eplb.tokens_per_s(),
        tps(&eplb),
        mean_auto.tokens_per_s() / eplb.tokens_per_s(),
    );

    // Real HarMoEny Qwen1.5-MoE on one H200 node, prefill, held out.
    let (mean2, mean_auto) = (craft(h200, "mean", Some("2"))?, craft(h200, "mean", None)?);
    let (time2, time_auto) = (craft(h200, "time", Some("2"))?, craft(h200, "time", None)?);
    let eplb = h200.run("eplb", &[])?;
    let gain =
        |a: &Judged, b: &Judged| signed(100.0 * (a.tokens_per_s() / b.tokens_per_s() - 1.0), 1);
    let side = if time_auto.tokens_per_s() > eplb.tokens_per_s() {
        "above"
    } else {
        "below"
    };
    println!(
        "| real HarMoEny `expert_freq_qwen_datasets.csv`, **held-out** 25 % | {}, `{}`, prefill | {}: {}; auto (knee) {}: {} | {}: **{}** ({} %); auto **{}: {}** ({} % over the knee, {side} {}'s {} with {} replicas to its {}) |",
        shape(h200.topology),
        h200.hardware,
        mean2.budget_label(),
        tps(&mean2),
        mean_auto.budget_label(),
        tps(&mean_auto),
        time2.budget_label(),
        tps(&time2),
        gain(&time2, &mean2),
        time_auto.budget_label(),
        tps(&time_auto),
        gain(&time_auto, &mean_auto),
        eplb.title,
        tps(&eplb),
        thousands(time_auto.verdict.report.replicas),
        thousands(eplb.verdict.report.replicas),
    );
    Ok(())
}

/// Table 2: the cost model against published measurements.
fn measured_table(v3: &LoadTrace) -> Result<(), String> {
    println!(
        "\nThe cost model against what others measured (ours: `crates/moeplan/src/tests/cost.rs`):\n"
    );
    println!("| what | theirs | ours | gap | command |");
    println!("| --- | --- | --- | --- | --- |");
    h100_row(v3)?;
    memory_row()?;
    deepep_rows()
}

/// moeplan-cuda's H100 rank times against the compute term
/// ([`checks::h100_rank_times`], what `src/tests/cost.rs` holds within 10 %).
fn h100_row(trace: &LoadTrace) -> Result<(), String> {
    // How the plans are named in the cell, in the cell's order.
    const NAMES: [(&str, &str); 5] = [
        ("base", "BASE"),
        ("eplb", "EPLB +64"),
        ("craft8", "CRAFT R = 8"),
        ("craft16", "R = 16 (60)"),
        ("contiguous", "contiguous"),
    ];
    // docs/cuda.md table (c), layer 3, CRAFT R = 8: the rows' balancedness
    // (the planner's metric) and the measured time balance.
    const CRAFT_ROWS_TO_TIME: (f64, f64) = (0.926, 0.772);
    let rows = checks::h100_rank_times(trace).map_err(err)?;
    let cell = |pick: &dyn Fn(&Pair) -> f64, ms: bool| {
        NAMES
            .iter()
            .enumerate()
            .map(|(i, (id, shown))| {
                let xs: Vec<String> = rows
                    .iter()
                    .filter(|r| r.0 == *id)
                    .map(|r| format!("{:.3}", pick(&r.2)))
                    .collect();
                let unit = if ms && i == 0 { " ms" } else { "" };
                let label = if ms {
                    format!("{shown} ")
                } else {
                    String::new()
                };
                format!("{label}{}{unit}", xs.join(" / "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let gaps = |planners: &[&str]| -> Vec<f64> {
        rows.iter()
            .filter(|r| planners.contains(&r.0))
            .map(|r| 100.0 * r.2.gap())
            .collect()
    };
    let (rows_b, time_b) = CRAFT_ROWS_TO_TIME;
    println!(
        "| **Compute**, moeplan-cuda H100 rank times (docs/cuda.md (c); real `prefill_in4096.json`, 1 × 64, vLLM rule, BF16 experts), layer 3 / 30 / 60 | {} | {} | {} % (BASE, EPLB, CRAFT; the aim: 10 %), contiguous {} %. The token metric missed CRAFT's time by {:.0} % | `cargo test -p moeplan --test cost h100 -- --nocapture` |",
        cell(&|p| p.theirs, true),
        cell(&|p| p.ours, false),
        range(&gaps(&["base", "eplb", "craft8", "craft16"]), " to "),
        range(&gaps(&["contiguous"]), "–"),
        100.0 * (1.0 - time_b / rows_b),
    );
    Ok(())
}

/// CRAFT §5.3's KV-cache loss ([`checks::craft_kv_loss`]).
fn memory_row() -> Result<(), String> {
    let rows = checks::craft_kv_loss().map_err(err)?;
    let theirs: Vec<String> = rows.iter().map(|p| format!("{:.0} %", p.theirs)).collect();
    let shown: Vec<String> = rows.iter().map(|p| format!("{:.1} %", p.ours)).collect();
    let gaps: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let g = p.ours - p.theirs;
            let g = if g.abs() < 0.05 {
                "0".to_string()
            } else {
                signed(g, 1)
            };
            if i == checks::CRAFT_KV_FITTED {
                format!("{g} (fitted)")
            } else {
                g
            }
        })
        .collect();
    println!(
        "| **Memory**, CRAFT §5.3: EPLB's one replica per layer per GPU shrinks the KV cache (A100-80GB; D × 8, K × 6, K × 12) | {} | {} | {} points | `cargo test -p moeplan --test cost craft_kv -- --nocapture` |",
        theirs.join(", "),
        shown.join(", "),
        gaps.join(", ")
    );
    Ok(())
}

/// DeepEP's kernel tables ([`checks::deepep_low_latency`],
/// [`checks::deepep_normal`]).
fn deepep_rows() -> Result<(), String> {
    let h = hardware::preset("h800-ib-ndr").map_err(err)?;
    let join = |xs: Vec<f64>| {
        xs.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    type Row = (usize, Pair, Pair);
    let eps = |rows: &[Row]| {
        rows.iter()
            .map(|r| r.0.to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let col = |rows: &[Row], pick: &dyn Fn(&Row) -> f64| rows.iter().map(pick).collect::<Vec<_>>();
    let ll = checks::deepep_low_latency().map_err(err)?;
    // Where the preset carries kernel times (the H100's fit), they are the
    // fixed part; without them one row set a fixed overhead.
    let fixed = match h.kernels {
        Some(k) => format!(
            "fixed {:.0} / {:.0} µs and {:.0} GB/s inside a node: the H100's fitted kernels on the H800's NVLink",
            k.low_latency.dispatch_fixed_us,
            k.low_latency.combine_fixed_us,
            k.low_latency.intra_gb_per_s
        ),
        None => format!(
            "EP {} set the {LOW_LATENCY_OVERHEAD_US:.0} µs overhead",
            ll.last().map_or(0, |r| r.0)
        ),
    };
    println!(
        "| **Communication**, DeepEP low-latency kernels (H800, 128 tokens × top-8, FP8 dispatch / BF16 combine), EP {} | dispatch {} µs; combine {} µs | {}; {} | dispatch {} % ({fixed}), combine {} % | `cargo test -p moeplan --test cost deepep -- --nocapture` |",
        eps(&ll),
        join(col(&ll, &|r| r.1.theirs)),
        join(col(&ll, &|r| r.2.theirs)),
        join(col(&ll, &|r| r.1.ours)),
        join(col(&ll, &|r| r.2.ours)),
        range(&col(&ll, &|r| 100.0 * r.1.gap()), " to "),
        range(&col(&ll, &|r| 100.0 * r.2.gap()), " to "),
    );
    let normal = checks::deepep_normal().map_err(err)?;
    let list = |xs: Vec<f64>| {
        xs.iter()
            .map(|x| signed(100.0 * x, 0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| **Communication**, DeepEP normal kernels (H800, 4,096 tokens × top-8), bottleneck bandwidth EP {} | dispatch {} GB/s; combine {} | {}; {} | {} %; {} %. Here the model's answer is its bandwidth less fixed times (inside a node the H100's fitted kernel bandwidth on the H800's NVLink, across nodes the link's sustained share), so across nodes this checks the efficiencies only; DeepEP's EP 32 figure exceeds the port's ~{:.0} GB/s, which logical-bandwidth accounting (local traffic counted) explains | same |",
        eps(&normal),
        join(col(&normal, &|r| r.1.theirs)),
        join(col(&normal, &|r| r.2.theirs)),
        join(col(&normal, &|r| r.1.ours)),
        join(col(&normal, &|r| r.2.ours)),
        list(col(&normal, &|r| r.1.gap())),
        list(col(&normal, &|r| r.2.gap())),
        h.inter_node.gb_per_s,
    );
    Ok(())
}

/// Table 3: each paper's claim against the model's prediction.
fn claims_table(
    data: &Path,
    a100: &Bench,
    h200: &Bench,
    craft_ran: Assumptions,
) -> Result<(), String> {
    println!("\nEach paper's claim against what the model predicts (`moeplan compare`):\n");
    println!("| paper's claim | setup here | predicted | verdict |");
    println!("| --- | --- | --- | --- |");

    // CRAFT (seed 000) §5.2: R = 8 gives 1.15× EPLB's goodput.
    const CRAFT_OVER_EPLB: f64 = 1.15;
    let r8 = [("replicas_per_gpu", "8")];
    let craft = a100.run("craft", &r8)?;
    let eplb = a100.run("eplb", &r8)?;
    let base = a100.run("base", &r8)?;
    let x = craft.tokens_per_s() / eplb.tokens_per_s();
    let verdict = match direction(CRAFT_OVER_EPLB, x) {
        Direction::Smaller => format!(
            "same direction, {:.0} % of the gain: the capped decode batch here is far from the paper's request mix",
            100.0 * (x - 1.0) / (CRAFT_OVER_EPLB - 1.0)
        ),
        d => d.words().to_string(),
    };
    println!(
        "| CRAFT R = 8 {CRAFT_OVER_EPLB:.2}× EPLB's goodput, DeepSeek-R1 on 8 × 8 A100 (seed 000 §5.2) | real `prefill_in4096.json` (in-sample), `{}`, BF16, `--phase decode --context {}`, the memory row's assumptions | {} {} tokens/s, {} {}, {} {}: **{x:.2}× EPLB**, {:.2}× BASE | {verdict} |",
        a100.hardware,
        a100.pricing.assumptions.context_tokens,
        craft.title,
        tps(&craft),
        eplb.title,
        tps(&eplb),
        base.title,
        tps(&base),
        craft.tokens_per_s() / base.tokens_per_s(),
    );

    // CRAFT Fig. 9 and §5.4, Kimi-K2 on 6 nodes: EPLB 46 % below BASE on
    // average, CRAFT R = 8 1.14× BASE. No real Kimi-K2 trace: generated.
    const EPLB_OVER_BASE: f64 = 1.0 - 0.46;
    const CRAFT_OVER_BASE: f64 = 1.14;
    let kimi = generate(&GenConfig::new(model::preset("kimi-k2").map_err(err)?, 4)).map_err(err)?;
    let batches = kimi.num_batches();
    let kimi = Dataset {
        trace: kimi,
        sources: Sources::Even,
    };
    let k6 = Bench::new(&kimi, (6, 8), None, Rule::Even, "a100-80g-efa", craft_ran)?;
    let base = k6.run("base", &r8)?;
    let eplb = k6.run("eplb", &r8)?;
    let craft = k6.run("craft", &r8)?;
    let kv = |j: &Judged| j.prediction().map_or(0.0, |p| p.kv_cache_gib_per_gpu);
    let x = eplb.tokens_per_s() / base.tokens_per_s();
    let verdict = match direction(EPLB_OVER_BASE, x) {
        Direction::Larger => {
            "same direction, larger: the model charges every lost request in full".to_string()
        }
        d => d.words().to_string(),
    };
    println!(
        "| EPLB below BASE on Kimi-K2 at 6 nodes (Fig. 9; {:.0} % lower on average) | generated Kimi-K2 trace ({batches} batches, no real one), {}, same flags | {} **{x:.2}× BASE** (KV {:.1} vs {:.1} GiB per GPU) | {verdict} |",
        100.0 * (1.0 - EPLB_OVER_BASE),
        shape(k6.topology),
        eplb.title,
        kv(&eplb),
        kv(&base),
    );
    let x = craft.tokens_per_s() / base.tokens_per_s();
    let requests = |j: &Judged| j.prediction().map_or(0.0, |p| p.max_concurrent_requests);
    let verdict = match direction(CRAFT_OVER_BASE, x) {
        Direction::Disagrees => format!(
            "**disagrees**: on this generated trace CRAFT's {} slots per GPU cost more cache than its balance repays; CRAFT's real Kimi traces are more skewed",
            craft.budget.unwrap_or(0)
        ),
        d => d.words().to_string(),
    };
    println!(
        "| {} {CRAFT_OVER_BASE:.2}× BASE at 6 nodes (§5.4) | same | **{x:.2}× BASE** (KV {:.1} GiB: {} % requests for {} balancedness) | {verdict} |",
        craft.title,
        kv(&craft),
        signed(100.0 * (requests(&craft) / requests(&base) - 1.0), 0),
        signed(
            craft.verdict.report.balancedness - base.verdict.report.balancedness,
            2
        ),
    );

    grace_row(data)?;

    // Libra (seed 004): up to 19.2 % more prefill throughput, 8 × H200.
    const LIBRA_GAIN: f64 = 1.192;
    let k4 = [("redundant_experts", "4")];
    let libra = h200.run("libra", &k4)?;
    let eplb = h200.run("eplb", &k4)?;
    let x = libra.tokens_per_s() / eplb.tokens_per_s();
    let verdict = match direction(LIBRA_GAIN, x) {
        Direction::Larger => "same direction, larger: the model hides copies under the previous MoE layer only and times Libra's rebalancer at zero".to_string(),
        d => d.words().to_string(),
    };
    let p = libra.prediction().ok_or("Libra: no prediction")?;
    println!(
        "| Libra up to {:.1} % more prefill throughput, 8 × H200 (seed 004) | real HarMoEny Qwen1.5-MoE per-batch trace (held-out 25 %), {}, `{}` | Libra {} tokens/s vs {} {} (**{x:.2}×**), with {:.1} ms of copies per {:.0} ms step not hidden | {verdict} |",
        100.0 * (LIBRA_GAIN - 1.0),
        shape(h200.topology),
        h200.hardware,
        tps(&libra),
        eplb.title,
        tps(&eplb),
        p.copy_exposed_us / 1e3,
        p.step_ms,
    );
    Ok(())
}

/// GRACE-MoE on ESFT's token routes, its own topology-aware dispatch, on
/// the paper's 4090s with 25 GbE and on H100s with InfiniBand.
fn grace_row(data: &Path) -> Result<(), String> {
    // The order the cell names them in: intent 2 × 2, intent 2 × 4,
    // summary 2 × 2, summary 2 × 4.
    const SETUPS: [(&str, usize); 4] =
        [("intent", 2), ("intent", 4), ("summary", 2), ("summary", 4)];
    // (hardware, trace, GPUs per node) → (grace, contiguous, base, eplb)
    let mut runs: Vec<(&str, &str, usize, [Judged; 4], f64)> = Vec::new();
    for folder in ["intent", "summary"] {
        // as `moeplan compare --trace FOLDER` reads it: 1,024-token batches
        let dataset =
            common::read_folder_as_cli(&data.join("esft-deepseek-v2-lite").join(folder), 1024)?;
        for gpus in [2, 4] {
            for hw in ["4090-pcie4-25gbe", "h100-ib-ndr"] {
                let b = Bench::new(
                    &dataset,
                    (2, gpus),
                    Some(0.25),
                    Rule::GraceTopology,
                    hw,
                    Assumptions::default(),
                )?;
                let grace = b.run("grace", &[])?;
                // GRACE's balancedness under the even split (what
                // `compare --dispatch even` reports for the same plan).
                let even = judge(
                    b.split.judged(),
                    Served::Plan {
                        plan: &grace.plan,
                        rule: Rule::Even,
                    },
                    &b.cost,
                    None,
                    |_, _| {},
                )
                .map_err(err)?
                .report
                .balancedness;
                let plans = [
                    grace,
                    b.run("contiguous", &[])?,
                    b.run("base", &[])?,
                    b.run("eplb", &[])?,
                ];
                runs.push((hw, folder, gpus, plans, even));
            }
        }
    }
    let on = |hw: &str| -> Vec<&(&str, &str, usize, [Judged; 4], f64)> {
        let mut v: Vec<_> = runs.iter().filter(|r| r.0 == hw).collect();
        v.sort_by_key(|r| SETUPS.iter().position(|s| (s.0, s.1) == (r.1, r.2)));
        v
    };
    let slow = on("4090-pcie4-25gbe");
    let fast = on("h100-ib-ndr");
    let term = |j: &Judged, f: fn(&cost::Prediction) -> f64| j.prediction().map_or(0.0, f);
    let a2a = |p: &cost::Prediction| p.dispatch_us + p.combine_us;
    let compute = |p: &cost::Prediction| p.compute_us;
    let layer = |p: &cost::Prediction| p.moe_layer_us;
    // GRACE against plan `i` (1 contiguous, 2 BASE, 3 EPLB), in percent.
    let vs =
        |r: &(&str, &str, usize, [Judged; 4], f64), i: usize, f: fn(&cost::Prediction) -> f64| {
            100.0 * (term(&r.3[0], f) / term(&r.3[i], f) - 1.0)
        };
    let a2a_vs: Vec<f64> = slow.iter().map(|r| vs(r, 1, a2a)).collect();
    let compute_vs: Vec<f64> = slow.iter().map(|r| vs(r, 1, compute)).collect();
    let layer_vs: Vec<f64> = slow.iter().map(|r| vs(r, 1, layer)).collect();
    let others: Vec<f64> = slow
        .iter()
        .flat_map(|r| [vs(r, 2, layer), vs(r, 3, layer)])
        .collect();
    let fast_vs: Vec<f64> = fast.iter().map(|r| vs(r, 1, layer)).collect();
    let first = slow.first().ok_or("no GRACE run")?;
    let (g, c) = (&first.3[0], &first.3[1]);
    let even_min = runs.iter().map(|r| r.4).fold(f64::INFINITY, f64::min);
    println!(
        "| GRACE-MoE 2.1–75.5 % lower MoE layer time than its baselines, 4090 + 25 GbE (seed 003 §5) | real ESFT token routes (held-out 25 %), DeepSeek-V2-Lite, `grace-topology` dispatch, 2 × 2 and 2 × 4 | `4090-pcie4-25gbe`: GRACE's all-to-all {} contiguous's ({:.0} vs {:.0} µs, 2 × 2 intent) but compute {} ({:.0} vs {:.0} µs): layer {} % (intent 2 × 2), {} % (intent 2 × 4), {} % / {} % (summary) vs contiguous, and {} % vs BASE and EPLB. `h100-ib-ndr`: {} % vs contiguous | {} |",
        relative(&a2a_vs),
        term(g, a2a),
        term(c, a2a),
        relative(&compute_vs),
        term(g, compute),
        term(c, compute),
        signed(layer_vs[0], 0),
        signed(layer_vs[1], 0),
        signed(layer_vs[2], 0),
        signed(layer_vs[3], 0),
        range(&others, " to "),
        range(&fast_vs, " to "),
        grace_verdict(&layer_vs, &others, &fast_vs, even_min),
    );
    Ok(())
}

/// What the GRACE figures say, in words.
fn grace_verdict(
    slow_vs_contiguous: &[f64],
    slow_vs_others: &[f64],
    fast: &[f64],
    even: f64,
) -> String {
    let wins = |xs: &[f64]| xs.iter().any(|&x| x < 0.0);
    if wins(slow_vs_contiguous) && !wins(slow_vs_others) && !wins(fast) {
        format!(
            "wins only where links are slow and only against contiguous; on H100 + IB compute dominates and GRACE's grouping (balancedness down to {even:.2} under even dispatch) costs more than it saves"
        )
    } else {
        format!(
            "GRACE's MoE layer is faster than contiguous's in {} of {} setups on `4090-pcie4-25gbe`, than BASE's or EPLB's in {} of {}, and than contiguous's in {} of {} on `h100-ib-ndr` (balancedness down to {even:.2} under even dispatch)",
            slow_vs_contiguous.iter().filter(|&&x| x < 0.0).count(),
            slow_vs_contiguous.len(),
            slow_vs_others.iter().filter(|&&x| x < 0.0).count(),
            slow_vs_others.len(),
            fast.iter().filter(|&&x| x < 0.0).count(),
            fast.len(),
        )
    }
}

/// One `moeplan compare` setup: the trace split as the command splits it,
/// priced as the command prices it (`Cost::choose(None, trace).priced`).
struct Bench {
    split: Split,
    topology: Topology,
    rule: Rule,
    hardware: &'static str,
    cost: CostModel,
    pricing: Pricing,
}

/// One planner's plan judged: what `compare` prints as one row.
struct Judged {
    /// The plan's title: `EPLB +64`, `CRAFT R = 8`, `BASE`.
    title: String,
    /// Its budget (`auto` resolved).
    budget: Option<usize>,
    /// Its unit's label of the budget: `R = 8`, `+64`.
    unit_label: Option<String>,
    plan: Plan,
    verdict: Verdict,
}

impl Judged {
    fn prediction(&self) -> Option<&cost::Prediction> {
        self.verdict.predicted.as_ref()
    }

    fn tokens_per_s(&self) -> f64 {
        self.prediction().map_or(0.0, |p| p.tokens_per_s)
    }

    /// `R = 8`, or the title when the planner has no budget.
    fn budget_label(&self) -> String {
        self.unit_label
            .clone()
            .unwrap_or_else(|| self.title.clone())
    }
}

impl Bench {
    fn new(
        dataset: &Dataset,
        (nodes, gpus): (usize, usize),
        holdout: Option<f64>,
        rule: Rule,
        hardware: &'static str,
        assumptions: Assumptions,
    ) -> Result<Bench, String> {
        let trace = &dataset.trace;
        // The trace's model when it is a preset, else DeepSeek-V3.
        let preset = match trace.model().and_then(|n| model::preset(n).ok()) {
            Some(p) => p,
            None => model::preset("deepseek-v3").map_err(err)?,
        };
        assumptions.check().map_err(err)?;
        let pricing = Pricing {
            hardware: hardware::preset(hardware).map_err(err)?.clone(),
            model: *preset,
            assumptions,
        };
        let topology = Topology::new(nodes, gpus).map_err(err)?;
        let mut notes = Vec::new();
        let split = dataset::split(
            trace.clone(),
            &dataset.sources,
            holdout,
            topology,
            Some(rule),
            &mut notes,
        )
        .map_err(err)?;
        Ok(Bench {
            split,
            topology,
            rule,
            hardware,
            cost: CostModel::for_model(preset),
            pricing,
        })
    }

    /// Planner `id` with the flags `set` (name, value), planned on the
    /// planning batches and judged on the judged ones: a per-batch planner
    /// through its schedule, any other under the setup's rule.
    fn run(&self, id: &str, set: &[(&str, &str)]) -> Result<Judged, String> {
        let planner = planners::find(id).map_err(err)?;
        let mut settings = Settings::new();
        for (name, value) in set {
            settings.set_str(name, value).map_err(err)?;
        }
        let settings = settings.priced(Some(self.pricing.clone()));
        let budget = match planner.budget() {
            Some(spec) => settings.budget(spec).map_err(err)?,
            None => None,
        };
        let ready = planners::prepare(planner, &self.split.planning, self.topology, &settings)
            .map_err(|e| format!("{id}: {e}"))?;
        let planned = ready.plan(budget).map_err(|e| format!("{id}: {e}"))?;
        let work = self.split.judged();
        let schedule = ready.schedule(&planned.plan, work).map_err(err)?;
        let served = match &schedule {
            Some(s) => Served::Schedule {
                base: &planned.plan,
                schedule: s,
            },
            None => Served::Plan {
                plan: &planned.plan,
                rule: self.rule,
            },
        };
        let verdict = judge(work, served, &self.cost, Some(&self.pricing), |_, _| {})
            .map_err(|e| format!("{id}: {e}"))?;
        Ok(Judged {
            title: planner.title(planned.budget),
            budget: planned.budget,
            unit_label: planner
                .budget_unit()
                .zip(planned.budget)
                .map(|(u, n)| u.label(n)),
            plan: planned.plan,
            verdict,
        })
    }
}

/// Where a result lies against a paper's factor (both over the same
/// baseline).
enum Direction {
    Larger,
    Smaller,
    Disagrees,
}

impl Direction {
    fn words(&self) -> &'static str {
        match self {
            Direction::Larger => "same direction, larger",
            Direction::Smaller => "same direction, smaller",
            Direction::Disagrees => "**disagrees**",
        }
    }
}

/// `ours` against the paper's `theirs`, both factors over one baseline.
fn direction(theirs: f64, ours: f64) -> Direction {
    let (t, o) = (theirs - 1.0, ours - 1.0);
    if t * o <= 0.0 {
        Direction::Disagrees
    } else if o.abs() > t.abs() {
        Direction::Larger
    } else {
        Direction::Smaller
    }
}

/// `8 × 8`: nodes × GPUs per node.
fn shape(t: Topology) -> String {
    format!("{} × {}", t.nodes(), t.gpus_per_node())
}

/// Tokens per second, as the docs write counts.
fn tps(j: &Judged) -> String {
    thousands(j.tokens_per_s().round() as usize)
}

/// `x` with its sign (a true minus), `decimals` places.
fn signed(x: f64, decimals: usize) -> String {
    let s = format!("{x:+.decimals$}");
    s.replace('-', "−")
}

/// A percentage with its sign, one place below 1 in size, else none.
fn percent(x: f64) -> String {
    signed(x, if x.abs() < 0.95 { 1 } else { 0 })
}

/// The span of `xs` (percent): one value when they round alike; from the
/// smallest in size to the largest when all are negative, else from the
/// lowest to the highest; `sep` between.
fn range(xs: &[f64], sep: &str) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (a, b) = if hi < 0.0 { (hi, lo) } else { (lo, hi) };
    let (a, b) = (percent(a), percent(b));
    if a == b {
        a
    } else if sep == "–" && lo > 0.0 {
        // `+4–5`: one sign for a span of gains.
        format!("{a}–{}", b.trim_start_matches('+'))
    } else {
        format!("{a}{sep}{b}")
    }
}

/// How far GRACE's term is from the other plan's, in words: `10–22 %
/// below`, `28–47 % above`, else the signed span.
fn relative(xs: &[f64]) -> String {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if hi < 0.0 {
        format!("{:.0}–{:.0} % below", -hi, -lo)
    } else if lo > 0.0 {
        format!("{lo:.0}–{hi:.0} % above")
    } else {
        format!("{} to {} % against", percent(lo), percent(hi))
    }
}

fn read_file(path: &Path) -> Result<Dataset, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "cannot read {}: {e} (pass the shared data folder)",
            path.display()
        )
    })?;
    let trace = read_trace(&bytes, &ReadOptions::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Dataset {
        trace,
        sources: Sources::Even,
    })
}
