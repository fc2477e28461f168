//! Libra on the planner page's route default: the table of docs/libra.md
//! under "Libra on the route default (2026-11-27)", printed as Markdown.
//!
//! ```text
//! cargo run --release -p moeplan-view --features moeplan/parallel --example libra_route_default
//! ```
//!
//! No data files: the page's default with token routes, as the app's worker
//! loads it (`Source::Generate { routes: true, .. }`): generated
//! DeepSeek-V3, 64 batches of 512 tokens (the app's `TOKENS_PER_BATCH`)
//! from 8 data-parallel ranks, seed 7. Planned through [`Workspace`] on
//! 8 × 8 and 1 × 8 GPUs with 8 expert groups (the page's default, kept on
//! a cluster change). Balancedness, in-sample: BASE, EPLB (its default),
//! CRAFT at its automatic R and GRACE under `even`; Libra (N = 8) under
//! `libra-rebalance`, re-planned with each predictor as the page's Libra
//! controls do ([`Workspace::replan_scheduled`]). A predictor the
//! workspace refuses, or a Libra it does not show, is a dash, and why is
//! said below the table.

use std::process::ExitCode;
use std::time::Instant;

use moeplan::data::{Workload, model};
use moeplan::planners::{Settings, Value};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan_view::{Cluster, Workspace};

/// Tokens per batch of the page's generated routes (`TOKENS_PER_BATCH` in app/src/protocol/mod.rs).
const TOKENS_PER_BATCH: usize = 512;
const BATCHES: usize = 64;
const SEED: u64 = 7;
/// The static plans' columns, by planner id.
const STATIC: [&str; 4] = ["base", "eplb", "craft", "grace"];
/// Libra's predictors, in the table's order.
const PREDICTORS: [&str; 3] = ["previous-batch", "oracle", "path-table"];

fn main() -> ExitCode {
    let t0 = Instant::now();
    match run() {
        Ok(()) => {
            eprintln!("libra_route_default: {:.1} s", t0.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("libra_route_default: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), moeplan::Error> {
    let cfg = TokenGenConfig {
        seed: SEED,
        batch_tokens: TOKENS_PER_BATCH,
        ..TokenGenConfig::new(model::preset("deepseek-v3")?, BATCHES * TOKENS_PER_BATCH)
    };
    let work = Workload::from_tokens(generate_tokens(&cfg)?, TOKENS_PER_BATCH)?;
    let mut rows = Vec::new();
    let mut why = Vec::new();
    let mut previous: Option<Workspace> = None;
    for (nodes, gpus_per_node) in [(8, 8), (1, 8)] {
        let cluster = Cluster {
            nodes,
            gpus_per_node,
            groups: 8,
        };
        // As a cluster change on the page: GRACE's analysis is kept.
        let mut ws =
            Workspace::of_workload_reusing(work.clone(), cluster, previous.as_ref(), |_| {})?;
        let view = ws.view(None, 0)?;
        let mut cells: Vec<String> = STATIC
            .iter()
            .map(|id| match view.plans.iter().find(|p| p.name == *id) {
                Some(p) => format!("{:.3}", p.balancedness),
                None => "—".into(),
            })
            .collect();
        why.extend(
            view.notes
                .iter()
                .map(|n| format!("{nodes} × {gpus_per_node}: {n}")),
        );
        for predictor in PREDICTORS {
            let settings = Settings::new().with("predictor", Value::Word(predictor.into()))?;
            let cell = match ws.replan_scheduled(&settings) {
                Err(e) => {
                    why.push(format!("{nodes} × {gpus_per_node}, {predictor}: {e}"));
                    "—".into()
                }
                Ok(()) => match ws.view(None, 0)?.plans.iter().find(|p| p.name == "libra") {
                    Some(p) => format!("{:.3}", p.balancedness),
                    None => "—".into(),
                },
            };
            cells.push(cell);
        }
        rows.push(format!(
            "| {nodes} × {gpus_per_node} | {} |",
            cells.join(" | ")
        ));
        previous = Some(ws);
    }
    println!(
        "Balancedness on the route default (generated DeepSeek-V3, {BATCHES} batches of {TOKENS_PER_BATCH} tokens from {} ranks, seed {SEED}), in-sample; Libra under libra-rebalance, the static plans under even:\n",
        cfg.ranks
    );
    println!(
        "| cluster | BASE | EPLB | CRAFT (auto) | GRACE | Libra, previous batch (N = 8) | Libra, oracle | Libra, path table |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        println!("{r}");
    }
    if !why.is_empty() {
        println!();
        for w in &why {
            println!("— {w}");
        }
    }
    Ok(())
}
