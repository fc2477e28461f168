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

use crate::data::plan::Plan;
use crate::data::trace::LoadTrace;
use crate::error::Result;

/// Everything a user reads off one evaluation.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
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
    /// The fullest GPU's replica memory in expert slots
    /// ([`crate::data::PlanSummary::replica_slots_fullest_gpu`]): what
    /// "equal memory" compares.
    pub replica_slots_fullest_gpu: usize,
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
    /// Upper bound on the balancedness of any plan with these replica
    /// counts per layer (see `crate::judge::bound`), averaged like `balancedness`.
    pub bound: f64,
    /// `bound − balancedness`: how much better any plan could do at all.
    pub gap: f64,
    /// The bound of each layer.
    pub per_layer_bound: Vec<f64>,
    /// The packing-aware bound (see `crate::judge::packing_peak`): also
    /// counts that slots are discrete, so it is at most `bound` and binds
    /// where few slots per GPU meet heavy experts. `None` until
    /// [`EvalReport::add_packing_bound`]: its bisection costs ten times the
    /// replay, more than the page can spend on every re-plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packing_bound: Option<f64>,
    /// The packing-aware bound of each layer (with `packing_bound`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_layer_packing_bound: Option<Vec<f64>>,
    /// What `bound` counts: the plan's replicas per layer, or — for a
    /// per-batch schedule (`EvalReport::bound_per_batch`) — each batch's
    /// own copies.
    pub bound_counts: BoundCounts,
}

/// What an [`EvalReport`]'s bound is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
#[serde(rename_all = "snake_case")]
pub enum BoundCounts {
    /// Any plan with the report's replica counts per layer, fixed for all
    /// batches (or not: each batch may pick its own copy vector of that
    /// size).
    ReplicasPerLayer,
    /// Any plan, batch by batch, with as many replicas in each layer as the
    /// schedule had in that batch (Libra's copies counted per batch).
    CopiesPerBatch,
}

impl EvalReport {
    /// Replaces the bound by the one that holds for a per-batch schedule
    /// ([`crate::judge::per_batch_bound`]): the base's replica counts bound
    /// static plans, and a schedule that copies experts every batch beats
    /// them (in one measured case, Libra's 0.897 above a static bound of
    /// 0.861). The packing-aware bound, which counts copies of an even
    /// split, is dropped.
    pub(crate) fn bound_per_batch(
        &mut self,
        trace: &LoadTrace,
        placement: &crate::judge::Placement,
    ) -> Result<()> {
        self.set_bound_per_batch(crate::judge::bound::per_batch_bound(trace, placement)?);
        Ok(())
    }

    /// [`EvalReport::bound_per_batch`] from its per-layer bounds, made
    /// elsewhere (in parts: [`crate::judge::judge_pairs_replayed`]).
    pub(crate) fn set_bound_per_batch(&mut self, per_layer: Vec<f64>) {
        self.per_layer_bound = per_layer;
        self.bound = mean(&self.per_layer_bound);
        self.gap = self.bound - self.balancedness;
        self.packing_bound = None;
        self.per_layer_packing_bound = None;
        self.bound_counts = BoundCounts::CopiesPerBatch;
    }

    /// Fills [`EvalReport::packing_bound`] for `plan` on `trace` (the ones
    /// this report was made from).
    ///
    /// ```
    /// use moeplan::{evaluate, planners::contiguous, LoadTrace, Topology};
    /// use ndarray::Array3;
    /// let mut c = Array3::from_elem((2, 1, 8), 10.0);
    /// c[[0, 0, 0]] = 40.0;
    /// let trace = LoadTrace::new(c, vec![0])?;
    /// let plan = contiguous(&trace, Topology::new(1, 4)?)?;
    /// let mut report = evaluate(&trace, &plan)?;
    /// assert!(report.packing_bound.is_none());
    /// report.add_packing_bound(&trace, &plan)?;
    /// let packing = report.packing_bound.unwrap();
    /// // never looser than the old bound (beyond its bisection's 1e-9)
    /// assert!(report.balancedness <= packing && packing <= report.bound + 1e-9);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn add_packing_bound(&mut self, trace: &LoadTrace, plan: &Plan) -> Result<()> {
        plan.check_matches(trace)?;
        let d = plan.topology().num_gpus();
        let per_layer: Vec<f64> = self
            .replicas_per_layer
            .iter()
            .enumerate()
            .map(|(l, &r)| crate::judge::bound::layer_packing_bound(trace, l, d, r))
            .collect();
        self.packing_bound = Some(mean(&per_layer));
        self.per_layer_packing_bound = Some(per_layer);
        Ok(())
    }
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
pub(crate) fn evaluate_with_progress(
    trace: &LoadTrace,
    plan: &Plan,
    mut progress: impl FnMut(usize, usize),
) -> Result<EvalReport> {
    plan.check_matches(trace)?;
    let summary = plan.summary();
    let layers = plan.layers();
    let mut per_layer = Vec::with_capacity(layers.len());
    let mut per_layer_ir = Vec::with_capacity(layers.len());
    let mut per_layer_bound = Vec::with_capacity(layers.len());
    let mut replay = FlatLayer::default();
    let d = plan.topology().num_gpus();
    for (l, lp) in layers.iter().enumerate() {
        replay.prepare(&lp.gpus, trace.num_experts());
        let (bal, ir) = replay.layer_means(trace, l);
        per_layer.push(bal);
        per_layer_ir.push(ir);
        per_layer_bound.push(crate::judge::bound::layer_bound(
            trace,
            l,
            d,
            summary.replicas_per_layer[l],
        ));
        progress(l + 1, layers.len());
    }
    let balancedness = mean(&per_layer);
    let bound = mean(&per_layer_bound);
    Ok(EvalReport {
        algorithm: plan.algorithm().to_string(),
        batches: trace.num_batches(),
        balancedness,
        imbalance_ratio: mean(&per_layer_ir),
        replicas: summary.replicas,
        slots_per_gpu_max: summary.slots_per_gpu_max,
        replica_slots_fullest_gpu: summary.replica_slots_fullest_gpu,
        slots_per_gpu_min: summary.slots_per_gpu_min,
        same_gpu_duplicates: summary.same_gpu_duplicates,
        layer_ids: layers.iter().map(|l| l.layer).collect(),
        per_layer,
        per_layer_imbalance_ratio: per_layer_ir,
        replicas_per_layer: summary.replicas_per_layer,
        bound,
        gap: bound - balancedness,
        per_layer_bound,
        packing_bound: None,
        per_layer_packing_bound: None,
        bound_counts: BoundCounts::ReplicasPerLayer,
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
    let mut replay = FlatLayer::default();
    replay.prepare(&plan.layers()[layer].gpus, trace.num_experts());
    let row = trace.counts().slice(ndarray::s![batch, layer, ..]);
    replay.fill_loads_view(row);
    Ok(replay.loads.clone())
}

/// One layer's placement flattened for replay, reused across layers so the
/// batch loop never allocates. Slots are grouped by GPU, so each GPU's load
/// is summed in a register instead of scattered through memory.
#[derive(Default)]
pub(crate) struct FlatLayer {
    /// GPU `g` owns slots `gpu_start[g] .. gpu_start[g + 1]`.
    gpu_start: Vec<usize>,
    slot_expert: Vec<u32>,
    /// 1 / copies of each slot's expert.
    slot_share: Vec<f64>,
    loads: Vec<f64>,
    row: Vec<f64>,
}

impl FlatLayer {
    /// Loads one layer's placement: `gpus[g]` lists the experts on GPU `g`.
    pub(crate) fn prepare(&mut self, gpus: &[Vec<u32>], num_experts: usize) {
        let mut copies = vec![0u32; num_experts];
        self.gpu_start.clear();
        self.slot_expert.clear();
        self.gpu_start.push(0);
        for slots in gpus {
            for &e in slots {
                self.slot_expert.push(e);
                if let Some(c) = copies.get_mut(e as usize) {
                    *c += 1;
                }
            }
            self.gpu_start.push(self.slot_expert.len());
        }
        self.slot_share.clear();
        self.slot_share.extend(
            self.slot_expert
                .iter()
                .map(|&e| 1.0 / copies[e as usize].max(1) as f64),
        );
        self.loads.clear();
        self.loads.resize(gpus.len(), 0.0);
    }

    /// Per-GPU loads for one batch row of expert counts.
    fn fill_loads(&mut self, row: &[f64]) {
        for (g, load) in self.loads.iter_mut().enumerate() {
            let range = self.gpu_start[g]..self.gpu_start[g + 1];
            *load = self.slot_expert[range.clone()]
                .iter()
                .zip(&self.slot_share[range])
                .map(|(&e, &share)| row[e as usize] * share)
                .sum();
        }
    }

    fn fill_loads_view(&mut self, row: ndarray::ArrayView1<'_, f64>) {
        match row.as_slice() {
            Some(r) => self.fill_loads(r),
            None => {
                let mut buf = std::mem::take(&mut self.row);
                buf.clear();
                buf.extend(row.iter().copied());
                self.fill_loads(&buf);
                self.row = buf;
            }
        }
    }

    /// Mean balancedness over the batches of one layer stored contiguously,
    /// `rows` = `B × E` — what CRAFT's estimation replays many times.
    /// Returns (balancedness, imbalance ratio), each a mean over batches.
    pub(crate) fn mean_balance(&mut self, rows: &[f64], num_experts: usize) -> (f64, f64) {
        let (mut bal, mut ir) = (0.0, 0.0);
        let mut n = 0;
        for row in rows.chunks_exact(num_experts.max(1)) {
            self.fill_loads(row);
            let (x, y) = balance_of(&self.loads);
            bal += x;
            ir += y;
            n += 1;
        }
        if n == 0 {
            (1.0, 1.0)
        } else {
            (bal / n as f64, ir / n as f64)
        }
    }

    /// Mean over batches of (balancedness, imbalance ratio) for layer `l`.
    pub(crate) fn layer_means(&mut self, trace: &LoadTrace, l: usize) -> (f64, f64) {
        let counts = trace.counts();
        let b = trace.num_batches();
        let (mut bal, mut ir) = (0.0, 0.0);
        for bi in 0..b {
            self.fill_loads_view(counts.slice(ndarray::s![bi, l, ..]));
            let (x, y) = balance_of(&self.loads);
            bal += x;
            ir += y;
        }
        (bal / b as f64, ir / b as f64)
    }

    /// Adds layer `l`'s imbalance ratio of each batch to `out[batch]`.
    pub(crate) fn add_batch_imbalance(&mut self, trace: &LoadTrace, l: usize, out: &mut [f64]) {
        let counts = trace.counts();
        for (bi, sum) in out.iter_mut().enumerate().take(trace.num_batches()) {
            self.fill_loads_view(counts.slice(ndarray::s![bi, l, ..]));
            *sum += balance_of(&self.loads).1;
        }
    }
}

/// A plan's imbalance ratio (max / mean) per batch under even split, the
/// mean over layers, summed in the simulator's order (so equal to
/// [`crate::judge::simulate`]'s per-batch figures under `even` to the bit),
/// without its traffic. O(B · L · slots).
pub(crate) fn per_batch_imbalance(trace: &LoadTrace, plan: &Plan) -> Result<Vec<f64>> {
    plan.check_matches(trace)?;
    let l_n = trace.num_layers();
    let mut out = vec![0.0; trace.num_batches()];
    let mut replay = FlatLayer::default();
    for (l, lp) in plan.layers().iter().enumerate() {
        replay.prepare(&lp.gpus, trace.num_experts());
        replay.add_batch_imbalance(trace, l, &mut out);
    }
    for x in &mut out {
        *x /= l_n.max(1) as f64;
    }
    Ok(out)
}

/// (mean / max, max / mean) of per-GPU loads; an idle layer is balanced.
/// Public so that other crates judging loads (the CUDA runtime's checks)
/// use the very same operations and get the same bits.
///
/// ```
/// assert_eq!(moeplan::judge::balance_of(&[2.0, 4.0]), (0.75, 4.0 / 3.0));
/// assert_eq!(moeplan::judge::balance_of(&[0.0, 0.0]), (1.0, 1.0));
/// ```
pub fn balance_of(loads: &[f64]) -> (f64, f64) {
    let (max, sum) = loads.iter().fold((0.0f64, 0.0f64), |(m, s), &x| {
        (if x > m { x } else { m }, s + x)
    });
    if max <= 0.0 {
        return (1.0, 1.0);
    }
    let mean = sum / loads.len() as f64;
    (mean / max, max / mean)
}

/// The largest of `xs` and 0: `fold(0.0, f64::max)` for loads (finite,
/// never NaN) without `f64::max`'s NaN rule, which wasm has no instruction
/// for (each call was a call to `fmax`, 2 % of a Libra change in the page).
pub(crate) fn largest(xs: &[f64]) -> f64 {
    xs.iter().fold(0.0, |m, &x| if x > m { x } else { m })
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn bound_per_batch() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{BoundCounts, LoadTrace, Topology, evaluate, planners::contiguous};
        use ndarray::Array3;
        let t = LoadTrace::new(Array3::from_shape_vec((1, 1, 2), vec![3.0, 1.0])?, vec![0])?;
        let base = contiguous(&t, Topology::new(1, 2)?)?;
        let mut report = evaluate(&t, &base)?;
        assert_eq!(report.bound, 2.0 / 3.0);
        report.bound_per_batch(&t, &crate::judge::Placement::Schedule(vec![(0..1, base)]))?;
        assert_eq!(
            (report.bound, report.bound_counts),
            (2.0 / 3.0, BoundCounts::CopiesPerBatch)
        );
        Ok(())
    }
    #[test]
    fn per_batch_imbalance() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LoadTrace, Topology, judge::eval::per_batch_imbalance, planners};
        let t = LoadTrace::new(
            ndarray::Array3::from_shape_vec((2, 1, 2), vec![1.0, 1.0, 3.0, 1.0])?,
            vec![0],
        )?;
        let plan = planners::contiguous(&t, Topology::new(1, 2)?)?;
        assert_eq!(per_batch_imbalance(&t, &plan)?, vec![1.0, 1.5]);
        Ok(())
    }
}
