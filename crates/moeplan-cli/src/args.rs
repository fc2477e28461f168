//! The command line, as clap structs: every command, flag and default.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use moeplan::Topology;
use moeplan::formats::PlanFormat;
use moeplan::judge::Rule;
use moeplan::judge::cost::{Assumptions, Kernel, Overlap, Phase};
use moeplan::planners::{self, PlannerId};

#[derive(Parser)]
#[command(
    name = "moeplan",
    version,
    about = "Plan expert placement and replication for Mixture-of-Experts serving",
    long_about = "Plan expert placement and replication for Mixture-of-Experts serving.\n\n\
                  Every command that takes --trace also runs without one, on a generated \
                  trace (--preset, --batches, --seed) — the embedded default.",
    after_help = "Examples (a dump from SGLang, 4 nodes of 8 GPUs):\n  \
        moeplan inspect --trace dump.json\n  \
        moeplan compare --trace dump.json --nodes 4 --gpus-per-node 8\n  \
        moeplan plan --trace dump.json --nodes 4 --gpus-per-node 8 --format sglang --out eplb.json\n\n\
        `moeplan COMMAND --help` for a command; the tutorial: docs/tutorial.md"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate a seeded synthetic trace with a real model's shape.
    #[command(after_help = "Examples:\n  \
        moeplan gen --preset deepseek-v3 --batches 64 --seed 7 --out trace.json\n  \
        moeplan gen --preset deepseek-v2-lite --tokens 65536 --out routes/")]
    Gen {
        #[command(flatten)]
        source: GenArgs,
        #[command(flatten)]
        tokens: TokenGenArgs,
        /// Where to write the trace JSON (`-`: stdout; with --tokens: a
        /// folder).
        #[arg(long)]
        out: PathBuf,
    },
    /// Shape, totals and per-layer skew of a trace.
    #[command(after_help = "Examples:\n  \
        moeplan inspect --trace expert_distribution_recorder.pt\n  \
        moeplan inspect --trace loads.csv --variation\n  \
        moeplan inspect --json")]
    Inspect {
        #[command(flatten)]
        trace: TraceArgs,
        /// A trace named without --trace: refused with a line saying so
        /// (every command names it with --trace).
        #[arg(hide = true)]
        positional: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Print how expert loads vary from batch to batch (load-weighted and
        /// median CV of the shares, lag-1 autocorrelation, CV by load) instead
        /// of the per-layer skew; needs at least 3 batches.
        #[arg(long)]
        variation: bool,
    },
    /// Compute a plan for a trace and write it.
    #[command(after_help = "Examples:\n  \
        moeplan plan --trace dump.pt --nodes 4 --gpus-per-node 8 --format sglang --out eplb.json\n  \
        moeplan plan --trace dump.pt --algo craft --replicas-per-gpu 4 --format sglang --out craft.json\n  \
        moeplan plan --algo eplb --out -")]
    Plan(PlanArgs),
    /// Replay a trace against a plan: balancedness, imbalance, traffic, memory.
    #[command(after_help = "Examples:\n  \
        moeplan eval --trace dump.pt --plan eplb.json --nodes 4 --gpus-per-node 8 --dispatch sglang-static")]
    Eval(EvalArgs),
    /// Every planner on one trace and cluster, side by side.
    #[command(after_help = "Examples:\n  \
        moeplan compare --trace dump.pt --nodes 4 --gpus-per-node 8 --hardware h100-ib-ndr\n  \
        moeplan compare --nodes 8 --gpus-per-node 8 --dispatch vllm --json")]
    Compare(CompareArgs),
    /// Balancedness and replica memory of BASE, CRAFT at each R and EPLB (CRAFT's Figure 5 / 9).
    #[command(after_help = "Examples:\n  \
        moeplan sweep --trace dump.pt --nodes 1 --gpus-per-node 64")]
    Sweep(SweepArgs),
    /// Serving with re-planning: every K batches a new plan on the last W,
    /// moved to fresh, relabelled or incrementally; balance, copies moved
    /// and (with --hardware) time with the pauses, beside the first plan
    /// kept. Comma lists of K and W sweep them; --hardware A,B finds the
    /// best setting on each machine; several --trace are served in turn.
    #[command(after_help = "Examples:\n  \
        moeplan replay --trace dump.pt --every 10,50 --window 16,64 --hardware h100-ib-ndr\n  \
        moeplan replay --trace dump.pt --engine sglang --every 500,1000 --tokens-per-pass 4096")]
    Replay(ReplayArgs),
    /// Plans across workloads: BASE, EPLB and CRAFT made on each of several
    /// traces (and CRAFT mean and robust made on all), judged on every trace.
    #[command(after_help = "Examples:\n  \
        moeplan cross --trace chat.json --trace code.json --nodes 1 --gpus-per-node 64")]
    Cross(CrossArgs),
    /// A hardware file fitted to measured kernel times: the base's
    /// efficiencies, a fixed time per grouped-GEMM call and per all-to-all,
    /// each kernel's bandwidth, and the fit's error per kernel.
    #[command(after_help = "Examples:\n  \
        moeplan calibrate --hardware h100-ib-ndr --measurements times.csv --out mine.json")]
    Calibrate(CalibrateArgs),
    /// The built-in model shapes.
    #[command(after_help = "Examples:\n  \
        moeplan presets")]
    Presets,
    /// The built-in hardware for --hardware: GPU, links, efficiencies.
    #[command(after_help = "Examples:\n  \
        moeplan hardware\n  \
        moeplan hardware --json")]
    Hardware {
        /// Print the presets as JSON (each one a valid --hardware FILE).
        #[arg(long)]
        json: bool,
    },
    /// The planners, what they read and their options with defaults.
    #[command(after_help = "Examples:\n  \
        moeplan planners\n  \
        moeplan planners --json")]
    Planners {
        /// Print JSON (the JavaScript API's `planners()`, snake_case names).
        #[arg(long)]
        json: bool,
    },
    /// A completion script for SHELL, every command and flag (the planners'
    /// too), printed to stdout.
    #[command(after_help = "Examples:\n  \
        moeplan completions bash > ~/.local/share/bash-completion/completions/moeplan\n  \
        moeplan completions zsh > ~/.zfunc/_moeplan\n  \
        moeplan completions fish > ~/.config/fish/completions/moeplan.fish")]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Tokens per batch of a generated trace when `--tokens-per-batch` is not
/// given.
pub const GEN_TOKENS_PER_BATCH: usize = 4096;

/// Tokens per batch a token-level trace is cut into when
/// `--tokens-per-batch` is not given.
pub const TOKEN_TRACE_TOKENS_PER_BATCH: usize = 1024;

#[derive(Args, Clone)]
pub struct GenArgs {
    /// Model shape to generate.
    #[arg(long, default_value = moeplan::judge::DEFAULT_MODEL)]
    pub preset: String,
    /// Batches to generate.
    #[arg(long, default_value_t = 64)]
    pub batches: usize,
    /// Tokens per batch: of a generated trace (default 4096), or of the
    /// batches a token-level trace (an ESFT folder) is cut into (default
    /// 1024).
    #[arg(long, alias = "batch-tokens")]
    pub tokens_per_batch: Option<usize>,
    /// Random seed; the same seed gives the same trace.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// `gen --tokens`: a token-level trace instead of per-batch counts.
#[derive(Args, Clone)]
pub struct TokenGenArgs {
    /// Generate this many tokens' routing (top-k experts per MoE layer, with
    /// planted co-activation) and write an ESFT folder
    /// (expert_weights_<layer>.txt) that --trace reads back.
    #[arg(long, conflicts_with_all = ["batches", "tokens_per_batch"])]
    pub tokens: Option<usize>,
    /// With --tokens: data-parallel ranks the tokens come from (whole
    /// sequences dealt round-robin, one line of the folder's files each).
    #[arg(long, default_value_t = 8, requires = "tokens")]
    pub ranks: usize,
}

#[derive(Args, Clone)]
pub struct SourceArgs {
    /// For multi-dataset CSVs: read only this dataset's rows (`replay`
    /// with several --trace: a comma list, one per trace).
    #[arg(long)]
    pub dataset: Option<String>,
    /// For token-level traces: how tokens go to the GPUs as source ranks.
    /// even: each batch's tokens in equal contiguous shares (a scheduler
    /// balancing tokens over data-parallel ranks); sequences: whole
    /// sequences round-robin (a rank with a long one holds several times
    /// the mean).
    #[arg(long, default_value = "even",
          value_parser = clap::builder::PossibleValuesParser::new(moeplan::Deal::ALL.map(moeplan::Deal::name)))]
    pub deal: String,
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
    /// Trace file (SGLang JSON, wide CSV, moeplan JSON, TensorRT-LLM rank<N>.safetensors) or folder (per-rank files, ESFT); omit for the generated default.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `--trace` given once or several times (`plan`, `cross`).
#[derive(Args, Clone)]
pub struct MultiTraceArgs {
    /// Trace file or folder, as for the other commands; give it several
    /// times to plan on several traces at once (same layers × experts):
    /// EPLB on the weighted sum of their loads, the other planners on their
    /// batches weighted by --weights (CRAFT: the weighted mean; with
    /// --objective robust the worst case over the traces).
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    /// With several --trace: each trace's share of the served batches,
    /// comma-separated (default: equal shares).
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<f64>>,
    #[command(flatten)]
    pub source: SourceArgs,
}

impl MultiTraceArgs {
    /// The `i`-th trace as the single-trace commands take it (the
    /// generated default when none is given).
    pub fn nth(&self, i: usize) -> TraceArgs {
        TraceArgs {
            trace: self.traces.get(i).cloned(),
            source: self.source.clone(),
        }
    }
}

#[derive(Args, Clone)]
pub struct ClusterArgs {
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// GPUs per node.
    #[arg(long, default_value_t = 8)]
    pub gpus_per_node: usize,
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

/// How plans are judged: the flags `eval`, `compare` and `sweep` share.
#[derive(Args)]
pub struct JudgeArgs {
    /// How tokens pick among an expert's copies (tokens arrive evenly from every GPU).
    #[arg(long, default_value = "even", value_parser = dispatch_parser())]
    pub dispatch: Rule,
    /// The model (a preset, see `moeplan presets`): its hidden size gives
    /// traffic in bytes, its expert size the bytes a re-placement moves
    /// (default: the trace's model, else DeepSeek-V3); `eval` also places a
    /// trace of MoE rows only in the model by its dense layers (an SGLang
    /// file has a row per model layer).
    #[arg(long)]
    pub model: Option<String>,
    #[command(flatten)]
    pub cost: CostArgs,
}

/// The cost model's flags: the hardware, and what is assumed on it.
#[derive(Args, Clone, Default)]
pub struct CostArgs {
    /// Predict time, memory and throughput on this hardware: a preset
    /// (`moeplan hardware` lists them) or a JSON file
    /// (schemas/moeplan.hardware.schema.json).
    #[arg(long, value_name = "NAME|FILE")]
    pub hardware: Option<String>,
    /// Whether the batches are prefill (a step's tokens need that much KV
    /// cache) or decode (each token is a request holding --context tokens).
    #[arg(long, default_value = "prefill", value_parser = ["prefill", "decode"], requires = "hardware")]
    pub phase: String,
    /// Tokens of KV cache one running request holds (decode).
    #[arg(long, default_value_t = 4096, requires = "hardware")]
    pub context: usize,
    /// Share of GPU memory for weights and KV cache (SGLang's
    /// mem_fraction_static).
    #[arg(long, default_value_t = 0.85, requires = "hardware")]
    pub memory_fraction: f64,
    /// DeepEP's kernels: normal (a token once per destination GPU / node)
    /// or low-latency (every pair a message).
    #[arg(long, default_value = "normal", value_parser = ["normal", "low-latency"], requires = "hardware")]
    pub kernel: String,
    /// Dispatch in BF16 instead of FP8.
    #[arg(long, requires = "hardware")]
    pub bf16_dispatch: bool,
    /// Weights served in this precision instead of the checkpoint's.
    #[arg(long, value_parser = ["fp8", "bf16"], requires = "hardware")]
    pub weight_precision: Option<String>,
    /// GPUs one attention replica is split over (default: one node).
    #[arg(long, requires = "hardware")]
    pub attention_tp: Option<usize>,
    /// Per-peer all-to-all buffers of this many tokens (BF16, sent and
    /// received), as point-to-point all-to-alls allocate them; 0 for
    /// DeepEP's fixed buffers.
    #[arg(long, default_value_t = 0, requires = "hardware")]
    pub peer_buffer_tokens: usize,
    /// Two-batch overlap: `tbo` runs each batch as two micro-batches, one's
    /// dispatch and combine under the other's compute (SGLang's
    /// --enable-two-batch-overlap); `none` one after another.
    #[arg(long, default_value = "none", value_parser = ["none", "tbo"], requires = "hardware")]
    pub overlap: String,
}

impl CostArgs {
    /// What the flags assume on the hardware, checked.
    pub fn assumptions(&self) -> Result<Assumptions, moeplan::Error> {
        let assumptions = Assumptions {
            phase: if self.phase == "decode" {
                Phase::Decode
            } else {
                Phase::Prefill
            },
            dispatch_fp8: !self.bf16_dispatch,
            kernel: if self.kernel == "low-latency" {
                Kernel::LowLatency
            } else {
                Kernel::Normal
            },
            peer_buffer_tokens: self.peer_buffer_tokens,
            context_tokens: self.context,
            memory_fraction: self.memory_fraction,
            attention_tp: self.attention_tp,
            bytes_per_weight: self
                .weight_precision
                .as_deref()
                .map(|w| if w == "fp8" { 1 } else { 2 }),
            overlap: if self.overlap == "tbo" {
                Overlap::Tbo
            } else {
                Overlap::None
            },
        };
        assumptions.check()?;
        Ok(assumptions)
    }
}

#[derive(Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub trace: MultiTraceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Planner (`moeplan planners` lists them with their options).
    #[arg(long, default_value = "eplb", value_parser = algo_parser())]
    pub algo: PlannerId,
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::ALL }>,
    /// Keep this fraction of the last batches out of planning (held-out evaluation).
    #[arg(long)]
    pub holdout: Option<f64>,
    /// Output format.
    #[arg(long, default_value = "moeplan", value_parser = format_parser())]
    pub format: PlanFormat,
    /// Refuse, rather than pad, a plan whose slot counts vary when the
    /// format holds one expert count per GPU (sglang, vllm, vllm-ascend,
    /// trtllm): by default such a plan is padded to the closest one that
    /// fits, and what padding added is said.
    #[arg(long)]
    pub no_pad: bool,
    /// Padding is the default (kept for older command lines).
    #[arg(long, hide = true, conflicts_with = "no_pad")]
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
    #[arg(long, value_parser = dispatch_parser())]
    pub dispatch: Option<Rule>,
    /// Where to write the plan (`-`: stdout; what plan reports goes to
    /// stderr).
    #[arg(long)]
    pub out: PathBuf,
    /// Also print what plan reports as one JSON object on stdout (the file
    /// written, its shape, and with --dispatch or --hardware each judged
    /// part as `eval --json` prints it); not with `--out -`.
    #[arg(long)]
    pub json: bool,
    /// The plan being served now (any format moeplan reads): the new plan
    /// is written with its GPUs renumbered so that moving to it copies the
    /// fewest expert weights (inter-node copies weighted by the links of
    /// --hardware, else h100-ib-ndr's), and what it moves is printed.
    #[arg(long, value_name = "CURRENT_PLAN")]
    pub from: Option<PathBuf>,
    /// With --from: adjust the current plan instead of replacing it, making
    /// at most this many expert copies (the moves that gain most balance
    /// per copy first); the fresh plan relabelled is printed beside it.
    #[arg(long, value_name = "N", requires = "from")]
    pub max_moved_experts: Option<usize>,
    /// With --from: adjust the current plan until its balancedness on the
    /// planning batches reaches this (0–1), with as few copies as it can.
    #[arg(long, value_name = "B", requires = "from")]
    pub min_balancedness: Option<f64>,
    /// With --hardware: the plan's predicted time, memory and throughput
    /// on the batches it was planned on (and the held-out ones).
    #[command(flatten)]
    pub cost: CostArgs,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// Trace file or folder, as for the other commands; give it several
    /// times to serve them one after another, a workload that shifts (same
    /// layers × experts): e.g. ESFT's intent folder, then summary.
    #[arg(long = "trace")]
    pub traces: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Planner that re-plans (`moeplan planners`; static planners on counts).
    #[arg(long, default_value = "eplb", value_parser = algo_parser())]
    pub algo: PlannerId,
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::ALL }>,
    /// The engine that serves: K and W in its unit (forward passes), its
    /// defaults, its refusals, its move, and the best setting printed as its
    /// own flags (sglang, vllm, vllm-ascend, trtllm).
    #[arg(long, value_parser = engine_names())]
    pub engine: Option<String>,
    /// With --engine vllm: its EPLB's use_async, the move on a side stream
    /// while serving goes on (only what serving does not cover pauses).
    #[arg(long, requires = "engine")]
    pub async_move: bool,
    /// Tokens one forward pass serves over the cluster, with --engine: what
    /// turns passes into trace batches (default: a pass is a trace batch).
    #[arg(long, value_name = "N", requires = "engine")]
    pub tokens_per_pass: Option<usize>,
    /// Re-plan every K batches, or forward passes with --engine (SGLang's
    /// --eplb-rebalance-num-iterations, vLLM's EPLB step_interval); a comma
    /// list sweeps; default 16, or the engine's.
    #[arg(long, value_delimiter = ',', value_name = "K[,K…]")]
    pub every: Vec<usize>,
    /// On the last W batches, or forward passes with --engine (SGLang's
    /// recorder window, vLLM's EPLB window_size); the first plan is made on
    /// the first W; a comma list sweeps; default 16, or the engine's.
    #[arg(long, value_delimiter = ',', value_name = "W[,W…]")]
    pub window: Vec<usize>,
    /// Re-plan only when the served plan's balancedness on the window is
    /// below this, else skip (SGLang's
    /// --eplb-min-rebalancing-utilization-threshold; plan's
    /// --min-balancedness is a target, this a gate).
    #[arg(long, value_name = "B")]
    pub replan_below: Option<f64>,
    /// How a re-plan reaches the GPUs: the new plan as numbered, relabelled
    /// onto the served one's GPUs, the served plan adjusted
    /// (--max-moved-experts per re-plan), or only the layers below a gate
    /// moved under a per-GPU-pair cap (stair: vllm-ascend's STAIR in
    /// spirit); default relabel, with --engine the engine's own (fresh).
    #[arg(long, value_parser = ["fresh", "relabel", "incremental", "stair"])]
    pub migrate: Option<String>,
    /// With --migrate incremental: expert copies one re-plan may make.
    #[arg(long, value_name = "N")]
    pub max_moved_experts: Option<usize>,
    /// With --migrate stair: re-plan only the layers whose balancedness on
    /// the window is below this (default 0.9).
    #[arg(long, value_name = "B")]
    pub layer_gate: Option<f64>,
    /// With --migrate stair: copies one GPU may send another in one layer
    /// (default 2).
    #[arg(long, value_name = "M")]
    pub max_per_pair: Option<usize>,
    /// Also serve the same batches with Libra (per-batch copies, its own
    /// rule and defaults, prepared on the first window).
    #[arg(long)]
    pub with_libra: bool,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
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
    #[command(flatten)]
    pub judge: JudgeArgs,
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::EPLB | uses::CRAFT }>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
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
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Options of a per-batch planner (Libra), which re-plans on the
    /// evaluated batches when the plan file names it; others ignore them.
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::EPLB | uses::LIBRA }>,
}

#[derive(Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::ALL }>,
    /// Plan on the first batches, evaluate on this last fraction.
    #[arg(long)]
    pub holdout: Option<f64>,
    #[command(flatten)]
    pub judge: JudgeArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// The hardware to start from: its peaks and links are kept, its
    /// efficiencies and kernel times fitted (a preset name or a JSON file).
    #[arg(long)]
    pub hardware: String,
    /// Measured kernel times: a JSON array of measurements (docs/cost.md,
    /// "Fitted to measurements").
    #[arg(long, required_unless_present_any = ["bench", "aiconfigurator"], conflicts_with_all = ["bench", "aiconfigurator"])]
    pub measurements: Option<PathBuf>,
    /// `moeplan-cuda bench --json` output: each rank's measured expert
    /// compute, priced at the hardware's BF16 peak.
    #[arg(long, conflicts_with = "aiconfigurator")]
    pub bench: Option<PathBuf>,
    /// One GPU's folder of AIConfigurator's measured tables (the
    /// `aiconfigurator-core` wheel's `aiconfigurator_core/systems/data/<gpu>/`):
    /// its SGLang wide-EP decode MoE and DeepEP tables, the rows of
    /// `--model`'s shape.
    #[arg(long, value_name = "DIR")]
    pub aiconfigurator: Option<PathBuf>,
    /// The model whose shape the AIConfigurator rows are read for.
    #[arg(long, default_value = moeplan::judge::DEFAULT_MODEL, requires = "aiconfigurator")]
    pub model: String,
    /// Where to write the fitted hardware file (`-`: standard output).
    #[arg(long, required_unless_present = "check")]
    pub out: Option<String>,
    /// Fit nothing: how far `--hardware` as it is lies from the
    /// measurements, per kernel (an uncalibrated preset's error).
    #[arg(long, conflicts_with_all = ["out", "name"])]
    pub check: bool,
    /// The new preset's name (default: the base's with `-calibrated`).
    #[arg(long)]
    pub name: Option<String>,
    /// Print the fit's residuals as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CrossArgs {
    /// Trace files or folders (at least two, same layers × experts): every
    /// plan is made on each and judged on every one.
    #[arg(long = "trace", required = true, num_args = 1)]
    pub traces: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// EPLB's budget, CRAFT's R, groups, CRAFT's options (`--objective`
    /// applies to the plans made on one trace; the robust row is always shown).
    #[command(flatten)]
    pub planner: PlannerArgs<{ uses::BUDGETS | uses::EPLB | uses::CRAFT }>,
    /// The model (a preset) placing traces of MoE rows only in the model.
    #[arg(long)]
    pub model: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `--dispatch`: a rule of the core's one list (`Rule::ALL`), each listed
/// with its help, legacy spellings as aliases.
fn dispatch_parser() -> impl TypedValueParser<Value = Rule> {
    PossibleValuesParser::new(Rule::ALL.iter().map(|r| {
        PossibleValue::new(r.name())
            .help(r.about())
            .aliases(r.aliases().iter().copied())
    }))
    .try_map(|s| Rule::from_name(&s))
}

/// `--format`: a plan file of the core's one list (`PlanFormat::ALL`), each
/// listed with its help.
fn format_parser() -> impl TypedValueParser<Value = PlanFormat> {
    PossibleValuesParser::new(
        PlanFormat::ALL
            .iter()
            .map(|f| PossibleValue::new(f.name()).help(f.about())),
    )
    .try_map(|s| PlanFormat::from_name(&s))
}

/// `--engine`: an engine of the core's one list of re-planning knobs.
fn engine_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        moeplan::studies::ENGINES
            .iter()
            .map(|e| PossibleValue::new(e.name)),
    )
}

/// `--algo`: a registered planner's id, each listed with its help.
fn algo_parser() -> impl TypedValueParser<Value = PlannerId> {
    PossibleValuesParser::new(
        planners::registry()
            .iter()
            .map(|p| PossibleValue::new(p.id().as_str()).help(p.about())),
    )
    .try_map(|s| s.parse::<PlannerId>())
}

pub use crate::planner_args::{PlannerArgs, flag_for, uses};

#[cfg(test)]
mod tests {
    use super::*;

    /// `--dispatch` parses every rule of the core's list by its name and
    /// aliases, and nothing else.
    #[test]
    fn dispatch_values_are_the_core_rules() {
        let parse = |name: &str| {
            let cmd = clap::Command::new("t").arg(
                clap::Arg::new("d")
                    .long("dispatch")
                    .value_parser(dispatch_parser()),
            );
            cmd.try_get_matches_from(["t", "--dispatch", name])
                .ok()
                .and_then(|m| m.get_one::<Rule>("d").copied())
        };
        for rule in Rule::ALL {
            assert_eq!(parse(rule.name()), Some(rule), "{rule}");
            for alias in rule.aliases() {
                assert_eq!(parse(alias), Some(rule), "{alias}");
            }
        }
        assert_eq!(parse("round-robin"), None);
    }

    /// Every command's help ends with examples, and each example parses
    /// (its flags exist, its values are ones the command takes).
    #[test]
    fn every_command_shows_examples_that_parse() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let mut checked = 0;
        for sub in cli.get_subcommands() {
            let help = sub
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            let examples: Vec<&str> = help
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("moeplan "))
                .collect();
            assert!(
                !examples.is_empty(),
                "`moeplan {}` shows no example",
                sub.get_name()
            );
            for e in examples {
                let words: Vec<&str> = e.split_whitespace().take_while(|w| *w != ">").collect();
                if let Err(err) = Cli::try_parse_from(&words) {
                    panic!("{e}: {err}");
                }
                checked += 1;
            }
        }
        assert!(checked >= 12, "only {checked} examples checked");
    }
}
