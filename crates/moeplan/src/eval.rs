//! Replaying a trace against a plan.
//!
//! For every batch and layer, each expert's tokens are split evenly over its
//! copies (the baseline dispatch of EPLB-style engines), each GPU's load is
//! the sum of what its slots receive, and the layer's step takes as long as
//! its busiest GPU. Two views of the same numbers:
//! - balancedness = mean GPU load / max GPU load (CRAFT's metric, 1.0 is
//!   perfect),
//! - imbalance ratio = max / mean (Libra's metric, 1.0 is perfect).
//!
//! Overall figures are the mean over batches, then over layers. A batch in
//! which a layer received no tokens counts as perfectly balanced.
//!
//! Cost: O(B · (L · E + S)) for S slots in all, with no allocation inside the
//! batch loop.

use serde::Serialize;

use crate::error::Result;
use crate::plan::{LayerPlacement, Plan};
use crate::trace::LoadTrace;

/// Everything a user reads off one evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// The planner that made the plan.
    pub algorithm: String,
    /// Batches replayed.
    pub batches: usize,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean over batches, then layers, of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Replicas (copies beyond the first) over all layers.
    pub replicas: usize,
    /// Largest total slot count on any GPU, over all layers.
    pub slots_per_gpu_max: usize,
    /// Smallest total slot count on any GPU.
    pub slots_per_gpu_min: usize,
    /// Slots holding a second copy of an expert on the same GPU.
    pub same_gpu_duplicates: usize,
    /// Model layer id of each MoE layer, in the order of the per-layer arrays.
    pub layer_ids: Vec<u32>,
    /// Balancedness of each layer (mean over batches).
    pub per_layer: Vec<f64>,
    /// Imbalance ratio of each layer (mean over batches).
    pub per_layer_imbalance_ratio: Vec<f64>,
    /// Replicas in each layer.
    pub replicas_per_layer: Vec<usize>,
}

/// Replays every batch of `trace` against `plan`.
///
/// ```
/// use moeplan::{evaluate, planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((3, 2, 8), 10.0), vec![0, 1])?;
/// let plan = contiguous(&trace, Topology::new(1, 4)?)?;
/// let report = evaluate(&trace, &plan)?;
/// assert_eq!(report.balancedness, 1.0);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn evaluate(trace: &LoadTrace, plan: &Plan) -> Result<EvalReport> {
    evaluate_with_progress(trace, plan, |_, _| {})
}

/// [`evaluate`], calling `progress(layers_done, layers_total)` after each
/// layer so a front end can show how far it got.
pub fn evaluate_with_progress(
    trace: &LoadTrace,
    plan: &Plan,
    mut progress: impl FnMut(usize, usize),
) -> Result<EvalReport> {
    plan.check_matches(trace)?;
    let summary = plan.summary();
    let layers = plan.layers();
    let mut per_layer = Vec::with_capacity(layers.len());
    let mut per_layer_ir = Vec::with_capacity(layers.len());
    let mut replay = Replay::default();
    for (l, lp) in layers.iter().enumerate() {
        replay.prepare(lp, trace.num_experts());
        let (bal, ir) = replay.layer_means(trace, l);
        per_layer.push(bal);
        per_layer_ir.push(ir);
        progress(l + 1, layers.len());
    }
    Ok(EvalReport {
        algorithm: plan.algorithm().to_string(),
        batches: trace.num_batches(),
        balancedness: mean(&per_layer),
        imbalance_ratio: mean(&per_layer_ir),
        replicas: summary.replicas,
        slots_per_gpu_max: summary.slots_per_gpu_max,
        slots_per_gpu_min: summary.slots_per_gpu_min,
        same_gpu_duplicates: summary.same_gpu_duplicates,
        layer_ids: layers.iter().map(|l| l.layer).collect(),
        per_layer,
        per_layer_imbalance_ratio: per_layer_ir,
        replicas_per_layer: summary.replicas_per_layer,
    })
}

/// Per-GPU token load of layer index `layer` in batch `batch` under even
/// split — one cell column of the app's heat map.
///
/// ```
/// use moeplan::{gpu_loads, planners::contiguous, LoadTrace, Topology};
/// use ndarray::Array3;
/// let mut c = Array3::from_elem((1, 1, 4), 1.0);
/// c[[0, 0, 3]] = 5.0;
/// let trace = LoadTrace::new(c, vec![0])?;
/// let plan = contiguous(&trace, Topology::new(1, 2)?)?;
/// assert_eq!(gpu_loads(&trace, &plan, 0, 0)?, vec![2.0, 6.0]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn gpu_loads(trace: &LoadTrace, plan: &Plan, batch: usize, layer: usize) -> Result<Vec<f64>> {
    plan.check_matches(trace)?;
    if batch >= trace.num_batches() || layer >= trace.num_layers() {
        return Err(crate::Error::Argument(format!(
            "batch {batch} / layer index {layer} is outside the trace ({} batches, {} layers)",
            trace.num_batches(),
            trace.num_layers()
        )));
    }
    let mut replay = Replay::default();
    replay.prepare(&plan.layers()[layer], trace.num_experts());
    let row = trace.counts().slice(ndarray::s![batch, layer, ..]);
    replay.fill_loads(row.iter().copied());
    Ok(replay.loads.clone())
}

/// Scratch buffers for one layer's replay, reused across layers so the batch
/// loop never allocates.
#[derive(Default)]
struct Replay {
    /// Flattened slots: (GPU, expert) pairs.
    slot_gpu: Vec<u32>,
    slot_expert: Vec<u32>,
    /// 1 / copies of each expert.
    inv_copies: Vec<f64>,
    /// Per-expert tokens per copy in the current batch.
    share: Vec<f64>,
    loads: Vec<f64>,
}

impl Replay {
    fn prepare(&mut self, lp: &LayerPlacement, num_experts: usize) {
        self.slot_gpu.clear();
        self.slot_expert.clear();
        for (g, slots) in lp.gpus.iter().enumerate() {
            for &e in slots {
                self.slot_gpu.push(g as u32);
                self.slot_expert.push(e);
            }
        }
        self.inv_copies.clear();
        self.inv_copies.extend(
            lp.copies(num_experts)
                .iter()
                .map(|&c| if c == 0 { 0.0 } else { 1.0 / c as f64 }),
        );
        self.share.resize(num_experts, 0.0);
        self.loads.resize(lp.gpus.len(), 0.0);
    }

    fn fill_loads(&mut self, counts: impl Iterator<Item = f64>) {
        for ((s, w), inv) in self.share.iter_mut().zip(counts).zip(&self.inv_copies) {
            *s = w * inv;
        }
        self.loads.fill(0.0);
        for (&g, &e) in self.slot_gpu.iter().zip(&self.slot_expert) {
            self.loads[g as usize] += self.share[e as usize];
        }
    }

    /// Mean over batches of (balancedness, imbalance ratio) for layer `l`.
    fn layer_means(&mut self, trace: &LoadTrace, l: usize) -> (f64, f64) {
        let counts = trace.counts();
        let b = trace.num_batches();
        let (mut bal, mut ir) = (0.0, 0.0);
        for bi in 0..b {
            let row = counts.slice(ndarray::s![bi, l, ..]);
            self.fill_loads(row.iter().copied());
            let (x, y) = balance_of(&self.loads);
            bal += x;
            ir += y;
        }
        (bal / b as f64, ir / b as f64)
    }
}

/// (mean / max, max / mean) of per-GPU loads; an idle layer is balanced.
pub(crate) fn balance_of(loads: &[f64]) -> (f64, f64) {
    let (max, sum) = loads
        .iter()
        .fold((0.0f64, 0.0f64), |(m, s), &x| (m.max(x), s + x));
    if max <= 0.0 {
        return (1.0, 1.0);
    }
    let mean = sum / loads.len() as f64;
    (mean / max, max / mean)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}
