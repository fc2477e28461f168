//! Serving with re-planning: what an interval costs and gains on a trace.
//!
//! Engines re-balance while they serve: every `K` steps they plan again
//! on the last `W` steps' loads and move weights. The knobs have each
//! engine's name: SGLang's `--eplb-rebalance-num-iterations` (`K`), its
//! recorder's window (`W`) and `--eplb-min-rebalancing-utilization-threshold`
//! (`min_balancedness`); vLLM's EPLB `step_interval` and `window_size`;
//! vllm-ascend's `algorithm_execution_interval` and
//! `expert_heat_collection_interval`; ROCm ATOM's `--eplb-rebalance-interval`,
//! `--eplb-load-window-size` and `--eplb-rebalance-min-balancedness`. Here a
//! step is a trace batch.
//!
//! [`serve`] plans on the `W` batches before [`Serving::start`] (by
//! default the first `W`) and serves the rest. At every
//! `K`-th batch after that it re-plans on the `W` batches before it,
//! unless the served plan's balancedness on them, under the rule served,
//! already reaches `min_balancedness`. It moves to the new plan as
//! numbered, relabelled ([`relabel`]), by adjusting the served plan within
//! a copy budget ([`incremental`]), or by moving only the layers below a
//! gate toward the relabelled plan under a per-GPU-pair cap ([`Stair`]);
//! GPU to GPU while serving waits, or from host memory in the background
//! ([`Transfer`]). The replay judges the schedule of plans on the served
//! batches under the rule in force, and the first plan kept throughout
//! beside it, and — asked for — Libra serving the same batches with its
//! per-batch copies. With a [`Pricing`] it also gives each batch's
//! predicted MoE time, each move's pause ([`Migration::time_us`]) and
//! Libra's copies that do not hide.
//!
//! Cost: one plan per re-plan (the planner's own cost on `W` batches), one
//! migration (and relabelling) per re-plan, and two replays of the served
//! batches.

use serde::Serialize;

use crate::data::Workload;
use crate::data::plan::Plan;
use crate::data::topology::Topology;
use crate::error::{Error, Result};
use crate::judge::cost::Pricing;
use crate::judge::migration::{Migration, MoveCost, migration, relabel};
use crate::judge::{CostModel, Placement, Rule, Served, Strategy, judge, simulate};
use crate::planners::shared::incremental::{Goal, incremental};
use crate::planners::shared::layers::map_layers;
pub use crate::planners::shared::stair::Stair;
use crate::planners::shared::stair::stair;
use crate::planners::{Needs, Planner, Settings};

/// How a re-plan reaches the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Migrate {
    /// The new plan as the planner numbered it.
    Fresh,
    /// The new plan relabelled onto the served one's GPUs.
    Relabel,
    /// The served plan adjusted toward the window within the goal.
    Incremental(Goal),
    /// Only layers below the gate, moved toward the fresh plan
    /// (relabelled) with at most so many copies per GPU pair a layer
    /// (vllm-ascend's STAIR policy in spirit; `planners::shared::stair`).
    Stair(Stair),
}

impl Migrate {
    /// Its name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Migrate::Fresh => "fresh",
            Migrate::Relabel => "relabel",
            Migrate::Incremental(_) => "incremental",
            Migrate::Stair(_) => "stair",
        }
    }
}

/// Where a move's copies come from, and whether serving waits for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transfer {
    /// GPU to GPU, serving paused until the last copy lands (SGLang,
    /// vLLM, vllm-ascend as moeplan charges them): the pause is
    /// [`Migration::time_us`].
    #[default]
    Pause,
    /// From host memory (every expert's weights kept there), on a
    /// background thread a few layers a pass while serving goes on
    /// (TensorRT-LLM's online balancer): each GPU's new copies over a
    /// PCIe 5.0 x16 host link, and only what the MoE time of the batches
    /// served until the next re-plan does not cover is a pause.
    HostInBackground,
    /// GPU to GPU on a side stream while serving goes on (vLLM's EPLB with
    /// `use_async`): the move's time as [`Transfer::Pause`] prices it, of
    /// which only what the MoE time of the batches served until the next
    /// re-plan does not cover is a pause. The copies share the links with
    /// serving's own traffic; counting the MoE time, not the links' spare
    /// time, makes this a lower bound of the pause.
    PeerInBackground,
}

/// A host link's rate, GB/s: PCIe 5.0 x16 per direction (the H100/H200
/// hosts TensorRT-LLM's PCIe path serves; `libra::time_model` cites it).
const HOST_GB_PER_S: f64 = crate::planners::libra::time_model::PCIE5_GB_PER_S;

/// The busiest GPU's time to take its new copies from host memory, µs.
fn host_time_us(m: &Migration, expert_bytes: f64) -> f64 {
    let received = m
        .per_gpu_intra_node
        .iter()
        .zip(&m.per_gpu_inter_node)
        .map(|(a, b)| a + b)
        .max()
        .unwrap_or(0);
    received as f64 * expert_bytes / (HOST_GB_PER_S * 1e3)
}

/// The serving loop's knobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Serving {
    /// Re-plan every this many batches (`K`, at least 1).
    pub every: usize,
    /// On the last this many batches (`W`, at least 1).
    pub window: usize,
    /// Skip a re-plan while the served plan's balancedness on the window
    /// is at least this.
    pub min_balancedness: Option<f64>,
    /// How a re-plan reaches the GPUs.
    pub migrate: Migrate,
    /// Where its copies come from and whether serving waits.
    pub transfer: Transfer,
    /// The dispatch rule serving every batch.
    pub rule: Rule,
    /// The first batch served (at least `window`; 0: `window`): runs with
    /// different windows serve the same batches when given the same start.
    pub start: usize,
    /// Also serve the same batches with Libra (per-batch copies, its own
    /// rule and defaults), prepared on the first window.
    pub libra: bool,
}

impl Serving {
    /// Refuses knobs that cannot run on `batches` batches.
    pub fn check(&self, batches: usize) -> Result<()> {
        if self.every == 0 || self.window == 0 {
            return Err(Error::Argument(
                "the re-plan interval and the window must be at least one batch".into(),
            ));
        }
        if self.first_served() >= batches {
            return Err(Error::Argument(format!(
                "a window of {} batches leaves none of the trace's {batches} to serve: the first plan is made on the first window",
                self.first_served()
            )));
        }
        if self
            .min_balancedness
            .is_some_and(|b| !(0.0..=1.0).contains(&b))
        {
            return Err(Error::Argument(
                "the minimum balancedness must be between 0 and 1".into(),
            ));
        }
        Ok(())
    }

    /// The first batch served.
    pub(crate) fn first_served(&self) -> usize {
        self.start.max(self.window)
    }
}

/// One re-plan point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replan {
    /// The first batch (of the trace) the new plan serves.
    pub at_batch: usize,
    /// The served plan's balancedness on the window before, under the rule served.
    pub window_balancedness_before: f64,
    /// The plan moved to's balancedness on the window (the served one's
    /// when skipped).
    pub window_balancedness_after: f64,
    /// Skipped: the served plan already met `min_balancedness`.
    pub skipped: bool,
    /// Expert copies moved, by link kind and GPU.
    pub migration: Migration,
    /// The move's pause on the priced hardware, µs.
    pub pause_us: Option<f64>,
}

/// The replay of serving with re-planning, and the first plan kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServingReport {
    /// The first batch served.
    pub first_served: usize,
    /// Batches served (the trace's from the first served).
    pub served_batches: usize,
    /// Per served batch, balancedness with re-planning.
    pub per_batch_balancedness: Vec<f64>,
    /// Per served batch, balancedness of the first plan kept.
    pub static_per_batch_balancedness: Vec<f64>,
    /// Mean over served batches, with re-planning and static.
    pub balancedness: f64,
    /// The static plan's mean.
    pub static_balancedness: f64,
    /// Every re-plan point, skipped ones included.
    pub replans: Vec<Replan>,
    /// Expert copies moved over the run.
    pub copies_moved: usize,
    /// Per served batch, predicted MoE time of the step (all the model's
    /// MoE layers), µs — with a pricing.
    pub per_batch_moe_us: Option<Vec<f64>>,
    /// The same for the static plan.
    pub static_per_batch_moe_us: Option<Vec<f64>>,
    /// MoE time over the run plus every pause, µs; and the static plan's.
    pub total_us: Option<(f64, f64)>,
    /// Batches a move's pause takes to pay back: the mean pause per move
    /// over the mean MoE time a served batch saves against the first plan
    /// kept. Under `every`, re-planning at this interval pays; `None`
    /// without a pricing, without a move, or when re-planning saves
    /// nothing.
    pub payback_batches: Option<f64>,
    /// Libra on the same batches, when asked for.
    pub libra: Option<LibraServed>,
}

/// Libra serving the same batches: its copies every batch instead of
/// re-plans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LibraServed {
    /// Per served batch, balancedness under its rule.
    pub per_batch_balancedness: Vec<f64>,
    /// Mean over served batches.
    pub balancedness: f64,
    /// Expert copies it makes per batch, mean.
    pub copies_per_batch: f64,
    /// MoE time over the run plus its copies that do not hide, µs.
    pub total_us: Option<f64>,
}

/// Serves `work` with `planner` re-planning as `serving` says (see the
/// module documentation); `pricing` adds predicted time. Its sources
/// (per-source counts, or token routes counted per rank) go with every
/// window and served batch, so a rule that reads them (SGLang's `static`)
/// and the gate judge with them; plans are made from the windows' counts.
///
/// ```
/// use moeplan::planners::{EPLB_ID, Settings};
/// use moeplan::studies::{Migrate, Serving, serve};
/// use moeplan::{Topology, data::model, judge::Rule, synth::generator};
/// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 12))?;
/// let s = Serving {
///     every: 4,
///     window: 4,
///     min_balancedness: None,
///     migrate: Migrate::Relabel,
///     transfer: Default::default(),
///     rule: Rule::Even,
///     start: 0,
///     libra: false,
/// };
/// let r = serve(
///     &moeplan::Workload::new(t),
///     Topology::new(1, 8)?,
///     EPLB_ID.planner()?,
///     &Settings::new(),
///     s,
///     None,
/// )?;
/// assert_eq!(r.served_batches, 8);
/// assert_eq!(r.replans.len(), 1); // at batch 8, on batches 4..8
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn serve(
    work: &Workload,
    topology: Topology,
    planner: &dyn Planner,
    settings: &Settings,
    serving: Serving,
    pricing: Option<&Pricing>,
) -> Result<ServingReport> {
    // Sources are read by a rule that is not blind (each window's
    // balancedness and the served batches), by a price (the served
    // batches' traffic) and by Libra (its window and the served batches);
    // elsewhere a slice is of the counts alone, so token routes are not
    // counted per rank for nothing (a 16-batch window of the page's route
    // default is 15 MB of per-rank counts).
    let counts = Workload::new(work.trace().clone());
    let windows = if serving.rule.is_blind() {
        &counts
    } else {
        work
    };
    let served_from = if serving.rule.is_blind() && pricing.is_none() && !serving.libra {
        &counts
    } else {
        work
    };
    let trace = work.trace();
    let b_n = trace.num_batches();
    serving.check(b_n)?;
    if matches!(planner.needs(), Needs::Sources | Needs::Tokens) || planner.per_batch() {
        return Err(Error::Argument(format!(
            "{} cannot re-plan here: the serving replay plans from counts with a static planner",
            planner.display()
        )));
    }
    let w = serving.window;
    let s0 = serving.first_served();
    let plan_on = |range: std::ops::Range<usize>| -> Result<Plan> {
        let work = Workload::new(trace.slice_batches(range)?);
        Ok(crate::planners::plan(planner, &work, topology, settings)?.plan)
    };
    let hardware = pricing.map(|p| &p.hardware);
    let move_cost = match hardware {
        Some(h) => MoveCost::for_hardware(h),
        None => MoveCost::for_hardware(crate::data::hardware::preset("h100-ib-ndr")?),
    };
    let expert_bytes = pricing.map(|p| p.assumptions.expert_bytes(&p.model));
    // Every fresh plan depends on its window alone: when none can be
    // skipped they are made up front, on every core with the `parallel`
    // feature (each re-plan's relabelling, which needs the plan served
    // before it, stays in order below).
    let points: Vec<usize> = (s0 + serving.every..b_n).step_by(serving.every).collect();
    let up_front = serving.min_balancedness.is_none()
        && matches!(
            serving.migrate,
            Migrate::Fresh | Migrate::Relabel | Migrate::Stair(_)
        );
    let mut fresh: Vec<Option<Plan>> = if up_front {
        map_layers(points.len() + 1, |i| match i {
            0 => plan_on(s0 - w..s0),
            _ => plan_on(points[i - 1] - w..points[i - 1]),
        })?
        .into_iter()
        .map(Some)
        .collect()
    } else {
        Vec::new()
    };
    let mut fresh_at =
        |i: usize, range: std::ops::Range<usize>| match fresh.get_mut(i).and_then(Option::take) {
            Some(p) => Ok(p),
            None => plan_on(range),
        };
    let first = fresh_at(0, s0 - w..s0)?;
    let mut served = first.clone();
    let mut start = s0;
    let mut segments: Vec<(std::ops::Range<usize>, Plan)> = Vec::new();
    let mut replans = Vec::new();
    // A plan's balancedness on a window under the rule served: what the
    // gate (`min_balancedness`, SGLang's utilisation threshold) reads.
    // The trace's model, chosen once: the gate's replays and, unpriced, the run's.
    let pairs_cost = crate::judge::ModelChoice::choose(None, trace)?.cost();
    let balance_on = |window: &Workload, plan: &Plan| -> Result<f64> {
        if serving.rule == Rule::Even {
            return Ok(crate::evaluate(window.trace(), plan)?.balancedness);
        }
        let r = crate::judge::simulate_pairs(
            window,
            &Strategy::fixed(plan.clone(), serving.rule),
            &pairs_cost,
        )?;
        Ok(r.balancedness)
    };
    for (i, &at) in points.iter().enumerate() {
        let window = windows.slice_batches(at - w..at)?;
        let before = balance_on(&window, &served)?;
        if serving.min_balancedness.is_some_and(|b| before >= b) {
            replans.push(Replan {
                at_batch: at,
                window_balancedness_before: before,
                window_balancedness_after: before,
                skipped: true,
                migration: Migration::default(),
                pause_us: None,
            });
            continue;
        }
        let next = match serving.migrate {
            Migrate::Fresh => fresh_at(i + 1, at - w..at)?,
            Migrate::Relabel => relabel(&served, &fresh_at(i + 1, at - w..at)?, move_cost)?,
            Migrate::Incremental(goal) => {
                incremental(&served, window.trace().summed().view(), goal)?.plan
            }
            Migrate::Stair(options) => {
                let target = relabel(&served, &fresh_at(i + 1, at - w..at)?, move_cost)?;
                stair(&served, &target, window.trace().summed().view(), options)?
            }
        };
        let m = migration(&served, &next)?;
        replans.push(Replan {
            at_batch: at,
            window_balancedness_before: before,
            window_balancedness_after: balance_on(&window, &next)?,
            skipped: false,
            // In the background the pause is what the serving after it
            // does not cover: set once the run is replayed, below.
            pause_us: hardware
                .zip(expert_bytes)
                .map(|(h, b)| match serving.transfer {
                    Transfer::Pause | Transfer::PeerInBackground => m.time_us(h, b),
                    Transfer::HostInBackground => host_time_us(&m, b),
                }),
            migration: m,
        });
        segments.push((start - s0..at - s0, std::mem::replace(&mut served, next)));
        start = at;
    }
    segments.push((start - s0..b_n - s0, served));
    let evaluated = served_from.slice_batches(s0..b_n)?;
    let cost = match pricing {
        Some(p) => CostModel {
            time: Some(p.time_cost()),
            ..CostModel::for_model(&p.model)
        },
        // The one choice every judgement makes: the trace's model, else
        // DeepSeek-V3 (`judge::ModelChoice`), as the gate's.
        None => pairs_cost,
    };
    let run_strategy = Strategy {
        placement: Placement::Schedule(segments),
        rule: serving.rule,
    };
    let kept_strategy = Strategy::fixed(first, serving.rule);
    // The two replays are independent: one per core.
    let mut replays = map_layers(2, |i| {
        simulate(
            &evaluated,
            if i == 0 {
                &run_strategy
            } else {
                &kept_strategy
            },
            &cost,
        )
    })?
    .into_iter();
    let (Some(run), Some(kept)) = (replays.next(), replays.next()) else {
        return Err(Error::Argument("the replays did not run".into()));
    };
    // The replay's MoE time is of the trace's layers: scaled to the model's.
    let scale = pricing.map_or(1.0, |p| {
        p.model.moe_layers() as f64 / trace.num_layers().max(1) as f64
    });
    let moe = |r: &crate::judge::Replay| {
        r.time.as_ref().map(|t| {
            t.per_batch_moe_us
                .iter()
                .map(|x| x * scale)
                .collect::<Vec<f64>>()
        })
    };
    let (per_batch_moe_us, static_per_batch_moe_us) = (moe(&run), moe(&kept));
    if serving.transfer != Transfer::Pause
        && let Some(per_batch) = &per_batch_moe_us
    {
        hide_under_serving(&mut replans, per_batch, s0);
    }
    let libra = if serving.libra {
        Some(libra_on(
            work,
            s0 - w..s0,
            &evaluated,
            topology,
            &cost,
            pricing,
            scale,
        )?)
    } else {
        None
    };
    let pauses: f64 = replans.iter().filter_map(|r| r.pause_us).sum();
    let total_us = per_batch_moe_us
        .as_ref()
        .zip(static_per_batch_moe_us.as_ref())
        .map(|(a, b)| (a.iter().sum::<f64>() + pauses, b.iter().sum::<f64>()));
    let payback_batches = payback(
        &replans,
        per_batch_moe_us.as_deref(),
        static_per_batch_moe_us.as_deref(),
    );
    Ok(ServingReport {
        first_served: s0,
        payback_batches,
        served_batches: b_n - s0,
        balancedness: run.balancedness,
        static_balancedness: kept.balancedness,
        per_batch_balancedness: run.per_batch,
        static_per_batch_balancedness: kept.per_batch,
        copies_moved: replans.iter().map(|r| r.migration.copies()).sum(),
        replans,
        per_batch_moe_us,
        static_per_batch_moe_us,
        total_us,
        libra,
    })
}

/// A background move's copy time, less the MoE time of the batches served
/// from its re-plan to the next (the batches from `first` on are
/// `per_batch`): the pause serving sees.
fn hide_under_serving(replans: &mut [Replan], per_batch: &[f64], first: usize) {
    let moved: Vec<usize> = replans
        .iter()
        .filter(|r| !r.skipped)
        .map(|r| r.at_batch)
        .collect();
    for r in replans.iter_mut().filter(|r| !r.skipped) {
        let next = moved
            .iter()
            .find(|&&b| b > r.at_batch)
            .copied()
            .unwrap_or(first + per_batch.len());
        let covered: f64 = per_batch
            .get(r.at_batch.saturating_sub(first)..next.saturating_sub(first))
            .map_or(0.0, |b| b.iter().sum());
        if let Some(p) = r.pause_us.as_mut() {
            *p = (*p - covered).max(0.0);
        }
    }
}

/// See [`ServingReport::payback_batches`].
fn payback(replans: &[Replan], moe: Option<&[f64]>, kept: Option<&[f64]>) -> Option<f64> {
    let (moe, kept) = (moe?, kept?);
    let pauses: Vec<f64> = replans
        .iter()
        .filter(|r| !r.skipped)
        .filter_map(|r| r.pause_us)
        .collect();
    if pauses.is_empty() || moe.is_empty() {
        return None;
    }
    let saved = (kept.iter().sum::<f64>() - moe.iter().sum::<f64>()) / moe.len() as f64;
    let pause = pauses.iter().sum::<f64>() / pauses.len() as f64;
    (saved > 0.0).then(|| pause / saved)
}

/// Libra prepared on `planning`'s batches of `trace` and judged through its
/// schedule on `served`.
fn libra_on(
    work: &Workload,
    planning: std::ops::Range<usize>,
    served: &Workload,
    topology: Topology,
    cost: &CostModel,
    pricing: Option<&Pricing>,
    scale: f64,
) -> Result<LibraServed> {
    let libra = crate::planners::libra::ID.planner()?;
    let work = work.slice_batches(planning)?;
    let ready = crate::planners::prepare(libra, &work, topology, &Settings::new())?;
    let base = ready.plan(None)?.plan;
    let schedule = ready
        .schedule(&base, served)?
        .ok_or_else(|| Error::Argument("Libra made no schedule".into()))?;
    let copies = &schedule.copies_per_batch;
    let copies_per_batch = copies.iter().sum::<usize>() as f64 / copies.len().max(1) as f64;
    let judged = Served::Schedule {
        base: &base,
        schedule: &schedule,
    };
    let v = judge(served, judged, cost, pricing, |_, _| {})?;
    let total_us = v
        .replay
        .time
        .as_ref()
        .zip(v.predicted.as_ref())
        .map(|(t, p)| {
            t.per_batch_moe_us.iter().map(|x| x * scale).sum::<f64>()
                + p.copy_exposed_us * t.per_batch_moe_us.len() as f64
        });
    Ok(LibraServed {
        per_batch_balancedness: v.replay.per_batch,
        balancedness: v.replay.balancedness,
        copies_per_batch,
        total_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(at_batch: usize, pause_us: f64) -> Replan {
        Replan {
            at_batch,
            window_balancedness_before: 0.5,
            window_balancedness_after: 0.9,
            skipped: false,
            migration: Migration::default(),
            pause_us: Some(pause_us),
        }
    }

    /// A background move hides under the MoE time served from its re-plan
    /// to the next one that moves (a skipped one does not end it), the
    /// last under the batches left; only the rest is a pause.
    #[test]
    fn a_background_move_hides_under_the_serving_after_it() {
        // batches 10.. served at 2 ms each; moves at 12 and 16, one skipped at 14
        let per_batch = vec![2_000.0; 10];
        let mut skipped = moved(14, 0.0);
        skipped.skipped = true;
        skipped.pause_us = None;
        let mut r = vec![moved(12, 9_000.0), skipped, moved(16, 3_000.0)];
        hide_under_serving(&mut r, &per_batch, 10);
        // 12..16: 8 ms covered of 9; 16..20: 8 ms covered of 3
        assert_eq!(r[0].pause_us, Some(1_000.0));
        assert_eq!(r[1].pause_us, None);
        assert_eq!(r[2].pause_us, Some(0.0));
    }

    /// The replay judges with the sources it is given: under SGLang's
    /// `static` rule (which reads each rank's tokens) the first plan kept
    /// serves as the core judges it on the served batches' token routes,
    /// and not as it would under even arrival; the gate reads the window
    /// with its sources too.
    #[test]
    fn the_replay_judges_with_the_sources_given() -> Result<()> {
        use crate::synth::token_generator::{TokenGenConfig, generate_tokens};
        let p = crate::data::model::preset("deepseek-v2-lite")?;
        let cfg = TokenGenConfig {
            ranks: 4,
            batch_tokens: 256,
            ..TokenGenConfig::new(p, 8 * 256)
        };
        let work = Workload::from_tokens(generate_tokens(&cfg)?, 256)?;
        let topo = Topology::new(2, 2)?;
        let eplb = crate::planners::eplb::ID.planner()?;
        let rule = Rule::SglangStatic(crate::judge::SglangVersion::Nearest);
        let knobs = Serving {
            every: 3,
            window: 2,
            min_balancedness: None,
            migrate: Migrate::Relabel,
            transfer: Transfer::Pause,
            rule,
            start: 0,
            libra: false,
        };
        let r = serve(&work, topo, eplb, &Settings::new(), knobs, None)?;
        let first = Workload::new(work.trace().slice_batches(0..2)?);
        let plan = crate::planners::plan(eplb, &first, topo, &Settings::new())?.plan;
        let cost = crate::judge::ModelChoice::choose(None, work.trace())?.cost();
        let served = work.slice_batches(2..8)?;
        assert_eq!(served.num_sources(), Some(4));
        let kept =
            crate::judge::simulate_pairs(&served, &Strategy::fixed(plan.clone(), rule), &cost)?;
        assert!((r.static_balancedness - kept.balancedness).abs() < 1e-12);
        let even = crate::judge::simulate_pairs(
            &Workload::new(served.trace().clone()),
            &Strategy::fixed(plan, rule),
            &cost,
        )?;
        assert!(
            (even.balancedness - kept.balancedness).abs() > 1e-6,
            "the sources changed nothing"
        );
        // the slices of the sources add up to the whole
        let whole = work.slice_batches(0..8)?;
        let halves = work.slice_batches(0..3)?.then(&work.slice_batches(3..8)?)?;
        assert_eq!(whole, halves);
        Ok(())
    }

    /// Taking new copies from host memory, the busiest receiver sets the
    /// time, whoever held the expert before.
    #[test]
    fn host_copies_are_the_busiest_receivers() {
        let m = Migration {
            per_gpu_intra_node: vec![3, 0],
            per_gpu_inter_node: vec![1, 2],
            ..Migration::default()
        };
        let us = host_time_us(&m, 64e6);
        // 4 copies of 64 MB at 64 GB/s: 4 ms
        assert!((us - 4_000.0).abs() < 1e-6, "{us}");
    }
}
