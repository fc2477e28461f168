//! Libra's predictors measured by the paper's Table 1 metric (the fraction
//! of a token's true top-k experts found in its predicted top-k set, mean
//! over tokens and layers 1..L; `planners::libra::accuracy`).
//!
//! Data:
//! - ESFT intent and summary (`DATA/esft-deepseek-v2-lite/{intent,summary}/`,
//!   real DeepSeek-V2-Lite token routes, 64 experts, top-6), read as the CLI
//!   reads a folder (batches of 1024 tokens, sequence `i` on rank `i mod 8`).
//!   The path table is built as `build_predictor` builds it, on the first
//!   80 % of the tokens; "held-out" is the batches wholly after that split,
//!   "in-sample" the batches wholly inside it. Oracle = 1 by construction
//!   (an upper bound); noisy at p = 0.8 is simulated.
//! - HarMoEny Qwen1.5-MoE (`DATA/harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv`,
//!   real per-batch counts, 60 experts, top-4, 20 batches per dataset):
//!   counts have no tokens, so only previous-batch applies. Every token of
//!   a batch gets the same predicted set (the previous batch's `k` hottest
//!   experts, ties to the lower id), so Table 1's mean over tokens is
//!   exactly `Σ_{e ∈ set} n_e / Σ_e n_e` on counts; the ESFT rows print
//!   this count formula beside `accuracy` as a check.
//!
//! Run with `cargo run --release -p moeplan --example libra_accuracy --
//! ../shared/data`; prints Markdown.

#[path = "common/mod.rs"]
mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use moeplan::LoadTrace;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::model::preset;
use moeplan::planners::libra::{Noisy, Predictor, accuracy, build_predictor};
use moeplan::sim::Workload;

const BATCH_TOKENS: usize = 1024;
const RANKS: usize = 8;

fn main() -> ExitCode {
    let data = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("../shared/data"), PathBuf::from);
    match run(&data) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("libra_accuracy: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Previous-batch accuracy from counts alone over `batches` (from 1),
/// layers 1..L: the previous batch's top-`k` set's share of this batch's
/// pairs.
fn previous_batch_on_counts(t: &LoadTrace, k: usize, batches: Range<usize>) -> f64 {
    let (b_n, l_n, e_n) = t.counts().dim();
    let (mut sum, mut n) = (0.0, 0.0);
    for b in batches.start.max(1)..batches.end.min(b_n) {
        for l in 1..l_n {
            let mut order: Vec<usize> = (0..e_n).collect();
            let prev = |e: usize| t.counts()[[b - 1, l, e]];
            order.sort_by(|&a, &c| prev(c).total_cmp(&prev(a)).then(a.cmp(&c)));
            let now: f64 = (0..e_n).map(|e| t.counts()[[b, l, e]]).sum();
            let hit: f64 = order.iter().take(k).map(|&e| t.counts()[[b, l, e]]).sum();
            // Weighted by the batch's tokens, as Table 1's mean over tokens
            // is.
            sum += hit / k as f64;
            n += now / k as f64;
        }
    }
    if n > 0.0 { sum / n } else { f64::NAN }
}

fn run(data: &Path) -> Result<(), String> {
    let e = |x: moeplan::Error| x.to_string();
    println!(
        "Table 1's metric (fraction of a token's true top-k in the predicted top-k), layers 1..L. ESFT: batches of {BATCH_TOKENS} tokens, sequences on {RANKS} ranks round-robin; path table built on the first 80 % of the tokens (depth {}).\n",
        moeplan::planners::libra::DEFAULT_DEPTH
    );
    println!(
        "| data (real) | predictor | label | in-sample batches | held-out batches | held-out accuracy | in-sample accuracy | chance k/E | count formula (previous batch, held-out) |"
    );
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for task in ["intent", "summary"] {
        let tokens = common::read_esft_folder(
            &data.join("esft-deepseek-v2-lite").join(task),
            preset("deepseek-v2-lite").map_err(|e| e.to_string())?,
        )?
        .with_sequences_on_ranks(RANKS)
        .map_err(e)?;
        let n = tokens.num_tokens();
        let work = Workload::from_tokens(tokens, BATCH_TOKENS).map_err(e)?;
        let b_n = work.trace().num_batches();
        let build = ((n as f64 * 0.8) as usize).clamp(1, n.max(1));
        let inside = 0..build / BATCH_TOKENS;
        let after = build.div_ceil(BATCH_TOKENS)..b_n;
        let predictors = [
            build_predictor("path-table", &work).map_err(e)?,
            Predictor::PreviousBatch,
            Predictor::Oracle,
            Predictor::Noisy(Noisy::new(&work, 0.8, 0).map_err(e)?),
        ];
        for p in &predictors {
            let held = accuracy(p, &work, after.clone()).map_err(e)?;
            let ins = accuracy(p, &work, inside.clone()).map_err(e)?;
            let formula = if matches!(p, Predictor::PreviousBatch) {
                format!(
                    "{:.3}",
                    previous_batch_on_counts(work.trace(), 6, after.clone())
                )
            } else {
                "—".into()
            };
            println!(
                "| ESFT {task} ({n} tokens, `esft-deepseek-v2-lite/{task}`) | {} | {} | {}..{} | {}..{} | {:.3} | {:.3} | {:.3} | {formula} |",
                p.name(),
                p.label(),
                inside.start,
                inside.end,
                after.start,
                after.end,
                held.accuracy,
                ins.accuracy,
                held.chance
            );
        }
    }
    let csv = data.join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv");
    let bytes = std::fs::read(&csv).map_err(|x| format!("{}: {x}", csv.display()))?;
    println!(
        "\nHarMoEny Qwen1.5-MoE (`harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv`, real counts, 20 batches of 24,576 tokens per dataset, top-4 of 60): previous-batch only (no tokens), batches 1..20, layers 1..12, by the count formula.\n"
    );
    println!("| dataset | previous-batch accuracy | chance k/E |");
    println!("| --- | ---: | ---: |");
    for ds in ["bookcorpus", "wikitext", "random"] {
        let t = read_trace(
            &bytes,
            &ReadOptions {
                dataset: Some(ds.into()),
                ..Default::default()
            },
        )
        .map_err(e)?;
        let acc = previous_batch_on_counts(&t, 4, 0..t.num_batches());
        println!("| {ds} | {acc:.3} | {:.3} |", 4.0 / t.num_experts() as f64);
    }
    Ok(())
}
