//! GRACE's extra views: its grouping of a layer (the `(S, U)` curve and
//! the affinity in group order), its preparation keeping GRACE's own type,
//! and the idle-time warming of other clusters' clusterings. Everything
//! else on the page treats GRACE as any registered planner.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use moeplan::Result;
use moeplan::data::Topology;
use moeplan::data::Workload;
use moeplan::planners::{Grace, GraceAnalysis, GraceOptions, grace_affinity as affinity};
use moeplan::planners::{Prepared, Settings};

use crate::{Cluster, Workspace};

pub use moeplan::planners::GRACE_ID as ID;

/// One point of GRACE's `(S(r), U(r))` curve (Eq. 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct RatioPoint {
    /// The non-uniformity ratio `r`.
    pub ratio: f64,
    /// `S(r)`: deviation of the GPU groups' sizes.
    pub size_deviation: f64,
    /// `U(r)`: share of the affinity inside GPU groups.
    pub utilisation: f64,
}

/// One layer as GRACE grouped it by affinity: its `(S, U)` curve with the
/// chosen `r`, and its affinity matrix with the experts in group order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct GroupingView {
    /// The model's layer id.
    pub layer: u32,
    /// The `r` GRACE chose (`None`: this layer was grouped by load only).
    pub ratio: Option<f64>,
    /// `(S(r), U(r))` at each ratio tried, ascending `r`.
    pub curve: Vec<RatioPoint>,
    /// The experts in drawing order: GPU 0's group, then GPU 1's, ….
    pub order: Vec<u32>,
    /// Each GPU's group size, in that order (the boundaries).
    pub sizes: Vec<usize>,
    /// `A[order[i]][order[j]]` row-major (`n × n`), relative to the
    /// largest entry (1.0), three decimals.
    pub affinity: Vec<f64>,
}

/// The registry's prepare for GRACE, keeping GRACE's own type: its groups
/// and curves are what the page's GRACE views draw. The cluster-independent
/// analysis is taken from `analysis` when there is one and left there.
pub(crate) fn prepare(
    work: &Workload,
    topology: Topology,
    settings: &Settings,
    analysis: &mut Option<Arc<GraceAnalysis>>,
    ready: &mut Option<Arc<Grace>>,
) -> Result<Box<dyn Prepared>> {
    let a = match analysis {
        Some(a) => Arc::clone(a),
        None => Arc::new(GraceAnalysis::new(work)?),
    };
    let o = GraceOptions::from_settings(settings)?;
    let g = Grace::prepare_with(work, &a, topology, &o);
    *analysis = Some(a);
    let g = Arc::new(g?);
    *ready = Some(Arc::clone(&g));
    Ok(Box::new(ArcGrace(g)))
}

impl Workspace {
    /// Does GRACE's clusterings of layer index `layer` for `cluster` ahead of
    /// time, in the analysis this workspace shares with the workspaces made
    /// from it ([`Workspace::of_workload_reusing`]), so a change to that
    /// cluster later re-plans GRACE from kept clusterings. `Ok(false)` when
    /// there is nothing to do: no token routes, a layer out of range or
    /// without co-activation, more GPUs than experts.
    ///
    /// ```
    /// use moeplan_view::{Cluster, Workspace};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let c = |nodes, gpus_per_node| Cluster { nodes, gpus_per_node, groups: 1 };
    /// let first = Workspace::of_workload(work.clone(), c(2, 4), |_| {})?;
    /// assert!(first.warm_grace(c(1, 8), 0)?);
    /// let next = Workspace::of_workload_reusing(work.clone(), c(1, 8), Some(&first), |_| {})?;
    /// let fresh = Workspace::of_workload(work, c(1, 8), |_| {})?;
    /// assert_eq!(next.view(Some(2), 0)?, fresh.view(Some(2), 0)?);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn warm_grace(&self, cluster: Cluster, layer: usize) -> Result<bool> {
        let Some(analysis) = &self.grace_analysis else {
            return Ok(false);
        };
        let topology = Topology::new(cluster.nodes, cluster.gpus_per_node)?;
        // The workspace plans GRACE with its defaults (no GRACE settings).
        analysis.warm(layer, topology, &GraceOptions::default())
    }

    /// GRACE's grouping of layer index `layer`, once per layer in a row.
    pub(crate) fn grouping_view(&self, layer: usize) -> Result<Option<GroupingView>> {
        let (Some(grace), Some(tokens)) = (&self.grace, self.work().tokens()) else {
            return Ok(None);
        };
        if let Ok(last) = self.grouping.lock() {
            if let Some((l, v)) = last.as_ref() {
                if *l == layer {
                    return Ok(Some(v.clone()));
                }
            }
        }
        let Some(lg) = grace.layers().get(layer) else {
            return Ok(None);
        };
        // The analysis holds it already; only a layer without co-activation
        // (all zeros) is counted again.
        let counted;
        let a = match self.grace_analysis.as_ref().and_then(|g| g.affinity(layer)) {
            Some(a) => a,
            None => {
                counted = affinity(tokens, layer)?;
                &counted
            }
        };
        let order: Vec<u32> = lg.groups.iter().flatten().copied().collect();
        let top = a.iter().copied().fold(0.0, f64::max);
        let mut values = Vec::with_capacity(order.len() * order.len());
        for &i in &order {
            for &j in &order {
                let v = a.get([i as usize, j as usize]).copied().unwrap_or(0.0);
                values.push(if top > 0.0 {
                    (v / top * 1e3).round() / 1e3
                } else {
                    0.0
                });
            }
        }
        let v = GroupingView {
            layer: lg.layer,
            ratio: lg.ratio,
            curve: lg
                .curve
                .iter()
                .map(|p| RatioPoint {
                    ratio: p.ratio,
                    size_deviation: p.size_deviation,
                    utilisation: p.utilisation,
                })
                .collect(),
            order,
            sizes: lg.groups.iter().map(Vec::len).collect(),
            affinity: values,
        };
        if let Ok(mut last) = self.grouping.lock() {
            *last = Some((layer, v.clone()));
        }
        Ok(Some(v))
    }
}

/// GRACE shared between the workspace (its groups) and its entry (plans).
#[derive(Debug)]
struct ArcGrace(Arc<Grace>);

impl Prepared for ArcGrace {
    fn plan(&self, budget: Option<usize>) -> Result<moeplan::planners::Planned> {
        Prepared::plan(&*self.0, budget)
    }
    fn auto_budget(&self) -> Result<Option<usize>> {
        self.0.auto_budget()
    }
    fn notes(&self) -> Vec<String> {
        Prepared::notes(&*self.0)
    }
}
