//! CRAFT's Algorithm 1 — the replication benefit table (CRAFT paper, §4.2
//! Step 1 and appendix A, Algorithm 1).
//!
//! For replica counts 0 and each count `r` of a set (the paper's geometric
//! `1, 2, 4, …, D`), every layer is given `r` replicas — the experts with
//! the highest load per copy first ([`replication_order`]) —, placed with
//! [`capacity_aware_placement`](crate::planners::capacity_aware_placement)
//! on a layer-local slot layout (Algorithm 3 for one layer), and every
//! batch is replayed: `T[r][ℓ]` is the mean balancedness gain over placement
//! only. With `refine`, each placement is improved by swaps and then by the
//! joint search over counts and places
//! ([`joint_search`](crate::planners::joint_search)), so
//! the counts the order gave are only a start. The placements are kept, so a budget change later only relabels
//! them ([`Craft::plan`](super::Craft::plan)).
//!
//! Complexity: O(K · L · (B · (E + D) + S log D + refinement)) for `K`
//! counts, `L` layers, `B` batches, `E` experts, `D` GPUs and `S = E + r`
//! slots; layers run in parallel with the `parallel` feature.

use std::sync::{Arc, OnceLock};

use ndarray::Array2;
use serde::Serialize;

use super::curve::budget_bound;
use super::interleave::interleaved_assignment;
use crate::data::cache::PerLayer;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::Result;
use crate::judge::bound::kept_curve;
use crate::judge::eval::FlatLayer;
use crate::planners::shared::joint::place;
use crate::planners::shared::layers::map_layers;
use crate::planners::shared::order::replication_order;

/// Algorithm 1's output: per-layer balancedness gains over placement only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenefitTable {
    /// The positive replica counts measured, ascending.
    pub counts: Vec<usize>,
    /// Placement-only balancedness of each layer (mean over batches).
    pub base: Vec<f64>,
    /// `gains[k][ℓ]`: balancedness gain of layer `ℓ` with `counts[k]`
    /// replicas over `base[ℓ]`.
    pub gains: Vec<Vec<f64>>,
    /// `imbalance[k][ℓ]`: imbalance ratio (max / mean) of layer `ℓ` with
    /// `[0] ++ counts` replicas — what the plans show beside balancedness.
    pub imbalance: Vec<Vec<f64>>,
    /// `compute_us[k][ℓ]`: the busiest GPU's predicted expert compute of
    /// layer `ℓ` with `[0] ++ counts` replicas, µs, mean over batches
    /// (the cost model's compute term under `even`); empty unless CRAFT
    /// plans for time ([`Objective::Time`](super::Objective::Time)).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compute_us: Vec<Vec<f64>>,
}

impl BenefitTable {
    pub(crate) fn layers(&self) -> usize {
        self.base.len()
    }

    /// Predicted compute time layer `l` saves with `counts[k]` replicas
    /// over none, µs (0 when not priced).
    pub(crate) fn time_saved_us(&self, k: usize, l: usize) -> f64 {
        let at = |c: usize| self.compute_us.get(c).and_then(|v| v.get(l)).copied();
        match (at(0), at(k + 1)) {
            (Some(none), Some(with)) => none - with,
            _ => 0.0,
        }
    }
}

/// Algorithm 1: the balancedness gain of every layer at every replica count
/// in `counts`, replaying every batch of `trace` on `topology`.
///
/// ```
/// use moeplan::{planners::estimate_benefit, LoadTrace, Topology};
/// use ndarray::Array3;
/// let mut c = Array3::from_elem((2, 2, 8), 10.0);
/// c[[0, 1, 3]] = 200.0; // layer 1 has a hot expert
/// c[[1, 1, 3]] = 200.0;
/// let t = estimate_benefit(&LoadTrace::new(c, vec![0, 1])?, Topology::new(1, 4)?, &[1, 2, 4], false)?;
/// assert!(t.gains[0][0] <= 0.0); // a uniform layer gains nothing
/// assert!(t.gains[2][1] > 0.3);   // the hot layer gains from replicas
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn estimate_benefit(
    trace: &LoadTrace,
    topology: Topology,
    counts: &[usize],
    refine: bool,
) -> Result<BenefitTable> {
    Ok(estimate(trace, topology, counts, refine, refine)?.0)
}

/// The placement of one layer at each replica count `[0] ++ counts`, as
/// Algorithm 1 built it: a budget change only relabels these GPUs.
pub(super) type LayerPlacements = Vec<Vec<Vec<u32>>>;

pub(super) fn estimate(
    trace: &LoadTrace,
    topology: Topology,
    counts: &[usize],
    refine: bool,
    joint: bool,
) -> Result<(BenefitTable, Vec<LayerPlacements>)> {
    let (mut table, placements) =
        measured(trace, topology.num_gpus(), counts, refine, joint)?.table();
    table.counts = counts.to_vec();
    Ok((table, placements))
}

/// One layer as Algorithm 1 measured it at one GPU count: the
/// placement-only balancedness, the gain at each count, the imbalance at
/// `[0] ++ counts`, the placements, and the layer's bound at `0..=D`
/// replicas ([`layer_bound_curve`](crate::judge::layer_bound_curve)).
#[derive(Debug)]
pub(super) struct LayerMeasured {
    base: f64,
    gains: Vec<f64>,
    imbalance: Vec<f64>,
    placed: LayerPlacements,
    pub(super) bound_curve: Arc<Vec<f64>>,
}

/// Every layer of a trace measured at one GPU count, with the best mean
/// bound per total replica count over them (the knapsack of
/// [`budget_bound`]), as [`Craft::prepare`](super::Craft::prepare) needs.
pub(super) struct Measured {
    pub(super) layers: Vec<Arc<LayerMeasured>>,
    pub(super) budget_bound: Arc<Vec<f64>>,
}

impl Measured {
    /// The benefit table (its `counts` left empty) and the placements, in
    /// layer order.
    pub(super) fn table(&self) -> (BenefitTable, Vec<LayerPlacements>) {
        let n = self.layers.len();
        let k_n = self.layers.first().map_or(0, |m| m.gains.len());
        let mut table = BenefitTable {
            counts: Vec::new(),
            base: Vec::with_capacity(n),
            gains: vec![Vec::with_capacity(n); k_n],
            imbalance: vec![Vec::with_capacity(n); k_n + 1],
            compute_us: Vec::new(),
        };
        let mut placements = Vec::with_capacity(n);
        for m in &self.layers {
            table.base.push(m.base);
            for (k, &g) in m.gains.iter().enumerate() {
                table.gains[k].push(g);
            }
            for (k, &x) in m.imbalance.iter().enumerate() {
                table.imbalance[k].push(x);
            }
            placements.push(m.placed.clone());
        }
        (table, placements)
    }
}

/// What a measurement depends on besides the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    gpus: usize,
    counts: Vec<usize>,
    refine: bool,
    joint: bool,
}

/// CRAFT's measurements kept with a trace ([`LoadTrace::memo`]): per GPU
/// count (and options), each layer once measured and the budget bound once
/// a prepare needed it. The page measures the clusters next to the one
/// shown ahead of time, a layer per step ([`warm`]), and a change back to
/// a cluster seen before measures nothing. At most [`KEPT`] GPU counts are
/// kept, the least recently used dropped.
#[derive(Default)]
pub(crate) struct Memo {
    summed: OnceLock<Array2<f64>>,
    layers: PerLayer<Key, LayerMeasured, KEPT>,
    /// The budget bound, kept as its key's only "layer".
    budgets: PerLayer<Key, Vec<f64>, KEPT>,
}

/// GPU counts whose measurements a trace keeps: the one shown, the one
/// before and its neighbours (halving and doubling the GPUs).
const KEPT: usize = 4;

/// The name the measurements are kept under in the trace's memo.
const MEMO: &str = "craft::benefit";

impl Memo {
    fn layer(&self, key: &Key, l: usize) -> Option<Arc<LayerMeasured>> {
        self.layers.get(key, l)
    }

    fn budget(&self, key: &Key) -> Option<Arc<Vec<f64>>> {
        self.budgets.get(key, 0)
    }
}

/// Layer `l` measured at `key` (from the memo, or measured and kept).
fn layer_measured(
    trace: &LoadTrace,
    memo: &Memo,
    key: &Key,
    l: usize,
) -> Result<Arc<LayerMeasured>> {
    if let Some(m) = memo.layer(key, l) {
        return Ok(m);
    }
    let summed = memo.summed.get_or_init(|| trace.summed());
    let (base, gains, imbalance, placed) = estimate_layer(
        trace,
        summed,
        l,
        key.gpus,
        &key.counts,
        key.refine,
        key.joint,
    )?;
    let m = Arc::new(LayerMeasured {
        base,
        gains,
        imbalance,
        placed,
        bound_curve: kept_curve(trace, l, key.gpus),
    });
    memo.layers.put(key, trace.num_layers(), l, Arc::clone(&m));
    Ok(m)
}

/// The trace's measurements and the key of these.
fn kept(
    trace: &LoadTrace,
    gpus: usize,
    counts: &[usize],
    refine: bool,
    joint: bool,
) -> (Arc<Memo>, Key) {
    let key = Key {
        gpus,
        counts: counts.to_vec(),
        refine,
        joint,
    };
    (trace.memo::<Memo>(MEMO), key)
}

/// Every layer measured at `gpus` (layers in parallel with the `parallel`
/// feature), from the trace's memo where it has them.
pub(super) fn measured(
    trace: &LoadTrace,
    gpus: usize,
    counts: &[usize],
    refine: bool,
    joint: bool,
) -> Result<Measured> {
    let (memo, key) = kept(trace, gpus, counts, refine, joint);
    let layers = map_layers(trace.num_layers(), |l| {
        layer_measured(trace, &memo, &key, l)
    })?;
    let budget = match memo.budget(&key) {
        Some(b) => b,
        None => {
            let curves: Vec<Vec<f64>> = layers.iter().map(|m| m.bound_curve.to_vec()).collect();
            let b = Arc::new(budget_bound(&curves, trace.num_layers() * gpus));
            memo.budgets.put(&key, 1, 0, Arc::clone(&b));
            b
        }
    };
    Ok(Measured {
        layers,
        budget_bound: budget,
    })
}

/// Measures layer `layer` ahead of time at `gpus` (nothing when kept):
/// what [`measured`] then reads, so a later
/// [`Craft::prepare`](super::Craft::prepare) at that GPU count measures no
/// layer. The budget bound over them (one knapsack over every layer, up to
/// 100 ms in the page at 128 GPUs) is left to it, so no step is long.
pub(super) fn warm(
    trace: &LoadTrace,
    gpus: usize,
    counts: &[usize],
    refine: bool,
    joint: bool,
    layer: usize,
) -> Result<()> {
    let (memo, key) = kept(trace, gpus, counts, refine, joint);
    layer_measured(trace, &memo, &key, layer)?;
    Ok(())
}

fn estimate_layer(
    trace: &LoadTrace,
    summed: &Array2<f64>,
    l: usize,
    d: usize,
    counts: &[usize],
    refine: bool,
    joint: bool,
) -> Result<(f64, Vec<f64>, Vec<f64>, LayerPlacements)> {
    let w = summed.row(l).to_vec();
    let e = w.len();
    let order = replication_order(&w, counts.last().copied().unwrap_or(0), d);
    // This layer's batches, contiguous: replayed once per replica count.
    let rows: Vec<f64> = trace
        .counts()
        .index_axis(ndarray::Axis(1), l)
        .iter()
        .copied()
        .collect();
    let mut replay = FlatLayer::default();
    let mut placed = Vec::with_capacity(counts.len() + 1);
    let mut imbalance = Vec::with_capacity(counts.len() + 1);
    let mut balancedness = |r: usize| -> Result<f64> {
        let copies = copies_after(&order, r, e);
        let slots = copies.iter().map(|&c| c as usize).sum::<usize>();
        let gpus = place(&w, &copies, &layer_capacity(slots, d), refine, joint)?;
        replay.prepare(&gpus, e);
        placed.push(gpus);
        let (bal, ir) = replay.mean_balance(&rows, e);
        imbalance.push(ir);
        Ok(bal)
    };
    let base = balancedness(0)?;
    let gains = counts
        .iter()
        .map(|&r| Ok(balancedness(r)? - base))
        .collect::<Result<Vec<f64>>>()?;
    Ok((base, gains, imbalance, placed))
}

/// Copies per expert after the first `r` entries of `order`.
fn copies_after(order: &[u32], r: usize, num_experts: usize) -> Vec<u32> {
    let mut copies = vec![1u32; num_experts];
    for &e in order.iter().take(r) {
        copies[e as usize] += 1;
    }
    copies
}

/// Slots per GPU for one layer on its own: as even as possible, the extra
/// slots spread across nodes (Algorithm 3 for a single layer).
fn layer_capacity(slots: usize, d: usize) -> Vec<usize> {
    interleaved_assignment(&[slots], d)
        .pop()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::model;
    use crate::synth::generator::{GenConfig, generate};

    fn olmoe() -> LoadTrace {
        generate(&GenConfig::new(model::preset("olmoe").unwrap(), 3)).unwrap()
    }

    /// What a trace keeps is what a trace made again measures afresh, at
    /// every GPU count in turn (more than are kept, so the oldest go and
    /// come back), and what was warmed is read back, not measured.
    #[test]
    fn kept_measurements_are_the_fresh_ones() {
        let kept = olmoe();
        let counts = |d: usize| -> Vec<usize> {
            std::iter::successors(Some(1), |x| Some(x * 2))
                .take_while(|&x| x <= d)
                .collect()
        };
        let memo = kept.memo::<Memo>(MEMO);
        let mut checked = 0;
        for d in [4, 8, 16, 8, 32, 2, 4] {
            let c = counts(d);
            let a = measured(&kept, d, &c, true, true).unwrap();
            let b = measured(&olmoe(), d, &c, true, true).unwrap();
            assert_eq!(a.table(), b.table(), "{d} GPUs");
            assert_eq!(a.budget_bound, b.budget_bound, "{d} GPUs");
            assert!(memo.layers.len() <= KEPT);
            checked += 1;
        }
        assert_eq!(checked, 7);
        // Warmed a layer at a time: every layer and the bound are kept, and
        // a prepare reads those very measurements.
        let d = 64;
        let c = counts(d);
        let key = Key {
            gpus: d,
            counts: c.clone(),
            refine: true,
            joint: true,
        };
        for step in 0..kept.num_layers() {
            warm(&kept, d, &c, true, true, step).unwrap();
            let have = (0..kept.num_layers())
                .filter(|&l| memo.layer(&key, l).is_some())
                .count();
            assert_eq!(have, step + 1, "step {step}");
        }
        assert!(memo.budget(&key).is_none(), "the bound is the prepare's");
        let read = measured(&kept, d, &c, true, true).unwrap();
        let bound = memo.budget(&key).expect("kept once measured");
        assert!(Arc::ptr_eq(&bound, &read.budget_bound));
        assert!(
            (0..kept.num_layers())
                .all(|l| Arc::ptr_eq(&read.layers[l], &memo.layer(&key, l).unwrap()))
        );
    }
}
