//! Why GRACE-MoE balances the generated DeepSeek-V3 routes so badly on
//! 8 × 8 (0.24 under `even`, below contiguous), looked into (issue 53; the
//! finding is in docs/grace.md): each suspect changed alone, everything
//! else as the page and docs/grace.md's tables have it.
//!
//! - the generator's planted co-activation: `cohesion` 0 (each token's
//!   experts drawn by popularity alone, the same loads);
//! - the non-uniformity ratio: `r = 0` against the knee;
//! - the node level (fully non-uniform over nodes, §4.1): the same trace
//!   on 1 × 64, one node;
//! - the paper's own setting: ESFT intent (real DeepSeek-V2-Lite routes) on
//!   2 × 2.
//!
//! Per plan: balancedness under `even` (the rule does not matter here:
//! docs/grace.md's table gives GRACE the same under all five), the fullest
//! GPU's and node's load over the mean (mean over layers; a copy carries
//! its expert's load split evenly), the experts on the fullest and emptiest
//! node, the GPUs holding the hottest sixteenth of the experts and the
//! share of their load on the busiest node, and Eq. 2's replicas. All
//! in-sample, batches of 1024 tokens dealt evenly.
//!
//! Run with `cargo run --release -p moeplan --features parallel --example
//! grace_imbalance -- ../shared/data`; prints Markdown.

#[path = "common/mod.rs"]
mod common;

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;

use moeplan::data::model::{ModelPreset, preset};
use moeplan::judge::{CostModel, Rule, Strategy, simulate};
use moeplan::planners::{self, Settings, Value};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Deal, Plan, Topology, Workload};

/// Tokens per batch, as the CLI reads a folder and docs/grace.md's tables.
const BATCH_TOKENS: usize = 1024;

/// The generated trace of docs/grace.md: 65,536 tokens from 64 ranks, seed 7.
const GEN_TOKENS: usize = 65_536;
const GEN_RANKS: usize = 64;
const GEN_SEED: u64 = 7;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grace_imbalance: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One plan's row.
struct Row {
    case: String,
    plan: String,
    balancedness: f64,
    shape: Shape,
    replicas: usize,
}

fn run() -> Result<(), String> {
    let data = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: grace_imbalance DATA_FOLDER (the shared data folder)")?;
    let v2 = preset("deepseek-v2-lite").map_err(|e| e.to_string())?;
    let v3 = preset("deepseek-v3").map_err(|e| e.to_string())?;
    let topo = |n, g| Topology::new(n, g).map_err(|e| e.to_string());
    let generated = |cohesion: Option<f64>| -> Result<Workload, String> {
        let mut cfg = TokenGenConfig::new(v3, GEN_TOKENS);
        cfg.ranks = GEN_RANKS;
        cfg.seed = GEN_SEED;
        if let Some(c) = cohesion {
            cfg.cohesion = c;
            cfg.cohesion_spread = 0.0;
        }
        let tokens = generate_tokens(&cfg)
            .and_then(|t| t.dealt(Deal::Even, GEN_RANKS, BATCH_TOKENS))
            .map_err(|e| e.to_string())?;
        Workload::from_tokens(tokens, BATCH_TOKENS).map_err(|e| e.to_string())
    };
    let default_cohesion = TokenGenConfig::new(v3, 1).cohesion;
    let routes = generated(None)?;
    let esft = {
        let tokens =
            common::read_esft_folder(&data.join("esft-deepseek-v2-lite").join("intent"), v2)?;
        let d = topo(2, 2)?.num_gpus();
        Workload::from_tokens(
            tokens
                .dealt(Deal::Even, d, BATCH_TOKENS)
                .map_err(|e| e.to_string())?,
            BATCH_TOKENS,
        )
        .map_err(|e| e.to_string())?
    };
    let cases: Vec<(String, Workload, Topology, &ModelPreset, bool)> = vec![
        (
            format!("generated DeepSeek-V3, 8 × 8 (cohesion {default_cohesion}, the default)"),
            routes.clone(),
            topo(8, 8)?,
            v3,
            true,
        ),
        (
            "generated, cohesion 0 (no planted co-activation), 8 × 8".into(),
            generated(Some(0.0))?,
            topo(8, 8)?,
            v3,
            false,
        ),
        (
            "generated (default), 1 × 64: no node level".into(),
            routes,
            topo(1, 64)?,
            v3,
            false,
        ),
        (
            "ESFT intent (real), 2 × 2: the paper's setting".into(),
            esft,
            topo(2, 2)?,
            v2,
            false,
        ),
    ];
    let mut rows = Vec::new();
    for (case, work, topology, model, with_r0) in &cases {
        let cost = CostModel::for_model(model);
        let grace = planners::find("grace").map_err(|e| e.to_string())?;
        let mut plans: Vec<(String, Plan)> = Vec::new();
        let variants: &[(&str, &str, bool)] = if *with_r0 {
            &[
                ("GRACE", "auto", true),
                ("GRACE, r = 0", "0", true),
                ("GRACE, no replication", "auto", false),
            ]
        } else {
            &[
                ("GRACE", "auto", true),
                ("GRACE, no replication", "auto", false),
            ]
        };
        for &(name, ratio, replication) in variants {
            let s = Settings::new()
                .with("nonuniformity", Value::Word(Cow::Borrowed(ratio)))
                .and_then(|s| s.with("replication", Value::Flag(replication)))
                .map_err(|e| e.to_string())?;
            let p = planners::plan(grace, work, *topology, &s).map_err(|e| e.to_string())?;
            plans.push((name.to_string(), p.plan));
        }
        let base = planners::find("base").map_err(|e| e.to_string())?;
        let p =
            planners::plan(base, work, *topology, &Settings::new()).map_err(|e| e.to_string())?;
        plans.push(("BASE".into(), p.plan));
        for (name, plan) in plans {
            let r = simulate(work, &Strategy::fixed(plan.clone(), Rule::Even), &cost)
                .map_err(|e| e.to_string())?;
            rows.push(Row {
                case: case.clone(),
                plan: name,
                balancedness: r.balancedness,
                shape: shape(work, &plan),
                replicas: plan.summary().replicas,
            });
        }
    }
    print!("{}", markdown(&rows));
    Ok(())
}

/// Where a plan puts the load, mean over layers.
struct Shape {
    /// The fullest GPU's load over the mean GPU's.
    gpu: f64,
    /// The fullest node's over the mean node's.
    node: f64,
    /// Experts (first copies and replicas) on the emptiest and fullest node.
    node_experts: (f64, f64),
    /// GPUs holding a copy of the hottest sixteenth of the experts.
    hot_gpus: f64,
    /// The share of those experts' load served on the busiest node.
    hot_on_busiest: f64,
}

fn shape(work: &Workload, plan: &Plan) -> Shape {
    let loads = work.trace().summed();
    let t = plan.topology();
    let (gpus, nodes) = (t.num_gpus(), t.nodes());
    let per_node = gpus / nodes.max(1);
    let mut s = Shape {
        gpu: 0.0,
        node: 0.0,
        node_experts: (0.0, 0.0),
        hot_gpus: 0.0,
        hot_on_busiest: 0.0,
    };
    let layers = plan.layers();
    for (l, lp) in layers.iter().enumerate() {
        let row = loads.row(l);
        let copies = lp.copies(row.len());
        let share = |e: u32| row[e as usize] / f64::from(copies[e as usize].max(1));
        let gpu: Vec<f64> = lp
            .gpus
            .iter()
            .map(|g| g.iter().map(|&e| share(e)).sum())
            .collect();
        let mean = gpu.iter().sum::<f64>() / gpus as f64;
        let node: Vec<f64> = gpu.chunks(per_node).map(|c| c.iter().sum()).collect();
        let busiest = (0..node.len())
            .max_by(|&a, &b| node[a].total_cmp(&node[b]))
            .unwrap_or(0);
        s.gpu += gpu.iter().copied().fold(0.0, f64::max) / mean;
        s.node += node[busiest] / (mean * per_node as f64);
        let sizes: Vec<usize> = lp
            .gpus
            .chunks(per_node)
            .map(|c| c.iter().map(Vec::len).sum())
            .collect();
        s.node_experts.0 += sizes.iter().copied().min().unwrap_or(0) as f64;
        s.node_experts.1 += sizes.iter().copied().max().unwrap_or(0) as f64;
        let mut order: Vec<u32> = (0..row.len() as u32).collect();
        order.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        let hot = &order[..(row.len() / 16).max(1)];
        let holders = lp
            .gpus
            .iter()
            .filter(|g| g.iter().any(|e| hot.contains(e)))
            .count();
        let on_busiest: f64 = lp.gpus[busiest * per_node..(busiest + 1) * per_node]
            .iter()
            .flatten()
            .filter(|e| hot.contains(e))
            .map(|&e| share(e))
            .sum();
        s.hot_gpus += holders as f64;
        s.hot_on_busiest += on_busiest / hot.iter().map(|&e| row[e as usize]).sum::<f64>();
    }
    let n = layers.len().max(1) as f64;
    Shape {
        gpu: s.gpu / n,
        node: s.node / n,
        node_experts: (s.node_experts.0 / n, s.node_experts.1 / n),
        hot_gpus: s.hot_gpus / n,
        hot_on_busiest: s.hot_on_busiest / n,
    }
}

fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| case | plan | balancedness (`even`) | fullest GPU / mean | fullest node / mean | \
         experts on a node (min – max) | GPUs holding the hottest 1/16 | its load on the busiest node | replicas |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        let s = &r.shape;
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.2} | {:.2} | {:.0} – {:.0} | {:.1} | {:.0} % | {} |\n",
            r.case,
            r.plan,
            r.balancedness,
            s.gpu,
            s.node,
            s.node_experts.0,
            s.node_experts.1,
            s.hot_gpus,
            s.hot_on_busiest * 100.0,
            r.replicas
        ));
    }
    out
}
