//! The command line, as clap structs: every command, flag and default.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use moeplan::Topology;
use moeplan::planners::Budget;
use moeplan::planners::craft::{CraftOptions, Objective, ReplicaCounts};
use moeplan::sim::{Rule, SglangVersion};

#[derive(Parser)]
#[command(
    name = "moeplan",
    version,
    about = "Plan expert placement and replication for Mixture-of-Experts serving",
    long_about = "Plan expert placement and replication for Mixture-of-Experts serving.\n\n\
                  Every command that takes --trace also runs without one, on a generated \
                  trace (--preset, --batches, --seed) — the embedded default."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// Replay a trace against a plan: balancedness, imbalance, traffic, memory.
    Eval(EvalArgs),
    /// Every planner on one trace and cluster, side by side.
    Compare(CompareArgs),
    /// Balancedness and replica memory of BASE, CRAFT at each R and EPLB (CRAFT's Figure 5 / 9).
    Sweep(SweepArgs),
    /// The built-in model shapes.
    Presets,
}

#[derive(Args, Clone)]
pub struct GenArgs {
    /// Model shape to generate.
    #[arg(long, default_value = "deepseek-v3")]
    pub preset: String,
    /// Batches to generate.
    #[arg(long, default_value_t = 64)]
    pub batches: usize,
    /// Tokens per batch.
    #[arg(long, default_value_t = 4096)]
    pub tokens_per_batch: usize,
    /// Random seed; the same seed gives the same trace.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

#[derive(Args, Clone)]
pub struct SourceArgs {
    /// For multi-dataset CSVs: read only this dataset's rows.
    #[arg(long)]
    pub dataset: Option<String>,
    /// For token-level traces (an ESFT folder): tokens per batch.
    #[arg(long, default_value_t = 1024)]
    pub batch_tokens: usize,
    /// For token-level traces: the model preset giving experts and top-k.
    #[arg(long, default_value = "deepseek-v2-lite")]
    pub token_model: String,
    /// Reading limit in MiB: a larger file is refused before it is read, and
    /// reading stops once a file expands (decompressed, parsed) past it.
    #[arg(long, default_value_t = 512)]
    pub max_trace_mib: u64,
    #[command(flatten)]
    pub generated: GenArgs,
}

#[derive(Args, Clone)]
pub struct TraceArgs {
    /// Trace file (SGLang JSON, wide CSV, moeplan JSON); omit for the generated default.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Args, Clone)]
pub struct ClusterArgs {
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: usize,
    /// Router expert groups for EPLB's hierarchical policy (DeepSeek-V3: 8).
    #[arg(long, default_value_t = 1)]
    pub groups: usize,
}

/// The cluster of a plan file that does not hold one (SGLang, vLLM, CSV).
#[derive(Args, Clone)]
pub struct PlanClusterArgs {
    /// Nodes, for a plan file that does not say (SGLang, vLLM, vllm-ascend, CSV).
    #[arg(long, requires = "gpus_per_node")]
    pub nodes: Option<usize>,
    /// GPUs per node, for a plan file that does not say (SGLang, vLLM, CSV
    /// need it; vllm-ascend lists its devices and is otherwise one node).
    #[arg(long)]
    pub gpus_per_node: Option<usize>,
}

impl PlanClusterArgs {
    pub fn topology(&self) -> Result<Option<Topology>, moeplan::Error> {
        self.gpus_per_node
            .map(|g| Topology::new(self.nodes.unwrap_or(1), g))
            .transpose()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Algo {
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
pub enum PlanFormat {
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

/// `--dispatch`: how a (token, expert) pair picks among the expert's
/// copies (`moeplan::sim::Rule`). Tokens are assumed to arrive evenly from
/// every GPU.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Dispatch {
    /// Each expert's tokens split equally over its copies (moeplan's replay; the default).
    Even,
    /// vLLM: pair p of a rank's batch goes to copy p mod c of the expert's c copies.
    Vllm,
    /// SGLang static, since PR #9849 (Aug 2025): one copy per (rank, expert), own GPU, else own node, else a seeded fair draw.
    SglangStatic,
    /// SGLang static before PR #9849: own GPU, else a seeded fair draw over all copies.
    #[value(alias = "sglang-static-v0")]
    SglangStaticSameGpu,
    /// SGLang dynamic, since PR #10874 (Oct 2025): the nearest copy when there is one, else a random copy per token.
    SglangDynamic,
    /// SGLang dynamic before PR #10874: a random copy per token.
    #[value(alias = "sglang-dynamic-v0")]
    SglangDynamicUniform,
    /// Own GPU's copy, else the node's copies evenly, else all copies evenly.
    LocalFirst,
    /// Per batch and layer the split that minimises the busiest GPU: no dispatch does better.
    Optimal,
}

impl Dispatch {
    pub fn rule(self) -> Rule {
        match self {
            Dispatch::Even => Rule::Even,
            Dispatch::Vllm => Rule::Vllm,
            Dispatch::SglangStatic => Rule::SglangStatic(SglangVersion::Nearest),
            Dispatch::SglangStaticSameGpu => Rule::SglangStatic(SglangVersion::SameGpu),
            Dispatch::SglangDynamic => Rule::SglangDynamic(SglangVersion::Nearest),
            Dispatch::SglangDynamicUniform => Rule::SglangDynamic(SglangVersion::SameGpu),
            Dispatch::LocalFirst => Rule::LocalFirst,
            Dispatch::Optimal => Rule::Optimal,
        }
    }
}

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Planner.
    #[arg(long, value_enum, default_value = "eplb")]
    pub algo: Algo,
    /// Extra slots per layer in total (SGLang's --ep-num-redundant-experts).
    #[arg(long, default_value_t = 0)]
    pub redundant_experts: usize,
    /// CRAFT's budget: replicas per GPU summed over layers, or `auto`.
    #[arg(long, default_value = "auto")]
    pub replicas_per_gpu: ReplicaBudget,
    #[command(flatten)]
    pub craft: CraftArgs,
    /// Keep this fraction of the last batches out of planning (held-out evaluation).
    #[arg(long)]
    pub holdout: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "moeplan")]
    pub format: PlanFormat,
    /// For formats with one expert count per GPU (sglang, vllm, vllm-ascend):
    /// pad a plan whose slot counts vary to the closest one that fits.
    #[arg(long)]
    pub pad: bool,
    /// The model the trace is from (a preset, see `moeplan presets`): its
    /// layer count and leading dense layers place the trace's MoE layers in
    /// the model, which sglang's file (a row per model layer) needs when the
    /// trace does not say (a .npy of MoE rows, vLLM's window, a CSV); its
    /// hidden size gives --dispatch's traffic in bytes.
    #[arg(long)]
    pub model: Option<String>,
    /// Layers of the model in all, dense ones included, for a model without
    /// a preset (the trace's layer ids must then be model layer ids).
    #[arg(long)]
    pub model_layers: Option<usize>,
    /// Also report the written plan's balance and traffic under this dispatch rule.
    #[arg(long, value_enum)]
    pub dispatch: Option<Dispatch>,
    /// Where to write the plan.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Plan on the first batches, evaluate on this last fraction.
    #[arg(long)]
    pub holdout: Option<f64>,
    /// Model preset for bytes per expert (default: the trace's model, if known).
    #[arg(long)]
    pub model: Option<String>,
    #[command(flatten)]
    pub craft: CraftArgs,
    /// How tokens pick among an expert's copies when the plans are judged.
    #[arg(long, value_enum, default_value = "even")]
    pub dispatch: Dispatch,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone)]
pub struct CraftArgs {
    /// Replica counts CRAFT measures per layer: geometric (1, 2, 4, …, D) or every (1..=D).
    #[arg(long, value_enum, default_value = "geometric")]
    pub replica_counts: CountsArg,
    /// What CRAFT's knapsack maximises: mean balancedness, or the paper's r × gain.
    #[arg(long, value_enum, default_value = "mean")]
    pub objective: ObjectiveArg,
    /// Skip the local-search refinement of CRAFT's greedy placement (the paper's algorithm as printed).
    #[arg(long)]
    pub no_refine: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CountsArg {
    Geometric,
    Every,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ObjectiveArg {
    Mean,
    Paper,
}

impl CraftArgs {
    pub fn options(&self) -> CraftOptions {
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
pub struct ReplicaBudget(pub Budget);

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
pub struct EvalArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Plan file: moeplan JSON, SGLang --init-expert-location, vLLM
    /// physical_to_logical_map, vllm-ascend expert map or plan CSV (detected by content).
    #[arg(long)]
    pub plan: PathBuf,
    #[command(flatten)]
    pub cluster: PlanClusterArgs,
    /// Evaluate on the last fraction of batches (default: the plan's own holdout).
    #[arg(long, conflicts_with = "in_sample")]
    pub holdout: Option<f64>,
    /// Evaluate on every batch, even if the plan was made with a holdout.
    #[arg(long)]
    pub in_sample: bool,
    /// How tokens pick among an expert's copies.
    #[arg(long, value_enum, default_value = "even")]
    pub dispatch: Dispatch,
    /// The model (a preset): its hidden size gives traffic in bytes (default:
    /// the trace's model, else DeepSeek-V3), and its dense layers place a
    /// trace of MoE rows only in the model (an SGLang file has a row per model layer).
    #[arg(long)]
    pub model: Option<String>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// EPLB's extra slots per layer (default: one per GPU).
    #[arg(long)]
    pub redundant_experts: Option<usize>,
    /// Plan on the first batches, evaluate on this last fraction.
    #[arg(long)]
    pub holdout: Option<f64>,
    /// How tokens pick among an expert's copies.
    #[arg(long, value_enum, default_value = "even")]
    pub dispatch: Dispatch,
    /// Model preset whose hidden size gives traffic in bytes (default: the
    /// trace's model, else DeepSeek-V3).
    #[arg(long)]
    pub model: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
