//! The one entry point that judges what a planner serves — a plan under a
//! dispatch rule, or a per-batch planner's base served through its
//! schedule — as the CLI, the JavaScript API and the page report it: the
//! evaluator's report of what an engine loads (memory, the bound) with the
//! rule's balance, and the simulator's report (traffic, per-batch series,
//! bytes moved). One evaluation and one replay: O(B · L · slots) plus the
//! rule's own cost ([`simulate`]).

use super::cost::{self, Prediction, Pricing};
use super::eval::{EvalReport, evaluate_with_progress};
use super::{CostModel, Placement, Replay, Rule, Steps, Strategy, Workload, simulate};
use crate::data::plan::Plan;
use crate::error::Result;

/// What a per-batch planner serves: one plan per batch and the dispatch
/// rule over them ([`simulate`] replays it), with what it costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The per-batch placements ([`Placement::Schedule`]) and
    /// their rule.
    pub strategy: Strategy,
    /// Expert copies made in each batch, over all layers: what the planner
    /// transfers (Libra refills its buffers every layer, so this exceeds
    /// the slots that differ between consecutive batches).
    pub copies_per_batch: Vec<usize>,
    /// Copies each GPU may take on top of the base per layer (Libra's N).
    pub extra_slots_per_gpu: usize,
    /// Expert slots each GPU keeps for the copies, over all layers: the
    /// schedule's replica memory on the fullest GPU (Libra: its two copy
    /// buffers, 2 · N, double buffering, §4 — one layer's copies fill while
    /// the other's serve), what "equal memory" compares with a static
    /// plan's [`crate::data::PlanSummary::replica_slots_fullest_gpu`].
    pub resident_slots_per_gpu: usize,
    /// One phrase for reports: `per batch, libra-rebalance, previous-batch
    /// predictor (measured)`.
    pub about: String,
}

impl Schedule {
    /// Schedules of consecutive batch ranges, in order, as one: what
    /// [`crate::planners::Prepared::schedule_batches`] made in parts. They
    /// must agree on everything but their plans and copies.
    pub fn join(parts: Vec<Schedule>) -> Result<Schedule> {
        let mut parts = parts.into_iter();
        let mut all = parts
            .next()
            .ok_or_else(|| crate::error::Error::Argument("no schedules to join".into()))?;
        for p in parts {
            let same = p.strategy.rule == all.strategy.rule
                && p.extra_slots_per_gpu == all.extra_slots_per_gpu
                && p.resident_slots_per_gpu == all.resident_slots_per_gpu
                && p.about == all.about;
            match (&mut all.strategy.placement, p.strategy.placement) {
                (Placement::Schedule(mine), Placement::Schedule(theirs)) if same => {
                    let next = mine.last().map_or(0, |(r, _)| r.end);
                    if let Some((r, _)) = theirs.first().filter(|(r, _)| r.start != next) {
                        return Err(crate::error::Error::Argument(format!(
                            "a schedule's part starts at batch {}, not {next}",
                            r.start
                        )));
                    }
                    mine.extend(theirs);
                    all.copies_per_batch.extend(p.copies_per_batch);
                }
                _ => {
                    return Err(crate::error::Error::Argument(
                        "only per-batch schedules of one planner and options join".into(),
                    ));
                }
            }
        }
        Ok(all)
    }

    /// Expert bytes copied in each batch: its copies × the bytes of one
    /// expert (`expert_bytes`, the cost model's).
    ///
    /// ```
    /// use moeplan::judge::{Placement, Rule, Schedule, Strategy};
    /// use moeplan::{planners::contiguous, LoadTrace, Topology};
    /// let t = LoadTrace::new(ndarray::Array3::from_elem((2, 1, 2), 1.0), vec![0])?;
    /// let base = contiguous(&t, Topology::new(1, 2)?)?;
    /// let s = Schedule {
    ///     strategy: Strategy { placement: Placement::Static(base), rule: Rule::Even },
    ///     copies_per_batch: vec![3, 0],
    ///     extra_slots_per_gpu: 1,
    ///     resident_slots_per_gpu: 2,
    ///     about: String::new(),
    /// };
    /// assert_eq!(s.bytes_copied(100), vec![300, 0]);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn bytes_copied(&self, expert_bytes: u64) -> Vec<u64> {
        self.copies_per_batch
            .iter()
            .map(|&c| c as u64 * expert_bytes)
            .collect()
    }
}

/// What is judged.
#[derive(Debug, Clone, Copy)]
pub enum Served<'a> {
    /// One plan, every batch, under a dispatch rule.
    Plan {
        /// The plan.
        plan: &'a Plan,
        /// How pairs pick among its copies.
        rule: Rule,
    },
    /// A per-batch planner's base (what an engine loads) served through its
    /// schedule, under the schedule's own rule.
    Schedule {
        /// The static base.
        base: &'a Plan,
        /// The plans per batch range and their rule.
        schedule: &'a Schedule,
    },
}

/// What is served, judged.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The evaluator's report of the plan (a schedule's base) with the
    /// rule's balance; for a schedule its bound counts the copies batch by
    /// batch (`EvalReport::bound_per_batch`) and its fullest GPU holds the
    /// schedule's copy buffers too.
    pub report: EvalReport,
    /// Everything the simulator measured.
    pub replay: Replay,
    /// Replicas in each layer: the plan's, or a schedule's copies per batch
    /// on the mean (rounded).
    pub replicas_per_layer: Vec<usize>,
    /// Expert bytes a schedule copies in each batch (copies × bytes of one
    /// expert); empty for a plan.
    pub per_batch_bytes_copied: Vec<u64>,
    /// Time, memory and throughput on the priced hardware; `None` when
    /// judged without a [`Pricing`].
    pub predicted: Option<Prediction>,
}

/// Judges `served` on `work`, pairs turned into bytes by `cost` and, with
/// `pricing`, into time on its hardware ([`Verdict::predicted`]);
/// `progress(done, total)` follows the evaluator's layers.
///
/// ```
/// use moeplan::judge::{judge, CostModel, Rule, Served};
/// use moeplan::{data::model, planners, synth::generator, Topology, Workload};
/// let trace = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
/// let plan = planners::eplb(&trace, Topology::new(1, 8)?, planners::EplbConfig { redundant_experts: 8, groups: 1 })?;
/// let work = Workload::new(trace);
/// let even = judge(&work, Served::Plan { plan: &plan, rule: Rule::Even }, &CostModel::default(), None, |_, _| {})?;
/// let best = judge(&work, Served::Plan { plan: &plan, rule: Rule::Optimal }, &CostModel::default(), None, |_, _| {})?;
/// assert_eq!(even.report.balancedness, moeplan::evaluate(work.trace(), &plan)?.balancedness);
/// assert!(best.report.balancedness >= even.report.balancedness);
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn judge(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: Option<&Pricing>,
    progress: impl FnMut(usize, usize),
) -> Result<Verdict> {
    judge_parts(work, served, cost, pricing, true, progress)
}

/// [`judge`] without token messages (`sim.traffic.messages` is `None`) and
/// without pricing: balance, pair traffic, the bound and a schedule's
/// copies, for a view that shows no messages ([`super::simulate_pairs`];
/// on token routes counting messages is most of a replay).
///
/// ```
/// use moeplan::judge::{judge, judge_pairs, CostModel, Rule, Served};
/// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
/// use moeplan::{data::model, planners, Topology, Workload};
/// let work = Workload::from_tokens(generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?, 128)?;
/// let plan = planners::contiguous(work.trace(), Topology::new(2, 4)?)?;
/// let served = Served::Plan { plan: &plan, rule: Rule::Even };
/// let (all, pairs) = (judge(&work, served, &CostModel::default(), None, |_, _| {})?, judge_pairs(&work, served, &CostModel::default())?);
/// assert!(all.replay.traffic.messages.is_some() && pairs.replay.traffic.messages.is_none());
/// assert_eq!((pairs.replay.balancedness, pairs.replay.traffic.cross_node), (all.replay.balancedness, all.replay.traffic.cross_node));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn judge_pairs(work: &Workload, served: Served<'_>, cost: &CostModel) -> Result<Verdict> {
    judge_parts(work, served, cost, None, false, |_, _| {})
}

/// [`judge_pairs`] timed and priced on `pricing` in the same replay: the
/// same figures, and the prediction [`price_pairs`] makes.
pub(crate) fn judge_pairs_priced(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: &Pricing,
) -> Result<Verdict> {
    judge_parts(work, served, cost, Some(pricing), false, |_, _| {})
}

/// [`judge_pairs`] of `base` served through `schedule`, its replay made
/// in parts ([`super::replay_steps`], joined with [`Steps::join`]): the
/// same verdict to the bit, the replay's work (and each batch's bound and
/// copies) shared between workers.
///
/// ```
/// use moeplan::judge::{judge_pairs, judge_pairs_replayed, replay_steps, CostModel, Schedule, Served, Steps};
/// use moeplan::planners::{self, Settings};
/// use moeplan::{synth::generator, data::model, Topology, Workload};
/// let work = Workload::new(generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?);
/// let ready = planners::prepare(planners::find("libra")?, &work, Topology::new(1, 8)?, &Settings::new())?;
/// let base = ready.plan(None)?.plan;
/// let cost = CostModel::default();
/// let halves = [ready.schedule_batches(&base, &work, 0..2)?.unwrap(), ready.schedule_batches(&base, &work, 2..4)?.unwrap()];
/// let steps = Steps::join(vec![replay_steps(&work, &halves[0], &cost, 0..2)?, replay_steps(&work, &halves[1], &cost, 2..4)?])?;
/// let schedule = Schedule::join(halves.to_vec())?;
/// let whole = judge_pairs(&work, Served::Schedule { base: &base, schedule: &schedule }, &cost)?;
/// let joined = judge_pairs_replayed(&work, &base, &schedule, &cost, &steps)?;
/// assert_eq!(joined.replay.per_batch, whole.replay.per_batch);
/// assert_eq!((joined.report.balancedness, joined.report.bound), (whole.report.balancedness, whole.report.bound));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn judge_pairs_replayed(
    work: &Workload,
    base: &Plan,
    schedule: &Schedule,
    cost: &CostModel,
    steps: &Steps,
) -> Result<Verdict> {
    let report = super::eval::evaluate(work.trace(), base)?;
    let segments = super::segments(&schedule.strategy.placement, work.trace().num_batches())?;
    let sim = super::steps::fold(work, &segments, schedule.strategy.rule, cost, steps)?;
    let per_batch = steps.per_batch(work.trace().num_batches())?;
    let served = Served::Schedule { base, schedule };
    finish(work, served, cost, report, sim, None, Some(per_batch))
}

fn judge_parts(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: Option<&Pricing>,
    messages: bool,
    progress: impl FnMut(usize, usize),
) -> Result<Verdict> {
    let report = evaluate_with_progress(work.trace(), served.loaded(), progress)?;
    let (sim, predicted) = replay(work, served, cost, pricing, messages)?;
    finish(work, served, cost, report, sim, predicted, None)
}

/// The verdict from the evaluator's report and the replay's; a schedule's
/// bound per layer and mean copies per layer as given (`per_batch`, made
/// in parts), else counted from its plans.
fn finish(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    mut report: EvalReport,
    sim: Replay,
    predicted: Option<Prediction>,
    per_batch: Option<(Vec<f64>, Vec<usize>)>,
) -> Result<Verdict> {
    // The rule decides balance; the evaluator keeps memory and the bound.
    report.balancedness = sim.balancedness;
    report.imbalance_ratio = sim.imbalance_ratio;
    report.per_layer.clone_from(&sim.per_layer);
    report
        .per_layer_imbalance_ratio
        .clone_from(&sim.per_layer_imbalance_ratio);
    report.gap = report.bound - report.balancedness;
    let (replicas_per_layer, per_batch_bytes_copied) = match served {
        Served::Plan { plan, .. } => (plan.summary().replicas_per_layer, Vec::new()),
        Served::Schedule { schedule, .. } => {
            // The base's bound is for static plans; the schedule's copies
            // are counted batch by batch.
            let copies = match per_batch {
                Some((bound, copies)) => {
                    report.set_bound_per_batch(bound);
                    copies
                }
                None => {
                    report.bound_per_batch(work.trace(), &schedule.strategy.placement)?;
                    mean_copies_per_layer(&schedule.strategy.placement, work)
                }
            };
            report.replica_slots_fullest_gpu += schedule.resident_slots_per_gpu;
            (copies, schedule.bytes_copied(cost.expert_bytes))
        }
    };
    Ok(Verdict {
        report,
        replay: sim,
        replicas_per_layer,
        per_batch_bytes_copied,
        predicted,
    })
}

/// Each layer's replicas over a schedule's plans, on the mean per plan.
fn mean_copies_per_layer(placement: &Placement, work: &Workload) -> Vec<usize> {
    let mut copies = vec![0usize; work.trace().num_layers()];
    let parts = match placement {
        Placement::Schedule(parts) => {
            for (_, plan) in parts {
                let e_n = plan.num_experts();
                for (c, lp) in copies.iter_mut().zip(plan.layers()) {
                    *c += lp.total_slots().saturating_sub(e_n);
                }
            }
            parts.len()
        }
        Placement::Static(_) => 1,
    };
    copies
        .iter()
        .map(|&c| (c as f64 / parts.max(1) as f64).round() as usize)
        .collect()
}

/// Only the prediction of [`judge`]: `served` priced on `pricing`'s
/// hardware, without the evaluator's report (its bound) — what a front end
/// pays per budget change.
///
/// ```
/// use moeplan::judge::{judge, price, CostModel, Rule, Served, cost::Pricing};
/// use moeplan::{data::{hardware, model}, planners, synth::generator, Topology, Workload};
/// let m = model::preset("olmoe")?;
/// let trace = generator::generate(&generator::GenConfig::new(m, 2))?;
/// let plan = planners::eplb(&trace, Topology::new(1, 8)?, planners::EplbConfig { redundant_experts: 8, groups: 1 })?;
/// let work = Workload::new(trace);
/// let p = Pricing::new(hardware::preset("h100-ib-ndr")?, m);
/// let served = Served::Plan { plan: &plan, rule: Rule::Even };
/// let cost = CostModel::for_model(m);
/// assert_eq!(price(&work, served, &cost, &p)?, judge(&work, served, &cost, Some(&p), |_, _| {})?.predicted.unwrap());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn price(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: &Pricing,
) -> Result<Prediction> {
    priced(work, served, cost, pricing, true)
}

/// [`price`] with pair traffic only: dispatch and combine counted by
/// (token, expert) pairs, not by token messages — what the page's static
/// plans are priced by (their mean batch has no tokens), and a fifth of the
/// replay on token routes.
pub(crate) fn price_pairs(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: &Pricing,
) -> Result<Prediction> {
    priced(work, served, cost, pricing, false)
}

/// The prediction of `served`'s replay on `pricing`, with or without token
/// messages.
fn priced(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: &Pricing,
    messages: bool,
) -> Result<Prediction> {
    let (_, predicted) = replay(work, served, cost, Some(pricing), messages)?;
    predicted.ok_or_else(|| crate::error::Error::Argument("nothing was priced".into()))
}

impl Served<'_> {
    /// The plan an engine loads: the plan, or a schedule's base.
    fn loaded(&self) -> &Plan {
        match self {
            Served::Plan { plan, .. } => plan,
            Served::Schedule { base, .. } => base,
        }
    }
}

/// The simulator's replay of `served` — timed and priced with `pricing` —
/// shared by [`judge`] and [`price`]. A plan is replayed borrowed, not
/// cloned into a [`Strategy`].
fn replay(
    work: &Workload,
    served: Served<'_>,
    cost: &CostModel,
    pricing: Option<&Pricing>,
    messages: bool,
) -> Result<(Replay, Option<Prediction>)> {
    let (extra, copies): (usize, &[usize]) = match served {
        Served::Plan { .. } => (0, &[]),
        Served::Schedule { schedule, .. } => {
            (schedule.resident_slots_per_gpu, &schedule.copies_per_batch)
        }
    };
    let priced = pricing
        .map(|p| cost::prepare(p, served.loaded(), extra, cost))
        .transpose()?;
    let timed = priced.as_ref().map_or(cost, |(c, _)| c);
    let sim = match served {
        Served::Plan { plan, rule } => {
            let all = 0..work.trace().num_batches();
            super::simulate_parts(work, &[(all, plan)], rule, timed, messages)?
        }
        Served::Schedule { schedule, .. } if messages => simulate(work, &schedule.strategy, timed)?,
        Served::Schedule { schedule, .. } => {
            super::simulate_pairs(work, &schedule.strategy, timed)?
        }
    };
    let predicted = match (pricing, &priced) {
        (Some(p), Some((c, mem))) => c
            .time
            .as_ref()
            .map(|t| cost::predict(p, t, &sim, served.loaded(), *mem, copies, work.trace())),
        _ => None,
    };
    Ok((sim, predicted))
}
