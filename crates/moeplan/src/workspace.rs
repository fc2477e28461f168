//! One trace on one cluster, planned every way, ready to be drawn.
//!
//! The planner page and the JavaScript API show the same things: BASE, EPLB
//! and CRAFT side by side, per-layer balancedness, the GPU × layer load map,
//! CRAFT's balancedness-vs-R curve and one layer's placement. Building a
//! [`Workspace`] does the expensive part once per trace and cluster (CRAFT's
//! benefit table, EPLB, the replays); [`Workspace::view`] answers a budget or
//! layer change in about a millisecond. All figures are in-sample on the
//! workspace's trace.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::eval::{EvalReport, evaluate};
use crate::formats::plan_json::{self, PlanMeta};
use crate::formats::sglang;
use crate::plan::Plan;
use crate::planners::craft::{Budget, Craft, CraftOptions, CurvePoint};
use crate::planners::eplb::{EplbConfig, eplb};
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
    trace: LoadTrace,
    topology: Topology,
    cluster: Cluster,
    summed: ndarray::Array2<f64>,
    craft: Craft,
    curve: Vec<CurvePoint>,
    auto_r: usize,
    base: std::result::Result<(Plan, EvalReport), String>,
    eplb: std::result::Result<(Plan, EvalReport), String>,
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
    /// `base`, `eplb` or `craft`.
    pub name: String,
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
    /// BASE, EPLB (one redundant expert per GPU per layer) and CRAFT, in that
    /// order; a planner that cannot run on this cluster is absent and
    /// explained in `notes`.
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
    /// Plans `trace` on `cluster`: CRAFT's preparation, BASE and EPLB with one
    /// redundant expert per GPU per layer, both replayed.
    ///
    /// ```
    /// use moeplan::workspace::{Cluster, Workspace};
    /// use moeplan::{generator, model};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 4))?;
    /// let ws = Workspace::new(t, Cluster { nodes: 1, gpus_per_node: 8, groups: 1 })?;
    /// let v = ws.view(Some(2), 0)?;
    /// assert_eq!(v.plans.len(), 3);
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
        mut phase: impl FnMut(&'static str),
    ) -> Result<Workspace> {
        let topology = Topology::new(cluster.nodes, cluster.gpus_per_node)?;
        if cluster.groups == 0 {
            return Err(Error::Argument("expert groups must be at least 1".into()));
        }
        phase("measuring CRAFT's replication benefit");
        let craft = Craft::prepare(&trace, topology, &CraftOptions::default())?;
        phase("tracing CRAFT's curve");
        let curve = craft.curve();
        let auto_r = craft.auto_replicas_per_gpu();
        phase("planning BASE and EPLB");
        let d = topology.num_gpus();
        let planned = |k: usize| -> std::result::Result<(Plan, EvalReport), String> {
            let cfg = EplbConfig {
                redundant_experts: k,
                groups: cluster.groups,
            };
            let plan = eplb(&trace, topology, cfg).map_err(|e| e.to_string())?;
            let report = evaluate(&trace, &plan).map_err(|e| e.to_string())?;
            Ok((plan, report))
        };
        let base = planned(0);
        let e = trace.num_experts();
        let eplb = planned(d - e % d);
        Ok(Workspace {
            summed: trace.summed(),
            trace,
            topology,
            cluster,
            craft,
            curve,
            auto_r,
            base,
            eplb,
        })
    }

    /// The trace.
    pub fn trace(&self) -> &LoadTrace {
        &self.trace
    }

    /// The cluster's shape.
    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The settings this workspace was built for.
    pub fn cluster(&self) -> Cluster {
        self.cluster
    }

    /// CRAFT's plan for `replicas_per_gpu` (`None`: automatic).
    pub fn craft_plan(&self, replicas_per_gpu: Option<usize>) -> Result<Plan> {
        Ok(self.craft.plan(budget(replicas_per_gpu))?.plan)
    }

    /// The figures for one budget and the placement of layer index `layer`.
    pub fn view(&self, replicas_per_gpu: Option<usize>, layer: usize) -> Result<View> {
        let craft = self.craft.plan(budget(replicas_per_gpu))?;
        let l = self.trace.num_layers();
        if layer >= l {
            return Err(Error::Argument(format!(
                "layer index {layer} is outside 0..{l}"
            )));
        }
        let d = self.topology.num_gpus();
        let own = (self.trace.num_experts() * l).div_ceil(d);
        let mut plans = Vec::new();
        let mut notes = Vec::new();
        for (name, r) in [("base", &self.base), ("eplb", &self.eplb)] {
            match r {
                Ok((_, rep)) => plans.push(figures(name, rep, own)),
                Err(e) => notes.push(format!("{}: {e}", name.to_uppercase())),
            }
        }
        let per_layer_of = |f: fn(&Craft, usize, usize) -> Result<f64>| {
            craft
                .allocation
                .per_layer
                .iter()
                .enumerate()
                .map(|(i, &r)| f(&self.craft, i, r))
                .collect::<Result<Vec<f64>>>()
        };
        let per_layer = per_layer_of(Craft::layer_balancedness)?;
        let per_layer_bound = per_layer_of(Craft::layer_bound)?;
        let imbalance = per_layer_of(Craft::layer_imbalance)?;
        let summary = craft.plan.summary();
        plans.push(PlanFigures {
            name: "craft".into(),
            balancedness: mean(&per_layer),
            imbalance_ratio: mean(&imbalance),
            replicas: summary.replicas,
            replica_slots_per_gpu: summary.slots_per_gpu_max.saturating_sub(own),
            bound: mean(&per_layer_bound),
            per_layer,
            replicas_per_layer: summary.replicas_per_layer,
        });
        Ok(View {
            topology: self.topology,
            layer_ids: self.trace.layer_ids().to_vec(),
            batches: self.trace.num_batches(),
            plans,
            notes,
            replicas_per_gpu: craft.replicas_per_gpu,
            auto_replicas_per_gpu: self.auto_r,
            curve: self.curve.clone(),
            heat: self.heat(&craft.plan),
            layer: self.layer_view(&craft.plan, layer),
        })
    }

    /// CRAFT's plan for a budget in the project's JSON or SGLang's
    /// `--init-expert-location` JSON (`format`: `moeplan` or `sglang`).
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
                        model_layers: Some(self.trace.model_layers()),
                        model: self.trace.model().map(str::to_string),
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
                        self.trace.known_model_layers(),
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
        let e = self.trace.num_experts();
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
        let e = self.trace.num_experts();
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

fn budget(replicas_per_gpu: Option<usize>) -> Budget {
    replicas_per_gpu.map_or(Budget::Auto, Budget::ReplicasPerGpu)
}

fn figures(name: &str, r: &EvalReport, own: usize) -> PlanFigures {
    PlanFigures {
        name: name.into(),
        balancedness: r.balancedness,
        imbalance_ratio: r.imbalance_ratio,
        replicas: r.replicas,
        replica_slots_per_gpu: r.slots_per_gpu_max.saturating_sub(own),
        bound: r.bound,
        per_layer: r.per_layer.clone(),
        replicas_per_layer: r.replicas_per_layer.clone(),
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}
