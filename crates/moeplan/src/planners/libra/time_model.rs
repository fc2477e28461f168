//! Libra's execution-time model: does the copy of the next layer's experts
//! hide under the current layer's compute? (Libra paper §3.1 "Two-Stage
//! Locality-Aware Execution" and §4's double buffering: while layer `i`
//! runs, the experts predicted for layer `i + 1` are copied into the other
//! buffer.)
//!
//! Per batch `b` and MoE layer `l`, on every GPU `g`:
//! - **local compute**: the pairs `g`'s own tokens send to experts `g`
//!   holds (base or copy), `local_g · t`, with `t` the seconds one (token,
//!   expert) pair takes: `2 · 3 · hidden · moe_intermediate` FLOPs (three
//!   projections, a multiply-add is two FLOPs) over [`TimeModel::tflops`];
//! - **remote compute** after Algorithm 2 (the simulator's rebalancer,
//!   [`crate::judge::Rebalancer`]): `remote_g · t`, which cannot start before
//!   the CPU rebalancer's answer ([`TimeModel::rebalance_seconds`]), so
//!   `g` finishes at `max(local_g · t, rebalance) + remote_g · t` (just
//!   `local_g · t` when it serves no remote pair);
//! - the layer takes its slowest GPU (the combine waits for every GPU);
//! - **the copy** of layer `l`'s prefetched experts: each GPU receives its
//!   copies (at most `N`) and each expert's home GPU (the lowest GPU holding
//!   it in the base plan) sends them, one expert `expert_bytes`, at
//!   [`TimeModel::link_gb_per_s`] per direction; the copy takes the busiest
//!   GPU's `max(received, sent) · expert_bytes / bandwidth`;
//! - the copy for layer `l` runs during layer `l − 1` of the same batch
//!   (the window): it **hides** when it takes no longer than that layer's
//!   compute; otherwise layer `l` waits and the excess is charged to the
//!   batch ([`LayerTime::exposed_seconds`]). The first MoE layer has no MoE
//!   layer before it in the batch: its copy is charged in full (a real
//!   system might hide it under attention or dense layers, which the model
//!   does not time), and it is counted apart from the hidden/unhidden
//!   counts, which cover layers `1..L`.
//!
//! The static plan it is compared with is the same base plan under the
//! `even` rule (each expert's pairs split evenly over its copies), no
//! copies, no rebalancer: each layer takes `max_g load_g · t`.
//!
//! Not modelled (the same for both sides, or stated where they favour one):
//! attention and dense layers, all-to-all dispatch and combine (Libra uses
//! an all-gather, more bytes, which would count against it), GEMM
//! efficiency falling at small per-expert token counts (the model is linear
//! in pairs), and the copies' own memory traffic.
//!
//! Cost: O(B · L · (S · E + slots + the rebalancer's transfers)) time,
//! O(B · L) memory for the per-layer entries.

use serde::Serialize;

use crate::data::Workload;
use crate::data::model::ModelPreset;
use crate::data::plan::{LayerPlacement, Plan};
use crate::error::{Error, Result};
use crate::judge::{Placement, Rebalancer, Rule, Sources};

use super::LibraSchedule;

const NAME: &str = "libra";

/// The execution-time model's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeModel {
    /// FLOPs one (token, expert) pair costs: `2 · 3 · hidden ·
    /// moe_intermediate`.
    pub flops_per_pair: f64,
    /// Bytes of one expert's weights: what one copy moves.
    pub expert_bytes: u64,
    /// Sustained expert-GEMM throughput of one GPU, in TFLOPS.
    pub tflops: f64,
    /// Link bandwidth per GPU and direction, in GB/s (10⁹ bytes).
    pub link_gb_per_s: f64,
    /// The CPU rebalancer's time per layer, in seconds.
    pub rebalance_seconds: f64,
}

/// NVLink 4 on H100 / H200 SXM: 18 links × 25 GB/s per direction = 450
/// GB/s each way (the Libra paper's "NVSwitch, 900 GB/s" counts both
/// directions). PCIe 5.0 x16 gives 64 GB/s per direction, an InfiniBand
/// NDR port 400 Gb/s = 50 GB/s.
pub const NVLINK4_GB_PER_S: f64 = 450.0;
/// PCIe 5.0 x16, per direction.
pub const PCIE5_GB_PER_S: f64 = 64.0;
/// One InfiniBand NDR port (400 Gb/s).
pub const IB_NDR_GB_PER_S: f64 = 50.0;
/// 60 % of H100 / H200 SXM's 989 dense BF16 TFLOPS. Erring fast is the
/// conservative side: a faster GPU leaves a shorter window for the copy.
pub(crate) const DEFAULT_TFLOPS: f64 = 600.0;
/// The target for Algorithm 2 per call (measured: 4.4 µs for 8
/// GPUs × 128 experts, 8.5 µs for 8 × 256; docs/speed.md).
pub(crate) const DEFAULT_REBALANCE_SECONDS: f64 = 10e-6;

impl TimeModel {
    /// A model's shape at the defaults: NVLink 4 ([`NVLINK4_GB_PER_S`]),
    /// `DEFAULT_TFLOPS`, `DEFAULT_REBALANCE_SECONDS`.
    ///
    /// ```
    /// use moeplan::{data::model, planners::TimeModel};
    /// let m = TimeModel::for_model(model::preset("deepseek-v3")?);
    /// assert_eq!(m.flops_per_pair, 2.0 * 3.0 * 7168.0 * 2048.0);
    /// assert_eq!(m.expert_bytes, 3 * 7168 * 2048);
    /// assert_eq!(m, TimeModel::default());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn for_model(preset: &ModelPreset) -> Self {
        TimeModel {
            flops_per_pair: 6.0 * preset.hidden as f64 * preset.moe_intermediate as f64,
            expert_bytes: preset.expert_bytes(),
            tflops: DEFAULT_TFLOPS,
            link_gb_per_s: NVLINK4_GB_PER_S,
            rebalance_seconds: DEFAULT_REBALANCE_SECONDS,
        }
    }

    /// Errors unless every figure is finite, the rates positive and the
    /// rest non-negative.
    pub(crate) fn validate(&self) -> Result<()> {
        let positive = [
            ("tflops", self.tflops),
            ("link_gb_per_s", self.link_gb_per_s),
        ];
        for (name, x) in positive {
            if !(x.is_finite() && x > 0.0) {
                return Err(Error::planner(
                    NAME,
                    format!("time model: {name} = {x} must be finite and positive"),
                ));
            }
        }
        let non_negative = [
            ("flops_per_pair", self.flops_per_pair),
            ("rebalance_seconds", self.rebalance_seconds),
        ];
        for (name, x) in non_negative {
            if !(x.is_finite() && x >= 0.0) {
                return Err(Error::planner(
                    NAME,
                    format!("time model: {name} = {x} must be finite and non-negative"),
                ));
            }
        }
        Ok(())
    }

    /// Seconds one (token, expert) pair takes.
    ///
    /// ```
    /// use moeplan::planners::TimeModel;
    /// let m = TimeModel { flops_per_pair: 1e12, tflops: 2.0, ..TimeModel::default() };
    /// assert_eq!(m.pair_seconds(), 0.5);
    /// ```
    pub fn pair_seconds(&self) -> f64 {
        self.flops_per_pair / (self.tflops * 1e12)
    }

    /// Seconds `experts` expert copies take over one link direction.
    ///
    /// ```
    /// use moeplan::planners::TimeModel;
    /// let m = TimeModel { expert_bytes: 1_000_000_000, link_gb_per_s: 4.0, ..TimeModel::default() };
    /// assert_eq!(m.copy_seconds(2), 0.5);
    /// ```
    pub fn copy_seconds(&self, experts: usize) -> f64 {
        experts as f64 * self.expert_bytes as f64 / (self.link_gb_per_s * 1e9)
    }
}

impl Default for TimeModel {
    /// DeepSeek-V3's shape (hidden 7168, expert intermediate 2048, FP8
    /// experts) at the defaults of [`TimeModel::for_model`].
    fn default() -> Self {
        TimeModel {
            flops_per_pair: 6.0 * 7168.0 * 2048.0,
            expert_bytes: 3 * 7168 * 2048,
            tflops: DEFAULT_TFLOPS,
            link_gb_per_s: NVLINK4_GB_PER_S,
            rebalance_seconds: DEFAULT_REBALANCE_SECONDS,
        }
    }
}

/// One batch and layer under the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LayerTime {
    /// Batch.
    pub batch: usize,
    /// Layer index (0-based among the MoE layers).
    pub layer: usize,
    /// Libra: the busiest GPU's local stage.
    pub local_seconds: f64,
    /// Libra: the layer's two-stage compute (its slowest GPU).
    pub compute_seconds: f64,
    /// The base plan under `even`: the layer's slowest GPU.
    pub static_seconds: f64,
    /// Copies into this layer's buffers: the busiest GPU's received or
    /// sent experts.
    pub copies: usize,
    /// The copy's time.
    pub copy_seconds: f64,
    /// The time it may hide under: the previous layer's compute in this
    /// batch (0 for the first layer).
    pub window_seconds: f64,
    /// The copy took no longer than the window.
    pub hidden: bool,
    /// What the layer waits for its copies: `max(0, copy − window)`.
    pub exposed_seconds: f64,
    /// Some GPU with remote pairs finished its local stage before the
    /// rebalancer answered.
    pub rebalance_exposed: bool,
    /// Libra: the busiest GPU's pairs after rebalancing.
    pub max_load: f64,
    /// Pairs per GPU on average.
    pub mean_load: f64,
    /// The base plan under `even`: the busiest GPU's pairs.
    pub static_max_load: f64,
}

/// The model's answer for a workload, a base plan and Libra's schedule on
/// it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeReport {
    /// The settings used.
    pub model: TimeModel,
    /// Libra's MoE time per batch: compute plus exposed copies.
    pub per_batch_seconds: Vec<f64>,
    /// The base plan's MoE time per batch (no copies, no rebalancing).
    pub static_per_batch_seconds: Vec<f64>,
    /// Copy time charged per batch (first layers included).
    pub per_batch_exposed_seconds: Vec<f64>,
    /// Layers `1..L` (over all batches) whose copy hid.
    pub hidden: usize,
    /// Layers `1..L` whose copy did not hide, and were charged.
    pub unhidden: usize,
    /// The first layers' copies, charged in full, summed over batches.
    pub first_layer_seconds: f64,
    /// (Batch, layer) pairs where the rebalancer outlasted a local stage.
    pub rebalance_exposed: usize,
    /// Libra's total.
    pub total_seconds: f64,
    /// The base plan's total.
    pub static_total_seconds: f64,
    /// Every (batch, layer), batch-major.
    pub layers: Vec<LayerTime>,
}

/// The plan serving batch `b` of a placement.
fn plan_for(placement: &Placement, b: usize) -> Option<&Plan> {
    match placement {
        Placement::Static(p) => Some(p),
        Placement::Schedule(parts) => parts.iter().find(|(r, _)| r.contains(&b)).map(|(_, p)| p),
    }
}

/// Per GPU, each expert's pairs split evenly over its copies (the `even`
/// rule), into `loads`.
fn even_loads(layer: &LayerPlacement, row: &[f64], mult: &mut Vec<u32>, loads: &mut Vec<f64>) {
    mult.clear();
    mult.resize(row.len(), 0);
    for &e in layer.gpus.iter().flatten() {
        if let Some(m) = mult.get_mut(e as usize) {
            *m += 1;
        }
    }
    loads.clear();
    loads.extend(layer.gpus.iter().map(|g| {
        g.iter()
            .map(|&e| {
                let (n, m) = (
                    row.get(e as usize).copied().unwrap_or(0.0),
                    mult.get(e as usize).copied().unwrap_or(1).max(1),
                );
                n / f64::from(m)
            })
            .sum::<f64>()
    }));
}

/// Copies of `next` beyond `base` per GPU received and per home GPU sent:
/// the busiest GPU's count. Errors when `next` does not start with
/// `base`'s slots on some GPU (a schedule built on another base).
fn copies_of(base: &LayerPlacement, next: &LayerPlacement, sent: &mut Vec<usize>) -> Result<usize> {
    let d = base.gpus.len();
    sent.clear();
    sent.resize(d, 0);
    let mut busiest = 0;
    for (g, (b, n)) in base.gpus.iter().zip(&next.gpus).enumerate() {
        let Some(extra) = n.get(b.len()..).filter(|_| n.starts_with(b)) else {
            return Err(Error::planner(
                NAME,
                format!(
                    "layer {}: GPU {g}'s slots do not start with the base plan's: the schedule was built on another base",
                    base.layer
                ),
            ));
        };
        busiest = busiest.max(extra.len());
        for &e in extra {
            if let Some(home) = base.gpus.iter().position(|h| h.contains(&e)) {
                sent[home] += 1;
            }
        }
    }
    Ok(busiest.max(sent.iter().copied().max().unwrap_or(0)))
}

/// Libra's schedule on `work` and its `base` plan under `model`; see the
/// module's comment for what is timed.
///
/// ```
/// use moeplan::planners::{LibraOptions, Predictor, libra_schedule};
/// use moeplan::{Topology, data::Workload, data::model, planners, synth::generator};
/// let preset = model::preset("olmoe")?;
/// let trace = generator::generate(&generator::GenConfig::new(preset, 2))?;
/// let base = planners::contiguous(&trace, Topology::new(1, 8)?)?;
/// let work = Workload::new(trace);
/// let s = libra_schedule(&work, &base, &Predictor::Oracle, &LibraOptions::default())?;
/// let r = planners::libra_time(&work, &base, &s, &planners::TimeModel::for_model(preset))?;
/// assert_eq!(r.per_batch_seconds.len(), 2);
/// assert_eq!(r.hidden + r.unhidden, 2 * (work.trace().num_layers() - 1));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn time(
    work: &Workload,
    base: &Plan,
    schedule: &LibraSchedule,
    model: &TimeModel,
) -> Result<TimeReport> {
    model.validate()?;
    let trace = work.trace();
    base.check_matches(trace)?;
    let Rule::Libra {
        tolerance_percent,
        start,
    } = schedule.rule
    else {
        return Err(Error::planner(
            NAME,
            format!(
                "the time model needs Libra's rule, not {}",
                schedule.rule.name()
            ),
        ));
    };
    let epsilon = f64::from(tolerance_percent) / 100.0;
    let (b_n, l_n, e_n) = trace.counts().dim();
    let d = base.topology().num_gpus();
    let t = model.pair_seconds();
    let even = matches!(work.source_kind(), Sources::Even);
    let (mut src, mut row, mut mult, mut loads, mut sent) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut report = TimeReport {
        model: *model,
        per_batch_seconds: Vec::with_capacity(b_n),
        static_per_batch_seconds: Vec::with_capacity(b_n),
        per_batch_exposed_seconds: Vec::with_capacity(b_n),
        hidden: 0,
        unhidden: 0,
        first_layer_seconds: 0.0,
        rebalance_exposed: 0,
        total_seconds: 0.0,
        static_total_seconds: 0.0,
        layers: Vec::with_capacity(b_n * l_n),
    };
    for b in 0..b_n {
        let plan = plan_for(&schedule.placement, b).ok_or_else(|| {
            Error::planner(NAME, format!("the schedule has no plan for batch {b}"))
        })?;
        plan.check_matches(trace)?;
        if plan.topology() != base.topology() {
            return Err(Error::Mismatch(format!(
                "the schedule runs on {}, the base plan on {}",
                plan.topology(),
                base.topology()
            )));
        }
        let (mut libra_s, mut static_s, mut exposed_s) = (0.0, 0.0, 0.0);
        let mut window = 0.0;
        for (l, (bl, nl)) in base.layers().iter().zip(plan.layers()).enumerate() {
            row.clear();
            row.extend(trace.counts().slice(ndarray::s![b, l, ..]).iter().copied());
            let total: f64 = row.iter().sum();
            if even {
                src.clear();
                for _ in 0..d {
                    src.extend(row.iter().map(|&n| n / d as f64));
                }
            } else {
                work.fill_source_counts(b, l, &mut src);
            }
            let mut rebalancer = Rebalancer::new(nl, e_n)?.with_start(start);
            let max_load = rebalancer.solve(&src, epsilon)?;
            let (mut compute, mut local_max, mut exposed_rebalance) = (0.0f64, 0.0f64, false);
            for (&all, &local) in rebalancer.gpu_loads().iter().zip(rebalancer.local_loads()) {
                let remote = (all - local).max(0.0);
                let local_t = local * t;
                local_max = local_max.max(local_t);
                let finish = if remote > 0.0 {
                    exposed_rebalance |= local_t < model.rebalance_seconds;
                    local_t.max(model.rebalance_seconds) + remote * t
                } else {
                    local_t
                };
                compute = compute.max(finish);
            }
            even_loads(bl, &row, &mut mult, &mut loads);
            let static_max = loads.iter().copied().fold(0.0, f64::max);
            let static_t = static_max * t;
            let copies = copies_of(bl, nl, &mut sent)?;
            let copy = model.copy_seconds(copies);
            let exposed = (copy - window).max(0.0);
            let hidden = copy <= window;
            if l == 0 {
                report.first_layer_seconds += exposed;
            } else if hidden {
                report.hidden += 1;
            } else {
                report.unhidden += 1;
            }
            report.rebalance_exposed += usize::from(exposed_rebalance);
            report.layers.push(LayerTime {
                batch: b,
                layer: l,
                local_seconds: local_max,
                compute_seconds: compute,
                static_seconds: static_t,
                copies,
                copy_seconds: copy,
                window_seconds: window,
                hidden,
                exposed_seconds: exposed,
                rebalance_exposed: exposed_rebalance,
                max_load,
                mean_load: total / d.max(1) as f64,
                static_max_load: static_max,
            });
            libra_s += compute + exposed;
            static_s += static_t;
            exposed_s += exposed;
            window = compute;
        }
        report.per_batch_seconds.push(libra_s);
        report.static_per_batch_seconds.push(static_s);
        report.per_batch_exposed_seconds.push(exposed_s);
        report.total_seconds += libra_s;
        report.static_total_seconds += static_s;
    }
    Ok(report)
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod examples {
    #[test]
    fn timemodel_validate_example() {
        use super::TimeModel;
        assert!(TimeModel::default().validate().is_ok());
        let bad = TimeModel {
            link_gb_per_s: 0.0,
            ..TimeModel::default()
        };
        assert!(bad.validate().is_err());
    }
}
