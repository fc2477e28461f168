//! The balancedness–memory trade-off, side by side: BASE, CRAFT at every
//! replication factor `R` of its curve, and EPLB with one, two, … redundant
//! experts per GPU in every layer — the CRAFT paper's Figure 5 / Figure 9 as
//! a table. Plans are made on one part of a trace and judged on another
//! (pass the same trace twice for in-sample figures), by the evaluator
//! ([`sweep`]) or any judge ([`sweep_by`]: the CLI's dispatch rules).
//!
//! A figure of two planners' budgets rather than a walk over the registry:
//! its rows and their order are the paper's. EPLB's points are
//! [`redundant_steps`]. Cost: one
//! CRAFT preparation, then one plan and one judgement per row.

use serde::Serialize;

use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::data::trace::LoadTrace;
use crate::error::Result;
use crate::judge::eval::{EvalReport, evaluate};
use crate::planners::craft::{Craft, CraftOptions, ReplicaBudget};
use crate::planners::eplb::{EplbConfig, eplb, redundant_steps};

/// One plan of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// `base`, `craft` or `eplb`.
    pub method: &'static str,
    /// Replicas per GPU summed over layers (`R`; EPLB's is `k · L / D`).
    pub replicas_per_gpu: f64,
    /// Replicas in all.
    pub replicas: usize,
    /// Largest slot count of any GPU over all layers.
    pub slots_per_gpu_max: usize,
    /// Slots beyond the experts' own on the fullest GPU: the replica memory
    /// every GPU must reserve, in units of one expert.
    pub replica_slots_per_gpu: usize,
    /// Measured balancedness on the evaluation batches.
    pub balancedness: f64,
    /// Measured imbalance ratio on the evaluation batches.
    pub imbalance_ratio: f64,
    /// Bound for this plan's replica counts on the evaluation batches.
    pub bound: f64,
    /// CRAFT's own prediction from its benefit table (planning batches).
    pub predicted_balancedness: Option<f64>,
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// Rows: BASE, CRAFT by increasing `R`, EPLB by increasing `k`.
    pub rows: Vec<SweepRow>,
    /// The `R` CRAFT's Step 2 picks.
    pub auto_replicas_per_gpu: usize,
}

/// Runs the sweep: plans on `plan_on`, evaluates on `eval_on`. EPLB gets
/// `k = D, 2D, …` (less `E mod D`) redundant experts per layer up to the largest CRAFT
/// budget (at least one step).
///
/// ```
/// use moeplan::{studies::sweep, synth::generator, data::model, Topology};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let s = sweep(&t, &t, Topology::new(1, 8)?, 1, &Default::default())?;
/// assert_eq!(s.rows[0].method, "base");
/// assert!(s.rows.iter().any(|r| r.method == "eplb"));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn sweep(
    plan_on: &LoadTrace,
    eval_on: &LoadTrace,
    topology: Topology,
    groups: usize,
    options: &CraftOptions,
) -> Result<Sweep> {
    sweep_by(plan_on, topology, groups, options, |plan| {
        evaluate(eval_on, plan)
    })
}

/// [`sweep`] with every plan judged by `judge` (the rows' balancedness,
/// imbalance, bound and memory are its report's).
///
/// ```
/// use moeplan::{evaluate, studies::sweep_by, synth::generator, data::model, Topology};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let s = sweep_by(&t, Topology::new(1, 8)?, 1, &Default::default(), |p| evaluate(&t, p))?;
/// assert!(s.rows.iter().any(|r| r.method == "craft"));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn sweep_by(
    plan_on: &LoadTrace,
    topology: Topology,
    groups: usize,
    options: &CraftOptions,
    mut judge: impl FnMut(&Plan) -> Result<EvalReport>,
) -> Result<Sweep> {
    let d = topology.num_gpus();
    let l = plan_on.num_layers();
    let craft = Craft::prepare(plan_on, topology, options)?;
    let mut rows = Vec::new();
    let mut push = |method, r: f64, plan: &Plan, predicted| -> Result<()> {
        let rep = judge(plan)?;
        rows.push(SweepRow {
            method,
            replicas_per_gpu: r,
            replicas: rep.replicas,
            slots_per_gpu_max: rep.slots_per_gpu_max,
            replica_slots_per_gpu: rep.replica_slots_fullest_gpu,
            balancedness: rep.balancedness,
            imbalance_ratio: rep.imbalance_ratio,
            bound: rep.bound,
            predicted_balancedness: predicted,
        });
        Ok(())
    };
    let eplb_with = |k| {
        eplb(
            plan_on,
            topology,
            EplbConfig {
                redundant_experts: k,
                groups,
            },
        )
    };
    if let Ok(p) = &eplb_with(0) {
        push("base", 0.0, p, None)?;
    }
    let factors = craft.curve_factors();
    for &r in &factors {
        let p = craft.plan(ReplicaBudget::ReplicasPerGpu(r))?;
        push(
            "craft",
            r as f64,
            &p.plan,
            Some(p.allocation.predicted_balancedness),
        )?;
    }
    let max_r = factors.last().copied().unwrap_or(1) as f64;
    for (j, k) in redundant_steps(plan_on.num_experts(), d).enumerate() {
        // one more slot per GPU per layer each step; the first step also
        // rounds the slot count up to a multiple of the GPU count
        let r = (k * l) as f64 / d as f64;
        if j > 0 && r > max_r {
            break;
        }
        match eplb_with(k) {
            Ok(p) => push("eplb", r, &p, None)?,
            Err(_) => break,
        }
    }
    Ok(Sweep {
        rows,
        auto_replicas_per_gpu: craft.auto_replicas_per_gpu(),
    })
}
