//! One trace on one cluster, planned every way, ready to be drawn.
//!
//! The planner page and the JavaScript API show the same things: every
//! registered planner that reads the loads side by side (BASE, EPLB, CRAFT
//! — [`PLANNERS`](moeplan::planners::PLANNERS) in order), per-layer
//! balancedness, the GPU × layer load map, the balancedness-vs-R curve and
//! one layer's placement. Building a [`Workspace`] does the expensive part
//! once per trace and cluster (each planner's [`Planner::prepare`] —
//! CRAFT's benefit table —, the plans at their default budgets, the
//! replays); [`Workspace::view`] answers a budget or layer change in about a
//! millisecond. All figures are in-sample on the workspace's trace.
//!
//! The budget a view asks for moves the planners whose budget is in
//! replicas per GPU (the slider's unit, [`Unit::ReplicasPerGpu`]: CRAFT);
//! the others stay at their defaults (EPLB: one slot per GPU more than the
//! experts need). The first planner with such a budget and a curve is the
//! *focus*: the curve, the load map, the layer view and the export are its.
//!
//! This is the page's view model: pure computation over the core's public
//! API, shared by the two front ends that draw it — the app's worker and
//! the JavaScript facade. The core does not know it exists.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
// A trace from the user never panics the page's worker: failures are
// `Error`s, as in the core (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

mod grace;
mod serving;
mod state;
mod view;

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use grace::{GroupingView, RatioPoint};
use moeplan::Workload;
use moeplan::data::model;
use moeplan::data::plan::Plan;
use moeplan::data::topology::Topology;
use moeplan::data::trace::LoadTrace;
use moeplan::error::{Error, Result};
use moeplan::formats::PlanFormat;
use moeplan::formats::plan_json::PlanMeta;
use moeplan::judge::cost::{Prediction, Pricing};
use moeplan::judge::eval::per_batch_imbalance;
use moeplan::judge::{CostModel, Rule, Served, Strategy, price, simulate_pairs};
use moeplan::planners::eplb::GROUPS;
use moeplan::planners::grace::{Grace, GraceAnalysis, GraceOptions};
use moeplan::planners::registry::{
    CurvePoint, Needs, Planner, PlannerId, Prepared, Settings, Unit, Value, prepare, registry,
};
pub use serving::{ReplanMark, ServingAsk, ServingView, SweepPoint, sweep_intervals};
pub use state::PER_BATCH_CELLS;
use state::{
    Entry, Fixed, Measured, Scheduled, State, figures, plan_at_default, shown, slider_figures,
    too_large_per_batch,
};
pub use view::{Export, LayerView, PairTraffic, PlanFigures, PlannerNote, View};

/// The cluster and planner settings that need a new [`Workspace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    /// Nodes.
    pub nodes: usize,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// Router expert groups for EPLB's hierarchical policy.
    pub groups: usize,
}

/// A trace planned on a cluster.
#[derive(Debug, Clone)]
pub struct Workspace {
    work: Workload,
    topology: Topology,
    cluster: Cluster,
    summed: ndarray::Array2<f64>,
    /// Every planner shown, in registry order.
    entries: Vec<Entry>,
    /// Index in `entries` of the focus (CRAFT).
    focus: usize,
    curve: Vec<CurvePoint>,
    auto_r: usize,
    cost: CostModel,
    /// Every plan's traffic under `even` when tokens arrive evenly (the
    /// closed form: it does not depend on the plan).
    even_traffic: Option<PairTraffic>,
    /// With sources (per-source counts or token routes): every batch as
    /// one ([`Workload::one_batch`]). Under `even` a plan's pair traffic
    /// is this one batch's, replayed in one step per layer instead of one
    /// per batch and layer: what keeps a budget change on token routes
    /// within a frame. Shared with the next cluster's workspace.
    one_batch: Option<Arc<Workload>>,
    /// GRACE as prepared, when it grouped by affinity (token routes): the
    /// page's GRACE views read its groups and curves.
    grace: Option<Arc<Grace>>,
    /// GRACE's cluster-independent part (affinity, spectral embeddings),
    /// handed on to the next cluster's workspace by
    /// [`Workspace::of_workload_reusing`].
    grace_analysis: Option<Arc<GraceAnalysis>>,
    /// The last layer's [`GroupingView`]: a budget change asks for the same
    /// layer again, and the affinity is O(T · k²) to count.
    grouping: Arc<Mutex<Option<(usize, GroupingView)>>>,
    /// The budgeted plans' imbalance per batch under `even`, by planner and
    /// budget, last computed: a replay a budget change does not pay
    /// ([`Workspace::view_with_batches`] fills it).
    batches: Arc<Mutex<Vec<KeptSeries>>>,
    /// The workload's mean batch (every batch's counts averaged, tokens
    /// arriving evenly): what a static plan is priced on, so a budget
    /// change prices one batch, not all.
    mean: Workload,
    /// Predictions of the plans the budget does not move, by planner, rule
    /// and pricing: kept until one of them changes.
    priced: Arc<Mutex<Vec<KeptPrediction>>>,
    /// The options the static planners were prepared with beyond the
    /// cluster's groups (GRACE's non-uniformity ratio,
    /// [`Workspace::set_options`]); a cluster change keeps them.
    options: Settings,
    /// The workload as given when it has more source ranks than the
    /// cluster has GPUs: `work` is it with rank `r` on GPU `r mod D`
    /// ([`Workload::with_sources_on`]); [`Workspace::workload`] gives this
    /// one, so the next cluster starts from the ranks recorded.
    whole: Option<Workload>,
    /// The per-batch schedules replayed on this workspace (its workload,
    /// cluster and cost model), by planner and resolved options, the most
    /// recent last, at most [`KEPT_SCHEDULES`]: a return to options seen
    /// before (Libra's N 8 → 4 → 8, a predictor and back) shows them
    /// again without replaying every layer of every batch.
    schedules: Vec<KeptSchedule>,
}

/// Per-batch schedules a workspace keeps ([`Workspace::replan_scheduled`]):
/// the one shown and the two before it. A schedule holds a plan per batch
/// (the page's default: 64 batches × 58 layers × 64 GPUs, about 17 MB), so
/// the page keeps few.
pub const KEPT_SCHEDULES: usize = 3;

/// A per-batch planner's replayed schedule at its resolved options, and
/// what it noted when it prepared.
type KeptSchedule = (PlannerId, Settings, Arc<Scheduled>, Vec<String>);

/// A plan's prediction under a rule and pricing.
type KeptPrediction = (PlannerId, Rule, Pricing, Prediction);

/// A budgeted planner's per-batch series at one budget.
type KeptSeries = (PlannerId, Option<usize>, Vec<f64>);

/// Whether the page offers `rule`: every current engine rule of
/// [`Rule::ALL`] and the optimum, in that list's order (`even`, the
/// evaluator's split and the default, first). The legacy SGLang versions
/// and SGLang's dynamic rule are the CLI's; Libra's rebalancer is judged
/// with Libra's own schedule, not offered for every plan.
pub fn offered(rule: &Rule) -> bool {
    !rule.is_legacy() && !matches!(rule, Rule::SglangDynamic(_) | Rule::Libra { .. })
}

/// The dispatch rules the page offers ([`offered`]), in [`Rule::ALL`]'s order.
pub fn dispatch_rules() -> impl Iterator<Item = Rule> {
    Rule::ALL.into_iter().filter(offered)
}

/// The plan files the page exports, filtered from the core's one list
/// ([`PlanFormat::ALL`]): moeplan's own and SGLang's (the others are the
/// CLI's).
pub fn export_formats() -> impl Iterator<Item = PlanFormat> {
    PlanFormat::ALL
        .into_iter()
        .filter(|f| matches!(f, PlanFormat::Moeplan | PlanFormat::Sglang))
}

/// The offered rule named `name` ([`Rule::name`]).
///
/// ```
/// use moeplan_view::dispatch_rule;
/// assert_eq!(dispatch_rule("sglang-static")?.name(), "sglang-static");
/// assert!(dispatch_rule("bogus").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn dispatch_rule(name: &str) -> Result<Rule> {
    dispatch_rules().find(|r| r.name() == name).ok_or_else(|| {
        let names: Vec<&str> = dispatch_rules().map(|r| r.name()).collect();
        Error::Argument(format!(
            "unknown dispatch rule {name:?}: one of {}",
            names.join(", ")
        ))
    })
}

impl Workspace {
    /// Plans `trace` on `cluster`: every shown planner's preparation, the
    /// ones the budget does not move (BASE, EPLB) planned at their defaults
    /// and replayed.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let v = ws.view(Some(2), 0)?;
    /// assert_eq!((v.plans[2].name.as_str(), v.focus.as_str()), ("craft", "craft"));
    /// assert_eq!(v.plans[1].label, "EPLB +8");
    /// assert_eq!(v.heat.len(), 16);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(trace: LoadTrace, cluster: Cluster) -> Result<Workspace> {
        Workspace::with_progress(trace, cluster, |_| {})
    }

    /// [`Workspace::new`], naming each phase as it starts.
    pub fn with_progress(
        trace: LoadTrace,
        cluster: Cluster,
        phase: impl FnMut(&str),
    ) -> Result<Workspace> {
        Workspace::of_workload(Workload::new(trace), cluster, phase)
    }

    /// [`Workspace::with_progress`] for any workload: with token routes
    /// ([`Workload::from_tokens`]) GRACE groups by affinity, the view
    /// carries its [`GroupingView`], and every plan's traffic is replayed
    /// from the tokens' ranks (no closed form of even arrival).
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let ws = Workspace::of_workload(Workload::from_tokens(t, 128)?, Cluster { nodes: 2, gpus_per_node: 4, groups: 1 }, |_| {})?;
    /// let g = ws.view(Some(2), 3)?.grouping.unwrap();
    /// assert_eq!((g.order.len(), g.sizes.iter().sum::<usize>()), (64, 64));
    /// assert!(g.ratio.is_some() && !g.curve.is_empty());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn of_workload(
        work: Workload,
        cluster: Cluster,
        phase: impl FnMut(&str),
    ) -> Result<Workspace> {
        Workspace::of_workload_reusing(work, cluster, None, phase)
    }

    /// [`Workspace::of_workload`] that keeps from `previous` what does not
    /// depend on the cluster when it planned the same token routes: GRACE's
    /// affinity and the spectral clusterings it has done
    /// ([`GraceAnalysis`]), so a GPU or node change re-plans GRACE without
    /// counting the affinity or decomposing the whole layer again. The
    /// workspace is the same as [`Workspace::of_workload`]'s.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let c = |nodes, gpus_per_node| Cluster { nodes, gpus_per_node, groups: 1 };
    /// let first = Workspace::of_workload(work.clone(), c(2, 4), |_| {})?;
    /// let next = Workspace::of_workload_reusing(work.clone(), c(1, 8), Some(&first), |_| {})?;
    /// let fresh = Workspace::of_workload(work, c(1, 8), |_| {})?;
    /// assert_eq!(next.view(Some(2), 3)?, fresh.view(Some(2), 3)?);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn of_workload_reusing(
        work: Workload,
        cluster: Cluster,
        previous: Option<&Workspace>,
        phase: impl FnMut(&str),
    ) -> Result<Workspace> {
        let options = previous.map(|p| p.options.clone()).unwrap_or_default();
        Self::of_workload_deferring(work, cluster, previous, false, &options, phase)
    }

    /// [`Workspace::of_workload_reusing`], leaving the per-batch planners
    /// (Libra) unplanned when `defer_per_batch`: their schedules cost more
    /// than every static plan together (the page's default: ~0.5 s of a
    /// 0.7 s cluster change), so the page answers a cluster change with the
    /// static plans and asks [`Workspace::plan_pending`] for the rest next.
    /// GRACE waits with them when it groups by token routes and the kept
    /// analysis has not clustered this cluster
    /// ([`GraceAnalysis::is_warm`]): a first change of nodes costs its
    /// eigendecompositions, up to 0.7 s on the default.
    /// The static planners are prepared with `options` (as
    /// [`Workspace::set_options`] takes them; refused likewise).
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{planners::registry::Settings, synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let work = moeplan::Workload::new(t);
    /// let c = Cluster { nodes: 1, gpus_per_node: 8, groups: 1 };
    /// let mut ws = Workspace::of_workload_deferring(work.clone(), c, None, true, &Settings::new(), |_| {})?;
    /// let names = |ws: &Workspace| -> Vec<String> {
    ///     ws.view(Some(2), 0).unwrap().plans.iter().map(|p| p.name.clone()).collect()
    /// };
    /// assert!(ws.has_pending() && !names(&ws).contains(&"libra".to_string()));
    /// assert!(ws.plan_pending(&Settings::new(), |_| {})?);
    /// let whole = Workspace::of_workload(work.clone(), c, |_| {})?;
    /// assert!(!ws.has_pending() && names(&ws).contains(&"libra".to_string()));
    /// assert_eq!(ws.view(Some(2), 0)?, whole.view(Some(2), 0)?);
    /// let libra = Settings::new().with("extra_experts_per_gpu", moeplan::planners::Value::Count(2))?;
    /// assert!(Workspace::of_workload_deferring(work, c, None, true, &libra, |_| {}).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn of_workload_deferring(
        work: Workload,
        cluster: Cluster,
        previous: Option<&Workspace>,
        defer_per_batch: bool,
        options: &Settings,
        mut phase: impl FnMut(&str),
    ) -> Result<Workspace> {
        let topology = Topology::new(cluster.nodes, cluster.gpus_per_node)?;
        changed_static_options(options, &Settings::new())?;
        // More source ranks than GPUs: rank r sends from GPU r mod D (the
        // simulator needs a GPU per source); the workload as given is kept
        // for the next cluster.
        let d = topology.num_gpus();
        let (work, whole) = match work.num_sources() {
            Some(s) if s > d => (work.with_sources_on(d)?, Some(work)),
            _ => (work, None),
        };
        // Reused only for the very same routes: the analysis is theirs
        // (ranks aside), the summed batch theirs and their ranks' (folded
        // onto as many GPUs, or not folded); neither depends on the
        // cluster otherwise.
        let same_routes = previous.filter(|p| {
            p.workload().tokens().is_some()
                && p.workload().tokens() == whole.as_ref().unwrap_or(&work).tokens()
        });
        let folded_on = |w: &Option<Workload>, d: usize| w.as_ref().map(|_| d);
        let same_sources = same_routes
            .filter(|p| folded_on(&p.whole, p.topology.num_gpus()) == folded_on(&whole, d));
        let mut grace_analysis = same_routes.and_then(|p| p.grace_analysis.clone());
        let one_batch = match (
            same_sources.and_then(|p| p.one_batch.clone()),
            work.num_sources(),
        ) {
            (Some(kept), _) => Some(kept),
            (None, Some(_)) => Some(Arc::new(work.one_batch()?)),
            (None, None) => None,
        };
        let trace = work.trace();
        if cluster.groups == 0 {
            return Err(Error::Argument("expert groups must be at least 1".into()));
        }
        let options = options.clone();
        let settings = options
            .clone()
            .with(GROUPS.name, Value::Count(cluster.groups))?;
        let cost = trace
            .model()
            .and_then(|m| model::preset(m).ok())
            .map_or_else(CostModel::default, CostModel::for_model);
        let mut entries = Vec::new();
        let mut focus = None;
        let mut curve = Vec::new();
        let mut auto_r = 0;
        let mut grace_ready = None;
        // GRACE's eigendecompositions on a cluster whose clusterings the
        // kept analysis lacks (a first change of nodes) take longer than a
        // change may: deferred with the per-batch planners.
        let grace_cold = defer_per_batch
            && work.tokens().is_some()
            && grace_analysis.as_ref().is_none_or(|a| {
                !a.is_warm(
                    topology,
                    &GraceOptions::from_settings(&settings).unwrap_or_default(),
                )
            });
        for planner in registry().iter().copied().filter(|p| shown(*p, &work)) {
            let deferred = (planner.per_batch() && too_large_per_batch(&work, topology).is_none())
                || (planner.id() == grace::ID && grace_cold);
            if defer_per_batch && deferred {
                entries.push(Entry {
                    id: planner.id(),
                    display: planner.display(),
                    state: State::Pending,
                    notes: Vec::new(),
                });
                continue;
            }
            phase(&planner.preparing());
            let slider = planner.budget_unit() == Some(Unit::ReplicasPerGpu);
            let prepared = prepare_shown(
                planner,
                &work,
                topology,
                &settings,
                &mut grace_analysis,
                &mut grace_ready,
            );
            let notes = prepared.as_ref().map(|p| p.notes()).unwrap_or_default();
            let state = match prepared {
                Ok(ready) if slider => {
                    if focus.is_none() {
                        phase(&format!("tracing {}'s curve", planner.display()));
                        if let Some(c) = ready.curve() {
                            curve = c;
                            auto_r = ready.auto_budget()?.unwrap_or(0);
                            focus = Some(entries.len());
                        }
                    }
                    State::Slider(Arc::from(ready))
                }
                Ok(ready) => plan_at_default(planner, ready.as_ref(), &work, topology, &cost),
                // The budget's planner is what the page draws: without it
                // there is nothing to show.
                Err(e) if slider => return Err(e),
                Err(e) => State::Failed(e.to_string()),
            };
            entries.push(Entry {
                id: planner.id(),
                display: planner.display(),
                state,
                notes,
            });
        }
        let focus = focus.ok_or_else(|| {
            Error::Argument("no registered planner takes a budget in replicas per GPU".into())
        })?;
        let summed = work.trace().summed();
        // Even arrival under `even`: each of the D GPUs sends 1 / D of every
        // expert's pairs, wherever its copies are (`moeplan::judge`, traffic.rs).
        let even_traffic = work.num_sources().is_none().then(|| {
            let (d, g) = (topology.num_gpus() as f64, topology.gpus_per_node() as f64);
            let pairs = summed.sum();
            let cross = pairs * (d - g) / d;
            PairTraffic {
                pairs,
                local: pairs / d,
                intra_node: pairs * (g - 1.0) / d,
                cross_node: cross,
                cross_node_bytes: cross * cost.hidden as f64 * cost.bytes_per_activation as f64,
            }
        });
        let mean = Workload::new(work.trace().mean_batch());
        Ok(Workspace {
            one_batch,
            mean,
            priced: Arc::default(),
            summed,
            work,
            topology,
            cluster,
            entries,
            focus,
            curve,
            auto_r,
            cost,
            even_traffic,
            grace: grace_ready,
            grace_analysis,
            grouping: Arc::default(),
            batches: Arc::default(),
            options,
            whole,
            schedules: Vec::new(),
        })
    }

    /// The workload as given: the trace, and its token routes or sources
    /// when it has them, with the ranks recorded. On a cluster with fewer
    /// GPUs than source ranks the plans are made and judged with rank `r`
    /// on GPU `r mod D` ([`Workload::with_sources_on`]), and the view's
    /// notes say so.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{synth::generator, data::model, data::Workload};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// assert!(ws.workload().tokens().is_none());
    /// // 8 sequences of 64 tokens, on 8 ranks, planned for 4 GPUs.
    /// let cfg = TokenGenConfig { sequence_tokens: 64, ..TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512) };
    /// let work = Workload::from_tokens(generate_tokens(&cfg)?, 128)?;
    /// let c = Cluster { nodes: 2, gpus_per_node: 2, groups: 1 };
    /// let ws = Workspace::of_workload(work.clone(), c, |_| {})?;
    /// assert_eq!(ws.workload(), &work);
    /// let v = ws.view(Some(2), 0)?;
    /// assert!(v.notes.iter().any(|n| n.contains("8 source ranks on 4 GPUs")), "{:?}", v.notes);
    /// let folded = Workspace::of_workload(work.with_sources_on(4)?, c, |_| {})?;
    /// assert_eq!(v.plans, folded.view(Some(2), 0)?.plans);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn workload(&self) -> &Workload {
        self.whole.as_ref().unwrap_or(&self.work)
    }

    /// The static planners' options in use ([`Workspace::set_options`]).
    pub fn options(&self) -> &Settings {
        &self.options
    }

    /// The trace.
    pub fn trace(&self) -> &LoadTrace {
        self.work.trace()
    }

    /// Measures CRAFT's layer `layer` ahead of time for `cluster` with this
    /// workspace's options ([`moeplan::planners::craft::warm`]): a change
    /// to that cluster then reads CRAFT's benefit table instead of
    /// measuring it, the most of a cluster change's work.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let c = |nodes, gpus_per_node| Cluster { nodes, gpus_per_node, groups: 1 };
    /// let first = Workspace::new(t.clone(), c(1, 8))?;
    /// for layer in 0..first.trace().num_layers() {
    ///     first.warm_craft(c(1, 4), layer)?;
    /// }
    /// let next = Workspace::of_workload(first.workload().clone(), c(1, 4), |_| {})?;
    /// // The same trace made again keeps nothing measured: measured afresh.
    /// let again = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// assert_eq!(next.view(Some(2), 0)?, Workspace::new(again, c(1, 4))?.view(Some(2), 0)?);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn warm_craft(&self, cluster: Cluster, layer: usize) -> Result<()> {
        let topology = Topology::new(cluster.nodes, cluster.gpus_per_node)?;
        let settings = self
            .options
            .clone()
            .with(GROUPS.name, Value::Count(cluster.groups))?;
        moeplan::planners::craft::warm(self.trace(), topology, &settings, layer)
    }

    /// The cluster's shape.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The settings this workspace was built for.
    pub fn cluster(&self) -> Cluster {
        self.cluster
    }

    /// The focus planner's (CRAFT's) plan for `replicas_per_gpu` (`None`:
    /// automatic).
    pub fn focus_plan(&self, replicas_per_gpu: Option<usize>) -> Result<Plan> {
        Ok(self.focus()?.plan(replicas_per_gpu)?.plan)
    }

    /// The focus planner: the one the budget moves, whose plan
    /// [`Workspace::focus_plan`] and [`Workspace::export`] give.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// assert_eq!(ws.focus_id().map(|id| id.as_str()), Some("craft"));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn focus_id(&self) -> Option<PlannerId> {
        self.entries.get(self.focus).map(|e| e.id)
    }

    /// The planners shown, in order, with why any of them could not plan.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 6, groups: 1 })?;
    /// let ids: Vec<String> = ws.planners().iter().map(|(id, _)| id.to_string()).collect();
    /// assert_eq!(ids[..3], ["base", "eplb", "craft"]); // then any planner added after CRAFT
    /// assert!(ws.planners()[0].1.is_some()); // 64 experts do not fill 6 GPUs evenly
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn planners(&self) -> Vec<(PlannerId, Option<&str>)> {
        self.entries
            .iter()
            .map(|e| match &e.state {
                State::Failed(why) => (e.id, Some(why.as_str())),
                _ => (e.id, None),
            })
            .collect()
    }

    /// What the planners shown say beside their plans, in their order.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// // Counts only: GRACE has no affinity to group by, and says so.
    /// let grace = ws.planner_notes().into_iter().find(|n| n.name == "grace").unwrap();
    /// assert!(grace.text.contains("no token routes"));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn planner_notes(&self) -> Vec<PlannerNote> {
        self.entries
            .iter()
            .flat_map(|e| {
                e.notes.iter().map(|text| PlannerNote {
                    name: e.id.to_string(),
                    text: text.clone(),
                })
            })
            .collect()
    }

    fn focus(&self) -> Result<&Arc<dyn Prepared>> {
        match self.entries.get(self.focus).map(|e| &e.state) {
            Some(State::Slider(ready)) => Ok(ready),
            _ => Err(Error::Argument(
                "the workspace has no budgeted planner".into(),
            )),
        }
    }

    /// The figures for one budget and the placement of layer index `layer`,
    /// under the evaluator's even split.
    pub fn view(&self, replicas_per_gpu: Option<usize>, layer: usize) -> Result<View> {
        self.view_under(replicas_per_gpu, layer, Rule::Even)
    }

    /// [`Workspace::view`] with every plan's balance and traffic measured by
    /// [`simulate`](moeplan::judge::simulate) under `rule`. Under [`Rule::Even`] the figures are
    /// exactly [`Workspace::view`]'s (CRAFT's from its preparation, the
    /// others' from [`evaluate`]) and the traffic is the closed form of even
    /// arrival (no replay: a budget change stays as cheap as before). A plan the
    /// budget does not move is replayed once per rule asked for in a row.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 2, gpus_per_node: 4, groups: 1 })?;
    /// let v = ws.view_under(Some(2), 0, Rule::Optimal)?;
    /// assert_eq!(v.rule, "optimal");
    /// let t = &v.plans[2].traffic;
    /// assert!((t.local + t.intra_node + t.cross_node - t.pairs).abs() < 1e-6 * t.pairs);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_under(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, false, None)
    }

    /// [`Workspace::view_under`] (with the per-batch series when
    /// `batches`) with every plan priced on `pricing`'s hardware
    /// ([`PlanFigures::predicted`]), each speedup over BASE's. A static
    /// plan is priced on the workload's mean batch — one batch, so a
    /// budget change stays within a few milliseconds; `moeplan eval
    /// --hardware` prices every batch — and a per-batch plan (Libra) on
    /// every batch, since its copies change from batch to batch. The plans
    /// the budget does not move are priced once per rule and pricing.
    ///
    /// ```
    /// use moeplan::judge::{Rule, cost::Pricing};
    /// use moeplan::{data::{hardware, model}, synth::generator};
    /// use moeplan_view::{Cluster, Workspace};
    /// let m = model::preset("olmoe")?;
    /// let ws = Workspace::new(generator::generate(&generator::GenConfig::new(m, 4))?, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let p = Pricing::new(hardware::preset("h100-ib-ndr")?, m);
    /// let v = ws.view_priced(Some(2), 0, Rule::Even, false, Some(&p))?;
    /// let base = v.plans[0].predicted.as_ref().unwrap();
    /// assert_eq!((v.plans[0].name.as_str(), base.speedup), ("base", Some(1.0)));
    /// assert!(v.plans[2].predicted.as_ref().unwrap().step_ms > 0.0);
    /// assert!(ws.view(Some(2), 0)?.plans[2].predicted.is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_priced(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
        batches: bool,
        pricing: Option<&Pricing>,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, batches, pricing)
    }

    /// A static plan priced on the mean batch.
    fn predict(&self, plan: &Plan, rule: Rule, pricing: &Pricing) -> Result<Option<Prediction>> {
        let served = Served::Plan { plan, rule };
        price(&self.mean, served, &self.cost, pricing).map(Some)
    }

    /// A prediction kept for (planner, rule, pricing), else made and kept.
    fn kept_prediction(
        &self,
        id: PlannerId,
        rule: Rule,
        pricing: &Pricing,
        make: impl FnOnce() -> Result<Option<Prediction>>,
    ) -> Result<Option<Prediction>> {
        if let Ok(kept) = self.priced.lock() {
            if let Some((.., p)) = kept
                .iter()
                .find(|(i, r, pr, _)| *i == id && *r == rule && pr == pricing)
            {
                return Ok(Some(p.clone()));
            }
        }
        let made = make()?;
        if let (Some(p), Ok(mut kept)) = (&made, self.priced.lock()) {
            kept.retain(|(i, ..)| *i != id);
            kept.push((id, rule, pricing.clone(), p.clone()));
        }
        Ok(made)
    }

    /// [`Workspace::view_under`] with every plan's imbalance per batch
    /// ([`PlanFigures::per_batch_imbalance`]). A view without it leaves a
    /// plan's series out under `even` unless it was computed before (the
    /// planners' own figures are per layer, and a series takes a replay:
    /// about 7 ms natively for DeepSeek-V3's 64 batches on 64 GPUs, most of
    /// a budget change), so the page asks for them after a new trace or
    /// cluster and once the slider rests.
    ///
    /// ```
    /// use moeplan::judge::Rule;
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let craft = |v: moeplan_view::View| v.plans.into_iter().find(|p| p.name == "craft").unwrap();
    /// assert!(craft(ws.view(Some(3), 0)?).per_batch_imbalance.is_empty());
    /// assert_eq!(craft(ws.view_with_batches(Some(3), 0, Rule::Even)?).per_batch_imbalance.len(), 4);
    /// assert_eq!(craft(ws.view(Some(3), 0)?).per_batch_imbalance.len(), 4); // kept
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn view_with_batches(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
    ) -> Result<View> {
        self.view_inner(replicas_per_gpu, layer, rule, true, None)
    }

    fn view_inner(
        &self,
        replicas_per_gpu: Option<usize>,
        layer: usize,
        rule: Rule,
        batches: bool,
        pricing: Option<&Pricing>,
    ) -> Result<View> {
        let focus = self.focus()?.plan(replicas_per_gpu)?;
        let l = self.trace().num_layers();
        if layer >= l {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside 0..{l}"
            )));
        }
        let mut plans = Vec::new();
        let mut notes = Vec::new();
        if let Some(s) = self.whole.as_ref().and_then(Workload::num_sources) {
            let d = self.topology.num_gpus();
            notes.push(format!(
                "the trace's {s} source ranks on {d} GPUs: rank r sends from GPU r mod {d}, as if {} ranks shared a GPU",
                s.div_ceil(d)
            ));
        }
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            match &entry.state {
                State::Failed(e) => notes.push(format!("{}: {e}", entry.display)),
                State::Pending if planner.per_batch() => notes.push(format!(
                    "{}: re-placing every batch for this cluster, shown next",
                    entry.display
                )),
                State::Pending => notes.push(format!(
                    "{}: grouping experts by co-activation for this cluster, shown next",
                    entry.display
                )),
                State::Fixed(fixed) => {
                    let mut f = figures(planner, fixed.budget, &fixed.report);
                    f.per_batch_imbalance = self.fixed_batches(fixed, batches)?;
                    match (rule, self.even_traffic) {
                        (Rule::Even, Some(t)) => f.traffic = t,
                        (Rule::Even, None) => f.traffic = self.fixed_even_traffic(fixed)?,
                        _ => self.fixed_under(fixed, rule)?.apply(&mut f),
                    }
                    if let Some(p) = pricing {
                        f.predicted = self.kept_prediction(entry.id, rule, p, || {
                            self.predict(&fixed.plan, rule, p)
                        })?;
                    }
                    plans.push(f);
                }
                State::Scheduled(s) => {
                    let mut f = s.figures(planner);
                    if let Some(p) = pricing {
                        // Under its own rule, whatever the view's.
                        f.predicted = self.kept_prediction(entry.id, rule, p, || {
                            let served = Served::Schedule {
                                base: &s.base,
                                schedule: &s.schedule,
                            };
                            price(&self.work, served, &self.cost, p).map(Some)
                        })?;
                    }
                    plans.push(f);
                }
                State::Slider(ready) => {
                    // The focus is planned once above, for the charts too.
                    let other;
                    let planned = if i == self.focus {
                        &focus
                    } else {
                        other = ready.plan(replicas_per_gpu)?;
                        &other
                    };
                    let mut f = self.slider_under(planner, planned, rule, batches)?;
                    if let Some(p) = pricing {
                        f.predicted = self.predict(&planned.plan, rule, p)?;
                    }
                    plans.push(f);
                }
            }
        }
        // Every speedup over BASE's throughput, when BASE is shown.
        let base = plans
            .iter()
            .find(|f| f.name == "base")
            .and_then(|f| f.predicted.clone());
        if let Some(base) = base {
            for p in plans.iter_mut().filter_map(|f| f.predicted.as_mut()) {
                p.compare_with(&base);
            }
        }
        Ok(View {
            topology: self.topology,
            layer_ids: self.trace().layer_ids().to_vec(),
            batches: self.trace().num_batches(),
            rule: rule.name().to_string(),
            plans,
            notes,
            planner_notes: self.planner_notes(),
            focus: self
                .entries
                .get(self.focus)
                .map(|e| e.id.to_string())
                .unwrap_or_default(),
            replicas_per_gpu: focus.budget.unwrap_or(0),
            auto_replicas_per_gpu: self.auto_r,
            curve: self.curve.clone(),
            heat: self.heat(&focus.plan),
            layer: self.layer_view(&focus.plan, layer),
            grouping: self.grouping_view(layer)?,
        })
    }

    /// The focus planner's (CRAFT's) plan for a budget in the project's JSON
    /// or SGLang's `--init-expert-location` JSON (`format`: `moeplan` or
    /// `sglang`).
    /// SGLang needs the same slot count on every GPU in every layer; a CRAFT
    /// plan that varies is padded to the closest such plan
    /// ([`Plan::padded_to_uniform`]) and the export says so.
    pub fn export(&self, replicas_per_gpu: Option<usize>, format: &str) -> Result<Export> {
        let Some(file) = export_formats().find(|f| f.name() == format) else {
            let names: Vec<&str> = export_formats().map(PlanFormat::name).collect();
            return Err(Error::Argument(format!(
                "unknown export format {format:?}: {}",
                names.join(" or ")
            )));
        };
        let plan = self.focus_plan(replicas_per_gpu)?;
        let (plan, meta, note) = match file {
            PlanFormat::Sglang if plan.uniform_slots_per_gpu().is_none() => {
                let padded = plan.padded_to_uniform(self.summed.view())?;
                let added = padded.summary().replicas - plan.summary().replicas;
                let per_gpu = padded.uniform_slots_per_gpu().unwrap_or(0);
                let note = format!(
                    "SGLang needs the same slot count on every GPU in every layer: padded to {per_gpu} slots per GPU with {added} more replicas (the hottest experts per copy)"
                );
                (padded, self.export_meta(file, replicas_per_gpu), Some(note))
            }
            _ => (plan, self.export_meta(file, replicas_per_gpu), None),
        };
        Ok(Export {
            text: file.write(&plan, &meta)?,
            note,
        })
    }

    /// What an exported file records: moeplan's JSON the model's layers
    /// and the focus planner's options; SGLang's rows only a layer count
    /// the trace knows (an assumed one could place MoE positions wrongly).
    fn export_meta(&self, file: PlanFormat, replicas_per_gpu: Option<usize>) -> PlanMeta {
        match file {
            PlanFormat::Moeplan => PlanMeta {
                model_layers: Some(self.trace().model_layers()),
                model: self.trace().model().map(str::to_string),
                holdout: None,
                options: self.focus_options(replicas_per_gpu),
            },
            _ => PlanMeta {
                model_layers: self.trace().known_model_layers(),
                ..PlanMeta::default()
            },
        }
    }

    /// The focus planner's options for a budget (the rest at their
    /// defaults, as the workspace plans it), as a plan file records them.
    fn focus_options(&self, replicas_per_gpu: Option<usize>) -> Option<Settings> {
        let spec = focus_planner()?.spec();
        let budget = spec
            .options
            .iter()
            .find(|o| matches!(o.kind, moeplan::planners::Kind::Budget(_)))?;
        let value = replicas_per_gpu.map_or(Value::Auto, Value::Count);
        let set = Settings::new().with(budget.name, value).ok()?;
        Some(set.resolved_for(spec))
    }

    /// A plan's pair traffic under `even` on a workload with sources: the
    /// replay of every batch summed into one ([`Workspace::one_batch`]);
    /// the sum of the batches' to rounding.
    fn sources_even_traffic(&self, plan: &Plan) -> Result<PairTraffic> {
        let work = self.one_batch.as_deref().unwrap_or(&self.work);
        let r = simulate_pairs(work, &Strategy::fixed(plan.clone(), Rule::Even), &self.cost)?;
        Ok(PairTraffic::from(&r.traffic))
    }

    /// [`Workspace::sources_even_traffic`] of a fixed plan, kept.
    fn fixed_even_traffic(&self, fixed: &Fixed) -> Result<PairTraffic> {
        if let Ok(kept) = fixed.even_traffic.lock() {
            if let Some(t) = *kept {
                return Ok(t);
            }
        }
        let t = self.sources_even_traffic(&fixed.plan)?;
        if let Ok(mut kept) = fixed.even_traffic.lock() {
            *kept = Some(t);
        }
        Ok(t)
    }

    fn measure(&self, plan: &Plan, rule: Rule) -> Result<Measured> {
        // The view shows pair traffic, not token messages: left out.
        let r = simulate_pairs(&self.work, &Strategy::fixed(plan.clone(), rule), &self.cost)?;
        Ok(Measured {
            balancedness: r.balancedness,
            imbalance_ratio: r.imbalance_ratio,
            per_layer: r.per_layer,
            per_batch: r.per_batch_imbalance_ratio,
            traffic: PairTraffic::from(&r.traffic),
        })
    }

    /// A fixed plan under `rule`, replayed once per rule (the page offers
    /// a handful; each kept is a few figures per layer and batch).
    fn fixed_under(&self, fixed: &Fixed, rule: Rule) -> Result<Measured> {
        if let Ok(under) = fixed.under.lock() {
            if let Some((_, m)) = under.iter().find(|(r, _)| *r == rule) {
                return Ok(m.clone());
            }
        }
        let m = self.measure(&fixed.plan, rule)?;
        if let Ok(mut under) = fixed.under.lock() {
            under.push((rule, m.clone()));
        }
        Ok(m)
    }

    /// A budgeted plan's figures under `rule` (under `even`: its planner's
    /// own figures, and the closed form's traffic).
    fn slider_under(
        &self,
        planner: &dyn Planner,
        planned: &moeplan::planners::Planned,
        rule: Rule,
        batches: bool,
    ) -> Result<PlanFigures> {
        let mut f = slider_figures(planner, planned, self.trace())?;
        match (rule, self.even_traffic) {
            (Rule::Even, Some(t)) => {
                f.traffic = t;
                f.per_batch_imbalance = self.slider_batches(planner.id(), planned, batches)?;
            }
            (Rule::Even, None) => {
                // Balance under `even` is the evaluator's whatever the
                // sources; the traffic is the one summed batch's.
                f.traffic = self.sources_even_traffic(&planned.plan)?;
                f.per_batch_imbalance = self.slider_batches(planner.id(), planned, batches)?;
            }
            _ => self.measure(&planned.plan, rule)?.apply(&mut f),
        }
        Ok(f)
    }

    /// A fixed plan's series under `even`: kept once computed, computed when
    /// `compute`, else empty.
    fn fixed_batches(&self, fixed: &Fixed, compute: bool) -> Result<Vec<f64>> {
        if let Ok(kept) = fixed.per_batch.lock() {
            if let Some(v) = kept.as_ref() {
                return Ok(v.clone());
            }
        }
        if !compute {
            return Ok(Vec::new());
        }
        let v = per_batch_imbalance(self.trace(), &fixed.plan)?;
        if let Ok(mut kept) = fixed.per_batch.lock() {
            *kept = Some(v.clone());
        }
        Ok(v)
    }

    /// A budgeted plan's series under `even`: the last one computed for
    /// this planner and budget, else computed when `compute`, else empty.
    fn slider_batches(
        &self,
        id: PlannerId,
        planned: &moeplan::planners::Planned,
        compute: bool,
    ) -> Result<Vec<f64>> {
        if let Ok(kept) = self.batches.lock() {
            if let Some((_, _, v)) = kept
                .iter()
                .find(|(i, b, _)| *i == id && *b == planned.budget)
            {
                return Ok(v.clone());
            }
        }
        if !compute {
            return Ok(Vec::new());
        }
        let v = per_batch_imbalance(self.trace(), &planned.plan)?;
        if let Ok(mut kept) = self.batches.lock() {
            kept.retain(|(i, _, _)| *i != id);
            kept.push((id, planned.budget, v.clone()));
        }
        Ok(v)
    }

    /// Re-plans the per-batch planners (Libra) with `settings` (their
    /// options: Libra's `N`, predictor, …), leaving every other plan as it
    /// is — the budget's planner is not touched. On an error (a path-table
    /// predictor on counts) nothing changes.
    ///
    /// ```
    /// use moeplan::planners::{Settings, Value};
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let mut ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let before = ws.view(None, 0)?.plans.into_iter().find(|p| p.name == "libra").unwrap();
    /// ws.replan_scheduled(&Settings::new().with("extra_experts_per_gpu", Value::Count(1))?)?;
    /// let after = ws.view(None, 0)?.plans.into_iter().find(|p| p.name == "libra").unwrap();
    /// assert!(after.imbalance_ratio > before.imbalance_ratio); // fewer copies
    /// let path = Settings::new().with("predictor", Value::Word("path-table".into()))?;
    /// assert!(ws.replan_scheduled(&path).is_err()); // counts only: no token paths
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn replan_scheduled(&mut self, settings: &Settings) -> Result<()> {
        self.replan_per_batch(settings, false, |_| {}).map(|_| ())
    }

    /// Whether a per-batch planner waits for [`Workspace::plan_pending`]
    /// (see [`Workspace::of_workload_deferring`]).
    pub fn has_pending(&self) -> bool {
        self.entries
            .iter()
            .any(|e| matches!(e.state, State::Pending))
    }

    /// Plans the planners left pending: GRACE with the workspace's options,
    /// the per-batch planners with `settings` (their options); whether
    /// there were any. On an error the per-batch planners are unchanged
    /// (GRACE, planned first, keeps its plan: what a new workspace holds).
    pub fn plan_pending(
        &mut self,
        settings: &Settings,
        mut phase: impl FnMut(&str),
    ) -> Result<bool> {
        if !self.has_pending() {
            return Ok(false);
        }
        self.plan_pending_static(&mut phase)?;
        self.replan_per_batch(settings, true, phase).map(|_| true)
    }

    /// Plans the static planners left pending (GRACE on a cluster its
    /// analysis had not clustered) as a new workspace would have.
    fn plan_pending_static(&mut self, phase: &mut impl FnMut(&str)) -> Result<()> {
        let settings = self
            .options
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        for i in 0..self.entries.len() {
            let Some(entry) = self.entries.get(i) else {
                continue;
            };
            let planner = entry.id.planner()?;
            if planner.per_batch() || !matches!(entry.state, State::Pending) {
                continue;
            }
            phase(&planner.preparing());
            let (state, notes) = plan_static(
                planner,
                (&self.work, self.topology, &self.cost),
                &settings,
                &mut self.grace_analysis,
                &mut self.grace,
            );
            if let Some(entry) = self.entries.get_mut(i) {
                entry.state = state;
                entry.notes = notes;
            }
            self.grouping = Arc::default();
        }
        Ok(())
    }

    /// Re-plans the static planners that read an option `options` sets
    /// or the last call set (GRACE's `nonuniformity`), keeping the others'
    /// plans and GRACE's analysis; a cluster change keeps these options.
    /// Options of the budget's planner or of a per-batch planner are
    /// refused (those have their own calls), and then nothing changes; a
    /// planner that cannot plan with the options says why in its row, as
    /// in a new workspace. Whether anything changed.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::planners::{Settings, Value};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let c = Cluster { nodes: 2, gpus_per_node: 4, groups: 1 };
    /// let mut ws = Workspace::of_workload(work.clone(), c, |_| {})?;
    /// let auto = Settings::new().with("nonuniformity", Value::Word("auto".into()))?;
    /// assert!(!ws.set_options(&auto, |_| {})?); // the default, named
    /// let ratio = Settings::new().with("nonuniformity", Value::Word("0".into()))?;
    /// assert!(ws.set_options(&ratio, |_| {})?);
    /// let g = ws.view(Some(2), 3)?.grouping.unwrap();
    /// assert_eq!(g.ratio, Some(0.0));
    /// // r = 0: a node's GPUs hold its experts in groups of m / G ± 1.
    /// assert!(g.sizes.chunks(4).all(|n| n.iter().max().unwrap() - n.iter().min().unwrap() <= 2));
    /// assert!(!ws.set_options(&ratio, |_| {})?); // nothing new
    /// let next = Workspace::of_workload_reusing(work, Cluster { nodes: 1, gpus_per_node: 8, ..c }, Some(&ws), |_| {})?;
    /// assert_eq!(next.view(Some(2), 3)?.grouping.unwrap().ratio, Some(0.0)); // kept
    /// let typo = Settings::new().with("extra_experts_per_gpu", Value::Count(2))?;
    /// assert!(ws.set_options(&typo, |_| {}).is_err()); // Libra's: `replan_scheduled`
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn set_options(&mut self, options: &Settings, mut phase: impl FnMut(&str)) -> Result<bool> {
        let changed = changed_static_options(options, &self.options)?;
        if changed.is_empty() {
            return Ok(false);
        }
        let reads = |p: &dyn Planner| p.options().iter().any(|o| changed.contains(&o.name));
        let settings = options
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        let (mut analysis, mut ready) = (self.grace_analysis.clone(), self.grace.clone());
        let mut next = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            if !reads(planner) {
                continue;
            }
            phase(&planner.preparing());
            let (state, notes) = plan_static(
                planner,
                (&self.work, self.topology, &self.cost),
                &settings,
                &mut analysis,
                &mut ready,
            );
            next.push((i, state, notes));
        }
        let ids: Vec<PlannerId> = next
            .iter()
            .filter_map(|(i, ..)| self.entries.get(*i).map(|e| e.id))
            .collect();
        for (i, state, notes) in next {
            if let Some(entry) = self.entries.get_mut(i) {
                entry.state = state;
                entry.notes = notes;
            }
        }
        (self.grace_analysis, self.grace) = (analysis, ready);
        self.options = options.clone();
        // What was kept of the re-planned planners is theirs no longer.
        self.grouping = Arc::default();
        if let Ok(mut kept) = self.priced.lock() {
            kept.retain(|(id, ..)| !ids.contains(id));
        }
        Ok(true)
    }

    fn replan_per_batch(
        &mut self,
        settings: &Settings,
        only_pending: bool,
        mut phase: impl FnMut(&str),
    ) -> Result<()> {
        let settings = settings
            .clone()
            .with(GROUPS.name, Value::Count(self.cluster.groups))?;
        let mut next = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            if !planner.per_batch()
                || too_large_per_batch(&self.work, self.topology).is_some()
                || (only_pending && !matches!(entry.state, State::Pending))
            {
                continue;
            }
            let key = settings.resolved_for(planner.spec());
            if let Some((.., s, notes)) = self
                .schedules
                .iter()
                .find(|(id, k, ..)| *id == entry.id && *k == key)
            {
                next.push((i, key, s.clone(), notes.clone()));
                continue;
            }
            phase(&planner.preparing());
            let ready = prepare(planner, &self.work, self.topology, &settings)?;
            let planned = ready.plan(None)?;
            let Some(s) = ready.schedule(&planned.plan, &self.work)? else {
                continue;
            };
            let s = Arc::new(Scheduled::replay(s, &planned.plan, &self.work, &self.cost)?);
            next.push((i, key, s, ready.notes()));
        }
        for (i, key, s, notes) in next {
            let Some(entry) = self.entries.get_mut(i) else {
                continue;
            };
            entry.state = State::Scheduled(s.clone());
            entry.notes = notes.clone();
            // Its prediction was the schedule's it replaces.
            if let Ok(mut kept) = self.priced.lock() {
                kept.retain(|(id, ..)| *id != entry.id);
            }
            self.schedules
                .retain(|(id, k, ..)| !(*id == entry.id && *k == key));
            self.schedules.push((entry.id, key, s, notes));
            if self.schedules.len() > KEPT_SCHEDULES {
                self.schedules.remove(0);
            }
        }
        Ok(())
    }

    fn heat(&self, plan: &Plan) -> Vec<Vec<f64>> {
        let e = self.trace().num_experts();
        plan.layers()
            .iter()
            .enumerate()
            .map(|(l, lp)| {
                let w = self.summed.row(l);
                let copies = lp.copies(e);
                let loads: Vec<f64> = lp
                    .gpus
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&x| w[x as usize] / copies[x as usize].max(1) as f64)
                            .sum()
                    })
                    .collect();
                let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
                // Three decimals are all a colour can show; they keep the
                // page's messages small.
                loads
                    .iter()
                    .map(|&x| {
                        if mean > 0.0 {
                            (x / mean * 1e3).round() / 1e3
                        } else {
                            1.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn layer_view(&self, plan: &Plan, layer: usize) -> LayerView {
        let lp = &plan.layers()[layer];
        let e = self.trace().num_experts();
        let w = self.summed.row(layer);
        let total = w.sum();
        let copies = lp.copies(e);
        LayerView {
            layer: lp.layer,
            gpus: lp
                .gpus
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&x| {
                            let c = copies[x as usize].max(1);
                            let share = if total > 0.0 {
                                (w[x as usize] / c as f64 / total * 1e6).round() / 1e6
                            } else {
                                0.0
                            };
                            (x, c, share)
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// The options `options` sets to other values than `from` (compared at
/// their values: a default named equals one left unset); refused when the
/// budget's planner or a per-batch planner reads one (those have their own
/// controls: the budget, [`Workspace::replan_scheduled`]).
fn changed_static_options(options: &Settings, from: &Settings) -> Result<Vec<&'static str>> {
    let changed: Vec<&'static str> = moeplan::planners::all_options()
        .into_iter()
        .filter(|o| options.value(o) != from.value(o))
        .map(|o| o.name)
        .collect();
    let own_control = registry().iter().find(|p| {
        (p.budget_unit() == Some(Unit::ReplicasPerGpu) || p.per_batch())
            && p.options().iter().any(|o| changed.contains(&o.name))
    });
    match own_control {
        Some(p) => Err(Error::Argument(format!(
            "{}'s options are set with its own control, not here",
            p.display()
        ))),
        None => Ok(changed),
    }
}

/// A shown planner prepared: GRACE from the kept analysis when the
/// workload has token routes (and the grouping kept for the page's GRACE
/// views), any other through the registry.
fn prepare_shown(
    planner: &dyn Planner,
    work: &Workload,
    topology: Topology,
    settings: &Settings,
    analysis: &mut Option<Arc<GraceAnalysis>>,
    ready: &mut Option<Arc<Grace>>,
) -> Result<Box<dyn Prepared>> {
    if planner.id() == grace::ID && work.tokens().is_some() {
        grace::prepare(work, topology, settings, analysis, ready)
    } else {
        prepare(planner, work, topology, settings)
    }
}

/// A static planner prepared and planned at its default, as a new
/// workspace does: one that cannot plan here says why in its row.
fn plan_static(
    planner: &dyn Planner,
    (work, topology, cost): (&Workload, Topology, &CostModel),
    settings: &Settings,
    analysis: &mut Option<Arc<GraceAnalysis>>,
    ready: &mut Option<Arc<Grace>>,
) -> (State, Vec<String>) {
    match prepare_shown(planner, work, topology, settings, analysis, ready) {
        Ok(p) => (
            plan_at_default(planner, p.as_ref(), work, topology, cost),
            p.notes(),
        ),
        Err(e) => (State::Failed(e.to_string()), Vec::new()),
    }
}

/// The planner a workspace will most likely centre on, from the registry
/// alone (before any trace is planned): the first that reads the loads with
/// a budget in replicas per GPU. A workspace takes the first such planner
/// that also traces a curve ([`View::focus`] says which it took), so front
/// ends title the budget's controls with this one until a view arrives.
///
/// ```
/// let p = moeplan_view::focus_planner().unwrap();
/// assert_eq!((p.id().as_str(), p.display()), ("craft", "CRAFT"));
/// ```
pub fn focus_planner() -> Option<&'static dyn Planner> {
    let id = focus_spec()?.id;
    registry().iter().copied().find(|p| p.id() == id)
}

/// The focus planner's registry entry, data only
/// ([`moeplan::planners::SPECS`]): what a front end names it by without
/// linking the planners.
pub fn focus_spec() -> Option<&'static moeplan::planners::PlannerSpec> {
    moeplan::planners::SPECS
        .iter()
        .copied()
        .find(|s| s.needs == Needs::Counts && s.budget_unit() == Some(Unit::ReplicasPerGpu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use moeplan::judge::simulate;
    use moeplan::{data::model, synth::generator};

    /// Libra's options and back: a schedule kept from before is shown as a
    /// fresh replay would show it, priced anew (the prediction kept for
    /// the options before is not the schedule's now), and at most
    /// [`KEPT_SCHEDULES`] are kept.
    #[test]
    fn kept_schedules_show_what_a_replay_would() {
        use moeplan::judge::cost::Pricing;
        use moeplan::planners::Value;
        let m = model::preset("olmoe").unwrap();
        let t = generator::generate(&generator::GenConfig::new(m, 4)).unwrap();
        let c = Cluster {
            nodes: 1,
            gpus_per_node: 8,
            groups: 1,
        };
        let p = Pricing::new(moeplan::data::hardware::preset("h100-ib-ndr").unwrap(), m);
        let libra = |ws: &Workspace| {
            let v = ws
                .view_priced(Some(2), 0, Rule::Even, true, Some(&p))
                .unwrap();
            v.plans
                .into_iter()
                .find(|f| f.name == "libra")
                .expect("a Libra row")
        };
        let n = |n| {
            Settings::new()
                .with("extra_experts_per_gpu", Value::Count(n))
                .unwrap()
        };
        let mut ws = Workspace::new(t.clone(), c).unwrap();
        let mut shown = Vec::new();
        for k in [8, 1, 2, 3, 8, 2, 1] {
            ws.replan_scheduled(&n(k)).unwrap();
            let mut fresh = Workspace::new(t.clone(), c).unwrap();
            fresh.replan_scheduled(&n(k)).unwrap();
            let (kept, want) = (libra(&ws), libra(&fresh));
            assert_eq!(kept, want, "N = {k}");
            assert!(ws.schedules.len() <= KEPT_SCHEDULES);
            shown.push((k, kept));
        }
        // Different options were shown differently (the test can fail).
        let (one, eight) = (&shown[1].1, &shown[0].1);
        assert!(one.imbalance_ratio > eight.imbalance_ratio);
        assert_ne!(one.predicted, eight.predicted);
        // N = 8 came back from the kept schedules (1, 2, 3 in between
        // pushed it out; 8 was replayed again and 2 then kept).
        let kept: Vec<usize> = ws
            .schedules
            .iter()
            .map(|(_, k, ..)| match k.get("extra_experts_per_gpu") {
                Some(Value::Count(x)) => *x,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kept, vec![8, 2, 1]);
    }

    /// Two plans' pair traffic, equal to rounding.
    fn same_traffic(a: &PairTraffic, b: &PairTraffic, what: &str) {
        for (x, y) in [
            (a.pairs, b.pairs),
            (a.local, b.local),
            (a.intra_node, b.intra_node),
            (a.cross_node, b.cross_node),
            (a.cross_node_bytes, b.cross_node_bytes),
        ] {
            assert!(
                (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                "{what}: {x} vs {y}"
            );
        }
    }

    /// A cluster change GRACE's analysis has not clustered leaves GRACE
    /// (and Libra) for the follow-up, which then shows what a fresh
    /// workspace shows; a warmed cluster plans GRACE at once.
    #[test]
    fn a_cold_cluster_defers_grace_to_the_follow_up() {
        use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
        let t = generate_tokens(&TokenGenConfig::new(
            model::preset("deepseek-v2-lite").unwrap(),
            256,
        ))
        .unwrap();
        let work = Workload::from_tokens(t, 128).unwrap();
        let c = |nodes, gpus_per_node| Cluster {
            nodes,
            gpus_per_node,
            groups: 1,
        };
        let opts = Settings::new();
        let first = Workspace::of_workload(work.clone(), c(2, 4), |_| {}).unwrap();
        let names = |ws: &Workspace| -> Vec<String> {
            let v = ws.view(Some(2), 0).unwrap();
            v.plans.iter().map(|p| p.name.clone()).collect()
        };
        let mut cold = Workspace::of_workload_deferring(
            work.clone(),
            c(4, 2),
            Some(&first),
            true,
            &opts,
            |_| {},
        )
        .unwrap();
        assert!(cold.has_pending());
        let shown = names(&cold);
        assert!(!shown.contains(&"grace".to_string()), "{shown:?}");
        assert!(shown.contains(&"eplb".to_string()), "{shown:?}");
        let v = cold.view(Some(2), 0).unwrap();
        assert!(
            v.notes.iter().any(|n| n.contains("co-activation")),
            "{:?}",
            v.notes
        );
        let mut phases = Vec::new();
        assert!(
            cold.plan_pending(&opts, |p| phases.push(p.to_string()))
                .unwrap()
        );
        assert!(!cold.has_pending() && phases.len() >= 2, "{phases:?}");
        let fresh = Workspace::of_workload(work.clone(), c(4, 2), |_| {}).unwrap();
        assert_eq!(
            cold.view(Some(2), 1).unwrap(),
            fresh.view(Some(2), 1).unwrap()
        );
        // Warmed ahead (as the page's idle steps do): GRACE at once.
        for layer in 0..work.trace().num_layers() {
            first.warm_grace(c(1, 8), layer).unwrap();
        }
        let warm = Workspace::of_workload_deferring(
            work.clone(),
            c(1, 8),
            Some(&first),
            true,
            &opts,
            |_| {},
        )
        .unwrap();
        assert!(names(&warm).contains(&"grace".to_string()));
    }

    /// The closed form the view uses under `even` is the simulator's.
    #[test]
    fn even_traffic_is_the_simulators() {
        let t = generator::generate(&generator::GenConfig::new(
            model::preset("olmoe").unwrap(),
            3,
        ))
        .unwrap();
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        let ws = Workspace::new(t, cluster).unwrap();
        let v = ws.view(Some(3), 0).unwrap();
        let plan = ws.focus_plan(Some(3)).unwrap();
        let sim = simulate(&ws.work, &Strategy::fixed(plan, Rule::Even), &ws.cost).unwrap();
        same_traffic(
            &v.plans[2].traffic,
            &PairTraffic::from(&sim.traffic),
            "craft",
        );
        assert_eq!(v.rule, "even");
    }

    /// With token routes, every plan's traffic under `even` (the one summed
    /// batch's) and its series (the evaluator's) are the full replay's.
    #[test]
    fn token_routes_even_traffic_is_the_simulators() {
        use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
        let tokens = generate_tokens(&TokenGenConfig::new(
            model::preset("deepseek-v2-lite").unwrap(),
            6 * 128,
        ))
        .unwrap();
        let work = Workload::from_tokens(tokens, 128).unwrap();
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        let ws = Workspace::of_workload(work, cluster, |_| {}).unwrap();
        let v = ws.view_with_batches(Some(2), 0, Rule::Even).unwrap();
        let mut checked = 0;
        for (i, entry) in ws.entries.iter().enumerate() {
            let plan = match &entry.state {
                State::Fixed(f) => f.plan.clone(),
                State::Slider(_) if i == ws.focus => ws.focus_plan(Some(2)).unwrap(),
                _ => continue,
            };
            let name = entry.id.to_string();
            let shown = v.plans.iter().find(|p| p.name == name).unwrap();
            let sim = simulate(&ws.work, &Strategy::fixed(plan, Rule::Even), &ws.cost).unwrap();
            same_traffic(&shown.traffic, &PairTraffic::from(&sim.traffic), &name);
            let b = &sim.traffic;
            assert!(b.cross_node > 0.0 && b.local > 0.0, "{name}: {b:?}");
            assert_eq!(
                shown.per_batch_imbalance, sim.per_batch_imbalance_ratio,
                "{name}"
            );
            checked += 1;
        }
        assert!(checked >= 4, "checked {checked} plans");
    }

    /// The per-batch series the page's timeline draws are the simulator's:
    /// CRAFT's under `even` (summed without the simulator, to the bit),
    /// the fixed plans' and Libra's schedule under libra-rebalance.
    #[test]
    fn per_batch_series_are_the_simulators() {
        use moeplan::planners::libra::{LibraOptions, Predictor, libra_schedule};
        let t = generator::generate(&generator::GenConfig::new(
            model::preset("olmoe").unwrap(),
            5,
        ))
        .unwrap();
        let cluster = Cluster {
            nodes: 2,
            gpus_per_node: 4,
            groups: 1,
        };
        let ws = Workspace::new(t.clone(), cluster).unwrap();
        let v = ws.view_with_batches(Some(3), 0, Rule::Even).unwrap();
        let plan = |name: &str| v.plans.iter().find(|p| p.name == name).unwrap();
        let craft = ws.focus_plan(Some(3)).unwrap();
        let sim = simulate(&ws.work, &Strategy::fixed(craft, Rule::Even), &ws.cost).unwrap();
        assert_eq!(
            plan("craft").per_batch_imbalance,
            sim.per_batch_imbalance_ratio
        );
        let eplb = moeplan::planners::plan(
            moeplan::planners::eplb::ID.planner().unwrap(),
            &ws.work,
            ws.topology,
            &Settings::new(),
        )
        .unwrap();
        let sim = simulate(&ws.work, &Strategy::fixed(eplb.plan, Rule::Even), &ws.cost).unwrap();
        assert_eq!(
            plan("eplb").per_batch_imbalance,
            sim.per_batch_imbalance_ratio
        );
        let base = moeplan::planners::contiguous(&t, ws.topology).unwrap();
        let s = libra_schedule(
            &ws.work,
            &base,
            &Predictor::PreviousBatch,
            &LibraOptions::default(),
        )
        .unwrap();
        let sim = simulate(&ws.work, &s.strategy(), &ws.cost).unwrap();
        let libra = plan("libra");
        assert_eq!(libra.per_batch_imbalance, sim.per_batch_imbalance_ratio);
        assert_eq!(libra.imbalance_ratio, sim.imbalance_ratio);
        assert_eq!(libra.label, "LIBRA (per batch, libra-rebalance)");
        let bytes: Vec<f64> = s
            .copies
            .iter()
            .map(|&c| c as f64 * ws.cost.expert_bytes as f64)
            .collect();
        assert_eq!(libra.per_batch_bytes, bytes);
        assert!(plan("eplb").per_batch_bytes.is_empty() && plan("eplb").schedule.is_none());
        // Libra's figures do not follow the view's rule: its own is part of it.
        let optimal = ws.view_under(Some(3), 0, Rule::Optimal).unwrap();
        let again = optimal.plans.iter().find(|p| p.name == "libra").unwrap();
        assert_eq!(again.imbalance_ratio, libra.imbalance_ratio);
    }
}
