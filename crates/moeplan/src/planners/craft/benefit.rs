//! CRAFT's Algorithm 1 — the replication benefit table (CRAFT paper, §4.2
//! Step 1 and appendix A, Algorithm 1).
//!
//! For replica counts 0 and each count `r` of a set (the paper's geometric
//! `1, 2, 4, …, D`), every layer is given `r` replicas — the experts with
//! the highest load per copy first ([`replication_order`]) —, placed with
//! [`capacity_aware_placement`](crate::planners::shared::placement::capacity_aware_placement)
//! on a layer-local slot layout (Algorithm 3 for one layer), and every
//! batch is replayed: `T[r][ℓ]` is the mean balancedness gain over placement
//! only. With `refine`, each placement is improved by swaps and then by the
//! joint search over counts and places
//! ([`joint_search`](crate::planners::shared::joint::joint_search)), so
//! the counts the order gave are only a start. The placements are kept, so a budget change later only relabels
//! them ([`Craft::plan`](super::Craft::plan)).
//!
//! Complexity: O(K · L · (B · (E + D) + S log D + refinement)) for `K`
//! counts, `L` layers, `B` batches, `E` experts, `D` GPUs and `S = E + r`
//! slots; layers run in parallel with the `parallel` feature.

use ndarray::Array2;
use serde::Serialize;

use super::interleave::interleaved_assignment;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::Result;
use crate::judge::eval::Replay;
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
/// use moeplan::{planners::craft::benefit::estimate_benefit, LoadTrace, Topology};
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
    let summed = trace.summed();
    let d = topology.num_gpus();
    let per_layer = map_layers(trace.num_layers(), |l| {
        estimate_layer(trace, &summed, l, d, counts, refine, joint)
    })?;
    let mut table = BenefitTable {
        counts: counts.to_vec(),
        base: Vec::with_capacity(per_layer.len()),
        gains: vec![Vec::with_capacity(per_layer.len()); counts.len()],
        imbalance: vec![Vec::with_capacity(per_layer.len()); counts.len() + 1],
        compute_us: Vec::new(),
    };
    let mut placements = Vec::with_capacity(per_layer.len());
    for (base, gains, imbalance, placed) in per_layer {
        table.base.push(base);
        for (k, g) in gains.into_iter().enumerate() {
            table.gains[k].push(g);
        }
        for (k, x) in imbalance.into_iter().enumerate() {
            table.imbalance[k].push(x);
        }
        placements.push(placed);
    }
    Ok((table, placements))
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
    let mut replay = Replay::default();
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
