//! Where (token, expert) pairs travel: served on their source GPU
//! (`local`), on another GPU of the same node (`intra_node`), or on another
//! node (`cross_node`), and how much the busiest GPU sends and receives.
//!
//! Definitions (per batch `b` and layer `l`, pairs counted once each):
//! - ingress of GPU `g`: pairs served on `g` whose source is another GPU;
//!   egress of GPU `s`: pairs from source `s` served on another GPU. Each
//!   layer's dispatch is one all-to-all, bounded by its busiest GPU, so
//!   [`Traffic::max_ingress`] of a batch is `Σ_l max_g ingress(b, l, g)` and
//!   the overall figure is its mean over batches (likewise egress).
//! - `cross_node_bytes` = cross-node pairs × hidden size × bytes per
//!   activation element. Pairs are not deduplicated per destination (DeepEP
//!   sends a token once per destination node even when several of its
//!   experts live there), so this is an upper bound on the dispatch bytes.
//!
//! Closed forms under even arrival (each of the `D` GPUs sends `n_e / D` of
//! every expert) for a rule blind to sources, with `T` the layer's pairs,
//! `G` GPUs per node and `load_g` the GPU loads: `local = T / D`,
//! `intra = T (G − 1) / D`, `cross = T (D − G) / D`, `ingress_g = load_g
//! (D − 1) / D`, `egress_g = (T − load_g) / D` (source `g` keeps `load_g / D`
//! of its `T / D`). No per-source loop is needed.
//!
//! `Optimal` fixes how much of each expert each GPU serves, not who sends
//! it; its sources are matched to that split locally first, then within
//! each node, then across nodes — the least traffic that split allows
//! (not the least over all optimal splits).
//!
//! Source: the design brief's traffic definitions (../shared/docs/DESIGN.md)
//! and GRACE-MoE's metrics (max ingress / egress). Cost: O(D) per (batch,
//! layer) for the closed forms, O(pairs routed) otherwise.

use serde::Serialize;

use crate::topology::Topology;

use super::optimal::MinMax;

/// Traffic over the batches a figure covers: pair counts summed, the
/// busiest GPU's ingress and egress summed over layers and averaged over
/// the batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// (token, expert) pairs in all.
    pub pairs: f64,
    /// Pairs served on their source GPU.
    pub local: f64,
    /// Pairs served on another GPU of the source's node.
    pub intra_node: f64,
    /// Pairs served on another node.
    pub cross_node: f64,
    /// `cross_node × hidden × bytes per activation element`.
    pub cross_node_bytes: f64,
    /// Per batch, `Σ over layers of max over GPUs` of pairs received from
    /// other GPUs; averaged over the batches covered.
    pub max_ingress: f64,
    /// The same for pairs sent to other GPUs.
    pub max_egress: f64,
}

/// One (batch, layer)'s traffic as the replay finds it.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub local: f64,
    pub intra: f64,
    pub cross: f64,
    pub max_ingress: f64,
    pub max_egress: f64,
    pub ingress: Vec<f64>,
    pub egress: Vec<f64>,
    /// Pairs a GPU serves from itself (Optimal's matching).
    pub local_at: Vec<f64>,
    gpus_per_node: usize,
}

impl Tally {
    pub fn reset(&mut self, topology: Topology) {
        let d = topology.num_gpus();
        self.gpus_per_node = topology.gpus_per_node();
        self.local = 0.0;
        self.intra = 0.0;
        self.cross = 0.0;
        self.max_ingress = 0.0;
        self.max_egress = 0.0;
        for v in [&mut self.ingress, &mut self.egress, &mut self.local_at] {
            v.clear();
            v.resize(d, 0.0);
        }
    }

    /// `amount` pairs from source `s` served on GPU `g`.
    #[inline]
    pub fn pair(&mut self, s: usize, g: usize, amount: f64) {
        if g == s {
            self.local += amount;
        } else {
            self.ingress[g] += amount;
            self.egress[s] += amount;
            if g / self.gpus_per_node == s / self.gpus_per_node {
                self.intra += amount;
            } else {
                self.cross += amount;
            }
        }
    }

    /// Takes the busiest GPUs from the per-GPU tallies.
    pub fn finish(&mut self) {
        self.max_ingress = self.ingress.iter().copied().fold(0.0, f64::max);
        self.max_egress = self.egress.iter().copied().fold(0.0, f64::max);
    }

    /// The closed form of a source-blind rule under even arrival.
    pub fn blind_even(&mut self, total: f64, loads: &[f64]) {
        let d = loads.len() as f64;
        let g = self.gpus_per_node as f64;
        self.local = total / d;
        self.intra = total * (g - 1.0) / d;
        self.cross = total * (d - g) / d;
        let (min, max) = loads.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
        self.max_ingress = max * (d - 1.0) / d;
        self.max_egress = if loads.is_empty() {
            0.0
        } else {
            (total - min) / d
        };
    }
}

/// What each source sends of each expert, for [`match_split`].
pub(crate) enum Supply<'a> {
    /// Every one of the `D` GPUs sends `n_e / D`.
    Even,
    /// `n[s · E + e]` for sources `s < S`, with per-node sums
    /// `node[ν · E + e]` and per-source totals `sent[s]`.
    Sources {
        n: &'a [f64],
        node: &'a [f64],
        sent: &'a [f64],
    },
}

/// Matches sources to the split the solver found (`loads` its GPU loads):
/// each GPU serves its own source first, then sources of its node, then
/// the rest. Fills `tally`.
pub(crate) fn match_split(
    solver: &MinMax,
    row: &[f64],
    loads: &[f64],
    supply: &Supply<'_>,
    topology: Topology,
    tally: &mut Tally,
) {
    let d = topology.num_gpus();
    let gpn = topology.gpus_per_node();
    let e_n = row.len();
    let total: f64 = row.iter().sum();
    let (mut local, mut intra) = (0.0, 0.0);
    for (e, &n_e) in row.iter().enumerate() {
        if n_e <= 0.0 {
            continue;
        }
        let from = |s: usize| match supply {
            Supply::Even => n_e / d as f64,
            Supply::Sources { n, .. } => n.get(s * e_n + e).copied().unwrap_or(0.0),
        };
        let node_supply = |nu: usize| match supply {
            Supply::Even => n_e * gpn as f64 / d as f64,
            Supply::Sources { node, .. } => node[nu * e_n + e],
        };
        // Targets come GPU-ascending, so each node's are consecutive.
        let mut cur: Option<usize> = None;
        let (mut node_local, mut node_demand) = (0.0, 0.0);
        let flush = |nu: Option<usize>, node_local: f64, node_demand: f64, intra: &mut f64| {
            if let Some(nu) = nu {
                *intra += (node_supply(nu) - node_local).min(node_demand).max(0.0);
            }
        };
        solver.targets(e, row, |g, x| {
            let nu = g / gpn;
            if cur != Some(nu) {
                flush(cur, node_local, node_demand, &mut intra);
                cur = Some(nu);
                node_local = 0.0;
                node_demand = 0.0;
            }
            let l = from(g).min(x);
            tally.local_at[g] += l;
            local += l;
            node_local += l;
            node_demand += x - l;
        });
        flush(cur, node_local, node_demand, &mut intra);
    }
    tally.local = local;
    if topology.nodes() == 1 {
        // Everything not local stays in the one node; say so exactly
        // rather than leave rounding dust in `cross`.
        tally.intra = (total - local).max(0.0);
        tally.cross = 0.0;
    } else {
        tally.intra = intra;
        tally.cross = (total - local - intra).max(0.0);
    }
    for (g, &load) in loads.iter().enumerate().take(d) {
        tally.ingress[g] = load - tally.local_at[g];
        let sent = match supply {
            Supply::Even => total / d as f64,
            Supply::Sources { sent, .. } => sent.get(g).copied().unwrap_or(0.0),
        };
        tally.egress[g] = sent - tally.local_at[g];
    }
    tally.finish();
}
