//! How the workspace holds each planner: failed, planned once at its
//! default (replayed under `even`, and under the last rule asked for),
//! moving with the budget, or a per-batch schedule replayed once — and the
//! figures each gives the view.

use std::sync::Arc;

use moeplan::Workload;
use moeplan::data::Plan;
use moeplan::data::Topology;
use moeplan::error::Result;
use moeplan::judge::EvalReport;
use moeplan::judge::{Judge, JudgedSchedule, PairTraffic};
use moeplan::planners::{Needs, Planner, PlannerId, Prepared};

use crate::view::PlanFigures;

/// One planner of the workspace.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: PlannerId,
    pub(crate) display: &'static str,
    pub(crate) state: State,
    /// What the planner said when it prepared ([`Prepared::notes`]).
    pub(crate) notes: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum State {
    /// Could not plan on this cluster: why.
    Failed(String),
    /// Planned once at its default budget and replayed.
    Fixed(Box<Fixed>),
    /// Moves with the view's budget.
    Slider(Arc<dyn Prepared>),
    /// Re-places per batch (Libra): its schedule replayed once.
    Scheduled(Arc<Scheduled>),
    /// A per-batch planner not planned yet: a cluster change is answered
    /// without it, and [`crate::Workspace::plan_pending`] plans it for the
    /// answer after (the page's follow-up), so the static plans show first.
    Pending,
}

/// A plan the budget does not move, and its evaluation (its replays
/// under the rules asked for are the judge's to keep: a budget change, or
/// a return to a rule seen before, does not replay it again).
#[derive(Debug, Clone)]
pub(crate) struct Fixed {
    pub(crate) budget: Option<usize>,
    pub(crate) plan: Plan,
    pub(crate) report: Arc<EvalReport>,
}

/// A per-batch planner's schedule ([`Prepared::schedule`]) replayed under
/// its own rule — whatever the view's: the rule is part of the method
/// (Libra's rebalancer) — once per trace, cluster and its options.
#[derive(Debug, Clone)]
pub(crate) struct Scheduled {
    /// The base, its schedule and its verdict, priced on demand by the
    /// judge (all batches: a schedule has no mean batch).
    pub(crate) judged: JudgedSchedule,
}

/// The planners a workspace shows: those that read the loads (the page is
/// about balancing them; contiguous placement, which ignores them, is
/// `compare`'s floor) and whose needs this workload meets.
pub(crate) fn shown(planner: &dyn Planner, work: &Workload) -> bool {
    planner.needs() >= Needs::Counts && planner.needs().met_by(work)
}

pub(crate) fn figures(planner: &dyn Planner, budget: Option<usize>, r: &EvalReport) -> PlanFigures {
    PlanFigures {
        name: planner.id().to_string(),
        label: planner.title(budget),
        budget,
        balancedness: r.balancedness,
        imbalance_ratio: r.imbalance_ratio,
        replicas: r.replicas,
        replica_slots_per_gpu: r.replica_slots_fullest_gpu,
        bound: r.bound,
        per_layer: r.per_layer.clone(),
        replicas_per_layer: r.replicas_per_layer.clone(),
        traffic: PairTraffic::default(),
        per_batch_imbalance: Vec::new(),
        per_batch_bytes: Vec::new(),
        schedule: None,
        own_rule: None,
        predicted: None,
    }
}

/// Figures of a plan the budget moves: what its planner measured when it
/// prepared, else a replay.
pub(crate) fn slider_figures(
    planner: &dyn Planner,
    planned: &moeplan::planners::Planned,
    judge: &Judge,
) -> Result<PlanFigures> {
    let Some(pred) = &planned.predicted else {
        return Ok(figures(
            planner,
            planned.budget,
            judge.eval_report(&planned.plan)?.as_ref(),
        ));
    };
    let summary = planned.plan.summary();
    Ok(PlanFigures {
        name: planner.id().to_string(),
        label: planner.title(planned.budget),
        budget: planned.budget,
        balancedness: mean(&pred.balancedness),
        imbalance_ratio: mean(&pred.imbalance),
        replicas: summary.replicas,
        replica_slots_per_gpu: summary.replica_slots_fullest_gpu,
        bound: mean(&pred.bound),
        per_layer: pred.balancedness.clone(),
        replicas_per_layer: summary.replicas_per_layer,
        traffic: PairTraffic::default(),
        per_batch_imbalance: Vec::new(),
        per_batch_bytes: Vec::new(),
        schedule: None,
        own_rule: None,
        predicted: None,
    })
}

/// A prepared planner that the budget does not move, planned at its
/// default: a static plan replayed once under `even`, or a per-batch
/// planner's schedule (Libra) replayed under its own rule.
pub(crate) fn plan_at_default(
    planner: &dyn Planner,
    ready: &dyn Prepared,
    judge: &Judge,
    topology: Topology,
) -> State {
    let work = judge.workload();
    if planner.per_batch() {
        if let Some(why) = too_large_per_batch(work, topology) {
            return State::Failed(why);
        }
    }
    let made = ready
        .plan(None)
        .and_then(|p| match ready.schedule(&p.plan, work)? {
            Some(s) => Ok(State::Scheduled(Arc::new(Scheduled {
                judged: judge.schedule(&p.plan, s, None)?,
            }))),
            None => {
                let report = judge.eval_report(&p.plan)?;
                Ok(State::Fixed(Box::new(Fixed {
                    budget: p.budget,
                    plan: p.plan,
                    report,
                })))
            }
        });
    made.unwrap_or_else(|e| State::Failed(e.to_string()))
}

impl Scheduled {
    /// Its figures: the replay's balance and traffic; its replicas are the
    /// mean copies per batch, its replica memory on the fullest GPU the
    /// base's plus the slots it keeps for copies (Libra's two buffers,
    /// 2 · N), its bound that of its copies counted batch by batch
    /// ([`moeplan::judge::per_batch_bound`]).
    pub(crate) fn figures(&self, planner: &dyn Planner) -> PlanFigures {
        let v = &self.judged.verdict;
        let r = &v.replay;
        PlanFigures {
            name: planner.id().to_string(),
            label: format!("{} ({})", planner.title(None), schedule_phrase(&r.rule)),
            budget: None,
            balancedness: r.balancedness,
            imbalance_ratio: r.imbalance_ratio,
            replicas: v.replicas_per_layer.iter().sum(),
            replica_slots_per_gpu: v.report.replica_slots_fullest_gpu,
            bound: v.report.bound,
            per_layer: r.per_layer.clone(),
            replicas_per_layer: v.replicas_per_layer.clone(),
            traffic: PairTraffic::from(&r.traffic),
            per_batch_imbalance: r.per_batch_imbalance_ratio.clone(),
            per_batch_bytes: v.per_batch_bytes_copied.iter().map(|&b| b as f64).collect(),
            schedule: Some(self.judged.schedule.about.clone()),
            own_rule: Some(r.rule.clone()),
            predicted: None,
        }
    }
}

/// Batch × layer × GPU × expert cells above which a per-batch planner is not
/// replayed in a workspace: Libra re-places every layer of every batch,
/// about 4–5 ns a cell natively on a count-only trace (the page's count
/// default, DeepSeek-V3's 64 batches on 64 GPUs, 61 M cells: 0.25–0.3 s),
/// and the page re-plans on every cluster change. With per-source counts
/// or token routes each source's row is read too, so the cells count
/// `(D + S) / D` times for `S` sources on `D` GPUs (the route default, 8
/// ranks on 8 × 8: 68 M, 0.2 s; 64 ranks: 122 M, 0.47 s natively,
/// measured 2026-11-27, docs/speed.md). The CLI has no such limit.
pub const PER_BATCH_CELLS: usize = 80_000_000;

/// Why a per-batch planner is not replayed on `work` and `topology`, if
/// it is too large (see [`PER_BATCH_CELLS`]).
pub(crate) fn too_large_per_batch(work: &Workload, topology: Topology) -> Option<String> {
    let t = work.trace();
    let d = topology.num_gpus();
    let cells = t
        .num_batches()
        .saturating_mul(t.num_layers())
        .saturating_mul(d)
        .saturating_mul(t.num_experts());
    let (weighted, what) = match work.num_sources() {
        None => (cells, String::new()),
        Some(s) => (
            cells.saturating_mul(d.saturating_add(s)) / d.max(1),
            format!(" with {s} sources' counts"),
        ),
    };
    (weighted > PER_BATCH_CELLS).then(|| {
        format!(
            "re-placed every batch, not replayed here for {} batches × {} layers × {d} GPUs × {} experts{what} (over {} M cells: seconds per cluster change); fewer batches or GPUs, or the CLI (`moeplan compare`)",
            t.num_batches(),
            t.num_layers(),
            t.num_experts(),
            PER_BATCH_CELLS / 1_000_000
        )
    })
}

/// `per batch, libra-rebalance`: what a per-batch plan's label says.
pub(crate) fn schedule_phrase(rule: &str) -> String {
    format!("per batch, {rule}")
}

/// `f` measured by the judge's replay `r` under another rule than `even`:
/// its balance, per-layer and per-batch series and pair traffic.
pub(crate) fn replayed(f: &mut PlanFigures, r: &moeplan::judge::Replay) {
    f.balancedness = r.balancedness;
    f.imbalance_ratio = r.imbalance_ratio;
    f.per_layer.clone_from(&r.per_layer);
    f.per_batch_imbalance
        .clone_from(&r.per_batch_imbalance_ratio);
    f.traffic = PairTraffic::from(&r.traffic);
}

pub(crate) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}
