//! One trace on one cluster, planned every way, ready to be drawn.
//!
//! The planner page and the JavaScript API show the same things: every
//! registered planner that reads the loads side by side (BASE, EPLB, CRAFT
//! — [`PLANNERS`](crate::planners::PLANNERS) in order), per-layer
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
//! This is the page's view model, and it lives in the core on purpose: it
//! is pure computation over the core's public API, and both front ends that
//! draw it — the app's worker and the JavaScript facade — depend on the core
//! and nothing else they share (ARCHITECTURE.md says when to move it).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::eval::{EvalReport, evaluate};
use crate::formats::plan_json::{self, PlanMeta};
use crate::formats::sglang;
use crate::plan::Plan;
use crate::planners::eplb::GROUPS;
use crate::planners::registry::{
    CurvePoint, Needs, Planner, PlannerId, Prepared, Settings, Unit, Value, prepare, registry,
};
use crate::sim::Workload;
use crate::topology::Topology;
use crate::trace::LoadTrace;

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
}

/// One planner of the workspace.
#[derive(Debug, Clone)]
struct Entry {
    id: PlannerId,
    display: &'static str,
    state: State,
}

#[derive(Debug, Clone)]
enum State {
    /// Could not plan on this cluster: why.
    Failed(String),
    /// Planned once at its default budget and replayed.
    Fixed(Box<(Option<usize>, EvalReport)>),
    /// Moves with the view's budget.
    Slider(Arc<dyn Prepared>),
}

/// An exported plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The file's text.
    pub text: String,
    /// What had to change to fit the format, if anything.
    pub note: Option<String>,
}

/// Headline figures of one plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanFigures {
    /// The planner's id: `base`, `eplb` or `craft`.
    pub name: String,
    /// Its title with its budget: `BASE`, `EPLB +64`, `CRAFT R = 8`.
    #[serde(default)]
    pub label: String,
    /// The budget used in the planner's unit (EPLB: redundant experts per
    /// layer, CRAFT: replicas per GPU); absent for planners without one.
    #[serde(default)]
    pub budget: Option<usize>,
    /// Mean over batches, then layers, of mean / max GPU load.
    pub balancedness: f64,
    /// Mean of max / mean GPU load.
    pub imbalance_ratio: f64,
    /// Replicas in all.
    pub replicas: usize,
    /// Replica slots on the fullest GPU (its replica memory in experts).
    pub replica_slots_per_gpu: usize,
    /// Upper bound for these replica counts.
    pub bound: f64,
    /// Per-layer balancedness.
    pub per_layer: Vec<f64>,
    /// Replicas in each layer.
    pub replicas_per_layer: Vec<usize>,
}

/// One layer's placement: every GPU's experts, replicas marked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerView {
    /// The model's layer id.
    pub layer: u32,
    /// Per GPU: (expert, copies of that expert in the layer, share of the
    /// layer's tokens this copy receives).
    pub gpus: Vec<Vec<(u32, u32, f64)>>,
}

/// Everything the page draws for one budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The cluster.
    pub topology: Topology,
    /// The MoE layers' model ids.
    pub layer_ids: Vec<u32>,
    /// Batches replayed.
    pub batches: usize,
    /// Every registered planner that reads the loads, in registry order
    /// (BASE, EPLB at its default — one slot per GPU more than the experts
    /// need —, CRAFT); a planner that cannot run on this cluster is absent
    /// and explained in `notes`.
    pub plans: Vec<PlanFigures>,
    /// Why a planner is missing.
    pub notes: Vec<String>,
    /// CRAFT's replication factor used.
    pub replicas_per_gpu: usize,
    /// CRAFT's automatic choice.
    pub auto_replicas_per_gpu: usize,
    /// CRAFT's balancedness-vs-R curve.
    pub curve: Vec<CurvePoint>,
    /// CRAFT's load per GPU and layer over all batches, relative to the
    /// layer's mean GPU load (1.0 = average): `heat[layer][gpu]`.
    pub heat: Vec<Vec<f64>>,
    /// The chosen layer under CRAFT.
    pub layer: LayerView,
}

impl Workspace {
    /// Plans `trace` on `cluster`: every shown planner's preparation, the
    /// ones the budget does not move (BASE, EPLB) planned at their defaults
    /// and replayed.
    ///
    /// ```
    /// use moeplan::workspace::{Cluster, Workspace};
    /// use moeplan::{generator, model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let v = ws.view(Some(2), 0)?;
    /// assert_eq!(v.plans.len(), 3);
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
        mut phase: impl FnMut(&str),
    ) -> Result<Workspace> {
        let topology = Topology::new(cluster.nodes, cluster.gpus_per_node)?;
        if cluster.groups == 0 {
            return Err(Error::Argument("expert groups must be at least 1".into()));
        }
        let settings = Settings::new().with(GROUPS.name, Value::Count(cluster.groups))?;
        let work = Workload::new(trace);
        let mut entries = Vec::new();
        let mut focus = None;
        let mut curve = Vec::new();
        let mut auto_r = 0;
        for planner in registry().iter().copied().filter(|p| shown(*p, &work)) {
            phase(&planner.preparing());
            let slider = planner.budget_unit() == Some(Unit::ReplicasPerGpu);
            let state = match prepare(planner, &work, topology, &settings) {
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
                Ok(ready) => match ready
                    .plan(None)
                    .and_then(|p| Ok((p.budget, evaluate(work.trace(), &p.plan)?)))
                {
                    Ok(fixed) => State::Fixed(Box::new(fixed)),
                    Err(e) => State::Failed(e.to_string()),
                },
                // The budget's planner is what the page draws: without it
                // there is nothing to show.
                Err(e) if slider => return Err(e),
                Err(e) => State::Failed(e.to_string()),
            };
            entries.push(Entry {
                id: planner.id(),
                display: planner.display(),
                state,
            });
        }
        let focus = focus.ok_or_else(|| {
            Error::Argument("no registered planner takes a budget in replicas per GPU".into())
        })?;
        Ok(Workspace {
            summed: work.trace().summed(),
            work,
            topology,
            cluster,
            entries,
            focus,
            curve,
            auto_r,
        })
    }

    /// The trace.
    pub fn trace(&self) -> &LoadTrace {
        self.work.trace()
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
    pub fn craft_plan(&self, replicas_per_gpu: Option<usize>) -> Result<Plan> {
        Ok(self.focus()?.plan(replicas_per_gpu)?.plan)
    }

    /// The planners shown, in order, with why any of them could not plan.
    ///
    /// ```
    /// use moeplan::workspace::{Cluster, Workspace};
    /// use moeplan::{generator, model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 6, groups: 1 })?;
    /// let ids: Vec<String> = ws.planners().iter().map(|(id, _)| id.to_string()).collect();
    /// assert_eq!(ids, ["base", "eplb", "craft"]);
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

    fn focus(&self) -> Result<&Arc<dyn Prepared>> {
        match self.entries.get(self.focus).map(|e| &e.state) {
            Some(State::Slider(ready)) => Ok(ready),
            _ => Err(Error::Argument(
                "the workspace has no budgeted planner".into(),
            )),
        }
    }

    /// The figures for one budget and the placement of layer index `layer`.
    pub fn view(&self, replicas_per_gpu: Option<usize>, layer: usize) -> Result<View> {
        let focus = self.focus()?.plan(replicas_per_gpu)?;
        let l = self.trace().num_layers();
        if layer >= l {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside 0..{l}"
            )));
        }
        let d = self.topology.num_gpus();
        let own = (self.trace().num_experts() * l).div_ceil(d);
        let mut plans = Vec::new();
        let mut notes = Vec::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let planner = entry.id.planner()?;
            match &entry.state {
                State::Failed(e) => notes.push(format!("{}: {e}", entry.display)),
                State::Fixed(fixed) => {
                    let (budget, rep) = fixed.as_ref();
                    plans.push(figures(planner, *budget, rep, own));
                }
                State::Slider(_) if i == self.focus => {
                    plans.push(slider_figures(planner, &focus, self.trace(), own)?);
                }
                State::Slider(ready) => {
                    let planned = ready.plan(replicas_per_gpu)?;
                    plans.push(slider_figures(planner, &planned, self.trace(), own)?);
                }
            }
        }
        Ok(View {
            topology: self.topology,
            layer_ids: self.trace().layer_ids().to_vec(),
            batches: self.trace().num_batches(),
            plans,
            notes,
            replicas_per_gpu: focus.budget.unwrap_or(0),
            auto_replicas_per_gpu: self.auto_r,
            curve: self.curve.clone(),
            heat: self.heat(&focus.plan),
            layer: self.layer_view(&focus.plan, layer),
        })
    }

    /// The focus planner's (CRAFT's) plan for a budget in the project's JSON
    /// or SGLang's `--init-expert-location` JSON (`format`: `moeplan` or
    /// `sglang`).
    /// SGLang needs the same slot count on every GPU in every layer; a CRAFT
    /// plan that varies is padded to the closest such plan
    /// ([`Plan::padded_to_uniform`]) and the export says so.
    pub fn export(&self, replicas_per_gpu: Option<usize>, format: &str) -> Result<Export> {
        let plan = self.craft_plan(replicas_per_gpu)?;
        match format {
            "moeplan" => Ok(Export {
                text: plan_json::write(
                    &plan,
                    &PlanMeta {
                        model_layers: Some(self.trace().model_layers()),
                        model: self.trace().model().map(str::to_string),
                        holdout: None,
                    },
                ),
                note: None,
            }),
            "sglang" => {
                let (plan, note) = if plan.uniform_slots_per_gpu().is_some() {
                    (plan, None)
                } else {
                    let padded = plan.padded_to_uniform(self.summed.view())?;
                    let added = padded.summary().replicas - plan.summary().replicas;
                    let per_gpu = padded.uniform_slots_per_gpu().unwrap_or(0);
                    let note = format!(
                        "SGLang needs the same slot count on every GPU in every layer: padded to {per_gpu} slots per GPU with {added} more replicas (the hottest experts per copy)"
                    );
                    (padded, Some(note))
                };
                Ok(Export {
                    text: sglang::write_init_expert_location(
                        &plan,
                        self.trace().known_model_layers(),
                    )?,
                    note,
                })
            }
            other => Err(Error::Argument(format!(
                "unknown export format {other:?}: moeplan or sglang"
            ))),
        }
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

/// The planners a workspace shows: those that read the loads (the page is
/// about balancing them; contiguous placement, which ignores them, is
/// `compare`'s floor) and whose needs this workload meets.
fn shown(planner: &dyn Planner, work: &Workload) -> bool {
    planner.needs() >= Needs::Counts && planner.needs().met_by(work)
}

fn figures(
    planner: &dyn Planner,
    budget: Option<usize>,
    r: &EvalReport,
    own: usize,
) -> PlanFigures {
    PlanFigures {
        name: planner.id().to_string(),
        label: planner.title(budget),
        budget,
        balancedness: r.balancedness,
        imbalance_ratio: r.imbalance_ratio,
        replicas: r.replicas,
        replica_slots_per_gpu: r.slots_per_gpu_max.saturating_sub(own),
        bound: r.bound,
        per_layer: r.per_layer.clone(),
        replicas_per_layer: r.replicas_per_layer.clone(),
    }
}

/// Figures of a plan the budget moves: what its planner measured when it
/// prepared, else a replay.
fn slider_figures(
    planner: &dyn Planner,
    planned: &crate::planners::Planned,
    trace: &LoadTrace,
    own: usize,
) -> Result<PlanFigures> {
    let Some(pred) = &planned.predicted else {
        return Ok(figures(
            planner,
            planned.budget,
            &evaluate(trace, &planned.plan)?,
            own,
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
        replica_slots_per_gpu: summary.slots_per_gpu_max.saturating_sub(own),
        bound: mean(&pred.bound),
        per_layer: pred.balancedness.clone(),
        replicas_per_layer: summary.replicas_per_layer,
    })
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}
