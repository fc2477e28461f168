//! Libra's predictors measured by the paper's Table 1 metric (the fraction
//! of a token's true top-k experts found in its predicted top-k set, mean
//! over tokens and layers 1..L; `planners::accuracy`).
//!
//! Data:
//! - ESFT intent and summary (`DATA/esft-deepseek-v2-lite/{intent,summary}/`,
//!   real DeepSeek-V2-Lite token routes, 64 experts, top-6), read as the CLI
//!   reads a folder (batches of 1024 tokens; which rank a token is on does
//!   not enter this metric). The path table (moeplan's own, after Lina)
//!   never predicts a token it learnt: "held-out" seeds it with the first
//!   80 % of the tokens and measures the batches wholly after that split;
//!   "online" starts it empty, as `build_predictor` does for Libra, and
//!   measures every batch from the tokens before it. Either way it learns
//!   each batch once measured. Oracle = 1 by construction (an upper bound);
//!   noisy at p = 0.8 is simulated.
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
use moeplan::data::Workload;
use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::{DEFAULT_DEPTH, Noisy, PathTable, Predictor, accuracy, build_predictor};

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
        "Table 1's metric (fraction of a token's true top-k in the predicted top-k), layers 1..L. ESFT: batches of {BATCH_TOKENS} tokens; path table of depth {DEFAULT_DEPTH}, never predicting a token it learnt (held-out: seeded with the first 80 % of the tokens; online: from empty, each batch predicted from the batches before it), learning each batch once measured.\n"
    );
    println!(
        "| data (real) | predictor | label | held-out batches | held-out accuracy | online batches | online accuracy | chance k/E | count formula (previous batch, held-out) |"
    );
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for task in ["intent", "summary"] {
        let tokens = common::read_esft_folder(
            &data.join("esft-deepseek-v2-lite").join(task),
            preset("deepseek-v2-lite").map_err(|e| e.to_string())?,
        )?
        .with_tokens_dealt_evenly(RANKS, BATCH_TOKENS)
        .map_err(e)?;
        let n = tokens.num_tokens();
        let build = ((n as f64 * 0.8) as usize).clamp(1, n.max(1));
        let seeded = PathTable::build(&tokens, 0..build, DEFAULT_DEPTH).map_err(e)?;
        let work = Workload::from_tokens(tokens, BATCH_TOKENS).map_err(e)?;
        let b_n = work.trace().num_batches();
        let all = 0..b_n;
        let after = build.div_ceil(BATCH_TOKENS)..b_n;
        let predictors = [
            (
                Predictor::PathTable(seeded),
                build_predictor("path-table", &work).map_err(e)?,
            ),
            (Predictor::PreviousBatch, Predictor::PreviousBatch),
            (Predictor::Oracle, Predictor::Oracle),
            (
                Predictor::Noisy(Noisy::new(&work, 0.8, 0).map_err(e)?),
                Predictor::Noisy(Noisy::new(&work, 0.8, 0).map_err(e)?),
            ),
        ];
        for (p, online) in &predictors {
            let held = accuracy(p, &work, after.clone()).map_err(e)?;
            let ins = accuracy(online, &work, all.clone()).map_err(e)?;
            let formula = if matches!(p, Predictor::PreviousBatch) {
                format!(
                    "{:.3}",
                    previous_batch_on_counts(work.trace(), 6, after.clone())
                )
            } else {
                "—".into()
            };
            println!(
                "| ESFT {task} ({n} tokens, `esft-deepseek-v2-lite/{task}`) | {} | {} | {}..{} | {:.3} | {}..{} | {:.3} | {:.3} | {formula} |",
                p.name(),
                p.label(),
                after.start,
                after.end,
                held.accuracy,
                all.start,
                all.end,
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
