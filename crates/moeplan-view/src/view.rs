//! What the page and the JavaScript API draw, serialised: a [`View`] of
//! every plan's figures ([`PlanFigures`]), one layer's placement
//! ([`LayerView`]), an exported file ([`Export`]) and the planners' notes.

use serde::{Deserialize, Serialize};

use moeplan::data::topology::Topology;
use moeplan::judge::Traffic;
use moeplan::judge::cost::Prediction;
use moeplan::planners::registry::CurvePoint;

use crate::grace::GroupingView;

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
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
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
    /// Where its (token, expert) pairs are served under the view's rule.
    #[serde(default)]
    pub traffic: PairTraffic,
    /// Imbalance ratio of each batch (mean over layers) under the view's
    /// rule — a per-batch planner's under its own.
    #[serde(default)]
    pub per_batch_imbalance: Vec<f64>,
    /// Expert bytes a per-batch planner copies in each batch; empty for a
    /// static plan (it moves nothing while serving).
    #[serde(default)]
    pub per_batch_bytes: Vec<f64>,
    /// How a per-batch planner serves (`per batch, libra-rebalance,
    /// previous-batch predictor (measured)`); `None` for a static plan.
    #[serde(default)]
    pub schedule: Option<String>,
    /// The rule these figures are measured under when it is not the
    /// view's: a per-batch plan's own (`libra-rebalance`).
    #[serde(default)]
    pub own_rule: Option<String>,
    /// Time, memory and throughput on the hardware a priced view names
    /// ([`crate::Workspace::view_priced`]): a static plan priced on the
    /// workload's mean batch, a per-batch plan on every batch; `None`
    /// unpriced.
    #[serde(default)]
    pub predicted: Option<Prediction>,
}

/// Where a plan's (token, expert) pairs are served, over all batches: the
/// pair counts of [`Traffic`] (the busiest GPU's ingress and egress are the
/// simulator's, not the view's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PairTraffic {
    /// Pairs in all.
    pub pairs: f64,
    /// Served on their source GPU.
    pub local: f64,
    /// Served on another GPU of the source's node.
    pub intra_node: f64,
    /// Served on another node.
    pub cross_node: f64,
    /// Cross-node pairs × hidden size × bytes per activation element.
    pub cross_node_bytes: f64,
}

impl From<&Traffic> for PairTraffic {
    fn from(t: &Traffic) -> Self {
        PairTraffic {
            pairs: t.pairs,
            local: t.local,
            intra_node: t.intra_node,
            cross_node: t.cross_node,
            cross_node_bytes: t.cross_node_bytes,
        }
    }
}

/// What one planner says beside its plans ([`Prepared::notes`]): how it
/// fell back or what the workload lacks (GRACE with counts only groups by
/// load, having no affinity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct PlannerNote {
    /// The planner's id (`grace`).
    pub name: String,
    /// What it says, one line.
    pub text: String,
}

/// One layer's placement: every GPU's experts, replicas marked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct LayerView {
    /// The model's layer id.
    pub layer: u32,
    /// Per GPU: (expert, copies of that expert in the layer, share of the
    /// layer's tokens this copy receives).
    pub gpus: Vec<Vec<(u32, u32, f64)>>,
}

/// Everything the page draws for one budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct View {
    /// The cluster.
    pub topology: Topology,
    /// The MoE layers' model ids.
    pub layer_ids: Vec<u32>,
    /// Batches replayed.
    pub batches: usize,
    /// The dispatch rule the plans' balance and traffic are measured under
    /// ([`Rule::name`]); the curve and the load map are always `even`.
    #[serde(default)]
    pub rule: String,
    /// Every registered planner that reads the loads, in registry order
    /// (BASE, EPLB at its default — one slot per GPU more than the experts
    /// need —, CRAFT); a planner that cannot run on this cluster is absent
    /// and explained in `notes`.
    pub plans: Vec<PlanFigures>,
    /// Why a planner is missing.
    pub notes: Vec<String>,
    /// What the planners shown say beside their plans, in their order
    /// (they change with the trace and the cluster only).
    #[serde(default)]
    pub planner_notes: Vec<PlannerNote>,
    /// The id of the focus planner (`craft`): the one the budget moves,
    /// whose curve, load map and layer view these are.
    #[serde(default)]
    pub focus: String,
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
    /// The chosen layer as GRACE grouped it, when the workload has token
    /// routes (without them there is no affinity to draw).
    #[serde(default)]
    pub grouping: Option<GroupingView>,
}
