//! How close the token generator's co-activation is to real token routing:
//! the calibration table of [`moeplan::synth::token_generator`], printed as
//! Markdown.
//!
//! ```text
//! cargo run --release -p moeplan --example token_calibration -- ../shared/data
//! cargo run --release -p moeplan --example token_calibration -- ../shared/data cohesion=0.6 rank_skew=0.4
//! ```
//!
//! Real: ESFT's DeepSeek-V2-Lite routing (`esft-deepseek-v2-lite/{intent,
//! summary}`, 26 MoE layers × 64 experts, top-6, about 8k tokens each), the
//! sequences dealt to 8 ranks round-robin. Generated: the
//! `deepseek-v2-lite` preset, 8,192 tokens from 8 ranks, seed 7, the mean
//! over seeds 1–8, and the same with no structure (cohesion, rank skew and
//! stickiness 0: popularity alone). Per layer: the share of the affinity
//! mass in the top 1 % / 10 % of expert pairs, `U` (the intra-group share
//! of 8 equal groups grown greedily), the load CV and max / mean, the ranks'
//! mean total-variation distance from the whole mix, and the share of the
//! layer-to-next-layer pairs in their top 10 %; each as the mean over layers
//! [min–max]. Extra `key=value` arguments (`cohesion`, `spread`,
//! `rank_skew`, `stickiness`, `topics`, `sequence`) override the defaults:
//! how the constants were fitted (`quick`: only seeds 1–4, no speed).
//!
//! Then the generator's speed on the DeepSeek-V3 shape (58 layers × 256
//! experts, top-8) with 65,536 tokens.

#[path = "common/token_stats.rs"]
mod token_stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use moeplan::data::model::preset;
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use token_stats::{Summary, read_esft_folder, summarise};

const LAYERS: usize = 26;
const GROUPS: usize = 8;
const RANKS: usize = 8;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("speed") {
        return speed();
    }
    let data = PathBuf::from(args.next().unwrap_or_else(|| "../shared/data".into()));
    let v2 = match preset("deepseek-v2-lite") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut cfg = TokenGenConfig::new(v2, 8192);
    cfg.ranks = RANKS;
    let mut quick = false;
    for kv in args {
        if kv == "quick" {
            quick = true;
            continue;
        }
        let Some((k, v)) = kv.split_once('=') else {
            eprintln!("expected key=value, got {kv}");
            return ExitCode::FAILURE;
        };
        let Ok(x) = v.parse::<f64>() else {
            eprintln!("{kv}: not a number");
            return ExitCode::FAILURE;
        };
        match k {
            "cohesion" => cfg.cohesion = x,
            "spread" => cfg.cohesion_spread = x,
            "rank_skew" => cfg.rank_skew = x,
            "stickiness" => cfg.layer_stickiness = x,
            "topics" => cfg.topics = x as usize,
            "sequence" => cfg.sequence_tokens = x as usize,
            _ => {
                eprintln!("unknown knob {k}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "Generated: topics {}, cohesion {} ± {}, rank skew {}, layer stickiness {}, {} tokens per sequence\n",
        cfg.topics,
        cfg.cohesion,
        cfg.cohesion_spread,
        cfg.rank_skew,
        cfg.layer_stickiness,
        cfg.sequence_tokens
    );
    println!(
        "| trace | top 1 % pairs | top 10 % pairs | U (8 greedy groups) | load CV | max / mean | rank TV | cross-layer top 10 % |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for task in ["intent", "summary"] {
        let dir = data.join("esft-deepseek-v2-lite").join(task);
        if !dir.is_dir() {
            eprintln!("{} not found: no real rows", dir.display());
            continue;
        }
        let t = read_esft_folder(&dir, RANKS);
        row(
            &format!("ESFT {task} ({} tokens)", t.num_tokens()),
            &summarise(&t, LAYERS, GROUPS),
        );
    }
    let gen_row = |name: &str, c: &TokenGenConfig, seeds: &[u64]| {
        let sums: Vec<Summary> = seeds
            .iter()
            .filter_map(|&s| generate_tokens(&TokenGenConfig { seed: s, ..*c }).ok())
            .map(|t| summarise(&t, LAYERS, GROUPS))
            .collect();
        row(name, &average(&sums));
    };
    if quick {
        gen_row("generated, mean of seeds 1–4", &cfg, &[1, 2, 3, 4]);
        return ExitCode::SUCCESS;
    }
    gen_row("generated, seed 7", &cfg, &[7]);
    gen_row(
        "generated, mean of seeds 1–8",
        &cfg,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    let flat = TokenGenConfig {
        cohesion: 0.0,
        cohesion_spread: 0.0,
        rank_skew: 0.0,
        layer_stickiness: 0.0,
        ..cfg
    };
    gen_row(
        "generated, no structure (popularity only), seeds 1–8",
        &flat,
        &[1, 2, 3, 4, 5, 6, 7, 8],
    );
    speed()
}

/// Best of 5 on the DeepSeek-V3 shape, wall clock.
fn speed() -> ExitCode {
    let Ok(v3) = preset("deepseek-v3") else {
        return ExitCode::FAILURE;
    };
    let big = TokenGenConfig::new(v3, 65_536);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        if generate_tokens(&big).is_err() {
            return ExitCode::FAILURE;
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "\nDeepSeek-V3 shape, 65,536 tokens × 58 layers × top-8: {:.0} ms (best of 5, {} threads)",
        best * 1e3,
        if cfg!(feature = "parallel") {
            "all"
        } else {
            "one"
        }
    );
    ExitCode::SUCCESS
}

fn row(name: &str, s: &Summary) {
    let cell = |m: f64, lo: f64, hi: f64, pct: bool| {
        if pct {
            format!("{:.1} % [{:.1}–{:.1}]", 100.0 * m, 100.0 * lo, 100.0 * hi)
        } else {
            format!("{m:.2} [{lo:.2}–{hi:.2}]")
        }
    };
    println!(
        "| {name} | {} | {} | {} | {} | {} | {} | {} |",
        cell(s.mean.top1, s.min.top1, s.max.top1, true),
        cell(s.mean.top10, s.min.top10, s.max.top10, true),
        cell(s.mean.grouped, s.min.grouped, s.max.grouped, true),
        cell(s.mean.cv, s.min.cv, s.max.cv, false),
        cell(
            s.mean.max_over_mean,
            s.min.max_over_mean,
            s.max.max_over_mean,
            false
        ),
        cell(s.mean.rank_tv, s.min.rank_tv, s.max.rank_tv, true),
        cell(
            s.mean.cross_top10,
            s.min.cross_top10,
            s.max.cross_top10,
            true
        ),
    );
}

/// Field-wise mean of several summaries (min and max too: the typical range).
fn average(s: &[Summary]) -> Summary {
    let n = s.len().max(1) as f64;
    let mut out = Summary::default();
    for x in s {
        for (o, v) in [
            (&mut out.mean, &x.mean),
            (&mut out.min, &x.min),
            (&mut out.max, &x.max),
        ] {
            o.top1 += v.top1 / n;
            o.top10 += v.top10 / n;
            o.grouped += v.grouped / n;
            o.cv += v.cv / n;
            o.max_over_mean += v.max_over_mean / n;
            o.rank_tv += v.rank_tv / n;
            o.cross_top10 += v.cross_top10 / n;
        }
    }
    out
}
