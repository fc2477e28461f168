//! Static plans against Libra on workloads that shift.
//!
//! Scenarios, each on 1 node × 8 GPUs (the Libra paper's 8 H200):
//! - (a) real counts: HarMoEny Qwen1.5-MoE
//!   (`DATA/harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv`, 60
//!   experts, top-4, 12 layers) bookcorpus → wikitext → random, 20 batches
//!   of 24,576 tokens each, concatenated; even arrival (counts carry no
//!   sources);
//! - (b) real token routes: ESFT intent → summary
//!   (`DATA/esft-deepseek-v2-lite/{intent,summary}/`, DeepSeek-V2-Lite, 64
//!   experts, top-6, 26 layers), each cut to its first 8 × 1024 tokens,
//!   each batch's tokens dealt to the 8 ranks in equal shares (`--deal
//!   sequences`: whole sequences round-robin, the old rule),
//!   concatenated;
//! - (c) generated token routes: `token_generator` on the `qwen3-30b-a3b`
//!   preset (128 experts, top-8, 48 layers), 8 × 1024 tokens from 8 ranks
//!   (dealt the same way) for each of the seeds 1, 2, 3 (different planted
//!   topics), concatenated.
//!
//! Static EPLB, CRAFT and GRACE are planned on the first segment only (from
//! the registry, at their defaults except the budget: EPLB the smallest
//! equal-slot redundant count ≥ 8 per layer — about one replica per GPU
//! per layer, the paper's EPLB setting —, CRAFT at the same memory on the
//! fullest GPU (`R` = EPLB's replica slots on its fullest GPU, over all
//! layers), GRACE its own Eq. 2 count) and replayed on every batch under
//! the `even` rule. Libra (N = 8, α = 0.5, ε = 5 %, remote pairs starting
//! on the even split, on a contiguous base) is re-planned every batch and
//! replayed under its own rule (`Rule::Libra`); its predictor is
//! previous-batch (and oracle, an upper bound) on counts, path-table
//! (grown online: each batch predicted from the batches before it, never
//! its own), previous-batch and oracle on token routes; two more rows run
//! previous-batch and oracle with the primary start (all remote pairs on
//! the expert's home GPU, the old rule). Every figure from
//! `judge::simulate`.
//!
//! Memory: a static plan's resident extra slots are its replicas over all
//! layers; Libra's are its two copy buffers (double buffering, §4), 2 · N
//! per GPU whatever the layer count, plus what it moves: copies × expert
//! bytes every layer of every batch.
//!
//! Run with `cargo run --release -p moeplan --example libra_shift --
//! ../shared/data [--deal sequences]`; prints Markdown.

#[path = "common/mod.rs"]
mod common;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use moeplan::Workload;
use moeplan::data::model::{ModelPreset, preset};
use moeplan::formats::{ReadOptions, read_trace};
use moeplan::judge::{CostModel, RemoteStart, Replay, Rule, Strategy, simulate};
use moeplan::planners::{self, Settings, Value};
use moeplan::planners::{DEFAULT_DEPTH, LibraOptions, PathTable, Predictor, libra_schedule};
use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
use moeplan::{Deal, LoadTrace, Plan, TokenTrace, Topology};
use ndarray::{Array2, Axis, s};

const BATCH_TOKENS: usize = 1024;
const SEGMENT_BATCHES: usize = 8;
const GPUS: usize = 8;

type Res<T> = Result<T, String>;

fn err(e: moeplan::Error) -> String {
    e.to_string()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let deal = match args.iter().position(|a| a == "--deal") {
        Some(i) => match args.get(i + 1).map(|w| Deal::from_name(w)) {
            Some(Ok(d)) => d,
            _ => {
                eprintln!("libra_shift: error: --deal takes even or sequences");
                return ExitCode::from(2);
            }
        },
        None => Deal::Even,
    };
    let data = args
        .iter()
        .find(|a| !a.starts_with("--") && Deal::from_name(a).is_err())
        .map_or_else(|| PathBuf::from("../shared/data"), PathBuf::from);
    match run(&data, deal) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("libra_shift: error: {e}");
            ExitCode::from(2)
        }
    }
}

struct Scenario {
    title: String,
    work: Workload,
    /// The first segment, what the static planners see.
    first: Workload,
    segments: Vec<(String, Range<usize>)>,
    model: &'static ModelPreset,
}

struct Row {
    name: String,
    memory: String,
    report: Replay,
    /// Libra: mean bytes copied per layer per batch.
    bytes_per_layer: Option<f64>,
}

/// Tokens `0..n` of each trace, concatenated in order.
fn concat_tokens(parts: &[(&TokenTrace, usize)]) -> Res<TokenTrace> {
    let Some((first, _)) = parts.first() else {
        return Err("nothing to concatenate".into());
    };
    let mut routes = Vec::new();
    for l in 0..first.num_layers() {
        let views: Vec<_> = parts
            .iter()
            .map(|(t, n)| t.routes(l).slice_move(s![..*n, ..]))
            .collect();
        let joined: Array2<u32> =
            ndarray::concatenate(Axis(0), &views).map_err(|e| e.to_string())?;
        routes.push(joined);
    }
    let ranks = parts
        .iter()
        .flat_map(|(t, n)| t.source_rank()[..*n].iter().copied())
        .collect();
    TokenTrace::new(
        first.num_experts(),
        first.layer_ids().to_vec(),
        routes,
        ranks,
    )
    .map_err(err)
}

fn harmoeny(data: &Path) -> Res<Scenario> {
    let csv = data.join("harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv");
    let bytes = std::fs::read(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let mut traces = Vec::new();
    let mut segments = Vec::new();
    let mut at = 0;
    for ds in ["bookcorpus", "wikitext", "random"] {
        let options = ReadOptions {
            dataset: Some(ds.into()),
            ..Default::default()
        };
        let t = read_trace(&bytes, &options).map_err(err)?;
        segments.push((ds.to_string(), at..at + t.num_batches()));
        at += t.num_batches();
        traces.push(t);
    }
    let views: Vec<_> = traces.iter().map(|t| t.counts().view()).collect();
    let counts = ndarray::concatenate(Axis(0), &views).map_err(|e| e.to_string())?;
    let ids = traces[0].layer_ids().to_vec();
    let all = LoadTrace::new(counts, ids).map_err(err)?;
    Ok(Scenario {
        title: "(a) HarMoEny Qwen1.5-MoE, real counts: bookcorpus → wikitext → random (`harmoeny-qwen1.5-moe/expert_freq_qwen_datasets.csv`, 60 batches of 24,576 tokens, even arrival)".into(),
        work: Workload::new(all),
        first: Workload::new(traces[0].clone()),
        segments,
        model: preset("qwen1.5-moe-a2.7b").map_err(err)?,
    })
}

fn esft(data: &Path, deal: Deal) -> Res<Scenario> {
    let v2 = preset("deepseek-v2-lite").map_err(err)?;
    let n = SEGMENT_BATCHES * BATCH_TOKENS;
    let mut parts = Vec::new();
    for task in ["intent", "summary"] {
        let t = common::read_esft_folder(&data.join("esft-deepseek-v2-lite").join(task), v2)?
            .dealt(deal, GPUS, BATCH_TOKENS)
            .map_err(err)?;
        if t.num_tokens() < n {
            return Err(format!("ESFT {task} has fewer than {n} tokens"));
        }
        parts.push(t);
    }
    let all = concat_tokens(&[(&parts[0], n), (&parts[1], n)])?;
    let first = concat_tokens(&[(&parts[0], n)])?;
    Ok(Scenario {
        title: format!(
            "(b) ESFT DeepSeek-V2-Lite, real token routes: intent → summary (`esft-deepseek-v2-lite/{{intent,summary}}`, the first {n} tokens of each, batches of {BATCH_TOKENS}, {})",
            deal.describe()
        ),
        work: Workload::from_tokens(all, BATCH_TOKENS).map_err(err)?,
        first: Workload::from_tokens(first, BATCH_TOKENS).map_err(err)?,
        segments: vec![
            ("intent".into(), 0..SEGMENT_BATCHES),
            ("summary".into(), SEGMENT_BATCHES..2 * SEGMENT_BATCHES),
        ],
        model: v2,
    })
}

fn generated(deal: Deal) -> Res<Scenario> {
    let p = preset("qwen3-30b-a3b").map_err(err)?;
    let n = SEGMENT_BATCHES * BATCH_TOKENS;
    let seeds = [1u64, 2, 3];
    let mut parts = Vec::new();
    for seed in seeds {
        let mut cfg = TokenGenConfig::new(p, n);
        cfg.ranks = GPUS;
        cfg.seed = seed;
        parts.push(
            generate_tokens(&cfg)
                .and_then(|t| t.dealt(deal, GPUS, BATCH_TOKENS))
                .map_err(err)?,
        );
    }
    let all = concat_tokens(&[(&parts[0], n), (&parts[1], n), (&parts[2], n)])?;
    let first = concat_tokens(&[(&parts[0], n)])?;
    Ok(Scenario {
        title: format!(
            "(c) generated Qwen3-30B-A3B token routes (`token_generator`, calibrated defaults, 8 ranks): seed 1 → seed 2 → seed 3, {n} tokens each, batches of {BATCH_TOKENS}, {}",
            deal.describe()
        ),
        work: Workload::from_tokens(all, BATCH_TOKENS).map_err(err)?,
        first: Workload::from_tokens(first, BATCH_TOKENS).map_err(err)?,
        segments: seeds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    format!("seed {s}"),
                    i * SEGMENT_BATCHES..(i + 1) * SEGMENT_BATCHES,
                )
            })
            .collect(),
        model: p,
    })
}

/// EPLB's redundant experts per layer: the smallest count ≥ `want` that
/// keeps every GPU's slot count equal.
fn eplb_budget(want: usize, experts: usize, gpus: usize) -> usize {
    planners::redundant_steps(experts, gpus)
        .find(|&k| k >= want)
        .unwrap_or(want)
}

fn rows(sc: &Scenario, topo: Topology) -> moeplan::Result<Vec<Row>> {
    let trace = sc.work.trace();
    let (l_n, e_n, d) = (trace.num_layers(), trace.num_experts(), topo.num_gpus());
    let cost = CostModel::for_model(sc.model);
    let k = eplb_budget(d, e_n, d);
    let eplb_s = Settings::new().with(planners::REDUNDANT_EXPERTS.name, Value::Count(k))?;
    let eplb_plan = planners::plan(planners::find("eplb")?, &sc.first, topo, &eplb_s)?.plan;
    // CRAFT at EPLB's memory on the fullest GPU: its budget is replicas per
    // GPU over all layers.
    let r = eplb_plan.summary().replica_slots_fullest_gpu;
    let craft_s = Settings::new().with("replicas_per_gpu", Value::Count(r))?;
    let contiguous = planners::contiguous(trace, topo)?;
    let base_plus = contiguous.summary().replica_slots_fullest_gpu;
    let statics: Vec<(String, Plan)> = vec![
        ("contiguous (Libra's base)".into(), contiguous.clone()),
        (format!("EPLB +{k}/layer"), eplb_plan),
        (
            format!("CRAFT R = {r}"),
            planners::plan(planners::find("craft")?, &sc.first, topo, &craft_s)?.plan,
        ),
        (
            "GRACE".into(),
            planners::prepare(
                planners::find(planners::GRACE_ID.as_str())?,
                &sc.first,
                topo,
                &Settings::new(),
            )?
            .plan(None)?
            .plan,
        ),
    ];
    let mut out = Vec::new();
    for (name, plan) in statics {
        let sum = plan.summary();
        let report = simulate(&sc.work, &Strategy::fixed(plan, Rule::Even), &cost)?;
        out.push(Row {
            name: format!("{name}, `even`"),
            memory: format!(
                "{} replicas ({:.1}/layer), fullest GPU +{}",
                sum.replicas,
                sum.replicas as f64 / l_n as f64,
                sum.replica_slots_fullest_gpu
            ),
            report,
            bytes_per_layer: None,
        });
    }
    let opts = LibraOptions::default();
    let primary = LibraOptions {
        start: RemoteStart::Primary,
        ..opts
    };
    let mut predictors = Vec::new();
    if let Some(tokens) = sc.work.tokens() {
        predictors.push((
            Predictor::PathTable(PathTable::empty(tokens, DEFAULT_DEPTH)?),
            opts,
        ));
    }
    predictors.push((Predictor::PreviousBatch, opts));
    predictors.push((Predictor::Oracle, opts));
    predictors.push((Predictor::PreviousBatch, primary));
    predictors.push((Predictor::Oracle, primary));
    for (p, opts) in &predictors {
        let s = libra_schedule(&sc.work, &contiguous, p, opts)?;
        let report = simulate(&sc.work, &s.strategy(), &cost)?;
        let copies: usize = s.copies.iter().sum();
        let per_layer = copies as f64 / (s.copies.len().max(1) * l_n) as f64;
        let online = if matches!(p, Predictor::PathTable(_)) {
            ", online"
        } else {
            ""
        };
        out.push(Row {
            name: format!(
                "Libra, {}{online} ({}), `libra-rebalance`, {} start",
                p.name(),
                p.label(),
                opts.start.name()
            ),
            memory: format!(
                "2 · N = {} buffer slots per GPU; fullest GPU +{} (base +{base_plus}); {per_layer:.1} copies/layer",
                2 * opts.extra_per_gpu,
                base_plus + 2 * opts.extra_per_gpu
            ),
            report,
            bytes_per_layer: Some(per_layer * cost.expert_bytes as f64),
        });
    }
    Ok(out)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn print(sc: &Scenario, rows: &[Row]) {
    println!("### {}\n", sc.title);
    let mut head = "| strategy, dispatch | memory |".to_string();
    let mut line = "| --- | --- |".to_string();
    for (name, _) in &sc.segments {
        head.push_str(&format!(" {name}: mean IR |"));
        line.push_str(" ---: |");
    }
    head.push_str(" worst batch IR | all batches: mean IR | MB copied per layer |");
    line.push_str(" ---: | ---: | ---: |");
    println!("{head}\n{line}");
    for r in rows {
        let ir = &r.report.per_batch_imbalance_ratio;
        let mut cells = format!("| {} | {} |", r.name, r.memory);
        for (_, range) in &sc.segments {
            let part = ir.get(range.clone()).unwrap_or(&[]);
            cells.push_str(&format!(" {:.3} |", mean(part)));
        }
        let worst = ir.iter().copied().fold(0.0, f64::max);
        let (at, _) = ir
            .iter()
            .enumerate()
            .fold((0, 0.0), |a, (i, &x)| if x > a.1 { (i, x) } else { a });
        cells.push_str(&format!(
            " {worst:.3} (batch {at}) | {:.3} | {} |",
            r.report.imbalance_ratio,
            r.bytes_per_layer
                .map_or("0".into(), |b| format!("{:.0}", b / 1e6))
        ));
        println!("{cells}");
    }
    println!();
}

fn run(data: &Path, deal: Deal) -> Res<()> {
    let topo = Topology::new(1, GPUS).map_err(err)?;
    println!(
        "Imbalance ratio (IR = max / mean GPU load, mean over layers) per batch on 1 × {GPUS} GPUs; statics planned on the first segment, replayed under `even`; Libra re-planned per batch under `libra-rebalance` (N = 8, α = 0.5, ε = 5 %, remote pairs starting as each row says). Token routes: {}.\n",
        deal.describe()
    );
    for make in [
        &(|| harmoeny(data)) as &dyn Fn() -> Res<Scenario>,
        &|| esft(data, deal),
        &|| generated(deal),
    ] {
        let t = std::time::Instant::now();
        let sc = make()?;
        let rows = rows(&sc, topo).map_err(|e| format!("{}: {e}", sc.title))?;
        print(&sc, &rows);
        eprintln!("{:.1} s", t.elapsed().as_secs_f64());
    }
    Ok(())
}
