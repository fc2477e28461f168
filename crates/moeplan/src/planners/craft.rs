//! CRAFT — benefit-driven per-layer expert replication under a memory budget.
//!
//! From the CRAFT paper (`shared/seeds/000_…`, §4.2 and appendix A). Uniform
//! replication (EPLB: the same redundant slots in every layer) over-replicates:
//! balancedness saturates after a few replicas in most layers while memory
//! keeps growing. CRAFT spends a budget of `r = R · D` replicas (`R` per GPU,
//! summed over all layers) only where a layer gains:
//!
//! 1. [`estimate_benefit`] — Algorithm 1: for replica counts 0 and a
//!    geometric set over `[1, D]`, place each layer with that many replicas
//!    and replay every batch; `T[r][ℓ]` is the balancedness gain over
//!    placement only. O(K · L · (B · (E + D) + (E + D) · D)).
//! 2. [`Craft::auto_replicas_per_gpu`] — Step 2: the replication factor `R`
//!    at the knee of the predicted balancedness-vs-`R` curve (why not the
//!    literal "gain per replica": see there); [`Craft::curve`] exposes the
//!    whole curve (the paper's Figure 5).
//! 3. [`solve_allocation`] — Algorithm 2: one replica count per layer, total
//!    at most `r`, maximising the gain, by a multiple-choice-knapsack dynamic
//!    programme. O(L · r · K).
//! 4. [`interleaved_assignment`] — Algorithm 3: slots per GPU per layer so
//!    every GPU ends with the same total over all layers, at most one slot of
//!    difference inside a layer, ties spread across nodes. O(L · D log D).
//! 5. [`capacity_aware_placement`] — heaviest copy to the least-loaded GPU
//!    with a free slot, never two copies of one expert on one GPU.
//!    O(S · D) per layer for `S` slots.
//!
//! Steps 1–2 live in [`Craft::prepare`]; a budget change re-runs only steps
//! 3–5 in [`Craft::plan`] (the app's slider).
//!
//! **The objective.** Algorithm 2 in the paper scores a choice as
//! `r × T[r][ℓ]`. Mean balancedness over layers is `mean_ℓ(base_ℓ +
//! T[r_ℓ][ℓ])`, so what maximises it is the plain sum `Σ_ℓ T[r_ℓ][ℓ]`;
//! weighting by `r` favours spending many replicas on one layer over a larger
//! total gain elsewhere (a test shows a case). [`Objective::MeanBalancedness`]
//! is the default; [`Objective::PaperWeighted`] reproduces the paper.
//!
//! **Equal memory.** The allocation may spend less than `r` where more
//! replicas gain nothing, but always a total that keeps every GPU's slot
//! count equal over all layers (`E · L + Σ r_ℓ` divisible by `D`), so the KV
//! cache is the same size everywhere.

use std::collections::BinaryHeap;

use ndarray::Array2;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::eval::Replay;
use crate::plan::{LayerPlacement, Plan};
use crate::topology::Topology;
use crate::trace::LoadTrace;

const NAME: &str = "craft";

/// Which positive replica counts per layer the benefit table measures.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReplicaCounts {
    /// 1, 2, 4, …, D (and D itself): the paper's `K = log2 D + 1` values.
    #[default]
    Geometric,
    /// Every count 1..=D: finer, K = D times the estimation work.
    Every,
    /// An explicit list (each between 1 and D).
    List(Vec<usize>),
}

impl ReplicaCounts {
    /// The sorted, deduplicated counts for `d` GPUs.
    ///
    /// ```
    /// use moeplan::planners::craft::ReplicaCounts;
    /// assert_eq!(ReplicaCounts::Geometric.resolve(8)?, vec![1, 2, 4, 8]);
    /// assert_eq!(ReplicaCounts::Geometric.resolve(12)?, vec![1, 2, 4, 8, 12]);
    /// assert!(ReplicaCounts::List(vec![0]).resolve(8).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn resolve(&self, d: usize) -> Result<Vec<usize>> {
        let mut v: Vec<usize> = match self {
            ReplicaCounts::Geometric => {
                let mut v: Vec<usize> = std::iter::successors(Some(1usize), |x| x.checked_mul(2))
                    .take_while(|&x| x <= d)
                    .collect();
                v.push(d);
                v
            }
            ReplicaCounts::Every => (1..=d).collect(),
            ReplicaCounts::List(l) => {
                if let Some(bad) = l.iter().find(|&&x| x == 0 || x > d) {
                    return Err(Error::planner(
                        NAME,
                        format!("replica count {bad} is outside 1..={d}"),
                    ));
                }
                l.clone()
            }
        };
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            return Err(Error::planner(NAME, "no replica counts to estimate"));
        }
        Ok(v)
    }
}

/// What the allocation maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Objective {
    /// `Σ_ℓ T[r_ℓ][ℓ]`: the mean balancedness over layers.
    #[default]
    MeanBalancedness,
    /// `Σ_ℓ r_ℓ · T[r_ℓ][ℓ]`, as Algorithm 2 is printed in the paper.
    PaperWeighted,
}

/// Settings of CRAFT's preparation.
#[derive(Debug, Clone)]
pub struct CraftOptions {
    /// Replica counts measured per layer.
    pub replica_counts: ReplicaCounts,
    /// What the knapsack maximises.
    pub objective: Objective,
    /// Follow the paper's greedy placement with [`refine_placement`]
    /// (beyond the paper; off reproduces it exactly).
    pub refine: bool,
}

impl Default for CraftOptions {
    fn default() -> Self {
        CraftOptions {
            replica_counts: ReplicaCounts::default(),
            objective: Objective::default(),
            refine: true,
        }
    }
}

/// How many replicas to spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// `R` replicas per GPU summed over layers: `r = R · D` in all.
    ReplicasPerGpu(usize),
    /// The `R` at the knee of the predicted curve (Step 2).
    Auto,
}

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
}

impl BenefitTable {
    fn layers(&self) -> usize {
        self.base.len()
    }
}

/// Algorithm 1: the balancedness gain of every layer at every replica count
/// in `counts`, replaying every batch of `trace` on `topology`.
///
/// ```
/// use moeplan::{planners::craft::estimate_benefit, LoadTrace, Topology};
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
    Ok(estimate(trace, topology, counts, refine)?.0)
}

/// The placement of one layer at each replica count `[0] ++ counts`, as
/// Algorithm 1 built it: a budget change only relabels these GPUs.
type LayerPlacements = Vec<Vec<Vec<u32>>>;

fn estimate(
    trace: &LoadTrace,
    topology: Topology,
    counts: &[usize],
    refine: bool,
) -> Result<(BenefitTable, Vec<LayerPlacements>)> {
    let summed = trace.summed();
    let d = topology.num_gpus();
    let per_layer = map_layers(trace.num_layers(), |l| {
        estimate_layer(trace, &summed, l, d, counts, refine)
    })?;
    let mut table = BenefitTable {
        counts: counts.to_vec(),
        base: Vec::with_capacity(per_layer.len()),
        gains: vec![Vec::with_capacity(per_layer.len()); counts.len()],
        imbalance: vec![Vec::with_capacity(per_layer.len()); counts.len() + 1],
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

/// Runs `f` for every layer, on all cores with the `parallel` feature.
fn map_layers<T: Send>(
    layers: usize,
    f: impl Fn(usize) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        (0..layers).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "parallel"))]
    {
        (0..layers).map(f).collect()
    }
}

fn estimate_layer(
    trace: &LoadTrace,
    summed: &Array2<f64>,
    l: usize,
    d: usize,
    counts: &[usize],
    refine: bool,
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
        let gpus = place(&w, &copies, &layer_capacity(slots, d), refine)?;
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

/// The experts that receive replicas 1, 2, …, `r_max` in turn: the highest
/// load per copy first (first index on ties, as EPLB), never more copies
/// than GPUs. Shorter than `r_max` when every expert is on every GPU.
///
/// ```
/// use moeplan::planners::craft::replication_order;
/// assert_eq!(replication_order(&[9.0, 2.0, 5.0], 3, 4), vec![0, 2, 0]);
/// assert_eq!(replication_order(&[9.0, 2.0], 5, 2), vec![0, 1]); // capped at 2 copies each
/// ```
pub fn replication_order(loads: &[f64], r_max: usize, d: usize) -> Vec<u32> {
    let mut copies = vec![1usize; loads.len()];
    let mut order = Vec::with_capacity(r_max);
    for _ in 0..r_max {
        let mut best: Option<usize> = None;
        for (e, (&w, &c)) in loads.iter().zip(&copies).enumerate() {
            if c < d && best.is_none_or(|b| w / c as f64 > loads[b] / copies[b] as f64) {
                best = Some(e);
            }
        }
        let Some(b) = best else { break };
        copies[b] += 1;
        order.push(b as u32);
    }
    order
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

/// Algorithm 2's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocation {
    /// Replicas of each layer (0 or one of the table's counts).
    pub per_layer: Vec<usize>,
    /// Replicas in all.
    pub total: usize,
    /// The objective reached.
    pub value: f64,
    /// Predicted mean balancedness over layers: `mean(base + gain)`.
    pub predicted_balancedness: f64,
}

/// Algorithm 2: picks one replica count per layer (0 or one of
/// `table.counts`) with total at most `capacity`, maximising `objective`.
/// With `equal_memory = Some((base_slots, d))` the total is also chosen so
/// that `base_slots + total` is a multiple of `d` (when some total within the
/// capacity allows it). Ties prefer fewer replicas.
///
/// ```
/// use moeplan::planners::craft::{solve_allocation, BenefitTable, Objective};
/// let table = BenefitTable {
///     counts: vec![1, 2],
///     base: vec![0.5, 0.5],
///     gains: vec![vec![0.30, 0.30], vec![0.35, 0.30]],
///     imbalance: vec![],
/// };
/// let a = solve_allocation(&table, 2, Objective::MeanBalancedness, None);
/// assert_eq!(a.per_layer, vec![1, 1]); // total gain 0.6
/// let p = solve_allocation(&table, 2, Objective::PaperWeighted, None);
/// assert_eq!(p.per_layer, vec![2, 0]); // 2 × 0.35 = 0.7 > 0.6, yet the mean is lower
/// assert!(p.predicted_balancedness < a.predicted_balancedness);
/// ```
pub fn solve_allocation(
    table: &BenefitTable,
    capacity: usize,
    objective: Objective,
    equal_memory: Option<(usize, usize)>,
) -> Allocation {
    let choices: Vec<Vec<(usize, f64)>> = (0..table.layers())
        .map(|l| {
            std::iter::once((0, 0.0))
                .chain(table.counts.iter().enumerate().map(|(k, &r)| {
                    let t = table.gains[k][l];
                    let v = match objective {
                        Objective::MeanBalancedness => t,
                        Objective::PaperWeighted => r as f64 * t,
                    };
                    (r, v)
                }))
                .collect()
        })
        .collect();
    let dp = Knapsack::solve(&choices, capacity);
    let total = dp.best_total(|c| equal_memory.is_none_or(|(base, d)| (base + c) % d == 0));
    let per_layer = dp.backtrack(&choices, total);
    let gain: f64 = per_layer
        .iter()
        .enumerate()
        .map(|(l, &r)| gain_of(table, l, r))
        .sum();
    let l = table.layers().max(1) as f64;
    Allocation {
        value: dp.value(total),
        total: per_layer.iter().sum(),
        predicted_balancedness: (table.base.iter().sum::<f64>() + gain) / l,
        per_layer,
    }
}

fn gain_of(table: &BenefitTable, l: usize, r: usize) -> f64 {
    table
        .counts
        .iter()
        .position(|&x| x == r)
        .map_or(0.0, |k| table.gains[k][l])
}

/// Multiple-choice knapsack over layers: `best[l][c]` is the best value of
/// the first `l` layers using exactly `c` units.
struct Knapsack {
    capacity: usize,
    /// `(layers + 1) × (capacity + 1)`, row-major; NEG_INFINITY = unreachable.
    best: Vec<f64>,
    /// Index of the choice taken at `(l, c)` (row `l` for layers `0..l`).
    choice: Vec<u32>,
}

impl Knapsack {
    fn solve(choices: &[Vec<(usize, f64)>], capacity: usize) -> Knapsack {
        let w = capacity + 1;
        let layers = choices.len();
        let mut best = vec![f64::NEG_INFINITY; (layers + 1) * w];
        let mut choice = vec![0u32; (layers + 1) * w];
        best[0] = 0.0;
        for (l, opts) in choices.iter().enumerate() {
            let (prev, next) = best.split_at_mut((l + 1) * w);
            let prev = &prev[l * w..];
            let next = &mut next[..w];
            let ch = &mut choice[(l + 1) * w..(l + 2) * w];
            for (k, &(r, v)) in opts.iter().enumerate() {
                for c in r..w {
                    let p = prev[c - r];
                    // strictly better only: among equal values the earlier
                    // (smaller) choice stays
                    if p > f64::NEG_INFINITY && p + v > next[c] {
                        next[c] = p + v;
                        ch[c] = k as u32;
                    }
                }
            }
        }
        Knapsack {
            capacity,
            best,
            choice,
        }
    }

    fn last_row(&self) -> &[f64] {
        let w = self.capacity + 1;
        &self.best[self.best.len() - w..]
    }

    fn value(&self, total: usize) -> f64 {
        self.last_row()[total]
    }

    /// The reachable total with the best value among those `allowed`
    /// (falling back to every total if none is), fewest units on ties.
    fn best_total(&self, allowed: impl Fn(usize) -> bool) -> usize {
        let row = self.last_row();
        let pick = |filter: &dyn Fn(usize) -> bool| {
            let mut best: Option<usize> = None;
            for (c, &v) in row.iter().enumerate() {
                if v > f64::NEG_INFINITY && filter(c) && best.is_none_or(|b| v > row[b] + 1e-12) {
                    best = Some(c);
                }
            }
            best
        };
        pick(&allowed).or_else(|| pick(&|_| true)).unwrap_or(0)
    }

    fn backtrack(&self, choices: &[Vec<(usize, f64)>], total: usize) -> Vec<usize> {
        let w = self.capacity + 1;
        let mut c = total;
        let mut out = vec![0; choices.len()];
        for l in (0..choices.len()).rev() {
            let k = self.choice[(l + 1) * w + c] as usize;
            let r = choices[l][k].0;
            out[l] = r;
            c -= r;
        }
        out
    }
}

/// Algorithm 3: slots per GPU for every layer (`A[ℓ][g]`), given each layer's
/// slot count (experts + replicas). Each layer's slots are spread evenly; the
/// remainder goes to the GPUs with the fewest slots so far over all layers,
/// ties broken by picking evenly spaced GPUs (so across nodes, since GPU ids
/// are node-major). Every GPU ends within one slot of every other, and equal
/// when the total divides.
///
/// ```
/// use moeplan::planners::craft::interleaved_assignment;
/// let a = interleaved_assignment(&[6, 6], 4);
/// assert_eq!(a, vec![vec![2, 1, 1, 2], vec![1, 2, 2, 1]]);
/// ```
pub fn interleaved_assignment(slots_per_layer: &[usize], d: usize) -> Vec<Vec<usize>> {
    let d = d.max(1);
    let mut totals: Vec<usize> = vec![0; d];
    let mut out: Vec<Vec<usize>> = slots_per_layer
        .iter()
        .map(|&s| {
            totals.iter_mut().for_each(|t| *t += s / d);
            vec![s / d; d]
        })
        .collect();
    let mut sorted = Vec::with_capacity(d);
    for (l, &s) in slots_per_layer.iter().enumerate() {
        let rem = s % d;
        if rem == 0 {
            continue;
        }
        sorted.clear();
        sorted.extend_from_slice(&totals);
        sorted.sort_unstable();
        let cutoff = sorted[rem - 1];
        let below: Vec<usize> = (0..d).filter(|&g| totals[g] < cutoff).collect();
        let tied: Vec<usize> = (0..d).filter(|&g| totals[g] == cutoff).collect();
        let chosen = below
            .into_iter()
            .chain(interleave_select(&tied, rem - below_count(&totals, cutoff)));
        for g in chosen.collect::<Vec<_>>() {
            out[l][g] += 1;
            totals[g] += 1;
        }
    }
    out
}

fn below_count(totals: &[usize], cutoff: usize) -> usize {
    totals.iter().filter(|&&t| t < cutoff).count()
}

/// `q` entries of `k` as evenly spaced as possible, both ends included when
/// `q > 1`.
fn interleave_select(k: &[usize], q: usize) -> Vec<usize> {
    let n = k.len();
    match q {
        0 => Vec::new(),
        _ if q >= n => k.to_vec(),
        1 => vec![k[0]],
        _ => (0..q)
            .map(|i| k[(2 * i * (n - 1) + (q - 1)) / (2 * (q - 1))])
            .collect(),
    }
}

/// Step 5: places `copies[e]` copies of every expert onto GPUs with
/// `capacity[g]` slots each: copies in descending load-per-copy order, each
/// to the least-loaded GPU that has a free slot and does not hold that expert
/// yet (more free slots, then lower id, on ties). Returns the experts of
/// every GPU.
///
/// ```
/// use moeplan::planners::craft::capacity_aware_placement;
/// let gpus = capacity_aware_placement(&[8.0, 3.0, 2.0, 1.0], &[2, 1, 1, 1], &[3, 2])?;
/// assert_eq!(gpus, vec![vec![0, 1, 3], vec![0, 2]]);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn capacity_aware_placement(
    loads: &[f64],
    copies: &[u32],
    capacity: &[usize],
) -> Result<Vec<Vec<u32>>> {
    let d = capacity.len();
    let slots: usize = copies.iter().map(|&c| c as usize).sum();
    if loads.len() != copies.len() {
        return Err(Error::planner(NAME, "one copy count per expert is needed"));
    }
    if slots != capacity.iter().sum::<usize>() {
        return Err(Error::planner(
            NAME,
            format!(
                "{slots} copies for {} slots",
                capacity.iter().sum::<usize>()
            ),
        ));
    }
    if let Some(e) = copies.iter().position(|&c| c == 0 || c as usize > d) {
        return Err(Error::planner(
            NAME,
            format!("expert {e} has {} copies for {d} GPUs", copies[e]),
        ));
    }
    let mut items: Vec<(f64, u32)> = Vec::with_capacity(slots);
    for (e, (&w, &c)) in loads.iter().zip(copies).enumerate() {
        let share = w / c as f64;
        items.extend(std::iter::repeat_n((share, e as u32), c as usize));
    }
    // Heaviest first; copies of one expert stay adjacent (ties by id).
    items.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut gpus: Vec<Vec<u32>> = capacity.iter().map(|&c| Vec::with_capacity(c)).collect();
    let mut load = vec![0.0f64; d];
    // Min-heap of GPUs with a free slot, by (load, more free slots, id).
    let mut open: BinaryHeap<Open> = (0..d)
        .filter(|&g| capacity[g] > 0)
        .map(|g| Open {
            load: 0.0,
            free: capacity[g],
            gpu: g,
        })
        .collect();
    let mut skipped: Vec<Open> = Vec::new();
    let mut holding: Vec<usize> = Vec::new(); // GPUs holding the current expert
    let mut current = u32::MAX;
    for &(share, e) in &items {
        if e != current {
            current = e;
            holding.clear();
        }
        // Pop past the (few) GPUs that already hold this expert.
        let mut chosen = None;
        while let Some(top) = open.pop() {
            if holding.contains(&top.gpu) {
                skipped.push(top);
            } else {
                chosen = Some(top);
                break;
            }
        }
        open.extend(skipped.drain(..));
        let g = match chosen {
            Some(mut top) => {
                let g = top.gpu;
                top.load += share;
                top.free -= 1;
                if top.free > 0 {
                    open.push(top);
                }
                g
            }
            None => {
                let g = make_room(&mut gpus, &mut load, loads, copies, capacity, e, &holding)?;
                // The moved expert changed two GPUs' loads: rebuild the heap.
                gpus[g].push(e);
                load[g] += share;
                holding.push(g);
                open = (0..d)
                    .filter(|&x| gpus[x].len() < capacity[x])
                    .map(|x| Open {
                        load: load[x],
                        free: capacity[x] - gpus[x].len(),
                        gpu: x,
                    })
                    .collect();
                continue;
            }
        };
        gpus[g].push(e);
        load[g] += share;
        holding.push(g);
    }
    Ok(gpus)
}

/// A GPU with a free slot, ordered so the max-heap pops the least-loaded
/// (then the one with more free slots, then the lowest id) first.
#[derive(PartialEq)]
struct Open {
    load: f64,
    free: usize,
    gpu: usize,
}

impl Eq for Open {}
impl PartialOrd for Open {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Open {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .load
            .total_cmp(&self.load)
            .then(self.free.cmp(&other.free))
            .then(other.gpu.cmp(&self.gpu))
    }
}

/// Beyond the paper: local search on a placement. While some swap of a copy
/// on the busiest GPU with a lighter copy elsewhere lowers the busiest GPU's
/// load (without putting two copies of an expert on one GPU), take the best
/// such swap. Slot counts never change, so memory stays as assigned. At most
/// `4 · D` swaps; O(swaps · S) for `S` slots.
///
/// ```
/// use moeplan::planners::craft::refine_placement;
/// // greedy-looking start: GPU 0 has 5 + 4, GPU 1 has 3 + 3
/// let mut gpus = vec![vec![0, 1], vec![2, 3]];
/// refine_placement(&[5.0, 4.0, 3.0, 3.0], &[1, 1, 1, 1], &mut gpus);
/// assert_eq!(gpus, vec![vec![2, 1], vec![0, 3]]); // 7 / 8 instead of 9 / 6
/// ```
pub fn refine_placement(loads: &[f64], copies: &[u32], gpus: &mut [Vec<u32>]) {
    let d = gpus.len();
    let share = |e: u32| loads[e as usize] / copies[e as usize] as f64;
    let mut load: Vec<f64> = gpus
        .iter()
        .map(|g| g.iter().map(|&e| share(e)).sum())
        .collect();
    let mut by_load: Vec<usize> = (0..d).collect();
    // Swaps that gain less than 0.1 % of the mean GPU load change
    // balancedness by less than 0.001: not worth their time.
    let min_gain = 1e-3 * load.iter().sum::<f64>() / d.max(1) as f64;
    by_load.sort_by(|&x, &y| load[x].total_cmp(&load[y]));
    for _ in 0..4 * d {
        let Some(&a) = by_load.last() else { return };
        let la = load[a];
        // The lightest partner that admits an improving swap, and its best
        // swap: the pair whose new maximum is lowest.
        let mut found = None;
        for &b in &by_load[..d - 1] {
            let lb = load[b];
            let mut best: Option<(f64, usize, usize)> = None;
            for (i, &x) in gpus[a].iter().enumerate() {
                let sx = share(x);
                for (j, &y) in gpus[b].iter().enumerate() {
                    let sy = share(y);
                    let pair_max = (la - sx + sy).max(lb - sy + sx);
                    // arithmetic first; the duplicate checks only for a winner
                    if sy < sx
                        && pair_max < la - min_gain
                        && best.is_none_or(|(m, ..)| pair_max < m)
                        && !gpus[b].contains(&x)
                        && !gpus[a].contains(&y)
                    {
                        best = Some((pair_max, i, j));
                    }
                }
            }
            if let Some((_, i, j)) = best {
                found = Some((b, i, j));
                break;
            }
        }
        let Some((b, i, j)) = found else { return };
        let (x, y) = (gpus[a][i], gpus[b][j]);
        gpus[a][i] = y;
        gpus[b][j] = x;
        load[a] += share(y) - share(x);
        load[b] += share(x) - share(y);
        // keep `by_load` sorted: only a and b moved
        by_load.retain(|&g| g != a && g != b);
        for g in [a, b] {
            let pos = by_load.partition_point(|&h| load[h] < load[g]);
            by_load.insert(pos, g);
        }
    }
}

/// Moves a placement onto GPUs with the given slot counts: the `i`-th GPU
/// with `n` slots in `placed` becomes the `i`-th GPU with `n` slots in
/// `capacity`.
fn relabel(placed: &[Vec<u32>], capacity: &[usize]) -> Result<Vec<Vec<u32>>> {
    let mut out = vec![Vec::new(); capacity.len()];
    let mut targets: Vec<usize> = (0..capacity.len()).collect();
    targets.sort_by_key(|&g| capacity[g]);
    let mut sources: Vec<usize> = (0..placed.len()).collect();
    sources.sort_by_key(|&g| placed[g].len());
    if placed.len() != capacity.len()
        || sources
            .iter()
            .zip(&targets)
            .any(|(&s, &t)| placed[s].len() != capacity[t])
    {
        return Err(Error::planner(
            NAME,
            "slot counts of a stored placement do not match",
        ));
    }
    for (&s, &t) in sources.iter().zip(&targets) {
        out[t] = placed[s].clone();
    }
    Ok(out)
}

/// Step 5, optionally refined.
fn place(w: &[f64], copies: &[u32], capacity: &[usize], refine: bool) -> Result<Vec<Vec<u32>>> {
    let mut gpus = capacity_aware_placement(w, copies, capacity)?;
    if refine {
        refine_placement(w, copies, &mut gpus);
    }
    Ok(gpus)
}

/// Every GPU with a free slot already holds expert `e`: move some expert `x`
/// from a full GPU `h` (that lacks `e`) to a free GPU `f` (that lacks `x`),
/// and return `h` for `e`. Only reachable with very few slots per GPU.
fn make_room(
    gpus: &mut [Vec<u32>],
    load: &mut [f64],
    loads: &[f64],
    copies: &[u32],
    capacity: &[usize],
    e: u32,
    holding: &[usize],
) -> Result<usize> {
    let d = gpus.len();
    for f in (0..d).filter(|&f| gpus[f].len() < capacity[f]) {
        for h in (0..d).filter(|h| !holding.contains(h) && !gpus[*h].contains(&e)) {
            if let Some(pos) = gpus[h].iter().position(|x| !gpus[f].contains(x)) {
                let x = gpus[h].remove(pos);
                let share = loads[x as usize] / copies[x as usize] as f64;
                load[h] -= share;
                load[f] += share;
                gpus[f].push(x);
                return Ok(h);
            }
        }
    }
    Err(Error::planner(
        NAME,
        format!("no GPU can take another copy of expert {e}"),
    ))
}

/// CRAFT with its benefit table measured: ready to plan any budget cheaply.
#[derive(Debug, Clone)]
pub struct Craft {
    topology: Topology,
    layer_ids: Vec<u32>,
    num_experts: usize,
    table: BenefitTable,
    /// `placements[ℓ][k]`: layer ℓ placed with `[0] ++ counts` replicas.
    placements: Vec<LayerPlacements>,
    objective: Objective,
    /// Best mean bound over layers for a total of exactly `c` replicas,
    /// `c = 0..=L·D`, made non-decreasing.
    budget_bound: Vec<f64>,
    /// `bound_curves[ℓ][r]`: layer ℓ's bound with `r = 0..=D` replicas.
    bound_curves: Vec<Vec<f64>>,
}

/// One point of the replication-factor curve (the paper's Figure 5).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CurvePoint {
    /// Replicas per GPU, summed over layers (`R`).
    pub replicas_per_gpu: usize,
    /// Replicas the allocation spends (at most `R · D`).
    pub replicas: usize,
    /// Mean balancedness predicted from the benefit table.
    pub predicted_balancedness: f64,
    /// Upper bound on any plan's balancedness with `R · D` replicas in all
    /// (on the planning batches).
    pub bound: f64,
}

/// A CRAFT plan with what the planner knows about it.
#[derive(Debug, Clone)]
pub struct CraftPlan {
    /// The placement.
    pub plan: Plan,
    /// The replication factor used.
    pub replicas_per_gpu: usize,
    /// The allocation (Algorithm 2).
    pub allocation: Allocation,
    /// Upper bound on any plan's balancedness with this budget (planning
    /// batches).
    pub bound: f64,
}

impl Craft {
    /// Steps 1–2: measures the benefit table and the bounds. Re-run this
    /// when the trace or the cluster changes.
    ///
    /// ```
    /// use moeplan::planners::craft::{Budget, Craft, CraftOptions};
    /// use moeplan::{generator, model, Topology};
    /// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let craft = Craft::prepare(&trace, Topology::new(1, 8)?, &CraftOptions::default())?;
    /// let p = craft.plan(Budget::ReplicasPerGpu(2))?;
    /// assert!(p.plan.summary().replicas <= 16);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn prepare(trace: &LoadTrace, topology: Topology, options: &CraftOptions) -> Result<Craft> {
        let d = topology.num_gpus();
        let counts = options.replica_counts.resolve(d)?;
        let (table, placements) = estimate(trace, topology, &counts, options.refine)?;
        let curves = map_layers(trace.num_layers(), |l| {
            Ok(crate::bound::layer_bound_curve(trace, l, d, d))
        })?;
        Ok(Craft {
            topology,
            layer_ids: trace.layer_ids().to_vec(),
            num_experts: trace.num_experts(),
            table,
            placements,
            objective: options.objective,
            budget_bound: budget_bound(&curves, trace.num_layers() * d),
            bound_curves: curves,
        })
    }

    /// The benefit table (Algorithm 1).
    pub fn table(&self) -> &BenefitTable {
        &self.table
    }

    /// Balancedness of layer `l` with `r` replicas, as Algorithm 1 measured
    /// it on the planning batches (`r` = 0 or one of the table's counts; the
    /// plan for any budget uses exactly these placements, so in-sample this
    /// is the plan's balancedness, no replay needed).
    pub fn layer_balancedness(&self, l: usize, r: usize) -> Result<f64> {
        let k = self.column(l, r)?;
        let base = self.table.base.get(l).copied();
        let gain = match k {
            0 => Some(0.0),
            k => self.table.gains.get(k - 1).and_then(|g| g.get(l)).copied(),
        };
        base.zip(gain)
            .map(|(b, g)| b + g)
            .ok_or_else(|| self.unmeasured(l, r))
    }

    /// Imbalance ratio of layer `l` with `r` replicas (planning batches).
    pub fn layer_imbalance(&self, l: usize, r: usize) -> Result<f64> {
        let k = self.column(l, r)?;
        self.table
            .imbalance
            .get(k)
            .and_then(|v| v.get(l))
            .copied()
            .ok_or_else(|| self.unmeasured(l, r))
    }

    /// Bound of layer `l` with `r` replicas (planning batches).
    pub fn layer_bound(&self, l: usize, r: usize) -> Result<f64> {
        self.bound_curves
            .get(l)
            .and_then(|c| c.get(r))
            .copied()
            .ok_or_else(|| self.unmeasured(l, r))
    }

    /// Where Algorithm 1's measurements of `r` replicas live: column 0 is
    /// no replicas, column `1 + k` the table's `k`-th replica count. A count
    /// the table never measured is an error, not column 0: reading another
    /// count's figures would be a wrong answer that looks right.
    fn column(&self, l: usize, r: usize) -> Result<usize> {
        if r == 0 {
            return Ok(0);
        }
        self.table
            .counts
            .iter()
            .position(|&c| c == r)
            .map(|k| k + 1)
            .ok_or_else(|| self.unmeasured(l, r))
    }

    fn unmeasured(&self, l: usize, r: usize) -> Error {
        Error::planner(
            NAME,
            format!(
                "layer {l}: no measurement with {r} replicas (measured: 0 and {:?})",
                self.table.counts
            ),
        )
    }

    /// Replication factors the curve covers: 1, 2, 4, … up to the first
    /// power of two at or above the layer count (EPLB's one redundant
    /// expert per GPU per layer is `R = L`).
    pub fn curve_factors(&self) -> Vec<usize> {
        let top = self.layer_ids.len().next_power_of_two();
        std::iter::successors(Some(1usize), |x| Some(x * 2))
            .take_while(|&x| x <= top)
            .collect()
    }

    /// Predicted balancedness and bound at each replication factor.
    pub fn curve(&self) -> Vec<CurvePoint> {
        self.curve_factors()
            .into_iter()
            .map(|r| {
                let a = self.allocate(r);
                CurvePoint {
                    replicas_per_gpu: r,
                    replicas: a.total,
                    predicted_balancedness: a.predicted_balancedness,
                    bound: self.bound_for(r * self.topology.num_gpus()),
                }
            })
            .collect()
    }

    /// Step 2: the replication factor where more replicas stop paying.
    ///
    /// The paper picks "the R with the highest per-replica balancedness
    /// gain". Read literally — gain over placement only divided by `R` — that
    /// is the smallest `R` whenever the curve is concave, which it is on the
    /// real DeepSeek-V3 traces (it picks `R = 1` there), so it never chooses
    /// anything. Read on the paper's own axis (Figures 5 and 9 plot replicas
    /// per GPU on a log scale), it is the knee of the curve: the `R` that
    /// gains most per doubling of memory relative to the whole curve. That is
    /// what this computes, with the Kneedle rule (Satopää et al., 2011):
    /// normalise `log2 R` and the predicted balancedness to `[0, 1]` and take
    /// the point farthest above the diagonal. Returns 0 when no budget gains
    /// at least 0.005 balancedness (replicas would be wasted memory).
    pub fn auto_replicas_per_gpu(&self) -> usize {
        let curve = self.curve();
        let base = self.table.base.iter().sum::<f64>() / self.table.layers().max(1) as f64;
        knee(&curve, base)
    }

    fn allocate(&self, replicas_per_gpu: usize) -> Allocation {
        let d = self.topology.num_gpus();
        let base_slots = self.num_experts * self.layer_ids.len();
        solve_allocation(
            &self.table,
            replicas_per_gpu.saturating_mul(d),
            self.objective,
            Some((base_slots, d)),
        )
    }

    fn bound_for(&self, replicas: usize) -> f64 {
        let i = replicas.min(self.budget_bound.len().saturating_sub(1));
        self.budget_bound.get(i).copied().unwrap_or(1.0)
    }

    /// Steps 3–5 for a budget: allocation, interleaved assignment, placement.
    /// Each layer's placement at its replica count was already built by
    /// Algorithm 1 on the same loads; Algorithm 3 only decides which GPUs
    /// carry the layer's extra slots, so the stored placement is relabelled
    /// onto those GPUs (GPUs with equal slot counts are interchangeable for
    /// balance). That keeps a budget change to the knapsack and a copy.
    pub fn plan(&self, budget: Budget) -> Result<CraftPlan> {
        let r = match budget {
            Budget::ReplicasPerGpu(r) => r,
            Budget::Auto => self.auto_replicas_per_gpu(),
        };
        if r > 1 << 20 {
            return Err(Error::planner(
                NAME,
                format!("{r} replicas per GPU is out of range"),
            ));
        }
        let allocation = self.allocate(r);
        let e = self.num_experts;
        let slots: Vec<usize> = allocation.per_layer.iter().map(|&x| e + x).collect();
        let capacity = interleaved_assignment(&slots, self.topology.num_gpus());
        let layers = (0..self.layer_ids.len())
            .map(|l| {
                let k = self.column(l, allocation.per_layer[l])?;
                let placed = self
                    .placements
                    .get(l)
                    .and_then(|p| p.get(k))
                    .ok_or_else(|| self.unmeasured(l, allocation.per_layer[l]))?;
                Ok(LayerPlacement {
                    layer: self.layer_ids[l],
                    gpus: relabel(placed, &capacity[l])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let plan = Plan::new(self.topology, e, layers, NAME)?;
        Ok(CraftPlan {
            bound: self.bound_for(r * self.topology.num_gpus()),
            plan,
            replicas_per_gpu: r,
            allocation,
        })
    }
}

/// The Kneedle knee of a curve over `log2 R` (see
/// [`Craft::auto_replicas_per_gpu`]).
fn knee(curve: &[CurvePoint], base: f64) -> usize {
    let (Some(first), Some(last)) = (curve.first(), curve.last()) else {
        return 0;
    };
    let y_max = curve
        .iter()
        .map(|p| p.predicted_balancedness)
        .fold(f64::MIN, f64::max);
    let y_min = first.predicted_balancedness.min(base);
    if y_max - base < 0.005 {
        return 0;
    }
    let x = |p: &CurvePoint| (p.replicas_per_gpu as f64).log2();
    let x_span = (x(last) - x(first)).max(f64::MIN_POSITIVE);
    let y_span = (y_max - y_min).max(f64::MIN_POSITIVE);
    curve
        .iter()
        .map(|p| {
            let xn = (x(p) - x(first)) / x_span;
            let yn = (p.predicted_balancedness - y_min) / y_span;
            (p.replicas_per_gpu, yn - xn)
        })
        .fold(
            (first.replicas_per_gpu, f64::NEG_INFINITY),
            |best, (r, d)| {
                if d > best.1 + 1e-12 { (r, d) } else { best }
            },
        )
        .0
}

/// Best mean bound for every total replica count, through the same
/// knapsack with every per-layer count `0..=D` allowed.
fn budget_bound(curves: &[Vec<f64>], max_total: usize) -> Vec<f64> {
    let choices: Vec<Vec<(usize, f64)>> = curves
        .iter()
        .map(|c| c.iter().enumerate().map(|(r, &v)| (r, v)).collect())
        .collect();
    let dp = Knapsack::solve(&choices, max_total);
    let l = curves.len().max(1) as f64;
    let mut best = f64::NEG_INFINITY;
    dp.last_row()
        .iter()
        .map(|&v| {
            best = best.max(v);
            best / l
        })
        .collect()
}

/// CRAFT in one call: prepare, then plan `budget`.
///
/// ```
/// use moeplan::planners::craft::{craft, Budget};
/// use moeplan::{evaluate, generator, model, planners, Topology};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 8))?;
/// let topo = Topology::new(1, 8)?;
/// let plan = craft(&trace, topo, Budget::ReplicasPerGpu(4))?;
/// let base = planners::base(&trace, topo, 1)?;
/// assert!(evaluate(&trace, &plan)?.balancedness > evaluate(&trace, &base)?.balancedness);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn craft(trace: &LoadTrace, topology: Topology, budget: Budget) -> Result<Plan> {
    Ok(Craft::prepare(trace, topology, &CraftOptions::default())?
        .plan(budget)?
        .plan)
}
