//! The generated default against real per-batch traffic: HarMoEny's
//! Qwen1.5-MoE batches (`shared/data/harmoeny-qwen1.5-moe`, 20 batches of
//! 24,576 tokens for each of bookcorpus, wikitext and random) and the
//! generated `qwen1.5-moe-a2.7b` trace of the same shape.
//!
//! What is compared, and how close it must be (docs/generated-default.md
//! prints the table; `cargo run --release -p moeplan --example
//! calibration`):
//! - load-weighted CV of the shares: within ±20 % of real wikitext and of
//!   every one of the three datasets' range widened by 20 %;
//! - median CV: within ±20 % of real wikitext and within the three
//!   datasets' range widened by 20 % (`[0.8 · min, 1.2 · max]`). The
//!   unweighted median counts the cold experts as much as the hot ones, so
//!   it holds only because the generator gives Qwen1.5-MoE its measured
//!   spread of mean loads (`LOAD_SPREAD_QWEN15`, a cold tail: a quarter of
//!   the real experts get under an eighth of the mean load, at CV 0.4–0.6);
//!   with the DeepSeek family's narrower spread it sat 21 % low. Load bin by
//!   load bin the CVs agree too, checked below;
//! - lag-1 autocorrelation: a small negative number whose estimator is
//!   biased by about −1 / B (−0.05 at 20 batches) even for independent
//!   batches, so ±20 % of it means little; it must lie within ±0.02
//!   absolute of the three datasets' mean (−0.076), which the generator
//!   with independent batches (`DRIFT_LAG1 = 0`: −0.049 at seed 7) misses;
//! - the static-vs-dynamic gap: EPLB (default redundant experts, 1 group,
//!   1 node) planned on the first 10 batches and judged on the last 10,
//!   `bound − balancedness` of the judged half, at 4, 8 and 16 GPUs: within
//!   the three datasets' range widened by 20 %, and within ±20 % of real
//!   wikitext's at 4 and 8 GPUs (at 16 the generated gap sits between
//!   wikitext's 0.094 and bookcorpus' 0.124).
//!
//! Seed 7 (the CLI's default) and seeds 1–4 each must pass: the calibration
//! is not one lucky seed.

use super::common;

use crate::data::model::preset;
use crate::formats::{ReadOptions, read_trace};
use crate::planners::eplb::default_redundant_experts;
use crate::planners::{EplbConfig, eplb};
use crate::studies::variation::VariationStats;
use crate::synth::generator::{GenConfig, generate};
use crate::{LoadTrace, Topology, evaluate};

const DATA: &str = "harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv";
const DATASETS: [&str; 3] = ["bookcorpus", "wikitext", "random"];
const GPUS: [usize; 3] = [4, 8, 16];

struct Figures {
    v: VariationStats,
    /// `bound − balancedness` of held-out EPLB per GPU count.
    gap: Vec<f64>,
}

fn figures(t: &LoadTrace) -> Figures {
    let split = t.holdout_split(0.5).unwrap();
    let gap = GPUS
        .iter()
        .map(|&d| {
            let cfg = EplbConfig {
                redundant_experts: default_redundant_experts(t.num_experts(), d),
                groups: 1,
            };
            let plan = eplb(&split.plan, Topology::new(1, d).unwrap(), cfg).unwrap();
            evaluate(&split.eval, &plan).unwrap().gap
        })
        .collect();
    Figures {
        v: VariationStats::of(t).unwrap(),
        gap,
    }
}

fn real() -> Option<Vec<Figures>> {
    let bytes = std::fs::read(common::shared_data(DATA)?).unwrap();
    Some(
        DATASETS
            .iter()
            .map(|ds| {
                let options = ReadOptions {
                    dataset: Some((*ds).into()),
                    ..Default::default()
                };
                let t = read_trace(&bytes, &options).unwrap();
                assert_eq!((t.num_batches(), t.num_experts()), (20, 60), "{ds}");
                figures(&t)
            })
            .collect(),
    )
}

fn generated(seed: u64) -> Figures {
    let t = generate(&GenConfig {
        tokens_per_batch: 24_576,
        seed,
        ..GenConfig::new(preset("qwen1.5-moe-a2.7b").unwrap(), 20)
    })
    .unwrap();
    figures(&t)
}

/// `[0.8 · min, 1.2 · max]` of `xs`.
fn widened(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    (0.8 * lo, 1.2 * hi)
}

fn within_pct(x: f64, want: f64, pct: f64) -> bool {
    (x - want).abs() <= pct / 100.0 * want.abs()
}

#[test]
fn generated_variation_matches_harmoeny() {
    let Some(real) = real() else { return };
    let wiki = &real[1];
    let mean_lag = real.iter().map(|r| r.v.lag1_autocorrelation).sum::<f64>() / 3.0;
    for seed in [7, 1, 2, 3, 4] {
        let g = generated(seed);
        let v = &g.v;
        eprintln!(
            "seed {seed}: weighted CV {:.3}, median CV {:.3}, lag-1 {:+.3}, gaps {:.3?}",
            v.weighted_cv, v.median_cv, v.lag1_autocorrelation, g.gap
        );
        let (lo, hi) = widened(real.iter().map(|r| r.v.weighted_cv));
        assert!(
            within_pct(v.weighted_cv, wiki.v.weighted_cv, 20.0)
                && (lo..=hi).contains(&v.weighted_cv),
            "seed {seed}: load-weighted CV {} against wikitext {} (range {lo}..{hi})",
            v.weighted_cv,
            wiki.v.weighted_cv
        );
        let (lo, hi) = widened(real.iter().map(|r| r.v.median_cv));
        assert!(
            within_pct(v.median_cv, wiki.v.median_cv, 20.0) && (lo..=hi).contains(&v.median_cv),
            "seed {seed}: median CV {} against wikitext {} (range {lo}..{hi})",
            v.median_cv,
            wiki.v.median_cv
        );
        assert!(
            (v.lag1_autocorrelation - mean_lag).abs() <= 0.02,
            "seed {seed}: lag-1 {} against the real mean {mean_lag}",
            v.lag1_autocorrelation
        );
        for (i, d) in GPUS.iter().enumerate() {
            let (lo, hi) = widened(real.iter().map(|r| r.gap[i]));
            assert!(
                (lo..=hi).contains(&g.gap[i]),
                "seed {seed}, {d} GPUs: held-out EPLB gap {} outside {lo}..{hi}",
                g.gap[i]
            );
            if *d <= 8 {
                assert!(
                    within_pct(g.gap[i], wiki.gap[i], 20.0),
                    "seed {seed}, {d} GPUs: held-out EPLB gap {} against wikitext {}",
                    g.gap[i],
                    wiki.gap[i]
                );
            }
        }
    }
}

/// The CV as a function of load: in every load bin that the generated trace
/// fills with at least 50 pairs and each real one with at least 20 (0.25–2×
/// the mean load; the hotter bins hold about 20 generated pairs each, too
/// few for a median — the load-weighted CV covers them), the generated
/// median CV lies within the real datasets' range widened by 20 %; and hot
/// experts are steadier than cold ones in both.
#[test]
fn cv_by_load_matches_harmoeny() {
    let Some(real) = real() else { return };
    let g = generated(7);
    let mut compared = 0;
    for (i, bin) in g.v.by_load.iter().enumerate() {
        if bin.pairs < 50 || real.iter().any(|r| r.v.by_load[i].pairs < 20) {
            continue;
        }
        compared += 1;
        let (lo, hi) = widened(real.iter().map(|r| r.v.by_load[i].median_cv));
        assert!(
            (lo..=hi).contains(&bin.median_cv),
            "relative load {}..{}: median CV {} outside {lo}..{hi}",
            bin.lo,
            bin.hi,
            bin.median_cv
        );
    }
    assert!(compared >= 3, "only {compared} bins compared");
    for f in real.iter().chain([&g]) {
        let filled: Vec<_> = f.v.by_load.iter().filter(|b| b.pairs >= 10).collect();
        let (cold, hot) = (filled[0], filled[filled.len() - 1]);
        assert!(
            hot.median_cv < 0.75 * cold.median_cv,
            "hot {} against cold {}",
            hot.median_cv,
            cold.median_cv
        );
    }
}
