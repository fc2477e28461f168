//! One trace on one cluster, planned every way, ready to be drawn.
//!
//! The planner page and the JavaScript API show the same things: every
//! registered planner that reads the loads side by side (BASE, EPLB, CRAFT
//! — `PLANNERS` in order), per-layer
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
mod judging;
mod names;
pub mod page;
mod replan;
mod serving;
mod split;
mod state;
mod view;

use replan::{changed_static_options, prepare_shown};

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use grace::{GroupingView, RatioPoint};
use moeplan::Workload;
use moeplan::data::LoadTrace;
use moeplan::data::Plan;
use moeplan::data::Topology;
use moeplan::error::{Error, Result};
use moeplan::formats::PlanFormat;
use moeplan::formats::PlanMeta;
pub use moeplan::judge::PairTraffic;
use moeplan::judge::cost::Pricing;
use moeplan::judge::{Judge, Rule};
use moeplan::planners::GROUPS;
use moeplan::planners::{
    CurvePoint, Needs, Planner, PlannerId, Prepared, Settings, Unit, Value, prepare, registry,
};
use moeplan::planners::{Grace, GraceAnalysis, GraceOptions};
pub use names::closest;
pub use serving::{EngineKnobs, ReplanMark, ServingAsk, ServingView, SweepPoint, sweep_intervals};
pub use split::{SchedulePart, SplitJob, schedule_part};
pub use state::PER_BATCH_CELLS;
use state::{
    Entry, Scheduled, State, figures, plan_at_default, replayed, shown, slider_figures,
    too_large_per_batch,
};
pub use view::{Export, LayerView, PlanFigures, PlannerNote, View};

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
    /// The workload as planned (its ranks folded onto the cluster's GPUs),
    /// judged: every replay, price and series the view shows, kept there
    /// ([`Judge`]), on the one model chosen for bytes and time.
    judge: Judge,
    topology: Topology,
    cluster: Cluster,
    summed: ndarray::Array2<f64>,
    /// Every planner shown, in registry order.
    entries: Vec<Entry>,
    /// Index in `entries` of the focus (CRAFT).
    focus: usize,
    curve: Vec<CurvePoint>,
    auto_r: usize,
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
    /// The options the static planners were prepared with beyond the
    /// cluster's groups (GRACE's non-uniformity ratio,
    /// [`Workspace::set_options`]); a cluster change keeps them.
    options: Settings,
    /// The model the caller asked for ([`Workspace::asked_model`]); `None`:
    /// the trace's, else DeepSeek-V3. A cluster change keeps it.
    asked: Option<String>,
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
    /// The pricing a schedule planned next is timed on in its own replay
    /// ([`Workspace::price_schedules_on`]): its price then costs nothing
    /// more. `None`: priced apart, when a view asks.
    schedule_pricing: Option<Pricing>,
}

/// Per-batch schedules a workspace keeps ([`Workspace::replan_scheduled`]):
/// the one shown and the two before it. A schedule holds a plan per batch
/// (the page's default: 64 batches × 58 layers × 64 GPUs, about 17 MB), so
/// the page keeps few.
pub const KEPT_SCHEDULES: usize = 3;

/// A per-batch planner's replayed schedule at its resolved options, and
/// what it noted when it prepared.
type KeptSchedule = (PlannerId, Settings, Arc<Scheduled>, Vec<String>);

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
        let model = previous.and_then(|p| p.asked.clone());
        Self::of_workload_deferring(
            work,
            cluster,
            previous,
            false,
            &options,
            model.as_deref(),
            phase,
        )
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
    /// [`Workspace::set_options`] takes them; refused likewise), and every
    /// plan is judged on `model`'s sizes (a preset name), else the trace's,
    /// else DeepSeek-V3 ([`Judge::new`]): its traffic bytes, its copies and
    /// its prices alike.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::{planners::Settings, synth::generator, data::model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let work = moeplan::Workload::new(t);
    /// let c = Cluster { nodes: 1, gpus_per_node: 8, groups: 1 };
    /// let mut ws = Workspace::of_workload_deferring(work.clone(), c, None, true, &Settings::new(), None, |_| {})?;
    /// let names = |ws: &Workspace| -> Vec<String> {
    ///     ws.view(Some(2), 0).unwrap().plans.iter().map(|p| p.name.clone()).collect()
    /// };
    /// assert!(ws.has_pending() && !names(&ws).contains(&"libra".to_string()));
    /// assert!(ws.plan_pending(&Settings::new(), |_| {})?);
    /// let whole = Workspace::of_workload(work.clone(), c, |_| {})?;
    /// assert!(!ws.has_pending() && names(&ws).contains(&"libra".to_string()));
    /// assert_eq!(ws.view(Some(2), 0)?, whole.view(Some(2), 0)?);
    /// let libra = Settings::new().with("extra_experts_per_gpu", moeplan::planners::Value::Count(2))?;
    /// assert!(Workspace::of_workload_deferring(work.clone(), c, None, true, &libra, None, |_| {}).is_err());
    /// assert!(Workspace::of_workload_deferring(work, c, None, true, &Settings::new(), Some("gpt-5"), |_| {}).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn of_workload_deferring(
        work: Workload,
        cluster: Cluster,
        previous: Option<&Workspace>,
        defer_per_batch: bool,
        options: &Settings,
        model: Option<&str>,
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
        let one_batch = same_sources.and_then(|p| p.judge.one_batch_made());
        let judge = Judge::new(work, model)?.sharing_one_batch(one_batch);
        let work = judge.workload();
        if cluster.groups == 0 {
            return Err(Error::Argument("expert groups must be at least 1".into()));
        }
        let options = options.clone();
        let settings = options
            .clone()
            .with(GROUPS.name, Value::Count(cluster.groups))?;
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
        for planner in registry().iter().copied().filter(|p| shown(*p, work)) {
            let deferred = (planner.per_batch() && too_large_per_batch(work, topology).is_none())
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
                work,
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
                Ok(ready) => plan_at_default(planner, ready.as_ref(), &judge, topology),
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
        Ok(Workspace {
            summed,
            judge,
            topology,
            cluster,
            entries,
            focus,
            curve,
            auto_r,
            grace: grace_ready,
            grace_analysis,
            grouping: Arc::default(),
            asked: model.map(str::to_string),
            options,
            whole,
            schedules: Vec::new(),
            schedule_pricing: None,
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
        self.whole.as_ref().unwrap_or(self.judge.workload())
    }

    /// The static planners' options in use ([`Workspace::set_options`]).
    pub fn options(&self) -> &Settings {
        &self.options
    }

    /// The model asked for when the workspace was made (`None`: the
    /// trace's, else DeepSeek-V3); a different one needs a new workspace.
    pub fn asked_model(&self) -> Option<&str> {
        self.asked.as_deref()
    }

    /// The judge every plan is measured by: its model choice, its kept
    /// replays and prices.
    pub fn judge(&self) -> &Judge {
        &self.judge
    }

    /// The trace.
    pub fn trace(&self) -> &LoadTrace {
        self.judge.trace()
    }

    /// The workload as planned and judged: [`Workspace::workload`] with its
    /// ranks folded onto the cluster's GPUs when it has more.
    pub(crate) fn work(&self) -> &Workload {
        self.judge.workload()
    }

    /// Measures CRAFT's layer `layer` ahead of time for `cluster` with this
    /// workspace's options ([`moeplan::planners::warm_craft`]): a change
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
        moeplan::planners::warm_craft(self.trace(), topology, &settings, layer)
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
mod tests;
