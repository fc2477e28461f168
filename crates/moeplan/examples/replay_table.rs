//! The serving tables of docs/replan.md: how often re-balancing pays on
//! real data, and what re-plans move on a generated trace that does not
//! shift, printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example replay_table -- ../shared/data
//! ```
//!
//! First table: `studies::serve` (what `moeplan replay` runs) with
//! EPLB relabelled, under `even`, sweeping the interval `K` and the window
//! `W`, each setting priced on two machines (the time model's default
//! assumptions, the trace's model), with Libra serving the same batches.
//! Every run of a trace serves the batches after the largest window. Data:
//! HarMoEny's `expert_freq_qwen_datasets.csv` (Qwen1.5-MoE, 1 × 8, EPLB
//! +4) one dataset at a time, two back to back, and all three; ESFT's
//! `intent` then `summary` token folders (DeepSeek-V2-Lite, 512-token
//! batches dealt evenly, 2 × 4, EPLB +8 in one group). "Best" is the
//! fastest setting over the sweep: an in-sample choice.
//!
//! Second table: each engine's own re-planning on three of those shifts
//! (HarMoEny's three datasets back to back, bookcorpus then wikitext;
//! ESFT intent then summary), its
//! knobs in forward passes (`studies::engines`, what `moeplan replay
//! --engine` reads: the settings it refuses are left out), EPLB with its
//! own move and transfer; at its fastest setting the same runs with
//! relabelling, the incremental re-plan (≤ 64 copies a re-plan) and the
//! STAIR-like one (gate 0.9, ≤ 2 copies a GPU pair a layer).
//!
//! Third table: a generated DeepSeek-V3 trace (256 batches of 4,096
//! tokens, seed 7, as `moeplan gen --batches 256`), 4 × 8, EPLB's
//! defaults, re-planned every 16 batches on the last 16 and priced on
//! `h100-ib-ndr`, moving fresh, relabelled, incrementally within a copy
//! budget, or skipping while balancedness reaches 0.80.

use std::path::Path;
use std::process::ExitCode;

use moeplan::data::hardware;
use moeplan::data::model::{ModelPreset, preset};
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::judge::Rule;
use moeplan::judge::cost::Pricing;
use moeplan::planners::Goal;
use moeplan::planners::{self, Settings, Value};
use moeplan::studies::{ENGINES, Engine};
use moeplan::studies::{Migrate, Serving, ServingReport, Stair, serve};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Topology, Workload};

#[path = "common/mod.rs"]
mod common;
#[path = "common/text.rs"]
mod text;
use text::thousands;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replay_table: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// One trace served on a cluster: its row's first cells and its sweep.
struct Case {
    name: &'static str,
    trace: LoadTrace,
    model: &'static ModelPreset,
    topology: Topology,
    redundant: usize,
    settings: Settings,
    every: &'static [usize],
    window: &'static [usize],
    machines: [&'static str; 2],
}

fn run() -> Result<(), String> {
    let data = std::env::args()
        .nth(1)
        .ok_or("usage: replay_table DATA (the shared data folder)")?;
    let data = Path::new(&data);
    let e = |x: moeplan::Error| x.to_string();
    let csv = data.join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv");
    let bytes = std::fs::read(&csv).map_err(|x| format!("{}: {x}", csv.display()))?;
    let harmoeny = |dataset: Option<&str>| {
        let options = ReadOptions {
            dataset: dataset.map(str::to_string),
            ..ReadOptions::default()
        };
        read_trace(&bytes, &options).map_err(|x| format!("{}: {x}", csv.display()))
    };
    // as `moeplan replay --trace FOLDER --tokens-per-batch 512` reads it
    let esft = |task: &str| {
        common::read_folder_as_cli(&data.join("esft-deepseek-v2-lite").join(task), 512)
            .map(|d| d.trace)
    };
    let eplb_with = |redundant: usize, groups: Option<usize>| -> Result<Settings, String> {
        let s = Settings::new()
            .with(planners::REDUNDANT_EXPERTS.name, Value::Count(redundant))
            .map_err(e)?;
        match groups {
            Some(g) => s.with(planners::GROUPS.name, Value::Count(g)).map_err(e),
            None => Ok(s),
        }
    };
    let qwen = preset("qwen1.5-moe-a2.7b").map_err(e)?;
    let one_node = Topology::new(1, 8).map_err(e)?;
    let harmoeny_case = |name, trace, every, window| -> Result<Case, String> {
        Ok(Case {
            name,
            trace,
            model: qwen,
            topology: one_node,
            redundant: 4,
            settings: eplb_with(4, None)?,
            every,
            window,
            machines: ["h200-ib-ndr", "4090-pcie4-25gbe"],
        })
    };
    let one = &[1, 2, 4, 8][..];
    let sweep = &[1, 2, 4, 8, 16][..];
    let mut cases = Vec::new();
    for (name, dataset) in [
        ("HarMoEny bookcorpus", "bookcorpus"),
        ("HarMoEny wikitext", "wikitext"),
        ("HarMoEny random", "random"),
    ] {
        cases.push(harmoeny_case(
            name,
            harmoeny(Some(dataset))?,
            one,
            &[1, 2, 4],
        )?);
    }
    cases.push(harmoeny_case(
        "HarMoEny, the three back to back",
        harmoeny(None)?,
        sweep,
        &[1, 4, 16],
    )?);
    for (name, a, b) in [
        (
            "HarMoEny bookcorpus, then wikitext",
            "bookcorpus",
            "wikitext",
        ),
        ("HarMoEny wikitext, then random", "wikitext", "random"),
        ("HarMoEny random, then bookcorpus", "random", "bookcorpus"),
    ] {
        let t = harmoeny(Some(a))?.then(&harmoeny(Some(b))?).map_err(e)?;
        cases.push(harmoeny_case(name, t, sweep, &[1, 4, 16])?);
    }
    cases.push(Case {
        name: "ESFT intent, then summary (512-token batches)",
        trace: esft("intent")?.then(&esft("summary")?).map_err(e)?,
        model: preset("deepseek-v2-lite").map_err(e)?,
        topology: Topology::new(2, 4).map_err(e)?,
        redundant: 8,
        settings: eplb_with(8, Some(1))?,
        every: sweep,
        window: &[1, 2, 4, 8],
        machines: ["4090-pcie4-25gbe", "h100-ib-ndr"],
    });

    println!(
        "EPLB relabelled under `even`; time is the served batches' MoE layers plus every pause, × never against the first plan kept:\n"
    );
    println!(
        "| real trace | cluster, EPLB | served | hardware | best K, W | × never | balancedness (never) | payback, batches | Libra × never |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for case in &cases {
        let start = case.window.iter().copied().max().unwrap_or(0);
        for (m, machine) in case.machines.iter().enumerate() {
            let pricing = Pricing::new(hardware::preset(machine).map_err(e)?, case.model);
            let settings = case.settings.clone().priced(Some(pricing.clone()));
            let mut runs = Vec::new();
            for &k in case.every {
                for &w in case.window {
                    let knobs = Serving {
                        every: k,
                        window: w,
                        min_balancedness: None,
                        migrate: Migrate::Relabel,
                        transfer: Default::default(),
                        rule: Rule::Even,
                        start,
                        // Libra once per window: its copies do not depend on K
                        libra: k == case.every[0],
                    };
                    let r = serve(
                        &Workload::new(case.trace.clone()),
                        case.topology,
                        planners::EPLB_ID.planner().map_err(e)?,
                        &settings,
                        knobs,
                        Some(&pricing),
                    )
                    .map_err(e)?;
                    runs.push((k, w, r));
                }
            }
            let lead = if m == 0 {
                format!(
                    "| {} | {} × {}, +{} | {start}..{} |",
                    case.name,
                    case.topology.nodes(),
                    case.topology.gpus_per_node(),
                    case.redundant,
                    case.trace.num_batches()
                )
            } else {
                "| | | |".into()
            };
            println!("{lead} `{machine}` | {} |", sweep_cells(&runs)?);
        }
    }

    engines_table(&cases)?;

    let g = generate(&GenConfig::new(preset("deepseek-v3").map_err(e)?, 256)).map_err(e)?;
    let topology = Topology::new(4, 8).map_err(e)?;
    let pricing = Pricing::new(
        hardware::preset("h100-ib-ndr").map_err(e)?,
        preset("deepseek-v3").map_err(e)?,
    );
    let settings = Settings::new().priced(Some(pricing.clone()));
    // expert slots of a plan: every layer's experts and its redundant copies
    let slots = g.num_layers()
        * (g.num_experts()
            + planners::default_redundant_experts(g.num_experts(), topology.num_gpus()));
    let serve_with = |migrate, min_balancedness| {
        serve(
            &Workload::new(g.clone()),
            topology,
            planners::EPLB_ID.planner()?,
            &settings,
            Serving {
                every: 16,
                window: 16,
                min_balancedness,
                migrate,
                transfer: Default::default(),
                rule: Rule::Even,
                start: 0,
                libra: false,
            },
            Some(&pricing),
        )
    };
    let budget = |n| {
        Migrate::Incremental(Goal {
            max_moved_experts: Some(n),
            min_balancedness: None,
        })
    };
    let rows = [
        ("fresh EPLB as numbered", serve_with(Migrate::Fresh, None)),
        ("fresh EPLB relabelled", serve_with(Migrate::Relabel, None)),
        (
            "incremental, ≤ 32 copies a re-plan",
            serve_with(budget(32), None),
        ),
        (
            "incremental, ≤ 128 copies a re-plan",
            serve_with(budget(128), None),
        ),
        (
            "relabelled, `--replan-below 0.80`",
            serve_with(Migrate::Relabel, Some(0.80)),
        ),
    ];
    let kept = rows[0].1.as_ref().map_err(|x| x.to_string())?;
    println!(
        "\nGenerated DeepSeek-V3, {} batches, 4 × 8, EPLB's defaults, K = W = 16, {}; {} re-plans:\n",
        g.num_batches(),
        pricing.hardware.name,
        kept.replans.len()
    );
    println!(
        "| re-plan | copies moved in all (per re-plan) | balancedness (kept: {:.4}) | MoE + pauses × never |",
        kept.static_balancedness
    );
    println!("| --- | --- | --- | --- |");
    for (what, r) in rows {
        let r = r.map_err(e)?;
        let done = r.replans.iter().filter(|p| !p.skipped).count();
        let moved = if done == 0 {
            format!("0: all {} skipped", r.replans.len())
        } else {
            let per = r.copies_moved as f64 / done as f64;
            format!(
                "{} ({}: {:.2} % of the slots)",
                thousands(r.copies_moved),
                thousands(per.round() as usize),
                100.0 * per / slots as f64
            )
        };
        let (t, never) = r.total_us.ok_or("no time")?;
        println!(
            "| {what} | {moved} | {:.4} | {:.3}× |",
            r.balancedness,
            t / never
        );
    }
    Ok(())
}

/// A machine's cells of the sweep table: the best setting against never
/// re-planning, its balancedness, the range of paybacks, Libra.
fn sweep_cells(runs: &[(usize, usize, ServingReport)]) -> Result<String, String> {
    let timed = |r: &ServingReport| r.total_us.ok_or("no time");
    let mut best = None;
    // never re-planning: the fastest of the first plans (one per window)
    let (mut never, mut kept) = (f64::INFINITY, 0.0);
    for (k, w, r) in runs {
        let (t, s) = timed(r)?;
        if s < never {
            (never, kept) = (s, r.static_balancedness);
        }
        if best.is_none_or(|(_, _, b, _): (usize, usize, f64, &ServingReport)| t < b) {
            best = Some((*k, *w, t, r));
        }
    }
    let (k, w, t, r) = best.ok_or("no runs")?;
    let (setting, times) = if t < never {
        (format!("K = {k}, W = {w}"), format!("{:.3}×", t / never))
    } else {
        (
            format!("never (K = {k}, W = {w}: {:.3}×)", t / never),
            "1".into(),
        )
    };
    let paybacks: Vec<f64> = runs
        .iter()
        .filter_map(|(_, _, r)| r.payback_batches)
        .collect();
    let lo = paybacks.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = paybacks.iter().copied().fold(0.0, f64::max);
    let batches = |x: f64| {
        if x < 10.0 {
            format!("{x:.2}")
        } else {
            thousands(x.round() as usize)
        }
    };
    let mut payback = match paybacks.len() {
        0 => "no gain".to_string(),
        _ if batches(lo) == batches(hi) => batches(lo),
        _ => format!("{}–{}", batches(lo), batches(hi)),
    };
    let moved = runs.iter().filter(|(_, _, r)| r.copies_moved > 0).count();
    if !paybacks.is_empty() && paybacks.len() < moved {
        payback += ", or no gain";
    }
    let libra = runs
        .iter()
        .filter_map(|(_, _, r)| r.libra.as_ref().and_then(|l| l.total_us))
        .fold(f64::INFINITY, f64::min);
    Ok(format!(
        "{setting} | {times} | {:.4} ({:.4}) | {payback} | {:.3}×",
        r.balancedness,
        kept,
        libra / never
    ))
}

/// The shifts the engines' table serves, each with its tokens a forward
/// pass (a stated assumption: HarMoEny's 24,576-token batches as 6 passes
/// of 4,096 tokens, ESFT's 512-token batches as 4 decode passes of 128).
const ENGINE_CASES: [(&str, usize); 3] = [
    ("HarMoEny, the three back to back", 4096),
    ("HarMoEny bookcorpus, then wikitext", 4096),
    ("ESFT intent, then summary (512-token batches)", 128),
];

/// Intervals and windows tried, forward passes (each engine keeps those it
/// accepts; TensorRT-LLM its layer-update cycles and its 20-pass average).
const PASSES_K: [usize; 7] = [4, 8, 16, 32, 48, 64, 96];
const PASSES_W: [usize; 4] = [4, 8, 16, 32];

/// The second table: each engine's best setting with its own move, and the
/// other moves at that setting.
fn engines_table(cases: &[Case]) -> Result<(), String> {
    let e = |x: moeplan::Error| x.to_string();
    println!(
        "\nEach engine's own re-planning (EPLB, its move and transfer), K and W in forward passes; × never against the first plan kept:\n"
    );
    println!(
        "| shift | engine | hardware | best K, W passes (batches) | own move × never | relabel | incremental ≤ 64 | STAIR-like | copies: own / STAIR-like |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, tokens_per_pass) in ENGINE_CASES {
        let case = cases
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("no case {name}"))?;
        let t = &case.trace;
        let pairs = t.counts().sum() / (t.num_batches() * t.num_layers()).max(1) as f64;
        let tokens_per_batch = pairs / case.model.top_k.max(1) as f64;
        let layers = case.model.moe_layers();
        let mut first_row = true;
        for engine in ENGINES {
            let settings = accepted(
                engine,
                layers,
                tokens_per_pass,
                tokens_per_batch,
                t.num_batches(),
            );
            if settings.is_empty() {
                println!(
                    "| {} | {} | | no setting it accepts re-plans within {} batches | | | | | |",
                    if first_row { name } else { "" },
                    engine.display,
                    t.num_batches()
                );
                first_row = false;
                continue;
            }
            let start = settings.iter().map(|s| s.window).max().unwrap_or(1);
            for machine in case.machines {
                let pricing = Pricing::new(hardware::preset(machine).map_err(e)?, case.model);
                let priced = case.settings.clone().priced(Some(pricing.clone()));
                let run = |k: usize, w: usize, migrate| -> Result<ServingReport, String> {
                    serve(
                        &Workload::new(t.clone()),
                        case.topology,
                        planners::EPLB_ID.planner().map_err(e)?,
                        &priced,
                        Serving {
                            every: k,
                            window: w,
                            min_balancedness: None,
                            migrate,
                            transfer: engine.transfer,
                            rule: Rule::Even,
                            start,
                            libra: false,
                        },
                        Some(&pricing),
                    )
                    .map_err(e)
                };
                // never re-planning: the fastest of the first plans (one
                // per window), as `moeplan replay` names it
                let mut best: Option<(usize, f64, ServingReport)> = None;
                let mut never = f64::INFINITY;
                for (i, s) in settings.iter().enumerate() {
                    let r = run(s.every, s.window, engine.migrate)?;
                    let (total, kept) = r.total_us.ok_or("no time")?;
                    never = never.min(kept);
                    if best.as_ref().is_none_or(|(_, b, _)| total < *b) {
                        best = Some((i, total, r));
                    }
                }
                let (i, total, own) = best.ok_or("no runs")?;
                let s = settings[i];
                let times = |r: &ServingReport| -> Result<String, String> {
                    Ok(format!("{:.3}×", r.total_us.ok_or("no time")?.0 / never))
                };
                let relabel = run(s.every, s.window, Migrate::Relabel)?;
                let incremental = run(
                    s.every,
                    s.window,
                    Migrate::Incremental(Goal {
                        max_moved_experts: Some(64),
                        min_balancedness: None,
                    }),
                )?;
                let stair = run(s.every, s.window, Migrate::Stair(Stair::default()))?;
                println!(
                    "| {} | {} | `{machine}` | K = {}, W = {} ({}, {}) | {:.3}× | {} | {} | {} | {} / {} |",
                    if first_row { name } else { "" },
                    if first_row || machine == case.machines[0] {
                        format!("{} ({tokens_per_pass} tokens a pass)", engine.display)
                    } else {
                        String::new()
                    },
                    s.every_passes,
                    s.window_passes,
                    s.every,
                    s.window,
                    total / never,
                    times(&relabel)?,
                    times(&incremental)?,
                    times(&stair)?,
                    thousands(own.copies_moved),
                    thousands(stair.copies_moved),
                );
                first_row = false;
            }
        }
    }
    Ok(())
}

/// The settings `engine` accepts of the grid, in passes and batches,
/// that re-plan at least once within `batches`. TensorRT-LLM sets neither
/// K nor W directly: every interval up to the grid's largest is tried
/// with its own window, and it keeps its layer-update cycles.
fn accepted(
    engine: &Engine,
    layers: usize,
    tokens_per_pass: usize,
    tokens_per_batch: f64,
    batches: usize,
) -> Vec<moeplan::studies::Setting> {
    let own_window = engine.name == "trtllm";
    let ks: Vec<usize> = if own_window {
        (1..=PASSES_K[PASSES_K.len() - 1]).collect()
    } else {
        PASSES_K.to_vec()
    };
    let ws: Vec<Vec<usize>> = if own_window {
        vec![vec![]]
    } else {
        PASSES_W.iter().map(|&w| vec![w]).collect()
    };
    let mut out = Vec::new();
    for k in ks {
        for w in &ws {
            if let Ok(found) =
                engine.settings(&[k], w, layers, tokens_per_pass, tokens_per_batch, None)
            {
                out.extend(found.into_iter().filter(|s| s.window + s.every < batches));
            }
        }
    }
    // two settings the same in batches serve alike: keep the first
    out.dedup_by_key(|s| (s.every, s.window));
    out
}
