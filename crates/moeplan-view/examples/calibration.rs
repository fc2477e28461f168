//! How close the generated default is to real per-batch traffic: the
//! calibration table of docs/generated-default.md, printed as
//! Markdown.
//!
//! ```text
//! cargo run --release -p moeplan-view --example calibration -- ../shared/data
//! ```
//!
//! Real: `harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv` (Qwen1.5-MoE,
//! 12 layers, 20 batches of 24,576 tokens per dataset). Generated: the
//! `qwen1.5-moe-a2.7b` preset in the same shape (24 layers, 20 batches of
//! 24,576 tokens), seed 7 (the CLI's default) and the mean over seeds 1–8.
//! For each: the batch-to-batch variation ([`VariationStats`]) and the
//! static-vs-dynamic gap — EPLB (its default redundant experts, one group,
//! one node) planned on the first 10 batches and judged on the last 10,
//! against the per-batch bound of the judged half — at 4, 8 and 16 GPUs.
//!
//! Before the table, the fit behind the generator's drift constants
//! ([`DRIFT_A`], [`DRIFT_C`], [`DRIFT_LAYER_SPREAD`], [`DRIFT_SPREAD_VAR`]):
//! for every (layer, expert) pair with at least a tenth of the mean load,
//! the log of its sample variance of shares over the 20 batches is modelled
//! as `ln f − η²/2 + ψ(ν) − ln ν + ε`, `ν = (B − 1) / 2`,
//! `Var ε = η² + ψ′(ν)` (a per-pair log-normal spread `η²` of the drift
//! around `f` and the log of a scaled χ²), with
//! `f = p² · [(1 − p) / (p · N · k) + exp(Λ · (2u − 1)) · (A / (k · p) + C)]`
//! for mean share `p`, `N · k` assignments per batch and the layer's place
//! `u` in the skew order (by its hottest expert's mean share); Gaussian
//! maximum likelihood by coordinate search, per dataset, then pooled with `η²`
//! fixed at the datasets' mean.
//!
//! Then the planner page's default view (generated DeepSeek-V3, 64 batches of
//! 4,096 tokens, seed 7, 8 nodes × 8 GPUs, 8 expert groups): BASE, EPLB and
//! CRAFT at R = 8 through [`Workspace`], in-sample as the page shows them,
//! and the generator's speed on that shape.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use moeplan::data::model::preset;
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::planners::default_redundant_experts;
use moeplan::planners::{EplbConfig, eplb};
use moeplan::studies::{VariationStats, pair_variation};
use moeplan::synth::generator::{
    DRIFT_A, DRIFT_C, DRIFT_LAYER_SPREAD, DRIFT_SPREAD_VAR, GenConfig, LOAD_SPREAD,
    LOAD_SPREAD_QWEN15, generate,
};
use moeplan::{LoadTrace, Topology, evaluate};
use moeplan_view::{Cluster, Workspace};

const DATASETS: [&str; 3] = ["bookcorpus", "wikitext", "random"];
const GPUS: [usize; 3] = [4, 8, 16];
const SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

/// One trace's row: variation, then (held-out EPLB balancedness, bound) per
/// GPU count.
struct Row {
    name: String,
    v: VariationStats,
    held_out: Vec<(f64, f64)>,
}

fn held_out(trace: &LoadTrace) -> Result<Vec<(f64, f64)>, moeplan::Error> {
    let split = trace.holdout_split(0.5)?;
    GPUS.iter()
        .map(|&d| {
            let cfg = EplbConfig {
                redundant_experts: default_redundant_experts(trace.num_experts(), d),
                groups: 1,
            };
            let plan = eplb(&split.plan, Topology::new(1, d)?, cfg)?;
            let r = evaluate(&split.eval, &plan)?;
            Ok((r.balancedness, r.bound))
        })
        .collect()
}

fn row(name: String, trace: &LoadTrace) -> Result<Row, moeplan::Error> {
    Ok(Row {
        name,
        v: VariationStats::of(trace)?,
        held_out: held_out(trace)?,
    })
}

fn generated(seed: u64) -> Result<LoadTrace, moeplan::Error> {
    generate(&GenConfig {
        tokens_per_batch: 24_576,
        seed,
        ..GenConfig::new(preset("qwen1.5-moe-a2.7b")?, 20)
    })
}

/// The mean of several rows, field by field.
fn mean_row(name: &str, rows: &[Row]) -> Row {
    let n = rows.len() as f64;
    let m = |f: &dyn Fn(&Row) -> f64| rows.iter().map(f).sum::<f64>() / n;
    let mut v = rows[0].v.clone();
    v.weighted_cv = m(&|r| r.v.weighted_cv);
    v.median_cv = m(&|r| r.v.median_cv);
    v.lag1_autocorrelation = m(&|r| r.v.lag1_autocorrelation);
    for (i, bin) in v.by_load.iter_mut().enumerate() {
        bin.pairs = rows.iter().map(|r| r.v.by_load[i].pairs).sum::<usize>() / rows.len();
        bin.median_cv = m(&|r| r.v.by_load[i].median_cv);
        bin.rms_cv = m(&|r| r.v.by_load[i].rms_cv);
    }
    let held_out = (0..GPUS.len())
        .map(|g| (m(&|r| r.held_out[g].0), m(&|r| r.held_out[g].1)))
        .collect();
    Row {
        name: name.into(),
        v,
        held_out,
    }
}

fn print_rows(rows: &[Row]) {
    println!(
        "| trace | load-weighted CV | median CV | lag-1 autocorr. | EPLB 4 GPUs (bound, gap) | EPLB 8 GPUs (bound, gap) | EPLB 16 GPUs (bound, gap) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let cells: Vec<String> = r
            .held_out
            .iter()
            .map(|(b, ub)| format!("{b:.3} ({ub:.3}, {:.3})", ub - b))
            .collect();
        println!(
            "| {} | {:.3} | {:.3} | {:+.3} | {} |",
            r.name,
            r.v.weighted_cv,
            r.v.median_cv,
            r.v.lag1_autocorrelation,
            cells.join(" | ")
        );
    }
}

fn print_bins(rows: &[Row]) {
    let bins = &rows[0].v.by_load;
    let heads: Vec<String> = bins
        .iter()
        .map(|b| {
            if b.hi.is_finite() {
                format!("{}–{}", b.lo, b.hi)
            } else {
                format!("≥ {}", b.lo)
            }
        })
        .collect();
    println!("| trace | {} |", heads.join(" | "));
    println!("| --- |{}", " ---: |".repeat(bins.len()));
    for r in rows {
        let cells: Vec<String> =
            r.v.by_load
                .iter()
                .map(|b| {
                    if b.pairs == 0 {
                        "—".into()
                    } else {
                        format!("{:.2} ({})", b.median_cv, b.pairs)
                    }
                })
                .collect();
        println!("| {} | {} |", r.name, cells.join(" | "));
    }
}

/// One pair's data for the fit: mean share, ln of the sample variance of
/// its share, the layer's place in the skew order.
struct Obs {
    p: f64,
    ln_var: f64,
    u: f64,
}

/// Fit inputs of one trace: its pairs with at least a tenth of the mean
/// load, assignments per batch (`N · k`), top-k and batches.
struct FitData {
    obs: Vec<Obs>,
    nk: f64,
    k: f64,
    nu: f64,
}

fn fit_data(t: &LoadTrace, k: usize) -> Result<FitData, moeplan::Error> {
    let pairs = pair_variation(t)?;
    let e = t.num_experts() as f64;
    let l = t.num_layers();
    // the layer's place in the skew order, by its hottest mean share
    let mut hottest = vec![0.0f64; l];
    for p in &pairs {
        hottest[p.layer] = hottest[p.layer].max(p.mean_share);
    }
    let mut order: Vec<usize> = (0..l).collect();
    order.sort_by(|&a, &b| hottest[a].total_cmp(&hottest[b]).then(a.cmp(&b)));
    let mut u = vec![0.5; l];
    for (rank, &li) in order.iter().enumerate() {
        if l > 1 {
            u[li] = rank as f64 / (l - 1) as f64;
        }
    }
    let obs = pairs
        .iter()
        .filter(|p| p.mean_share * e >= 0.1 && p.cv > 0.0)
        .map(|p| Obs {
            p: p.mean_share,
            ln_var: 2.0 * (p.cv * p.mean_share).ln(),
            u: u[p.layer],
        })
        .collect();
    Ok(FitData {
        obs,
        nk: t.counts().sum() / (t.num_batches() * l) as f64,
        k: k as f64,
        nu: (t.num_batches() - 1) as f64 / 2.0,
    })
}

/// `[ln A, ln C, Λ, η²]`.
type Theta = [f64; 4];

fn neg_log_likelihood(data: &[&FitData], th: &Theta) -> f64 {
    let [la, lc, lambda, eta2] = *th;
    let (a, c) = (la.exp(), lc.exp());
    let mut s = 0.0;
    for d in data {
        let v = eta2 + trigamma(d.nu);
        let offset = digamma(d.nu) - d.nu.ln() - eta2 / 2.0;
        for o in &d.obs {
            let cv2 = (1.0 - o.p) / (o.p * d.nk)
                + (lambda * (2.0 * o.u - 1.0)).exp() * (a / (d.k * o.p) + c);
            let mu = (cv2 * o.p * o.p).ln() + offset;
            s += (o.ln_var - mu).powi(2) / (2.0 * v) + 0.5 * v.ln();
        }
    }
    s
}

/// Coordinate search from `start`; `free[i]` says which parameters move.
fn fit(data: &[&FitData], start: Theta, free: [bool; 4]) -> Theta {
    let mut th = start;
    let mut best = neg_log_likelihood(data, &th);
    for step in [0.2, 0.05, 0.01, 0.002] {
        loop {
            let mut improved = false;
            for i in (0..4).filter(|&i| free[i]) {
                for sign in [1.0, -1.0] {
                    let mut t = th;
                    t[i] += sign * step;
                    if t[3] < 0.0 {
                        continue;
                    }
                    let v = neg_log_likelihood(data, &t);
                    if v < best {
                        (best, th, improved) = (v, t, true);
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
    th
}

fn digamma(mut x: f64) -> f64 {
    let mut s = 0.0;
    while x < 20.0 {
        s -= 1.0 / x;
        x += 1.0;
    }
    s + x.ln() - 1.0 / (2.0 * x) - 1.0 / (12.0 * x * x) + 1.0 / (120.0 * x.powi(4))
}

fn trigamma(mut x: f64) -> f64 {
    let mut s = 0.0;
    while x < 20.0 {
        s += 1.0 / (x * x);
        x += 1.0;
    }
    s + 1.0 / x + 1.0 / (2.0 * x * x) + 1.0 / (6.0 * x.powi(3)) - 1.0 / (30.0 * x.powi(5))
}

fn print_fit(real: &[(&str, LoadTrace)]) -> Result<(), moeplan::Error> {
    let data: Vec<FitData> = real
        .iter()
        .map(|(_, t)| fit_data(t, 4))
        .collect::<Result<_, _>>()?;
    let start = [-7.2, -4.5, 0.6, 0.3];
    println!("Drift fit (CV² = sampling + exp(Λ(2u − 1)) · h · (A / π + C), Var ln h = η²):\n");
    println!("| data | A | C | Λ | η² | pairs |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let show = |name: &str, th: &Theta, n: usize| {
        println!(
            "| {name} | {:.5} | {:.5} | {:.2} | {:.2} | {n} |",
            th[0].exp(),
            th[1].exp(),
            th[2],
            th[3]
        )
    };
    let mut eta2 = 0.0;
    for ((name, _), d) in real.iter().zip(&data) {
        let th = fit(&[d], start, [true; 4]);
        show(name, &th, d.obs.len());
        eta2 += th[3] / data.len() as f64;
    }
    let all: Vec<&FitData> = data.iter().collect();
    let n = data.iter().map(|d| d.obs.len()).sum();
    let pooled = fit(
        &all,
        [start[0], start[1], start[2], eta2],
        [true, true, true, false],
    );
    show("pooled, η² = the datasets' mean", &pooled, n);
    println!(
        "| generator's constants | {DRIFT_A:.5} | {DRIFT_C:.5} | {DRIFT_LAYER_SPREAD:.2} | {DRIFT_SPREAD_VAR:.2} | |\n"
    );
    Ok(())
}

/// The spread of a trace's mean loads: per layer (summed over batches,
/// layers with no load left out), `σ = (ln q75 − ln q25) / 1.349` of the
/// experts' loads without the layer's top two (the hot pair the generator
/// sets apart), a robust log-normal σ that the cold tail's near-zero loads do
/// not swamp; then a least-squares line of `σ` against the layer's place
/// `u` in the skew order (0 the layer with the smallest hottest expert, 1
/// the largest). Returns the line at `u = 0` and `u = 1`, and the layers.
fn spread_line(traces: &[&LoadTrace]) -> (f64, f64, usize) {
    let mut pts = Vec::new();
    for t in traces {
        let summed = t.summed();
        let mut layers: Vec<(f64, f64)> = Vec::new();
        for row in summed.rows() {
            let total: f64 = row.sum();
            if total <= 0.0 {
                continue;
            }
            let e = row.len() as f64;
            let mut rel: Vec<f64> = row.iter().map(|&c| c * e / total).collect();
            rel.sort_by(f64::total_cmp);
            let max = rel.last().copied().unwrap_or(0.0);
            rel.truncate(rel.len().saturating_sub(2));
            let n = rel.len();
            if n < 4 {
                continue;
            }
            let q = |f: f64| rel[((f * n as f64) as usize).min(n - 1)].max(1e-5).ln();
            layers.push((max, (q(0.75) - q(0.25)) / 1.349));
        }
        layers.sort_by(|a, b| a.0.total_cmp(&b.0));
        let last = layers.len().saturating_sub(1).max(1) as f64;
        pts.extend(
            layers
                .iter()
                .enumerate()
                .map(|(i, &(_, sigma))| (i as f64 / last, sigma)),
        );
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let at0 = my - slope * mx;
    (at0, at0 + slope, pts.len())
}

/// The mean-load spread of the real traces against the generator's
/// constants and what its traces show by the same estimator.
fn print_spread(data: &std::path::Path, real: &[(&str, LoadTrace)]) -> Result<(), moeplan::Error> {
    println!(
        "Spread of the mean loads (σ of ln load by IQR, without each layer's top two; least-squares line from the most balanced layer to the hottest):\n"
    );
    println!("| trace | σ, most balanced | σ, hottest | layers |");
    println!("| --- | ---: | ---: | ---: |");
    let show = |name: &str, (lo, hi, n): (f64, f64, usize)| {
        println!("| {name} | {lo:.2} | {hi:.2} | {n} |")
    };
    for (name, t) in real {
        show(&format!("real Qwen1.5-MoE {name}"), spread_line(&[t]));
    }
    let all: Vec<&LoadTrace> = real.iter().map(|(_, t)| t).collect();
    show("real Qwen1.5-MoE, pooled", spread_line(&all));
    let (lo, hi) = LOAD_SPREAD_QWEN15;
    println!("| `LOAD_SPREAD_QWEN15` | {lo:.2} | {hi:.2} | |");
    show(
        "generated qwen1.5-moe-a2.7b, seed 7",
        spread_line(&[&generated(7)?]),
    );
    let dir = data.join("sglang-deepseek-v3");
    let mut sglang = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
        {
            if let Ok(bytes) = std::fs::read(path) {
                sglang.push(read_trace(&bytes, &ReadOptions::default())?);
            }
        }
    }
    if sglang.is_empty() {
        println!(
            "| real DeepSeek-V3 (SGLang) | not found in {} | | |",
            dir.display()
        );
    } else {
        let refs: Vec<&LoadTrace> = sglang.iter().collect();
        show(
            &format!("real DeepSeek-V3, {} SGLang runs pooled", refs.len()),
            spread_line(&refs),
        );
    }
    let (lo, hi) = LOAD_SPREAD;
    println!("| `LOAD_SPREAD` | {lo:.2} | {hi:.2} | |");
    let ds = generate(&GenConfig::new(preset("deepseek-v3")?, 64))?;
    show(
        "generated deepseek-v3, 64 batches, seed 7",
        spread_line(&[&ds]),
    );
    println!();
    Ok(())
}

fn page_default() -> Result<(), moeplan::Error> {
    let cfg = GenConfig::new(preset("deepseek-v3")?, 64);
    let mut times = Vec::new();
    let mut trace = None;
    for _ in 0..5 {
        let t0 = Instant::now();
        trace = Some(generate(&cfg)?);
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let trace = trace.ok_or_else(|| moeplan::Error::Argument("no trace".into()))?;
    let v = VariationStats::of(&trace)?;
    let stats = trace.stats();
    let mut summed: Vec<f64> = stats.layers.iter().map(|l| l.max_over_mean).collect();
    summed.sort_by(f64::total_cmp);
    if let Some(hot) = stats
        .layers
        .iter()
        .max_by(|a, b| a.max_over_mean.total_cmp(&b.max_over_mean))
    {
        println!(
            "\nDeepSeek-V3 preset, 64 batches, seed 7: hottest layer max / mean {:.1}× summed, {:.1}× per batch, top two {:.1} %; median layer {:.1}× summed (least {:.1}×)",
            hot.max_over_mean,
            hot.batch_max_over_mean,
            100.0 * hot.top2_share,
            summed[summed.len() / 2],
            summed[0]
        );
    }
    println!(
        "\nGenerator: DeepSeek-V3, 64 batches × 58 layers × 256 experts, 4,096 tokens per batch: median of 5 runs {:.0} ms (min {:.0} ms); load-weighted CV {:.3}, median CV {:.3}, lag-1 {:+.3}\n",
        times[2], times[0], v.weighted_cv, v.median_cv, v.lag1_autocorrelation
    );
    let ws = Workspace::new(
        trace,
        Cluster {
            nodes: 8,
            gpus_per_node: 8,
            groups: 8,
        },
    )?;
    println!(
        "Page default (generated DeepSeek-V3, 64 batches, seed 7, 8 × 8 GPUs, 8 groups; CRAFT at R = 8, then at the page's automatic R), in-sample:\n"
    );
    println!("| plan | balancedness | bound |");
    println!("| --- | ---: | ---: |");
    let view = ws.view(Some(8), 0)?;
    for p in &view.plans {
        println!("| {} | {:.4} | {:.4} |", p.label, p.balancedness, p.bound);
    }
    // the focus planner's row at the page's default budget (its automatic R)
    let focus = ws.focus_id().map(|id| id.to_string());
    if let Some(focus) = ws
        .view(None, 0)?
        .plans
        .into_iter()
        .find(|p| Some(&p.name) == focus.as_ref())
    {
        println!(
            "| {} | {:.4} | {:.4} |",
            focus.label, focus.balancedness, focus.bound
        );
    }
    Ok(())
}

fn run(data: PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let csv = data.join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv");
    let bytes = std::fs::read(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let mut real = Vec::new();
    for ds in DATASETS {
        let options = ReadOptions {
            dataset: Some(ds.into()),
            ..Default::default()
        };
        real.push((ds, read_trace(&bytes, &options)?));
    }
    print_spread(&data, &real)?;
    print_fit(&real)?;
    let mut rows = Vec::new();
    for (ds, t) in &real {
        rows.push(row(format!("real {ds}"), t)?);
    }
    let seeded: Vec<Row> = SEEDS
        .map(|s| row(format!("generated, seed {s}"), &generated(s)?))
        .collect::<Result<_, _>>()?;
    rows.push(row("generated, seed 7".into(), &generated(7)?)?);
    rows.push(mean_row(
        &format!("generated, mean of seeds {}–{}", SEEDS.start(), SEEDS.end()),
        &seeded,
    ));
    println!(
        "Qwen1.5-MoE: HarMoEny's real batches against the generated preset, 20 batches of 24,576 tokens; EPLB planned on batches 0–9, judged on 10–19 (balancedness, per-batch bound of the judged half, gap = bound − balancedness):\n"
    );
    print_rows(&rows);
    println!("\nMedian CV by relative load (mean share × experts), pairs in brackets:\n");
    print_bins(&rows);
    page_default()?;
    Ok(())
}

fn main() -> ExitCode {
    let data = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("../shared/data"), PathBuf::from);
    match run(data) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
