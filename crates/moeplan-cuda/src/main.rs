//! `moeplan-cuda`: run plans on a CUDA GPU the way an expert-parallel engine
//! would, and measure them. Argument parsing, trace loading and printing
//! live here; everything else is the library.
//!
//! Exit codes: 0 success, 1 a `check` comparison failed, 2 any error (no
//! CUDA device, bad arguments, a CUDA failure) — printed as one line
//! `moeplan-cuda: …`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use moeplan::synth::generator::{GenConfig, generate};
use moeplan::{LoadTrace, Topology, data::model, formats};
use moeplan_cuda::bench::{self, BenchConfig, PlanAlgo};
use moeplan_cuda::expert::ExpertShape;
use moeplan_cuda::gpu::Gpu;
use moeplan_cuda::select;
use moeplan_cuda::{Error, Result, check, micro};

#[derive(Parser)]
#[command(
    name = "moeplan-cuda",
    version,
    about = "Run moeplan plans on a CUDA GPU as an expert-parallel engine would, and measure them"
)]
struct Cli {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0, global = true)]
    device: usize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every GPU kernel against its CPU reference on generated data.
    Check(CheckArgs),
    /// Dispatch bandwidth and expert-GEMM throughput against the device's peaks.
    Micro(MicroArgs),
    /// Plans run layer by layer with every expert-parallel rank emulated: predicted vs measured balance.
    Bench(Box<BenchArgs>),
}

#[derive(Args)]
struct CheckArgs {
    /// Skip the full-size (real model dimensions) case.
    #[arg(long)]
    no_full_size: bool,
    /// Model whose expert sizes the full-size case uses.
    #[arg(long, default_value = "deepseek-v3")]
    model: String,
    /// Tokens of the full-size case.
    #[arg(long, default_value_t = 2048)]
    full_tokens: usize,
    /// Rows and tokens the full-size case compares against the CPU.
    #[arg(long, default_value_t = 16)]
    samples: usize,
}

#[derive(Args)]
struct MicroArgs {
    /// Model whose sizes are used.
    #[arg(long, default_value = "deepseek-v3")]
    model: String,
    /// Tokens of the dispatch test.
    #[arg(long, default_value_t = 16384)]
    tokens: usize,
    /// GPUs the dispatch spreads over.
    #[arg(long, default_value_t = 64)]
    gpus: usize,
    /// Timed repetitions (median reported).
    #[arg(long, default_value_t = 20)]
    repeats: usize,
}

#[derive(Args)]
struct BenchArgs {
    /// Trace file (any format moeplan reads); omit for a generated trace.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Preset of the generated trace (without --trace).
    #[arg(long, default_value = "deepseek-v3")]
    preset: String,
    /// Batches of the generated trace.
    #[arg(long, default_value_t = 64)]
    batches: usize,
    /// Seed of the generated trace.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Plans made here: contiguous, base, eplb, eplb:K, craft:R, craft:auto
    /// (comma-separated). Default: contiguous,eplb,craft:4,craft:8, unless
    /// --plan files are given.
    #[arg(long, value_delimiter = ',')]
    plan_algos: Option<Vec<String>>,
    /// A plan file (any format `moeplan` reads: its plan JSON, SGLang's
    /// --init-expert-location, vLLM's map, CSV, TensorRT-LLM's YAML) for
    /// this trace's layers and the cluster given; repeat for several. This
    /// is how GRACE-MoE's and Libra's plans (`moeplan plan --algo grace`)
    /// reach the GPU.
    #[arg(long = "plan")]
    plans: Vec<PathBuf>,
    /// Only the planner's side: routing, selection and the three
    /// predictions per (layer, plan), on the CPU; no device needed.
    #[arg(long)]
    predict_only: bool,
    /// Nodes.
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: usize,
    /// Router expert groups for EPLB.
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Model layer ids to run (comma-separated), or `all`; default: the first MoE layer.
    #[arg(long)]
    layer: Option<String>,
    /// Tokens per layer batch.
    #[arg(long, default_value_t = 16384)]
    tokens: usize,
    /// Experts per token (default: the trace's, else the model's).
    #[arg(long)]
    top_k: Option<usize>,
    /// Replica selection rule, the planner's own: vllm, sglang-static,
    /// sglang-static-v0 (SGLang before `_find_nearest_expert`),
    /// grace-weighted, grace-topology (GRACE-MoE's Algorithms 3 and 4,
    /// weighted by the trace's loads), libra or libra:P (Libra's
    /// rebalancer, ε = P percent, default 5). GRACE's and Libra's are
    /// realised in whole rows on the host and uploaded.
    #[arg(long, default_value = "vllm")]
    dispatch: String,
    /// Model whose expert sizes are used (default: the trace's model, else the preset).
    #[arg(long)]
    model: Option<String>,
    /// Override the hidden size.
    #[arg(long)]
    hidden: Option<usize>,
    /// Override the expert intermediate size.
    #[arg(long)]
    inter: Option<usize>,
    /// Timed repetitions per rank (median reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Untimed rounds before timing.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Draw tokens from this trace batch (default: all batches summed).
    #[arg(long)]
    source_batch: Option<usize>,
    /// Seed of the token routing (SGLang's map uses its own fixed seed).
    #[arg(long, default_value_t = 1)]
    routing_seed: u64,
    /// Distinct expert weight sets on the device (reduced to fit memory).
    #[arg(long, default_value_t = 32)]
    weight_pool: usize,
    /// One JSON object per (layer, plan) instead of text.
    #[arg(long)]
    json: bool,
    /// Include host launch gaps in the times (by default each timed region
    /// is queued behind a spin kernel so only GPU execution is measured).
    #[arg(long)]
    launch_gaps: bool,
}

enum Outcome {
    Ok,
    ChecksFailed,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A panic anywhere (a CUDA library misbehaving) becomes one error line,
    // not a backtrace.
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(|| run(cli)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::Cuda(format!("internal failure: {msg}")))
    });
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::ChecksFailed) => ExitCode::from(1),
        Err(e @ Error::NoDevice(_)) => {
            eprintln!("moeplan-cuda: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("moeplan-cuda: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Check(a) => run_check(cli.device, &a),
        Command::Micro(a) => {
            let gpu = Gpu::open(cli.device)?;
            let cfg = micro::MicroConfig {
                preset: model::preset(&a.model)?,
                tokens: a.tokens,
                gpus: a.gpus.max(1),
                repeats: a.repeats,
            };
            micro::run(&gpu, &cfg, &mut |line| println!("{line}"))?;
            Ok(Outcome::Ok)
        }
        Command::Bench(a) => run_bench(cli.device, &a),
    }
}

fn run_check(device: usize, a: &CheckArgs) -> Result<Outcome> {
    let preset = model::preset(&a.model)?;
    let gpu = Gpu::open(device)?;
    println!("device: {}", gpu.info.describe());
    let (mut pass, mut fail) = (0usize, 0usize);
    let mut tally = |o: &check::Outcome| {
        println!("{o}");
        if o.pass {
            pass += 1;
        } else {
            fail += 1;
        }
    };
    for case in check::cases()? {
        println!(
            "case {}: {} tokens × top-{}, {} experts on {} × {} GPUs (+{} replicas{}), hidden {}, inter {}, weight pool {}",
            case.name,
            case.tokens,
            case.top_k,
            case.experts,
            case.nodes,
            case.gpus_per_node,
            case.replicas,
            if case.empty_gpu {
                ", last GPU empty"
            } else {
                ""
            },
            case.shape.hidden,
            case.shape.inter,
            case.pool
        );
        check::run_case(&gpu, &case, &mut tally)?;
    }
    if !a.no_full_size {
        println!(
            "case full-size: {} experts of {} × {} ({}), {} tokens × top-{}, 2 × 4 GPUs, vllm, {} sampled rows",
            preset.experts,
            preset.hidden,
            preset.moe_intermediate,
            preset.name,
            a.full_tokens,
            preset.top_k,
            a.samples
        );
        check::run_full_size(&gpu, preset, a.full_tokens, a.samples, &mut tally)?;
    }
    println!("check: {pass} passed, {fail} failed");
    Ok(if fail == 0 {
        Outcome::Ok
    } else {
        Outcome::ChecksFailed
    })
}

fn load_trace(a: &BenchArgs) -> Result<(LoadTrace, String)> {
    match &a.trace {
        Some(path) => {
            let bytes = read_capped(path, "trace")?;
            let t = formats::read_trace(&bytes, &formats::ReadOptions::default())
                .map_err(|e| Error::Argument(format!("{}: {e}", path.display())))?;
            Ok((t, path.display().to_string()))
        }
        None => {
            let preset = model::preset(&a.preset)?;
            let t = generate(&GenConfig {
                seed: a.seed,
                ..GenConfig::new(preset, a.batches)
            })?;
            Ok((
                t,
                format!(
                    "generated {} ({} batches, seed {})",
                    preset.name, a.batches, a.seed
                ),
            ))
        }
    }
}

fn parse_layers(spec: Option<&str>, trace: &LoadTrace) -> Result<Vec<usize>> {
    let ids = trace.layer_ids();
    match spec {
        None => Ok(vec![0]),
        Some("all") => Ok((0..ids.len()).collect()),
        Some(list) => list
            .split(',')
            .map(|s| {
                let id: u32 = s
                    .trim()
                    .parse()
                    .map_err(|_| Error::Argument(format!("layer {s:?} is not a number")))?;
                ids.iter().position(|&x| x == id).ok_or_else(|| {
                    Error::Argument(format!(
                        "layer {id} is not a MoE layer of the trace (ids {}..={})",
                        ids.first().copied().unwrap_or(0),
                        ids.last().copied().unwrap_or(0)
                    ))
                })
            })
            .collect(),
    }
}

/// The plans of a bench: files first, then those made here, labelled.
fn bench_plans(
    a: &BenchArgs,
    trace: &LoadTrace,
    topology: Topology,
) -> Result<Vec<(String, moeplan::Plan)>> {
    let mut plans = Vec::new();
    for path in &a.plans {
        let bytes = read_capped(path, "plan")?;
        let ctx = formats::PlanContext::for_trace(trace, Some(topology));
        let file = formats::read_any_plan(&bytes, &ctx)
            .map_err(|e| Error::Argument(format!("{}: {e}", path.display())))?;
        let plan = file.plan;
        let ids: Vec<u32> = plan.layers().iter().map(|l| l.layer).collect();
        if ids != trace.layer_ids() {
            return Err(Error::Argument(format!(
                "{}: the plan places layers {}, the trace has layers {}; a bench needs a plan for exactly the trace's layers",
                path.display(),
                id_range(&ids),
                id_range(trace.layer_ids())
            )));
        }
        let stem = path
            .file_stem()
            .map_or_else(|| "plan".into(), |s| s.to_string_lossy().into_owned());
        plans.push((format!("{stem} ({})", plan.algorithm()), plan));
    }
    let default = ["contiguous", "eplb", "craft:4", "craft:8"].map(String::from);
    let names: &[String] = match &a.plan_algos {
        Some(v) => v,
        None if a.plans.is_empty() => &default,
        None => &[],
    };
    let algos = names
        .iter()
        .map(|s| s.parse::<PlanAlgo>())
        .collect::<Result<Vec<_>>>()?;
    plans.extend(bench::make_plans(trace, topology, &algos, a.groups)?);
    Ok(plans)
}

fn id_range(ids: &[u32]) -> String {
    match (ids.first(), ids.last()) {
        (Some(a), Some(b)) => format!("{a}..={b} ({} of them)", ids.len()),
        _ => "none".into(),
    }
}

/// Reads a user's file within the core's default byte budget, checked
/// before the file is read.
fn read_capped(path: &std::path::Path, what: &str) -> Result<Vec<u8>> {
    let cap = moeplan::ReadLimits::default().max_bytes;
    let len = std::fs::metadata(path)
        .map_err(|e| Error::Argument(format!("cannot read {what} {}: {e}", path.display())))?
        .len();
    if len > cap {
        return Err(Error::Argument(format!(
            "{what} {} is {len} bytes, more than the {cap} a {what} may have",
            path.display()
        )));
    }
    std::fs::read(path)
        .map_err(|e| Error::Argument(format!("cannot read {what} {}: {e}", path.display())))
}

fn run_bench(device: usize, a: &BenchArgs) -> Result<Outcome> {
    // Every input is read and checked before the device is opened, so a
    // bad file says so on any machine.
    let rule = select::parse_rule(&a.dispatch)?;
    let rule_label = select::label(rule);
    let topology = Topology::new(a.nodes, a.gpus_per_node)?;
    let (trace, source) = load_trace(a)?;
    let model_name = a
        .model
        .clone()
        .or_else(|| trace.model().map(str::to_string))
        .unwrap_or_else(|| a.preset.clone());
    let preset = model::preset(&model_name)?;
    if preset.experts != trace.num_experts() {
        eprintln!(
            "moeplan-cuda: note: the trace has {} experts per layer, {} has {}; only its expert sizes are used",
            trace.num_experts(),
            preset.name,
            preset.experts
        );
    }
    let shape = ExpertShape::new(
        a.hidden.unwrap_or(preset.hidden),
        a.inter.unwrap_or(preset.moe_intermediate),
    )?;
    let top_k = a.top_k.or(trace.top_k()).unwrap_or(preset.top_k);
    let layers = parse_layers(a.layer.as_deref(), &trace)?;
    let plans = bench_plans(a, &trace, topology)?;
    if plans.is_empty() {
        return Err(Error::Argument(
            "no plan to run: give --plan or --plan-algos".into(),
        ));
    }
    let mut cfg = BenchConfig {
        tokens: a.tokens,
        top_k,
        rule,
        shape,
        layers,
        repeats: a.repeats,
        warmup: a.warmup,
        source_batch: a.source_batch,
        seed: a.routing_seed,
        pool: 1,
        launch_gaps: a.launch_gaps,
    };
    let header = |device: &str, pool: usize| {
        if a.json {
            return;
        }
        println!("device: {device}");
        println!(
            "trace: {source} · {} layers × {} experts · {} batches",
            trace.num_layers(),
            trace.num_experts(),
            trace.num_batches()
        );
        let from = a
            .source_batch
            .map_or("the trace's summed load".to_string(), |b| {
                format!("batch {b}")
            });
        if a.predict_only {
            println!(
                "cluster: {topology} · {} tokens × top-{top_k} per layer from {from} · dispatch {rule_label}",
                a.tokens
            );
            return;
        }
        println!(
            "cluster: {topology} emulated on one GPU · {} tokens × top-{top_k} per layer from {from} · dispatch {rule_label} · expert {} × {} ({}) · {pool} distinct weight sets · median of {} after {} warm-up · {}",
            a.tokens,
            shape.hidden,
            shape.inter,
            preset.name,
            a.repeats,
            a.warmup,
            if a.launch_gaps {
                "host launch gaps included"
            } else {
                "GPU execution only (queued behind a spin)"
            }
        );
    };
    let mut last_layer = None;
    let mut layer_line = |layer: u32| {
        if !a.json && last_layer != Some(layer) {
            println!("layer {layer}:");
            last_layer = Some(layer);
        }
    };
    if a.predict_only {
        header("none (--predict-only: the planner's side only)", 0);
        let predictions = bench::predict(&trace, &plans, &cfg, &mut |p| {
            if a.json {
                println!("{}", p.to_json());
            } else {
                layer_line(p.layer);
                println!("{}", p.to_text());
            }
        })?;
        if !a.json {
            println!(
                "\n{:>5}  {:<24} {:>11} {:>11} {:>11} {:>10}",
                "layer", "plan", "pred trace", "pred batch", "pred rows", "select ms"
            );
            for p in &predictions {
                println!(
                    "{:>5}  {:<24} {:>11.4} {:>11.4} {:>11.4} {:>10.3}",
                    p.layer,
                    p.plan,
                    p.predicted_trace,
                    p.predicted_batch,
                    p.predicted_dispatch,
                    p.host_select_ms
                );
            }
        }
        return Ok(Outcome::Ok);
    }

    let gpu = Gpu::open(device)?;
    // Fit the weight pool into free memory beside the layer buffers.
    let rows = (a.tokens * top_k) as u64;
    let (h, i) = (shape.hidden as u64, shape.inter as u64);
    let buffers = rows * (2 * h + 4 * i + 2 * h + 4 * 4) + a.tokens as u64 * h * 6;
    let expert = 2 * 3 * h * i;
    let (free, _) = gpu.mem_info()?;
    let room = (free as f64 * 0.85) as u64;
    if buffers + expert > room {
        return Err(Error::Argument(format!(
            "{} tokens × top-{top_k} at hidden {} needs {:.1} GiB of buffers; {:.1} GiB are free",
            a.tokens,
            shape.hidden,
            buffers as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        )));
    }
    cfg.pool = a
        .weight_pool
        .clamp(1, trace.num_experts())
        .min(((room - buffers) / expert) as usize)
        .max(1);
    header(&gpu.info.describe(), cfg.pool);
    let results = bench::run(&gpu, &trace, &plans, &cfg, &mut |r| {
        if a.json {
            // The expert's shape and precision with each line: what
            // `moeplan calibrate --bench` needs to fit the rank times.
            let mut j = r.to_json();
            if let Some(o) = j.as_object_mut() {
                o.insert("hidden".into(), shape.hidden.into());
                o.insert("inter".into(), shape.inter.into());
                o.insert("bytes_per_weight".into(), 2.into());
            }
            println!("{j}");
        } else {
            layer_line(r.prediction.layer);
            println!("{}", r.to_text());
        }
    })?;
    if !a.json {
        println!(
            "\n{:>5}  {:<24} {:>11} {:>11} {:>11} {:>9} {:>9} {:>10}",
            "layer",
            "plan",
            "pred trace",
            "pred batch",
            "pred rows",
            "measured",
            "max/mean",
            "layer ms"
        );
        for r in &results {
            let p = &r.prediction;
            println!(
                "{:>5}  {:<24} {:>11.4} {:>11.4} {:>11.4} {:>9.4} {:>9.3} {:>10.4}",
                p.layer,
                p.plan,
                p.predicted_trace,
                p.predicted_batch,
                p.predicted_dispatch,
                r.measured,
                r.measured_imbalance(),
                r.layer_ms
            );
        }
    }
    Ok(Outcome::Ok)
}
