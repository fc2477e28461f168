//! One simulator for every planner: replay a [`Workload`] against a
//! placement (one plan, or a schedule of plans over batch ranges) under an
//! engine's real dispatch [`Rule`], and report balance, traffic and the
//! expert bytes each re-placement moves.
//!
//! ```text
//! Workload ──┐
//! Strategy ──┼── simulate ──▶ Replay { balance (overall, per layer, per batch),
//! CostModel ─┘                          traffic (local / intra / cross-node, busiest
//!                                       GPU's ingress and egress), bytes moved }
//! ```
//!
//! - Balance is `crate::judge::eval`'s: per (batch, layer) the GPU loads the
//!   rule produces, balancedness = mean / max and imbalance ratio = max /
//!   mean; overall figures are the mean over batches, then over layers.
//!   Under [`Rule::Even`] every figure equals [`crate::evaluate`]'s to the
//!   last bit.
//! - Sources: without them every GPU is assumed to send `1 / D` of each
//!   expert's tokens, and [`Replay::sources`] says so.
//! - Traffic: see [`Traffic`] for the definitions. With token routes it
//!   also counts token messages ([`Messages`]: a token sent once per
//!   destination GPU / node), exact for deterministic choices and the
//!   expectation for split ones; without them `Traffic::messages` is
//!   `None` and nothing extra runs.
//! - GRACE-MoE's rules ([`Rule::GraceWeighted`], [`Rule::GraceTopology`])
//!   weigh copies by [`predicted_loads`] from the loads the plan was
//!   planned on ([`Plan::profile`], which the registry records in every
//!   plan): the paper's offline profile, so judged on held-out batches the
//!   router knows only what it profiled. A plan without a profile (read
//!   from an engine's file, or built by hand) falls back to the replayed
//!   workload's own summed counts — in-sample knowledge —, and
//!   [`Replay::predictions`] says which.
//! - A [`Placement::Schedule`] re-places experts between batch ranges;
//!   each change moves the (GPU, expert) slots the new plan has and the old
//!   lacks, times the bytes of one expert.
//! - Figures are exact sums of the inputs where a rule is deterministic
//!   and the sources are known (`SglangStatic` with per-source counts or
//!   token routes, `Vllm` with token routes): integer counts give integer
//!   loads and traffic. Even arrival divides by `D`.
//!
//! Source: moeplan's own design, one simulator for every planner and
//! rule; the rules' sources are listed in `judge/dispatch.rs`. Cost:
//! O(B · L · (slots + D)) for even-split rules without sources (the bench:
//! 256 batches × 58 layers × 256 experts on 64 GPUs); see `judge/replay.rs` for
//! the rest, plus one SGLang map per plan for `SglangStatic`.
//!
//! ```
//! use moeplan::judge::{simulate, CostModel, Rule, SglangVersion, Strategy};
//! use moeplan::Workload;
//! use moeplan::{synth::generator, data::model, planners, Topology};
//! let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
//! let cfg = planners::EplbConfig { redundant_experts: 16, groups: 1 };
//! let plan = planners::eplb(&trace, Topology::new(2, 4)?, cfg)?;
//! let work = Workload::new(trace);
//! let cost = CostModel::default();
//! let vllm = simulate(&work, &Strategy::fixed(plan.clone(), Rule::Vllm), &cost)?;
//! let best = simulate(&work, &Strategy::fixed(plan, Rule::Optimal), &cost)?;
//! assert!(best.balancedness >= vllm.balancedness);
//! assert_eq!(vllm.sources, "even arrival (assumed)");
//! # Ok::<(), moeplan::Error>(())
//! ```

pub(crate) mod bound;
pub(crate) mod calibrate;
pub mod cost;
mod dispatch;
pub(crate) mod eval;
pub(crate) mod migration;
mod optimal;
mod pyrandom;
mod rebalance;
mod replay;
mod service;
mod sglang;
mod slots;
mod steps;
mod traffic;
mod verdict;

use std::ops::Range;

use serde::Serialize;

use crate::data::model::ModelPreset;
use crate::data::plan::Plan;
use crate::error::Result;

pub(crate) use crate::data::workload::Sources;
use crate::data::workload::Workload;
pub use bound::layer_bound_curve;
pub use calibrate::{
    CommPhase, Fitted, Measurement, Residuals, calibrate, predict_us, residuals, uniform_rank_bytes,
};
pub use dispatch::{RouteShares, Rule, SglangVersion, predicted_loads};
pub use eval::{BoundCounts, EvalReport, balance_of, evaluate, gpu_loads};
pub use migration::{Migration, MoveCost, migration, relabel};
#[cfg(test)]
pub(crate) use optimal::optimal_split;
pub use rebalance::{DEFAULT_TOLERANCE_PERCENT, Rebalancer, RemoteStart};
pub use service::{Judge, JudgedSchedule, PairTraffic};
pub use sglang::sglang_dispatch_map;
pub use steps::{Steps, replay_steps};
pub use traffic::{Messages, Traffic};
pub use verdict::{Schedule, Served, Verdict, judge, judge_pairs, judge_pairs_replayed, price};

/// Sizes that turn pair counts into bytes, and (with `time`) rows and
/// messages into time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostModel {
    /// Hidden size: elements of one token's activation.
    pub hidden: usize,
    /// Bytes per activation element sent (2 for bf16).
    pub bytes_per_activation: usize,
    /// Bytes of one expert's weights: what moving a copy costs.
    pub expert_bytes: u64,
    /// The hardware's per-step constants: when set, the replay times every
    /// (batch, layer) ([`Replay::time`]).
    #[serde(skip)]
    pub time: Option<cost::TimeCost>,
}

impl CostModel {
    /// A model's sizes, activations sent in bf16.
    ///
    /// ```
    /// use moeplan::{data::model, judge::CostModel};
    /// let c = CostModel::for_model(model::preset("deepseek-v3")?);
    /// assert_eq!((c.hidden, c.bytes_per_activation), (7168, 2));
    /// assert_eq!(c, CostModel::default());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn for_model(preset: &ModelPreset) -> Self {
        CostModel {
            hidden: preset.hidden,
            bytes_per_activation: 2,
            expert_bytes: preset.expert_bytes(),
            time: None,
        }
    }
}

/// Whose sizes price a plan (its traffic bytes, its copies, its time): the
/// one choice every front end makes, with one fallback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelChoice {
    /// The model.
    pub preset: &'static ModelPreset,
    /// Where the choice came from: `asked` (a flag, the page's control),
    /// `the trace` (it names a preset) or `default` ([`DEFAULT_MODEL`]).
    pub from: &'static str,
}

/// The model when neither the caller nor the trace names one: DeepSeek-V3,
/// the model the engines' expert-parallel balancers were built for.
pub const DEFAULT_MODEL: &str = "deepseek-v3";

impl ModelChoice {
    /// `asked` when given (an unknown name is an error, never a silent
    /// fallback), else the trace's model when it names a preset, else
    /// [`DEFAULT_MODEL`].
    ///
    /// ```
    /// use moeplan::judge::{CostModel, ModelChoice};
    /// use moeplan::LoadTrace;
    /// use ndarray::Array3;
    /// let t = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
    /// let c = ModelChoice::choose(None, &t)?;
    /// assert_eq!((c.preset.name, c.from), ("deepseek-v3", "default"));
    /// assert_eq!(c.cost(), CostModel::default());
    /// let t = t.with_model("olmoe");
    /// assert_eq!(ModelChoice::choose(None, &t)?.from, "the trace");
    /// assert_eq!(ModelChoice::choose(Some("qwen3-30b-a3b"), &t)?.from, "asked");
    /// assert!(ModelChoice::choose(Some("gpt-5"), &t).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn choose(asked: Option<&str>, trace: &crate::LoadTrace) -> Result<ModelChoice> {
        use crate::data::model::preset;
        Ok(match asked {
            Some(name) => ModelChoice {
                preset: preset(name)?,
                from: "asked",
            },
            None => match trace.model().and_then(|n| preset(n).ok()) {
                Some(p) => ModelChoice {
                    preset: p,
                    from: "the trace",
                },
                None => ModelChoice {
                    preset: preset(DEFAULT_MODEL)?,
                    from: "default",
                },
            },
        })
    }

    /// The chosen model's sizes ([`CostModel::for_model`]).
    pub fn cost(&self) -> CostModel {
        CostModel::for_model(self.preset)
    }
}

impl Default for CostModel {
    /// DeepSeek-V3: hidden 7168, bf16 activations, FP8 experts of
    /// 3 × 7168 × 2048 bytes.
    fn default() -> Self {
        CostModel {
            hidden: 7168,
            bytes_per_activation: 2,
            expert_bytes: 3 * 7168 * 2048,
            time: None,
        }
    }
}

/// Where experts live while the batches run.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// One plan for every batch.
    Static(Plan),
    /// Plans for consecutive batch ranges that together cover every batch
    /// in order (`0..a`, `a..b`, …, `..B`).
    Schedule(Vec<(Range<usize>, Plan)>),
}

/// A placement and the dispatch rule that serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    /// Where experts live.
    pub placement: Placement,
    /// How a pair picks among copies.
    pub rule: Rule,
}

impl Strategy {
    /// One plan for every batch under `rule`.
    ///
    /// ```
    /// use moeplan::judge::{Rule, Strategy};
    /// use moeplan::{planners::contiguous, LoadTrace, Topology};
    /// use ndarray::Array3;
    /// let trace = LoadTrace::new(Array3::from_elem((1, 1, 4), 1.0), vec![0])?;
    /// let s = Strategy::fixed(contiguous(&trace, Topology::new(1, 2)?)?, Rule::Even);
    /// assert_eq!(s.rule, Rule::Even);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn fixed(plan: Plan, rule: Rule) -> Self {
        Strategy {
            placement: Placement::Static(plan),
            rule,
        }
    }
}

/// One re-placement of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Move {
    /// First batch served by the new plan.
    pub at_batch: usize,
    /// (GPU, expert) slots the new plan has that the old one lacks, over
    /// all layers (a second copy on one GPU counts once more).
    pub slots: usize,
    /// `slots × expert_bytes`.
    pub bytes: u64,
}

/// Everything one simulation measured.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    /// The dispatch rule ([`Rule::name`]).
    pub rule: String,
    /// Where the tokens came from ([`Workload::sources`]).
    pub sources: String,
    /// GRACE's rules only: where their load predictions came from — the
    /// plan's planning batches (its profile) or, for a plan without one,
    /// the replayed batches themselves (in-sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictions: Option<String>,
    /// The planner(s) that made the plans, in schedule order.
    pub algorithm: String,
    /// Batches replayed.
    pub batches: usize,
    /// Model layer id of each MoE layer.
    pub layer_ids: Vec<u32>,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean over batches, then layers, of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Balancedness of each layer (mean over batches).
    pub per_layer: Vec<f64>,
    /// Imbalance ratio of each layer (mean over batches).
    pub per_layer_imbalance_ratio: Vec<f64>,
    /// Balancedness of each batch (mean over layers).
    pub per_batch: Vec<f64>,
    /// Imbalance ratio of each batch (mean over layers).
    pub per_batch_imbalance_ratio: Vec<f64>,
    /// Traffic over all batches (see [`Traffic`]).
    pub traffic: Traffic,
    /// Traffic of each batch.
    pub per_batch_traffic: Vec<Traffic>,
    /// Each re-placement of a schedule.
    pub moves: Vec<Move>,
    /// Expert bytes moved by all re-placements.
    pub bytes_moved: u64,
    /// The time of every (batch, layer) on the cost model's hardware
    /// ([`CostModel::time`]); `None` without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<cost::TimeReport>,
}

/// [`Replay::predictions`] when every plan records its profile.
pub const PREDICTED_FROM_PROFILE: &str = "the plan's planning batches (its recorded profile)";
/// [`Replay::predictions`] when a plan records none.
pub const PREDICTED_IN_SAMPLE: &str =
    "the replayed batches themselves (the plan records no profile: in-sample knowledge)";

/// Replays `workload` under `strategy`.
///
/// ```
/// use moeplan::judge::{simulate, CostModel, Rule, Strategy};
/// use moeplan::Workload;
/// use moeplan::{evaluate, planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let mut c = Array3::from_elem((2, 1, 4), 1.0);
/// c[[0, 0, 3]] = 5.0;
/// let trace = LoadTrace::new(c, vec![0])?;
/// let plan = contiguous(&trace, Topology::new(1, 2)?)?;
/// let r = simulate(&Workload::new(trace.clone()), &Strategy::fixed(plan.clone(), Rule::Even), &CostModel::default())?;
/// assert_eq!(r.balancedness, evaluate(&trace, &plan)?.balancedness);
/// assert_eq!(r.traffic.pairs, 12.0);
/// assert_eq!(r.traffic.local, 6.0); // two GPUs, each sends half of every expert
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn simulate(workload: &Workload, strategy: &Strategy, cost: &CostModel) -> Result<Replay> {
    let segments = segments(&strategy.placement, workload.trace().num_batches())?;
    simulate_parts(workload, &segments, strategy.rule, cost, true)
}

/// [`simulate`] without token messages (`traffic.messages` is `None`):
/// balance and pair traffic only, for a view that shows no messages. On
/// token routes counting them is a pass over every token of every batch
/// and layer, most of a replay's time (the page's DeepSeek-V3 default with
/// routes: see `docs/speed.md`).
///
/// ```
/// use moeplan::judge::{simulate, simulate_pairs, CostModel, Rule, Strategy};
/// use moeplan::{Workload, data::model::preset, planners::contiguous, data::Topology};
/// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
/// let tokens = generate_tokens(&TokenGenConfig::new(preset("deepseek-v2-lite")?, 512))?;
/// let work = Workload::from_tokens(tokens, 256)?;
/// let plan = contiguous(work.trace(), Topology::new(2, 4)?)?;
/// let s = Strategy::fixed(plan, Rule::Even);
/// let (full, pairs) = (simulate(&work, &s, &CostModel::default())?, simulate_pairs(&work, &s, &CostModel::default())?);
/// assert!(full.traffic.messages.is_some() && pairs.traffic.messages.is_none());
/// assert_eq!(full.balancedness, pairs.balancedness);
/// assert_eq!(full.traffic.cross_node, pairs.traffic.cross_node);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn simulate_pairs(
    workload: &Workload,
    strategy: &Strategy,
    cost: &CostModel,
) -> Result<Replay> {
    let segments = segments(&strategy.placement, workload.trace().num_batches())?;
    simulate_parts(workload, &segments, strategy.rule, cost, false)
}

/// [`simulate`] of borrowed plans over batch ranges (checked to cover every
/// batch in order): no plan is cloned into a [`Strategy`]. Its steps are
/// recorded, then folded ([`steps`]).
pub(crate) fn simulate_parts(
    workload: &Workload,
    segments: &[(Range<usize>, &Plan)],
    rule: Rule,
    cost: &CostModel,
    messages: bool,
) -> Result<Replay> {
    let all = 0..workload.trace().num_batches();
    let recorded = steps::steps_of(workload, segments, rule, cost, messages, all)?;
    steps::fold(workload, segments, rule, cost, &recorded)
}

/// The placement as (batch range, plan) pieces covering `0..batches` in
/// order.
pub(crate) fn segments(
    placement: &Placement,
    batches: usize,
) -> Result<Vec<(Range<usize>, &Plan)>> {
    steps::segments_in(placement, 0..batches)
}

/// Slots each re-placement adds, layer by layer and GPU by GPU.
fn moves(segments: &[(Range<usize>, &Plan)], cost: &CostModel) -> Vec<Move> {
    let mut count: Vec<i64> = Vec::new();
    segments
        .windows(2)
        .map(|w| {
            let (old, (range, new)) = (w[0].1, (&w[1].0, w[1].1));
            count.clear();
            count.resize(new.num_experts(), 0);
            let mut slots = 0usize;
            for (lo, ln) in old.layers().iter().zip(new.layers()) {
                for (go, gn) in lo.gpus.iter().zip(&ln.gpus) {
                    // A shared prefix adds nothing (a per-batch planner's
                    // plans share their base's slots): only the tails count.
                    let same = go.iter().zip(gn).take_while(|(a, b)| a == b).count();
                    let (go, gn) = (&go[same..], &gn[same..]);
                    for &e in gn {
                        count[e as usize] += 1;
                    }
                    for &e in go {
                        count[e as usize] -= 1;
                    }
                    for &e in gn {
                        slots += count[e as usize].max(0) as usize;
                        count[e as usize] = 0;
                    }
                    for &e in go {
                        count[e as usize] = 0;
                    }
                }
            }
            Move {
                at_batch: range.start,
                slots,
                bytes: (slots as u64).saturating_mul(cost.expert_bytes),
            }
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}
