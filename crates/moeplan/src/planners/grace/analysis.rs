//! What GRACE-MoE computes from a workload before it knows the cluster
//! (§4.1): every layer's affinity `A` from the token routes (or as the
//! workload recorded it: co-occurrence counts), and — filled in
//! as plans ask for them — the spectral embedding of `A` restricted to any
//! set of experts and its k-means labels for any group count, and
//! Algorithm 2's groupings (over nodes per node count, GPUs per node and GPU
//! capacity; within a node per its members and bounds), so a cluster seen
//! before costs only the `(S, U)` curve. A
//! [`GraceAnalysis`] is built once per workload and shared (`Arc`) by every
//! [`Grace::prepare_with`](super::Grace::prepare_with), so a GPU or node
//! change in the page re-runs only Algorithm 2, the `(S, U)` curve and the
//! clusterings it has not seen: the O(n³) eigendecompositions of the whole
//! matrix are done once per layer.
//!
//! Every memoised value is a deterministic function of its key (the layer's
//! affinity, the expert set, the group count and [`super::SEED`]), so
//! plans are the same bit for bit whether an analysis is fresh or reused.
//!
//! Cost: building is O(L · T · k²) (the affinity); memory O(L · n²) for the
//! matrices plus one n × n embedding per layer and per distinct expert set
//! clustered.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ndarray::Array2;

use super::SEED;
use super::affinity::affinity;
use super::grouping::{NodeKey, NodeMemo};
use super::spectral::SpectralEmbedding;
use crate::data::Workload;
use crate::data::topology::Topology;
use crate::error::Result;
use crate::planners::shared::layers::map_layers;

/// One layer's affinity and the clusterings done on it so far.
#[derive(Debug)]
struct LayerAnalysis {
    /// `None` when no two experts are ever chosen together.
    affinity: Option<Arc<Array2<f64>>>,
    memo: Mutex<Memo>,
}

/// Experts per group (node or GPU).
type Groups = Vec<Vec<usize>>;

/// Keyed by the expert set (ascending global ids; the whole layer is
/// `0..n`).
#[derive(Debug, Default)]
struct Memo {
    embeddings: HashMap<Vec<usize>, Arc<SpectralEmbedding>>,
    labels: HashMap<(Vec<usize>, usize), Vec<usize>>,
    /// The experts of each node by (nodes, GPUs per node, GPU capacity):
    /// Algorithm 2 over nodes, which depends on nothing else.
    nodes: HashMap<(usize, usize, usize), Arc<Groups>>,
    /// A node's GPU groups (local indices) by its members, `G` and
    /// Algorithm 2's bounds.
    within: HashMap<NodeKey, Vec<Vec<usize>>>,
    /// Eq. 1's denominator, `Σ_{i<j} A[i][j]`.
    total: Option<f64>,
}

/// The cluster-independent part of GRACE for one workload.
#[derive(Debug)]
pub struct GraceAnalysis {
    /// Empty without token routes or a recorded affinity.
    layers: Vec<LayerAnalysis>,
    num_layers: usize,
    num_experts: usize,
}

impl GraceAnalysis {
    /// Counts every layer's affinity from the token routes, or takes the
    /// workload's recorded affinity (`Workload::with_affinity`) when it
    /// has no routes (nothing without either).
    ///
    /// ```
    /// use moeplan::planners::GraceAnalysis;
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 256))?;
    /// let a = GraceAnalysis::new(&Workload::from_tokens(t, 128)?)?;
    /// assert_eq!(a.affinity(0).map(|m| m.nrows()), Some(64));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(work: &Workload) -> Result<GraceAnalysis> {
        let trace = work.trace();
        let layers = match work.tokens() {
            Some(tokens) => map_layers(tokens.num_layers(), |l| {
                let a = affinity(tokens, l)?;
                Ok(LayerAnalysis {
                    affinity: a.iter().any(|&v| v > 0.0).then(|| Arc::new(a)),
                    memo: Mutex::default(),
                })
            })?,
            // Recorded by the engine (co-occurrence counts): already the
            // affinity, checked by `Workload::with_affinity`.
            None => work
                .affinity()
                .unwrap_or_default()
                .iter()
                .map(|a| LayerAnalysis {
                    affinity: a.iter().any(|&v| v > 0.0).then(|| Arc::new(a.clone())),
                    memo: Mutex::default(),
                })
                .collect(),
        };
        Ok(GraceAnalysis {
            layers,
            num_layers: trace.num_layers(),
            num_experts: trace.num_experts(),
        })
    }

    /// Layer index `layer`'s affinity; `None` without token routes or a
    /// recorded affinity, or when no two of its experts are ever chosen
    /// together.
    ///
    /// ```
    /// use moeplan::planners::GraceAnalysis;
    /// use moeplan::{synth::generator, data::model, data::Workload};
    /// let t = generator::generate(&generator::GenConfig::new(model::preset("olmoe")?, 2))?;
    /// assert!(GraceAnalysis::new(&Workload::new(t))?.affinity(0).is_none());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn affinity(&self, layer: usize) -> Option<&Array2<f64>> {
        self.layers.get(layer)?.affinity.as_deref()
    }

    /// Does, for layer index `layer` on `topology`, the clusterings a
    /// [`Grace::prepare_with`](super::Grace::prepare_with) there would do
    /// and keeps them, so that plan later costs only what it has not seen:
    /// work a front end can do while the person decides where to go next.
    /// `Ok(false)` when there is nothing to do (no affinity in this layer,
    /// a layer out of range, fewer experts than GPUs). Plans are unchanged.
    ///
    /// ```
    /// use moeplan::planners::{GraceAnalysis, Grace, GraceOptions};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload, Topology};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let analysis = GraceAnalysis::new(&work)?;
    /// let topology = Topology::new(2, 4)?;
    /// for layer in 0..work.trace().num_layers() {
    ///     assert!(analysis.warm(layer, topology, &GraceOptions::default())?);
    /// }
    /// assert!(!analysis.warm(99, topology, &GraceOptions::default())?);
    /// let o = GraceOptions::default();
    /// let warmed = Grace::prepare_with(&work, &analysis, topology, &o)?;
    /// assert_eq!(warmed.plan()?, Grace::prepare(&work, topology, &o)?.plan()?);
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn warm(
        &self,
        layer: usize,
        topology: Topology,
        options: &super::GraceOptions,
    ) -> Result<bool> {
        if self.affinity(layer).is_none() || self.num_experts < topology.num_gpus() {
            return Ok(false);
        }
        super::group_layer(self, layer, topology, options.ratio)?;
        Ok(true)
    }

    /// Whether a [`Grace::prepare_with`](super::Grace::prepare_with) on
    /// `topology` would find every clustering it needs kept: for each layer
    /// with affinity, the grouping over nodes and, for each node, its
    /// GPU-level labels or the embedding they come from (what
    /// [`warm`](GraceAnalysis::warm) or an earlier plan there left). Then a
    /// plan costs Algorithm 2 and the curve only; otherwise it also pays
    /// the O(m³) eigendecompositions a front end may want to defer.
    ///
    /// ```
    /// use moeplan::planners::{GraceAnalysis, GraceOptions};
    /// use moeplan::synth::token_generator::{TokenGenConfig, generate_tokens};
    /// use moeplan::{data::model, data::Workload, Topology};
    /// let t = generate_tokens(&TokenGenConfig::new(model::preset("deepseek-v2-lite")?, 512))?;
    /// let work = Workload::from_tokens(t, 128)?;
    /// let analysis = GraceAnalysis::new(&work)?;
    /// let (topology, o) = (Topology::new(2, 4)?, GraceOptions::default());
    /// assert!(!analysis.is_warm(topology, &o));
    /// for layer in 0..work.trace().num_layers() {
    ///     analysis.warm(layer, topology, &o)?;
    /// }
    /// assert!(analysis.is_warm(topology, &o) && !analysis.is_warm(Topology::new(4, 2)?, &o));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn is_warm(&self, topology: Topology, options: &super::GraceOptions) -> bool {
        let n = self.num_experts;
        let g = topology.gpus_per_node();
        let widest = super::grouping::widest_ratio(super::ratio_asked(options.ratio));
        let Ok(slots) = super::grouping::gpu_capacity(n, topology, widest) else {
            // Fewer experts than GPUs: GRACE refuses at once.
            return true;
        };
        let key = (topology.nodes(), g, slots);
        (0..self.layers.len()).all(|l| {
            self.affinity(l).is_none()
                || self
                    .with_memo(l, |m| {
                        m.nodes.get(&key).is_some_and(|nodes| {
                            nodes.iter().all(|members| {
                                members.len() <= g
                                    || m.embeddings.contains_key(members)
                                    || m.labels.contains_key(&(members.clone(), g))
                            })
                        })
                    })
                    .unwrap_or(true)
        })
    }

    /// Whether this analysis was made from token routes or a recorded
    /// affinity.
    pub(super) fn has_affinity(&self) -> bool {
        !self.layers.is_empty()
    }

    /// Whether this analysis fits a workload of `layers × experts`.
    pub(super) fn fits(&self, layers: usize, experts: usize) -> bool {
        (self.num_layers, self.num_experts) == (layers, experts)
    }

    /// Runs `f` on layer index `layer`'s memo (`None` for a layer out of
    /// range).
    fn with_memo<T>(&self, layer: usize, f: impl FnOnce(&mut Memo) -> T) -> Option<T> {
        let la = self.layers.get(layer)?;
        // A poisoned lock only means another thread panicked mid-insert;
        // the maps hold finished values only, so they are still sound.
        Some(match la.memo.lock() {
            Ok(mut m) => f(&mut m),
            Err(p) => f(&mut p.into_inner()),
        })
    }

    /// Labels `0..k` of `members` (ascending ids of layer index `layer`)
    /// by spectral clustering of their affinity sub-matrix `sub()`; as
    /// [`spectral_clusters`](super::spectral::spectral_clusters) of it,
    /// remembered. `sub()` must be the validated layer affinity restricted
    /// to `members`; it is built only when no embedding of `members` is
    /// kept.
    pub(super) fn clusters(
        &self,
        layer: usize,
        members: &[usize],
        sub: &dyn Fn() -> Array2<f64>,
        k: usize,
    ) -> Result<Vec<usize>> {
        let key = (members.to_vec(), k);
        let Some(hit) = self.with_memo(layer, |m| m.labels.get(&key).cloned()) else {
            return SpectralEmbedding::new(&sub())?.clusters(k, SEED);
        };
        if let Some(labels) = hit {
            return Ok(labels);
        }
        let embedding = match self
            .with_memo(layer, |m| m.embeddings.get(members).cloned())
            .flatten()
        {
            Some(e) => e,
            None => {
                let e = Arc::new(SpectralEmbedding::new(&sub())?);
                self.with_memo(layer, |m| {
                    m.embeddings.insert(members.to_vec(), Arc::clone(&e));
                });
                e
            }
        };
        let labels = embedding.clusters(k, SEED)?;
        self.with_memo(layer, |m| {
            m.labels.insert(key, labels.clone());
        });
        Ok(labels)
    }

    /// The experts of each node of `topology` at GPU capacity `cap` in layer
    /// index `layer`: `compute()` (Algorithm 2 over nodes) the first time,
    /// remembered.
    pub(super) fn node_grouping(
        &self,
        layer: usize,
        topology: Topology,
        cap: usize,
        compute: impl FnOnce() -> Result<Vec<Vec<usize>>>,
    ) -> Result<Arc<Groups>> {
        let key = (topology.nodes(), topology.gpus_per_node(), cap);
        if let Some(nodes) = self
            .with_memo(layer, |m| m.nodes.get(&key).cloned())
            .flatten()
        {
            return Ok(nodes);
        }
        let nodes = Arc::new(compute()?);
        self.with_memo(layer, |m| {
            m.nodes.insert(key, Arc::clone(&nodes));
        });
        Ok(nodes)
    }

    /// Eq. 1's denominator for layer index `layer` ([`pair_total`](super::grouping::pair_total)
    /// of its affinity, counted once; 0 without one).
    pub(super) fn pair_total(&self, layer: usize) -> f64 {
        if let Some(Some(total)) = self.with_memo(layer, |m| m.total) {
            return total;
        }
        let total = self
            .affinity(layer)
            .map_or(0.0, super::grouping::pair_total);
        self.with_memo(layer, |m| m.total = Some(total));
        total
    }

    /// Layer index `layer`'s store of within-node GPU groups, for
    /// [`within_nodes`](super::grouping::within_nodes).
    pub(super) fn node_memo(&self, layer: usize) -> LayerNodeMemo<'_> {
        LayerNodeMemo {
            analysis: self,
            layer,
        }
    }
}

/// [`GraceAnalysis::node_memo`]: within-node groups kept in the analysis,
/// so a later cluster whose nodes hold the same experts reuses them.
pub(super) struct LayerNodeMemo<'a> {
    analysis: &'a GraceAnalysis,
    layer: usize,
}

impl NodeMemo for LayerNodeMemo<'_> {
    fn get(
        &mut self,
        members: &[usize],
        g: usize,
        min: usize,
        max: usize,
    ) -> Option<Vec<Vec<usize>>> {
        let key = (members.to_vec(), g, min, max);
        self.analysis
            .with_memo(self.layer, |m| m.within.get(&key).cloned())
            .flatten()
    }

    fn put(&mut self, members: &[usize], g: usize, min: usize, max: usize, groups: &[Vec<usize>]) {
        self.analysis.with_memo(self.layer, |m| {
            m.within
                .insert((members.to_vec(), g, min, max), groups.to_vec());
        });
    }
}
