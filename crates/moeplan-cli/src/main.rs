//! `moeplan`: generate, inspect, plan and evaluate MoE expert placements from
//! the command line. Only argument parsing, file I/O and printing live here;
//! everything else is the `moeplan` core.

mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use moeplan::formats::plan_json::{self, PlanMeta};
use moeplan::formats::{self, ReadOptions, sglang, trace_json};
use moeplan::generator::{GenConfig, generate};
use moeplan::planners::craft::{Craft, CraftOptions, Objective, ReplicaCounts};
use moeplan::planners::{Budget, EplbConfig, base, contiguous, eplb};
use moeplan::{LoadTrace, Plan, Topology, evaluate_with_progress, model};

#[derive(Parser)]
#[command(
    name = "moeplan",
    version,
    about = "Plan expert placement and replication for Mixture-of-Experts serving",
    long_about = "Plan expert placement and replication for Mixture-of-Experts serving.\n\n\
                  Every command that takes --trace also runs without one, on a generated \
                  trace (--preset, --batches, --seed) — the embedded default."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a seeded synthetic trace with a real model's shape.
    Gen {
        #[command(flatten)]
        source: GenArgs,
        /// Where to write the trace JSON.
        #[arg(long)]
        out: PathBuf,
    },
    /// Shape, totals and per-layer skew of a trace.
    Inspect {
        /// Trace file (SGLang JSON, wide CSV, moeplan JSON); omit for the generated default.
        trace: Option<PathBuf>,
        #[command(flatten)]
        source: SourceArgs,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Compute a plan for a trace and write it.
    Plan(PlanArgs),
    /// Replay a trace against a plan: balancedness, imbalance, memory.
    Eval(EvalArgs),
    /// Every planner on one trace and cluster, side by side.
    Compare(CompareArgs),
    /// Balancedness and replica memory of BASE, CRAFT at each R and EPLB (CRAFT's Figure 5 / 9).
    Sweep(SweepArgs),
    /// The built-in model shapes.
    Presets,
}

#[derive(Args, Clone)]
struct GenArgs {
    /// Model shape to generate.
    #[arg(long, default_value = "deepseek-v3")]
    preset: String,
    /// Batches to generate.
    #[arg(long, default_value_t = 64)]
    batches: usize,
    /// Tokens per batch.
    #[arg(long, default_value_t = 4096)]
    tokens_per_batch: usize,
    /// Random seed; the same seed gives the same trace.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

#[derive(Args, Clone)]
struct SourceArgs {
    /// For multi-dataset CSVs: read only this dataset's rows.
    #[arg(long)]
    dataset: Option<String>,
    /// For token-level traces (an ESFT folder): tokens per batch.
    #[arg(long, default_value_t = 1024)]
    batch_tokens: usize,
    /// For token-level traces: the model preset giving experts and top-k.
    #[arg(long, default_value = "deepseek-v2-lite")]
    token_model: String,
    /// Reading limit in MiB: a larger file is refused before it is read, and
    /// reading stops once a file expands (decompressed, parsed) past it.
    #[arg(long, default_value_t = 512)]
    max_trace_mib: u64,
    #[command(flatten)]
    generated: GenArgs,
}

#[derive(Args, Clone)]
struct TraceArgs {
    /// Trace file (SGLang JSON, wide CSV, moeplan JSON); omit for the generated default.
    #[arg(long)]
    trace: Option<PathBuf>,
    #[command(flatten)]
    source: SourceArgs,
}

#[derive(Args, Clone)]
struct ClusterArgs {
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    gpus_per_node: usize,
    /// Router expert groups for EPLB's hierarchical policy (DeepSeek-V3: 8).
    #[arg(long, default_value_t = 1)]
    groups: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Algo {
    /// DeepSeek's EPLB with --redundant-experts extra slots per layer.
    Eplb,
    /// EPLB's placement with no replicas (the papers' BASE).
    Base,
    /// Expert e on GPU e·D/E, no replicas, loads ignored.
    Contiguous,
    /// CRAFT: --replicas-per-gpu R replicas per GPU over all layers, spent where they help.
    Craft,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PlanFormat {
    /// moeplan's plan JSON (eval reads it).
    Moeplan,
    /// SGLang's --init-expert-location JSON.
    Sglang,
    /// vLLM's physical_to_logical_map as a JSON list, one row per MoE layer.
    Vllm,
    /// vllm-ascend's expert-map JSON.
    VllmAscend,
    /// CSV: layer,gpu,slot,expert.
    Csv,
}

#[derive(Args)]
struct PlanArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Planner.
    #[arg(long, value_enum, default_value = "eplb")]
    algo: Algo,
    /// Extra slots per layer in total (SGLang's --ep-num-redundant-experts).
    #[arg(long, default_value_t = 0)]
    redundant_experts: usize,
    /// CRAFT's budget: replicas per GPU summed over layers, or `auto`.
    #[arg(long, default_value = "auto")]
    replicas_per_gpu: ReplicaBudget,
    #[command(flatten)]
    craft: CraftArgs,
    /// Keep this fraction of the last batches out of planning (held-out evaluation).
    #[arg(long)]
    holdout: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "moeplan")]
    format: PlanFormat,
    /// For formats with one expert count per GPU (sglang, vllm, vllm-ascend):
    /// pad a plan whose slot counts vary to the closest one that fits.
    #[arg(long)]
    pad: bool,
    /// The model the trace is from (a preset, see `moeplan presets`): its
    /// layer count and leading dense layers place the trace's MoE layers in
    /// the model, which sglang's file (a row per model layer) needs when the
    /// trace does not say (a .npy of MoE rows, vLLM's window, a CSV).
    #[arg(long)]
    model: Option<String>,
    /// Layers of the model in all, dense ones included, for a model without
    /// a preset (the trace's layer ids must then be model layer ids).
    #[arg(long)]
    model_layers: Option<usize>,
    /// Where to write the plan.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Plan on the first batches, evaluate on this last fraction.
    #[arg(long)]
    holdout: Option<f64>,
    /// Model preset for bytes per expert (default: the trace's model, if known).
    #[arg(long)]
    model: Option<String>,
    #[command(flatten)]
    craft: CraftArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
struct CraftArgs {
    /// Replica counts CRAFT measures per layer: geometric (1, 2, 4, …, D) or every (1..=D).
    #[arg(long, value_enum, default_value = "geometric")]
    replica_counts: CountsArg,
    /// What CRAFT's knapsack maximises: mean balancedness, or the paper's r × gain.
    #[arg(long, value_enum, default_value = "mean")]
    objective: ObjectiveArg,
    /// Skip the local-search refinement of CRAFT's greedy placement (the paper's algorithm as printed).
    #[arg(long)]
    no_refine: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum CountsArg {
    Geometric,
    Every,
}

#[derive(Clone, Copy, ValueEnum)]
enum ObjectiveArg {
    Mean,
    Paper,
}

impl CraftArgs {
    fn options(&self) -> CraftOptions {
        CraftOptions {
            replica_counts: match self.replica_counts {
                CountsArg::Geometric => ReplicaCounts::Geometric,
                CountsArg::Every => ReplicaCounts::Every,
            },
            objective: match self.objective {
                ObjectiveArg::Mean => Objective::MeanBalancedness,
                ObjectiveArg::Paper => Objective::PaperWeighted,
            },
            refine: !self.no_refine,
        }
    }
}

/// `--replicas-per-gpu`: a number or `auto`.
#[derive(Clone, Copy)]
struct ReplicaBudget(Budget);

impl std::str::FromStr for ReplicaBudget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(ReplicaBudget(Budget::Auto));
        }
        s.parse::<usize>()
            .map(|r| ReplicaBudget(Budget::ReplicasPerGpu(r)))
            .map_err(|_| {
                format!("expected a whole number of replicas per GPU or `auto`, got {s:?}")
            })
    }
}

#[derive(Args)]
struct EvalArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Plan JSON written by `moeplan plan`.
    #[arg(long)]
    plan: PathBuf,
    /// Evaluate on the last fraction of batches (default: the plan's own holdout).
    #[arg(long, conflicts_with = "in_sample")]
    holdout: Option<f64>,
    /// Evaluate on every batch, even if the plan was made with a holdout.
    #[arg(long)]
    in_sample: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CompareArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// EPLB's extra slots per layer (default: one per GPU).
    #[arg(long)]
    redundant_experts: Option<usize>,
    /// Plan on the first batches, evaluate on this last fraction.
    #[arg(long)]
    holdout: Option<f64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A failure the user can act on: printed as one line, exit code 2.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Core(#[from] moeplan::Error),
    #[error("{path}: {source}")]
    InFile {
        path: String,
        source: moeplan::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moeplan: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Help and version print as clap prints them; a usage mistake becomes the
/// same single `moeplan: error:` line, exit code 2, as every other bad input.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid arguments");
    eprintln!("moeplan: error: {}", first.trim_start_matches("error: "));
    ExitCode::from(2)
}

fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Gen { source, out } => {
            let trace = generated(&source)?;
            write_file(&out, &trace_json::write(&trace))?;
            eprintln!(
                "wrote {}: {} batches × {} MoE layers × {} experts ({}, seed {})",
                out.display(),
                trace.num_batches(),
                trace.num_layers(),
                trace.num_experts(),
                source.preset,
                source.seed
            );
            Ok(())
        }
        Command::Inspect {
            trace,
            source,
            json,
        } => {
            let t = load_trace(&TraceArgs { trace, source })?;
            let stats = t.stats();
            if json {
                emit(&to_json(&stats));
            } else {
                emit(&report::stats(&stats));
            }
            Ok(())
        }
        Command::Plan(args) => plan_command(args),
        Command::Eval(args) => eval_command(args),
        Command::Compare(args) => compare_command(args),
        Command::Sweep(args) => sweep_command(args),
        Command::Presets => {
            emit(&report::presets());
            Ok(())
        }
    }
}

fn plan_command(args: PlanArgs) -> Result<(), CliError> {
    let trace = in_model(load_trace(&args.trace)?, &args)?;
    if args.format == PlanFormat::Sglang && trace.known_model_layers().is_none() {
        // Refused before planning: the file needs it, and planning can take a while.
        return Err(unknown_model_layers(&trace).into());
    }
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let planned_on = match args.holdout {
        Some(h) => trace.holdout_split(h)?.plan,
        None => trace.clone(),
    };
    let bar = spinner("planning");
    let plan = make_plan(
        args.algo,
        &planned_on,
        topology,
        &args.cluster,
        args.redundant_experts,
        args.replicas_per_gpu.0,
        &args.craft.options(),
    );
    bar.finish_and_clear();
    let plan = plan?;
    let needs_uniform = matches!(
        args.format,
        PlanFormat::Sglang | PlanFormat::Vllm | PlanFormat::VllmAscend
    );
    let plan = if needs_uniform && plan.uniform_slots_per_gpu().is_none() {
        if !args.pad {
            return Err(moeplan::Error::Export {
                format: "sglang/vllm/vllm-ascend",
                message: format!(
                    "this {} plan has different slot counts per GPU or layer, which the format cannot express; add --pad to write the closest plan that fits",
                    plan.algorithm()
                ),
            }
            .into());
        }
        let padded = plan.padded_to_uniform(planned_on.summed().view())?;
        eprintln!(
            "padded to {} slots per GPU in every layer: {} more replicas",
            padded.uniform_slots_per_gpu().unwrap_or(0),
            padded.summary().replicas - plan.summary().replicas
        );
        padded
    } else {
        plan
    };
    let plan = if args.format == PlanFormat::VllmAscend {
        without_same_gpu_copies(plan, &planned_on)?
    } else {
        plan
    };
    let text = match args.format {
        PlanFormat::Moeplan => plan_json::write(
            &plan,
            &PlanMeta {
                // Only a known count: an assumed one would let a later
                // export trust layer ids that may be MoE positions.
                model_layers: trace.known_model_layers(),
                model: args
                    .model
                    .clone()
                    .or_else(|| trace.model().map(str::to_string)),
                holdout: args.holdout,
            },
        ),
        PlanFormat::Sglang => {
            sglang::write_init_expert_location(&plan, trace.known_model_layers())?
        }
        PlanFormat::Vllm => formats::vllm::write_physical_to_logical(&plan)?,
        PlanFormat::VllmAscend => formats::vllm::write_ascend_expert_map(&plan)?,
        PlanFormat::Csv => formats::csv::write_plan_csv(&plan),
    };
    write_file(&args.out, &text)?;
    let s = plan.summary();
    eprintln!(
        "wrote {}: {} plan for {topology}, {} layers, {} replicas, {}..{} slots per GPU{}",
        args.out.display(),
        plan.algorithm(),
        plan.layers().len(),
        s.replicas,
        s.slots_per_gpu_min,
        s.slots_per_gpu_max,
        args.holdout
            .map(|_| format!(
                ", planned on {} of {} batches",
                planned_on.num_batches(),
                trace.num_batches()
            ))
            .unwrap_or_default()
    );
    Ok(())
}

/// Places the trace in the model named by `--model` / `--model-layers` (or
/// by the trace itself, when it names a preset but not its layer count), so
/// MoE layer ids are model layer ids and the layer count is known.
fn in_model(trace: LoadTrace, args: &PlanArgs) -> Result<LoadTrace, CliError> {
    let preset = match args.model.as_deref() {
        Some(name) => Some(model::preset(name)?),
        None if trace.known_model_layers().is_none() => {
            trace.model().and_then(|n| model::preset(n).ok())
        }
        None => None,
    };
    if let Some(p) = preset {
        if p.experts != trace.num_experts() {
            return Err(moeplan::Error::Mismatch(format!(
                "the trace has {} experts per layer, {} has {}",
                trace.num_experts(),
                p.name,
                p.experts
            ))
            .into());
        }
    }
    let total = match (args.model_layers, preset) {
        (Some(n), Some(p)) if n != p.total_layers => {
            return Err(moeplan::Error::Argument(format!(
                "--model-layers {n}, but {} has {} layers",
                p.name, p.total_layers
            ))
            .into());
        }
        (Some(n), _) => n,
        (None, Some(p)) => p.total_layers,
        (None, None) => return Ok(trace),
    };
    let before = trace.layer_ids().first().copied();
    let placed = trace.in_model(total, preset.map(|p| p.first_moe_layer))?;
    if let (Some(from), Some(p)) = (before, preset) {
        let to = placed.layer_ids()[0];
        if to != from {
            eprintln!(
                "MoE layers {from}..{} of the trace are model layers {to}..{} ({}: {} dense layers first)",
                from as usize + placed.num_layers() - 1,
                to as usize + placed.num_layers() - 1,
                p.name,
                p.first_moe_layer
            );
        }
    }
    Ok(placed)
}

/// Why `--format sglang` needs the model, and how to name it (the preset of
/// the trace's shape when there is one).
fn unknown_model_layers(trace: &LoadTrace) -> moeplan::Error {
    let (l, e) = (trace.num_layers(), trace.num_experts());
    let (name, total) = model::PRESETS
        .iter()
        .find(|p| p.experts == e && p.moe_layers() == l)
        .map_or(("deepseek-v3", 61), |p| (p.name, p.total_layers));
    moeplan::Error::Export {
        format: "SGLang --init-expert-location",
        message: format!(
            "the model's layer count is unknown: the trace holds only its {l} MoE layers, \
             and SGLang indexes rows by model layer (a short file loads silently and serves every \
             layer another layer's experts); name the model with --model {name}, or \
             --model-layers {total} when the trace's layer ids are the model's"
        ),
    }
}

/// vllm-ascend gives each expert one slot per device: second copies on one
/// GPU are swapped away (slot and copy counts kept), and the balance change
/// is reported.
fn without_same_gpu_copies(plan: Plan, planned_on: &LoadTrace) -> Result<Plan, CliError> {
    let n = plan.summary().same_gpu_duplicates;
    if n == 0 {
        return Ok(plan);
    }
    let fixed = plan.without_same_gpu_duplicates(planned_on.summed().view())?;
    let before = moeplan::evaluate(planned_on, &plan)?.balancedness;
    let after = moeplan::evaluate(planned_on, &fixed)?.balancedness;
    eprintln!(
        "vllm-ascend holds one copy of an expert per device: moved {n} second copies to other devices (balancedness on the planned batches {before:.4} → {after:.4})"
    );
    Ok(fixed)
}

fn make_plan(
    algo: Algo,
    trace: &LoadTrace,
    topology: Topology,
    cluster: &ClusterArgs,
    redundant: usize,
    budget: Budget,
    options: &CraftOptions,
) -> Result<Plan, moeplan::Error> {
    match algo {
        Algo::Eplb => eplb(
            trace,
            topology,
            EplbConfig {
                redundant_experts: redundant,
                groups: cluster.groups,
            },
        ),
        Algo::Base => base(trace, topology, cluster.groups),
        Algo::Contiguous => contiguous(trace, topology),
        Algo::Craft => Ok(Craft::prepare(trace, topology, options)?.plan(budget)?.plan),
    }
}

fn eval_command(args: EvalArgs) -> Result<(), CliError> {
    let trace = load_trace(&args.trace)?;
    let bytes = read_file(&args.plan)?;
    let (plan, meta) = plan_json::read(&bytes).map_err(|source| CliError::InFile {
        path: args.plan.display().to_string(),
        source,
    })?;
    let trace = placed_like(trace, &plan, &meta)?;
    let holdout = if args.in_sample {
        None
    } else {
        args.holdout.or(meta.holdout)
    };
    let (evaluated, scope) = match holdout {
        Some(h) => {
            let split = trace.holdout_split(h)?;
            let cut = split.plan.num_batches();
            (
                split.eval,
                format!(
                    "held-out: batches {cut}..{} (planned on 0..{cut})",
                    trace.num_batches()
                ),
            )
        }
        None => (
            trace.clone(),
            format!("in-sample: all {} batch(es)", trace.num_batches()),
        ),
    };
    let bar = progress_bar(evaluated.num_layers(), "replaying");
    let report = evaluate_with_progress(&evaluated, &plan, |done, _| bar.set_position(done as u64))
        .map_err(|source| CliError::InFile {
            path: args.plan.display().to_string(),
            source,
        })?;
    bar.finish_and_clear();
    if args.json {
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        v["scope"] = scope.into();
        v["topology"] = serde_json::to_value(plan.topology()).unwrap_or_default();
        emit(&v.to_string());
    } else {
        emit(&report::eval(&report, &plan, &scope));
    }
    Ok(())
}

/// A plan made with `--model` from a trace without dense-layer information
/// names model layers (DeepSeek-V3's 3..60) where the trace names MoE
/// positions (0..57): the plan's recorded model places the trace the same
/// way, so the same file judges the plan it produced.
fn placed_like(trace: LoadTrace, plan: &Plan, meta: &PlanMeta) -> Result<LoadTrace, CliError> {
    let first = plan.layers().first().map(|l| l.layer);
    match (meta.model_layers, first) {
        (Some(total), Some(first))
            if trace.known_model_layers().is_none()
                && trace.layer_ids().first() != Some(&first) =>
        {
            Ok(trace.in_model(total, Some(first as usize))?)
        }
        _ => Ok(trace),
    }
}

fn compare_command(args: CompareArgs) -> Result<(), CliError> {
    let trace = load_trace(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let redundant = args.redundant_experts.unwrap_or(topology.num_gpus());
    let (planned_on, evaluated, scope) = split_for(&trace, args.holdout)?;
    let mut rows = Vec::new();
    let craft_budget = Budget::ReplicasPerGpu(8);
    for (algo, k) in [
        (Algo::Contiguous, 0),
        (Algo::Base, 0),
        (Algo::Eplb, redundant),
        (Algo::Craft, 0),
    ] {
        let result = make_plan(
            algo,
            &planned_on,
            topology,
            &args.cluster,
            k,
            craft_budget,
            &CraftOptions::default(),
        )
        .and_then(|plan| moeplan::evaluate(&evaluated, &plan));
        rows.push((algo_name(algo, k), result));
    }
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, r)| match r {
                Ok(r) => serde_json::json!({"name": name, "report": r}),
                Err(e) => serde_json::json!({"name": name, "error": e.to_string()}),
            })
            .collect();
        emit(&serde_json::json!({"scope": scope, "topology": topology, "plans": v}).to_string());
    } else {
        emit(&report::compare(&rows, topology, &scope));
    }
    Ok(())
}

fn sweep_command(args: SweepArgs) -> Result<(), CliError> {
    let trace = load_trace(&args.trace)?;
    let topology = Topology::new(args.cluster.nodes, args.cluster.gpus_per_node)?;
    let (planned_on, evaluated, scope) = split_for(&trace, args.holdout)?;
    let preset = match args.model.as_deref().or(trace.model()) {
        Some(name) => Some(model::preset(name)?),
        None => None,
    };
    let bar = spinner("sweeping budgets");
    let result = moeplan::sweep::sweep(
        &planned_on,
        &evaluated,
        topology,
        args.cluster.groups,
        &args.craft.options(),
    );
    bar.finish_and_clear();
    let result = result?;
    if args.json {
        let mut v = serde_json::to_value(&result).unwrap_or_default();
        v["scope"] = scope.into();
        v["expert_bytes"] = preset.map(|p| p.expert_bytes()).into();
        emit(&v.to_string());
    } else {
        emit(&report::sweep(&result, topology, &scope, preset));
    }
    Ok(())
}

/// Plan part and evaluation part of a trace, and a phrase saying which.
fn split_for(
    trace: &LoadTrace,
    holdout: Option<f64>,
) -> Result<(LoadTrace, LoadTrace, String), CliError> {
    Ok(match holdout {
        Some(h) => {
            let s = trace.holdout_split(h)?;
            let scope = format!(
                "held-out: planned on {} batches, evaluated on the next {}",
                s.plan.num_batches(),
                s.eval.num_batches()
            );
            (s.plan, s.eval, scope)
        }
        None => (
            trace.clone(),
            trace.clone(),
            format!("in-sample: {} batch(es)", trace.num_batches()),
        ),
    })
}

fn spinner(what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(what);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

fn algo_name(algo: Algo, k: usize) -> String {
    match algo {
        Algo::Eplb => format!("eplb (+{k})"),
        Algo::Base => "base".into(),
        Algo::Contiguous => "contiguous".into(),
        Algo::Craft => "craft (R = 8)".into(),
    }
}

fn generated(g: &GenArgs) -> Result<LoadTrace, moeplan::Error> {
    let preset = model::preset(&g.preset)?;
    let bar = spinner("generating");
    let trace = generate(&GenConfig {
        preset,
        batches: g.batches,
        tokens_per_batch: g.tokens_per_batch,
        seed: g.seed,
    });
    bar.finish_and_clear();
    trace
}

fn load_trace(args: &TraceArgs) -> Result<LoadTrace, CliError> {
    match &args.trace {
        Some(path) if path.is_dir() => read_token_folder(path, &args.source),
        Some(path) => {
            check_size(path, args.source.max_trace_mib)?;
            let bytes = read_file(path)?;
            let options = ReadOptions {
                dataset: args.source.dataset.clone(),
                budget: budget(args.source.max_trace_mib),
            };
            let bar = spinner("reading trace");
            let trace = formats::read_trace(&bytes, &options);
            bar.finish_and_clear();
            trace.map_err(|source| CliError::InFile {
                path: path.display().to_string(),
                source,
            })
        }
        None => {
            let g = &args.source.generated;
            eprintln!(
                "no --trace given: using a generated {} trace ({} batches, seed {})",
                g.preset, g.batches, g.seed
            );
            Ok(generated(g)?)
        }
    }
}

/// The reading limit: what a file may expand to, not only its size on disk.
fn budget(max_mib: u64) -> moeplan::Budget {
    moeplan::Budget::mib(max_mib).with_hint("raise it with --max-trace-mib")
}

/// Refuses a file over the limit before reading it.
fn check_size(path: &Path, max_mib: u64) -> Result<(), CliError> {
    let len = std::fs::metadata(path)
        .map_err(|source| CliError::Read {
            path: path.display().to_string(),
            source,
        })?
        .len();
    if len > max_mib << 20 {
        return Err(CliError::InFile {
            path: path.display().to_string(),
            source: moeplan::Error::Argument(format!(
                "{} MiB is more than the {max_mib} MiB limit (raise it with --max-trace-mib)",
                len >> 20
            )),
        });
    }
    Ok(())
}

/// A folder: ESFT `expert_weights_<layer>.txt` files (token-level routing,
/// batched into `--batch-tokens` tokens), or SGLang's per-rank
/// `layer_id,expert_id,count` CSVs (summed over ranks).
fn read_token_folder(dir: &Path, source: &SourceArgs) -> Result<LoadTrace, CliError> {
    let in_dir = |e: moeplan::Error| CliError::InFile {
        path: dir.display().to_string(),
        source: e,
    };
    let preset = model::preset(&source.token_model)?;
    let entries = std::fs::read_dir(dir).map_err(|e| CliError::Read {
        path: dir.display().to_string(),
        source: e,
    })?;
    // One budget for the whole folder: many files each under the limit
    // must not add up past it.
    let mut meter = moeplan::Meter::new(budget(source.max_trace_mib));
    let mut files = Vec::new();
    let mut rank_csvs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let esft = name.starts_with("expert_weights_") && name.ends_with(".txt");
        if !esft && !name.ends_with(".csv") {
            continue;
        }
        check_size(&entry.path(), source.max_trace_mib)?;
        let bytes = read_file(&entry.path())?;
        meter.bytes(bytes.len() as u64, &name).map_err(in_dir)?;
        if esft {
            files.push((name, bytes));
        } else {
            rank_csvs.push((name, bytes));
        }
    }
    if files.is_empty() && !rank_csvs.is_empty() {
        rank_csvs.sort();
        return formats::sglang::read_rank_csvs(&rank_csvs, None, &mut meter).map_err(in_dir);
    }
    let tokens = formats::esft::read_esft(&files, preset.experts, preset.top_k, &mut meter)
        .map_err(in_dir)?;
    Ok(tokens
        .to_load_trace_within(source.batch_tokens, &mut meter)
        .map_err(in_dir)?
        .with_model(preset.name)
        .with_model_layers(preset.total_layers))
}

fn read_file(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|source| CliError::Read {
        path: path.display().to_string(),
        source,
    })
}

fn write_file(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(|source| CliError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Writes to stdout; a reader that went away (`| head`) ends output quietly.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn progress_bar(len: usize, what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} layers") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}
