//! CRAFT — benefit-driven per-layer expert replication under a memory budget.
//!
//! From the CRAFT paper (§4.2 and appendix A). Uniform
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
//!    O(S log D) per layer for `S` slots. Beyond the paper (`refine`, on by
//!    default): swaps, then the joint search over counts and places
//!    (`shared::joint::joint_search`)
//!    for every (layer, replica count) of Algorithm 1; `repair` searches the
//!    final plan again ([`crate::planners::repair`]).
//!
//! Steps 1–2 live in [`Craft::prepare`]; a budget change re-runs only steps
//! 3–5 in [`Craft::plan`] (the app's slider).
//!
//! **Files.** This one: the options, [`Craft`] (prepare / plan) and the
//! registry entry `CraftPlanner` (budget [`REPLICAS_PER_GPU`], `auto` = the
//! knee). `benefit`: Algorithm 1. `allocation`: Algorithm 2, on the
//! shared `knapsack`. `interleave`:
//! Algorithm 3. `curve.rs`: Step 2's knee and the bound per budget. Step 5
//! is the shared [`placement`](crate::planners::shared::placement).
//!
//! **The objective.** Algorithm 2 in the paper scores a choice as
//! `r × T[r][ℓ]`. Mean balancedness over layers is `mean_ℓ(base_ℓ +
//! T[r_ℓ][ℓ])`, so what maximises it is the plain sum `Σ_ℓ T[r_ℓ][ℓ]`;
//! weighting by `r` favours spending many replicas on one layer over a larger
//! total gain elsewhere (a test shows a case). [`Objective::MeanBalancedness`]
//! is the default; [`Objective::PaperWeighted`] reproduces the paper.
//!
//! **Planning for time** ([`Objective::Time`], beyond the paper). A
//! balancedness gain is not time: every copy that receives rows pays its
//! weight read, so a replica that evens tokens can slow the GPU it lands
//! on. With a [`Pricing`] (hardware and model), Algorithm 1 also prices
//! each (layer, replica count) placement on every planning batch — the
//! busiest GPU's expert compute, the cost model's term under `even`
//! ([`LayerCompute`]) — and the knapsack maximises the compute time saved.
//! Memory is charged through the budget: `auto` is then the `R` whose plan
//! the cost model predicts the most tokens per second for on the mean
//! planning batch (its KV cache, dispatch, combine and dense part
//! included), not the knee, and `repair` keeps a layer's search only
//! where it lowers the predicted compute. Dispatch and combine do not enter
//! the knapsack: the placements are Algorithm 1's either way.
//!
//! **Equal memory.** The allocation may spend less than `r` where more
//! replicas gain nothing, but always a total that keeps every GPU's slot
//! count equal over all layers (`E · L + Σ r_ℓ` divisible by `D`), so the KV
//! cache is the same size everywhere.

pub(crate) mod allocation;
pub(crate) mod benefit;
mod curve;
pub(crate) mod interleave;

use std::borrow::Cow;

use serde::Serialize;

use self::allocation::Allocation;
use self::benefit::LayerPlacements;
use self::curve::knee;
use crate::data::Workload;
use crate::data::plan::{LayerPlacement, Plan};
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};
use crate::judge::cost::{LayerCompute, Pricing};
use crate::judge::{CostModel, Rule, Served, price};
use crate::planners::registry::{
    Needs, OptionKind, OptionSpec, Planned, Planner, PlannerId, PlannerSpec, Predicted, Prepared,
    Settings, Unit, Value,
};
use crate::planners::shared::joint::{REPAIR, repair, repair_by};
use crate::planners::shared::layers::map_layers;
use crate::planners::shared::placement::relabel;

pub(crate) use self::allocation::solve_allocation;
pub use self::benefit::{BenefitTable, estimate_benefit};
pub(crate) use self::interleave::interleaved_assignment;
pub(crate) use crate::planners::registry::CurvePoint;
#[cfg(test)]
pub(crate) use crate::planners::shared::placement::{capacity_aware_placement, refine_placement};

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
    /// use moeplan::planners::ReplicaCounts;
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
    /// The predicted expert compute time saved, summed over layers (needs
    /// [`CraftOptions::pricing`]; see the module documentation).
    Time,
}

/// Settings of CRAFT's preparation.
#[derive(Debug, Clone)]
pub struct CraftOptions {
    /// Replica counts measured per layer.
    pub replica_counts: ReplicaCounts,
    /// What the knapsack maximises.
    pub objective: Objective,
    /// Follow the paper's greedy placement with `refine_placement`
    /// and the joint search over counts and places
    /// (`shared::joint::joint_search`)
    /// for every (layer, replica count) of the benefit table (beyond the
    /// paper; off reproduces it exactly).
    pub refine: bool,
    /// With `refine`: also the joint search (off: swaps only, CRAFT as it
    /// was before the joint search — for comparisons).
    pub joint: bool,
    /// After the plan for a budget is made, search each layer again with
    /// random restarts ([`crate::planners::repair`])
    /// at the same memory. Costs time at every budget change; off by default.
    pub repair: bool,
    /// The hardware and model [`Objective::Time`] prices with.
    pub pricing: Option<Pricing>,
}

impl Default for CraftOptions {
    fn default() -> Self {
        CraftOptions {
            replica_counts: ReplicaCounts::default(),
            objective: Objective::default(),
            refine: true,
            joint: true,
            repair: false,
            pricing: None,
        }
    }
}

/// How many replicas to spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaBudget {
    /// `R` replicas per GPU summed over layers: `r = R · D` in all.
    ReplicasPerGpu(usize),
    /// The `R` at the knee of the predicted curve (Step 2).
    Auto,
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
    /// Each layer's summed loads, kept when [`CraftOptions::repair`] is on.
    repair: Option<ndarray::Array2<f64>>,
    /// Planning batches (the summed loads over this are the mean batch).
    batches: usize,
    /// With [`Objective::Time`]: the pricing and the mean planning batch
    /// the budget's throughput is predicted on.
    priced: Option<Priced>,
    /// [`Craft::fastest_replicas_per_gpu`] once found: a front end asks
    /// for the `auto` budget's name and then plans it.
    fastest: std::sync::OnceLock<usize>,
    /// [`Craft::curve`] once traced: every view of the page draws it and
    /// plans the knee, an allocation per factor each time otherwise.
    traced: std::sync::OnceLock<Vec<CurvePoint>>,
}

#[derive(Debug, Clone)]
struct Priced {
    pricing: Pricing,
    mean: Workload,
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
    /// use moeplan::planners::{ReplicaBudget, Craft, CraftOptions};
    /// use moeplan::{synth::generator, data::model, Topology};
    /// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let craft = Craft::prepare(&trace, Topology::new(1, 8)?, &CraftOptions::default())?;
    /// let p = craft.plan(ReplicaBudget::ReplicasPerGpu(2))?;
    /// assert!(p.plan.summary().replicas <= 16);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn prepare(trace: &LoadTrace, topology: Topology, options: &CraftOptions) -> Result<Craft> {
        let d = topology.num_gpus();
        let counts = options.replica_counts.resolve(d)?;
        // Kept with the trace: a GPU count measured before (or ahead of
        // time, `warm`) is read back, not measured again.
        let measured = benefit::measured(trace, d, &counts, options.refine, options.joint)?;
        let (mut table, placements) = measured.table();
        table.counts = counts;
        let priced = match (options.objective, &options.pricing) {
            (Objective::Time, None) => return Err(needs_pricing()),
            (Objective::Time, Some(pricing)) => {
                pricing.hardware.check()?;
                pricing.assumptions.check()?;
                table.compute_us = compute_table(trace, &placements, pricing)?;
                Some(Priced {
                    pricing: pricing.clone(),
                    mean: Workload::new(trace.mean_batch()),
                })
            }
            _ => None,
        };
        let curves: Vec<Vec<f64>> = measured
            .layers
            .iter()
            .map(|m| m.bound_curve.to_vec())
            .collect();
        Ok(Craft {
            topology,
            layer_ids: trace.layer_ids().to_vec(),
            num_experts: trace.num_experts(),
            table,
            placements,
            objective: options.objective,
            budget_bound: measured.budget_bound.to_vec(),
            bound_curves: curves,
            repair: options.repair.then(|| trace.summed()),
            batches: trace.num_batches(),
            priced,
            fastest: std::sync::OnceLock::new(),
            traced: std::sync::OnceLock::new(),
        })
    }

    /// The benefit table (Algorithm 1).
    #[cfg(test)]
    pub(crate) fn table(&self) -> &BenefitTable {
        &self.table
    }

    /// Balancedness of layer `l` with `r` replicas, as Algorithm 1 measured
    /// it on the planning batches (`r` = 0 or one of the table's counts; the
    /// plan for any budget uses exactly these placements, so in-sample this
    /// is the plan's balancedness, no replay needed).
    pub(crate) fn layer_balancedness(&self, l: usize, r: usize) -> Result<f64> {
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
    pub(crate) fn layer_imbalance(&self, l: usize, r: usize) -> Result<f64> {
        let k = self.column(l, r)?;
        self.table
            .imbalance
            .get(k)
            .and_then(|v| v.get(l))
            .copied()
            .ok_or_else(|| self.unmeasured(l, r))
    }

    /// Bound of layer `l` with `r` replicas (planning batches).
    pub(crate) fn layer_bound(&self, l: usize, r: usize) -> Result<f64> {
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
    pub(crate) fn curve_factors(&self) -> Vec<usize> {
        let top = self.layer_ids.len().next_power_of_two();
        std::iter::successors(Some(1usize), |x| Some(x * 2))
            .take_while(|&x| x <= top)
            .collect()
    }

    /// Predicted balancedness and bound at each replication factor.
    pub(crate) fn curve(&self) -> Vec<CurvePoint> {
        self.traced
            .get_or_init(|| {
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
            })
            .clone()
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
    pub(crate) fn auto_replicas_per_gpu(&self) -> usize {
        let curve = self.curve();
        let base = self.table.base.iter().sum::<f64>() / self.table.layers().max(1) as f64;
        knee(&curve, base)
    }

    /// Per-layer figures of an allocation, as Algorithm 1 measured them.
    fn predicted(&self, allocation: &Allocation) -> Result<Predicted> {
        let of = |f: fn(&Craft, usize, usize) -> Result<f64>| {
            allocation
                .per_layer
                .iter()
                .enumerate()
                .map(|(l, &r)| f(self, l, r))
                .collect::<Result<Vec<f64>>>()
        };
        Ok(Predicted {
            balancedness: of(Craft::layer_balancedness)?,
            imbalance: of(Craft::layer_imbalance)?,
            bound: of(Craft::layer_bound)?,
        })
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
    pub fn plan(&self, budget: ReplicaBudget) -> Result<CraftPlan> {
        let r = match budget {
            ReplicaBudget::ReplicasPerGpu(r) => r,
            ReplicaBudget::Auto => self.auto()?,
        };
        if r > 1 << 20 {
            return Err(Error::planner(
                NAME,
                format!("{r} replicas per GPU is out of range"),
            ));
        }
        let (plan, allocation) = self.place(r)?;
        let plan = match (&self.repair, &self.priced) {
            (None, _) => plan,
            (Some(summed), None) => repair(&plan, summed.view())?,
            (Some(summed), Some(priced)) => {
                // a layer's search kept only where the mean batch's
                // predicted compute falls
                let t = priced.pricing.time_cost();
                let b = self.batches.max(1) as f64;
                repair_by(&plan, summed.view(), |row, old, new| {
                    let mean: Vec<f64> = row.iter().map(|x| x / b).collect();
                    let mut c = LayerCompute::default();
                    c.busiest_us(&t, new, &mean) < c.busiest_us(&t, old, &mean) * (1.0 - 1e-12)
                })?
            }
        };
        Ok(CraftPlan {
            bound: self.bound_for(r * self.topology.num_gpus()),
            plan,
            replicas_per_gpu: r,
            allocation,
        })
    }

    /// The `R` for `auto`: the knee, or planning for time the fastest.
    fn auto(&self) -> Result<usize> {
        Ok(match self.fastest_replicas_per_gpu()? {
            Some(r) => r,
            None => self.auto_replicas_per_gpu(),
        })
    }

    /// Planning for time ([`Objective::Time`]): the replication factor
    /// among 0 and [`Craft::curve_factors`] whose plan the cost model
    /// predicts the most tokens per second for on the mean planning batch
    /// under `even` — replicas' memory taken from the KV cache, which caps
    /// the tokens a step serves (ties: the fewer replicas). `None` when
    /// CRAFT does not plan for time. Cost: one plan and one priced replay
    /// of one batch per factor.
    pub(crate) fn fastest_replicas_per_gpu(&self) -> Result<Option<usize>> {
        let Some(priced) = &self.priced else {
            return Ok(None);
        };
        if let Some(&r) = self.fastest.get() {
            return Ok(Some(r));
        }
        let cost = CostModel::for_model(&priced.pricing.model);
        let mut best: Option<(usize, f64)> = None;
        for r in std::iter::once(0).chain(self.curve_factors()) {
            let (plan, _) = self.place(r)?;
            let served = Served::Plan {
                plan: &plan,
                rule: Rule::Even,
            };
            let tput = price(&priced.mean, served, &cost, &priced.pricing)?.tokens_per_s;
            if best.is_none_or(|(_, b)| tput > b * (1.0 + 1e-9)) {
                best = Some((r, tput));
            }
        }
        Ok(best.map(|(r, _)| *self.fastest.get_or_init(|| r)))
    }

    /// Steps 3–5 without the repair: the allocation for `r` replicas per
    /// GPU and Algorithm 1's placements relabelled onto Algorithm 3's GPUs.
    fn place(&self, r: usize) -> Result<(Plan, Allocation)> {
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
        Ok((Plan::new(self.topology, e, layers, NAME)?, allocation))
    }
}

fn needs_pricing() -> Error {
    Error::planner(
        NAME,
        "objective time prices replicas on a hardware: name one (--hardware in the CLI, \
         `hardware` in the JavaScript API)",
    )
}

/// `[k][ℓ]`: the busiest GPU's expert compute of layer `ℓ` placed as
/// Algorithm 1's `k`-th placement, mean over the batches, µs.
fn compute_table(
    trace: &LoadTrace,
    placements: &[LayerPlacements],
    pricing: &Pricing,
) -> Result<Vec<Vec<f64>>> {
    let t = pricing.time_cost();
    let counts = trace.counts();
    let per_layer = map_layers(trace.num_layers(), |l| {
        let mut c = LayerCompute::default();
        // the layer's batches, read once for every replica count
        let rows: Vec<Vec<f64>> = (0..trace.num_batches())
            .map(|b| counts.slice(ndarray::s![b, l, ..]).to_vec())
            .collect();
        Ok(placements
            .get(l)
            .map(|columns| {
                columns
                    .iter()
                    .map(|gpus| c.mean_busiest_us(&t, gpus, rows.iter().map(Vec::as_slice)))
                    .collect::<Vec<f64>>()
            })
            .unwrap_or_default())
    })?;
    let columns = per_layer.first().map_or(0, Vec::len);
    Ok((0..columns)
        .map(|k| {
            per_layer
                .iter()
                .map(|v| v.get(k).copied().unwrap_or(0.0))
                .collect()
        })
        .collect())
}

/// CRAFT in one call: prepare, then plan `budget`.
///
/// ```
/// use moeplan::planners::{craft, ReplicaBudget};
/// use moeplan::{evaluate, synth::generator, data::model, planners, Topology};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 8))?;
/// let topo = Topology::new(1, 8)?;
/// let plan = craft(&trace, topo, ReplicaBudget::ReplicasPerGpu(4))?;
/// let base = planners::base(&trace, topo, 1)?;
/// assert!(evaluate(&trace, &plan)?.balancedness > evaluate(&trace, &base)?.balancedness);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn craft(trace: &LoadTrace, topology: Topology, budget: ReplicaBudget) -> Result<Plan> {
    Ok(Craft::prepare(trace, topology, &CraftOptions::default())?
        .plan(budget)?
        .plan)
}

/// CRAFT's id in the registry.
pub const ID: PlannerId = PlannerId::new("craft");

/// CRAFT's budget: `R`, replicas per GPU summed over layers; `auto` = the
/// knee (`Craft::auto_replicas_per_gpu`).
pub const REPLICAS_PER_GPU: OptionSpec = OptionSpec {
    name: "replicas_per_gpu",
    about: "CRAFT's budget: replicas per GPU summed over layers (R · D in all); auto: the knee \
            of the predicted balancedness-vs-R curve",
    kind: OptionKind::Budget(Unit::ReplicasPerGpu),
    default: Value::Auto,
};

/// [`CraftOptions::replica_counts`]: `geometric` or `every`.
pub(crate) const REPLICA_COUNTS: OptionSpec = OptionSpec {
    name: "replica_counts",
    about: "Replica counts CRAFT measures per layer: geometric (1, 2, 4, …, D) or every (1..=D)",
    kind: OptionKind::Choice(&["geometric", "every"]),
    default: Value::Word(Cow::Borrowed("geometric")),
};

/// [`CraftOptions::objective`]: `mean` or `paper`.
pub const OBJECTIVE: OptionSpec = OptionSpec {
    name: "objective",
    about: "What CRAFT's knapsack maximises: mean balancedness, the paper's r × gain, or the \
            predicted compute time saved on the named hardware (auto R: the most tokens/s)",
    kind: OptionKind::Choice(&["mean", "paper", "time"]),
    default: Value::Word(Cow::Borrowed("mean")),
};

/// [`CraftOptions::refine`].
pub(crate) const REFINE: OptionSpec = OptionSpec {
    name: "refine",
    about: "Refine CRAFT's greedy placement by local search: swaps, then replica counts and \
            places together (off: the paper's algorithm as printed)",
    kind: OptionKind::Flag,
    default: Value::Flag(true),
};

static OPTIONS: [OptionSpec; 5] = [REPLICAS_PER_GPU, REPLICA_COUNTS, OBJECTIVE, REFINE, REPAIR];

impl CraftOptions {
    /// The options [`Settings`] hold (defaults for those unset).
    ///
    /// ```
    /// use moeplan::planners::{CraftOptions, Objective};
    /// use moeplan::planners::{Settings, Value};
    /// let s = Settings::new().with("objective", Value::Word("paper".into()))?;
    /// let o = CraftOptions::from_settings(&s)?;
    /// assert_eq!(o.objective, Objective::PaperWeighted);
    /// assert!(o.refine);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn from_settings(settings: &Settings) -> Result<CraftOptions> {
        Ok(CraftOptions {
            replica_counts: match settings.word(&REPLICA_COUNTS)? {
                "every" => ReplicaCounts::Every,
                _ => ReplicaCounts::Geometric,
            },
            objective: match settings.word(&OBJECTIVE)? {
                "paper" => Objective::PaperWeighted,
                "time" => Objective::Time,
                _ => Objective::MeanBalancedness,
            },
            refine: settings.flag(&REFINE)?,
            joint: true,
            repair: settings.flag(&REPAIR)?,
            pricing: settings.pricing().cloned(),
        })
    }
}

/// The registry's CRAFT.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CraftPlanner;

/// Its registry entry, data only ([`crate::planners::SPECS`] lists it).
pub(crate) const SPEC: PlannerSpec = PlannerSpec {
    id: ID,
    display: "CRAFT",
    about: "CRAFT: R replicas per GPU over all layers, spent on the layers where they help (benefit table, knapsack, equal memory)",
    needs: Needs::Counts,
    options: &OPTIONS,
    serves_under: None,
};

/// Measures CRAFT's layer `layer` of `trace` ahead of time for `topology`
/// with the options in `settings`: what a later prepare at that GPU count
/// reads instead of measuring. The page's worker runs one layer per step
/// between requests for the clusters next to the one shown.
///
/// ```
/// use moeplan::planners::{Settings, warm_craft};
/// use moeplan::{Topology, data::model, synth::generator};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
/// let topology = Topology::new(1, 4)?;
/// for layer in 0..t.num_layers() {
///     warm_craft(&t, topology, &Settings::new(), layer)?;
/// }
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn warm(
    trace: &LoadTrace,
    topology: Topology,
    settings: &Settings,
    layer: usize,
) -> Result<()> {
    let options = CraftOptions::from_settings(settings)?;
    let d = topology.num_gpus();
    let counts = options.replica_counts.resolve(d)?;
    benefit::warm(trace, d, &counts, options.refine, options.joint, layer)
}

impl Planner for CraftPlanner {
    fn spec(&self) -> &'static PlannerSpec {
        &SPEC
    }
    fn preparing(&self) -> String {
        "measuring CRAFT's replication benefit".into()
    }
    fn prepare(
        &self,
        work: &Workload,
        topology: Topology,
        settings: &Settings,
    ) -> Result<Box<dyn Prepared>> {
        let options = CraftOptions::from_settings(settings)?;
        Ok(Box::new(Craft::prepare(work.trace(), topology, &options)?))
    }
}

impl Prepared for Craft {
    fn plan(&self, budget: Option<usize>) -> Result<Planned> {
        let p = Craft::plan(
            self,
            budget.map_or(ReplicaBudget::Auto, ReplicaBudget::ReplicasPerGpu),
        )?;
        // repaired layers are no longer the ones Algorithm 1 measured
        let predicted = match self.repair {
            Some(_) => None,
            None => Some(self.predicted(&p.allocation)?),
        };
        Ok(Planned {
            plan: p.plan,
            budget: Some(p.replicas_per_gpu),
            predicted,
        })
    }

    fn auto_budget(&self) -> Result<Option<usize>> {
        Ok(Some(self.auto()?))
    }

    fn curve(&self) -> Option<Vec<CurvePoint>> {
        Some(Craft::curve(self))
    }
}
