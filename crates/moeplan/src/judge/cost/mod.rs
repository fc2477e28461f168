//! Time, memory and throughput of a served plan on named hardware: the
//! cost model that turns the simulator's rows, copies and messages into
//! microseconds, and a plan's slots into the KV cache that remains.
//!
//! Per batch `b` and MoE layer `l` (one step of the replay), every term
//! from the rule's own GPU loads:
//! - **compute** of GPU `g`: each copy `c` it hosts that receives rows
//!   costs its weight read `w = W / (HBM · e_hbm)` and its GEMMs `g = r_c ·
//!   F / (peak · e_gemm)` blended as `(w^p + g^p)^(1/p)` — the larger of
//!   the two for large `p`, what the H100 measured for `p = 1.22`
//!   (`data/hardware.rs`) —, `W` one expert's bytes, `F = 2 · 3 · hidden ·
//!   moe_intermediate` FLOPs per row, `peak` the FP8 peak for FP8 weights
//!   where the GPU has one (BF16 otherwise). A copy's rows `r_c` are its
//!   even share of its expert, scaled so the GPU's copies sum to the load
//!   the rule gave the GPU (exact for the even-split rules);
//! - **dispatch** of GPU `g`: the larger of its bytes sent and received
//!   over each link kind over that link's sustained bandwidth, the two
//!   kinds in parallel, plus the latency of the slowest kind used. Bytes =
//!   remote pairs × the share of them that are distinct token messages (a
//!   token goes once per destination GPU inside a node and once per
//!   destination node across nodes, as DeepEP's normal kernels send it) ×
//!   `hidden` × bytes per element (FP8 with one f32 scale per 128 elements,
//!   or BF16). With token routes that share is the replay's exact message
//!   count; without them it is the expectation for `top_k` independent
//!   pairs drawn with the GPU (node) loads' shares;
//! - **combine**: the same traffic reversed, in BF16;
//! - the layer takes `max_g dispatch + max_g compute + max_g combine`
//!   (each phase waits for its slowest GPU).
//!
//! Per step: the layers summed, plus the dense part (attention
//! projections, shared experts, dense layers, embeddings: `2 ·
//! non-routed params` FLOPs per token over every GPU, or its weight read,
//! the larger), plus a per-batch planner's copies that do not hide under
//! the previous layer. Memory per GPU: the dense weights over the
//! attention-parallel group, the fullest GPU's expert slots × `W` (the
//! plan's layers scaled to the model's), and the KV cache what remains of
//! `memory × memory_fraction`. That cache caps how many of a batch's
//! tokens one step serves — prefill: the tokens themselves must fit;
//! decode: each token is a request holding `context_tokens` — and rows
//! and bytes scale with the share served.
//!
//! Not modelled, the same for every plan: attention's context-dependent
//! FLOPs, kernel launch gaps, overlap of communication with compute
//! (DeepEP's two-batch overlap would hide some of dispatch and combine).
//!
//! Sources: Libra's time model (`planners/libra/time_model.rs`), the
//! moeplan-cuda measurements (docs/cuda.md), DeepEP's README (legacy.md)
//! for what a token message is; the hardware's own in `data/hardware.rs`.
//! Cost: O(slots + D) per (batch, layer), on top of the replay.

use serde::{Deserialize, Serialize};

use crate::data::hardware::Hardware;
use crate::data::model::ModelPreset;
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::error::{Error, Result};

use super::slots::SlotTable;
use super::traffic::{Messages, Tally};

mod memory;
mod reason;
mod step;

pub(crate) use memory::{Memory, memory};
pub(crate) use step::LayerCompute;
pub(crate) use step::Timer;

/// Which phase a workload's batches are: what a step's tokens hold in the
/// KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// A step's tokens are prompt tokens: they need that many tokens of
    /// cache.
    Prefill,
    /// A step's tokens are one per running request, each holding
    /// `context_tokens` of cache: the cache caps the batch.
    Decode,
}

/// Which all-to-all kernels carry dispatch and combine (DeepEP's two
/// kinds, deepseek-ai/DeepEP docs/legacy.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
#[serde(rename_all = "kebab-case")]
pub enum Kernel {
    /// High-throughput kernels (prefill): a token goes once per
    /// destination GPU inside a node and once per destination node.
    Normal,
    /// Low-latency kernels (decode): every remote (token, expert) pair is
    /// its own message, and each phase pays a fixed launch-and-signal
    /// overhead ([`LOW_LATENCY_OVERHEAD_US`]) instead of the links'
    /// latency.
    LowLatency,
}

/// Whether dispatch and combine overlap expert compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// Dispatch, compute and combine one after another.
    #[default]
    None,
    /// Two-batch overlap (SGLang's `--enable-two-batch-overlap`, DeepEP's
    /// hook-based overlap): the batch runs as two micro-batches, one's
    /// dispatch and combine under the other's compute. Each micro-batch
    /// carries half the rows and bytes and pays every kernel's fixed time
    /// in full; where that is slower than one batch, one batch is taken
    /// (moeplan's assumption: the engine would not split).
    Tbo,
}

/// The fixed part of one low-latency dispatch or combine, µs: DeepEP's
/// EP 256 dispatch row (194 µs for 128 tokens × top-8 in FP8, of which
/// the model's bytes over 0.9 × 50 GB/s take 163 µs) leaves 31.
pub const LOW_LATENCY_OVERHEAD_US: f64 = 31.0;

/// What a user states rather than measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct Assumptions {
    /// Prefill or decode batches.
    pub phase: Phase,
    /// Dispatch in FP8 with per-128 scales (DeepEP's kernels); BF16 if
    /// false. Combine is always BF16.
    pub dispatch_fp8: bool,
    /// The all-to-all kernels.
    pub kernel: Kernel,
    /// Tokens of each per-peer all-to-all buffer, sent and received, in
    /// BF16: `2 × tokens × hidden × 2` bytes per peer GPU (an all-to-all
    /// over point-to-point sends, as CRAFT's SGLang ran it); 0 for
    /// kernels with fixed buffers (DeepEP).
    pub peer_buffer_tokens: usize,
    /// Tokens of KV cache one running request holds (decode).
    pub context_tokens: usize,
    /// Share of GPU memory the engine takes for weights and KV cache (the
    /// rest: activations, CUDA graphs, communication buffers) — SGLang's
    /// `mem_fraction_static`.
    pub memory_fraction: f64,
    /// GPUs one attention (dense) replica is split over; `None`: one node
    /// (tensor-parallel attention inside a node, a data-parallel rank per
    /// node, as CRAFT ran SGLang).
    pub attention_tp: Option<usize>,
    /// Bytes per weight served; `None`: the model's checkpoint precision
    /// (CRAFT served both its models in BF16: give 2).
    pub bytes_per_weight: Option<usize>,
    /// Whether dispatch and combine hide under compute.
    #[serde(default)]
    pub overlap: Overlap,
}

impl Default for Assumptions {
    /// Prefill, FP8 dispatch, 4,096 tokens of context, 0.85 of memory,
    /// attention over one node, the checkpoint's precision.
    fn default() -> Self {
        Assumptions {
            phase: Phase::Prefill,
            dispatch_fp8: true,
            kernel: Kernel::Normal,
            peer_buffer_tokens: 0,
            context_tokens: 4096,
            memory_fraction: 0.85,
            attention_tp: None,
            bytes_per_weight: None,
            overlap: Overlap::None,
        }
    }
}

impl Assumptions {
    /// Bytes per weight served: the stated precision, else the model's
    /// checkpoint's.
    pub(crate) fn bytes_per_weight(&self, model: &ModelPreset) -> usize {
        self.bytes_per_weight.unwrap_or(model.bytes_per_weight)
    }

    /// Bytes of one expert's weights served at `Assumptions::bytes_per_weight`.
    ///
    /// ```
    /// use moeplan::{data::model, judge::cost::Assumptions};
    /// let m = model::preset("deepseek-v3")?;
    /// let bf16 = Assumptions { bytes_per_weight: Some(2), ..Assumptions::default() };
    /// assert_eq!(bf16.expert_bytes(m), 2.0 * Assumptions::default().expert_bytes(m));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn expert_bytes(&self, model: &ModelPreset) -> f64 {
        model.expert_params() as f64 * self.bytes_per_weight(model) as f64
    }

    /// GPUs one attention replica is split over on `topology` (default:
    /// one node), within 1..=D.
    pub(crate) fn attention_tp(&self, topology: Topology) -> usize {
        self.attention_tp
            .unwrap_or(topology.gpus_per_node())
            .clamp(1, topology.num_gpus().max(1))
    }

    /// Refuses values that cannot be used.
    pub fn check(&self) -> Result<()> {
        if self.context_tokens == 0 {
            return Err(Error::Argument("context must be at least one token".into()));
        }
        if !(self.memory_fraction > 0.0 && self.memory_fraction <= 1.0) {
            return Err(Error::Argument(format!(
                "memory fraction {} must be in (0, 1]",
                self.memory_fraction
            )));
        }
        if self.attention_tp == Some(0) {
            return Err(Error::Argument("attention TP must be at least 1".into()));
        }
        if !matches!(self.bytes_per_weight, None | Some(1) | Some(2)) {
            return Err(Error::Argument(
                "bytes per weight must be 1 (FP8) or 2 (BF16)".into(),
            ));
        }
        Ok(())
    }
}

/// The per-step constants the replay needs: copied into
/// [`super::CostModel::time`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeCost {
    /// One copy's weight read, µs.
    pub weight_read_us: f64,
    /// One row's three GEMMs, µs.
    pub row_us: f64,
    /// The blend of weight read and GEMMs ([`Efficiency::roofline_p`]).
    ///
    /// [`Efficiency::roofline_p`]: crate::data::hardware::Efficiency::roofline_p
    pub roofline_p: f64,
    /// Bytes one token's dispatch message carries.
    pub dispatch_bytes: f64,
    /// Bytes one token's combine message carries.
    pub combine_bytes: f64,
    /// Sustained bandwidth inside a node, per GPU and direction, bytes/µs.
    pub intra_bytes_per_us: f64,
    /// Sustained bandwidth between nodes per direction, bytes/µs: the GPU's
    /// own or (`inter_shared`) the node's.
    pub inter_bytes_per_us: f64,
    /// The inter-node bandwidth is the node's, shared by its GPUs.
    pub inter_shared: bool,
    /// Latency of a transfer inside a node, µs.
    pub intra_latency_us: f64,
    /// Latency of a transfer between nodes, µs.
    pub inter_latency_us: f64,
    /// Experts a token is routed to.
    pub top_k: usize,
    /// Every remote pair its own message, and this fixed overhead per
    /// phase instead of link latency (low-latency kernels); `None`:
    /// normal kernels.
    pub low_latency_us: Option<f64>,
    /// Fixed time of one GPU's expert computation per layer, µs
    /// ([`Kernels::moe_fixed_us`]; 0 where the hardware has no kernel fit).
    ///
    /// [`Kernels::moe_fixed_us`]: crate::data::hardware::Kernels::moe_fixed_us
    pub moe_fixed_us: f64,
    /// The all-to-all kernel's fixed time of a dispatch and of a combine,
    /// µs, in place of the links' latency (or the low-latency overhead);
    /// `None` where the hardware has no kernel fit.
    pub phase_fixed_us: Option<[f64; 2]>,
    /// Two-batch overlap ([`Overlap::Tbo`]).
    pub tbo: bool,
    /// Tokens one step may serve before the KV cache runs out (infinite:
    /// not capped): the cache's tokens in prefill, its requests in decode;
    /// a larger batch is served in that share ([`judge`](super::judge) sets
    /// it from the plan's memory).
    pub max_tokens_per_step: f64,
}

impl TimeCost {
    /// The constants for `model` on `hardware` under `assumptions`.
    ///
    /// ```
    /// use moeplan::data::{hardware, model};
    /// use moeplan::judge::cost::{Assumptions, TimeCost};
    /// let h = hardware::preset("h100-ib-ndr")?;
    /// let t = TimeCost::new(h, model::preset("deepseek-v3")?, &Assumptions::default());
    /// // 44 MB of FP8 weights at the sustained share of 3.35 TB/s
    /// assert!((t.weight_read_us - 3.0 * 7168.0 * 2048.0 / (h.efficiency.hbm * 3350e3)).abs() < 1e-9);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(hardware: &Hardware, model: &ModelPreset, assumptions: &Assumptions) -> Self {
        let bpw = assumptions.bytes_per_weight(model);
        let expert_bytes = assumptions.expert_bytes(model);
        let e = hardware.efficiency;
        let flops_per_row = 2.0 * model.expert_params() as f64;
        let hidden = model.hidden as f64;
        // The kernel's own fit where the hardware has one: its achieved
        // bandwidths replace the links' sustained ones, its fixed times
        // their latencies.
        let fit = hardware.kernels.map(|k| match assumptions.kernel {
            Kernel::Normal => k.normal,
            Kernel::LowLatency => k.low_latency,
        });
        let achieved = |gb_per_s: Option<f64>, sustained: f64| match gb_per_s {
            Some(x) if x > 0.0 => x * 1e3,
            _ => sustained,
        };
        TimeCost {
            weight_read_us: expert_bytes / (hardware.gpu.hbm_gb_per_s * 1e3 * e.hbm),
            row_us: flops_per_row / (hardware.tflops_for(bpw) * 1e6 * e.gemm),
            roofline_p: e.roofline_p,
            // DeepEP's FP8 dispatch: one byte per element and one f32 scale
            // per 128 elements.
            dispatch_bytes: if assumptions.dispatch_fp8 {
                hidden + 4.0 * (hidden / 128.0).ceil()
            } else {
                2.0 * hidden
            },
            combine_bytes: 2.0 * hidden,
            intra_bytes_per_us: achieved(
                fit.map(|f| f.intra_gb_per_s),
                hardware.intra_node.gb_per_s * 1e3 * e.intra_node,
            ),
            inter_bytes_per_us: achieved(
                fit.map(|f| f.inter_gb_per_s),
                hardware.inter_node.gb_per_s * 1e3 * e.inter_node,
            ),
            inter_shared: hardware.inter_node.shared_by_node,
            intra_latency_us: hardware.intra_node.latency_us,
            inter_latency_us: hardware.inter_node.latency_us,
            top_k: model.top_k.max(1),
            low_latency_us: (assumptions.kernel == Kernel::LowLatency)
                .then_some(LOW_LATENCY_OVERHEAD_US),
            moe_fixed_us: hardware.kernels.map_or(0.0, |k| k.moe_fixed_us),
            phase_fixed_us: fit.map(|f| [f.dispatch_fixed_us, f.combine_fixed_us]),
            tbo: assumptions.overlap == Overlap::Tbo,
            max_tokens_per_step: f64::INFINITY,
        }
    }
}

/// One hosted copy's expert time for `rows` rows, µs: its weight read and
/// GEMMs blended as the cost model does (0 for a copy without rows). For
/// a front end that knows every copy's rows (moeplan-cuda's bench).
///
/// ```
/// use moeplan::{data::{hardware, model}, judge::cost::{copy_us, Assumptions, TimeCost}};
/// let h = hardware::preset("h100-ib-ndr")?;
/// let t = TimeCost::new(h, model::preset("deepseek-v3")?, &Assumptions::default());
/// assert_eq!(copy_us(&t, 0.0), 0.0);
/// assert!(copy_us(&t, 1.0) > t.weight_read_us && copy_us(&t, 4096.0) > 4096.0 * t.row_us);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn copy_us(t: &TimeCost, rows: f64) -> f64 {
    if rows <= 0.0 {
        return 0.0;
    }
    let p = t.roofline_p;
    (t.weight_read_us.powf(p) + (rows * t.row_us).powf(p)).powf(1.0 / p)
}

/// Time terms summed over a replay: per-(batch, layer) means and per-batch
/// sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct TimeReport {
    /// Mean over (batch, layer) of the MoE layer's time, µs.
    pub moe_layer_us: f64,
    /// Its compute term, µs.
    pub compute_us: f64,
    /// Its dispatch term, µs.
    pub dispatch_us: f64,
    /// Its combine term, µs.
    pub combine_us: f64,
    /// Each batch's MoE layers summed, µs.
    pub per_batch_moe_us: Vec<f64>,
    /// Each layer's time, mean over batches, µs.
    pub per_layer_us: Vec<f64>,
    /// Each layer's compute term, mean over batches, µs.
    pub per_layer_compute_us: Vec<f64>,
    /// Share of each batch's tokens one step serves (1 unless the KV cache
    /// caps the requests).
    pub per_batch_share: Vec<f64>,
}

/// How far a datasheet-only preset's kernel times were from measured ones
/// where they were checked: `h100-ib-ndr` and `b200-ib-ndr` as they were
/// before either carried a kernel fit (until e460ef0), against
/// AIConfigurator's H100 and B200 tables (docs/cost.md, "Fitted to
/// measurements": median 21.7 and 50.0 %, worst 97.8 and 76.6 %; the
/// larger of each). The presets without [`Hardware::kernels`] are still
/// such.
pub(crate) const UNCALIBRATED_MEDIAN_PCT: f64 = 50.0;
/// The worst error of the same check.
pub(crate) const UNCALIBRATED_WORST_PCT: f64 = 97.8;

/// How far a preset that carries the H100's fitted kernel times on its
/// own datasheet (`h800-ib-ndr`, `h200-ib-ndr`, `b200-ib-ndr`), not fitted
/// to its GPU, was from that GPU's measured tables: AIConfigurator's H200
/// and B200 tables (docs/cost.md: median 2.3 and 12.1 %, worst 11.7 and
/// 49.9 %; the larger of each).
pub(crate) const TRANSFERRED_MEDIAN_PCT: f64 = 12.1;
/// The worst error of the same check.
pub(crate) const TRANSFERRED_WORST_PCT: f64 = 49.9;

/// How far to trust a prediction: the residuals of the hardware's
/// calibration, or, for hardware not fitted to measurements, how far the
/// model's kernel times were on the GPUs it was checked against.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct ErrorBand {
    /// The hardware was fitted to measurements of its GPU.
    pub calibrated: bool,
    /// Median |predicted − measured| / measured of kernel times, percent.
    pub median_pct: f64,
    /// Largest such error, percent.
    pub worst_pct: f64,
    /// Where the figures come from, one sentence.
    pub about: String,
}

impl ErrorBand {
    /// The band of predictions made on `hardware`.
    pub(crate) fn of(hardware: &Hardware) -> ErrorBand {
        match &hardware.calibration {
            Some(c) => ErrorBand {
                calibrated: true,
                median_pct: c.median_error_pct,
                worst_pct: c.worst_error_pct,
                about: format!(
                    "calibrated on {}: kernel times within {:.1} % (median), {:.1} % (worst) of {} measurements",
                    c.source, c.median_error_pct, c.worst_error_pct, c.rows
                ),
            },
            None => {
                // Two kinds of uncalibrated preset, each with the check
                // that measured it.
                let (median_pct, worst_pct, figures, checked) = match hardware.kernels {
                    Some(_) => (
                        TRANSFERRED_MEDIAN_PCT,
                        TRANSFERRED_WORST_PCT,
                        "its datasheet with the H100's fitted kernel times",
                        "H200, B200",
                    ),
                    None => (
                        UNCALIBRATED_MEDIAN_PCT,
                        UNCALIBRATED_WORST_PCT,
                        "datasheet figures",
                        "H100, B200",
                    ),
                };
                ErrorBand {
                    calibrated: false,
                    median_pct,
                    worst_pct,
                    about: format!(
                        "uncalibrated ({figures}): kernel times within ±{median_pct:.0} % (median), ±{worst_pct:.0} % (worst) on the GPUs checked ({checked}); `moeplan calibrate` fits a file to your GPU"
                    ),
                }
            }
        }
    }
}

/// What the cost model predicts for one served plan: the `predicted` key
/// of `eval` / `compare --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct Prediction {
    /// The hardware preset's name.
    pub hardware: String,
    /// The model preset's name.
    pub model: String,
    /// Mean MoE layer time, µs.
    pub moe_layer_us: f64,
    /// Its expert compute, µs.
    pub compute_us: f64,
    /// Its dispatch, µs.
    pub dispatch_us: f64,
    /// Its combine, µs.
    pub combine_us: f64,
    /// A per-batch planner's copies not hidden under the previous layer,
    /// per step, µs (0 for a static plan).
    pub copy_exposed_us: f64,
    /// The dense part of a step (attention projections, shared experts,
    /// dense layers), µs.
    pub dense_us: f64,
    /// Decode attention's KV-cache reads per step, µs: every request reads
    /// its `context_tokens` of cache in every layer (0 in prefill).
    pub attention_us: f64,
    /// One step: every MoE layer of the model, its dense part and the
    /// exposed copies, ms.
    pub step_ms: f64,
    /// The model's MoE layers a step counts (the replayed ones stand for
    /// the rest when the trace has fewer).
    #[serde(default)]
    pub moe_layers: usize,
    /// Tokens a batch of the workload holds (mean).
    pub tokens_per_step: f64,
    /// Tokens one step serves after the KV cache's cap (mean).
    pub served_tokens_per_step: f64,
    /// Served tokens per second.
    pub tokens_per_s: f64,
    /// Weights on the fullest GPU, GiB.
    pub weights_gib_per_gpu: f64,
    /// KV cache left on each GPU, GiB (0: the weights do not fit).
    pub kv_cache_gib_per_gpu: f64,
    /// Tokens of KV cache the cluster holds.
    pub max_concurrent_tokens: f64,
    /// Requests of `context_tokens` that fit at once.
    pub max_concurrent_requests: f64,
    /// Throughput over the baseline's, when one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// What the baseline was (`BASE`: the EPLB placement without replicas).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup_over: Option<String>,
    /// Where its time goes against the baseline, one line: the largest
    /// term that makes it win or lose ([`Prediction::compare_with`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What was assumed.
    pub assumptions: Assumptions,
    /// Every other assumption, one sentence each.
    pub notes: Vec<String>,
    /// How far to trust it (`ErrorBand::of` the hardware).
    pub error_band: ErrorBand,
}

/// What [`Prediction::speedup`] is over, as front ends say it.
pub const BASE_ABOUT: &str =
    "BASE (the EPLB placement without replicas, planned on the same batches, same rule)";

impl Prediction {
    /// Sets [`Prediction::speedup`] over `base`'s throughput and
    /// [`Prediction::reason`], the largest term that makes it win or lose
    /// (nothing when BASE serves no tokens). The terms, each as the share
    /// of BASE's throughput it moves: the busiest GPU's expert compute,
    /// dispatch and combine (all MoE layers), copies not hidden, the dense
    /// part and attention's KV reads (ms a step against BASE's step), and
    /// the tokens the KV cache lets a step serve.
    ///
    /// ```
    /// use moeplan::judge::cost::Prediction;
    /// let p = |t: f64, compute_us: f64| Prediction { tokens_per_s: t, compute_us, moe_layers: 10,
    ///     step_ms: 10.0, served_tokens_per_step: 100.0, ..Default::default() };
    /// let (mut a, base) = (p(3.0, 500.0), p(2.0, 900.0));
    /// a.compare_with(&base);
    /// assert_eq!(a.speedup, Some(1.5));
    /// assert_eq!(a.reason.as_deref(), Some("wins on expert compute: 4.00 ms a step less than BASE's"));
    /// ```
    pub fn compare_with(&mut self, base: &Prediction) {
        if base.tokens_per_s > 0.0 {
            self.speedup = Some(self.tokens_per_s / base.tokens_per_s);
            self.speedup_over = Some(BASE_ABOUT.to_string());
            self.reason = Some(self.reason_against(base));
        }
    }
}

/// Tokens in each batch of `trace`: its first MoE layer's pairs over
/// `top_k` (every layer routes every token).
pub(crate) fn batch_tokens(trace: &crate::data::trace::LoadTrace, top_k: usize) -> Vec<f64> {
    let counts = trace.counts();
    (0..trace.num_batches())
        .map(|b| {
            if trace.num_layers() == 0 {
                0.0
            } else {
                counts.slice(ndarray::s![b, 0, ..]).sum() / top_k.max(1) as f64
            }
        })
        .collect()
}

/// Bytes in a GiB.
pub(crate) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The dense part of one step of `tokens` tokens on `d` GPUs: `2 ·
/// non-routed params` FLOPs per token spread over every GPU, or the
/// dense weights' read on one GPU, the larger, µs.
pub(crate) fn dense_us(
    tokens: f64,
    d: usize,
    hardware: &Hardware,
    model: &ModelPreset,
    assumptions: &Assumptions,
    tp: usize,
) -> f64 {
    let bpw = assumptions.bytes_per_weight(model);
    let params = model.non_routed_params_m as f64 * 1e6;
    let e = hardware.efficiency;
    let flops = 2.0 * params * tokens / d.max(1) as f64;
    let compute = flops / (hardware.tflops_for(bpw) * 1e6 * e.gemm);
    let read = params * bpw as f64 / tp.max(1) as f64 / (hardware.gpu.hbm_gb_per_s * 1e3 * e.hbm);
    compute.max(read)
}

/// Decode attention's time per step for `tokens` running requests on `d`
/// GPUs, µs: each reads its `context_tokens` of KV cache (BF16, as the
/// memory counts it) in every layer, spread over the GPUs; every rank of
/// an attention group reads what it keeps — the whole latent under MLA
/// (one KV head), its heads' share under grouped-query attention. Memory
/// bound (decode attention reads each cached byte for a few FLOPs); 0 in
/// prefill, whose attention is not modelled.
pub(crate) fn attention_us(
    tokens: f64,
    d: usize,
    hardware: &Hardware,
    model: &ModelPreset,
    assumptions: &Assumptions,
    tp: usize,
) -> f64 {
    if assumptions.phase != Phase::Decode || tokens <= 0.0 {
        return 0.0;
    }
    let tp = tp.max(1) as f64;
    // The cache per token is split over min(TP, KV heads) ranks and kept
    // whole on the others: `tp / split` copies read in all.
    let split = (model.kv_heads.max(1) as f64).min(tp);
    let bytes =
        tokens * assumptions.context_tokens as f64 * model.kv_bytes_per_token as f64 * tp / split;
    bytes / d.max(1) as f64 / (hardware.gpu.hbm_gb_per_s * 1e3 * hardware.efficiency.hbm)
}

/// Hardware, model and assumptions: everything the cost model needs
/// beside the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    /// The machine.
    pub hardware: Hardware,
    /// The model whose sizes the cost uses.
    pub model: ModelPreset,
    /// What the user states.
    pub assumptions: Assumptions,
}

impl Pricing {
    /// `model` on `hardware` with the default assumptions.
    pub fn new(hardware: &Hardware, model: &ModelPreset) -> Self {
        Pricing {
            hardware: hardware.clone(),
            model: *model,
            assumptions: Assumptions::default(),
        }
    }

    /// The per-step constants with no memory cap.
    pub fn time_cost(&self) -> TimeCost {
        TimeCost::new(&self.hardware, &self.model, &self.assumptions)
    }
}

/// What the replay of a priced plan needs beside the plan: the cost with
/// its memory cap, and the memory itself.
pub(crate) fn prepare(
    pricing: &Pricing,
    plan: &Plan,
    extra_slots: usize,
    cost: &super::CostModel,
) -> Result<(super::CostModel, Memory)> {
    pricing.hardware.check()?;
    pricing.assumptions.check()?;
    let mem = memory(
        plan,
        extra_slots,
        &pricing.hardware,
        &pricing.model,
        &pricing.assumptions,
    );
    let mut t = pricing.time_cost();
    t.max_tokens_per_step = match pricing.assumptions.phase {
        Phase::Prefill => mem.tokens,
        Phase::Decode => mem.requests,
    };
    Ok((
        super::CostModel {
            time: Some(t),
            ..*cost
        },
        mem,
    ))
}

/// The prediction from a replay timed with `t` ([`prepare`]'s):
/// `copies_per_batch` are a per-batch planner's copies (empty for a static
/// plan).
pub(crate) fn predict(
    pricing: &Pricing,
    t: &TimeCost,
    sim: &super::Replay,
    plan: &Plan,
    mem: Memory,
    copies_per_batch: &[usize],
    trace: &crate::data::trace::LoadTrace,
) -> Prediction {
    let Pricing {
        hardware,
        model,
        assumptions,
    } = pricing;
    let no_time = TimeReport::default();
    let time = sim.time.as_ref().unwrap_or(&no_time);
    let messages_exact = sim.traffic.messages.is_some();
    let topology = plan.topology();
    let d = topology.num_gpus();
    let l_trace = trace.num_layers().max(1);
    let scale = model.moe_layers() as f64 / l_trace as f64;
    let b_n = trace.num_batches().max(1);
    let tokens = batch_tokens(trace, t.top_k);
    let tp = assumptions.attention_tp(topology);
    let bpw = assumptions.bytes_per_weight(model) as f64;
    let expert_bytes = assumptions.expert_bytes(model);
    let (mut step_us, mut served, mut exposed_sum, mut dense_sum) = (0.0, 0.0, 0.0, 0.0);
    let mut attention_sum = 0.0;
    for (b, &tokens_b) in tokens.iter().enumerate() {
        let share = time.per_batch_share.get(b).copied().unwrap_or(1.0);
        let served_b = tokens_b * share;
        // A per-batch planner's copies for layer l run while layer l − 1
        // computes (Libra's double buffering); the first layer's in full.
        let mut exposed = 0.0;
        if let Some(&c) = copies_per_batch.get(b) {
            let per_layer = c as f64 / l_trace as f64;
            let copy_us = (per_layer / d.max(1) as f64).ceil() * expert_bytes
                / t.intra_bytes_per_us
                + if per_layer > 0.0 {
                    t.intra_latency_us
                } else {
                    0.0
                };
            for l in 0..l_trace {
                let window = if l == 0 {
                    0.0
                } else {
                    time.per_layer_us.get(l - 1).copied().unwrap_or(0.0)
                };
                exposed += (copy_us - window).max(0.0);
            }
        }
        let dense = dense_us(served_b, d, hardware, model, assumptions, tp);
        let attention = attention_us(served_b, d, hardware, model, assumptions, tp);
        let moe = time.per_batch_moe_us.get(b).copied().unwrap_or(0.0);
        step_us += (moe + exposed) * scale + dense + attention;
        exposed_sum += exposed * scale;
        dense_sum += dense;
        attention_sum += attention;
        served += served_b;
    }
    let n = b_n as f64;
    let step_ms = step_us / n / 1e3;
    let served_tokens_per_step = served / n;
    let mut notes = vec![
        format!(
            "{} of the model's {} MoE layers replayed; the step counts every MoE layer, the rest like the replayed ones' mean",
            trace.num_layers(),
            model.moe_layers()
        ),
        if messages_exact {
            "dispatch messages counted from the token routes (a token once per destination GPU, once per destination node)".to_string()
        } else {
            format!(
                "no token routes: dispatch messages are the expectation for {} independent pairs per token drawn with the GPUs' load shares",
                t.top_k
            )
        },
        format!(
            "weights in {}; dense weights split over {tp} GPUs (attention TP), the KV cache per token split over min(TP, KV heads {})",
            if bpw == 1.0 { "FP8" } else { "BF16" },
            model.kv_heads
        ),
        format!(
            "not modelled: {}{}",
            match assumptions.phase {
                Phase::Decode =>
                    "attention's FLOPs (its KV-cache reads are: every request reads its context in every layer)",
                Phase::Prefill => "attention's context-dependent FLOPs and reads (prefill)",
            },
            match (hardware.kernels.is_some(), assumptions.overlap) {
                (true, Overlap::Tbo) => "",
                (true, Overlap::None) =>
                    ", overlap of dispatch and combine with compute (--overlap tbo)",
                (false, Overlap::Tbo) => ", launch gaps (the hardware has no kernel fit)",
                (false, Overlap::None) =>
                    ", launch gaps, overlap of dispatch and combine with compute (--overlap tbo)",
            }
        ),
    ];
    if mem.kv_cache <= 0.0 {
        notes.push(format!(
            "the weights ({:.1} GiB on the fullest GPU) leave no KV cache in {:.0} % of {} GiB",
            mem.weights / GIB,
            assumptions.memory_fraction * 100.0,
            hardware.gpu.memory_gib
        ));
    }
    Prediction {
        hardware: hardware.name.to_string(),
        model: model.name.to_string(),
        moe_layer_us: time.moe_layer_us,
        compute_us: time.compute_us,
        dispatch_us: time.dispatch_us,
        combine_us: time.combine_us,
        copy_exposed_us: exposed_sum / n,
        dense_us: dense_sum / n,
        attention_us: attention_sum / n,
        step_ms,
        moe_layers: model.moe_layers(),
        tokens_per_step: tokens.iter().sum::<f64>() / n,
        served_tokens_per_step,
        tokens_per_s: if step_ms > 0.0 {
            served_tokens_per_step / (step_ms / 1e3)
        } else {
            0.0
        },
        weights_gib_per_gpu: mem.weights / GIB,
        kv_cache_gib_per_gpu: mem.kv_cache / GIB,
        max_concurrent_tokens: mem.tokens,
        max_concurrent_requests: mem.requests,
        speedup: None,
        speedup_over: None,
        reason: None,
        assumptions: *assumptions,
        notes,
        error_band: ErrorBand::of(hardware),
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn of() -> Result<(), Box<dyn std::error::Error>> {
        use crate::data::hardware::preset;
        use crate::judge::cost::ErrorBand;
        let b = ErrorBand::of(preset("a100-80g-efa")?);
        assert!(!b.calibrated && b.worst_pct > b.median_pct);
        assert!(ErrorBand::of(preset("h100-ib-ndr")?).calibrated);
        // the B200 carries the H100's fitted kernels: a narrower band
        assert!(ErrorBand::of(preset("b200-ib-ndr")?).worst_pct < b.worst_pct);
        Ok(())
    }
    #[test]
    fn attention_us() -> Result<(), Box<dyn std::error::Error>> {
        use crate::data::{hardware, model};
        use crate::judge::cost::{Assumptions, Phase, attention_us};
        let (h, m) = (
            hardware::preset("h100-ib-ndr")?,
            model::preset("deepseek-v3")?,
        );
        let decode = |context| Assumptions {
            phase: Phase::Decode,
            context_tokens: context,
            ..Assumptions::default()
        };
        let short = attention_us(256.0, 8, h, m, &decode(1024), 8);
        assert!((attention_us(256.0, 8, h, m, &decode(4096), 8) / short - 4.0).abs() < 1e-9);
        assert_eq!(
            attention_us(256.0, 8, h, m, &Assumptions::default(), 8),
            0.0
        ); // prefill
        Ok(())
    }
}
